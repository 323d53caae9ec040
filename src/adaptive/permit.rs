//! [`AdaptivePermit`] and [`AdaptivePermitRef`]: the guard of one admitted request,
//! which records how it ended; owning the limiter or borrowing it.

use std::fmt;

use super::LimitAlgorithm;
use super::limiter::AdaptiveLimiter;
use crate::observe::Outcome;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock, Nanos};

/// One request admitted by an [`AdaptiveLimiter`], holding one permit while it runs,
/// and a reference to the limiter: what
/// [`try_acquire_owned`](AdaptiveLimiter::try_acquire_owned) and the waits hand out.
/// [`AdaptivePermitRef`] is the same guard borrowing the limiter, from
/// [`try_acquire`](AdaptiveLimiter::try_acquire).
///
/// End it with [`success`](AdaptivePermit::success),
/// [`dropped`](AdaptivePermit::dropped) or [`ignore`](AdaptivePermit::ignore) (or
/// [`finish`](AdaptivePermit::finish) with an [`Outcome`] a classifier chose): the
/// time since it was admitted, on the limiter's clock, is the request's latency.
/// A success or a drop is a [`Sample`](super::Sample) for the limit algorithm; the
/// new limit applies, then the permit goes back.
///
/// **Dropping the permit without an outcome counts as [`ignore`](AdaptivePermit::ignore)**:
/// the permit goes back and the algorithm learns nothing from the request (a
/// cancelled request, a panic). Being `'static` and `Send`, it can live in a
/// response future and be ended from another task.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
///
/// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
/// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
/// let permit = limiter.try_acquire_owned()?;
/// assert_eq!(permit.inflight(), 1);
/// let reply: Result<&str, &str> = Err("downstream timed out");
/// match reply {
///     Ok(_) => permit.success(),
///     Err(_) => permit.dropped(),
/// }
/// assert_eq!(limiter.limit(), 18); // AIMD: 20 × 0.9
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the permit is given back, as ignored, as soon as it is dropped"]
pub struct AdaptivePermit<L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock> {
    limiter: Arc<AdaptiveLimiter<L, C>>,
    start: Nanos,
    inflight: u64,
    /// Whether it holds a permit still to be given back (a grant of zero permits
    /// holds none).
    held: bool,
}

impl<L: LimitAlgorithm, C: Clock> AdaptivePermit<L, C> {
    #[inline]
    pub(super) fn new(
        limiter: Arc<AdaptiveLimiter<L, C>>,
        start: Nanos,
        inflight: u64,
    ) -> AdaptivePermit<L, C> {
        AdaptivePermit {
            limiter,
            start,
            inflight,
            held: true,
        }
    }

    /// A grant of zero permits: holds none, records nothing.
    pub(super) fn empty(limiter: Arc<AdaptiveLimiter<L, C>>) -> AdaptivePermit<L, C> {
        let start = if limiter.is_timed() {
            limiter.request_time()
        } else {
            Nanos::ZERO
        };
        AdaptivePermit {
            limiter,
            start,
            inflight: 0,
            held: false,
        }
    }

    /// The request succeeded: its latency is a sample for the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
    /// limiter.try_acquire_owned()?.success(); // 1 in flight of 1: +1
    /// assert_eq!(limiter.limit(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn success(self) {
        self.finish(Outcome::Success)
    }

    /// The request was dropped (timed out, refused or overloaded downstream): a
    /// sample telling the algorithm the limit is too high.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
    /// limiter.try_acquire_owned()?.dropped();
    /// assert_eq!(limiter.limit(), 18); // 20 × 0.9
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn dropped(self) {
        self.finish(Outcome::Dropped)
    }

    /// The request says nothing about the limit (it failed for its own reasons, or
    /// was cancelled): the permit goes back, with no sample. The same as dropping
    /// the permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
    /// limiter.try_acquire_owned()?.ignore();
    /// assert_eq!((limiter.limit(), limiter.inflight()), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn ignore(self) {
        self.finish(Outcome::Ignored)
    }

    /// Ends the request as `outcome`: what [`success`](AdaptivePermit::success),
    /// [`dropped`](AdaptivePermit::dropped) and [`ignore`](AdaptivePermit::ignore)
    /// do, for a caller (a tower layer's classifier) that picked the outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::observe::Outcome;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let status = 503;
    /// let outcome = if status == 503 { Outcome::Dropped } else { Outcome::Success };
    /// limiter.try_acquire_owned()?.finish(outcome);
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn finish(mut self, outcome: Outcome) {
        self.end(outcome)
    }

    /// When the request was admitted, on the limiter's clock; `None` when the
    /// limiter does not time its requests: its algorithm reads no time
    /// ([`LimitAlgorithm::uses_time`]) and it has no events.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_secs(3));
    /// let limiter = AdaptiveLimiter::with_clock(AimdLimit::new(), WhenLimited::FailFast, clock.clone())?;
    /// let limiter = Arc::new(limiter);
    /// assert_eq!(limiter.try_acquire_owned()?.start(), Some(clock.now()));
    /// let drops_only = AimdLimit::builder().timeout(Duration::MAX).build()?;
    /// let untimed = Arc::new(AdaptiveLimiter::with_clock(drops_only, WhenLimited::FailFast, clock)?);
    /// assert_eq!(untimed.try_acquire_owned()?.start(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self) -> Option<Nanos> {
        self.limiter.is_timed().then_some(self.start)
    }

    /// How many requests were in flight when it was admitted, itself included.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let first = limiter.try_acquire_owned()?;
    /// let second = limiter.try_acquire_owned()?;
    /// assert_eq!((first.inflight(), second.inflight()), (1, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// The limiter the permit came from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let permit = limiter.try_acquire_owned()?;
    /// assert!(Arc::ptr_eq(permit.limiter(), &limiter));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter<L, C>> {
        &self.limiter
    }

    /// Whether it holds no permit and records nothing: a bypassed request
    /// ([`AdaptiveLimiter::bypass_owned`], or the limiter's bypass predicate), or a
    /// grant of zero permits.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// assert!(limiter.bypass_owned().is_bypass());
    /// assert!(!limiter.try_acquire_owned()?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_bypass(&self) -> bool {
        !self.held
    }

    #[inline]
    fn end(&mut self, outcome: Outcome) {
        if std::mem::take(&mut self.held) {
            self.limiter.finish(outcome, self.start, self.inflight);
        }
    }
}

/// Without an outcome: ignored.
impl<L: LimitAlgorithm, C: Clock> Drop for AdaptivePermit<L, C> {
    #[inline]
    fn drop(&mut self) {
        self.end(Outcome::Ignored);
    }
}

impl<L: LimitAlgorithm, C: Clock> fmt::Debug for AdaptivePermit<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptivePermit")
            .field("start", &self.start)
            .field("inflight", &self.inflight)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

/// One request admitted by an [`AdaptiveLimiter`], holding one permit while it runs
/// and borrowing the limiter: what [`try_acquire`](AdaptiveLimiter::try_acquire)
/// hands out. It ends as an [`AdaptivePermit`] does, and dropped without an outcome
/// it counts as ignored; borrowing spares the owned permit's reference count.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
///
/// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
/// let permit = limiter.try_acquire()?;
/// assert_eq!(permit.inflight(), 1);
/// permit.success();
/// assert_eq!(limiter.inflight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the permit is given back, as ignored, as soon as it is dropped"]
pub struct AdaptivePermitRef<
    'a,
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
> {
    limiter: &'a AdaptiveLimiter<L, C>,
    start: Nanos,
    inflight: u64,
    /// Whether it holds a permit (a bypass holds none, and records nothing).
    held: bool,
}

impl<'a, L: LimitAlgorithm, C: Clock> AdaptivePermitRef<'a, L, C> {
    #[inline]
    pub(super) fn new(
        limiter: &'a AdaptiveLimiter<L, C>,
        start: Nanos,
        inflight: u64,
    ) -> AdaptivePermitRef<'a, L, C> {
        AdaptivePermitRef {
            limiter,
            start,
            inflight,
            held: true,
        }
    }

    /// A bypass: holds no permit, records nothing.
    pub(super) fn bypass(limiter: &'a AdaptiveLimiter<L, C>, start: Nanos) -> Self {
        AdaptivePermitRef {
            limiter,
            start,
            inflight: 0,
            held: false,
        }
    }

    /// The request succeeded: its latency is a sample for the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?;
    /// limiter.try_acquire()?.success(); // 1 in flight of 1: +1
    /// assert_eq!(limiter.limit(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn success(self) {
        self.finish(Outcome::Success)
    }

    /// The request was dropped (timed out, refused or overloaded downstream): a
    /// sample telling the algorithm the limit is too high.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
    /// let limiter = AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?;
    /// limiter.try_acquire()?.dropped();
    /// assert_eq!(limiter.limit(), 18); // 20 × 0.9
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn dropped(self) {
        self.finish(Outcome::Dropped)
    }

    /// The request says nothing about the limit: the permit goes back, with no
    /// sample. The same as dropping the permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// limiter.try_acquire()?.ignore();
    /// assert_eq!((limiter.limit(), limiter.inflight()), (20, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn ignore(self) {
        self.finish(Outcome::Ignored)
    }

    /// Ends the request as `outcome`, for a caller that picked it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::observe::Outcome;
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// limiter.try_acquire()?.finish(Outcome::Success);
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn finish(self, outcome: Outcome) {
        let this = std::mem::ManuallyDrop::new(self);
        if this.held {
            this.limiter.finish(outcome, this.start, this.inflight);
        }
    }

    /// When the request was admitted, on the limiter's clock; `None` when the
    /// limiter does not time its requests (see [`AdaptivePermit::start`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = AdaptiveLimiter::with_clock(AimdLimit::new(), WhenLimited::FailFast, clock.clone())?;
    /// assert_eq!(limiter.try_acquire()?.start(), Some(clock.now()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self) -> Option<Nanos> {
        self.limiter.is_timed().then_some(self.start)
    }

    /// How many requests were in flight when it was admitted, itself included.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// let _first = limiter.try_acquire()?;
    /// assert_eq!(limiter.try_acquire()?.inflight(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// The limiter the permit came from.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// let permit = limiter.try_acquire()?;
    /// assert!(std::ptr::eq(permit.limiter(), &limiter));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &'a AdaptiveLimiter<L, C> {
        self.limiter
    }

    /// Whether it holds no permit and records nothing: a bypassed request
    /// ([`AdaptiveLimiter::bypass`], or the limiter's bypass predicate).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// assert!(limiter.bypass().is_bypass());
    /// assert!(!limiter.try_acquire()?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_bypass(&self) -> bool {
        !self.held
    }
}

/// Without an outcome: ignored.
impl<L: LimitAlgorithm, C: Clock> Drop for AdaptivePermitRef<'_, L, C> {
    fn drop(&mut self) {
        if self.held {
            self.limiter
                .finish(Outcome::Ignored, self.start, self.inflight);
        }
    }
}

impl<L: LimitAlgorithm, C: Clock> fmt::Debug for AdaptivePermitRef<'_, L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptivePermitRef")
            .field("start", &self.start)
            .field("inflight", &self.inflight)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adaptive::WhenLimited;
    use crate::adaptive::limit::AimdLimit;
    use crate::time::ManualClock;

    fn send_static<T: Send + Sync + 'static>() {}

    #[test]
    fn permits_and_limiters_cross_threads() {
        send_static::<AdaptivePermit<AimdLimit, ManualClock>>();
        send_static::<AdaptivePermit>();
        send_static::<AdaptiveLimiter>();
        fn send_sync<T: Send + Sync>() {}
        send_sync::<AdaptivePermitRef<'_, AimdLimit, ManualClock>>();
    }

    #[test]
    fn an_empty_permit_gives_back_and_records_nothing() {
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(
                AimdLimit::new(),
                WhenLimited::FailFast,
                ManualClock::new(),
            )
            .unwrap(),
        );
        AdaptivePermit::empty(Arc::clone(&limiter)).dropped();
        assert_eq!(limiter.limit(), 20);
        assert_eq!(limiter.available_permits(), 20);
    }
}
