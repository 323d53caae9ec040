//! Redis behind Sentinel: [`SentinelConnection`], a connection to the master that the
//! sentinels name, which follows it across failovers (redis-rs's connections keep the
//! address they were given).

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

use futures_core::Stream;
use redis::aio::{ConnectionLike, MultiplexedConnection, PubSub};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Msg,
    Pipeline, RedisConnectionInfo, RedisError, RedisFuture, RedisResult, ServerErrorKind, TlsMode,
    Value,
};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::connect::RedisConnectOptions;
use super::{RedisStore, from_redis, invalid_url};
use crate::error::ConfigError;
use crate::store::{StoreError, validate_prefix};
use crate::sync::{Arc, AtomicBool, Mutex, Ordering, Weak};
use crate::time::{Clock, MonotonicClock, Nanos, Sleep};

/// The first pause between two lookups of a master the sentinels do not name yet.
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// The longest pause between two lookups.
const LAST_RETRY: Duration = Duration::from_secs(1);

/// The channel on which sentinels announce a new master.
const SWITCH_MASTER: &str = "+switch-master";

/// The channel on which the sentinel leading a failover announces that it promotes a
/// replica: from then on, what the old master writes is lost.
const PROMOTING: &str = "+failover-state-send-slaveof-noone";

/// The channels on which the leading sentinel announces that a failover stopped.
const ABORTED: &str = "-failover-abort-*";

/// The longest a connection holds calls back during a failover that no sentinel
/// ends or aborts.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

/// A connection to the Redis master that a group of Sentinels names, which follows the
/// master across failovers: a [`ConnectionLike`] for [`RedisStore`], cheap to clone
/// (clones share one multiplexed connection).
///
/// It looks the master up through the sentinels (redis-rs's `SentinelClient`: `SENTINEL
/// MASTERS` on each, then `ROLE` on the master named) and holds one multiplexed
/// connection to it. It looks the master up again, in a background task, one lookup at
/// a time, and swaps in a connection to the master found:
///
/// - when a call fails as a lost master would fail it: an I/O error, a dropped or
///   refused connection, a timeout, or a `READONLY` or `MASTERDOWN` reply (the old
///   master turned replica);
/// - when a sentinel announces `+switch-master` for this master (the connection
///   listens to every sentinel), so that a manual failover, which leaves the old
///   master writable for about 10 s, is followed at once.
///
/// From the moment the sentinel leading a failover announces that it promotes a
/// replica (`+failover-state-send-slaveof-noone`) until a sentinel names the new
/// master, calls are not sent to the old master: what it would write then is lost when
/// it is demoted. They fail at once instead, and the failure policy decides them. If
/// the failover is aborted (`-failover-abort-*`), or nothing ends it within 10 s,
/// calls go to the master the sentinels name, the old one included.
///
/// A lookup that names no master yet (the sentinels have not agreed on one) is tried
/// again after 50 ms, then after twice as long each time, up to 1 s, until one is
/// found. Each lookup is bounded by
/// [`sentinel_timeout`](RedisConnectOptions::sentinel_timeout).
///
/// The call that failed is not sent again: whether Redis ran a script whose reply was
/// lost is unknown. It fails with [`StoreError::Connection`], and calls made until the
/// new connection is in place fail the same way; under
/// [`Resilient`](crate::store::Resilient), the [`FailurePolicy`](crate::store::FailurePolicy)
/// decides them. The library of Redis Functions is replicated with the data, so the new
/// master has it; scripts (and the library, on a master without it) are loaded again
/// at the first call that finds them missing.
///
/// # Failover and over-admission
///
/// Redis replicates asynchronously, so a failover can forget decisions, and a limit
/// then admits more than it allows:
///
/// - **Lost writes.** A write the old master acknowledged but had not yet sent to the
///   replica that Sentinel promotes is lost: the permits it took are granted again on
///   the new master. On a LAN the replication lag is well under a millisecond, so this
///   is at most the decisions of that last instant. `tests/store_sentinel.rs` measures
///   it after a killed master.
/// - **A writable old master.** After `SENTINEL FAILOVER`, or a partition that leaves
///   the old master reachable, the old master keeps accepting writes until Sentinel
///   turns it into a replica (about 10 s), and those writes are then discarded. This
///   connection stops writing to it when the promotion is announced, so what is lost
///   is what the old master admitted between the promotion and the announcement's
///   arrival, and the calls in flight then. A connection that cannot hear the leading
///   sentinel (it listens to the sentinels it was given, and one may be down) moves
///   only at `+switch-master`, about a second later, and loses what the old master
///   admitted meanwhile.
/// - **The policy.** While no master answers, the failure policy decides: `Open`
///   admits everything, `Fallback { nodes }` admits each node's share on its own, and
///   `Closed` admits nothing.
///
/// Per window, the over-admission is at most what the old master admitted after the
/// last write that reached the new master, plus what the policy admitted.
/// `tests/store_sentinel.rs` measures it on loopback (2 tasks, about 900 requests/s,
/// 4 keys limited to 400 each, the `Closed` policy): nothing over-admitted after a
/// killed master (replaced in about 2.3 s) nor after `SENTINEL FAILOVER` (calls held
/// back for about 1.2 s); before calls were held back, the manual failover
/// over-admitted 791 of the 1,600.
///
/// # Examples
///
/// ```no_run
/// use tollgate::store::{FailurePolicy, RedisStore, Resilient, SharedLimiter};
/// use tollgate::{algorithm::Gcra, Quota};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"];
/// let redis = RedisStore::connect_sentinel(&sentinels, "mymaster", "api").await?;
/// println!("master at {}", redis.connection().master_address());
/// // During a failover, each of 4 nodes admits its quarter on its own.
/// let store = Resilient::new(redis, FailurePolicy::Fallback { nodes: 4 })?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(100)?))?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

/// What the clones of one connection share.
struct Shared {
    master_name: String,
    current: Mutex<Current>,
    /// Held across a lookup: redis-rs's client takes `&mut self`.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// Whether a background lookup is under way: one at a time.
    following: AtomicBool,
    config: AsyncConnectionConfig,
    lookup_timeout: Duration,
    db: i64,
    runtime: Handle,
    /// The tasks listening to the sentinels, stopped with the last clone.
    watchers: Mutex<Vec<AbortHandle>>,
    /// Wakes a lookup waiting to try again: a sentinel announced something.
    wake: Notify,
    clock: MonotonicClock,
}

/// The master in use.
struct Current {
    /// Counts the connections installed, so that a failure on an old one does not
    /// replace a newer one.
    generation: u64,
    connection: MultiplexedConnection,
    address: String,
    /// Since when calls are held back, the old master's replica being promoted.
    held_since: Option<Nanos>,
}

impl fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.shared.current.lock();
        f.debug_struct("SentinelConnection")
            .field("master_name", &self.shared.master_name)
            .field("master_address", &current.address)
            .field("switches", &current.generation)
            .finish_non_exhaustive()
    }
}

impl SentinelConnection {
    /// Looks the master named `master_name` up through the sentinels at
    /// `sentinels` (URLs: `redis://host:26379`, `redis://user:password@host:26379`,
    /// or `rediss://` for sentinels over TLS) and connects to it, with the
    /// credentials, certificates and timeouts of `options` (for the master; for the
    /// sentinels, [`sentinel_user`](RedisConnectOptions::sentinel_user) or their URLs'
    /// credentials).
    ///
    /// Must be called within a tokio runtime: the connection's background tasks run
    /// on it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tollgate::store::{RedisConnectOptions, RedisStore, SentinelConnection};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = RedisConnectOptions::new().user("limiter", "s3cret");
    /// let connection =
    ///     SentinelConnection::connect(&["redis://127.0.0.1:26379"], "mymaster", &options).await?;
    /// let store = RedisStore::new(connection, "api")?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`StoreError::Config`] for no sentinel, an empty master name, a zero
    ///   timeout, or no tokio runtime;
    /// - [`StoreError::InvalidUrl`] for a malformed sentinel URL, or TLS without the
    ///   feature `redis-tls`;
    /// - [`StoreError::Connection`] when no sentinel can be reached, when none knows a
    ///   master by that name (the source is a [`RedisError`] of kind
    ///   [`ErrorKind::MasterNameNotFoundBySentinel`]; a failover under way answers the
    ///   same, so it may succeed later), when the master named cannot be reached, or
    ///   when the lookup outlives [`sentinel_timeout`](RedisConnectOptions::sentinel_timeout);
    /// - [`StoreError::Authentication`] if the master or a sentinel refuses the
    ///   credentials.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the connections made so far.
    pub async fn connect(
        sentinels: &[&str],
        master_name: &str,
        options: &RedisConnectOptions,
    ) -> Result<SentinelConnection, StoreError> {
        if sentinels.is_empty() {
            return Err(ConfigError::Zero {
                parameter: "sentinels",
            }
            .into());
        }
        if master_name.is_empty() {
            return Err(ConfigError::OutOfRange {
                parameter: "master_name",
                expected: "a name, not empty",
            }
            .into());
        }
        options.check()?;
        let runtime = Handle::try_current().map_err(|_| ConfigError::OutOfRange {
            parameter: "runtime",
            expected: "a tokio runtime to connect within",
        })?;
        #[cfg(feature = "redis-tls")]
        super::tls::provide();
        let (mut client, watched) = sentinel_client(sentinels, master_name, options)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout));
        let (connection, address) = lookup(&mut client, &config, options.sentinel_timeout, None)
            .await
            .map_err(from_redis)?
            .ok_or_else(|| StoreError::Protocol("the sentinels named no master".into()))?;
        let shared = Arc::new(Shared {
            master_name: master_name.to_owned(),
            current: Mutex::new(Current {
                generation: 0,
                connection,
                address,
                held_since: None,
            }),
            sentinels: tokio::sync::Mutex::new(client),
            following: AtomicBool::new(false),
            config,
            lookup_timeout: options.sentinel_timeout,
            db: 0,
            runtime,
            watchers: Mutex::new(Vec::new()),
            wake: Notify::new(),
            clock: MonotonicClock::new(),
        });
        for sentinel in watched {
            let watcher = shared
                .runtime
                .spawn(watch(Arc::downgrade(&shared), sentinel));
            shared.watchers.lock().push(watcher.abort_handle());
        }
        Ok(SentinelConnection { shared })
    }

    /// The name of the master, as the sentinels know it.
    pub fn master_name(&self) -> &str {
        &self.shared.master_name
    }

    /// The address of the master in use, as `host:port`.
    pub fn master_address(&self) -> String {
        self.shared.current.lock().address.clone()
    }

    /// How many times the connection moved to a master found by a new lookup (the
    /// same address again after a restart counts too).
    pub fn switches(&self) -> u64 {
        self.shared.current.lock().generation
    }

    /// Starts a lookup if `error` (of a call on the connection of `generation`) says
    /// that the master is lost.
    fn check(&self, generation: u64, error: Option<&RedisError>, reply: &[Value]) {
        let lost = error.is_some_and(master_lost)
            || reply.iter().any(|value| match value {
                Value::ServerError(e) => {
                    matches!(
                        e.kind(),
                        Some(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
                    ) || e.code() == "READONLY"
                }
                _ => false,
            });
        if lost {
            self.shared.follow(generation, false);
        }
    }
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut connection) = self.shared.current()?;
            let reply = connection.req_packed_command(cmd).await;
            match &reply {
                Ok(value) => self.check(generation, None, std::slice::from_ref(value)),
                Err(error) => self.check(generation, Some(error), &[]),
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut connection) = self.shared.current()?;
            let reply = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            match &reply {
                Ok(values) => self.check(generation, None, values),
                Err(error) => self.check(generation, Some(error), &[]),
            }
            reply
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.db
    }
}

impl Shared {
    /// The connection in use and its generation; an error while calls are held
    /// back.
    fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let current = self.current.lock();
        if self.holding(&current) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the master is failing over: a replica is being promoted",
            )
            .into());
        }
        Ok((current.generation, current.connection.clone()))
    }

    /// Whether calls are held back.
    fn holding(&self, current: &Current) -> bool {
        current
            .held_since
            .is_some_and(|since| self.clock.now().saturating_since(since) < HOLD_LIMIT)
    }

    /// Looks the master up again in the background, unless the connection of
    /// `generation` was replaced already. If a lookup is under way, wakes it when
    /// `wake` (a sentinel's announcement) rather than starting another.
    fn follow(self: &Arc<Self>, generation: u64, wake: bool) {
        if self.following.swap(true, Ordering::AcqRel) {
            if wake {
                self.wake.notify_one();
            }
            return;
        }
        self.runtime.spawn(follow(Arc::downgrade(self), generation));
    }

    /// Acts on a sentinel's announcement.
    fn hear(self: &Arc<Self>, message: &Msg) {
        let payload: String = message.get_payload().unwrap_or_default();
        let words: Vec<&str> = payload.split(' ').collect();
        let name = self.master_name.as_str();
        match message.get_channel_name() {
            // "<name> <old ip> <old port> <new ip> <new port>"
            SWITCH_MASTER if words.first() == Some(&name) => {
                let generation = self.current.lock().generation;
                self.follow(generation, true);
            }
            // "slave <ip:port> <ip> <port> @ <name> <master ip> <master port>"
            PROMOTING => {
                let Some(at) = words.iter().position(|w| *w == "@") else {
                    return;
                };
                let Some(&[promoted_for, ip, port]) = words.get(at + 1..at + 4) else {
                    return;
                };
                let mut current = self.current.lock();
                if promoted_for != name
                    || current.address != format!("{ip}:{port}")
                    || current.held_since.is_some()
                {
                    return;
                }
                current.held_since = Some(self.clock.now());
                let generation = current.generation;
                drop(current);
                tracing::info!(
                    target: "tollgate::store::redis",
                    master = %self.master_name,
                    "a replica is being promoted: calls wait for the new master"
                );
                self.follow(generation, true);
            }
            // "master <name> <ip> <port>"
            channel if channel.starts_with("-failover-abort-") && words.get(1) == Some(&name) => {
                self.current.lock().held_since = None;
                self.wake.notify_one();
            }
            _ => {}
        }
    }

    /// Puts a connection to the master at `address` in use.
    fn install(&self, connection: MultiplexedConnection, address: String) {
        let mut current = self.current.lock();
        tracing::info!(
            target: "tollgate::store::redis",
            master = %self.master_name,
            from = %current.address,
            to = %address,
            "connected to the master the sentinels name"
        );
        current.generation += 1;
        current.connection = connection;
        current.address = address;
        current.held_since = None;
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for watcher in self.watchers.lock().drain(..) {
            watcher.abort();
        }
    }
}

/// Looks the master up until one answers, while the connection of `seen` is in use
/// and the connection is alive. While calls are held back, the master being replaced
/// does not count as an answer, and lookups follow each other closely.
async fn follow(shared: Weak<Shared>, seen: u64) {
    let mut pause = FIRST_RETRY;
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let replaced = {
            let current = strong.current.lock();
            if current.generation != seen {
                break;
            }
            strong.holding(&current).then(|| current.address.clone())
        };
        let found = {
            let mut sentinels = strong.sentinels.lock().await;
            let avoid = replaced.as_deref();
            lookup(&mut sentinels, &strong.config, strong.lookup_timeout, avoid).await
        };
        match found {
            Ok(Some((connection, address))) => {
                strong.install(connection, address);
                break;
            }
            // The sentinels still name the master being replaced.
            Ok(None) => pause = FIRST_RETRY,
            Err(error) => tracing::warn!(
                target: "tollgate::store::redis",
                master = %strong.master_name,
                %error,
                retry_in = ?pause,
                "no master through the sentinels"
            ),
        }
        // Until the pause ends, or a sentinel announces something.
        let _ = within(pause, strong.wake.notified()).await;
        drop(strong);
        pause = (pause * 2).min(LAST_RETRY);
    }
    if let Some(strong) = shared.upgrade() {
        strong.following.store(false, Ordering::Release);
    }
}

/// Listens to `sentinel` (again after it goes away) for announcements about the
/// master.
async fn watch(shared: Weak<Shared>, sentinel: Client) {
    let mut pause = FIRST_RETRY;
    loop {
        if let Some(pubsub) = subscribe(&shared, &sentinel).await {
            pause = FIRST_RETRY;
            let mut messages = pin!(pubsub.into_on_message());
            while let Some(message) = poll_fn(|cx| messages.as_mut().poll_next(cx)).await {
                let Some(strong) = shared.upgrade() else {
                    return;
                };
                strong.hear(&message);
            }
        }
        if shared.strong_count() == 0 {
            return;
        }
        Sleep::new(MonotonicClock::new(), pause).await;
        pause = (pause * 2).min(LAST_RETRY);
    }
}

/// A subscription to the announcements of `sentinel`.
async fn subscribe(shared: &Weak<Shared>, sentinel: &Client) -> Option<PubSub> {
    let limit = shared.upgrade()?.lookup_timeout;
    let subscription = async {
        let mut pubsub = sentinel.get_async_pubsub().await?;
        pubsub.subscribe(SWITCH_MASTER).await?;
        pubsub.subscribe(PROMOTING).await?;
        pubsub.psubscribe(ABORTED).await?;
        Ok::<_, RedisError>(pubsub)
    };
    within(limit, subscription).await?.ok()
}

/// The master the sentinels name, connected, and its address, within `limit`; `None`
/// if they name the master at `avoid`.
async fn lookup(
    sentinels: &mut SentinelClient,
    config: &AsyncConnectionConfig,
    limit: Duration,
    avoid: Option<&str>,
) -> RedisResult<Option<(MultiplexedConnection, String)>> {
    let connect = async {
        let client = sentinels.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        if avoid == Some(address.as_str()) {
            return Ok(None);
        }
        let connection = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        Ok(Some((connection, address)))
    };
    within(limit, connect).await.unwrap_or_else(|| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no master through the sentinels within {limit:?}"),
        )
        .into())
    })
}

/// `work`'s output, or `None` if it takes longer than `limit`.
async fn within<T>(limit: Duration, work: impl Future<Output = T>) -> Option<T> {
    let mut work = pin!(work);
    let mut timer = Sleep::new(MonotonicClock::new(), limit);
    poll_fn(|cx| {
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        Pin::new(&mut timer).poll(cx).map(|()| None)
    })
    .await
}

/// Whether a call failed as it fails when the master is gone or demoted.
fn master_lost(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

/// redis-rs's client for the sentinels at `urls`, looking up the master `master_name`
/// with `options`, and a client for each sentinel, to listen to.
fn sentinel_client(
    urls: &[&str],
    master_name: &str,
    options: &RedisConnectOptions,
) -> Result<(SentinelClient, Vec<Client>), StoreError> {
    let mut infos = Vec::with_capacity(urls.len());
    let (mut username, mut password) = (
        options.sentinel_username.clone(),
        options.sentinel_password.clone(),
    );
    for url in urls {
        let info = url.into_connection_info().map_err(invalid_url)?;
        if password.is_none() {
            if let Some(url_password) = info.redis_settings().password() {
                password = Some(url_password.to_owned());
                username = info.redis_settings().username().map(str::to_owned);
            }
        }
        infos.push(info);
    }
    let sentinels_tls = infos
        .iter()
        .any(|info| matches!(info.addr(), ConnectionAddr::TcpTls { .. }));
    #[cfg(not(feature = "redis-tls"))]
    if options.tls || sentinels_tls {
        return Err(StoreError::InvalidUrl(
            "TLS needs tollgate's feature `redis-tls`".into(),
        ));
    }
    let mut credentials = RedisConnectionInfo::default();
    if let Some(username) = &username {
        credentials = credentials.set_username(username);
    }
    if let Some(password) = &password {
        credentials = credentials.set_password(password);
    }
    let mut watched = Vec::with_capacity(infos.len());
    for info in &infos {
        let info = info.clone().set_redis_settings(credentials.clone());
        #[cfg(feature = "redis-tls")]
        if let (Some(certificates), ConnectionAddr::TcpTls { .. }) =
            (options.certificates(), info.addr())
        {
            watched.push(Client::build_with_tls(info, certificates).map_err(from_redis)?);
            continue;
        }
        watched.push(Client::open(info).map_err(from_redis)?);
    }

    let addresses = infos.iter().map(|info| info.addr().clone());
    let mut builder =
        SentinelClientBuilder::new(addresses, master_name, SentinelServerType::Master)
            .map_err(invalid_url)?;
    if let Some(username) = &options.username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = &options.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if options.tls {
        builder = builder.set_client_to_redis_tls_mode(TlsMode::Secure);
    }
    if let Some(username) = &username {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = &password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    #[cfg(feature = "redis-tls")]
    if let Some(certificates) = options.certificates() {
        if options.tls {
            builder = builder.set_client_to_redis_certificates(certificates.clone());
        }
        if sentinels_tls {
            builder = builder.set_client_to_sentinel_certificates(certificates);
        }
    }
    Ok((builder.build().map_err(from_redis)?, watched))
}

impl RedisStore<SentinelConnection> {
    /// Connects to the master named `master_name` through the sentinels at
    /// `sentinels` (URLs, `redis://host:26379`), follows it across failovers (see
    /// [`SentinelConnection`]), and keeps keys under `prefix`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"];
    /// let store = RedisStore::connect_sentinel(&sentinels, "mymaster", "api").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a prefix with a brace, and as
    /// [`SentinelConnection::connect`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the connections made so far.
    pub async fn connect_sentinel(
        sentinels: &[&str],
        master_name: &str,
        prefix: &str,
    ) -> Result<Self, StoreError> {
        Self::connect_sentinel_with(sentinels, master_name, prefix, &RedisConnectOptions::new())
            .await
    }

    /// As [`connect_sentinel`](Self::connect_sentinel), with the credentials,
    /// certificates and timeouts of `options`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tollgate::store::{RedisConnectOptions, RedisStore};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = RedisConnectOptions::new()
    ///     .user("limiter", "s3cret")
    ///     .sentinel_password("sentinel-secret");
    /// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"];
    /// let store = RedisStore::connect_sentinel_with(&sentinels, "mymaster", "api", &options).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`connect_sentinel`](Self::connect_sentinel).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the connections made so far.
    pub async fn connect_sentinel_with(
        sentinels: &[&str],
        master_name: &str,
        prefix: &str,
        options: &RedisConnectOptions,
    ) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let connection = SentinelConnection::connect(sentinels, master_name, options).await?;
        RedisStore::new(connection, prefix)?.preloaded().await
    }

    /// As [`RedisStore::<ConnectionManager>::coalescing`](RedisStore::coalescing):
    /// concurrent requests decided up to `max_batch` per call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::store::RedisStore;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect_sentinel(&["redis://127.0.0.1:26379"], "mymaster", "api")
    ///     .await?
    ///     .coalescing(64);
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
