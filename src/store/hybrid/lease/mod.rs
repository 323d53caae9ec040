//! [`LeaseLimiter`]: a limit shared through Redis, enforced in each process at
//! in-process speed from slices of the quota leased from Redis.

use std::fmt;
use std::mem;
use std::time::Duration;

use ::redis::Script;
use ::redis::aio::ConnectionLike;

mod table;
mod wait;

pub use wait::LeaseAcquire;

use self::table::{Owed, Slices};
use self::wait::LeaseGate;
use super::super::lease_id::{TAKE_ATTEMPTS, lease_id};
use super::super::redis::from_redis;
use super::super::{DEFAULT_MAX_KEY_LEN, StoreError, storage_key, validate_prefix};
use super::slice::Slice;
use crate::algorithm::Rule;
use crate::algorithm::script::{Arg, whole_micros};
use crate::decision::{Admitted, Decision, Denied, InsufficientCapacity, Limited};
use crate::error::ConfigError;
use crate::observe::{EventKind, Events};
use crate::sync::unmodeled::OnceLock;
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};
use crate::time::{Clock, MonotonicClock};
use crate::wait::per_key::Queues;

const SCRIPT: &str = include_str!("../lease.lua");

/// A slice is at most this fraction of what remains, by default.
const DEFAULT_DIVISOR: u64 = 8;
/// How long a slice should last at the local rate, by default.
const DEFAULT_REFILL_PERIOD: Duration = Duration::from_millis(10);
/// Keys whose leases [`LeaseLimiter::release_all`] settles at once.
const RELEASES_IN_FLIGHT: usize = 32;
/// How long a lease may be used, by default.
const DEFAULT_TERM: Duration = Duration::from_millis(20);
/// Keys held in this process by default.
const DEFAULT_MAX_KEYS: usize = 100_000;
/// Shards of the table of keys: a power of two.
const SHARDS: usize = 16;
/// Leases waiting to be settled per key, at most: past it (Redis failing again and
/// again) the oldest are forfeited, which only denies more.
const MAX_PENDING: usize = 8;
/// The weight of the newest rate sample in the moving average.
const RATE_WEIGHT: f64 = 0.5;
/// When a queue asks its gate to decide under its lock, which a remote gate's queue
/// never does, and no decision can be made without a round trip: ask again after this.
const NOT_NOW: Duration = Duration::from_millis(10);

/// A limit shared by the processes of a fleet through Redis, decided in each process
/// at in-process speed, that never admits more than the limit: each process leases a
/// slice of what remains and admits from it locally.
///
/// # How it works
///
/// Each process (a *node*) keeps, per key, a *slice*: permits leased from Redis. A
/// decision takes its permits from the slice with one compare-and-swap, under a
/// short lock on one shard of the table of keys (a hash lookup), with no round trip.
/// When the slice cannot serve a request, or runs low, one task of the node takes a
/// new lease in one atomic script call, on the Redis server's `TIME`, and the key's
/// other requests wait for it. The script grants
///
/// `need + up to min(want − need, ⌊available / divisor⌋ − need)` permits, i.e.
/// `max(need, min(want, ⌊available / divisor⌋))`, capped by `available`,
///
/// where `need` is what the request asks, `available` what the rule still admits
/// across the fleet, and `want` the node's demand over one
/// [`refill_period`](Self::with_refill_period): a moving average of the permits this
/// node took from its last slices per second, times the period, at most
/// [`max_slice`](Self::with_max_slice). So a slice is large while much remains, and
/// shrinks to the request alone, decided exactly in Redis, near the limit. A lease
/// is usable for its [term](Self::with_lease_term) (and, for a fixed window, not past
/// its window); then its unused permits go back.
///
/// Once Redis denies a request (or grants the last permits it had), the node denies
/// requests as large on that key without asking again until the denial's
/// `retry_after` or one refill period, whichever comes first (envoy ratelimit's local
/// cache of over-limit keys); then one request asks Redis while the others are still
/// denied.
///
/// # Rules
///
/// - [`Rule::FixedWindow`] (not [counting denied
///   acquires](crate::algorithm::FixedWindow::counting_denied)): windows on multiples
///   of their length since the Unix epoch, by the server's clock. Slices are permits
///   of the current window; each lease ends with its window.
/// - [`Rule::SlidingCounter`]: as a fixed window (windows on multiples of their
///   length since the Unix epoch), the previous window's count weighing on as the
///   rule says; slices are permits of the current window.
/// - [`Rule::Gcra`]: a lease of `n` permits is a lease of time. Taking it moves the
///   bucket's theoretical arrival time `n` emission intervals later, within the burst
///   tolerance, as `n` acquires at once would.
///
/// Any other rule is a [`ConfigError::OutOfRange`].
///
/// # Over-admission: none, by construction
///
/// Redis grants a slice only as the rule admits its permits at that instant, so for a
/// fixed window the slices granted in a window add up to at most its limit, and a
/// node admits from a slice only within that window (its lease ends no later than
/// the window, on the node's clock counted from before the call): **at most `limit`
/// admitted per window**, across the fleet.
///
/// For a sliding window counter, each grant is admitted by the rule's estimate at its
/// instant, and the previous window's weight only falls within a window, so the
/// estimate over the permits admitted never passes the limit either.
///
/// For a GCRA, the permits granted form a sequence the bucket admits, placed at the
/// instants they were granted; a node spends each within the lease's term `L` after
/// its grant. So over any interval of length `d`, the fleet admits at most what the
/// bucket grants over `d + L`: **at most `burst + rate × (d + L)`**, where an exact
/// bucket admits `burst + rate × d`. The term is short (20 ms by default) so that
/// permits are not hoarded and spent later in a burst.
///
/// Unused permits go back exactly. For a fixed window the count is a sum, and comes
/// down by the permits given back. For a GCRA the script credits at most the debt the
/// bucket has carried at every instant since the grant (see `lease.lua`), so that a
/// give-back never credits time the bucket already refilled.
///
/// # Under-admission: stranded slices
///
/// Permits in one node's slice are not available to the others. At any instant the
/// fleet holds at most one slice per node and key (plus the one being replaced), each
/// at most `available / divisor` when granted and at most the node's demand over one
/// refill period. So a request may be denied while up to about
/// `Σ over nodes min(remaining / divisor, rate × refill_period)` permits sit unused
/// in other nodes' slices; they go back when their lease ends and their node next
/// decides on the key, or at [`release_all`](Self::release_all). A node that dies
/// holding a slice takes it with it: a fixed window gets it back when the window
/// ends, a GCRA as the bucket refills (within `slice × emission interval`). The
/// benchmark (`benches/hybrid.rs`) measures this.
///
/// # When Redis fails
///
/// A request that needs a lease and cannot get one returns the [`StoreError`],
/// having taken nothing; decisions from slices on hand go on until their terms end.
/// The permits of a lease whose reply was lost stay granted in Redis and are never
/// used (only under-admission).
///
/// # Keys
///
/// Per key, a hash `{prefix}:{tag}:{name}` (or `{prefix}:{tag}` without a name)
/// holding the rule's state and the live leases, and a sorted set
/// `{prefix}:{tag}:{name}:leases` of the leases by expiry, both expiring a second
/// after the window (fixed window) or the bucket's refill and the last lease (GCRA).
/// They are not the keys [`RedisStore`](crate::store::RedisStore) uses for the same
/// rule: count a limit in one mode only. Leases are named by random 64-bit ids (the
/// fleet shedder's mechanism), so a lease from before a Redis restart without
/// persistence names nothing after it.
///
/// # Memory
///
/// At most `max_keys` keys are held in this process (100,000 unless set with
/// [`with_max_keys`](Self::with_max_keys)). When a new key finds its shard full, keys
/// whose lease has ended are forgotten, and the permits their slices still held are
/// given back from a task on the current tokio runtime; if no key's lease has ended,
/// the new key is decided exactly in Redis, taking no slice.
///
/// # Deciding and waiting
///
/// As every limiter of the crate: [`check`](Self::check) decides now, from the slice
/// or by a round trip when a lease is needed; [`try_acquire`](Self::try_acquire)
/// decides from the slice alone or says it cannot; [`acquire`](Self::acquire) waits
/// in the crate's FIFO queue, one per tag with waiters, asking again after each
/// denial's `retry_after`, and [`acquire_timeout`](Self::acquire_timeout) fails at
/// once when that is after its timeout.
///
/// Cloning is cheap and shares the slices and the queues: a clone is the same node.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::store::LeaseLimiter;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let connection = client.get_multiplexed_async_connection().await?;
/// let rule = FixedWindow::new(1_000, Duration::from_secs(60))?;
/// let limiter = LeaseLimiter::new(connection, "api", rule)?;
/// match limiter.check("user-42", 1).await? {
///     Ok(admitted) => println!("{} left", admitted.remaining()),
///     Err(denied) => println!("retry after {:?}", denied.retry_after()),
/// }
/// limiter.close().await?; // gives the unused permits back
/// # Ok(())
/// # }
/// ```
pub struct LeaseLimiter<Conn, C = MonotonicClock>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    node: Node<Conn, C>,
    queues: Arc<Queues<String, LeaseGate<Conn, C>>>,
}

/// This process's side of the limit: what the clones share, and this clone's
/// options and clock.
struct Node<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    shared: Arc<Shared<Conn>>,
    options: Options,
    clock: C,
}

/// What the clones of one limiter share: the node.
struct Shared<Conn>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    connection: Conn,
    script: Script,
    terms: Terms,
    prefix: Box<str>,
    name: Box<str>,
    slices: Slices,
    events: OnceLock<Events>,
    closed: AtomicBool,
}

/// The rule, as the script reads it.
#[derive(Clone, Copy, Debug)]
struct Terms {
    kind: Kind,
    /// Fixed window `{limit, window µs, offset µs}`; GCRA `{interval µs, tolerance µs,
    /// burst}`.
    args: [u64; 3],
    capacity: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    FixedWindow,
    SlidingCounter,
    Gcra,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::FixedWindow => "fixed_window",
            Kind::SlidingCounter => "sliding_counter",
            Kind::Gcra => "gcra",
        }
    }
}

/// How slices are sized and how long leases last.
#[derive(Clone, Copy, Debug)]
struct Options {
    max_slice: u64,
    divisor: u64,
    refill_period: Duration,
    term: Duration,
    term_micros: u64,
    max_keys: usize,
}

/// One key on this node: its slice, the Redis keys, and the lease behind the slice.
struct Slot {
    slice: Slice,
    /// What remained in Redis, beyond this slice, at the last lease taken.
    global: AtomicU64,
    /// When the window ends or the bucket is full again (limiter's clock).
    reset_at: AtomicU64,
    /// A new lease is fetched ahead once the slice holds fewer than this.
    low: AtomicU64,
    /// The smallest request Redis last denied, and until when (limiter's clock)
    /// requests as large are denied here without asking; `retry_at` is the denial's.
    denied_need: AtomicU64,
    recheck_at: AtomicU64,
    retry_at: AtomicU64,
    /// Forgotten by the table: a task that held it looks the key up again.
    retired: AtomicBool,
    /// The key as callers name it; `key` is its name in Redis.
    tag: Box<str>,
    key: Box<str>,
    leases_key: Box<str>,
    /// Held by the one task taking or settling a lease for this key.
    lease: tokio::sync::Mutex<Lease>,
}

/// The lease behind a slot's slice, and the leases to settle.
#[derive(Debug, Default)]
struct Lease {
    /// The lease the slice holds permits of.
    id: Option<u64>,
    /// Permits put in the slice with it, and when (limiter's clock).
    size: u64,
    installed_at: u64,
    /// Leases replaced or ended, with their unused permits, to give back with the
    /// next call.
    pending: Vec<(u64, u64)>,
    /// Permits per second this node took from its slices, a moving average; `None`
    /// before the first slice ended.
    rate: Option<f64>,
}

impl Lease {
    /// Permits per second taken from the slice of `size` installed at
    /// `installed_at`, `unused` left at `now`.
    fn sample(&self, unused: u64, now: u64) -> f64 {
        let used = self.size.saturating_sub(unused) as f64;
        let elapsed = now.saturating_sub(self.installed_at).max(1) as f64 / 1e9;
        used / elapsed
    }

    /// `rate` with `sample` weighed in.
    fn blend(rate: Option<f64>, sample: f64) -> f64 {
        match rate {
            Some(rate) => rate + RATE_WEIGHT * (sample - rate),
            None => sample,
        }
    }

    /// The slice's lease ended with `unused` permits at `now`: samples the rate, and
    /// queues the lease to settle.
    fn close(&mut self, unused: u64, now: u64) {
        let Some(id) = self.id.take() else {
            return;
        };
        self.rate = Some(Lease::blend(self.rate, self.sample(unused, now)));
        if self.pending.len() == MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push((id, unused));
    }

    /// The slice to ask for at `now`, the current one holding `left`: the demand
    /// over one refill period (counting the current slice's use so far), at least
    /// `need`.
    fn want(&self, need: u64, left: u64, now: u64, options: &Options) -> u64 {
        let rate = match self.id {
            Some(_) => Some(Lease::blend(self.rate, self.sample(left, now))),
            None => self.rate,
        };
        let demand = rate.map_or(0.0, |rate| {
            (rate * options.refill_period.as_secs_f64()).ceil()
        });
        // `as` saturates: NaN is 0, and a huge rate the cap.
        (demand as u64).min(options.max_slice).max(need)
    }
}

/// What a decision from the slice found.
enum Fast {
    /// Taken: the slice's permits left, and the slot if it runs low.
    Taken(Decision, Option<Arc<Slot>>),
    /// Denied without asking: Redis denied as much a moment ago.
    Denied(Decision),
    /// A round trip is needed.
    Miss,
}

impl<Conn> LeaseLimiter<Conn, MonotonicClock>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// `rule` over `connection` (a
    /// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), a
    /// [`ConnectionManager`](redis::aio::ConnectionManager), a Cluster connection…),
    /// keys under `prefix`, on the monotonic clock, with slices of at most an eighth
    /// of what remains, a refill period of 10 ms and leases of 20 ms.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::{Gcra, SlidingLog};
    /// # use tollgate::store::LeaseLimiter;
    /// # use tollgate::Quota;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let gcra = Gcra::new(Quota::per_second(1_000)?);
    /// let limiter = LeaseLimiter::new(connection.clone(), "api", gcra)?;
    /// let log = SlidingLog::new(10, Duration::from_secs(1))?;
    /// assert!(LeaseLimiter::new(connection, "api", log).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`]: [`ConfigError::OutOfRange`] for a rule other than
    /// [`Rule::FixedWindow`] (not counting denied acquires), [`Rule::SlidingCounter`]
    /// or [`Rule::Gcra`], or a
    /// prefix with a brace in it; the rule's own errors when the script cannot hold
    /// it exactly (a time that is not whole microseconds, or too long).
    pub fn new(connection: Conn, prefix: &str, rule: impl Into<Rule>) -> Result<Self, StoreError> {
        LeaseLimiter::with_clock(connection, prefix, rule, MonotonicClock::new())
    }
}

impl<Conn, C> LeaseLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// [`new`](LeaseLimiter::new), reading time from `clock` (a
    /// [`ManualClock`](crate::time::ManualClock) in tests). The clock times the
    /// leases' terms and the denials held here; Redis decides on its own clock.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::time::ManualClock;
    /// # use tollgate::store::LeaseLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = LeaseLimiter::with_clock(connection, "api", rule, ManualClock::new())?;
    /// assert_eq!(limiter.redis_key("user-42"), "api:{user-42}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`new`](LeaseLimiter::new).
    pub fn with_clock(
        connection: Conn,
        prefix: &str,
        rule: impl Into<Rule>,
        clock: C,
    ) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let terms = Terms::of(&rule.into())?;
        let options = Options {
            max_slice: terms.capacity,
            divisor: DEFAULT_DIVISOR,
            refill_period: DEFAULT_REFILL_PERIOD,
            term: DEFAULT_TERM,
            term_micros: whole_micros(DEFAULT_TERM, "term")?,
            max_keys: DEFAULT_MAX_KEYS,
        };
        Ok(LeaseLimiter {
            node: Node {
                shared: Arc::new(Shared::new(connection, terms, prefix, "", options.max_keys)),
                options,
                clock,
            },
            queues: Arc::default(),
        })
    }

    /// The same limiter with its keys named `{prefix}:{tag}:{name}`, as a
    /// [`SharedLimiter`](crate::store::SharedLimiter) names a rule's keys. It starts
    /// with no slices: call it before deciding.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::LeaseLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = LeaseLimiter::new(connection, "api", rule)?.with_name("minute");
    /// assert_eq!(limiter.redis_key("user-42"), "api:{user-42}:minute");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_name(self, name: &str) -> Self {
        let shared = &self.node.shared;
        let fresh = Shared::new(
            shared.connection.clone(),
            shared.terms,
            &shared.prefix,
            name,
            self.node.options.max_keys,
        );
        if let Some(events) = shared.events.get() {
            let _ = fresh.events.set(events.clone());
        }
        LeaseLimiter {
            node: Node {
                shared: Arc::new(fresh),
                options: self.node.options,
                clock: self.node.clock.clone(),
            },
            queues: Arc::default(),
        }
    }

    /// The same limiter taking slices of at most `max_slice` permits.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for 0, [`ConfigError::OutOfRange`] for more than the
    /// rule's [capacity](Self::capacity).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::LeaseLimiter;
    /// # use tollgate::ConfigError;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = LeaseLimiter::new(connection, "api", rule)?;
    /// assert!(matches!(limiter.clone().with_max_slice(0), Err(ConfigError::Zero { .. })));
    /// assert!(matches!(limiter.clone().with_max_slice(101), Err(ConfigError::OutOfRange { .. })));
    /// let limiter = limiter.with_max_slice(10)?;
    /// assert_eq!(limiter.max_slice(), 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_max_slice(mut self, max_slice: u64) -> Result<Self, ConfigError> {
        if max_slice == 0 {
            return Err(ConfigError::Zero {
                parameter: "max_slice",
            });
        }
        if max_slice > self.node.shared.terms.capacity {
            return Err(ConfigError::OutOfRange {
                parameter: "max_slice",
                expected: "at most the rule's capacity",
            });
        }
        self.node.options.max_slice = max_slice;
        Ok(self)
    }

    /// The same limiter taking slices of at most `1 / divisor` of what remains (beyond
    /// the request itself): 8 by default. 1 lets one node take all that remains.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for 0, [`ConfigError::OutOfRange`] above 2^52 (the
    /// script's exact integers).
    pub fn with_divisor(mut self, divisor: u64) -> Result<Self, ConfigError> {
        if divisor == 0 {
            return Err(ConfigError::Zero {
                parameter: "divisor",
            });
        }
        if divisor > 1 << 52 {
            return Err(ConfigError::OutOfRange {
                parameter: "divisor",
                expected: "at most 2^52",
            });
        }
        self.node.options.divisor = divisor;
        Ok(self)
    }

    /// The same limiter sizing slices to last `period` at this node's rate: 10 ms by
    /// default. Longer periods mean fewer round trips and more permits held per node.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero period, [`ConfigError::OutOfRange`] for one
    /// longer than the lease's [term](Self::with_lease_term) (a slice could not be
    /// spent before its lease ends).
    pub fn with_refill_period(mut self, period: Duration) -> Result<Self, ConfigError> {
        if period.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "refill_period",
            });
        }
        if period > self.node.options.term {
            return Err(ConfigError::OutOfRange {
                parameter: "refill_period",
                expected: "at most the lease term",
            });
        }
        self.node.options.refill_period = period;
        Ok(self)
    }

    /// The same limiter with leases usable for `term` after they are asked for: 20 ms
    /// by default. A GCRA admits at most `rate × term` more over any interval than an
    /// exact bucket would; a fixed window's leases also end with their window. The
    /// refill period is shortened to the term if longer.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero term; [`ConfigError::OutOfRange`] for one that
    /// is not whole microseconds and [`ConfigError::TooLong`] beyond 2^52 µs (the
    /// script's arithmetic).
    pub fn with_lease_term(mut self, term: Duration) -> Result<Self, ConfigError> {
        if term.is_zero() {
            return Err(ConfigError::Zero { parameter: "term" });
        }
        self.node.options.term_micros = whole_micros(term, "term")?;
        self.node.options.term = term;
        self.node.options.refill_period = self.node.options.refill_period.min(term);
        Ok(self)
    }

    /// The same limiter holding at most `max_keys` keys in this process. It starts
    /// with no slices: call it before deciding.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `max_keys == 0`.
    pub fn with_max_keys(mut self, max_keys: usize) -> Result<Self, ConfigError> {
        if max_keys == 0 {
            return Err(ConfigError::Zero {
                parameter: "max_keys",
            });
        }
        self.node.options.max_keys = max_keys;
        let name = self.node.shared.name.clone();
        Ok(self.with_name(&name))
    }

    /// Reports this limiter's decisions to `events`, each with its tag: `check` and
    /// `try_acquire` decisions, with the permits asked. A [`StoreError`] is not a
    /// decision and is not reported, nor is a `try_acquire` that could not decide.
    ///
    /// Clones share the hub, and the first hub attached stays.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::LeaseLimiter;
    /// use tollgate::observe::Events;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let rule = FixedWindow::new(100, Duration::from_secs(60))?;
    /// let limiter = LeaseLimiter::new(connection, "api", rule)?.with_events(Events::new("api"));
    /// assert_eq!(limiter.events().map(Events::name), Some("api"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_events(self, events: Events) -> Self {
        let _ = self.node.shared.events.set(events);
        self
    }

    /// The hub this limiter reports to, if any.
    pub fn events(&self) -> Option<&Events> {
        self.node.shared.events.get()
    }

    /// The most permits one request can get: the window's limit or the bucket's
    /// burst.
    pub fn capacity(&self) -> u64 {
        self.node.shared.terms.capacity
    }

    /// The largest slice taken.
    pub fn max_slice(&self) -> u64 {
        self.node.options.max_slice
    }

    /// A slice is at most `1 / divisor` of what remains.
    pub fn divisor(&self) -> u64 {
        self.node.options.divisor
    }

    /// How long a slice should last at this node's rate.
    pub fn refill_period(&self) -> Duration {
        self.node.options.refill_period
    }

    /// How long a lease is usable.
    pub fn lease_term(&self) -> Duration {
        self.node.options.term
    }

    /// The clock it reads time from.
    pub fn clock(&self) -> &C {
        &self.node.clock
    }

    /// Keys held in this process now.
    pub fn len(&self) -> usize {
        self.node.shared.slices.len()
    }

    /// Whether no key is held in this process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The permits this node holds for `tag` now, usable or not.
    pub fn held(&self, tag: &str) -> u64 {
        self.node
            .shared
            .slices
            .with(tag, |slot| slot.map_or(0, |slot| slot.slice.left()))
    }

    /// The Redis hash holding `tag`'s state and leases.
    pub fn redis_key(&self, tag: &str) -> String {
        storage_key(&self.node.shared.prefix, tag, &self.node.shared.name)
    }
}

/// # Deciding
impl<Conn, C> LeaseLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// Takes `n` permits for `tag`: from this node's slice if it holds them, else by
    /// one round trip that takes a new lease (other requests for `tag` on this node
    /// wait for it, then take from the new slice). Never waits for permits. `n == 0`
    /// looks.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::LeaseLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// # let limiter = LeaseLimiter::new(connection, "api", FixedWindow::new(2, Duration::from_secs(60))?)?;
    /// assert!(limiter.check("user-42", 2).await?.is_ok());
    /// assert!(limiter.check("user-42", 1).await?.is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The [`StoreError`] of a lease this request needed and could not take (nothing
    /// is taken then), or [`StoreError::KeyTooLong`]. A request for more than the
    /// capacity is `Ok(Err(Denied::Insufficient))`, decided without Redis; after
    /// [`close`](Self::close), `Ok(Err(Denied::Closed))`.
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits for a lease, it takes nothing; if its own call was in
    /// flight, the lease granted (if any) is lost to this node and its permits stay
    /// counted in Redis, which only denies more. Leases that call was settling are
    /// settled with the next one.
    pub async fn check(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        let decision = match self.queued_denial(tag, n) {
            Some(denied) => Err(denied),
            None => self.node.decide(tag, n).await?,
        };
        self.node.report(tag, n, &decision);
        Ok(decision)
    }

    /// [`check`](Self::check) without a future, when this node can decide without a
    /// round trip: its slice for `tag` holds `n` permits, or Redis denied as much a
    /// moment ago. `None` when it cannot, having done nothing: call `check`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::FixedWindow;
    /// # use tollgate::store::LeaseLimiter;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// # let limiter = LeaseLimiter::new(connection, "api", FixedWindow::new(10, Duration::from_secs(1))?)?;
    /// let decision = match limiter.try_acquire("user-42", 1) {
    ///     Some(decision) => decision?,
    ///     None => limiter.check("user-42", 1).await?, // a lease is needed
    /// };
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check), inside the `Some`.
    pub fn try_acquire(&self, tag: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        if let Some(denied) = self.queued_denial(tag, n) {
            let decision = Err(denied);
            self.node.report(tag, n, &decision);
            return Some(Ok(decision));
        }
        let decision = self.node.decide_now(tag, n)?;
        if let Ok(decision) = &decision {
            self.node.report(tag, n, decision);
        }
        Some(decision)
    }

    /// Gives back the permits this node holds for `tag`, and settles its leases: the
    /// permits Redis credited (for a GCRA, those whose time had not come back yet).
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer: the leases are settled with the
    /// next call for `tag` instead.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the leases are settled with the next call for `tag`.
    pub async fn release(&self, tag: &str) -> Result<u64, StoreError> {
        let Some(slot) = self.node.shared.slices.with(tag, |slot| slot.cloned()) else {
            return Ok(0);
        };
        self.node
            .shared
            .release(&slot, self.node.clock.now().as_u64())
            .await
    }

    /// [`release`](Self::release) for every key this node holds: before a shutdown,
    /// or to hand quota back to the fleet.
    ///
    /// # Errors
    ///
    /// The first [`StoreError`]; every key is tried.
    ///
    /// # Cancel safety
    ///
    /// As [`release`](Self::release).
    pub async fn release_all(&self) -> Result<u64, StoreError> {
        let now = self.node.clock.now().as_u64();
        let mut credited = 0;
        let mut first_error = None;
        let mut tally = |released: Result<u64, StoreError>| match released {
            Ok(n) => credited += n,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        };
        let slots = self.node.shared.slices.all();
        match tokio::runtime::Handle::try_current() {
            // Several keys' calls in flight at once: one after the other, a node
            // holding thousands of keys would take seconds to shut down.
            Ok(runtime) => {
                let mut calls = tokio::task::JoinSet::new();
                for slot in slots {
                    if calls.len() == RELEASES_IN_FLIGHT {
                        if let Some(released) = calls.join_next().await {
                            tally(released.unwrap_or(Ok(0)));
                        }
                    }
                    let shared = Arc::clone(&self.node.shared);
                    calls.spawn_on(async move { shared.release(&slot, now).await }, &runtime);
                }
                while let Some(released) = calls.join_next().await {
                    tally(released.unwrap_or(Ok(0)));
                }
            }
            Err(_) => {
                for slot in slots {
                    tally(self.node.shared.release(&slot, now).await);
                }
            }
        }
        first_error.map_or(Ok(credited), Err)
    }

    /// Closes the limiter on this node, every clone included: later decisions are
    /// [`Denied::Closed`], and every waiter and later wait fails with
    /// [`AcquireError::Closed`](crate::AcquireError::Closed). Then gives back
    /// everything it holds, as [`release_all`](Self::release_all): the permits
    /// credited.
    ///
    /// Dropping the last clone without closing gives back what it holds from a task
    /// spawned on the current tokio runtime, if there is one.
    ///
    /// # Errors
    ///
    /// As [`release_all`](Self::release_all).
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the limiter is closed, and the leases not settled yet are
    /// settled by the next `release` or when the last clone is dropped.
    pub async fn close(&self) -> Result<u64, StoreError> {
        self.node.shared.closed.store(true, Ordering::Release);
        self.queues.close();
        self.release_all().await
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.node.shared.closed.load(Ordering::Acquire)
    }
}

impl<Conn, C> Node<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// Decisions made before any table lookup: closed, too large, key too long.
    #[inline]
    fn early(&self, tag: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Some(Ok(Err(Denied::Closed)));
        }
        let capacity = self.shared.terms.capacity;
        if n > capacity {
            return Some(Ok(Err(InsufficientCapacity::new(n, capacity).into())));
        }
        let len = self.shared.leases_key_len(tag);
        if len > DEFAULT_MAX_KEY_LEN {
            return Some(Err(StoreError::KeyTooLong {
                len,
                max: DEFAULT_MAX_KEY_LEN,
            }));
        }
        None
    }

    /// [`LeaseLimiter::try_acquire`] past the queue: `None` if a round trip is needed.
    fn decide_now(&self, tag: &str, n: u64) -> Option<Result<Decision, StoreError>> {
        if let Some(early) = self.early(tag, n) {
            return Some(early);
        }
        match self.fast(tag, n) {
            Fast::Taken(decision, _) | Fast::Denied(decision) => Some(Ok(decision)),
            Fast::Miss => None,
        }
    }

    /// From the slice, under the shard's lock.
    #[inline]
    fn fast(&self, tag: &str, n: u64) -> Fast {
        let now = self.clock.now().as_u64();
        let capacity = self.shared.terms.capacity;
        self.shared.slices.with(tag, |slot| {
            let Some(slot) = slot else {
                return Fast::Miss;
            };
            if let Some(left) = slot.slice.take(n, now) {
                let low = left < slot.low.load(Ordering::Relaxed);
                return Fast::Taken(
                    Ok(slot.admitted(capacity, left, now)),
                    low.then(|| Arc::clone(slot)),
                );
            }
            match slot.cached_denial(capacity, n, now) {
                Some(denied) => Fast::Denied(Err(denied)),
                None => match slot.denial_while_asking(capacity, n, now) {
                    Some(denied) => Fast::Denied(Err(denied)),
                    None => Fast::Miss,
                },
            }
        })
    }

    async fn decide(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        if let Some(early) = self.early(tag, n) {
            return early;
        }
        match self.fast(tag, n) {
            Fast::Taken(decision, low) => {
                if let Some(slot) = low {
                    self.prefetch(&slot).await;
                }
                return Ok(decision);
            }
            Fast::Denied(decision) => return Ok(decision),
            Fast::Miss => {}
        }
        loop {
            let now = self.clock.now().as_u64();
            let mut owed = Vec::new();
            let slot = self.shared.slot(tag, now, &mut owed);
            if !owed.is_empty() {
                self.give_back_forgotten(owed).await;
            }
            let Some(slot) = slot else {
                return self.exactly(tag, n).await;
            };
            let mut lease = slot.lease.lock().await;
            if slot.retired.load(Ordering::Acquire) {
                continue;
            }
            // Another task may have taken a lease while this one waited.
            let now = self.clock.now().as_u64();
            let capacity = self.shared.terms.capacity;
            if let Some(left) = slot.slice.take(n, now) {
                return Ok(Ok(slot.admitted(capacity, left, now)));
            }
            if let Some(denied) = slot.cached_denial(capacity, n, now) {
                return Ok(Err(denied));
            }
            return self.refill(&slot, &mut lease, n, now).await;
        }
    }

    /// Gives back the leases of keys the table forgot to make room: from a task on
    /// the current tokio runtime, so that the request that made room does not wait
    /// for it, or here without one. Failing, the leases run out instead (at their
    /// key's expiry), which only denies more meanwhile.
    async fn give_back_forgotten(&self, owed: Vec<Owed>) {
        let shared = Arc::clone(&self.shared);
        let give_back = async move {
            for (slot, settles) in owed {
                let _ = shared.give_back(&slot, &settles).await;
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(give_back)),
            Err(_) => give_back.await,
        }
    }

    /// Takes a lease ahead, the slice running low, unless another task is at it.
    async fn prefetch(&self, slot: &Arc<Slot>) {
        let Ok(mut lease) = slot.lease.try_lock() else {
            return;
        };
        if slot.retired.load(Ordering::Acquire) {
            return;
        }
        let now = self.clock.now().as_u64();
        if slot.recheck_at.load(Ordering::Acquire) > now {
            return;
        }
        // The request was decided already: a failure here waits for the next one.
        let _ = self.refill(slot, &mut lease, 0, now).await;
    }

    /// Takes a new lease for `slot`, `need` of its permits for the caller, settling
    /// the leases ended meanwhile in the same call.
    async fn refill(
        &self,
        slot: &Slot,
        lease: &mut Lease,
        need: u64,
        now: u64,
    ) -> Result<Decision, StoreError> {
        let capacity = self.shared.terms.capacity;
        if lease.id.is_some() && slot.slice.until() <= now {
            lease.close(slot.slice.drain(), now);
        }
        let want = if need == 0 && lease.id.is_none() {
            // Nothing to fetch ahead of: a look.
            0
        } else {
            lease.want(need.max(1), slot.slice.left(), now, &self.options)
        };
        // Kept until the call answers: if it fails, or this future is dropped during
        // it, they are sent again with the next call (a settled lease's record is gone
        // from Redis, so one settled twice is credited once).
        let settles = lease.pending.clone();
        let reply = self
            .shared
            .take(slot, need, want, &self.options, &settles)
            .await?;
        lease.pending.clear();
        let (id, [status, granted, valid, remaining, retry, reset]) = reply;
        let micros = |us: u64| us.saturating_mul(1_000);
        slot.global.store(remaining, Ordering::Relaxed);
        slot.reset_at
            .store(now.saturating_add(micros(reset)), Ordering::Relaxed);
        if status == 0 {
            slot.deny(need, now, micros(retry), &self.options);
            return Ok(Err(Limited::new(
                Duration::from_micros(retry),
                capacity,
                remaining + slot.slice.left(),
                Duration::from_micros(reset),
            )
            .into()));
        }
        slot.recheck_at.store(0, Ordering::Release);
        slot.retry_at.store(0, Ordering::Relaxed);
        slot.denied_need.store(0, Ordering::Relaxed);
        if remaining == 0 && retry > 0 {
            // Redis has nothing left: once this slice is spent, deny here until one
            // more permit would fit, or a refill period.
            slot.deny(1, now, micros(retry), &self.options);
        }
        if granted == 0 {
            // Nothing beyond a look: the slice stays, fetched no further ahead.
            slot.low.store(0, Ordering::Relaxed);
            return Ok(Ok(Admitted::new(
                capacity,
                remaining + slot.slice.left(),
                Duration::from_micros(reset),
            )));
        }
        let mine = granted - need;
        let until = now.saturating_add(micros(valid));
        let unused = slot.slice.install(mine, until);
        lease.close(unused, now);
        lease.id = Some(id);
        lease.size = granted;
        lease.installed_at = now;
        // Fetch the next lease once three quarters of this one are spent; a slice of
        // one or two permits is fetched when empty.
        slot.low.store(granted / 4, Ordering::Relaxed);
        Ok(Ok(Admitted::new(
            capacity,
            remaining + mine,
            Duration::from_micros(reset),
        )))
    }

    /// Decides in Redis, exactly, a key the full table cannot hold.
    async fn exactly(&self, tag: &str, n: u64) -> Result<Decision, StoreError> {
        let slot = self.shared.new_slot(tag);
        let mut lease = slot.lease.lock().await;
        let now = self.clock.now().as_u64();
        // Its lease holds only what the request takes: nothing to give back.
        self.refill(&slot, &mut lease, n, now).await
    }

    /// Reports a decision on `n` permits for `tag`, if anyone listens.
    #[inline]
    fn report(&self, tag: &str, n: u64, decision: &Decision) {
        if let Some(events) = self.shared.events.get() {
            if events.is_observed() {
                emit(events, tag, n, EventKind::of_decision(decision));
            }
        }
    }
}

/// Off the deciding path: only a limiter someone listens to gets here.
#[cold]
#[inline(never)]
fn emit(events: &Events, tag: &str, n: u64, kind: EventKind) {
    events.emit_keyed(tag, n, kind);
}

impl<Conn> Shared<Conn>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn new(connection: Conn, terms: Terms, prefix: &str, name: &str, max_keys: usize) -> Self {
        Shared {
            connection,
            script: Script::new(SCRIPT),
            terms,
            prefix: prefix.into(),
            name: name.into(),
            slices: Slices::new(max_keys),
            events: OnceLock::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// The length of a key's sorted set of leases, its longest key.
    fn leases_key_len(&self, tag: &str) -> usize {
        let name = if self.name.is_empty() {
            0
        } else {
            self.name.len() + 1
        };
        self.prefix.len() + tag.len() + name + 3 + LEASES_SUFFIX.len()
    }

    fn new_slot(&self, tag: &str) -> Slot {
        let key = storage_key(&self.prefix, tag, &self.name);
        let leases_key = format!("{key}{LEASES_SUFFIX}");
        Slot {
            slice: Slice::new(),
            global: AtomicU64::new(0),
            reset_at: AtomicU64::new(0),
            low: AtomicU64::new(0),
            denied_need: AtomicU64::new(0),
            recheck_at: AtomicU64::new(0),
            retry_at: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            tag: tag.into(),
            key: key.into(),
            leases_key: leases_key.into(),
            lease: tokio::sync::Mutex::new(Lease::default()),
        }
    }

    /// `tag`'s slot, made if new; `None` if the table has no room for it. The
    /// leases of keys forgotten to make room go to `owed`.
    fn slot(&self, tag: &str, now: u64, owed: &mut Vec<Owed>) -> Option<Arc<Slot>> {
        self.slices.slot(tag, now, || self.new_slot(tag), owed)
    }

    /// One `take` call: the lease id and the reply.
    async fn take(
        &self,
        slot: &Slot,
        need: u64,
        want: u64,
        options: &Options,
        settles: &[(u64, u64)],
    ) -> Result<(u64, [u64; 6]), StoreError> {
        for _ in 0..TAKE_ATTEMPTS {
            let id = lease_id();
            let mut invocation = self.script.key(&*slot.key);
            invocation
                .key(&*slot.leases_key)
                .arg("take")
                .arg(self.terms.kind.name())
                .arg(self.terms.args[0])
                .arg(self.terms.args[1])
                .arg(self.terms.args[2])
                .arg(id)
                .arg(need)
                .arg(want)
                .arg(options.divisor)
                .arg(options.term_micros);
            for &(id, unused) in settles {
                invocation.arg(id).arg(unused);
            }
            let mut connection = self.connection.clone();
            let reply: Vec<i64> = invocation
                .invoke_async(&mut connection)
                .await
                .map_err(from_redis)?;
            match reply[..] {
                [-1, ..] => continue,
                [status @ (0 | 1), granted, valid, remaining, retry, reset] => {
                    let word = |v: i64| u64::try_from(v).unwrap_or(0);
                    return Ok((
                        id,
                        [
                            word(status),
                            word(granted),
                            word(valid),
                            word(remaining),
                            word(retry),
                            word(reset),
                        ],
                    ));
                }
                _ => return Err(StoreError::Protocol(format!("take answered {reply:?}"))),
            }
        }
        Err(StoreError::Protocol(format!(
            "{TAKE_ATTEMPTS} lease ids in a row were live leases' ids"
        )))
    }

    /// One `give_back` call: the permits credited.
    async fn give_back(&self, slot: &Slot, settles: &[(u64, u64)]) -> Result<u64, StoreError> {
        let mut invocation = self.script.key(&*slot.key);
        invocation
            .key(&*slot.leases_key)
            .arg("give_back")
            .arg(self.terms.kind.name())
            .arg(self.terms.args[0])
            .arg(self.terms.args[1])
            .arg(self.terms.args[2]);
        for &(id, unused) in settles {
            invocation.arg(id).arg(unused);
        }
        let mut connection = self.connection.clone();
        let credited: i64 = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(from_redis)?;
        Ok(u64::try_from(credited).unwrap_or(0))
    }

    /// Empties `slot` and settles its leases.
    async fn release(&self, slot: &Slot, now: u64) -> Result<u64, StoreError> {
        let mut lease = slot.lease.lock().await;
        lease.close(slot.slice.drain(), now);
        slot.low.store(0, Ordering::Relaxed);
        if lease.pending.is_empty() {
            return Ok(0);
        }
        // Kept until the call answers, as in a refill.
        let settles = lease.pending.clone();
        let credited = self.give_back(slot, &settles).await?;
        lease.pending.clear();
        Ok(credited)
    }
}

/// Gives back what the node still holds when its last clone goes, from a task on the
/// current tokio runtime (best effort: without one, the leases run out).
impl<Conn> Drop for Shared<Conn>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        let mut owed = Vec::new();
        for slot in self.slices.all() {
            let Ok(mut lease) = slot.lease.try_lock() else {
                continue;
            };
            lease.close(slot.slice.drain(), 0);
            let settles = mem::take(&mut lease.pending);
            drop(lease);
            if !settles.is_empty() {
                owed.push((slot, settles));
            }
        }
        if owed.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let giver = Shared::new(
            self.connection.clone(),
            self.terms,
            &self.prefix,
            &self.name,
            1,
        );
        runtime.spawn(async move {
            for (slot, settles) in owed {
                // Failing, the leases run out instead.
                let _ = giver.give_back(&slot, &settles).await;
            }
        });
    }
}

/// Appended to a key's hash for its sorted set of leases.
const LEASES_SUFFIX: &str = ":leases";

impl Slot {
    #[inline]
    fn admitted(&self, capacity: u64, left: u64, now: u64) -> Admitted {
        let reset = self.reset_at.load(Ordering::Relaxed).saturating_sub(now);
        Admitted::new(
            capacity,
            self.global.load(Ordering::Relaxed).saturating_add(left),
            Duration::from_nanos(reset),
        )
    }

    /// A denial of `n` held here from Redis's last, if it still holds.
    #[inline]
    fn cached_denial(&self, capacity: u64, n: u64, now: u64) -> Option<Denied> {
        if now >= self.recheck_at.load(Ordering::Acquire)
            || n < self.denied_need.load(Ordering::Relaxed)
        {
            return None;
        }
        let retry = self.retry_at.load(Ordering::Relaxed).saturating_sub(now);
        let reset = self.reset_at.load(Ordering::Relaxed).saturating_sub(now);
        Some(
            Limited::new(
                Duration::from_nanos(retry),
                capacity,
                self.global.load(Ordering::Relaxed) + self.slice.left(),
                Duration::from_nanos(reset),
            )
            .into(),
        )
    }

    /// The last denial of `n`, past its recheck time, while another task asks Redis
    /// again: such requests are denied at once rather than wait for that answer,
    /// which will likely be a denial too, or one permit for the asking task. Its
    /// `retry_after` is what remains of the denial's, at least a microsecond.
    #[inline]
    fn denial_while_asking(&self, capacity: u64, n: u64, now: u64) -> Option<Denied> {
        let need = self.denied_need.load(Ordering::Relaxed);
        if need == 0 || n < need || self.lease.try_lock().is_ok() {
            return None;
        }
        let retry = self
            .retry_at
            .load(Ordering::Relaxed)
            .saturating_sub(now)
            .max(1_000);
        let reset = self.reset_at.load(Ordering::Relaxed).saturating_sub(now);
        Some(
            Limited::new(
                Duration::from_nanos(retry),
                capacity,
                self.global.load(Ordering::Relaxed) + self.slice.left(),
                Duration::from_nanos(reset),
            )
            .into(),
        )
    }

    /// Redis denied `need` at `now`, to retry `retry` nanoseconds later: requests as
    /// large are denied here until then or one refill period, whichever is sooner.
    fn deny(&self, need: u64, now: u64, retry: u64, options: &Options) {
        let period = u64::try_from(options.refill_period.as_nanos()).unwrap_or(u64::MAX);
        self.retry_at
            .store(now.saturating_add(retry), Ordering::Relaxed);
        self.denied_need.store(need.max(1), Ordering::Relaxed);
        self.recheck_at
            .store(now.saturating_add(retry.min(period)), Ordering::Release);
    }
}

impl Terms {
    fn of(rule: &Rule) -> Result<Terms, ConfigError> {
        let kind = match rule {
            Rule::FixedWindow(window) if !window.counts_denied() => Kind::FixedWindow,
            Rule::SlidingCounter(_) => Kind::SlidingCounter,
            Rule::Gcra(_) => Kind::Gcra,
            _ => {
                return Err(ConfigError::OutOfRange {
                    parameter: "rule",
                    expected: "a Rule::FixedWindow that does not count denied acquires, \
                               a Rule::SlidingCounter or a Rule::Gcra",
                });
            }
        };
        let mut args = [0; 3];
        let sent = rule.script_args()?;
        if sent.len() > 3 {
            return Err(ConfigError::OutOfRange {
                parameter: "rule",
                expected: "three whole parameters",
            });
        }
        for (slot, arg) in args.iter_mut().zip(sent) {
            match arg {
                Arg::Int(v) => *slot = v,
                Arg::Float(_) => {
                    return Err(ConfigError::OutOfRange {
                        parameter: "rule",
                        expected: "whole parameters",
                    });
                }
            }
        }
        Ok(Terms {
            kind,
            args,
            capacity: rule.capacity(),
        })
    }
}

impl<Conn, C> Clone for LeaseLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    fn clone(&self) -> Self {
        LeaseLimiter {
            node: self.node.clone(),
            queues: Arc::clone(&self.queues),
        }
    }
}

impl<Conn, C> Clone for Node<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clone,
{
    fn clone(&self) -> Self {
        Node {
            shared: Arc::clone(&self.shared),
            options: self.options,
            clock: self.clock.clone(),
        }
    }
}

impl<Conn, C> fmt::Debug for LeaseLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = &self.node;
        f.debug_struct("LeaseLimiter")
            .field("prefix", &node.shared.prefix)
            .field("name", &node.shared.name)
            .field("rule", &node.shared.terms.kind.name())
            .field("capacity", &node.shared.terms.capacity)
            .field("max_slice", &node.options.max_slice)
            .field("divisor", &node.options.divisor)
            .field("refill_period", &node.options.refill_period)
            .field("lease_term", &node.options.term)
            .field("max_keys", &node.options.max_keys)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}
