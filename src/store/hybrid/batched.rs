//! [`BatchedLimiter`]: fixed windows counted in this process and added to Redis in
//! batches, every `sync_interval` (Kong's `sync_rate`).

use std::fmt;
use std::hash::RandomState;
use std::time::Duration;

use ::redis::aio::ConnectionLike;
use ::redis::{RedisError, Script};

use super::super::redis::from_redis;
use super::super::rule::Rule;
use super::super::{storage_key, validate_prefix, StoreError, DEFAULT_MAX_KEY_LEN};
use crate::decision::{Admitted, Decision, InsufficientCapacity, Limited};
use crate::error::ConfigError;
use crate::sync::{Arc, Mutex, MutexGuard};
use crate::time::{Clock, MonotonicClock, Nanos};

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
/// A node cannot see what other nodes admitted since their last sync. With `N` nodes,
/// each admitting at most `r` permits per second on a key, and a round trip of
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
/// Cloning is cheap and shares the counts: a clone is the same node.
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
/// match limiter.try_acquire("user-42", 1).await? {
///     Ok(admitted) => println!("{} left", admitted.remaining()),
///     Err(denied) => println!("retry after {:?}", denied.retry_after()),
/// }
/// # Ok(())
/// # }
/// ```
pub struct BatchedLimiter<Conn, C = MonotonicClock> {
    connection: Conn,
    prefix: Arc<str>,
    name: Arc<str>,
    limit: u64,
    /// The window's length in nanoseconds, at least 1.
    window: u64,
    /// Added to Unix time before dividing by the window, as the rule does.
    offset: u64,
    sync_interval: Duration,
    max_keys: usize,
    clock: C,
    script: Arc<Script>,
    counters: Arc<Mutex<Counters>>,
}

impl<Conn: Clone, C: Clone> Clone for BatchedLimiter<Conn, C> {
    fn clone(&self) -> Self {
        BatchedLimiter {
            connection: self.connection.clone(),
            prefix: self.prefix.clone(),
            name: self.name.clone(),
            limit: self.limit,
            window: self.window,
            offset: self.offset,
            sync_interval: self.sync_interval,
            max_keys: self.max_keys,
            clock: self.clock.clone(),
            script: self.script.clone(),
            counters: self.counters.clone(),
        }
    }
}

impl<Conn, C> fmt::Debug for BatchedLimiter<Conn, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchedLimiter")
            .field("prefix", &self.prefix)
            .field("name", &self.name)
            .field("limit", &self.limit)
            .field("window", &Duration::from_nanos(self.window))
            .field("sync_interval", &self.sync_interval)
            .field("max_keys", &self.max_keys)
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
    /// Add only within the limit.
    Take,
    /// Decide as `Take`, writing nothing.
    Peek,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Add => "add",
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
    /// [`Rule::FixedWindow`] or a prefix with a brace in it.
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
        let Rule::FixedWindow(rule) = rule.into() else {
            return Err(ConfigError::OutOfRange {
                parameter: "rule",
                expected: "a Rule::FixedWindow (batched counting adds per-window counts)",
            }
            .into());
        };
        // [limit, window, offset, count bits], the rule's own parameters.
        let [limit, window, offset, _] = rule.words();
        Ok(BatchedLimiter {
            connection,
            prefix: prefix.into(),
            name: "".into(),
            limit,
            window: window.max(1),
            offset,
            sync_interval,
            max_keys: DEFAULT_MAX_KEYS,
            clock,
            script: Arc::new(Script::new(SCRIPT)),
            counters: Arc::new(Mutex::new(Counters::default())),
        })
    }

    /// The same limiter with its keys named `{prefix}:{tag}:{name}:{window index}`,
    /// as a [`SharedLimiter`](crate::store::SharedLimiter) names a rule's keys.
    pub fn with_name(self, name: &str) -> Self {
        BatchedLimiter {
            name: name.into(),
            ..self
        }
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
        Ok(BatchedLimiter { max_keys, ..self })
    }

    /// The most permits a window admits (across all nodes, up to the over-admission
    /// described in [`BatchedLimiter`]).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// How often a key's admissions are sent.
    pub fn sync_interval(&self) -> Duration {
        self.sync_interval
    }

    /// Keys counted in this process now.
    pub fn len(&self) -> usize {
        self.counters.lock().len()
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
        let (index, _) = self.window_at(self.now());
        self.key_of(tag, index)
    }

    /// Takes `n` permits for `tag` if the window, as this node knows it, has them.
    /// `n == 0` peeks.
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
    /// assert!(limiter.try_acquire("user-42", 2).await?.is_ok());
    /// assert!(limiter.try_acquire("user-42", 1).await?.is_err());
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
    pub async fn try_acquire(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        self.decide(tag, n, true).await
    }

    /// Decides as [`try_acquire`](Self::try_acquire) would, taking nothing (it may
    /// still sync, if a sync is due).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn peek(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        self.decide(tag, n, false).await
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
            let (_counters, result) = self.sync(&tag, window, increment).await;
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
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
                if counter.syncing || now < counter.next_sync {
                    return Ok(self.decide_on(counter, n, take, now));
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
        let (mut counters, result) = self.sync(tag, window, increment).await;
        result?;
        let now = self.now().max(now);
        Ok(match counters.get_mut(tag) {
            Some(counter) => self.decide_on(counter, n, take, now),
            // Never: a key under way is not forgotten. Decide on a fresh count.
            None => self.decide_on(&mut Counter::fresh(window, now), n, take, now),
        })
    }

    /// Decides `n` on `counter`, counting them if taken.
    fn decide_on(&self, counter: &mut Counter, n: u64, take: bool, now: Nanos) -> Decision {
        let total = counter.total();
        let reset_after = self.end_of(counter.window).saturating_since(now);
        if total.saturating_add(n) <= self.limit {
            if take {
                counter.pending += n;
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

    /// Sends `increment` for `tag` in window `index`, and records the global count
    /// read back. Returns the table, locked, with the result.
    async fn sync(
        &self,
        tag: &str,
        index: u64,
        increment: u64,
    ) -> (MutexGuard<'_, Counters>, Result<(), StoreError>) {
        let mut guard = AbortSyncOnDrop {
            counters: &self.counters,
            tag,
            index,
            armed: true,
        };
        let now = self.now();
        let end = self.end_of(index);
        let result = self
            .call(tag, Call::Add, increment, index, now, end)
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
                }
                Err(_) => counter.abort_sync(),
            }
            counter.next_sync = after + self.sync_interval;
        }
        (counters, result.map(|_| ()))
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
            .call(tag, call, n, index, now, end)
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

    async fn call(
        &self,
        tag: &str,
        call: Call,
        n: u64,
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
