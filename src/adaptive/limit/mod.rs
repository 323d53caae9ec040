//! Limit algorithms: pure state machines from [`Sample`]s to a concurrency limit.

mod circllhist;
pub mod envoy_gradient;

pub use envoy_gradient::{EnvoyGradient, EnvoyGradientConfig, EnvoyGradientConfigBuilder};

use crate::time::Nanos;

use super::Sample;

/// A concurrency limit that adapts to samples of finished requests.
///
/// Implementations are pure: no clock, no I/O, no locks. The enforcing limiter owns
/// one behind its own synchronisation and feeds it samples.
pub trait LimitAlgorithm: Send + 'static {
    /// The current limit: how many requests may be in flight.
    fn limit(&self) -> u64;

    /// Feeds one finished request and answers the limit after it.
    fn on_sample(&mut self, sample: Sample) -> u64;

    /// Lets time pass without a sample, for algorithms with timers (windows that
    /// close, a minimum RTT that is re-measured). The default does nothing.
    fn on_time(&mut self, now: Nanos) -> u64 {
        let _ = now;
        self.limit()
    }
}
