//! [`GradientLimit`]: Netflix's original `GradientLimit`.
//!
//! The gradient is the ratio of the least RTT ever seen (times a tolerance) to the
//! sample's RTT, kept within `[0.5, 1]`; the new limit is `limit × gradient +
//! queue_size`, with decreases smoothed and a drop multiplying the limit by the
//! backoff ratio. Every `probe_interval` to `2 × probe_interval` samples the least
//! RTT is forgotten and the limit cut to the queue size, to re-measure it.

use std::fmt;

use super::LimitAlgorithm;
use super::checks;
use super::functions::square_root;
use super::jitter::Jitter;
use super::measurement::Minimum;
use crate::adaptive::Sample;
use crate::error::ConfigError;
use crate::sync::Arc;

/// Upstream's defaults.
const DEFAULT_INITIAL: u64 = 50;
const DEFAULT_MIN: u64 = 1;
const DEFAULT_MAX: u64 = 1000;
const DEFAULT_SMOOTHING: f64 = 0.2;
const DEFAULT_TOLERANCE: f64 = 2.0;
const DEFAULT_PROBE_INTERVAL: u64 = 1000;
const DEFAULT_BACKOFF: f64 = 0.9;

/// The queue allowed as a function of the current limit.
type QueueFn = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// The default queue size: `max(4, √limit)`, upstream's `SquareRootFunction.create(4)`.
fn default_queue(limit: u64) -> u64 {
    square_root(limit).max(4)
}

/// The gradient of `rtt` against `rtt_noload` with `tolerance`, within `[0.5, 1]`.
/// A zero RTT shows no queueing: 1 (upstream divides by it and ends at NaN).
pub(crate) fn gradient(tolerance: f64, rtt_noload: f64, rtt: f64) -> f64 {
    if rtt == 0.0 {
        return 1.0;
    }
    (tolerance * rtt_noload / rtt).clamp(0.5, 1.0)
}

/// A limit from the gradient of the least RTT to the current one: Netflix's
/// `GradientLimit`.
///
/// Two differences from upstream, both where upstream leaves its own bounds: the
/// limit never exceeds `max_limit` even when the queue size does (upstream floors
/// the limit at the queue size after capping it, issue #135), and a zero RTT counts
/// as gradient 1 (upstream computes `0 / 0` and its limit becomes 0 for good). Its
/// settings are upstream's: any initial limit (the first sample that updates the
/// limit clamps it) and a minimum of 0 are accepted.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let ms = Duration::from_millis;
/// let mut gradient = GradientLimit::builder().probe_interval(None).build()?;
/// // No queueing: the limit grows by the queue size, √50 → 7.
/// assert_eq!(gradient.on_sample(Sample::new(Nanos::ZERO, ms(10), 50, false)), 57);
/// // Four times the least RTT, twice the tolerance: gradient 0.5, smoothed.
/// assert_eq!(gradient.on_sample(Sample::new(Nanos::ZERO, ms(40), 57, false)), 52);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct GradientLimit {
    estimated: f64,
    rtt_noload: Minimum,
    min: u64,
    max: u64,
    queue_size: QueueFn,
    smoothing: f64,
    tolerance: f64,
    backoff_ratio: f64,
    probe_interval: Option<u64>,
    /// Samples until the next probe.
    countdown: u64,
    jitter: Jitter,
}

/// The settings of a [`GradientLimit`], checked by [`build`](GradientBuilder::build).
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
///
/// let gradient = GradientLimit::builder().initial_limit(20).max_limit(100).build()?;
/// assert_eq!(gradient.limit(), 20);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct GradientBuilder {
    initial: u64,
    min: u64,
    max: u64,
    queue_size: QueueFn,
    smoothing: f64,
    tolerance: f64,
    backoff_ratio: f64,
    probe_interval: Option<u64>,
    seed: Option<u64>,
}

impl GradientLimit {
    /// Upstream's defaults: limit 50 within `[1, 1000]`, queue `max(4, √limit)`,
    /// smoothing 0.2, RTT tolerance 2, backoff 0.9, a probe every 1000 to 1999
    /// samples.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
    ///
    /// assert_eq!(GradientLimit::new().limit(), 50);
    /// ```
    pub fn new() -> GradientLimit {
        GradientLimit::builder().into_limit()
    }

    /// A builder starting from upstream's defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
    ///
    /// assert_eq!(GradientLimit::builder().initial_limit(10).build()?.limit(), 10);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder() -> GradientBuilder {
        GradientBuilder {
            initial: DEFAULT_INITIAL,
            min: DEFAULT_MIN,
            max: DEFAULT_MAX,
            queue_size: Arc::new(default_queue),
            smoothing: DEFAULT_SMOOTHING,
            tolerance: DEFAULT_TOLERANCE,
            backoff_ratio: DEFAULT_BACKOFF,
            probe_interval: Some(DEFAULT_PROBE_INTERVAL),
            seed: None,
        }
    }

    /// The least RTT since the last probe, in nanoseconds; 0 before any.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut gradient = GradientLimit::new();
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_micros(5), 1, false));
    /// assert_eq!(gradient.rtt_noload_nanos(), 5_000.0);
    /// ```
    pub fn rtt_noload_nanos(&self) -> f64 {
        self.rtt_noload.get()
    }

    /// The estimate the limit is the whole part of.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert_eq!(GradientLimit::new().estimated_limit(), 50.0);
    /// ```
    pub fn estimated_limit(&self) -> f64 {
        self.estimated
    }

    fn next_countdown(&mut self) -> u64 {
        match self.probe_interval {
            Some(n) => n.saturating_add(self.jitter.below(n)),
            None => 0,
        }
    }
}

impl Default for GradientLimit {
    /// [`GradientLimit::new`].
    fn default() -> GradientLimit {
        GradientLimit::new()
    }
}

impl fmt::Debug for GradientLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GradientLimit")
            .field("estimated", &self.estimated)
            .field("rtt_noload", &self.rtt_noload.get())
            .field("min", &self.min)
            .field("max", &self.max)
            .field("smoothing", &self.smoothing)
            .field("tolerance", &self.tolerance)
            .field("backoff_ratio", &self.backoff_ratio)
            .field("probe_interval", &self.probe_interval)
            .field("countdown", &self.countdown)
            .finish_non_exhaustive()
    }
}

impl GradientBuilder {
    /// The limit before any sample (default 50).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{GradientLimit, LimitAlgorithm};
    ///
    /// assert_eq!(GradientLimit::builder().initial_limit(5).build()?.limit(), 5);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn initial_limit(self, initial: u64) -> GradientBuilder {
        GradientBuilder { initial, ..self }
    }

    /// The least the limit falls to (default 1).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().min_limit(0).build().is_ok());
    /// assert!(GradientLimit::builder().min_limit(1001).build().is_err()); // above the max 1000
    /// ```
    pub fn min_limit(self, min: u64) -> GradientBuilder {
        GradientBuilder { min, ..self }
    }

    /// The most the limit rises to (upstream's `maxConcurrency`, default 1000).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().max_limit(49).build().is_ok()); // below the initial 50
    /// assert!(GradientLimit::builder().min_limit(0).max_limit(0).build().is_err());
    /// ```
    pub fn max_limit(self, max: u64) -> GradientBuilder {
        GradientBuilder { max, ..self }
    }

    /// A fixed queue size: how far the limit may grow past what the gradient allows.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// let gradient = GradientLimit::builder().queue_size(4).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn queue_size(self, queue_size: u64) -> GradientBuilder {
        self.queue_size_fn(move |_| queue_size)
    }

    /// The queue size as a function of the limit (default `max(4, √limit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    /// use tollgate::adaptive::limit::functions::log10_root;
    ///
    /// let gradient = GradientLimit::builder().queue_size_fn(log10_root).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn queue_size_fn(
        self,
        queue_size: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> GradientBuilder {
        GradientBuilder {
            queue_size: Arc::new(queue_size),
            ..self
        }
    }

    /// How much of a lower estimate is taken, in `(0, 1]` (default 0.2).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().smoothing(1.0).build().is_ok());
    /// ```
    pub fn smoothing(self, smoothing: f64) -> GradientBuilder {
        GradientBuilder { smoothing, ..self }
    }

    /// The factor of latency growth over the least RTT taken as no queueing, at
    /// least 1 (default 2).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().rtt_tolerance(0.9).build().is_err());
    /// ```
    pub fn rtt_tolerance(self, tolerance: f64) -> GradientBuilder {
        GradientBuilder { tolerance, ..self }
    }

    /// What a drop multiplies the limit by, in `[0.5, 1]` (default 0.9; 1 ignores
    /// drops).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().backoff_ratio(1.0).build().is_ok());
    /// assert!(GradientLimit::builder().backoff_ratio(0.4).build().is_err());
    /// ```
    pub fn backoff_ratio(self, backoff_ratio: f64) -> GradientBuilder {
        GradientBuilder {
            backoff_ratio,
            ..self
        }
    }

    /// Probe for a new least RTT every `n` to `2n - 1` samples (default 1000), or
    /// never with `None` (upstream's `-1`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert!(GradientLimit::builder().probe_interval(None).build().is_ok());
    /// assert!(GradientLimit::builder().probe_interval(Some(0)).build().is_err());
    /// ```
    pub fn probe_interval(self, probe_interval: Option<u64>) -> GradientBuilder {
        GradientBuilder {
            probe_interval,
            ..self
        }
    }

    /// Seeds the probe jitter, for reproducible runs (default: a random seed).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// let gradient = GradientLimit::builder().seed(7).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn seed(self, seed: u64) -> GradientBuilder {
        GradientBuilder {
            seed: Some(seed),
            ..self
        }
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `probe_interval` (upstream's `nextInt(0)`
    /// throws); [`ConfigError::OutOfRange`] for `min_limit > max_limit`, a zero
    /// `max_limit`, a `smoothing` outside `(0, 1]`, an `rtt_tolerance` below 1 or a
    /// `backoff_ratio` outside `[0.5, 1]`; [`ConfigError::NotANumber`] /
    /// [`ConfigError::Infinite`] for such floats.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::adaptive::limit::GradientLimit;
    ///
    /// assert_eq!(
    ///     GradientLimit::builder().rtt_tolerance(f64::NAN).build().unwrap_err(),
    ///     ConfigError::NotANumber { parameter: "rtt_tolerance" }
    /// );
    /// ```
    pub fn build(self) -> Result<GradientLimit, ConfigError> {
        checks::limits(self.min, self.max)?;
        checks::smoothing(self.smoothing)?;
        checks::tolerance(self.tolerance)?;
        checks::ratio(
            "backoff_ratio",
            self.backoff_ratio,
            |r| (0.5..=1.0).contains(&r),
            "in [0.5, 1]",
        )?;
        if self.probe_interval == Some(0) {
            return Err(ConfigError::Zero {
                parameter: "probe_interval",
            });
        }
        Ok(self.into_limit())
    }

    fn into_limit(self) -> GradientLimit {
        let mut limit = GradientLimit {
            estimated: self.initial as f64,
            rtt_noload: Minimum::default(),
            min: self.min,
            max: self.max,
            queue_size: self.queue_size,
            smoothing: self.smoothing,
            tolerance: self.tolerance,
            backoff_ratio: self.backoff_ratio,
            probe_interval: self.probe_interval,
            countdown: 0,
            jitter: Jitter::new(self.seed),
        };
        limit.countdown = limit.next_countdown();
        limit
    }
}

impl fmt::Debug for GradientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GradientBuilder")
            .field("initial", &self.initial)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("smoothing", &self.smoothing)
            .field("tolerance", &self.tolerance)
            .field("backoff_ratio", &self.backoff_ratio)
            .field("probe_interval", &self.probe_interval)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl LimitAlgorithm for GradientLimit {
    /// No timers: `on_time` is the default.
    fn has_timers(&self) -> bool {
        false
    }

    fn limit(&self) -> u64 {
        checks::whole(self.estimated)
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        let limit = self.estimated;
        let queue = (self.queue_size)(checks::whole(limit)) as f64;
        let (min, max) = (self.min as f64, self.max as f64);

        if self.probe_interval.is_some() {
            if self.countdown == 0 {
                // Forget the least RTT and cut the limit to the queue size, so that a
                // probe under heavy load does not let the limit drift upwards.
                self.countdown = self.next_countdown();
                self.estimated = queue.max(min).min(max);
                self.rtt_noload.reset();
                return self.limit();
            }
            self.countdown -= 1;
        }

        let rtt = checks::nanos_f64(sample.rtt);
        let rtt_noload = self.rtt_noload.add(rtt);
        let gradient = gradient(self.tolerance, rtt_noload, rtt);

        let mut new = if sample.dropped {
            limit * self.backoff_ratio
        } else if (sample.inflight as f64) < limit / 2.0 {
            // App-limited: a limit not in use says nothing about capacity.
            return self.limit();
        } else {
            limit * gradient + queue
        };
        if new < limit {
            new = (limit * (1.0 - self.smoothing) + self.smoothing * new).max(min);
        }
        // Upstream floors at the queue size after capping: cap again so that a
        // queue size above the maximum cannot lift the limit past it.
        self.estimated = new.min(max).max(queue).min(max);
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::time::Nanos;

    fn sample(rtt_ms: u64, inflight: u64, dropped: bool) -> Sample {
        Sample::new(
            Nanos::ZERO,
            Duration::from_millis(rtt_ms),
            inflight,
            dropped,
        )
    }

    #[test]
    fn gradient_is_clamped_and_defined_at_zero() {
        assert_eq!(gradient(2.0, 10.0, 10.0), 1.0);
        assert_eq!(gradient(2.0, 10.0, 30.0), 2.0 / 3.0);
        assert_eq!(gradient(2.0, 10.0, 1e30), 0.5);
        assert_eq!(gradient(2.0, 0.0, 0.0), 1.0);
    }

    #[test]
    fn builder_rejects_bad_settings() {
        let b = GradientLimit::builder;
        assert_eq!(
            b().smoothing(0.0).build().unwrap_err().parameter(),
            "smoothing"
        );
        assert_eq!(
            b().backoff_ratio(f64::NAN).build().unwrap_err().parameter(),
            "backoff_ratio"
        );
        assert_eq!(
            b().backoff_ratio(1.01).build().unwrap_err().parameter(),
            "backoff_ratio"
        );
        assert_eq!(
            b().rtt_tolerance(f64::INFINITY)
                .build()
                .unwrap_err()
                .parameter(),
            "rtt_tolerance"
        );
        assert_eq!(
            b().probe_interval(Some(0)).build().unwrap_err(),
            ConfigError::Zero {
                parameter: "probe_interval"
            }
        );
        assert!(b().min_limit(60).build().is_ok());
    }

    /// GradientLimit's builder accepts an initial limit outside its bounds (with
    /// a warning); the first update clamps it, and the queue size floors it.
    #[test]
    fn an_initial_limit_outside_the_bounds_is_clamped_at_the_first_update() {
        let mut high = GradientLimit::builder()
            .initial_limit(2000)
            .probe_interval(None)
            .build()
            .unwrap();
        assert_eq!(high.on_sample(sample(10, 2000, false)), 1000);
        let mut zero = GradientLimit::builder()
            .min_limit(0)
            .initial_limit(0)
            .probe_interval(None)
            .build()
            .unwrap();
        // 0 × 1 + the queue size, max(4, √0).
        assert_eq!(zero.on_sample(sample(10, 1, false)), 4);
    }

    #[test]
    fn queue_size_above_the_maximum_is_capped() {
        // Upstream's limit would be floored at the queue size, 4, above its max 3.
        let mut limit = GradientLimit::builder()
            .initial_limit(3)
            .max_limit(3)
            .probe_interval(None)
            .build()
            .unwrap();
        assert_eq!(limit.on_sample(sample(10, 3, false)), 3);
        assert_eq!(limit.on_sample(sample(100, 3, true)), 3);
    }

    #[test]
    fn extremes_stay_within_bounds() {
        let mut limit = GradientLimit::builder()
            .initial_limit(10)
            .max_limit(100)
            .min_limit(2)
            .probe_interval(Some(3))
            .seed(9)
            .build()
            .unwrap();
        let inputs = [
            (Duration::ZERO, u64::MAX, false),
            (Duration::MAX, u64::MAX, false),
            (Duration::MAX, 0, true),
            (Duration::from_nanos(1), u64::MAX, false),
            (Duration::ZERO, 0, true),
        ];
        for &(rtt, inflight, dropped) in inputs.iter().cycle().take(500) {
            let l = limit.on_sample(Sample::new(Nanos::MAX, rtt, inflight, dropped));
            assert!((2..=100).contains(&l), "{l}");
        }
    }
}
