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
#[path = "fixed_window_tests/mod.rs"]
mod tests;
