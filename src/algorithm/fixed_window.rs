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
//! Both keep the last booked window and the permits booked in it. Windows between
//! the current one and the last booked one are closed: each was filled, or skipped by
//! a reservation that did not fit in it. Nothing in the state depends on the limit,
//! so a new limit applies exactly to what is booked.
//!
//! The aligned state word holds the window index in its high bits and the count in
//! the low bits. The index is stored whole, never modulo some power of two: a keyed
//! limiter learns from [`idle_at`](Algorithm::idle_at) when it may evict, from the
//! word alone, and a wrapped index could not tell it. That bounds the limit by the
//! window's length ([`FixedWindow::max_limit`]). A decision on a clock reading older
//! than the stored window (another thread read the clock later and committed first)
//! finds the current window closed, which can only deny more.

use std::time::Duration;

use super::script::{Arg, exact_count, whole_micros};
use super::{Algorithm, Facts, FromConfig, Share, check_capacity};
use super::{CONFIG_WORDS, Packing};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;
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
/// no later request overtakes it. No window ever admits more than `limit`, also across
/// [`set_limit`](FixedWindow::set_limit). [`refund`](Algorithm::refund) gives back the
/// most recently booked permits.
///
/// The window's length is fixed for the life of a state: the aligned state word
/// splits its bits between the window index and the count according to the length,
/// so a state read under another length would be misread. So there is no setter
/// for it, and a `FixedWindow` of another length must not replace this one over the
/// same state (say, inside [`Limiter::reconfigure`](crate::Limiter::reconfigure));
/// start a new limiter instead.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Limiter;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::time::ManualClock;
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
    /// Whether denied acquires count: see [`FixedWindow::counting_denied`].
    counting: bool,
}

/// The state of a [`FixedWindow<FirstHit>`]: the last booked window and how many
/// permits are booked in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FirstHitState {
    start: Nanos,
    count: u64,
}

impl FirstHitState {
    /// When the last booked window opens: the current window, unless reservations
    /// booked later ones.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// Permits booked in that window.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// The bookings as seen at some `now`.
#[derive(Clone, Copy, Debug)]
struct Booked {
    /// Start and end of the last booked window, or of the current window if nothing
    /// is booked. An end of `u64::MAX` means no window follows within the clock's
    /// range.
    start: u64,
    end: u64,
    /// Windows from the current one to the last booked one; the current window is
    /// closed unless this is 0.
    ahead: u64,
    /// Permits booked in the last booked window.
    count: u64,
}

/// Where the aligned configuration word holding the count's bits keeps whether denied
/// acquires count.
const COUNTING_BIT: u32 = 8;

/// An aligned window at its largest limit cannot hold a count past it.
const COUNTING_AT_MAX_LIMIT: ConfigError = ConfigError::OutOfRange {
    parameter: "limit",
    expected: "below FixedWindow::max_limit(window) to count denied acquires (the state \
               word holds a count past the limit)",
};

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
    /// [`max_limit`](FixedWindow::max_limit).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit` or `window`,
    /// [`ConfigError::TooLong`] for a window over 584 years,
    /// [`ConfigError::OutOfRange`] for a limit above
    /// [`max_limit(window)`](FixedWindow::max_limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::time::Nanos;
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
            counting: false,
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
    /// `unix_origin`: pass [`Clock::unix_origin`](crate::time::Clock::unix_origin).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::time::Nanos;
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

    /// Changes the limit, keeping what is booked. The state records only the last
    /// booked window and its count, so the new limit applies exactly: that window
    /// admits up to the new limit in all (nothing more if it already holds as many),
    /// and the windows before it stay closed.
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
    /// use tollgate::time::Nanos;
    ///
    /// let mut fw = FixedWindow::new(2, Duration::from_secs(1))?;
    /// let mut state = fw.initial_state(Nanos::ZERO);
    /// fw.acquire(&mut state, Nanos::ZERO, 2)?;
    /// fw.set_limit(3)?;
    /// assert_eq!(fw.acquire(&mut state, Nanos::ZERO, 1)?.remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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
        if self.counting && limit == Self::count_mask(self.alignment.count_bits) {
            return Err(COUNTING_AT_MAX_LIMIT);
        }
        self.limit = limit;
        Ok(())
    }

    /// The same window, counting denied acquires as envoy's ratelimit service counts
    /// every hit (its Redis `INCRBY`): an acquire of `n` that does not fit in what
    /// is left of the current window pushes the window past its limit, and every
    /// later acquire in that window is denied, even one of `0` permits (a check
    /// only), until the window ends. Such a window reports `remaining` 0.
    ///
    /// - A window past its limit holds `limit + 1` permits, however many were asked:
    ///   it is over, and stays so to its end (or until a refund brings it back).
    /// - Only acquires count: a peek, a reservation or a refund decides as in a
    ///   window that does not count. An acquire of more than the limit is
    ///   [`Denied::Insufficient`] and counts nothing (the Go service would count it:
    ///   a store denies it before asking), as does a denial in a window closed by
    ///   reservations booked ahead.
    /// - An acquire of `0` permits in a window past its limit is denied: the one
    ///   exception to "`n == 0` always succeeds".
    /// - In a store, a request of this rule alone writes its denial; a request of
    ///   several checks is all-or-nothing, so a denied one writes nothing, this
    ///   check's count included (the Go service would count every descriptor of it).
    ///   Its denial is not cached by a [`DeniedCache`](crate::store::DeniedCache), as
    ///   every attempt must reach the store to count.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] for an aligned window at its
    /// [`max_limit`](FixedWindow::max_limit), whose state word has no room for a
    /// count past the limit (lower the limit by one, or lengthen the window).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::time::Nanos;
    ///
    /// let fw = FixedWindow::new(10, Duration::from_secs(60))?.counting_denied()?;
    /// let mut state = fw.initial_state(Nanos::ZERO);
    /// fw.acquire(&mut state, Nanos::ZERO, 8)?;
    /// // 5 do not fit in the 2 left: denied, and counted.
    /// let denied = fw.acquire(&mut state, Nanos::ZERO, 5).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
    /// // Over the limit: even a check of 0 permits is denied, with nothing remaining.
    /// assert!(fw.acquire(&mut state, Nanos::ZERO, 1).is_err());
    /// assert!(fw.acquire(&mut state, Nanos::ZERO, 0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counting_denied(self) -> Result<FixedWindow<Aligned>, ConfigError> {
        if self.limit == Self::count_mask(self.alignment.count_bits) {
            return Err(COUNTING_AT_MAX_LIMIT);
        }
        Ok(FixedWindow {
            counting: true,
            ..self
        })
    }

    fn count_mask(count_bits: u32) -> u64 {
        (1u64 << count_bits) - 1
    }

    /// The largest window index: that of `u64::MAX`.
    fn last_index(&self) -> u64 {
        u64::MAX / self.window
    }

    fn index(&self, now: u64) -> u64 {
        now.saturating_add(self.alignment.offset) / self.window
    }

    /// The start and end of window `index`, by one multiplication. The last window
    /// runs to the end of the clock: `(index + 1) × window` overflows exactly when
    /// `index` is the last index, and a saturated `index × window` fails the
    /// addition too, so no division is needed to tell.
    #[inline]
    fn bounds(&self, index: u64) -> (u64, u64) {
        let base = index.saturating_mul(self.window);
        let start = base.saturating_sub(self.alignment.offset);
        let end = base
            .checked_add(self.window)
            .map_or(u64::MAX, |end| end.saturating_sub(self.alignment.offset));
        (start, end)
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

    /// The index of the last booked window, and the bookings.
    #[inline]
    fn view(&self, word: u64, now: u64) -> (u64, Booked) {
        let (index, count) = self.unpack(word);
        if count > 0 {
            // Most calls land in the booked window: no division to find the current
            // index.
            let (start, end) = self.bounds(index);
            if start <= now && now < end {
                let booked = Booked {
                    start,
                    end,
                    ahead: 0,
                    count,
                };
                return (index, booked);
            }
        }
        let current = self.index(now);
        let (index, count) = if count == 0 || index < current {
            (current, 0)
        } else {
            // index > current: reservations, or another thread that read the clock
            // later, booked a later window.
            (index.min(self.last_index()), count)
        };
        let (start, end) = self.bounds(index);
        let booked = Booked {
            start,
            end,
            ahead: index - current.min(index),
            count,
        };
        (index, booked)
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
    /// [`ConfigError::TooLong`] for a window over 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::time::Nanos;
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
            counting: false,
        })
    }

    /// Changes the limit, keeping what is booked. As for
    /// [`FixedWindow<Aligned>::set_limit`], the new limit applies exactly.
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

    /// The same window, counting denied acquires as envoy's ratelimit service counts
    /// every hit: see [`FixedWindow<Aligned>::counting_denied`], which this is for
    /// windows opened by a key's first request (as the Go service's keys are).
    ///
    /// # Errors
    ///
    /// None: the signature is the aligned window's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, FixedWindow};
    /// use tollgate::time::Nanos;
    ///
    /// let fw = FixedWindow::from_first_hit(2, Duration::from_secs(1))?.counting_denied()?;
    /// let mut state = fw.initial_state(Nanos::ZERO);
    /// assert!(fw.acquire(&mut state, Nanos::ZERO, 3).unwrap_err().is_never(), "not counted");
    /// assert!(fw.acquire(&mut state, Nanos::ZERO, 1).is_ok());
    /// assert!(fw.acquire(&mut state, Nanos::ZERO, 2).is_err());
    /// assert_eq!(fw.acquire(&mut state, Nanos::ZERO, 0).unwrap_err().retry_after(), Some(Duration::from_secs(1)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn counting_denied(self) -> Result<FixedWindow<FirstHit>, ConfigError> {
        Ok(FixedWindow {
            counting: true,
            ..self
        })
    }

    fn view(&self, state: &FirstHitState, now: u64) -> Booked {
        let (start, count) = (state.start.as_u64(), state.count);
        // A window that would end past the clock's last instant runs to it and never
        // ends: saturating its end would open a fresh window there on every request.
        let ended = start.checked_add(self.window).is_some_and(|end| end <= now);
        let end = start.saturating_add(self.window);
        if count == 0 || ended {
            return Booked {
                start: now,
                end: now.saturating_add(self.window),
                ahead: 0,
                count: 0,
            };
        }
        // start > now: reservations, or another thread that read the clock later,
        // booked a later window; the windows before it run back to back.
        Booked {
            start,
            end,
            ahead: start.saturating_sub(now).div_ceil(self.window),
            count,
        }
    }

    fn store(&self, booked: &Booked, next: bool, count: u64) -> FirstHitState {
        FirstHitState {
            start: Nanos::new(if next { booked.end } else { booked.start }),
            count,
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

    /// Whether denied acquires count ([`counting_denied`](FixedWindow::counting_denied)).
    pub fn counts_denied(&self) -> bool {
        self.counting
    }

    // In nanoseconds throughout: a `Duration` round trip costs a division and a
    // multiplication per decision.
    fn admitted(&self, booked: &Booked, now: u64) -> Admitted {
        Admitted::deferred(
            self.limit,
            self.remaining(booked),
            1,
            self.reset_after(booked, now),
        )
    }

    fn limited(&self, booked: &Booked, now: u64, retry: u64) -> Denied {
        Limited::deferred(
            retry,
            self.limit,
            self.remaining(booked),
            1,
            self.reset_after(booked, now),
        )
        .into()
    }

    fn remaining(&self, booked: &Booked) -> u64 {
        if booked.ahead > 0 {
            0
        } else {
            self.limit.saturating_sub(booked.count)
        }
    }

    fn reset_after(&self, booked: &Booked, now: u64) -> u64 {
        if booked.count == 0 {
            0
        } else {
            booked.end.saturating_sub(now)
        }
    }

    /// Where `n` more go: the last booked window if they fit in it (`false`, with its
    /// new count), else the one after it (`true`, with `n`).
    fn place(&self, booked: &Booked, n: u64) -> (bool, u64) {
        match booked.count.checked_add(n).filter(|&c| c <= self.limit) {
            Some(count) => (false, count),
            None => (true, n),
        }
    }

    /// Takes `n` now; the new count of the current window.
    fn take(&self, booked: &Booked, now: u64, n: u64) -> Result<(u64, Admitted), Denied> {
        check_capacity(n, self.limit)?;
        if n == 0 {
            if self.counting && booked.ahead == 0 && booked.count > self.limit {
                // Over its limit: a counting window denies even a check.
                return Err(self.limited(booked, now, booked.end.saturating_sub(now)));
            }
            return Ok((booked.count, self.admitted(booked, now)));
        }
        let (next, count) = self.place(booked, n);
        if booked.ahead == 0 && !next {
            let after = Booked { count, ..*booked };
            return Ok((count, self.admitted(&after, now)));
        }
        let fits_at = if next { booked.end } else { booked.start };
        Err(self.limited(booked, now, fits_at.saturating_sub(now)))
    }

    /// For a counting window, a denied acquire of `n` (`1..=limit`) counted: the
    /// current window's new count, past the limit, and the denial, with what was
    /// left before it. `None` if it does not count: a window booked ahead, or one already
    /// past its limit, which stays as it is.
    #[cold]
    fn counted(&self, booked: &Booked, now: u64, n: u64) -> Option<(u64, Denied)> {
        if !self.counting || n == 0 || n > self.limit || booked.ahead > 0 {
            return None;
        }
        if booked.count > self.limit {
            return None;
        }
        // The denial tells what was left before it, as Go's counts before the
        // `INCRBY` do (its near and over stats split the crossing hits by them).
        let denied = self.limited(booked, now, booked.end.saturating_sub(now));
        Some((self.limit + 1, denied))
    }

    /// Books `n` in the last booked window or the next; whether in the next, the new
    /// count, and the wait.
    fn book(
        &self,
        booked: &Booked,
        now: u64,
        n: u64,
        max_wait: Duration,
    ) -> Result<(bool, u64, u64), Denied> {
        check_capacity(n, self.limit)?;
        if n == 0 {
            return Ok((false, booked.count, 0));
        }
        let (next, count) = self.place(booked, n);
        let wait = if next { booked.end } else { booked.start }.saturating_sub(now);
        let max_wait = duration_to_nanos(max_wait);
        if next && booked.end == u64::MAX {
            // No window follows within the clock's range.
            return Err(self.limited(booked, now, wait));
        }
        if wait > max_wait {
            return Err(self.limited(booked, now, wait - max_wait));
        }
        Ok((next, count, wait))
    }

    /// Gives back the newest `n` booked: the windows before the last booked one count
    /// as full. How many windows the last booked one moves back, and its count;
    /// `None` when nothing stays booked.
    fn give_back(&self, booked: &Booked, n: u64) -> Option<(u64, u64)> {
        if n < booked.count {
            return Some((0, booked.count - n));
        }
        let rest = u128::from(n - booked.count);
        let limit = u128::from(self.limit);
        let left = (u128::from(booked.ahead) * limit).checked_sub(rest)?;
        // The new last booked window, counted from the current one: below `ahead`,
        // and holding 1..=limit.
        let last = left.checked_sub(1)? / limit;
        Some((booked.ahead - last as u64, (left - last * limit) as u64))
    }
}

impl Algorithm for FixedWindow<Aligned> {
    type State = u64;
    const PACKING: Option<Packing<Self>> = Some(Packing::new(Self::words, Self::from_words));
    const BOOKS_AHEAD: bool = true;

    fn initial_state(&self, _now: Nanos) -> u64 {
        0
    }

    #[inline]
    fn acquire(&self, word: &mut u64, now: Nanos, n: u64) -> Decision {
        let now = now.as_u64();
        let (index, booked) = self.view(*word, now);
        let (count, admitted) = match self.take(&booked, now, n) {
            Ok(taken) => taken,
            Err(denied) => {
                if self.counting {
                    if let Some((count, over)) = self.counted(&booked, now, n) {
                        *word = self.pack(index, count);
                        return Err(over);
                    }
                }
                return Err(denied);
            }
        };
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
        let (index, booked) = self.view(*word, now);
        let (next, count, wait) = self.book(&booked, now, n, max_wait)?;
        if n > 0 {
            *word = self.pack(index + u64::from(next), count);
        }
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    fn refund(&self, word: &mut u64, now: Nanos, n: u64) {
        let (index, booked) = self.view(*word, now.as_u64());
        *word = match self.give_back(&booked, n) {
            Some((back, count)) => self.pack(index - back, count),
            None => 0,
        };
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    /// Not when denied acquires count: each must reach the state.
    fn denial_lasts(&self) -> bool {
        !self.counting
    }

    fn idle_at(&self, word: &u64) -> Nanos {
        match self.unpack(*word) {
            (_, 0) => Nanos::ZERO,
            (index, _) => Nanos::new(self.bounds(index).1),
        }
    }
}

impl FixedWindow<Aligned> {
    pub(crate) fn words(&self) -> [u64; CONFIG_WORDS] {
        [
            self.limit,
            self.window,
            self.alignment.offset,
            u64::from(self.alignment.count_bits) | (u64::from(self.counting) << COUNTING_BIT),
        ]
    }

    #[inline]
    pub(crate) fn from_words(words: [u64; CONFIG_WORDS]) -> FixedWindow<Aligned> {
        FixedWindow {
            limit: words[0].max(1),
            window: words[1].max(1),
            alignment: Aligned {
                offset: words[2],
                count_bits: (words[3] & 0xff).min(63) as u32,
            },
            counting: words[3] >> COUNTING_BIT & 1 == 1,
        }
    }
}

impl Algorithm for FixedWindow<FirstHit> {
    type State = FirstHitState;
    const BOOKS_AHEAD: bool = true;

    fn initial_state(&self, _now: Nanos) -> FirstHitState {
        FirstHitState::default()
    }

    fn acquire(&self, state: &mut FirstHitState, now: Nanos, n: u64) -> Decision {
        let now = now.as_u64();
        let booked = self.view(state, now);
        let (count, admitted) = match self.take(&booked, now, n) {
            Ok(taken) => taken,
            Err(denied) => {
                if let Some((count, over)) = self.counted(&booked, now, n) {
                    *state = self.store(&booked, false, count);
                    return Err(over);
                }
                return Err(denied);
            }
        };
        if n > 0 {
            *state = self.store(&booked, false, count);
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
        let booked = self.view(state, now);
        let (next, count, wait) = self.book(&booked, now, n, max_wait)?;
        if n > 0 {
            *state = self.store(&booked, next, count);
        }
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    fn refund(&self, state: &mut FirstHitState, now: Nanos, n: u64) {
        let booked = self.view(state, now.as_u64());
        *state = match self.give_back(&booked, n) {
            Some((back, count)) => FirstHitState {
                start: Nanos::new(
                    booked
                        .start
                        .saturating_sub(back.saturating_mul(self.window)),
                ),
                count,
            },
            None => FirstHitState::default(),
        };
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    /// Not when denied acquires count: each must reach the state.
    fn denial_lasts(&self) -> bool {
        !self.counting
    }

    fn idle_at(&self, state: &FirstHitState) -> Nanos {
        Nanos::new(if state.count == 0 {
            0
        } else {
            state.start.as_u64().saturating_add(self.window)
        })
    }
}

/// The facts of windows aligned to the Unix epoch. Their Redis twin reads `{limit,
/// window µs, offset µs}`, then `1` if denied acquires count.
impl Facts for FixedWindow<Aligned> {
    const NAME: &'static str = "fixed_window";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/fixed_window.lua");
    const CONFIG: Option<FromConfig<Self>> = Some(FromConfig {
        takes_burst: false,
        build: FixedWindow::from_config,
    });

    /// The window.
    fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The limit divided.
    fn per_node(&self, share: Share) -> Result<Self, ConfigError> {
        let mut window = *self;
        window.set_limit(share.count(self.limit)?)?;
        Ok(window)
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let offset = Duration::from_nanos(self.alignment.offset);
        let mut args = vec![
            Arg::Int(exact_count(self.limit, "limit")?),
            Arg::Int(whole_micros(Facts::window(self), "window")?),
            Arg::Int(whole_micros(offset, "offset")?),
        ];
        // Only when set: a window that does not count is sent as before.
        if self.counting {
            args.push(Arg::Int(1));
        }
        Ok(args)
    }
}

impl FixedWindow<Aligned> {
    /// A rules file's windows: `requests_per_unit` per `unit`, aligned to the Unix
    /// epoch, as envoy's.
    fn from_config(requests: u64, per: Duration, _: Option<u64>) -> Result<Self, ConfigError> {
        FixedWindow::new(requests, per)
    }
}

/// The facts of windows opened by a key's first request. Their Redis twin, in the
/// same file as the aligned one, reads `{limit, window µs}`, then `1` if denied
/// acquires count.
impl Facts for FixedWindow<FirstHit> {
    const NAME: &'static str = "fixed_window_first_hit";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/fixed_window.lua");

    /// The window.
    fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The limit divided.
    fn per_node(&self, share: Share) -> Result<Self, ConfigError> {
        let mut window = *self;
        window.set_limit(share.count(self.limit)?)?;
        Ok(window)
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let mut args = vec![
            Arg::Int(exact_count(self.limit, "limit")?),
            Arg::Int(whole_micros(Facts::window(self), "window")?),
        ];
        if self.counting {
            args.push(Arg::Int(1));
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::{MAX_SCRIPT_MICROS, too_long};
    use crate::algorithm::testing::{MS, S, at, ms};

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
        assert!(
            fw.reserve(&mut s, at(0), 4, Duration::MAX)
                .unwrap_err()
                .is_never()
        );
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
    fn reservations_at_the_largest_limit_book_ahead() {
        // One second: 29 count bits, all taken by the limit; the count field holds one
        // window's count, so bookings ahead need no room in it.
        let fw = FixedWindow::new((1 << 29) - 1, Duration::from_secs(1)).unwrap();
        let mut s = fw.initial_state(Nanos::ZERO);
        fw.acquire(&mut s, Nanos::ZERO, 1).unwrap();
        for k in 1..4 {
            let r = fw
                .reserve(&mut s, Nanos::ZERO, fw.limit(), Duration::MAX)
                .unwrap();
            assert_eq!(r.wait(), Duration::from_secs(k));
        }
        assert_eq!(fw.idle_at(&s), Nanos::new(4 * S));
    }

    #[test]
    fn bookings_stop_at_the_clocks_last_window() {
        let fw = FixedWindow::new(1, Duration::from_nanos(u64::MAX / 2)).unwrap();
        let mut s = fw.initial_state(Nanos::ZERO);
        for wait in [0, u64::MAX / 2, u64::MAX / 2 * 2] {
            let r = fw.reserve(&mut s, Nanos::ZERO, 1, Duration::MAX).unwrap();
            assert_eq!(r.wait(), Duration::from_nanos(wait));
        }
        // The third window runs to the end of the clock; none follows.
        assert_eq!(fw.idle_at(&s), Nanos::MAX);
        let before = s;
        let denied = fw
            .reserve(&mut s, Nanos::ZERO, 1, Duration::MAX)
            .unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_nanos(u64::MAX)));
        assert_eq!(s, before);
    }

    #[test]
    fn refund_gives_back_the_newest_bookings_window_by_window() {
        let fw = aligned(3, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 2).unwrap();
        // Skips the 1 left in window 0 and fills window 1, then books 1 in window 2.
        fw.reserve(&mut s, at(0), 3, ms(1000)).unwrap();
        fw.reserve(&mut s, at(0), 1, ms(2000)).unwrap();
        assert_eq!(fw.idle_at(&s), at(3000));
        fw.refund(&mut s, at(0), 2);
        // Window 2 is empty again, and window 1 holds 2.
        assert_eq!(fw.idle_at(&s), at(2000));
        assert!(fw.acquire(&mut s, at(1000), 1).is_ok());
        assert!(fw.acquire(&mut s, at(1000), 1).is_err());
        // Back past window 1: window 0 counts as full, so 2 of its 3 are given back.
        fw.refund(&mut s, at(0), 5);
        assert_eq!(fw.acquire(&mut s, at(0), 0).unwrap().remaining(), 2);
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

    /// Regression: the booked count was decoded as `count - windows passed × limit`,
    /// so raising the limit moved bookings back into the current window and lowering
    /// it pushed them on; a window could then admit more than the new limit.
    #[test]
    fn set_limit_applies_exactly_to_windows_booked_ahead() {
        fn check<A: Algorithm>(mut fw: A, set_limit: fn(&mut A, u64)) {
            let mut s = fw.initial_state(at(0));
            // Window 0 holds 10, window 1 holds 10, window 2 holds 5.
            fw.acquire(&mut s, at(0), 10).unwrap();
            fw.reserve(&mut s, at(0), 10, ms(1000)).unwrap();
            fw.reserve(&mut s, at(0), 5, ms(2000)).unwrap();
            set_limit(&mut fw, 20);
            assert!(fw.acquire(&mut s, at(0), 1).is_err());
            assert!(
                fw.acquire(&mut s, at(1000), 1).is_err(),
                "window 1 stays closed"
            );
            assert!(
                fw.acquire(&mut s, at(2000), 16).is_err(),
                "window 2 holds 5 of 20"
            );
            assert!(fw.acquire(&mut s, at(2000), 15).is_ok());
            set_limit(&mut fw, 3);
            assert!(
                fw.acquire(&mut s, at(2500), 1).is_err(),
                "20 taken, over the new 3"
            );
            assert!(fw.acquire(&mut s, at(3000), 3).is_ok());
        }
        check(aligned(10, 1000), |fw, limit| fw.set_limit(limit).unwrap());
        check(first_hit(10, 1000), |fw, limit| {
            fw.set_limit(limit).unwrap()
        });
    }

    #[test]
    fn window_bounds_run_to_the_end_of_the_clock_without_dividing() {
        for window in [2, 3, 1_000, u64::MAX / 2, u64::MAX] {
            let fw = FixedWindow::new(1, Duration::from_nanos(window))
                .unwrap()
                .aligned_to_unix_epoch(Duration::from_nanos(window / 3));
            let last = fw.last_index();
            for index in [0, 1, last.saturating_sub(1), last, u64::MAX] {
                let (start, end) = fw.bounds(index);
                let expected_end = if index >= last {
                    u64::MAX
                } else {
                    ((index + 1) * window).saturating_sub(fw.alignment.offset)
                };
                assert_eq!(end, expected_end, "window {window}, index {index}");
                if index <= last {
                    let expected_start = (index * window).saturating_sub(fw.alignment.offset);
                    assert_eq!(start, expected_start, "window {window}, index {index}");
                }
            }
        }
    }

    #[test]
    fn words_round_trip() {
        let fw = aligned(7, 1234).aligned_to_unix_epoch(Duration::from_secs(5));
        assert_eq!(FixedWindow::from_words(fw.words()), fw);
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
            Err(crate::units::too_long("window"))
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
            Err(crate::units::too_long("window"))
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

    /// Regression: a first-hit window that would end past the clock's end saturated
    /// its end at the last instant, where every request then opened a fresh window.
    #[test]
    fn first_hit_windows_never_reopen_at_the_clocks_end() {
        let fw = first_hit(10, 1000);
        let start = u64::MAX - 500 * MS;
        let mut s = fw.initial_state(Nanos::new(start));
        let admitted: u64 = [start, start + 100 * MS, u64::MAX - 1, u64::MAX]
            .iter()
            .flat_map(|&now| (0..100).map(move |_| now))
            .filter(|&now| fw.acquire(&mut s, Nanos::new(now), 1).is_ok())
            .count() as u64;
        assert_eq!(admitted, 10);
        let denied = fw.acquire(&mut s, Nanos::MAX, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::ZERO));
        assert!(fw.reserve(&mut s, Nanos::MAX, 1, Duration::MAX).is_err());
    }

    #[test]
    fn aligned_windows_near_the_clocks_end_admit_the_limit_once() {
        let fw = aligned(10, 1000).aligned_to_unix_epoch(Duration::from_millis(300));
        let start = u64::MAX - 500 * MS;
        let mut s = fw.initial_state(Nanos::new(start));
        let admitted = [start, u64::MAX - 1, u64::MAX]
            .iter()
            .flat_map(|&now| (0..100).map(move |_| now))
            .filter(|&now| fw.acquire(&mut s, Nanos::new(now), 1).is_ok())
            .count();
        assert_eq!(admitted, 10);
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

    #[test]
    fn aligned_windows_send_their_offset_to_the_script() {
        let fw = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
        assert_eq!(
            fw.script_args(),
            Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(0)])
        );
        let shifted = fw.aligned_to_unix_epoch(Duration::from_millis(1_700_000_000_300));
        assert_eq!(
            shifted.script_args(),
            Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(300_000)])
        );
    }

    #[test]
    fn first_hit_windows_send_limit_and_window_to_the_script() {
        let fw = FixedWindow::from_first_hit(3, Duration::from_millis(250)).unwrap();
        assert_eq!(fw.script_args(), Ok(vec![Arg::Int(3), Arg::Int(250_000)]));
    }

    #[test]
    fn a_sub_microsecond_window_or_offset_has_no_script_args() {
        let window = Duration::from_nanos(1_500);
        let aligned = FixedWindow::new(1, window).unwrap();
        assert!(matches!(
            aligned.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let first_hit = FixedWindow::from_first_hit(1, window).unwrap();
        assert!(matches!(
            first_hit.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let shifted = FixedWindow::new(1, Duration::from_secs(1))
            .unwrap()
            .aligned_to_unix_epoch(Duration::from_nanos(1_700_000_000_000_000_500));
        assert!(matches!(
            shifted.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "offset",
                ..
            })
        ));
    }

    #[test]
    fn windows_beyond_two_to_the_52_micros_have_no_script_args() {
        let fits = Duration::from_secs(1 << 32);
        assert!(FixedWindow::new(1, fits).unwrap().script_args().is_ok());
        let huge = Duration::from_secs(1 << 33);
        let overflow = Err(too_long("window", MAX_SCRIPT_MICROS));
        assert_eq!(FixedWindow::new(1, huge).unwrap().script_args(), overflow);
        assert_eq!(
            FixedWindow::from_first_hit(1, huge).unwrap().script_args(),
            overflow
        );
    }

    #[test]
    fn a_first_hit_limit_beyond_two_to_the_52_has_no_script_args() {
        let second = Duration::from_secs(1);
        let largest = FixedWindow::from_first_hit(1 << 52, second).unwrap();
        assert!(largest.script_args().is_ok());
        let huge = FixedWindow::from_first_hit((1 << 52) + 1, second).unwrap();
        assert_eq!(
            huge.script_args(),
            Err(ConfigError::Overflow { parameter: "limit" })
        );
    }

    fn counting(limit: u64, window_ms: u64) -> FixedWindow {
        aligned(limit, window_ms).counting_denied().unwrap()
    }

    #[test]
    fn a_counting_window_pushed_over_denies_every_acquire_to_its_end() {
        // The Go service's counter: 8 of 10, then 5 more asked: INCRBY makes 13.
        let fw = counting(10, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(100), 8).unwrap();
        let denied = fw.acquire(&mut s, at(200), 5).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(800)));
        let Denied::Limited(limited) = denied else {
            panic!("{denied:?}")
        };
        // The denial tells what was left before it (Go's count before its INCRBY).
        assert_eq!(limited.remaining(), 2, "2 were left before the denied 5");
        assert_eq!(limited.reset_after(), ms(800));
        let Err(Denied::Limited(over)) = fw.acquire(&mut s, at(250), 1) else {
            panic!("admitted past the limit")
        };
        assert_eq!(over.remaining(), 0, "over: nothing remains");
        // What would have fit before is denied now, and so is a check of nothing.
        assert!(fw.acquire(&mut s, at(300), 2).is_err());
        let check = fw.acquire(&mut s, at(300), 0).unwrap_err();
        assert_eq!(check.retry_after(), Some(ms(700)));
        assert!(fw.peek(&s, at(300), 0).is_err());
        // The next window starts afresh.
        assert_eq!(fw.acquire(&mut s, at(1000), 0).unwrap().remaining(), 10);
        assert_eq!(fw.acquire(&mut s, at(1000), 10).unwrap().remaining(), 0);
    }

    #[test]
    fn a_window_that_does_not_count_keeps_what_fits_after_a_denial() {
        let fw = aligned(10, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(100), 8).unwrap();
        let before = s;
        let Err(Denied::Limited(limited)) = fw.acquire(&mut s, at(200), 5) else {
            panic!("admitted")
        };
        assert_eq!(limited.remaining(), 2);
        assert_eq!(s, before);
        assert!(fw.acquire(&mut s, at(300), 2).is_ok());
        assert_eq!(fw.acquire(&mut s, at(300), 0).unwrap().remaining(), 0);
    }

    #[test]
    fn counting_leaves_peeks_reservations_refunds_and_never_alone() {
        let fw = counting(3, 1000);
        let mut s = fw.initial_state(at(0));
        fw.acquire(&mut s, at(0), 2).unwrap();
        let before = s;
        assert!(fw.peek(&s, at(0), 2).is_err());
        assert!(fw.acquire(&mut s, at(0), 4).unwrap_err().is_never());
        assert!(fw.reserve(&mut s, at(0), 2, ms(10)).is_err());
        assert_eq!(s, before, "nothing counted");
        // Over, then a refund of 2 brings the window back to 2 of 3.
        assert!(fw.acquire(&mut s, at(0), 2).is_err());
        fw.refund(&mut s, at(0), 2);
        assert_eq!(fw.acquire(&mut s, at(0), 0).unwrap().remaining(), 1);
        // A window closed by a reservation booked ahead does not count.
        let mut ahead = fw.initial_state(at(0));
        fw.acquire(&mut ahead, at(0), 3).unwrap();
        fw.reserve(&mut ahead, at(0), 1, ms(1000)).unwrap();
        let booked = ahead;
        assert!(fw.acquire(&mut ahead, at(10), 1).is_err());
        assert_eq!(ahead, booked);
        assert_eq!(fw.acquire(&mut ahead, at(10), 0).unwrap().remaining(), 0);
    }

    #[test]
    fn a_first_hit_counting_window_opens_at_the_denied_request_too() {
        let fh = first_hit(2, 1000).counting_denied().unwrap();
        assert!(fh.counts_denied());
        let mut s = fh.initial_state(at(0));
        fh.acquire(&mut s, at(500), 2).unwrap();
        assert!(fh.acquire(&mut s, at(900), 1).is_err());
        assert_eq!(s.count(), 3);
        assert_eq!(fh.idle_at(&s), at(1500));
        let check = fh.acquire(&mut s, at(1000), 0).unwrap_err();
        assert_eq!(check.retry_after(), Some(ms(500)));
        assert!(fh.acquire(&mut s, at(1500), 2).is_ok());
    }

    #[test]
    fn counting_needs_room_for_a_count_past_the_limit() {
        let second = Duration::from_secs(1);
        let max = FixedWindow::max_limit(second);
        let at_max = FixedWindow::new(max, second).unwrap();
        assert!(matches!(
            at_max.counting_denied(),
            Err(ConfigError::OutOfRange {
                parameter: "limit",
                ..
            })
        ));
        let mut below = FixedWindow::new(max - 1, second)
            .unwrap()
            .counting_denied()
            .unwrap();
        assert!(below.set_limit(max).is_err());
        assert_eq!(below.limit(), max - 1);
        // Past the limit is stored exactly at the largest limit that counts.
        let mut s = below.initial_state(Nanos::ZERO);
        below.acquire(&mut s, Nanos::ZERO, max - 1).unwrap();
        assert!(below.acquire(&mut s, Nanos::ZERO, 1).is_err());
        assert!(below.acquire(&mut s, Nanos::ZERO, 0).is_err());
        assert!(!below.denial_lasts());
        assert!(aligned(1, 1000).denial_lasts());
    }

    #[test]
    fn counting_survives_packing_and_reaches_the_script() {
        let fw = counting(7, 1000).aligned_to_unix_epoch(ms(1_700_000_000_300));
        let packing = FixedWindow::<Aligned>::PACKING.unwrap();
        assert_eq!((packing.unpack)((packing.pack)(&fw)), fw);
        let plain = aligned(7, 1000);
        assert_eq!((packing.unpack)((packing.pack)(&plain)), plain);
        assert_ne!(fw, plain.aligned_to_unix_epoch(ms(1_700_000_000_300)));
        assert_eq!(
            fw.script_args().unwrap(),
            [
                Arg::Int(7),
                Arg::Int(1_000_000),
                Arg::Int(300_000),
                Arg::Int(1)
            ]
        );
        assert_eq!(plain.script_args().unwrap().len(), 3);
        let fh = first_hit(7, 1000).counting_denied().unwrap();
        assert_eq!(fh.script_args().unwrap().len(), 3);
        assert!(fh.per_node(Share::new(2).unwrap()).unwrap().counts_denied());
    }
}
