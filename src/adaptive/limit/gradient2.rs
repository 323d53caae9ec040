//! [`Gradient2Limit`]: Netflix's `Gradient2Limit`, with its two known defects fixed
//! by default and upstream's behaviour one option away.
//!
//! The gradient is the ratio of a long-term exponential average of the RTT (times a
//! tolerance) to the sample's RTT, kept within `[0.5, 1]`. The new limit is
//! `limit × gradient + queue_size`, smoothed: averaging rather than taking the
//! minimum keeps bursty services from settling on an impractically low base RTT,
//! and when the long-term average lags far above the current RTT (after an
//! overload) it is pulled down by 5% a sample.
//!
//! By default it reacts to drops and adds the queue allowance only when no queueing
//! is measured, fixing two upstream defects; see [`Gradient2Limit`].

use std::fmt;

use super::LimitAlgorithm;
use super::checks;
use super::gradient::gradient;
use super::measurement::ExpAvg;
use crate::adaptive::Sample;
use crate::error::ConfigError;
use crate::sync::Arc;

/// Upstream's defaults.
const DEFAULT_INITIAL: u64 = 20;
const DEFAULT_MIN: u64 = 20;
const DEFAULT_MAX: u64 = 200;
const DEFAULT_SMOOTHING: f64 = 0.2;
const DEFAULT_QUEUE_SIZE: u64 = 4;
const DEFAULT_LONG_WINDOW: u64 = 600;
const DEFAULT_TOLERANCE: f64 = 1.5;
/// Samples averaged plainly before the long-term average turns exponential.
const WARMUP: u32 = 10;
/// The gradient a drop counts as: the steepest the algorithm allows.
const DROP_GRADIENT: f64 = 0.5;

/// The queue allowed as a function of the current limit.
type QueueFn = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// What a [`Gradient2Limit`] makes of a dropped sample.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{DropPolicy, Gradient2Limit, LimitAlgorithm};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let dropped = Sample::new(Nanos::ZERO, Duration::from_micros(50), 100, true);
/// let mut fixed = Gradient2Limit::builder().initial_limit(100).build()?;
/// assert_eq!(fixed.on_sample(dropped), 90);
/// let mut upstream = Gradient2Limit::builder()
///     .initial_limit(100)
///     .drop_policy(DropPolicy::Ignore)
///     .build()?;
/// assert_eq!(upstream.on_sample(dropped), 100); // 100 × 0.8 + (100 + 4) × 0.2
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropPolicy {
    /// A dropped sample counts as gradient 0.5, whatever its RTT, and is never
    /// skipped as app-limited: with the default [`QueuePolicy`] the limit shrinks by
    /// `smoothing / 2` (10% with the default smoothing).
    /// The fix [PR #134] proposes for [issue #176].
    ///
    /// [issue #176]: https://github.com/Netflix/concurrency-limits/issues/176
    /// [PR #134]: https://github.com/Netflix/concurrency-limits/pull/134
    #[default]
    Backoff,
    /// Upstream: `dropped` is not looked at; only the RTT counts.
    Ignore,
}

/// When a [`Gradient2Limit`] adds the queue size to the limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm, QueuePolicy};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let ms = Duration::from_millis;
/// let build = |policy| Gradient2Limit::builder().min_limit(1).queue_policy(policy).build();
/// let (mut fixed, mut upstream) = (build(QueuePolicy::WhenUncongested)?, build(QueuePolicy::Always)?);
/// // Ten samples at 10 ms, then the latency doubles: a gradient of about 0.76.
/// for rtt in [10; 10].into_iter().chain([20; 20]) {
///     let sample = Sample::new(Nanos::ZERO, ms(rtt), 1000, false);
///     fixed.on_sample(sample);
///     upstream.on_sample(sample);
/// }
/// assert_eq!(fixed.limit(), 11); // falling
/// assert_eq!(upstream.limit(), 22); // held near 4 / (1 − 0.76), and rising with it
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueuePolicy {
    /// The queue size is added only when the gradient is 1, and app-limited samples
    /// skip only that growth: measured queueing always shrinks the limit. [PR #134].
    ///
    /// [PR #134]: https://github.com/Netflix/concurrency-limits/pull/134
    #[default]
    WhenUncongested,
    /// Upstream: the queue size is added on every sample, and app-limited samples
    /// leave the limit alone whatever the gradient. Under modest overload the limit
    /// settles at `queue_size / (1 − gradient)` and creeps up as the long-term RTT
    /// catches up.
    Always,
}

/// A limit from the gradient of a long-term average RTT to the current one:
/// Netflix's `Gradient2Limit`, by default with two defects fixed.
///
/// # Differences from upstream
///
/// - **Drops** ([`DropPolicy`]). Upstream ignores `dropped` altogether
///   ([issue #176]): a refused or timed-out request often has a tiny RTT, so a
///   window of drops reads as *no* queueing and the limit keeps growing while
///   requests keep being dropped. By default a dropped sample is taken as the
///   steepest gradient, 0.5, as [PR #134] proposes: with the default smoothing 0.2
///   the limit falls by 10% per dropped sample (window), like AIMD's default backoff.
/// - **Queue allowance** ([`QueuePolicy`]). Upstream adds the queue size on every
///   sample. Under modest overload — a gradient of, say, 0.8 — the limit then settles
///   at `queue_size / (1 − gradient)` rather than falling, and as the long-term
///   average catches up with the raised latency that fixed point rises with it: the
///   limit creeps up for as long as the overload lasts ([PR #134], and its 2024
///   discussion). By default the queue size is added only when the gradient is 1 (no
///   queueing seen), so any measured queueing shrinks the limit; the app-limited
///   check (`inflight < limit / 2` leaves the limit alone) then guards only growth,
///   as in the PR. A latency that persists for hundreds of samples still becomes the
///   new baseline, and growth resumes from there: that is Gradient2's design.
///
/// [`Gradient2Builder::upstream`] selects both upstream behaviours at once.
///
/// Its settings are upstream's: any initial limit (the first sample that updates
/// the limit clamps it into `[min_limit, max_limit]`) and a minimum of 0 (an
/// enforcing limiter holds a limit of 0 at 1) are accepted.
///
/// Whatever the policies, a zero RTT counts as gradient 1 (upstream computes `0 / 0`
/// on a first zero sample and its limit becomes 0 for good).
///
/// [issue #176]: https://github.com/Netflix/concurrency-limits/issues/176
/// [PR #134]: https://github.com/Netflix/concurrency-limits/pull/134
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let mut gradient2 = Gradient2Limit::builder().initial_limit(50).build()?;
/// let ok = Sample::new(Nanos::ZERO, Duration::from_millis(10), 50, false);
/// // No queueing: + queue size 4, smoothed by 0.2.
/// assert_eq!(gradient2.on_sample(ok), 50); // 50.8
/// assert_eq!(gradient2.on_sample(ok), 51); // 51.6
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Gradient2Limit {
    estimated: f64,
    long_rtt: ExpAvg,
    min: u64,
    max: u64,
    queue_size: QueueFn,
    smoothing: f64,
    tolerance: f64,
    drop_policy: DropPolicy,
    queue_policy: QueuePolicy,
}

/// The settings of a [`Gradient2Limit`], checked by
/// [`build`](Gradient2Builder::build).
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
///
/// let gradient2 = Gradient2Limit::builder().min_limit(5).initial_limit(10).build()?;
/// assert_eq!(gradient2.limit(), 10);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Gradient2Builder {
    initial: u64,
    min: u64,
    max: u64,
    queue_size: QueueFn,
    smoothing: f64,
    long_window: u64,
    tolerance: f64,
    drop_policy: DropPolicy,
    queue_policy: QueuePolicy,
}

impl Gradient2Limit {
    /// Upstream's settings: limit 20 within `[20, 200]`, queue size 4, smoothing
    /// 0.2, a long-term window of 600 samples, RTT tolerance 1.5; with the default
    /// [`DropPolicy`] and [`QueuePolicy`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2Limit::new().limit(), 20);
    /// ```
    pub fn new() -> Gradient2Limit {
        Gradient2Limit::builder().into_limit()
    }

    /// A builder starting from upstream's settings and the default policies.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2Limit::builder().max_limit(500).build()?.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder() -> Gradient2Builder {
        Gradient2Builder {
            initial: DEFAULT_INITIAL,
            min: DEFAULT_MIN,
            max: DEFAULT_MAX,
            queue_size: Arc::new(|_| DEFAULT_QUEUE_SIZE),
            smoothing: DEFAULT_SMOOTHING,
            long_window: DEFAULT_LONG_WINDOW,
            tolerance: DEFAULT_TOLERANCE,
            drop_policy: DropPolicy::default(),
            queue_policy: QueuePolicy::default(),
        }
    }

    /// The long-term average RTT, in nanoseconds; 0 before any sample.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut gradient2 = Gradient2Limit::new();
    /// gradient2.on_sample(Sample::new(Nanos::ZERO, Duration::from_micros(10), 1, false));
    /// gradient2.on_sample(Sample::new(Nanos::ZERO, Duration::from_micros(20), 1, false));
    /// assert_eq!(gradient2.long_rtt_nanos(), 15_000.0);
    /// ```
    pub fn long_rtt_nanos(&self) -> f64 {
        self.long_rtt.get()
    }

    /// The estimate the limit is the whole part of.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert_eq!(Gradient2Limit::new().estimated_limit(), 20.0);
    /// ```
    pub fn estimated_limit(&self) -> f64 {
        self.estimated
    }
}

impl Default for Gradient2Limit {
    /// [`Gradient2Limit::new`].
    fn default() -> Gradient2Limit {
        Gradient2Limit::new()
    }
}

impl fmt::Debug for Gradient2Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gradient2Limit")
            .field("estimated", &self.estimated)
            .field("long_rtt", &self.long_rtt.get())
            .field("min", &self.min)
            .field("max", &self.max)
            .field("smoothing", &self.smoothing)
            .field("tolerance", &self.tolerance)
            .field("drop_policy", &self.drop_policy)
            .field("queue_policy", &self.queue_policy)
            .finish_non_exhaustive()
    }
}

impl Gradient2Builder {
    /// Upstream's behaviour: [`DropPolicy::Ignore`] and [`QueuePolicy::Always`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
    ///
    /// let upstream = Gradient2Limit::builder().upstream().build()?;
    /// assert_eq!(upstream.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn upstream(self) -> Gradient2Builder {
        self.drop_policy(DropPolicy::Ignore)
            .queue_policy(QueuePolicy::Always)
    }

    /// What a dropped sample does (default [`DropPolicy::Backoff`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{DropPolicy, Gradient2Limit};
    ///
    /// let g = Gradient2Limit::builder().drop_policy(DropPolicy::Ignore).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn drop_policy(self, drop_policy: DropPolicy) -> Gradient2Builder {
        Gradient2Builder {
            drop_policy,
            ..self
        }
    }

    /// When the queue size is added (default [`QueuePolicy::WhenUncongested`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, QueuePolicy};
    ///
    /// let g = Gradient2Limit::builder().queue_policy(QueuePolicy::Always).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn queue_policy(self, queue_policy: QueuePolicy) -> Gradient2Builder {
        Gradient2Builder {
            queue_policy,
            ..self
        }
    }

    /// The limit before any sample (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, LimitAlgorithm};
    ///
    /// assert_eq!(Gradient2Limit::builder().initial_limit(30).build()?.limit(), 30);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn initial_limit(self, initial: u64) -> Gradient2Builder {
        Gradient2Builder { initial, ..self }
    }

    /// The least the limit falls to (default 20).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert!(Gradient2Limit::builder().min_limit(21).build().is_ok()); // above the initial 20
    /// assert!(Gradient2Limit::builder().min_limit(201).build().is_err()); // above the max 200
    /// ```
    pub fn min_limit(self, min: u64) -> Gradient2Builder {
        Gradient2Builder { min, ..self }
    }

    /// The most the limit rises to (upstream's `maxConcurrency`, default 200).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert!(Gradient2Limit::builder().max_limit(1000).build().is_ok());
    /// ```
    pub fn max_limit(self, max: u64) -> Gradient2Builder {
        Gradient2Builder { max, ..self }
    }

    /// A fixed queue size: how far the limit grows per sample before smoothing
    /// (default 4).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// let g = Gradient2Limit::builder().queue_size(10).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn queue_size(self, queue_size: u64) -> Gradient2Builder {
        self.queue_size_fn(move |_| queue_size)
    }

    /// The queue size as a function of the limit (default a constant 4).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    /// use tollgate::adaptive::limit::functions::square_root;
    ///
    /// let g = Gradient2Limit::builder().queue_size_fn(|l| square_root(l).max(4)).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn queue_size_fn(
        self,
        queue_size: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> Gradient2Builder {
        Gradient2Builder {
            queue_size: Arc::new(queue_size),
            ..self
        }
    }

    /// How much of a new estimate is taken, in `(0, 1]` (default 0.2).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert!(Gradient2Limit::builder().smoothing(1.1).build().is_err());
    /// ```
    pub fn smoothing(self, smoothing: f64) -> Gradient2Builder {
        Gradient2Builder { smoothing, ..self }
    }

    /// The samples the long-term average spans, at least 1 (default 600).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert!(Gradient2Limit::builder().long_window(0).build().is_err());
    /// ```
    pub fn long_window(self, long_window: u64) -> Gradient2Builder {
        Gradient2Builder {
            long_window,
            ..self
        }
    }

    /// The factor of latency growth over the long-term average taken as no
    /// queueing, at least 1 (default 1.5).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert!(Gradient2Limit::builder().rtt_tolerance(2.0).build().is_ok());
    /// ```
    pub fn rtt_tolerance(self, tolerance: f64) -> Gradient2Builder {
        Gradient2Builder { tolerance, ..self }
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `long_window` (its average's weight,
    /// `2 / (window + 1)`, would be 2 and the average would swing negative);
    /// [`ConfigError::OutOfRange`] for `min_limit > max_limit`, a zero `max_limit`,
    /// a `smoothing` outside `(0, 1]` or an `rtt_tolerance` below 1;
    /// [`ConfigError::NotANumber`] / [`ConfigError::Infinite`] for such floats.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::adaptive::limit::Gradient2Limit;
    ///
    /// assert_eq!(
    ///     Gradient2Limit::builder().min_limit(300).build().unwrap_err(),
    ///     ConfigError::OutOfRange {
    ///         parameter: "min_limit",
    ///         expected: "at most max_limit: above it the limit is pinned to max_limit",
    ///     }
    /// );
    /// ```
    pub fn build(self) -> Result<Gradient2Limit, ConfigError> {
        checks::limits(self.min, self.max)?;
        checks::smoothing(self.smoothing)?;
        checks::tolerance(self.tolerance)?;
        if self.long_window == 0 {
            return Err(ConfigError::Zero {
                parameter: "long_window",
            });
        }
        Ok(self.into_limit())
    }

    fn into_limit(self) -> Gradient2Limit {
        Gradient2Limit {
            estimated: self.initial as f64,
            long_rtt: ExpAvg::unchecked(self.long_window, WARMUP),
            min: self.min,
            max: self.max,
            queue_size: self.queue_size,
            smoothing: self.smoothing,
            tolerance: self.tolerance,
            drop_policy: self.drop_policy,
            queue_policy: self.queue_policy,
        }
    }
}

impl fmt::Debug for Gradient2Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gradient2Builder")
            .field("initial", &self.initial)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("smoothing", &self.smoothing)
            .field("long_window", &self.long_window)
            .field("tolerance", &self.tolerance)
            .field("drop_policy", &self.drop_policy)
            .field("queue_policy", &self.queue_policy)
            .finish_non_exhaustive()
    }
}

impl LimitAlgorithm for Gradient2Limit {
    /// No timers: `on_time` is the default.
    fn has_timers(&self) -> bool {
        false
    }

    fn limit(&self) -> u64 {
        checks::whole(self.estimated)
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        let limit = self.estimated;
        let short = checks::nanos_f64(sample.rtt);
        let long = self.long_rtt.add(short);

        // After a long overload the long-term RTT lags far above the current one:
        // pull it down rather than wait for the average to decay.
        if long / short > 2.0 {
            self.long_rtt.scale(0.95);
        }

        let app_limited = (sample.inflight as f64) < limit / 2.0;
        let backoff = sample.dropped && self.drop_policy == DropPolicy::Backoff;
        let gradient = if backoff {
            DROP_GRADIENT
        } else {
            gradient(self.tolerance, long, short)
        };
        let queue = match self.queue_policy {
            QueuePolicy::Always if app_limited && !backoff => return self.limit(),
            QueuePolicy::Always => (self.queue_size)(checks::whole(limit)) as f64,
            QueuePolicy::WhenUncongested if gradient < 1.0 => 0.0,
            QueuePolicy::WhenUncongested if app_limited => return self.limit(),
            QueuePolicy::WhenUncongested => (self.queue_size)(checks::whole(limit)) as f64,
        };

        let new = limit * gradient + queue;
        let new = limit * (1.0 - self.smoothing) + new * self.smoothing;
        self.estimated = checks::clamp(new, self.min, self.max, limit);
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::time::Nanos;

    fn sample(rtt: Duration, inflight: u64, dropped: bool) -> Sample {
        Sample::new(Nanos::ZERO, rtt, inflight, dropped)
    }

    #[test]
    fn backoff_with_the_upstream_queue_policy_still_backs_off_when_app_limited() {
        let mut limit = Gradient2Limit::builder()
            .min_limit(1)
            .initial_limit(100)
            .queue_policy(QueuePolicy::Always)
            .build()
            .unwrap();
        let ms = Duration::from_millis;
        // App-limited and not dropped: unchanged, as upstream.
        assert_eq!(limit.on_sample(sample(ms(10), 1, false)), 100);
        // App-limited but dropped: 100 × 0.8 + (100 × 0.5 + 4) × 0.2 = 90.8.
        assert_eq!(limit.on_sample(sample(ms(10), 1, true)), 90);
        assert_eq!(limit.estimated_limit(), 90.8);
    }

    #[test]
    fn uncongested_policy_skips_only_growth_when_app_limited() {
        let mut limit = Gradient2Limit::builder()
            .min_limit(1)
            .initial_limit(100)
            .build()
            .unwrap();
        let ms = Duration::from_millis;
        assert_eq!(limit.on_sample(sample(ms(10), 1, false)), 100);
        // Long-term 25 ms, this 40 ms: gradient 0.9375 < 1, so it shrinks even
        // though app-limited: 100 × 0.8 + 93.75 × 0.2 = 98.75.
        assert_eq!(limit.on_sample(sample(ms(40), 1, false)), 98);
        assert_eq!(limit.estimated_limit(), 98.75);
    }

    #[test]
    fn zero_rtt_counts_as_no_queueing() {
        // Upstream: 0 / 0 = NaN on the first sample, and its limit is 0 for good.
        let mut limit = Gradient2Limit::builder().upstream().build().unwrap();
        assert_eq!(limit.on_sample(sample(Duration::ZERO, 20, false)), 20); // 20.8
        assert_eq!(limit.estimated_limit(), 20.8);
        assert_eq!(limit.long_rtt_nanos(), 0.0);
    }

    #[test]
    fn builder_rejects_bad_settings() {
        let b = Gradient2Limit::builder;
        assert_eq!(
            b().long_window(0).build().unwrap_err(),
            ConfigError::Zero {
                parameter: "long_window"
            }
        );
        assert_eq!(
            b().smoothing(f64::NAN).build().unwrap_err().parameter(),
            "smoothing"
        );
        assert_eq!(
            b().smoothing(-0.1).build().unwrap_err().parameter(),
            "smoothing"
        );
        assert_eq!(
            b().rtt_tolerance(0.5).build().unwrap_err().parameter(),
            "rtt_tolerance"
        );
        assert!(b().min_limit(0).build().is_ok());
        assert!(b().initial_limit(201).build().is_ok());
        assert_eq!(
            b().min_limit(0)
                .max_limit(0)
                .build()
                .unwrap_err()
                .parameter(),
            "max_limit"
        );
    }

    /// Gradient2Limit's builder accepts an initial limit outside its bounds (with
    /// a warning); the first update clamps it.
    #[test]
    fn an_initial_limit_outside_the_bounds_is_clamped_at_the_first_update() {
        let mut low = Gradient2Limit::builder()
            .upstream()
            .initial_limit(5)
            .build()
            .unwrap();
        assert_eq!(low.limit(), 5);
        // 5 × 0.8 + (5 + 4) × 0.2 = 5.8, raised to the minimum 20.
        let ok = sample(Duration::from_millis(10), 5, false);
        assert_eq!(low.on_sample(ok), 20);
    }

    #[test]
    fn extremes_stay_within_bounds() {
        let inputs = [
            (Duration::ZERO, u64::MAX, false),
            (Duration::MAX, u64::MAX, false),
            (Duration::MAX, 0, true),
            (Duration::from_nanos(1), u64::MAX, false),
            (Duration::ZERO, 0, true),
            (Duration::MAX, u64::MAX, true),
        ];
        for upstream in [false, true] {
            let mut builder = Gradient2Limit::builder()
                .min_limit(3)
                .initial_limit(3)
                .max_limit(u64::MAX)
                .queue_size_fn(|_| u64::MAX)
                .long_window(u64::MAX);
            if upstream {
                builder = builder.upstream();
            }
            let mut limit = builder.build().unwrap();
            for &(rtt, inflight, dropped) in inputs.iter().cycle().take(600) {
                let l = limit.on_sample(Sample::new(Nanos::MAX, rtt, inflight, dropped));
                assert!(l >= 3, "{l}");
                assert!(!limit.estimated_limit().is_nan());
            }
            let mut small = Gradient2Limit::builder()
                .min_limit(1)
                .initial_limit(5)
                .max_limit(10);
            if upstream {
                small = small.upstream();
            }
            let mut small = small.build().unwrap();
            for &(rtt, inflight, dropped) in inputs.iter().cycle().take(600) {
                let l = small.on_sample(Sample::new(Nanos::ZERO, rtt, inflight, dropped));
                assert!((1..=10).contains(&l), "{l}");
            }
        }
    }
}
