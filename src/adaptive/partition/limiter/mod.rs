//! [`PartitionedLimiter`]: the [`Partitions`] core driven by a [`LimitAlgorithm`].
//! It feeds each finished request to the algorithm on its clock and sets the core's
//! limit to the answer. Its types are exported from [`adaptive`](crate::adaptive).

use std::fmt;

use super::{OwnedPartitionPermit, PartitionDenied, PartitionMode, Partitions};
use crate::adaptive::LimitAlgorithm;
use crate::adaptive::feedback::Feedback;
use crate::observe::{EventKind, Events, Outcome};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock, Nanos};

mod builder;
mod permit;
mod source;

pub use builder::PartitionedLimiterBuilder;
pub use permit::PartitionedPermit;

/// Maps a request's context to the name of its partition; `None` (or a name that is
/// none of the partitions) sends it to the unknown partition.
type Resolve<Ctx> = dyn for<'a> Fn(&'a Ctx) -> Option<&'a str> + Send + Sync;
/// Whether a request goes through uncounted.
type Bypass<Ctx> = dyn Fn(&Ctx) -> bool + Send + Sync;

/// A concurrency limit that follows a [`LimitAlgorithm`], shared by named
/// partitions: each is guaranteed a share of the limit and bursts into spare
/// capacity, after Netflix's `AbstractPartitionedLimiter` (concurrency-limits).
///
/// Each admitted request holds a [`PartitionedPermit`] and ends it with
/// [`success`](PartitionedPermit::success), [`dropped`](PartitionedPermit::dropped)
/// or [`ignore`](PartitionedPermit::ignore), as an
/// [`AdaptivePermit`](crate::adaptive::AdaptivePermit): the time it was held on the limiter's
/// clock, and the in-flight count right after it was admitted, are the sample fed to
/// the algorithm. Every new limit goes at once to the [`Partitions`] (every
/// partition's own limit is recomputed from its share), then the request is given
/// back. A lowered limit revokes nothing: admissions are refused until enough
/// requests have ended.
///
/// # The rules
///
/// Admission is the [`Partitions`] core's: one short lock per decision, so no race
/// lets in more than the rule allows (Netflix's check-then-act does,
/// concurrency-limits#234).
///
/// - [`PartitionMode::Strict`], the default: **never more in flight than the
///   limit**. A partition bursts past its own limit only into room no other
///   partition reserves (what another does not use of its own limit), so leave part
///   of the limit unshared for a common burst pool.
/// - [`PartitionMode::NetflixCompatible`]: Netflix's decisions. A partition below
///   its own limit is admitted even when others' bursts have filled the global
///   limit: with a limit of 10 split 30/70, batch bursts to 10 and live still gets
///   its 7, 17 in flight. The excess is bounded by the shares: while the limit stays
///   put, in flight never passes the limit plus the sum of the partitions' own
///   limits ([`in_flight_bound`](Self::in_flight_bound); about twice the limit).
///
/// See the [`partition`](crate::adaptive::partition) module for the details
/// (rounding of shares, the unknown partition).
///
/// # Contexts, the resolver and the bypass
///
/// [`try_acquire`](Self::try_acquire) takes the request's context, `Ctx`. The
/// resolver given to the builder maps it to a partition's name (by default `Ctx` is
/// `str`, the name itself); the bypass predicate, if any, lets a request through
/// uncounted, as Netflix's `bypassResolver`: a bypassed request takes no room, is
/// refused nothing, and its outcome feeds nothing. Use it for requests that must
/// never be limited (health checks, the control plane).
/// [`try_acquire_partition`](Self::try_acquire_partition) names the partition
/// directly, skipping both.
///
/// # Events
///
/// With [`events`](PartitionedLimiterBuilder::events): admissions and refusals
/// keyed by the partition's name, plus
/// [`LimitChanged`](EventKind::LimitChanged) and [`Finished`](EventKind::Finished),
/// as an [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter) reports them.
///
/// # Fail fast
///
/// Partitioned admission never waits: a request refused now is refused, as
/// Netflix's `AbstractPartitionedLimiter` (apart from its fixed delay option). The
/// core decides under a lock with no wait queue, and a fair queue across
/// partitions with different rules is not what it is built for; retry, shed or
/// queue upstream of the limiter.
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
/// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
/// let limiter = PartitionedLimiter::builder(aimd)
///     .partition("live", 0.7)
///     .partition("batch", 0.2) // 10% left for bursts
///     .clock(clock.clone())
///     .build()?;
///
/// let live = limiter.try_acquire("live")?;
/// assert_eq!(live.inflight(), 1);
/// clock.advance(Duration::from_millis(20));
/// live.dropped(); // AIMD: 10 × 0.9
/// assert_eq!(limiter.limit(), 9);
/// assert_eq!(limiter.partition_limit("live"), 7); // ⌈9 × 0.7⌉
/// assert_eq!(limiter.partition_limit("batch"), 2); // ⌈9 × 0.2⌉
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PartitionedLimiter<
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
    Ctx: ?Sized + 'static = str,
> {
    shared: Arc<Shared<L, C>>,
    resolve: Box<Resolve<Ctx>>,
    bypass: Option<Box<Bypass<Ctx>>>,
}

/// What the permits hold on to: the admission core, the algorithm and the clock.
struct Shared<L, C> {
    partitions: Arc<Partitions>,
    feedback: Feedback<L>,
    clock: C,
    events: Option<Events>,
}

impl<L: LimitAlgorithm> PartitionedLimiter<L> {
    /// Starts a builder for a limiter enforcing `algorithm`'s limit, on the default
    /// monotonic clock, with requests named by their partition (`Ctx` is `str`).
    ///
    /// An algorithm answering a limit of 0 is held at 1, as in an
    /// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(VegasLimit::new())
    ///     .partition("live", 0.8)
    ///     .build()?;
    /// assert_eq!(limiter.limit(), 20);
    /// assert_eq!(limiter.partition_limit("live"), 16);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder(algorithm: L) -> PartitionedLimiterBuilder<L> {
        PartitionedLimiterBuilder::new(algorithm)
    }
}

/// # Admitting
impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> PartitionedLimiter<L, C, Ctx> {
    /// Admits a request with context `ctx`, now or never: through uncounted if the
    /// bypass predicate says so, otherwise into the partition the resolver names, if
    /// the mode's rule allows it.
    ///
    /// # Errors
    ///
    /// [`PartitionDenied`] when the rule refuses the request now: retry once
    /// requests end or the limit rises. It never waits (see
    /// [fail fast](Self#fail-fast)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// struct Request { path: &'static str, tenant: String }
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(2).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd)
    ///     .partition("gold", 0.5)
    ///     .partition("free", 0.5)
    ///     .resolver(|request: &Request| Some(request.tenant.as_str()))
    ///     .bypass(|request: &Request| request.path == "/health")
    ///     .build()?;
    /// let free = |path| Request { path, tenant: "free".into() };
    ///
    /// let held = limiter.try_acquire(&free("/search"))?;
    /// assert!(limiter.try_acquire(&free("/search")).is_err()); // free's 1 is in use
    /// let health = limiter.try_acquire(&free("/health"))?;
    /// assert!(health.is_bypass());
    /// assert_eq!(limiter.in_flight(), 1);
    /// # drop((held, health));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, ctx: &Ctx) -> Result<PartitionedPermit<L, C>, PartitionDenied> {
        if self.bypass.as_ref().is_some_and(|bypass| bypass(ctx)) {
            let permit = self.shared.partitions.bypass_owned();
            return Ok(PartitionedPermit::new(Arc::clone(&self.shared), permit));
        }
        let partition = (self.resolve)(ctx).unwrap_or(UNKNOWN);
        self.try_acquire_partition(partition)
    }

    /// Admits a request of the partition named `partition`, now or never, without
    /// the resolver or the bypass predicate. A name that is none of the partitions
    /// goes to the unknown partition, which only bursts.
    ///
    /// # Errors
    ///
    /// [`PartitionDenied`] when the rule refuses the request now.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(4).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd)
    ///     .partition("live", 0.5)
    ///     .bypass(|name: &str| name == "admin")
    ///     .build()?;
    /// let admin = limiter.try_acquire_partition("admin")?; // unknown, not bypassed
    /// assert!(!admin.is_bypass());
    /// assert_eq!(limiter.partition_in_flight("no such partition"), 1);
    /// admin.success();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_partition(
        &self,
        partition: &str,
    ) -> Result<PartitionedPermit<L, C>, PartitionDenied> {
        let admitted = self.shared.partitions.try_acquire_owned(partition);
        if let Some(events) = &self.shared.events {
            let kind = match &admitted {
                Ok(_) => EventKind::Admitted,
                Err(denied) => EventKind::of_denied(&source::limited(*denied)),
            };
            events.emit_keyed(partition, 1, kind);
            if admitted.is_ok() {
                let inflight = self.shared.partitions.in_flight();
                events.emit(1, EventKind::Started { inflight });
            }
        }
        Ok(PartitionedPermit::new(Arc::clone(&self.shared), admitted?))
    }

    /// Lets the algorithm see the time without a request ending
    /// ([`LimitAlgorithm::on_time`]) and applies its limit; returns the limit. Call it
    /// from a timer when requests may stop ending for a while; ignored requests do
    /// it too.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new()).partition("a", 1.0).build()?;
    /// assert_eq!(limiter.tick(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn tick(&self) -> u64 {
        let now = self.shared.clock.now();
        let changed = self
            .shared
            .feedback
            .tick(now, |limit| self.shared.apply(limit));
        self.shared.report_change(changed);
        self.limit()
    }
}

/// # Counts and configuration
impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> PartitionedLimiter<L, C, Ctx> {
    /// The global limit enforced now: the algorithm's, at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd).partition("live", 0.5).build()?;
    /// assert_eq!(limiter.limit(), 10);
    /// limiter.try_acquire("live")?.dropped(); // AIMD: 10 × 0.9
    /// assert_eq!(limiter.limit(), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(&self) -> u64 {
        self.shared.partitions.limit()
    }

    /// Requests in flight now, all partitions together (bypasses excluded). Above
    /// the limit after the limit was lowered, until enough have ended, and in
    /// [`NetflixCompatible`](PartitionMode::NetflixCompatible) mode up to
    /// [`in_flight_bound`](Self::in_flight_bound).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new()).partition("live", 0.5).build()?;
    /// let live = limiter.try_acquire("live")?;
    /// let other = limiter.try_acquire("other")?; // the unknown partition
    /// assert_eq!(limiter.in_flight(), 2);
    /// live.success();
    /// other.ignore();
    /// assert_eq!(limiter.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.shared.partitions.in_flight()
    }

    /// The own limit of the partition named `partition`, `max(1, ⌈limit × share⌉)`;
    /// 0 for a name that is none of the partitions.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// assert_eq!(limiter.partition_limit("batch"), 3);
    /// assert_eq!(limiter.partition_limit("live"), 7);
    /// assert_eq!(limiter.partition_limit("other"), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn partition_limit(&self, partition: &str) -> u64 {
        self.shared.partitions.partition_limit(partition)
    }

    /// Requests of the partition named `partition` in flight now; for a name that is
    /// none of the partitions, those of the unknown partition.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new()).partition("live", 0.5).build()?;
    /// let _held = (limiter.try_acquire("live")?, limiter.try_acquire("a")?);
    /// assert_eq!(limiter.partition_in_flight("live"), 1);
    /// assert_eq!(limiter.partition_in_flight("b"), 1); // "a" and "b" are both unknown
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_in_flight(&self, partition: &str) -> u64 {
        self.shared.partitions.partition_in_flight(partition)
    }

    /// The most requests admissions can bring in flight while the limit stays as it
    /// is: the limit in [`Strict`](PartitionMode::Strict) mode, the limit plus the
    /// sum of the partitions' own limits in
    /// [`NetflixCompatible`](PartitionMode::NetflixCompatible) mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::partition::PartitionMode;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let build = |mode| {
    ///     let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    ///     PartitionedLimiter::builder(aimd)
    ///         .partition("batch", 0.3)
    ///         .partition("live", 0.7)
    ///         .mode(mode)
    ///         .build()
    /// };
    /// assert_eq!(build(PartitionMode::Strict)?.in_flight_bound(), 10);
    /// // The limit plus the partitions' own limits: 10 + 3 + 7.
    /// assert_eq!(build(PartitionMode::NetflixCompatible)?.in_flight_bound(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn in_flight_bound(&self) -> u64 {
        self.shared.partitions.in_flight_bound()
    }

    /// The admission rule: [`Strict`](PartitionMode::Strict) unless the builder
    /// was told otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::partition::PartitionMode;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new()).partition("live", 0.5).build()?;
    /// assert_eq!(limiter.mode(), PartitionMode::Strict);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn mode(&self) -> PartitionMode {
        self.shared.partitions.mode()
    }

    /// The clock requests are timed on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::time::{Clock, ManualClock, Nanos};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", 0.5)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now(), Nanos::new(1_000_000_000));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }
}

impl<L: LimitAlgorithm, C: Clock> Shared<L, C> {
    /// A request admitted at `start`, holding `permit`, ended as `outcome`: feeds the
    /// algorithm, applies its limit, then gives the permit back (also when the
    /// algorithm panics: the permit is dropped while unwinding).
    fn finish(&self, outcome: Outcome, start: Nanos, permit: OwnedPartitionPermit) {
        let now = self.clock.now();
        let changed = self
            .feedback
            .record(outcome, start, now, permit.in_flight(), |limit| {
                self.apply(limit)
            });
        drop(permit);
        self.report_change(changed);
        if let Some(events) = &self.events {
            let kind = EventKind::Finished {
                outcome,
                rtt: now.saturating_since(start),
                inflight: self.partitions.in_flight(),
            };
            events.emit(1, kind);
        }
    }

    /// Gives `limit` (at least 1) to the partitions; returns the change. Called under
    /// the algorithm's lock, so limits are applied in the order computed, and
    /// nothing else changes the limit between the read and the write.
    fn apply(&self, limit: u64) -> Option<(u64, u64)> {
        let previous = self.partitions.limit();
        if limit == previous {
            return None;
        }
        // Refuses only 0, and `limit` is at least 1.
        self.partitions.set_limit(limit).ok()?;
        Some((previous, limit))
    }

    fn report_change(&self, changed: Option<(u64, u64)>) {
        if let (Some((previous, limit)), Some(events)) = (changed, &self.events) {
            events.emit(0, EventKind::LimitChanged { previous, limit });
        }
    }
}

/// What a `None` from the resolver is looked up as: the builder refuses it as a
/// partition's name, so it goes to the unknown partition.
const UNKNOWN: &str = "";

impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> fmt::Debug
    for PartitionedLimiter<L, C, Ctx>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedLimiter")
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .field("mode", &self.mode())
            .field("bypass", &self.bypass.is_some())
            .finish_non_exhaustive()
    }
}
