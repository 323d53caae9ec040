//! Adaptive concurrency: limits that follow the service's latency.
//!
//! A [`LimitAlgorithm`] is a pure state machine: it is fed one [`Sample`] per
//! finished request (when it started, how long it took, how many requests were in
//! flight when it started, and whether it was dropped) and answers the new limit. It
//! reads no clock; time arrives in the samples, from the [`Clock`](crate::time::Clock)
//! of whatever enforces the limit.
//!
//! An [`AdaptiveLimiter`] enforces one: each request holds a permit (an
//! [`AdaptivePermitRef`] borrowing the limiter, or an owned [`AdaptivePermit`]) and
//! ends it as a success, a drop or ignored; the limiter feeds the algorithm and
//! applies the limit it answers. When every permit is held, [`WhenLimited`] says what
//! a request does: fail fast, wait in arrival order, or wait in a bounded LIFO
//! backlog (Netflix's `LifoBlockingLimiter`). A [`PartitionedLimiter`] enforces
//! one shared by named [`partition`]s, each guaranteed a share of the limit.
//!
//! Little's law links a concurrency limit to a rate limit: concurrency = rate ×
//! latency. A concurrency limit that follows latency keeps queues short without
//! knowing the service's capacity in advance.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tollgate::adaptive::limit::Gradient2Limit;
//! use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
//!
//! # futures::executor::block_on(async {
//! let mode = WhenLimited::lifo(100, Duration::from_millis(500))?;
//! let limiter = Arc::new(AdaptiveLimiter::new(Gradient2Limit::new(), mode)?);
//! let permit = limiter.acquire().await?;
//! // ... call the backend ...
//! permit.success();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # The algorithms, and what else is here
//!
//! A fixed concurrency limit is too low or too high; an adaptive one follows the
//! service's latency. [`limit`] has Netflix concurrency-limits' algorithms (AIMD,
//! Vegas, Gradient, Gradient2, a windowed sampler) and Envoy's adaptive-concurrency
//! gradient controller, each a pure state machine checked against its upstream test
//! tables, enforced by an [`AdaptiveLimiter`] on the same lock-free permits and FIFO
//! queue as [`Semaphore`](crate::Semaphore) (fail fast, FIFO with a timeout, or
//! Netflix's LIFO backlog). Each admitted request holds a guard that records its
//! outcome and its latency on the limiter's clock:
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::adaptive::limit::AimdLimit;
//! use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
//!
//! let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
//! let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
//! let permit = limiter.try_acquire()?;
//! permit.dropped(); // the backend timed out: the limit backs off
//! assert_eq!(limiter.limit(), 9);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Also here: a [`PartitionedLimiter`] with guaranteed shares that never lets a race
//! exceed the global limit (Netflix's concurrency-limits#234; a Netflix-compatible
//! mode is selectable), and tower server and client layers with HTTP and gRPC outcome
//! classifiers (`tollgate::http::adaptive`, feature `http`).
//! [`try_acquire`](AdaptiveLimiter::try_acquire) lends a permit tied to the limiter,
//! as tokio's does; [`try_acquire_owned`](AdaptiveLimiter::try_acquire_owned) gives
//! one that can move into a task. An AIMD whose timeout is seconds can time its
//! requests on [`CoarseClock`](crate::time::CoarseClock) (one atomic load per
//! reading, refreshed by a thread) instead of reading the CPU's counter twice per
//! request.
//!
//! `cargo run --example adaptive_server --features http,adaptive` runs an axum server behind
//! the adaptive tower layer through a load ramp past its capacity, printing the
//! limit, admitted rate and p99 each second, with and without the layer.

mod acquire;
mod error;
mod feedback;
pub mod limit;
mod limiter;
pub mod partition;
mod permit;
mod sample;
mod source;
mod when_limited;

pub use acquire::AdaptiveAcquire;
pub use error::SampleError;
pub use limit::LimitAlgorithm;
pub use limiter::{AdaptiveLimiter, Timing};
pub use partition::limiter::{PartitionedLimiter, PartitionedLimiterBuilder, PartitionedPermit};
pub use permit::{AdaptivePermit, AdaptivePermitRef};
pub use sample::Sample;
pub use when_limited::WhenLimited;
