//! Limits shared by many processes: the state lives in a [`Store`].
//!
//! A store decides a [`Request`]: one or more [`Rule`]s (the algorithms as
//! [`algorithm`](crate::algorithm) lists them, re-exported here), each on its key,
//! asked to acquire, peek, reserve or refund permits, all-or-nothing and atomically.
//! The same [`Rule`]s run in
//!
//! - [`MemoryStore`], in this process's memory: the reference, and the local
//!   fallback;
//! - `RedisStore` (feature `redis`), where every algorithm is a Lua script that is
//!   the same state machine as its in-process twin, run on the Redis server's clock.
//!
//! Keys are `{prefix}:{tag}:{key}`, with literal braces: the tag is the Redis Cluster
//! hash tag, so that one request's keys share a slot.
//!
//! On top of any store:
//!
//! - [`SharedLimiter`]: the limiter API per key (`try_acquire`, `reserve`,
//!   `acquire(n).await`, …), one round trip per call;
//! - [`Resilient`]: a per-call deadline, a [`FailurePolicy`] (open, closed, or a local
//!   fallback holding each node's share, [`Rule::per_node`]) and a circuit breaker;
//! - [`DeniedCache`]: known denials answered locally until their retry time;
//! - `BatchedLimiter` (feature `redis`): fixed windows counted locally and synced to
//!   Redis in batches, trading a bounded over-admission for fewer round trips.
//! - `LeaseLimiter` (feature `redis`): slices of a fixed window's, a sliding window
//!   counter's or a GCRA's quota leased from Redis and spent locally, at in-process
//!   speed and never past the limit.
//!
//! # Each check's own count and answer
//!
//! A rate limit service in front of a store (envoy's ratelimit protocol) answers each
//! descriptor of a request with its own status, and each descriptor may carry its own
//! hit count, while all of them are decided in one atomic, all-or-nothing request
//! (one round trip to Redis):
//!
//! - **Own counts.** [`Check::with_permits`] asks a check for its own count instead of
//!   the op's `n`: an acquire takes each check's count (`0` only looks), a peek asks
//!   each its count, a refund gives back each its count; a reservation is of `n` on
//!   every rule, and a check asking another count is a [`StoreError::Config`]. A check
//!   asking more than its rule's capacity denies the request for good
//!   ([`Denied::Insufficient`](crate::Denied::Insufficient)).
//! - **Own answers.** [`Store::execute_each`] returns [`Answers`]: the combined reply,
//!   exactly what [`Store::execute`] returns, and one answer per check, in order, from
//!   [`MemoryStore`], `RedisStore` (coalescing and on Cluster too), [`DeniedCache`]
//!   (not for a denial it answers itself) and [`Resilient`] (not for a decision of its
//!   policy). An admitting check of a denied request reports its numbers as if its
//!   permits were taken, though nothing was: the answer it would have had alone.
//!   `execute` itself is unchanged: nothing is collected when nobody asks.
//! - **Windows that count denied acquires.**
//!   [`FixedWindow::counting_denied`](crate::algorithm::FixedWindow::counting_denied)
//!   counts as the Go service's `INCRBY` counts every hit: an acquire that does not
//!   fit pushes the window past its limit, and every later acquire in it, even of 0
//!   permits, is denied to the window's end, with `remaining` 0. A request of that
//!   check alone writes its denial. A denied request of several checks writes
//!   nothing, that check's count included, in the memory store and the Redis script
//!   alike: all-or-nothing, where the Go service counts every descriptor of every
//!   request. An acquire of more than the limit is denied for good and counts
//!   nothing.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::algorithm::FixedWindow;
//! use tollgate::store::{Check, MemoryStore, Op, Request, Rule, Store};
//! use tollgate::KeyedConfig;
//!
//! # futures::executor::block_on(async {
//! let store = MemoryStore::new(KeyedConfig::new(1_000), "rls")?;
//! let per_user = Rule::from(FixedWindow::new(10, Duration::from_secs(60))?.counting_denied()?);
//! let per_path = Rule::from(FixedWindow::new(100, Duration::from_secs(60))?);
//! // Descriptor 1 adds 3 hits, descriptor 2 only looks (hits_addend 0).
//! let checks = [
//!     Check::new("user", &per_user).with_permits(3),
//!     Check::new("path", &per_path).with_permits(0),
//! ];
//! let answers = store.execute_each(&Request::new("acct-7", &checks, Op::Acquire(1))).await?;
//! assert!(answers.reply().is_admitted());
//! let remaining: Vec<u64> = answers
//!     .checks()
//!     .unwrap()
//!     .iter()
//!     .map(|a| a.into_decision().unwrap().unwrap().remaining())
//!     .collect();
//! assert_eq!(remaining, [7, 100]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Shared limits in Redis
//!
//! When one process is not enough, a quota lives in a [`Store`] (feature `redis` for
//! `RedisStore`):
//!
//! ```no_run
//! use tollgate::algorithm::{FixedWindow, Gcra};
//! use tollgate::store::{RedisStore, SharedLimiter};
//! use tollgate::Quota;
//! use std::time::Duration;
//!
//! async fn call_partner_api() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = RedisStore::connect("redis://127.0.0.1:6379/", "partner").await?;
//!     let limiter = SharedLimiter::all_of(store, [
//!         ("second", Gcra::new(Quota::per_second(10)?).into()),
//!         ("day", FixedWindow::new(50_000, Duration::from_secs(86_400))?.into()),
//!     ])?;
//!     limiter.acquire("acct-17", 1).await?; // every process shares this quota
//!     Ok(())
//! }
//! ```
//!
//! - **Same algorithms, same decisions.** Every algorithm has a Lua script that is the
//!   same state machine as its in-process twin, in microseconds (Lua's doubles are
//!   exact only below 2^53). A differential proptest runs random requests through the
//!   [`MemoryStore`] (the Rust algorithms) and a real `redis-server` and requires equal
//!   decisions; the GCRA's replies carry redis-cell's `CL.THROTTLE` fields.
//! - **One round trip, all-or-nothing.** All rules of a request run in one call, on
//!   the server's `TIME`, so application clocks never matter: an `FCALL` of a library
//!   of Redis Functions loaded once (Redis 7 and later), else an `EVALSHA` of one
//!   script. It writes only if every rule admits, and gives every key it writes a
//!   TTL. Library and scripts are reloaded when the server lacks them (restart,
//!   failover, `FUNCTION FLUSH`, `SCRIPT FLUSH`).
//! - **Cluster-ready keys.** A limiter's keys are `prefix:{key}:rule`
//!   (`partner:{acct-17}:day` above): the braces make the limited key the Cluster hash
//!   tag, so one request's keys share a slot, and `RedisStore::connect_cluster` works
//!   on Redis Cluster (tested on a 3-master cluster the tests start). The value tells
//!   its kind of rule (by a prefix; GCRA's by its sign), so a key written by one rule
//!   is a typed conflict for any other.
//! - **Pipelined.** Concurrent decisions share one multiplexed connection (clone the
//!   store); `RedisStore::coalescing(n)` also packs up to `n` concurrent requests into
//!   one call, each still decided atomically on its own.
//! - **Same API, same waiting.** [`SharedLimiter`] offers, per key over any store
//!   (`RedisStore`, or [`MemoryStore`] in one process): `check(key, n).await` (one
//!   round trip, never waits for permits), `try_acquire` (at once, for a store that
//!   decides in process), `peek`, `reserve`, `refund`, and `acquire`,
//!   `acquire_timeout` and `acquire_blocking`, which wait in the same FIFO queue as an
//!   in-process [`Limiter`](crate::Limiter), one queue per key: fair,
//!   cancellation-safe, failing a timeout at once when the wait is known to be longer,
//!   and closed by `close`. The first waiter books by a round trip; a rule that books
//!   ahead (GCRA, fixed window, sliding log, refresh period) books its wait in that
//!   one round trip, so waiters are also served in the order they reach Redis, across
//!   processes; others ask again after `retry_after`.
//! - **Redis misbehaves**: [`Resilient`] wraps any store with a per-call deadline (5 ms
//!   by default), a [`FailurePolicy`] — `Open`, `Closed`, or `Fallback { nodes }`, a
//!   local [`MemoryStore`] holding each rule's per-node share ([`Rule::per_node`]) —
//!   and a circuit breaker, so that with Redis down requests go straight to the policy
//!   instead of each paying the deadline. After a cool-down one probe goes through;
//!   its success closes the breaker. Tests kill and restart a real `redis-server`
//!   while tasks send requests.
//!
//!   ```no_run
//!   # use tollgate::store::{FailurePolicy, RedisStore, Resilient, SharedLimiter};
//!   # use tollgate::{algorithm::Gcra, Quota};
//!   # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!   let redis = RedisStore::connect("redis://127.0.0.1:6379/", "api").await?;
//!   // 8 nodes: while Redis is down, each admits an eighth of the quota on its own.
//!   let store = Resilient::new(redis, FailurePolicy::Fallback { nodes: 8 })?;
//!   let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(800)?))?;
//!   # Ok(())
//!   # }
//!   ```
//! - **Bad input is typed**: a malformed URL, a refused connection, a wrong password, a
//!   key too long, a rule the scripts cannot count exactly, or a key holding another
//!   rule's state, each a [`StoreError`], never a panic.
//!
//! # Hybrid modes: fewer round trips to Redis
//!
//! The exact mode ([`SharedLimiter`] over `RedisStore`) makes one script call for
//! every decision. Two hybrid modes do fewer calls. The first gives up nothing. The
//! second can admit more than the limit, up to a bound you choose.
//!
//! ## `DeniedCache`: remember "over the limit until T"
//!
//! ```no_run
//! # use std::time::Duration;
//! # use tollgate::algorithm::FixedWindow;
//! # use tollgate::store::{DeniedCache, RedisStore, SharedLimiter};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
//! let cache = DeniedCache::new(store, 10_000)?; // at most 10,000 denials held
//! let limiter = SharedLimiter::new(cache, FixedWindow::new(100, Duration::from_secs(60))?)?;
//! # Ok(())
//! # }
//! ```
//!
//! [`DeniedCache`] is envoy ratelimit's local cache of over-limit keys. When the store
//! denies an acquire or a peek of `n` permits with a `retry_after`, the cache records
//! the denial for that request's shape: its tag and every check's key and rule. The
//! entry lasts until the time the request was *sent* plus `retry_after`. Until then,
//! the same request is denied in the process, with `retry_after` cut to the time left,
//! and Redis is not asked. Requests for a different `n`, requests of another shape,
//! refunds and reservations all go to the store. A refund or a reservation also drops
//! the tag's entries. When the cache is full, a new denial first pushes out expired
//! entries, then the entry that expires soonest. A bound of 0 is a
//! [`ConfigError`](crate::ConfigError).
//!
//! - **It never admits more than the exact mode.** It only repeats a denial the store
//!   gave, and only until the store's own retry time. Permits taken elsewhere in the
//!   meantime can only push that time later. Every admission still comes from Redis.
//!   With a single process, the cache makes the same decisions as the store alone,
//!   down to `retry_after` (a property test checks this for fixed windows, GCRA, the
//!   sliding log, the leaky bucket and SmoothBursty).
//! - **What it costs.** A denial can outlive permits given back by *another* process,
//!   for example a refund or a concurrency release. The cache keeps denying until the
//!   recorded time, even though the store would already admit. Refunds made through
//!   the cache itself take effect at once. [`invalidate(tag)`](DeniedCache::invalidate)
//!   lets an application drop a tag's denials when it hears of such a change. Because
//!   of this cost, two kinds of rule are never cached: `Concurrency`, whose denials end
//!   when a holder releases rather than at a known time, and a `SlidingLog` with
//!   `count_blocked`, where every attempt must reach the store to be counted.
//! - **Where it helps.** It helps most where denials are long: fixed windows, or a
//!   client that keeps hammering a key that is already spent. It does little for a
//!   GCRA, whose denials last about one emission interval.
//!
//! ## `BatchedLimiter`: count locally, sync in batches (feature `redis`)
//!
//! ```no_run
//! # use std::time::Duration;
//! # use tollgate::algorithm::FixedWindow;
//! # use tollgate::store::BatchedLimiter;
//! # async fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
//! let connection = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
//! let rule = FixedWindow::new(1_000, Duration::from_secs(60))?;
//! let limiter = BatchedLimiter::new(connection, "api", rule, Duration::from_millis(100))?;
//! limiter.check("user-42", 1).await?; // decide now (a round trip only if a sync is due)
//! limiter.acquire("user-42", 1).await?; // or wait, in FIFO order, for the next window
//! # Ok(())
//! # }
//! ```
//!
//! `BatchedLimiter` is Kong's `sync_rate` mode. Kong's limits are fixed windows too,
//! and this mode accepts only [`Rule::FixedWindow`]; any other rule is a
//! [`ConfigError::OutOfRange`](crate::ConfigError::OutOfRange). Each process (a
//! *node*) counts what it admits, per key and window, and decides from the global
//! count it last read plus its own unsent admissions. The first request for a key in
//! each window, and then the first request after each `sync_interval`, sends the
//! node's increments in one script call: `INCRBY` and `PEXPIRE` on
//! `{prefix}:{tag}:{name}:{window index}`, reading back the global count. That request
//! waits for the call. The sync runs on the caller's path, so it needs no background
//! task and works on any executor. Every key written gets a TTL that ends one second
//! after its window. These keys are separate from the ones `RedisStore` uses for the
//! same rule, so count a given limit in one mode only.
//!
//! It speaks the crate's grammar: `check(key, n).await` decides now, syncing first if
//! a sync is due; `try_acquire(key, n)` decides without I/O, or says `None` when a
//! sync is due; `acquire(key, n)` and `acquire_timeout(key, n, t)` wait in the same
//! FIFO queue as every other limiter. A denial lasts until its window ends, so a
//! waiter sleeps until then and asks again, and a timeout that ends before the window
//! does fails at once.
//!
//! - **How much it over-admits.** Take `N` nodes, each admitting at most `r` permits
//!   per second on a key. One window then admits at most about
//!   `limit + (N − 1) × r × 2 × (sync_interval + rtt)`. In typical use the excess is
//!   about `N × r × sync_interval`. It can never exceed `N × limit`, because no node
//!   admits more than the limit alone. Clients that hammer a key as fast as they can
//!   reach that ceiling: at the start of each window, every node can spend the whole
//!   limit before its next sync.
//! - **When Redis fails.** A request that finds a sync due and cannot finish it
//!   returns the [`StoreError`] and takes nothing. The unsent increments are kept and
//!   sent with the next sync, one interval later. If the failed call had actually
//!   reached Redis, they are counted twice, which can only make the limiter deny more.
//!   All other requests keep deciding from what the node knows. During an outage each
//!   node enforces the limit alone, so together the nodes admit up to `N × limit` per
//!   window.
//! - **Memory.** At most `max_keys` keys are held (100,000 by default). When the table
//!   is full, keys with nothing unsent are dropped. If every key still has increments
//!   to send, a new key is decided exactly in Redis, with one call that adds only
//!   within the limit.
//!
//! ## Measured: `cargo bench -p tollgate-benches --features redis --bench hybrid`
//!
//! Setup: 4 simulated nodes in one process, each with its own connection and limiter,
//! on a tokio multi-thread runtime with 2 workers. They share 4 hot keys, each with a
//! quota of 1,000 permits per second. Each run lasts 3 s and starts on a whole second.
//! There are two loads:
//!
//! - `hammer`: 8 closed-loop clients per node. Each sends its next request as soon as
//!   the last one is decided, and yields to the runtime in between.
//! - `paced`: every node offers each key 500 requests per second. All nodes together
//!   offer twice the quota.
//!
//! The "over-admission" column is admitted against quota. Script calls are counted
//! from `INFO commandstats`.
//!
//! **Machine caveat:** 2 cores shared by the benchmark, its `redis-server` and other
//! builds (load average 2–3 during these runs, much higher during earlier runs). Treat
//! throughput as an order of magnitude: exact-mode hammer throughput ranged from 10k
//! to 80k decisions/s across runs as the load changed. Admission counts were stable
//! from run to run. Up to about 0.2% over the quota comes from the run's last
//! instant: a request sent just before the end is decided in the next window.
//!
//! With fixed windows of 1 s everywhere; throughput is the range over two runs. (The
//! benchmark picks fixed windows for the exact modes on its own when the store can run
//! them.)
//!
//! | load | mode | decisions/s | admitted / quota | over-admission | script calls per decision | cache hits |
//! |---|---|---:|---:|---:|---:|---:|
//! | hammer | exact | 37k–41k | 12,023 / 12,000 | +0.2% (edge) | 1.000 | – |
//! | hammer | denied-cache | 1.8M–2.9M | 12,009 / 12,000 | +0.1% (edge) | 0.001 | 99.9% |
//! | hammer | batched 10 ms | 3.7M–5.0M | 48,001 / 12,000 | +300% (= N × limit) | 0.000 | – |
//! | hammer | batched 100 ms | 4.1M–5.6M | 48,001 / 12,000 | +300% (= N × limit) | 0.000 | – |
//! | paced | exact | 8.0k (offered) | 12,002 / 12,000 | +0.0% | 1.000 | – |
//! | paced | denied-cache | 8.0k (offered) | 12,000 / 12,000 | +0.0% | 0.502 | 49.8% |
//! | paced | batched 10 ms | 8.0k (offered) | 12,216 / 12,000 | +1.8% | 0.169 | – |
//! | paced | batched 100 ms | 8.0k (offered) | 13,835 / 12,000 | +15.3% | 0.020 | – |
//!
//! Against the bound for the paced load (`N = 4`, `r = 500/s`):
//!
//! - 10 ms interval: at most +3.3% at the bound, about +2% typically. Measured: +1.8%.
//! - 100 ms interval: at most +30% at the bound, about +20% typically. Measured: +15.3%.
//!
//! Before the Redis store ran fixed windows, the exact and denied-cache modes were
//! measured with a GCRA of 1,000/s and a burst of 1,000 (what the benchmark still
//! uses on a store without the fixed-window script). Its quota over 3 s is 4,000 per
//! key. Two runs:
//!
//! | load | mode | decisions/s | admitted / quota | script calls per decision | cache hits |
//! |---|---|---:|---:|---:|---:|
//! | hammer | exact | 50k–80k | 15,988 / 16,000 | 1.000 | – |
//! | hammer | denied-cache | 53k–79k | 15,992 / 16,000 | 0.96–0.99 | 1–4% |
//! | paced | exact | 8.0k (offered) | 15,980 / 16,000 | 1.000 | – |
//! | paced | denied-cache | 8.0k (offered) | 15,984 / 16,000 | 1.000 | 0% |
//!
//! A GCRA denial lasts about 1 ms here, which is shorter than the gap between one
//! node's requests. So the cache rarely hits and saves almost nothing. It pays off
//! with fixed windows, where a denial lasts until the end of the window.
//!
//! ## `LeaseLimiter`: lease slices of the quota (feature `redis`)
//!
//! ```no_run
//! # use std::time::Duration;
//! # use tollgate::algorithm::FixedWindow;
//! # use tollgate::store::LeaseLimiter;
//! # async fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
//! let connection = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
//! let rule = FixedWindow::new(1_000, Duration::from_secs(60))?;
//! let limiter = LeaseLimiter::new(connection, "api", rule)?;
//! limiter.check("user-42", 1).await?; // from this node's slice, or one round trip
//! limiter.close().await?; // gives back what this node holds
//! # Ok(())
//! # }
//! ```
//!
//! Each node leases a slice of what remains of a key's quota in one atomic script
//! call, on the server's `TIME`, and admits from it with one compare-and-swap. A
//! slice is at most an eighth of what remains and about the node's demand over
//! 10 ms, so slices shrink to the request alone (decided exactly in Redis) near the
//! limit. Redis grants only what the rule admits, so a fixed window (or a sliding
//! window counter) never admits more than its limit across the fleet, and a GCRA at
//! most `burst + rate × (d + term)`
//! over any `d` (a lease is usable for a 20 ms term). Unused permits go back when a
//! lease ends, on `release_all` and `close`, and when the last clone is dropped; what
//! they cost is under-admission, bounded in the type's docs and measured in
//! `benches/hybrid.rs`.
//!
//! ## Which mode to use
//!
//! - **[`DeniedCache`]** is free in exactness. Use it when clients keep retrying spent
//!   keys.
//! - **`LeaseLimiter`** decides at in-process speed and never admits past the
//!   limit, for fixed windows, sliding window counters and GCRAs; it costs some under-admission (permits held
//!   in other nodes' slices).
//! - **`BatchedLimiter`** trades a bounded over-admission for almost no round trips.
//!   Pick `sync_interval` from the bound above. It is the wrong choice when a single
//!   burst must never exceed the limit.

use async_trait::async_trait;

use crate::sync::Arc;

mod detached;
mod error;
pub(crate) mod hybrid;
#[cfg(feature = "redis")]
pub(crate) mod lease_id;
pub(crate) mod limiter;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod request;
mod resilient;
mod rule;
mod share;

#[cfg(feature = "redis")]
pub(crate) use self::redis::from_redis;
#[cfg(feature = "redis-tls")]
pub use self::redis::install_tls_provider;
#[cfg(feature = "redis")]
pub use self::redis::{RedisConnectOptions, RedisStore, SentinelConnection};
pub use crate::algorithm::{Rule, RuleKind};
pub use error::StoreError;
#[cfg(feature = "redis")]
pub use hybrid::BatchedLimiter;
pub use hybrid::DeniedCache;
#[cfg(feature = "redis")]
pub use hybrid::LeaseLimiter;
#[cfg(loom)]
#[doc(hidden)]
pub use hybrid::LoomSlice;
#[cfg(feature = "redis")]
pub use lease_id::lease_id;
pub use limiter::SharedLimiter;
pub use memory::MemoryStore;
pub use request::{Answers, Check, Op, Reply, Request};
pub use resilient::{BreakerState, FailurePolicy, Resilient, ResilientBuilder, ResilientStats};

/// The longest key (prefix, tag and key together) a store accepts by default, in bytes.
pub const DEFAULT_MAX_KEY_LEN: usize = 1024;

/// Where limits keep their state when it is shared, or decided outside the caller.
///
/// A store decides each [`Request`] atomically: every check of the request sees the
/// same instant, and with several checks either all take their permits or none does.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::{FixedWindow, Gcra};
/// use tollgate::store::{Check, MemoryStore, Op, Reply, Request, Rule, Store};
/// use tollgate::{KeyedConfig, Quota};
/// use std::time::Duration;
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
/// let burst = Rule::from(Gcra::new(Quota::per_second(10)?));
/// let daily = Rule::from(FixedWindow::new(1_000, Duration::from_secs(86_400))?);
/// let checks = [Check::new("burst", &burst), Check::new("daily", &daily)];
/// let outcome = store.execute(&Request::new("client-7", &checks, Op::Acquire(1))).await?;
/// assert!(outcome.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait Store: Send + Sync {
    /// Decides `request`.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the store could not decide: the decision is then unknown,
    /// and nothing may have been taken. A request for more permits than a rule can ever
    /// grant is not an error: it is decided as `Denied::Insufficient`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves the decision unknown: a remote
    /// store may still apply it.
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError>;

    /// Decides `request` as [`execute`](Store::execute) does, in the same one atomic
    /// step, and tells each check's own answer when the store can: the combined
    /// [`Reply`] is exactly what `execute` returns, and [`Answers::checks`] holds one
    /// answer per check, in order (see [`Answers`] for what an answer means when
    /// another check denied the request). A rate limit service answering each
    /// descriptor of a request with its own status reads them.
    ///
    /// The default calls `execute` and tells no check's answer (`None`):
    /// [`MemoryStore`], `RedisStore` and the wrappers of this module tell them.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute).
    ///
    /// # Cancel safety
    ///
    /// As [`execute`](Store::execute).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::FixedWindow;
    /// use tollgate::store::{Check, MemoryStore, Op, Request, Rule, Store};
    /// use tollgate::KeyedConfig;
    ///
    /// # futures::executor::block_on(async {
    /// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
    /// let minute = Rule::from(FixedWindow::new(10, Duration::from_secs(60))?);
    /// let day = Rule::from(FixedWindow::new(100, Duration::from_secs(86_400))?);
    /// let checks = [Check::new("minute", &minute), Check::new("day", &day)];
    /// let answers = store.execute_each(&Request::new("client-7", &checks, Op::Acquire(4))).await?;
    /// assert!(answers.reply().is_admitted());
    /// let remaining: Vec<u64> = answers
    ///     .checks()
    ///     .unwrap()
    ///     .iter()
    ///     .map(|a| a.into_decision().unwrap().unwrap().remaining())
    ///     .collect();
    /// assert_eq!(remaining, [6, 96]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        self.execute(request).await.map(Answers::new)
    }

    /// Checks that this store can run `rule`, without a round trip: a limiter checks
    /// its rules once, when it is built. The default accepts every rule.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a rule the store cannot run exactly (the Redis
    /// scripts count whole microseconds, in doubles exact below 2^53).
    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        let _ = rule;
        Ok(())
    }

    /// Decides `request` without waiting, when this store can (an in-process store
    /// such as [`MemoryStore`]): callers then skip the future. `None` means "call
    /// [`execute`](Store::execute)"; that is the default.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute), inside the `Some`.
    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        let _ = request;
        None
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        (**self).execute(request).await
    }

    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        (**self).execute_each(request).await
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        (**self).check_rule(rule)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        (**self).try_execute_now(request)
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for &S {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        (**self).execute(request).await
    }

    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        (**self).execute_each(request).await
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        (**self).check_rule(rule)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        (**self).try_execute_now(request)
    }
}

/// `{prefix}:{tag}:{key}`, or `{prefix}:{tag}` for an empty key; the braces around the
/// tag are literal.
pub(crate) fn storage_key(prefix: &str, tag: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + tag.len() + key.len() + 4);
    out.push_str(prefix);
    out.push_str(":{");
    out.push_str(tag);
    out.push('}');
    if !key.is_empty() {
        out.push(':');
        out.push_str(key);
    }
    out
}

/// A prefix must not hold a brace: Redis Cluster would hash the text after it instead
/// of the tag.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.contains(['{', '}']) {
        return Err(crate::error::ConfigError::OutOfRange {
            parameter: "prefix",
            expected: "no '{' or '}' (the tag after it is the Cluster hash tag)",
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_tag_in_braces() {
        assert_eq!(storage_key("api", "user-1", "s"), "api:{user-1}:s");
        assert_eq!(storage_key("api", "user-1", ""), "api:{user-1}");
    }

    #[test]
    fn braces_in_the_prefix_are_refused() {
        assert!(validate_prefix("a{b").is_err());
        assert!(validate_prefix("api:v2").is_ok());
    }
}
