//! [`AdaptiveLimiter`]: permits held at once, as many as a [`LimitAlgorithm`] says.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use super::LimitAlgorithm;
use super::Sample;
use super::acquire::AdaptiveAcquire;
use super::error::SampleError;
use super::feedback::Feedback;
use super::permit::{AdaptivePermit, AdaptivePermitRef};
use super::when_limited::WhenLimited;
use crate::decision::Denied;
use crate::error::{AcquireError, ConfigError};
use crate::observe::{EventKind, Events, Outcome};
use crate::semaphore::Semaphore;
use crate::sync::Arc;
use crate::time::{Clock, CoarseClock, MonotonicClock, Nanos, SHARED_RESOLUTION};
use crate::wait::future::WaitFor;

/// A concurrency limit that follows a [`LimitAlgorithm`]: as many requests in flight
/// at once as the algorithm's limit, which moves with every request that ends.
///
/// Each admitted request holds a permit, borrowing the limiter
/// ([`AdaptivePermitRef`], from [`try_acquire`](AdaptiveLimiter::try_acquire)) or
/// owning a reference to it ([`AdaptivePermit`], from
/// [`try_acquire_owned`](AdaptiveLimiter::try_acquire_owned) and the waits), and
/// ends it with `success`, `dropped` or `ignore`: the time it held the permit, on
/// the limiter's clock, is the sample fed to the algorithm, whose new limit applies
/// at once. A raised limit lets waiters through; a lowered one takes effect as
/// permits come back, so that no permit is lost or created.
///
/// The permits are a [`Semaphore`]'s: taking and giving one back is a
/// compare-and-swap without a lock. Recording an outcome takes the lock around the
/// algorithm, except for a sample that an algorithm with a
/// [`LimitRule`](super::limit::LimitRule) (AIMD) says leaves the limit as it is. An
/// algorithm that reads no time ([`LimitAlgorithm::uses_time`]) is fed without a
/// clock read, unless events are attached. What a request does when every permit is
/// held is the [`WhenLimited`]: fail fast, wait in arrival order, or wait in a bounded LIFO
/// backlog.
///
/// Events (with [`with_events`](AdaptiveLimiter::with_events)): admissions, waits
/// and rejections as for a semaphore, plus [`Started`](EventKind::Started),
/// [`LimitChanged`](EventKind::LimitChanged) and [`Finished`](EventKind::Finished).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let aimd = AimdLimit::builder().min_limit(1).initial_limit(2).max_limit(10).build()?;
/// let limiter = Arc::new(AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone())?);
///
/// let first = limiter.try_acquire()?;
/// let second = limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err()); // the limit is 2
/// clock.advance(Duration::from_millis(20));
/// first.success(); // busy enough: +1
/// second.dropped(); // × 0.9
/// assert_eq!(limiter.limit(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AdaptiveLimiter<L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock> {
    permits: Semaphore<C>,
    /// Locked only to record an outcome; the limit it answers is applied under it,
    /// so that limits are applied in the order they were computed.
    feedback: Feedback<L>,
    mode: WhenLimited,
    /// Whether requests are timed: the algorithm reads the time of its samples, or
    /// events report it. Untimed, no clock is read for a request that ends as a
    /// success or a drop.
    timed: bool,
    /// Where timed requests are timed when not on `permits`' clock: a coarse clock
    /// on the same timeline, picked by [`new`](AdaptiveLimiter::new) for an
    /// algorithm that needs no finer (see [`Timing`]).
    coarse: Option<CoarseClock>,
    /// The bypass predicate, a `Box<Bypass<Ctx>>` for the context type it was
    /// given for (see [`with_bypass`](AdaptiveLimiter::with_bypass)).
    bypass: Option<Box<dyn Any + Send + Sync>>,
}

/// Whether a request with this context goes through uncounted.
type Bypass<Ctx> = dyn Fn(&Ctx) -> bool + Send + Sync;

/// How an [`AdaptiveLimiter`] times its requests: see
/// [`AdaptiveLimiter::timing`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{AimdLimit, VegasLimit};
/// use tollgate::adaptive::{AdaptiveLimiter, Timing, WhenLimited};
///
/// let aimd = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
/// assert_eq!(aimd.timing(), Timing::Coarse(Duration::from_millis(1)));
/// let vegas = AdaptiveLimiter::new(VegasLimit::new(), WhenLimited::FailFast)?;
/// assert_eq!(vegas.timing(), Timing::Clock);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timing {
    /// Not timed: the algorithm reads no time ([`LimitAlgorithm::uses_time`]) and no
    /// events are attached. Samples have a `start` and an `rtt` of zero.
    Untimed,
    /// On the limiter's [`clock`](AdaptiveLimiter::clock), exactly.
    Clock,
    /// On a [`CoarseClock`] of this resolution, on the same timeline as the
    /// limiter's clock: one atomic load a reading, up to a resolution behind.
    Coarse(Duration),
}

impl<L: LimitAlgorithm> AdaptiveLimiter<L> {
    /// A limiter enforcing `algorithm`'s limit in `mode`, on the default monotonic
    /// clock.
    ///
    /// # Which clock times the requests
    ///
    /// The precision the algorithm asks for
    /// ([`LimitAlgorithm::time_resolution`]) picks it. At 1 ms or coarser, as for
    /// [`AimdLimit`](super::limit::AimdLimit), whose timeout is seconds, requests
    /// are timed on a [`CoarseClock`] of 1 ms that all such limiters in the process
    /// share ([`Timing::Coarse`]): two atomic loads per request instead of two
    /// time-stamp counter reads, and one thread (`tollgate-coarse-clock`) waking
    /// every millisecond while any of them lives. Finer, as for Vegas and the
    /// gradients, they are timed on the [`MonotonicClock`] ([`Timing::Clock`]). Waits
    /// and their timeouts are always on the `MonotonicClock`, which
    /// [`clock`](AdaptiveLimiter::clock) answers; the coarse clock reads the same
    /// timeline, up to 1 ms behind.
    ///
    /// To time every request exactly whatever the algorithm, pass the clock:
    /// [`with_clock`](AdaptiveLimiter::with_clock)`(algorithm, mode,
    /// MonotonicClock::new())` times on the clock it is given. With events attached
    /// ([`with_events`](AdaptiveLimiter::with_events)), requests are timed on the
    /// clock too, so that `Finished` reports exact RTTs.
    ///
    /// # Errors
    ///
    /// As [`with_clock`](AdaptiveLimiter::with_clock).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(VegasLimit::new(), WhenLimited::FailFast)?;
    /// assert_eq!(limiter.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    ///
    /// Timing every request of an AIMD limiter on the precise clock:
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, Timing, WhenLimited};
    /// use tollgate::time::MonotonicClock;
    ///
    /// let mode = WhenLimited::FailFast;
    /// let precise = AdaptiveLimiter::with_clock(AimdLimit::new(), mode, MonotonicClock::new())?;
    /// assert_eq!(precise.timing(), Timing::Clock);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(algorithm: L, mode: WhenLimited) -> Result<AdaptiveLimiter<L>, ConfigError> {
        if algorithm.uses_time() && algorithm.time_resolution() >= SHARED_RESOLUTION {
            let coarse = CoarseClock::shared();
            // The coarse clock's own source: one timeline for requests and waits.
            let clock = coarse.source().clone();
            let limiter = AdaptiveLimiter::with_clock(algorithm, mode, clock)?;
            return Ok(AdaptiveLimiter {
                coarse: Some(coarse),
                ..limiter
            });
        }
        AdaptiveLimiter::with_clock(algorithm, mode, MonotonicClock::new())
    }
}

impl<L: LimitAlgorithm, C: Clock> AdaptiveLimiter<L, C> {
    /// A limiter enforcing `algorithm`'s limit in `mode`, timing requests and waits
    /// on `clock` (a [`ManualClock`](crate::time::ManualClock) in tests), exactly:
    /// unlike [`new`](AdaptiveLimiter::new), it never picks a coarser clock.
    ///
    /// An algorithm answering a limit of 0 is held at 1: a limiter admitting nothing
    /// would never hear of a request again.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] or [`ConfigError::TooLong`] for a `mode` made by hand
    /// with a zero backlog, or a zero or too long timeout (see [`WhenLimited::lifo`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::ManualClock;
    ///
    /// let mode = WhenLimited::Lifo { backlog: 0, timeout: Duration::from_secs(1) };
    /// assert!(AdaptiveLimiter::with_clock(AimdLimit::new(), mode, ManualClock::new()).is_err());
    /// ```
    pub fn with_clock(
        algorithm: L,
        mode: WhenLimited,
        clock: C,
    ) -> Result<AdaptiveLimiter<L, C>, ConfigError> {
        mode.check()?;
        let feedback = Feedback::new(algorithm);
        let permits = Semaphore::with_clock(feedback.limit(), clock)?;
        if let WhenLimited::Lifo { backlog, .. } = mode {
            let waiting = permits.waiting();
            waiting.set_lifo(true);
            waiting.set_max_units(u64::try_from(backlog).unwrap_or(u64::MAX));
        }
        Ok(AdaptiveLimiter {
            permits,
            timed: feedback.uses_time(),
            feedback,
            mode,
            coarse: None,
            bypass: None,
        })
    }

    /// Lets the requests whose context `bypass` answers `true` for through
    /// uncounted, as Netflix's `bypassResolver`: asked by
    /// [`try_acquire_for`](Self::try_acquire_for) and
    /// [`try_acquire_owned_for`](Self::try_acquire_owned_for) (and
    /// [`is_bypassed`](Self::is_bypassed)), a bypassed request is admitted at once,
    /// even when every permit is held, takes no permit, and its outcome feeds
    /// nothing, events included. Use it for what must never be limited: health
    /// checks, the control plane. Replaces an earlier predicate.
    ///
    /// The predicate takes a `&Ctx` of the type given here; a context of any other
    /// type is never bypassed (it is limited as any request).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?
    ///     .with_bypass(|path: &str| path == "/health");
    /// let _search = limiter.try_acquire_for("/search")?;
    /// assert!(limiter.try_acquire_for("/search").is_err()); // the limit is 1
    /// let health = limiter.try_acquire_for("/health")?;
    /// assert!(health.is_bypass());
    /// assert_eq!(limiter.inflight(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_bypass<Ctx, F>(self, bypass: F) -> AdaptiveLimiter<L, C>
    where
        Ctx: ?Sized + 'static,
        F: Fn(&Ctx) -> bool + Send + Sync + 'static,
    {
        let bypass: Box<Bypass<Ctx>> = Box::new(bypass);
        AdaptiveLimiter {
            bypass: Some(Box::new(bypass)),
            ..self
        }
    }

    /// Whether the bypass predicate lets a request with context `ctx` through
    /// uncounted: `false` with no predicate, or one for another context type.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?
    ///     .with_bypass(|tenant: &String| tenant == "ops");
    /// assert!(limiter.is_bypassed(&"ops".to_string()));
    /// assert!(!limiter.is_bypassed(&"ann".to_string()));
    /// assert!(!limiter.is_bypassed("ops")); // a `str`, not a `String`
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_bypassed<Ctx: ?Sized + 'static>(&self, ctx: &Ctx) -> bool {
        self.bypass
            .as_ref()
            .and_then(|bypass| bypass.downcast_ref::<Box<Bypass<Ctx>>>())
            .is_some_and(|bypass| bypass(ctx))
    }

    /// [`try_acquire`](Self::try_acquire) for a request with context `ctx`: through
    /// uncounted if the bypass predicate says so
    /// ([`with_bypass`](Self::with_bypass)), otherwise as `try_acquire`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire); a bypassed request is never refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?
    ///     .with_bypass(|port: &u16| *port == 9090);
    /// assert!(limiter.try_acquire_for(&9090u16)?.is_bypass());
    /// assert!(!limiter.try_acquire_for(&8080u16)?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_for<Ctx: ?Sized + 'static>(
        &self,
        ctx: &Ctx,
    ) -> Result<AdaptivePermitRef<'_, L, C>, Denied> {
        if self.is_bypassed(ctx) {
            return Ok(self.bypass());
        }
        self.try_acquire()
    }

    /// [`try_acquire_owned`](Self::try_acquire_owned) for a request with context
    /// `ctx`: through uncounted if the bypass predicate says so.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire); a bypassed request is never refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?
    ///     .with_bypass(|path: &str| path.starts_with("/admin/"));
    /// let limiter = Arc::new(limiter);
    /// let admin = limiter.try_acquire_owned_for("/admin/flags")?;
    /// std::thread::spawn(move || admin.success()).join().unwrap();
    /// assert_eq!(limiter.limit(), 20); // fed nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned_for<Ctx: ?Sized + 'static>(
        self: &Arc<Self>,
        ctx: &Ctx,
    ) -> Result<AdaptivePermit<L, C>, Denied> {
        if self.is_bypassed(ctx) {
            return Ok(self.bypass_owned());
        }
        self.try_acquire_owned()
    }

    /// A bypassed request, admitted whatever the limit: it holds no permit, is
    /// counted nowhere (in flight, events) and its outcome feeds nothing. For a
    /// caller that decides itself; [`with_bypass`](Self::with_bypass) decides by a
    /// predicate.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// let health = limiter.bypass();
    /// assert_eq!(limiter.inflight(), 0);
    /// health.dropped(); // no sample
    /// assert_eq!(limiter.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn bypass(&self) -> AdaptivePermitRef<'_, L, C> {
        AdaptivePermitRef::bypass(self, self.bypass_start())
    }

    /// [`bypass`](Self::bypass) as an owned permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let health = limiter.bypass_owned();
    /// assert!(health.is_bypass());
    /// assert_eq!(health.inflight(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn bypass_owned(self: &Arc<Self>) -> AdaptivePermit<L, C> {
        AdaptivePermit::empty(Arc::clone(self))
    }

    fn bypass_start(&self) -> Nanos {
        if self.timed {
            self.request_time()
        } else {
            Nanos::ZERO
        }
    }

    /// Records a request measured elsewhere, for a service that times its own
    /// requests (Envoy's `recordLatencySample(send_time)`): it started at
    /// `sample.start` on this limiter's [`clock`](Self::clock) and took
    /// `sample.rtt`, with `sample.inflight` in flight (the limiter's
    /// [`inflight`](Self::inflight) at its start, if nothing better is known). The
    /// algorithm is fed it as if a permit had ended then, and the new limit
    /// applies at once; no permit is given back. Returns the limit enforced.
    ///
    /// An algorithm with epochs decides what to keep: [`EnvoyGradient`] discards a
    /// request that started before its current minRTT window opened, as Envoy
    /// does.
    ///
    /// [`EnvoyGradient`]: super::limit::EnvoyGradient
    ///
    /// # Errors
    ///
    /// [`SampleError::EndsInTheFuture`] when `start + rtt` is later than the
    /// clock reads now: the sample was timed on another clock, and would run the
    /// algorithm's timers ahead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, Sample, WhenLimited};
    /// use tollgate::time::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone())?;
    /// // A request the service timed itself: sent at 0, answered 30 ms later, dropped.
    /// let sent = clock.now();
    /// clock.advance(Duration::from_millis(30));
    /// let sample = Sample::new(sent, Duration::from_millis(30), 6, true);
    /// assert_eq!(limiter.record_sample(sample)?, 9); // 10 × 0.9
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_sample(&self, sample: Sample) -> Result<u64, SampleError> {
        let now = self.clock().now();
        let end = sample.end();
        if end > now {
            return Err(SampleError::EndsInTheFuture { end, now });
        }
        let changed = self.feedback.sample(sample, |limit| self.apply(limit));
        if let Some(events) = self.permits.events() {
            let outcome = if sample.dropped {
                Outcome::Dropped
            } else {
                Outcome::Success
            };
            self.report(events, changed, outcome, sample.rtt);
        }
        Ok(self.limit())
    }

    /// Reports to `events`: admissions, waits and rejections (as a [`Semaphore`]
    /// does), the requests in flight at each admission ([`EventKind::Started`]),
    /// the limit ([`EventKind::LimitChanged`]: at once, from 0, to the listeners
    /// subscribed by then, then every change) and every request that ends
    /// ([`EventKind::Finished`]). Subscribe a
    /// `MetricsRecorder` (feature `metrics`) for metrics.
    ///
    /// With events, every request is timed on the limiter's clock, for `Finished`'s
    /// `rtt`: exactly, even where [`new`](AdaptiveLimiter::new) had picked a coarse
    /// clock ([`Timing::Clock`]).
    ///
    /// Clones share the hub, and the first hub attached stays: where one is attached
    /// already (here or on a clone), this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::observe::{Event, EventKind, Events};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("backend");
    /// let _subscription = events.subscribe({
    ///     let seen = Arc::clone(&seen);
    ///     move |event: &Event<'_>| seen.lock().unwrap().push(event.kind)
    /// });
    /// let aimd = AimdLimit::builder().min_limit(1).build()?; // starts at 20
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?.with_events(events));
    /// limiter.try_acquire()?.dropped();
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen[0], EventKind::LimitChanged { previous: 0, limit: 20 });
    /// assert_eq!(seen[1], EventKind::Admitted);
    /// assert_eq!(seen[2], EventKind::Started { inflight: 1 });
    /// assert_eq!(seen[3], EventKind::LimitChanged { previous: 20, limit: 18 });
    /// assert!(matches!(seen[4], EventKind::Finished { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_events(self, events: Events) -> AdaptiveLimiter<L, C> {
        let limiter = AdaptiveLimiter {
            permits: self.permits.with_events(events),
            // `Finished` reports the time each request took, exactly.
            timed: true,
            coarse: None,
            ..self
        };
        if let Some(events) = limiter.permits.events() {
            let limit = limiter.limit();
            events.emit(0, EventKind::LimitChanged { previous: 0, limit });
        }
        limiter
    }

    /// The limit enforced now: the algorithm's, at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
    /// let limiter = AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?;
    /// assert_eq!(limiter.limit(), 10);
    /// limiter.try_acquire()?.dropped();
    /// assert_eq!(limiter.limit(), 9); // 10 × 0.9
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(&self) -> u64 {
        self.permits.max_permits()
    }

    /// Requests holding a permit now. Above [`limit`](AdaptiveLimiter::limit) after
    /// the limit was lowered, until enough have ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// let permit = limiter.try_acquire()?;
    /// assert_eq!(limiter.inflight(), 1);
    /// permit.success();
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inflight(&self) -> u64 {
        self.permits.in_use()
    }

    /// Permits free now: zero while more are held than a lowered limit allows.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?; // limit 20
    /// let _permit = limiter.try_acquire()?;
    /// assert_eq!(limiter.available_permits(), 19);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_permits(&self) -> u64 {
        self.permits.available_permits()
    }

    /// What a request does when every permit is held.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// assert_eq!(limiter.mode(), WhenLimited::FailFast);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn mode(&self) -> WhenLimited {
        self.mode
    }

    /// The clock requests and waits are timed on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::{Clock, ManualClock};
    ///
    /// let limiter = AdaptiveLimiter::with_clock(AimdLimit::new(), WhenLimited::FailFast, ManualClock::new())?;
    /// limiter.clock().advance(Duration::from_secs(1));
    /// assert_eq!(limiter.clock().now().as_u64(), 1_000_000_000);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.permits.clock()
    }

    /// How requests are timed: not at all, on the [`clock`](AdaptiveLimiter::clock),
    /// or on a coarse clock that [`new`](AdaptiveLimiter::new) picked for an
    /// algorithm that needs no finer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, GradientLimit};
    /// use tollgate::adaptive::{AdaptiveLimiter, Timing, WhenLimited};
    /// use tollgate::time::ManualClock;
    ///
    /// let mode = WhenLimited::FailFast;
    /// let aimd = AdaptiveLimiter::new(AimdLimit::new(), mode)?; // timeout: 5 s
    /// assert_eq!(aimd.timing(), Timing::Coarse(Duration::from_millis(1)));
    /// let gradient = AdaptiveLimiter::new(GradientLimit::new(), mode)?;
    /// assert_eq!(gradient.timing(), Timing::Clock);
    /// let manual = AdaptiveLimiter::with_clock(AimdLimit::new(), mode, ManualClock::new())?;
    /// assert_eq!(manual.timing(), Timing::Clock);
    /// let drops_only = AimdLimit::builder().timeout(Duration::MAX).build()?;
    /// assert_eq!(AdaptiveLimiter::new(drops_only, mode)?.timing(), Timing::Untimed);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn timing(&self) -> Timing {
        match (&self.coarse, self.timed) {
            (_, false) => Timing::Untimed,
            (Some(coarse), true) => Timing::Coarse(coarse.resolution()),
            (None, true) => Timing::Clock,
        }
    }

    /// The time a request starts or ends at, on the clock [`timing`](Self::timing)
    /// names.
    #[inline]
    pub(super) fn request_time(&self) -> Nanos {
        match &self.coarse {
            Some(coarse) => coarse.now(),
            None => self.clock().now(),
        }
    }

    /// Requests waiting for a permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// # futures::executor::block_on(async {
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::fifo(Duration::from_secs(1))?)?);
    /// let held = limiter.try_acquire()?;
    /// let mut waiting = Box::pin(limiter.acquire());
    /// assert!(futures::poll!(waiting.as_mut()).is_pending());
    /// assert_eq!(limiter.waiters(), 1);
    /// held.success();
    /// waiting.await?.success();
    /// assert_eq!(limiter.waiters(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn waiters(&self) -> usize {
        self.permits.waiters()
    }

    /// Closes the limiter: waiters and later acquires fail with
    /// [`AcquireError::Closed`]. Permits held stay valid and still record their
    /// outcomes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::Denied;
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// let held = limiter.try_acquire()?;
    /// limiter.close();
    /// assert!(limiter.is_closed());
    /// assert!(matches!(limiter.try_acquire(), Err(Denied::Closed)));
    /// held.success(); // still recorded
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(&self) {
        self.permits.close()
    }

    /// Whether [`close`](AdaptiveLimiter::close) was called.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// assert!(!limiter.is_closed());
    /// limiter.close();
    /// assert!(limiter.is_closed());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_closed(&self) -> bool {
        self.permits.is_closed()
    }

    /// Lets the algorithm see the time without a request ending (a window closes, a
    /// minimum latency is measured again: [`LimitAlgorithm::on_time`]) and applies
    /// its limit; returns the limit enforced. Call it from a timer when requests may
    /// stop ending for a while; ignored requests do it too.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let limiter = AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?;
    /// assert_eq!(limiter.tick(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn tick(&self) -> u64 {
        let now = self.clock().now();
        let changed = self.feedback.tick(now, |limit| self.apply(limit));
        self.report_change(changed);
        self.limit()
    }

    /// Takes a permit if one is free now, and never waits, whatever the mode. The
    /// permit borrows the limiter; [`try_acquire_owned`](Self::try_acquire_owned)
    /// gives one that can move into a task or another thread.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] when every permit is held or others are waiting (it
    /// waits for a release: no `retry_after`); [`Denied::Closed`] after
    /// [`close`](AdaptiveLimiter::close).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?;
    /// let permit = limiter.try_acquire()?;
    /// assert!(limiter.try_acquire().unwrap_err().is_limited());
    /// permit.success();
    /// assert!(limiter.try_acquire().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<AdaptivePermitRef<'_, L, C>, Denied> {
        let inflight = self.take()?;
        Ok(AdaptivePermitRef::new(
            self,
            self.started(inflight),
            inflight,
        ))
    }

    /// As [`try_acquire`](Self::try_acquire), with a permit that owns a reference to
    /// the limiter: `'static`, for a response future, a spawned task or another
    /// thread (the tower layers' permits).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
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
    /// std::thread::spawn(move || permit.success()).join().unwrap();
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<AdaptivePermit<L, C>, Denied> {
        let inflight = self.take()?;
        Ok(AdaptivePermit::new(
            Arc::clone(self),
            self.started(inflight),
            inflight,
        ))
    }

    /// Takes a permit, waiting as the [`WhenLimited`] says when none is free.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimedOut`] when the mode's timeout passes (at once in
    /// [`WhenLimited::FailFast`]); [`AcquireError::QueueFull`] at once when a LIFO
    /// backlog is full; [`AcquireError::Closed`] after
    /// [`close`](AdaptiveLimiter::close).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves the queue; a permit granted
    /// to it and not yet handed over is given back, and goes to the next waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::ManualClock;
    /// use tollgate::AcquireError;
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let mode = WhenLimited::lifo(10, Duration::from_secs(1))?;
    /// let limiter = Arc::new(AdaptiveLimiter::with_clock(aimd, mode, clock.clone())?);
    /// let held = limiter.acquire().await?;
    /// let mut waiting = Box::pin(limiter.acquire());
    /// assert!(futures::poll!(waiting.as_mut()).is_pending());
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(waiting.await.unwrap_err(), AcquireError::TimedOut);
    /// # drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire(self: &Arc<Self>) -> AdaptiveAcquire<L, C> {
        AdaptiveAcquire::new(Arc::clone(self), self.mode.timeout())
    }

    /// As [`acquire`](AdaptiveLimiter::acquire), waiting at most `timeout` or the
    /// mode's timeout, whichever is shorter (a request's own deadline, say). In
    /// [`WhenLimited::FailFast`] it never waits.
    ///
    /// # Errors
    ///
    /// As `acquire`.
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    /// use tollgate::time::ManualClock;
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let mode = WhenLimited::fifo(Duration::from_secs(10))?;
    /// let limiter = Arc::new(AdaptiveLimiter::with_clock(aimd, mode, clock.clone())?);
    /// let _held = limiter.try_acquire()?;
    /// let mut waiting = Box::pin(limiter.acquire_timeout(Duration::from_millis(100)));
    /// assert!(futures::poll!(waiting.as_mut()).is_pending());
    /// clock.advance(Duration::from_millis(100));
    /// assert!(waiting.await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_timeout(self: &Arc<Self>, timeout: Duration) -> AdaptiveAcquire<L, C> {
        let timeout = self.mode.timeout().map(|t| t.min(timeout));
        AdaptiveAcquire::new(Arc::clone(self), timeout)
    }

    /// Blocks the calling thread for a permit, waiting as the [`WhenLimited`] says.
    ///
    /// # Errors
    ///
    /// As [`acquire`](AdaptiveLimiter::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::AimdLimit;
    /// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    ///
    /// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
    /// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::fifo(Duration::from_secs(5))?)?);
    /// let held = limiter.acquire_blocking()?;
    /// let waiter = std::thread::spawn({
    ///     let limiter = Arc::clone(&limiter);
    ///     move || limiter.acquire_blocking().map(|permit| permit.success())
    /// });
    /// while limiter.waiters() == 0 {
    ///     std::thread::yield_now();
    /// }
    /// held.success(); // the waiter takes it
    /// waiter.join().unwrap()?;
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking(self: &Arc<Self>) -> Result<AdaptivePermit<L, C>, AcquireError> {
        match self.mode.timeout() {
            None => self.try_acquire_owned().map_err(super::acquire::refused),
            Some(timeout) => {
                WaitFor::new(Arc::clone(self.permits.waiting()), 1, Some(timeout)).block()?;
                Ok(self.admitted())
            }
        }
    }
}

/// # For the guards and futures of this module
impl<L: LimitAlgorithm, C: Clock> AdaptiveLimiter<L, C> {
    pub(super) fn permits(&self) -> &Semaphore<C> {
        &self.permits
    }

    /// The guard of a permit just granted to a waiter: started now, with the
    /// requests in flight now (itself included).
    pub(super) fn admitted(self: &Arc<Self>) -> AdaptivePermit<L, C> {
        let inflight = self.permits.in_use();
        AdaptivePermit::new(Arc::clone(self), self.started(inflight), inflight)
    }

    /// Takes a permit without waiting; answers the requests in flight with it,
    /// itself included.
    #[inline]
    fn take(&self) -> Result<u64, Denied> {
        if self.permits.events().is_none() {
            if let Some(inflight) = self.permits.take_one() {
                return Ok(inflight);
            }
        }
        self.take_reported()
    }

    /// [`take`](Self::take) with its decision: reported to the events, or why none
    /// was free.
    #[cold]
    fn take_reported(&self) -> Result<u64, Denied> {
        self.permits.take(1)?;
        Ok(self.permits.in_use())
    }

    /// When a request admitted with `inflight` in flight starts: now if requests are
    /// timed, [`Nanos::ZERO`] otherwise (see [`AdaptivePermit::start`]). Reports
    /// the in-flight count to the events, if any.
    #[inline]
    pub(super) fn started(&self, inflight: u64) -> Nanos {
        if let Some(events) = self.permits.events() {
            events.emit(1, EventKind::Started { inflight });
        }
        if self.timed {
            self.request_time()
        } else {
            Nanos::ZERO
        }
    }

    /// Whether requests are timed on the clock (see [`AdaptivePermit::start`]).
    pub(super) fn is_timed(&self) -> bool {
        self.timed
    }

    /// A request that started at `start`, with `inflight` in flight, ended as
    /// `outcome`: feeds the algorithm, applies its limit, then gives the permit back
    /// (so a lowered limit holds before a waiter takes the permit).
    ///
    /// Untimed, a success or a drop reads no clock (its sample's `start` and `rtt`
    /// are zero, and the algorithm does not read them). An ignored request reads it
    /// only for an algorithm with timers or for the events, and takes no lock
    /// without timers.
    #[inline]
    pub(super) fn finish(&self, outcome: Outcome, start: Nanos, inflight: u64) {
        let sample = matches!(outcome, Outcome::Success | Outcome::Dropped);
        let needs_time = if sample {
            self.timed
        } else {
            self.feedback.has_timers() || self.permits.events().is_some()
        };
        let now = if needs_time {
            self.request_time()
        } else {
            start
        };
        // The common case, kept small: nothing listens, and the limit stays.
        if self.permits.events().is_none()
            && self
                .feedback
                .leaves_unchanged(outcome, start, now, inflight)
        {
            self.release();
            return;
        }
        self.finish_recorded(outcome, start, now, inflight);
    }

    /// [`finish`](Self::finish) of a request the algorithm hears of, or events
    /// report.
    #[inline(never)]
    fn finish_recorded(&self, outcome: Outcome, start: Nanos, now: Nanos, inflight: u64) {
        // Given back even if the algorithm panics.
        let release = Release { limiter: self };
        let changed = self
            .feedback
            .record(outcome, start, now, inflight, |limit| self.apply(limit));
        drop(release);
        if let Some(events) = self.permits.events() {
            self.report(events, changed, outcome, now.saturating_since(start));
        }
    }

    /// Gives one permit back. In [`WhenLimited::FailFast`] no one ever queues (every
    /// acquire is a `try_acquire`), so the release skips the queue's check for
    /// waiters, and its fence.
    #[inline]
    fn release(&self) {
        if self.mode.timeout().is_some() {
            self.permits.release(1);
        } else {
            self.permits.release_unwaited(1);
        }
    }

    #[cold]
    #[inline(never)]
    fn report(
        &self,
        events: &Events,
        changed: Option<(u64, u64)>,
        outcome: Outcome,
        rtt: Duration,
    ) {
        self.report_change(changed);
        let inflight = self.permits.in_use();
        events.emit(
            1,
            EventKind::Finished {
                outcome,
                rtt,
                inflight,
            },
        );
    }

    /// Enforces `limit` (at least 1), under the algorithm's lock; returns the change.
    fn apply(&self, limit: u64) -> Option<(u64, u64)> {
        let previous = self.permits.max_permits();
        if limit == previous {
            return None;
        }
        self.permits.set_max_permits(limit).ok()?;
        Some((previous, limit))
    }

    fn report_change(&self, changed: Option<(u64, u64)>) {
        if let (Some((previous, limit)), Some(events)) = (changed, self.permits.events()) {
            events.emit(0, EventKind::LimitChanged { previous, limit });
        }
    }
}

/// Gives one permit back when dropped.
struct Release<'a, L: LimitAlgorithm, C: Clock> {
    limiter: &'a AdaptiveLimiter<L, C>,
}

impl<L: LimitAlgorithm, C: Clock> Drop for Release<'_, L, C> {
    #[inline]
    fn drop(&mut self) {
        self.limiter.release();
    }
}

impl<L: LimitAlgorithm, C: Clock> fmt::Debug for AdaptiveLimiter<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimiter")
            .field("limit", &self.limit())
            .field("inflight", &self.inflight())
            .field("mode", &self.mode)
            .field("bypass", &self.bypass.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adaptive::Sample;
    use crate::adaptive::limit::AimdLimit;
    use crate::sync::Mutex;
    use crate::time::ManualClock;

    /// A limit set from outside, as Netflix's `SettableLimit`: applied by the next
    /// sample or tick.
    struct Settable(Arc<crate::sync::AtomicU64>);

    impl LimitAlgorithm for Settable {
        fn limit(&self) -> u64 {
            self.0.load(crate::sync::Ordering::Relaxed)
        }
        fn on_sample(&mut self, _: Sample) -> u64 {
            self.limit()
        }
    }

    fn settable(
        start: u64,
        mode: WhenLimited,
    ) -> (
        Arc<AdaptiveLimiter<Settable, ManualClock>>,
        Arc<crate::sync::AtomicU64>,
    ) {
        let limit = Arc::new(crate::sync::AtomicU64::new(start));
        let limiter =
            AdaptiveLimiter::with_clock(Settable(Arc::clone(&limit)), mode, ManualClock::new());
        (Arc::new(limiter.unwrap()), limit)
    }

    #[test]
    fn a_zero_limit_is_held_at_one() {
        let (limiter, limit) = settable(0, WhenLimited::FailFast);
        assert_eq!(limiter.limit(), 1);
        limit.store(0, crate::sync::Ordering::Relaxed);
        limiter.try_acquire().unwrap().success();
        assert_eq!(limiter.limit(), 1);
        assert_eq!(limiter.available_permits(), 1);
    }

    #[test]
    fn the_sample_carries_start_rtt_and_inflight_at_start() {
        struct Record(Arc<Mutex<Vec<Sample>>>);
        impl LimitAlgorithm for Record {
            fn limit(&self) -> u64 {
                10
            }
            fn on_sample(&mut self, sample: Sample) -> u64 {
                self.0.lock().push(sample);
                10
            }
        }
        let samples = Arc::new(Mutex::new(Vec::new()));
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(5));
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(
                Record(Arc::clone(&samples)),
                WhenLimited::FailFast,
                clock.clone(),
            )
            .unwrap(),
        );
        let first = limiter.try_acquire().unwrap();
        clock.advance(Duration::from_millis(3));
        let second = limiter.try_acquire().unwrap();
        clock.advance(Duration::from_millis(7));
        second.dropped();
        first.success();
        limiter.try_acquire().unwrap().ignore();
        let five = Nanos::new(5_000_000_000);
        assert_eq!(
            *samples.lock(),
            [
                Sample::new(
                    five + Duration::from_millis(3),
                    Duration::from_millis(7),
                    2,
                    true
                ),
                Sample::new(five, Duration::from_millis(10), 1, false),
            ]
        );
    }

    #[test]
    fn an_unfinished_permit_counts_as_ignored() {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(4)
            .build()
            .unwrap();
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, ManualClock::new()).unwrap(),
        );
        let permits: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
        drop(permits);
        assert_eq!(limiter.limit(), 4);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), 4);
    }

    #[test]
    fn a_shrink_below_inflight_settles_on_the_new_limit() {
        let (limiter, limit) = settable(4, WhenLimited::FailFast);
        let mut held: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
        limit.store(2, crate::sync::Ordering::Relaxed);
        held.pop().unwrap().success();
        assert_eq!(limiter.limit(), 2);
        assert_eq!(limiter.inflight(), 3);
        assert!(limiter.try_acquire().is_err());
        held.pop().unwrap().success();
        assert!(
            limiter.try_acquire().is_err(),
            "2 still held under a limit of 2"
        );
        for permit in held {
            permit.success();
        }
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), 2);
    }

    #[test]
    fn extremes_do_not_panic() {
        let (limiter, limit) = settable(
            u64::MAX,
            WhenLimited::fifo(WhenLimited::MAX_TIMEOUT).unwrap(),
        );
        assert_eq!(limiter.limit(), u64::MAX);
        let permit = limiter.try_acquire().unwrap();
        limiter.clock().advance(Duration::MAX);
        limit.store(1, crate::sync::Ordering::Relaxed);
        permit.success();
        assert_eq!(limiter.limit(), 1);
        assert_eq!(limiter.tick(), 1);
        // At the clock's end a wait still ends: its deadline saturates.
        let _held = limiter.try_acquire().unwrap();
        let mut waiting = Box::pin(limiter.acquire_timeout(Duration::MAX));
        let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
        assert!(std::future::Future::poll(waiting.as_mut(), &mut cx).is_ready());
    }

    #[test]
    fn a_panicking_algorithm_still_gets_the_permit_back() {
        struct Panics;
        impl LimitAlgorithm for Panics {
            fn limit(&self) -> u64 {
                1
            }
            fn on_sample(&mut self, _: Sample) -> u64 {
                panic!("a broken algorithm")
            }
        }
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(Panics, WhenLimited::FailFast, ManualClock::new()).unwrap(),
        );
        let permit = limiter.try_acquire().unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.success()));
        assert!(unwound.is_err());
        assert_eq!(limiter.inflight(), 0);
        assert!(
            limiter.try_acquire().is_ok(),
            "the lock shrugs off the poison"
        );
    }

    /// A clock that counts its reads.
    #[derive(Clone, Debug, Default)]
    struct Counting(Arc<crate::sync::AtomicU64>);

    impl Counting {
        fn reads(&self) -> u64 {
            self.0.load(crate::sync::Ordering::Relaxed)
        }
    }

    impl Clock for Counting {
        fn now(&self) -> Nanos {
            self.0.fetch_add(1, crate::sync::Ordering::Relaxed);
            Nanos::ZERO
        }
        fn unix_origin(&self) -> Duration {
            Duration::ZERO
        }
    }

    fn counted(timeout: Duration) -> (AdaptiveLimiter<AimdLimit, Counting>, Counting) {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(4)
            .timeout(timeout)
            .build()
            .unwrap();
        let clock = Counting::default();
        let limiter =
            AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap();
        (limiter, clock)
    }

    #[test]
    fn an_algorithm_without_time_reads_no_clock() {
        let (limiter, clock) = counted(Duration::MAX);
        let before = clock.reads();
        limiter.try_acquire().unwrap().success();
        limiter.try_acquire().unwrap().ignore();
        drop(limiter.try_acquire().unwrap());
        let dropped = limiter.try_acquire().unwrap();
        assert_eq!(dropped.start(), None);
        assert_eq!(clock.reads(), before);
        // A change of the limit serves the queue, which reads the clock once.
        dropped.dropped();
        assert_eq!(clock.reads(), before + 1);
        assert_eq!(limiter.limit(), 3, "the drop still counts: 4 × 0.9");

        // With a timeout, each request reads the clock at both ends, except an
        // ignored one's end: AIMD has no timers.
        let (limiter, clock) = counted(Duration::from_secs(5));
        let before = clock.reads();
        limiter.try_acquire().unwrap().success();
        assert_eq!(clock.reads(), before + 2);
        limiter.try_acquire().unwrap().ignore();
        assert_eq!(clock.reads(), before + 3);
    }

    #[test]
    fn events_time_every_request() {
        let (limiter, clock) = counted(Duration::MAX);
        let limiter = limiter.with_events(crate::observe::Events::new("timed"));
        let before = clock.reads();
        let permit = limiter.try_acquire().unwrap();
        assert_eq!(permit.start(), Some(Nanos::ZERO));
        permit.success();
        assert_eq!(clock.reads(), before + 2);
    }

    /// An ignored request lets the algorithm's timers run only if it has any: one
    /// that says it has none is not called.
    #[test]
    fn ignored_requests_skip_an_algorithm_without_timers() {
        struct Timers(Arc<crate::sync::AtomicU64>, bool);
        impl LimitAlgorithm for Timers {
            fn limit(&self) -> u64 {
                5
            }
            fn on_sample(&mut self, _: Sample) -> u64 {
                5
            }
            fn on_time(&mut self, _: Nanos) -> u64 {
                self.0.fetch_add(1, crate::sync::Ordering::Relaxed);
                5
            }
            fn has_timers(&self) -> bool {
                self.1
            }
        }
        for timers in [false, true] {
            let calls = Arc::new(crate::sync::AtomicU64::new(0));
            let algorithm = Timers(Arc::clone(&calls), timers);
            let limiter =
                AdaptiveLimiter::with_clock(algorithm, WhenLimited::FailFast, ManualClock::new())
                    .unwrap();
            limiter.try_acquire().unwrap().ignore();
            let calls = calls.load(crate::sync::Ordering::Relaxed);
            assert_eq!(calls, u64::from(timers));
        }
    }

    #[test]
    fn borrowed_and_owned_permits_record_alike() {
        let aimd = || {
            AimdLimit::builder()
                .min_limit(1)
                .initial_limit(2)
                .build()
                .unwrap()
        };
        let borrowed =
            AdaptiveLimiter::with_clock(aimd(), WhenLimited::FailFast, ManualClock::new()).unwrap();
        let owned = Arc::new(
            AdaptiveLimiter::with_clock(aimd(), WhenLimited::FailFast, ManualClock::new()).unwrap(),
        );
        let a = borrowed.try_acquire().unwrap();
        let b = owned.try_acquire_owned().unwrap();
        assert_eq!((a.inflight(), b.inflight()), (1, 1));
        a.success();
        b.success();
        assert_eq!((borrowed.limit(), owned.limit()), (3, 3));
        borrowed.try_acquire().unwrap().dropped();
        owned.try_acquire_owned().unwrap().dropped();
        assert_eq!((borrowed.limit(), owned.limit()), (2, 2));
        drop(borrowed.try_acquire().unwrap());
        drop(owned.try_acquire_owned().unwrap());
        assert_eq!((borrowed.inflight(), owned.inflight()), (0, 0));
        let permit = format!("{:?}", borrowed.try_acquire().unwrap());
        assert!(permit.starts_with("AdaptivePermitRef"), "{permit}");
    }

    #[test]
    fn debug_shows_limit_inflight_and_mode() {
        let (limiter, _) = settable(3, WhenLimited::FailFast);
        let _permit = limiter.try_acquire().unwrap();
        assert_eq!(
            format!("{limiter:?}"),
            "AdaptiveLimiter { limit: 3, inflight: 1, mode: FailFast, bypass: false, .. }"
        );
    }
}
