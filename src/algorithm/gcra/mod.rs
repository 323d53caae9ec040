//! Token bucket in GCRA form (the generic cell rate algorithm).
//!
//! The whole state is one number, the theoretical arrival time (TAT): the instant at
//! which the bucket would be full again. A request for `n` moves the TAT `n` emission
//! intervals later; it is admitted if the new TAT is at most one bucket (the delay
//! variation tolerance, `burst` intervals) ahead of now.
//!
//! The TAT is a time on the clock, which ends at [`Nanos::MAX`]. A request that would
//! move it past that end is denied, with a `retry_after` reaching the end: no state
//! holds its debt, and saturating the TAT instead would admit everything near the end.
//!
//! [`CellReply`] reads a decision as redis-cell's `CL.THROTTLE` replies it.

use std::time::Duration;

use super::script::{Arg, MAX_SCRIPT_MICROS, whole_micros};
use super::{Algorithm, Facts, FromConfig, Share, check_capacity, times};
use super::{CONFIG_WORDS, Packing};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::quota::Quota;
use crate::time::Nanos;
use crate::units::{duration_to_nanos, until};

mod cell_reply;

pub use cell_reply::CellReply;

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

    /// The TAT after `n` (at most the burst) more at `now`; `None` past the clock's
    /// end, where no state can hold it.
    #[inline]
    fn next_tat(&self, tat: u64, now: u64, n: u64) -> Option<u64> {
        // n <= burst, so n * interval <= tolerance fits.
        tat.max(now).checked_add(n * self.interval)
    }

    /// The nanoseconds from `now` after which `n` (at most the burst) more fit; to the
    /// clock's end if they never do on this clock.
    #[inline]
    pub(super) fn wait(&self, tat: u64, now: u64, n: u64) -> u64 {
        let allow_at = self
            .next_tat(tat, now, n)
            .map(|t| t.saturating_sub(self.tolerance));
        until(allow_at, now)
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
        let Some(new_tat) = self.next_tat(*tat, now, n) else {
            return Err(self.limited(*tat, now, until(None, now)));
        };
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
        let Some(new_tat) = self.next_tat(*tat, now, n) else {
            return Err(self.limited(*tat, now, until(None, now)));
        };
        let wait = new_tat.saturating_sub(self.tolerance).saturating_sub(now);
        let max_wait = duration_to_nanos(max_wait);
        if wait > max_wait {
            return Err(self.limited(*tat, now, wait - max_wait));
        }
        *tat = new_tat;
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

    /// The debt in nanoseconds, `TAT - now`: forgetting it gives back that many
    /// emission intervals' worth of permits, to the fraction.
    fn forgetting_gives_back(&self, tat: &u64, now: Nanos) -> u64 {
        tat.saturating_sub(now.as_u64())
    }
}

impl Gcra {
    pub(crate) fn words(&self) -> [u64; CONFIG_WORDS] {
        [self.interval, self.tolerance, self.burst, 0]
    }

    #[inline]
    pub(crate) fn from_words(words: [u64; CONFIG_WORDS]) -> Gcra {
        Gcra {
            interval: words[0],
            tolerance: words[1],
            burst: words[2],
        }
    }
}

/// GCRA's facts. Its Redis twin reads `{interval µs, tolerance µs (interval × burst),
/// burst}`.
impl Facts for Gcra {
    const NAME: &'static str = "gcra";
    const SCRIPT: &'static str = include_str!("../../store/redis/scripts/gcra.lua");
    const CONFIG: Option<FromConfig<Self>> = Some(FromConfig {
        takes_burst: true,
        build: Gcra::from_config,
    });

    /// The time the whole burst takes to refill: the capacity times the emission
    /// interval.
    fn window(&self) -> Duration {
        times(self.emission_interval(), self.capacity())
    }

    /// The bucket at `nodes` times the interval, and the burst divided.
    fn per_node(&self, share: Share) -> Result<Gcra, ConfigError> {
        let burst = share.count(self.capacity())?;
        let quota = share
            .interval(self.emission_interval())?
            .burst(burst)
            .map_err(|_| ConfigError::Overflow { parameter: "nodes" })?;
        Ok(Gcra::new(quota))
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let interval = whole_micros(self.emission_interval(), "interval")?;
        let overflow = ConfigError::Overflow { parameter: "burst" };
        let tolerance = interval
            .checked_mul(self.capacity())
            .filter(|&t| t <= MAX_SCRIPT_MICROS)
            .ok_or(overflow)?;
        Ok(vec![
            Arg::Int(interval),
            Arg::Int(tolerance),
            Arg::Int(self.capacity()),
        ])
    }
}

impl Gcra {
    /// A rules file's `requests_per_unit` per `unit`, `burst` at once (by default
    /// `requests_per_unit`).
    fn from_config(requests: u64, per: Duration, burst: Option<u64>) -> Result<Gcra, ConfigError> {
        let quota = Quota::new(requests, per)?;
        let quota = match burst {
            Some(burst) => quota.burst(burst)?,
            None => quota,
        };
        Ok(Gcra::new(quota))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{MS, at};

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
        assert!(g.acquire(&mut s, Nanos::MAX, 1).is_err());
        let _ = g.reserve(&mut s, Nanos::MAX, 1, Duration::MAX);
        g.refund(&mut s, Nanos::MAX, u64::MAX);
    }

    /// Regression: within a second of the clock's end the TAT saturated at
    /// `u64::MAX`, so `allow_at` fell a whole burst behind now and every request
    /// passed: 1,000 of 1,000 against a limit of 10.
    #[test]
    fn near_the_clocks_end_admits_no_more_than_fits_before_it() {
        let g = Gcra::new(Quota::per_second(10).unwrap());
        let start = u64::MAX - 500 * MS;
        let mut s = g.initial_state(Nanos::new(start));
        let admitted = (0..1000u64)
            .filter(|i| {
                g.acquire(&mut s, Nanos::new(start + i * 400_000), 1)
                    .is_ok()
            })
            .count();
        // Half a second left: 5 permits of 100 ms fit before the end, none after.
        assert_eq!(admitted, 5);
        let denied = g.acquire(&mut s, Nanos::new(u64::MAX - 1), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
        assert!(g.reserve(&mut s, Nanos::MAX, 1, Duration::MAX).is_err());
    }

    /// Regression: a quota of 1 per 500 years admitted a second request after 84.9
    /// years, when its saturated TAT (the clock's end) minus 500 years had passed.
    #[test]
    fn a_period_longer_than_what_is_left_of_the_clock_never_admits_early() {
        let year = 365 * 86_400 * 1_000 * MS;
        let g = Gcra::new(Quota::new(1, Duration::from_nanos(500 * year)).unwrap());
        let mut s = g.initial_state(Nanos::ZERO);
        assert!(g.acquire(&mut s, Nanos::ZERO, 1).is_ok());
        for years in [84, 85, 300, 499, 500, 584] {
            let now = Nanos::new(years * year);
            let denied = g.acquire(&mut s, now, 1).unwrap_err();
            let retry = denied.retry_after().unwrap();
            assert!(now + retry >= Nanos::new(500 * year), "at {years} years");
        }
        assert_eq!(s, 500 * year);
    }

    #[test]
    fn script_args_are_whole_microsecond_intervals() {
        let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
        assert_eq!(
            gcra.script_args(),
            Ok(vec![Arg::Int(100_000), Arg::Int(300_000), Arg::Int(3)])
        );
    }

    #[test]
    fn a_sub_microsecond_interval_has_no_script_args() {
        let gcra = Gcra::new(Quota::per_second(3).unwrap());
        assert!(matches!(
            gcra.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "interval",
                ..
            })
        ));
    }

    #[test]
    fn a_tolerance_beyond_two_to_the_52_micros_has_no_script_args() {
        let interval = Duration::from_secs(1 << 32);
        let fits = Gcra::new(Quota::with_period(interval).unwrap().burst(1).unwrap());
        assert!(fits.script_args().is_ok());
        let huge = Gcra::new(Quota::with_period(interval).unwrap().burst(2).unwrap());
        assert_eq!(
            huge.script_args(),
            Err(ConfigError::Overflow { parameter: "burst" })
        );
    }
}
