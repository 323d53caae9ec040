//! [`SharedLimiter`]: the limiter API over a [`Store`], keyed by nature.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use super::request::{Check, Op, Outcome, Request};
use super::rule::Rule;
use super::{Store, StoreError};
use crate::decision::{Decision, Denied, InsufficientCapacity, Reservation};
use crate::error::ConfigError;
use crate::observe::{EventKind, Events};
use crate::time::Sleep;
use crate::time::{Clock, MonotonicClock};
use tracing::Instrument;

/// How long a waiter on a rule that cannot book ahead sleeps when the store gives no
/// better hint (a concurrency limit frees permits when holders release them).
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The longest wait a waiter without a timeout books: about 142 years, the most a
/// Redis script counts exactly.
const MAX_WAIT: Duration = Duration::from_micros(1 << 52);

/// One or more rules over a [`Store`], per key: the [`Limiter`](crate::Limiter) API
/// for limits shared through a store.
///
/// Each call is one request to the store (one round trip to Redis) deciding every rule
/// together, all-or-nothing, under the hash tag of the key, so that in Redis Cluster
/// the key's rules share a slot. Cloning is cheap and shares the store.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{FixedWindow, Gcra};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(10_000), "api")?;
/// let limiter = SharedLimiter::all_of(store, [
///     ("second", Gcra::new(Quota::per_second(5)?).into()),
///     ("day", FixedWindow::new(1_000, Duration::from_secs(86_400))?.into()),
/// ])?;
/// assert!(limiter.try_acquire("user-42", 5).await?.is_ok());
/// assert!(limiter.try_acquire("user-42", 1).await?.is_err());
/// assert!(limiter.try_acquire("user-7", 1).await?.is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct SharedLimiter<S, C = MonotonicClock> {
    store: Arc<S>,
    rules: Arc<[(String, Rule)]>,
    clock: C,
    events: Option<Events>,
}

impl<S, C: Clone> Clone for SharedLimiter<S, C> {
    fn clone(&self) -> Self {
        SharedLimiter {
            store: self.store.clone(),
            rules: self.rules.clone(),
            clock: self.clock.clone(),
            events: self.events.clone(),
        }
    }
}

impl<S, C> fmt::Debug for SharedLimiter<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLimiter")
            .field("rules", &self.rules)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

/// Why a wait over a store ended without permits.
#[derive(Debug)]
#[non_exhaustive]
pub enum SharedAcquireError {
    /// More than some rule can ever grant at once.
    Insufficient(InsufficientCapacity),
    /// The permits could not be had within the timeout; known at once when the wait
    /// was already known to be longer.
    TimedOut,
    /// The store could not decide.
    Store(StoreError),
}

impl fmt::Display for SharedAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SharedAcquireError::Insufficient(i) => i.fmt(f),
            SharedAcquireError::TimedOut => f.write_str("timed out waiting for permits"),
            SharedAcquireError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SharedAcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SharedAcquireError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for SharedAcquireError {
    fn from(e: StoreError) -> Self {
        SharedAcquireError::Store(e)
    }
}

impl<S: Store> SharedLimiter<S, MonotonicClock> {
    /// `rule` over `store`, each key holding its state under its own name.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] if the store cannot run the rule (see
    /// [`Store::check_rule`]).
    pub fn new(store: S, rule: impl Into<Rule>) -> Result<Self, StoreError> {
        SharedLimiter::all_of(store, [("", rule.into())])
    }

    /// Several named `rules` over `store`, all of which must admit. A key's state under
    /// rule `name` is stored as `{prefix}:{key}:{name}`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] with [`ConfigError::Zero`] for no rule,
    /// [`ConfigError::OutOfRange`] for two rules of one name, or the store's reason
    /// for a rule it cannot run (see [`Store::check_rule`]).
    pub fn all_of<N: Into<String>>(
        store: S,
        rules: impl IntoIterator<Item = (N, Rule)>,
    ) -> Result<Self, StoreError> {
        let rules: Vec<(String, Rule)> = rules.into_iter().map(|(n, r)| (n.into(), r)).collect();
        if rules.is_empty() {
            return Err(ConfigError::Zero { parameter: "rules" }.into());
        }
        for (i, (name, rule)) in rules.iter().enumerate() {
            if rules[..i].iter().any(|(other, _)| other == name) {
                return Err(ConfigError::OutOfRange {
                    parameter: "rules",
                    expected: "distinct rule names",
                }
                .into());
            }
            store.check_rule(rule)?;
        }
        Ok(SharedLimiter {
            store: Arc::new(store),
            rules: Arc::from(rules),
            clock: MonotonicClock::new(),
            events: None,
        })
    }
}

impl<S: Store, C: Clock> SharedLimiter<S, C> {
    /// The same limiter, sleeping on `clock` while it waits (a
    /// [`ManualClock`](crate::time::ManualClock) in tests). The store keeps its own
    /// time.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> SharedLimiter<S, C2> {
        SharedLimiter {
            store: self.store,
            rules: self.rules,
            clock,
            events: self.events,
        }
    }

    /// Reports this limiter's decisions to `events`, each with its key:
    /// `try_acquire` and `reserve` decisions (a reservation booked ahead as `Waited`
    /// with its wait), and the end of every `acquire` (`Admitted` at once, `Waited`
    /// with the time slept on this limiter's clock, or `Denied`). A store error is
    /// not a decision and is not reported (the `tollgate.store` span records it).
    /// Replaces the hub attached before, if any; clones made before keep theirs.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// # futures::executor::block_on(async {
    /// let events = Events::new("api");
    /// events.subscribe(|event: &Event<'_>| assert_eq!(event.key, Some("user-42"))).detach();
    /// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?.with_events(events);
    /// limiter.try_acquire("user-42", 1).await?.unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn with_events(self, events: Events) -> Self {
        SharedLimiter {
            events: Some(events),
            ..self
        }
    }

    /// The hub this limiter reports to, if any.
    pub fn events(&self) -> Option<&Events> {
        self.events.as_ref()
    }

    fn report(&self, key: &str, n: u64, kind: impl FnOnce() -> EventKind) {
        if let Some(events) = &self.events {
            if events.is_observed() {
                events.emit_keyed(key, n, kind());
            }
        }
    }

    /// The clock it sleeps on while it waits.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The rules and their names.
    pub fn rules(&self) -> impl ExactSizeIterator<Item = (&str, &Rule)> {
        self.rules.iter().map(|(n, r)| (n.as_str(), r))
    }

    /// The most permits one request can be granted.
    pub fn capacity(&self) -> u64 {
        self.rules
            .iter()
            .map(|(_, r)| r.capacity())
            .min()
            .unwrap_or(0)
    }

    /// One call to the store, in a `tollgate.store` span.
    async fn run(&self, key: &str, op: Op, at: Option<Duration>) -> Result<Outcome, StoreError> {
        let checks = checks(&self.rules);
        let mut request = Request::new(key, &checks, op);
        request.at = at;
        let span = tracing::debug_span!(
            "tollgate.store",
            op = op_name(&op),
            rules = checks.len(),
            permits = op.permits(),
            key,
            outcome = tracing::field::Empty,
        );
        let outcome = self.store.execute(&request).instrument(span.clone()).await;
        if !span.is_disabled() {
            span.record("outcome", outcome_name(&outcome));
        }
        outcome
    }

    /// Takes `n` permits for `key` if every rule admits them now. `n == 0` peeks.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::{algorithm::Gcra, store::{MemoryStore, SharedLimiter}, KeyedConfig, Quota};
    /// # futures::executor::block_on(async {
    /// # let limiter = SharedLimiter::new(MemoryStore::new(KeyedConfig::new(10), "x")?, Gcra::new(Quota::per_second(1)?))?;
    /// match limiter.try_acquire("user-42", 1).await? {
    ///     Ok(admitted) => println!("{} left", admitted.remaining()),
    ///     Err(denied) => println!("retry after {:?}", denied.retry_after()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// A [`StoreError`] if the store could not decide. A request for more than a rule
    /// can ever grant is `Ok(Err(Denied::Insufficient))`, decided without the store.
    pub async fn try_acquire(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        let decision = self.decide(key, n).await?;
        self.report(key, n, || EventKind::of_decision(&decision));
        Ok(decision)
    }

    /// [`try_acquire`](Self::try_acquire) without a future, when the store decides
    /// without waiting ([`Store::try_execute_now`]: the memory store does); `None`
    /// when it cannot, having done nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::{algorithm::Gcra, store::{MemoryStore, SharedLimiter}, KeyedConfig, Quota};
    /// let limiter = SharedLimiter::new(
    ///     MemoryStore::new(KeyedConfig::new(10), "x")?,
    ///     Gcra::new(Quota::per_second(1)?),
    /// )?;
    /// let decision = limiter.try_acquire_now("user-42", 1).expect("an in-process store")?;
    /// assert!(decision.is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), inside the `Some`.
    pub fn try_acquire_now(&self, key: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        let checks = checks(&self.rules);
        let request = Request::new(key, &checks, Op::Acquire(n));
        let span = tracing::debug_span!(
            "tollgate.store",
            op = "acquire",
            rules = checks.len(),
            permits = n,
            key,
            outcome = tracing::field::Empty,
        );
        let outcome = span.in_scope(|| self.store.try_execute_now(&request))?;
        if !span.is_disabled() {
            span.record("outcome", outcome_name(&outcome));
        }
        let decision = outcome.and_then(Outcome::into_decision);
        if let Ok(decision) = &decision {
            self.report(key, n, || EventKind::of_decision(decision));
        }
        Some(decision)
    }

    async fn decide(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        self.run(key, Op::Acquire(n), None).await?.into_decision()
    }

    /// [`try_acquire`](Self::try_acquire) at an explicit time since the Unix epoch
    /// instead of the store's clock: for tests under virtual time.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn try_acquire_at(
        &self,
        key: &str,
        n: u64,
        since_epoch: Duration,
    ) -> Result<Decision, StoreError> {
        let decision = self
            .run(key, Op::Acquire(n), Some(since_epoch))
            .await?
            .into_decision()?;
        self.report(key, n, || EventKind::of_decision(&decision));
        Ok(decision)
    }

    /// Decides as [`try_acquire`](Self::try_acquire) would, taking nothing.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn peek(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        self.run(key, Op::Peek(n), None).await?.into_decision()
    }

    /// Takes `n` permits for `key` to be used after the returned wait, if that wait is
    /// at most `max_wait`. With one rule that books ahead (GCRA, fixed window, sliding
    /// log, Resilience4j), waits are granted; otherwise only immediate reservations.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn reserve(
        &self,
        key: &str,
        n: u64,
        max_wait: Duration,
    ) -> Result<Result<Reservation, Denied>, StoreError> {
        let reservation = self.book(key, n, max_wait).await?;
        self.report(key, n, || match &reservation {
            Ok(r) if r.is_immediate() => EventKind::Admitted,
            Ok(r) => EventKind::Waited { wait: r.wait() },
            Err(denied) => EventKind::of_denied(denied),
        });
        Ok(reservation)
    }

    async fn book(
        &self,
        key: &str,
        n: u64,
        max_wait: Duration,
    ) -> Result<Result<Reservation, Denied>, StoreError> {
        self.run(key, Op::Reserve { n, max_wait }, None)
            .await?
            .into_reservation()
    }

    /// Gives back `n` permits for `key` taken and not used.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn refund(&self, key: &str, n: u64) -> Result<(), StoreError> {
        self.run(key, Op::Refund(n), None).await.map(|_| ())
    }

    /// Waits until `n` permits for `key` are taken.
    ///
    /// With one rule that books ahead, the wait is booked in the store at once (one
    /// round trip), so waiters are served in the order they reached the store, across
    /// processes. Otherwise the waiter retries after each denial's `retry_after`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::{algorithm::Gcra, store::{MemoryStore, SharedLimiter}, KeyedConfig, Quota};
    /// # futures::executor::block_on(async {
    /// # let limiter = SharedLimiter::new(MemoryStore::new(KeyedConfig::new(10), "x")?, Gcra::new(Quota::per_second(1)?))?;
    /// limiter.acquire("user-42", 1).await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`SharedAcquireError::Insufficient`] for more than a rule can ever grant, and
    /// [`SharedAcquireError::Store`] if the store fails.
    ///
    /// # Cancel safety
    ///
    /// Dropped while it sleeps on a booked wait, it gives the permits back: at once
    /// on a store that answers without waiting (the memory store), and otherwise as a
    /// task on the current tokio runtime (the Redis store's).
    pub async fn acquire(&self, key: &str, n: u64) -> Result<(), SharedAcquireError>
    where
        S: 'static,
    {
        self.wait(key, n, None).await
    }

    /// [`acquire`](Self::acquire), giving up after `timeout`. When the wait is known
    /// at once to be longer, it fails at once.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`SharedAcquireError::TimedOut`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_timeout(
        &self,
        key: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<(), SharedAcquireError>
    where
        S: 'static,
    {
        self.wait(key, n, Some(timeout)).await
    }

    async fn wait(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<(), SharedAcquireError>
    where
        S: 'static,
    {
        let start = self.clock.now();
        let outcome = self.wait_inner(key, n, timeout).await;
        if let Some(events) = &self.events {
            if events.is_observed() {
                let kind = match &outcome {
                    Ok(false) => EventKind::Admitted,
                    Ok(true) => EventKind::Waited {
                        wait: self.clock.now().saturating_since(start),
                    },
                    Err(SharedAcquireError::Insufficient(_)) => EventKind::Denied {
                        reason: crate::observe::DenyReason::Insufficient,
                        retry_after: None,
                    },
                    Err(SharedAcquireError::TimedOut) => EventKind::Denied {
                        reason: crate::observe::DenyReason::TimedOut,
                        retry_after: None,
                    },
                    // The store failed: no decision to report.
                    Err(SharedAcquireError::Store(_)) => return outcome.map(|_| ()),
                };
                events.emit_keyed(key, n, kind);
            }
        }
        outcome.map(|_| ())
    }

    /// Waits for the permits; `Ok(true)` if that took sleeping.
    async fn wait_inner(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<bool, SharedAcquireError>
    where
        S: 'static,
    {
        let start = self.clock.now();
        let deadline = timeout.map(|t| start + t);
        let books_ahead = self.rules.len() == 1 && self.rules[0].1.books_ahead();
        let mut slept = false;
        loop {
            let now = self.clock.now();
            let left = deadline.map(|d| d.saturating_since(now));
            if books_ahead {
                let max_wait = left.unwrap_or(MAX_WAIT).min(MAX_WAIT);
                return match self.book(key, n, max_wait).await? {
                    Ok(reservation) if reservation.is_immediate() => Ok(slept),
                    Ok(reservation) => {
                        let guard = RefundOnDrop {
                            limiter: self,
                            key,
                            n,
                        };
                        Sleep::new(self.clock.clone(), reservation.wait())
                            .instrument(wait_span(key, n, reservation.wait()))
                            .await;
                        std::mem::forget(guard);
                        Ok(true)
                    }
                    Err(Denied::Insufficient(i)) => Err(SharedAcquireError::Insufficient(i)),
                    Err(_) => Err(SharedAcquireError::TimedOut),
                };
            }
            let retry = match self.decide(key, n).await? {
                Ok(_) => return Ok(slept),
                Err(Denied::Insufficient(i)) => return Err(SharedAcquireError::Insufficient(i)),
                Err(denied) => denied
                    .retry_after()
                    .filter(|r| !r.is_zero())
                    .unwrap_or(POLL_INTERVAL),
            };
            if left.is_some_and(|left| retry > left) {
                return Err(SharedAcquireError::TimedOut);
            }
            Sleep::new(self.clock.clone(), retry)
                .instrument(wait_span(key, n, retry))
                .await;
            slept = true;
        }
    }
}

/// The span of one sleep of a waiter over a store.
fn wait_span(key: &str, n: u64, sleep: Duration) -> tracing::Span {
    tracing::debug_span!("tollgate.wait", permits = n, key, sleep = ?sleep)
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Acquire(_) => "acquire",
        Op::Peek(_) => "peek",
        Op::Reserve { .. } => "reserve",
        Op::Refund(_) => "refund",
    }
}

fn outcome_name(outcome: &Result<Outcome, StoreError>) -> &'static str {
    match outcome {
        Ok(Outcome::Refunded) => "refunded",
        Ok(outcome) if outcome.is_admitted() => "admitted",
        Ok(_) => "denied",
        Err(_) => "error",
    }
}

/// Each named rule on its key under the request's tag; one rule (the usual case)
/// without allocating.
fn checks(rules: &[(String, Rule)]) -> Checks<'_> {
    match rules {
        [(name, rule)] => Checks::One([Check::new(name, rule)]),
        _ => Checks::Many(
            rules
                .iter()
                .map(|(name, rule)| Check::new(name, rule))
                .collect(),
        ),
    }
}

enum Checks<'a> {
    One([Check<'a>; 1]),
    Many(Vec<Check<'a>>),
}

impl<'a> std::ops::Deref for Checks<'a> {
    type Target = [Check<'a>];

    fn deref(&self) -> &[Check<'a>] {
        match self {
            Checks::One(one) => one,
            Checks::Many(many) => many,
        }
    }
}

/// Gives back a booked wait whose waiter was dropped.
struct RefundOnDrop<'a, S: Store + 'static, C> {
    limiter: &'a SharedLimiter<S, C>,
    key: &'a str,
    n: u64,
}

impl<S: Store + 'static, C> Drop for RefundOnDrop<'_, S, C> {
    fn drop(&mut self) {
        let store = self.limiter.store.clone();
        let rules = self.limiter.rules.clone();
        let key = self.key.to_owned();
        let n = self.n;
        let mut refund: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            let checks = checks(&rules);
            // Best effort: a failed refund only leaves the booked permits unused.
            let _ = store
                .execute(&Request::new(&key, &checks, Op::Refund(n)))
                .await;
        });
        let waker = noop_waker();
        if refund
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
        {
            finish_detached(refund);
        }
    }
}

/// Runs the rest of a refund as a task on the current tokio runtime (the Redis store's).
#[cfg(feature = "redis")]
fn finish_detached(refund: Pin<Box<dyn Future<Output = ()> + Send>>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(refund);
    }
}

/// Without a runtime to finish it, a refund that cannot complete at once is dropped:
/// the booked permits then stay unused until their time passes.
#[cfg(not(feature = "redis"))]
fn finish_detached(refund: Pin<Box<dyn Future<Output = ()> + Send>>) {
    drop(refund);
}

fn noop_waker() -> Waker {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}
