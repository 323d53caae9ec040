//! [`Resilient`]: a store that answers even when the store behind it does not — within
//! a deadline, by a stated [`FailurePolicy`], behind a circuit breaker.
//!
//! - `breaker.rs`: the circuit breaker, a state machine over the clock;
//! - `policy.rs`: what the store answers without its inner store;
//! - `builder.rs`: the settings, checked;
//! - `stats.rs`: the counters.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;

use super::request::{Answers, Reply, Request};
use super::{Store, StoreError};
use crate::algorithm::Rule;
use crate::error::ConfigError;
use crate::time::{Clock, MonotonicClock, Sleep};

mod breaker;
mod builder;
mod policy;
mod stats;
#[cfg(test)]
mod tests;

pub use breaker::BreakerState;
use breaker::{Breaker, CallResult, Transition};
pub use builder::ResilientBuilder;
pub use policy::FailurePolicy;
use policy::Policy;
use stats::Counters;
pub use stats::ResilientStats;

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
/// timeouts, fallbacks, short circuits and openings of the breaker. The same outcomes are `tracing` events
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
/// assert!(limiter.check("user-42", 1).await?.is_ok());
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
        ResilientBuilder::new(inner, policy)
    }
}

impl<S, C: Clock> Resilient<S, C> {
    /// The inner store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The policy.
    pub fn policy(&self) -> FailurePolicy {
        self.policy.public()
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
        self.counters.read(self.breaker.state())
    }
}

impl<S: Store, C: Clock> Resilient<S, C> {
    /// The inner call, abandoned at the deadline.
    async fn call<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let mut call = std::pin::pin!(call);
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

    /// `call()`, `request` asked of the inner store, within the deadline and behind
    /// the breaker; or the policy's decision, as `answer` wraps it.
    async fn decide<T, F>(
        &self,
        request: &Request<'_>,
        call: impl FnOnce() -> F,
        answer: fn(Reply) -> T,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        let Some(attempt) = self.breaker.admit(&self.clock) else {
            Counters::count(&self.counters.short_circuited);
            tracing::debug!(
                target: "tollgate::store::resilient",
                policy = ?self.policy(),
                "breaker open: the policy decides without the store"
            );
            return self
                .decide_without_store(request, StoreError::CircuitOpen)
                .map(answer);
        };
        Counters::count(&self.counters.calls);
        match self.call(call()).await {
            Ok(outcome) => {
                self.note(attempt.finish(CallResult::Answered));
                Ok(outcome)
            }
            Err(error) if error.is_permanent() => {
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    %error,
                    "the store refused the request"
                );
                self.note(attempt.finish(CallResult::NoSign));
                Err(error)
            }
            Err(error) => {
                Counters::count(&self.counters.failures);
                if matches!(error, StoreError::Timeout(_)) {
                    Counters::count(&self.counters.timeouts);
                }
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    %error,
                    policy = ?self.policy(),
                    "the store failed: the policy decides"
                );
                self.note(attempt.finish(CallResult::Failed));
                self.decide_without_store(request, error).map(answer)
            }
        }
    }

    /// The policy's answer for `request`, which the store could not decide because
    /// of `error`.
    fn decide_without_store(
        &self,
        request: &Request<'_>,
        error: StoreError,
    ) -> Result<Reply, StoreError> {
        if !self.policy.decides(request.op) {
            return Err(error);
        }
        Counters::count(&self.counters.fallbacks);
        self.policy.decide(request, || {
            self.breaker.closed_in(self.clock.now(), self.deadline)
        })
    }

    /// Counts and logs what a call's end did to the breaker.
    fn note(&self, transition: Option<Transition>) {
        match transition {
            Some(Transition::Opened) => {
                Counters::count(&self.counters.opened);
                tracing::warn!(
                    target: "tollgate::store::resilient",
                    cool_down = ?self.breaker.cool_down(),
                    "breaker opened"
                );
            }
            Some(Transition::Closed) => tracing::info!(
                target: "tollgate::store::resilient",
                "breaker closed: the store answers again"
            ),
            None => {}
        }
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
    /// For [`Op::Refund`](super::Op::Refund) under [`FailurePolicy::Open`] or [`FailurePolicy::Closed`],
    /// the inner store's error, [`StoreError::Timeout`] or
    /// [`StoreError::CircuitOpen`]. Otherwise the policy decides.
    ///
    /// # Cancel safety
    ///
    /// Dropped while the inner store works, the decision is unknown, as for any
    /// store; the breaker is left as it was (a dropped probe lets the next request
    /// probe again).
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        self.decide(request, || self.inner.execute(request), |reply| reply)
            .await
    }

    /// As [`execute`](Store::execute), with each check's answer from the inner store.
    /// A decision of the [`FailurePolicy`] tells no check's answer. A request the
    /// precheck denies is asked of the inner store within the deadline only while
    /// the breaker is closed, for each check's answer; otherwise, or if that fails,
    /// its answer is the precheck's alone.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute).
    ///
    /// # Cancel safety
    ///
    /// As [`execute`](Store::execute).
    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        if let Some(known) = request.precheck()? {
            if self.breaker.state() == BreakerState::Closed {
                if let Ok(answers) = self.call(self.inner.execute_each(request)).await {
                    return Ok(answers);
                }
            }
            return Ok(Answers::new(known));
        }
        self.decide(request, || self.inner.execute_each(request), Answers::new)
            .await
    }

    /// Checks that the inner store can run `rule`, and under
    /// [`FailurePolicy::Fallback`] that each node's share of it is a rule
    /// ([`Rule::per_node`]).
    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        self.inner.check_rule(rule)?;
        self.policy.check_rule(rule)
    }
}
