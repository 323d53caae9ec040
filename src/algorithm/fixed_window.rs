//! Fixed windows: at most `limit` permits per window of time.
//!
//! Two alignments, chosen by the type parameter:
//!
//! - [`Aligned`] (the default): windows at multiples of the window length from an
//!   anchor (the clock's origin, or the Unix epoch as envoy does). The state packs into
//!   one `u64`, so a [`Limiter`](crate::Limiter) over it is lock-free.
//! - [`FirstHit`]: a window opens at the first request after the previous window
//!   ended, as Redis `INCR` + `EXPIRE` does.
//!
//! Both count bookings window by window: a count above `limit` is reservations carried
//! into the next windows, each filled up to `limit` in turn.
//!
//! The aligned state word holds the window index in its high bits and the count in
//! the low bits. The index is stored whole, never modulo some power of two: a keyed
//! limiter learns from [`idle_at`](Algorithm::idle_at) when it may evict, from the
//! word alone, and a wrapped index could not tell it. That bounds the limit by the
//! window's length ([`FixedWindow::max_limit`]). A decision on a clock reading older
//! than the stored window (another thread read the clock later and committed first) is
//! made in the stored window, which can only deny more.

use std::time::Duration;

use super::{check_capacity, Algorithm};
use crate::clock::Nanos;
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::engine::{Atomic, Locked, WordAlgorithm, CONFIG_WORDS};
use crate::error::{non_zero, ConfigError};
use crate::units::{duration_to_nanos, positive_nanos};

/// Windows at multiples of the window length from an anchor; the state is one atomic
/// word. See [`FixedWindow::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aligned {
    /// Added to the clock before dividing by the window, so that window edges fall on
    /// the anchor's multiples.
    offset: u64,
    /// Low bits of the state word that hold the count; the high bits hold the window
    /// index, which always fits exactly.
    count_bits: u32,
}

/// A window opens at the first request after the previous one ended (Redis `INCR` +
/// `EXPIRE`). See [`FixedWindow::from_first_hit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FirstHit;

/// At most `limit` permits in each window of time; the count starts again at each
/// window's edge.
///
/// Where the windows fall is the type parameter: [`Aligned`] (the default, lock-free)
/// or [`FirstHit`].
///
/// Reservations are first come, first served: one that does not fit in what is left of
/// the last booked window takes the next window, and what it skipped stays unused, so
/// no later request overtakes it. No window ever admits more than `limit`.
/// [`refund`](Algorithm::refund) gives back the most recently booked permits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Limiter;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::clock::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(FixedWindow::new(2, Duration::from_secs(1))?, clock.clone());
/// clock.advance(Duration::from_millis(400));
/// assert!(limiter.try_acquire(2).is_ok());
/// let denied = limiter.try_acquire(1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(600)));
/// clock.advance(Duration::from_millis(600));
/// assert!(limiter.try_acquire(1).is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FixedWindow<A = Aligned> {
    limit: u64,
    /// Window length in nanoseconds, at least 1.
    window: u64,
    alignment: A,
}

/// The state of a [`FixedWindow<FirstHit>`]: when the current window opened and how
/// many permits are booked from it on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FirstHitState {
    start: Nanos,
    count: u64,
}

impl FirstHitState {
    /// When the window opened.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Permits booked from that window on; above the limit, the excess is booked in
    /// the windows that follow.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Bits left for the count once the largest window index (`u64::MAX / window`) has
/// room: at most 63, since `window >= 1`.
fn count_bits(window: u64) -> u32 {
    (u64::MAX / window).leading_zeros()
}

/// # Windows at multiples of the window length
impl FixedWindow<Aligned> {
    /// `limit` permits per `window`, with windows at multiples of `window` from the
    /// clock's origin.
    ///
    /// The window index and the count share one `u64` exactly (no index ever wraps),
    /// which bounds the limit by the window's length: see
    /// [`max_limit`](FixedWindow::max_limit). Reservations book ahead as far as the
    /// count's bits hold (for a limit well below the maximum, thousands of windows).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit` or `window`,
    /// [`ConfigError::Overflow`] for a window over 584 years,
    /// [`ConfigError::OutOfRange`] for a limit above
    /// [`max_limit(window)`](FixedWindow::max_limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::clock::Nanos;
    ///
    /// let fw = FixedWindow::new(100, Duration::from_secs(60))?;
    /// assert_eq!(fw.capacity(), 100);
    /// assert!(FixedWindow::new(0, Duration::from_secs(60)).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<FixedWindow<Aligned>, ConfigError> {
        let window = positive_nanos("window", window)?;
        let mut fw = FixedWindow {
            limit: 1,
            window,
            alignment: Aligned {
                offset: 0,
                count_bits: count_bits(window),
            },
        };
        fw.set_limit(limit)?;
        Ok(fw)
    }

    /// The largest limit an aligned window of this length takes: `2^32 - 1`, and less
    /// than `2^b` where `b` is the number of bits the window index leaves free in a
    /// `u64`, which is more than half the window's length in nanoseconds (e.g.
    /// 536,870,911 for one second). Zero for a window [`FixedWindow::new`] rejects.
    ///
    /// For more, use a longer window or [`FixedWindow::from_first_hit`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::FixedWindow;
    ///
    /// assert_eq!(FixedWindow::max_limit(Duration::from_secs(1)), (1 << 29) - 1);
    /// assert_eq!(FixedWindow::max_limit(Duration::from_secs(5)), u32::MAX as u64);
    /// ```
    pub fn max_limit(window: Duration) -> u64 {
        positive_nanos("window", window).map_or(0, |window| {
            Self::count_mask(count_bits(window)).min(u64::from(u32::MAX))
        })
    }

    /// The same limit with windows on multiples of the window length since the Unix
    /// epoch (as envoy aligns them), for a clock that read zero at Unix time
    /// `unix_origin`: pass [`Clock::unix_origin`](crate::clock::Clock::unix_origin).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::clock::Nanos;
    ///
    /// // A clock that started 10.25 s past a Unix minute.
    /// let fw = FixedWindow::new(1, Duration::from_secs(60))?
    ///     .aligned_to_unix_epoch(Duration::from_millis(60_000 * 1000 + 10_250));
    /// let mut state = fw.initial_state(Nanos::ZERO);
    /// fw.acquire(&mut state, Nanos::ZERO, 1)?;
    /// let denied = fw.acquire(&mut state, Nanos::ZERO, 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(49_750)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn aligned_to_unix_epoch(self, unix_origin: Duration) -> FixedWindow<Aligned> {
        // Remainder below the window, which fits u64.
        let offset = (unix_origin.as_nanos() % u128::from(self.window)) as u64;
        FixedWindow {
            alignment: Aligned {
                offset,
                ..self.alignment
            },
            ..self
        }
    }

    /// Changes the limit, keeping the counts: permits already taken in the current
    /// window still count.
    ///
    /// # Errors
    ///
    /// As [`FixedWindow::new`] for `limit`; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    ///
    /// let mut fw = FixedWindow::new(10, Duration::from_secs(1))?;
    /// fw.set_limit(20)?;
    /// assert_eq!(fw.capacity(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_limit(&mut self, limit: u64) -> Result<(), ConfigError> {
        let limit = non_zero("limit", limit)?;
        let max = Self::count_mask(self.alignment.count_bits).min(u64::from(u32::MAX));
        if limit > max {
            return Err(ConfigError::OutOfRange {
                parameter: "limit",
                expected: "at most FixedWindow::max_limit(window): 2^32 - 1, and below about \
                           one per two nanoseconds of the window",
            });
        }
        self.limit = limit;
        Ok(())
    }

    fn count_mask(count_bits: u32) -> u64 {
        (1u64 << count_bits) - 1
    }

    fn index(&self, now: u64) -> u64 {
        now.saturating_add(self.alignment.offset) / self.window
    }

    fn end_of(&self, index: u64) -> u64 {
        let end =
            (u128::from(index) + 1) * u128::from(self.window) - u128::from(self.alignment.offset);
        u64::try_from(end).unwrap_or(u64::MAX)
    }

    fn unpack(&self, word: u64) -> (u64, u64) {
        let bits = self.alignment.count_bits;
        (
            word.checked_shr(bits).unwrap_or(0),
            word & Self::count_mask(bits),
        )
    }

    fn pack(&self, index: u64, count: u64) -> u64 {
        if count == 0 {
            0
        } else {
            index.checked_shl(self.alignment.count_bits).unwrap_or(0) | count
        }
    }

    /// The current window's index and the count booked from it on.
    fn view(&self, word: u64, now: u64) -> (u64, u64) {
        let current = self.index(now);
        let (index, count) = self.unpack(word);
        if count == 0 {
            (current, 0)
        } else if index > current {
            // Another thread, reading the clock later, already moved to a later window.
            (index, count)
        } else {
            let passed = (current - index).saturating_mul(self.limit);
            (current, count.saturating_sub(passed))
        }
    }
}

/// # Windows from the first request
impl FixedWindow<FirstHit> {
    /// `limit` permits per `window`, where a window opens at the first request after
    /// the previous window ended, as Redis `INCR` + `EXPIRE` does.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit` or `window`,
    /// [`ConfigError::Overflow`] for a window over 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::clock::Nanos;
    ///
    /// let fw = FixedWindow::from_first_hit(1, Duration::from_secs(10))?;
    /// let mut state = fw.initial_state(Nanos::ZERO);
    /// let at = |s: u64| Nanos::new(s * 1_000_000_000);
    /// assert!(fw.acquire(&mut state, at(3), 1).is_ok());
    /// let denied = fw.acquire(&mut state, at(12), 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    /// assert!(fw.acquire(&mut state, at(13), 1).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn from_first_hit(
        limit: u64,
        window: Duration,
    ) -> Result<FixedWindow<FirstHit>, ConfigError> {
        Ok(FixedWindow {
            limit: non_zero("limit", limit)?,
            window: positive_nanos("window", window)?,
            alignment: FirstHit,
        })
    }

    /// Changes the limit, keeping the counts: permits already taken in the current
    /// window still count.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero limit; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    ///
    /// let mut fw = FixedWindow::from_first_hit(10, Duration::from_secs(1))?;
    /// fw.set_limit(1 << 40)?;
    /// assert_eq!(fw.capacity(), 1 << 40);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_limit(&mut self, limit: u64) -> Result<(), ConfigError> {
        self.limit = non_zero("limit", limit)?;
        Ok(())
    }

    /// When the current window opened and the count booked from it on.
    fn view(&self, state: &FirstHitState, now: u64) -> (u64, u64) {
        let (start, count) = (state.start.as_u64(), state.count);
        if count == 0 {
            return (now, 0);
        }
        // now < start: another thread, reading the clock later, opened this window.
        let passed = now.saturating_sub(start) / self.window;
        if passed == 0 {
            (start, count)
        } else if passed >= self.windows_used(count) {
            (now, 0)
        } else {
            // passed < windows_used, so both products stay below count and now.
            (start + passed * self.window, count - passed * self.limit)
        }
    }
}

/// # Common to both alignments
impl<A> FixedWindow<A> {
    /// The most permits one window admits.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// Windows, from the current one, that hold bookings.
    fn windows_used(&self, count: u64) -> u64 {
        count.div_ceil(self.limit)
    }

    /// Nanoseconds from `now` to the start of the `k`-th window after the current one
    /// (which ends at `end`), for `k >= 1`.
    fn until_window(&self, end: u64, now: u64, k: u64) -> u64 {
        end.saturating_sub(now)
            .saturating_add(k.saturating_sub(1).saturating_mul(self.window))
    }

    fn reset_after(&self, end: u64, now: u64, count: u64) -> Duration {
        match self.windows_used(count) {
            0 => Duration::ZERO,
            k => Duration::from_nanos(self.until_window(end, now, k)),
        }
    }

    fn limited(&self, retry: u64, end: u64, now: u64, count: u64) -> Denied {
        Limited::new(
            Duration::from_nanos(retry),
            self.limit,
            self.limit.saturating_sub(count),
            self.reset_after(end, now, count),
        )
        .into()
    }

    /// Takes `n` now from a window ending at `end` with `count` booked; the new count.
    fn take(&self, count: u64, end: u64, now: u64, n: u64) -> Result<(u64, Admitted), Denied> {
        check_capacity(n, self.limit)?;
        let total = u128::from(count) + u128::from(n);
        let limit = u128::from(self.limit);
        if n == 0 || total <= limit {
            // total <= limit, or n == 0 and total == count: fits u64.
            let total = total as u64;
            let remaining = self.limit.saturating_sub(total);
            let admitted = Admitted::new(self.limit, remaining, self.reset_after(end, now, total));
            return Ok((total, admitted));
        }
        // The k-th window ahead holds count - k * limit; find where n fits.
        let k = u64::try_from((total - limit).div_ceil(limit)).unwrap_or(u64::MAX);
        Err(self.limited(self.until_window(end, now, k), end, now, count))
    }

    /// Books `n` in the first window, from the last booked one, with room for all of
    /// them; the new count and the wait.
    fn book(
        &self,
        count: u64,
        end: u64,
        now: u64,
        n: u64,
        max_wait: Duration,
        max_count: u64,
    ) -> Result<(u64, u64), Denied> {
        check_capacity(n, self.limit)?;
        let limit = u128::from(self.limit);
        let (count128, n128) = (u128::from(count), u128::from(n));
        if n == 0 || count128 + n128 <= limit {
            return Ok(((count128 + n128) as u64, 0));
        }
        // count >= 1 here, since n <= limit.
        let last = (count128 - 1) / limit;
        let used = count128 - last * limit;
        let (k, booked) = if used + n128 <= limit {
            (last, count128 + n128)
        } else {
            (last + 1, (last + 1) * limit + n128)
        };
        // k >= 1: n did not fit in the current window.
        let wait = self.until_window(end, now, u64::try_from(k).unwrap_or(u64::MAX));
        let max_wait = duration_to_nanos(max_wait);
        let mut retry = wait.saturating_sub(max_wait);
        let too_much = booked > u128::from(max_count);
        if too_much {
            // Wait until enough windows have passed for the count to fit its field.
            let m = (booked - u128::from(max_count)).div_ceil(limit);
            let fits_at = self.until_window(end, now, u64::try_from(m).unwrap_or(u64::MAX));
            retry = retry.max(fits_at);
        }
        if wait > max_wait || too_much {
            return Err(self.limited(retry, end, now, count));
        }
        Ok((booked as u64, wait))
    }
}

impl Algorithm for FixedWindow<Aligned> {
    type State = u64;
    type Cell = Atomic<FixedWindow<Aligned>>;

    fn initial_state(&self, _now: Nanos) -> u64 {
        0
    }

    #[inline]
    fn acquire(&self, word: &mut u64, now: Nanos, n: u64) -> Decision {
        let now = now.as_u64();
        let (index, count) = self.view(*word, now);
        let (count, admitted) = self.take(count, self.end_of(index), now, n)?;
        if n > 0 {
            *word = self.pack(index, count);
        }
        Ok(admitted)
    }

    fn reserve(
        &self,
        word: &mut u64,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let now = now.as_u64();
        let (index, count) = self.view(*word, now);
        let max_count = Self::count_mask(self.alignment.count_bits);
        let (count, wait) = self.book(count, self.end_of(index), now, n, max_wait, max_count)?;
        if n > 0 {
            *word = self.pack(index, count);
        }
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    fn refund(&self, word: &mut u64, now: Nanos, n: u64) {
        let (index, count) = self.view(*word, now.as_u64());
        *word = self.pack(index, count.saturating_sub(n));
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn idle_at(&self, word: &u64) -> Nanos {
        let (index, count) = self.unpack(*word);
        match self.windows_used(count) {
            0 => Nanos::ZERO,
            k => Nanos::new(self.end_of(index.saturating_add(k - 1))),
        }
    }
}

impl WordAlgorithm for FixedWindow<Aligned> {
    fn to_words(&self) -> [u64; CONFIG_WORDS] {
        [
            self.limit,
            self.window,
            self.alignment.offset,
            u64::from(self.alignment.count_bits),
        ]
    }

    fn from_words(words: [u64; CONFIG_WORDS]) -> FixedWindow<Aligned> {
        FixedWindow {
            limit: words[0].max(1),
            window: words[1].max(1),
            alignment: Aligned {
                offset: words[2],
                count_bits: words[3].min(63) as u32,
            },
        }
    }
}

impl Algorithm for FixedWindow<FirstHit> {
    type State = FirstHitState;
    type Cell = Locked<FixedWindow<FirstHit>>;

    fn initial_state(&self, _now: Nanos) -> FirstHitState {
        FirstHitState::default()
    }

    fn acquire(&self, state: &mut FirstHitState, now: Nanos, n: u64) -> Decision {
        let now = now.as_u64();
        let (start, count) = self.view(state, now);
        let end = start.saturating_add(self.window);
        let (count, admitted) = self.take(count, end, now, n)?;
        if n > 0 {
            *state = FirstHitState {
                start: Nanos::new(start),
                count,
            };
        }
        Ok(admitted)
    }

    fn reserve(
        &self,
        state: &mut FirstHitState,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let now = now.as_u64();
        let (start, count) = self.view(state, now);
        let end = start.saturating_add(self.window);
        let (count, wait) = self.book(count, end, now, n, max_wait, u64::MAX)?;
        if n > 0 {
            *state = FirstHitState {
                start: Nanos::new(start),
                count,
            };
        }
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    fn refund(&self, state: &mut FirstHitState, now: Nanos, n: u64) {
        let (start, count) = self.view(state, now.as_u64());
        *state = FirstHitState {
            start: Nanos::new(start),
            count: count.saturating_sub(n),
        };
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn idle_at(&self, state: &FirstHitState) -> Nanos {
        let used = self.windows_used(state.count);
        Nanos::new(if used == 0 {
            0
        } else {
            state
                .start
                .as_u64()
                .saturating_add(used.saturating_mul(self.window))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn aligned(limit: u64, window_ms: u64) -> FixedWindow {
        FixedWindow::new(limit, ms(window_ms)).unwrap()
    }

    fn first_hit(limit: u64, window_ms: u64) -> FixedWindow<FirstHit> {
        FixedWindow::from_first_hit(limit, ms(window_ms)).unwrap()
    }

    #[test]
    fn aligned_admits_limit_per_window_and_resets_at_the_edge() {
        let fw = aligned(3, 1000);
        let mut s = fw.initial_state(at(0));
        let first = fw.acquire(&mut s, at(250), 1).unwrap();
        assert_eq!(first.remaining(), 2);
        assert_eq!(first.reset_after(), ms(750));
        assert_eq!(fw.acquire(&mut s, at(500), 2).unwrap().remaining(), 0);
        let denied = fw.acquire(&mut s, at(999), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(MS)));
        assert!(fw.acquire(&mut s, at(1000), 3).is_ok());
    }

    #[test]
    fn aligned_retry_points_to_the_window_where_the_request_fits() {
        let fw = aligned(2, 1000);
        let mut s = fw.initial_state(at(0));
        // Two windows' worth booked: the current one and the next.
        fw.reserve(&mut s, at(100), 2, Duration::ZERO).unwrap();
        let r = fw.reserve(&mut s, at(100), 2, ms(900)).unwrap();
        assert_eq!(r.wait(), ms(900));
        let denied = fw.acquire(&mut s, at(100), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1900)));
        if let Denied::Limited(l) = denied {
            assert_eq!(l.remaining(), 0);
            assert_eq!(l.reset_after(), ms(1900));
        }
    }

    #[test]
    fn more_than_the_limit_is_never() {
        let fw = aligned(3, 1000);
        let mut s = fw.initial_state(at(0));
        assert!(fw.acquire(&mut s, at(0), 4).unwrap_err().is_never());
        assert!(fw
            .reserve(&mut s, at(0), 4, Duration::MAX)
            .unwrap_err()
            .is_never());
        assert_eq!(s, 0);
        let fh = first_hit(3, 1000);
        let mut s = fh.initial_state(at(0));
        assert!(fh.acquire(&mut s, at(0), 4).unwrap_err().is_never());
    }

    #[test]
    fn denial_changes_nothing() {
        let fw = aligned(1, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 1).unwrap();
        let before = s;
        assert!(fw.acquire(&mut s, at(10), 1).is_err());
        assert!(fw.reserve(&mut s, at(10), 1, ms(10)).is_err());
        assert_eq!(s, before);
    }

    #[test]
    fn zero_is_a_peek_that_always_succeeds() {
        let fw = aligned(1, 1000);
        let mut s = fw.initial_state(at(0));
        fw.reserve(&mut s, at(0), 1, Duration::ZERO).unwrap();
        fw.reserve(&mut s, at(0), 1, ms(5000)).unwrap();
        let before = s;
        let peek = fw.acquire(&mut s, at(0), 0).unwrap();
        assert_eq!(peek.remaining(), 0);
        assert!(fw.reserve(&mut s, at(0), 0, Duration::ZERO).is_ok());
        assert_eq!(s, before);
    }

    #[test]
    fn reservation_skips_to_the_window_with_room_and_never_is_overtaken() {
        let fw = aligned(10, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 8).unwrap();
        let r = fw.reserve(&mut s, at(0), 5, ms(1000)).unwrap();
        assert_eq!(r.wait(), ms(1000));
        // The 2 left in the first window stay unused: nothing overtakes the booking.
        assert!(fw.acquire(&mut s, at(1), 1).is_err());
        // The second window has 5 left.
        assert!(fw.acquire(&mut s, at(1000), 5).is_ok());
        assert!(fw.acquire(&mut s, at(1000), 1).is_err());
    }

    #[test]
    fn reservation_too_far_is_denied_with_how_much_sooner() {
        let fw = aligned(1, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(200), 1).unwrap();
        let denied = fw.reserve(&mut s, at(200), 1, ms(300)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(500)));
    }

    #[test]
    fn reservations_stop_where_the_count_field_is_full() {
        // One second: 29 count bits; a limit of 2^29 - 1 leaves no room ahead.
        let fw = FixedWindow::new((1 << 29) - 1, Duration::from_secs(1)).unwrap();
        let mut s = fw.initial_state(Nanos::ZERO);
        fw.acquire(&mut s, Nanos::ZERO, 1).unwrap();
        let denied = fw
            .reserve(&mut s, Nanos::ZERO, fw.limit(), Duration::MAX)
            .unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
        assert!(fw
            .reserve(&mut s, Nanos::new(S), fw.limit(), Duration::MAX)
            .is_ok());
    }

    #[test]
    fn refund_lowers_the_count_never_below_zero() {
        let fw = aligned(5, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 5).unwrap();
        fw.refund(&mut s, at(10), 2);
        assert_eq!(fw.acquire(&mut s, at(10), 0).unwrap().remaining(), 2);
        fw.refund(&mut s, at(10), 100);
        assert_eq!(s, 0);
        assert_eq!(fw.idle_at(&s), Nanos::ZERO);
    }

    #[test]
    fn idle_at_is_the_end_of_the_last_booked_window() {
        let fw = aligned(2, 1000);
        let mut s = fw.initial_state(at(0));
        assert_eq!(fw.idle_at(&s), Nanos::ZERO);
        fw.acquire(&mut s, at(1500), 1).unwrap();
        assert_eq!(fw.idle_at(&s), at(2000));
        fw.reserve(&mut s, at(1500), 2, ms(600)).unwrap();
        assert_eq!(fw.idle_at(&s), at(3000));
    }

    #[test]
    fn unix_alignment_moves_the_edges() {
        // The clock started 300 ms into a Unix second.
        let fw = aligned(1, 1000).aligned_to_unix_epoch(Duration::from_millis(1_700_000_000_300));
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 1).unwrap();
        assert_eq!(fw.idle_at(&s), at(700));
        let denied = fw.acquire(&mut s, at(699), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1)));
        assert!(fw.acquire(&mut s, at(700), 1).is_ok());
    }

    #[test]
    fn a_state_from_a_later_window_is_kept() {
        // A thread that read the clock earlier commits after one in the next window.
        let fw = aligned(2, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(1000), 2).unwrap();
        let denied = fw.acquire(&mut s, at(999), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1001)));
    }

    #[test]
    fn set_limit_keeps_the_count() {
        let mut fw = aligned(2, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 2).unwrap();
        fw.set_limit(3).unwrap();
        assert!(fw.acquire(&mut s, at(0), 1).is_ok());
        assert!(fw.acquire(&mut s, at(0), 1).is_err());
        assert_eq!(
            fw.set_limit(0),
            Err(ConfigError::Zero { parameter: "limit" })
        );
        assert_eq!(fw.limit(), 3);
    }

    #[test]
    fn words_round_trip() {
        let fw = aligned(7, 1234).aligned_to_unix_epoch(Duration::from_secs(5));
        assert_eq!(FixedWindow::from_words(fw.to_words()), fw);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(
            FixedWindow::new(0, ms(1)),
            Err(ConfigError::Zero { parameter: "limit" })
        );
        assert_eq!(
            FixedWindow::new(1, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "window"
            })
        );
        assert_eq!(
            FixedWindow::new(1, Duration::MAX),
            Err(ConfigError::Overflow {
                parameter: "window"
            })
        );
        assert!(matches!(
            FixedWindow::new(1 << 32, Duration::from_secs(10)),
            Err(ConfigError::OutOfRange {
                parameter: "limit",
                ..
            })
        ));
        assert!(FixedWindow::new(u32::MAX as u64, Duration::from_secs(10)).is_ok());
        assert!(matches!(
            FixedWindow::new(1 << 29, Duration::from_secs(1)),
            Err(ConfigError::OutOfRange { .. })
        ));
        // One nanosecond leaves no bits for a count.
        assert!(FixedWindow::new(1, Duration::from_nanos(1)).is_err());
        assert!(FixedWindow::new(1, Duration::from_nanos(2)).is_ok());
        assert_eq!(
            FixedWindow::from_first_hit(0, ms(1)),
            Err(ConfigError::Zero { parameter: "limit" })
        );
        assert_eq!(
            FixedWindow::from_first_hit(1, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "window"
            })
        );
        assert_eq!(
            FixedWindow::from_first_hit(1, Duration::MAX),
            Err(ConfigError::Overflow {
                parameter: "window"
            })
        );
        assert!(FixedWindow::from_first_hit(u64::MAX, Duration::from_nanos(1)).is_ok());
        let mut fh = first_hit(1, 1);
        assert_eq!(
            fh.set_limit(0),
            Err(ConfigError::Zero { parameter: "limit" })
        );
    }

    #[test]
    fn max_limit_of_degenerate_windows() {
        assert_eq!(FixedWindow::max_limit(Duration::ZERO), 0);
        assert_eq!(FixedWindow::max_limit(Duration::from_nanos(1)), 0);
        assert_eq!(FixedWindow::max_limit(Duration::from_nanos(2)), 1);
        assert_eq!(FixedWindow::max_limit(Duration::MAX), 0);
        assert_eq!(
            FixedWindow::max_limit(Duration::from_nanos(u64::MAX)),
            u32::MAX as u64
        );
    }

    #[test]
    fn first_hit_opens_a_window_at_the_first_request() {
        let fw = first_hit(2, 1000);
        let mut s = fw.initial_state(at(0));
        let first = fw.acquire(&mut s, at(300), 1).unwrap();
        assert_eq!(first.reset_after(), ms(1000));
        fw.acquire(&mut s, at(900), 1).unwrap();
        let denied = fw.acquire(&mut s, at(1200), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(100)));
        // The window ended at 1300; the next opens at 1750, not 1300.
        let next = fw.acquire(&mut s, at(1750), 2).unwrap();
        assert_eq!(next.reset_after(), ms(1000));
        assert_eq!(s.start(), at(1750));
        assert_eq!(s.count(), 2);
        assert_eq!(fw.idle_at(&s), at(2750));
    }

    #[test]
    fn first_hit_reservation_chains_windows_back_to_back() {
        let fw = first_hit(2, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(100), 2).unwrap();
        let r = fw.reserve(&mut s, at(500), 2, ms(1000)).unwrap();
        assert_eq!(r.wait(), ms(600));
        assert_eq!(fw.idle_at(&s), at(2100));
        // The booked window runs 1100..2100.
        assert!(fw.acquire(&mut s, at(2000), 1).is_err());
        let fresh = fw.acquire(&mut s, at(2100), 1).unwrap();
        assert_eq!(fresh.reset_after(), ms(1000));
        fw.refund(&mut s, at(2100), 5);
        assert_eq!(fw.idle_at(&s), Nanos::ZERO);
    }

    #[test]
    fn first_hit_from_a_later_start_is_kept() {
        let fw = first_hit(1, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(500), 1).unwrap();
        let denied = fw.acquire(&mut s, at(400), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1100)));
    }

    #[test]
    fn huge_values_saturate_without_panic() {
        let fw = FixedWindow::new(3, Duration::from_nanos(7)).unwrap();
        let mut s = u64::MAX;
        for now in [0, 1, u64::MAX - 1, u64::MAX] {
            let _ = fw.acquire(&mut s, Nanos::new(now), 3);
            let _ = fw.reserve(&mut s, Nanos::new(now), 3, Duration::MAX);
            fw.refund(&mut s, Nanos::new(now), u64::MAX);
            let _ = fw.idle_at(&s);
        }
        let fh = FixedWindow::from_first_hit(u64::MAX, Duration::from_nanos(u64::MAX)).unwrap();
        let mut s = FirstHitState {
            start: Nanos::MAX,
            count: u64::MAX,
        };
        for now in [0, u64::MAX] {
            let _ = fh.acquire(&mut s, Nanos::new(now), u64::MAX);
            let _ = fh.reserve(&mut s, Nanos::new(now), u64::MAX, Duration::MAX);
            let _ = fh.idle_at(&s);
            fh.refund(&mut s, Nanos::new(now), 1);
        }
        let fh = first_hit(1, 1);
        let mut s = FirstHitState {
            start: Nanos::ZERO,
            count: u64::MAX,
        };
        let _ = fh.reserve(&mut s, Nanos::new(u64::MAX), 1, Duration::MAX);
        let _ = fh.idle_at(&s);
    }
}
