//! The Redis store: every rule in Lua, all rules of a request in one `FCALL` (or
//! `EVALSHA`), on the server's clock.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError};

use super::request::{Answers, Reply, Request};
use super::rule::{RuleOutcome, Step};
use super::{DEFAULT_MAX_KEY_LEN, Store, StoreError, storage_key, validate_prefix};
use crate::algorithm::script::{MAX_SCRIPT_MICROS, exact_count};
use crate::algorithm::{Arg, RuleKind};
use crate::decision::{Admitted, InsufficientCapacity, Limited, Reservation};
use crate::sync::Arc;
use crate::units::duration_to_nanos;

mod call;
mod coalesce;
mod connect;
mod script;
mod sentinel;
#[cfg(feature = "redis-tls")]
mod tls;

pub use connect::RedisConnectOptions;
pub use sentinel::SentinelConnection;
#[cfg(feature = "redis-tls")]
pub use tls::install_tls_provider;

/// How long a cluster connection waits for a reply (a managed connection keeps
/// redis-rs's 500 ms): a call that outlives it fails as a `Connection` error rather
/// than hanging.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a connection attempt waits.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A [`Store`] in Redis or Redis Cluster, shared by every process that uses it.
///
/// Each [`Request`] is one call of Lua: a driver plus the algorithms of the request's
/// rules, each the same state machine as its Rust twin, in microseconds. The Lua reads
/// the server's `TIME` (so the application servers' clocks never matter), decides every
/// rule, writes only if all admit, and gives every key it writes a TTL that ends when
/// the key's state may be forgotten.
///
/// Where the server has Redis Functions (Redis 7 and later), the call is an `FCALL` of
/// a library that [`connect`](RedisStore::connect) loads (`FUNCTION LOAD`, on every
/// primary of a cluster), which defines everything once; it is named after its
/// code ([`function_name`](RedisStore::function_name)), so that tollgate versions
/// sharing a server keep libraries of their own. Elsewhere (Redis 6, or `FUNCTION` or
/// `FCALL` refused by an ACL or renamed away) the store falls back, for good, to an
/// `EVALSHA` of the script of the request's kinds (one script per set of kinds, loaded
/// as requests first use it), which decides alike but defines what it uses on every
/// call; [`without_functions`](RedisStore::without_functions) forces it. Either is
/// reloaded automatically when the server lacks it (`FUNCTION FLUSH` or `SCRIPT FLUSH`,
/// a restart, a failover to a server without it) and the call sent again, once.
///
/// A request at an explicit time ([`Request::at`](super::Request::at)) must be at most
/// 2^52 µs after the Unix epoch (the year 2112), so that the script's doubles hold it
/// and a rule's spans exactly; a later one is a [`StoreError::Config`]
/// ([`ConfigError::TooLong`](crate::ConfigError::TooLong), parameter `"at"`).
///
/// Concurrent requests over one store share its connection and are pipelined on it:
/// clone the store (cheap) rather than connecting again. With
/// [`coalescing`](RedisStore::coalescing), concurrent requests are also decided
/// several per call, which is what lifts the server's ceiling.
///
/// # Examples
///
/// ```no_run
/// use tollgate::algorithm::Gcra;
/// use tollgate::store::{Check, Op, RedisStore, Request, Rule, Store};
/// use tollgate::Quota;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
/// let rule = Rule::from(Gcra::new(Quota::per_second(10)?.burst(5)?));
/// let checks = [Check::new("", &rule)];
/// let outcome = store.execute(&Request::new("user-42", &checks, Op::Acquire(1))).await?;
/// println!("admitted: {}", outcome.is_admitted());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisStore<C = ConnectionManager> {
    connection: C,
    prefix: Arc<str>,
    max_key_len: usize,
    /// Shared by clones: their concurrent requests batch together.
    coalescer: Option<Arc<coalesce::Coalescer>>,
    /// Shared by clones: whether they call the library or the scripts.
    functions: Arc<call::Functions>,
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("max_key_len", &self.max_key_len)
            .field(
                "coalescing",
                &self.coalescer.as_ref().map(|c| c.max_batch()),
            )
            .field("functions", &self.functions.on())
            .finish_non_exhaustive()
    }
}

impl RedisStore<ConnectionManager> {
    /// Connects to the Redis at `url` (`redis://[[user]:password@]host:port/db`, or
    /// `rediss://` with the feature `redis-tls`) through a [`ConnectionManager`],
    /// which reconnects by itself after the connection drops, and keeps keys under
    /// `prefix`.
    ///
    /// A connection attempt times out after 1 s and is retried once, so that a down
    /// Redis fails fast, and the new connection is checked with a `PING`, so that a
    /// missing password fails here rather than at the first request. For other
    /// credentials, certificates or timeouts, use [`connect_with`](Self::connect_with);
    /// for other settings, build the manager and use [`new`](Self::new).
    ///
    /// # Errors
    ///
    /// - [`StoreError::Config`] for a prefix with a brace;
    /// - [`StoreError::InvalidUrl`] for a malformed URL;
    /// - [`StoreError::Authentication`] if Redis refuses the password;
    /// - [`StoreError::Connection`] if Redis cannot be reached, or its TLS
    ///   certificate does not verify.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the connection made so far.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, prefix, &RedisConnectOptions::new()).await
    }

    /// The same store, deciding concurrent requests up to `max_batch` per call
    /// (`FCALL` or `EVALSHA`; a `max_batch` of 0 counts as 1). Off by default.
    ///
    /// Redis spends most of a call on the call itself rather than on the decision,
    /// and runs one script at a time: one decision per call caps a server at some
    /// tens of thousands per second (`benches/README.md`, Redis throughput). With
    /// coalescing, one call of this store and its clones is in flight at a time;
    /// requests made meanwhile queue, and the next call carries up to `max_batch` of
    /// them, in arrival order. Each is decided as alone, all-or-nothing on its own
    /// (a conflict fails only its caller), and all read one `TIME`. A request with
    /// an explicit time ([`Request::at`]) shares a call only with the same time. An
    /// error of the call itself (connection, timeout) goes to every caller in it.
    /// There is no background task: the caller whose request goes first sends the
    /// call and hands out the replies, then hands the next call to the first caller
    /// queued for it. A request arriving when nothing is in flight goes at once.
    ///
    /// Not offered for Redis Cluster: the keys of one script must share one slot.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api")
    ///     .await?
    ///     .coalescing(64);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping a request's future before its call is sent takes it out of the
    /// queue. Dropping the future that is sending a call fails the other requests
    /// of that call with [`StoreError::Connection`] (whether Redis decided them is
    /// unknown, as after a lost connection); the next call is sent all the same.
    pub fn coalescing(self, max_batch: usize) -> Self {
        self.with_coalescer(max_batch)
    }
}

impl RedisStore<MultiplexedConnection> {
    /// As [`RedisStore::<ConnectionManager>::coalescing`](RedisStore::coalescing):
    /// concurrent requests decided up to `max_batch` per call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let connection = client.get_multiplexed_async_connection().await?;
    /// let store = RedisStore::new(connection, "api")?.coalescing(64);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As [`RedisStore::<ConnectionManager>::coalescing`](RedisStore::coalescing).
    pub fn coalescing(self, max_batch: usize) -> Self {
        self.with_coalescer(max_batch)
    }
}

impl RedisStore<ClusterConnection> {
    /// Connects to the Redis Cluster reachable at any of `urls`, and keeps keys under
    /// `prefix`. All keys of one request carry the request's tag as their hash tag, so
    /// they live in one slot and one script can decide them together.
    ///
    /// # Errors
    ///
    /// As [`connect`](RedisStore::connect).
    pub async fn connect_cluster(urls: &[&str], prefix: &str) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let client = ClusterClient::builder(urls.iter().copied())
            .connection_timeout(CONNECT_TIMEOUT)
            // The cluster client waits forever for a reply by default.
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(1)
            .build()
            .map_err(invalid_url)?;
        let connection = client.get_async_connection().await.map_err(from_redis)?;
        RedisStore::new(connection, prefix)?.preloaded().await
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A store over `connection`: a [`ConnectionManager`], a
    /// [`MultiplexedConnection`](redis::aio::MultiplexedConnection) or a
    /// [`ClusterConnection`], all cheap clones of one shared connection.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let connection = client.get_multiplexed_async_connection().await?;
    /// let store = RedisStore::new(connection, "api")?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a prefix with a brace in it.
    pub fn new(connection: C, prefix: &str) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        Ok(RedisStore {
            connection,
            prefix: prefix.into(),
            max_key_len: DEFAULT_MAX_KEY_LEN,
            coalescer: None,
            functions: Arc::new(call::Functions::new(true)),
        })
    }

    /// The same store, calling its scripts by `EVALSHA` even where the server has
    /// Redis Functions: the path of Redis 6, for comparisons and tests. It decides
    /// alike. Clones made from it do the same; the store it was made from does not
    /// change. (A [`coalescing`](RedisStore::coalescing) queue stays shared with that
    /// store: a batch goes by the path of the request that sends it.)
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api")
    ///     .await?
    ///     .without_functions();
    /// # Ok(())
    /// # }
    /// ```
    pub fn without_functions(self) -> Self {
        RedisStore {
            functions: Arc::new(call::Functions::new(false)),
            ..self
        }
    }

    fn with_coalescer(self, max_batch: usize) -> Self {
        RedisStore {
            coalescer: Some(Arc::new(coalesce::Coalescer::new(max_batch))),
            ..self
        }
    }

    /// The same store, accepting keys of at most `max` bytes (prefix and tag included)
    /// instead of [`DEFAULT_MAX_KEY_LEN`].
    pub fn max_key_len(self, max: usize) -> Self {
        RedisStore {
            max_key_len: max,
            ..self
        }
    }

    /// Loads the script of every kind (on every master of a cluster), which checks the
    /// connection and serves tools that name [`script_hash`](Self::script_hash), then
    /// the library (what goes wrong there, such as a server without Functions, is
    /// left for the first call to find); each request's own script is loaded on its
    /// first `NOSCRIPT`.
    async fn preloaded(self) -> Result<Self, StoreError> {
        let mut connection = self.connection.clone();
        script::for_kinds(script::ALL_KINDS)
            .load_async(&mut connection)
            .await
            .map_err(from_redis)?;
        self.functions.preload(&mut connection).await;
        Ok(self)
    }

    /// The prefix of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The Redis key of `key` under `tag`: `{prefix}:{tag}:{key}`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// assert_eq!(store.redis_key("user-42", "minute"), "api:{user-42}:minute");
    /// assert_eq!(store.redis_key("user-42", ""), "api:{user-42}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, tag: &str, key: &str) -> String {
        storage_key(&self.prefix, tag, key)
    }

    /// The underlying connection, for commands of your own.
    pub fn connection(&self) -> &C {
        &self.connection
    }

    /// The SHA1 of the script of every kind, as `EVALSHA` names it: it decides any
    /// request, as [`script_call`](Self::script_call) writes it. The store itself sends
    /// each request to the script of its rules' kinds
    /// ([`script_hash_for`](Self::script_hash_for)), which defines less on every call.
    pub fn script_hash(&self) -> &str {
        script::for_kinds(script::ALL_KINDS).get_hash()
    }

    /// The source of the script of every kind, for tools such as `redis-benchmark` or
    /// `SCRIPT LOAD`.
    pub fn script_source() -> &'static str {
        script::source()
    }

    /// The name of the function that decides any request, and of its library, as
    /// `FCALL` names it: `tollgate_` and the SHA1 of the library's code. It takes the
    /// arguments of [`script_call`](Self::script_call), as `EVALSHA` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use redis::aio::MultiplexedConnection;
    /// use tollgate::store::RedisStore;
    ///
    /// type Store = RedisStore<MultiplexedConnection>;
    /// let name = Store::function_name();
    /// assert!(name.starts_with("tollgate_"));
    /// assert!(Store::library_source().starts_with(&format!("#!lua name={name}\n")));
    /// ```
    pub fn function_name() -> &'static str {
        &script::library().name
    }

    /// The source of the library of Redis Functions, as the store loads it
    /// (`FUNCTION LOAD`): for an administrator to load where the application's ACL
    /// user may `FCALL` but not `FUNCTION LOAD`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use redis::aio::MultiplexedConnection;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// // As an administrator, once per version of tollgate:
    /// let client = redis::Client::open("redis://admin:secret@127.0.0.1/")?;
    /// let mut admin = client.get_multiplexed_async_connection().await?;
    /// let _: String = redis::cmd("FUNCTION")
    ///     .arg("LOAD")
    ///     .arg("REPLACE")
    ///     .arg(RedisStore::<MultiplexedConnection>::library_source())
    ///     .query_async(&mut admin)
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn library_source() -> &'static str {
        &script::library().source
    }

    /// The SHA1 of the script that the store sends a request whose rules are of
    /// `kinds` (in any order, repeats allowed) to, as `EVALSHA` names it.
    ///
    /// # Examples
    ///
    /// ```
    /// use redis::aio::MultiplexedConnection;
    /// use tollgate::store::{RedisStore, RuleKind};
    ///
    /// type Store = RedisStore<MultiplexedConnection>;
    /// let gcra = Store::script_hash_for(&[RuleKind::Gcra]);
    /// assert_eq!(gcra.len(), 40);
    /// assert_eq!(gcra, Store::script_hash_for(&[RuleKind::Gcra, RuleKind::Gcra]));
    /// assert_ne!(gcra, Store::script_hash_for(&[RuleKind::Gcra, RuleKind::SlidingLog]));
    /// ```
    pub fn script_hash_for(kinds: &[RuleKind]) -> &'static str {
        script::for_kinds(script::kinds_of(kinds)).get_hash()
    }

    /// The source of the script named by [`script_hash_for`](Self::script_hash_for):
    /// the algorithms of `kinds` and no other, for tools such as `SCRIPT LOAD`.
    pub fn script_source_for(kinds: &[RuleKind]) -> &'static str {
        script::source_for(script::kinds_of(kinds))
    }

    /// The arguments of `EVALSHA` after the script hash (or of `FCALL` after the
    /// [`function_name`](Self::function_name)) for `request`: the key count, the keys,
    /// then the arguments. For tools that replay a request.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute), for what can be checked without Redis.
    pub fn script_call(&self, request: &Request<'_>) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        self.encode(request, &mut out)?;
        Ok(out)
    }

    /// The arguments of `EVALSHA` after the script hash (or of `FCALL` after the
    /// function's name) for `requests` decided in one call, as a coalescing store
    /// sends them: the key count, every request's
    /// keys, then `batch`, the request count and each request's key count and
    /// arguments. For tools that replay a batch.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute), for what can be checked without Redis.
    pub fn batch_script_call(&self, requests: &[Request<'_>]) -> Result<Vec<String>, StoreError> {
        let entries = requests
            .iter()
            .map(|r| self.entry(r))
            .collect::<Result<Vec<_>, _>>()?;
        let keys: usize = entries.iter().map(|e| e.keys.len()).sum();
        let mut out = vec![keys.to_string()];
        for entry in &entries {
            out.extend(entry.keys.iter().cloned());
        }
        out.push("batch".into());
        out.push(entries.len().to_string());
        for entry in entries {
            out.push(entry.keys.len().to_string());
            out.extend(entry.args);
        }
        Ok(out)
    }

    /// `request` as a batch carries it.
    fn entry(&self, request: &Request<'_>) -> Result<coalesce::Entry, StoreError> {
        let mut args = Vec::new();
        self.encode(request, &mut args)?;
        let keys = request.checks.len();
        let rest = args.split_off(1 + keys);
        args.remove(0);
        Ok(coalesce::Entry {
            kinds: kinds(request),
            at: request
                .at
                .map(|at| u64::try_from(at.as_micros()).unwrap_or(u64::MAX)),
            keys: args,
            args: rest,
        })
    }

    /// Writes the arguments of `FCALL` or `EVALSHA` after the function or script into
    /// `out`, once everything is checked: the key count, the keys, then the arguments.
    fn encode(&self, request: &Request<'_>, out: &mut impl ScriptArgs) -> Result<(), StoreError> {
        let step = request.op.step(request.checks.len());
        let (op, n, max_wait) = match step {
            Step::Acquire(n) => ("acquire", n, 0),
            Step::Peek(n) => ("peek", n, 0),
            Step::Reserve(n, max_wait) => (
                "reserve",
                n,
                u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX),
            ),
            Step::Refund(n) => ("refund", n, 0),
        };
        let n = exact_count(n, "n")?;
        let mut checks = Vec::with_capacity(request.checks.len());
        for check in request.checks {
            let key = storage_key(&self.prefix, request.tag, check.key);
            if key.len() > self.max_key_len {
                return Err(StoreError::KeyTooLong {
                    len: key.len(),
                    max: self.max_key_len,
                });
            }
            let params = check.rule.script_args()?;
            let own = check
                .permits
                .map(|k| exact_count(k, "permits"))
                .transpose()?;
            checks.push((key, check.rule.kind().name(), params, own));
        }
        out.int(checks.len() as u64);
        for (key, ..) in &checks {
            out.text(key);
        }
        out.text(op);
        out.int(n);
        out.int(max_wait.min(MAX_SCRIPT_MICROS));
        match request.at {
            Some(at) => out.int(script::script_time(at)?),
            None => out.text(""),
        }
        for (_, kind, params, own) in &checks {
            // A check's own count goes before its kind, marked by `#`.
            if let Some(own) = own {
                out.text(&format!("#{own}"));
            }
            out.text(kind);
            out.int(params.len() as u64);
            for &param in params {
                match param {
                    Arg::Int(v) => out.int(v),
                    Arg::Float(_) => out.text(&param.to_text()),
                }
            }
        }
        Ok(())
    }

    /// Each check's verdict on `request`, from one script call (shared with other
    /// requests when coalescing).
    async fn decide(&self, request: &Request<'_>) -> Result<Vec<RuleOutcome>, StoreError> {
        if let Some(coalescer) = &self.coalescer {
            let entry = self.entry(request)?;
            let reply = coalescer
                .execute(&self.connection, &self.functions, entry)
                .await?;
            return self.verdicts(request, &reply);
        }
        // Written straight into the command, not through a string per argument.
        let checks = request.checks.len();
        let kinds = kinds(request);
        let mut command = self
            .functions
            .command(kinds, 5 + 12 * checks, 64 + 96 * checks);
        self.encode(request, &mut command)?;
        let mut connection = self.connection.clone();
        let reply: Vec<i64> = self
            .functions
            .invoke(kinds, &mut connection, &command)
            .await
            .map_err(from_redis)?;
        self.verdicts(request, &reply)
    }

    /// Maps the script's five integers per check.
    fn verdicts(
        &self,
        request: &Request<'_>,
        reply: &[i64],
    ) -> Result<Vec<RuleOutcome>, StoreError> {
        if reply.len() != 5 * request.checks.len() {
            return Err(StoreError::Protocol(format!(
                "{} integers for {} checks",
                reply.len(),
                request.checks.len()
            )));
        }
        let step = request.op.step(request.checks.len());
        reply
            .chunks_exact(5)
            .zip(request.checks)
            .map(|(v, check)| {
                let step = check.step(step);
                let n = request.permits_of(check);
                let bad = || StoreError::Protocol(format!("verdict {v:?} for {step:?}"));
                let field = |x: i64| u64::try_from(x).map_err(|_| bad());
                let (kind, limit, remaining) = (v[0], field(v[1])?, field(v[2])?);
                let reset_after = Duration::from_micros(field(v[3])?);
                // -1: the denial waits for a release, not for time.
                let wait = match v[4] {
                    -1 => None,
                    wait => Some(Duration::from_micros(field(wait)?)),
                };
                let bucket = Bucket::of(check.rule);
                let limited = || match (wait, bucket) {
                    (Some(wait), Some(bucket)) => bucket.limited(wait, limit, reset_after).into(),
                    (Some(wait), None) => Limited::new(wait, limit, remaining, reset_after).into(),
                    (None, _) => Limited::on_release(limit, remaining).into(),
                };
                let admitted = || match bucket {
                    Some(bucket) => bucket.admitted(limit, reset_after),
                    None if tells_next_permit(check.rule) => {
                        // The fifth integer of such an admission: µs until one more.
                        let next = field(v[4])?.saturating_mul(1_000);
                        Ok(Admitted::new(limit, remaining, reset_after)
                            .with_next_permit_nanos(next))
                    }
                    None => Ok(Admitted::new(limit, remaining, reset_after)),
                };
                let never = || InsufficientCapacity::new(n, limit).into();
                Ok(match (step, kind) {
                    (Step::Acquire(_) | Step::Peek(_), 1) => RuleOutcome::Decision(Ok(admitted()?)),
                    (Step::Acquire(_) | Step::Peek(_), 0) => RuleOutcome::Decision(Err(limited())),
                    (Step::Acquire(_) | Step::Peek(_), 3) => RuleOutcome::Decision(Err(never())),
                    (Step::Reserve(..), 2) => {
                        let wait = wait.ok_or_else(bad)?;
                        RuleOutcome::Reservation(Ok(Reservation::new(n, wait)))
                    }
                    (Step::Reserve(..), 0) => RuleOutcome::Reservation(Err(limited())),
                    (Step::Reserve(..), 3) => RuleOutcome::Reservation(Err(never())),
                    (Step::Refund(_), 4) => RuleOutcome::Refunded,
                    _ => return Err(bad()),
                })
            })
            .collect()
    }
}

/// A token bucket's numbers (GCRA, and the leaky bucket that meters with one), in
/// nanoseconds: its reply's remaining is `(tolerance - reset) / interval`, so the
/// decision is built undivided, as the in-process `Gcra` builds it, and tells the time
/// to the next permit (debt included) exactly as the in-process one does.
#[derive(Clone, Copy)]
struct Bucket {
    interval: u64,
    tolerance: u64,
}

impl Bucket {
    fn of(rule: &super::Rule) -> Option<Bucket> {
        let words = match rule {
            super::Rule::Gcra(a) => a.words(),
            super::Rule::LeakyBucket(a) => a.words(),
            _ => return None,
        };
        (words[0] > 0).then_some(Bucket {
            interval: words[0],
            tolerance: words[1],
        })
    }

    fn room(&self, reset_after: Duration) -> u64 {
        self.tolerance
            .saturating_sub(duration_to_nanos(reset_after))
    }

    fn admitted(&self, limit: u64, reset_after: Duration) -> Result<Admitted, StoreError> {
        Ok(Admitted::deferred(
            limit,
            self.room(reset_after),
            self.interval,
            duration_to_nanos(reset_after),
        ))
    }

    fn limited(&self, wait: Duration, limit: u64, reset_after: Duration) -> Limited {
        Limited::deferred(
            duration_to_nanos(wait),
            limit,
            self.room(reset_after),
            self.interval,
            duration_to_nanos(reset_after),
        )
    }
}

/// Whether the script's admissions under `rule` carry the µs until one more permit,
/// which their remaining and reset do not tell (see prelude.lua's `admitted`).
fn tells_next_permit(rule: &super::Rule) -> bool {
    matches!(
        rule,
        super::Rule::SlidingCounter(_)
            | super::Rule::SmoothBursty(_)
            | super::Rule::SmoothWarmingUp(_)
    )
}

#[async_trait]
impl<C> Store for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        let verdicts = self.decide(request).await?;
        request.combine(verdicts)
    }

    /// As [`execute`](Store::execute), telling each check's answer from the script's
    /// verdicts (the same call, on the coalescing path and on Redis Cluster too). A
    /// request of several checks that the precheck denies is sent as a peek, which
    /// writes nothing, to tell each check's answer.
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
            if request.checks.len() == 1 {
                return Ok(Answers::with_checks(known, vec![known]));
            }
            let peek = request.as_peek();
            let verdicts = self.decide(&peek).await?;
            return request.answers_after_precheck(known, verdicts);
        }
        let verdicts = self.decide(request).await?;
        request.answers(verdicts)
    }

    fn check_rule(&self, rule: &super::Rule) -> Result<(), StoreError> {
        rule.script_args()?;
        Ok(())
    }
}

/// The kinds of `request`'s rules, which name its script.
fn kinds(request: &Request<'_>) -> script::Kinds {
    request
        .checks
        .iter()
        .fold(0, |set, check| set | script::bit(check.rule.kind()))
}

/// Where a request's `EVALSHA` arguments are written: text for tools, or a command.
trait ScriptArgs {
    fn text(&mut self, text: &str);
    fn int(&mut self, value: u64);
}

impl ScriptArgs for Vec<String> {
    fn text(&mut self, text: &str) {
        self.push(text.to_owned());
    }

    fn int(&mut self, value: u64) {
        self.push(value.to_string());
    }
}

impl ScriptArgs for Cmd {
    fn text(&mut self, text: &str) {
        self.arg(text);
    }

    fn int(&mut self, value: u64) {
        self.arg(value);
    }
}

fn invalid_url(e: RedisError) -> StoreError {
    StoreError::InvalidUrl(Box::new(e))
}

/// Sorts a redis-rs error into what the caller can do about it.
pub(crate) fn from_redis(error: RedisError) -> StoreError {
    if error.kind() == ErrorKind::AuthenticationFailed
        || error
            .code()
            .is_some_and(|c| c == "NOAUTH" || c == "WRONGPASS")
        // Redis answers a long command from an unauthenticated client so (and closes
        // the connection) rather than with NOAUTH.
        || error
            .detail()
            .is_some_and(|d| d.starts_with("Protocol error: unauthenticated"))
    {
        StoreError::Authentication(Box::new(error))
    } else if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
    {
        StoreError::Connection(Box::new(error))
    } else if matches!(
        error.kind(),
        ErrorKind::MasterNameNotFoundBySentinel | ErrorKind::NoValidReplicasFoundBySentinel
    ) {
        // No master yet: unknown to the sentinels, or a failover under way.
        StoreError::Connection(Box::new(error))
    } else if matches!(
        error.kind(),
        ErrorKind::InvalidClientConfig | ErrorKind::EmptySentinelList
    ) {
        invalid_url(error)
    } else if error.code() == Some("TOLLGATE_CONFLICT") {
        // The script names the key: "TOLLGATE_CONFLICT <key>".
        StoreError::KeyConflict {
            key: error.detail().unwrap_or_default().to_owned(),
        }
    } else {
        StoreError::Server(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Gcra, SmoothBursty};
    use crate::quota::Quota;
    use crate::store::{Check, Op, Rule};
    use redis::{RedisFuture, Value};

    /// A connection that is never used: `encode` needs none.
    #[derive(Clone)]
    struct Unused;

    impl ConnectionLike for Unused {
        fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
            Box::pin(async { Ok(Value::Nil) })
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            _: &'a redis::Pipeline,
            _: usize,
            _: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            Box::pin(async { Ok(Vec::new()) })
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    /// The packed `EVALSHA` of `request` as `execute` builds it, and as a tool
    /// replaying `script_call` would.
    fn packed(store: &RedisStore<Unused>, request: &Request<'_>) -> (Vec<u8>, Vec<u8>) {
        let mut direct = Cmd::new();
        direct.arg("EVALSHA").arg(store.script_hash());
        store.encode(request, &mut direct).unwrap();
        let mut replayed = redis::cmd("EVALSHA");
        replayed.arg(store.script_hash());
        for arg in store.script_call(request).unwrap() {
            replayed.arg(arg);
        }
        (direct.get_packed_command(), replayed.get_packed_command())
    }

    fn gcra(per_second: u64, burst: u64) -> Rule {
        let quota = Quota::per_second(per_second).unwrap().burst(burst).unwrap();
        Rule::from(Gcra::new(quota))
    }

    #[test]
    fn the_command_sent_is_the_script_call() {
        let store = RedisStore::new(Unused, "p").unwrap();
        let (second, minute) = (gcra(10, 5), gcra(1_000, 50));
        // Doubles as parameters: `3.0` per second is a stable interval of 333,333.33 µs.
        let smooth = Rule::from(SmoothBursty::new(3.0).unwrap());
        let one = [Check::new("", &second)];
        let two = [Check::new("s", &second), Check::new("m", &minute)];
        let doubles = [Check::new("", &smooth), Check::new("g", &second)];
        let requests = [
            Request::new("d", &doubles, Op::Acquire(1)),
            Request::new("user-42", &one, Op::Acquire(1)),
            Request::new("user-42", &one, Op::Peek(0)),
            Request::new("u", &one, Op::Refund(3)).at(Duration::from_micros(1_700_000_000_123_456)),
            Request::new(
                "u",
                &one,
                Op::Reserve {
                    n: 2,
                    max_wait: Duration::MAX,
                },
            ),
            Request::new("u", &two, Op::Acquire(2)),
        ];
        for request in &requests {
            let (direct, replayed) = packed(&store, request);
            assert_eq!(
                String::from_utf8_lossy(&direct),
                String::from_utf8_lossy(&replayed),
                "{request:?}"
            );
        }
    }

    #[test]
    fn script_call_lists_count_keys_then_arguments() {
        let store = RedisStore::new(Unused, "p").unwrap();
        let (second, minute) = (gcra(10, 5), gcra(1_000, 50));
        let two = [Check::new("s", &second), Check::new("m", &minute)];
        let request = Request::new("u", &two, Op::Acquire(2)).at(Duration::from_micros(7));
        assert_eq!(
            store.script_call(&request).unwrap(),
            [
                "2", "p:{u}:s", "p:{u}:m", "acquire", "2", "0", "7", "gcra", "3", "100000",
                "500000", "5", "gcra", "3", "1000", "50000", "50",
            ]
        );
        let one = [Check::new("", &second)];
        let request = Request::new(
            "u",
            &one,
            Op::Reserve {
                n: 1,
                max_wait: Duration::from_secs(2),
            },
        );
        assert_eq!(
            store.script_call(&request).unwrap(),
            [
                "1", "p:{u}", "reserve", "1", "2000000", "", "gcra", "3", "100000", "500000", "5"
            ]
        );
    }

    #[test]
    fn a_checks_own_count_goes_before_its_kind() {
        let store = RedisStore::new(Unused, "p").unwrap();
        let (second, minute) = (gcra(10, 5), gcra(1_000, 50));
        let two = [
            Check::new("s", &second).with_permits(0),
            Check::new("m", &minute),
        ];
        let request = Request::new("u", &two, Op::Acquire(2)).at(Duration::from_micros(7));
        assert_eq!(
            store.script_call(&request).unwrap(),
            [
                "2", "p:{u}:s", "p:{u}:m", "acquire", "2", "0", "7", "#0", "gcra", "3", "100000",
                "500000", "5", "gcra", "3", "1000", "50000", "50",
            ]
        );
        let (direct, replayed) = packed(&store, &request);
        assert_eq!(direct, replayed);
        let one = [Check::new("", &second).with_permits(3)];
        let requests = [
            Request::new("a", &one, Op::Acquire(1)),
            Request::new("b", &two, Op::Peek(2)),
        ];
        assert_eq!(
            store.batch_script_call(&requests).unwrap(),
            [
                "3", "p:{a}", "p:{b}:s", "p:{b}:m", "batch", "2", "1", "acquire", "1", "0", "",
                "#3", "gcra", "3", "100000", "500000", "5", "2", "peek", "2", "0", "", "#0",
                "gcra", "3", "100000", "500000", "5", "gcra", "3", "1000", "50000", "50",
            ]
        );
    }

    #[test]
    fn a_checks_own_count_is_read_back_with_its_verdict() {
        let store = RedisStore::new(Unused, "p").unwrap();
        let rule = gcra(10, 5);
        let checks = [
            Check::new("a", &rule).with_permits(9),
            Check::new("b", &rule),
        ];
        let request = Request::new("u", &checks, Op::Acquire(1));
        let never = [3, 5, 0, 0, 0];
        let admitted = [1, 5, 4, 100_000, 0];
        let reply: Vec<i64> = never.iter().chain(&admitted).copied().collect();
        let verdicts = store.verdicts(&request, &reply).unwrap();
        let RuleOutcome::Decision(Err(crate::Denied::Insufficient(i))) = verdicts[0] else {
            panic!("{:?}", verdicts[0])
        };
        assert_eq!((i.requested(), i.capacity()), (9, 5));
        assert!(verdicts[1].is_admitted());
    }

    #[test]
    fn batch_script_call_lists_every_key_then_each_request_after_its_key_count() {
        let store = RedisStore::new(Unused, "p").unwrap();
        let (second, minute) = (gcra(10, 5), gcra(1_000, 50));
        let one = [Check::new("", &second)];
        let two = [Check::new("s", &second), Check::new("m", &minute)];
        let requests = [
            Request::new("a", &one, Op::Acquire(1)),
            Request::new("b", &two, Op::Peek(2)),
        ];
        assert_eq!(
            store.batch_script_call(&requests).unwrap(),
            [
                "3", "p:{a}", "p:{b}:s", "p:{b}:m", "batch", "2", "1", "acquire", "1", "0", "",
                "gcra", "3", "100000", "500000", "5", "2", "peek", "2", "0", "", "gcra", "3",
                "100000", "500000", "5", "gcra", "3", "1000", "50000", "50",
            ]
        );
    }

    #[test]
    fn nothing_is_written_before_every_check_passes() {
        let store = RedisStore::new(Unused, "p").unwrap().max_key_len(8);
        let rule = gcra(10, 5);
        let checks = [Check::new("", &rule), Check::new("far-too-long", &rule)];
        let mut command = Cmd::new();
        let error = store
            .encode(&Request::new("u", &checks, Op::Acquire(1)), &mut command)
            .unwrap_err();
        assert!(
            matches!(error, StoreError::KeyTooLong { len: 18, max: 8 }),
            "{error:?}"
        );
        assert_eq!(command.args_iter().count(), 0);
    }
}
