//! Sliding window log, as ClassDojo's rolling-rate-limiter: a timestamp per permit,
//! and no window of length `W`, wherever it starts, admits more than `limit`.
//!
//! The decision at `t` counts entries newer than `t - W` (entries later than `t`, from
//! reservations or from a thread that read the clock later, count too, which can only
//! deny more). A request needs the `(limit - n + 1)`-th newest entry to have expired.
//!
//! Memory is bounded at `2 × limit` entries:
//!
//! - Expired entries are dropped, but the newest `limit` always stay. Whenever anything
//!   was dropped, `limit` newer entries remain, so a decision on an older clock
//!   reading (a thread that read the clock before another took the lock) that would
//!   need a dropped entry finds the window full anyway. (A refund in between can
//!   remove those newer entries; only then can such a late decision miss a permit.)
//! - Counting blocked attempts could grow the log without end, so past the bound a
//!   blocked attempt replaces the oldest entries. Every entry still stands for a permit
//!   taken at or before its time, which keeps the log exact after refunds too.
//! - Reservations never push out an unexpired entry (refunding one would uncover
//!   permits the log had forgotten), which limits them to about one window's worth of
//!   permits ahead.
//!
//! An entry whose window or gap would end past the clock's last instant
//! ([`Nanos::MAX`]) never expires on this clock; letting that end saturate at the
//! last instant would free every entry there at once.

use std::collections::VecDeque;
use std::time::Duration;

use super::script::{Arg, MAX_SCRIPT_MICROS, whole_micros};
use super::{Algorithm, Facts, FromConfig, Share, check_capacity};
use crate::decision::{Admitted, Decision, Denied, Limited, Reservation};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;
use crate::units::{duration_to_nanos, nanos_of, positive_nanos, until};

/// An exact rolling window: at most `limit` permits in any window of length `window`,
/// optionally at least `min_gap` apart, optionally counting blocked attempts
/// (ClassDojo's rolling-rate-limiter).
///
/// The state, a [`SlidingLogState`], is the log: nanosecond timestamps, oldest first,
/// one entry per permit, at most `2 × limit` entries of 8 bytes.
///
/// Reservations are booked at the earliest time they fit, as entries in the future,
/// provided the log stays within its bound: about one window's worth of permits can
/// be booked ahead. [`refund`](Algorithm::refund) removes the newest entries.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Limiter;
/// use tollgate::algorithm::SlidingLog;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter = Limiter::with_clock(SlidingLog::new(2, Duration::from_secs(10))?, clock.clone());
/// assert!(limiter.try_acquire(1).is_ok());
/// clock.advance(Duration::from_secs(4));
/// assert!(limiter.try_acquire(1).is_ok());
/// let denied = limiter.try_acquire(1).unwrap_err();
/// // The first entry leaves the window 10 s after it was taken.
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(6)));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window: u64,
    min_gap: u64,
    count_blocked: bool,
}

impl SlidingLog {
    /// The largest limit: one key's log holds up to `2 × limit` entries of 8 bytes, so
    /// this caps it at 16 MB.
    pub const MAX_LIMIT: u64 = 1_000_000;

    /// At most `limit` permits in any window of length `window`, no minimum gap, blocked
    /// attempts not counted.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `limit` or `window`,
    /// [`ConfigError::OutOfRange`] for a limit above [`SlidingLog::MAX_LIMIT`],
    /// [`ConfigError::TooLong`] for a window over 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingLog};
    ///
    /// let log = SlidingLog::new(100, Duration::from_secs(60))?;
    /// assert_eq!(log.capacity(), 100);
    /// assert!(SlidingLog::new(2_000_000, Duration::from_secs(60)).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(limit: u64, window: Duration) -> Result<SlidingLog, ConfigError> {
        let mut log = SlidingLog {
            limit: 1,
            window: positive_nanos("window", window)?,
            min_gap: 0,
            count_blocked: false,
        };
        log.set_limit(limit)?;
        Ok(log)
    }

    /// The same log with at least `gap` between two requests (ClassDojo's
    /// `minDifference`); zero for none. The `n` permits of one request count as one
    /// action.
    ///
    /// # A gap longer than the window
    ///
    /// Here tollgate and ClassDojo's rolling-rate-limiter differ. ClassDojo keeps
    /// only the actions inside the window, so once the previous action has left it,
    /// it forgets it and admits, even before the gap has run: with a window of 1 s
    /// and a gap of 5 s, an action 2 s after the last is admitted. tollgate keeps
    /// the previous action until its gap has run too (the log's horizon is the
    /// longer of the window and the gap), and denies that action for 3 s more.
    /// tollgate's is the consistent reading: ClassDojo's own answer after an action
    /// (`millisecondsUntilAllowed`, at least `minDifference`) tells the caller to
    /// wait the whole 5 s, yet it admits the next action from 1 s on. With a gap no
    /// longer than the window, the two agree.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooLong`] for a gap over 584 years.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingLog};
    /// use tollgate::time::Nanos;
    ///
    /// let log = SlidingLog::new(10, Duration::from_secs(60))?.min_gap(Duration::from_secs(1))?;
    /// let mut state = log.initial_state(Nanos::ZERO);
    /// assert!(log.acquire(&mut state, Nanos::ZERO, 1).is_ok());
    /// let denied = log.acquire(&mut state, Nanos::new(250_000_000), 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(750)));
    ///
    /// // A gap longer than the window still holds once the window has passed,
    /// // where ClassDojo's limiter would admit.
    /// let log = SlidingLog::new(10, Duration::from_secs(1))?.min_gap(Duration::from_secs(5))?;
    /// let mut state = log.initial_state(Nanos::ZERO);
    /// assert!(log.acquire(&mut state, Nanos::ZERO, 1).is_ok());
    /// let denied = log.acquire(&mut state, Nanos::new(2_000_000_000), 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(3)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_gap(self, gap: Duration) -> Result<SlidingLog, ConfigError> {
        Ok(SlidingLog {
            min_gap: nanos_of("min_gap", gap)?,
            ..self
        })
    }

    /// The same log, recording blocked attempts too (ClassDojo's behaviour): someone
    /// who keeps trying faster than the limit stays blocked until they pause.
    ///
    /// With this on, a denied [`acquire`](Algorithm::acquire) records its `n` entries
    /// at `now`: the one exception to "a denial changes nothing". Peeks,
    /// reservations, and requests above the limit never record.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingLog};
    /// use tollgate::time::Nanos;
    ///
    /// let log = SlidingLog::new(1, Duration::from_secs(10))?.count_blocked(true);
    /// let mut state = log.initial_state(Nanos::ZERO);
    /// let at = |s: u64| Nanos::new(s * 1_000_000_000);
    /// assert!(log.acquire(&mut state, at(0), 1).is_ok());
    /// assert!(log.acquire(&mut state, at(9), 1).is_err());
    /// // Each attempt counts: this one holds the window until 20 s.
    /// let denied = log.acquire(&mut state, at(10), 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn count_blocked(self, count_blocked: bool) -> SlidingLog {
        SlidingLog {
            count_blocked,
            ..self
        }
    }

    /// Changes the limit, keeping the log.
    ///
    /// # Errors
    ///
    /// As [`SlidingLog::new`] for `limit`; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingLog};
    ///
    /// let mut log = SlidingLog::new(10, Duration::from_secs(1))?;
    /// log.set_limit(20)?;
    /// assert_eq!(log.capacity(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_limit(&mut self, limit: u64) -> Result<(), ConfigError> {
        let limit = non_zero("limit", limit)?;
        if limit > Self::MAX_LIMIT {
            return Err(ConfigError::OutOfRange {
                parameter: "limit",
                expected: "at most SlidingLog::MAX_LIMIT (1,000,000)",
            });
        }
        self.limit = limit;
        Ok(())
    }

    /// Changes the window, keeping the log. A shorter window applies at once; a longer
    /// one cannot bring back entries already dropped as expired, so it holds exactly
    /// from one old window's length on.
    ///
    /// # Errors
    ///
    /// As [`SlidingLog::new`] for `window`; on error nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SlidingLog;
    ///
    /// let mut log = SlidingLog::new(10, Duration::from_secs(1))?;
    /// log.set_window(Duration::from_secs(2))?;
    /// assert_eq!(log.window(), Duration::from_secs(2));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn set_window(&mut self, window: Duration) -> Result<(), ConfigError> {
        self.window = positive_nanos("window", window)?;
        Ok(())
    }

    /// The most permits any window admits.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The least time between two requests.
    pub fn minimum_gap(&self) -> Duration {
        Duration::from_nanos(self.min_gap)
    }

    /// Whether blocked attempts are recorded.
    pub fn counts_blocked(&self) -> bool {
        self.count_blocked
    }

    /// Whether the entry at `t` has left the window at `now`: never when the window
    /// would end past the clock's last instant.
    fn expired(&self, t: u64, now: u64) -> bool {
        now.checked_sub(self.window).is_some_and(|cut| t <= cut)
    }

    /// Entries still in the window at `now` (later ones included).
    fn active(&self, log: &VecDeque<u64>, now: u64) -> u64 {
        // The log is sorted and the live entries are the newest, usually few of
        // them: gallop from the back to bracket the first live entry, then bisect.
        let len = log.len();
        let mut k = 1;
        while k <= len && !self.expired(log[len - k], now) {
            k *= 2;
        }
        let (mut lo, mut hi) = (len.saturating_sub(k), len - k / 2);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.expired(log[mid], now) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (len - lo) as u64
    }

    /// The earliest time from `now` at which `n` (at least 1) fit; `None` if that is
    /// past the clock's last instant.
    fn allowed_at(&self, log: &VecDeque<u64>, now: u64, n: u64) -> Option<u64> {
        let mut at = now;
        // At most `limit - n` entries may remain: the one before them must expire.
        let keep = self.limit.saturating_sub(n);
        if let Some(must_expire) = (log.len() as u64).checked_sub(keep + 1) {
            // must_expire < len, so it indexes the log.
            let t = log[must_expire as usize];
            at = at.max(t.checked_add(self.window)?);
        }
        if self.min_gap > 0 {
            if let Some(&newest) = log.back() {
                at = at.max(newest.checked_add(self.min_gap)?);
            }
        }
        Some(at)
    }

    /// Permits that could go now, given `active` entries and the newest one.
    fn remaining(&self, active: u64, newest: Option<u64>, now: u64) -> u64 {
        let gap_runs = |t: u64| t.checked_add(self.min_gap).is_none_or(|end| end > now);
        match newest {
            Some(t) if self.min_gap > 0 && gap_runs(t) => 0,
            _ => self.limit.saturating_sub(active),
        }
    }

    /// Time until every entry has expired and the gap has run.
    fn reset_after(&self, newest: Option<u64>, now: u64) -> u64 {
        let horizon = self.window.max(self.min_gap);
        newest.map_or(0, |t| t.saturating_add(horizon).saturating_sub(now))
    }

    /// The decision as if `n` were taken at `now`, which they may be.
    fn admitted(&self, log: &VecDeque<u64>, now: u64, n: u64) -> Admitted {
        let newest = match (log.back(), n) {
            (Some(&t), 0) => Some(t),
            (Some(&t), _) => Some(t.max(now)),
            (None, 0) => None,
            (None, _) => Some(now),
        };
        let active = self.active(log, now).saturating_add(n);
        Admitted::deferred(
            self.limit,
            self.remaining(active, newest, now),
            1,
            self.reset_after(newest, now),
        )
    }

    fn limited(&self, log: &VecDeque<u64>, now: u64, retry: u64) -> Denied {
        let newest = log.back().copied();
        Limited::deferred(
            retry,
            self.limit,
            self.remaining(self.active(log, now), newest, now),
            1,
            self.reset_after(newest, now),
        )
        .into()
    }

    /// The most entries the log holds.
    fn bound(&self) -> usize {
        // limit <= MAX_LIMIT, so this fits.
        2 * self.limit as usize
    }

    /// Records `n` entries at `at` and drops expired entries beyond the newest
    /// `limit` (which also keeps the newest for the gap). Only blocked attempts may
    /// meet the bound: they then replace the oldest entries.
    fn record(&self, state: &mut SlidingLogState, now: u64, at: u64, n: u64) {
        let limit = self.limit as usize;
        while state.log.len() > limit {
            match state.log.front() {
                Some(&t) if self.expired(t, now) => state.drop_oldest(1),
                _ => break,
            };
        }
        self.append(state, at, n);
    }

    /// `record` after its expired entries were dropped: adds `n` entries at `at`,
    /// keeping the log sorted and within its bound.
    #[inline]
    fn append(&self, state: &mut SlidingLogState, at: u64, n: u64) {
        let log = &mut state.log;
        let keep = log.len().max(self.bound());
        // n <= limit, so this fits.
        let copies = n as usize;
        // Most entries are the newest: no search then.
        if log.back().is_none_or(|&t| t <= at) {
            if copies == 1 {
                log.push_back(at);
            } else {
                log.extend(std::iter::repeat_n(at, copies));
            }
        } else {
            // A booking later than `at` exists: keep the log sorted.
            let position = log.partition_point(|&t| t <= at);
            let later = log.split_off(position);
            log.extend(std::iter::repeat_n(at, copies));
            log.extend(later);
            // The log stays sorted and an insertion only moves entries later: the
            // first `first_live` are no later than before, so the hint holds.
        }
        state.drop_oldest(state.log.len().saturating_sub(keep));
    }

    /// `acquire` the general way: every case, the usual admission included.
    #[inline(never)]
    fn acquire_general(&self, state: &mut SlidingLogState, now: Nanos, n: u64) -> Decision {
        let now = now.as_u64();
        if n == 0 {
            return Ok(self.admitted(&state.log, now, 0));
        }
        let at = self.allowed_at(&state.log, now, n);
        if at != Some(now) {
            if !self.count_blocked {
                return Err(self.limited(&state.log, now, until(at, now)));
            }
            self.record(state, now, now, n);
            // The attempt itself now holds the window: the retry moves on.
            let at = self.allowed_at(&state.log, now, n);
            return Err(self.limited(&state.log, now, until(at, now)));
        }
        let admitted = self.admitted(&state.log, now, n);
        self.record(state, now, now, n);
        Ok(admitted)
    }

    /// The usual admission, without the general bookkeeping: `n` of 1 up to the
    /// limit, no gap, the clock past its first window, and the request fits now.
    /// `None` otherwise, having changed nothing: the general way decides then.
    ///
    /// The same decision and log as the general way (a proptest holds it to that),
    /// in fewer steps: the cut (`now - window`) is taken once, and one count of the
    /// live entries, from the state's hint, gives the admission, the permits left
    /// and which expired entries go.
    #[inline]
    fn admit_now(&self, state: &mut SlidingLogState, now: u64, n: u64) -> Option<Admitted> {
        if n == 0 || self.min_gap > 0 {
            return None;
        }
        let cut = now.checked_sub(self.window)?;
        let len = state.log.len();
        let live = len - state.first_later_than(cut);
        // At most `limit - n` may be live (n <= limit, checked): the log being
        // sorted, this is the general way's test that the entry before the newest
        // `limit - n` has expired.
        if live as u64 > self.limit - n {
            return None;
        }
        let newest = state.log.back().map_or(now, |&t| t.max(now));
        let admitted = Admitted::deferred(
            self.limit,
            self.limit - n - live as u64,
            1,
            newest.saturating_add(self.window) - now,
        );
        // As `record`: the expired entries beyond the newest `limit` go. At most
        // `limit - n` entries are live here, so those are all expired, and after
        // them the `n` new entries stay within the bound.
        state.drop_oldest(len.saturating_sub(self.limit as usize));
        if newest == now && n == 1 {
            // The usual case: the newest entry.
            state.log.push_back(now);
        } else {
            self.append(state, now, n);
        }
        Some(admitted)
    }
}

/// A [`SlidingLog`]'s state: the log of nanosecond timestamps, oldest first, one
/// entry per permit, and a hint to the first entry still in the window, so that the
/// usual admission counts the live entries in a step or two instead of a search.
///
/// The hint is a cache: two states with the same entries are equal, whatever their
/// hints.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, SlidingLog, SlidingLogState};
/// use tollgate::time::Nanos;
///
/// let log = SlidingLog::new(10, Duration::from_secs(1))?;
/// let mut state: SlidingLogState = log.initial_state(Nanos::ZERO);
/// log.acquire(&mut state, Nanos::new(5), 2).unwrap();
/// assert_eq!(state.len(), 2);
/// assert_eq!(state.iter().copied().collect::<Vec<_>>(), [5, 5]);
/// assert_eq!(state, SlidingLogState::from_iter([5, 5]));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct SlidingLogState {
    log: VecDeque<u64>,
    /// Every entry before this index is at or before `cut`: expired for any clock
    /// reading whose `now - window` is at least `cut`, whatever the window was.
    first_live: usize,
    /// The largest `now - window` the hint was taken at (a cut rather than a time,
    /// so that a changed window cannot make the hint wrong).
    cut: u64,
}

impl SlidingLogState {
    /// An empty log.
    pub fn new() -> SlidingLogState {
        SlidingLogState::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.log.len()
    }

    /// Whether the log has no entries.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// The entries (nanosecond timestamps), oldest first.
    pub fn iter(&self) -> std::collections::vec_deque::Iter<'_, u64> {
        self.log.iter()
    }

    /// The entries as two slices, oldest first (as [`VecDeque::as_slices`]).
    pub fn as_slices(&self) -> (&[u64], &[u64]) {
        self.log.as_slices()
    }

    /// Drops the `k` oldest entries.
    #[inline]
    fn drop_oldest(&mut self, k: usize) {
        match k {
            0 => return,
            1 => {
                self.log.pop_front();
            }
            _ => {
                self.log.drain(..k);
            }
        }
        self.first_live = self.first_live.saturating_sub(k);
    }

    /// The index of the first entry later than `cut`, and the hint moved there.
    #[inline]
    fn first_later_than(&mut self, cut: u64) -> usize {
        if cut < self.cut {
            let (older, newer) = self.log.as_slices();
            // A clock reading older than the hint's (it lost the race to the lock):
            // entries before the hint may be live for it.
            let live = match newer.first() {
                Some(&t) if t <= cut => later_than(newer, cut),
                _ => newer.len() + later_than(older, cut),
            };
            return older.len() + newer.len() - live;
        }
        // Time only moves forward: the entries before the hint have expired, and
        // usually none, one or two more since. Those three are looked at without
        // a branch on each, whose outcome would change from call to call.
        let mut first = self.first_live;
        if first + 3 <= self.log.len() {
            let log = &self.log;
            let expired = usize::from(log[first] <= cut)
                + usize::from(log[first + 1] <= cut)
                + usize::from(log[first + 2] <= cut);
            first += expired;
            if expired < 3 {
                self.first_live = first;
                self.cut = cut;
                return first;
            }
        } else {
            // Near the end of the log: a look at each.
            while self.log.get(first).is_some_and(|&t| t <= cut) {
                first += 1;
            }
            self.first_live = first;
            self.cut = cut;
            return first;
        }
        let (older, newer) = self.log.as_slices();
        let from = first;
        let first = if from < older.len() && older[older.len() - 1] > cut {
            gallop(older, from, cut)
        } else {
            older.len() + gallop(newer, from.saturating_sub(older.len()), cut)
        };
        self.first_live = first;
        self.cut = cut;
        first
    }
}

/// Equal entries: the hint does not count.
impl PartialEq for SlidingLogState {
    fn eq(&self, other: &SlidingLogState) -> bool {
        self.log == other.log
    }
}

impl Eq for SlidingLogState {}

/// A log of the given entries (nanosecond timestamps), sorted as the algorithm
/// keeps them.
impl FromIterator<u64> for SlidingLogState {
    fn from_iter<I: IntoIterator<Item = u64>>(entries: I) -> SlidingLogState {
        let mut log: VecDeque<u64> = entries.into_iter().collect();
        log.make_contiguous().sort_unstable();
        SlidingLogState {
            log,
            ..SlidingLogState::default()
        }
    }
}

/// The entries, oldest first.
impl From<SlidingLogState> for VecDeque<u64> {
    fn from(state: SlidingLogState) -> VecDeque<u64> {
        state.log
    }
}

/// The index of the first entry of the sorted slice later than `cut`, knowing those
/// before `from` are not: a gallop forward from `from` brackets it, a bisection
/// finds it. Usually the first probe or the second.
#[inline]
fn gallop(s: &[u64], from: usize, cut: u64) -> usize {
    let mut lo = from.min(s.len());
    let mut k = 1;
    loop {
        // s[..lo] are at or before the cut.
        let probe = lo + k - 1;
        if probe >= s.len() {
            return lo + s[lo..].partition_point(|&t| t <= cut);
        }
        if s[probe] > cut {
            return lo + s[lo..probe].partition_point(|&t| t <= cut);
        }
        lo = probe + 1;
        k *= 2;
    }
}

/// Entries of the sorted slice later than `cut`: a gallop from the back brackets the
/// first of them, a bisection finds it.
#[inline]
fn later_than(s: &[u64], cut: u64) -> usize {
    let len = s.len();
    let mut k = 1;
    while k <= len && s[len - k] > cut {
        k *= 2;
    }
    // s[len - k] <= cut, if it exists; s[len - k/2..] are later.
    let lo = len.saturating_sub(k);
    let hi = len - k / 2;
    len - lo - s[lo..hi].partition_point(|&t| t <= cut)
}

impl Algorithm for SlidingLog {
    type State = SlidingLogState;
    const BOOKS_AHEAD: bool = true;

    /// Not when blocked attempts count: each must reach the log.
    fn denial_lasts(&self) -> bool {
        !self.count_blocked
    }

    fn initial_state(&self, _now: Nanos) -> SlidingLogState {
        SlidingLogState::new()
    }

    /// Inlined: the usual admission is short; the rest goes out of line.
    #[inline]
    fn acquire(&self, state: &mut SlidingLogState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.limit)?;
        if let Some(admitted) = self.admit_now(state, now.as_u64(), n) {
            return Ok(admitted);
        }
        self.acquire_general(state, now, n)
    }

    fn peek(&self, state: &SlidingLogState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.limit)?;
        let log = &state.log;
        let now = now.as_u64();
        if n == 0 {
            return Ok(self.admitted(log, now, 0));
        }
        let at = self.allowed_at(log, now, n);
        if at != Some(now) {
            return Err(self.limited(log, now, until(at, now)));
        }
        Ok(self.admitted(log, now, n))
    }

    fn reserve(
        &self,
        state: &mut SlidingLogState,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        check_capacity(n, self.limit)?;
        let log = &state.log;
        if n == 0 {
            return Ok(Reservation::new(0, Duration::ZERO));
        }
        let now = now.as_u64();
        let Some(at) = self.allowed_at(log, now, n) else {
            return Err(self.limited(log, now, until(None, now)));
        };
        let wait = at - now;
        let max_wait = duration_to_nanos(max_wait);
        let mut retry = wait.saturating_sub(max_wait);
        // Room in the log: at most bound - n entries may remain unexpired.
        let active = self.active(log, now) as usize;
        let room = self.bound() - n as usize;
        if active > room {
            let must_expire = log[log.len() - room - 1];
            retry = retry.max(until(must_expire.checked_add(self.window), now));
        }
        if wait > max_wait || active > room {
            return Err(self.limited(log, now, retry));
        }
        self.record(state, now, at, n);
        Ok(Reservation::new(n, Duration::from_nanos(wait)))
    }

    /// Removes the `n` newest entries.
    fn refund(&self, state: &mut SlidingLogState, _now: Nanos, n: u64) {
        let keep = (state.log.len() as u64).saturating_sub(n) as usize;
        state.log.truncate(keep);
        state.first_live = state.first_live.min(keep);
    }

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn idle_at(&self, state: &SlidingLogState) -> Nanos {
        Nanos::new(
            state
                .log
                .back()
                .map_or(0, |&t| t.saturating_add(self.window.max(self.min_gap))),
        )
    }

    /// The entries in the window, or the whole limit while the gap runs: the default,
    /// without the two peeks.
    fn forgetting_gives_back(&self, state: &SlidingLogState, now: Nanos) -> u64 {
        let now = now.as_u64();
        let log = &state.log;
        let remaining = self.remaining(self.active(log, now), log.back().copied(), now);
        self.limit.saturating_sub(remaining)
    }
}

/// The largest limit the Redis script runs. Its log holds up to `2 × limit`
/// timestamps and every request parses and rewrites the whole log, about 0.7 µs of
/// script time per entry (Redis 7.0, measured on a loaded 2-core machine), while Redis
/// serves no one else. This caps a request at 2,000 entries: about 1.5 ms and 20 KB in
/// the worst case of one entry per distinct µs, far less when permits share
/// timestamps. (The script treats a longer log as another rule's state.)
const MAX_SCRIPT_LIMIT: u64 = 1_000;

/// The sliding log's facts. Its Redis twin reads `{limit, window µs, min_gap µs,
/// count_blocked (1 or 0)}`.
impl Facts for SlidingLog {
    const NAME: &'static str = "sliding_log";
    const SCRIPT: &'static str = include_str!("../store/redis/scripts/sliding_log.lua");
    const CONFIG: Option<FromConfig<Self>> = Some(FromConfig {
        takes_burst: false,
        build: SlidingLog::from_config,
    });

    /// The window.
    fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The limit divided, the minimum gap multiplied.
    fn per_node(&self, share: Share) -> Result<SlidingLog, ConfigError> {
        let mut log = self.min_gap(share.gap(self.minimum_gap())?)?;
        log.set_limit(share.count(self.limit)?)?;
        Ok(log)
    }

    /// The parameters, or why the script cannot run them exactly.
    ///
    /// Reservations book entries ahead, each at most `max(window, min_gap)` after the
    /// newest, and at most `2 × limit` of them stand unexpired: `(2 × limit + 1) ×
    /// max(window, min_gap)` is held to 2^52 µs so that every timestamp stays exact.
    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        let window = whole_micros(Facts::window(self), "window")?;
        let min_gap = whole_micros(self.minimum_gap(), "min_gap")?;
        let limit = self.limit;
        if limit > MAX_SCRIPT_LIMIT {
            return Err(ConfigError::OutOfRange {
                parameter: "limit",
                expected: "at most 1,000 in the Redis store (its log is one string of up to \
                           2 × limit timestamps, parsed on every request)",
            });
        }
        let (span, parameter) = if min_gap > window {
            (min_gap, "min_gap")
        } else {
            (window, "window")
        };
        (2 * limit + 1)
            .checked_mul(span)
            .filter(|&horizon| horizon <= MAX_SCRIPT_MICROS)
            .ok_or(ConfigError::Overflow { parameter })?;
        Ok(vec![
            Arg::Int(limit),
            Arg::Int(window),
            Arg::Int(min_gap),
            Arg::Int(u64::from(self.count_blocked)),
        ])
    }
}

impl SlidingLog {
    /// A rules file's log: `requests_per_unit` in any window of a `unit`.
    fn from_config(requests: u64, per: Duration, _: Option<u64>) -> Result<Self, ConfigError> {
        SlidingLog::new(requests, per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::testing::{MS, at, ms};
    use proptest::prelude::*;

    fn log(limit: u64, window_ms: u64) -> SlidingLog {
        SlidingLog::new(limit, ms(window_ms)).unwrap()
    }

    fn entries(s: &SlidingLogState) -> Vec<u64> {
        s.iter().map(|t| t / MS).collect()
    }

    /// The hint's promise: every entry before it is at or before its cut.
    fn hint_holds(s: &SlidingLogState) -> bool {
        s.first_live <= s.log.len() && s.log.iter().take(s.first_live).all(|&t| t <= s.cut)
    }

    /// `acquire` without the short way.
    fn general_acquire(l: &SlidingLog, s: &mut SlidingLogState, now: Nanos, n: u64) -> Decision {
        check_capacity(n, l.limit)?;
        l.acquire_general(s, now, n)
    }

    proptest! {
        /// The usual admission (the ring's slices, one count of the live entries)
        /// must decide, and leave the log, as the general way: same decisions, same
        /// logs, step by step, through reservations booked ahead, refunds, changed
        /// limits and windows, clock reads that lost a race, blocked attempts
        /// counted and gaps, from the clock's start and near its end. After every
        /// step the state's hint still holds: every entry before it is at or before
        /// its cut.
        #[test]
        fn the_usual_admission_decides_as_the_general_way(
            limit in 1u64..6,
            window in 1u64..40,
            min_gap in prop_oneof![Just(0u64), Just(0u64), 1u64..30],
            count_blocked in any::<bool>(),
            start in prop_oneof![Just(0u64), Just(u64::MAX - 1_000), 0u64..1_000_000],
            steps in prop::collection::vec((0u64..30, 0u64..8, 0u8..12, 1u64..8), 1..80),
        ) {
            let mut l = SlidingLog::new(limit, Duration::from_nanos(window))
                .unwrap()
                .min_gap(Duration::from_nanos(min_gap))
                .unwrap()
                .count_blocked(count_blocked);
            let mut fast = l.initial_state(Nanos::new(start));
            let mut general = fast.clone();
            let mut now = start;
            for (advance, n, kind, value) in steps {
                now = now.saturating_add(advance);
                // Now and then a clock read from just before.
                let at = Nanos::new(if kind == 11 { now.saturating_sub(value * 4) } else { now });
                match kind {
                    0 | 1 => {
                        let wait = Duration::from_nanos(value * 10);
                        let a = l.reserve(&mut fast, at, n, wait);
                        let b = l.reserve(&mut general, at, n, wait);
                        prop_assert_eq!(a, b);
                    }
                    2 => {
                        l.refund(&mut fast, at, value);
                        l.refund(&mut general, at, value);
                    }
                    3 => l.set_limit(value).unwrap(),
                    4 => l.set_window(Duration::from_nanos(value * 5)).unwrap(),
                    _ => {
                        let a = l.acquire(&mut fast, at, n);
                        let b = general_acquire(&l, &mut general, at, n);
                        prop_assert_eq!(a, b, "n {} at {}", n, at.as_u64());
                    }
                }
                prop_assert_eq!(&fast, &general);
                prop_assert!(hint_holds(&fast), "{:?}", fast);
                prop_assert!(hint_holds(&general), "{:?}", general);
            }
        }
    }

    #[test]
    fn the_usual_admission_takes_the_short_way() {
        // A full log of 1,000, a few of them live: as a long run keeps it.
        let l = SlidingLog::new(1_000, Duration::from_micros(1)).unwrap();
        let mut s = l.initial_state(Nanos::ZERO);
        let mut general = s.clone();
        for i in 0..3_000u64 {
            let now = Nanos::new(10_000 + i * 32);
            assert!(l.admit_now(&mut s.clone(), now.as_u64(), 1).is_some());
            assert_eq!(
                l.acquire(&mut s, now, 1),
                general_acquire(&l, &mut general, now, 1)
            );
            assert_eq!(s, general);
            // The hint follows the window: only the live entries lie after it.
            assert!(hint_holds(&s));
            assert!(s.len() - s.first_live <= 33, "{}", s.len() - s.first_live);
        }
        assert_eq!(s.len(), 1_001);
        // With a gap, or for no permits, the general way decides.
        let gap = l.min_gap(Duration::from_nanos(1)).unwrap();
        assert!(gap.admit_now(&mut s, u64::MAX / 2, 1).is_none());
        assert!(l.admit_now(&mut s, u64::MAX / 2, 0).is_none());
    }

    #[test]
    fn no_window_admits_more_than_the_limit() {
        let l = log(3, 1000);
        let mut s = l.initial_state(at(0));
        for t in [0, 400, 800] {
            l.acquire(&mut s, at(t), 1).unwrap();
        }
        let denied = l.acquire(&mut s, at(999), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1)));
        let ok = l.acquire(&mut s, at(1000), 1).unwrap();
        assert_eq!(ok.remaining(), 0);
        assert_eq!(ok.reset_after(), ms(1000));
        assert!(l.acquire(&mut s, at(1399), 1).is_err());
        assert!(l.acquire(&mut s, at(1400), 1).is_ok());
    }

    #[test]
    fn retry_waits_for_as_many_entries_as_the_request_needs() {
        let l = log(4, 1000);
        let mut s = l.initial_state(at(0));
        for t in [0, 100, 200, 300] {
            l.acquire(&mut s, at(t), 1).unwrap();
        }
        let denied = l.acquire(&mut s, at(500), 3).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(700)));
        assert!(l.acquire(&mut s, at(1199), 3).is_err());
        assert!(l.acquire(&mut s, at(1200), 3).is_ok());
    }

    #[test]
    fn keeps_at_most_twice_the_limit() {
        let l = log(3, 1000).count_blocked(true);
        let mut s = l.initial_state(at(0));
        for t in 0..50 {
            let _ = l.acquire(&mut s, at(t), 2);
        }
        assert_eq!(s.len(), 6);
        assert_eq!(entries(&s), [47, 47, 48, 48, 49, 49]);
    }

    /// Regression: with only the newest `limit` entries kept, a reservation pushed out
    /// permits taken now, and refunding it let the window admit them twice.
    #[test]
    fn refunding_a_reservation_uncovers_nothing_forgotten() {
        let l = log(5, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 4).unwrap();
        l.reserve(&mut s, at(0), 5, ms(1000)).unwrap();
        l.refund(&mut s, at(0), 3);
        // 4 taken at 0 still count: 2 more would make 6 in [0, 1000).
        assert!(l.acquire(&mut s, at(0), 2).is_err());
        assert_eq!(entries(&s), [0, 0, 0, 0, 1000, 1000]);
        assert_eq!(l.acquire(&mut s, at(1000), 3).unwrap().remaining(), 0);
    }

    #[test]
    fn reservations_book_about_one_window_ahead() {
        let l = log(2, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 2).unwrap();
        assert_eq!(
            l.reserve(&mut s, at(0), 2, ms(5000)).unwrap().wait(),
            ms(1000)
        );
        // A third window's worth would need 6 entries in the log: wait for 2 to expire.
        let denied = l.reserve(&mut s, at(0), 2, ms(5000)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1000)));
        assert_eq!(
            l.reserve(&mut s, at(1000), 2, ms(5000)).unwrap().wait(),
            ms(1000)
        );
    }

    #[test]
    fn blocked_attempts_keep_a_hammering_caller_blocked() {
        let l = log(2, 1000).count_blocked(true);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 2).unwrap();
        for t in (100..3000).step_by(100) {
            assert!(l.acquire(&mut s, at(t), 1).is_err(), "at {t}");
        }
        // After a pause of one window, it passes.
        assert!(l.acquire(&mut s, at(3900), 1).is_ok());
    }

    #[test]
    fn without_count_blocked_a_denial_changes_nothing() {
        let l = log(1, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 1).unwrap();
        let before = s.clone();
        assert!(l.acquire(&mut s, at(10), 1).is_err());
        assert!(l.reserve(&mut s, at(10), 1, ms(10)).is_err());
        assert!(l.acquire(&mut s, at(10), 2).unwrap_err().is_never());
        assert_eq!(s, before);
    }

    #[test]
    fn min_gap_spaces_requests() {
        let l = log(10, 1000).min_gap(ms(100)).unwrap();
        let mut s = l.initial_state(at(0));
        let first = l.acquire(&mut s, at(0), 3).unwrap();
        assert_eq!(
            first.remaining(),
            0,
            "nothing more may go until the gap ran"
        );
        let denied = l.acquire(&mut s, at(30), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(70)));
        let next = l.acquire(&mut s, at(100), 1).unwrap();
        assert_eq!(next.reset_after(), ms(1000));
        assert_eq!(l.peek(&s, at(200), 0).unwrap().remaining(), 6);
    }

    #[test]
    fn a_gap_longer_than_the_window_is_kept_after_the_window() {
        let l = log(5, 100).min_gap(ms(1000)).unwrap();
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 1).unwrap();
        assert_eq!(l.idle_at(&s), at(1000));
        // Another request after the window prunes nothing the gap still needs.
        let denied = l.acquire(&mut s, at(500), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(500)));
        l.reserve(&mut s, at(500), 1, ms(500)).unwrap();
        assert_eq!(entries(&s), [0, 1000]);
        assert!(l.acquire(&mut s, at(1999), 1).is_err());
        assert!(l.acquire(&mut s, at(2000), 1).is_ok());
        assert_eq!(entries(&s), [0, 1000, 2000], "the newest `limit` stay");
    }

    #[test]
    fn reservations_are_booked_when_they_fit() {
        let l = log(2, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 1).unwrap();
        l.acquire(&mut s, at(300), 1).unwrap();
        let r = l.reserve(&mut s, at(400), 2, ms(1000)).unwrap();
        assert_eq!(r.wait(), ms(900));
        assert_eq!(entries(&s), [0, 300, 1300, 1300]);
        // Nothing fits before the booking leaves the window.
        let denied = l.acquire(&mut s, at(1300), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1000)));
        let denied = l.reserve(&mut s, at(1300), 1, ms(400)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(600)));
    }

    #[test]
    fn an_entry_from_a_thread_that_read_the_clock_later_still_counts() {
        let l = log(2, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(500), 1).unwrap();
        // A request with an earlier reading: 1 in the window, 1 more fits.
        l.acquire(&mut s, at(499), 1).unwrap();
        assert_eq!(entries(&s), [499, 500]);
        let denied = l.acquire(&mut s, at(499), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1000)));
    }

    /// Regression: dropping expired entries eagerly let a decision on an older clock
    /// reading (a thread that read the clock before another took the lock) miss them.
    #[test]
    fn an_older_clock_reading_still_sees_recent_entries() {
        let l = log(3, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 2).unwrap();
        l.acquire(&mut s, at(1010), 1).unwrap();
        assert!(l.acquire(&mut s, at(999), 1).is_err());
        assert!(l.acquire(&mut s, at(1010), 2).is_ok());
        assert_eq!(entries(&s), [0, 0, 1010, 1010, 1010]);
    }

    #[test]
    fn refund_removes_the_newest_entries() {
        let l = log(3, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 1).unwrap();
        l.acquire(&mut s, at(10), 2).unwrap();
        l.refund(&mut s, at(20), 1);
        assert_eq!(entries(&s), [0, 10]);
        l.refund(&mut s, at(20), 10);
        assert!(s.is_empty());
        assert_eq!(l.idle_at(&s), Nanos::ZERO);
    }

    #[test]
    fn idle_at_is_the_newest_entry_plus_the_window() {
        let l = log(3, 1000);
        let mut s = l.initial_state(at(0));
        assert_eq!(l.idle_at(&s), Nanos::ZERO);
        l.acquire(&mut s, at(200), 1).unwrap();
        assert_eq!(l.idle_at(&s), at(1200));
    }

    #[test]
    fn peek_does_not_record_even_when_counting_blocked() {
        let l = log(1, 1000).count_blocked(true);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 1).unwrap();
        let before = s.clone();
        assert!(l.peek(&s, at(10), 1).is_err());
        assert_eq!(l.peek(&s, at(1000), 1).unwrap().remaining(), 0);
        assert!(l.acquire(&mut s, at(10), 0).is_ok());
        assert_eq!(s, before);
    }

    #[test]
    fn set_limit_and_window_keep_the_log() {
        let mut l = log(2, 1000);
        let mut s = l.initial_state(at(0));
        l.acquire(&mut s, at(0), 2).unwrap();
        l.set_limit(1).unwrap();
        assert!(l.acquire(&mut s, at(500), 1).is_err());
        l.set_window(ms(400)).unwrap();
        assert!(l.acquire(&mut s, at(500), 1).is_ok());
        assert_eq!(entries(&s), [0, 500]);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(
            SlidingLog::new(0, ms(1)),
            Err(ConfigError::Zero { parameter: "limit" })
        );
        assert!(matches!(
            SlidingLog::new(SlidingLog::MAX_LIMIT + 1, ms(1)),
            Err(ConfigError::OutOfRange {
                parameter: "limit",
                ..
            })
        ));
        assert!(SlidingLog::new(SlidingLog::MAX_LIMIT, ms(1)).is_ok());
        assert_eq!(
            SlidingLog::new(1, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "window"
            })
        );
        assert_eq!(
            SlidingLog::new(1, Duration::MAX),
            Err(crate::units::too_long("window"))
        );
        assert_eq!(
            log(1, 1).min_gap(Duration::MAX),
            Err(crate::units::too_long("min_gap"))
        );
        let mut l = log(1, 1);
        assert!(l.set_limit(0).is_err());
        assert!(l.set_limit(SlidingLog::MAX_LIMIT + 1).is_err());
        assert!(l.set_window(Duration::ZERO).is_err());
        assert_eq!(l, log(1, 1), "a failed setter changes nothing");
    }

    /// Regression: within a second of the clock's end an entry's window end saturated
    /// at the last instant, where every entry then expired at once and every request
    /// passed.
    #[test]
    fn near_the_clocks_end_entries_never_expire_early() {
        let l = log(10, 1000).min_gap(ms(1)).unwrap();
        let start = u64::MAX - 500 * MS;
        let mut s = l.initial_state(Nanos::new(start));
        let admitted = (0..1000u64)
            .map(|i| start + i * 500_000)
            .chain([u64::MAX - 1, u64::MAX, u64::MAX])
            .filter(|&now| l.acquire(&mut s, Nanos::new(now), 1).is_ok())
            .count();
        assert_eq!(admitted, 10);
        let denied = l.acquire(&mut s, Nanos::MAX, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::ZERO));
        assert_eq!(l.peek(&s, Nanos::MAX, 0).unwrap().remaining(), 0);
        assert!(l.reserve(&mut s, Nanos::MAX, 1, Duration::MAX).is_err());
    }

    #[test]
    fn huge_times_saturate_without_panic() {
        let l = SlidingLog::new(3, Duration::from_nanos(u64::MAX))
            .unwrap()
            .min_gap(Duration::from_nanos(u64::MAX))
            .unwrap()
            .count_blocked(true);
        let mut s = SlidingLogState::from_iter([u64::MAX - 1, u64::MAX]);
        for now in [0, u64::MAX] {
            let _ = l.acquire(&mut s, Nanos::new(now), 3);
            let _ = l.reserve(&mut s, Nanos::new(now), 3, Duration::MAX);
            let _ = l.peek(&s, Nanos::new(now), 1);
            let _ = l.idle_at(&s);
            l.refund(&mut s, Nanos::new(now), 1);
        }
    }

    #[test]
    fn script_args_are_whole_microseconds() {
        let plain = SlidingLog::new(10, Duration::from_secs(1)).unwrap();
        assert_eq!(
            plain.script_args(),
            Ok(vec![
                Arg::Int(10),
                Arg::Int(1_000_000),
                Arg::Int(0),
                Arg::Int(0)
            ])
        );
        let full = plain
            .min_gap(Duration::from_millis(5))
            .unwrap()
            .count_blocked(true);
        assert_eq!(
            full.script_args(),
            Ok(vec![
                Arg::Int(10),
                Arg::Int(1_000_000),
                Arg::Int(5_000),
                Arg::Int(1)
            ])
        );
    }

    #[test]
    fn sub_microsecond_durations_have_no_script_args() {
        let window = SlidingLog::new(3, Duration::from_nanos(1_500)).unwrap();
        assert!(matches!(
            window.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let gap = SlidingLog::new(3, Duration::from_secs(1))
            .unwrap()
            .min_gap(Duration::from_nanos(999))
            .unwrap();
        assert!(matches!(
            gap.script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "min_gap",
                ..
            })
        ));
    }

    #[test]
    fn limits_above_the_script_bound_have_no_script_args() {
        let minute = Duration::from_secs(60);
        let largest = SlidingLog::new(MAX_SCRIPT_LIMIT, minute).unwrap();
        assert!(largest.script_args().is_ok());
        assert!(matches!(
            SlidingLog::new(MAX_SCRIPT_LIMIT + 1, minute)
                .unwrap()
                .script_args(),
            Err(ConfigError::OutOfRange {
                parameter: "limit",
                ..
            })
        ));
    }

    #[test]
    fn booking_horizons_beyond_two_to_the_52_micros_have_no_script_args() {
        let log = |limit, window| SlidingLog::new(limit, window).unwrap();
        // 3 × span for a limit of 1.
        let fits = Duration::from_micros(MAX_SCRIPT_MICROS / 3);
        assert!(log(1, fits).script_args().is_ok());
        let too_far = fits + Duration::from_micros(1);
        assert_eq!(
            log(1, too_far).script_args(),
            Err(ConfigError::Overflow {
                parameter: "window"
            })
        );
        let gap = log(1, Duration::from_secs(1)).min_gap(too_far).unwrap();
        assert_eq!(
            gap.script_args(),
            Err(ConfigError::Overflow {
                parameter: "min_gap"
            })
        );
        // A year's window holds a limit of 70, not 71.
        let year = Duration::from_secs(365 * 86_400);
        assert!(log(70, year).script_args().is_ok());
        assert!(log(71, year).script_args().is_err());
    }
}
