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

mod acquire;
mod feedback;
pub mod limit;
mod limiter;
pub mod partition;
mod partitioned;
mod permit;
mod sample;
mod source;
mod when_limited;

pub use acquire::AdaptiveAcquire;
pub use limit::LimitAlgorithm;
pub use limiter::{AdaptiveLimiter, Timing};
pub use partitioned::{PartitionedLimiter, PartitionedLimiterBuilder, PartitionedPermit};
pub use permit::{AdaptivePermit, AdaptivePermitRef};
pub use sample::Sample;
pub use when_limited::WhenLimited;
