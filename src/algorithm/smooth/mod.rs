//! Guava's `RateLimiter`: [`SmoothBursty`] and [`SmoothWarmingUp`], one [`Smooth`]
//! limiter in two shapes.
//!
//! The state remembers when the *next* request may go (`next_free`) and how many
//! permits idle time has stored. A request is granted at `next_free` whatever its
//! size, and its cost pushes `next_free` later: the caller waits only for earlier
//! debt, and the next caller pays for this one (the prepay). What the shapes change
//! is what stored permits cost and how fast idle time stores them.
//!
//! Time is counted in whole microseconds since
//! [`initial_state`](Algorithm::initial_state), and the arithmetic follows Guava's
//! `SmoothRateLimiter` step by step, in the same `f64` operation order with the same
//! truncations, so that every wait in microseconds equals Guava's.
//!
//! Deliberate differences from Guava:
//! - the rate must be finite and at most one permit per microsecond: Guava's infinite
//!   rate admits everything, and above 10⁶ per second a single permit costs 0 µs
//!   after truncation, so single-permit requests are never limited;
//! - the rate must be at least one permit per 2⁵³ µs (285 years), and one request
//!   at most [`capacity`](Algorithm::capacity) permits, so costs never saturate time;
//! - a zero warm-up means no warm-up; Guava computes `0 / 0 = NaN` there and stops
//!   limiting.

use std::time::Duration;

use super::script::MAX_SCRIPT_MICROS;
use super::{Algorithm, check_capacity};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, positive_finite};
use crate::time::Nanos;

mod bursty;
mod warming_up;

pub use bursty::{Bursty, SmoothBursty};
pub use warming_up::{SmoothWarmingUp, WarmingUp};

/// 2⁵³ µs: the most time one request may cost, and the longest stable interval.
/// Below it, `f64` holds every whole microsecond exactly.
const MAX_COST_US: f64 = 9_007_199_254_740_992.0;

/// Microseconds per second, as Guava's `SECONDS.toMicros(1L)`.
const MICROS_PER_SECOND: f64 = 1_000_000.0;

/// The mutable part of [`SmoothBursty`] and [`SmoothWarmingUp`], as Guava keeps it.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::{Algorithm, SmoothBursty};
/// use tollgate::time::Nanos;
///
/// let bursty = SmoothBursty::new(5.0)?;
/// let state = bursty.initial_state(Nanos::ZERO);
/// assert_eq!(state.stored_permits(), 0.0);
/// assert_eq!(state.next_free(), Nanos::ZERO);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothState {
    stored_permits: f64,
    /// Microseconds after `start`; may be in the past or the future.
    next_free_us: i64,
    start: Nanos,
}

impl SmoothState {
    /// Permits stored by idle time, as of the last request or reconfiguration.
    pub fn stored_permits(&self) -> f64 {
        self.stored_permits
    }

    /// The instant from which the next request is granted without waiting.
    pub fn next_free(&self) -> Nanos {
        self.instant(self.next_free_us)
    }

    /// The instant `us` microseconds after the start, saturating.
    #[inline]
    fn instant(&self, us: i64) -> Nanos {
        self.checked_instant(us).unwrap_or(Nanos::MAX)
    }

    /// The instant `us` microseconds after the start; `None` past the clock's end.
    #[inline]
    fn checked_instant(&self, us: i64) -> Option<Nanos> {
        let ns = u64::try_from(us).unwrap_or(0).checked_mul(1000)?;
        self.start.as_u64().checked_add(ns).map(Nanos::new)
    }

    /// Whole microseconds from the start to `now`, as Guava's stopwatch reads them.
    fn micros_at(&self, now: Nanos) -> i64 {
        // u64::MAX / 1000 fits an i64.
        (now.as_u64().saturating_sub(self.start.as_u64()) / 1000) as i64
    }
}

/// The validated stable rate.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rate {
    permits_per_second: f64,
    /// Guava's `stableIntervalMicros`.
    interval_us: f64,
    /// The most permits one request may take: their cost stays within 2⁵³ µs.
    capacity: u64,
}

impl Rate {
    fn new(permits_per_second: f64) -> Result<Rate, ConfigError> {
        const NAME: &str = "permits_per_second";
        let rate = positive_finite(NAME, permits_per_second)?;
        if rate > MICROS_PER_SECOND {
            return Err(ConfigError::OutOfRange {
                parameter: NAME,
                expected: "at most 1000000 (one permit per microsecond)",
            });
        }
        let interval_us = MICROS_PER_SECOND / rate;
        if interval_us > MAX_COST_US {
            return Err(ConfigError::OutOfRange {
                parameter: NAME,
                expected: "at least one permit per 2^53 microseconds (285 years)",
            });
        }
        // 1 <= interval <= 2^53, so the quotient is in [1, 2^53]; the loop only
        // corrects the division's rounding.
        let mut capacity = (MAX_COST_US / interval_us) as u64;
        while capacity > 1 && capacity as f64 * interval_us > MAX_COST_US {
            capacity -= 1;
        }
        Ok(Rate {
            permits_per_second: rate,
            interval_us,
            capacity,
        })
    }
}

/// Checks that the Redis twin counts the time to store the maximum, `refill_us`,
/// exactly.
///
/// The twin is sent this limiter's own doubles (`Arg::Float` carries them unchanged)
/// and repeats its arithmetic step by step, so any stable interval works, whole
/// microseconds or not. What it cannot count exactly is a maximum of stored permits
/// that takes more than 2^52 µs (about 142 years) to store: the time until full would
/// leave the integers a double holds; such limiters are refused. Left over: the
/// capacity lets one request cost up to 2^53 µs (285 years), so a request whose cost,
/// plus the debt before it and the time to store the maximum, passes 2^53 µs may be
/// answered 1 µs off. No configuration avoids that; realistic requests never come
/// near it.
fn script_refill(refill_us: f64, parameter: &'static str) -> Result<(), ConfigError> {
    if refill_us <= MAX_SCRIPT_MICROS as f64 {
        Ok(())
    } else {
        Err(ConfigError::Overflow { parameter })
    }
}

mod sealed {
    use std::fmt;

    use crate::error::ConfigError;

    /// What tells the Guava limiters apart, in permits and microseconds.
    pub trait Shape: Copy + fmt::Debug + PartialEq + Send + Sync + 'static {
        /// The same shape for a new stable rate (Guava's `doSetRate`).
        fn with_rate(&self, permits_per_second: f64, stable_us: f64) -> Result<Self, ConfigError>;
        /// Guava's `maxPermits`.
        fn max_permits(&self) -> f64;
        /// Guava's `coolDownIntervalMicros`: idle time per stored permit.
        fn cool_down_us(&self, stable_us: f64) -> f64;
        /// Guava's `storedPermitsToWaitTime`.
        fn stored_to_wait(&self, stable_us: f64, stored: f64, take: f64) -> i64;
        /// Stored permits of a new limiter, and after a rate change from a maximum of 0.
        fn initial_stored(&self) -> f64;
    }
}

/// The shape of a [`Smooth`] limiter: [`Bursty`] or [`WarmingUp`]. Sealed: the
/// arithmetic is Guava's, and no other shape is offered.
pub trait SmoothShape: sealed::Shape {}

impl SmoothShape for Bursty {}
impl SmoothShape for WarmingUp {}

/// Guava's `SmoothRateLimiter`, in the shape `S`: use it as [`SmoothBursty`] or
/// [`SmoothWarmingUp`].
///
/// As an [`Algorithm`], both shapes behave alike:
/// - [`reserve`](Algorithm::reserve) is Guava's `tryAcquire(n, max_wait)`, with the
///   wait truncated to whole microseconds as Guava does; the reservation's wait is
///   the debt of earlier requests;
/// - [`acquire`](Algorithm::acquire) admits only a request that can go now;
/// - `remaining` is the whole stored permits, or 0 while the next request must wait;
///   `reset_after` is the time until the stored permits are back at the maximum;
/// - [`capacity`](Algorithm::capacity) is the largest `n` whose fresh cost, `n`
///   stable intervals, stays within 2⁵³ µs (285 years); Guava grants any `int`;
/// - [`refund`](Algorithm::refund) (Guava has none) moves the next free instant
///   earlier by the cost of `n` fresh permits, never before now, and stores nothing;
/// - [`idle_at`](Algorithm::idle_at) is the next free instant: from then a fresh
///   state admits no more.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, SmoothBursty};
/// use tollgate::time::Nanos;
///
/// let bursty = SmoothBursty::new(2.0)?;
/// let mut state = bursty.initial_state(Nanos::ZERO);
/// assert!(bursty.acquire(&mut state, Nanos::ZERO, 3).is_ok());
/// // The next request pays for the last one: 3 permits at 500 ms each.
/// let denied = bursty.acquire(&mut state, Nanos::ZERO, 1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(1500)));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Smooth<S> {
    rate: Rate,
    shape: S,
}

/// # Common to both shapes
impl<S: SmoothShape> Smooth<S> {
    fn with_shape(rate: Rate, shape: S) -> Smooth<S> {
        Smooth { rate, shape }
    }

    /// Guava's `setRate`: stores the idle time up to `now` at the old rate, then
    /// scales the stored permits with the new maximum (for warm-up: keeps the
    /// coldness). The next request still pays for the previous one at the old rate.
    ///
    /// # Errors
    ///
    /// As the constructors for the rate ([`SmoothBursty::new`],
    /// [`SmoothWarmingUp::new`]); on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Limiter;
    /// use tollgate::algorithm::SmoothBursty;
    ///
    /// let limiter = Limiter::new(SmoothBursty::new(1.0)?);
    /// limiter.reconfigure(|bursty, state, now| bursty.set_rate(state, now, 2.0))?;
    /// assert_eq!(limiter.algorithm().rate(), 2.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_rate(
        &mut self,
        state: &mut SmoothState,
        now: Nanos,
        permits_per_second: f64,
    ) -> Result<(), ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let shape = self
            .shape
            .with_rate(rate.permits_per_second, rate.interval_us)?;
        self.resync(state, state.micros_at(now));
        let old_max = self.max_permits();
        *self = Smooth::with_shape(rate, shape);
        state.stored_permits = if old_max == 0.0 {
            shape.initial_stored()
        } else {
            state.stored_permits * self.max_permits() / old_max
        };
        Ok(())
    }

    /// Guava's `acquire(n)`: always reserves, and returns how long the caller must
    /// wait (for the debt of earlier requests only). `n == 0` waits for nothing and
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// [`Denied::Insufficient`] when `n` exceeds [`capacity`](Algorithm::capacity);
    /// [`Denied::Limited`] when the permits would go past the clock's end
    /// ([`Nanos::MAX`]), which no wait reaches.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SmoothBursty};
    /// use tollgate::time::Nanos;
    ///
    /// let bursty = SmoothBursty::new(1.0)?;
    /// let mut state = bursty.initial_state(Nanos::ZERO);
    /// assert_eq!(bursty.acquire_wait(&mut state, Nanos::ZERO, 4)?, Duration::ZERO);
    /// assert_eq!(bursty.acquire_wait(&mut state, Nanos::ZERO, 1)?, Duration::from_secs(4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_wait(
        &self,
        state: &mut SmoothState,
        now: Nanos,
        n: u64,
    ) -> Result<Duration, Denied> {
        self.reserve(state, now, n, Duration::MAX).map(|r| r.wait())
    }

    /// The stable rate in permits per second.
    pub fn rate(&self) -> f64 {
        self.rate.permits_per_second
    }

    /// Time per fresh permit (once warm, for [`SmoothWarmingUp`]).
    pub fn stable_interval(&self) -> Duration {
        Duration::from_secs_f64(self.rate.interval_us / MICROS_PER_SECOND)
    }

    /// The most permits idle time stores (Guava's `maxPermits`): `max_burst_seconds
    /// × rate` for [`SmoothBursty`]; for [`SmoothWarmingUp`], those of a fully cold
    /// limiter, 0 without warm-up.
    pub fn max_permits(&self) -> f64 {
        self.shape.max_permits()
    }

    fn cool_down_us(&self) -> f64 {
        self.shape.cool_down_us(self.rate.interval_us)
    }

    /// Guava's `resync`: stores the permits of the idle time up to `now_us`.
    fn resync(&self, state: &mut SmoothState, now_us: i64) {
        if now_us > state.next_free_us {
            let new_permits = (now_us - state.next_free_us) as f64 / self.cool_down_us();
            state.stored_permits = self.max_permits().min(state.stored_permits + new_permits);
            state.next_free_us = now_us;
        }
    }

    /// Guava's `reserveEarliestAvailable`: commits `n` permits and returns the
    /// microsecond from which they may be used.
    fn take(&self, state: &mut SmoothState, now_us: i64, n: u64) -> i64 {
        self.resync(state, now_us);
        let granted_at = state.next_free_us;
        let n = n as f64;
        let spend = n.min(state.stored_permits);
        let fresh = n - spend;
        let stable_us = self.rate.interval_us;
        let wait = self
            .shape
            .stored_to_wait(stable_us, state.stored_permits, spend)
            .saturating_add((fresh * stable_us) as i64);
        state.next_free_us = state.next_free_us.saturating_add(wait);
        state.stored_permits -= spend;
        granted_at
    }

    /// Limit, remaining and time until the stored permits are back at the maximum
    /// (for warm-up: fully cold), of a state already resynced to `now`.
    fn status(&self, state: &SmoothState, now_us: i64, now: Nanos) -> (u64, u64, Duration) {
        let limit = (self.max_permits() as u64).max(1);
        let remaining = if state.next_free_us > now_us {
            0
        } else {
            state.stored_permits as u64
        };
        let full_at = self.full_at(state).max(now_us);
        (
            limit,
            remaining,
            state.instant(full_at).saturating_since(now),
        )
    }

    /// The microsecond at which, without requests, the stored permits are back at the
    /// maximum.
    fn full_at(&self, state: &SmoothState) -> i64 {
        let missing = self.max_permits() - state.stored_permits;
        let refill_us = if missing > 0.0 {
            ceil_to_i64(missing * self.cool_down_us())
        } else {
            0
        };
        state.next_free_us.saturating_add(refill_us)
    }

    fn admitted(&self, state: &SmoothState, now_us: i64, now: Nanos) -> Admitted {
        let (limit, remaining, reset_after) = self.status(state, now_us, now);
        let admitted = Admitted::new(limit, remaining, reset_after);
        if remaining >= limit {
            return admitted;
        }
        // When more than `remaining` can pass (the `t` of an HTTP `RateLimit`
        // field, which the reset overstates): once prepaid time has run out, or
        // once idle time stores the next whole permit.
        let next_us = if state.next_free_us > now_us {
            state.next_free_us
        } else {
            let missing = (state.stored_permits.floor() + 1.0 - state.stored_permits).max(0.0);
            now_us.saturating_add(ceil_to_i64(missing * self.cool_down_us()))
        };
        admitted
            .with_next_permit_nanos(state.instant(next_us).saturating_since(now).as_nanos() as u64)
    }

    /// Denied until the microsecond `fits_at`.
    fn limited(&self, state: &SmoothState, now_us: i64, now: Nanos, fits_at: i64) -> Denied {
        let (limit, _, reset_after) = self.status(state, now_us, now);
        let retry_after = state.instant(fits_at).saturating_since(now);
        Limited::new(retry_after, limit, 0, reset_after).into()
    }
}

/// `x.ceil() as i64`, without the call to libm's `ceil` that x86-64's baseline
/// (no SSE4.1 rounding instruction) compiles `f64::ceil` to.
#[inline]
fn ceil_to_i64(x: f64) -> i64 {
    // Saturating, as `as` is; NaN gives 0. Every f64 of magnitude 2⁵³ or more is a
    // whole number, so the truncation below is exact there.
    let truncated = x as i64;
    if (truncated as f64) < x {
        truncated.saturating_add(1)
    } else {
        truncated
    }
}

impl<S: SmoothShape> Algorithm for Smooth<S> {
    type State = SmoothState;
    const BOOKS_AHEAD: bool = true;

    fn initial_state(&self, now: Nanos) -> SmoothState {
        SmoothState {
            stored_permits: self.shape.initial_stored(),
            next_free_us: 0,
            start: now,
        }
    }

    fn acquire(&self, state: &mut SmoothState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.rate.capacity)?;
        let now_us = state.micros_at(now);
        if n == 0 {
            let mut peeked = *state;
            self.resync(&mut peeked, now_us);
            return Ok(self.admitted(&peeked, now_us, now));
        }
        if state.next_free_us > now_us {
            return Err(self.limited(state, now_us, now, state.next_free_us));
        }
        self.take(state, now_us, n);
        Ok(self.admitted(state, now_us, now))
    }

    /// Guava's `tryAcquire(n, timeout)`, timed to the nanosecond of the granted
    /// microsecond.
    fn reserve(
        &self,
        state: &mut SmoothState,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        check_capacity(n, self.rate.capacity)?;
        if n == 0 {
            return Ok(Reservation::new(0, Duration::ZERO));
        }
        let now_us = state.micros_at(now);
        // Guava's `unit.toMicros(timeout)` truncates.
        let max_wait_us = i64::try_from(max_wait.as_micros()).unwrap_or(i64::MAX);
        let fits_at = state.next_free_us.saturating_sub(max_wait_us);
        if fits_at > now_us {
            return Err(self.limited(state, now_us, now, fits_at));
        }
        if state.checked_instant(state.next_free_us).is_none() {
            // The permits would go past the clock's end: no wait on this clock reaches
            // them, and a saturated wait would hand them out at the end at once.
            return Err(self.limited(state, now_us, now, i64::MAX));
        }
        let granted_at = self.take(state, now_us, n);
        let wait = state.instant(granted_at).saturating_since(now);
        Ok(Reservation::new(n, wait))
    }

    fn refund(&self, state: &mut SmoothState, now: Nanos, n: u64) {
        let now_us = state.micros_at(now);
        if state.next_free_us > now_us {
            let cost = (n as f64 * self.rate.interval_us) as i64;
            state.next_free_us = state.next_free_us.saturating_sub(cost).max(now_us);
        }
    }

    fn capacity(&self) -> u64 {
        self.rate.capacity
    }

    /// When the stored permits are back at the maximum. A warming-up limiter is then as
    /// cold as a new one, so forgetting it changes nothing; a bursty one restarts
    /// empty, as a new Guava limiter does, where keeping it would offer a full burst.
    /// Forgetting any earlier would cut a warming-up limiter's warmth or a bursty
    /// one's saved permits short while they still matter.
    fn idle_at(&self, state: &SmoothState) -> Nanos {
        state.instant(self.full_at(state))
    }

    /// The permits still owed for requests granted ahead (prepaid), in whole stable
    /// intervals: forgetting the state cancels that debt. Stored permits are never
    /// given back: a fresh bursty limiter has none, and a fresh warming-up one is cold.
    fn forgetting_gives_back(&self, state: &SmoothState, now: Nanos) -> u64 {
        let debt_us = state.next_free_us.saturating_sub(state.micros_at(now));
        if debt_us <= 0 {
            return 0;
        }
        // Whole intervals, so that keys that each owe one request's cost compare equal
        // whatever microsecond they were used at.
        ceil_to_i64(debt_us as f64 / self.rate.interval_us).max(0) as u64
    }
}

#[cfg(test)]
mod ceil_tests {
    use super::ceil_to_i64;
    use proptest::prelude::*;

    #[test]
    fn ceil_to_i64_matches_ceil_at_the_extremes() {
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            1.000_000_1,
            2.5e15,
            9.007_199_254_740_993e15,
            1e300,
            -1e300,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            9.223_372_036_854_775e18,
        ] {
            assert_eq!(ceil_to_i64(x), x.ceil() as i64, "{x}");
        }
    }

    proptest! {
        #[test]
        fn ceil_to_i64_matches_ceil(x in proptest::num::f64::ANY) {
            prop_assert_eq!(ceil_to_i64(x), x.ceil() as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{at, ms};

    #[test]
    fn rejects_bad_rates() {
        let name = "permits_per_second";
        assert_eq!(
            SmoothBursty::new(f64::NAN),
            Err(ConfigError::NotANumber { parameter: name })
        );
        assert_eq!(
            SmoothBursty::new(-1.0),
            Err(ConfigError::Negative {
                parameter: name,
                value: -1.0
            })
        );
        assert_eq!(
            SmoothBursty::new(0.0),
            Err(ConfigError::Zero { parameter: name })
        );
        assert_eq!(
            SmoothWarmingUp::new(f64::INFINITY, ms(1)),
            Err(ConfigError::Infinite { parameter: name })
        );
        assert!(matches!(
            SmoothBursty::new(1_000_001.0),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(matches!(
            SmoothWarmingUp::new(1e-11, ms(1)),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(SmoothBursty::new(1_000_000.0).is_ok());
        assert!(SmoothBursty::new(1e6 / MAX_COST_US).is_ok());
    }

    #[test]
    fn capacity_keeps_the_cost_within_2_pow_53_micros() {
        let bursty = SmoothBursty::new(1.0).unwrap();
        assert_eq!(bursty.capacity(), 9_007_199_254);
        let mut s = bursty.initial_state(Nanos::ZERO);
        let denied = bursty
            .acquire_wait(&mut s, Nanos::ZERO, 9_007_199_255)
            .unwrap_err();
        assert!(denied.is_never());
        assert_eq!(s, bursty.initial_state(Nanos::ZERO));
        assert_eq!(
            bursty.acquire_wait(&mut s, Nanos::ZERO, 9_007_199_254),
            Ok(Duration::ZERO)
        );
        assert_eq!(s.next_free(), Nanos::new(9_007_199_254_000_000_000));
        assert_eq!(SmoothBursty::new(1e6).unwrap().capacity(), 1 << 53);
        let slowest = SmoothBursty::new(1e6 / MAX_COST_US).unwrap();
        assert_eq!(slowest.capacity(), 1);
    }

    #[test]
    fn reports_stored_permits_and_time_to_full() {
        let bursty = SmoothBursty::new(5.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        let a = bursty.acquire(&mut s, at(2000), 2).unwrap();
        assert_eq!((a.limit(), a.remaining(), a.reset_after()), (5, 3, ms(400)));
        // 3 stored and 1 fresh: the next request waits 200 ms.
        let a = bursty.acquire(&mut s, at(2000), 4).unwrap();
        assert_eq!(
            (a.limit(), a.remaining(), a.reset_after()),
            (5, 0, ms(1200))
        );
        let d = bursty.acquire(&mut s, at(2100), 1).unwrap_err();
        let Denied::Limited(l) = d else {
            panic!("limited expected")
        };
        assert_eq!(
            (l.retry_after(), l.remaining(), l.reset_after()),
            (Some(ms(100)), 0, ms(1100))
        );
        let peek = bursty.acquire(&mut s, at(2100), 0).unwrap();
        assert_eq!(peek.reset_after(), ms(1100));

        // Warming up: fully cold at the start, so reset means cold again.
        let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        let a = warm.acquire(&mut s, Nanos::ZERO, 1).unwrap();
        assert_eq!(a.limit(), 8);
        assert_eq!(a.remaining(), 0, "the next request must wait 1.375 s");
        assert_eq!(a.reset_after(), ms(1875));
    }

    #[test]
    fn denial_changes_nothing_and_retry_is_exact_to_the_nanosecond() {
        let bursty = SmoothBursty::new(5.0).unwrap();
        let start = Nanos::new(500);
        let mut s = bursty.initial_state(start);
        bursty.acquire(&mut s, start, 1).unwrap();
        let before = s;
        let now = Nanos::new(start.as_u64() + 150_000_250);
        let d = bursty.acquire(&mut s, now, 1).unwrap_err();
        assert_eq!(s, before);
        assert_eq!(d.retry_after(), Some(Duration::from_nanos(49_999_750)));
        let d = bursty.reserve(&mut s, now, 1, ms(30)).unwrap_err();
        assert_eq!(s, before);
        assert_eq!(d.retry_after(), Some(Duration::from_nanos(19_999_750)));
        let r = bursty.reserve(&mut s, now, 1, ms(50)).unwrap();
        assert_eq!(r.wait(), Duration::from_nanos(49_999_750));
        // Forgotten once the 5 stored permits of a second are back.
        assert_eq!(
            (r.permits(), bursty.idle_at(&s)),
            (1, s.next_free() + Duration::from_secs(1))
        );
        assert_eq!(s.next_free(), start + ms(400));
    }

    #[test]
    fn zero_permits_peek_even_in_debt() {
        let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        warm.acquire_wait(&mut s, Nanos::ZERO, 3).unwrap();
        let before = s;
        assert!(warm.acquire(&mut s, Nanos::ZERO, 0).is_ok());
        assert!(
            warm.reserve(&mut s, Nanos::ZERO, 0, Duration::ZERO)
                .unwrap()
                .is_immediate()
        );
        assert_eq!(
            warm.acquire_wait(&mut s, Nanos::ZERO, 0),
            Ok(Duration::ZERO)
        );
        assert_eq!(s, before);
    }

    #[test]
    fn refund_moves_next_free_back_but_not_before_now_and_stores_nothing() {
        let bursty = SmoothBursty::new(1.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        bursty.acquire_wait(&mut s, Nanos::ZERO, 4).unwrap();
        assert_eq!(
            bursty.idle_at(&s),
            at(5000),
            "4 s of debt, then 1 s to store 1"
        );
        bursty.refund(&mut s, at(500), 2);
        assert_eq!(s.next_free(), at(2000));
        bursty.refund(&mut s, at(1000), 100);
        assert_eq!(s.next_free(), at(1000));
        assert_eq!(s.stored_permits(), 0.0);
        let before = s;
        bursty.refund(&mut s, at(3000), 5);
        assert_eq!(s, before, "nothing to give back once the debt is paid");
    }

    #[test]
    fn set_rate_rescales_stored_permits() {
        let mut bursty = SmoothBursty::new(2.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        bursty.set_rate(&mut s, at(500), 4.0).unwrap();
        assert_eq!((s.stored_permits(), bursty.max_permits()), (2.0, 4.0));
        assert_eq!(bursty.stable_interval(), ms(250));
        let mut none = SmoothBursty::with_max_burst_seconds(2.0, 0.0).unwrap();
        let mut s = none.initial_state(Nanos::ZERO);
        none.set_rate(&mut s, at(5000), 4.0).unwrap();
        assert_eq!(s.stored_permits(), 0.0);

        let mut warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        warm.acquire_wait(&mut s, Nanos::ZERO, 4).unwrap();
        warm.set_rate(&mut s, Nanos::ZERO, 4.0).unwrap();
        assert_eq!(s.stored_permits(), 8.0, "half cold stays half cold");
        assert_eq!(warm.warmup(), Duration::from_secs(4));
        assert_eq!(warm.stable_interval(), ms(250));
    }

    /// Regression: near the clock's end a reservation whose permits go past it got a
    /// wait saturated at the end, zero from there: the permits went at once.
    #[test]
    fn a_reservation_past_the_clocks_end_is_denied_not_granted_at_once() {
        let bursty = SmoothBursty::new(0.01).unwrap();
        let mut s = bursty.initial_state(Nanos::MAX);
        bursty.acquire(&mut s, Nanos::MAX, 3).unwrap();
        let denied = bursty
            .reserve(&mut s, Nanos::MAX, 3, Duration::MAX)
            .unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::ZERO));
        assert!(bursty.acquire(&mut s, Nanos::MAX, 1).is_err());
        // Within the clock, the same reservation waits its 300 s.
        let start = Nanos::new(u64::MAX - 400 * 1_000_000_000);
        let mut s = bursty.initial_state(start);
        bursty.acquire(&mut s, start, 3).unwrap();
        let r = bursty.reserve(&mut s, start, 3, Duration::MAX).unwrap();
        assert_eq!(r.wait(), Duration::from_secs(300));
        assert!(bursty.reserve(&mut s, start, 1, Duration::MAX).is_err());
    }

    #[test]
    fn extreme_times_and_sizes_saturate_without_panic() {
        let bursty = SmoothBursty::new(1e6 / MAX_COST_US).unwrap();
        let warm =
            SmoothWarmingUp::with_cold_factor(0.001, Duration::from_secs(1 << 30), 1e6).unwrap();
        let mut b = bursty.initial_state(Nanos::new(u64::MAX - 3));
        let mut w = warm.initial_state(Nanos::ZERO);
        for now in [Nanos::ZERO, Nanos::new(123_456_789), Nanos::MAX] {
            for _ in 0..2_000 {
                let _ = bursty.acquire_wait(&mut b, now, bursty.capacity());
                let _ = warm.acquire_wait(&mut w, now, warm.capacity());
            }
            assert_eq!(bursty.idle_at(&b), Nanos::MAX);
            let _ = bursty.acquire(&mut b, now, 1);
            let _ = bursty.reserve(&mut b, now, 1, Duration::MAX);
            let _ = warm.reserve(&mut w, now, u64::MAX, Duration::MAX);
            bursty.refund(&mut b, now, u64::MAX);
            warm.refund(&mut w, now, u64::MAX);
            assert!(!w.stored_permits().is_nan());
        }
    }
}
