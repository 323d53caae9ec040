//! Sliding window counter, as Cloudflare describes it: the count of the current fixed
//! window plus the previous window's count weighted by how much of it still overlaps
//! the rolling window.
//!
//! `estimate = previous × (W − elapsed) / W + current`, with `elapsed` the time since
//! the current window began; `n` is admitted if `estimate + n ≤ limit`. The comparison
//! is exact, in integers (`previous × (W − elapsed) + (current + n) × W ≤ limit × W`
//! in `u128`).

use std::time::Duration;

use super::script::{Arg, MAX_SCRIPT_MICROS, exact_count, too_long, whole_micros};
use super::{Algorithm, Facts, FromConfig, Share, check_capacity};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;
use crate::units::{positive_nanos, saturating_u64, until_period};

/// An approximate rolling window in constant memory: the current window's count plus
/// the previous one's, weighted by its overlap (Cloudflare).
///
/// Windows fall on multiples of the window length from the clock's origin.
///
/// Reservations are immediate only: a future booking would have to be counted in a
/// window that does not exist yet, and the estimate at that time also depends on how
/// the previous window's weight decays meanwhile, so it cannot be booked exactly. A
/// reservation that cannot go now is denied with the same `retry_after` as
/// [`acquire`](Algorithm::acquire).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, SlidingCounter};
/// use tollgate::time::Nanos;
///
/// // Cloudflare's example: 50 per minute, 42 in the last minute, 18 in this one.
/// let counter = SlidingCounter::new(50, Duration::from_secs(60))?;
/// let mut state = counter.initial_state(Nanos::ZERO);
/// let at = |s: u64| Nanos::new(s * 1_000_000_000);
/// counter.acquire(&mut state, at(30), 42)?;
/// counter.acquire(&mut state, at(75), 17)?;
/// // 15 s into the minute: 42 × 45/60 + 18 = 49.5 ≤ 50, so the 18th fits...
/// assert!(counter.acquire(&mut state, at(75), 1).is_ok());
/// // ...and a 19th does not: 50.5.
/// assert!(counter.acquire(&mut state, at(75), 1).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlidingCounter {
    limit: u64,
    window: u64,
}

/// The state of a [`SlidingCounter`]: a window index and two counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SlidingCounterState {
    index: u64,
    current: u64,
    previous: u64,
}

impl SlidingCounterState {
    /// The window, counted from the clock's origin, that `current` belongs to.
    pub fn window_index(&self) -> u64 {
        self.index
    }

    /// Permits taken in that window.
    pub fn current(&self) -> u64 {
        self.current
    }

    /// Permits taken in the window before it.
    pub fn previous(&self) -> u64 {
        self.previous
    }
}

/// The state rolled forward to a time within its current window.
struct Rolled {
    state: SlidingCounterState,
    /// Nanoseconds since the window began.
    elapsed: u64,
    /// The time the decision is made at: `now`, or the start of a window that another
    /// thread, reading the clock later, already moved to.
    at: u64,
}

impl SlidingCounter {
    /// At most about `limit` permits in any window of length `window`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit` or `window`,
    /// [`ConfigError::TooLong`] for a window over 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingCounter};
    ///
    /// let counter = SlidingCounter::new(100, Duration::from_secs(60))?;
    /// assert_eq!(counter.capacity(), 100);
    /// assert!(SlidingCounter::new(100, Duration::ZERO).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<SlidingCounter, ConfigError> {
        Ok(SlidingCounter {
            limit: non_zero("limit", limit)?,
            window: positive_nanos("window", window)?,
        })
    }

    /// Changes the limit, keeping the counts.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero limit; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingCounter};
    ///
    /// let mut counter = SlidingCounter::new(100, Duration::from_secs(60))?;
    /// counter.set_limit(200)?;
    /// assert_eq!(counter.capacity(), 200);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_limit(&mut self, limit: u64) -> Result<(), ConfigError> {
        self.limit = non_zero("limit", limit)?;
        Ok(())
    }

    /// The most permits the estimate allows.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    fn roll(&self, state: &SlidingCounterState, now: u64) -> Rolled {
        let index = now / self.window;
        if index < state.index {
            return Rolled {
                state: *state,
                elapsed: 0,
                at: state.index.saturating_mul(self.window),
            };
        }
        let (current, previous) = match index - state.index {
            0 => (state.current, state.previous),
            1 => (0, state.current),
            _ => (0, 0),
        };
        Rolled {
            state: SlidingCounterState {
                index,
                current,
                previous,
            },
            elapsed: now % self.window,
            at: now,
        }
    }

    /// `previous × (W − elapsed) + current × W`: what the estimate uses, in
    /// permit-nanoseconds (saturating, which only overstates it past any capacity).
    fn used(&self, previous: u64, current: u64, elapsed: u64) -> u128 {
        let w = u128::from(self.window);
        let weighted = u128::from(previous) * (w - u128::from(elapsed).min(w));
        weighted.saturating_add(u128::from(current) * w)
    }

    /// `limit × W`, below `u128::MAX`.
    fn capacity_nanos(&self) -> u128 {
        u128::from(self.limit) * u128::from(self.window)
    }

    fn fits(&self, previous: u64, current: u64, elapsed: u64, n: u64) -> bool {
        let need = u128::from(n) * u128::from(self.window);
        self.used(previous, current, elapsed).saturating_add(need) <= self.capacity_nanos()
    }

    /// Whole permits left under the estimate.
    fn remaining(&self, rolled: &Rolled) -> u64 {
        let s = &rolled.state;
        let room =
            self.capacity_nanos()
                .saturating_sub(self.used(s.previous, s.current, rolled.elapsed));
        saturating_u64(room / u128::from(self.window))
    }

    /// The earliest time from which `n` fit, if nothing else is taken.
    fn allowed_at(&self, rolled: &Rolled, n: u64) -> u64 {
        let s = &rolled.state;
        let (w, limit) = (u128::from(self.window), u128::from(self.limit));
        let start = until_period(self.window, 0, s.index.into());
        let next = start.saturating_add(w);
        let (n, current, previous) = (u128::from(n), u128::from(s.current), u128::from(s.previous));
        // In this window: previous × (W − e) ≤ (limit − current − n) × W.
        if let Some(spare) = limit.checked_sub(current + n) {
            // W − e ≤ span; no previous count would have fitted already.
            if let Some(span) = (spare * w).checked_div(previous) {
                if (1..w).contains(&span) {
                    return saturating_u64(next - span).max(rolled.at);
                }
            }
        }
        // In the next one, where the current count becomes the previous one:
        // current × (W − e) ≤ (limit − n) × W, with e ≤ W always a solution.
        let e = ((limit - n) * w)
            .checked_div(current)
            .map_or(0, |span| w.saturating_sub(span));
        saturating_u64(next.saturating_add(e))
    }

    /// Time until both counts have decayed to nothing.
    fn reset_after(&self, state: &SlidingCounterState, now: u64) -> Duration {
        Duration::from_nanos(self.idle_at(state).as_u64().saturating_sub(now))
    }

    fn admitted(&self, rolled: &Rolled, now: u64) -> Admitted {
        let remaining = self.remaining(rolled);
        let admitted = Admitted::new(self.limit, remaining, self.reset_after(&rolled.state, now));
        // When one more than `remaining` fits: the `t` of an HTTP `RateLimit` field,
        // which the reset (both counts decayed) overstates by up to a window.
        if remaining < self.limit {
            let next = self.allowed_at(rolled, remaining + 1).saturating_sub(now);
            admitted.with_next_permit_nanos(next)
        } else {
            admitted
        }
    }

    fn limited(&self, rolled: &Rolled, now: u64, n: u64) -> Denied {
        Limited::new(
            Duration::from_nanos(self.allowed_at(rolled, n).saturating_sub(now)),
            self.limit,
            self.remaining(rolled),
            self.reset_after(&rolled.state, now),
        )
        .into()
    }
}

impl Algorithm for SlidingCounter {
    type State = SlidingCounterState;

    fn initial_state(&self, _now: Nanos) -> SlidingCounterState {
        SlidingCounterState::default()
    }

    fn acquire(&self, state: &mut SlidingCounterState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.limit)?;
        let now = now.as_u64();
        let mut rolled = self.roll(state, now);
        let s = &rolled.state;
        if !self.fits(s.previous, s.current, rolled.elapsed, n) {
            if n == 0 {
                return Ok(self.admitted(&rolled, now));
            }
            return Err(self.limited(&rolled, now, n));
        }
        if n > 0 {
            // Fits, so current + n <= limit.
            rolled.state.current += n;
            *state = rolled.state;
        }
        Ok(self.admitted(&rolled, now))
    }

    /// Immediate only: admitted now, or denied with `acquire`'s `retry_after`
    /// whatever `max_wait` is.
    fn reserve(
        &self,
        state: &mut SlidingCounterState,
        now: Nanos,
        n: u64,
        _max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.acquire(state, now, n)?;
        Ok(Reservation::new(n, Duration::ZERO))
    }

    /// Lowers the current window's count, never below zero.
    fn refund(&self, state: &mut SlidingCounterState, now: Nanos, n: u64) {
        let mut rolled = self.roll(state, now.as_u64());
        rolled.state.current = rolled.state.current.saturating_sub(n);
        *state = rolled.state;
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    /// The end of the window after the current one, once the current count has had a
    /// full window to decay.
    fn idle_at(&self, state: &SlidingCounterState) -> Nanos {
        let windows = if state.current > 0 {
            2
        } else if state.previous > 0 {
            1
        } else {
            return Nanos::ZERO;
        };
        let end = until_period(self.window, 0, u128::from(state.index) + windows);
        Nanos::new(saturating_u64(end))
    }
}

/// The sliding counter's facts. Its Redis twin reads `{limit, window µs}`.
impl Facts for SlidingCounter {
    const NAME: &'static str = "sliding_counter";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/sliding_counter.lua");
    const CONFIG: Option<FromConfig<Self>> = Some(FromConfig {
        takes_burst: false,
        build: SlidingCounter::from_config,
    });

    /// The window (a counter emptied early in its window can take up to two to
    /// forget it all).
    fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The limit divided.
    fn per_node(&self, share: Share) -> Result<SlidingCounter, ConfigError> {
        let mut counter = *self;
        counter.set_limit(share.count(self.limit)?)?;
        Ok(counter)
    }

    /// The parameters, or why the script cannot run them exactly.
    ///
    /// The window is held to 2^51 µs, so that the end of the window after next (when a
    /// state expires) stays below 2^53 µs; products of a count and the window may pass
    /// 2^53 and the script computes them exactly by long multiplication.
    ///
    /// Admissions, `remaining` and `reset_after` equal the in-process algorithm's.
    /// `retry_after` can only be a whole µs in a reply, and the in-process one is the
    /// earliest nanosecond at which the estimate fits: a weight of `spare × window /
    /// previous` is rarely a whole µs (a window of 1 s, a previous count of 3). The
    /// script answers the earliest whole µs instead, which is the in-process answer
    /// rounded up to the µs, and equal to it whenever the window is a multiple of every
    /// count from 1 to the limit. Rejecting every other configuration would reject
    /// three per second, so they run, and a retry at the script's time always fits.
    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let window = whole_micros(Facts::window(self), "window")?;
        if window > MAX_SCRIPT_MICROS / 2 {
            return Err(too_long("window", MAX_SCRIPT_MICROS / 2));
        }
        let limit = exact_count(self.limit, "limit")?;
        Ok(vec![Arg::Int(limit), Arg::Int(window)])
    }
}

impl SlidingCounter {
    /// A rules file's counter: `requests_per_unit` per window of a `unit`.
    fn from_config(requests: u64, per: Duration, _: Option<u64>) -> Result<Self, ConfigError> {
        SlidingCounter::new(requests, per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{at, ms};

    fn counter(limit: u64, window_ms: u64) -> SlidingCounter {
        SlidingCounter::new(limit, ms(window_ms)).unwrap()
    }

    #[test]
    fn the_previous_window_weighs_by_its_overlap() {
        let c = counter(10, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(500), 10).unwrap();
        // 250 ms into the next window: 10 × 0.75 = 7.5 used, 2 fit.
        let admitted = c.acquire(&mut s, at(1250), 2).unwrap();
        assert_eq!(admitted.remaining(), 0);
        assert_eq!(admitted.reset_after(), ms(1750));
        let denied = c.acquire(&mut s, at(1250), 1).unwrap_err();
        // 10 × (1000 − e)/1000 + 2 + 1 ≤ 10 from e = 300 ms.
        assert_eq!(denied.retry_after(), Some(ms(50)));
        assert!(c.acquire(&mut s, at(1299), 1).is_err());
        assert!(c.acquire(&mut s, at(1300), 1).is_ok());
    }

    #[test]
    fn retry_rounds_up_to_the_nanosecond() {
        let c = SlidingCounter::new(2, Duration::from_nanos(3)).unwrap();
        let mut s = c.initial_state(Nanos::ZERO);
        c.acquire(&mut s, Nanos::new(0), 2).unwrap();
        // Window 1 (3..6): previous 2 weighs 2 × (3 − e)/3; 1 fits when e ≥ 1.5.
        let denied = c.acquire(&mut s, Nanos::new(3), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(2)));
        assert!(c.acquire(&mut s, Nanos::new(4), 1).is_err());
        assert!(c.acquire(&mut s, Nanos::new(5), 1).is_ok());
    }

    #[test]
    fn retry_can_reach_into_the_next_window() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(100), 4).unwrap();
        // Full in this window; in the next, 4 × (1000 − e)/1000 + 3 ≤ 4 from e = 750.
        let denied = c.acquire(&mut s, at(200), 3).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1550)));
        assert!(c.acquire(&mut s, at(1749), 3).is_err());
        assert!(c.acquire(&mut s, at(1750), 3).is_ok());
    }

    #[test]
    fn a_full_limit_waits_for_two_windows() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(0), 4).unwrap();
        let denied = c.acquire(&mut s, at(0), 4).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(2000)));
        assert_eq!(c.idle_at(&s), at(2000));
    }

    #[test]
    fn more_than_the_limit_is_never_and_zero_is_a_peek() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        assert!(c.acquire(&mut s, at(0), 5).unwrap_err().is_never());
        c.acquire(&mut s, at(0), 4).unwrap();
        let before = s;
        assert_eq!(c.acquire(&mut s, at(0), 0).unwrap().remaining(), 0);
        assert!(c.acquire(&mut s, at(1), 1).is_err());
        assert_eq!(s, before, "peeks and denials change nothing");
    }

    #[test]
    fn reserve_is_immediate_only() {
        let c = counter(1, 1000);
        let mut s = c.initial_state(at(0));
        assert!(c.reserve(&mut s, at(0), 1, ms(0)).unwrap().is_immediate());
        let denied = c.reserve(&mut s, at(0), 1, Duration::MAX).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(2000)));
    }

    #[test]
    fn refund_lowers_the_current_count() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(0), 4).unwrap();
        c.refund(&mut s, at(10), 3);
        assert_eq!(s.current(), 1);
        c.refund(&mut s, at(10), 3);
        assert_eq!(s.current(), 0);
        assert_eq!(c.idle_at(&s), Nanos::ZERO);
    }

    #[test]
    fn counts_roll_and_expire() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(0), 3).unwrap();
        c.acquire(&mut s, at(1000), 1).unwrap();
        assert_eq!((s.window_index(), s.current(), s.previous()), (1, 1, 3));
        assert_eq!(c.idle_at(&s), at(3000));
        c.acquire(&mut s, at(5000), 1).unwrap();
        assert_eq!((s.window_index(), s.current(), s.previous()), (5, 1, 0));
        c.refund(&mut s, at(5000), 1);
        c.refund(&mut s, at(6000), 0);
        assert_eq!(c.idle_at(&s), Nanos::ZERO);
    }

    #[test]
    fn a_state_from_a_later_window_counts_in_full() {
        let c = counter(4, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(0), 4).unwrap();
        c.acquire(&mut s, at(2000), 2).unwrap();
        // An earlier reading: decided at the start of window 2 (previous empty).
        assert!(c.acquire(&mut s, at(1999), 2).is_ok());
        // Window 3 starts with previous 4: 4 × (1000 − e)/1000 + 1 ≤ 4 from e = 250.
        let denied = c.acquire(&mut s, at(1999), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1251)));
    }

    #[test]
    fn set_limit_keeps_the_counts() {
        let mut c = counter(2, 1000);
        let mut s = c.initial_state(at(0));
        c.acquire(&mut s, at(0), 2).unwrap();
        c.set_limit(3).unwrap();
        assert!(c.acquire(&mut s, at(0), 1).is_ok());
        c.set_limit(1).unwrap();
        // current 3 > limit 1: nothing until the count has decayed.
        let denied = c.acquire(&mut s, at(0), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(2000)));
        assert_eq!(
            c.set_limit(0),
            Err(ConfigError::Zero { parameter: "limit" })
        );
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(
            SlidingCounter::new(0, ms(1)),
            Err(ConfigError::Zero { parameter: "limit" })
        );
        assert_eq!(
            SlidingCounter::new(1, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "window"
            })
        );
        assert_eq!(
            SlidingCounter::new(1, Duration::MAX),
            Err(crate::units::too_long("window"))
        );
    }

    #[test]
    fn huge_values_saturate_without_panic() {
        for window in [1, 7, u64::MAX] {
            let c = SlidingCounter::new(u64::MAX, Duration::from_nanos(window)).unwrap();
            let mut s = SlidingCounterState {
                index: u64::MAX,
                current: u64::MAX,
                previous: u64::MAX,
            };
            for now in [0, 1, u64::MAX] {
                for n in [0, 1, u64::MAX] {
                    let _ = c.acquire(&mut s, Nanos::new(now), n);
                    let _ = c.reserve(&mut s, Nanos::new(now), n, Duration::MAX);
                }
                let _ = c.idle_at(&s);
                c.refund(&mut s, Nanos::new(now), 1);
            }
        }
    }

    #[test]
    fn script_args_are_whole_microseconds() {
        let counter = SlidingCounter::new(50, Duration::from_secs(60)).unwrap();
        assert_eq!(
            counter.script_args(),
            Ok(vec![Arg::Int(50), Arg::Int(60_000_000)])
        );
    }

    #[test]
    fn sub_microsecond_windows_have_no_script_args() {
        let counter = SlidingCounter::new(3, Duration::from_nanos(2_500)).unwrap();
        assert!(matches!(
            counter.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
    }

    #[test]
    fn windows_beyond_two_to_the_51_micros_have_no_script_args() {
        let fits = Duration::from_micros(MAX_SCRIPT_MICROS / 2);
        assert!(SlidingCounter::new(1, fits).unwrap().script_args().is_ok());
        let longer = SlidingCounter::new(1, fits + Duration::from_micros(1)).unwrap();
        assert_eq!(
            longer.script_args(),
            Err(too_long("window", MAX_SCRIPT_MICROS / 2))
        );
    }

    #[test]
    fn limits_beyond_two_to_the_52_have_no_script_args() {
        let window = Duration::from_secs(1);
        let largest = SlidingCounter::new(MAX_SCRIPT_MICROS, window).unwrap();
        assert!(largest.script_args().is_ok());
        assert_eq!(
            SlidingCounter::new(MAX_SCRIPT_MICROS + 1, window)
                .unwrap()
                .script_args(),
            Err(ConfigError::Overflow { parameter: "limit" })
        );
    }
}
