//! Leaky bucket: a constant outflow of one unit every `T`, and at most `capacity`
//! units in the bucket.
//!
//! The whole state is one number, the time at which the bucket will be empty. The
//! level at `now` is `(empty_at − now) / T`, rounded up so that a unit still draining
//! counts. The same state serves two readings:
//!
//! - a **meter** ([`acquire`](Algorithm::acquire)): a request pours in `n` units and
//!   goes at once if they fit, and is rejected if the bucket would overflow, as
//!   Shopify's and GitHub's API limits do;
//! - a **queue** ([`LeakyBucket::schedule`], [`reserve`](Algorithm::reserve)):
//!   requests leave one unit every `T` in arrival order, waiting their turn, and are
//!   rejected when the queue already holds `capacity` units, as nginx `limit_req`
//!   does (its `burst` is `capacity - 1`).
//!
//! The meter is GCRA: the empty time is GCRA's theoretical arrival time, and the
//! capacity its burst. So the bucket keeps a [`Gcra`] and adds only the queue.

use std::time::Duration;

use super::script::{Arg, MAX_SCRIPT_MICROS, exact_count, whole_micros};
use super::share::too_slow;
use super::{Algorithm, Facts, FromConfig, Gcra, Share, check_capacity, times};
use super::{CONFIG_WORDS, Packing};
use crate::decision::{Decision, Denied, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::quota::Quota;
use crate::time::Nanos;
use crate::units::duration_to_nanos;

/// A leaky bucket of `capacity` units that drains one unit every
/// `drain.emission_interval()`; a meter through [`acquire`](Algorithm::acquire), a
/// departure schedule through [`schedule`](LeakyBucket::schedule). Its state is one
/// `u64`, so a [`Limiter`](crate::Limiter) over it is lock-free.
///
/// As a meter it decides exactly as a [`Gcra`] whose burst is the capacity, and it
/// runs on one; what it adds is the queue.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::LeakyBucket;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let bucket = LeakyBucket::new(3, Quota::per_second(10)?)?;
/// let limiter = Limiter::with_clock(bucket, clock.clone());
/// assert!(limiter.try_acquire(3).is_ok());
/// let denied = limiter.try_acquire(1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeakyBucket {
    /// The meter: one unit per emission interval, the capacity as the burst.
    meter: Gcra,
}

/// When a request scheduled on a [`LeakyBucket`] leaves the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Departure {
    at: Nanos,
    wait: Duration,
}

impl Departure {
    /// The time the request leaves: when the units ahead of it have drained.
    pub fn at(&self) -> Nanos {
        self.at
    }

    /// How long the request waits from its arrival.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Whether the request leaves on arrival.
    pub fn is_immediate(&self) -> bool {
        self.wait.is_zero()
    }
}

impl LeakyBucket {
    /// A bucket of `capacity` units, leaking one unit every
    /// `drain.emission_interval()`. The quota's burst plays no part: the capacity is
    /// the burst.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero capacity, [`ConfigError::Overflow`] if draining
    /// a full bucket takes more than 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    /// use tollgate::algorithm::{Algorithm, LeakyBucket};
    ///
    /// let bucket = LeakyBucket::new(20, Quota::per_second(5)?)?;
    /// assert_eq!(bucket.capacity(), 20);
    /// assert_eq!(bucket.drain_interval(), Duration::from_millis(200));
    /// assert!(LeakyBucket::new(0, Quota::per_second(5)?).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(capacity: u64, drain: Quota) -> Result<LeakyBucket, ConfigError> {
        let capacity = non_zero("capacity", capacity)?;
        LeakyBucket::checked(capacity, drain.interval_nanos())
    }

    fn checked(capacity: u64, interval: u64) -> Result<LeakyBucket, ConfigError> {
        let meter = Gcra::with_interval(interval, capacity).ok_or(ConfigError::Overflow {
            parameter: "capacity",
        })?;
        Ok(LeakyBucket { meter })
    }

    /// Changes the drain rate. The state is a time, so the queue keeps its departure
    /// times: what is queued drains by the same instant; the level, read in units of
    /// the new interval, changes.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Overflow`] if draining a full bucket would take more than 584
    /// years; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    /// use tollgate::algorithm::LeakyBucket;
    ///
    /// let mut bucket = LeakyBucket::new(20, Quota::per_second(5)?)?;
    /// bucket.set_drain(Quota::per_second(50)?)?;
    /// assert_eq!(bucket.drain_interval(), Duration::from_millis(20));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_drain(&mut self, drain: Quota) -> Result<(), ConfigError> {
        *self = LeakyBucket::checked(self.capacity(), drain.interval_nanos())?;
        Ok(())
    }

    /// Changes the capacity, keeping the state: a bucket above the new capacity
    /// admits nothing until it has drained below it.
    ///
    /// # Errors
    ///
    /// As [`LeakyBucket::new`]; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Quota;
    /// use tollgate::algorithm::{Algorithm, LeakyBucket};
    ///
    /// let mut bucket = LeakyBucket::new(20, Quota::per_second(5)?)?;
    /// bucket.set_capacity(40)?;
    /// assert_eq!(bucket.capacity(), 40);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_capacity(&mut self, capacity: u64) -> Result<(), ConfigError> {
        let capacity = non_zero("capacity", capacity)?;
        *self = LeakyBucket::checked(capacity, self.meter.interval_nanos())?;
        Ok(())
    }

    /// The time one unit takes to drain.
    pub fn drain_interval(&self) -> Duration {
        self.meter.emission_interval()
    }

    /// Units in the bucket at `now`, counting one still draining.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Quota;
    /// use tollgate::algorithm::{Algorithm, LeakyBucket};
    /// use tollgate::time::Nanos;
    ///
    /// let bucket = LeakyBucket::new(5, Quota::per_second(10)?)?;
    /// let mut state = bucket.initial_state(Nanos::ZERO);
    /// bucket.acquire(&mut state, Nanos::ZERO, 3)?;
    /// assert_eq!(bucket.queue_len(&state, Nanos::new(150_000_000)), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn queue_len(&self, empty_at: &u64, now: Nanos) -> u64 {
        empty_at
            .saturating_sub(now.as_u64())
            .div_ceil(self.meter.interval_nanos())
    }

    /// How long a request scheduled at `now` would wait: until the bucket is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    /// use tollgate::algorithm::{Algorithm, LeakyBucket};
    /// use tollgate::time::Nanos;
    ///
    /// let bucket = LeakyBucket::new(5, Quota::per_second(10)?)?;
    /// let mut state = bucket.initial_state(Nanos::ZERO);
    /// bucket.acquire(&mut state, Nanos::ZERO, 3)?;
    /// assert_eq!(bucket.expected_wait(&state, Nanos::ZERO), Duration::from_millis(300));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expected_wait(&self, empty_at: &u64, now: Nanos) -> Duration {
        Duration::from_nanos(empty_at.saturating_sub(now.as_u64()))
    }

    /// Queues a request of `n` units at `now`: it leaves when the units ahead of it
    /// have drained, and its own units drain one every interval after that. Requests
    /// leave in arrival order.
    ///
    /// `n == 0` tells when a request would leave, without queueing anything.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] when the queue already holds more than `capacity - n` units
    /// (its `retry_after` is when there will be room); [`Denied::Insufficient`] when
    /// `n` exceeds the capacity. A denied request queues nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::Quota;
    /// use tollgate::algorithm::{Algorithm, LeakyBucket};
    /// use tollgate::time::Nanos;
    ///
    /// // nginx `limit_req rate=10r/s burst=2`: a queue of 3 requests.
    /// let bucket = LeakyBucket::new(3, Quota::per_second(10)?)?;
    /// let mut state = bucket.initial_state(Nanos::ZERO);
    /// let waits: Vec<_> = (0..3)
    ///     .map(|_| bucket.schedule(&mut state, Nanos::ZERO, 1).map(|d| d.wait()))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(waits, [Duration::ZERO, Duration::from_millis(100), Duration::from_millis(200)]);
    /// let full = bucket.schedule(&mut state, Nanos::ZERO, 1).unwrap_err();
    /// assert_eq!(full.retry_after(), Some(Duration::from_millis(100)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn schedule(&self, empty_at: &mut u64, now: Nanos, n: u64) -> Result<Departure, Denied> {
        let leaves = (*empty_at).max(now.as_u64());
        self.meter.acquire(empty_at, now, n)?;
        Ok(Departure {
            at: Nanos::new(leaves),
            wait: Duration::from_nanos(leaves - now.as_u64()),
        })
    }
}

impl Algorithm for LeakyBucket {
    type State = u64;
    const PACKING: Option<Packing<Self>> = Some(Packing::new(Self::words, Self::from_words));
    // It books ahead, but a denial under `max_wait` may mean "no room in the bucket
    // yet" with the departure still in time, so a timed wait must not fail on it at
    // once: the queue then waits for room and books, or times out at its deadline.
    const BOOKS_AHEAD: bool = false;

    fn initial_state(&self, now: Nanos) -> u64 {
        self.meter.initial_state(now)
    }

    /// The meter: pours `n` units in and goes at once if they fit.
    #[inline]
    fn acquire(&self, empty_at: &mut u64, now: Nanos, n: u64) -> Decision {
        self.meter.acquire(empty_at, now, n)
    }

    /// The queue: [`schedule`](LeakyBucket::schedule), granted if the departure is at
    /// most `max_wait` away. Unlike [`acquire`](Algorithm::acquire), a request waits
    /// for the units ahead of it to drain.
    fn reserve(
        &self,
        empty_at: &mut u64,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        check_capacity(n, self.capacity())?;
        if n == 0 {
            return Ok(Reservation::new(0, Duration::ZERO));
        }
        let t = now.as_u64();
        let wait = empty_at.saturating_sub(t);
        let max_wait = duration_to_nanos(max_wait);
        if wait > max_wait {
            // Both the wait and the lack of room shrink one for one with time.
            let room = self.meter.wait(*empty_at, t, n);
            return Err(self
                .meter
                .limited(*empty_at, t, (wait - max_wait).max(room)));
        }
        let departure = self.schedule(empty_at, now, n)?;
        Ok(Reservation::new(n, departure.wait()))
    }

    /// Drains `n` units at once, never below empty.
    fn refund(&self, empty_at: &mut u64, now: Nanos, n: u64) {
        self.meter.refund(empty_at, now, n)
    }

    fn capacity(&self) -> u64 {
        self.meter.capacity()
    }

    fn backlog(&self, empty_at: &u64, now: Nanos) -> u64 {
        self.queue_len(empty_at, now)
    }

    fn idle_at(&self, empty_at: &u64) -> Nanos {
        self.meter.idle_at(empty_at)
    }

    fn forgetting_gives_back(&self, empty_at: &u64, now: Nanos) -> u64 {
        self.meter.forgetting_gives_back(empty_at, now)
    }
}

impl LeakyBucket {
    pub(crate) fn words(&self) -> [u64; CONFIG_WORDS] {
        self.meter.words()
    }

    #[inline]
    pub(crate) fn from_words(words: [u64; CONFIG_WORDS]) -> LeakyBucket {
        LeakyBucket {
            meter: Gcra::from_words(words),
        }
    }
}

/// The leaky bucket's facts. Its Redis twin runs on GCRA's, as this bucket runs on a
/// [`Gcra`], and reads `{interval µs, tolerance µs (interval × capacity), capacity}`.
impl Facts for LeakyBucket {
    const NAME: &'static str = "leaky_bucket";
    const SCRIPT: &'static str = concat!(
        include_str!("../store/redis/scripts/gcra.lua"),
        include_str!("../store/redis/scripts/leaky_bucket.lua"),
    );
    const CONFIG: Option<FromConfig<Self>> = Some(FromConfig {
        takes_burst: true,
        build: LeakyBucket::from_config,
    });

    /// The time a full bucket takes to drain: the capacity times the drain interval.
    fn window(&self) -> Duration {
        times(self.drain_interval(), self.capacity())
    }

    /// The capacity divided, the drain interval multiplied.
    fn per_node(&self, share: Share) -> Result<LeakyBucket, ConfigError> {
        let drain = share.interval(self.drain_interval())?;
        LeakyBucket::new(share.count(self.capacity())?, drain).map_err(too_slow)
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let interval = whole_micros(self.drain_interval(), "interval")?;
        let capacity = exact_count(self.capacity(), "capacity")?;
        let tolerance = interval
            .checked_mul(capacity)
            .filter(|&t| t <= MAX_SCRIPT_MICROS)
            .ok_or(ConfigError::Overflow {
                parameter: "capacity",
            })?;
        Ok(vec![
            Arg::Int(interval),
            Arg::Int(tolerance),
            Arg::Int(capacity),
        ])
    }
}

impl LeakyBucket {
    /// A rules file's bucket: capacity `burst` (by default `requests_per_unit`),
    /// draining `requests_per_unit` per `unit`.
    fn from_config(
        requests: u64,
        per: Duration,
        burst: Option<u64>,
    ) -> Result<LeakyBucket, ConfigError> {
        LeakyBucket::new(burst.unwrap_or(requests), Quota::new(requests, per)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::too_long;
    use crate::algorithm::testing::{MS, at, ms};

    /// One unit every 100 ms.
    fn bucket(capacity: u64) -> LeakyBucket {
        LeakyBucket::new(capacity, Quota::per_second(10).unwrap()).unwrap()
    }

    #[test]
    fn meter_admits_up_to_capacity_then_overflows() {
        let b = bucket(3);
        let mut s = b.initial_state(at(0));
        let first = b.acquire(&mut s, at(0), 2).unwrap();
        assert_eq!(first.remaining(), 1);
        assert_eq!(first.reset_after(), ms(200));
        assert!(b.acquire(&mut s, at(0), 1).is_ok());
        let denied = b.acquire(&mut s, at(0), 2).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(200)));
        // A unit still draining counts: at 150 ms, 1.5 units have left, 2 remain.
        assert_eq!(b.queue_len(&s, at(150)), 2);
        assert!(b.acquire(&mut s, at(199), 2).is_err());
        assert!(b.acquire(&mut s, at(200), 2).is_ok());
    }

    #[test]
    fn more_than_capacity_is_never() {
        let b = bucket(3);
        let mut s = b.initial_state(at(0));
        assert!(b.acquire(&mut s, at(0), 4).unwrap_err().is_never());
        assert!(b.schedule(&mut s, at(0), 4).unwrap_err().is_never());
        assert!(
            b.reserve(&mut s, at(0), 4, Duration::MAX)
                .unwrap_err()
                .is_never()
        );
        assert_eq!(s, 0);
    }

    #[test]
    fn denial_and_peek_change_nothing() {
        let b = bucket(1);
        let mut s = b.initial_state(at(0));
        b.acquire(&mut s, at(0), 1).unwrap();
        let before = s;
        assert!(b.acquire(&mut s, at(50), 1).is_err());
        assert!(b.schedule(&mut s, at(50), 1).is_err());
        assert!(b.reserve(&mut s, at(50), 1, ms(10)).is_err());
        assert_eq!(b.acquire(&mut s, at(50), 0).unwrap().remaining(), 0);
        let peek = b.schedule(&mut s, at(50), 0).unwrap();
        assert_eq!(peek.wait(), ms(50));
        assert!(b.reserve(&mut s, at(50), 0, Duration::ZERO).is_ok());
        assert_eq!(s, before);
    }

    #[test]
    fn schedule_spaces_departures_one_unit_per_interval() {
        let b = bucket(10);
        let mut s = b.initial_state(at(0));
        let a = b.schedule(&mut s, at(0), 3).unwrap();
        assert!(a.is_immediate());
        let c = b.schedule(&mut s, at(100), 2).unwrap();
        assert_eq!(c.at(), at(300));
        assert_eq!(c.wait(), ms(200));
        assert_eq!(b.expected_wait(&s, at(100)), ms(400));
        assert_eq!(b.queue_len(&s, at(100)), 4);
        // After the queue drained, a request leaves on arrival.
        assert!(b.schedule(&mut s, at(900), 1).unwrap().is_immediate());
    }

    #[test]
    fn reserve_waits_in_line_within_max_wait() {
        let b = bucket(5);
        let mut s = b.initial_state(at(0));
        assert!(
            b.reserve(&mut s, at(0), 2, Duration::ZERO)
                .unwrap()
                .is_immediate()
        );
        let r = b.reserve(&mut s, at(0), 1, ms(200)).unwrap();
        assert_eq!(r.wait(), ms(200));
        let denied = b.reserve(&mut s, at(0), 1, ms(100)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(200)));
        // The queue (3 units) has room for 2 but not 3.
        let full = b.reserve(&mut s, at(0), 3, Duration::MAX).unwrap_err();
        assert_eq!(full.retry_after(), Some(ms(100)));
    }

    #[test]
    fn refund_drains_early_but_not_past_now() {
        let b = bucket(5);
        let mut s = b.initial_state(at(0));
        b.acquire(&mut s, at(0), 4).unwrap();
        b.refund(&mut s, at(100), 2);
        assert_eq!(s, 200 * MS);
        b.refund(&mut s, at(100), 9);
        assert_eq!(s, 100 * MS);
        assert_eq!(b.idle_at(&s), at(100));
    }

    #[test]
    fn reconfiguring_keeps_the_empty_time() {
        let mut b = bucket(4);
        let mut s = b.initial_state(at(0));
        b.acquire(&mut s, at(0), 4).unwrap();
        b.set_drain(Quota::per_second(20).unwrap()).unwrap();
        assert_eq!(b.idle_at(&s), at(400));
        assert_eq!(b.queue_len(&s, at(0)), 8);
        assert!(b.acquire(&mut s, at(0), 1).is_err());
        b.set_capacity(9).unwrap();
        assert!(b.acquire(&mut s, at(0), 1).is_ok());
    }

    #[test]
    fn rejects_bad_parameters() {
        let per_day = Quota::per_day(1).unwrap();
        assert_eq!(
            LeakyBucket::new(0, per_day),
            Err(ConfigError::Zero {
                parameter: "capacity"
            })
        );
        assert_eq!(
            LeakyBucket::new(1 << 40, per_day),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
        let mut b = bucket(1 << 20);
        assert_eq!(
            b.set_capacity(0),
            Err(ConfigError::Zero {
                parameter: "capacity"
            })
        );
        assert_eq!(
            b.set_drain(per_day),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
        assert_eq!(b, bucket(1 << 20), "a failed setter changes nothing");
    }

    #[test]
    fn words_round_trip() {
        let b = bucket(7);
        assert_eq!(LeakyBucket::from_words(b.words()), b);
    }

    #[test]
    fn huge_times_saturate_without_panic() {
        let b =
            LeakyBucket::new(u64::MAX, Quota::new(1, Duration::from_nanos(1)).unwrap()).unwrap();
        let mut s = u64::MAX - 3;
        for now in [0, u64::MAX - 1, u64::MAX] {
            for n in [0, 1, u64::MAX] {
                let _ = b.acquire(&mut s, Nanos::new(now), n);
                let _ = b.schedule(&mut s, Nanos::new(now), n);
                let _ = b.reserve(&mut s, Nanos::new(now), n, Duration::MAX);
            }
            b.refund(&mut s, Nanos::new(now), u64::MAX);
        }
    }

    #[test]
    fn script_args_are_whole_microsecond_intervals() {
        let bucket = LeakyBucket::new(3, Quota::per_second(10).unwrap()).unwrap();
        assert_eq!(
            bucket.script_args(),
            Ok(vec![Arg::Int(100_000), Arg::Int(300_000), Arg::Int(3)])
        );
    }

    #[test]
    fn a_sub_microsecond_interval_has_no_script_args() {
        let bucket = LeakyBucket::new(1, Quota::per_second(3).unwrap()).unwrap();
        assert!(matches!(
            bucket.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "interval",
                ..
            })
        ));
    }

    #[test]
    fn a_drain_time_beyond_two_to_the_52_micros_has_no_script_args() {
        let drain = Quota::with_period(Duration::from_secs(1 << 32)).unwrap();
        assert!(LeakyBucket::new(1, drain).unwrap().script_args().is_ok());
        assert_eq!(
            LeakyBucket::new(2, drain).unwrap().script_args(),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
        let interval = Quota::with_period(Duration::from_secs(1 << 33)).unwrap();
        assert_eq!(
            LeakyBucket::new(1, interval).unwrap().script_args(),
            Err(too_long("interval", MAX_SCRIPT_MICROS))
        );
    }

    #[test]
    fn a_capacity_beyond_two_to_the_52_has_no_script_args() {
        let micro = Quota::with_period(Duration::from_micros(1)).unwrap();
        let largest = LeakyBucket::new(1 << 52, micro).unwrap();
        assert_eq!(largest.script_args().unwrap()[2], Arg::Int(1 << 52));
        assert_eq!(
            LeakyBucket::new((1 << 52) + 1, micro)
                .unwrap()
                .script_args(),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
    }
}
