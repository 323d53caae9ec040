//! Guava's `RateLimiter`: [`SmoothBursty`] and [`SmoothWarmingUp`].
//!
//! The state remembers when the *next* request may go (`next_free`) and how many
//! permits idle time has stored. A request is granted at `next_free` whatever its
//! size, and its cost pushes `next_free` later: the caller waits only for earlier
//! debt, and the next caller pays for this one (the prepay).
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

use super::{check_capacity, Algorithm};
use crate::clock::Nanos;
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::engine::Locked;
use crate::error::{non_negative_finite, positive_finite, ConfigError};

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
/// use tollgate::clock::Nanos;
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
    fn instant(&self, us: i64) -> Nanos {
        let ns = u64::try_from(us).unwrap_or(0).saturating_mul(1000);
        Nanos::new(self.start.as_u64().saturating_add(ns))
    }

    /// Whole microseconds from the start to `now`, as Guava's stopwatch reads them.
    fn micros_at(&self, now: Nanos) -> i64 {
        // u64::MAX / 1000 fits an i64.
        (now.as_u64().saturating_sub(self.start.as_u64()) / 1000) as i64
    }
}

/// The validated rate both limiters share.
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

/// What tells the two limiters apart; the shared Guava steps are default methods.
trait Shape {
    fn stable(&self) -> &Rate;
    /// Guava's `maxPermits`.
    fn max_permits(&self) -> f64;
    /// Guava's `coolDownIntervalMicros`: idle time per stored permit.
    fn cool_down_us(&self) -> f64;
    /// Guava's `storedPermitsToWaitTime`.
    fn stored_to_wait(&self, stored: f64, take: f64) -> i64;
    /// Stored permits of a new limiter.
    fn initial_stored(&self) -> f64;

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
        let wait = self
            .stored_to_wait(state.stored_permits, spend)
            .saturating_add((fresh * self.stable().interval_us) as i64);
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
        let missing = self.max_permits() - state.stored_permits;
        let refill_us = if missing > 0.0 {
            (missing * self.cool_down_us()).ceil() as i64
        } else {
            0
        };
        let full_at = state.next_free_us.max(now_us).saturating_add(refill_us);
        (
            limit,
            remaining,
            state.instant(full_at).saturating_since(now),
        )
    }

    fn admitted(&self, state: &SmoothState, now_us: i64, now: Nanos) -> Admitted {
        let (limit, remaining, reset_after) = self.status(state, now_us, now);
        Admitted::new(limit, remaining, reset_after)
    }

    /// Denied until the microsecond `fits_at`.
    fn limited(&self, state: &SmoothState, now_us: i64, now: Nanos, fits_at: i64) -> Denied {
        let (limit, _, reset_after) = self.status(state, now_us, now);
        let retry_after = state.instant(fits_at).saturating_since(now);
        Limited::new(retry_after, limit, 0, reset_after).into()
    }

    fn decide(&self, state: &mut SmoothState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.stable().capacity)?;
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
    fn try_reserve(
        &self,
        state: &mut SmoothState,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        check_capacity(n, self.stable().capacity)?;
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
        let granted_at = self.take(state, now_us, n);
        let wait = state.instant(granted_at).saturating_since(now);
        Ok(Reservation::new(n, wait))
    }

    fn give_back(&self, state: &mut SmoothState, now: Nanos, n: u64) {
        let now_us = state.micros_at(now);
        if state.next_free_us > now_us {
            let cost = (n as f64 * self.stable().interval_us) as i64;
            state.next_free_us = state.next_free_us.saturating_sub(cost).max(now_us);
        }
    }
}

/// Guava's `SmoothBursty`: up to `max_burst_seconds` of unused rate is stored, and
/// stored permits cost nothing.
///
/// A new limiter stores nothing. The state remembers when the *next* request may go;
/// a request is granted then, whatever its size, and its cost pushes that instant
/// later: a caller waits only for earlier debt, and the next caller pays for this
/// one (the prepay). Time is counted in whole microseconds since
/// [`initial_state`](Algorithm::initial_state) and the arithmetic is Guava's, step by
/// step, so every wait in microseconds equals Guava's.
///
/// As an [`Algorithm`] (the same for [`SmoothWarmingUp`]):
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
/// Deliberate differences from Guava: the rate must be finite (Guava's `+inf`
/// admits everything) and at most 10⁶ per second (above that, one permit costs 0 µs
/// after Guava's truncation, so single permits are never limited), and at least one
/// per 2⁵³ µs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Limiter;
/// use tollgate::algorithm::SmoothBursty;
/// use tollgate::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(SmoothBursty::new(5.0)?, clock.clone());
/// // Guava's RateLimiter.create(5.0).acquire(), three times: 0 s, 0.2 s, 0.2 s.
/// for expected in [0, 200, 200] {
///     let wait = limiter.reserve(1, Duration::MAX)?.wait();
///     assert_eq!(wait, Duration::from_millis(expected));
///     clock.advance(wait);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothBursty {
    rate: Rate,
    max_burst_seconds: f64,
    max_permits: f64,
}

fn bursty_max(max_burst_seconds: f64, rate: &Rate) -> Result<f64, ConfigError> {
    let seconds = non_negative_finite("max_burst_seconds", max_burst_seconds)?;
    let max = seconds * rate.permits_per_second;
    if max.is_finite() {
        Ok(max)
    } else {
        Err(ConfigError::Overflow {
            parameter: "max_burst_seconds",
        })
    }
}

impl SmoothBursty {
    /// Guava's `RateLimiter.create(permits_per_second)`: stores up to one second of
    /// permits.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NotANumber`], [`ConfigError::Negative`], [`ConfigError::Zero`]
    /// or [`ConfigError::Infinite`] for such a rate (Guava allows `+inf`);
    /// [`ConfigError::OutOfRange`] above 10⁶ per second or below one per 2⁵³ µs.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::SmoothBursty;
    ///
    /// assert_eq!(SmoothBursty::new(10.0)?.max_permits(), 10.0);
    /// assert!(SmoothBursty::new(f64::INFINITY).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits_per_second: f64) -> Result<SmoothBursty, ConfigError> {
        SmoothBursty::with_max_burst_seconds(permits_per_second, 1.0)
    }

    /// A bursty limiter storing up to `max_burst_seconds` of permits.
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::new`] for the rate; for `max_burst_seconds`,
    /// [`ConfigError::NotANumber`], [`ConfigError::Negative`] or
    /// [`ConfigError::Infinite`], and [`ConfigError::Overflow`] if the maximum
    /// number of permits is not a finite `f64`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::SmoothBursty;
    ///
    /// let bursty = SmoothBursty::with_max_burst_seconds(2.0, 10.0)?;
    /// assert_eq!(bursty.max_permits(), 20.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_max_burst_seconds(
        permits_per_second: f64,
        max_burst_seconds: f64,
    ) -> Result<SmoothBursty, ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let max_permits = bursty_max(max_burst_seconds, &rate)?;
        Ok(SmoothBursty {
            rate,
            max_burst_seconds,
            max_permits,
        })
    }

    /// Guava's `setRate`: stores the idle time up to `now` at the old rate, then
    /// scales the stored permits with the new maximum. The next request still pays
    /// for the previous one at the old rate.
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::with_max_burst_seconds`]; on error nothing changes.
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
        let max_permits = bursty_max(self.max_burst_seconds, &rate)?;
        self.resync(state, state.micros_at(now));
        let old_max = self.max_permits;
        self.rate = rate;
        self.max_permits = max_permits;
        state.stored_permits = if old_max == 0.0 {
            0.0
        } else {
            state.stored_permits * max_permits / old_max
        };
        Ok(())
    }

    /// Changes how many seconds of permits may be stored. Guava has no such call:
    /// here the idle time up to `now` is stored first, and the stored permits are
    /// kept, cut to the new maximum (never scaled up).
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::with_max_burst_seconds`]; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, SmoothBursty};
    /// use tollgate::clock::Nanos;
    ///
    /// let mut bursty = SmoothBursty::new(10.0)?;
    /// let mut state = bursty.initial_state(Nanos::ZERO);
    /// let later = Nanos::new(5_000_000_000);
    /// bursty.set_max_burst_seconds(&mut state, later, 0.5)?;
    /// assert_eq!(state.stored_permits(), 5.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_max_burst_seconds(
        &mut self,
        state: &mut SmoothState,
        now: Nanos,
        max_burst_seconds: f64,
    ) -> Result<(), ConfigError> {
        let max_permits = bursty_max(max_burst_seconds, &self.rate)?;
        self.resync(state, state.micros_at(now));
        self.max_burst_seconds = max_burst_seconds;
        self.max_permits = max_permits;
        state.stored_permits = state.stored_permits.min(max_permits);
        Ok(())
    }

    /// Guava's `acquire(n)`: always reserves, and returns how long the caller must
    /// wait (for the debt of earlier requests only). `n == 0` waits for nothing and
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// [`Denied::Insufficient`] when `n` exceeds [`capacity`](Algorithm::capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SmoothBursty};
    /// use tollgate::clock::Nanos;
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
        self.try_reserve(state, now, n, Duration::MAX)
            .map(|r| r.wait())
    }

    /// The stable rate in permits per second.
    pub fn rate(&self) -> f64 {
        self.rate.permits_per_second
    }

    /// Time per fresh permit.
    pub fn stable_interval(&self) -> Duration {
        Duration::from_secs_f64(self.rate.interval_us / MICROS_PER_SECOND)
    }

    /// How many seconds of permits may be stored.
    pub fn max_burst_seconds(&self) -> f64 {
        self.max_burst_seconds
    }

    /// The most permits idle time stores: `max_burst_seconds * rate`.
    pub fn max_permits(&self) -> f64 {
        self.max_permits
    }
}

impl Shape for SmoothBursty {
    fn stable(&self) -> &Rate {
        &self.rate
    }

    fn max_permits(&self) -> f64 {
        self.max_permits
    }

    fn cool_down_us(&self) -> f64 {
        self.rate.interval_us
    }

    fn stored_to_wait(&self, _stored: f64, _take: f64) -> i64 {
        0
    }

    fn initial_stored(&self) -> f64 {
        0.0
    }
}

/// Guava's `SmoothWarmingUp`: after idle time the limiter is *cold* and grants
/// slowly, speeding up to the stable rate over the warm-up period.
///
/// Stored permits measure coldness: a new limiter is fully cold. Taking the stored
/// permits above the threshold costs from `cold_factor` stable intervals down to one;
/// the time to go from cold to the threshold is the warm-up. Requests are granted by
/// prepay, and the [`Algorithm`] methods behave as for [`SmoothBursty`].
///
/// A zero warm-up means no warm-up: nothing is stored and each permit costs the
/// stable interval. (Guava divides 0 by 0 there, and its `NaN` stops all limiting.)
///
/// The decision's `remaining` reports whole stored permits, so for this limiter it
/// counts coldness; `reset_after` is the time until fully cold again.
///
/// # Examples
///
/// Guava's `testWarmUp`: 2 per second, 4 s of warm-up.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, SmoothWarmingUp};
/// use tollgate::clock::Nanos;
///
/// let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
/// let mut state = warm.initial_state(Nanos::ZERO);
/// let mut now = Nanos::ZERO;
/// let mut waits = Vec::new();
/// for _ in 0..8 {
///     let wait = warm.acquire_wait(&mut state, now, 1)?;
///     waits.push(wait.as_micros());
///     now = now + wait;
/// }
/// assert_eq!(waits, [0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000, 500_000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothWarmingUp {
    rate: Rate,
    /// Guava's `warmupPeriodMicros`.
    warmup_us: u64,
    cold_factor: f64,
    threshold_permits: f64,
    max_permits: f64,
    slope: f64,
    cool_down_us: f64,
}

impl SmoothWarmingUp {
    /// Guava's `RateLimiter.create(permits_per_second, warmup)`: cold factor 3.
    ///
    /// # Errors
    ///
    /// As [`SmoothWarmingUp::with_cold_factor`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SmoothWarmingUp;
    ///
    /// let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
    /// assert_eq!(warm.max_permits(), 8.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits_per_second: f64, warmup: Duration) -> Result<SmoothWarmingUp, ConfigError> {
        SmoothWarmingUp::with_cold_factor(permits_per_second, warmup, 3.0)
    }

    /// A warming-up limiter whose coldest permit costs `cold_factor` stable
    /// intervals. The warm-up is truncated to whole microseconds, as Guava does; a
    /// zero warm-up means none: each permit costs the stable interval.
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::new`] for the rate; [`ConfigError::Overflow`] for a warm-up
    /// over 2⁵³ µs (285 years); for `cold_factor`, [`ConfigError::NotANumber`],
    /// [`ConfigError::Infinite`], and [`ConfigError::OutOfRange`] below 1 or so large
    /// that the warm-up's slope is not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SmoothWarmingUp;
    ///
    /// let warm = SmoothWarmingUp::with_cold_factor(5.0, Duration::from_secs(4), 10.0)?;
    /// assert_eq!(warm.cold_factor(), 10.0);
    /// assert!(SmoothWarmingUp::with_cold_factor(5.0, Duration::from_secs(4), 0.5).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_cold_factor(
        permits_per_second: f64,
        warmup: Duration,
        cold_factor: f64,
    ) -> Result<SmoothWarmingUp, ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let warmup_us = u64::try_from(warmup.as_micros())
            .ok()
            .filter(|&us| us as f64 <= MAX_COST_US)
            .ok_or(ConfigError::Overflow {
                parameter: "warmup",
            })?;
        if cold_factor.is_nan() {
            return Err(ConfigError::NotANumber {
                parameter: "cold_factor",
            });
        }
        if cold_factor.is_infinite() && cold_factor > 0.0 {
            return Err(ConfigError::Infinite {
                parameter: "cold_factor",
            });
        }
        if cold_factor < 1.0 {
            return Err(ConfigError::OutOfRange {
                parameter: "cold_factor",
                expected: "at least 1",
            });
        }
        SmoothWarmingUp::build(rate, warmup_us, cold_factor)
    }

    /// Guava's `doSetRate` formulas, in its operation order.
    fn build(rate: Rate, warmup_us: u64, cold_factor: f64) -> Result<SmoothWarmingUp, ConfigError> {
        let stable = rate.interval_us;
        let warmup = warmup_us as f64;
        let (threshold_permits, max_permits, slope, cool_down_us) = if warmup_us == 0 {
            // No warm-up: nothing is ever stored (Guava would divide 0 by 0 here).
            (0.0, 0.0, 0.0, f64::INFINITY)
        } else {
            let cold_interval = stable * cold_factor;
            let threshold = 0.5 * warmup / stable;
            let max = threshold + 2.0 * warmup / (stable + cold_interval);
            let slope = (cold_interval - stable) / (max - threshold);
            if !slope.is_finite() {
                return Err(ConfigError::OutOfRange {
                    parameter: "cold_factor",
                    expected: "small enough for a finite warm-up slope",
                });
            }
            (threshold, max, slope, warmup / max)
        };
        Ok(SmoothWarmingUp {
            rate,
            warmup_us,
            cold_factor,
            threshold_permits,
            max_permits,
            slope,
            cool_down_us,
        })
    }

    /// Guava's `setRate`: stores the idle time up to `now` at the old rate, then
    /// scales the stored permits with the new maximum, keeping the coldness. The
    /// next request still pays for the previous one at the old rate.
    ///
    /// # Errors
    ///
    /// As [`SmoothWarmingUp::with_cold_factor`]; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SmoothWarmingUp};
    /// use tollgate::clock::Nanos;
    ///
    /// let mut warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
    /// let mut state = warm.initial_state(Nanos::ZERO);
    /// warm.set_rate(&mut state, Nanos::ZERO, 4.0)?;
    /// assert_eq!(warm.max_permits(), 16.0);
    /// assert_eq!(state.stored_permits(), 16.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_rate(
        &mut self,
        state: &mut SmoothState,
        now: Nanos,
        permits_per_second: f64,
    ) -> Result<(), ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let next = SmoothWarmingUp::build(rate, self.warmup_us, self.cold_factor)?;
        self.resync(state, state.micros_at(now));
        let old_max = self.max_permits;
        *self = next;
        state.stored_permits = if old_max == 0.0 {
            self.max_permits
        } else {
            state.stored_permits * self.max_permits / old_max
        };
        Ok(())
    }

    /// Guava's `acquire(n)`: always reserves, and returns how long the caller must
    /// wait (for the debt of earlier requests only). `n == 0` waits for nothing and
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// [`Denied::Insufficient`] when `n` exceeds [`capacity`](Algorithm::capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SmoothWarmingUp};
    /// use tollgate::clock::Nanos;
    ///
    /// let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
    /// let mut state = warm.initial_state(Nanos::ZERO);
    /// assert_eq!(warm.acquire_wait(&mut state, Nanos::ZERO, 1)?, Duration::ZERO);
    /// let cold = warm.acquire_wait(&mut state, Nanos::ZERO, 1)?;
    /// assert_eq!(cold, Duration::from_micros(1_375_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_wait(
        &self,
        state: &mut SmoothState,
        now: Nanos,
        n: u64,
    ) -> Result<Duration, Denied> {
        self.try_reserve(state, now, n, Duration::MAX)
            .map(|r| r.wait())
    }

    /// The stable rate in permits per second.
    pub fn rate(&self) -> f64 {
        self.rate.permits_per_second
    }

    /// Time per fresh permit once warm.
    pub fn stable_interval(&self) -> Duration {
        Duration::from_secs_f64(self.rate.interval_us / MICROS_PER_SECOND)
    }

    /// The time from fully cold to the threshold under saturated demand.
    pub fn warmup(&self) -> Duration {
        Duration::from_micros(self.warmup_us)
    }

    /// How many stable intervals the coldest permit costs.
    pub fn cold_factor(&self) -> f64 {
        self.cold_factor
    }

    /// Stored permits when fully cold; 0 without warm-up.
    pub fn max_permits(&self) -> f64 {
        self.max_permits
    }
}

impl SmoothWarmingUp {
    /// Guava's `permitsToTime`: the interval at `permits` above the threshold.
    fn time_at(&self, permits: f64) -> f64 {
        self.rate.interval_us + permits * self.slope
    }
}

impl Shape for SmoothWarmingUp {
    fn stable(&self) -> &Rate {
        &self.rate
    }

    fn max_permits(&self) -> f64 {
        self.max_permits
    }

    fn cool_down_us(&self) -> f64 {
        self.cool_down_us
    }

    fn stored_to_wait(&self, stored: f64, take: f64) -> i64 {
        let above = stored - self.threshold_permits;
        let mut take = take;
        let mut micros: i64 = 0;
        if above > 0.0 {
            let taken_above = above.min(take);
            let length = self.time_at(above) + self.time_at(above - taken_above);
            micros = (taken_above * length / 2.0) as i64;
            take -= taken_above;
        }
        micros.saturating_add((self.rate.interval_us * take) as i64)
    }

    /// Fully cold.
    fn initial_stored(&self) -> f64 {
        self.max_permits
    }
}

// The `Algorithm` methods are the same for both; `SmoothBursty` documents them.
macro_rules! smooth_algorithm {
    ($limiter:ty) => {
        impl Algorithm for $limiter {
            type State = SmoothState;
            type Cell = Locked<Self>;

            fn initial_state(&self, now: Nanos) -> SmoothState {
                SmoothState {
                    stored_permits: self.initial_stored(),
                    next_free_us: 0,
                    start: now,
                }
            }

            fn acquire(&self, state: &mut SmoothState, now: Nanos, n: u64) -> Decision {
                self.decide(state, now, n)
            }

            fn reserve(
                &self,
                state: &mut SmoothState,
                now: Nanos,
                n: u64,
                max_wait: Duration,
            ) -> Result<Reservation, Denied> {
                self.try_reserve(state, now, n, max_wait)
            }

            fn refund(&self, state: &mut SmoothState, now: Nanos, n: u64) {
                self.give_back(state, now, n)
            }

            fn capacity(&self) -> u64 {
                self.rate.capacity
            }

            fn idle_at(&self, state: &SmoothState) -> Nanos {
                state.next_free()
            }
        }
    };
}

smooth_algorithm!(SmoothBursty);
smooth_algorithm!(SmoothWarmingUp);

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at_ms(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

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
    fn rejects_bad_max_burst_seconds() {
        let name = "max_burst_seconds";
        let bad = |secs| SmoothBursty::with_max_burst_seconds(1.0, secs).unwrap_err();
        assert_eq!(bad(f64::NAN), ConfigError::NotANumber { parameter: name });
        assert_eq!(
            bad(-0.5),
            ConfigError::Negative {
                parameter: name,
                value: -0.5
            }
        );
        assert_eq!(
            bad(f64::INFINITY),
            ConfigError::Infinite { parameter: name }
        );
        assert_eq!(
            SmoothBursty::with_max_burst_seconds(1e6, f64::MAX).unwrap_err(),
            ConfigError::Overflow { parameter: name }
        );
        assert!(SmoothBursty::with_max_burst_seconds(1.0, 0.0).is_ok());
    }

    #[test]
    fn rejects_bad_warmup_and_cold_factor() {
        assert_eq!(
            SmoothWarmingUp::new(1.0, Duration::MAX),
            Err(ConfigError::Overflow {
                parameter: "warmup"
            })
        );
        let cold = |factor| SmoothWarmingUp::with_cold_factor(1.0, ms(1000), factor);
        assert_eq!(
            cold(f64::NAN),
            Err(ConfigError::NotANumber {
                parameter: "cold_factor"
            })
        );
        assert_eq!(
            cold(f64::INFINITY),
            Err(ConfigError::Infinite {
                parameter: "cold_factor"
            })
        );
        for bad in [0.5, 0.0, -2.0, f64::NEG_INFINITY, 1e300, f64::MAX] {
            assert!(
                matches!(cold(bad), Err(ConfigError::OutOfRange { .. })),
                "cold factor {bad}"
            );
        }
        assert!(cold(1.0).is_ok());
    }

    #[test]
    fn zero_warmup_limits_at_the_stable_rate_instead_of_admitting_everything() {
        // Guava: 0 / 0 makes the stored permits NaN, and every wait becomes 0.
        let warm = SmoothWarmingUp::new(5.0, Duration::ZERO).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        assert_eq!(s.stored_permits(), 0.0);
        let waits: Vec<_> = (0..3)
            .map(|_| warm.acquire_wait(&mut s, Nanos::ZERO, 1).unwrap())
            .collect();
        assert_eq!(waits, [ms(0), ms(200), ms(400)]);
        // Idle time stores nothing: still one at a time.
        let later = at_ms(60_000);
        let admitted = warm.acquire(&mut s, later, 1).unwrap();
        assert_eq!((admitted.limit(), admitted.remaining()), (1, 0));
        assert_eq!(s.stored_permits(), 0.0);
        let denied = warm.acquire(&mut s, later, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(200)));
        // Under a microsecond of warm-up truncates to none, as in Guava.
        let sub = SmoothWarmingUp::new(5.0, Duration::from_nanos(999)).unwrap();
        assert_eq!(sub.max_permits(), 0.0);
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
        let a = bursty.acquire(&mut s, at_ms(2000), 2).unwrap();
        assert_eq!((a.limit(), a.remaining(), a.reset_after()), (5, 3, ms(400)));
        // 3 stored and 1 fresh: the next request waits 200 ms.
        let a = bursty.acquire(&mut s, at_ms(2000), 4).unwrap();
        assert_eq!(
            (a.limit(), a.remaining(), a.reset_after()),
            (5, 0, ms(1200))
        );
        let d = bursty.acquire(&mut s, at_ms(2100), 1).unwrap_err();
        let Denied::Limited(l) = d else {
            panic!("limited expected")
        };
        assert_eq!(
            (l.retry_after(), l.remaining(), l.reset_after()),
            (ms(100), 0, ms(1100))
        );
        let peek = bursty.acquire(&mut s, at_ms(2100), 0).unwrap();
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
        assert_eq!((r.permits(), bursty.idle_at(&s)), (1, s.next_free()));
        assert_eq!(s.next_free(), start + ms(400));
    }

    #[test]
    fn zero_permits_peek_even_in_debt() {
        let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        warm.acquire_wait(&mut s, Nanos::ZERO, 3).unwrap();
        let before = s;
        assert!(warm.acquire(&mut s, Nanos::ZERO, 0).is_ok());
        assert!(warm
            .reserve(&mut s, Nanos::ZERO, 0, Duration::ZERO)
            .unwrap()
            .is_immediate());
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
        assert_eq!(bursty.idle_at(&s), at_ms(4000));
        bursty.refund(&mut s, at_ms(500), 2);
        assert_eq!(s.next_free(), at_ms(2000));
        bursty.refund(&mut s, at_ms(1000), 100);
        assert_eq!(s.next_free(), at_ms(1000));
        assert_eq!(s.stored_permits(), 0.0);
        let before = s;
        bursty.refund(&mut s, at_ms(3000), 5);
        assert_eq!(s, before, "nothing to give back once the debt is paid");
    }

    #[test]
    fn set_max_burst_seconds_cuts_stored_permits_and_fails_cleanly() {
        let mut bursty = SmoothBursty::new(10.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        bursty
            .set_max_burst_seconds(&mut s, at_ms(5000), 0.5)
            .unwrap();
        assert_eq!((s.stored_permits(), bursty.max_permits()), (5.0, 5.0));
        bursty
            .set_max_burst_seconds(&mut s, at_ms(5000), 3.0)
            .unwrap();
        assert_eq!(
            s.stored_permits(),
            5.0,
            "raising the maximum stores nothing"
        );
        assert_eq!(bursty.max_burst_seconds(), 3.0);
        let (old, old_state) = (bursty, s);
        assert!(bursty
            .set_max_burst_seconds(&mut s, at_ms(9000), -1.0)
            .is_err());
        assert!(bursty.set_rate(&mut s, at_ms(9000), f64::NAN).is_err());
        assert_eq!((bursty, s), (old, old_state));
    }

    #[test]
    fn set_rate_rescales_stored_permits() {
        let mut bursty = SmoothBursty::new(2.0).unwrap();
        let mut s = bursty.initial_state(Nanos::ZERO);
        bursty.set_rate(&mut s, at_ms(500), 4.0).unwrap();
        assert_eq!((s.stored_permits(), bursty.max_permits()), (2.0, 4.0));
        assert_eq!(bursty.stable_interval(), ms(250));
        let mut none = SmoothBursty::with_max_burst_seconds(2.0, 0.0).unwrap();
        let mut s = none.initial_state(Nanos::ZERO);
        none.set_rate(&mut s, at_ms(5000), 4.0).unwrap();
        assert_eq!(s.stored_permits(), 0.0);

        let mut warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        warm.acquire_wait(&mut s, Nanos::ZERO, 4).unwrap();
        warm.set_rate(&mut s, Nanos::ZERO, 4.0).unwrap();
        assert_eq!(s.stored_permits(), 8.0, "half cold stays half cold");
        assert_eq!(warm.warmup(), Duration::from_secs(4));
        assert_eq!(warm.stable_interval(), ms(250));
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
