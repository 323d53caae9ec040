//! [`Resilient`]: a store that answers even when the store behind it does not — within
//! a deadline, by a stated [`FailurePolicy`], behind a circuit breaker.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;

use super::request::{Check, Op, Outcome, Request};
use super::rule::Rule;
use super::{MemoryStore, Store, StoreError};
use crate::decision::{Admitted, Denied, Limited, Reservation};
use crate::error::ConfigError;
use crate::time::Sleep;
use crate::time::{Clock, MonotonicClock, Nanos};
use crate::KeyedConfig;

/// How long one call to the inner store may take by default.
const DEFAULT_DEADLINE: Duration = Duration::from_millis(5);
/// Consecutive failures that open the breaker by default.
const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// How long an open breaker stays open by default before it lets a probe through.
const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(1);
/// How many keys the local fallback holds by default.
const DEFAULT_FALLBACK_KEYS: usize = 100_000;
/// The prefix of the local fallback's keys; they never leave the process.
const FALLBACK_PREFIX: &str = "fallback";

/// What a [`Resilient`] store answers when its inner store cannot decide in time.
///
/// | op | `Open` | `Closed` | `Fallback` |
/// |---|---|---|---|
/// | [`Acquire`](Op::Acquire), [`Peek`](Op::Peek) | admitted | denied, [`Denied::Limited`] | the local share decides |
/// | [`Reserve`](Op::Reserve) | reserved, no wait | denied, [`Denied::Limited`] | the local share decides |
/// | [`Refund`](Op::Refund) | the error | the error | given back to the local share |
///
/// - An admission under `Open` carries `limit` = the smallest capacity among the
///   request's rules, `remaining` = 0 and `reset_after` = 0: nothing is known, so
///   nothing more is promised.
/// - A denial under `Closed` carries `retry_after` = the time until the breaker lets a
///   call through again (its remaining open time; zero while it is closed), `limit` =
///   the smallest capacity, `remaining` = 0 and `reset_after` = `retry_after`.
/// - Under `Fallback`, a request for more than a node's share (but not more than the
///   rule) is denied as [`Denied::Limited`], with `retry_after` the time until the
///   breaker lets a call through, not as [`Denied::Insufficient`]: the store may grant
///   it once it is back.
/// - A refund is not a decision a policy can make up: under `Open` and `Closed` the
///   caller gets the store's error (or [`StoreError::CircuitOpen`]) and the permits
///   stay taken in the store until they expire there.
///
/// Whatever the policy, a request for more than a rule can ever grant is denied as
/// [`Denied::Insufficient`], a request for zero permits is admitted, and permanent
/// errors ([`StoreError::is_permanent`]) are returned, never decided by the policy.
///
/// # Examples
///
/// ```
/// use tollgate::store::FailurePolicy;
///
/// // Four application servers: while Redis is down, each admits a quarter.
/// let policy = FailurePolicy::Fallback { nodes: 4 };
/// # let _ = policy;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Fail open: admit every request.
    Open,
    /// Fail closed: deny every request.
    Closed,
    /// Decide in this process's memory, each rule at its share for one of `nodes`
    /// nodes ([`Rule::per_node`]), so that the nodes together admit no more than
    /// the rule. The local state lives in this process only (each key forgotten once
    /// idle): it starts from nothing the store had counted, and is not carried to the
    /// store when it returns.
    Fallback {
        /// How many nodes share the limits.
        nodes: u32,
    },
}

/// The circuit breaker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go to the store.
    Closed,
    /// Recent calls failed: requests go straight to the policy until the cool-down
    /// has passed and a request comes to probe the store.
    Open,
    /// One probe is with the store; other requests go to the policy until it answers.
    HalfOpen,
}

/// What a [`Resilient`] store has done since it was built.
///
/// # Examples
///
/// ```
/// use tollgate::store::{BreakerState, FailurePolicy, MemoryStore, Resilient};
/// use tollgate::KeyedConfig;
///
/// let store = Resilient::new(MemoryStore::new(KeyedConfig::new(100), "api")?, FailurePolicy::Closed)?;
/// let stats = store.stats();
/// assert_eq!((stats.state, stats.calls), (BreakerState::Closed, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ResilientStats {
    /// The breaker's state now.
    pub state: BreakerState,
    /// Requests sent to the inner store.
    pub calls: u64,
    /// Calls that failed, timeouts included (permanent errors are not failures: the
    /// store is not at fault).
    pub failures: u64,
    /// Calls abandoned at the deadline.
    pub timeouts: u64,
    /// Requests the failure policy decided instead of the inner store.
    pub fallbacks: u64,
    /// Requests not sent because the breaker was open (or half open, with its probe
    /// out).
    pub short_circuited: u64,
}

/// A [`Store`] over another store (Redis, typically) that always answers within a
/// deadline: each call gets a deadline, after which the configured [`FailurePolicy`]
/// decides; a circuit breaker stops calling a store that keeps failing, so that while
/// Redis is down no request waits out the deadline; and the store is used again as
/// soon as it answers.
///
/// The breaker opens after `failure_threshold` consecutive failures (timeouts and
/// errors that are not [permanent](StoreError::is_permanent)) and stays open for the
/// cool-down. The first request after the cool-down probes the store (the breaker is
/// then half open: other requests go to the policy meantime); if the probe is
/// answered the breaker closes, otherwise it opens for another cool-down. Time is
/// read from the clock `C`: tests drive the deadline and the breaker with a
/// [`ManualClock`](crate::time::ManualClock).
///
/// [`stats`](Resilient::stats) tells the breaker's state and counts calls, failures,
/// timeouts, fallbacks and short circuits. The same outcomes are `tracing` events
/// (target `tollgate::store::resilient`): a failed or timed-out call and an opening
/// breaker at `WARN`, a closing breaker at `INFO`, a short-circuited request at
/// `DEBUG`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::Gcra;
/// use tollgate::store::{FailurePolicy, MemoryStore, Resilient, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// # futures::executor::block_on(async {
/// // In production the inner store is a `RedisStore`.
/// let inner = MemoryStore::new(KeyedConfig::new(10_000), "api")?;
/// let store = Resilient::builder(inner, FailurePolicy::Fallback { nodes: 4 })
///     .deadline(Duration::from_millis(10))
///     .failure_threshold(3)
///     .cool_down(Duration::from_millis(500))
///     .build()?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(100)?))?;
/// assert!(limiter.try_acquire("user-42", 1).await?.is_ok());
/// assert_eq!(limiter.store().stats().calls, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Resilient<S, C: Clock = MonotonicClock> {
    inner: S,
    clock: C,
    deadline: Duration,
    policy: Policy<C>,
    breaker: Breaker,
    counters: Counters,
}

impl<S, C: Clock> fmt::Debug for Resilient<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resilient")
            .field("deadline", &self.deadline)
            .field("policy", &self.policy())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The settings of a [`Resilient`] store; [`build`](ResilientBuilder::build) checks
/// them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::store::{FailurePolicy, MemoryStore, Resilient};
/// use tollgate::{ConfigError, KeyedConfig};
///
/// let inner = MemoryStore::new(KeyedConfig::new(100), "api")?;
/// let error = Resilient::builder(inner, FailurePolicy::Open)
///     .deadline(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert_eq!(error, ConfigError::Zero { parameter: "deadline" });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ResilientBuilder<S, C = MonotonicClock> {
    inner: S,
    policy: FailurePolicy,
    clock: C,
    deadline: Duration,
    failure_threshold: u32,
    cool_down: Duration,
    fallback_keys: KeyedConfig,
}

impl<S: Store> Resilient<S, MonotonicClock> {
    /// `inner` under `policy`, with the default settings: a deadline of 5 ms, the
    /// breaker opening after 5 consecutive failures for 1 s, a fallback of at most
    /// 100,000 keys, on the monotonic clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::{FailurePolicy, MemoryStore, Resilient};
    /// use tollgate::KeyedConfig;
    ///
    /// let inner = MemoryStore::new(KeyedConfig::new(100), "api")?;
    /// let store = Resilient::new(inner, FailurePolicy::Open)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for [`FailurePolicy::Fallback`] with zero nodes.
    pub fn new(inner: S, policy: FailurePolicy) -> Result<Self, ConfigError> {
        Resilient::builder(inner, policy).build()
    }

    /// Settings for `inner` under `policy`, starting from the defaults of
    /// [`new`](Resilient::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::store::{FailurePolicy, MemoryStore, Resilient};
    /// use tollgate::KeyedConfig;
    ///
    /// let inner = MemoryStore::new(KeyedConfig::new(100), "api")?;
    /// let store = Resilient::builder(inner, FailurePolicy::Closed)
    ///     .deadline(Duration::from_millis(20))
    ///     .build()?;
    /// assert_eq!(store.deadline(), Duration::from_millis(20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(inner: S, policy: FailurePolicy) -> ResilientBuilder<S, MonotonicClock> {
        ResilientBuilder {
            inner,
            policy,
            clock: MonotonicClock::new(),
            deadline: DEFAULT_DEADLINE,
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            cool_down: DEFAULT_COOL_DOWN,
            fallback_keys: KeyedConfig::new(DEFAULT_FALLBACK_KEYS),
        }
    }
}

impl<S, C> ResilientBuilder<S, C> {
    /// How long one call to the inner store may take (default 5 ms).
    pub fn deadline(self, deadline: Duration) -> Self {
        ResilientBuilder { deadline, ..self }
    }

    /// How many consecutive failures open the breaker (default 5).
    pub fn failure_threshold(self, failures: u32) -> Self {
        ResilientBuilder {
            failure_threshold: failures,
            ..self
        }
    }

    /// How long the breaker stays open before it lets a probe through (default 1 s).
    pub fn cool_down(self, cool_down: Duration) -> Self {
        ResilientBuilder { cool_down, ..self }
    }

    /// The memory bound of the local store of [`FailurePolicy::Fallback`] (default
    /// 100,000 keys).
    pub fn fallback_keys(self, config: KeyedConfig) -> Self {
        ResilientBuilder {
            fallback_keys: config,
            ..self
        }
    }

    /// The clock of the deadline, the breaker and the local fallback (a
    /// [`ManualClock`](crate::time::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> ResilientBuilder<S, C2> {
        ResilientBuilder {
            inner: self.inner,
            policy: self.policy,
            clock,
            deadline: self.deadline,
            failure_threshold: self.failure_threshold,
            cool_down: self.cool_down,
            fallback_keys: self.fallback_keys,
        }
    }
}

impl<S: Store, C: Clock> ResilientBuilder<S, C> {
    /// The store.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero deadline, failure threshold, cool-down, or
    /// number of fallback nodes; the errors of [`KeyedConfig::validate`] for the
    /// fallback's bound (checked only under [`FailurePolicy::Fallback`]).
    pub fn build(self) -> Result<Resilient<S, C>, ConfigError> {
        if self.deadline.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "deadline",
            });
        }
        if self.failure_threshold == 0 {
            return Err(ConfigError::Zero {
                parameter: "failure_threshold",
            });
        }
        if self.cool_down.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "cool_down",
            });
        }
        let policy = match self.policy {
            FailurePolicy::Fallback { nodes: 0 } => {
                return Err(ConfigError::Zero { parameter: "nodes" })
            }
            FailurePolicy::Fallback { nodes } => {
                self.fallback_keys.validate()?;
                let local = MemoryStore::with_clock(
                    self.fallback_keys,
                    FALLBACK_PREFIX,
                    self.clock.clone(),
                )
                .map_err(|e| match e {
                    StoreError::Config(e) => e,
                    _ => ConfigError::OutOfRange {
                        parameter: "fallback_keys",
                        expected: "a bound a memory store accepts",
                    },
                })?;
                Policy::Local { nodes, local }
            }
            FailurePolicy::Open => Policy::Open,
            FailurePolicy::Closed => Policy::Closed,
        };
        Ok(Resilient {
            inner: self.inner,
            clock: self.clock,
            deadline: self.deadline,
            policy,
            breaker: Breaker::new(self.failure_threshold, self.cool_down),
            counters: Counters::default(),
        })
    }
}

impl<S, C: Clock> Resilient<S, C> {
    /// The inner store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The policy.
    pub fn policy(&self) -> FailurePolicy {
        match self.policy {
            Policy::Open => FailurePolicy::Open,
            Policy::Closed => FailurePolicy::Closed,
            Policy::Local { nodes, .. } => FailurePolicy::Fallback { nodes },
        }
    }

    /// How long one call to the inner store may take.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The breaker's state and the counters.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::store::{FailurePolicy, MemoryStore, Resilient};
    /// # use tollgate::KeyedConfig;
    /// # let store = Resilient::new(MemoryStore::new(KeyedConfig::new(100), "api")?, FailurePolicy::Open)?;
    /// let stats = store.stats();
    /// println!("{:?}: {} of {} calls failed", stats.state, stats.failures, stats.calls);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> ResilientStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ResilientStats {
            state: self.breaker.state(),
            calls: read(&self.counters.calls),
            failures: read(&self.counters.failures),
            timeouts: read(&self.counters.timeouts),
            fallbacks: read(&self.counters.fallbacks),
            short_circuited: read(&self.counters.short_circuited),
        }
    }
}

impl<S: Store, C: Clock> Resilient<S, C> {
    /// The inner call, abandoned at the deadline.
    async fn call(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
        let mut call = self.inner.execute(request);
        let mut timer = Sleep::new(self.clock.clone(), self.deadline);
        poll_fn(|cx| {
            if let Poll::Ready(result) = call.as_mut().poll(cx) {
                return Poll::Ready(result);
            }
            match Pin::new(&mut timer).poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(StoreError::Timeout(self.deadline))),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// The policy's answer for `request`, which the store could not decide.
    fn decide_without_store(
        &self,
        request: &Request<'_>,
        error: StoreError,
    ) -> Result<Outcome, StoreError> {
        let n = request.op.permits();
        if let (Op::Refund(_), Policy::Open | Policy::Closed) = (request.op, &self.policy) {
            return Err(error);
        }
        self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        let limit = request
            .checks
            .iter()
            .map(|c| c.rule.capacity())
            .min()
            .unwrap_or(0);
        let admitted = || Ok(Admitted::new(limit, 0, Duration::ZERO));
        let denied = || {
            let retry_after = self.breaker.closed_in(self.clock.now(), self.deadline);
            Err(Denied::from(Limited::new(
                retry_after,
                limit,
                0,
                retry_after,
            )))
        };
        let decision = match &self.policy {
            Policy::Local { nodes, local } => return self.decide_locally(request, *nodes, local),
            Policy::Open => admitted(),
            Policy::Closed if n == 0 => admitted(),
            Policy::Closed => denied(),
        };
        Ok(match request.op {
            Op::Reserve { .. } => {
                Outcome::Reservation(decision.map(|_| Reservation::new(n, Duration::ZERO)))
            }
            _ => Outcome::Decision(decision),
        })
    }

    /// `request` on the local store, each rule at its share.
    fn decide_locally(
        &self,
        request: &Request<'_>,
        nodes: u32,
        local: &MemoryStore<C>,
    ) -> Result<Outcome, StoreError> {
        let shares = request
            .checks
            .iter()
            .map(|c| c.rule.per_node(nodes))
            .collect::<Result<Vec<Rule>, _>>()?;
        let checks: Vec<Check<'_>> = request
            .checks
            .iter()
            .zip(&shares)
            .map(|(c, share)| Check::new(c.key, share))
            .collect();
        let mut shared = Request::new(request.tag, &checks, request.op);
        shared.at = request.at;
        // More than a share, but not more than the rule: the store may grant it once
        // it is back, so "never" would be wrong.
        let for_now = |denied: Denied| match denied {
            Denied::Insufficient(i) => {
                let retry_after = self.breaker.closed_in(self.clock.now(), self.deadline);
                Denied::from(Limited::new(retry_after, i.capacity(), 0, retry_after))
            }
            other => other,
        };
        Ok(match local.execute_now(&shared)? {
            Outcome::Decision(d) => Outcome::Decision(d.map_err(for_now)),
            Outcome::Reservation(r) => Outcome::Reservation(r.map_err(for_now)),
            other => other,
        })
    }
}

#[async_trait]
impl<S: Store, C: Clock> Store for Resilient<S, C> {
    /// Decides `request` in the inner store within the deadline, or by the policy.
    ///
    /// # Errors
    ///
    /// Permanent errors ([`StoreError::is_permanent`]) of the inner store, and of the
    /// local fallback, such as [`StoreError::Config`] for a rule whose share for one
    /// node would be zero (which [`check_rule`](Store::check_rule) tells at once).
    /// For [`Op::Refund`] under [`FailurePolicy::Open`] or [`FailurePolicy::Closed`],
    /// the inner store's error, [`StoreError::Timeout`] or
    /// [`StoreError::CircuitOpen`]. Otherwise the policy decides.
    ///
    /// # Cancel safety
    ///
    /// Dropped while the inner store works, the decision is unknown, as for any
    /// store; the breaker is left as it was (a dropped probe lets the next request
    /// probe again).
    async fn execute(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        let Some(attempt) = self.breaker.admit(&self.clock) else {
            self.counters
                .short_circuited
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                target: "tollgate::store::resilient",
                policy = ?self.policy(),
                "breaker open: the policy decides without the store"
            );
            return self.decide_without_store(request, StoreError::CircuitOpen);
        };
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        match self.call(request).await {
            Ok(outcome) => {
                attempt.finish(Verdict::Answered);
                Ok(outcome)
            }
            Err(error) if error.is_permanent() => {
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    %error,
                    "the store refused the request"
                );
                attempt.finish(Verdict::NoSign);
                Err(error)
            }
            Err(error) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                if matches!(error, StoreError::Timeout(_)) {
                    self.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                }
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    %error,
                    policy = ?self.policy(),
                    "the store failed: the policy decides"
                );
                attempt.finish(Verdict::Failed);
                self.decide_without_store(request, error)
            }
        }
    }

    /// Checks that the inner store can run `rule`, and under
    /// [`FailurePolicy::Fallback`] that each node's share of it is a rule
    /// ([`Rule::per_node`]).
    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        self.inner.check_rule(rule)?;
        if let Policy::Local { nodes, .. } = self.policy {
            rule.per_node(nodes)?;
        }
        Ok(())
    }
}

/// A [`FailurePolicy`], with the local store of a fallback.
enum Policy<C> {
    Open,
    Closed,
    Local { nodes: u32, local: MemoryStore<C> },
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    failures: AtomicU64,
    timeouts: AtomicU64,
    fallbacks: AtomicU64,
    short_circuited: AtomicU64,
}

/// What a call told about the store's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// The store answered.
    Answered,
    /// A timeout or an error that may pass.
    Failed,
    /// Nothing: the call was dropped, or failed for a reason of its own.
    NoSign,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed { failures: u32 },
    Open { until: Nanos },
    HalfOpen,
}

#[derive(Debug)]
struct Breaker {
    phase: Mutex<Phase>,
    threshold: u32,
    cool_down: Duration,
}

impl Breaker {
    fn new(threshold: u32, cool_down: Duration) -> Breaker {
        Breaker {
            phase: Mutex::new(Phase::Closed { failures: 0 }),
            threshold,
            cool_down,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn state(&self) -> BreakerState {
        match *self.lock() {
            Phase::Closed { .. } => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen => BreakerState::HalfOpen,
        }
    }

    /// A call to make, or `None` to go straight to the policy.
    fn admit<'a, C: Clock>(&'a self, clock: &'a C) -> Option<Attempt<'a, C>> {
        let mut phase = self.lock();
        let probe = match *phase {
            Phase::Closed { .. } => false,
            Phase::Open { until } if clock.now() >= until => {
                *phase = Phase::HalfOpen;
                true
            }
            Phase::Open { .. } | Phase::HalfOpen => return None,
        };
        Some(Attempt {
            breaker: self,
            clock,
            probe,
            finished: false,
        })
    }

    /// How long until a call may go to the store: the rest of the cool-down while
    /// open, a probe's deadline while half open.
    fn closed_in(&self, now: Nanos, deadline: Duration) -> Duration {
        match *self.lock() {
            Phase::Closed { .. } => Duration::ZERO,
            Phase::Open { until } => until.saturating_since(now),
            Phase::HalfOpen => deadline,
        }
    }

    fn record(&self, probe: bool, verdict: Verdict, now: Nanos) {
        let mut phase = self.lock();
        let before = *phase;
        let reopen = Phase::Open {
            until: now + self.cool_down,
        };
        *phase = match (*phase, probe, verdict) {
            // Only the probe decides a half-open breaker; answers to calls sent
            // before the breaker opened change nothing once it is open.
            (Phase::HalfOpen, true, Verdict::Answered) => Phase::Closed { failures: 0 },
            (Phase::HalfOpen, true, Verdict::Failed) => reopen,
            (Phase::HalfOpen, true, Verdict::NoSign) => Phase::Open { until: now },
            (Phase::Closed { .. }, _, Verdict::Answered) => Phase::Closed { failures: 0 },
            (Phase::Closed { failures }, _, Verdict::Failed) => {
                let failures = failures.saturating_add(1);
                if failures >= self.threshold {
                    reopen
                } else {
                    Phase::Closed { failures }
                }
            }
            (unchanged, _, _) => unchanged,
        };
        let next = *phase;
        drop(phase);
        match (before, next) {
            // A dropped probe also goes back to open, with no cool-down, so that the
            // next call probes: the store did not fail, so nothing opened.
            (Phase::Closed { .. } | Phase::HalfOpen, Phase::Open { .. })
                if verdict == Verdict::Failed =>
            {
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    cool_down = ?self.cool_down,
                    "breaker opened"
                )
            }
            (Phase::Open { .. } | Phase::HalfOpen, Phase::Closed { .. }) => tracing::info!(
                target: "tollgate::store::resilient",
                "breaker closed: the store answers again"
            ),
            _ => {}
        }
    }
}

/// A call let through by the breaker; dropped unfinished, it tells nothing.
struct Attempt<'a, C: Clock> {
    breaker: &'a Breaker,
    clock: &'a C,
    probe: bool,
    finished: bool,
}

impl<C: Clock> Attempt<'_, C> {
    fn finish(mut self, verdict: Verdict) {
        self.finished = true;
        self.breaker.record(self.probe, verdict, self.clock.now());
    }
}

impl<C: Clock> Drop for Attempt<'_, C> {
    fn drop(&mut self) {
        if !self.finished {
            self.breaker
                .record(self.probe, Verdict::NoSign, self.clock.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{FixedWindow, Gcra};
    use crate::time::ManualClock;
    use crate::Quota;
    use std::sync::Arc;
    use std::task::Context;

    /// What the fake store does with the next calls.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Mode {
        /// Decide in memory.
        Answer,
        /// Fail with a connection error at once.
        Fail,
        /// Never answer.
        Hang,
        /// Answer after this long on the clock.
        Slow(Duration),
        /// Fail with a permanent error.
        TooLong,
    }

    struct Fake {
        memory: MemoryStore<ManualClock>,
        clock: ManualClock,
        mode: Mutex<Mode>,
        calls: AtomicU64,
    }

    impl Fake {
        fn new(clock: &ManualClock) -> Arc<Fake> {
            Arc::new(Fake {
                memory: MemoryStore::with_clock(KeyedConfig::new(100), "fake", clock.clone())
                    .unwrap(),
                clock: clock.clone(),
                mode: Mutex::new(Mode::Answer),
                calls: AtomicU64::new(0),
            })
        }

        fn set(&self, mode: Mode) {
            *self.mode.lock().unwrap() = mode;
        }

        fn calls(&self) -> u64 {
            self.calls.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl Store for Fake {
        async fn execute(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mode = *self.mode.lock().unwrap();
            match mode {
                Mode::Answer => self.memory.execute_now(request),
                Mode::Fail => Err(StoreError::Connection("refused".into())),
                Mode::Hang => std::future::pending().await,
                Mode::Slow(d) => {
                    Sleep::new(self.clock.clone(), d).await;
                    self.memory.execute_now(request)
                }
                Mode::TooLong => Err(StoreError::KeyTooLong {
                    len: 2000,
                    max: 1024,
                }),
            }
        }
    }

    const DEADLINE: Duration = Duration::from_millis(5);
    const COOL_DOWN: Duration = Duration::from_secs(1);

    fn resilient(
        policy: FailurePolicy,
    ) -> (Resilient<Arc<Fake>, ManualClock>, Arc<Fake>, ManualClock) {
        let clock = ManualClock::starting_at(Nanos::new(1_700_000_000_000_000_000));
        let fake = Fake::new(&clock);
        let store = Resilient::builder(fake.clone(), policy)
            .deadline(DEADLINE)
            .failure_threshold(3)
            .cool_down(COOL_DOWN)
            .clock(clock.clone())
            .build()
            .unwrap();
        (store, fake, clock)
    }

    fn gcra(burst: u64) -> Rule {
        Gcra::new(Quota::per_hour(burst).unwrap()).into()
    }

    /// Polls once: every fake answer that does not wait is ready at the first poll.
    fn poll<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
        let waker = futures::task::noop_waker();
        future.poll(&mut Context::from_waker(&waker))
    }

    fn now<S: Store>(store: &S, rule: &Rule, op: Op) -> Result<Outcome, StoreError> {
        let checks = [Check::new("k", rule)];
        let request = Request::new("user", &checks, op);
        let mut future = store.execute(&request);
        match poll(future.as_mut()) {
            Poll::Ready(result) => result,
            Poll::Pending => panic!("{op:?} did not answer at once"),
        }
    }

    fn acquire<S: Store>(store: &S, rule: &Rule, n: u64) -> Outcome {
        now(store, rule, Op::Acquire(n)).unwrap()
    }

    /// Fails `k` calls, opening the breaker of threshold `k`.
    fn trip(store: &Resilient<Arc<Fake>, ManualClock>, fake: &Fake, k: u64) {
        fake.set(Mode::Fail);
        let rule = gcra(10);
        let checks = [Check::new("trip", &rule)];
        let request = Request::new("trip", &checks, Op::Acquire(1));
        for _ in 0..k {
            let mut future = store.execute(&request);
            assert!(poll(future.as_mut()).is_ready());
        }
        assert_eq!(store.stats().state, BreakerState::Open);
    }

    #[test]
    fn answers_pass_through_and_are_counted() {
        let (store, fake, _) = resilient(FailurePolicy::Closed);
        let rule = gcra(2);
        assert!(acquire(&store, &rule, 2).is_admitted());
        assert!(!acquire(&store, &rule, 1).is_admitted());
        assert_eq!(fake.calls(), 2);
        let stats = store.stats();
        assert_eq!((stats.calls, stats.failures, stats.fallbacks), (2, 0, 0));
        assert_eq!(stats.state, BreakerState::Closed);
    }

    #[test]
    fn the_deadline_fires_on_a_hanging_store() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        fake.set(Mode::Hang);
        let rule = gcra(10);
        let checks = [Check::new("k", &rule)];
        let request = Request::new("user", &checks, Op::Acquire(1));
        let mut future = store.execute(&request);
        assert!(poll(future.as_mut()).is_pending());
        clock.advance(DEADLINE - Duration::from_nanos(1));
        assert!(poll(future.as_mut()).is_pending());
        clock.advance(Duration::from_nanos(1));
        let Poll::Ready(Ok(Outcome::Decision(Err(Denied::Limited(_))))) = poll(future.as_mut())
        else {
            panic!("no denial at the deadline")
        };
        let stats = store.stats();
        assert_eq!((stats.calls, stats.failures, stats.timeouts), (1, 1, 1));
        assert_eq!(stats.state, BreakerState::Closed, "one failure of three");
    }

    #[test]
    fn a_slow_answer_within_the_deadline_counts() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        fake.set(Mode::Slow(DEADLINE / 2));
        let rule = gcra(10);
        let checks = [Check::new("k", &rule)];
        let request = Request::new("user", &checks, Op::Acquire(1));
        let mut future = store.execute(&request);
        assert!(poll(future.as_mut()).is_pending());
        clock.advance(DEADLINE / 2);
        let Poll::Ready(Ok(outcome)) = poll(future.as_mut()) else {
            panic!("no answer")
        };
        assert!(outcome.is_admitted());
        assert_eq!(store.stats().timeouts, 0);
    }

    #[test]
    fn the_breaker_opens_after_k_failures_and_short_circuits() {
        let (store, fake, _) = resilient(FailurePolicy::Closed);
        fake.set(Mode::Fail);
        let rule = gcra(10);
        for i in 0..3 {
            assert_eq!(store.stats().state, BreakerState::Closed, "after {i}");
            assert!(!acquire(&store, &rule, 1).is_admitted());
        }
        assert_eq!(store.stats().state, BreakerState::Open);
        for _ in 0..100 {
            assert!(!acquire(&store, &rule, 1).is_admitted());
        }
        assert_eq!(fake.calls(), 3, "an open breaker calls nothing");
        let stats = store.stats();
        assert_eq!(
            (
                stats.calls,
                stats.failures,
                stats.short_circuited,
                stats.fallbacks
            ),
            (3, 3, 100, 103)
        );
    }

    #[test]
    fn an_answer_resets_the_count_of_failures() {
        let (store, fake, _) = resilient(FailurePolicy::Closed);
        let rule = gcra(100);
        for _ in 0..5 {
            fake.set(Mode::Fail);
            acquire(&store, &rule, 1);
            acquire(&store, &rule, 1);
            fake.set(Mode::Answer);
            assert!(acquire(&store, &rule, 1).is_admitted());
        }
        assert_eq!(store.stats().state, BreakerState::Closed);
    }

    #[test]
    fn one_probe_after_the_cool_down_and_recovery() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        trip(&store, &fake, 3);
        clock.advance(COOL_DOWN - Duration::from_nanos(1));
        let rule = gcra(10);
        assert!(!acquire(&store, &rule, 1).is_admitted());
        assert_eq!(fake.calls(), 3);

        // The probe hangs: meanwhile the others are short-circuited.
        clock.advance(Duration::from_nanos(1));
        fake.set(Mode::Hang);
        let checks = [Check::new("k", &rule)];
        let request = Request::new("user", &checks, Op::Acquire(1));
        let mut probe = store.execute(&request);
        assert!(poll(probe.as_mut()).is_pending());
        assert_eq!(store.stats().state, BreakerState::HalfOpen);
        let Outcome::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
            panic!("admitted while half open")
        };
        assert_eq!(denied.retry_after(), Some(DEADLINE), "the probe's deadline");
        assert_eq!(fake.calls(), 4, "one probe");

        // It times out: open again, for a whole cool-down.
        clock.advance(DEADLINE);
        assert!(poll(probe.as_mut()).is_ready());
        drop(probe);
        assert_eq!(store.stats().state, BreakerState::Open);
        let Outcome::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
            panic!("admitted while open")
        };
        assert_eq!(denied.retry_after(), Some(COOL_DOWN));

        // The store is back: the next probe closes the breaker.
        fake.set(Mode::Answer);
        clock.advance(COOL_DOWN);
        assert!(acquire(&store, &rule, 1).is_admitted());
        assert_eq!(store.stats().state, BreakerState::Closed);
        assert!(acquire(&store, &rule, 1).is_admitted());
        assert_eq!(fake.calls(), 6, "calls go to the store again");
    }

    #[test]
    fn a_dropped_probe_lets_the_next_request_probe() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        trip(&store, &fake, 3);
        clock.advance(COOL_DOWN);
        fake.set(Mode::Hang);
        let rule = gcra(10);
        let checks = [Check::new("k", &rule)];
        let request = Request::new("user", &checks, Op::Acquire(1));
        let mut probe = store.execute(&request);
        assert!(poll(probe.as_mut()).is_pending());
        drop(probe);
        assert_eq!(store.stats().state, BreakerState::Open);
        fake.set(Mode::Answer);
        assert!(acquire(&store, &rule, 1).is_admitted(), "probed again");
        assert_eq!(store.stats().state, BreakerState::Closed);
    }

    #[test]
    fn failures_of_calls_sent_before_the_breaker_opened_do_not_extend_it() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        fake.set(Mode::Hang);
        let rule = gcra(10);
        let checks = [Check::new("k", &rule)];
        let request = Request::new("user", &checks, Op::Acquire(1));
        let mut late = store.execute(&request);
        assert!(poll(late.as_mut()).is_pending());
        trip(&store, &fake, 3);
        clock.advance(DEADLINE);
        assert!(poll(late.as_mut()).is_ready());
        let Outcome::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
            panic!("admitted while open")
        };
        assert_eq!(denied.retry_after(), Some(COOL_DOWN - DEADLINE));
    }

    #[test]
    fn open_admits_and_reserves_but_refunds_fail() {
        let (store, fake, _) = resilient(FailurePolicy::Open);
        trip(&store, &fake, 3);
        let rule = gcra(10);
        let Outcome::Decision(Ok(admitted)) = acquire(&store, &rule, 4) else {
            panic!("denied while open")
        };
        assert_eq!(
            (
                admitted.limit(),
                admitted.remaining(),
                admitted.reset_after()
            ),
            (10, 0, Duration::ZERO)
        );
        assert!(now(&store, &rule, Op::Peek(10)).unwrap().is_admitted());
        let reserve = Op::Reserve {
            n: 3,
            max_wait: Duration::ZERO,
        };
        assert_eq!(
            now(&store, &rule, reserve).unwrap(),
            Outcome::Reservation(Ok(Reservation::new(3, Duration::ZERO)))
        );
        assert!(matches!(
            now(&store, &rule, Op::Refund(1)),
            Err(StoreError::CircuitOpen)
        ));
        let Outcome::Decision(Err(Denied::Insufficient(_))) = acquire(&store, &rule, 11) else {
            panic!("more than the capacity was admitted")
        };
        assert_eq!(
            store.stats().fallbacks,
            3 + 3,
            "the failed calls and three short circuits"
        );
    }

    #[test]
    fn closed_denies_with_the_breakers_time_and_refunds_fail() {
        let (store, fake, clock) = resilient(FailurePolicy::Closed);
        let rule = gcra(10);
        fake.set(Mode::Fail);
        // Before the breaker opens, retry at once.
        let Outcome::Decision(Err(denied)) = acquire(&store, &rule, 1) else {
            panic!("admitted")
        };
        assert_eq!(denied.retry_after(), Some(Duration::ZERO));
        assert!(matches!(
            now(&store, &rule, Op::Refund(1)),
            Err(StoreError::Connection(_))
        ));
        trip(&store, &fake, 1);
        clock.advance(Duration::from_millis(400));
        let Outcome::Decision(Err(Denied::Limited(limited))) = acquire(&store, &rule, 2) else {
            panic!("admitted")
        };
        assert_eq!(limited.retry_after(), Some(Duration::from_millis(600)));
        assert_eq!((limited.limit(), limited.remaining()), (10, 0));
        let reserve = Op::Reserve {
            n: 1,
            max_wait: Duration::from_secs(10),
        };
        assert!(matches!(
            now(&store, &rule, reserve).unwrap(),
            Outcome::Reservation(Err(Denied::Limited(_)))
        ));
        assert!(acquire(&store, &rule, 0).is_admitted(), "zero permits");
        assert!(matches!(
            now(&store, &rule, Op::Refund(1)),
            Err(StoreError::CircuitOpen)
        ));
    }

    #[test]
    fn fallback_admits_the_local_share() {
        let (store, fake, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
        trip(&store, &fake, 3);
        let rule = Rule::from(FixedWindow::new(10, Duration::from_secs(3600)).unwrap());
        let admitted = (0..10)
            .filter(|_| acquire(&store, &rule, 1).is_admitted())
            .count();
        assert_eq!(admitted, 2, "10 over 4 nodes");
        let Outcome::Decision(Err(Denied::Limited(limited))) = acquire(&store, &rule, 1) else {
            panic!("admitted past the share")
        };
        assert_eq!(limited.limit(), 2);
        assert_eq!(
            now(&store, &rule, Op::Refund(1)).unwrap(),
            Outcome::Refunded
        );
        assert!(now(&store, &rule, Op::Peek(1)).unwrap().is_admitted());
        let reserve = Op::Reserve {
            n: 1,
            max_wait: Duration::ZERO,
        };
        assert!(now(&store, &rule, reserve).unwrap().is_admitted());
        assert!(!acquire(&store, &rule, 1).is_admitted());
        // More than the share but within the rule: denied for now, not for ever.
        let Outcome::Decision(Err(denied)) = acquire(&store, &rule, 10) else {
            panic!("admitted")
        };
        assert_eq!(denied.retry_after(), Some(COOL_DOWN), "{denied:?}");
    }

    #[test]
    fn permanent_errors_pass_through_under_every_policy() {
        for policy in [
            FailurePolicy::Open,
            FailurePolicy::Closed,
            FailurePolicy::Fallback { nodes: 2 },
        ] {
            let (store, fake, _) = resilient(policy);
            fake.set(Mode::TooLong);
            for _ in 0..10 {
                assert!(matches!(
                    now(&store, &gcra(10), Op::Acquire(1)),
                    Err(StoreError::KeyTooLong { .. })
                ));
            }
            let stats = store.stats();
            assert_eq!(stats.state, BreakerState::Closed, "{policy:?}");
            assert_eq!((stats.calls, stats.failures, stats.fallbacks), (10, 0, 0));
            let no_rules = Request::new("user", &[], Op::Acquire(1));
            let mut future = store.execute(&no_rules);
            assert!(matches!(
                poll(future.as_mut()),
                Poll::Ready(Err(StoreError::Config(_)))
            ));
        }
    }

    #[test]
    fn a_rule_without_a_share_is_refused_up_front() {
        let (store, _, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
        assert!(matches!(
            store.check_rule(&gcra(3)),
            Err(StoreError::Config(ConfigError::OutOfRange {
                parameter: "nodes",
                ..
            }))
        ));
        assert!(store.check_rule(&gcra(4)).is_ok());
        let (open, _, _) = resilient(FailurePolicy::Open);
        assert!(open.check_rule(&gcra(3)).is_ok());
    }

    #[test]
    fn a_share_of_nothing_is_an_error_when_it_is_needed() {
        let (store, fake, _) = resilient(FailurePolicy::Fallback { nodes: 4 });
        trip(&store, &fake, 3);
        assert!(matches!(
            now(&store, &gcra(3), Op::Acquire(1)),
            Err(StoreError::Config(_))
        ));
    }

    #[test]
    fn settings_are_checked() {
        let clock = ManualClock::new();
        let build = |b: ResilientBuilder<Arc<Fake>>| b.build().map(|_| ()).unwrap_err();
        let fake = Fake::new(&clock);
        let builder = || Resilient::builder(fake.clone(), FailurePolicy::Open);
        assert_eq!(
            build(builder().deadline(Duration::ZERO)),
            ConfigError::Zero {
                parameter: "deadline"
            }
        );
        assert_eq!(
            build(builder().failure_threshold(0)),
            ConfigError::Zero {
                parameter: "failure_threshold"
            }
        );
        assert_eq!(
            build(builder().cool_down(Duration::ZERO)),
            ConfigError::Zero {
                parameter: "cool_down"
            }
        );
        assert_eq!(
            build(Resilient::builder(
                fake.clone(),
                FailurePolicy::Fallback { nodes: 0 }
            )),
            ConfigError::Zero { parameter: "nodes" }
        );
        assert_eq!(
            build(
                Resilient::builder(fake.clone(), FailurePolicy::Fallback { nodes: 2 })
                    .fallback_keys(KeyedConfig::new(0))
            ),
            ConfigError::Zero {
                parameter: "max_keys"
            }
        );
        let store = Resilient::new(fake, FailurePolicy::Closed).unwrap();
        assert_eq!(store.deadline(), DEFAULT_DEADLINE);
        assert_eq!(store.policy(), FailurePolicy::Closed);
    }
}
