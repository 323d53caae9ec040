//! [`VegasLimit`]: Netflix's `VegasLimit`, after TCP Vegas.
//!
//! The least RTT seen is taken as the no-load latency; from it and each sample's RTT
//! the queue is estimated as `limit × (1 − rtt_noload / rtt)`. A queue at most the
//! threshold (log₁₀ of the limit) grows the limit by β, one below α grows it by a
//! step, one above β shrinks it by a step, and a drop always shrinks it. Every
//! `probe_multiplier × limit` samples (with jitter) the no-load RTT is measured anew.

use std::fmt;
use std::time::Duration;

use super::LimitAlgorithm;
use super::checks;
use super::functions::log10_root;
use super::jitter::Jitter;
use crate::adaptive::Sample;
use crate::error::ConfigError;
use crate::sync::Arc;

/// Upstream's defaults.
const DEFAULT_INITIAL: u64 = 20;
const DEFAULT_MAX: u64 = 1000;
const DEFAULT_SMOOTHING: f64 = 1.0;
const DEFAULT_PROBE_MULTIPLIER: u64 = 30;

/// A threshold as a function of the current limit (`alpha`, `beta`, `threshold`).
type LimitFn = Arc<dyn Fn(u64) -> u64 + Send + Sync>;
/// A new limit from the current one (`increase`, `decrease`).
type StepFn = Arc<dyn Fn(f64) -> f64 + Send + Sync>;

/// The functions of a [`VegasLimit`], upstream's defaults unless replaced.
#[derive(Clone)]
struct Functions {
    alpha: LimitFn,
    beta: LimitFn,
    threshold: LimitFn,
    increase: StepFn,
    decrease: StepFn,
}

impl Default for Functions {
    fn default() -> Functions {
        Functions {
            alpha: Arc::new(|limit| log10_root(limit).saturating_mul(3)),
            beta: Arc::new(|limit| log10_root(limit).saturating_mul(6)),
            threshold: Arc::new(log10_root),
            increase: Arc::new(|limit| limit + log10_root(checks::whole(limit)) as f64),
            decrease: Arc::new(|limit| limit - log10_root(checks::whole(limit)) as f64),
        }
    }
}

impl fmt::Debug for Functions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Functions { .. }")
    }
}

/// A delay-based limit after TCP Vegas: Netflix's `VegasLimit`.
///
/// The arithmetic is upstream's, with three differences: samples with a zero RTT
/// are ignored (upstream throws on them: a no-load RTT of 0 would make every queue
/// estimate meaningless); the probe jitter comes from a seed
/// ([`seed`](VegasBuilder::seed)) rather than `ThreadLocalRandom`; and the floor of
/// the limit, fixed at 1 upstream, can be raised ([`min_limit`](VegasBuilder::min_limit)).
/// Any initial limit upstream can work with is accepted: one above `max_limit`
/// stands until the first update clamps it. An initial limit of 0, which upstream
/// accepts, is refused: there the probe falls due on every sample, and upstream's
/// limit stays 0 for good.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let ms = Duration::from_millis;
/// let mut vegas = VegasLimit::builder().initial_limit(10).max_limit(20).alpha(3).beta(6).build()?;
/// // The first sample sets the no-load RTT.
/// assert_eq!(vegas.on_sample(Sample::new(Nanos::ZERO, ms(10), 10, false)), 10);
/// // No queue: grow by β.
/// assert_eq!(vegas.on_sample(Sample::new(Nanos::ZERO, ms(10), 11, false)), 16);
/// // 16 × (1 − 10/50) = 12.8 queued, above β: shrink by a step.
/// assert_eq!(vegas.on_sample(Sample::new(Nanos::ZERO, ms(50), 16, false)), 15);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct VegasLimit {
    estimated: f64,
    /// The no-load RTT; zero until the first sample.
    rtt_noload: Duration,
    min: u64,
    max: u64,
    smoothing: f64,
    functions: Functions,
    probe_multiplier: u64,
    probe_count: u64,
    probe_jitter: f64,
    jitter: Jitter,
}

/// The settings of a [`VegasLimit`], checked by [`build`](VegasBuilder::build).
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
///
/// let vegas = VegasLimit::builder().initial_limit(100).max_limit(200).smoothing(0.5).build()?;
/// assert_eq!(vegas.limit(), 100);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct VegasBuilder {
    initial: u64,
    min: u64,
    max: u64,
    smoothing: f64,
    functions: Functions,
    probe_multiplier: u64,
    seed: Option<u64>,
}

impl VegasLimit {
    /// Upstream's defaults: limit 20 up to 1000, smoothing 1, α = 3·log₁₀(limit),
    /// β = 6·log₁₀(limit), threshold and steps log₁₀(limit), a probe every 30 × limit
    /// samples (times a jitter in `[0.5, 1)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
    ///
    /// assert_eq!(VegasLimit::new().limit(), 20);
    /// ```
    pub fn new() -> VegasLimit {
        VegasLimit::builder().into_limit()
    }

    /// A builder starting from upstream's defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
    ///
    /// assert_eq!(VegasLimit::builder().initial_limit(50).build()?.limit(), 50);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder() -> VegasBuilder {
        VegasBuilder {
            initial: DEFAULT_INITIAL,
            min: 1,
            max: DEFAULT_MAX,
            smoothing: DEFAULT_SMOOTHING,
            functions: Functions::default(),
            probe_multiplier: DEFAULT_PROBE_MULTIPLIER,
            seed: None,
        }
    }

    /// The no-load RTT the queue is estimated against; zero before the first sample.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut vegas = VegasLimit::new();
    /// assert_eq!(vegas.rtt_noload(), Duration::ZERO);
    /// vegas.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(3), 1, false));
    /// assert_eq!(vegas.rtt_noload(), Duration::from_millis(3));
    /// ```
    pub fn rtt_noload(&self) -> Duration {
        self.rtt_noload
    }

    /// The estimate the limit is the whole part of.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert_eq!(VegasLimit::new().estimated_limit(), 20.0);
    /// ```
    pub fn estimated_limit(&self) -> f64 {
        self.estimated
    }

    fn should_probe(&self) -> bool {
        self.probe_jitter * self.probe_multiplier as f64 * self.estimated <= self.probe_count as f64
    }

    fn update_estimate(&mut self, sample: Sample) -> u64 {
        let limit = self.estimated;
        let noload = checks::nanos_f64(self.rtt_noload);
        let rtt = checks::nanos_f64(sample.rtt);
        let queue = (limit * (1.0 - noload / rtt)).ceil();
        let f = &self.functions;
        let new = if sample.dropped {
            (f.decrease)(limit)
        } else if (sample.inflight as f64) * 2.0 < limit {
            // Not close to the limit: growing it would only drift upwards.
            return checks::whole(limit);
        } else {
            let whole = checks::whole(limit);
            let alpha = (f.alpha)(whole) as f64;
            let beta = (f.beta)(whole) as f64;
            let threshold = (f.threshold)(whole) as f64;
            if queue <= threshold {
                limit + beta
            } else if queue < alpha {
                (f.increase)(limit)
            } else if queue > beta {
                (f.decrease)(limit)
            } else {
                return checks::whole(limit);
            }
        };
        let new = checks::clamp(new, self.min, self.max, limit);
        self.estimated = (1.0 - self.smoothing) * limit + self.smoothing * new;
        checks::whole(self.estimated)
    }
}

impl Default for VegasLimit {
    /// [`VegasLimit::new`].
    fn default() -> VegasLimit {
        VegasLimit::new()
    }
}

impl VegasBuilder {
    /// The limit before any sample (default 20). Outside `[min_limit, max_limit]`
    /// it stands until the first update clamps it, as upstream.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit};
    ///
    /// assert_eq!(VegasLimit::builder().initial_limit(7).build()?.limit(), 7);
    /// assert_eq!(VegasLimit::builder().initial_limit(5000).build()?.limit(), 5000); // max 1000
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn initial_limit(self, initial: u64) -> VegasBuilder {
        VegasBuilder { initial, ..self }
    }

    /// The least the limit falls to (default 1; upstream has no setting and floors
    /// at 1), at least 1: at a limit of 0 the no-load RTT would be probed on
    /// every sample (the probe interval is a multiple of the limit) and the limit
    /// would never move again.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert!(VegasLimit::builder().min_limit(10).build().is_ok());
    /// assert!(VegasLimit::builder().min_limit(0).build().is_err());
    /// assert!(VegasLimit::builder().min_limit(1001).build().is_err()); // above the max 1000
    /// ```
    pub fn min_limit(self, min: u64) -> VegasBuilder {
        VegasBuilder { min, ..self }
    }

    /// The most the limit rises to (upstream's `maxConcurrency`, default 1000).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert!(VegasLimit::builder().max_limit(19).build().is_ok()); // below the initial 20
    /// assert!(VegasLimit::builder().min_limit(0).max_limit(0).build().is_err());
    /// ```
    pub fn max_limit(self, max: u64) -> VegasBuilder {
        VegasBuilder { max, ..self }
    }

    /// How much of a new estimate is taken, in `(0, 1]` (default 1: all of it).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert!(VegasLimit::builder().smoothing(0.5).build().is_ok());
    /// assert!(VegasLimit::builder().smoothing(0.0).build().is_err());
    /// ```
    pub fn smoothing(self, smoothing: f64) -> VegasBuilder {
        VegasBuilder { smoothing, ..self }
    }

    /// The no-load RTT is probed anew every `probe_multiplier × limit` samples, times
    /// a jitter in `[0.5, 1)` (default 30, at least 1).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert!(VegasLimit::builder().probe_multiplier(10).build().is_ok());
    /// assert!(VegasLimit::builder().probe_multiplier(0).build().is_err());
    /// ```
    pub fn probe_multiplier(self, probe_multiplier: u64) -> VegasBuilder {
        VegasBuilder {
            probe_multiplier,
            ..self
        }
    }

    /// Seeds the probe jitter, for reproducible runs (default: a random seed, as
    /// upstream draws from `ThreadLocalRandom`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().seed(42).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn seed(self, seed: u64) -> VegasBuilder {
        VegasBuilder {
            seed: Some(seed),
            ..self
        }
    }

    /// A fixed α: below α queued requests the limit grows by a step.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().alpha(3).beta(6).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn alpha(self, alpha: u64) -> VegasBuilder {
        self.alpha_fn(move |_| alpha)
    }

    /// α as a function of the current limit (default `3 × log10_root(limit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    /// use tollgate::adaptive::limit::functions::square_root;
    ///
    /// let vegas = VegasLimit::builder().alpha_fn(square_root).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn alpha_fn(mut self, alpha: impl Fn(u64) -> u64 + Send + Sync + 'static) -> VegasBuilder {
        self.functions.alpha = Arc::new(alpha);
        self
    }

    /// A fixed β: above β queued requests the limit shrinks by a step; with no queue
    /// it grows by β.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().beta(6).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn beta(self, beta: u64) -> VegasBuilder {
        self.beta_fn(move |_| beta)
    }

    /// β as a function of the current limit (default `6 × log10_root(limit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().beta_fn(|limit| limit / 5).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn beta_fn(mut self, beta: impl Fn(u64) -> u64 + Send + Sync + 'static) -> VegasBuilder {
        self.functions.beta = Arc::new(beta);
        self
    }

    /// The queue at or below which the limit grows by β, as a function of the limit
    /// (default `log10_root(limit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().threshold_fn(|_| 2).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn threshold_fn(
        mut self,
        threshold: impl Fn(u64) -> u64 + Send + Sync + 'static,
    ) -> VegasBuilder {
        self.functions.threshold = Arc::new(threshold);
        self
    }

    /// The limit after a step up (default `limit + log10_root(limit)`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().increase_fn(|limit| limit + 1.0).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn increase_fn(
        mut self,
        increase: impl Fn(f64) -> f64 + Send + Sync + 'static,
    ) -> VegasBuilder {
        self.functions.increase = Arc::new(increase);
        self
    }

    /// The limit after a step down or a drop (default `limit - log10_root(limit)`).
    /// A NaN result leaves the limit as it was; the result is clamped into
    /// `[min_limit, max_limit]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// let vegas = VegasLimit::builder().decrease_fn(|limit| limit / 2.0).build()?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn decrease_fn(
        mut self,
        decrease: impl Fn(f64) -> f64 + Send + Sync + 'static,
    ) -> VegasBuilder {
        self.functions.decrease = Arc::new(decrease);
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `probe_multiplier` (every sample would be a
    /// probe, and the limit would never move); [`ConfigError::OutOfRange`] for
    /// `min_limit > max_limit`, a zero `min_limit`, `initial_limit` or `max_limit`,
    /// or a `smoothing` outside `(0, 1]`; [`ConfigError::NotANumber`] /
    /// [`ConfigError::Infinite`] for such a `smoothing`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::adaptive::limit::VegasLimit;
    ///
    /// assert_eq!(
    ///     VegasLimit::builder().probe_multiplier(0).build().unwrap_err(),
    ///     ConfigError::Zero { parameter: "probe_multiplier" }
    /// );
    /// ```
    pub fn build(self) -> Result<VegasLimit, ConfigError> {
        checks::limits(self.min, self.max)?;
        // At a limit of 0 the probe falls due on every sample (its interval is a
        // multiple of the limit), and the limit never moves again.
        if self.min == 0 {
            return Err(ConfigError::OutOfRange {
                parameter: "min_limit",
                expected: "at least 1: at 0 Vegas probes on every sample and never grows",
            });
        }
        if self.initial == 0 {
            return Err(ConfigError::OutOfRange {
                parameter: "initial_limit",
                expected: "at least 1: at 0 Vegas probes on every sample and never grows",
            });
        }
        checks::smoothing(self.smoothing)?;
        if self.probe_multiplier == 0 {
            return Err(ConfigError::Zero {
                parameter: "probe_multiplier",
            });
        }
        Ok(self.into_limit())
    }

    fn into_limit(self) -> VegasLimit {
        let mut jitter = Jitter::new(self.seed);
        VegasLimit {
            estimated: self.initial as f64,
            rtt_noload: Duration::ZERO,
            min: self.min,
            max: self.max,
            smoothing: self.smoothing,
            functions: self.functions,
            probe_multiplier: self.probe_multiplier,
            probe_count: 0,
            probe_jitter: jitter.half_to_one(),
            jitter,
        }
    }
}

impl LimitAlgorithm for VegasLimit {
    /// No timers: `on_time` is the default.
    fn has_timers(&self) -> bool {
        false
    }

    fn limit(&self) -> u64 {
        checks::whole(self.estimated)
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        if sample.rtt.is_zero() {
            return self.limit();
        }
        self.probe_count = self.probe_count.saturating_add(1);
        if self.should_probe() {
            self.probe_jitter = self.jitter.half_to_one();
            self.probe_count = 0;
            self.rtt_noload = sample.rtt;
            return self.limit();
        }
        if self.rtt_noload.is_zero() || sample.rtt < self.rtt_noload {
            self.rtt_noload = sample.rtt;
            return self.limit();
        }
        self.update_estimate(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Nanos;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn sample(rtt: Duration, inflight: u64) -> Sample {
        Sample::new(Nanos::ZERO, rtt, inflight, false)
    }

    /// VegasLimitTest.create().
    fn create() -> VegasLimit {
        VegasLimit::builder()
            .alpha(3)
            .beta(6)
            .smoothing(1.0)
            .initial_limit(10)
            .max_limit(20)
            .build()
            .unwrap()
    }

    /// VegasLimitTest.largeLimitIncrease.
    #[test]
    fn large_limit_increase() {
        let mut limit = VegasLimit::builder()
            .initial_limit(10000)
            .max_limit(20000)
            .build()
            .unwrap();
        limit.on_sample(sample(Duration::from_secs(10), 5000));
        assert_eq!(limit.limit(), 10000);
        limit.on_sample(sample(Duration::from_secs(10), 6000));
        assert_eq!(limit.limit(), 10024);
    }

    /// VegasLimitTest.increaseLimit.
    #[test]
    fn increase_limit() {
        let mut limit = create();
        limit.on_sample(sample(ms(10), 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(sample(ms(10), 11));
        assert_eq!(limit.limit(), 16);
    }

    /// VegasLimitTest.decreaseLimit.
    #[test]
    fn decrease_limit() {
        let mut limit = create();
        limit.on_sample(sample(ms(10), 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(sample(ms(50), 11));
        assert_eq!(limit.limit(), 9);
    }

    /// VegasLimitTest.noChangeIfWithinThresholds.
    #[test]
    fn no_change_if_within_thresholds() {
        let mut limit = create();
        limit.on_sample(sample(ms(10), 10));
        assert_eq!(limit.limit(), 10);
        limit.on_sample(sample(ms(14), 14));
        assert_eq!(limit.limit(), 10);
    }

    /// VegasLimitTest.decreaseSmoothing and
    /// VegasLimitTest.decreaseSmoothingDeprecatedBuilderMethod: upstream's two
    /// builder methods (`decreaseFunction`, deprecated `decrease`) are one here.
    #[test]
    fn decrease_smoothing() {
        let mut limit = VegasLimit::builder()
            .decrease_fn(|current| current / 2.0)
            .smoothing(0.5)
            .initial_limit(100)
            .max_limit(200)
            .build()
            .unwrap();
        // Pick up first min-rtt
        limit.on_sample(sample(ms(10), 100));
        assert_eq!(limit.limit(), 100);
        // First decrease
        limit.on_sample(sample(ms(20), 100));
        assert_eq!(limit.limit(), 75);
        // Second decrease
        limit.on_sample(sample(ms(20), 100));
        assert_eq!(limit.limit(), 56);
    }

    /// VegasLimitTest.decreaseWithoutSmoothing and
    /// VegasLimitTest.decreaseWithoutSmoothingDeprecatedBuilderMethod.
    #[test]
    fn decrease_without_smoothing() {
        let mut limit = VegasLimit::builder()
            .decrease_fn(|current| current / 2.0)
            .initial_limit(100)
            .max_limit(200)
            .build()
            .unwrap();
        // Pick up first min-rtt
        limit.on_sample(sample(ms(10), 100));
        assert_eq!(limit.limit(), 100);
        // First decrease
        limit.on_sample(sample(ms(20), 100));
        assert_eq!(limit.limit(), 50);
        // Second decrease
        limit.on_sample(sample(ms(20), 100));
        assert_eq!(limit.limit(), 25);
    }

    #[test]
    fn drops_decrease_even_when_idle() {
        let mut limit = create();
        limit.on_sample(sample(ms(10), 1));
        // 10 − log10_root(10) = 9, whatever the inflight.
        let dropped = Sample::new(Nanos::ZERO, ms(10), 0, true);
        assert_eq!(limit.on_sample(dropped), 9);
        // Idle and not dropped: unchanged.
        assert_eq!(limit.on_sample(sample(ms(10), 4)), 9);
    }

    #[test]
    fn probe_takes_a_new_noload_rtt_within_the_jittered_interval() {
        // Limit 10, multiplier 2: the probe falls on sample ⌈jitter × 20⌉, within
        // [10, 20]; stay idle (inflight 1) so the limit does not move.
        let mut limit = VegasLimit::builder()
            .initial_limit(10)
            .max_limit(20)
            .probe_multiplier(2)
            .seed(3)
            .build()
            .unwrap();
        limit.on_sample(sample(ms(10), 1));
        let mut probed_at = None;
        for i in 2..=21u64 {
            limit.on_sample(sample(ms(30), 1));
            if limit.rtt_noload() == ms(30) {
                probed_at = Some(i);
                break;
            }
        }
        let at = probed_at.expect("a probe within 2 × limit samples");
        assert!((10..=20).contains(&at), "{at}");
        assert_eq!(limit.limit(), 10);
    }

    #[test]
    fn zero_rtt_is_ignored() {
        let mut limit = create();
        assert_eq!(limit.on_sample(sample(Duration::ZERO, 10)), 10);
        assert_eq!(limit.rtt_noload(), Duration::ZERO);
        limit.on_sample(sample(ms(10), 10));
        assert_eq!(limit.on_sample(sample(Duration::ZERO, 20)), 10);
        assert_eq!(limit.rtt_noload(), ms(10));
    }

    #[test]
    fn user_functions_cannot_leave_the_bounds() {
        let mut limit = VegasLimit::builder()
            .initial_limit(10)
            .max_limit(20)
            .decrease_fn(|_| f64::NAN)
            .increase_fn(|_| f64::INFINITY)
            .beta(u64::MAX)
            .build()
            .unwrap();
        limit.on_sample(sample(ms(10), 10));
        // No queue: + β = +u64::MAX, clamped to the maximum.
        assert_eq!(limit.on_sample(sample(ms(10), 10)), 20);
        // A drop: NaN keeps the limit.
        let dropped = Sample::new(Nanos::ZERO, ms(10), 10, true);
        assert_eq!(limit.on_sample(dropped), 20);
    }

    #[test]
    fn builder_rejects_bad_settings() {
        let b = VegasLimit::builder;
        assert_eq!(
            b().smoothing(f64::NAN).build().unwrap_err().parameter(),
            "smoothing"
        );
        assert_eq!(
            b().smoothing(1.5).build().unwrap_err().parameter(),
            "smoothing"
        );
        assert!(b().max_limit(5).build().is_ok());
        assert_eq!(
            b().min_limit(30)
                .max_limit(25)
                .build()
                .unwrap_err()
                .parameter(),
            "min_limit"
        );
        assert_eq!(
            b().initial_limit(0).build().unwrap_err().parameter(),
            "initial_limit"
        );
        assert_eq!(
            b().min_limit(0).build().unwrap_err().parameter(),
            "min_limit"
        );
    }

    /// VegasLimit accepts `initialLimit > maxConcurrency` (with a warning): the
    /// limit stands until the first update, which clamps it.
    #[test]
    fn an_initial_limit_above_the_maximum_is_clamped_at_the_first_update() {
        let mut limit = VegasLimit::builder()
            .initial_limit(50)
            .max_limit(20)
            .alpha(3)
            .beta(6)
            .build()
            .unwrap();
        // The first sample only sets the no-load RTT.
        assert_eq!(limit.on_sample(sample(ms(10), 50)), 50);
        // No queue: 50 + 6, clamped to 20.
        assert_eq!(limit.on_sample(sample(ms(10), 50)), 20);
    }

    #[test]
    fn extremes_stay_within_bounds() {
        let mut limit = VegasLimit::builder()
            .initial_limit(1)
            .max_limit(u64::MAX)
            .seed(1)
            .build()
            .unwrap();
        let inputs = [
            (Duration::from_nanos(1), u64::MAX, false),
            (Duration::MAX, u64::MAX, false),
            (Duration::MAX, 0, true),
            (Duration::ZERO, u64::MAX, false),
            (Duration::from_nanos(1), u64::MAX, false),
            (Duration::from_nanos(1), u64::MAX, true),
        ];
        for _ in 0..50 {
            for &(rtt, inflight, dropped) in &inputs {
                let l = limit.on_sample(Sample::new(Nanos::MAX, rtt, inflight, dropped));
                assert!(l >= 1, "{l}");
            }
        }
        let mut small = create();
        for &(rtt, inflight, dropped) in inputs.iter().cycle().take(300) {
            let l = small.on_sample(Sample::new(Nanos::ZERO, rtt, inflight, dropped));
            assert!((1..=20).contains(&l), "{l}");
        }
    }
}
