//! [`PartitionedPermit`]: the guard of one request a [`PartitionedLimiter`] admitted,
//! which records how it ended.
//!
//! [`PartitionedLimiter`]: super::PartitionedLimiter

use std::fmt;

use super::Shared;
use crate::adaptive::LimitAlgorithm;
use crate::adaptive::partition::OwnedPartitionPermit;
use crate::observe::Outcome;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock, Nanos};

/// One request admitted by a [`PartitionedLimiter`](super::PartitionedLimiter),
/// holding its partition's permit while it runs.
///
/// End it with [`success`](Self::success), [`dropped`](Self::dropped) or
/// [`ignore`](Self::ignore) (or [`finish`](Self::finish) with an [`Outcome`]): a
/// success or a drop is a [`Sample`](crate::adaptive::Sample) for the limit
/// algorithm, with the time since admission on the limiter's clock and the
/// in-flight count right after admission ([`inflight`](Self::inflight)). The new
/// limit goes to the partitions, then the request is given back.
///
/// **Dropping the permit without an outcome counts as [`ignore`](Self::ignore)**:
/// the request is given back and the algorithm learns nothing from it. A
/// [bypassed](Self::is_bypass) request records nothing whatever its outcome.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::PartitionedLimiter;
///
/// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
/// let limiter = PartitionedLimiter::builder(aimd).partition("live", 0.5).build()?;
/// let permit = limiter.try_acquire("live")?;
/// assert_eq!(permit.inflight(), 1);
/// permit.dropped();
/// assert_eq!(limiter.limit(), 18); // AIMD: 20 × 0.9
/// assert_eq!(limiter.partition_limit("live"), 9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the request is given back, as ignored, as soon as the permit is dropped"]
pub struct PartitionedPermit<L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock>
{
    shared: Arc<Shared<L, C>>,
    /// `None` once ended, or for a grant of zero permits.
    permit: Option<OwnedPartitionPermit>,
    start: Nanos,
    inflight: u64,
    bypass: bool,
}

impl<L: LimitAlgorithm, C: Clock> PartitionedPermit<L, C> {
    pub(super) fn new(
        shared: Arc<Shared<L, C>>,
        permit: OwnedPartitionPermit,
    ) -> PartitionedPermit<L, C> {
        let start = shared.clock.now();
        PartitionedPermit {
            start,
            inflight: permit.in_flight(),
            bypass: permit.is_bypass(),
            permit: Some(permit),
            shared,
        }
    }

    /// A grant of zero permits: holds nothing, records nothing.
    pub(super) fn empty(shared: Arc<Shared<L, C>>) -> PartitionedPermit<L, C> {
        let start = shared.clock.now();
        PartitionedPermit {
            shared,
            permit: None,
            start,
            inflight: 0,
            bypass: false,
        }
    }

    /// The request succeeded: its latency is a sample for the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(2).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd).partition("a", 1.0).clock(clock.clone()).build()?;
    /// let (first, second) = (limiter.try_acquire("a")?, limiter.try_acquire("a")?);
    /// clock.advance(Duration::from_millis(10));
    /// first.success(); // AIMD: +1 while at least half the limit is in use
    /// assert_eq!(limiter.limit(), 3);
    /// # drop(second);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd).partition("a", 1.0).build()?;
    /// limiter.try_acquire("a")?.dropped(); // AIMD: 10 × 0.9
    /// assert_eq!(limiter.limit(), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dropped(self) {
        self.finish(Outcome::Dropped)
    }

    /// The request says nothing about the limit: it is given back with no sample.
    /// The same as dropping the permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd).partition("a", 1.0).build()?;
    /// limiter.try_acquire("a")?.ignore();
    /// drop(limiter.try_acquire("a")?); // the same
    /// assert_eq!((limiter.limit(), limiter.in_flight()), (10, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ignore(self) {
        self.finish(Outcome::Ignored)
    }

    /// Ends the request as `outcome`, for a caller (a classifier) that picked it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::observe::Outcome;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
    /// let limiter = PartitionedLimiter::builder(aimd).partition("a", 1.0).build()?;
    /// limiter.try_acquire("a")?.finish(Outcome::Dropped);
    /// assert_eq!((limiter.limit(), limiter.in_flight()), (18, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(mut self, outcome: Outcome) {
        self.end(outcome)
    }

    /// When the request was admitted, on the limiter's clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::time::{ManualClock, Nanos};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("a", 1.0)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// clock.advance(Duration::from_millis(5));
    /// let permit = limiter.try_acquire("a")?;
    /// assert_eq!(permit.start(), Nanos::new(5_000_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// How many requests were in flight right after it was admitted, itself
    /// included, all partitions together; 0 for a bypass.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("a", 0.5)
    ///     .partition("b", 0.5)
    ///     .build()?;
    /// let a = limiter.try_acquire("a")?;
    /// let b = limiter.try_acquire("b")?;
    /// assert_eq!((a.inflight(), b.inflight()), (1, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// Whether the bypass predicate let it through uncounted.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", 1.0)
    ///     .bypass(|name: &str| name == "health")
    ///     .build()?;
    /// assert!(limiter.try_acquire("health")?.is_bypass());
    /// assert!(!limiter.try_acquire("live")?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_bypass(&self) -> bool {
        self.bypass
    }

    fn end(&mut self, outcome: Outcome) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        if !permit.is_bypass() {
            self.shared.finish(outcome, self.start, permit);
        }
    }
}

/// Without an outcome: ignored.
impl<L: LimitAlgorithm, C: Clock> Drop for PartitionedPermit<L, C> {
    fn drop(&mut self) {
        self.end(Outcome::Ignored);
    }
}

impl<L: LimitAlgorithm, C: Clock> fmt::Debug for PartitionedPermit<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedPermit")
            .field("start", &self.start)
            .field("inflight", &self.inflight)
            .field("bypass", &self.bypass)
            .field("held", &self.permit.is_some())
            .finish_non_exhaustive()
    }
}
