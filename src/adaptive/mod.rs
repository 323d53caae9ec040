//! Adaptive concurrency: limits that follow the service's latency.
//!
//! A [`LimitAlgorithm`] is a pure state machine: it is fed one [`Sample`] per
//! finished request (when it started, how long it took, how many requests were in
//! flight when it started, and whether it was dropped) and answers the new limit. It
//! reads no clock; time arrives in the samples, from the [`Clock`](crate::time::Clock)
//! of whatever enforces the limit.
//!
//! Little's law links a concurrency limit to a rate limit: concurrency = rate ×
//! latency. A concurrency limit that follows latency keeps queues short without
//! knowing the service's capacity in advance.

pub mod limit;
pub mod outbound;
mod sample;

pub use limit::LimitAlgorithm;
pub use sample::Sample;
