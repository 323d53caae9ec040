//! Limit algorithms: pure state machines from [`Sample`]s to a concurrency limit.
//!
//! Netflix's [concurrency-limits](https://github.com/Netflix/concurrency-limits)
//! algorithms, matched to upstream's own unit tests:
//!
//! - [`AimdLimit`]: loss-based; +1 per success while in use, × backoff per drop.
//! - [`VegasLimit`]: delay-based after TCP Vegas; the queue estimated from the
//!   least RTT.
//! - [`GradientLimit`]: the gradient of the least RTT to the current one.
//! - [`Gradient2Limit`]: the gradient of a long-term average RTT to the current one,
//!   with upstream's drop and queue defects fixed by default ([`DropPolicy`],
//!   [`QueuePolicy`]).
//! - [`WindowedLimit`]: wraps any of them and feeds it one sample per time window.

mod circllhist;
pub mod envoy_gradient;

pub use envoy_gradient::{EnvoyGradient, EnvoyGradientConfig, EnvoyGradientConfigBuilder};

use crate::time::Nanos;

use super::Sample;

mod aimd;
mod checks;
pub mod functions;
mod gradient;
mod gradient2;
mod jitter;
mod measurement;
#[cfg(test)]
mod upstream_tables;
mod vegas;
mod window;
mod windowed;

pub use aimd::{AimdBuilder, AimdLimit};
pub use gradient::{GradientBuilder, GradientLimit};
pub use gradient2::{DropPolicy, Gradient2Builder, Gradient2Limit, QueuePolicy};
pub use vegas::{VegasBuilder, VegasLimit};
pub use windowed::{Aggregation, WindowedBuilder, WindowedLimit};

/// A concurrency limit that adapts to samples of finished requests.
///
/// Implementations are pure: no clock, no I/O, no locks. The enforcing limiter owns
/// one behind its own synchronisation and feeds it samples.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{AimdLimit, Gradient2Limit, LimitAlgorithm, WindowedLimit};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// // Any algorithm, boxed, chosen at run time.
/// let mut limits: Vec<Box<dyn LimitAlgorithm>> = vec![
///     Box::new(AimdLimit::new()),
///     Box::new(WindowedLimit::new(Gradient2Limit::new())),
/// ];
/// let sample = Sample::new(Nanos::ZERO, Duration::from_millis(5), 20, false);
/// for limit in &mut limits {
///     limit.on_sample(sample);
/// }
/// assert_eq!(limits[0].limit(), 21);
/// ```
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

/// A boxed algorithm is one: the enforcing limiter can hold a
/// `Box<dyn LimitAlgorithm>`, and [`WindowedLimit`] can wrap one.
impl<L: LimitAlgorithm + ?Sized> LimitAlgorithm for Box<L> {
    fn limit(&self) -> u64 {
        (**self).limit()
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        (**self).on_sample(sample)
    }

    fn on_time(&mut self, now: Nanos) -> u64 {
        (**self).on_time(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}

    #[test]
    fn algorithms_cross_threads_and_clone() {
        send_sync::<AimdLimit>();
        send_sync::<VegasLimit>();
        send_sync::<GradientLimit>();
        send_sync::<Gradient2Limit>();
        send_sync::<WindowedLimit<Gradient2Limit>>();
        send_sync::<AimdBuilder>();
        send_sync::<VegasBuilder>();
        send_sync::<GradientBuilder>();
        send_sync::<Gradient2Builder>();
        send_sync::<WindowedBuilder>();
    }
}
