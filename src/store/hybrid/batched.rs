//! [`BatchedLimiter`]: fixed windows counted in this process and added to Redis in
//! batches, every `sync_interval` (Kong's `sync_rate`), waiting through the crate's
//! one FIFO queue.

use std::fmt;
use std::future::Future;
use std::hash::RandomState;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::redis::aio::ConnectionLike;
use ::redis::{RedisError, Script};

use super::super::redis::from_redis;
use super::super::{DEFAULT_MAX_KEY_LEN, StoreError, storage_key, validate_prefix};
use crate::algorithm::Rule;
use crate::decision::{Admitted, Decision, Denied, InsufficientCapacity, Limited, Reservation};
use crate::error::{AcquireError, ConfigError};
use crate::observe::{EventKind, Events};
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::sync::unmodeled::OnceLock;
use crate::sync::{Arc, Mutex, MutexGuard};
use crate::time::{Alarm, Clock, MonotonicClock, Nanos};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::per_key::{Joined, Queues};
use crate::wait::round_trip::RemoteBooking;

const SCRIPT: &str = include_str!("batched.lua");

/// Every key's count on this node, found by the tag without allocating a key.
type Counters = hashbrown::HashMap<String, Counter, RandomState>;

/// Keys counted in this process by default.
const DEFAULT_MAX_KEYS: usize = 100_000;

/// How long a window's counter outlives the window in Redis: the nodes' clocks
/// disagree a little, and a late sync must still find it.
const EXPIRY_SLACK: Duration = Duration::from_secs(1);

/// The longest TTL sent: Redis holds `PEXPIRE` times in milliseconds, and a window
/// running to the end of the clock needs no more.
const MAX_TTL_MS: u64 = 1 << 52;

/// When a queue asks its gate to decide under its lock, which a remote gate's queue
/// never does, and no decision can be made without a round trip: ask again after this.
const NOT_NOW: Duration = Duration::from_millis(10);

/// A fixed-window limit shared through Redis, decided in this process and synced in
/// batches: Kong's `sync_rate` mode, whose limits are fixed windows too.
///
/// Each process (a *node*) counts what it admits per key and window. The first
/// request for a key in a window, and then the first request after each
/// `sync_interval`, sends the node's unsent admissions to Redis in one script call
/// (`INCRBY` and `PEXPIRE` on the window's counter, reading back the global count),
/// and waits for it: the sync runs on the caller's path, so it needs no background
/// task and works on any executor. Every other request is decided at once, from the
/// last global count read plus the node's own unsent admissions. Requests that come
/// while a sync is under way decide on what was known before it.
///
/// Only [`Rule::FixedWindow`] is accepted (windows on multiples of their length since
/// the Unix epoch, as in the stores): a count per window is what a node can add to
/// Redis blindly and exactly, by `INCRBY`. Any other rule is a
/// [`ConfigError::OutOfRange`].
///
/// Keys are `{prefix}:{tag}:{name}:{window index}` (or `{prefix}:{tag}:{window
/// index}` without a name), one integer per window, each written with a TTL that ends
/// one second after its window (by the writer's clock). They are not the keys
/// [`RedisStore`](crate::store::RedisStore) uses for the same rule: a limit is counted
/// either one way or the other.
///
/// # How much it over-admits
///
/// A node cannot see what other nodes admitted since their last sync. With `N`
/// nodes, each admitting at most `r` permits per second on a key, and a round trip of
/// `rtt`, a window admits at most about
///
/// `limit + (N − 1) × r × 2 × (sync_interval + rtt)`
///
/// (a node decides on a global count read up to one interval and a round trip ago,
/// which lacks up to as much of each other node's admissions), typically about
/// `N × r × sync_interval`, and never more than `N × limit`, since no node admits more
/// than the limit alone. Clients hammering a key as fast as they can make `r` large:
/// right after a window opens, every node may admit up to the whole limit before it
/// syncs again, and the bound is `N × limit`. Shorter intervals cost more round trips
/// and over-admit less; a `sync_interval` of zero syncs on every decision that finds
/// no sync under way.
///
/// [`with_divisor`](Self::with_divisor) bounds it under any load: between two syncs a
/// node then admits at most its *allowance*, `⌊remaining / divisor⌋` of what remained
/// in the window when the sync read the global count, less what it admitted while
/// that sync was under way. Once the allowance is spent, the next request syncs at
/// once, whatever the `sync_interval`, and decides on the fresh count; requests that
/// come while that sync is under way are denied, with a `retry_after` of 10 ms. Near
/// the limit the allowance is 0 and every admission is one sync. Over-admission then
/// comes only from allowances spent on stale counts: a window admits at most `limit`
/// plus the allowances the nodes held when it filled, each at most
/// `max(n, ⌊remaining seen / divisor⌋)`, so at most `N × max(n, ⌊limit / divisor⌋)`,
/// and in practice a few permits, since allowances shrink with what remains. For
/// none at all, see [`LeaseLimiter`](crate::store::LeaseLimiter).
///
/// # When Redis fails
///
/// A request that finds a sync due and cannot complete it returns the
/// [`StoreError`], having taken nothing; the unsent admissions are kept for the next
/// sync, one interval later. Every other request still decides, from the last global
/// count read plus the node's own admissions: during an outage each node enforces the
/// limit on what it knows, so the nodes together admit up to `N × limit` per window.
/// Admissions still unsent when their window ends are dropped: no later decision
/// depends on them.
///
/// # Memory
///
/// At most `max_keys` keys are counted in this process (100,000 unless set with
/// [`with_max_keys`](Self::with_max_keys)). When a new key finds the table full, keys
/// with nothing unsent are forgotten (they read the global count again when next
/// seen); if every key still has admissions to send, the new key is decided in Redis
/// directly and exactly (one round trip, adding only if within the limit) and not
/// counted locally.
///
/// # Deciding and waiting
///
/// As every limiter of the crate: [`check`](Self::check) decides now (a round trip
/// only when a sync is due), [`try_acquire`](Self::try_acquire) decides without I/O or
/// says it cannot, and [`acquire`](Self::acquire) waits in the crate's FIFO queue, one
/// per tag with waiters. A denial lasts until its window ends (counts only grow within
/// a window), so the first waiter sleeps until then and asks again, and
/// [`acquire_timeout`](Self::acquire_timeout) fails at once when the window ends after
/// its timeout.
///
/// Cloning is cheap and shares the counts and the queues: a clone is the same node.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::store::BatchedLimiter;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let connection = client.get_multiplexed_async_connection().await?;
/// let rule = FixedWindow::new(1_000, Duration::from_secs(60))?;
/// let limiter = BatchedLimiter::new(connection, "api", rule, Duration::from_millis(100))?;
/// match limiter.check("user-42", 1).await? {
///     Ok(admitted) => println!("{} left", admitted.remaining()),
///     Err(denied) => println!("retry after {:?}", denied.retry_after()),
/// }
/// limiter.acquire("user-42", 1).await?; // waits for the next window if need be
/// # Ok(())
/// # }
/// ```
pub struct BatchedLimiter<Conn, C = MonotonicClock> {
    node: Node<Conn, C>,
    queues: Arc<Queues<String, BatchedGate<Conn, C>>>,
}

/// This process's side of the limit: the rule, the counts and the connection.
/// Cloning shares the counts.
struct Node<Conn, C> {
    connection: Conn,
    prefix: Arc<str>,
    name: Arc<str>,
    limit: u64,
    /// The window's length in nanoseconds, at least 1.
    window: u64,
    /// Added to Unix time before dividing by the window, as the rule does.
    offset: u64,
    sync_interval: Duration,
    /// Between two syncs, at most `1 / divisor` of what remained, if set.
    divisor: Option<u64>,
    max_keys: usize,
    clock: C,
    script: Arc<Script>,
    counters: Arc<Mutex<Counters>>,
    /// Set at most once, shared by clones and the queues' gates.
    events: Arc<OnceLock<Events>>,
}

impl<Conn: Clone, C: Clone> Clone for BatchedLimiter<Conn, C> {
    fn clone(&self) -> Self {
        BatchedLimiter {
            node: self.node.clone(),
            queues: Arc::clone(&self.queues),
        }
    }
}

impl<Conn: Clone, C: Clone> Clone for Node<Conn, C> {
    fn clone(&self) -> Self {
        Node {
            connection: self.connection.clone(),
            prefix: self.prefix.clone(),
            name: self.name.clone(),
            limit: self.limit,
            window: self.window,
            offset: self.offset,
            sync_interval: self.sync_interval,
            divisor: self.divisor,
            max_keys: self.max_keys,
            clock: self.clock.clone(),
            script: self.script.clone(),
            counters: self.counters.clone(),
            events: self.events.clone(),
        }
    }
}

impl<Conn, C> fmt::Debug for BatchedLimiter<Conn, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = &self.node;
        f.debug_struct("BatchedLimiter")
            .field("prefix", &node.prefix)
            .field("name", &node.name)
            .field("limit", &node.limit)
            .field("window", &Duration::from_nanos(node.window))
            .field("sync_interval", &node.sync_interval)
            .field("divisor", &node.divisor)
            .field("max_keys", &node.max_keys)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// One key's count in the current window, as this node knows it.
#[derive(Debug)]
struct Counter {
    /// The window counted.
    window: u64,
    /// The global count last read back from Redis: every node's synced admissions,
    /// this one's included.
    global: u64,
    /// Admissions being sent by the sync under way.
    in_flight: u64,
    /// Admissions not sent yet.
    pending: u64,
    /// When the next sync is due (Unix time).
    next_sync: Nanos,
    syncing: bool,
    /// What this node may admit before it syncs again: a share of what remained at
    /// the last sync.
    allowance: u64,
}

impl Counter {
    /// A window not seen yet: due for a sync at once, so that the node reads the
    /// global count before it decides blind.
    fn fresh(window: u64, now: Nanos) -> Counter {
        Counter {
            window,
            global: 0,
            in_flight: 0,
            pending: 0,
            next_sync: now,
            syncing: false,
            allowance: 0,
        }
    }

    fn total(&self) -> u64 {
        self.global
            .saturating_add(self.in_flight)
            .saturating_add(self.pending)
    }

    /// Moves the unsent admissions in flight; how many.
    fn start_sync(&mut self) -> u64 {
        self.syncing = true;
        self.in_flight = self.pending;
        self.pending = 0;
        self.in_flight
    }

    /// The sync did not complete: its admissions are sent again with the next one
    /// (counted twice if this one was applied after all, which only denies more).
    fn abort_sync(&mut self) {
        self.pending = self.pending.saturating_add(self.in_flight);
        self.in_flight = 0;
        self.syncing = false;
    }
}

/// What a request does after its first look at the table.
enum Next {
    /// Send this many admissions of this window, then decide.
    Sync(u64, u64),
    /// Decide in Redis: the table is full.
    InRedis,
}

/// What the script is asked.
#[derive(Clone, Copy)]
enum Call {
    /// Add admissions already made.
    Add,
    /// Add admissions already made, then take more only within the limit.
    AddTake,
    /// Add only within the limit.
    Take,
    /// Decide as `Take`, writing nothing.
    Peek,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Add => "add",
            Call::AddTake => "add_take",
            Call::Take => "take",
            Call::Peek => "peek",
        }
    }
}

impl<Conn> BatchedLimiter<Conn, MonotonicClock>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// `rule` over `connection` (a
    /// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), a
    /// [`ConnectionManager`](redis::aio::ConnectionManager), a Cluster connection…),
    /// keys under `prefix`, syncing every `sync_interval`, on the monotonic clock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::Gcra;
    /// # use tollgate::store::BatchedLimiter;
    /// # use tollgate::Quota;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let gcra = Gcra::new(Quota::per_second(10)?);
    /// assert!(BatchedLimiter::new(connection, "api", gcra, Duration::from_millis(100)).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`]: [`ConfigError::OutOfRange`] for a rule other than
    /// [`Rule::FixedWindow`] (or one that
    /// [counts denied acquires](crate::algorithm::FixedWindow::counting_denied)), or a
    /// prefix with a brace in it.
    pub fn new(
        connection: Conn,
        prefix: &str,
        rule: impl Into<Rule>,
        sync_interval: Duration,
    ) -> Result<Self, StoreError> {
        BatchedLimiter::with_clock(
            connection,
            prefix,
            rule,
            sync_interval,
            MonotonicClock::new(),
        )
    }
}

impl<Conn, C> BatchedLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// `rule` over `connection`, keys under `prefix`, syncing every `sync_interval`,
    /// reading time from `clock` (a [`ManualClock`](crate::time::ManualClock) in
    /// tests), which gives Unix time as `unix_origin + now`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::time::ManualClock;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let clock = ManualClock::new(); // Unix time 0: window 0
    /// let interval = Duration::from_millis(100);
    /// let limiter = BatchedLimiter::with_clock(connection, "api", rule, interval, clock)?;
    /// assert_eq!(limiter.redis_key("user-42"), "api:{user-42}:0");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new`](BatchedLimiter::new).
    pub fn with_clock(
        connection: Conn,
        prefix: &str,
        rule: impl Into<Rule>,
        sync_interval: Duration,
        clock: C,
    ) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let rule = match rule.into() {
            Rule::FixedWindow(rule) if !rule.counts_denied() => rule,
            _ => {
                return Err(ConfigError::OutOfRange {
                    parameter: "rule",
                    expected: "a Rule::FixedWindow that does not count denied acquires \
                               (batched counting adds the permits admitted per window)",
                }
                .into());
            }
        };
        // [limit, window, offset, count bits], the rule's own parameters.
        let [limit, window, offset, _] = rule.words();
        Ok(BatchedLimiter {
            node: Node {
                connection,
                prefix: prefix.into(),
                name: "".into(),
                limit,
                window: window.max(1),
                offset,
                sync_interval,
                divisor: None,
                max_keys: DEFAULT_MAX_KEYS,
                clock,
                script: Arc::new(Script::new(SCRIPT)),
                counters: Arc::new(Mutex::new(Counters::default())),
                events: Arc::default(),
            },
            queues: Arc::default(),
        })
    }

    /// The same limiter with its keys named `{prefix}:{tag}:{name}:{window index}`,
    /// as a [`SharedLimiter`](crate::store::SharedLimiter) names a rule's keys.
    pub fn with_name(mut self, name: &str) -> Self {
        self.node.name = name.into();
        self
    }

    /// The same limiter counting at most `max_keys` keys in this process.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `max_keys == 0`.
    pub fn with_max_keys(self, max_keys: usize) -> Result<Self, ConfigError> {
        if max_keys == 0 {
            return Err(ConfigError::Zero {
                parameter: "max_keys",
            });
        }
        let mut limiter = self;
        limiter.node.max_keys = max_keys;
        Ok(limiter)
    }

    /// The same limiter admitting, between two syncs, at most `1 / divisor` of what
    /// remained in the window at the last sync; past it, the next request syncs
    /// first. See [how much it over-admits](BatchedLimiter#how-much-it-over-admits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(1_000, Duration::from_secs(60))?;
    /// let limiter = BatchedLimiter::new(connection, "api", rule, Duration::from_millis(100))?
    ///     .with_divisor(16)?;
    /// assert_eq!(limiter.divisor(), Some(16));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for 0.
    pub fn with_divisor(self, divisor: u64) -> Result<Self, ConfigError> {
        if divisor == 0 {
            return Err(ConfigError::Zero {
                parameter: "divisor",
            });
        }
        let mut limiter = self;
        limiter.node.divisor = Some(divisor);
        Ok(limiter)
    }

    /// Between two syncs a node admits at most `1 / divisor` of what remained, if
    /// set with [`with_divisor`](Self::with_divisor).
    pub fn divisor(&self) -> Option<u64> {
        self.node.divisor
    }

    /// Reports this limiter's decisions to `events`, each with its tag: `check` and
    /// `try_acquire` decisions, and the end of every wait (`Admitted` at once,
    /// `Waited` with the time waited on this limiter's clock, or `Denied` with the
    /// reason), each with the permits asked. A [`StoreError`] is not a decision and
    /// is not reported, nor is a `try_acquire` that could not decide without a round
    /// trip; `peek`, `refund` and `flush` decide nothing and report nothing.
    ///
    /// Clones share the hub, and the first hub attached stays: where one is attached
    /// already (here or on a clone), this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// use tollgate::observe::{Event, Events};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let events = Events::new("api");
    /// events.subscribe(|event: &Event<'_>| assert_eq!(event.key, Some("user-42"))).detach();
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = BatchedLimiter::new(connection, "api", rule, Duration::from_millis(100))?
    ///     .with_events(events);
    /// assert_eq!(limiter.events().map(Events::name), Some("api"));
    /// limiter.check("user-42", 1).await?; // reported as admitted
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_events(self, events: Events) -> Self {
        let _ = self.node.events.set(events);
        self
    }

    /// The hub this limiter reports to, if any.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// use tollgate::observe::Events;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = BatchedLimiter::new(connection, "api", rule, Duration::from_millis(100))?;
    /// assert!(limiter.events().is_none());
    /// let limiter = limiter.with_events(Events::new("first")).with_events(Events::new("second"));
    /// assert_eq!(limiter.events().map(Events::name), Some("first"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn events(&self) -> Option<&Events> {
        self.node.events.get()
    }

    /// The most permits a window admits (across all nodes, up to the over-admission
    /// described in [`BatchedLimiter`]).
    pub fn limit(&self) -> u64 {
        self.node.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.node.window)
    }

    /// How often a key's admissions are sent.
    pub fn sync_interval(&self) -> Duration {
        self.node.sync_interval
    }

    /// The clock it reads time from.
    pub fn clock(&self) -> &C {
        &self.node.clock
    }

    /// Keys counted in this process now.
    pub fn len(&self) -> usize {
        self.node.counters.lock().len()
    }

    /// Whether no key is counted in this process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Redis key counting `tag` in the current window.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::time::ManualClock;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let clock = ManualClock::new(); // Unix time 0: window 0
    /// let interval = Duration::from_millis(100);
    /// let limiter = BatchedLimiter::with_clock(connection, "api", rule, interval, clock)?
    ///     .with_name("minute");
    /// assert_eq!(limiter.redis_key("user-42"), "api:{user-42}:minute:0");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, tag: &str) -> String {
        let (index, _) = self.node.window_at(self.node.now());
        self.node.key_of(tag, index)
    }
}

/// # Deciding at once
impl<Conn, C> BatchedLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// Takes `n` permits for `tag` if the window, as this node knows it, has them,
    /// syncing first if a sync is due; never waits for permits. `n == 0` peeks.
    ///
    /// While callers wait on `tag` in this process, it is denied without deciding
    /// (they were first), with a `retry_after` of when the first of them asks again.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// # let limiter = BatchedLimiter::new(connection, "api", FixedWindow::new(2, Duration::from_secs(1))?, Duration::from_millis(50))?;
    /// assert!(limiter.check("user-42", 2).await?.is_ok());
    /// assert!(limiter.check("user-42", 1).await?.is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The [`StoreError`] of a sync this request found due and could not complete
    /// (nothing is taken then), or [`StoreError::KeyTooLong`]. A request for more
    /// than the limit is `Ok(Err(Denied::Insufficient))`, decided without Redis.
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits for a sync, it takes nothing, and the admissions that
    /// sync carried are sent again with the next one (counted twice if the dropped one
    /// reached Redis, which only denies more).
    pub async fn check(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        let decision = match self.queued_denial(tag, n) {
            Some(denied) => Err(denied),
            None => self.node.decide(tag, n, true).await?,
        };
        self.report(tag, n, &decision);
        Ok(decision)
    }

    /// [`check`](Self::check) without a future, when this node can decide without a
    /// round trip: `tag` is counted here and no sync is due. `None` when it cannot,
    /// having done nothing: call `check`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// # let limiter = BatchedLimiter::new(connection, "api", FixedWindow::new(10, Duration::from_secs(1))?, Duration::from_millis(50))?;
    /// let decision = match limiter.try_acquire("user-42", 1) {
    ///     Some(decision) => decision?,
    ///     None => limiter.check("user-42", 1).await?, // a sync is due
    /// };
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::KeyTooLong`], inside the `Some`. A request for more than the
    /// limit is `Some(Ok(Err(Denied::Insufficient)))`.
    pub fn try_acquire(&self, tag: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        let decision = match self.queued_denial(tag, n) {
            Some(denied) => Ok(Err(denied)),
            None => self.node.decide_now(tag, n, true)?,
        };
        if let Ok(decision) = &decision {
            self.report(tag, n, decision);
        }
        Some(decision)
    }

    /// Reports a decision on `n` permits for `tag`, if anyone listens.
    #[inline]
    fn report(&self, tag: &str, n: u64, decision: &Decision) {
        if let Some(events) = self.node.events.get() {
            if events.is_observed() {
                emit(events, tag, n, EventKind::of_decision(decision));
            }
        }
    }

    /// A denial for callers who would overtake this process's waiters on `tag`, or
    /// of a closed limiter.
    fn queued_denial(&self, tag: &str, n: u64) -> Option<Denied> {
        if self.queues.is_closed() {
            return Some(Denied::Closed);
        }
        // `n == 0` takes nothing, so it overtakes no one.
        let queue = self.queues.get(tag).filter(|_| n > 0)?;
        if queue.waiters() == 0 {
            return None;
        }
        let now = self.node.clock.now();
        let retry = match queue.queued().1 {
            Some(first) => first.saturating_since(now),
            None => NOT_NOW,
        };
        Some(Limited::new(retry, self.node.limit, 0, retry).into())
    }

    /// Decides as [`check`](Self::check) would, taking nothing (it may still sync, if
    /// a sync is due).
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check).
    pub async fn peek(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        self.node.decide(tag, n, false).await
    }

    /// Sends every key's unsent admissions in the current window now, and reads the
    /// global counts back: before a shutdown, or to see the global count at once.
    ///
    /// # Errors
    ///
    /// The first [`StoreError`] of the syncs; every key is tried, and those that
    /// failed keep their admissions for the next sync.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the syncs not completed are sent again later.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.node.flush().await
    }
}

/// # Waiting
impl<Conn, C> BatchedLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// Waits until `n` permits for `tag` are taken; resolves to the time waited on
    /// this limiter's clock.
    ///
    /// Waiters on one tag are served in arrival order, through the same FIFO queue as
    /// every other limiter. The first decides as [`check`](Self::check) does (syncing
    /// if a sync is due); denied, it sleeps until the window ends and asks again, while
    /// the others queue behind it holding nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::BatchedLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// # let limiter = BatchedLimiter::new(connection, "api", FixedWindow::new(10, Duration::from_secs(1))?, Duration::from_millis(50))?;
    /// let waited = limiter.acquire("user-42", 1).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`AcquireError::Insufficient`] for more than the limit,
    /// [`AcquireError::Closed`] after [`close`](Self::close), and
    /// [`AcquireError::Source`] with the [`StoreError`] of a sync the first waiter
    /// found due and could not complete (the next waiter then tries).
    ///
    /// # Cancel safety
    ///
    /// Dropped after its permits were taken and before it was polled again, it gives
    /// them back to this node's unsent count. Dropped while waiting for a sync, it
    /// takes nothing, as [`check`](Self::check).
    pub fn acquire(&self, tag: &str, n: u64) -> BatchedAcquire<Conn, C> {
        BatchedAcquire {
            wait: WaitFor::new(self.join(tag), n, None),
        }
    }

    /// [`acquire`](Self::acquire), giving up after `timeout`. A denial lasts until its
    /// window ends, so when the window ends after `timeout` the wait fails at once.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`AcquireError::TimedOut`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_timeout(&self, tag: &str, n: u64, timeout: Duration) -> BatchedAcquire<Conn, C> {
        BatchedAcquire {
            wait: WaitFor::new(self.join(tag), n, Some(timeout)),
        }
    }

    /// Blocks the calling thread until `n` permits for `tag` are taken, making the
    /// syncs on it; returns the time waited. The connection must be driven by a
    /// runtime on another thread.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_blocking(
        &self,
        tag: &str,
        n: u64,
    ) -> Result<Duration, AcquireError<StoreError>> {
        WaitFor::new(self.join(tag), n, None).block()
    }

    /// As [`acquire_blocking`](Self::acquire_blocking), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Self::acquire_timeout).
    pub fn acquire_blocking_timeout(
        &self,
        tag: &str,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError<StoreError>> {
        WaitFor::new(self.join(tag), n, Some(timeout)).block()
    }

    fn join(&self, tag: &str) -> Joined<String, BatchedGate<Conn, C>> {
        let tag = tag.to_owned();
        self.queues.join(&tag, || BatchedGate {
            node: self.node.clone(),
            tag: tag.clone(),
        })
    }

    /// Closes the limiter in this process: every waiter and every later wait fails
    /// with [`AcquireError::Closed`], and `check` with [`Denied::Closed`]. Redis and
    /// other nodes are not affected.
    pub fn close(&self) {
        self.queues.close()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.queues.is_closed()
    }

    /// How many callers of this process wait, on every tag.
    pub fn waiters(&self) -> usize {
        self.queues.waiters()
    }
}

/// The future of [`BatchedLimiter::acquire`]: resolves to the time waited.
///
/// # Cancel safety
///
/// As [`BatchedLimiter::acquire`].
#[must_use = "futures do nothing unless polled"]
pub struct BatchedAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    wait: WaitFor<Joined<String, BatchedGate<Conn, C>>, BatchedGate<Conn, C>>,
}

impl<Conn, C> Future for BatchedAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    type Output = Result<Duration, AcquireError<StoreError>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<Conn, C> fmt::Debug for BatchedAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchedAcquire").finish_non_exhaustive()
    }
}

/// Per tag, decided in this process between syncs; a grant holds nothing.
impl<Conn, C> PermitSource<str> for BatchedLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    type Permit = ();
    type Error = StoreError;

    fn capacity(&self) -> u64 {
        self.node.limit
    }

    fn decide_now(&self, tag: &str, n: u64) -> Option<Result<Decided<()>, StoreError>> {
        let decision = self.try_acquire(tag, n)?;
        Some(decision.map(|d| d.map(|admitted| Grant::new(admitted, ()))))
    }

    fn decide(&self, tag: &str, n: u64) -> PermitFuture<Result<Decided<()>, StoreError>> {
        let limiter = self.clone();
        let tag = tag.to_owned();
        Box::pin(async move {
            let decision = limiter.check(&tag, n).await?;
            Ok(decision.map(|admitted| Grant::new(admitted, ())))
        })
    }

    fn wait(
        &self,
        tag: &str,
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<(), AcquireError<StoreError>>> {
        WaitFor::new(self.join(tag), n, timeout).into_permit_future()
    }

    /// Gives back up to `n` of this node's admissions for `tag` not sent yet, in the
    /// window current now; admissions already sent stay counted, which only denies
    /// more. This process's waiters on `tag` then try again.
    fn refund(&self, tag: &str, n: u64) {
        self.node.give_back(tag, n);
        if let Some(queue) = self.queues.get(tag) {
            queue.serve();
        }
    }
}

/// Off the deciding path: only a limiter someone listens to gets here.
#[cold]
#[inline(never)]
fn emit(events: &Events, tag: &str, n: u64, kind: EventKind) {
    events.emit_keyed(tag, n, kind);
}

/// One tag's side of a [`BatchedLimiter`], as the tag's queue sees it: decided by the
/// first waiter, with a round trip when a sync is due.
struct BatchedGate<Conn, C> {
    node: Node<Conn, C>,
    tag: String,
}

impl<Conn, C> BatchedGate<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// A decision without a round trip, for the queue paths that a remote gate never
    /// takes; "not now" when one is needed.
    fn local(&self, n: u64, take: bool) -> Decision {
        match self.node.decide_now(&self.tag, n, take) {
            Some(Ok(decision)) => decision,
            _ => Err(Limited::new(NOT_NOW, self.node.limit, 0, NOT_NOW).into()),
        }
    }
}

impl<Conn, C> Gate for BatchedGate<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    type Error = StoreError;

    fn now(&self) -> Nanos {
        self.node.clock.now()
    }

    fn acquire(&self, _now: Nanos, n: u64) -> Decision {
        self.local(n, true)
    }

    fn peek(&self, _now: Nanos, n: u64) -> Decision {
        self.local(n, false)
    }

    fn reserve(&self, _now: Nanos, n: u64, _max_wait: Duration) -> Result<Reservation, Denied> {
        self.local(n, true)
            .map(|_| Reservation::new(n, Duration::ZERO))
    }

    /// Permits granted to a waiter that left before taking them.
    fn refund(&self, _now: Nanos, n: u64) {
        self.node.give_back(&self.tag, n);
    }

    fn capacity(&self) -> u64 {
        self.node.limit
    }

    /// A denial lasts until the window ends: its `retry_after` is the wait.
    fn books_ahead(&self) -> bool {
        false
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.node.clock.set_alarm(deadline, alarm)
    }

    fn events(&self) -> Option<&Events> {
        self.node.events.get()
    }

    fn event_key(&self) -> Option<&str> {
        Some(&self.tag)
    }

    fn is_remote(&self) -> bool {
        true
    }

    /// Takes the permits now as `check` does, at once between syncs and by a round
    /// trip when a sync is due; denied, the queue asks again when the window ends.
    fn reserve_remote(&self, n: u64, _max_wait: Duration) -> RemoteBooking<StoreError> {
        if let Some(decision) = self.node.decide_now(&self.tag, n, true) {
            return Box::pin(std::future::ready(decision.map(|d| booking(d, n))));
        }
        let node = self.node.clone();
        let tag = self.tag.clone();
        Box::pin(async move { Ok(booking(node.decide(&tag, n, true).await?, n)) })
    }
}

/// A decision as a booking: an admission now, or the denial.
fn booking(decision: Decision, n: u64) -> Result<Reservation, Denied> {
    decision.map(|_| Reservation::new(n, Duration::ZERO))
}

impl<Conn, C> Node<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    async fn flush(&self) -> Result<(), StoreError> {
        let now = self.now();
        let (index, _) = self.window_at(now);
        let due: Vec<(String, u64, u64)> = self
            .counters
            .lock()
            .iter_mut()
            .filter(|(_, c)| c.window >= index && !c.syncing && c.pending > 0)
            .map(|(tag, c)| (tag.clone(), c.window, c.start_sync()))
            .collect();
        let mut first_error = None;
        for (tag, window, increment) in due {
            let (_counters, result) = self.sync(&tag, window, increment, 0).await;
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Decides without I/O if `tag` is counted here in the current window and no
    /// sync is due; `None`, having done nothing, if a round trip is needed.
    fn decide_now(&self, tag: &str, n: u64, take: bool) -> Option<Result<Decision, StoreError>> {
        let now = self.now();
        let (index, _) = self.window_at(now);
        let len = self.key_len(tag, index);
        if len > DEFAULT_MAX_KEY_LEN {
            return Some(Err(StoreError::KeyTooLong {
                len,
                max: DEFAULT_MAX_KEY_LEN,
            }));
        }
        if n > self.limit {
            return Some(Ok(Err(InsufficientCapacity::new(n, self.limit).into())));
        }
        let mut counters = self.counters.lock();
        let counter = counters.get_mut(tag)?;
        // As in `decide`: a counter already in a newer window decides there.
        if counter.window >= index
            && (counter.syncing || now < counter.next_sync)
            && self.within_allowance(counter, n, take)
        {
            return Some(Ok(self.decide_on(counter, n, take, now)));
        }
        None
    }

    /// Gives back up to `n` admissions for `tag` not sent yet, in the window current
    /// now.
    fn give_back(&self, tag: &str, n: u64) {
        let (index, _) = self.window_at(self.now());
        if let Some(counter) = self
            .counters
            .lock()
            .get_mut(tag)
            .filter(|c| c.window == index)
        {
            counter.pending -= counter.pending.min(n);
        }
    }

    async fn decide(&self, tag: &str, n: u64, take: bool) -> Result<Decision, StoreError> {
        let now = self.now();
        let (index, end) = self.window_at(now);
        let len = self.key_len(tag, index);
        if len > DEFAULT_MAX_KEY_LEN {
            return Err(StoreError::KeyTooLong {
                len,
                max: DEFAULT_MAX_KEY_LEN,
            });
        }
        if n > self.limit {
            return Ok(Err(InsufficientCapacity::new(n, self.limit).into()));
        }
        let next = {
            let mut counters = self.counters.lock();
            if counters.len() >= self.max_keys
                && !counters.contains_key(tag)
                && !self.make_room(&mut counters, index)
            {
                Next::InRedis
            } else {
                let counter = counters
                    .entry_ref(tag)
                    .or_insert_with(|| Counter::fresh(index, now));
                // A clock read on another thread may lag one already counted:
                // decide it in the newer window, which only denies more.
                if counter.window < index {
                    *counter = Counter::fresh(index, now);
                }
                if self.within_allowance(counter, n, take) {
                    if counter.syncing || now < counter.next_sync {
                        return Ok(self.decide_on(counter, n, take, now));
                    }
                } else if counter.syncing {
                    // Its share spent, the node waits for the sync under way to read
                    // what remains: not now.
                    return Ok(Err(Limited::new(NOT_NOW, self.limit, 0, NOT_NOW).into()));
                }
                Next::Sync(counter.window, counter.start_sync())
            }
        };
        let (window, increment) = match next {
            Next::Sync(window, increment) => (window, increment),
            Next::InRedis => {
                let call = if take { Call::Take } else { Call::Peek };
                return self.decide_in_redis(tag, n, call, index, now, end).await;
            }
        };
        // With an allowance, the request that syncs takes its permits in Redis, in the
        // same call, on the count with every sync so far: exact once the allowance is 0.
        let take_now = if self.divisor.is_some() && take { n } else { 0 };
        let (mut counters, result) = self.sync(tag, window, increment, take_now).await;
        let taken = result?;
        let now = self.now().max(now);
        if take_now > 0 {
            let reset_after = self.end_of(window).saturating_since(now);
            let total = counters.get_mut(tag).map_or(self.limit, |c| c.total());
            let remaining = self.limit.saturating_sub(total);
            return Ok(if taken {
                Ok(Admitted::new(self.limit, remaining, reset_after))
            } else {
                Err(Limited::new(reset_after, self.limit, remaining, reset_after).into())
            });
        }
        Ok(match counters.get_mut(tag) {
            Some(counter) => self.decide_on(counter, n, take, now),
            // Never: a key under way is not forgotten. Decide on a fresh count.
            None => self.decide_on(&mut Counter::fresh(window, now), n, take, now),
        })
    }

    /// Whether `n` more fit in what this node may admit before its next sync; a look
    /// always does, and every request without a divisor.
    fn within_allowance(&self, counter: &Counter, n: u64, take: bool) -> bool {
        self.divisor.is_none() || !take || n == 0 || n <= counter.allowance
    }

    /// Decides `n` on `counter`, counting them if taken.
    fn decide_on(&self, counter: &mut Counter, n: u64, take: bool, now: Nanos) -> Decision {
        let total = counter.total();
        let reset_after = self.end_of(counter.window).saturating_since(now);
        if total.saturating_add(n) <= self.limit {
            if take {
                counter.pending += n;
                counter.allowance = counter.allowance.saturating_sub(n);
            }
            let used = if take { total + n } else { total };
            Ok(Admitted::new(self.limit, self.limit - used, reset_after))
        } else {
            Err(Limited::new(
                reset_after,
                self.limit,
                self.limit.saturating_sub(total),
                reset_after,
            )
            .into())
        }
    }

    /// Sends `increment` for `tag` in window `index`, then takes `take` more if they
    /// fit, and records the global count read back. Returns the table, locked, with
    /// whether `take` were taken.
    async fn sync(
        &self,
        tag: &str,
        index: u64,
        increment: u64,
        take: u64,
    ) -> (MutexGuard<'_, Counters>, Result<bool, StoreError>) {
        let mut guard = AbortSyncOnDrop {
            counters: &self.counters,
            tag,
            index,
            armed: true,
        };
        let now = self.now();
        let end = self.end_of(index);
        let call = if take > 0 { Call::AddTake } else { Call::Add };
        let result = self
            .call(tag, call, increment, take, index, now, end)
            .await
            .map_err(from_redis);
        guard.armed = false;
        let after = self.now();
        let mut counters = self.counters.lock();
        if let Some(counter) = counters.get_mut(tag).filter(|c| c.window == index) {
            match &result {
                Ok((_, count)) => {
                    counter.global = counter.global.max(*count);
                    counter.in_flight = 0;
                    counter.syncing = false;
                    // A share of what remains, less what was admitted meanwhile.
                    if let Some(divisor) = self.divisor {
                        let remaining = self.limit.saturating_sub(counter.total());
                        counter.allowance = (remaining / divisor).saturating_sub(counter.pending);
                    }
                }
                Err(_) => counter.abort_sync(),
            }
            counter.next_sync = after + self.sync_interval;
        }
        (counters, result.map(|(taken, _)| taken))
    }

    /// Decides in Redis, exactly, a key the full table cannot count.
    async fn decide_in_redis(
        &self,
        tag: &str,
        n: u64,
        call: Call,
        index: u64,
        now: Nanos,
        end: Nanos,
    ) -> Result<Decision, StoreError> {
        let (admitted, count) = self
            .call(tag, call, n, 0, index, now, end)
            .await
            .map_err(from_redis)?;
        let reset_after = end.saturating_since(now);
        // After a take, `count` holds the permits taken; a peek takes none.
        Ok(if admitted {
            Ok(Admitted::new(
                self.limit,
                self.limit.saturating_sub(count),
                reset_after,
            ))
        } else {
            Err(Limited::new(
                reset_after,
                self.limit,
                self.limit.saturating_sub(count),
                reset_after,
            )
            .into())
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn call(
        &self,
        tag: &str,
        call: Call,
        n: u64,
        take: u64,
        index: u64,
        now: Nanos,
        end: Nanos,
    ) -> Result<(bool, u64), RedisError> {
        let ttl = end.saturating_since(now) + EXPIRY_SLACK;
        let ttl_ms = u64::try_from(ttl.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_TTL_MS);
        let mut connection = self.connection.clone();
        let (admitted, count): (i64, i64) = self
            .script
            .key(self.key_of(tag, index))
            .arg(call.name())
            .arg(n)
            .arg(ttl_ms)
            .arg(self.limit)
            .arg(take)
            .invoke_async(&mut connection)
            .await?;
        Ok((admitted == 1, u64::try_from(count).unwrap_or(0)))
    }

    /// Frees a place for a new key: forgets the keys with nothing to send. Whether
    /// there is room now.
    fn make_room(&self, counters: &mut Counters, index: u64) -> bool {
        if counters.len() < self.max_keys {
            return true;
        }
        counters.retain(|_, c| c.syncing || (c.window >= index && c.pending > 0));
        counters.len() < self.max_keys
    }

    /// The length of [`key_of`](Self::key_of), without building it.
    fn key_len(&self, tag: &str, index: u64) -> usize {
        let digits = index.checked_ilog10().map_or(1, |d| d as usize + 1);
        let name = if self.name.is_empty() {
            0
        } else {
            self.name.len() + 1
        };
        self.prefix.len() + tag.len() + name + digits + 4
    }

    fn key_of(&self, tag: &str, index: u64) -> String {
        format!("{}:{index}", storage_key(&self.prefix, tag, &self.name))
    }

    fn now(&self) -> Nanos {
        Nanos::from_duration(self.clock.unix_origin()) + self.clock.now().as_duration()
    }

    /// The window at `now`, and when it ends.
    fn window_at(&self, now: Nanos) -> (u64, Nanos) {
        let index = now.as_u64().saturating_add(self.offset) / self.window;
        (index, self.end_of(index))
    }

    fn end_of(&self, index: u64) -> Nanos {
        let end = (u128::from(index) + 1) * u128::from(self.window) - u128::from(self.offset);
        Nanos::new(u64::try_from(end).unwrap_or(u64::MAX))
    }
}

/// Puts a sync's admissions back when the sync is dropped before it completes.
struct AbortSyncOnDrop<'a> {
    counters: &'a Mutex<Counters>,
    tag: &'a str,
    index: u64,
    armed: bool,
}

impl Drop for AbortSyncOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut counters = self.counters.lock();
        if let Some(counter) = counters
            .get_mut(self.tag)
            .filter(|c| c.window == self.index)
        {
            counter.abort_sync();
        }
    }
}
