//! The Redis store: every rule as a Lua script, all rules of a request in one
//! `EVALSHA`, on the server's clock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, ErrorKind, RedisError, Script};

use super::request::{Outcome, Request};
use super::rule::{Step, Verdict};
use super::{storage_key, validate_prefix, Store, StoreError, DEFAULT_MAX_KEY_LEN};
use crate::decision::{Admitted, InsufficientCapacity, Limited, Reservation};

pub(crate) mod args;

/// How long a connection attempt waits.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A [`Store`] in Redis or Redis Cluster, shared by every process that uses it.
///
/// Each [`Request`] is one `EVALSHA` of one script: a driver plus every algorithm,
/// each the same state machine as its Rust twin, in microseconds. The script reads the
/// server's `TIME` (so the application servers' clocks never matter), decides every
/// rule, writes only if all admit, and gives every key it writes a TTL that ends when
/// the key's state may be forgotten. It is reloaded automatically after `NOSCRIPT` (a
/// restart, a failover or `SCRIPT FLUSH`).
///
/// Concurrent requests over one store share its connection and are pipelined on it:
/// clone the store (cheap) rather than connecting again.
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
    script: Arc<Script>,
    max_key_len: usize,
}

impl<C> fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("max_key_len", &self.max_key_len)
            .finish_non_exhaustive()
    }
}

impl RedisStore<ConnectionManager> {
    /// Connects to the Redis at `url` (`redis://[:password@]host:port/db`) through a
    /// [`ConnectionManager`], which reconnects by itself after the connection drops,
    /// and keeps keys under `prefix`.
    ///
    /// A connection attempt times out after 1 s and is retried once, so that a down
    /// Redis fails fast, and the new connection is checked with a `PING`, so that a
    /// missing password fails here rather than at the first request; for other
    /// settings, build the manager and use [`new`](Self::new).
    ///
    /// # Errors
    ///
    /// - [`StoreError::Config`] for a prefix with a brace;
    /// - [`StoreError::InvalidUrl`] for a malformed URL;
    /// - [`StoreError::Authentication`] if Redis refuses the password;
    /// - [`StoreError::Connection`] if Redis cannot be reached.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let client = Client::open(url).map_err(invalid_url)?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100))
            .set_connection_timeout(Some(CONNECT_TIMEOUT));
        let mut connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(from_redis)?;
        // A connection without the password that a server requires opens fine: only
        // its first command is refused, which should happen here rather than later.
        redis::cmd("PING")
            .query_async::<()>(&mut connection)
            .await
            .map_err(from_redis)?;
        RedisStore::new(connection, prefix)
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
            .retries(1)
            .build()
            .map_err(invalid_url)?;
        let connection = client.get_async_connection().await.map_err(from_redis)?;
        RedisStore::new(connection, prefix)
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
            script: Arc::new(Script::new(args::SCRIPT)),
            max_key_len: DEFAULT_MAX_KEY_LEN,
        })
    }

    /// The same store, accepting keys of at most `max` bytes (prefix and tag included)
    /// instead of [`DEFAULT_MAX_KEY_LEN`].
    pub fn max_key_len(self, max: usize) -> Self {
        RedisStore {
            max_key_len: max,
            ..self
        }
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

    /// The SHA1 of the script, as `EVALSHA` names it.
    pub fn script_hash(&self) -> &str {
        self.script.get_hash()
    }

    /// The script's source, for tools such as `redis-benchmark` or `SCRIPT LOAD`.
    pub fn script_source() -> &'static str {
        args::SCRIPT
    }

    /// The arguments of `EVALSHA` after the script hash for `request`: the key count,
    /// the keys, then the arguments. For tools that replay a request.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute), for what can be checked without Redis.
    pub fn script_call(&self, request: &Request<'_>) -> Result<Vec<String>, StoreError> {
        let (keys, args) = self.encode(request)?;
        let mut out = Vec::with_capacity(1 + keys.len() + args.len());
        out.push(keys.len().to_string());
        out.extend(keys);
        out.extend(args);
        Ok(out)
    }

    fn encode(&self, request: &Request<'_>) -> Result<(Vec<String>, Vec<String>), StoreError> {
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
        let now = request
            .at
            .map(|at| {
                u64::try_from(at.as_micros())
                    .unwrap_or(u64::MAX)
                    .to_string()
            })
            .unwrap_or_default();
        let mut keys = Vec::with_capacity(request.checks.len());
        let mut argv = vec![
            op.to_owned(),
            args::exact_count(n, "n")?.to_string(),
            max_wait.min(args::MAX_SCRIPT_MICROS).to_string(),
            now,
        ];
        for check in request.checks {
            let key = storage_key(&self.prefix, request.tag, check.key);
            if key.len() > self.max_key_len {
                return Err(StoreError::KeyTooLong {
                    len: key.len(),
                    max: self.max_key_len,
                });
            }
            keys.push(key);
            let (kind, params) = args::rule_args(check.rule)?;
            argv.push(kind.to_owned());
            argv.push(params.len().to_string());
            argv.extend(params.into_iter().map(args::Arg::to_text));
        }
        Ok((keys, argv))
    }

    /// Maps the script's five integers per check.
    fn verdicts(&self, request: &Request<'_>, reply: &[i64]) -> Result<Vec<Verdict>, StoreError> {
        if reply.len() != 5 * request.checks.len() {
            return Err(StoreError::Protocol(format!(
                "{} integers for {} checks",
                reply.len(),
                request.checks.len()
            )));
        }
        let step = request.op.step(request.checks.len());
        let n = request.op.permits();
        reply
            .chunks_exact(5)
            .map(|v| {
                let bad = || StoreError::Protocol(format!("verdict {v:?} for {step:?}"));
                let field = |x: i64| u64::try_from(x).map_err(|_| bad());
                let (kind, limit, remaining) = (v[0], field(v[1])?, field(v[2])?);
                let reset_after = Duration::from_micros(field(v[3])?);
                let wait = Duration::from_micros(field(v[4])?);
                let limited = || Limited::new(wait, limit, remaining, reset_after).into();
                let never = || InsufficientCapacity::new(n, limit).into();
                Ok(match (step, kind) {
                    (Step::Acquire(_) | Step::Peek(_), 1) => {
                        Verdict::Decision(Ok(Admitted::new(limit, remaining, reset_after)))
                    }
                    (Step::Acquire(_) | Step::Peek(_), 0) => Verdict::Decision(Err(limited())),
                    (Step::Acquire(_) | Step::Peek(_), 3) => Verdict::Decision(Err(never())),
                    (Step::Reserve(..), 2) => Verdict::Reservation(Ok(Reservation::new(n, wait))),
                    (Step::Reserve(..), 0) => Verdict::Reservation(Err(limited())),
                    (Step::Reserve(..), 3) => Verdict::Reservation(Err(never())),
                    (Step::Refund(_), 4) => Verdict::Refunded,
                    _ => return Err(bad()),
                })
            })
            .collect()
    }
}

#[async_trait]
impl<C> Store for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn execute(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        let (keys, argv) = self.encode(request)?;
        let mut invocation = self.script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in argv {
            invocation.arg(arg);
        }
        let mut connection = self.connection.clone();
        let reply: Vec<i64> = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(from_redis)?;
        let verdicts = self.verdicts(request, &reply)?;
        request.combine(verdicts)
    }

    fn check_rule(&self, rule: &super::Rule) -> Result<(), StoreError> {
        args::rule_args(rule)?;
        Ok(())
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
    } else if error.kind() == ErrorKind::InvalidClientConfig {
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
