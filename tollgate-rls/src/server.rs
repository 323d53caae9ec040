//! Starting, serving and draining.
//!
//! [`main`] reads the [settings](crate::settings), sets up logging (`LOG_LEVEL`,
//! `LOG_FORMAT`), loads the domain files, binds the gRPC and HTTP listeners (and the
//! Prometheus one with `USE_PROMETHEUS`), and prints one line to stdout:
//!
//! ```text
//! tollgate-rls listening grpc=127.0.0.1:8081 http=127.0.0.1:8080
//! ```
//!
//! with the addresses actually bound (so port 0 can be asked for), followed by
//! ` prometheus=ADDR` when that listener is on. On SIGTERM, SIGINT or SIGHUP (the
//! signals the Go service stops on) the health turns failing, the listeners stop
//! accepting, requests in flight finish within `--drain-timeout`, and the process
//! exits with code 0.
//!
//! Exit codes: 0 after a stop, 2 for a bad flag or environment value, 1 when the
//! service cannot start (a listener does not bind, the configuration directory cannot
//! be read without `FORCE_START_WITHOUT_INITIAL_CONFIG`) or a listener fails.

use std::fmt;
use std::future::Future;
use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic_health::ServingStatus;

use crate::backend::{Backend, BackendOptions, FailureMode, StoreKind};
use crate::domains::{DomainDir, Domains, DomainsError};
use crate::engine::Engine;
use crate::grpc::RateLimitGrpc;
use crate::health::Health;
use crate::hot_path::HotPathLayer;
use crate::http::{MetricsText, metrics_router, router};
use crate::quota::{QuotaGrpc, QuotaOptions};
use crate::reload::{LoadOutcome, OnLoad, Reloader};
use crate::settings::{
    Args, BackendKind, LogFormat, LogLevel, RedisKind, RedisOptions, Settings, SocketType,
    StoreFailure,
};
use crate::stats::Stats;

/// The gRPC health service's name for this service, as the Go service registers it.
pub const HEALTH_SERVICE_NAME: &str = "ratelimit";

/// What the stats connect to the server.
#[derive(Clone)]
#[non_exhaustive]
pub struct Hooks {
    /// Renders `/metrics`.
    pub metrics: MetricsText,
    /// Called after every load of the configuration.
    pub on_load: Option<OnLoad>,
}

impl Hooks {
    /// An empty `/metrics` and no load callback.
    ///
    /// # Examples
    ///
    /// ```
    /// let hooks = tollgate_rls::server::Hooks::empty();
    /// assert_eq!((hooks.metrics)(), "");
    /// ```
    pub fn empty() -> Hooks {
        Hooks {
            metrics: Arc::new(String::new),
            on_load: None,
        }
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

/// Why the service stopped with an error.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// A listener did not bind.
    Bind(String, std::io::Error),
    /// The configuration directory could not be read at start.
    Config(DomainsError),
    /// The store could not be set up.
    Store(tollgate::store::StoreError),
    /// A listener failed while serving.
    Serve(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            ServerError::Config(e) => write!(
                f,
                "cannot read the configuration: {e} (FORCE_START_WITHOUT_INITIAL_CONFIG starts anyway)"
            ),
            ServerError::Store(e) => write!(f, "cannot set up the store: {e}"),
            ServerError::Serve(e) => write!(f, "a listener failed: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

/// The binary's entry point: see the [module](self).
pub fn main() -> ExitCode {
    let settings = match Args::parse_from_iter(std::env::args_os()) {
        Ok(args) => match args.into_settings() {
            Ok(settings) => settings,
            Err(e) => {
                eprintln!("tollgate-rls: {e}");
                return ExitCode::from(2);
            }
        },
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    init_logging(settings.log_level, settings.log_format);
    let mut builder = match settings.worker_threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(threads) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tollgate-rls: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let shutdown = match stop_signals() {
            Ok(signals) => signals,
            Err(e) => {
                return Err(ServerError::Serve(format!(
                    "cannot listen for signals: {e}"
                )));
            }
        };
        serve(settings, Hooks::empty(), shutdown, |line| {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
        })
        .await
    });
    // Watch checks still reading files are not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("tollgate-rls: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(level: LogLevel, format: LogFormat) {
    let mut filter = level.as_filter().to_owned();
    if matches!(level, LogLevel::Debug | LogLevel::Trace) {
        // The transports' own debug lines drown the service's.
        filter.push_str(",h2=info,hyper=info,hyper_util=info,tower=info,tonic=info");
    }
    let filter = tracing_subscriber::EnvFilter::new(filter);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Resolves on the first SIGTERM, SIGINT or SIGHUP.
fn stop_signals() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        tracing::info!("received {name}, draining");
    })
}

/// Runs the service until `shutdown` resolves, then drains it.
///
/// `announce` is given the `tollgate-rls listening …` line once every listener is
/// bound.
///
/// # Errors
///
/// A [`ServerError`] when the service cannot start, or a listener fails.
///
/// # Cancel safety
///
/// Dropping the future stops the listeners at once, without draining.
pub async fn serve(
    settings: Settings,
    hooks: Hooks,
    shutdown: impl Future<Output = ()> + Send + 'static,
    announce: impl FnOnce(&str),
) -> Result<(), ServerError> {
    let health = Health::new(settings.healthy_with_at_least_one_config_loaded);
    let backend = Backend::connect(&backend_options(&settings))
        .await
        .map_err(ServerError::Store)?;
    let stats = Arc::new(Stats::new(STATS_KEYS));
    let engine = Arc::new(Engine::new(
        Domains::default(),
        backend,
        settings.engine.clone(),
        stats.clone(),
    ));
    let metrics: MetricsText = {
        let (stats, extra) = (stats.clone(), hooks.metrics.clone());
        Arc::new(move || {
            let mut text = stats.render();
            text.push_str(&extra());
            text
        })
    };
    let dir = DomainDir::new(settings.domains.clone(), settings.merge_domain_config);
    let on_load: OnLoad = {
        let (stats, extra) = (stats.clone(), hooks.on_load.clone());
        Arc::new(move |outcome: &LoadOutcome| {
            stats.config_load(outcome.errors == 0);
            if let Some(extra) = &extra {
                extra(outcome);
            }
        })
    };
    let mut reloader = Reloader::new(dir, engine.clone(), health.clone()).with_on_load(on_load);
    if let Err(e) = reloader.load() {
        if !settings.force_start_without_initial_config {
            return Err(ServerError::Config(e));
        }
        tracing::warn!("{e}; starting without configuration");
    }
    // `Backend::connect` returned: the store answered (Redis is pinged first).
    health.set_store_healthy(true);

    let grpc_listener = bind(&settings.grpc_addr).await?;
    let http_listener = bind(&settings.http_addr).await?;
    let prometheus_listener = match &settings.prometheus {
        Some(p) => Some((bind(&p.addr).await?, p.path.clone())),
        None => None,
    };
    let grpc_addr = local_addr(&grpc_listener, &settings.grpc_addr)?;
    let http_addr = local_addr(&http_listener, &settings.http_addr)?;
    let mut line = format!("tollgate-rls listening grpc={grpc_addr} http={http_addr}");
    if let Some((listener, _)) = &prometheus_listener {
        let addr = local_addr(listener, "PROMETHEUS_ADDR")?;
        line.push_str(&format!(" prometheus={addr}"));
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let watch_task = tokio::spawn(reloader.run(settings.watch_interval, stop_rx.clone()));

    let (reporter, health_service) = tonic_health::server::health_reporter();
    let health_task = tokio::spawn(report_health(health.subscribe(), reporter));

    // With Redis, the replicas share each bucket's limit through leases there.
    let quota = QuotaGrpc::new(
        engine.clone(),
        QuotaOptions {
            sync_interval: settings.quota_sync_interval,
            ..QuotaOptions::default()
        },
    );
    let quota_drain = quota.clone();
    let grpc_stop = stopped(stop_rx.clone());
    let grpc = tonic::transport::Server::builder()
        .layer(HotPathLayer::new(engine.clone()))
        .add_service(health_service)
        .add_service(RateLimitGrpc::new(engine.clone()).into_server())
        .add_service(quota.into_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
            grpc_stop,
        );
    let mut servers: Vec<(&'static str, JoinHandle<Result<(), String>>)> = vec![(
        "gRPC",
        tokio::spawn(async move { grpc.await.map_err(|e| e.to_string()) }),
    )];
    let app = router(engine, health.clone(), metrics.clone());
    let http_stop = stopped(stop_rx.clone());
    servers.push((
        "HTTP",
        tokio::spawn(async move {
            axum::serve(http_listener, app)
                .with_graceful_shutdown(http_stop)
                .await
                .map_err(|e| e.to_string())
        }),
    ));
    if let Some((listener, path)) = prometheus_listener {
        let app = metrics_router(&path, metrics.clone());
        let stop = stopped(stop_rx.clone());
        servers.push((
            "Prometheus",
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                    .map_err(|e| e.to_string())
            }),
        ));
    }
    tracing::info!("{line}");
    announce(&line);

    // Serve until the signal, or until a listener fails.
    let (failed_tx, mut failed_rx) = tokio::sync::mpsc::channel::<String>(servers.len());
    let mut waits = Vec::new();
    for (name, server) in servers {
        let failed = failed_tx.clone();
        waits.push(tokio::spawn(async move {
            let result = match server.await {
                Ok(result) => result,
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = &result {
                let _ = failed.try_send(format!("{name}: {e}"));
            }
            result.is_ok()
        }));
    }
    drop(failed_tx);
    let failure = tokio::select! {
        () = shutdown => None,
        Some(e) = failed_rx.recv() => Some(e),
    };
    health.start_draining();
    let _ = stop_tx.send(true);
    // Quota streams never end on their own: end them (their Envoys reconnect to a
    // replica still serving) and give the leases back, for the others to take.
    if tokio::time::timeout(settings.drain_timeout, quota_drain.drain())
        .await
        .is_err()
    {
        tracing::warn!("quota leases not all given back within the drain timeout");
    }

    let drained = tokio::time::timeout(settings.drain_timeout, async {
        for wait in waits {
            let _ = wait.await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "requests still in flight after the drain timeout ({:?}); stopping",
            settings.drain_timeout
        );
    }
    watch_task.abort();
    health_task.abort();
    match failure.or_else(|| failed_rx.try_recv().ok()) {
        Some(e) => Err(ServerError::Serve(e)),
        None => Ok(()),
    }
}

async fn bind(addr: &str) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| ServerError::Bind(addr.to_owned(), e))
}

fn local_addr(listener: &TcpListener, name: &str) -> Result<SocketAddr, ServerError> {
    listener
        .local_addr()
        .map_err(|e| ServerError::Bind(name.to_owned(), e))
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Mirrors the health into the gRPC health service, for this service's name and for
/// the server as a whole (the empty name).
async fn report_health(
    mut changes: watch::Receiver<bool>,
    reporter: tonic_health::server::HealthReporter,
) {
    loop {
        let status = if *changes.borrow_and_update() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        reporter
            .set_service_status(HEALTH_SERVICE_NAME, status)
            .await;
        reporter.set_service_status("", status).await;
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// Distinct stats keys kept before further ones fold into one (detailed_metric makes
/// a key per value).
const STATS_KEYS: usize = 10_000;

/// The backend's options from the settings.
fn backend_options(settings: &Settings) -> BackendOptions {
    let backend = &settings.backend;
    let mut options = BackendOptions::memory();
    if let BackendKind::Redis = backend.kind {
        options.store = redis_store(&backend.redis);
        options.per_second = backend.per_second.as_ref().map(redis_store);
    }
    if !backend.cache_key_prefix.is_empty() {
        // A brace would move Redis Cluster's hash tag.
        options.key_prefix = backend.cache_key_prefix.replace(['{', '}'], "");
    }
    options.failure_mode = match settings.engine.store_failure {
        StoreFailure::Allow => FailureMode::Allow,
        _ => FailureMode::Error,
    };
    options.deadline = backend.redis.timeout;
    options.local_cache_bytes = backend.local_cache_size_in_bytes;
    options.redis_tls = backend.redis.tls_files.clone();
    options
}

fn redis_store(redis: &RedisOptions) -> StoreKind {
    if let RedisKind::Sentinel = redis.kind {
        // Go's form: the master's name, then the sentinels, reached in plain TCP
        // without credentials; REDIS_AUTH and REDIS_TLS are the master's.
        let (username, password) = split_auth(redis.auth.as_deref());
        let mut parts = redis.urls.iter();
        let master_name = parts.next().cloned().unwrap_or_default();
        let sentinels = parts
            .map(|address| {
                if address.contains("://") {
                    address.clone()
                } else {
                    format!("redis://{address}")
                }
            })
            .collect();
        return StoreKind::RedisSentinel {
            master_name,
            sentinels,
            username: (!username.is_empty()).then(|| username.to_owned()),
            password: (!password.is_empty()).then(|| password.to_owned()),
            tls: redis.tls,
        };
    }
    let urls: Vec<String> = redis.urls.iter().map(|u| redis_url(u, redis)).collect();
    match redis.kind {
        RedisKind::Cluster => StoreKind::RedisCluster { urls },
        _ => StoreKind::Redis {
            url: urls.into_iter().next().unwrap_or_default(),
        },
    }
}

/// `REDIS_AUTH`'s user and password: `password` or `user:password`.
fn split_auth(auth: Option<&str>) -> (&str, &str) {
    match auth {
        Some(auth) => auth.split_once(':').unwrap_or(("", auth)),
        None => ("", ""),
    }
}

/// A redis-rs URL from the Go service's forms: `host:port` over TCP, a socket path
/// (`REDIS_SOCKET_TYPE=unix`, or any address starting with `/`), with `REDIS_AUTH`
/// (`password` or `user:password`, percent-encoded: a password may hold `@`, `/`,
/// `:` or `#`) and `REDIS_TLS`. A URL with a scheme is taken as it is.
fn redis_url(address: &str, redis: &RedisOptions) -> String {
    if address.contains("://") {
        return address.to_owned();
    }
    let (user, password) = split_auth(redis.auth.as_deref());
    let (user, password) = (percent_encode(user), percent_encode(password));
    let socket = address.starts_with('/')
        || (matches!(redis.socket_type, SocketType::Unix) && !address.contains(':'));
    if socket {
        let mut url = format!("redis+unix://{address}");
        if !password.is_empty() {
            url.push_str(&format!("?user={user}&pass={password}"));
        }
        return url;
    }
    let scheme = if redis.tls { "rediss" } else { "redis" };
    if password.is_empty() {
        format!("{scheme}://{address}")
    } else {
        format!("{scheme}://{user}:{password}@{address}")
    }
}

/// Escapes everything but unreserved URL characters.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Args;

    fn redis(args: &[&str]) -> RedisOptions {
        let mut all = vec!["tollgate-rls", "--backend-type", "redis"];
        all.extend_from_slice(args);
        Args::parse_from_iter(all)
            .unwrap()
            .into_settings()
            .unwrap()
            .backend
            .redis
    }

    #[test]
    fn credentials_are_percent_encoded() {
        let options = redis(&[
            "--redis-socket-type",
            "tcp",
            "--redis-url",
            "h:6379",
            "--redis-auth",
            "bob:p@ss:w/rd#1",
            "--redis-tls",
        ]);
        assert_eq!(
            redis_url("h:6379", &options),
            "rediss://bob:p%40ss%3Aw%2Frd%231@h:6379"
        );
        let url = redis_url("/tmp/r.sock", &options);
        assert_eq!(
            url,
            "redis+unix:///tmp/r.sock?user=bob&pass=p%40ss%3Aw%2Frd%231"
        );
    }

    #[test]
    fn sentinel_is_a_master_name_then_sentinels() {
        let options = redis(&[
            "--redis-type",
            "SENTINEL",
            "--redis-url",
            "mymaster,10.0.0.1:26379,redis://10.0.0.2:26379",
            "--redis-auth",
            "s3cret",
            "--redis-tls",
        ]);
        assert_eq!(
            redis_store(&options),
            StoreKind::RedisSentinel {
                master_name: "mymaster".into(),
                sentinels: vec![
                    "redis://10.0.0.1:26379".into(),
                    "redis://10.0.0.2:26379".into()
                ],
                username: None,
                password: Some("s3cret".into()),
                tls: true,
            }
        );
    }
}
