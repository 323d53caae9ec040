//! The one answer every algorithm gives: admitted with how much is left, denied until a
//! time, or denied for ever.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

pub(crate) use crate::error::InsufficientCapacity;
use crate::units::duration_to_nanos;

/// What a limiter decided for a request of `n` permits.
///
/// `Ok` means the permits were granted (or, for a peek, would be). `Err` tells *not
/// now* ([`Denied::Limited`], with a `retry_after`) apart from *never*
/// ([`Denied::Insufficient`]: more than the limiter can ever grant at once).
pub type Decision = Result<Admitted, Denied>;

/// A granted request, and the limiter's state just after it.
///
/// These are the values HTTP rate-limit headers report.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), ManualClock::new());
/// let admitted = limiter.try_acquire(3)?;
/// assert_eq!(admitted.limit(), 10);
/// assert_eq!(admitted.remaining(), 7);
/// assert_eq!(admitted.reset_after(), Duration::from_millis(300));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Admitted {
    limit: u64,
    remaining: Quotient,
    reset_after_nanos: u64,
    /// Nanoseconds until more than `remaining` are free, when the algorithm says;
    /// [`FROM_REMAINING`] when it is to be read off `remaining` and the reset.
    next_permit_nanos: u64,
    /// Which of the rules combined into this decision it describes; a whole word, so
    /// that the type has no padding.
    rule: u64,
}

/// [`Admitted::next_permit_after`] is read off `remaining` and the reset.
const FROM_REMAINING: u64 = u64::MAX;

impl Admitted {
    /// A decision with these values.
    #[inline]
    pub fn new(limit: u64, remaining: u64, reset_after: Duration) -> Admitted {
        Admitted {
            limit,
            remaining: Quotient::whole(remaining),
            reset_after_nanos: duration_to_nanos(reset_after),
            next_permit_nanos: FROM_REMAINING,
            rule: 0,
        }
    }

    /// A decision whose `remaining` is `remaining_numerator / remaining_divisor`,
    /// divided only if asked for: the hot path then does no division.
    #[inline]
    pub(crate) fn deferred(
        limit: u64,
        remaining_numerator: u64,
        remaining_divisor: u64,
        reset_after_nanos: u64,
    ) -> Admitted {
        Admitted {
            limit,
            remaining: Quotient::new(remaining_numerator, remaining_divisor),
            reset_after_nanos,
            next_permit_nanos: FROM_REMAINING,
            rule: 0,
        }
    }

    /// The most permits the limiter can grant at one instant.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// Permits that could still be granted right now.
    pub fn remaining(&self) -> u64 {
        self.remaining.value()
    }

    /// How long until the limiter is back to its full, untouched state.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos)
    }

    /// How long until more than [`remaining`](Admitted::remaining) permits can be
    /// granted: the `t` of the HTTP `RateLimit` field. Zero when the limiter is full
    /// (nothing more will come), and never later than
    /// [`reset_after`](Admitted::reset_after).
    ///
    /// Exact for a bucket that refills continuously ([`Gcra`](crate::algorithm::Gcra),
    /// a [`LeakyBucket`](crate::algorithm::LeakyBucket)): the time until its next
    /// whole permit; for a [`SlidingCounter`](crate::algorithm::SlidingCounter),
    /// until its estimate frees one more; for Guava's limiters, until prepaid time
    /// runs out or idle time stores the next permit. For a limit whose permits come
    /// back all at once (a fixed window, a refresh period), the reset. The same in
    /// process and from a store, the Redis store included: its reply gives what the
    /// Rust algorithm gives. Where a decision does not say (a
    /// [`SlidingLog`](crate::algorithm::SlidingLog), in process or in a store), the
    /// reset, which no later permit comes after: an upper bound, so that a client
    /// that waits this long never waits too little.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// // 5 a minute: one permit comes back every 12 s.
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_minute(5)?), ManualClock::new());
    /// let last = limiter.try_acquire(5)?;
    /// assert_eq!(last.remaining(), 0);
    /// assert_eq!(last.reset_after(), Duration::from_secs(60));
    /// assert_eq!(last.next_permit_after(), Duration::from_secs(12));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_permit_after(&self) -> Duration {
        let full = self.remaining() >= self.limit;
        let next = if self.next_permit_nanos == FROM_REMAINING || full {
            next_permit_nanos(self.limit, &self.remaining, self.reset_after_nanos)
        } else {
            self.next_permit_nanos.min(self.reset_after_nanos)
        };
        Duration::from_nanos(next)
    }

    /// Which rule this admission describes, by its index among the rules decided
    /// together: an [`AllOf`](crate::algorithm::AllOf)'s rules, or a store request's
    /// checks (a `SharedLimiter`'s rules, a rules
    /// file's matched limits). It is the rule with the fewest permits remaining (the
    /// first on a tie), whose limit, remaining, reset and next permit the decision
    /// reports: the policy an HTTP `RateLimit` field names. 0 for a single rule.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::{AllOf, Gcra};
    /// use tollgate::time::ManualClock;
    ///
    /// // 10 a second and 10 a minute: equal quotas, the second refills slower.
    /// let rules = AllOf::new(vec![
    ///     Gcra::new(Quota::per_second(10)?),
    ///     Gcra::new(Quota::per_minute(10)?),
    /// ])?;
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(rules, clock.clone());
    /// limiter.try_acquire(5)?;
    /// clock.advance(Duration::from_secs(1));
    /// // The per-second rule is full again; the per-minute one has 5 left.
    /// assert_eq!(limiter.try_acquire(1)?.rule(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn rule(&self) -> usize {
        self.rule as usize
    }

    /// The same admission, describing rule `index` of those decided together.
    #[inline]
    pub(crate) const fn of_rule(self, index: usize) -> Admitted {
        Admitted {
            rule: index as u64,
            ..self
        }
    }

    /// The same admission, with more than `remaining` free `nanos` from now: for an
    /// algorithm whose `remaining` and reset do not tell it.
    #[inline]
    pub(crate) const fn with_next_permit_nanos(self, nanos: u64) -> Admitted {
        Admitted {
            // A clock's end is as far as any wait goes; the sentinel is not a time.
            next_permit_nanos: if nanos == FROM_REMAINING {
                FROM_REMAINING - 1
            } else {
                nanos
            },
            ..self
        }
    }

    /// `remaining` undivided: `(numerator, divisor)`. A GCRA decision's is the room
    /// left in nanoseconds over the emission interval; any other's divisor is 1.
    #[inline]
    pub(crate) fn remaining_parts(&self) -> (u64, u64) {
        (self.remaining.numerator, self.remaining.divisor)
    }

    /// Whether fewer whole permits remain here than in `other`, by one division.
    #[inline]
    pub(crate) fn fewer_remaining_than(&self, other: &Admitted) -> bool {
        self.remaining.floor_below(other.remaining.value())
    }

    fn key(&self) -> (u64, u64, u64) {
        (self.limit, self.remaining(), self.reset_after_nanos)
    }
}

impl PartialEq for Admitted {
    fn eq(&self, other: &Admitted) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Admitted {}

impl Hash for Admitted {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl fmt::Debug for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitted")
            .field("limit", &self.limit)
            .field("remaining", &self.remaining())
            .field("reset_after", &self.reset_after())
            .finish()
    }
}

/// The nanoseconds until more than `remaining` of `limit` permits are free, from a
/// decision whose reset is `reset_after` nanoseconds away.
///
/// A `remaining` with a divisor above one is a continuously refilling bucket's
/// (GCRA's): `divisor` nanoseconds per permit, full `reset_after` from now. Its
/// `remaining + 1`th permit is free `(limit - remaining - 1) * divisor` before the
/// reset, which stays exact when reservations have put the bucket in debt. Any
/// other decision gives nothing finer than its reset.
fn next_permit_nanos(limit: u64, remaining: &Quotient, reset_after: u64) -> u64 {
    let left = remaining.value();
    if left >= limit {
        return 0;
    }
    if remaining.divisor <= 1 {
        return reset_after;
    }
    let after_next = (limit - left - 1).saturating_mul(remaining.divisor);
    reset_after.saturating_sub(after_next)
}

/// `numerator / divisor`, rounded down, computed on demand.
#[derive(Clone, Copy)]
struct Quotient {
    numerator: u64,
    divisor: u64,
}

impl Quotient {
    #[inline]
    fn new(numerator: u64, divisor: u64) -> Quotient {
        Quotient {
            numerator,
            divisor: divisor.max(1),
        }
    }

    fn whole(value: u64) -> Quotient {
        Quotient::new(value, 1)
    }

    fn value(&self) -> u64 {
        self.numerator / self.divisor
    }

    /// `value() < whole` without dividing: `numerator / divisor < whole` for a whole
    /// number.
    #[inline]
    fn floor_below(&self, whole: u64) -> bool {
        u128::from(self.numerator) < u128::from(whole) * u128::from(self.divisor)
    }
}

/// A request that was not granted, and nothing was consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Denied {
    /// Not now: the same request may succeed later, after a time or after a release
    /// ([`Limited::retry`]).
    Limited(Limited),
    /// Never: the request asks for more than the limiter can grant at once.
    Insufficient(InsufficientCapacity),
    /// Never again: the limiter was closed.
    Closed,
}

impl Denied {
    /// How long to wait before the same request can succeed; `None` if no wait is
    /// enough: it never can, or it waits for permits to be released
    /// ([`Retry::OnRelease`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::{Algorithm, Concurrency};
    /// use tollgate::time::Nanos;
    /// use tollgate::Retry;
    ///
    /// let limit = Concurrency::new(1)?;
    /// let mut in_use = limit.initial_state(Nanos::ZERO);
    /// limit.acquire(&mut in_use, Nanos::ZERO, 1)?;
    /// let denied = limit.acquire(&mut in_use, Nanos::ZERO, 1).unwrap_err();
    /// assert_eq!(denied.retry_after(), None);
    /// assert_eq!(denied.retry(), Some(Retry::OnRelease));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Denied::Limited(l) => l.retry_after(),
            Denied::Insufficient(_) | Denied::Closed => None,
        }
    }

    /// When the same request can succeed, or `None` if it never can.
    pub const fn retry(&self) -> Option<Retry> {
        match self {
            Denied::Limited(l) => Some(l.retry()),
            Denied::Insufficient(_) | Denied::Closed => None,
        }
    }

    /// The same denial, from rule `index` of those decided together.
    #[inline]
    pub(crate) fn of_rule(self, index: usize) -> Denied {
        match self {
            Denied::Limited(l) => Denied::Limited(l.of_rule(index)),
            other => other,
        }
    }

    /// Whether the request can never succeed: too large, or the limiter is closed.
    pub const fn is_never(&self) -> bool {
        matches!(self, Denied::Insufficient(_) | Denied::Closed)
    }

    /// Whether the request may succeed later.
    pub const fn is_limited(&self) -> bool {
        matches!(self, Denied::Limited(_))
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::Limited(l) => l.fmt(f),
            Denied::Insufficient(i) => i.fmt(f),
            Denied::Closed => f.write_str("the limiter is closed"),
        }
    }
}

impl std::error::Error for Denied {}

impl From<Limited> for Denied {
    fn from(l: Limited) -> Denied {
        Denied::Limited(l)
    }
}

impl From<InsufficientCapacity> for Denied {
    fn from(i: InsufficientCapacity) -> Denied {
        Denied::Insufficient(i)
    }
}

/// When a request that is limited, not refused for ever, can succeed.
///
/// Ordered by how long it waits: every [`After`](Retry::After) comes before
/// [`OnRelease`](Retry::OnRelease), which no length of time is sure to reach.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Retry;
///
/// let later = Retry::After(Duration::from_secs(1));
/// assert_eq!(later.after(), Some(Duration::from_secs(1)));
/// assert_eq!(Retry::OnRelease.after(), None);
/// assert!(later < Retry::OnRelease);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Retry {
    /// After this long, if nothing else takes permits meanwhile.
    After(Duration),
    /// Once a holder releases permits: time alone frees none (a concurrency limit).
    OnRelease,
}

impl Retry {
    /// The wait, or `None` when the request waits for a release.
    pub const fn after(self) -> Option<Duration> {
        match self {
            Retry::After(d) => Some(d),
            Retry::OnRelease => None,
        }
    }

    /// Whether the request waits for permits to be released rather than for time.
    pub const fn is_on_release(self) -> bool {
        matches!(self, Retry::OnRelease)
    }
}

/// What a denial's retry waits for. Half a word (beside the rule's index) rather than
/// a `bool`: the decision types then have no padding bytes, so moving one copies whole words instead of
/// the padding around a one-byte flag piece by piece.
#[derive(Clone, Copy)]
#[repr(u32)]
enum WaitsFor {
    Time = 0,
    Release = 1,
}

/// Limited: retry after a while, or once permits are released.
#[derive(Clone, Copy)]
pub struct Limited {
    retry_after_nanos: u64,
    /// What the retry waits for; `retry_after_nanos` is unused for a release.
    waits_for: WaitsFor,
    /// Which of the rules combined into this decision denied.
    rule: u32,
    limit: u64,
    remaining: Quotient,
    reset_after_nanos: u64,
}

impl Limited {
    /// A denial with these values.
    pub fn new(
        retry_after: Duration,
        limit: u64,
        remaining: u64,
        reset_after: Duration,
    ) -> Limited {
        Limited {
            retry_after_nanos: duration_to_nanos(retry_after),
            waits_for: WaitsFor::Time,
            rule: 0,
            limit,
            remaining: Quotient::whole(remaining),
            reset_after_nanos: duration_to_nanos(reset_after),
        }
    }

    /// A denial that waits for permits to be released, not for time: a concurrency
    /// limit with `remaining` of its `limit` free.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limited, Retry};
    ///
    /// let full = Limited::on_release(8, 0);
    /// assert_eq!(full.retry(), Retry::OnRelease);
    /// assert_eq!(full.retry_after(), None);
    /// ```
    pub const fn on_release(limit: u64, remaining: u64) -> Limited {
        Limited {
            retry_after_nanos: 0,
            waits_for: WaitsFor::Release,
            rule: 0,
            limit,
            remaining: Quotient {
                numerator: remaining,
                divisor: 1,
            },
            reset_after_nanos: 0,
        }
    }

    /// A denial whose `remaining` is `remaining_numerator / remaining_divisor`,
    /// divided only if asked for.
    #[inline]
    pub(crate) fn deferred(
        retry_after_nanos: u64,
        limit: u64,
        remaining_numerator: u64,
        remaining_divisor: u64,
        reset_after_nanos: u64,
    ) -> Limited {
        Limited {
            retry_after_nanos,
            waits_for: WaitsFor::Time,
            rule: 0,
            limit,
            remaining: Quotient::new(remaining_numerator, remaining_divisor),
            reset_after_nanos,
        }
    }

    /// When the same request can succeed: after a time, if nothing else consumes
    /// permits meanwhile, or once permits are released.
    pub const fn retry(&self) -> Retry {
        if let WaitsFor::Release = self.waits_for {
            Retry::OnRelease
        } else {
            Retry::After(Duration::from_nanos(self.retry_after_nanos))
        }
    }

    /// How long until the same request can succeed, if nothing else consumes permits
    /// meanwhile; `None` when it waits for permits to be released, which no length
    /// of time promises ([`Retry::OnRelease`]).
    pub const fn retry_after(&self) -> Option<Duration> {
        self.retry().after()
    }

    /// The most permits the limiter can grant at one instant.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// Permits that could be granted right now (fewer than were asked for).
    pub fn remaining(&self) -> u64 {
        self.remaining.value()
    }

    /// How long until the limiter is back to its full, untouched state.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos)
    }

    /// How long until more than [`remaining`](Limited::remaining) permits can be
    /// granted, as [`Admitted::next_permit_after`] tells it: the `t` of the HTTP
    /// `RateLimit` field. Never later than [`retry_after`](Limited::retry_after), and
    /// equal to it for a one-permit request; `None` when the denial waits for a
    /// release ([`Retry::OnRelease`]), which no length of time promises.
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
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_minute(5)?), clock.clone());
    /// limiter.try_acquire(4)?;
    /// clock.advance(Duration::from_secs(2));
    /// // One permit left, and the next comes 10 s from now; three take 22 s.
    /// let denied = limiter.try_acquire(3).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(22)));
    /// let tollgate::Denied::Limited(limited) = denied else { unreachable!() };
    /// assert_eq!(limited.next_permit_after(), Some(Duration::from_secs(10)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_permit_after(&self) -> Option<Duration> {
        let retry = self.retry_after_nanos()?;
        // Only a bucket's state tells more than the retry: a denial built from other
        // facts (waiters queued ahead) may have a reset that is no bound at all.
        let next = if self.remaining.divisor > 1 && self.remaining() < self.limit {
            next_permit_nanos(self.limit, &self.remaining, self.reset_after_nanos).min(retry)
        } else {
            retry
        };
        Some(Duration::from_nanos(next))
    }

    /// Which rule denied, by its index among the rules decided together, as
    /// [`Admitted::rule`] tells it: the one whose wait is the longest (the first on a
    /// tie). 0 for a single rule.
    pub const fn rule(&self) -> usize {
        self.rule as usize
    }

    /// The same denial, from rule `index` of those decided together.
    #[inline]
    pub(crate) const fn of_rule(self, index: usize) -> Limited {
        Limited {
            rule: if index > u32::MAX as usize {
                u32::MAX
            } else {
                index as u32
            },
            ..self
        }
    }

    /// `remaining` undivided, as [`Admitted::remaining_parts`] tells it.
    #[inline]
    pub(crate) fn remaining_parts(&self) -> (u64, u64) {
        (self.remaining.numerator, self.remaining.divisor)
    }

    /// The retry in nanoseconds; `None` for [`Retry::OnRelease`].
    pub(crate) const fn retry_after_nanos(&self) -> Option<u64> {
        if let WaitsFor::Release = self.waits_for {
            None
        } else {
            Some(self.retry_after_nanos)
        }
    }

    /// [`reset_after`](Limited::reset_after) in nanoseconds.
    pub(crate) const fn reset_after_nanos(&self) -> u64 {
        self.reset_after_nanos
    }

    fn key(&self) -> (Retry, u64, u64, u64) {
        (
            self.retry(),
            self.limit,
            self.remaining(),
            self.reset_after_nanos,
        )
    }
}

impl PartialEq for Limited {
    fn eq(&self, other: &Limited) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Limited {}

impl Hash for Limited {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl fmt::Debug for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limited")
            .field("retry", &self.retry())
            .field("limit", &self.limit)
            .field("remaining", &self.remaining())
            .field("reset_after", &self.reset_after())
            .finish()
    }
}

impl fmt::Display for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry() {
            Retry::After(d) => write!(f, "rate limited, retry after {d:?}"),
            Retry::OnRelease => f.write_str("limited, retry once permits are released"),
        }
    }
}

/// A grant of permits whose use may lie in the future: the caller must wait
/// [`Reservation::wait`] before acting.
///
/// The permits are already counted against the limit; that is how a reservation
/// prepays future time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reservation {
    wait: Duration,
    permits: u64,
}

impl Reservation {
    /// A reservation of `permits`, usable after `wait`.
    pub const fn new(permits: u64, wait: Duration) -> Reservation {
        Reservation { wait, permits }
    }

    /// How long the caller must wait before using the permits.
    pub const fn wait(&self) -> Duration {
        self.wait
    }

    /// How many permits were reserved.
    pub const fn permits(&self) -> u64 {
        self.permits
    }

    /// Whether the permits may be used at once.
    pub fn is_immediate(&self) -> bool {
        self.wait.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_tells_never_from_not_now() {
        let never: Denied = InsufficientCapacity::new(11, 10).into();
        assert!(never.is_never());
        assert_eq!(never.retry_after(), None);
        assert_eq!(
            never.to_string(),
            "requested 11 permits, but at most 10 can ever be granted at once"
        );
        let later: Denied = Limited::new(Duration::from_millis(5), 10, 0, Duration::ZERO).into();
        assert!(later.is_limited());
        assert_eq!(later.retry_after(), Some(Duration::from_millis(5)));
        assert_eq!(later.retry(), Some(Retry::After(Duration::from_millis(5))));
    }

    /// The rule's index fills Limited's half word beside what its retry waits for and
    /// a word of Admitted: no padding; a Decision is one word larger than before (48).
    #[test]
    fn the_rules_index_adds_no_padding() {
        assert_eq!(std::mem::size_of::<Limited>(), 48);
        assert_eq!(std::mem::size_of::<Admitted>(), 48);
        assert_eq!(std::mem::size_of::<Decision>(), 56);
    }

    /// Regression: a concurrency limit's denial said "retry after 0ns", as if permits
    /// were free now, when they come back only as holders release them.
    #[test]
    fn a_release_is_not_a_zero_wait() {
        let release = Limited::on_release(4, 0);
        let now = Limited::new(Duration::ZERO, 4, 0, Duration::ZERO);
        assert_ne!(release, now);
        assert_eq!(release.retry_after(), None);
        assert_eq!(now.retry_after(), Some(Duration::ZERO));
        assert_eq!(
            release.to_string(),
            "limited, retry once permits are released"
        );
        let denied = Denied::from(release);
        assert!(denied.is_limited() && !denied.is_never());
        assert_eq!(denied.retry(), Some(Retry::OnRelease));
        assert!(Retry::After(Duration::MAX) < Retry::OnRelease);
    }
}
