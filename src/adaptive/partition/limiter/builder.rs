//! [`PartitionedLimiterBuilder`]: the algorithm, the partitions, the clock, the
//! resolver and the bypass predicate; checked when built.

use std::fmt;

use super::{Bypass, PartitionedLimiter, Resolve, Shared, UNKNOWN};
use crate::adaptive::LimitAlgorithm;
use crate::adaptive::feedback::Feedback;
use crate::adaptive::partition::{PartitionMode, Partitions, PartitionsBuilder};
use crate::error::ConfigError;
use crate::observe::{EventKind, Events};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

/// Builds a [`PartitionedLimiter`]: start with [`PartitionedLimiter::builder`].
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::partition::PartitionMode;
/// use tollgate::adaptive::PartitionedLimiter;
/// use tollgate::time::ManualClock;
///
/// let limiter = PartitionedLimiter::builder(AimdLimit::new()) // a limit of 20
///     .partition("live", 0.7)
///     .partition("batch", 0.3)
///     .mode(PartitionMode::NetflixCompatible)
///     .clock(ManualClock::new())
///     .build()?;
/// assert_eq!(limiter.in_flight_bound(), 40);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until built"]
pub struct PartitionedLimiterBuilder<
    L: LimitAlgorithm,
    C: Clock = MonotonicClock,
    Ctx: ?Sized + 'static = str,
> {
    feedback: Feedback<L>,
    clock: C,
    partitions: PartitionsBuilder,
    resolve: Box<Resolve<Ctx>>,
    bypass: Option<Box<Bypass<Ctx>>>,
    events: Option<Events>,
    /// A partition was given the name a `None` from the resolver stands for.
    empty_name: bool,
    /// A bypass predicate was set for the contexts a later resolver replaced.
    bypass_lost: bool,
}

impl<L: LimitAlgorithm> PartitionedLimiterBuilder<L> {
    pub(super) fn new(algorithm: L) -> PartitionedLimiterBuilder<L> {
        let feedback = Feedback::new(algorithm);
        PartitionedLimiterBuilder {
            clock: MonotonicClock::new(),
            partitions: Partitions::builder(feedback.limit()),
            feedback,
            resolve: Box::new(|name: &str| Some(name)),
            bypass: None,
            events: None,
            empty_name: false,
            bypass_lost: false,
        }
    }
}

impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> PartitionedLimiterBuilder<L, C, Ctx> {
    /// Adds a partition guaranteed `share` of the limit: its own limit is
    /// `max(1, ⌈limit × share⌉)`, recomputed whenever the limit changes. Shares may
    /// add up to less than 1: the rest is a common burst pool.
    ///
    /// Checked by [`build`](Self::build), in the order given.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new()).partition("live", 0.3).build()?;
    /// assert_eq!(limiter.partition_limit("live"), 6);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn partition(
        mut self,
        name: impl Into<String>,
        share: f64,
    ) -> PartitionedLimiterBuilder<L, C, Ctx> {
        let name = name.into();
        self.empty_name |= name == UNKNOWN;
        self.partitions = self.partitions.partition(name, share);
        self
    }

    /// Chooses the admission rule; [`PartitionMode::Strict`] unless set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::partition::PartitionMode;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", 1.0)
    ///     .mode(PartitionMode::NetflixCompatible)
    ///     .build()?;
    /// assert_eq!(limiter.mode(), PartitionMode::NetflixCompatible);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn mode(mut self, mode: PartitionMode) -> PartitionedLimiterBuilder<L, C, Ctx> {
        self.partitions = self.partitions.mode(mode);
        self
    }

    /// Times requests on `clock` (a [`ManualClock`](crate::time::ManualClock) in
    /// tests) instead of the monotonic clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::time::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", 1.0)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now(), clock.now());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> PartitionedLimiterBuilder<L, C2, Ctx> {
        PartitionedLimiterBuilder {
            feedback: self.feedback,
            clock,
            partitions: self.partitions,
            resolve: self.resolve,
            bypass: self.bypass,
            events: self.events,
            empty_name: self.empty_name,
            bypass_lost: self.bypass_lost,
        }
    }

    /// Maps a request's context, a `Ctx2`, to its partition's name: `None`, or a
    /// name that is none of the partitions, sends it to the unknown partition (as
    /// Netflix's resolver returning `null`). Set it before the bypass predicate,
    /// which takes the same context.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let limiter = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", 0.9)
    ///     .resolver(|headers: &Vec<(&str, &str)>| {
    ///         headers.iter().find(|(name, _)| *name == "x-partition").map(|(_, value)| *value)
    ///     })
    ///     .build()?;
    /// let _live = limiter.try_acquire(&vec![("x-partition", "live")])?;
    /// let _unnamed = limiter.try_acquire(&vec![])?;
    /// assert_eq!(limiter.partition_in_flight("live"), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolver<Ctx2, F>(self, resolve: F) -> PartitionedLimiterBuilder<L, C, Ctx2>
    where
        Ctx2: ?Sized + 'static,
        F: for<'a> Fn(&'a Ctx2) -> Option<&'a str> + Send + Sync + 'static,
    {
        PartitionedLimiterBuilder {
            feedback: self.feedback,
            clock: self.clock,
            partitions: self.partitions,
            resolve: Box::new(resolve),
            bypass: None,
            events: self.events,
            empty_name: self.empty_name,
            bypass_lost: self.bypass_lost || self.bypass.is_some(),
        }
    }

    /// Lets the requests for which `bypass` answers `true` through uncounted, as
    /// Netflix's bypass resolver: they take no room, are never refused, and their
    /// outcomes feed nothing. Replaces an earlier predicate.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = PartitionedLimiter::builder(aimd)
    ///     .partition("live", 1.0)
    ///     .bypass(|name: &str| name == "health")
    ///     .build()?;
    /// let _live = limiter.try_acquire("live")?;
    /// assert!(limiter.try_acquire("live").is_err());
    /// assert!(limiter.try_acquire("health")?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bypass<F>(mut self, bypass: F) -> PartitionedLimiterBuilder<L, C, Ctx>
    where
        F: Fn(&Ctx) -> bool + Send + Sync + 'static,
    {
        self.bypass = Some(Box::new(bypass));
        self
    }

    /// Reports to `events`: admissions and refusals keyed by the partition's name
    /// ([`EventKind::Admitted`](crate::observe::EventKind::Admitted),
    /// [`EventKind::Denied`](crate::observe::EventKind::Denied)), the requests in
    /// flight after each admission
    /// ([`EventKind::Started`](crate::observe::EventKind::Started)), the limit (at
    /// once from 0 when built, then every change:
    /// [`EventKind::LimitChanged`](crate::observe::EventKind::LimitChanged)) and
    /// every request that ends
    /// ([`EventKind::Finished`](crate::observe::EventKind::Finished)), as an
    /// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter) reports them. Bypassed
    /// requests are counted nowhere, events included.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    /// use tollgate::observe::{Event, EventKind, Events};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("backend");
    /// let _subscription = events.subscribe({
    ///     let seen = Arc::clone(&seen);
    ///     move |event: &Event<'_>| seen.lock().unwrap().push((event.key.map(String::from), event.kind))
    /// });
    /// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
    /// let limiter = PartitionedLimiter::builder(aimd)
    ///     .partition("live", 0.5)
    ///     .events(events)
    ///     .build()?;
    /// limiter.try_acquire("live")?.dropped();
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen[0].1, EventKind::LimitChanged { previous: 0, limit: 20 });
    /// assert_eq!(seen[1], (Some("live".to_string()), EventKind::Admitted));
    /// assert_eq!(seen[2].1, EventKind::Started { inflight: 1 });
    /// assert_eq!(seen[3].1, EventKind::LimitChanged { previous: 20, limit: 18 });
    /// assert!(matches!(seen[4].1, EventKind::Finished { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn events(mut self, events: Events) -> PartitionedLimiterBuilder<L, C, Ctx> {
        self.events = Some(events);
        self
    }

    /// Checks the configuration and builds the limiter, at the algorithm's limit
    /// (at least 1), all idle.
    ///
    /// # Errors
    ///
    /// - As [`PartitionsBuilder::build`]: [`ConfigError::Zero`] for no partitions;
    ///   [`ConfigError::NotANumber`], [`ConfigError::Zero`],
    ///   [`ConfigError::Negative`] or [`ConfigError::OutOfRange`] for a share that
    ///   is not in (0, 1]; [`ConfigError::OutOfRange`] for shares adding up to more
    ///   than 1 (`sum of shares`) or a name given twice (`partition name`).
    /// - [`ConfigError::OutOfRange`] (`partition name`) for an empty name: it stands
    ///   for the unknown partition.
    /// - [`ConfigError::OutOfRange`] (`bypass`) when a bypass predicate was set
    ///   before a [`resolver`](Self::resolver) changed the context it would take:
    ///   it would be lost.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::PartitionedLimiter;
    ///
    /// let error = PartitionedLimiter::builder(AimdLimit::new())
    ///     .partition("live", f64::NAN)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(error.parameter(), "share");
    /// ```
    pub fn build(self) -> Result<PartitionedLimiter<L, C, Ctx>, ConfigError> {
        if self.empty_name {
            return Err(ConfigError::OutOfRange {
                parameter: "partition name",
                expected: "not empty: the empty name stands for the unknown partition",
            });
        }
        if self.bypass_lost {
            return Err(ConfigError::OutOfRange {
                parameter: "bypass",
                expected: "set after the resolver, which changes the context it takes",
            });
        }
        let partitions = Arc::new(self.partitions.build()?);
        if let Some(events) = &self.events {
            // The limit from the start, as an adaptive limiter reports it: a gauge
            // fed by these events is not empty until the first change.
            let limit = partitions.limit();
            events.emit(0, EventKind::LimitChanged { previous: 0, limit });
        }
        Ok(PartitionedLimiter {
            shared: Arc::new(Shared {
                partitions,
                feedback: self.feedback,
                clock: self.clock,
                events: self.events,
            }),
            resolve: self.resolve,
            bypass: self.bypass,
        })
    }
}

impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> fmt::Debug
    for PartitionedLimiterBuilder<L, C, Ctx>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionedLimiterBuilder")
            .field("partitions", &self.partitions)
            .field("bypass", &self.bypass.is_some())
            .finish_non_exhaustive()
    }
}
