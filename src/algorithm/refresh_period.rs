//! Resilience4j's `AtomicRateLimiter`: `limit_for_period` permits in each
//! `refresh_period`, waited for up to a timeout.
//!
//! Time since the limiter started is cut into cycles of one period. Entering a cycle
//! tops the permits up by `limit_for_period` for every cycle passed, never above the
//! limit. A request may take more than is left: the permits go negative and the caller
//! waits for the start of the cycle that pays the debt off. All arithmetic is in
//! `i128` and saturates, so no input overflows.

use std::time::Duration;

use super::script::{Arg, MAX_SCRIPT_MICROS, exact_count, whole_micros};
use super::{Algorithm, Facts, Share, check_capacity};
use crate::decision::{Admitted, Decision, Denied, InsufficientCapacity, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;
use crate::units::{
    duration_from_nanos, duration_to_nanos, positive_nanos, saturating_i64, saturating_u64,
    until_period,
};

/// `limit_for_period` permits per `refresh_period`, with callers waiting up to
/// `timeout`: Resilience4j's `AtomicRateLimiter` as a pure state machine.
///
/// It follows Resilience4j's arithmetic to the nanosecond, and improves on it in two
/// places: a request whose wait exceeds its timeout is denied at once, with nothing
/// consumed (Resilience4j blocks for the whole timeout first), and a cancelled wait
/// can give its permits back with [`refund`](Algorithm::refund).
///
/// # Capacity
///
/// As in Resilience4j, one request may ask for more than `limit_for_period`: it waits
/// for as many cycles as the permits take to accumulate. So whether a request can
/// ever succeed depends on how long it may wait: with `max_wait` it can get at most
/// `limit_for_period × (2 + (max_wait - 1) / refresh_period)` permits (the first
/// cycle's, then one cycle's worth for each period boundary within `max_wait`), and
/// `limit_for_period` when it may not wait. Asking for more is
/// [`Denied::Insufficient`]. [`capacity`](Algorithm::capacity) is that bound for the
/// longest representable wait (584 years), and never above `i64::MAX`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, RefreshPeriod};
/// use tollgate::time::Nanos;
///
/// let ms = Duration::from_millis;
/// let r4j = RefreshPeriod::new(2, ms(100), ms(150))?;
/// let mut state = r4j.initial_state(Nanos::ZERO);
/// assert!(r4j.acquire(&mut state, Nanos::ZERO, 2).is_ok());
/// // The next permits come with the next cycle, 100 ms on: within the timeout.
/// let later = r4j.reserve_permission(&mut state, Nanos::ZERO, 2)?;
/// assert_eq!(later.wait(), ms(100));
/// // Another would wait 200 ms: over the timeout, so denied at once.
/// let denied = r4j.reserve_permission(&mut state, Nanos::ZERO, 1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(ms(50)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RefreshPeriod {
    /// Permits per cycle, at most `i64::MAX`.
    limit: u64,
    /// Cycle length in nanoseconds, at least 1.
    period: u64,
    /// The configured timeout in nanoseconds.
    timeout: u64,
    /// The most one request can ever be granted.
    capacity: u64,
}

/// The state of a [`RefreshPeriod`] limiter: Resilience4j's `State` without its
/// `nanosToWait`, which is recomputed on demand
/// ([`RefreshPeriod::nanos_to_wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RefreshPeriodState {
    start: Nanos,
    active_cycle: u64,
    active_permissions: i64,
}

impl RefreshPeriodState {
    /// When cycle 0 began: the limiter's creation.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// The cycle in which the state was last brought up to date.
    pub fn active_cycle(&self) -> u64 {
        self.active_cycle
    }

    /// Permits left in the active cycle; negative when later cycles are already
    /// reserved.
    pub fn active_permissions(&self) -> i64 {
        self.active_permissions
    }
}

/// A state brought up to `now`: the current cycle and its permits.
#[derive(Clone, Copy, Debug)]
struct Current {
    /// Nanoseconds since the start.
    elapsed: u128,
    cycle: u64,
    permits: i128,
}

impl Default for RefreshPeriod {
    /// Resilience4j's defaults: 50 permits every 500 ns, waiting up to 5 s.
    fn default() -> RefreshPeriod {
        RefreshPeriod::with_nanos(50, 500, 5_000_000_000)
    }
}

/// # Configuring
impl RefreshPeriod {
    /// `limit_for_period` permits in each `refresh_period`; callers of
    /// [`reserve_permission`](RefreshPeriod::reserve_permission) wait up to `timeout`.
    /// A `timeout` beyond 584 years counts as 584 years.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit_for_period` or `refresh_period`,
    /// [`ConfigError::OutOfRange`] for a `limit_for_period` above `i64::MAX`,
    /// [`ConfigError::TooLong`] for a `refresh_period` beyond 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::ConfigError;
    /// use tollgate::algorithm::RefreshPeriod;
    ///
    /// let r4j = RefreshPeriod::new(10, Duration::from_secs(1), Duration::ZERO)?;
    /// assert_eq!(r4j.limit_for_period(), 10);
    /// assert_eq!(
    ///     RefreshPeriod::new(0, Duration::from_secs(1), Duration::ZERO),
    ///     Err(ConfigError::Zero { parameter: "limit_for_period" })
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(
        limit_for_period: u64,
        refresh_period: Duration,
        timeout: Duration,
    ) -> Result<RefreshPeriod, ConfigError> {
        let limit = check_limit(limit_for_period)?;
        let period = positive_nanos("refresh_period", refresh_period)?;
        Ok(RefreshPeriod::with_nanos(
            limit,
            period,
            duration_to_nanos(timeout),
        ))
    }

    fn with_nanos(limit: u64, period: u64, timeout: u64) -> RefreshPeriod {
        let mut r = RefreshPeriod {
            limit,
            period,
            timeout,
            capacity: 0,
        };
        r.capacity = r.most_within(u64::MAX).min(i64::MAX as u64);
        r
    }

    /// Permits per cycle.
    pub fn limit_for_period(&self) -> u64 {
        self.limit
    }

    /// The length of a cycle.
    pub fn refresh_period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// How long [`reserve_permission`](RefreshPeriod::reserve_permission) lets a
    /// caller wait.
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout)
    }

    /// Sets the timeout of [`reserve_permission`](RefreshPeriod::reserve_permission)
    /// (Resilience4j's `changeTimeoutDuration`). A `timeout` beyond 584 years counts
    /// as 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::RefreshPeriod;
    ///
    /// let mut r4j = RefreshPeriod::default();
    /// r4j.change_timeout(Duration::from_secs(1));
    /// assert_eq!(r4j.timeout(), Duration::from_secs(1));
    /// ```
    pub fn change_timeout(&mut self, timeout: Duration) {
        self.timeout = duration_to_nanos(timeout);
    }

    /// Sets the permits per cycle, keeping the state (Resilience4j's
    /// `changeLimitForPeriod`). The current cycle keeps the permits it has; the new
    /// limit applies from the next cycle on. Unlike Resilience4j, which refreshes
    /// lazily, cycles that passed before `now` are credited at the old limit.
    ///
    /// # Errors
    ///
    /// As [`RefreshPeriod::new`] for `limit_for_period`; nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, RefreshPeriod};
    /// use tollgate::time::Nanos;
    ///
    /// let mut r4j = RefreshPeriod::new(1, Duration::from_nanos(100), Duration::ZERO)?;
    /// let mut state = r4j.initial_state(Nanos::ZERO);
    /// r4j.acquire(&mut state, Nanos::ZERO, 1)?;
    /// r4j.change_limit_for_period(&mut state, Nanos::ZERO, 2)?;
    /// assert!(r4j.acquire(&mut state, Nanos::new(50), 1).is_err());
    /// assert_eq!(r4j.acquire(&mut state, Nanos::new(100), 2)?.remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn change_limit_for_period(
        &mut self,
        state: &mut RefreshPeriodState,
        now: Nanos,
        limit_for_period: u64,
    ) -> Result<(), ConfigError> {
        let limit = check_limit(limit_for_period)?;
        let current = self.current(state, now);
        self.store(state, current.cycle, current.permits);
        *self = RefreshPeriod::with_nanos(limit, self.period, self.timeout);
        Ok(())
    }
}

/// # Deciding
impl RefreshPeriod {
    /// Reserves `n` permits, waiting up to the configured
    /// [`timeout`](RefreshPeriod::timeout): Resilience4j's `reservePermission`, except
    /// that a wait over the timeout is denied at once.
    ///
    /// # Errors
    ///
    /// As [`Algorithm::reserve`] with `max_wait` = the timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, RefreshPeriod};
    /// use tollgate::time::Nanos;
    ///
    /// let r4j = RefreshPeriod::new(1, Duration::from_millis(10), Duration::from_millis(10))?;
    /// let mut state = r4j.initial_state(Nanos::ZERO);
    /// assert!(r4j.reserve_permission(&mut state, Nanos::ZERO, 1)?.is_immediate());
    /// let wait = r4j.reserve_permission(&mut state, Nanos::ZERO, 1)?.wait();
    /// assert_eq!(wait, Duration::from_millis(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_permission(
        &self,
        state: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
    ) -> Result<Reservation, Denied> {
        self.reserve(state, now, n, self.timeout())
    }

    /// Takes every permit left in the current cycle (Resilience4j's
    /// `drainPermissions`), so the next ones come with the next cycle. Reservations
    /// already made (negative permits) stay.
    ///
    /// Resilience4j subtracts the permits it last stored, which after an idle cycle
    /// boundary are stale; this drains what the current cycle actually holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, RefreshPeriod};
    /// use tollgate::time::Nanos;
    ///
    /// let r4j = RefreshPeriod::new(10, Duration::from_nanos(100), Duration::ZERO)?;
    /// let mut state = r4j.initial_state(Nanos::ZERO);
    /// r4j.drain(&mut state, Nanos::new(10));
    /// assert!(r4j.acquire(&mut state, Nanos::new(10), 1).is_err());
    /// assert!(r4j.acquire(&mut state, Nanos::new(100), 1).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&self, state: &mut RefreshPeriodState, now: Nanos) {
        let current = self.current(state, now);
        self.store(state, current.cycle, current.permits.min(0));
    }

    /// The permits available at `now`, negative when later cycles are reserved
    /// (Resilience4j's `getAvailablePermissions`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, RefreshPeriod};
    /// use tollgate::time::Nanos;
    ///
    /// let r4j = RefreshPeriod::new(1, Duration::from_nanos(100), Duration::from_nanos(100))?;
    /// let mut state = r4j.initial_state(Nanos::ZERO);
    /// r4j.reserve_permission(&mut state, Nanos::ZERO, 2)?;
    /// assert_eq!(r4j.available_permissions(&state, Nanos::ZERO), -1);
    /// assert_eq!(r4j.available_permissions(&state, Nanos::new(100)), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_permissions(&self, state: &RefreshPeriodState, now: Nanos) -> i64 {
        saturating_i64(self.current(state, now).permits)
    }

    /// How long one permit would wait at `now` (Resilience4j's `getNanosToWait`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, RefreshPeriod};
    /// use tollgate::time::Nanos;
    ///
    /// let r4j = RefreshPeriod::new(1, Duration::from_nanos(100), Duration::ZERO)?;
    /// let mut state = r4j.initial_state(Nanos::ZERO);
    /// r4j.acquire(&mut state, Nanos::new(30), 1)?;
    /// assert_eq!(r4j.nanos_to_wait(&state, Nanos::new(30)), Duration::from_nanos(70));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nanos_to_wait(&self, state: &RefreshPeriodState, now: Nanos) -> Duration {
        duration_from_nanos(self.wait(&self.current(state, now), 1))
    }

    /// The state brought up to `now`: a cycle change tops the permits up by one
    /// limit per cycle passed, capped at the limit.
    fn current(&self, state: &RefreshPeriodState, now: Nanos) -> Current {
        let elapsed = now.as_u64().saturating_sub(state.start.as_u64());
        // A `now` from before the active cycle (a clock read that lost a race)
        // stays in that cycle.
        let cycle = if self.in_cycle(elapsed, state.active_cycle) {
            // Most calls land in the active cycle: no division to find it.
            state.active_cycle
        } else {
            (elapsed / self.period).max(state.active_cycle)
        };
        let mut permits = i128::from(state.active_permissions);
        if cycle != state.active_cycle {
            let gained = i128::from(cycle - state.active_cycle).saturating_mul(self.limit.into());
            permits = permits.saturating_add(gained).min(self.limit.into());
        }
        Current {
            elapsed: elapsed.into(),
            cycle,
            permits,
        }
    }

    /// Whether `elapsed` nanoseconds since the start fall in `cycle`.
    #[inline]
    fn in_cycle(&self, elapsed: u64, cycle: u64) -> bool {
        cycle
            .checked_mul(self.period)
            .is_some_and(|start| elapsed >= start && elapsed - start < self.period)
    }

    /// The first cycle, from the current one on, whose permits reach `target`.
    fn cycle_reaching(&self, current: &Current, target: i128) -> i128 {
        let missing = target.saturating_sub(current.permits).max(0);
        let cycles = match u64::try_from(missing) {
            Ok(0) => 0,
            // The common case in 64 bits: a 128-bit division costs several times more.
            Ok(missing) => i128::from(missing.div_ceil(self.limit)),
            // missing > 0 and limit >= 1: a plain ceiling division.
            Err(_) => {
                let limit = i128::from(self.limit);
                missing.saturating_add(limit - 1) / limit
            }
        };
        i128::from(current.cycle).saturating_add(cycles)
    }

    /// Nanoseconds from `current` until the start of `cycle` (zero for the current
    /// cycle).
    fn until_cycle(&self, current: &Current, cycle: i128) -> i128 {
        match u128::try_from(cycle) {
            Ok(cycle) if cycle > u128::from(current.cycle) => {
                let wait = until_period(self.period, current.elapsed, cycle);
                i128::try_from(wait).unwrap_or(i128::MAX)
            }
            _ => 0,
        }
    }

    /// Resilience4j's `nanosToWaitForPermission`: zero if `n` are there, else the
    /// time to the start of the cycle that has them.
    fn wait(&self, current: &Current, n: i128) -> i128 {
        self.until_cycle(current, self.cycle_reaching(current, n))
    }

    /// Time until the permits are back to the full limit.
    fn until_full(&self, current: &Current) -> i128 {
        self.until_cycle(current, self.cycle_reaching(current, self.limit.into()))
    }

    /// The most permits a request waiting at most `max_wait` nanoseconds can ever
    /// get: from a full cycle at its last nanosecond, one more limit per period.
    fn most_within(&self, max_wait: u64) -> u64 {
        if max_wait == 0 {
            return self.limit;
        }
        let cycles = 2 + u128::from((max_wait - 1) / self.period);
        saturating_u64(cycles.saturating_mul(self.limit.into()))
    }

    fn store(&self, state: &mut RefreshPeriodState, cycle: u64, permits: i128) {
        state.active_cycle = cycle;
        state.active_permissions = saturating_i64(permits);
    }

    fn limited(&self, current: &Current, retry_after: i128) -> Denied {
        Limited::deferred(
            nanos(retry_after),
            self.limit,
            remaining(current.permits),
            1,
            nanos(self.until_full(current)),
        )
        .into()
    }

    /// Resilience4j's `calculateNextState` with a timeout of `max_wait`, committing
    /// only a grant. Returns the state after the grant and the wait.
    fn decide(
        &self,
        state: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
        max_wait: u64,
    ) -> Result<(Current, i128), Denied> {
        check_capacity(n, self.capacity)?;
        let mut current = self.current(state, now);
        if n == 0 {
            return Ok((current, 0));
        }
        let wait = self.wait(&current, n.into());
        if wait > i128::from(max_wait) {
            let most = self.most_within(max_wait);
            if n > most {
                return Err(InsufficientCapacity::new(n, most).into());
            }
            return Err(self.limited(&current, wait - i128::from(max_wait)));
        }
        let left = i128::from(u64::MAX - now.as_u64());
        if wait > left {
            // Granted in a cycle past the clock's end: no wait on this clock reaches
            // it, and a saturated wait would hand the permits out at the end at once.
            return Err(self.limited(&current, left));
        }
        let n = i128::from(n);
        let after = current.permits - n;
        let floor = i128::from(i64::MIN);
        if after < floor {
            // Reservations this deep would not fit the state: wait until the debt
            // has shrunk enough.
            let cycle = self.cycle_reaching(&current, floor + n);
            return Err(self.limited(&current, self.until_cycle(&current, cycle)));
        }
        self.store(state, current.cycle, after);
        current.permits = after;
        Ok((current, wait))
    }
}

impl RefreshPeriod {
    /// The common admission, decided in 64 bits as [`decide`](Self::decide) and
    /// `acquire` would: `n` of the permits left in the active cycle. `None` when the
    /// call needs the general path (another cycle, too few permits, `n` of 0 or over
    /// the capacity).
    ///
    /// Then nothing is booked ahead, so the permits left are at least 0 and the cycle
    /// that refills them is the next one at most: no division and no 128-bit
    /// arithmetic, which were most of an admission's cost.
    #[inline]
    fn admit_in_cycle(
        &self,
        state: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
    ) -> Option<Admitted> {
        if n == 0 || n > self.capacity {
            return None;
        }
        let elapsed = now.as_u64().saturating_sub(state.start.as_u64());
        // As `in_cycle`: the active cycle's start fits, and `elapsed` falls in it.
        let cycle_start = state.active_cycle.checked_mul(self.period)?;
        let into = elapsed
            .checked_sub(cycle_start)
            .filter(|&into| into < self.period)?;
        let after = u64::try_from(state.active_permissions)
            .ok()?
            .checked_sub(n)?;
        // after <= active_permissions <= i64::MAX.
        state.active_permissions = after as i64;
        // Full again now, or at the next cycle's start.
        let until_full = if after >= self.limit {
            0
        } else {
            self.period - into
        };
        Some(Admitted::deferred(self.limit, after, 1, until_full))
    }
}

fn check_limit(limit: u64) -> Result<u64, ConfigError> {
    let limit = non_zero("limit_for_period", limit)?;
    if limit > i64::MAX as u64 {
        return Err(ConfigError::OutOfRange {
            parameter: "limit_for_period",
            expected: "at most i64::MAX",
        });
    }
    Ok(limit)
}

/// Nanoseconds as a decision holds them: saturating, and never negative.
fn nanos(nanos: i128) -> u64 {
    u64::try_from(nanos.max(0)).unwrap_or(u64::MAX)
}

fn remaining(permits: i128) -> u64 {
    saturating_u64(u128::try_from(permits).unwrap_or(0))
}

impl Algorithm for RefreshPeriod {
    type State = RefreshPeriodState;
    const BOOKS_AHEAD: bool = true;

    fn initial_state(&self, now: Nanos) -> RefreshPeriodState {
        RefreshPeriodState {
            start: now,
            active_cycle: 0,
            active_permissions: saturating_i64(self.limit.into()),
        }
    }

    fn acquire(&self, state: &mut RefreshPeriodState, now: Nanos, n: u64) -> Decision {
        if let Some(admitted) = self.admit_in_cycle(state, now, n) {
            return Ok(admitted);
        }
        let (current, _) = self.decide(state, now, n, 0)?;
        Ok(Admitted::deferred(
            self.limit,
            remaining(current.permits),
            1,
            nanos(self.until_full(&current)),
        ))
    }

    fn reserve(
        &self,
        state: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let (_, wait) = self.decide(state, now, n, duration_to_nanos(max_wait))?;
        Ok(Reservation::new(n, duration_from_nanos(wait)))
    }

    /// Gives `n` permits back to the current cycle, never above the limit: a
    /// cancelled wait returns what it reserved.
    fn refund(&self, state: &mut RefreshPeriodState, now: Nanos, n: u64) {
        let current = self.current(state, now);
        let limit = i128::from(self.limit);
        if current.permits < limit {
            let permits = current.permits.saturating_add(n.into()).min(limit);
            self.store(state, current.cycle, permits);
        }
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The start of the cycle in which the permits are back to the full limit.
    fn idle_at(&self, state: &RefreshPeriodState) -> Nanos {
        let current = Current {
            elapsed: 0,
            cycle: state.active_cycle,
            permits: state.active_permissions.into(),
        };
        let cycle = self.cycle_reaching(&current, self.limit.into());
        let since_start = until_period(self.period, 0, u128::try_from(cycle).unwrap_or(0));
        let at = since_start.saturating_add(state.start.as_u64().into());
        Nanos::new(saturating_u64(at))
    }
}

/// The facts of Resilience4j's limiter. Its Redis twin reads `{period µs, limit per
/// period, capacity}`; the timeout is not sent, as a store's reservations wait up to
/// the request's own `max_wait`.
impl Facts for RefreshPeriod {
    const NAME: &'static str = "refresh_period";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/refresh_period.lua");

    /// The refresh period.
    fn window(&self) -> Duration {
        self.refresh_period()
    }

    /// The permits of one period: the capacity counts the periods a reservation may
    /// book ahead.
    fn quota(&self) -> u64 {
        self.limit_for_period()
    }

    /// The permits per period divided; the period and the timeout kept.
    fn per_node(&self, share: Share) -> Result<RefreshPeriod, ConfigError> {
        RefreshPeriod::new(
            share.count(self.limit_for_period())?,
            self.refresh_period(),
            self.timeout(),
        )
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let period = whole_micros(self.refresh_period(), "refresh_period")?;
        let limit = exact_count(self.limit_for_period(), "limit_for_period")?;
        // A grant waits at most 2^52 µs (the script's cap on `max_wait`), so
        // reservations book at most ⌈2^52 µs / period⌉ cycles ahead: the deepest debt.
        // The script counts it exactly up to 2^53.
        let deepest_debt = MAX_SCRIPT_MICROS
            .div_ceil(period)
            .checked_mul(limit)
            .filter(|&debt| debt <= 2 * MAX_SCRIPT_MICROS);
        if deepest_debt.is_none() {
            return Err(ConfigError::OutOfRange {
                parameter: "limit_for_period",
                expected: "such that limit_for_period × ⌈2^52 µs / refresh_period⌉, the \
                           deepest debt the Redis script counts, is at most 2^53 (about 2 \
                           permits per µs)",
            });
        }
        // A request asks for at most 2^52 permits, so a larger capacity never denies.
        let capacity = self.capacity().min(MAX_SCRIPT_MICROS);
        Ok(vec![Arg::Int(period), Arg::Int(limit), Arg::Int(capacity)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::too_long;
    use proptest::prelude::*;

    /// Resilience4j's `AtomicRateLimiterTest` constants: one permit per 250 ms.
    const CYCLE: u64 = 250_000_000;

    fn setup(timeout: u64) -> (RefreshPeriod, RefreshPeriodState) {
        let r = RefreshPeriod::new(
            1,
            Duration::from_nanos(CYCLE),
            Duration::from_nanos(timeout),
        )
        .unwrap();
        let s = r.initial_state(Nanos::ZERO);
        (r, s)
    }

    fn at(nanos: u64) -> Nanos {
        Nanos::new(nanos)
    }

    /// Resilience4j's `reservePermission` result: 0, the wait, or -1 when rejected.
    fn reserve_permission(
        r: &RefreshPeriod,
        s: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
    ) -> i64 {
        match r.reserve_permission(s, now, n) {
            Ok(reservation) => reservation.wait().as_nanos() as i64,
            Err(_) => -1,
        }
    }

    fn metrics(r: &RefreshPeriod, s: &RefreshPeriodState, now: Nanos) -> (i64, u64) {
        (
            r.available_permissions(s, now),
            r.nanos_to_wait(s, now).as_nanos() as u64,
        )
    }

    /// `acquire` without its in-cycle path: the general decision alone.
    fn general_acquire(
        r: &RefreshPeriod,
        s: &mut RefreshPeriodState,
        now: Nanos,
        n: u64,
    ) -> Decision {
        let (current, _) = r.decide(s, now, n, 0)?;
        Ok(Admitted::deferred(
            r.limit,
            remaining(current.permits),
            1,
            nanos(r.until_full(&current)),
        ))
    }

    proptest! {
        /// The in-cycle admission (64 bits, no division) must decide, and leave the
        /// state, as the general path: same decisions, same states, step by step,
        /// through lowered and raised limits, reservations ahead and clock reads that
        /// lost a race.
        #[test]
        fn the_in_cycle_admission_decides_as_the_general_path(
            limit in 1u64..6,
            period in 1u64..50,
            timeout in 0u64..120,
            start in prop_oneof![Just(0u64), Just(u64::MAX - 1_000), 0u64..1_000_000],
            steps in prop::collection::vec((0u64..60, 0u64..8, 0u8..10, 1u64..8), 1..60),
        ) {
            let mut r = RefreshPeriod::new(
                limit,
                Duration::from_nanos(period),
                Duration::from_nanos(timeout),
            )
            .unwrap();
            let mut fast = r.initial_state(Nanos::new(start));
            let mut general = fast;
            let mut now = start;
            for (advance, n, kind, value) in steps {
                now = now.saturating_add(advance);
                // Now and then a clock read from just before.
                let at = Nanos::new(if kind == 9 { now.saturating_sub(value) } else { now });
                match kind {
                    0 => {
                        // A reservation ahead, as `reserve` books it.
                        let a = r.reserve(&mut fast, at, value, Duration::from_nanos(timeout));
                        let b = r.reserve(&mut general, at, value, Duration::from_nanos(timeout));
                        prop_assert_eq!(a, b);
                    }
                    1 => {
                        let mut other = r;
                        r.change_limit_for_period(&mut fast, at, value).unwrap();
                        other.change_limit_for_period(&mut general, at, value).unwrap();
                        prop_assert_eq!(r, other);
                    }
                    _ => {
                        let a = r.acquire(&mut fast, at, n);
                        let b = general_acquire(&r, &mut general, at, n);
                        prop_assert_eq!(a, b, "n {} at {}", n, at.as_u64());
                    }
                }
                prop_assert_eq!(fast, general);
            }
        }
    }

    #[test]
    fn defaults_are_resilience4j_defaults() {
        let r = RefreshPeriod::default();
        assert_eq!(r.limit_for_period(), 50);
        assert_eq!(r.refresh_period(), Duration::from_nanos(500));
        assert_eq!(r.timeout(), Duration::from_secs(5));
    }

    #[test]
    fn permissions_in_first_cycle() {
        let (r, s) = setup(0);
        assert_eq!(r.available_permissions(&s, at(CYCLE - 10)), 1);
    }

    #[test]
    fn acquire_and_refresh() {
        let (r, mut s) = setup(0);
        assert!(r.acquire(&mut s, at(CYCLE), 1).is_ok());
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert!(r.acquire(&mut s, at(CYCLE), 1).is_err());
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert!(r.acquire(&mut s, at(2 * CYCLE), 1).is_ok());
        assert_eq!(metrics(&r, &s, at(2 * CYCLE)), (0, CYCLE));
        assert!(r.acquire(&mut s, at(2 * CYCLE), 1).is_err());
        assert_eq!(metrics(&r, &s, at(2 * CYCLE)), (0, CYCLE));
    }

    #[test]
    fn reserve_and_refresh() {
        let (r, mut s) = setup(CYCLE);
        assert!(r.acquire(&mut s, at(CYCLE), 1).is_ok());
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), CYCLE as i64);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, 2 * CYCLE));
        assert_eq!(metrics(&r, &s, at(2 * CYCLE + 10)), (0, CYCLE - 10));
    }

    #[test]
    fn reserve_few_then_skip_cycles_before_refresh() {
        let (r, mut s) = setup(CYCLE);
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), 0);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), CYCLE as i64);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, 2 * CYCLE));
        let before = s;
        let denied = r.reserve_permission(&mut s, at(CYCLE), 1).unwrap_err();
        // Denied at once, with how much sooner than the timeout the wait would end.
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(CYCLE)));
        assert_eq!(s, before, "a denial changes nothing");
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, 2 * CYCLE));
        assert_eq!(metrics(&r, &s, at(6 * CYCLE + 10)), (1, 0));
    }

    #[test]
    fn reserve_many_cycles_if_weight_greater_than_limit_per_period() {
        let (r, mut s) = setup(5 * CYCLE);
        let wait = reserve_permission(&r, &mut s, at(CYCLE), 3);
        assert_eq!(wait, 2 * CYCLE as i64);
        assert_eq!(r.available_permissions(&s, at(CYCLE)), -2);
    }

    #[test]
    fn rejected_by_timeout() {
        let (r, mut s) = setup(0);
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), 0);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), -1);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (0, CYCLE));
        assert_eq!(metrics(&r, &s, at(2 * CYCLE - 1)), (0, 1));
    }

    /// Resilience4j's `waitingThreadIsInterrupted` keeps the interrupted caller's
    /// reservation (-1 permits, 2 cycles to wait); a refund gives it back.
    #[test]
    fn cancelled_wait_gives_its_permits_back() {
        let (r, mut s) = setup(CYCLE);
        assert!(r.acquire(&mut s, at(CYCLE), 1).is_ok());
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), CYCLE as i64);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, 2 * CYCLE));
        r.refund(&mut s, at(CYCLE + 5), 1);
        assert_eq!(metrics(&r, &s, at(CYCLE + 5)), (0, CYCLE - 5));
    }

    #[test]
    fn change_permissions_limit_between_cycles() {
        let (mut r, mut s) = setup(CYCLE);
        assert!(r.acquire(&mut s, at(CYCLE), 1).is_ok());
        assert_eq!(reserve_permission(&r, &mut s, at(CYCLE), 1), CYCLE as i64);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, 2 * CYCLE));
        r.change_limit_for_period(&mut s, at(CYCLE), 2).unwrap();
        assert_eq!(r.limit_for_period(), 2);
        assert_eq!(metrics(&r, &s, at(CYCLE)), (-1, CYCLE));
        assert_eq!(metrics(&r, &s, at(2 * CYCLE + 10)), (1, 0));
    }

    #[test]
    fn reserve_permissions_upfront() {
        let cycle = 10_000_000;
        let r =
            RefreshPeriod::new(3, Duration::from_millis(10), Duration::from_millis(12)).unwrap();
        let mut s = r.initial_state(Nanos::ZERO);
        let waits: Vec<i64> = (0..9)
            .map(|i| reserve_permission(&r, &mut s, at(cycle + i + 1), 1))
            .collect();
        let c = cycle as i64;
        assert_eq!(waits, [0, 0, 0, c - 4, c - 5, c - 6, -1, -1, -1]);
    }

    #[test]
    fn change_timeout_and_limit_keep_the_rest() {
        let (mut r, mut s) = setup(0);
        r.change_timeout(Duration::from_secs(1));
        assert_eq!(r.timeout(), Duration::from_secs(1));
        assert_eq!(r.limit_for_period(), 1);
        r.change_limit_for_period(&mut s, at(0), 35).unwrap();
        assert_eq!(r.limit_for_period(), 35);
        assert_eq!(r.timeout(), Duration::from_secs(1));
        assert_eq!(r.refresh_period(), Duration::from_nanos(CYCLE));
    }

    /// Resilience4j's `RateLimitersImplementationTest`.
    #[test]
    fn big_requests_within_a_cycle() {
        let r = RefreshPeriod::new(10, Duration::from_millis(500), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        assert!(r.acquire(&mut s, at(1), 5).is_ok());
        assert!(r.acquire(&mut s, at(2), 5).is_ok());
        assert!(r.acquire(&mut s, at(3), 1).is_err());
        assert!(r.acquire(&mut s, at(500_000_000), 1).is_ok());

        let mut s = r.initial_state(at(0));
        assert!(r.acquire(&mut s, at(1), 1).is_ok());
        assert!(r.acquire(&mut s, at(2), 5).is_ok());
        assert!(r.acquire(&mut s, at(3), 5).is_err());
        assert!(r.acquire(&mut s, at(500_000_000), 5).is_ok());
    }

    #[test]
    fn drain_takes_what_is_left_of_the_cycle() {
        let r = RefreshPeriod::new(10, Duration::from_millis(250), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        r.drain(&mut s, at(1));
        assert!(r.acquire(&mut s, at(2), 1).is_err());
        assert!(r.acquire(&mut s, at(250_000_000), 1).is_ok());
        r.drain(&mut s, at(250_000_001));
        assert!(r.acquire(&mut s, at(250_000_002), 10).is_err());
        let drained = s;
        r.drain(&mut s, at(250_000_003));
        assert_eq!(s, drained, "draining an empty cycle changes nothing");
    }

    /// Resilience4j drains the permits it last stored; after an idle cycle boundary
    /// that count is stale and the fresh cycle's permits survived the drain.
    #[test]
    fn drain_after_an_idle_cycle_boundary_drains_the_new_cycle() {
        let r = RefreshPeriod::new(10, Duration::from_nanos(100), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        r.acquire(&mut s, at(0), 10).unwrap();
        r.drain(&mut s, at(150));
        assert!(r.acquire(&mut s, at(150), 1).is_err());
    }

    #[test]
    fn drain_keeps_reservations() {
        let r =
            RefreshPeriod::new(1, Duration::from_nanos(100), Duration::from_nanos(100)).unwrap();
        let mut s = r.initial_state(at(0));
        r.reserve_permission(&mut s, at(0), 2).unwrap();
        r.drain(&mut s, at(0));
        assert_eq!(s.active_permissions(), -1);
    }

    #[test]
    fn acquire_reports_remaining_and_reset() {
        let r =
            RefreshPeriod::new(3, Duration::from_nanos(100), Duration::from_nanos(300)).unwrap();
        let mut s = r.initial_state(at(0));
        let a = r.acquire(&mut s, at(40), 2).unwrap();
        assert_eq!(a, Admitted::new(3, 1, Duration::from_nanos(60)));
        r.reserve(&mut s, at(40), 5, Duration::from_nanos(300))
            .unwrap();
        // -4 left: two more cycles to climb back to 3 after the next.
        assert_eq!(s.active_permissions(), -4);
        match r.acquire(&mut s, at(40), 1).unwrap_err() {
            Denied::Limited(l) => {
                assert_eq!(l.retry_after(), Some(Duration::from_nanos(160)));
                assert_eq!(l.remaining(), 0);
                assert_eq!(l.reset_after(), Duration::from_nanos(260));
            }
            other => panic!("not never: {other:?}"),
        }
        assert_eq!(r.idle_at(&s), at(300));
    }

    #[test]
    fn never_grantable_within_max_wait_is_insufficient() {
        let r = RefreshPeriod::new(2, Duration::from_nanos(100), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        // Without waiting, one cycle's limit is the most.
        let never = r.acquire(&mut s, at(0), 3).unwrap_err();
        assert_eq!(never, InsufficientCapacity::new(3, 2).into());
        // Waiting up to 1 ns: at a cycle's last nanosecond, this and the next cycle.
        let never = r
            .reserve(&mut s, at(0), 5, Duration::from_nanos(1))
            .unwrap_err();
        assert_eq!(never, InsufficientCapacity::new(5, 4).into());
        // 4 can wait for the end of the cycle.
        let later = r
            .reserve(&mut s, at(0), 4, Duration::from_nanos(1))
            .unwrap_err();
        assert_eq!(later.retry_after(), Some(Duration::from_nanos(99)));
        let r4 = r
            .reserve(&mut s, at(99), 4, Duration::from_nanos(1))
            .unwrap();
        assert_eq!(r4.wait(), Duration::from_nanos(1));
        assert_eq!(s.active_permissions(), -2);
    }

    #[test]
    fn zero_is_a_peek_even_in_debt() {
        let r =
            RefreshPeriod::new(1, Duration::from_nanos(100), Duration::from_nanos(500)).unwrap();
        let mut s = r.initial_state(at(0));
        r.reserve_permission(&mut s, at(0), 3).unwrap();
        let before = s;
        let peek = r.acquire(&mut s, at(0), 0).unwrap();
        assert_eq!(peek.remaining(), 0);
        assert!(
            r.reserve(&mut s, at(0), 0, Duration::ZERO)
                .unwrap()
                .is_immediate()
        );
        assert_eq!(s, before);
    }

    #[test]
    fn refund_never_exceeds_the_limit() {
        let r = RefreshPeriod::new(3, Duration::from_nanos(100), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        r.acquire(&mut s, at(0), 1).unwrap();
        r.refund(&mut s, at(0), 10);
        assert_eq!(s.active_permissions(), 3);
        r.refund(&mut s, at(0), u64::MAX);
        assert_eq!(s.active_permissions(), 3);
    }

    #[test]
    fn a_lowered_limit_keeps_this_cycles_permits() {
        let mut r = RefreshPeriod::new(5, Duration::from_nanos(100), Duration::ZERO).unwrap();
        let mut s = r.initial_state(at(0));
        r.change_limit_for_period(&mut s, at(10), 2).unwrap();
        assert_eq!(r.available_permissions(&s, at(10)), 5);
        r.refund(&mut s, at(10), 1);
        assert_eq!(s.active_permissions(), 5, "a refund never lowers permits");
        assert_eq!(r.available_permissions(&s, at(100)), 2);
    }

    #[test]
    fn limit_change_credits_past_cycles_at_the_old_limit() {
        let mut r =
            RefreshPeriod::new(1, Duration::from_nanos(100), Duration::from_secs(1)).unwrap();
        let mut s = r.initial_state(at(0));
        r.reserve_permission(&mut s, at(0), 4).unwrap();
        assert_eq!(s.active_permissions(), -3);
        // Two cycles passed at 1 per cycle: -1 now, and 10 from the next cycle on.
        r.change_limit_for_period(&mut s, at(250), 10).unwrap();
        assert_eq!(r.available_permissions(&s, at(250)), -1);
        assert_eq!(r.available_permissions(&s, at(300)), 9);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let s = Duration::from_secs(1);
        assert_eq!(
            RefreshPeriod::new(0, s, s),
            Err(ConfigError::Zero {
                parameter: "limit_for_period"
            })
        );
        assert!(matches!(
            RefreshPeriod::new(i64::MAX as u64 + 1, s, s),
            Err(ConfigError::OutOfRange {
                parameter: "limit_for_period",
                ..
            })
        ));
        assert!(RefreshPeriod::new(i64::MAX as u64, s, s).is_ok());
        assert_eq!(
            RefreshPeriod::new(1, Duration::ZERO, s),
            Err(ConfigError::Zero {
                parameter: "refresh_period"
            })
        );
        assert_eq!(
            RefreshPeriod::new(1, Duration::MAX, s),
            Err(crate::units::too_long("refresh_period"))
        );
        assert_eq!(
            RefreshPeriod::new(1, s, Duration::MAX).unwrap().timeout(),
            Duration::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn bad_limit_change_changes_nothing() {
        let mut r = RefreshPeriod::default();
        let mut s = r.initial_state(at(0));
        r.acquire(&mut s, at(0), 1).unwrap();
        let (r0, s0) = (r, s);
        assert!(r.change_limit_for_period(&mut s, at(10_000), 0).is_err());
        assert!(
            r.change_limit_for_period(&mut s, at(10_000), u64::MAX)
                .is_err()
        );
        assert_eq!((r, s), (r0, s0));
    }

    #[test]
    fn capacity_is_what_the_longest_wait_allows() {
        assert_eq!(
            RefreshPeriod::default().capacity(),
            50 * (2 + (u64::MAX - 1) / 500)
        );
        let r =
            RefreshPeriod::new(1, Duration::from_secs(100 * 365 * 86_400), Duration::ZERO).unwrap();
        // 584 years hold five 100-year cycles: six boundaries from the best start.
        assert_eq!(r.capacity(), 7);
        let r = RefreshPeriod::new(3, Duration::from_nanos(1), Duration::ZERO).unwrap();
        assert_eq!(
            r.capacity(),
            i64::MAX as u64,
            "permits must fit the i64 state"
        );
        let mut s = r.initial_state(at(0));
        assert!(r.acquire(&mut s, at(0), u64::MAX).unwrap_err().is_never());
    }

    /// With 1 ns cycles, reservations could run the permits below `i64::MIN`; such a
    /// request waits until the debt has shrunk.
    #[test]
    fn debt_stops_at_the_bottom_of_i64() {
        let r = RefreshPeriod::new(1, Duration::from_nanos(1), Duration::MAX).unwrap();
        let mut s = r.initial_state(at(0));
        r.reserve_permission(&mut s, at(0), i64::MAX as u64)
            .unwrap();
        r.reserve_permission(&mut s, at(0), 2).unwrap();
        assert_eq!(s.active_permissions(), i64::MIN);
        let before = s;
        let denied = r.reserve_permission(&mut s, at(0), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
        assert_eq!(s, before);
        assert!(r.reserve_permission(&mut s, at(1), 1).is_ok());
        assert_eq!(s.active_permissions(), i64::MIN);
    }

    #[test]
    fn extreme_times_and_sizes_never_panic() {
        for (limit, period) in [(1, 1), (i64::MAX as u64, 1), (1, u64::MAX), (7, 13)] {
            let mut r =
                RefreshPeriod::new(limit, Duration::from_nanos(period), Duration::MAX).unwrap();
            for start in [Nanos::ZERO, Nanos::MAX] {
                let mut s = r.initial_state(start);
                for now in [Nanos::ZERO, Nanos::new(1), Nanos::MAX] {
                    for n in [0, 1, r.capacity(), u64::MAX] {
                        let _ = r.acquire(&mut s, now, n);
                        let _ = r.reserve(&mut s, now, n, Duration::MAX);
                        let _ = r.reserve_permission(&mut s, now, n);
                        r.refund(&mut s, now, n);
                    }
                    let _ = r.idle_at(&s);
                    let _ = r.nanos_to_wait(&s, now);
                    r.drain(&mut s, now);
                    r.change_limit_for_period(&mut s, now, limit).unwrap();
                }
            }
        }
        assert_eq!(duration_from_nanos(i128::MAX), Duration::MAX);
    }

    fn waiting_a_second(limit: u64, period: Duration) -> RefreshPeriod {
        RefreshPeriod::new(limit, period, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn whole_microsecond_periods_are_script_args() {
        let r = waiting_a_second(10, Duration::from_millis(250));
        assert_eq!(
            r.script_args(),
            Ok(vec![
                Arg::Int(250_000),
                Arg::Int(10),
                Arg::Int(r.capacity())
            ])
        );
        let fast = waiting_a_second(1, Duration::from_micros(1));
        assert_eq!(fast.script_args().unwrap()[2], Arg::Int(MAX_SCRIPT_MICROS));
    }

    #[test]
    fn a_sub_microsecond_period_has_no_script_args() {
        let r = waiting_a_second(1, Duration::from_nanos(2_500));
        assert!(matches!(
            r.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "refresh_period",
                ..
            })
        ));
    }

    #[test]
    fn a_period_beyond_two_to_the_52_micros_has_no_script_args() {
        let r = waiting_a_second(1, Duration::from_micros((1 << 52) + 1));
        assert_eq!(
            r.script_args(),
            Err(too_long("refresh_period", MAX_SCRIPT_MICROS))
        );
    }

    #[test]
    fn a_debt_beyond_two_to_the_53_has_no_script_args() {
        for fits in [
            waiting_a_second(1_000_000, Duration::from_secs(1)),
            waiting_a_second(1_000, Duration::from_millis(1)),
            waiting_a_second(1, Duration::from_micros(1)),
            waiting_a_second(2, Duration::from_micros(1)),
            waiting_a_second(1 << 52, Duration::from_micros(1 << 52)),
        ] {
            assert!(fits.script_args().is_ok(), "{fits:?}");
        }
        let too_fast = [
            waiting_a_second(2_000_000, Duration::from_secs(1)),
            waiting_a_second(3, Duration::from_micros(1)),
        ];
        for r in too_fast {
            assert!(
                matches!(
                    r.script_args(),
                    Err(ConfigError::OutOfRange {
                        parameter: "limit_for_period",
                        ..
                    })
                ),
                "{r:?}"
            );
        }
    }

    #[test]
    fn a_limit_beyond_two_to_the_52_has_no_script_args() {
        for limit in [(1 << 52) + 1, i64::MAX as u64] {
            let r = waiting_a_second(limit, Duration::from_micros(1 << 52));
            assert_eq!(
                r.script_args(),
                Err(ConfigError::Overflow {
                    parameter: "limit_for_period"
                })
            );
        }
    }
}
