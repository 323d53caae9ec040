//! Token bucket in GCRA form (the generic cell rate algorithm).
//!
//! The whole state is one number, the theoretical arrival time (TAT): the instant at
//! which the bucket would be full again. A request for `n` moves the TAT `n` emission
//! intervals later; it is admitted if the new TAT is at most one bucket (the delay
//! variation tolerance, `burst` intervals) ahead of now.

use std::time::Duration;

use super::{check_capacity, Algorithm};
use super::{Packing, CONFIG_WORDS};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{non_zero, ConfigError};
use crate::quota::Quota;
use crate::time::Nanos;
use crate::units::{duration_to_nanos, saturating_i64};

/// A token bucket in GCRA form: `burst` permits at once, refilled continuously at the
/// quota's rate. Its state is a single `u64`, so a [`Limiter`](crate::Limiter) over it
/// is lock-free.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(2)?), clock.clone());
/// assert!(limiter.try_acquire(2).is_ok());
/// let denied = limiter.try_acquire(1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
/// clock.advance(Duration::from_millis(100));
/// assert!(limiter.try_acquire(1).is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gcra {
    /// Emission interval `T`, nanoseconds per permit.
    interval: u64,
    /// Delay variation tolerance: `T * burst`.
    tolerance: u64,
    /// Permits at one instant.
    burst: u64,
}

impl Gcra {
    /// A token bucket for `quota`: `quota.burst_size()` at once, one more every
    /// `quota.emission_interval()`.
    pub fn new(quota: Quota) -> Gcra {
        Gcra {
            interval: quota.interval_nanos(),
            // Cannot overflow: Quota checks interval * burst.
            tolerance: quota.interval_nanos() * quota.burst_size(),
            burst: quota.burst_size(),
        }
    }

    /// `burst` at once, one more every `interval` nanoseconds; `None` if the
    /// tolerance `interval × burst` overflows.
    pub(super) fn with_interval(interval: u64, burst: u64) -> Option<Gcra> {
        Some(Gcra {
            interval,
            tolerance: interval.checked_mul(burst)?,
            burst,
        })
    }

    /// The bucket as redis-cell's `CL.THROTTLE key max_burst count period` defines
    /// it: `max_burst + 1` at once, `count` per `period`, with redis-cell's emission
    /// interval (`period / count`, truncated to whole nanoseconds).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `count` or `period`,
    /// [`ConfigError::OutOfRange`] if the interval is under a nanosecond,
    /// [`ConfigError::Overflow`] if the burst's duration exceeds 584 years.
    pub fn from_cell(max_burst: u64, count: u64, period: Duration) -> Result<Gcra, ConfigError> {
        let count = non_zero("count", count)?;
        let period = non_zero("period", duration_to_nanos(period))?;
        let interval = (period as f64 / count as f64) as u64;
        if interval == 0 {
            return Err(ConfigError::OutOfRange {
                parameter: "count",
                expected: "at most one per nanosecond of the period",
            });
        }
        let burst = max_burst.checked_add(1).ok_or(ConfigError::Overflow {
            parameter: "max_burst",
        })?;
        Gcra::with_interval(interval, burst).ok_or(ConfigError::Overflow {
            parameter: "max_burst",
        })
    }

    /// The same bucket with a new quota. The state carries over: debt already taken
    /// stays taken, measured in time.
    pub fn set_quota(&mut self, quota: Quota) {
        *self = Gcra::new(quota);
    }

    /// The emission interval: time per permit.
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The emission interval in nanoseconds.
    pub(super) fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// The earliest time `n` (at most the burst) more fit.
    #[inline]
    pub(super) fn allow_at(&self, tat: u64, now: u64, n: u64) -> u64 {
        tat.max(now)
            .saturating_add(n.saturating_mul(self.interval))
            .saturating_sub(self.tolerance)
    }

    // `remaining` is `(tolerance - ttl) / interval`, left undivided: most callers never
    // read it, and the division is a large share of a decision's cost.
    #[inline]
    fn admitted(&self, tat: u64, now: u64) -> Admitted {
        let ttl = tat.saturating_sub(now);
        Admitted::deferred(
            self.burst,
            self.tolerance.saturating_sub(ttl),
            self.interval,
            ttl,
        )
    }

    /// Denied for `retry` nanoseconds.
    #[inline]
    pub(super) fn limited(&self, tat: u64, now: u64, retry: u64) -> Denied {
        let ttl = tat.saturating_sub(now);
        Limited::deferred(
            retry,
            self.burst,
            self.tolerance.saturating_sub(ttl),
            self.interval,
            ttl,
        )
        .into()
    }

    /// `CL.THROTTLE` on `state` at `now` for `quantity`, replying as redis-cell does.
    /// A `quantity` of 0 peeks.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, Gcra};
    /// use tollgate::time::Nanos;
    ///
    /// // CL.THROTTLE user123 15 30 60 1
    /// let gcra = Gcra::from_cell(15, 30, Duration::from_secs(60))?;
    /// let mut state = gcra.initial_state(Nanos::ZERO);
    /// let reply = gcra.cell_throttle(&mut state, Nanos::ZERO, 1);
    /// assert_eq!(reply.to_array(), [0, 16, 15, -1, 2]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn cell_throttle(&self, state: &mut u64, now: Nanos, quantity: u64) -> CellReply {
        let now = now.as_u64();
        let increment = self.interval.saturating_mul(quantity);
        let tat = (*state).max(now);
        let new_tat = tat.saturating_add(increment);
        let allow_at = new_tat.saturating_sub(self.tolerance);
        let (limited, ttl, retry_after) = if allow_at > now {
            let retry = (increment <= self.tolerance).then(|| allow_at - now);
            (true, tat - now, retry)
        } else {
            *state = new_tat;
            (false, new_tat - now, None)
        };
        // redis-cell divides microseconds as floats, then truncates towards zero.
        let next = self.tolerance as i128 - ttl as i128;
        let remaining = if next > -(self.interval as i128) && next > 0 {
            let (next_us, interval_us) = (next / 1000, (self.interval / 1000) as i128);
            if interval_us == 0 {
                (next / self.interval as i128) as u64
            } else {
                (next_us as f64 / interval_us as f64) as u64
            }
        } else {
            0
        };
        CellReply {
            limited,
            limit: self.burst,
            remaining,
            retry_after: retry_after.map(Duration::from_nanos),
            reset_after: Duration::from_nanos(ttl),
        }
    }
}

/// The reply of redis-cell's `CL.THROTTLE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CellReply {
    /// Whether the request was limited.
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: u64,
    /// Permits left.
    pub remaining: u64,
    /// When limited, the time until a retry can succeed; `None` when not limited, or
    /// when the request can never succeed.
    pub retry_after: Option<Duration>,
    /// The time until the bucket is full again.
    pub reset_after: Duration,
}

impl CellReply {
    /// The `CL.THROTTLE` reply for a GCRA decision, such as a
    /// [`RedisStore`](crate::store) decision on a [`Gcra`] rule: the store's script
    /// replies the same fields, in microseconds.
    ///
    /// A request that can never pass (more than the burst) has no state to report:
    /// it maps to limited, with no retry, no remaining and no reset.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, CellReply, Gcra};
    /// use tollgate::time::Nanos;
    /// use tollgate::Quota;
    ///
    /// let gcra = Gcra::new(Quota::per_second(1)?.burst(2)?);
    /// let mut state = gcra.initial_state(Nanos::ZERO);
    /// let decision = gcra.acquire(&mut state, Nanos::ZERO, 1);
    /// assert_eq!(CellReply::from_decision(&decision).to_array(), [0, 2, 1, -1, 1]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn from_decision(decision: &Decision) -> CellReply {
        match decision {
            Ok(a) => CellReply {
                limited: false,
                limit: a.limit(),
                remaining: a.remaining(),
                retry_after: None,
                reset_after: a.reset_after(),
            },
            Err(Denied::Limited(l)) => CellReply {
                limited: true,
                limit: l.limit(),
                remaining: l.remaining(),
                retry_after: Some(l.retry_after()),
                reset_after: l.reset_after(),
            },
            Err(Denied::Insufficient(i)) => CellReply {
                limited: true,
                limit: i.capacity(),
                remaining: 0,
                retry_after: None,
                reset_after: Duration::ZERO,
            },
            Err(Denied::Closed) => CellReply {
                limited: true,
                limit: 0,
                remaining: 0,
                retry_after: None,
                reset_after: Duration::ZERO,
            },
        }
    }

    /// The five integers `CL.THROTTLE` replies: limited (0/1), limit, remaining,
    /// retry_after seconds (-1 if none) and reset_after seconds, both rounded up when
    /// their fraction is at least a millisecond.
    pub fn to_array(&self) -> [i64; 5] {
        let secs = |d: Duration| {
            let whole = saturating_i64(d.as_secs().into());
            whole.saturating_add(i64::from(d.subsec_millis() > 0))
        };
        [
            i64::from(self.limited),
            saturating_i64(self.limit.into()),
            saturating_i64(self.remaining.into()),
            self.retry_after.map_or(-1, secs),
            secs(self.reset_after),
        ]
    }
}

impl Algorithm for Gcra {
    type State = u64;
    const PACKING: Option<Packing<Self>> = Some(Packing::new(Self::words, Self::from_words));
    const BOOKS_AHEAD: bool = true;

    fn initial_state(&self, _now: Nanos) -> u64 {
        0
    }

    #[inline]
    fn acquire(&self, tat: &mut u64, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.burst)?;
        let now = now.as_u64();
        if n == 0 {
            // A peek, even when a lowered burst leaves the TAT beyond the tolerance.
            return Ok(self.admitted(*tat, now));
        }
        // n <= burst, so n * interval <= tolerance fits.
        let new_tat = (*tat).max(now).saturating_add(n * self.interval);
        let allow_at = new_tat.saturating_sub(self.tolerance);
        if allow_at > now {
            return Err(self.limited(*tat, now, allow_at - now));
        }
        *tat = new_tat;
        Ok(self.admitted(new_tat, now))
    }

    fn reserve(
        &self,
        tat: &mut u64,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        check_capacity(n, self.burst)?;
        if n == 0 {
            return Ok(Reservation::new(0, Duration::ZERO));
        }
        let now = now.as_u64();
        let wait = self.allow_at(*tat, now, n).saturating_sub(now);
        let max_wait = duration_to_nanos(max_wait);
        if wait > max_wait {
            return Err(self.limited(*tat, now, wait - max_wait));
        }
        *tat = (*tat).max(now).saturating_add(n * self.interval);
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    fn refund(&self, tat: &mut u64, now: Nanos, n: u64) {
        let now = now.as_u64();
        if *tat > now {
            *tat = tat.saturating_sub(n.saturating_mul(self.interval)).max(now);
        }
    }

    fn capacity(&self) -> u64 {
        self.burst
    }

    fn idle_at(&self, tat: &u64) -> Nanos {
        Nanos::new(*tat)
    }
}

impl Gcra {
    pub(crate) fn words(&self) -> [u64; CONFIG_WORDS] {
        [self.interval, self.tolerance, self.burst, 0]
    }

    pub(crate) fn from_words(words: [u64; CONFIG_WORDS]) -> Gcra {
        Gcra {
            interval: words[0],
            tolerance: words[1],
            burst: words[2],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{at, ms, MS};

    #[test]
    fn admits_burst_then_one_per_interval() {
        let g = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
        let mut s = g.initial_state(at(0));
        for remaining in [2, 1, 0] {
            assert_eq!(g.acquire(&mut s, at(0), 1).unwrap().remaining(), remaining);
        }
        let denied = g.acquire(&mut s, at(0), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
        assert!(g.acquire(&mut s, at(99), 1).is_err());
        assert!(g.acquire(&mut s, at(100), 1).is_ok());
    }

    #[test]
    fn more_than_burst_is_never() {
        let g = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
        let mut s = g.initial_state(at(0));
        let denied = g.acquire(&mut s, at(0), 4).unwrap_err();
        assert!(denied.is_never());
        assert_eq!(s, 0, "a denial changes nothing");
    }

    #[test]
    fn denial_changes_nothing() {
        let g = Gcra::new(Quota::per_second(1).unwrap());
        let mut s = g.initial_state(at(0));
        g.acquire(&mut s, at(0), 1).unwrap();
        let before = s;
        assert!(g.acquire(&mut s, at(10), 1).is_err());
        assert_eq!(s, before);
    }

    #[test]
    fn peek_does_not_consume() {
        let g = Gcra::new(Quota::per_second(1).unwrap());
        let s = g.initial_state(at(0));
        assert!(g.peek(&s, at(0), 1).is_ok());
        assert!(g.peek(&s, at(0), 1).is_ok());
        assert_eq!(s, 0);
    }

    #[test]
    fn reservation_prepays_and_refund_gives_back() {
        let g = Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap());
        let mut s = g.initial_state(at(0));
        let r = g.reserve(&mut s, at(0), 1, Duration::ZERO).unwrap();
        assert!(r.is_immediate());
        let r = g
            .reserve(&mut s, at(0), 1, Duration::from_millis(100))
            .unwrap();
        assert_eq!(r.wait(), Duration::from_millis(100));
        let too_long = g
            .reserve(&mut s, at(0), 1, Duration::from_millis(150))
            .unwrap_err();
        assert_eq!(too_long.retry_after(), Some(Duration::from_millis(50)));
        g.refund(&mut s, at(0), 1);
        assert_eq!(s, 100 * MS);
        g.refund(&mut s, at(0), 5);
        assert_eq!(s, 0, "a refund never goes below now");
    }

    #[test]
    fn set_quota_keeps_the_debt() {
        let mut g = Gcra::new(Quota::per_second(1).unwrap());
        let mut s = g.initial_state(at(0));
        g.acquire(&mut s, at(0), 1).unwrap();
        g.set_quota(Quota::per_second(1).unwrap().burst(2).unwrap());
        assert!(g.acquire(&mut s, at(0), 1).is_ok());
        assert!(g.acquire(&mut s, at(0), 1).is_err());
    }

    #[test]
    fn idle_at_is_the_tat() {
        let g = Gcra::new(Quota::per_second(10).unwrap());
        let mut s = g.initial_state(at(0));
        g.acquire(&mut s, at(0), 2).unwrap();
        assert_eq!(g.idle_at(&s), at(200));
    }

    /// redis-cell's own table (`it_rate_limits`): max_burst 4, 1 per second.
    #[test]
    fn matches_redis_cell_table() {
        let g = Gcra::from_cell(4, 1, Duration::from_secs(1)).unwrap();
        let mut s = g.initial_state(at(0));
        // (now ms, quantity, remaining, reset_after, retry_after, limited)
        let cases: [(u64, u64, u64, Duration, Option<Duration>, bool); 15] = [
            (0, 6, 5, ms(0), None, true),
            (0, 1, 4, ms(1000), None, false),
            (0, 1, 3, ms(2000), None, false),
            (0, 1, 2, ms(3000), None, false),
            (0, 1, 1, ms(4000), None, false),
            (0, 1, 0, ms(5000), None, false),
            (0, 1, 0, ms(5000), Some(ms(1000)), true),
            (3000, 1, 2, ms(3000), None, false),
            (3100, 1, 1, ms(3900), None, false),
            (4000, 1, 1, ms(4000), None, false),
            (8000, 1, 4, ms(1000), None, false),
            (9500, 1, 4, ms(1000), None, false),
            (9500, 0, 4, ms(1000), None, false),
            (9500, 2, 2, ms(3000), None, false),
            (9500, 5, 2, ms(3000), Some(ms(3000)), true),
        ];
        for (i, (now, q, remaining, reset, retry, limited)) in cases.into_iter().enumerate() {
            let r = g.cell_throttle(&mut s, at(now), q);
            assert_eq!(
                r,
                CellReply {
                    limited,
                    limit: 5,
                    remaining,
                    retry_after: retry,
                    reset_after: reset,
                },
                "case {i}"
            );
        }
    }

    #[test]
    fn cell_reply_rounds_seconds_up_from_a_millisecond() {
        let reply = CellReply {
            limited: true,
            limit: 5,
            remaining: 0,
            retry_after: Some(Duration::from_micros(1_001_000)),
            reset_after: Duration::from_micros(2_000_999),
        };
        // 1.001 s rounds up; 2.000999 s has under a millisecond of fraction.
        assert_eq!(reply.to_array(), [1, 5, 0, 2, 2]);
        let reply = CellReply {
            retry_after: None,
            reset_after: Duration::from_millis(2_001),
            ..reply
        };
        assert_eq!(reply.to_array(), [1, 5, 0, -1, 3]);
    }

    #[test]
    fn from_cell_rejects_bad_input() {
        assert!(Gcra::from_cell(1, 0, Duration::from_secs(1)).is_err());
        assert!(Gcra::from_cell(1, 1, Duration::ZERO).is_err());
        assert!(Gcra::from_cell(u64::MAX, 1, Duration::from_secs(1)).is_err());
        assert!(Gcra::from_cell(1, 2, Duration::from_nanos(1)).is_err());
    }

    #[test]
    fn huge_times_saturate_without_panic() {
        let g = Gcra::new(Quota::per_day(1).unwrap());
        let mut s = u64::MAX - 5;
        assert!(g.acquire(&mut s, Nanos::MAX, 1).is_ok() || s == u64::MAX);
        let _ = g.reserve(&mut s, Nanos::MAX, 1, Duration::MAX);
        g.refund(&mut s, Nanos::MAX, u64::MAX);
    }
}
