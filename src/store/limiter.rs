//! [`SharedLimiter`]: the limiter API over a [`Store`], keyed by nature, waiting
//! through the crate's one FIFO queue.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::detached::run_detached;
use super::request::{Check, Op, Reply, Request};
use super::{Store, StoreError};
use crate::algorithm::Rule;
use crate::decision::{Decision, Denied, Limited, Reservation};
use crate::error::{AcquireError, ConfigError};
use crate::observe::{EventKind, Events};
use crate::permits::{Decided, GiveBack, Grant, PermitFuture, PermitSource, Release};
use crate::sync::Arc;
use crate::sync::unmodeled::OnceLock;
use crate::time::{Alarm, Clock, MonotonicClock, Nanos};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::per_key::{Joined, Queues};
use crate::wait::round_trip::RemoteBooking;
use tracing::Instrument;

/// How long the first waiter on a rule that frees permits by release (a concurrency
/// limit) waits before asking the store again: another process's release is not
/// seen here.
const RELEASE_POLL: Duration = Duration::from_millis(10);

/// The longest wait a waiter without a timeout books: about 142 years, the most a
/// Redis script counts exactly.
const MAX_WAIT: Duration = Duration::from_micros(1 << 52);

/// One or more rules over a [`Store`], per key: the [`Limiter`](crate::Limiter) API
/// for limits shared through a store.
///
/// Each decision is one request to the store (one round trip to Redis) deciding every
/// rule together, all-or-nothing, under the hash tag of the key, so that in Redis
/// Cluster the key's rules share a slot. Waiting goes through the same FIFO queue as
/// an in-process [`Limiter`](crate::Limiter), one queue per key with waiters: the
/// first waiter books by a round trip (in one, for a rule that books ahead) and the
/// others queue behind it, with the same timeouts, cancellation and `close`.
///
/// Cloning is cheap and shares the store and the queues.
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
/// assert!(limiter.check("user-42", 5).await?.is_ok());
/// assert!(limiter.check("user-42", 1).await?.is_err());
/// assert!(limiter.check("user-7", 1).await?.is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct SharedLimiter<S, C = MonotonicClock> {
    core: Arc<Core<S, C>>,
    queues: Arc<Queues<String, SharedGate<S, C>>>,
}

/// What every key's queue shares: the store, the rules, the clock and the events.
struct Core<S, C> {
    store: S,
    rules: Box<[(String, Rule)]>,
    clock: C,
    events: OnceLock<Events>,
}

impl<S, C> Clone for SharedLimiter<S, C> {
    fn clone(&self) -> Self {
        SharedLimiter {
            core: Arc::clone(&self.core),
            queues: Arc::clone(&self.queues),
        }
    }
}

impl<S, C> fmt::Debug for SharedLimiter<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLimiter")
            .field("rules", &self.core.rules)
            .field("events", &self.core.events.get())
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl<S: Store + 'static> SharedLimiter<S, MonotonicClock> {
    /// `rule` over `store`, each key holding its state under its own name, waiting on
    /// the default monotonic clock.
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
        SharedLimiter::with_clock(store, rule, MonotonicClock::new())
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
        SharedLimiter::all_of_with_clock(store, rules, MonotonicClock::new())
    }
}

impl<S: Store + 'static, C: Clock> SharedLimiter<S, C> {
    /// As [`new`](SharedLimiter::new), waiting on `clock` (a
    /// [`ManualClock`](crate::time::ManualClock) in tests). The store keeps its own
    /// time.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::time::ManualClock;
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let store = MemoryStore::with_clock(KeyedConfig::new(1_000), "api", clock.clone())?;
    /// let limiter = SharedLimiter::with_clock(store, Gcra::new(Quota::per_second(10)?), clock)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new`](SharedLimiter::new).
    pub fn with_clock(store: S, rule: impl Into<Rule>, clock: C) -> Result<Self, StoreError> {
        SharedLimiter::all_of_with_clock(store, [("", rule.into())], clock)
    }

    /// As [`all_of`](SharedLimiter::all_of), waiting on `clock`.
    ///
    /// # Errors
    ///
    /// As [`all_of`](SharedLimiter::all_of).
    pub fn all_of_with_clock<N: Into<String>>(
        store: S,
        rules: impl IntoIterator<Item = (N, Rule)>,
        clock: C,
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
            core: Arc::new(Core {
                store,
                rules: rules.into_boxed_slice(),
                clock,
                events: OnceLock::new(),
            }),
            queues: Arc::default(),
        })
    }

    /// Reports this limiter's decisions to `events`, each with its key: `check` and
    /// `reserve` decisions (a reservation booked ahead as `Waited` with its wait), and
    /// the end of every wait (`Admitted` at once, `Waited` with the time waited on
    /// this limiter's clock, or `Denied`). A store error is not a decision and is not
    /// reported (the `tollgate.store` span records it).
    ///
    /// As on every limiter, the hub is attached to this limiter and all its clones,
    /// and the first one attached stays: a later call changes nothing.
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
    /// limiter.check("user-42", 1).await?.unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn with_events(self, events: Events) -> Self {
        let _ = self.core.events.set(events);
        self
    }

    /// The hub this limiter reports to, if any.
    pub fn events(&self) -> Option<&Events> {
        self.core.events.get()
    }

    fn report(&self, key: &str, n: u64, kind: impl FnOnce() -> EventKind) {
        if let Some(events) = self.core.events.get() {
            if events.is_observed() {
                events.emit_keyed(key, n, kind());
            }
        }
    }

    /// The clock it waits on.
    pub fn clock(&self) -> &C {
        &self.core.clock
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.core.store
    }

    /// The rules and their names.
    pub fn rules(&self) -> impl ExactSizeIterator<Item = (&str, &Rule)> {
        self.core.rules.iter().map(|(n, r)| (n.as_str(), r))
    }

    /// The most permits one request can be granted.
    pub fn capacity(&self) -> u64 {
        self.core.capacity()
    }
}

/// # Deciding at once
impl<S: Store + 'static, C: Clock> SharedLimiter<S, C> {
    /// Takes `n` permits for `key` if every rule admits them now, with one round trip
    /// to the store; never waits for permits. `n == 0` peeks.
    ///
    /// While callers wait on `key` in this process, it is denied without asking the
    /// store (they were first), with a `retry_after` of when the first of them is due
    /// as far as known.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::{algorithm::Gcra, store::{MemoryStore, SharedLimiter}, KeyedConfig, Quota};
    /// # futures::executor::block_on(async {
    /// # let limiter = SharedLimiter::new(MemoryStore::new(KeyedConfig::new(10), "x")?, Gcra::new(Quota::per_second(1)?))?;
    /// match limiter.check("user-42", 1).await? {
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
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the decision to the store, as any dropped store
    /// call does: the permits may have been taken.
    pub async fn check(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        let decision = match self.queued_denial(key, n) {
            Some(denied) => Err(denied),
            None => self
                .core
                .run(key, Op::Acquire(n), None)
                .await?
                .into_decision()?,
        };
        self.report(key, n, || EventKind::of_decision(&decision));
        Ok(decision)
    }

    /// [`check`](Self::check) without a future, when the store decides without a
    /// round trip ([`Store::try_execute_now`]: the memory store does). `None` when it
    /// cannot, having done nothing: call `check`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::{algorithm::Gcra, store::{MemoryStore, SharedLimiter}, KeyedConfig, Quota};
    /// let limiter = SharedLimiter::new(
    ///     MemoryStore::new(KeyedConfig::new(10), "x")?,
    ///     Gcra::new(Quota::per_second(1)?),
    /// )?;
    /// let decision = limiter.try_acquire("user-42", 1).expect("an in-process store")?;
    /// assert!(decision.is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), inside the `Some`.
    pub fn try_acquire(&self, key: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        if let Some(denied) = self.queued_denial(key, n) {
            let decision = Err(denied);
            self.report(key, n, || EventKind::of_decision(&decision));
            return Some(Ok(decision));
        }
        let decision = self
            .core
            .run_now(key, Op::Acquire(n))?
            .and_then(Reply::into_decision);
        if let Ok(decision) = &decision {
            self.report(key, n, || EventKind::of_decision(decision));
        }
        Some(decision)
    }

    /// A denial for callers who would overtake this process's waiters on `key`, or
    /// of a closed limiter.
    #[inline]
    fn queued_denial(&self, key: &str, n: u64) -> Option<Denied> {
        if self.queues.is_closed() {
            return Some(Denied::Closed);
        }
        // `n == 0` takes nothing, so it overtakes no one.
        let queue = self.queues.get(key).filter(|_| n > 0)?;
        if queue.waiters() == 0 {
            return None;
        }
        let now = self.core.clock.now();
        let retry = match queue.queued().1 {
            Some(first) => first.saturating_since(now),
            None => RELEASE_POLL,
        };
        Some(Limited::new(retry, self.capacity(), 0, retry).into())
    }

    /// [`check`](Self::check) at an explicit time since the Unix epoch instead of the
    /// store's clock: for tests under virtual time.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check).
    pub async fn check_at(
        &self,
        key: &str,
        n: u64,
        since_epoch: Duration,
    ) -> Result<Decision, StoreError> {
        let decision = self
            .core
            .run(key, Op::Acquire(n), Some(since_epoch))
            .await?
            .into_decision()?;
        self.report(key, n, || EventKind::of_decision(&decision));
        Ok(decision)
    }

    /// Decides as [`check`](Self::check) would, taking nothing.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// Nothing is taken, so nothing is lost.
    pub async fn peek(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        self.core.run(key, Op::Peek(n), None).await?.into_decision()
    }

    /// Takes `n` permits for `key` to be used after the returned wait, if that wait is
    /// at most `max_wait`. With one rule that books ahead (GCRA, fixed window, sliding
    /// log, Resilience4j), waits are granted; otherwise only immediate reservations.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check).
    pub async fn reserve(
        &self,
        key: &str,
        n: u64,
        max_wait: Duration,
    ) -> Result<Result<Reservation, Denied>, StoreError> {
        let reservation = self
            .core
            .run(key, Op::Reserve { n, max_wait }, None)
            .await?
            .into_reservation()?;
        self.report(key, n, || match &reservation {
            Ok(r) if r.is_immediate() => EventKind::Admitted,
            Ok(r) => EventKind::Waited { wait: r.wait() },
            Err(denied) => EventKind::of_denied(denied),
        });
        Ok(reservation)
    }

    /// Gives back `n` permits for `key` taken and not used; this process's waiters on
    /// `key` then try again at once.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// Dropped before it completes, the permits may stay taken until their time
    /// passes; nothing else is lost.
    pub async fn refund(&self, key: &str, n: u64) -> Result<(), StoreError> {
        self.core.run(key, Op::Refund(n), None).await?;
        if let Some(queue) = self.queues.get(key) {
            queue.serve();
        }
        Ok(())
    }
}

/// # Waiting
impl<S: Store + 'static, C: Clock> SharedLimiter<S, C> {
    /// Waits until `n` permits for `key` are taken; resolves to the time waited on
    /// this limiter's clock.
    ///
    /// Waiters on one key are served in arrival order. The first books by a round trip
    /// (one, with a rule that books ahead: waiters are then also served in the order
    /// they reached the store, across processes), and sleeps until its permits are
    /// due; a denial without a booking makes it ask again after the denial's
    /// `retry_after`, or after 10 ms for permits that come back by release.
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
    /// [`AcquireError::Insufficient`] for more than a rule can ever grant,
    /// [`AcquireError::Closed`] after [`close`](Self::close), and
    /// [`AcquireError::Source`] if the store fails (the next waiter then tries).
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits on a booking, it gives the permits back: at once on a
    /// store that answers without waiting (the memory store), and otherwise as a task
    /// on the current tokio runtime (the Redis store's). Dropped during its booking's
    /// round trip, it leaves that call to finish on the same runtime, and what the
    /// store booked is given back; without a runtime the call is dropped, and what
    /// the store booked stays taken until its time passes.
    pub fn acquire(&self, key: &str, n: u64) -> SharedAcquire<S, C> {
        SharedAcquire {
            wait: WaitFor::new(self.join(key), n, None),
        }
    }

    /// [`acquire`](Self::acquire), giving up after `timeout`. When the wait is known
    /// at once to be longer (the first waiter is booked for later, or the store's
    /// booking would be), it fails at once.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`AcquireError::TimedOut`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_timeout(&self, key: &str, n: u64, timeout: Duration) -> SharedAcquire<S, C> {
        SharedAcquire {
            wait: WaitFor::new(self.join(key), n, Some(timeout)),
        }
    }

    /// Blocks the calling thread until `n` permits for `key` are taken, making the
    /// store's round trips on it; returns the time waited. A Redis store's connection
    /// must be driven by a runtime on another thread.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_blocking(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Duration, AcquireError<StoreError>> {
        WaitFor::new(self.join(key), n, None).block()
    }

    /// As [`acquire_blocking`](Self::acquire_blocking), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Self::acquire_timeout).
    pub fn acquire_blocking_timeout(
        &self,
        key: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError<StoreError>> {
        WaitFor::new(self.join(key), n, Some(timeout)).block()
    }

    fn join(&self, key: &str) -> Joined<String, SharedGate<S, C>> {
        let key = key.to_owned();
        self.queues.join(&key, || SharedGate {
            core: Arc::clone(&self.core),
            key: key.clone(),
        })
    }

    /// Closes the limiter in this process: every waiter and every later wait fails
    /// with [`AcquireError::Closed`], and `check` with [`Denied::Closed`]. Permits
    /// booked by waiters are given back. The store and other processes are not
    /// affected.
    pub fn close(&self) {
        self.queues.close()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.queues.is_closed()
    }

    /// How many callers of this process wait, on every key.
    pub fn waiters(&self) -> usize {
        self.queues.waiters()
    }
}

/// The future of [`SharedLimiter::acquire`]: resolves to the time waited.
///
/// # Cancel safety
///
/// As [`SharedLimiter::acquire`].
#[must_use = "futures do nothing unless polled"]
pub struct SharedAcquire<S: Store + 'static, C: Clock> {
    wait: WaitFor<Joined<String, SharedGate<S, C>>, SharedGate<S, C>>,
}

impl<S: Store + 'static, C: Clock> Future for SharedAcquire<S, C> {
    type Output = Result<Duration, AcquireError<StoreError>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<S: Store + 'static, C: Clock> fmt::Debug for SharedAcquire<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedAcquire").finish_non_exhaustive()
    }
}

impl<S: Store, C> Core<S, C> {
    fn capacity(&self) -> u64 {
        self.rules
            .iter()
            .map(|(_, r)| r.capacity())
            .min()
            .unwrap_or(0)
    }

    fn books_ahead(&self) -> bool {
        self.rules.len() == 1 && self.rules[0].1.books_ahead()
    }

    /// Whether any rule's permits are held while work lasts (a concurrency rule).
    #[inline]
    fn holds(&self) -> bool {
        self.rules.iter().any(|(_, rule)| rule.is_held())
    }

    /// The checks of the rules whose permits are held: a release gives back theirs
    /// only, not a rate's.
    fn held_checks(&self) -> Checks<'_> {
        if self.rules.iter().all(|(_, rule)| rule.is_held()) {
            return checks(&self.rules);
        }
        let held = self.rules.iter().filter(|(_, rule)| rule.is_held());
        Checks::Many(held.map(|(name, rule)| Check::new(name, rule)).collect())
    }

    /// One call to the store, in a `tollgate.store` span.
    async fn run(&self, key: &str, op: Op, at: Option<Duration>) -> Result<Reply, StoreError> {
        self.run_checks(key, &checks(&self.rules), op, at).await
    }

    /// [`run`](Core::run) on `checks`, a part of the rules.
    async fn run_checks(
        &self,
        key: &str,
        checks: &[Check<'_>],
        op: Op,
        at: Option<Duration>,
    ) -> Result<Reply, StoreError> {
        let mut request = Request::new(key, checks, op);
        request.at = at;
        let span = store_span(key, &op, checks.len());
        if span.is_disabled() {
            return self.store.execute(&request).await;
        }
        let outcome = self.store.execute(&request).instrument(span.clone()).await;
        span.record("outcome", outcome_name(&outcome));
        outcome
    }

    /// [`run`](Core::run) without a future, if the store can decide so.
    fn run_now(&self, key: &str, op: Op) -> Option<Result<Reply, StoreError>> {
        self.run_checks_now(key, &checks(&self.rules), op)
    }

    /// [`run_now`](Core::run_now) on `checks`, a part of the rules.
    #[inline]
    fn run_checks_now(
        &self,
        key: &str,
        checks: &[Check<'_>],
        op: Op,
    ) -> Option<Result<Reply, StoreError>> {
        let request = Request::new(key, checks, op);
        let span = store_span(key, &op, checks.len());
        // Without a subscriber, the answer goes straight back: carried through the
        // span's closure, it was copied in ways that cost the one-check path 10%.
        if span.is_disabled() {
            return self.store.try_execute_now(&request);
        }
        let outcome = span.in_scope(|| self.store.try_execute_now(&request))?;
        span.record("outcome", outcome_name(&outcome));
        Some(outcome)
    }
}

fn store_span(key: &str, op: &Op, rules: usize) -> tracing::Span {
    tracing::debug_span!(
        "tollgate.store",
        op = op_name(op),
        rules,
        permits = op.permits(),
        key,
        outcome = tracing::field::Empty,
    )
}

/// One key's side of a [`SharedLimiter`], as the key's queue sees it: decided by
/// round trips to the store.
struct SharedGate<S, C> {
    core: Arc<Core<S, C>>,
    key: String,
}

impl<S: Store + 'static, C: Clock> SharedGate<S, C> {
    /// A local decision, for the queue paths that a remote gate never takes: what an
    /// in-process store decides, or "not now" for one that needs a round trip.
    fn local(&self, op: Op) -> Result<Reply, Denied> {
        match self.core.run_now(&self.key, op) {
            Some(Ok(outcome)) => Ok(outcome),
            _ => Err(Limited::new(RELEASE_POLL, self.core.capacity(), 0, RELEASE_POLL).into()),
        }
    }
}

impl<S: Store + 'static, C: Clock> Gate for SharedGate<S, C> {
    type Error = StoreError;

    fn now(&self) -> Nanos {
        self.core.clock.now()
    }

    fn acquire(&self, _now: Nanos, n: u64) -> Decision {
        self.local(Op::Acquire(n))?
            .into_decision()
            .unwrap_or_else(|_| Err(Limited::new(RELEASE_POLL, n, 0, RELEASE_POLL).into()))
    }

    fn peek(&self, _now: Nanos, n: u64) -> Decision {
        self.local(Op::Peek(n))?
            .into_decision()
            .unwrap_or_else(|_| Err(Limited::new(RELEASE_POLL, n, 0, RELEASE_POLL).into()))
    }

    fn reserve(&self, _now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        let max_wait = max_wait.min(MAX_WAIT);
        self.local(Op::Reserve { n, max_wait })?
            .into_reservation()
            .unwrap_or_else(|_| Err(Limited::new(RELEASE_POLL, n, 0, RELEASE_POLL).into()))
    }

    /// Gives back a booking whose waiter left or was closed out: at once if the store
    /// decides without waiting, otherwise in the background.
    fn refund(&self, _now: Nanos, n: u64) {
        refund_detached(&self.core, &self.key, n);
    }

    fn capacity(&self) -> u64 {
        self.core.capacity()
    }

    fn books_ahead(&self) -> bool {
        self.core.books_ahead()
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.core.clock.set_alarm(deadline, alarm)
    }

    fn events(&self) -> Option<&Events> {
        self.core.events.get()
    }

    fn event_key(&self) -> Option<&str> {
        Some(&self.key)
    }

    fn is_remote(&self) -> bool {
        true
    }

    /// Books ahead in one round trip with a rule that can; otherwise asks for the
    /// permits now, and the queue asks again after the denial's `retry_after` (as a
    /// leaky bucket meter, which would otherwise book a departure).
    fn reserve_remote(&self, n: u64, max_wait: Duration) -> RemoteBooking<StoreError> {
        let op = if self.core.books_ahead() {
            Op::Reserve {
                n,
                max_wait: max_wait.min(MAX_WAIT),
            }
        } else {
            Op::Acquire(n)
        };
        if let Some(outcome) = self.core.run_now(&self.key, op) {
            return Box::pin(std::future::ready(
                outcome.and_then(|outcome| booking(outcome, n)),
            ));
        }
        let core = Arc::clone(&self.core);
        let key = self.key.clone();
        Box::pin(async move { booking(core.run(&key, op, None).await?, n) })
    }

    /// On the current tokio runtime (the Redis store's): the booking ends as the store
    /// decides it, and what it booked is refunded. Without a runtime to finish it, it
    /// is dropped, and what the store booked stays taken until its time passes.
    fn abandon(&self, booking: RemoteBooking<StoreError>, n: u64) {
        let core = Arc::clone(&self.core);
        let key = self.key.clone();
        run_detached(Box::pin(async move {
            if let Ok(Ok(_)) = booking.await {
                // Best effort, as every refund.
                let _ = core.run(&key, Op::Refund(n), None).await;
            }
        }));
    }

    fn release_poll(&self) -> Option<Duration> {
        Some(RELEASE_POLL)
    }
}

/// Per key, through the store: decided at once only by an in-process store. A
/// grant's [`Release`] holds nothing when no rule's permits are
/// [held](Rule::is_held); with a concurrency rule it holds the key's permits and
/// gives back that rule's (not a rate's) when dropped, as
/// [`refund`](PermitSource::refund) does.
impl<S: Store + 'static, C: Clock> PermitSource<str> for SharedLimiter<S, C> {
    type Permit = Release;
    type Error = StoreError;

    fn capacity(&self) -> u64 {
        self.core.capacity()
    }

    #[inline]
    fn decide_now(&self, key: &str, n: u64) -> Option<Result<Decided<Release>, StoreError>> {
        let decision = self.try_acquire(key, n)?;
        Some(decision.map(|d| d.map(|admitted| Grant::new(admitted, self.held(key, n)))))
    }

    /// # Cancel safety
    ///
    /// With a rule whose permits are held, a decision dropped before its answer is
    /// finished in the background (on the current tokio runtime, the Redis store's)
    /// and what it took given back, as a dropped grant gives it back.
    fn decide(&self, key: &str, n: u64) -> PermitFuture<Result<Decided<Release>, StoreError>> {
        let limiter = self.clone();
        let key = key.to_owned();
        let holds = self.core.holds();
        let decide = Box::pin(async move {
            let decision = limiter.check(&key, n).await?;
            Ok(decision.map(|admitted| Grant::new(admitted, limiter.held(&key, n))))
        });
        if holds {
            return Box::pin(Finished(Some(decide)));
        }
        decide
    }

    fn wait(
        &self,
        key: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<Release, AcquireError<StoreError>>> {
        let wait = WaitFor::new(self.join(key), n, timeout);
        if !self.core.holds() {
            return wait.into_permit_future_with(Release::nothing);
        }
        let (limiter, key) = (self.clone(), key.to_owned());
        wait.into_permit_future_with(move || limiter.held(&key, n))
    }

    fn into_release(permit: Release) -> Release {
        permit
    }

    /// In the background, best effort; this process's waiters on `key` then try
    /// again.
    fn refund(&self, key: &str, n: u64) {
        refund_detached(&self.core, key, n);
        if let Some(queue) = self.queues.get(key) {
            queue.serve();
        }
    }
}

impl<S: Store + 'static, C: Clock> SharedLimiter<S, C> {
    /// What a grant of `n` permits for `key` holds: nothing (and no allocation) when
    /// no rule's permits are held.
    #[inline]
    fn held(&self, key: &str, n: u64) -> Release {
        if n == 0 || !self.core.holds() {
            return Release::nothing();
        }
        self.holding(key, n)
    }

    /// Out of line, so that a rate's decisions stay as small as they were.
    #[cold]
    #[inline(never)]
    fn holding(&self, key: &str, n: u64) -> Release {
        Release::new(SharedRelease {
            limiter: self.clone(),
            key: key.to_owned(),
            n,
        })
    }
}

/// A decision over held permits that, dropped before its answer, is finished in the
/// background, so that a grant it made is dropped, and its permits given back.
struct Finished<T: Send + 'static>(Option<PermitFuture<T>>);

impl<T: Send + 'static> Future for Finished<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        let future = this.0.as_mut().expect("Finished polled after it completed");
        let output = std::task::ready!(future.as_mut().poll(cx));
        this.0 = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for Finished<T> {
    fn drop(&mut self) {
        if let Some(future) = self.0.take() {
            run_detached(Box::pin(async move {
                drop(future.await);
            }));
        }
    }
}

/// A key's held permits, given back to the store's held rules.
struct SharedRelease<S, C> {
    limiter: SharedLimiter<S, C>,
    key: String,
    n: u64,
}

impl<S: Store + 'static, C: Clock> GiveBack for SharedRelease<S, C> {
    /// At once on a store that decides without waiting, otherwise as a task on the
    /// current tokio runtime (the Redis store's); this process's waiters on the key
    /// then try again.
    fn give_back(self: Box<Self>) {
        let SharedRelease { limiter, key, n } = *self;
        let core = &limiter.core;
        if core
            .run_checks_now(&key, &core.held_checks(), Op::Refund(n))
            .is_none()
        {
            let core = Arc::clone(core);
            let key = key.clone();
            run_detached(Box::pin(async move {
                // Best effort: a failed release leaves the permits taken until their
                // lease ends.
                let _ = core
                    .run_checks(&key, &core.held_checks(), Op::Refund(n), None)
                    .await;
            }));
        }
        if let Some(queue) = limiter.queues.get(&key) {
            queue.serve();
        }
    }
}

/// A store's answer as a booking: a reservation, or an admission now.
fn booking(outcome: Reply, n: u64) -> Result<Result<Reservation, Denied>, StoreError> {
    match outcome {
        Reply::Reservation(booked) => Ok(booked),
        outcome => Ok(outcome
            .into_decision()?
            .map(|_| Reservation::new(n, Duration::ZERO))),
    }
}

/// Gives back `n` permits for `key`: at once on a store that decides without
/// waiting, otherwise as a task on the current tokio runtime (the Redis store's).
fn refund_detached<S: Store + 'static, C: Clock>(core: &Arc<Core<S, C>>, key: &str, n: u64) {
    if core.run_now(key, Op::Refund(n)).is_some() {
        return;
    }
    let core = Arc::clone(core);
    let key = key.to_owned();
    run_detached(Box::pin(async move {
        // Best effort: a failed refund only leaves the booked permits unused.
        let _ = core.run(&key, Op::Refund(n), None).await;
    }));
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Acquire(_) => "acquire",
        Op::Peek(_) => "peek",
        Op::Reserve { .. } => "reserve",
        Op::Refund(_) => "refund",
    }
}

fn outcome_name(outcome: &Result<Reply, StoreError>) -> &'static str {
    match outcome {
        Ok(Reply::Refunded) => "refunded",
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
