//! Command-line flags and the Go service's environment variables.
//!
//! Every setting of envoyproxy/ratelimit that tollgate-rls honours reads the Go
//! service's environment variable (`PORT`, `RUNTIME_ROOT`, `SHADOW_MODE`, …), with the
//! same default, and also has a flag (`--port`, `--runtime-root`, `--shadow-mode`, …)
//! that wins over it. Values are read in the Go forms: booleans as Go's
//! `strconv.ParseBool` accepts them (`1`, `t`, `TRUE`, `false`, …), durations as
//! `time.ParseDuration` does (`10s`, `1m30s`, `250ms`).
//!
//! [`Args`] is the raw command line; [`Args::into_settings`] checks it and groups the
//! values into plain structs: [`Settings`], with [`EngineOptions`] for the decision
//! knobs and [`BackendOptions`] for the store's.
//!
//! # Examples
//!
//! ```
//! use tollgate_rls::settings::{Args, Counting};
//!
//! let settings = Args::parse_from_iter(["tollgate-rls", "--config", "/etc/rls", "--port", "0"])?
//!     .into_settings()?;
//! assert_eq!(settings.http_addr, "0.0.0.0:0");
//! assert_eq!(settings.engine.counting, Counting::AllOrNothing);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

pub use crate::backend::RedisTlsFiles;

/// The command line and the environment, as given.
///
/// Each field's flag is `--` and its name in kebab case; its environment variable is
/// the Go service's. Read [`Settings`] (from [`Args::into_settings`]) rather than this.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "tollgate-rls",
    version,
    about = "A rate limit service: a drop-in for envoyproxy/ratelimit, deciding with tollgate.",
    long_about = None
)]
#[non_exhaustive]
pub struct Args {
    /// The HTTP listener's host (`/json`, `/healthcheck`, `/metrics`).
    #[arg(long, env = "HOST", default_value = "0.0.0.0")]
    pub host: String,
    /// The HTTP listener's port; 0 picks a free one.
    #[arg(long, env = "PORT", default_value_t = 8080)]
    pub port: u16,
    /// The gRPC listener's host (`ShouldRateLimit`, `grpc.health.v1.Health`).
    #[arg(long, env = "GRPC_HOST", default_value = "0.0.0.0")]
    pub grpc_host: String,
    /// The gRPC listener's port; 0 picks a free one.
    #[arg(long, env = "GRPC_PORT", default_value_t = 8081)]
    pub grpc_port: u16,

    /// Also serve Prometheus metrics on PROMETHEUS_ADDR at PROMETHEUS_PATH (they are
    /// always on the HTTP listener's `/metrics`).
    #[arg(long, env = "USE_PROMETHEUS", value_parser = parse_go_bool, default_value = "false",
          num_args = 0..=1, default_missing_value = "true")]
    pub use_prometheus: bool,
    /// The Prometheus listener's address, `host:port` or `:port`.
    #[arg(long, env = "PROMETHEUS_ADDR", default_value = ":9090")]
    pub prometheus_addr: String,
    /// The Prometheus listener's path.
    #[arg(long, env = "PROMETHEUS_PATH", default_value = "/metrics")]
    pub prometheus_path: String,

    /// The least severe log level written: trace, debug, info, warn, error (also the
    /// Go service's panic and fatal, read as error).
    #[arg(long, env = "LOG_LEVEL", default_value = "WARN")]
    pub log_level: String,
    /// `text` or `json`.
    #[arg(long, env = "LOG_FORMAT", default_value = "text")]
    pub log_format: String,

    /// A directory of domain files, read instead of the RUNTIME_* layout.
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
    /// The runtime root; the domain files are in
    /// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
    #[arg(
        long,
        env = "RUNTIME_ROOT",
        default_value = "/srv/runtime_data/current"
    )]
    pub runtime_root: PathBuf,
    /// See `--runtime-root`.
    #[arg(long, env = "RUNTIME_SUBDIRECTORY", default_value = "")]
    pub runtime_subdirectory: String,
    /// See `--runtime-root`.
    #[arg(long, env = "RUNTIME_APPDIRECTORY", default_value = "config")]
    pub runtime_appdirectory: String,
    /// Skip files and directories whose name starts with a dot.
    #[arg(long, env = "RUNTIME_IGNOREDOTFILES", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub runtime_ignoredotfiles: bool,
    /// Follow the runtime root when it is a symlink pointed elsewhere.
    #[arg(long, env = "RUNTIME_WATCH_ROOT", value_parser = parse_go_bool,
          default_value = "true", num_args = 0..=1, default_missing_value = "true")]
    pub runtime_watch_root: bool,
    /// How often the domain files are checked for changes.
    #[arg(long, value_parser = parse_go_duration, default_value = "1s")]
    pub watch_interval: Duration,
    /// Join files of the same domain rather than refusing the second.
    #[arg(long, env = "MERGE_DOMAIN_CONFIG", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub merge_domain_config: bool,
    /// Start even when the configuration directory cannot be read.
    #[arg(long, env = "FORCE_START_WITHOUT_INITIAL_CONFIG", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub force_start_without_initial_config: bool,
    /// Report unhealthy until at least one domain is loaded.
    #[arg(long, env = "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub healthy_with_at_least_one_config_loaded: bool,

    /// Where counts live: `memory` or `redis`.
    #[arg(long, env = "BACKEND_TYPE", default_value = "memory")]
    pub backend_type: String,
    /// `SINGLE`, `CLUSTER` or `SENTINEL`.
    #[arg(long, env = "REDIS_TYPE", default_value = "SINGLE")]
    pub redis_type: String,
    /// `tcp` or `unix`.
    #[arg(long, env = "REDIS_SOCKET_TYPE", default_value = "unix")]
    pub redis_socket_type: String,
    /// The Redis address: `host:port`, a socket path, for a cluster a comma-separated
    /// list, and for Sentinel the master's name then the sentinels,
    /// `mymaster,host1:26379,host2:26379`.
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "/var/run/nutcracker/ratelimit.sock"
    )]
    pub redis_url: String,
    /// `password` or `user:password` (through Sentinel: the master's).
    #[arg(long, env = "REDIS_AUTH", default_value = "", hide_env_values = true)]
    pub redis_auth: String,
    /// Connect to Redis over TLS (through Sentinel: to the master; the sentinels are
    /// reached in plain TCP, as the Go service reaches them).
    #[arg(long, env = "REDIS_TLS", value_parser = parse_go_bool, default_value = "false",
          num_args = 0..=1, default_missing_value = "true")]
    pub redis_tls: bool,
    /// A PEM file of the CA(s) that Redis's certificates are checked against, rather
    /// than the system's roots (both Redis connections).
    #[arg(long, env = "REDIS_TLS_CACERT", default_value = "")]
    pub redis_tls_cacert: String,
    /// A PEM client certificate for Redis servers that ask for one (with
    /// REDIS_TLS_CLIENT_KEY).
    #[arg(long, env = "REDIS_TLS_CLIENT_CERT", default_value = "")]
    pub redis_tls_client_cert: String,
    /// The PEM private key of REDIS_TLS_CLIENT_CERT.
    #[arg(long, env = "REDIS_TLS_CLIENT_KEY", default_value = "")]
    pub redis_tls_client_key: String,
    /// Connections to Redis.
    #[arg(long, env = "REDIS_POOL_SIZE", default_value_t = 10)]
    pub redis_pool_size: usize,
    /// The bound on one Redis connection or call.
    #[arg(long, env = "REDIS_TIMEOUT", value_parser = parse_go_duration, default_value = "10s")]
    pub redis_timeout: Duration,
    /// Count limits of a second in a Redis of their own (`REDIS_PERSECOND_URL`).
    #[arg(long, env = "REDIS_PERSECOND", value_parser = parse_go_bool, default_value = "false",
          num_args = 0..=1, default_missing_value = "true")]
    pub redis_persecond: bool,
    /// `SINGLE`, `CLUSTER` or `SENTINEL`, for the per-second Redis.
    #[arg(long, env = "REDIS_PERSECOND_TYPE", default_value = "SINGLE")]
    pub redis_persecond_type: String,
    /// As REDIS_AUTH, for the per-second Redis.
    #[arg(
        long,
        env = "REDIS_PERSECOND_AUTH",
        default_value = "",
        hide_env_values = true
    )]
    pub redis_persecond_auth: String,
    /// As REDIS_TLS, for the per-second Redis.
    #[arg(long, env = "REDIS_PERSECOND_TLS", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub redis_persecond_tls: bool,
    /// The per-second Redis's address, as `REDIS_URL`.
    #[arg(
        long,
        env = "REDIS_PERSECOND_URL",
        default_value = "/var/run/nutcracker/ratelimitpersecond.sock"
    )]
    pub redis_persecond_url: String,
    /// The share of a limit past which a request counts as near the limit.
    #[arg(long, env = "NEAR_LIMIT_RATIO", default_value_t = 0.8)]
    pub near_limit_ratio: f32,
    /// Bytes of the in-process cache of keys known to be over their limit; 0: none.
    #[arg(long, env = "LOCAL_CACHE_SIZE_IN_BYTES", default_value_t = 0)]
    pub local_cache_size_in_bytes: usize,
    /// The start of every store key.
    #[arg(long, env = "CACHE_KEY_PREFIX", default_value = "")]
    pub cache_key_prefix: String,
    /// The most seconds added at random to a key's expiry.
    #[arg(long, env = "EXPIRATION_JITTER_MAX_SECONDS", default_value_t = 300)]
    pub expiration_jitter_max_seconds: u64,
    /// Do not count a request that is over a limit against the other limits.
    #[arg(long, env = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub stop_cache_key_increment_when_overlimit: bool,

    /// Add the limit, remaining and reset headers to every response.
    #[arg(long, env = "LIMIT_RESPONSE_HEADERS_ENABLED", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub limit_response_headers_enabled: bool,
    /// The limit header's name.
    #[arg(long, env = "LIMIT_LIMIT_HEADER", default_value = "RateLimit-Limit")]
    pub limit_limit_header: String,
    /// The remaining header's name.
    #[arg(
        long,
        env = "LIMIT_REMAINING_HEADER",
        default_value = "RateLimit-Remaining"
    )]
    pub limit_remaining_header: String,
    /// The reset header's name.
    #[arg(long, env = "LIMIT_RESET_HEADER", default_value = "RateLimit-Reset")]
    pub limit_reset_header: String,

    /// Never answer OVER_LIMIT (count and report only).
    #[arg(long, env = "SHADOW_MODE", value_parser = parse_go_bool, default_value = "false",
          num_args = 0..=1, default_missing_value = "true")]
    pub shadow_mode: bool,
    /// Quota limits set metadata but never answer OVER_LIMIT.
    #[arg(long, env = "QUOTA_MODE", value_parser = parse_go_bool, default_value = "false",
          num_args = 0..=1, default_missing_value = "true")]
    pub quota_mode: bool,
    /// Return the request's descriptors as the response's dynamic metadata.
    #[arg(long, env = "RESPONSE_DYNAMIC_METADATA", value_parser = parse_go_bool,
          default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    pub response_dynamic_metadata: bool,

    /// `all-or-nothing` (a request over one limit counts against none) or `each` (every
    /// limit counts the request, as the Go service does).
    #[arg(long, default_value = "all-or-nothing")]
    pub counting: String,
    /// When the store fails: `error` (the call fails) or `allow` (the request is let
    /// through, and the failure logged and counted).
    #[arg(long, default_value = "error")]
    pub store_failure: String,
    /// On SIGTERM or SIGINT, how long requests in flight may take to finish.
    #[arg(long, value_parser = parse_go_duration, default_value = "10s")]
    pub drain_timeout: Duration,
    /// With Redis, the longest the quota service (RLQS) answers a bucket's reports
    /// from the share its replica holds before asking Redis again; 0 asks on every
    /// report.
    #[arg(long, value_parser = parse_go_duration, default_value = "1s")]
    pub quota_sync_interval: Duration,
    /// Threads that serve requests; the cores when unset. `1` serves on one thread
    /// with tokio's current-thread runtime, which answers about twice the calls per
    /// CPU second: every call woken is run before a connection writes, so one write
    /// carries many answers (and one write to Redis many commands). Choose it when
    /// the service shares its cores, with Redis or an Envoy sidecar, or runs as
    /// several one-thread processes.
    #[arg(long, env = "TOKIO_WORKER_THREADS", value_parser = parse_threads)]
    pub worker_threads: Option<usize>,
}

impl Args {
    /// Parses `args` (the first is the program's name) and the environment.
    ///
    /// # Errors
    ///
    /// clap's error for an unknown flag or a value of the wrong form; its
    /// [`exit`](clap::Error::exit) prints it and exits with code 2 (0 for `--help`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::settings::Args;
    ///
    /// let args = Args::parse_from_iter(["tollgate-rls", "--shadow-mode", "T"])?;
    /// assert!(args.shadow_mode);
    /// assert!(Args::parse_from_iter(["tollgate-rls", "--shadow-mode", "yes"]).is_err());
    /// # Ok::<(), clap::Error>(())
    /// ```
    pub fn parse_from_iter<I, T>(args: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Args::try_parse_from(args)
    }

    /// Checks the values that depend on each other and groups them.
    ///
    /// # Errors
    ///
    /// A [`SettingsError`] naming the setting and the value it refused.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::settings::Args;
    ///
    /// let err = Args::parse_from_iter(["tollgate-rls", "--backend-type", "memcache"])?
    ///     .into_settings()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("BACKEND_TYPE"));
    /// # Ok::<(), clap::Error>(())
    /// ```
    pub fn into_settings(self) -> Result<Settings, SettingsError> {
        let log_level = parse_log_level(&self.log_level)?;
        let log_format = match self.log_format.to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                return Err(SettingsError::new(
                    "LOG_FORMAT",
                    &self.log_format,
                    "text or json",
                ));
            }
        };
        let counting = match self.counting.as_str() {
            "all-or-nothing" => Counting::AllOrNothing,
            "each" => Counting::Each,
            _ => {
                return Err(SettingsError::new(
                    "--counting",
                    &self.counting,
                    "all-or-nothing or each",
                ));
            }
        };
        let store_failure = match self.store_failure.as_str() {
            "error" => StoreFailure::Error,
            "allow" => StoreFailure::Allow,
            _ => {
                return Err(SettingsError::new(
                    "--store-failure",
                    &self.store_failure,
                    "error or allow",
                ));
            }
        };
        let backend = match self.backend_type.to_ascii_lowercase().as_str() {
            "memory" => BackendKind::Memory,
            "redis" => BackendKind::Redis,
            _ => {
                return Err(SettingsError::new(
                    "BACKEND_TYPE",
                    &self.backend_type,
                    "memory or redis",
                ));
            }
        };
        let main_kind = redis_kind("REDIS_TYPE", &self.redis_type)?;
        let persecond_kind = redis_kind("REDIS_PERSECOND_TYPE", &self.redis_persecond_type)?;
        let main_urls = split_urls(&self.redis_url);
        let persecond_urls = split_urls(&self.redis_persecond_url);
        check_sentinel_urls("REDIS_URL", main_kind, &main_urls, &self.redis_url)?;
        if self.redis_persecond {
            check_sentinel_urls(
                "REDIS_PERSECOND_URL",
                persecond_kind,
                &persecond_urls,
                &self.redis_persecond_url,
            )?;
        }
        let redis_tls_files = redis_tls_files(
            self.redis_tls_cacert,
            self.redis_tls_client_cert,
            self.redis_tls_client_key,
        )?;
        let redis_socket = match self.redis_socket_type.to_ascii_lowercase().as_str() {
            "tcp" => SocketType::Tcp,
            "unix" => SocketType::Unix,
            _ => {
                return Err(SettingsError::new(
                    "REDIS_SOCKET_TYPE",
                    &self.redis_socket_type,
                    "tcp or unix",
                ));
            }
        };
        if !(self.near_limit_ratio.is_finite() && (0.0..=1.0).contains(&self.near_limit_ratio)) {
            return Err(SettingsError::new(
                "NEAR_LIMIT_RATIO",
                &self.near_limit_ratio.to_string(),
                "a number from 0 to 1",
            ));
        }
        if self.redis_pool_size == 0 {
            return Err(SettingsError::new("REDIS_POOL_SIZE", "0", "at least 1"));
        }
        for (name, value) in [
            ("LIMIT_LIMIT_HEADER", &self.limit_limit_header),
            ("LIMIT_REMAINING_HEADER", &self.limit_remaining_header),
            ("LIMIT_RESET_HEADER", &self.limit_reset_header),
        ] {
            if !is_header_name(value) {
                return Err(SettingsError::new(name, value, "an HTTP header name"));
            }
        }
        if !self.prometheus_path.starts_with('/') {
            return Err(SettingsError::new(
                "PROMETHEUS_PATH",
                &self.prometheus_path,
                "a path starting with /",
            ));
        }
        let prometheus = if self.use_prometheus {
            Some(PrometheusOptions {
                addr: listen_addr(&self.prometheus_addr),
                path: self.prometheus_path,
            })
        } else {
            None
        };
        let domains = match self.config {
            Some(dir) => DomainsSource {
                root: dir.clone(),
                dir,
                ignore_dot_files: self.runtime_ignoredotfiles,
                watch_root: self.runtime_watch_root,
            },
            None => DomainsSource {
                dir: self
                    .runtime_root
                    .join(&self.runtime_subdirectory)
                    .join(&self.runtime_appdirectory),
                root: self.runtime_root,
                ignore_dot_files: self.runtime_ignoredotfiles,
                watch_root: self.runtime_watch_root,
            },
        };
        Ok(Settings {
            http_addr: join_host_port(&self.host, self.port),
            grpc_addr: join_host_port(&self.grpc_host, self.grpc_port),
            prometheus,
            log_level,
            log_format,
            domains,
            watch_interval: self.watch_interval,
            merge_domain_config: self.merge_domain_config,
            force_start_without_initial_config: self.force_start_without_initial_config,
            healthy_with_at_least_one_config_loaded: self.healthy_with_at_least_one_config_loaded,
            drain_timeout: self.drain_timeout,
            quota_sync_interval: self.quota_sync_interval,
            worker_threads: self.worker_threads,
            engine: EngineOptions {
                counting,
                store_failure,
                near_limit_ratio: self.near_limit_ratio,
                shadow_mode: self.shadow_mode,
                quota_mode: self.quota_mode,
                response_dynamic_metadata: self.response_dynamic_metadata,
                stop_cache_key_increment_when_overlimit: self
                    .stop_cache_key_increment_when_overlimit,
                response_headers: self
                    .limit_response_headers_enabled
                    .then_some(ResponseHeaders {
                        limit: self.limit_limit_header,
                        remaining: self.limit_remaining_header,
                        reset: self.limit_reset_header,
                    }),
            },
            backend: BackendOptions {
                kind: backend,
                redis: RedisOptions {
                    kind: main_kind,
                    socket_type: redis_socket,
                    urls: main_urls,
                    auth: (!self.redis_auth.is_empty()).then_some(self.redis_auth),
                    tls: self.redis_tls,
                    tls_files: redis_tls_files.clone(),
                    pool_size: self.redis_pool_size,
                    timeout: self.redis_timeout,
                },
                per_second: self.redis_persecond.then(|| RedisOptions {
                    kind: persecond_kind,
                    socket_type: redis_socket,
                    urls: persecond_urls,
                    auth: (!self.redis_persecond_auth.is_empty())
                        .then_some(self.redis_persecond_auth),
                    tls: self.redis_persecond_tls,
                    tls_files: redis_tls_files,
                    pool_size: self.redis_pool_size,
                    timeout: self.redis_timeout,
                }),
                cache_key_prefix: self.cache_key_prefix,
                expiration_jitter_max: Duration::from_secs(self.expiration_jitter_max_seconds),
                local_cache_size_in_bytes: self.local_cache_size_in_bytes,
            },
        })
    }
}

/// Every setting, checked and grouped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The HTTP listener, `host:port`.
    pub http_addr: String,
    /// The gRPC listener, `host:port`.
    pub grpc_addr: String,
    /// The Prometheus listener, when `USE_PROMETHEUS` is set.
    pub prometheus: Option<PrometheusOptions>,
    /// The least severe level logged.
    pub log_level: LogLevel,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// Where the domain files are.
    pub domains: DomainsSource,
    /// How often the domain files are checked for changes.
    pub watch_interval: Duration,
    /// Join files of the same domain (`MERGE_DOMAIN_CONFIG`).
    pub merge_domain_config: bool,
    /// Start even when the directory cannot be read (`FORCE_START_WITHOUT_INITIAL_CONFIG`).
    pub force_start_without_initial_config: bool,
    /// Unhealthy until a domain is loaded (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
    pub healthy_with_at_least_one_config_loaded: bool,
    /// The bound on finishing requests in flight at shutdown.
    pub drain_timeout: Duration,
    /// With Redis, the longest the quota service answers from the share held
    /// (`--quota-sync-interval`, 1 s).
    pub quota_sync_interval: Duration,
    /// Threads that serve requests (`--worker-threads`); `None` is one per core, and
    /// `Some(1)` tokio's current-thread runtime.
    pub worker_threads: Option<usize>,
    /// The decision knobs.
    pub engine: EngineOptions,
    /// The store knobs.
    pub backend: BackendOptions,
}

/// Where the domain files are.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DomainsSource {
    /// The directory whose files (and subdirectories' files) are read.
    pub dir: PathBuf,
    /// The runtime root: followed again on each check when it is a symlink and
    /// `watch_root` is set.
    pub root: PathBuf,
    /// Skip names starting with a dot (`RUNTIME_IGNOREDOTFILES`).
    pub ignore_dot_files: bool,
    /// Follow the root symlink when it is swapped (`RUNTIME_WATCH_ROOT`).
    pub watch_root: bool,
}

impl DomainsSource {
    /// Every file of `dir`, dot files included, the root followed on each check.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::settings::DomainsSource;
    ///
    /// let source = DomainsSource::dir("/etc/rls");
    /// assert_eq!(source.root, source.dir);
    /// ```
    pub fn dir(dir: impl Into<PathBuf>) -> DomainsSource {
        let dir = dir.into();
        DomainsSource {
            root: dir.clone(),
            dir,
            ignore_dot_files: false,
            watch_root: true,
        }
    }
}

/// The Prometheus listener.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrometheusOptions {
    /// `host:port` (`:9090` read as `0.0.0.0:9090`).
    pub addr: String,
    /// The path metrics are served at.
    pub path: String,
}

/// The least severe level logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogLevel {
    /// Everything.
    Trace,
    /// Debug and above.
    Debug,
    /// Info and above.
    Info,
    /// Warnings and errors (the Go service's default).
    Warn,
    /// Errors only.
    Error,
}

impl LogLevel {
    /// The level's name as `tracing` filters read it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::settings::LogLevel;
    ///
    /// assert_eq!(LogLevel::Warn.as_filter(), "warn");
    /// ```
    pub fn as_filter(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    /// One human-readable line each.
    Text,
    /// One JSON object each.
    Json,
}

/// The decision knobs, for the engine.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Whether a request over one limit still counts against the others.
    pub counting: Counting,
    /// What a store failure answers.
    pub store_failure: StoreFailure,
    /// The share of a limit past which a hit counts as near the limit
    /// (`NEAR_LIMIT_RATIO`, 0.8).
    pub near_limit_ratio: f32,
    /// Never answer OVER_LIMIT (`SHADOW_MODE`).
    pub shadow_mode: bool,
    /// Quota limits never answer OVER_LIMIT (`QUOTA_MODE`).
    pub quota_mode: bool,
    /// Echo descriptors as dynamic metadata (`RESPONSE_DYNAMIC_METADATA`).
    pub response_dynamic_metadata: bool,
    /// Do not count a request over a limit against the others
    /// (`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`).
    pub stop_cache_key_increment_when_overlimit: bool,
    /// The headers added to responses, when `LIMIT_RESPONSE_HEADERS_ENABLED`.
    pub response_headers: Option<ResponseHeaders>,
}

impl Default for EngineOptions {
    /// The Go service's defaults, with tollgate's all-or-nothing counting.
    fn default() -> EngineOptions {
        EngineOptions {
            counting: Counting::AllOrNothing,
            store_failure: StoreFailure::Error,
            near_limit_ratio: 0.8,
            shadow_mode: false,
            quota_mode: false,
            response_dynamic_metadata: false,
            stop_cache_key_increment_when_overlimit: false,
            response_headers: None,
        }
    }
}

/// Whether a request over one of its limits counts against the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Counting {
    /// A request is counted against all its limits or, when one refuses it, none.
    AllOrNothing,
    /// Every limit counts the request, refused or not (the Go service).
    Each,
}

/// What a store failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreFailure {
    /// The call fails with the store's error.
    Error,
    /// The request is allowed; the failure is logged and counted.
    Allow,
}

/// The names of the rate limit headers added to responses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseHeaders {
    /// The limit (`LIMIT_LIMIT_HEADER`, `RateLimit-Limit`).
    pub limit: String,
    /// What remains (`LIMIT_REMAINING_HEADER`, `RateLimit-Remaining`).
    pub remaining: String,
    /// Seconds until the window resets (`LIMIT_RESET_HEADER`, `RateLimit-Reset`).
    pub reset: String,
}

/// The store knobs, for the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendOptions {
    /// Memory or Redis.
    pub kind: BackendKind,
    /// The Redis connection, when `kind` is Redis.
    pub redis: RedisOptions,
    /// The start of every key (`CACHE_KEY_PREFIX`).
    pub cache_key_prefix: String,
    /// The most added at random to a key's expiry (`EXPIRATION_JITTER_MAX_SECONDS`).
    pub expiration_jitter_max: Duration,
    /// Bytes of the local over-limit cache, 0 for none (`LOCAL_CACHE_SIZE_IN_BYTES`).
    pub local_cache_size_in_bytes: usize,
    /// A Redis of its own for limits of a second (`REDIS_PERSECOND`, with
    /// `REDIS_PERSECOND_URL`, `REDIS_PERSECOND_TYPE`, `REDIS_PERSECOND_AUTH` and
    /// `REDIS_PERSECOND_TLS`; the rest as the main one's).
    pub per_second: Option<RedisOptions>,
}

/// Where counts live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// In this process (tollgate's default).
    Memory,
    /// In Redis, shared by every replica (the Go service's default).
    Redis,
}

/// The Redis connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// One server, a cluster, or a master behind Sentinel (`REDIS_TYPE`).
    pub kind: RedisKind,
    /// TCP or a Unix socket (`REDIS_SOCKET_TYPE`).
    pub socket_type: SocketType,
    /// `REDIS_URL` split at commas: `host:port`, a socket path, or `redis://` URLs;
    /// for Sentinel, the master's name then the sentinels' addresses.
    pub urls: Vec<String>,
    /// `REDIS_AUTH`: `password` or `user:password`.
    pub auth: Option<String>,
    /// Connect over TLS (`REDIS_TLS`).
    pub tls: bool,
    /// The CA and client certificate files for TLS.
    pub tls_files: RedisTlsFiles,
    /// Connections (`REDIS_POOL_SIZE`).
    pub pool_size: usize,
    /// The bound on one connection or call (`REDIS_TIMEOUT`).
    pub timeout: Duration,
}

/// One Redis server, a cluster, or a master behind Sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisKind {
    /// One server.
    Single,
    /// A Redis Cluster.
    Cluster,
    /// The master a group of Sentinels names, followed across failovers.
    Sentinel,
}

/// How Redis is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketType {
    /// TCP, `host:port`.
    Tcp,
    /// A Unix socket path.
    Unix,
}

/// A setting whose value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    name: &'static str,
    value: String,
    expected: &'static str,
}

impl SettingsError {
    fn new(name: &'static str, value: &str, expected: &'static str) -> SettingsError {
        SettingsError {
            name,
            value: value.to_owned(),
            expected,
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value {:?} for {}: expected {}",
            self.value, self.name, self.expected
        )
    }
}

impl std::error::Error for SettingsError {}

/// A boolean as Go's `strconv.ParseBool` reads it.
///
/// # Errors
///
/// Anything but `1 t T TRUE true True 0 f F FALSE false False`.
///
/// # Examples
///
/// ```
/// use tollgate_rls::settings::parse_go_bool;
///
/// assert_eq!(parse_go_bool("True"), Ok(true));
/// assert_eq!(parse_go_bool("0"), Ok(false));
/// assert!(parse_go_bool("yes").is_err());
/// ```
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "{s:?} is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)"
        )),
    }
}

/// The most threads `--worker-threads` takes: far above any core count, low enough
/// that a typo cannot ask the system for a million threads.
pub const MAX_WORKER_THREADS: usize = 4096;

/// A thread count for `--worker-threads`: 1 to [`MAX_WORKER_THREADS`].
///
/// # Errors
///
/// A message naming the input when it is not a number in that range.
///
/// # Examples
///
/// ```
/// use tollgate_rls::settings::parse_threads;
///
/// assert_eq!(parse_threads("1"), Ok(1));
/// assert!(parse_threads("0").is_err());
/// assert!(parse_threads("18446744073709551616").is_err());
/// ```
pub fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_WORKER_THREADS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a thread count (1 to {MAX_WORKER_THREADS})"
        )),
    }
}

/// A duration as Go's `time.ParseDuration` reads it: a sequence of decimal numbers,
/// each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), like `1m30s` or `1.5h`;
/// `0` alone is zero. Negative durations are refused.
///
/// # Errors
///
/// A message naming the input when it is not of that form.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate_rls::settings::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert!(parse_go_duration("10").is_err());
/// ```
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration (like 10s, 1m30s, 250ms)");
    let rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(bad());
    }
    let mut total_nanos: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, after) = rest.split_at(number_end);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(bad());
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let int: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        // The fraction's digits past nanoseconds do not matter; keep 18 of them.
        let digits = &frac[..frac.len().min(18)];
        let frac_value: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| bad())?
        };
        let frac_nanos = frac_value * scale / 10u128.pow(digits.len() as u32);
        total_nanos = int
            .checked_mul(scale)
            .and_then(|n| n.checked_add(frac_nanos))
            .and_then(|n| n.checked_add(total_nanos))
            .ok_or_else(bad)?;
        rest = next;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

fn parse_log_level(s: &str) -> Result<LogLevel, SettingsError> {
    // logrus.ParseLevel's names, case-insensitively.
    match s.to_ascii_lowercase().as_str() {
        "trace" => Ok(LogLevel::Trace),
        "debug" => Ok(LogLevel::Debug),
        "info" => Ok(LogLevel::Info),
        "warn" | "warning" => Ok(LogLevel::Warn),
        "error" | "fatal" | "panic" => Ok(LogLevel::Error),
        _ => Err(SettingsError::new(
            "LOG_LEVEL",
            s,
            "trace, debug, info, warn, error, fatal or panic",
        )),
    }
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `host:port`, brackets around an IPv6 host, as Go's `net.JoinHostPort`.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Go's `:9090` listens on every interface.
fn listen_addr(addr: &str) -> String {
    if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_owned()
    }
}

/// `SINGLE`, `CLUSTER` or `SENTINEL`, any case.
fn redis_kind(variable: &'static str, value: &str) -> Result<RedisKind, SettingsError> {
    match value.to_ascii_lowercase().as_str() {
        "single" => Ok(RedisKind::Single),
        "cluster" => Ok(RedisKind::Cluster),
        "sentinel" => Ok(RedisKind::Sentinel),
        _ => Err(SettingsError::new(
            variable,
            value,
            "SINGLE, CLUSTER or SENTINEL",
        )),
    }
}

/// For Sentinel, a master's name and at least one sentinel, as Go requires.
fn check_sentinel_urls(
    variable: &'static str,
    kind: RedisKind,
    urls: &[String],
    value: &str,
) -> Result<(), SettingsError> {
    if kind == RedisKind::Sentinel && urls.len() < 2 {
        return Err(SettingsError::new(
            variable,
            value,
            "the master's name, then the sentinels: mymaster,host1:26379,host2:26379",
        ));
    }
    Ok(())
}

/// The TLS files, a client certificate only with its key.
fn redis_tls_files(
    ca_cert: String,
    client_cert: String,
    client_key: String,
) -> Result<RedisTlsFiles, SettingsError> {
    let path = |p: String| (!p.is_empty()).then(|| PathBuf::from(p));
    let client = match (path(client_cert), path(client_key)) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(SettingsError::new(
                "REDIS_TLS_CLIENT_KEY",
                "",
                "a key file, with REDIS_TLS_CLIENT_CERT",
            ));
        }
        (None, Some(_)) => {
            return Err(SettingsError::new(
                "REDIS_TLS_CLIENT_CERT",
                "",
                "a certificate file, with REDIS_TLS_CLIENT_KEY",
            ));
        }
    };
    Ok(RedisTlsFiles {
        ca_cert: path(ca_cert),
        client,
    })
}

/// A comma-separated list of addresses.
fn split_urls(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut all = vec!["tollgate-rls"];
        all.extend_from_slice(args);
        Args::parse_from_iter(all)
            .map_err(|e| e.to_string())?
            .into_settings()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn go_durations() {
        let ok = [
            ("0", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("300ms", Duration::from_millis(300)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("+5s", Duration::from_secs(5)),
            ("1.000000001s", Duration::new(1, 1)),
        ];
        for (s, want) in ok {
            assert_eq!(parse_go_duration(s), Ok(want), "{s}");
        }
        for s in ["", "10", "s", "1x", "-1s", ".s", "1..5s", "1s2", "1.2.3s"] {
            assert!(parse_go_duration(s).is_err(), "{s}");
        }
    }

    #[test]
    fn go_bools() {
        for s in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(s), Ok(true));
        }
        for s in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(s), Ok(false));
        }
        for s in ["", "yes", "tRUE", "2"] {
            assert!(parse_go_bool(s).is_err());
        }
    }

    #[test]
    fn defaults_are_the_go_services() {
        // Some shells export HOST: the addresses are checked only without it.
        let s = settings(&[]).unwrap();
        if ["HOST", "PORT", "GRPC_HOST", "GRPC_PORT"]
            .iter()
            .all(|name| std::env::var_os(name).is_none())
        {
            assert_eq!(s.http_addr, "0.0.0.0:8080");
            assert_eq!(s.grpc_addr, "0.0.0.0:8081");
        }
        assert_eq!(s.log_level, LogLevel::Warn);
        assert_eq!(
            s.domains.dir,
            PathBuf::from("/srv/runtime_data/current/config")
        );
        assert_eq!(s.engine.near_limit_ratio, 0.8);
        assert_eq!(s.engine.counting, Counting::AllOrNothing);
        assert_eq!(s.backend.kind, BackendKind::Memory);
        assert_eq!(s.backend.redis.pool_size, 10);
        assert_eq!(s.backend.redis.timeout, Duration::from_secs(10));
        assert_eq!(s.backend.expiration_jitter_max, Duration::from_secs(300));
        assert!(s.domains.watch_root);
        assert!(s.prometheus.is_none());
        assert!(s.engine.response_headers.is_none());
    }

    #[test]
    fn runtime_layout_and_config_dir() {
        let s = settings(&[
            "--runtime-root",
            "/r",
            "--runtime-subdirectory",
            "sub",
            "--runtime-appdirectory",
            "app",
        ])
        .unwrap();
        assert_eq!(s.domains.dir, PathBuf::from("/r/sub/app"));
        assert_eq!(s.domains.root, PathBuf::from("/r"));
        let s = settings(&["--config", "/etc/rls"]).unwrap();
        assert_eq!(s.domains.dir, PathBuf::from("/etc/rls"));
    }

    #[test]
    fn flags_without_a_value_are_true() {
        let s = settings(&["--shadow-mode", "--merge-domain-config=F", "--port", "1"]).unwrap();
        assert!(s.engine.shadow_mode);
        assert!(!s.merge_domain_config);
        assert!(s.http_addr.ends_with(":1"));
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (args, name) in [
            (&["--backend-type", "memcache"][..], "BACKEND_TYPE"),
            (&["--redis-type", "REPLICA"][..], "REDIS_TYPE"),
            (
                &["--redis-type", "SENTINEL", "--redis-url", "mymaster"][..],
                "REDIS_URL",
            ),
            (
                &["--redis-tls-client-cert", "/c.pem"][..],
                "REDIS_TLS_CLIENT_KEY",
            ),
            (&["--log-format", "xml"][..], "LOG_FORMAT"),
            (&["--log-level", "loud"][..], "LOG_LEVEL"),
            (&["--near-limit-ratio", "1.5"][..], "NEAR_LIMIT_RATIO"),
            (&["--counting", "some"][..], "--counting"),
            (&["--store-failure", "ignore"][..], "--store-failure"),
            (&["--limit-reset-header", "a b"][..], "LIMIT_RESET_HEADER"),
        ] {
            let err = settings(args).unwrap_err();
            assert!(err.contains(name), "{err}");
        }
        assert!(settings(&["--port", "http"]).is_err());
        assert!(settings(&["--drain-timeout", "10"]).is_err());
    }

    #[test]
    fn grouped_options() {
        let s = settings(&[
            "--backend-type",
            "REDIS",
            "--redis-type",
            "cluster",
            "--redis-url",
            "a:1, b:2",
            "--redis-auth",
            "pw",
            "--limit-response-headers-enabled",
            "--use-prometheus",
            "--counting",
            "each",
            "--grpc-host",
            "::1",
        ])
        .unwrap();
        assert_eq!(s.backend.kind, BackendKind::Redis);
        assert_eq!(s.backend.redis.kind, RedisKind::Cluster);
        assert_eq!(s.backend.redis.urls, ["a:1", "b:2"]);
        assert_eq!(s.backend.redis.auth.as_deref(), Some("pw"));
        assert_eq!(s.backend.redis.tls_files, RedisTlsFiles::default());
        assert_eq!(
            s.engine.response_headers.unwrap().remaining,
            "RateLimit-Remaining"
        );
        assert_eq!(s.prometheus.unwrap().addr, "0.0.0.0:9090");
        assert_eq!(s.engine.counting, Counting::Each);
        assert!(s.grpc_addr.starts_with("[::1]:"));
    }

    #[test]
    fn sentinel_takes_a_master_name_then_sentinels() {
        let s = settings(&[
            "--backend-type",
            "redis",
            "--redis-type",
            "sentinel",
            "--redis-url",
            "mymaster,a:26379,b:26379",
            "--redis-tls",
            "--redis-tls-cacert",
            "/ca.pem",
            "--redis-persecond",
            "--redis-persecond-type",
            "SENTINEL",
            "--redis-persecond-url",
            "fast,c:26379",
            "--redis-persecond-auth",
            "u:p",
        ])
        .unwrap();
        assert_eq!(s.backend.redis.kind, RedisKind::Sentinel);
        assert_eq!(s.backend.redis.urls, ["mymaster", "a:26379", "b:26379"]);
        assert!(s.backend.redis.tls);
        assert_eq!(
            s.backend.redis.tls_files.ca_cert.as_deref(),
            Some(std::path::Path::new("/ca.pem"))
        );
        let per_second = s.backend.per_second.unwrap();
        assert_eq!(per_second.kind, RedisKind::Sentinel);
        assert_eq!(per_second.auth.as_deref(), Some("u:p"));
        assert!(!per_second.tls);
        assert!(
            settings(&["--redis-persecond", "--redis-persecond-type", "sentinel"])
                .unwrap_err()
                .contains("REDIS_PERSECOND_URL")
        );
    }
}
