//! A limiter per key (user, IP address, route), in a sharded map whose memory is
//! bounded by configuration.
//!
//! [`KeyedLimiter`] stores one [`Algorithm::State`] per key and shares one
//! configuration among all keys. Keys whose state has returned to that of a fresh key
//! are forgotten; a flood of unique keys cannot grow memory past
//! [`KeyedConfig::max_keys`], and [`KeyedConfig::when_full`] says what a full table
//! does with a new key (by default, the key whose forgetting gives back the least
//! makes room: see [`WhenFull`]).
//!
//! # `KeyedLimiter` or `SharedLimiter<MemoryStore>`?
//!
//! Both keep a limit per key in this process's memory, bounded by a [`KeyedConfig`],
//! under the same algorithms. Use
//!
//! - [`KeyedLimiter`] when the limits live in this process only: it is the faster,
//!   and takes keys of any `Hash + Eq` type (an `IpAddr`, a `u64`), not only strings;
//! - [`SharedLimiter`]`<`[`MemoryStore`]`>` when the code should not change if the
//!   state moves out of the process: the same limiter runs over a Redis store or a
//!   [`Resilient`] one, and several named rules per key ([`SharedLimiter::all_of`])
//!   each report their own `RateLimit-Policy` through the HTTP layer.
//!
//! What the store's interface costs, both timed in each run on the same keys
//! (`benches/keyed.rs`, group `keyed_vs_store`: `try_acquire(&str, 1)` with GCRA, on
//! one key and on 10,000, every call admitted or every call denied):
//! `SharedLimiter<MemoryStore>` took about twice the time of `KeyedLimiter<String,
//! Gcra>` (medians of six runs 1.7 to 2.2 times, by scenario) and ran 2.6 times the
//! instructions (about 1,140 per call against 440): it builds a request, looks the key
//! up by prefix, tag and key, and builds a tracing span per call.
//!
#![cfg_attr(
    feature = "store",
    doc = "[`SharedLimiter`]: crate::store::SharedLimiter",
    doc = "[`SharedLimiter::all_of`]: crate::store::SharedLimiter::all_of",
    doc = "[`MemoryStore`]: crate::store::MemoryStore",
    doc = "[`Resilient`]: crate::store::Resilient"
)]
// Without the store (feature `store`), the names go to the list of features.
#![cfg_attr(
    not(feature = "store"),
    doc = "[`SharedLimiter`]: crate#features",
    doc = "[`SharedLimiter::all_of`]: crate#features",
    doc = "[`MemoryStore`]: crate#features",
    doc = "[`Resilient`]: crate#features"
)]

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::error::ConfigError;
use crate::observe::{Events, Reporter};

pub(crate) mod acquire;

use crate::sync::{Arc, Mutex};
use crate::table::{PerKey, Table};
use crate::time::{Clock, MonotonicClock, Nanos};
use crate::wait::per_key::Queues;
use acquire::KeyedGate;

pub use crate::table::{KeyedConfig, MAX_SHARDS, WhenFull};

/// A rate limiter per key, with at most [`KeyedConfig::max_keys`] keys in memory.
///
/// Each key gets its own limit under one shared configuration, as if each had its own
/// [`Limiter`](crate::Limiter). Keys live in shards, each behind its own lock on its own
/// cache line; a decision reads the clock once, hashes the key once, takes one shard
/// lock, looks the key up and runs the algorithm. Deciding for a key already present
/// allocates nothing.
///
/// Keys are hashed with the standard library's randomly seeded SipHash, so keys chosen
/// by an attacker (IP addresses, user names) cannot be crafted to collide.
///
/// # Memory bound and eviction
///
/// A key becomes evictable once it is idle: from [`Algorithm::idle_at`] on, a fresh
/// key would admit nothing more than the stored one, so forgetting it changes no
/// decision. A key idle only past the clock's end is never idle: at the end of the
/// clock's range a keyed limiter limits as a [`Limiter`](crate::Limiter) does. Shards sweep idle keys when they are full or have doubled since their last
/// sweep, and [`sweep`](KeyedLimiter::sweep) evicts every idle key at once.
///
/// **When a shard is full and every key in it is live**, [`KeyedConfig::when_full`]
/// decides: by default ([`WhenFull::EvictNearestIdle`]) the key whose forgetting gives
/// back the least among a sample of eight makes room, so newcomers are served while
/// heavily used keys keep their limits; [`WhenFull::Deny`] denies the newcomer instead and
/// [`WhenFull::Overflow`] sends it through one shared limit. [`WhenFull`] says what a
/// flood of unique keys can and cannot gain under each. Each shard holds its share of
/// `max_keys`, so a shard may fill up slightly before the whole limiter does.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let limiter: KeyedLimiter<String, Gcra, ManualClock> = KeyedLimiter::with_clock(
///     Gcra::new(Quota::per_second(2)?),
///     KeyedConfig::new(10_000),
///     clock.clone(),
/// )?;
/// assert!(limiter.try_acquire("alice", 2).is_ok());
/// assert!(limiter.try_acquire("alice", 1).is_err());
/// assert!(limiter.try_acquire("bob", 1).is_ok(), "bob has his own limit");
///
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(limiter.sweep(), 2, "both are back to a fresh state");
/// assert!(limiter.is_empty());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct KeyedLimiter<K, A: Algorithm, C: Clock = MonotonicClock> {
    inner: Arc<Inner<K, A, C>>,
    /// One FIFO queue per key with waiters.
    queues: Arc<Queues<K, KeyedGate<K, A, C>>>,
}

/// The table, the configuration, the clock and the events, shared by clones and key
/// queues.
struct Inner<K, A: Algorithm, C> {
    table: Table<PerKey<K, A>>,
    /// The configuration the shards copy. Its lock is held through a reconfiguration
    /// so that two cannot interleave shard by shard; decisions never take it.
    algorithm: Mutex<A>,
    clock: C,
    /// Set at most once, as a `Limiter`'s: unset, a decision pays one load for it.
    events: Reporter,
}

impl<K, A: Algorithm, C: Clock> Clone for KeyedLimiter<K, A, C> {
    fn clone(&self) -> Self {
        KeyedLimiter {
            inner: Arc::clone(&self.inner),
            queues: Arc::clone(&self.queues),
        }
    }
}

impl<K, A> KeyedLimiter<K, A>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
{
    /// A keyed limiter on the default monotonic clock.
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`]: [`ConfigError::Zero`] for `max_keys` or `shards`
    /// of zero, [`ConfigError::OutOfRange`] for a shard count that is not a power of
    /// two or exceeds 16384.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::IpAddr;
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let per_ip: KeyedLimiter<IpAddr, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(100_000))?;
    /// let ip: IpAddr = "192.0.2.1".parse().unwrap();
    /// assert!(per_ip.try_acquire(&ip, 1).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(algorithm: A, config: KeyedConfig) -> Result<KeyedLimiter<K, A>, ConfigError> {
        KeyedLimiter::with_clock(algorithm, config, MonotonicClock::new())
    }
}

/// # Deciding
impl<K, A, C> KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    /// A keyed limiter reading time from `clock`.
    ///
    /// # Errors
    ///
    /// As [`KeyedLimiter::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let limiter: KeyedLimiter<u64, Gcra, ManualClock> = KeyedLimiter::with_clock(
    ///     Gcra::new(Quota::per_second(1)?),
    ///     KeyedConfig::new(1_000),
    ///     ManualClock::new(),
    /// )?;
    /// assert!(limiter.try_acquire(&7, 1).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_clock(
        algorithm: A,
        config: KeyedConfig,
        clock: C,
    ) -> Result<KeyedLimiter<K, A, C>, ConfigError> {
        Ok(KeyedLimiter {
            inner: Arc::new(Inner {
                table: Table::with_algorithm(algorithm.clone(), &config)?,
                algorithm: Mutex::new(algorithm),
                clock,
                events: Reporter::default(),
            }),
            queues: Arc::default(),
        })
    }

    /// Takes `n` permits for `key` now if its limit allows, and never waits.
    ///
    /// A key not seen before starts fresh. `key` may be any borrowed form of `K`, such
    /// as `&str` for `String` keys; it is copied into an owned key only when a new key
    /// is stored.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] with a `retry_after` when the key's permits are not
    /// available now, or when `key` is new and its shard is full of live keys and
    /// [`KeyedConfig::when_full`] turns it away;
    /// [`Denied::Insufficient`] when `n` exceeds what the algorithm can ever grant at
    /// once. A denied request consumes nothing and stores no key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter: KeyedLimiter<String, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_minute(3)?), KeyedConfig::new(1_000))?;
    /// assert_eq!(limiter.try_acquire("alice", 1)?.remaining(), 2);
    /// assert_eq!(limiter.try_acquire("bob", 3)?.remaining(), 0);
    /// assert!(limiter.try_acquire("bob", 1).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let decision = self.decide(key, n);
        self.inner.events.decision(n, &decision);
        decision
    }

    /// [`try_acquire`](KeyedLimiter::try_acquire), unreported.
    #[inline(always)]
    fn decide<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        if let Some(queue) = self.queues.get(key) {
            // Callers wait on this key: they come first.
            return queue.try_acquire(n);
        }
        if self.queues.is_closed() {
            return Err(Denied::Closed);
        }
        let now = self.inner.clock.now();
        self.inner
            .table
            .with_state(key, now, n, |alg, state, now| alg.acquire(state, now, n))
    }

    /// Decides on `n` permits for `key` as [`try_acquire`](KeyedLimiter::try_acquire)
    /// would, without consuming any and without storing a new key.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](KeyedLimiter::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter: KeyedLimiter<String, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(5)?), KeyedConfig::new(1_000))?;
    /// assert_eq!(limiter.peek("carol", 1)?.remaining(), 4);
    /// assert!(limiter.is_empty(), "a peek stores nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.inner.table.peek(key, self.inner.clock.now(), n)
    }

    /// Books `n` permits for `key` now, for use after the returned wait, if that wait
    /// is at most `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`Limiter::reserve`](crate::Limiter::reserve), and [`Denied::Limited`] when
    /// `key` is new and its shard is full of live keys and [`KeyedConfig::when_full`]
    /// turns it away.
    ///
    /// Reported to the limiter's [`Events`] as `Admitted` when immediate, as `Waited`
    /// with the booked wait otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let limiter: KeyedLimiter<String, Gcra, ManualClock> = KeyedLimiter::with_clock(
    ///     Gcra::new(Quota::per_second(10)?.burst(1)?),
    ///     KeyedConfig::new(1_000),
    ///     ManualClock::new(),
    /// )?;
    /// assert!(limiter.reserve("job", 1, Duration::ZERO)?.is_immediate());
    /// let later = limiter.reserve("job", 1, Duration::from_secs(1))?;
    /// assert_eq!(later.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve<Q>(&self, key: &Q, n: u64, max_wait: Duration) -> Result<Reservation, Denied>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let reservation = if self.queues.is_closed() {
            Err(Denied::Closed)
        } else {
            let now = self.inner.clock.now();
            self.inner.table.with_state(key, now, n, |alg, state, now| {
                alg.reserve(state, now, n, max_wait)
            })
        };
        self.inner.events.reservation(n, &reservation);
        reservation
    }

    /// Gives back `n` permits taken for `key` earlier and not used. A key not stored
    /// is already at its fresh state, so refunding it does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let limiter: KeyedLimiter<String, Gcra, ManualClock> = KeyedLimiter::with_clock(
    ///     Gcra::new(Quota::per_second(2)?),
    ///     KeyedConfig::new(1_000),
    ///     ManualClock::new(),
    /// )?;
    /// limiter.try_acquire("dave", 2)?;
    /// limiter.refund("dave", 1);
    /// assert!(limiter.try_acquire("dave", 1).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund<Q>(&self, key: &Q, n: u64)
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.inner.table.refund(key, self.inner.clock.now(), n);
        if let Some(queue) = self.queues.get(key) {
            queue.serve();
        }
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// The current time on the limiter's clock.
    pub fn now(&self) -> Nanos {
        self.inner.clock.now()
    }
}

/// # Observing
impl<K, A, C> KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    /// Reports every decision of this limiter to `events`, as a
    /// [`Limiter`](crate::Limiter) does: `try_acquire` and `reserve` decisions (a
    /// reservation booked ahead as `Waited` with its wait), and the end of every
    /// `acquire` (`Admitted` at once, `Waited` with the time waited on the limiter's
    /// clock, or `Denied` with the reason), each with the permits asked. `peek`,
    /// `refund` and `sweep` decide nothing and report nothing. Events carry no key: a
    /// key need not be text.
    ///
    /// Clones share the hub, and the first hub attached stays: where one is attached
    /// already (here or on a clone), this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    ///
    /// let events = Events::new("per-user");
    /// events.subscribe(|event: &Event<'_>| println!("{event}")).detach();
    /// let limiter: KeyedLimiter<String, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(1_000))?
    ///         .with_events(events);
    /// assert_eq!(limiter.events().map(|e| e.name()), Some("per-user"));
    /// limiter.try_acquire("alice", 1)?; // prints "per-user: 1 permits admitted"
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_events(self, events: Events) -> KeyedLimiter<K, A, C> {
        self.inner.events.attach(events);
        self
    }

    /// The hub this limiter reports to, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::observe::Events;
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    ///
    /// let limiter: KeyedLimiter<u64, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(1_000))?;
    /// assert!(limiter.events().is_none());
    /// let limiter = limiter.with_events(Events::new("first"));
    /// let limiter = limiter.with_events(Events::new("second"));
    /// assert_eq!(limiter.events().map(Events::name), Some("first"));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn events(&self) -> Option<&Events> {
        self.inner.events.events()
    }
}

/// # Reconfiguring, sweeping and inspecting
impl<K, A, C> KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    /// Changes the configuration of every key at run time, keeping each key's state.
    ///
    /// `f` runs once, on a copy of the current configuration; the result is then
    /// installed shard by shard, so for a moment some keys decide under the old
    /// configuration and others under the new one, each switching at once.
    ///
    /// # Errors
    ///
    /// Whatever `f` returns; on `Err` nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::{Algorithm, Gcra};
    ///
    /// let limiter: KeyedLimiter<String, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(1)?), KeyedConfig::new(1_000))?;
    /// limiter.reconfigure(|gcra| {
    ///     gcra.set_quota(Quota::per_second(100)?);
    ///     Ok::<(), tollgate::ConfigError>(())
    /// })?;
    /// assert_eq!(limiter.algorithm().capacity(), 100);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn reconfigure<E>(&self, f: impl FnOnce(&mut A) -> Result<(), E>) -> Result<(), E> {
        let mut current = self.inner.algorithm.lock();
        let mut next = current.clone();
        f(&mut next)?;
        self.inner.table.set_algorithm(next.clone());
        *current = next;
        drop(current);
        // Waiters the new configuration lets through go at once.
        self.queues.serve_all();
        Ok(())
    }

    /// Evicts every idle key now, and returns how many were evicted.
    ///
    /// Shards also sweep by themselves as keys arrive, so calling this is optional;
    /// it returns memory sooner after a burst of one-off keys. It locks one shard at
    /// a time and scans it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter: KeyedLimiter<u32, Gcra, ManualClock> = KeyedLimiter::with_clock(
    ///     Gcra::new(Quota::per_second(10)?),
    ///     KeyedConfig::new(1_000),
    ///     clock.clone(),
    /// )?;
    /// limiter.try_acquire(&1, 1)?; // idle after 100 ms
    /// limiter.try_acquire(&2, 5)?; // idle after 500 ms
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(limiter.sweep(), 1);
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep(&self) -> usize {
        self.inner.table.sweep(self.inner.clock.now())
    }

    /// How many keys are stored, idle ones not yet swept included. Shards are counted
    /// one after another, so under concurrent use this is approximate; it never
    /// exceeds [`max_keys`](KeyedLimiter::max_keys).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter: KeyedLimiter<u32, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(1_000))?;
    /// limiter.try_acquire(&1, 1)?;
    /// limiter.try_acquire(&2, 1)?;
    /// assert_eq!(limiter.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.inner.table.len()
    }

    /// Whether no key is stored.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter: KeyedLimiter<u32, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(1_000))?;
    /// assert!(limiter.is_empty());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.inner.table.is_empty()
    }

    /// The most keys stored at once, as configured.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter: KeyedLimiter<u32, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), KeyedConfig::new(500))?;
    /// assert_eq!(limiter.max_keys(), 500);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_keys(&self) -> usize {
        self.inner.table.max_keys()
    }

    /// How many shards the keys are spread over.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let config = KeyedConfig::new(3).shards(8);
    /// let limiter: KeyedLimiter<u32, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), config)?;
    /// assert_eq!(limiter.shards(), 2, "no more shards than keys");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn shards(&self) -> usize {
        self.inner.table.shards()
    }

    /// A copy of the current configuration.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let gcra = Gcra::new(Quota::per_second(10)?);
    /// let limiter: KeyedLimiter<u32, Gcra> = KeyedLimiter::new(gcra, KeyedConfig::new(10))?;
    /// assert_eq!(limiter.algorithm(), gcra);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn algorithm(&self) -> A {
        self.inner.algorithm.lock().clone()
    }
}

impl<K, A, C> fmt::Debug for KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("algorithm", &self.algorithm())
            .field("len", &self.len())
            .field("max_keys", &self.max_keys())
            .field("shards", &self.shards())
            .field("clock", &self.inner.clock)
            .field("waiters", &self.queues.waiters())
            .finish_non_exhaustive()
    }
}
