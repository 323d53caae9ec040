//! [`LearnedBucket`]: the token bucket behind a [`LearnedRate`](super::LearnedRate),
//! whose rate the learner sets after every answer: botocore's `TokenBucket` and
//! smithy-rs's `ClientRateLimiter` bucket, in fractional tokens, as an [`Algorithm`].

use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Admitted, Decision, Denied, InsufficientCapacity, Limited, Reservation};
use crate::time::Nanos;

use super::config::LearningConfig;
use super::cubic::seconds;

/// The bucket's configuration: set by the learner, read by every decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LearnedBucket {
    /// Off until the first throttle or partner signal: every call goes.
    pub(crate) enabled: bool,
    /// Tokens per second.
    pub(crate) fill_rate: f64,
    /// The most tokens the bucket holds; at least 1.
    pub(crate) max_capacity: f64,
    /// No call goes before this instant (the partner asked to hold off).
    pub(crate) paused_until: Nanos,
}

/// The bucket's tokens, fractional, and when they were last counted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tokens {
    /// Never below zero, except after a call larger than the bucket (a debt, of at
    /// most an hour of refill).
    pub(crate) capacity: f64,
    pub(crate) last: Nanos,
}

impl LearnedBucket {
    /// Off, empty, at botocore's initial rate.
    pub(crate) fn off() -> LearnedBucket {
        LearnedBucket {
            enabled: false,
            fill_rate: 1.0,
            max_capacity: 1.0,
            paused_until: Nanos::ZERO,
        }
    }

    /// Adds what `fill_rate` gave since the last count, up to the bucket's size.
    pub(crate) fn refill(&self, tokens: &mut Tokens, now: Nanos) {
        // A clock read a little earlier on another thread: nothing to add.
        if now < tokens.last {
            return;
        }
        let fill_amount = (seconds(now) - seconds(tokens.last)) * self.fill_rate;
        tokens.capacity = f64::min(self.max_capacity, tokens.capacity + fill_amount);
        tokens.last = now;
    }

    /// A new rate, after counting the tokens the old one gave: the fill rate is
    /// `fill_rate` (at least `floor`), the size `size` (at least 1), the tokens
    /// held no more than the new size, and a debt no more than an hour of the new
    /// rate repays.
    pub(crate) fn set_rate(&mut self, tokens: &mut Tokens, now: Nanos, fill_rate: f64, size: f64) {
        self.refill(tokens, now);
        self.fill_rate = fill_rate;
        self.max_capacity = f64::max(size, 1.0);
        // A debt taken at a fast rate would hold calls for days at a slow one: the
        // rest is forgiven.
        tokens.capacity = f64::min(tokens.capacity, self.max_capacity).max(-self.hour());
    }

    /// The tokens an hour of refill gives.
    fn hour(&self) -> f64 {
        self.fill_rate * LearningConfig::LONGEST_WAIT.as_secs_f64()
    }

    /// The most one call can take while limiting: a full bucket and an hour of
    /// refill, so that the debt it leaves holds later calls an hour at most.
    fn most(&self) -> u64 {
        // `as` saturates (and maps NaN to 0).
        (self.max_capacity + self.hour()) as u64
    }

    fn limit(&self) -> u64 {
        // Saturating: a rate of 1e30 reports u64::MAX.
        self.max_capacity as u64
    }

    /// Seconds until the bucket is full, as a duration.
    fn until_full(&self, tokens: &Tokens) -> Duration {
        nanos_up((self.max_capacity - tokens.capacity) / self.fill_rate)
    }

    fn admitted(&self, tokens: &Tokens) -> Admitted {
        Admitted::new(
            self.limit(),
            tokens.capacity.max(0.0) as u64,
            self.until_full(tokens),
        )
    }
}

/// `seconds` as a duration rounded up to the nanosecond, saturating; zero for
/// anything not above zero.
pub(crate) fn nanos_up(seconds: f64) -> Duration {
    let nanos = (seconds * 1e9).ceil();
    if nanos > 0.0 {
        // `as` saturates at u64::MAX.
        Duration::from_nanos(nanos as u64)
    } else {
        Duration::ZERO
    }
}

impl Algorithm for LearnedBucket {
    type State = Tokens;

    fn initial_state(&self, now: Nanos) -> Tokens {
        Tokens {
            capacity: 0.0,
            last: now,
        }
    }

    fn acquire(&self, tokens: &mut Tokens, now: Nanos, n: u64) -> Decision {
        if n == 0 {
            return Ok(self.admitted(tokens));
        }
        if self.enabled && n > self.most() {
            return Err(InsufficientCapacity::new(n, self.most()).into());
        }
        if now < self.paused_until {
            let wait = self.paused_until.saturating_since(now);
            return Err(Denied::Limited(Limited::new(
                wait,
                self.limit(),
                0,
                wait.saturating_add(self.until_full(tokens)),
            )));
        }
        if !self.enabled {
            return Ok(Admitted::new(u64::MAX, u64::MAX, Duration::ZERO));
        }
        // Counting the tokens changes no decision, only when they were counted; kept
        // on a denial too, as upstream keeps it.
        self.refill(tokens, now);
        let amount = n as f64;
        // A call larger than the bucket waits for a full bucket, then goes into debt.
        let needed = amount.min(self.max_capacity);
        if needed <= tokens.capacity {
            tokens.capacity -= amount;
            return Ok(self.admitted(tokens));
        }
        let wait_seconds = (needed - tokens.capacity) / self.fill_rate;
        if wait_seconds * 1e9 < 1.0 {
            // A shortfall below a nanosecond: waiting 0 ns would gain nothing and
            // spin (smithy-rs's fix); grant, keeping the bucket at or above zero.
            tokens.capacity = if amount <= self.max_capacity {
                (tokens.capacity - amount).max(0.0)
            } else {
                tokens.capacity - amount
            };
            return Ok(self.admitted(tokens));
        }
        let wait = nanos_up(wait_seconds);
        Err(Denied::Limited(Limited::new(
            wait,
            self.limit(),
            tokens.capacity.max(0.0) as u64,
            self.until_full(tokens),
        )))
    }

    fn reserve(
        &self,
        tokens: &mut Tokens,
        now: Nanos,
        n: u64,
        _max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        // The rate changes with every answer: booking ahead at today's rate would
        // promise what tomorrow's may not keep.
        self.acquire(tokens, now, n)
            .map(|_| Reservation::new(n, Duration::ZERO))
    }

    fn refund(&self, tokens: &mut Tokens, now: Nanos, n: u64) {
        if !self.enabled {
            return;
        }
        self.refill(tokens, now);
        tokens.capacity = f64::min(self.max_capacity, tokens.capacity + n as f64);
    }

    /// While limiting, a full bucket and an hour of refill: a call larger than the
    /// bucket goes once the bucket is full, into a debt of at most an hour. Off,
    /// any number.
    fn capacity(&self) -> u64 {
        if self.enabled { self.most() } else { u64::MAX }
    }

    fn idle_at(&self, tokens: &Tokens) -> Nanos {
        // A fresh bucket is empty: only a debt makes it better than this one.
        let debt = (-tokens.capacity).max(0.0);
        (tokens.last + nanos_up(debt / self.fill_rate)).max(self.paused_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::cubic::tests::assert_relative_eq_within;

    fn at(seconds: f64) -> Nanos {
        Nanos::new((seconds * 1e9).round() as u64)
    }

    /// botocore's `TokenBucket(max_rate, min_rate)` created at time 0: its setter
    /// clamps the fill rate to the minimum and the size to at least 1.
    fn botocore(max_rate: f64, min_rate: f64) -> (LearnedBucket, Tokens) {
        let mut bucket = LearnedBucket::off();
        bucket.enabled = true;
        let mut tokens = bucket.initial_state(Nanos::ZERO);
        botocore_set(&mut bucket, &mut tokens, Nanos::ZERO, max_rate, min_rate);
        (bucket, tokens)
    }

    fn botocore_set(
        bucket: &mut LearnedBucket,
        tokens: &mut Tokens,
        now: Nanos,
        max_rate: f64,
        min_rate: f64,
    ) {
        bucket.set_rate(tokens, now, max_rate.max(min_rate), max_rate);
    }

    // botocore tests/unit/retries/test_bucket.py

    #[test]
    fn can_acquire_amount() {
        let (bucket, mut tokens) = botocore(10.0, 0.1);
        for t in 1..=5 {
            assert!(bucket.acquire(&mut tokens, at(t as f64), 1).is_ok());
        }
    }

    #[test]
    fn can_change_max_capacity_lower() {
        let (mut bucket, mut tokens) = botocore(10.0, 0.1);
        for t in 1..=5 {
            assert!(bucket.acquire(&mut tokens, at(t as f64), 1).is_ok());
        }
        botocore_set(&mut bucket, &mut tokens, at(5.0), 1.0, 0.1);
        for t in 6..=10 {
            assert!(bucket.acquire(&mut tokens, at(t as f64), 1).is_ok());
        }
    }

    #[test]
    fn max_capacity_is_at_least_one() {
        let (mut bucket, mut tokens) = botocore(10.0, 0.1);
        botocore_set(&mut bucket, &mut tokens, at(1.0), 0.5, 0.1);
        assert_eq!(bucket.fill_rate, 0.5);
        assert_eq!(bucket.max_capacity, 1.0);
    }

    #[test]
    fn acquire_fails_on_non_block_mode() {
        let (bucket, mut tokens) = botocore(10.0, 0.1);
        // 100 tokens from an empty bucket of 10 (botocore's fake clock still read
        // 0): not now, CapacityNotAvailableError there; once full, it goes into debt.
        assert!(bucket.acquire(&mut tokens, at(0.0), 100).is_err());
        assert!(bucket.acquire(&mut tokens, at(1.0), 100).is_ok());
        assert_relative_eq_within(-90.0, tokens.capacity, 1e-9);
    }

    #[test]
    fn can_retrieve_at_max_send_rate() {
        let (bucket, mut tokens) = botocore(10.0, 0.1);
        for i in 0..20 {
            let t = 1.0 + 0.1 * i as f64;
            assert!(bucket.acquire(&mut tokens, at(t), 1).is_ok(), "at {t}");
        }
    }

    #[test]
    fn acquiring_blocks_when_capacity_reached() {
        let (bucket, mut tokens) = botocore(10.0, 0.1);
        assert!(bucket.acquire(&mut tokens, at(0.1), 1).is_ok());
        assert_eq!(tokens.capacity, 0.0);
        // At 0.15 half a token: wait 0.05 s (botocore sleeps that long).
        let denied = bucket.acquire(&mut tokens, at(0.15), 1).unwrap_err();
        let wait = denied.retry_after().unwrap();
        assert!((wait.as_secs_f64() - 0.05).abs() < 1e-9, "{wait:?}");
        assert!(bucket.acquire(&mut tokens, at(0.2), 1).is_ok());
        assert_relative_eq_within(0.0, tokens.capacity, 1e-12);
        assert!(bucket.acquire(&mut tokens, at(0.300001), 1).is_ok());
    }

    #[test]
    fn rate_cant_go_below_min() {
        let (mut bucket, mut tokens) = botocore(1.0, 0.2);
        botocore_set(&mut bucket, &mut tokens, at(1.0), 0.1, 0.2);
        assert_eq!(bucket.fill_rate, 0.2);
        assert_eq!(bucket.max_capacity, 1.0);
    }

    // smithy-rs: the bucket after a first throttle at 0 (rate 0.5, size 1).

    fn smithy_after_throttle() -> (LearnedBucket, Tokens) {
        let mut bucket = LearnedBucket::off();
        bucket.enabled = true;
        let mut tokens = bucket.initial_state(Nanos::ZERO);
        bucket.set_rate(&mut tokens, Nanos::ZERO, 0.5, 0.0);
        (bucket, tokens)
    }

    #[test]
    fn capacity_never_goes_negative() {
        let (bucket, mut tokens) = smithy_after_throttle();
        let denied = bucket.acquire(&mut tokens, at(0.1), 1).unwrap_err();
        assert_relative_eq_within(0.05, tokens.capacity, 0.01);
        assert_relative_eq_within(1.9, denied.retry_after().unwrap().as_secs_f64(), 0.01);
    }

    #[test]
    fn concurrent_acquires_no_cascading_delays() {
        let (bucket, mut tokens) = smithy_after_throttle();
        let delays: Vec<_> = (0..10)
            .map(|_| bucket.acquire(&mut tokens, at(0.1), 1).unwrap_err())
            .map(|d| d.retry_after().unwrap())
            .collect();
        assert!(delays.iter().all(|d| *d == delays[0]));
        assert!(tokens.capacity >= 0.0);
    }

    #[test]
    fn acquire_succeeds_after_sufficient_refill() {
        let (bucket, mut tokens) = smithy_after_throttle();
        assert!(bucket.acquire(&mut tokens, at(0.1), 1).is_err());
        assert!(bucket.acquire(&mut tokens, at(2.1), 1).is_ok());
        assert_relative_eq_within(0.0, tokens.capacity, 0.01);
    }

    #[test]
    fn sub_nanosecond_shortfall_grants_instead_of_returning_zero_delay() {
        let (bucket, mut tokens) = smithy_after_throttle();
        tokens.capacity = 1.0 - 1e-12;
        tokens.last = at(0.5);
        assert!(bucket.acquire(&mut tokens, at(0.5), 1).is_ok());
        assert!(tokens.capacity >= 0.0);
    }

    #[test]
    fn a_pause_holds_every_call_until_it_ends() {
        let mut bucket = LearnedBucket::off();
        bucket.paused_until = at(3.0);
        let mut tokens = bucket.initial_state(Nanos::ZERO);
        let denied = bucket.acquire(&mut tokens, at(1.0), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(2)));
        assert!(bucket.acquire(&mut tokens, at(3.0), 1).is_ok());
    }

    #[test]
    fn off_admits_everything_and_zero_is_a_peek() {
        let bucket = LearnedBucket::off();
        let mut tokens = bucket.initial_state(Nanos::ZERO);
        assert!(bucket.acquire(&mut tokens, Nanos::ZERO, u64::MAX).is_ok());
        let (on, mut tokens) = smithy_after_throttle();
        let before = tokens;
        assert!(on.acquire(&mut tokens, at(0.1), 0).is_ok());
        assert_eq!(tokens, before);
    }

    // The bug: with limiting on, `u64::MAX` tokens were granted once the bucket was
    // full, leaving a debt that held every later call for 584 years.
    #[test]
    fn a_call_beyond_an_hour_of_refill_is_never_and_takes_nothing() {
        let (bucket, mut tokens) = botocore(10.0, 0.1);
        assert_eq!(bucket.capacity(), 10 + 36_000);
        let full = at(1.0);
        let before = tokens;
        let never = bucket.acquire(&mut tokens, full, u64::MAX).unwrap_err();
        assert_eq!(never, InsufficientCapacity::new(u64::MAX, 36_010).into());
        let never = bucket.reserve(&mut tokens, full, 36_011, Duration::MAX);
        assert_eq!(never, Err(InsufficientCapacity::new(36_011, 36_010).into()));
        assert_eq!(tokens, before);
        // The most one call takes leaves an hour of debt, no more.
        assert!(bucket.acquire(&mut tokens, full, 36_010).is_ok());
        assert_eq!(tokens.capacity, -36_000.0);
        let wait = bucket.acquire(&mut tokens, full, 1).unwrap_err();
        assert_relative_eq_within(3600.1, wait.retry_after().unwrap().as_secs_f64(), 1e-6);
    }

    #[test]
    fn a_slower_rate_forgives_the_debt_beyond_an_hour() {
        let (mut bucket, mut tokens) = botocore(10.0, 0.1);
        assert!(bucket.acquire(&mut tokens, at(1.0), 36_010).is_ok());
        bucket.set_rate(&mut tokens, at(1.0), 0.5, 0.5);
        assert_eq!(tokens.capacity, -1800.0);
        let wait = bucket.acquire(&mut tokens, at(1.0), 1).unwrap_err();
        assert_eq!(wait.retry_after(), Some(Duration::from_secs(3602)));
    }

    #[test]
    fn extremes_never_panic() {
        let mut bucket = LearnedBucket::off();
        bucket.enabled = true;
        let mut tokens = bucket.initial_state(Nanos::ZERO);
        bucket.set_rate(&mut tokens, Nanos::ZERO, u64::MAX as f64, u64::MAX as f64);
        assert!(bucket.acquire(&mut tokens, Nanos::MAX, u64::MAX).is_ok());
        bucket.set_rate(&mut tokens, Nanos::MAX, 1e-300, 0.0);
        let denied = bucket
            .acquire(&mut tokens, Nanos::MAX, u64::MAX)
            .unwrap_err();
        assert_eq!(denied, InsufficientCapacity::new(u64::MAX, 1).into());
        let denied = bucket.acquire(&mut tokens, Nanos::MAX, 1).unwrap_err();
        assert!(denied.retry_after().is_some());
        let _ = bucket.idle_at(&tokens);
        bucket.refund(&mut tokens, Nanos::MAX, u64::MAX);
        // A clock read earlier than the last count adds nothing.
        let before = tokens;
        bucket.refill(&mut tokens, Nanos::ZERO);
        assert_eq!(tokens, before);
    }
}
