//! A rate limit service that speaks Envoy's `RateLimitService` and reads the
//! configuration of envoyproxy/ratelimit, deciding with tollgate's algorithms.
//!
//! A drop-in for the Go service: the same gRPC service (`ShouldRateLimit`, and the
//! standard health service under the name `ratelimit`), the same HTTP endpoints
//! (`/json`, `/healthcheck`, `/metrics`), the same environment variables and the same
//! domain files, read from `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`
//! and reloaded when they change.
//!
//! # Running it
//!
//! With nothing else running (counts kept in memory), on the example domain:
//!
//! ```text
//! cargo run -p tollgate-rls -- --config tollgate-rls/examples/config
//! ```
//!
//! It prints `tollgate-rls listening grpc=0.0.0.0:8081 http=0.0.0.0:8080`; then
//!
//! ```text
//! curl -s -XPOST localhost:8080/json \
//!   -d '{"domain":"example","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}'
//! ```
//!
//! answers `{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":…,"limitRemaining":19,…}]}`,
//! and `429` with `OVER_LIMIT` from the 21st request of the minute. `--help` lists
//! every flag with its environment variable.
//!
//! # Counting: all-or-nothing, or as the Go service
//!
//! By default ([`settings::Counting::AllOrNothing`]) the enforcing limits of a request
//! are decided in one atomic store request: a request over any of them takes nothing
//! from the others, so a client over one limit does not use up another
//! (envoyproxy/ratelimit#1060), and a denied hit is not counted. Shadow-mode and
//! quota-mode limits, which never deny a request alone, are counted after it, each on
//! its own, when the request was admitted, and only looked at otherwise.
//! `--counting each` ([`settings::Counting::Each`]) counts as the Go service: every
//! descriptor on its own, a fixed window counting denied hits too (Go's `INCRBY`), and
//! with `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` Go's read, then increment.
//!
//! # Differences from the Go service
//!
//! Each deliberate; everything else follows the Go service's code and tests (its
//! configuration, service, base limiter and cache tests are reproduced in this
//! package's tests and in `tests/config_envoy_table.rs` of the library).
//!
//! - **Algorithms**: `algorithm` (and `burst`) in a `rate_limit` choose tollgate's GCRA,
//!   sliding counter, sliding log or leaky bucket; the default is Go's fixed window,
//!   aligned to Unix time.
//! - **Counting**: all-or-nothing by default (above).
//! - **More hits than the limit holds** (`hits_addend` above `requests_per_unit`): the
//!   descriptor is OVER_LIMIT and nothing is counted; Go counts them, which blocks the
//!   rest of the window.
//! - **Wildcards** match a descriptor's value, the key compared whole; Go matches the
//!   pattern against `key_value`, so one of its patterns can reach across a key that
//!   contains `_`.
//! - **Store keys** are tollgate's (`{prefix}:{domain}:{algorithm}:{window}|key=value…`),
//!   counted by tollgate's scripts: a Go deployment and this one on the same Redis do
//!   not share counts.
//! - **Stats**: Prometheus only (no statsd, DogStatsD or `EXTRA_TAGS`), under the names
//!   and labels Go's Prometheus mapping gives; `over_limit_with_local_cache` and
//!   `domain_not_found` are families of their own (see [`stats`]).
//! - **Not served**: configuration over xDS (`CONFIG_TYPE=GRPC_XDS_SOTW`), memcached,
//!   TLS on the gRPC listener, the debug port's endpoints,
//!   `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`, and a private CA for a Redis Cluster (its
//!   `rediss://` nodes are checked against the system's roots).
//! - **Redis through Sentinel** (`REDIS_TYPE=SENTINEL`): the sentinels are reached in
//!   plain TCP, `REDIS_AUTH` and `REDIS_TLS` being the master's, as in Go (a sentinel
//!   given as a URL, `redis://:password@host:26379`, is reached as it says); the master
//!   is followed across failovers (see
//!   [`SentinelConnection`](tollgate::store::SentinelConnection) for what a failover
//!   can over-admit).
//!
//! Modules, one concern each:
//! - [`settings`]: command-line flags and the Go service's environment variables.
//! - [`domains`]: the directory of domain files, read into [`tollgate::config::RuleSet`]s.
//! - [`reload`]: watching that directory, and swapping in what changed.
//! - [`health`]: the health the HTTP and gRPC health checks report.
//! - [`engine`]: `ShouldRateLimit`'s semantics, as the Go service decides.
//! - [`verdict`]: the Go service's decision arithmetic, pure: statuses, stats, response.
//! - [`backend`]: where counts live: memory, Redis, Redis Cluster, Redis through
//!   Sentinel; [`redis_link`]: its Redis connection, shared with the quota leases.
//! - [`stats`]: the Go service's stats, exposed as Prometheus metrics.
//! - [`grpc`], [`http`], [`json`]: the transports; [`hot_path`]: `ShouldRateLimit`
//!   answered inside tonic's server without its router and codec.
//! - [`quota`]: Envoy's Rate Limit Quota Service (RLQS), quotas assigned to each Envoy
//!   from the same domain files, shared by the replicas through leases in Redis.
//! - [`server`]: starting, serving and draining.

pub mod backend;
pub mod domains;
pub mod engine;
pub mod grpc;
pub mod health;
pub mod hot_path;
pub mod http;
pub mod json;
pub mod quota;
pub mod redis_link;
pub mod reload;
pub mod server;
pub mod settings;
pub mod stats;
pub mod verdict;
