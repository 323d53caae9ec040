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
//! Modules, one concern each:
//! - [`settings`]: command-line flags and the Go service's environment variables.
//! - [`domains`]: the directory of domain files, read into [`tollgate::config::RuleSet`]s.
//! - [`reload`]: watching that directory, and swapping in what changed.
//! - [`health`]: the health the HTTP and gRPC health checks report.
//! - [`engine`]: `ShouldRateLimit`'s semantics, as the Go service decides.
//! - [`verdict`]: the Go service's decision arithmetic, pure: statuses, stats, response.
//! - [`backend`]: where counts live: memory, Redis, Redis Cluster.
//! - [`stats`]: the Go service's stats, exposed as Prometheus metrics.
//! - [`grpc`], [`http`], [`json`]: the transports.
//! - [`server`]: starting, serving and draining.

pub mod backend;
pub mod domains;
pub mod engine;
pub mod grpc;
pub mod health;
pub mod http;
pub mod json;
pub mod reload;
pub mod server;
pub mod settings;
pub mod stats;
pub mod verdict;
