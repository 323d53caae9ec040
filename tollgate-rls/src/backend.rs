//! Where counts live: in memory, in Redis, or in a Redis Cluster; what happens when
//! Redis fails; and the Go service's local cache of over-limit keys.
//!
//! [`Backend::connect`] builds a [`tollgate::store`] store from [`BackendOptions`] and
//! hands it out as one type, `Arc<dyn Store>`, whatever it is:
//!
//! | option | store | Go setting |
//! |---|---|---|
//! | [`StoreKind::Memory`] | [`MemoryStore`] (one process) | — |
//! | [`StoreKind::Redis`] | [`RedisStore`] over one server | `REDIS_TYPE=single`, `REDIS_URL` |
//! | [`StoreKind::RedisCluster`] | [`RedisStore`] over a Cluster | `REDIS_TYPE=cluster`, `REDIS_URL` (comma-separated) |
//! | [`StoreKind::RedisSentinel`] | [`RedisStore`] over the master Sentinels name, followed across failovers | `REDIS_TYPE=sentinel`, `REDIS_URL` (`mymaster,host:26379,…`) |
//! | [`BackendOptions::redis_tls`] | the CA and client certificate of `rediss://` connections | `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT`, `REDIS_TLS_CLIENT_KEY` |
//! | [`BackendOptions::per_second`] | a second store for per-second limits | `REDIS_PERSECOND*` |
//! | [`BackendOptions::key_prefix`] | the store's key prefix | `CACHE_KEY_PREFIX` |
//! | [`FailureMode`] | the store as is, or under [`Resilient`] failing open | — |
//! | [`BackendOptions::local_cache_bytes`] | an [`OverLimitCache`] | `LOCAL_CACHE_SIZE_IN_BYTES` |
//!
//! Keys are tollgate's (`{prefix}:{tag}:{key}`, see [`tollgate::store`]), not Go's
//! (`prefix + domain_key_value_window`): a Go deployment's counts in the same Redis are
//! not shared.
//!
//! # When Redis fails
//!
//! - [`FailureMode::Error`], as Go: the call fails (the engine counts
//!   `call.should_rate_limit.redis_error`), and Envoy's `failure_mode_deny` decides
//!   whether the request passes.
//! - [`FailureMode::Allow`]: the store is wrapped in [`Resilient`] with
//!   [`FailurePolicy::Open`]: a call that fails, or takes longer than
//!   [`BackendOptions::deadline`], is admitted, and a circuit breaker stops calling a
//!   Redis that keeps failing until it answers again.
//!
//! The memory store cannot fail: the mode does not apply to it.
//!
//! # The local over-limit cache
//!
//! Go's `LOCAL_CACHE_SIZE_IN_BYTES > 0` keeps, in the process, the keys the store found
//! over their limit, until their window ends: a request for such a key is answered
//! `OVER_LIMIT` without asking the store, counted in `over_limit_with_local_cache`.
//! tollgate's [`DeniedCache`](tollgate::store::DeniedCache) does not fit: it repeats a
//! denial only for a request of the same shape and permit count, and answers as the
//! store would, so the engine could not tell a local answer from the store's.
//! [`OverLimitCache`] is keyed by (key, window start), whatever the hits, and bounded in
//! bytes.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tollgate::ConfigError;
use tollgate::KeyedConfig;
use tollgate::store::{
    FailurePolicy, MemoryStore, RedisConnectOptions, RedisStore, Resilient, Store, StoreError,
};
use tollgate::time::{Clock, MonotonicClock};

use crate::redis_link::{RedisConnection, RedisLink};
use crate::verdict::{VerdictError, unit_seconds, window_start};

/// The default bound of the memory store, in keys.
pub const DEFAULT_MEMORY_KEYS: usize = 1_000_000;

/// The default deadline of a store call under [`FailureMode::Allow`].
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

/// Which store holds the counts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// This process's memory, holding at most `max_keys` keys.
    Memory {
        /// The bound, in keys.
        max_keys: usize,
    },
    /// One Redis server (`redis://[:password@]host:port/db`).
    Redis {
        /// The server's URL.
        url: String,
    },
    /// A Redis Cluster, reached through any of its nodes.
    RedisCluster {
        /// Node URLs.
        urls: Vec<String>,
    },
    /// The master that Sentinels name, followed across failovers
    /// ([`SentinelConnection`](tollgate::store::SentinelConnection)).
    RedisSentinel {
        /// The master's name, as the sentinels know it.
        master_name: String,
        /// The sentinels' URLs (`redis://host:26379`).
        sentinels: Vec<String>,
        /// The master's ACL user, if any.
        username: Option<String>,
        /// The master's password, if any.
        password: Option<String>,
        /// Whether the master speaks TLS.
        tls: bool,
    },
}

/// PEM files for TLS to Redis (`REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT`,
/// `REDIS_TLS_CLIENT_KEY`), read when the service connects. Not used for a Cluster,
/// whose `rediss://` nodes are checked against the system's roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisTlsFiles {
    /// The CA(s) to check Redis's certificates against, instead of the system's roots.
    pub ca_cert: Option<PathBuf>,
    /// A client certificate and its key.
    pub client: Option<(PathBuf, PathBuf)>,
}

impl RedisTlsFiles {
    /// The CA file `ca_cert`, and the client certificate and key, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::backend::RedisTlsFiles;
    ///
    /// let files = RedisTlsFiles::new(Some("/etc/redis/ca.pem".into()), None);
    /// assert!(files.client.is_none());
    /// ```
    pub fn new(ca_cert: Option<PathBuf>, client: Option<(PathBuf, PathBuf)>) -> Self {
        RedisTlsFiles { ca_cert, client }
    }
}

/// What a store failure does to a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureMode {
    /// The call fails, as in Go.
    #[default]
    Error,
    /// The call is admitted ([`Resilient`] under [`FailurePolicy::Open`]).
    Allow,
}

/// How to build a [`Backend`].
///
/// # Examples
///
/// ```
/// use tollgate_rls::backend::{BackendOptions, FailureMode};
///
/// let options = BackendOptions {
///     key_prefix: "rl".into(),
///     failure_mode: FailureMode::Allow,
///     local_cache_bytes: 1 << 20,
///     ..BackendOptions::redis("redis://127.0.0.1:6379/")
/// };
/// assert_eq!(options.per_second, None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// Where counts live.
    pub store: StoreKind,
    /// Where the counts of per-second limits live, if elsewhere.
    pub per_second: Option<StoreKind>,
    /// Every key's prefix (no `{` or `}`: the tag after it is the Cluster hash tag).
    pub key_prefix: String,
    /// What a store failure does.
    pub failure_mode: FailureMode,
    /// Under [`FailureMode::Allow`], how long a call may take before it is admitted.
    pub deadline: Duration,
    /// The bound of the local over-limit cache in bytes; 0 for none.
    pub local_cache_bytes: usize,
    /// The CA and client certificate of TLS connections to Redis.
    pub redis_tls: RedisTlsFiles,
}

impl BackendOptions {
    /// Counts in memory, with the defaults.
    pub fn memory() -> BackendOptions {
        BackendOptions::with_store(StoreKind::Memory {
            max_keys: DEFAULT_MEMORY_KEYS,
        })
    }

    /// Counts in the Redis at `url`, with the defaults.
    pub fn redis(url: impl Into<String>) -> BackendOptions {
        BackendOptions::with_store(StoreKind::Redis { url: url.into() })
    }

    /// Counts in the Redis Cluster reached through `urls`, with the defaults.
    pub fn redis_cluster<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> BackendOptions {
        BackendOptions::with_store(StoreKind::RedisCluster {
            urls: urls.into_iter().map(Into::into).collect(),
        })
    }

    fn with_store(store: StoreKind) -> BackendOptions {
        BackendOptions {
            store,
            per_second: None,
            key_prefix: "ratelimit".into(),
            failure_mode: FailureMode::Error,
            deadline: DEFAULT_DEADLINE,
            local_cache_bytes: 0,
            redis_tls: RedisTlsFiles::default(),
        }
    }
}

/// The stores the engine decides on, and the local over-limit cache.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::store::{Check, Op, Request, Rule, Store};
/// use tollgate_rls::backend::{Backend, BackendOptions};
/// use std::time::Duration;
///
/// # tokio_test_block_on(async {
/// let backend = Backend::connect(&BackendOptions::memory()).await?;
/// let rule = Rule::from(FixedWindow::new(1, Duration::from_secs(60))?);
/// let checks = [Check::new("api_user_7", &rule)];
/// let request = Request::new("api", &checks, Op::Acquire(1));
/// assert!(backend.store().execute(&request).await?.is_admitted());
/// assert!(!backend.store().execute(&request).await?.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct Backend {
    store: Arc<dyn Store>,
    per_second: Option<Arc<dyn Store>>,
    local_cache: Option<Arc<OverLimitCache>>,
    redis: Option<RedisLink>,
    description: String,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("store", &self.description)
            .field("per_second", &self.per_second.is_some())
            .field("local_cache", &self.local_cache)
            .field("redis", &self.redis)
            .finish()
    }
}

impl Backend {
    /// Builds the stores `options` describe, connecting to Redis if it is one.
    ///
    /// # Errors
    ///
    /// - [`StoreError::Config`] for a prefix with a brace, a memory bound of 0, a
    ///   Cluster or Sentinel without URLs, or a zero deadline under
    ///   [`FailureMode::Allow`];
    /// - [`StoreError::InvalidUrl`] for a TLS file that cannot be read;
    /// - [`StoreError::InvalidUrl`], [`StoreError::Authentication`] or
    ///   [`StoreError::Connection`] when Redis cannot be reached, whatever the failure
    ///   mode: a service that starts without its Redis is misconfigured.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops any connection made so far.
    pub async fn connect(options: &BackendOptions) -> Result<Backend, StoreError> {
        let (store, connection) = build(&options.store, options).await?;
        let per_second = match &options.per_second {
            Some(kind) => Some(build(kind, options).await?.0),
            None => None,
        };
        let mut backend = Backend::assemble(store, per_second, options)?;
        backend.redis = connection.map(|connection| {
            RedisLink::new(
                connection,
                &options.key_prefix,
                options.failure_mode,
                options.deadline,
            )
        });
        Ok(backend)
    }

    /// The memory store of `options` on `clock` (a
    /// [`ManualClock`](tollgate::time::ManualClock) in tests); a per-second store, if
    /// any, is in memory on the same clock. Redis kinds are refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::backend::{Backend, BackendOptions};
    ///
    /// let backend = Backend::memory_with_clock(&BackendOptions::memory(), ManualClock::new())?;
    /// assert!(backend.local_cache().is_none());
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a Redis kind, a prefix with a brace or a bound of 0.
    pub fn memory_with_clock<C: Clock>(
        options: &BackendOptions,
        clock: C,
    ) -> Result<Backend, StoreError> {
        let memory = |kind: &StoreKind| -> Result<Arc<dyn Store>, StoreError> {
            match kind {
                StoreKind::Memory { max_keys } => Ok(Arc::new(memory_store(
                    *max_keys,
                    &options.key_prefix,
                    clock.clone(),
                )?)),
                _ => Err(ConfigError::OutOfRange {
                    parameter: "store",
                    expected: "memory, with an injected clock",
                }
                .into()),
            }
        };
        let store = memory(&options.store)?;
        let per_second = options.per_second.as_ref().map(memory).transpose()?;
        Backend::assemble(store, per_second, options)
    }

    /// A backend over stores built elsewhere, with a local over-limit cache of
    /// `local_cache_bytes` (0 for none).
    pub fn from_stores(
        store: Arc<dyn Store>,
        per_second: Option<Arc<dyn Store>>,
        local_cache_bytes: usize,
    ) -> Backend {
        Backend {
            store,
            per_second,
            local_cache: OverLimitCache::new(local_cache_bytes).ok().map(Arc::new),
            redis: None,
            description: "custom".into(),
        }
    }

    fn assemble(
        store: Arc<dyn Store>,
        per_second: Option<Arc<dyn Store>>,
        options: &BackendOptions,
    ) -> Result<Backend, StoreError> {
        let local_cache = match options.local_cache_bytes {
            0 => None,
            bytes => Some(Arc::new(OverLimitCache::new(bytes)?)),
        };
        Ok(Backend {
            store,
            per_second,
            local_cache,
            redis: None,
            description: describe(&options.store, options.failure_mode),
        })
    }

    /// The store of every limit (of every limit but per-second ones when a
    /// per-second store is configured: see [`store_for`](Backend::store_for)).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The store of a limit of `unit`: the per-second store for [`Unit::Second`] when
    /// there is one, as Go's `REDIS_PERSECOND`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::backend::{Backend, BackendOptions, StoreKind};
    ///
    /// let options = BackendOptions {
    ///     per_second: Some(StoreKind::Memory { max_keys: 1_000 }),
    ///     ..BackendOptions::memory()
    /// };
    /// let backend = Backend::memory_with_clock(&options, ManualClock::new())?;
    /// assert!(!Arc::ptr_eq(backend.store_for(Unit::Second), backend.store()));
    /// assert!(Arc::ptr_eq(backend.store_for(Unit::Hour), backend.store()));
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn store_for(&self, unit: Unit) -> &Arc<dyn Store> {
        match (&self.per_second, unit) {
            (Some(per_second), Unit::Second) => per_second,
            _ => &self.store,
        }
    }

    /// The main store's Redis connection, with the backend's prefix, failure mode
    /// and deadline; `None` for the memory store and stores built elsewhere.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::backend::{Backend, BackendOptions};
    ///
    /// let backend = Backend::memory_with_clock(&BackendOptions::memory(), ManualClock::new())?;
    /// assert!(backend.redis().is_none());
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn redis(&self) -> Option<&RedisLink> {
        self.redis.as_ref()
    }

    /// The local over-limit cache, if enabled.
    pub fn local_cache(&self) -> Option<&OverLimitCache> {
        self.local_cache.as_deref()
    }

    /// Whether the local cache holds `key` as over its limit of `unit` in the window
    /// holding `now_unix` (false without a cache).
    ///
    /// # Examples
    ///
    /// ```
    /// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::backend::{Backend, BackendOptions};
    ///
    /// let options = BackendOptions { local_cache_bytes: 1 << 20, ..BackendOptions::memory() };
    /// let backend = Backend::memory_with_clock(&options, ManualClock::new())?;
    /// // The store found "api_user_7" over its per-minute limit at 1234.
    /// backend.remember_over_limit("api_user_7", Unit::Minute, 1234)?;
    /// assert!(backend.over_limit_locally("api_user_7", Unit::Minute, 1259)?);
    /// assert!(!backend.over_limit_locally("api_user_7", Unit::Minute, 1260)?); // next minute
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`VerdictError::UnknownUnit`] for `UNKNOWN`.
    pub fn over_limit_locally(
        &self,
        key: &str,
        unit: Unit,
        now_unix: i64,
    ) -> Result<bool, VerdictError> {
        let Some(cache) = &self.local_cache else {
            return Ok(false);
        };
        let start = window_start(unit, now_unix)?;
        Ok(cache.contains(key, start, now_unix))
    }

    /// Remembers `key` as over its limit of `unit` until the window holding `now_unix`
    /// ends (nothing without a cache): after a
    /// [`DescriptorVerdict`](crate::verdict::DescriptorVerdict) with
    /// `newly_over_limit`.
    ///
    /// # Errors
    ///
    /// [`VerdictError::UnknownUnit`] for `UNKNOWN`.
    pub fn remember_over_limit(
        &self,
        key: &str,
        unit: Unit,
        now_unix: i64,
    ) -> Result<(), VerdictError> {
        let Some(cache) = &self.local_cache else {
            return Ok(());
        };
        let start = window_start(unit, now_unix)?;
        let length = unit_seconds(unit).ok_or(VerdictError::UnknownUnit(unit as i32))?;
        cache.insert(key, start, start.saturating_add(length), now_unix);
        Ok(())
    }
}

fn describe(kind: &StoreKind, mode: FailureMode) -> String {
    let store = match kind {
        StoreKind::Memory { .. } => return "memory".into(),
        StoreKind::Redis { .. } => "redis",
        StoreKind::RedisCluster { .. } => "redis cluster",
        StoreKind::RedisSentinel { .. } => "redis sentinel",
    };
    match mode {
        FailureMode::Error => format!("{store}, failing calls on errors"),
        FailureMode::Allow => format!("{store}, failing open"),
    }
}

fn memory_store<C: Clock>(
    max_keys: usize,
    prefix: &str,
    clock: C,
) -> Result<MemoryStore<C>, StoreError> {
    MemoryStore::with_clock(KeyedConfig::new(max_keys), prefix, clock)
}

/// The store of `kind`, and its Redis connection if it has one.
async fn build(
    kind: &StoreKind,
    options: &BackendOptions,
) -> Result<(Arc<dyn Store>, Option<RedisConnection>), StoreError> {
    let prefix = options.key_prefix.as_str();
    match kind {
        StoreKind::Memory { max_keys } => Ok((
            Arc::new(memory_store(*max_keys, prefix, MonotonicClock::new())?),
            None,
        )),
        StoreKind::Redis { url } => {
            let connect = connect_options(&options.redis_tls)?;
            let store = RedisStore::connect_with(url, prefix, &connect).await?;
            let connection = RedisConnection::Single(store.connection().clone());
            Ok((wrap(store, options)?, Some(connection)))
        }
        StoreKind::RedisSentinel {
            master_name,
            sentinels,
            username,
            password,
            tls,
        } => {
            let mut connect = connect_options(&options.redis_tls)?.tls(*tls);
            connect = match (username, password) {
                (Some(username), Some(password)) => connect.user(username, password),
                (_, Some(password)) => connect.password(password),
                _ => connect,
            };
            let sentinels: Vec<&str> = sentinels.iter().map(String::as_str).collect();
            let store =
                RedisStore::connect_sentinel_with(&sentinels, master_name, prefix, &connect)
                    .await?;
            let connection = RedisConnection::Sentinel(store.connection().clone());
            Ok((wrap(store, options)?, Some(connection)))
        }
        StoreKind::RedisCluster { urls } => {
            if urls.is_empty() {
                return Err(ConfigError::Zero {
                    parameter: "redis cluster urls",
                }
                .into());
            }
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            let store = RedisStore::connect_cluster(&urls, prefix).await?;
            let connection = RedisConnection::Cluster(store.connection().clone());
            Ok((wrap(store, options)?, Some(connection)))
        }
    }
}

/// The connection options with the TLS files' contents.
fn connect_options(files: &RedisTlsFiles) -> Result<RedisConnectOptions, StoreError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| {
            StoreError::InvalidUrl(format!("cannot read {}: {e}", path.display()).into())
        })
    };
    let mut options = RedisConnectOptions::new();
    if let Some(ca_cert) = &files.ca_cert {
        options = options.root_certificate_pem(read(ca_cert)?);
    }
    if let Some((cert, key)) = &files.client {
        options = options.client_certificate_pem(read(cert)?, read(key)?);
    }
    Ok(options)
}

fn wrap<S: Store + 'static>(
    store: S,
    options: &BackendOptions,
) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match options.failure_mode {
        FailureMode::Error => Arc::new(store),
        FailureMode::Allow => Arc::new(
            Resilient::builder(store, FailurePolicy::Open)
                .deadline(options.deadline)
                .build()?,
        ),
    })
}

/// What one entry costs besides its key, for the byte bound: the map's and the index's
/// share of the key, the window, the expiry and the pointers.
const ENTRY_OVERHEAD: usize = 64;

/// Go's local cache of over-limit keys: (key, window start) pairs known to be over
/// their limit, each until its window ends, within a bound in bytes.
///
/// When an entry would not fit, the entries expiring soonest (the expired ones first)
/// make room. Time is Unix seconds, passed in.
///
/// # Examples
///
/// ```
/// use tollgate_rls::backend::OverLimitCache;
///
/// let cache = OverLimitCache::new(1 << 20)?;
/// // Over its limit in the minute starting at 1200, until 1260.
/// cache.insert("api_user_7", 1200, 1260, 1234);
/// assert!(cache.contains("api_user_7", 1200, 1259));
/// assert!(!cache.contains("api_user_7", 1200, 1260));
/// assert!(!cache.contains("api_user_7", 1260, 1261)); // the next window
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct OverLimitCache {
    max_bytes: usize,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// Per key, its (window start, expiry) pairs: lookups borrow the key, no allocation.
    windows: HashMap<Box<str>, Vec<(i64, i64)>>,
    /// (expiry, key, window start), soonest first.
    by_expiry: BTreeSet<(i64, Box<str>, i64)>,
    len: usize,
    bytes: usize,
}

impl CacheState {
    fn expiry(&self, key: &str, window: i64) -> Option<i64> {
        self.windows
            .get(key)?
            .iter()
            .find(|(w, _)| *w == window)
            .map(|(_, e)| *e)
    }

    fn remove(&mut self, key: &str, window: i64) {
        let Some(windows) = self.windows.get_mut(key) else {
            return;
        };
        let Some(i) = windows.iter().position(|(w, _)| *w == window) else {
            return;
        };
        let (_, expires) = windows.swap_remove(i);
        if windows.is_empty() {
            self.windows.remove(key);
        }
        self.by_expiry.remove(&(expires, key.into(), window));
        self.len -= 1;
        self.bytes -= key.len() + ENTRY_OVERHEAD;
    }
}

impl fmt::Debug for OverLimitCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OverLimitCache")
            .field("max_bytes", &self.max_bytes)
            .field("len", &self.len())
            .finish()
    }
}

impl OverLimitCache {
    /// A cache of at most `max_bytes` bytes of entries (each its key's length plus
    /// 64).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for 0 (no cache is "no `OverLimitCache`").
    pub fn new(max_bytes: usize) -> Result<OverLimitCache, ConfigError> {
        if max_bytes == 0 {
            return Err(ConfigError::Zero {
                parameter: "local_cache_bytes",
            });
        }
        Ok(OverLimitCache {
            max_bytes,
            state: Mutex::new(CacheState::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // Every update leaves the maps consistent before it can panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` is over its limit in the window starting at `window_start`, at
    /// `now_unix`.
    pub fn contains(&self, key: &str, window_start: i64, now_unix: i64) -> bool {
        let mut state = self.state();
        match state.expiry(key, window_start) {
            Some(expires) if now_unix < expires => true,
            Some(_) => {
                state.remove(key, window_start);
                false
            }
            None => false,
        }
    }

    /// Remembers `key` as over its limit in the window starting at `window_start`,
    /// until `expires_unix`, at `now_unix`. An entry larger than the whole bound is
    /// not kept.
    pub fn insert(&self, key: &str, window_start: i64, expires_unix: i64, now_unix: i64) {
        let size = key.len() + ENTRY_OVERHEAD;
        if size > self.max_bytes || expires_unix <= now_unix {
            return;
        }
        let mut state = self.state();
        state.remove(key, window_start);
        while state.bytes + size > self.max_bytes {
            let Some((_, k, w)) = state.by_expiry.first().cloned() else {
                break;
            };
            state.remove(&k, w);
        }
        state
            .windows
            .entry(key.into())
            .or_default()
            .push((window_start, expires_unix));
        state
            .by_expiry
            .insert((expires_unix, key.into(), window_start));
        state.len += 1;
        state.bytes += size;
    }

    /// How many entries are held (expired ones included until looked up or pushed
    /// out).
    pub fn len(&self) -> usize {
        self.state().len
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the entries count for.
    pub fn bytes(&self) -> usize {
        self.state().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate::algorithm::FixedWindow;
    use tollgate::store::{Check, Op, Request, Rule};
    use tollgate::time::ManualClock;

    #[test]
    fn over_limit_with_local_cache() {
        // base_limiter_test.go, TestOverLimitWithLocalCache and
        // TestNoOverLimitWithLocalCache.
        let cache = OverLimitCache::new(1_000).unwrap();
        assert!(!cache.contains("domain_key_value", 1234, 1234));
        cache.insert("key", 1234, 1334, 1234);
        assert!(cache.contains("key", 1234, 1234));
        assert!(!cache.contains("domain_key_value", 1234, 1234));
        let none = Backend::from_stores(
            Arc::new(memory_store(10, "t", ManualClock::new()).unwrap()),
            None,
            0,
        );
        assert!(none.local_cache().is_none());
        assert_eq!(
            none.over_limit_locally("key", Unit::Second, 1234),
            Ok(false)
        );
    }

    #[test]
    fn entries_last_until_their_window_ends() {
        let backend = Backend::memory_with_clock(
            &BackendOptions {
                local_cache_bytes: 10_000,
                ..BackendOptions::memory()
            },
            ManualClock::new(),
        )
        .unwrap();
        // Found over its hourly limit at 1,000,000 (window 997,200 .. 1,000,800).
        backend
            .remember_over_limit("d_k_v", Unit::Hour, 1_000_000)
            .unwrap();
        assert_eq!(
            backend.over_limit_locally("d_k_v", Unit::Hour, 1_000_799),
            Ok(true)
        );
        assert_eq!(
            backend.over_limit_locally("d_k_v", Unit::Hour, 1_000_800),
            Ok(false)
        );
        // Another unit is another window.
        assert_eq!(
            backend.over_limit_locally("d_k_v", Unit::Minute, 1_000_000),
            Ok(false)
        );
        assert_eq!(
            backend.over_limit_locally("d_k_v", Unit::Unknown, 1_000_000),
            Err(VerdictError::UnknownUnit(0))
        );
        // The next window's lookups miss the old entry; it stays until looked up after
        // its end, or pushed out.
        let cache = backend.local_cache().unwrap();
        assert_eq!(cache.len(), 1);
        assert!(!cache.contains("d_k_v", 997_200, 1_000_800));
        assert!(cache.is_empty());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn the_byte_bound_pushes_out_the_soonest_expiring() {
        let entry = 1 + ENTRY_OVERHEAD;
        let cache = OverLimitCache::new(3 * entry).unwrap();
        cache.insert("a", 0, 100, 0);
        cache.insert("b", 0, 50, 0);
        cache.insert("c", 0, 200, 0);
        assert_eq!(cache.bytes(), 3 * entry);
        cache.insert("d", 0, 150, 0);
        assert_eq!(cache.len(), 3);
        assert!(!cache.contains("b", 0, 1));
        for k in ["a", "c", "d"] {
            assert!(cache.contains(k, 0, 1), "{k}");
        }
        // Re-inserting a key replaces it rather than adding.
        cache.insert("a", 0, 300, 1);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.bytes(), 3 * entry);
        cache.insert("e", 0, 400, 1);
        assert!(!cache.contains("d", 0, 1));
        // Too big for the whole bound, or already expired: not kept.
        cache.insert(&"x".repeat(4 * entry), 0, 500, 1);
        cache.insert("f", 0, 1, 1);
        assert_eq!(cache.len(), 3);
        assert!(OverLimitCache::new(0).is_err());
    }

    #[tokio::test]
    async fn memory_counts_on_the_injected_clock() {
        let clock = ManualClock::new();
        let backend = Backend::memory_with_clock(&BackendOptions::memory(), clock.clone()).unwrap();
        let rule = Rule::from(FixedWindow::new(2, Duration::from_secs(60)).unwrap());
        let checks = [Check::new("k_v", &rule)];
        let request = Request::new("api", &checks, Op::Acquire(1));
        let store = backend.store_for(Unit::Minute);
        assert!(store.execute(&request).await.unwrap().is_admitted());
        assert!(store.execute(&request).await.unwrap().is_admitted());
        assert!(!store.execute(&request).await.unwrap().is_admitted());
        clock.advance(Duration::from_secs(60));
        assert!(store.execute(&request).await.unwrap().is_admitted());
    }

    #[test]
    fn a_per_second_store_takes_per_second_limits() {
        let options = BackendOptions {
            per_second: Some(StoreKind::Memory { max_keys: 10 }),
            ..BackendOptions::memory()
        };
        let backend = Backend::memory_with_clock(&options, ManualClock::new()).unwrap();
        assert!(Arc::ptr_eq(
            backend.store_for(Unit::Minute),
            backend.store()
        ));
        assert!(!Arc::ptr_eq(
            backend.store_for(Unit::Second),
            backend.store()
        ));
    }

    #[tokio::test]
    async fn bad_options_are_typed_errors() {
        let brace = BackendOptions {
            key_prefix: "a{b".into(),
            ..BackendOptions::memory()
        };
        assert!(matches!(
            Backend::connect(&brace).await,
            Err(StoreError::Config(_))
        ));
        let zero = BackendOptions::with_store(StoreKind::Memory { max_keys: 0 });
        assert!(matches!(
            Backend::connect(&zero).await,
            Err(StoreError::Config(_))
        ));
        let cluster = BackendOptions::redis_cluster(Vec::<String>::new());
        assert!(matches!(
            Backend::connect(&cluster).await,
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            Backend::memory_with_clock(&BackendOptions::redis("redis://x/"), ManualClock::new()),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            Backend::connect(&BackendOptions::redis("not a url")).await,
            Err(StoreError::InvalidUrl(_))
        ));
    }
}
