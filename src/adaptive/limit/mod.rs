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
//!
//! The parts they are built from are public, for limits of your own: a window of
//! samples summed up as one RTT ([`SampleWindow`]: mean or percentile) and the
//! long-term exponential average of the RTT Gradient2 compares with ([`ExpAvg`]).

pub mod envoy_gradient;

pub use envoy_gradient::{EnvoyGradient, EnvoyGradientConfig, EnvoyGradientConfigBuilder};

use std::time::Duration;

use crate::time::Nanos;

use super::Sample;

mod aimd;
pub(crate) use aimd::Rule as AimdRule;
mod checks;
pub mod functions;
mod gradient;
mod gradient2;
mod jitter;
mod measurement;
mod vegas;
mod window;
mod windowed;

pub use aimd::{AimdBuilder, AimdLimit};
pub use gradient::{GradientBuilder, GradientLimit};
pub use gradient2::{DropPolicy, Gradient2Builder, Gradient2Limit, QueuePolicy};
pub use measurement::ExpAvg;
pub use vegas::{VegasBuilder, VegasLimit};
pub use window::SampleWindow;
pub use windowed::{Aggregation, WindowedBuilder, WindowedLimit};

mod rule;
pub use rule::LimitRule;

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

    /// Whether [`on_sample`](LimitAlgorithm::on_sample) reads a sample's `start` or
    /// `rtt`. When it does not, an enforcing limiter reads no clock for its requests
    /// (unless its events need the time) and hands it samples with a `start` and an
    /// `rtt` of zero. Asked once, when the limiter is built: the answer must not
    /// change. The default is `true`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm, VegasLimit};
    ///
    /// assert!(VegasLimit::new().uses_time());
    /// assert!(AimdLimit::new().uses_time()); // its timeout: 5 s
    /// let drops_only = AimdLimit::builder().timeout(Duration::MAX).build()?;
    /// assert!(!drops_only.uses_time());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn uses_time(&self) -> bool {
        true
    }

    /// The coarsest clock resolution its samples' `start` and `rtt` may have: times
    /// read to within it change nothing the algorithm decides. Asked once, when the
    /// limiter is built; read only if [`uses_time`](LimitAlgorithm::uses_time).
    ///
    /// [`AdaptiveLimiter::new`](crate::adaptive::AdaptiveLimiter::new) times requests
    /// on a shared [`CoarseClock`](crate::time::CoarseClock) of 1 ms (one atomic load
    /// a reading, instead of a time-stamp counter read) when this is at least 1 ms,
    /// and on the precise clock otherwise. The default, [`Duration::ZERO`], asks for
    /// the precise clock: right for algorithms that learn from the RTT itself (Vegas,
    /// the gradients). AIMD, which only compares the RTT with a timeout of seconds,
    /// answers a thousandth of its timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm, VegasLimit};
    ///
    /// assert_eq!(VegasLimit::new().time_resolution(), Duration::ZERO);
    /// assert_eq!(AimdLimit::new().time_resolution(), Duration::from_millis(5)); // 5 s timeout
    /// ```
    fn time_resolution(&self) -> Duration {
        Duration::ZERO
    }

    /// Whether [`on_time`](LimitAlgorithm::on_time) may change anything. When it
    /// cannot, an enforcing limiter skips it, with its clock read and its lock, for
    /// requests that end ignored. Asked once, when the limiter is built. The default
    /// is `true`; an algorithm that keeps the default `on_time` answers `false`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, Gradient2Limit, LimitAlgorithm, WindowedLimit};
    ///
    /// assert!(!AimdLimit::new().has_timers());
    /// assert!(WindowedLimit::new(Gradient2Limit::new()).has_timers()); // windows close
    /// ```
    fn has_timers(&self) -> bool {
        true
    }

    /// For an algorithm whose whole state is its limit (AIMD): its
    /// [`on_sample`](LimitAlgorithm::on_sample) as a pure function of the limit, so
    /// that an enforcing limiter can tell without its lock that a sample leaves the
    /// limit as it is, and skip the lock then. `None` (the default) for any other.
    ///
    /// The rule must answer exactly what `on_sample` would from a state with that
    /// limit, and a sample it answers the same limit for must change nothing in the
    /// algorithm. Asked once, when the limiter is built.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let rule = AimdLimit::new().limit_rule().expect("AIMD is a function of its limit");
    /// let idle = Sample::new(Nanos::ZERO, Duration::from_millis(1), 1, false);
    /// assert_eq!(rule.next(20, &idle), 20); // 1 in flight of 20: no growth
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn limit_rule(&self) -> Option<LimitRule> {
        None
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

    fn uses_time(&self) -> bool {
        (**self).uses_time()
    }

    fn time_resolution(&self) -> Duration {
        (**self).time_resolution()
    }

    fn has_timers(&self) -> bool {
        (**self).has_timers()
    }

    fn limit_rule(&self) -> Option<LimitRule> {
        (**self).limit_rule()
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
        send_sync::<SampleWindow>();
        send_sync::<ExpAvg>();
    }
}
