//! A rate limit service that speaks Envoy's `RateLimitService` and reads the
//! configuration of envoyproxy/ratelimit, deciding with tollgate's algorithms.
//!
//! Modules, one concern each:
//! - [`settings`]: command-line flags and the Go service's environment variables.
//! - [`domains`]: the directory of domain files, read into [`tollgate::config::RuleSet`]s.
//! - [`reload`]: watching that directory, and swapping in what changed.
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
pub mod http;
pub mod json;
pub mod reload;
pub mod server;
pub mod settings;
pub mod stats;
pub mod verdict;
