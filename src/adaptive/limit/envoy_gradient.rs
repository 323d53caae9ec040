//! Envoy's adaptive-concurrency gradient controller, as a pure state machine.
//!
//! The controller alternates between two kinds of windows. In a **minRTT window** the
//! limit is pinned to a small `min_concurrency` and the `p`-th percentile of the next
//! `request_count` latencies becomes the ideal round-trip time, minRTT; the limit then
//! returns to what it was. Otherwise, every `concurrency_update_interval` a **sample
//! window** closes: the percentile of its latencies is sampleRTT, and
//!
//! ```text
//! gradient  = max(0.5, min(2.0, minRTT × (1 + buffer) / sampleRTT))
//! limit     = old_limit × gradient
//! new_limit = clamp(⌊limit + √limit⌋, min_concurrency_limit, max_concurrency_limit)
//! ```
//!
//! The square-root headroom makes the limit grow while latency stays near minRTT. The
//! minRTT is measured again after `interval` plus a random jitter, and at once when
//! the limit has been set to its minimum for 5 sample windows in a row (a sign that
//! minRTT is stale). Latencies of requests that started before the current minRTT
//! window are discarded.
//!
//! Envoy drives its two timers from an event loop; here they fire when time is
//! reported, through [`LimitAlgorithm::on_time`] or a sample's end. The limit during a
//! minRTT window is simply [`limit`](LimitAlgorithm::limit), so the enforcing limiter
//! needs nothing more than the trait. The tests port Envoy's `gradient_controller_test.cc`
//! with its numbers; percentiles follow libcircllhist's estimate, as Envoy's do.
//!
//! # Where this differs from Envoy, and why
//!
//! - Configuration durations keep their full precision; Envoy truncates them to whole
//!   milliseconds (its timers' unit). Whole-millisecond values behave the same. The
//!   jitter is drawn in whole milliseconds, as Envoy draws it.
//! - Where Envoy's arithmetic is undefined behaviour in C++ (a percentile past
//!   `i32::MAX` µs, about 35.8 minutes, cast to `int`; a limit or jitter range past
//!   `u32::MAX` cast to `uint32_t`), the conversions here saturate. No defined upstream
//!   behaviour exists there to select instead.
//! - A configuration Envoy accepts but cannot honour is refused:
//!   `min_concurrency` or `min_concurrency_limit` above `max_concurrency_limit`
//!   (Envoy then pins the limit to the minimum).
//! - Envoy's runtime overrides (changing parameters of a live controller) have no
//!   counterpart: build a new controller with a new configuration.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use super::circllhist::Histogram;
use super::{LimitAlgorithm, Sample};
use crate::error::{ConfigError, non_zero};
use crate::time::Nanos;
use crate::units::{positive_nanos, saturating_u64};

/// After this many sample windows in a row set the limit to its minimum, minRTT is
/// measured again (Envoy's `consecutive_min_concurrency_set_ >= 5`).
const MIN_LIMIT_WINDOWS_BEFORE_REMEASURE: u32 = 5;

/// The shortest minRTT recalculation interval Envoy's configuration accepts.
const MIN_RTT_INTERVAL_FLOOR: Duration = Duration::from_millis(1);

/// How minRTT is obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MinRttSource {
    /// Measured in minRTT windows, this long apart before jitter.
    Measured(Duration),
    /// Given: no minRTT windows (Envoy's `fixed_value`).
    Fixed(Duration),
}

/// The validated parameters of an [`EnvoyGradient`], with Envoy's defaults.
///
/// Built by [`EnvoyGradientConfig::builder`]. The names follow Envoy's
/// `GradientControllerConfig`; percentages are given in percent, as Envoy's
/// `type.v3.Percent` fields are, and read back as fractions, as Envoy's accessors
/// return them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::EnvoyGradientConfig;
///
/// let config = EnvoyGradientConfig::builder()
///     .concurrency_update_interval(Duration::from_millis(100))
///     .min_rtt_calc_interval(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(config.max_concurrency_limit(), 1000);
/// assert_eq!(config.min_rtt_request_count(), 50);
/// assert_eq!(config.sample_quantile(), 0.5);
/// assert_eq!(config.jitter_fraction(), 0.15);
/// assert_eq!(config.min_concurrency(), 3);
/// assert_eq!(config.min_rtt_buffer_fraction(), 0.25);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct EnvoyGradientConfig {
    concurrency_update_interval: Duration,
    max_concurrency_limit: u32,
    min_concurrency_limit: Option<u32>,
    min_rtt: MinRttSource,
    min_rtt_calc_interval: Option<Duration>,
    min_rtt_request_count: u32,
    jitter_percent: f64,
    min_concurrency: u32,
    min_rtt_buffer_percent: f64,
    sample_aggregate_percentile: f64,
}

impl EnvoyGradientConfig {
    /// A builder with Envoy's defaults. `concurrency_update_interval` has none, and
    /// one of `min_rtt_calc_interval` or `fixed_min_rtt` must be given.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::EnvoyGradientConfig;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// assert_eq!(config.fixed_min_rtt(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder() -> EnvoyGradientConfigBuilder {
        EnvoyGradientConfigBuilder::default()
    }

    /// How often a sample window closes and the limit is recalculated.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(123))
    ///     .min_rtt_calc_interval(Duration::from_secs(31))
    ///     .build()?;
    /// assert_eq!(config.concurrency_update_interval(), Duration::from_millis(123));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn concurrency_update_interval(&self) -> Duration {
        self.concurrency_update_interval
    }

    /// The highest limit the gradient may reach (default 1000).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .max_concurrency_limit(1337)
    ///     .build()?;
    /// assert_eq!(config.max_concurrency_limit(), 1337);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_concurrency_limit(&self) -> u32 {
        self.max_concurrency_limit
    }

    /// The lowest limit the gradient may reach: `min_concurrency_limit` if it was set,
    /// otherwise [`min_concurrency`](Self::min_concurrency).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .min_concurrency(8);
    /// assert_eq!(builder.clone().build()?.min_concurrency_limit(), 8);
    /// assert_eq!(builder.min_concurrency_limit(4).build()?.min_concurrency_limit(), 4);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_concurrency_limit(&self) -> u32 {
        self.min_concurrency_limit.unwrap_or(self.min_concurrency)
    }

    /// The limit while minRTT is measured (default 3).
    ///
    /// It is also the lowest limit unless `min_concurrency_limit` is set; when that is
    /// set, measuring minRTT leaves the limit alone (Envoy's
    /// `minRTTCalcAdjustsConcurrency`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .min_concurrency(7)
    ///     .build()?;
    /// assert_eq!(config.min_concurrency(), 7);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_concurrency(&self) -> u32 {
        self.min_concurrency
    }

    /// The time between minRTT measurements, before jitter, as configured (`None`
    /// if not); unused when minRTT is fixed.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(31))
    ///     .build()?;
    /// assert_eq!(config.min_rtt_calc_interval(), Some(Duration::from_secs(31)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt_calc_interval(&self) -> Option<Duration> {
        self.min_rtt_calc_interval
    }

    /// The fixed minRTT, if it is not measured.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// assert_eq!(config.fixed_min_rtt(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn fixed_min_rtt(&self) -> Option<Duration> {
        match self.min_rtt {
            MinRttSource::Measured(_) => None,
            MinRttSource::Fixed(value) => Some(value),
        }
    }

    /// How many latencies a minRTT window aggregates (default 50).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .min_rtt_request_count(52)
    ///     .build()?;
    /// assert_eq!(config.min_rtt_request_count(), 52);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt_request_count(&self) -> u32 {
        self.min_rtt_request_count
    }

    /// The jitter as a fraction of the minRTT interval, in `[0, 1]` (default 0.15).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .jitter_percent(13.2)
    ///     .build()?;
    /// assert_eq!(config.jitter_fraction(), 0.132);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn jitter_fraction(&self) -> f64 {
        self.jitter_percent / 100.0
    }

    /// The buffer added to minRTT, as a fraction of it, in `[0, 1]` (default 0.25).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .min_rtt_buffer_percent(33.0)
    ///     .build()?;
    /// assert_eq!(config.min_rtt_buffer_fraction(), 0.33);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt_buffer_fraction(&self) -> f64 {
        self.min_rtt_buffer_percent / 100.0
    }

    /// The quantile that summarises a window's latencies, in `[0, 1]` (default 0.5).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .sample_aggregate_percentile(42.5)
    ///     .build()?;
    /// assert_eq!(config.sample_quantile(), 0.425);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn sample_quantile(&self) -> f64 {
        self.sample_aggregate_percentile / 100.0
    }

    /// Whether a minRTT window pins the limit to `min_concurrency`.
    fn probe_pins_limit(&self) -> bool {
        self.min_concurrency_limit.is_none()
    }

    fn measures_min_rtt(&self) -> bool {
        matches!(self.min_rtt, MinRttSource::Measured(_))
    }
}

/// Builds an [`EnvoyGradientConfig`]; every parameter is checked in
/// [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::EnvoyGradientConfig;
/// use tollgate::ConfigError;
///
/// let builder = EnvoyGradientConfig::builder()
///     .concurrency_update_interval(Duration::from_millis(100))
///     .min_rtt_calc_interval(Duration::from_secs(30));
/// assert!(builder.clone().build().is_ok());
/// assert_eq!(
///     builder.jitter_percent(f64::NAN).build().unwrap_err(),
///     ConfigError::NotANumber { parameter: "jitter_percent" }
/// );
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct EnvoyGradientConfigBuilder {
    concurrency_update_interval: Option<Duration>,
    max_concurrency_limit: u32,
    min_concurrency_limit: Option<u32>,
    min_rtt_calc_interval: Option<Duration>,
    fixed_min_rtt: Option<Duration>,
    min_rtt_request_count: u32,
    jitter_percent: f64,
    min_concurrency: u32,
    min_rtt_buffer_percent: f64,
    sample_aggregate_percentile: f64,
}

impl Default for EnvoyGradientConfigBuilder {
    /// Envoy's defaults, with neither interval set.
    fn default() -> Self {
        EnvoyGradientConfigBuilder {
            concurrency_update_interval: None,
            max_concurrency_limit: 1000,
            min_concurrency_limit: None,
            min_rtt_calc_interval: None,
            fixed_min_rtt: None,
            min_rtt_request_count: 50,
            jitter_percent: 15.0,
            min_concurrency: 3,
            min_rtt_buffer_percent: 25.0,
            sample_aggregate_percentile: 50.0,
        }
    }
}

impl EnvoyGradientConfigBuilder {
    /// How often the limit is recalculated from the window's latencies. Required,
    /// greater than zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder().fixed_min_rtt(Duration::from_millis(5));
    /// assert_eq!(
    ///     builder.clone().build().unwrap_err(),
    ///     ConfigError::Zero { parameter: "concurrency_update_interval" }
    /// );
    /// assert!(builder.concurrency_update_interval(Duration::from_millis(100)).build().is_ok());
    /// ```
    pub fn concurrency_update_interval(mut self, interval: Duration) -> Self {
        self.concurrency_update_interval = Some(interval);
        self
    }

    /// The highest limit (default 1000, greater than zero).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .max_concurrency_limit(200)
    ///     .build()?;
    /// assert_eq!(config.max_concurrency_limit(), 200);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_concurrency_limit(mut self, limit: u32) -> Self {
        self.max_concurrency_limit = limit;
        self
    }

    /// The lowest limit, set apart from `min_concurrency`; once set, measuring minRTT
    /// no longer changes the limit. Greater than zero, at most
    /// `max_concurrency_limit`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .min_concurrency_limit(6)
    ///     .build()?;
    /// assert_eq!(config.min_concurrency_limit(), 6);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_concurrency_limit(mut self, limit: u32) -> Self {
        self.min_concurrency_limit = Some(limit);
        self
    }

    /// Measure minRTT this often (plus jitter); at least 1 ms, as in Envoy. Ignored
    /// when [`fixed_min_rtt`](Self::fixed_min_rtt) is set, though still checked.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100));
    /// assert_eq!(
    ///     builder.clone().build().unwrap_err(),
    ///     ConfigError::Zero { parameter: "min_rtt_calc_interval" }
    /// );
    /// assert!(builder.min_rtt_calc_interval(Duration::from_secs(30)).build().is_ok());
    /// ```
    pub fn min_rtt_calc_interval(mut self, interval: Duration) -> Self {
        self.min_rtt_calc_interval = Some(interval);
        self
    }

    /// Use this minRTT instead of measuring it (Envoy's `fixed_value`); greater than
    /// zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// assert_eq!(config.fixed_min_rtt(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn fixed_min_rtt(mut self, min_rtt: Duration) -> Self {
        self.fixed_min_rtt = Some(min_rtt);
        self
    }

    /// How many latencies a minRTT window aggregates (default 50, greater than zero).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30));
    /// assert_eq!(
    ///     builder.min_rtt_request_count(0).build().unwrap_err(),
    ///     ConfigError::Zero { parameter: "min_rtt_request_count" }
    /// );
    /// ```
    pub fn min_rtt_request_count(mut self, count: u32) -> Self {
        self.min_rtt_request_count = count;
        self
    }

    /// Delay each minRTT measurement by a random part of this percentage of the
    /// interval (default 15, in `[0, 100]`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30));
    /// assert!(builder.clone().jitter_percent(0.0).build().is_ok());
    /// assert!(matches!(
    ///     builder.jitter_percent(150.0).build(),
    ///     Err(ConfigError::OutOfRange { parameter: "jitter_percent", .. })
    /// ));
    /// ```
    pub fn jitter_percent(mut self, percent: f64) -> Self {
        self.jitter_percent = percent;
        self
    }

    /// The limit while minRTT is measured, and the lowest limit unless
    /// [`min_concurrency_limit`](Self::min_concurrency_limit) is set (default 3,
    /// greater than zero, at most `max_concurrency_limit`).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .max_concurrency_limit(5);
    /// assert!(matches!(
    ///     builder.min_concurrency(6).build(),
    ///     Err(ConfigError::OutOfRange { parameter: "min_concurrency", .. })
    /// ));
    /// ```
    pub fn min_concurrency(mut self, concurrency: u32) -> Self {
        self.min_concurrency = concurrency;
        self
    }

    /// Add this percentage of minRTT to it before comparing (default 25, in
    /// `[0, 100]`): latencies up to `minRTT × (1 + buffer)` do not lower the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30));
    /// assert!(matches!(
    ///     builder.min_rtt_buffer_percent(-1.0).build(),
    ///     Err(ConfigError::Negative { parameter: "min_rtt_buffer_percent", .. })
    /// ));
    /// ```
    pub fn min_rtt_buffer_percent(mut self, percent: f64) -> Self {
        self.min_rtt_buffer_percent = percent;
        self
    }

    /// The percentile that summarises a window's latencies (default 50, in
    /// `[0, 100]` as Envoy's `type.v3.Percent` accepts; 0 reads the smallest bin).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30));
    /// assert_eq!(builder.clone().sample_aggregate_percentile(90.0).build()?.sample_quantile(), 0.9);
    /// assert!(matches!(
    ///     builder.sample_aggregate_percentile(100.5).build(),
    ///     Err(ConfigError::OutOfRange { parameter: "sample_aggregate_percentile", .. })
    /// ));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn sample_aggregate_percentile(mut self, percent: f64) -> Self {
        self.sample_aggregate_percentile = percent;
        self
    }

    /// Checks every parameter.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::Zero`] for a missing or zero `concurrency_update_interval`;
    ///   for neither `min_rtt_calc_interval` nor `fixed_min_rtt` given (or either
    ///   zero); for a zero `max_concurrency_limit`, `min_concurrency`,
    ///   `min_concurrency_limit` or `min_rtt_request_count`.
    /// - [`ConfigError::TooLong`] for a duration past `u64::MAX` nanoseconds.
    /// - [`ConfigError::OutOfRange`] for a `min_rtt_calc_interval` under 1 ms, a
    ///   percentage over 100, or `min_concurrency` / `min_concurrency_limit` above
    ///   `max_concurrency_limit`.
    /// - [`ConfigError::NotANumber`], [`ConfigError::Negative`] or
    ///   [`ConfigError::Infinite`] for such a percentage.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::EnvoyGradientConfig;
    /// # use tollgate::ConfigError;
    /// let error = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_micros(500))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(error, ConfigError::OutOfRange { parameter: "min_rtt_calc_interval", .. }));
    /// ```
    pub fn build(self) -> Result<EnvoyGradientConfig, ConfigError> {
        let concurrency_update_interval = positive_duration(
            "concurrency_update_interval",
            self.concurrency_update_interval,
        )?;
        if let Some(interval) = self.min_rtt_calc_interval {
            min_rtt_interval(interval)?;
        }
        let min_rtt = match self.fixed_min_rtt {
            Some(value) => MinRttSource::Fixed(positive_duration("fixed_min_rtt", Some(value))?),
            None => MinRttSource::Measured(min_rtt_interval(
                self.min_rtt_calc_interval.unwrap_or(Duration::ZERO),
            )?),
        };
        let max = positive_u32("max_concurrency_limit", self.max_concurrency_limit)?;
        let min_concurrency = positive_u32("min_concurrency", self.min_concurrency)?;
        at_most_max("min_concurrency", min_concurrency, max)?;
        let min_concurrency_limit = match self.min_concurrency_limit {
            Some(limit) => {
                let limit = positive_u32("min_concurrency_limit", limit)?;
                Some(at_most_max("min_concurrency_limit", limit, max)?)
            }
            None => None,
        };
        Ok(EnvoyGradientConfig {
            concurrency_update_interval,
            max_concurrency_limit: max,
            min_concurrency_limit,
            min_rtt,
            min_rtt_calc_interval: self.min_rtt_calc_interval,
            min_rtt_request_count: positive_u32(
                "min_rtt_request_count",
                self.min_rtt_request_count,
            )?,
            jitter_percent: percent("jitter_percent", self.jitter_percent)?,
            min_concurrency,
            min_rtt_buffer_percent: percent("min_rtt_buffer_percent", self.min_rtt_buffer_percent)?,
            sample_aggregate_percentile: percent(
                "sample_aggregate_percentile",
                self.sample_aggregate_percentile,
            )?,
        })
    }
}

/// A duration that is given, positive and within the clock's range.
fn positive_duration(
    parameter: &'static str,
    value: Option<Duration>,
) -> Result<Duration, ConfigError> {
    let value = value.unwrap_or(Duration::ZERO);
    positive_nanos(parameter, value)?;
    Ok(value)
}

/// A minRTT interval: at least 1 ms, as Envoy's configuration requires.
fn min_rtt_interval(interval: Duration) -> Result<Duration, ConfigError> {
    const PARAMETER: &str = "min_rtt_calc_interval";
    positive_duration(PARAMETER, Some(interval))?;
    if interval < MIN_RTT_INTERVAL_FLOOR {
        return Err(ConfigError::OutOfRange {
            parameter: PARAMETER,
            expected: "at least 1 ms",
        });
    }
    Ok(interval)
}

fn positive_u32(parameter: &'static str, value: u32) -> Result<u32, ConfigError> {
    non_zero(parameter, u64::from(value))?;
    Ok(value)
}

fn at_most_max(parameter: &'static str, value: u32, max: u32) -> Result<u32, ConfigError> {
    if value > max {
        return Err(ConfigError::OutOfRange {
            parameter,
            expected: "at most max_concurrency_limit",
        });
    }
    Ok(value)
}

/// A percentage in `[0, 100]`, the range of Envoy's `type.v3.Percent`.
fn percent(parameter: &'static str, value: f64) -> Result<f64, ConfigError> {
    if value.is_nan() {
        Err(ConfigError::NotANumber { parameter })
    } else if value < 0.0 {
        Err(ConfigError::Negative { parameter, value })
    } else if value.is_infinite() {
        Err(ConfigError::Infinite { parameter })
    } else if value > 100.0 {
        Err(ConfigError::OutOfRange {
            parameter,
            expected: "at most 100 (percent)",
        })
    } else {
        Ok(value)
    }
}

/// Where the jitter's random numbers come from.
enum Random {
    /// SplitMix64 from this state.
    Seeded(u64),
    /// The caller's source.
    Source(Box<dyn FnMut() -> u64 + Send>),
}

impl Random {
    fn next(&mut self) -> u64 {
        match self {
            Random::Seeded(state) => split_mix_64(state),
            Random::Source(source) => source(),
        }
    }
}

impl fmt::Debug for Random {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Random::Seeded(_) => f.write_str("Seeded"),
            Random::Source(_) => f.write_str("Source"),
        }
    }
}

/// Steele, Lea and Flood's SplitMix64: one step of the state, one output.
fn split_mix_64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `std::min<double>(a, b)`: `b` only if it is less, so a NaN `b` gives `a`.
fn cpp_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// `std::max<double>(a, b)`: `b` only if `a` is less, so a NaN `b` gives `a`.
fn cpp_max(a: f64, b: f64) -> f64 {
    if a < b { b } else { a }
}

/// Envoy's adaptive-concurrency gradient controller (see the [module](self) docs).
///
/// Created at a time on the enforcing limiter's clock, in a minRTT window unless minRTT
/// is fixed. Its two timers (the sample window's end and the next minRTT measurement)
/// fire when [`on_time`](LimitAlgorithm::on_time) or a sample's end reaches them;
/// [`next_deadline`](Self::next_deadline) says when that is.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
/// use tollgate::adaptive::{LimitAlgorithm, Sample};
/// use tollgate::time::Nanos;
///
/// let config = EnvoyGradientConfig::builder()
///     .concurrency_update_interval(Duration::from_millis(100))
///     .min_rtt_calc_interval(Duration::from_secs(30))
///     .min_rtt_request_count(5)
///     .build()?;
/// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 7);
///
/// // minRTT is measured first, at the minimum concurrency.
/// assert!(gradient.in_min_rtt_window());
/// assert_eq!(gradient.limit(), 3);
/// let ms = |n: u64| Duration::from_millis(n);
/// for _ in 0..5 {
///     gradient.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
/// }
/// // The median of five 5 ms latencies, as libcircllhist estimates it.
/// assert_eq!(gradient.min_rtt(), Some(Duration::from_micros(5_050)));
///
/// // Latencies near minRTT: the gradient is 1.25 (the buffer), the limit grows.
/// gradient.on_sample(Sample::new(Nanos::ZERO + ms(10), ms(5), 1, false));
/// assert_eq!(gradient.on_time(Nanos::ZERO + ms(200)), 5); // ⌊3 × 1.25 + √3.75⌋
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct EnvoyGradient {
    config: EnvoyGradientConfig,
    random: Random,
    limit: u32,
    /// The limit to return to after the minRTT window; `Some` exactly while one is open.
    deferred_limit: Option<u32>,
    /// Nanoseconds, as Envoy keeps it.
    min_rtt: Option<u64>,
    sample_rtt: Option<u64>,
    gradient: Option<f64>,
    samples: Histogram,
    consecutive_min_limit: u32,
    /// Latencies of requests that started before this are discarded.
    epoch: Nanos,
    now: Nanos,
    min_rtt_timer: Option<Nanos>,
    window_timer: Option<Nanos>,
}

impl EnvoyGradient {
    /// A controller created at `now`, jittering with random numbers seeded from the
    /// process's hash keys (so that controllers do not measure minRTT in step).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::adaptive::LimitAlgorithm;
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let gradient = EnvoyGradient::new(config, Nanos::ZERO);
    /// assert_eq!(gradient.limit(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(config: EnvoyGradientConfig, now: Nanos) -> EnvoyGradient {
        let seed = RandomState::new().hash_one(now);
        EnvoyGradient::with_seed(config, now, seed)
    }

    /// A controller created at `now` whose jitter is reproducible: SplitMix64 from
    /// `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let a = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 42);
    /// let b = EnvoyGradient::with_seed(config, Nanos::ZERO, 42);
    /// assert_eq!(a.next_deadline(), b.next_deadline());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_seed(config: EnvoyGradientConfig, now: Nanos, seed: u64) -> EnvoyGradient {
        EnvoyGradient::start(config, now, Random::Seeded(seed))
    }

    /// A controller created at `now` that draws its jitter from `random`, as Envoy's
    /// `Random::RandomGenerator::random()`: the next minRTT window opens
    /// `interval + (random() mod ⌈interval_ms × jitter⌉)` ms after the last one closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(123))
    ///     .min_rtt_calc_interval(Duration::from_secs(100))
    ///     .jitter_percent(10.0)
    ///     .min_rtt_request_count(1)
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_random(config, Nanos::ZERO, || 15_000);
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(5), 1, false));
    /// // 15 000 mod 10 000 = 5 000 ms of jitter.
    /// assert_eq!(
    ///     gradient.min_rtt_deadline(),
    ///     Some(Nanos::from_duration(Duration::from_millis(5 + 105_000)))
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_random(
        config: EnvoyGradientConfig,
        now: Nanos,
        random: impl FnMut() -> u64 + Send + 'static,
    ) -> EnvoyGradient {
        EnvoyGradient::start(config, now, Random::Source(Box::new(random)))
    }

    /// Envoy's constructor: into a minRTT window, or straight to the fixed minRTT;
    /// then the first sample window.
    fn start(config: EnvoyGradientConfig, now: Nanos, random: Random) -> EnvoyGradient {
        let floor = config.min_concurrency_limit();
        let fixed = config.fixed_min_rtt();
        let window = config.concurrency_update_interval;
        let mut gradient = EnvoyGradient {
            config,
            random,
            limit: floor,
            deferred_limit: None,
            min_rtt: None,
            sample_rtt: None,
            gradient: None,
            samples: Histogram::default(),
            consecutive_min_limit: 0,
            epoch: Nanos::ZERO,
            now,
            min_rtt_timer: None,
            window_timer: None,
        };
        match fixed {
            None => gradient.enter_min_rtt_window(),
            Some(min_rtt) => {
                gradient.min_rtt = Some(saturating_u64(min_rtt.as_nanos()));
                gradient.set_limit(floor);
            }
        }
        gradient.window_timer = Some(now + window);
        gradient
    }

    /// The configuration.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 1);
    /// assert_eq!(gradient.config(), &config);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn config(&self) -> &EnvoyGradientConfig {
        &self.config
    }

    /// Whether a minRTT window is open (the limit is then pinned to
    /// `min_concurrency`, unless `min_concurrency_limit` is set).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100));
    /// let measured = builder.clone().min_rtt_calc_interval(Duration::from_secs(30)).build()?;
    /// let fixed = builder.fixed_min_rtt(Duration::from_millis(50)).build()?;
    /// assert!(EnvoyGradient::with_seed(measured, Nanos::ZERO, 1).in_min_rtt_window());
    /// assert!(!EnvoyGradient::with_seed(fixed, Nanos::ZERO, 1).in_min_rtt_window());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn in_min_rtt_window(&self) -> bool {
        self.deferred_limit.is_some()
    }

    /// The ideal latency: the last measured minRTT (whole microseconds, as Envoy
    /// aggregates), or the fixed one; `None` before the first measurement.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.min_rtt(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(Duration::from_nanos)
    }

    /// The last sample window's aggregated latency, sampleRTT; `None` before one
    /// closed with latencies in it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(40), 1, false));
    /// assert_eq!(gradient.sample_rtt(), None);
    /// gradient.on_time(Nanos::from_duration(Duration::from_millis(100)));
    /// assert_eq!(gradient.sample_rtt(), Some(Duration::from_micros(40_500)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn sample_rtt(&self) -> Option<Duration> {
        self.sample_rtt.map(Duration::from_nanos)
    }

    /// The last gradient, in `[0.5, 2]`; `None` before the first recalculation.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// // Ten times minRTT: the gradient bottoms out at 0.5.
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(500), 1, false));
    /// gradient.on_time(Nanos::from_duration(Duration::from_secs(1)));
    /// assert_eq!(gradient.gradient(), Some(0.5));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn gradient(&self) -> Option<f64> {
        self.gradient
    }

    /// When the current sample window closes, if one is open (none during a minRTT
    /// window).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(123))
    ///     .min_rtt_calc_interval(Duration::from_secs(45))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.window_deadline(), Some(Nanos::new(123_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn window_deadline(&self) -> Option<Nanos> {
        self.window_timer
    }

    /// When the next minRTT window opens, if one is scheduled.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(45))
    ///     .build()?;
    /// // In the first minRTT window, the next one is not scheduled yet.
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.min_rtt_deadline(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt_deadline(&self) -> Option<Nanos> {
        self.min_rtt_timer
    }

    /// The earlier of the two deadlines: when [`on_time`](LimitAlgorithm::on_time)
    /// next has something to do.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(5))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.next_deadline(), Some(Nanos::new(100_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn next_deadline(&self) -> Option<Nanos> {
        match (self.window_timer, self.min_rtt_timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lets time reach `now` (never backwards) and fires the timers due by then, the
    /// earlier first (the sample window first on a tie), each at most once: a timer
    /// rearmed for `now` itself, as a saturated deadline can be, waits for the next
    /// call instead of looping.
    fn advance(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        let now = self.now;
        let (mut window_fired, mut probe_fired) = (false, false);
        loop {
            let window = self.window_timer.filter(|&at| !window_fired && at <= now);
            let probe = self.min_rtt_timer.filter(|&at| !probe_fired && at <= now);
            match (window, probe) {
                (None, None) => break,
                (Some(w), Some(p)) if p < w => {
                    probe_fired = true;
                    self.min_rtt_timer_fired();
                }
                (Some(_), _) => {
                    window_fired = true;
                    self.window_timer_fired();
                }
                (None, Some(_)) => {
                    probe_fired = true;
                    self.min_rtt_timer_fired();
                }
            }
        }
    }

    /// Envoy's `min_rtt_calc_timer_` callback.
    fn min_rtt_timer_fired(&mut self) {
        self.min_rtt_timer = None;
        self.enter_min_rtt_window();
    }

    /// Envoy's `sample_reset_timer_` callback: during a minRTT window it lapses, to be
    /// rearmed when the window closes.
    fn window_timer_fired(&mut self) {
        if self.in_min_rtt_window() {
            self.window_timer = None;
            return;
        }
        self.reset_sample_window();
        self.window_timer = Some(self.now + self.config.concurrency_update_interval);
    }

    /// Envoy's `enterMinRTTSamplingWindow`.
    fn enter_min_rtt_window(&mut self) {
        if self.in_min_rtt_window() {
            return;
        }
        self.deferred_limit = Some(self.limit);
        if self.config.probe_pins_limit() {
            self.set_limit(self.config.min_concurrency);
        }
        // Latencies from before the window may not represent minRTT.
        self.samples.clear();
        self.epoch = self.now;
    }

    /// Envoy's `updateMinRTT`: closes the minRTT window once it has enough latencies.
    fn update_min_rtt(&mut self) {
        if !self.config.measures_min_rtt() {
            return;
        }
        let Some(deferred) = self.deferred_limit else {
            return;
        };
        if self.samples.count() < u64::from(self.config.min_rtt_request_count) {
            return;
        }
        self.min_rtt = Some(self.aggregate_and_clear());
        if self.config.probe_pins_limit() {
            self.set_limit(deferred);
        }
        self.deferred_limit = None;
        if let MinRttSource::Measured(interval) = self.config.min_rtt {
            let delay = self.jittered(interval);
            self.min_rtt_timer = Some(self.now + delay);
        }
        self.window_timer = Some(self.now + self.config.concurrency_update_interval);
    }

    /// Envoy's `applyJitter`, in whole milliseconds as Envoy draws it.
    fn jittered(&mut self, interval: Duration) -> Duration {
        let jitter = self.config.jitter_fraction();
        if jitter == 0.0 {
            return interval;
        }
        let range_ms = (interval.as_millis() as f64 * jitter).ceil() as u64;
        if range_ms == 0 {
            return interval;
        }
        interval.saturating_add(Duration::from_millis(self.random.next() % range_ms))
    }

    /// Envoy's `resetSampleWindow`.
    fn reset_sample_window(&mut self) {
        if self.samples.count() == 0 {
            return;
        }
        self.sample_rtt = Some(self.aggregate_and_clear());
        let limit = self.new_limit();
        self.set_limit(limit);
    }

    /// Envoy's `processLatencySamplesAndClear`: the percentile in whole microseconds,
    /// returned in nanoseconds.
    fn aggregate_and_clear(&mut self) -> u64 {
        let micros = self.samples.quantile(self.config.sample_quantile()) as u64;
        self.samples.clear();
        micros.saturating_mul(1_000)
    }

    /// Envoy's `calculateNewLimit`.
    fn new_limit(&mut self) -> u32 {
        let min_rtt = self.min_rtt.unwrap_or(0) as f64;
        let sample_rtt = self.sample_rtt.unwrap_or(0) as f64;
        let buffered = min_rtt + min_rtt * self.config.min_rtt_buffer_fraction();
        // A zero sampleRTT gives +inf, or NaN over a zero minRTT: both clamp to 2.0.
        let gradient = cpp_max(0.5, cpp_min(2.0, buffered / sample_rtt));
        self.gradient = Some(gradient);
        let limit = f64::from(self.limit) * gradient;
        let headroom = limit.sqrt();
        let new_limit = (limit + headroom) as u64;
        let max = u64::from(self.config.max_concurrency_limit);
        // At most max_concurrency_limit, a u32.
        let capped = new_limit.min(max) as u32;
        capped.max(self.config.min_concurrency_limit())
    }

    /// Envoy's `updateConcurrencyLimit`, with its count of windows at the minimum.
    fn set_limit(&mut self, limit: u32) {
        let old = self.limit;
        self.limit = limit;
        let floor = self.config.min_concurrency_limit();
        if !self.in_min_rtt_window() && old == floor && limit == floor {
            self.consecutive_min_limit = self.consecutive_min_limit.saturating_add(1);
        } else {
            self.consecutive_min_limit = 0;
        }
        // Stuck at the minimum: minRTT is probably stale, measure it now.
        if self.consecutive_min_limit >= MIN_LIMIT_WINDOWS_BEFORE_REMEASURE
            && self.config.measures_min_rtt()
        {
            self.min_rtt_timer = Some(self.now);
        }
    }

    /// Envoy's `recordLatencySample` for a request that completed.
    fn record(&mut self, sample: &Sample) {
        if sample.start < self.epoch {
            // Started before this minRTT window: discarded.
            return;
        }
        let micros = saturating_u64(sample.rtt.as_micros());
        self.samples.insert(micros);
        self.update_min_rtt();
    }
}

impl LimitAlgorithm for EnvoyGradient {
    fn limit(&self) -> u64 {
        u64::from(self.limit)
    }

    /// Fires the timers due by the sample's end, then records its latency, unless it
    /// was dropped (Envoy's `cancelLatencySample`: no latency to learn from).
    fn on_sample(&mut self, sample: Sample) -> u64 {
        self.advance(sample.end());
        if !sample.dropped {
            self.record(&sample);
        }
        self.limit()
    }

    fn on_time(&mut self, now: Nanos) -> u64 {
        self.advance(now);
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    //! Ports of Envoy's
    //! `test/extensions/filters/http/adaptive_concurrency/controller/gradient_controller_test.cc`
    //! with the same parameters and latencies. Envoy's fixture maps as follows:
    //! `makeController` creates the controller and lets 42 simulated hours pass;
    //! `sampleLatency(l)` records a request sent `l` before now; `advanceTimeAndRun(d)`
    //! lets time pass and fires due timers (here [`LimitAlgorithm::on_time`]);
    //! `tryForward` admits while fewer requests are outstanding than the limit, as
    //! Envoy's `forwardingDecision` does; the stats gauges become getters
    //! (`min_rtt_msecs` is `min_rtt()` in whole ms, `min_rtt_calculation_active` is
    //! `in_min_rtt_window()`). Envoy's `NiceMock` random generator returns 0.

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// The YAML every controller test starts from: p50, a 100 ms update interval,
    /// no jitter, a 30 s minRTT interval and Envoy's other defaults.
    fn yaml() -> EnvoyGradientConfigBuilder {
        EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(50.0)
            .concurrency_update_interval(ms(100))
            .jitter_percent(0.0)
            .min_rtt_calc_interval(Duration::from_secs(30))
    }

    /// Envoy's `GradientControllerTest` fixture.
    struct Fixture {
        controller: EnvoyGradient,
        now: Nanos,
        outstanding: u64,
    }

    impl Fixture {
        /// `makeController`: created at time zero, then 42 hours pass.
        fn new(config: EnvoyGradientConfig) -> Fixture {
            Fixture::with_random(config, || 0)
        }

        fn with_random(
            config: EnvoyGradientConfig,
            random: impl FnMut() -> u64 + Send + 'static,
        ) -> Fixture {
            let mut fixture = Fixture {
                controller: EnvoyGradient::with_random(config, Nanos::ZERO, random),
                now: Nanos::ZERO,
                outstanding: 0,
            };
            fixture.advance(Duration::from_secs(42 * 3600));
            fixture
        }

        fn limit(&self) -> u64 {
            self.controller.limit()
        }

        /// `tryForward(controller, expect_forward_response)`.
        fn try_forward(&mut self, expect_forward: bool) {
            let forward = self.outstanding < self.limit();
            assert_eq!(forward, expect_forward, "outstanding {}", self.outstanding);
            if forward {
                self.outstanding += 1;
            }
        }

        /// `sampleLatency(controller, latency)`.
        fn sample_latency(&mut self, latency: Duration) {
            self.outstanding = self.outstanding.saturating_sub(1);
            self.controller
                .on_sample(Sample::new(self.now - latency, latency, 1, false));
        }

        /// `cancelLatencySample()`.
        fn cancel(&mut self) {
            self.outstanding = self.outstanding.saturating_sub(1);
            self.controller
                .on_sample(Sample::new(self.now, Duration::ZERO, 1, true));
        }

        /// `advanceTimeAndRun(d)`.
        fn advance(&mut self, d: Duration) {
            self.now = self.now + d;
            self.controller.on_time(self.now);
        }

        /// `advancePastMinRTTStage`: `request_count + 1` forwarded and sampled.
        fn advance_past_min_rtt_stage(&mut self, latency: Duration) {
            for _ in 0..=self.controller.config().min_rtt_request_count() {
                self.try_forward(true);
                self.sample_latency(latency);
            }
        }

        /// `driveSampleRTTWindows`: 5 samples, then 101 ms, `windows` times.
        fn drive_sample_rtt_windows(&mut self, latency: Duration, windows: usize) {
            for _ in 0..windows {
                for _ in 0..5 {
                    self.try_forward(true);
                    self.sample_latency(latency);
                }
                self.advance(ms(101));
            }
        }

        /// `verifyMinRTTValue`: the `min_rtt_msecs` gauge.
        fn min_rtt_msecs(&self) -> u128 {
            self.controller.min_rtt().map_or(0, |d| d.as_millis())
        }

        fn min_rtt_active(&self) -> bool {
            self.controller.in_min_rtt_window()
        }
    }

    // GradientControllerConfigTest.BasicTest
    #[test]
    fn config_basic() {
        let config = EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(42.5)
            .max_concurrency_limit(1337)
            .concurrency_update_interval(ms(123))
            .min_concurrency_limit(6)
            .jitter_percent(13.2)
            .min_rtt_calc_interval(Duration::from_secs(31))
            .min_rtt_request_count(52)
            .min_concurrency(8)
            .fixed_min_rtt(Duration::from_secs(42))
            .build()
            .unwrap();
        assert_eq!(
            config.min_rtt_calc_interval(),
            Some(Duration::from_secs(31))
        );
        assert_eq!(config.concurrency_update_interval(), ms(123));
        assert_eq!(config.max_concurrency_limit(), 1337);
        assert_eq!(config.min_rtt_request_count(), 52);
        assert_eq!(config.sample_quantile(), 0.425);
        assert_eq!(config.jitter_fraction(), 0.132);
        assert_eq!(config.min_concurrency(), 8);
        assert_eq!(config.min_concurrency_limit(), 6);
        assert_eq!(config.fixed_min_rtt(), Some(Duration::from_secs(42)));
    }

    // GradientControllerConfigTest.MissingMinRTTValues: neither an interval nor a
    // fixed value.
    #[test]
    fn config_missing_min_rtt_values() {
        let error = EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(42.5)
            .max_concurrency_limit(1337)
            .concurrency_update_interval(ms(123))
            .jitter_percent(13.2)
            .min_rtt_request_count(52)
            .min_concurrency(8)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            ConfigError::Zero {
                parameter: "min_rtt_calc_interval"
            }
        );
    }

    // GradientControllerConfigTest.Clamping: Envoy clamps runtime overrides of the
    // percentages into [0, 100]; its proto validation refuses them in the
    // configuration, which is what a builder is. The same values are refused here.
    #[test]
    fn config_percentages_outside_0_to_100_are_refused() {
        let base = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(123))
            .min_rtt_calc_interval(Duration::from_secs(31));
        assert!(matches!(
            base.clone().sample_aggregate_percentile(150.0).build(),
            Err(ConfigError::OutOfRange {
                parameter: "sample_aggregate_percentile",
                ..
            })
        ));
        assert_eq!(
            base.clone().sample_aggregate_percentile(-50.5).build(),
            Err(ConfigError::Negative {
                parameter: "sample_aggregate_percentile",
                value: -50.5
            })
        );
        assert!(matches!(
            base.clone().jitter_percent(150.0).build(),
            Err(ConfigError::OutOfRange {
                parameter: "jitter_percent",
                ..
            })
        ));
        assert_eq!(
            base.clone().jitter_percent(-50.5).build(),
            Err(ConfigError::Negative {
                parameter: "jitter_percent",
                value: -50.5
            })
        );
        // The ends of the range are accepted, and read back as Envoy clamps them.
        let ends = base
            .sample_aggregate_percentile(100.0)
            .jitter_percent(0.0)
            .build()
            .unwrap();
        assert_eq!(ends.sample_quantile(), 1.0);
        assert_eq!(ends.jitter_fraction(), 0.0);
    }

    // GradientControllerConfigTest.DefaultValuesTest
    #[test]
    fn config_default_values() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(123))
            .min_rtt_calc_interval(Duration::from_secs(31))
            .build()
            .unwrap();
        assert_eq!(
            config.min_rtt_calc_interval(),
            Some(Duration::from_secs(31))
        );
        assert_eq!(config.concurrency_update_interval(), ms(123));
        assert_eq!(config.max_concurrency_limit(), 1000);
        assert_eq!(config.min_rtt_request_count(), 50);
        assert_eq!(config.sample_quantile(), 0.5);
        assert_eq!(config.jitter_fraction(), 0.15);
        assert_eq!(config.min_concurrency(), 3);
        assert_eq!(config.min_concurrency_limit(), 3);
        assert_eq!(config.min_rtt_buffer_fraction(), 0.25);
        assert_eq!(config.fixed_min_rtt(), None);
    }

    // GradientControllerConfigTest.MinConcurrencyLimitFallsBackToMinRTTCalcConcurrency
    // (without the runtime override).
    #[test]
    fn config_min_concurrency_limit_falls_back_to_min_concurrency() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(123))
            .min_rtt_calc_interval(Duration::from_secs(31))
            .min_concurrency(8)
            .build()
            .unwrap();
        assert_eq!(config.min_concurrency_limit(), 8);
        assert!(config.probe_pins_limit());
    }

    // GradientControllerConfigTest.MinConcurrencyLimitCanBeOverriddenSeparately
    // (without the runtime override).
    #[test]
    fn config_min_concurrency_limit_set_separately() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(123))
            .min_concurrency_limit(4)
            .min_rtt_calc_interval(Duration::from_secs(31))
            .min_concurrency(8)
            .build()
            .unwrap();
        assert_eq!(config.min_concurrency_limit(), 4);
        assert_eq!(config.min_concurrency(), 8);
        assert!(!config.probe_pins_limit());
    }

    // GradientControllerTest.MinRTTEpoch: requests started in the previous minRTT
    // window are not sampled in the next.
    #[test]
    fn min_rtt_epoch() {
        let min_concurrency = 2;
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(25)
                .min_concurrency(min_concurrency)
                .min_rtt_buffer_percent(0.0)
                .build()
                .unwrap(),
        );
        let min_rtt = ms(1350);
        c.advance(min_rtt);

        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), u64::from(min_concurrency));
        c.advance_past_min_rtt_stage(ms(1350));
        assert!(!c.min_rtt_active());
        assert_eq!(c.min_rtt_msecs(), 1350);
        // 25 × 1 350 000 µs: the 13th of 25 in [1.3e6, 1.4e6).
        assert_eq!(c.controller.min_rtt(), Some(ms(1350)));

        // Advance time to just before the end of the epoch and inflate the limit.
        let mut last_limit = c.limit();
        for _ in 0..29 {
            c.try_forward(true);
            c.advance(Duration::from_secs(1));
            c.sample_latency(min_rtt);
            c.advance(Duration::ZERO);
            assert!(c.limit() > last_limit);
            last_limit = c.limit();
        }

        // Requests sent now are sampled only in the next minRTT window.
        let mut active = 0;
        while c.outstanding < c.limit() {
            c.try_forward(true);
            active += 1;
        }

        // Into the next minRTT window while they are outstanding.
        c.advance(Duration::from_secs(5));
        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), u64::from(min_concurrency));

        // More than enough to end the window (> 25), but all from the older epoch.
        assert!(active > 25, "{active}");
        for _ in 0..active {
            c.sample_latency(Duration::from_secs(5 * 60));
        }
        assert!(c.min_rtt_active());
    }

    // GradientControllerTest.MinRTTLogicTest
    #[test]
    fn min_rtt_logic() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(50)
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        let min_rtt = ms(13);

        // Measuring minRTT from creation, at the minimum concurrency.
        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), 7);
        for _ in 0..7 {
            c.try_forward(true);
        }
        c.try_forward(false);
        c.try_forward(false);
        c.advance(min_rtt);
        for _ in 0..7 {
            c.sample_latency(min_rtt);
        }

        // 43 more requests complete the minRTT calculation.
        for _ in 0..43 {
            assert_eq!(c.limit(), 7);
            c.try_forward(true);
            c.sample_latency(min_rtt);
        }

        assert!(!c.min_rtt_active());
        assert_eq!(c.min_rtt_msecs(), 13);
        // 13 000 + 25/51 × 1 000, truncated to whole µs.
        assert_eq!(c.controller.min_rtt(), Some(us(13_490)));
    }

    // GradientControllerTest.ExplicitMinConcurrencyLimitDisablesMinRTTProbeClamp
    #[test]
    fn explicit_min_concurrency_limit_disables_min_rtt_probe_clamp() {
        let mut c = Fixture::new(
            yaml()
                .max_concurrency_limit(100)
                .min_concurrency_limit(2)
                .min_rtt_request_count(5)
                .min_concurrency(7)
                .build()
                .unwrap(),
        );

        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), 2);
        c.advance_past_min_rtt_stage(ms(13));
        assert!(!c.min_rtt_active());

        c.drive_sample_rtt_windows(ms(5), 3);
        let limit_before_probe = c.limit();
        assert!(limit_before_probe > 2);
        // Gradient 2.0 each time: 2 → 6 → 15 → 35.
        assert_eq!(limit_before_probe, 35);

        c.advance(Duration::from_secs(31));
        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), limit_before_probe);

        c.advance(Duration::from_secs(1));
        c.advance_past_min_rtt_stage(ms(13));
        assert!(!c.min_rtt_active());
        assert_eq!(c.limit(), limit_before_probe);
    }

    // GradientControllerTest.MinRTTProbePinsConcurrencyWhenMinimumLimitUsesLegacyFallback
    #[test]
    fn min_rtt_probe_pins_concurrency_when_minimum_limit_uses_legacy_fallback() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(5)
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        c.advance_past_min_rtt_stage(ms(5));

        c.drive_sample_rtt_windows(ms(2), 3);
        assert!(c.limit() > 7);

        c.advance(Duration::from_secs(31));
        assert!(c.min_rtt_active());
        assert_eq!(c.limit(), 7);
    }

    // GradientControllerTest.FixedMinRTT
    #[test]
    fn fixed_min_rtt() {
        let mut c = Fixture::new(
            EnvoyGradientConfig::builder()
                .sample_aggregate_percentile(50.0)
                .concurrency_update_interval(ms(100))
                .fixed_min_rtt(ms(50))
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        let min_rtt = ms(50);

        assert!(!c.min_rtt_active());
        // No latency sampled yet: the limit is the minimum concurrency.
        assert_eq!(c.limit(), 7);
        for _ in 0..7 {
            c.try_forward(true);
        }
        c.try_forward(false);
        c.try_forward(false);
        c.advance(min_rtt);
        for _ in 0..7 {
            assert_eq!(c.limit(), 7);
            c.sample_latency(min_rtt);
        }

        // minRTT has not changed.
        c.advance(ms(101) - min_rtt);
        assert!(!c.min_rtt_active());
        assert_eq!(c.min_rtt_msecs(), 50);
        // sampleRTT 50 500 µs against 62.5 ms buffered: 7 × 1.2376 + √8.663 = 11.6.
        assert_eq!(c.controller.sample_rtt(), Some(us(50_500)));
        assert_eq!(c.limit(), 11);
    }

    // GradientControllerTest.FixedMinRTTChangeConcurrency
    #[test]
    fn fixed_min_rtt_change_concurrency() {
        let mut c = Fixture::new(
            EnvoyGradientConfig::builder()
                .sample_aggregate_percentile(50.0)
                .concurrency_update_interval(ms(100))
                .fixed_min_rtt(ms(50))
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        let min_rtt = ms(50);
        let mut current = 7;

        // Lower latency: the limit rises.
        assert!(!c.min_rtt_active());
        for _ in 0..current {
            c.try_forward(true);
        }
        c.advance(min_rtt);
        for _ in 0..current {
            c.sample_latency(min_rtt - ms(10));
        }
        c.advance(ms(101) - min_rtt);
        assert!(c.limit() > current);
        assert_eq!(c.limit(), 14, "7 × 62.5/40.5 + √10.8");
        current = c.limit();
        assert!(!c.min_rtt_active());
        assert_eq!(c.min_rtt_msecs(), 50);

        // Higher latency: the limit falls.
        for _ in 0..current {
            c.try_forward(true);
        }
        c.advance(min_rtt);
        for _ in 0..current {
            c.sample_latency(min_rtt + ms(50));
        }
        c.advance(ms(101) - min_rtt);
        assert!(c.limit() < current);
        assert_eq!(c.limit(), 11, "14 × 62.5/104.666 + √8.36");
        assert!(!c.min_rtt_active());
        assert_eq!(c.min_rtt_msecs(), 50);
    }

    // GradientControllerTest.CancelLatencySample
    #[test]
    fn cancel_latency_sample() {
        let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
        for i in 1..=5 {
            c.try_forward(true);
            c.sample_latency(ms(i));
        }
        assert_eq!(c.min_rtt_msecs(), 3);
        assert_eq!(c.controller.min_rtt(), Some(us(3_050)));
    }

    // GradientControllerTest.SamplePercentileProcessTest: a cancelled (dropped)
    // request frees its place and teaches nothing.
    #[test]
    fn sample_percentile_process() {
        let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
        c.try_forward(true);
        c.try_forward(true);
        c.try_forward(true);
        c.try_forward(false);
        c.cancel();
        c.try_forward(true);
        c.try_forward(false);
        assert!(c.min_rtt_active(), "a dropped request is no latency sample");
        assert_eq!(c.controller.samples.count(), 0);
    }

    // GradientControllerTest.MinRTTBufferTest
    #[test]
    fn min_rtt_buffer() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(5)
                .min_rtt_buffer_percent(50.0)
                .build()
                .unwrap(),
        );
        assert_eq!(c.limit(), 3);

        // A minRTT of 5 ms.
        c.advance_past_min_rtt_stage(ms(5));
        assert_eq!(c.min_rtt_msecs(), 5);

        // 6 ms is above minRTT, but within the 50% buffer: the limit keeps rising.
        let mut limits = Vec::new();
        for _ in 0..10 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(6));
            }
            c.advance(ms(101));
            assert!(c.limit() > last);
            limits.push(c.limit());
        }
        assert_eq!(limits, [5, 8, 13, 20, 30, 43, 61, 85, 116, 157]);
    }

    // GradientControllerTest.ConcurrencyLimitBehaviorTestBasic
    #[test]
    fn concurrency_limit_behavior_basic() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(5)
                .min_rtt_buffer_percent(10.0)
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        assert_eq!(c.limit(), 7);

        c.advance_past_min_rtt_stage(ms(5));
        assert_eq!(c.min_rtt_msecs(), 5);

        // The headroom alone raises the limit, by at most the gradient's 2.
        c.advance(ms(101));
        assert!(c.limit() >= 7);
        assert!(c.limit() as f64 / 7.0 <= 2.0);
        assert_eq!(c.limit(), 10, "7 × 1.1 + √7.7");

        // Latency below minRTT: the limit grows.
        let mut limits = Vec::new();
        for _ in 0..10 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(4));
            }
            c.advance(ms(101));
            assert!(last <= c.limit());
            assert!(last as f64 / c.limit() as f64 >= 0.5);
            limits.push(c.limit());
        }
        assert_eq!(limits, [17, 28, 44, 68, 102, 151, 221, 320, 459, 654]);

        // Latency above minRTT and its buffer: the limit shrinks.
        limits.clear();
        for _ in 0..10 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(6));
            }
            c.advance(ms(101));
            assert!(c.limit() < last);
            assert!(c.limit() >= 7);
            limits.push(c.limit());
        }
        assert_eq!(limits, [624, 596, 570, 546, 523, 502, 482, 463, 445, 428]);
    }

    // GradientControllerTest.MinRTTReturnToPreviousLimit
    #[test]
    fn min_rtt_return_to_previous_limit() {
        let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
        assert_eq!(c.limit(), 3);

        c.advance_past_min_rtt_stage(ms(5));
        c.advance(Duration::from_secs(1));

        for _ in 0..5 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(4));
            }
            c.advance(ms(101));
            assert!(c.limit() > last);
        }
        let limit = c.limit();

        // The next minRTT window pins the limit...
        c.advance(Duration::from_secs(31));
        assert_eq!(c.limit(), 3);
        c.advance(Duration::from_secs(1));
        for _ in 0..5 {
            assert_eq!(c.limit(), 3);
            c.try_forward(true);
            c.sample_latency(ms(13));
        }
        // ...and its end restores it.
        assert_eq!(c.limit(), limit);
    }

    // GradientControllerTest.MinRTTRescheduleTest
    #[test]
    fn min_rtt_reschedule() {
        let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
        assert_eq!(c.limit(), 3);

        c.advance_past_min_rtt_stage(ms(5));
        c.advance(Duration::from_secs(1));

        for _ in 0..5 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(4));
            }
            c.advance(ms(101));
            assert!(c.limit() > last);
        }

        c.advance(Duration::from_secs(31));
        assert_eq!(c.limit(), 3);

        // No sample window closes during the minRTT window.
        c.advance(ms(101));
        assert_eq!(c.limit(), 3);
        assert_eq!(c.controller.window_deadline(), None);
    }

    // GradientControllerTest.NoSamplesTest
    #[test]
    fn no_samples() {
        let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
        assert_eq!(c.limit(), 3);

        c.advance_past_min_rtt_stage(ms(5));

        for _ in 0..5 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(4));
            }
            c.advance(ms(101));
            assert!(c.limit() > last);
        }

        // Without samples the limit stays.
        for _ in 0..5 {
            let old = c.limit();
            c.advance(ms(101));
            assert_eq!(c.limit(), old);
        }
    }

    /// The two Envoy timer tests use a mock dispatcher whose timers never fire; here
    /// the deadlines are read instead, and time advances in 5 ms steps, well short of
    /// either.
    fn check_timers(jitter_percent: f64, interval: Duration, random: u64, expected: Duration) {
        let config = EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(50.0)
            .concurrency_update_interval(ms(123))
            .jitter_percent(jitter_percent)
            .min_rtt_calc_interval(interval)
            .min_rtt_request_count(5)
            .build()
            .unwrap();
        let mut controller = EnvoyGradient::with_random(config, Nanos::ZERO, move || random);
        // The sample timer starts at creation.
        assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(123)));
        assert_eq!(controller.min_rtt_deadline(), None);

        let mut now = Nanos::ZERO;
        for i in 1..=6u64 {
            now = now + ms(5);
            controller.on_sample(Sample::new(now - ms(5), ms(5), 1, false));
            if i == 5 {
                // minRTT set: the next measurement is scheduled, and the sample
                // timer restarts.
                assert_eq!(controller.min_rtt_deadline(), Some(now + expected));
                assert_eq!(controller.window_deadline(), Some(now + ms(123)));
            }
        }
        assert_eq!(
            controller.min_rtt_deadline(),
            Some(Nanos::ZERO + ms(25) + expected)
        );
    }

    // GradientControllerTest.TimerAccuracyTest: a random value past 10% of the
    // interval wraps within it: 15 000 mod 10 000.
    #[test]
    fn timer_accuracy() {
        check_timers(10.0, Duration::from_secs(100), 15_000, ms(105_000));
    }

    // GradientControllerTest.TimerAccuracyTestNoJitter
    #[test]
    fn timer_accuracy_no_jitter() {
        check_timers(0.0, Duration::from_secs(45), 15_000, ms(45_000));
    }

    // GradientControllerTest.ConsecutiveMinConcurrencyReset: 5 windows in a row at
    // the minimum trigger a minRTT measurement.
    #[test]
    fn consecutive_min_concurrency_reset() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_calc_interval(Duration::from_secs(3600))
                .min_rtt_request_count(5)
                .min_rtt_buffer_percent(0.0)
                .min_concurrency(7)
                .build()
                .unwrap(),
        );
        assert_eq!(c.limit(), 7);

        c.advance_past_min_rtt_stage(ms(5));
        assert_eq!(c.min_rtt_msecs(), 5);

        c.advance(ms(101));
        assert!(c.limit() >= 7);
        assert!(c.limit() as f64 / 7.0 <= 2.0);

        // Latency twice minRTT: the limit falls to the minimum and stays there.
        let elevated = ms(10);
        for _ in 0..5 {
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(elevated);
            }
            c.advance(ms(101));
        }
        assert_eq!(c.limit(), 7);
        assert!(!c.min_rtt_active(), "4 windows at the minimum so far");

        // The 5th starts a minRTT measurement at once; with the new minRTT the limit
        // grows again.
        let mut limits = Vec::new();
        for round in 0..10 {
            let last = c.limit();
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(elevated);
            }
            c.advance(ms(101));
            if round == 0 {
                assert!(c.min_rtt_active());
            }
            assert!(c.limit() >= last);
            limits.push(c.limit());
        }
        assert_eq!(c.min_rtt_msecs(), 10);
        assert_eq!(limits, [7, 7, 7, 9, 12, 15, 18, 22, 26, 31]);
    }

    // GradientControllerTest.MultiThreadSampleInteractions, without the threads
    // (the state machine is `&mut self`; the enforcer serialises): the 5th sample
    // ends the minRTT window, and a 6th does not start another.
    #[test]
    fn sample_after_the_min_rtt_update() {
        let mut c = Fixture::new(
            yaml()
                .min_rtt_calc_interval(Duration::from_secs(3600))
                .min_rtt_request_count(5)
                .min_rtt_buffer_percent(0.0)
                .min_concurrency(100)
                .build()
                .unwrap(),
        );
        for _ in 0..4 {
            c.try_forward(true);
            c.sample_latency(us(1337));
        }
        assert!(c.min_rtt_active());
        c.try_forward(true);
        c.sample_latency(us(1337));
        assert!(!c.min_rtt_active());
        c.try_forward(true);
        c.sample_latency(us(1337));
        assert!(!c.min_rtt_active());
        assert_eq!(c.controller.min_rtt(), Some(us(1_350)), "1 300 + 3/6 × 100");
    }

    // Beyond Envoy's tests: the builder's checks.

    #[test]
    fn intervals_are_checked() {
        let fixed = || EnvoyGradientConfig::builder().fixed_min_rtt(ms(5));
        let zero = |parameter| Err(ConfigError::Zero { parameter });
        assert_eq!(fixed().build(), zero("concurrency_update_interval"));
        assert_eq!(
            fixed().concurrency_update_interval(Duration::ZERO).build(),
            zero("concurrency_update_interval")
        );
        assert!(matches!(
            fixed().concurrency_update_interval(Duration::MAX).build(),
            Err(ConfigError::TooLong {
                parameter: "concurrency_update_interval",
                ..
            })
        ));
        let measured = |interval| {
            EnvoyGradientConfig::builder()
                .concurrency_update_interval(ms(100))
                .min_rtt_calc_interval(interval)
                .build()
        };
        assert_eq!(measured(Duration::ZERO), zero("min_rtt_calc_interval"));
        assert_eq!(
            measured(us(999)),
            Err(ConfigError::OutOfRange {
                parameter: "min_rtt_calc_interval",
                expected: "at least 1 ms"
            })
        );
        assert!(measured(ms(1)).is_ok());
        assert!(matches!(
            measured(Duration::MAX),
            Err(ConfigError::TooLong {
                parameter: "min_rtt_calc_interval",
                ..
            })
        ));
        let with_fixed = |value| {
            EnvoyGradientConfig::builder()
                .concurrency_update_interval(ms(100))
                .fixed_min_rtt(value)
                .build()
        };
        assert_eq!(with_fixed(Duration::ZERO), zero("fixed_min_rtt"));
        assert!(matches!(
            with_fixed(Duration::MAX),
            Err(ConfigError::TooLong {
                parameter: "fixed_min_rtt",
                ..
            })
        ));
        // An interval given beside a fixed minRTT is unused, but still checked.
        assert_eq!(
            fixed()
                .concurrency_update_interval(ms(100))
                .min_rtt_calc_interval(Duration::ZERO)
                .build(),
            zero("min_rtt_calc_interval")
        );
    }

    #[test]
    fn counts_are_checked() {
        let base = || {
            EnvoyGradientConfig::builder()
                .concurrency_update_interval(ms(100))
                .min_rtt_calc_interval(Duration::from_secs(30))
        };
        let zero = |parameter| Err(ConfigError::Zero { parameter });
        assert_eq!(
            base().max_concurrency_limit(0).build(),
            zero("max_concurrency_limit")
        );
        assert_eq!(base().min_concurrency(0).build(), zero("min_concurrency"));
        assert_eq!(
            base().min_concurrency_limit(0).build(),
            zero("min_concurrency_limit")
        );
        assert_eq!(
            base().min_rtt_request_count(0).build(),
            zero("min_rtt_request_count")
        );
        let above = |parameter| {
            Err(ConfigError::OutOfRange {
                parameter,
                expected: "at most max_concurrency_limit",
            })
        };
        assert_eq!(
            base().max_concurrency_limit(2).build(),
            above("min_concurrency"),
            "the default min_concurrency is 3"
        );
        assert_eq!(
            base()
                .max_concurrency_limit(10)
                .min_concurrency_limit(11)
                .build(),
            above("min_concurrency_limit")
        );
        let equal = base()
            .max_concurrency_limit(3)
            .min_concurrency_limit(3)
            .build();
        assert!(equal.is_ok());
        let widest = base()
            .max_concurrency_limit(u32::MAX)
            .min_concurrency(u32::MAX)
            .min_rtt_request_count(u32::MAX)
            .build();
        assert!(widest.is_ok());
    }

    #[test]
    fn percentages_are_checked() {
        let base = || {
            EnvoyGradientConfig::builder()
                .concurrency_update_interval(ms(100))
                .min_rtt_calc_interval(Duration::from_secs(30))
        };
        for (parameter, set) in [
            (
                "min_rtt_buffer_percent",
                EnvoyGradientConfigBuilder::min_rtt_buffer_percent
                    as fn(EnvoyGradientConfigBuilder, f64) -> EnvoyGradientConfigBuilder,
            ),
            ("jitter_percent", EnvoyGradientConfigBuilder::jitter_percent),
            (
                "sample_aggregate_percentile",
                EnvoyGradientConfigBuilder::sample_aggregate_percentile,
            ),
        ] {
            assert_eq!(
                set(base(), f64::NAN).build(),
                Err(ConfigError::NotANumber { parameter })
            );
            assert_eq!(
                set(base(), f64::INFINITY).build(),
                Err(ConfigError::Infinite { parameter })
            );
            assert_eq!(
                set(base(), f64::NEG_INFINITY).build(),
                Err(ConfigError::Negative {
                    parameter,
                    value: f64::NEG_INFINITY
                })
            );
            assert!(matches!(
                set(base(), 100.000_001).build(),
                Err(ConfigError::OutOfRange { parameter: p, .. }) if p == parameter
            ));
            assert!(set(base(), 0.0).build().is_ok(), "{parameter} 0");
            assert!(set(base(), 100.0).build().is_ok(), "{parameter} 100");
        }
    }

    // Beyond Envoy's tests: timing and extremes.

    #[test]
    fn jitter_stays_within_its_percentage() {
        let config = yaml()
            .min_rtt_calc_interval(Duration::from_secs(10))
            .jitter_percent(15.0)
            .min_rtt_request_count(1)
            .build()
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let mut controller = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, seed);
            controller.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
            let delay = controller
                .min_rtt_deadline()
                .unwrap()
                .saturating_since(Nanos::ZERO + ms(5));
            // "If the interval is 10s and the jitter is 15%, the next window will
            // begin somewhere in the range (10s - 11.5s)."
            assert!(delay >= Duration::from_secs(10), "{delay:?}");
            assert!(delay < ms(11_500), "{delay:?}");
            assert_eq!(delay.subsec_nanos() % 1_000_000, 0, "whole milliseconds");
            seen.insert(delay);
        }
        assert!(
            seen.len() > 100,
            "the seeds spread the windows: {}",
            seen.len()
        );
        // The same seed, the same schedule.
        let draw = |seed| {
            let mut c = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, seed);
            c.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
            c.min_rtt_deadline()
        };
        assert_eq!(draw(9), draw(9));
    }

    #[test]
    fn sample_ends_drive_the_timers() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(ms(10))
            .build()
            .unwrap();
        let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
        controller.on_sample(Sample::new(Nanos::ZERO, ms(8), 1, false));
        // This request ends after the window closed: the window closes first, with
        // the first latency only, then this one counts in the next window.
        controller.on_sample(Sample::new(Nanos::ZERO + ms(50), ms(80), 1, false));
        assert_eq!(controller.sample_rtt(), Some(us(8_050)));
        assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(230)));
        controller.on_time(Nanos::ZERO + ms(230));
        assert_eq!(controller.sample_rtt(), Some(us(80_500)));
    }

    #[test]
    fn time_never_runs_backwards() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(ms(10))
            .build()
            .unwrap();
        let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO + ms(500), 1);
        assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(600)));
        controller.on_time(Nanos::ZERO);
        controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, false));
        assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(600)));
        // 1 ms against 12.5 ms buffered: gradient 2, 3 × 2 + √6.
        assert_eq!(controller.on_time(Nanos::ZERO + ms(600)), 8);
        assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(700)));
    }

    /// Drives a controller with the minimum limit at 4 to a second minRTT
    /// measurement, then through one more window at the minimum; answers whether
    /// that window started a third measurement.
    fn remeasures_after_one_more_window_at_the_minimum(config: EnvoyGradientConfig) -> bool {
        let mut c = Fixture::new(config);
        c.advance_past_min_rtt_stage(ms(5));
        // Eight times minRTT: gradient 0.5, the limit at its minimum, 5 times.
        for _ in 0..5 {
            for _ in 0..5 {
                c.try_forward(true);
                c.sample_latency(ms(40));
            }
            c.advance(ms(101));
            assert_eq!(c.limit(), 4);
        }
        assert!(c.min_rtt_active());
        // minRTT measured at 5 ms again.
        c.advance(ms(10));
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(5));
        }
        assert!(!c.min_rtt_active());
        // Late enough that these requests started after the measurement began.
        c.advance(ms(50));
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(40));
        }
        c.advance(ms(101));
        assert_eq!(c.controller.sample_rtt(), Some(us(40_500)));
        assert_eq!(c.limit(), 4);
        c.min_rtt_active()
    }

    #[test]
    fn separate_minimum_keeps_counting_windows_at_the_minimum() {
        let config = yaml()
            .min_rtt_calc_interval(Duration::from_secs(3600))
            .min_rtt_request_count(5)
            .min_rtt_buffer_percent(0.0);
        // Pinning for a measurement sets the limit, which restarts Envoy's count of
        // windows at the minimum: one more window is not enough.
        let pinning = config.clone().min_concurrency(4).build().unwrap();
        assert!(!remeasures_after_one_more_window_at_the_minimum(pinning));
        // With min_concurrency_limit set, a measurement leaves the limit, and the
        // count, alone (Envoy calls updateConcurrencyLimit only to pin): the count
        // is past 5 already, so the very next window at the minimum measures again.
        let separate = config.min_concurrency_limit(4).build().unwrap();
        assert!(remeasures_after_one_more_window_at_the_minimum(separate));
    }

    #[test]
    fn longest_latencies_and_last_instants_do_not_panic() {
        let config = yaml().min_rtt_request_count(2).build().unwrap();
        let mut controller = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 3);
        controller.on_sample(Sample::new(Nanos::ZERO, Duration::MAX, u64::MAX, false));
        controller.on_sample(Sample::new(Nanos::MAX, Duration::MAX, 0, false));
        // minRTT saturates at u64::MAX nanoseconds.
        assert_eq!(controller.min_rtt(), Some(Duration::from_nanos(u64::MAX)));
        assert!(!controller.in_min_rtt_window());
        for _ in 0..3 {
            controller.on_sample(Sample::new(Nanos::MAX, Duration::MAX, 1, false));
            controller.on_sample(Sample::new(Nanos::MAX, Duration::ZERO, 1, true));
            let limit = controller.on_time(Nanos::MAX);
            assert!((3..=1000).contains(&limit), "{limit}");
        }
        // Deadlines saturate at the last instant, and fire there once per call.
        for deadline in [controller.window_deadline(), controller.min_rtt_deadline()] {
            assert!(deadline.is_none_or(|at| at == Nanos::MAX), "{deadline:?}");
        }

        // The same from a controller created at the last instant.
        let mut late = EnvoyGradient::with_seed(config, Nanos::MAX, 4);
        assert_eq!(late.window_deadline(), Some(Nanos::MAX));
        for _ in 0..3 {
            late.on_sample(Sample::new(Nanos::MAX, us(1), 1, false));
            late.on_time(Nanos::MAX);
        }
        assert!(late.limit() >= 3);
    }

    #[test]
    fn zero_latencies_clamp_the_gradient_to_two() {
        // A zero sampleRTT divides to +inf, and 0/0 to NaN: Envoy's std::min and
        // std::max turn both into 2.0.
        let mut c = Fixture::new(
            yaml()
                .min_rtt_request_count(3)
                .max_concurrency_limit(u32::MAX)
                .build()
                .unwrap(),
        );
        for _ in 0..3 {
            c.try_forward(true);
            c.sample_latency(Duration::ZERO);
        }
        assert_eq!(c.controller.min_rtt(), Some(Duration::ZERO));
        let mut last = c.limit();
        for _ in 0..40 {
            c.try_forward(true);
            c.sample_latency(us(0));
            c.advance(ms(101));
            assert_eq!(c.controller.gradient(), Some(2.0));
            assert!(c.limit() >= last);
            last = c.limit();
        }
        // Doubling (plus headroom) for 40 windows: capped at max_concurrency_limit.
        assert_eq!(c.limit(), u64::from(u32::MAX));
    }

    #[test]
    fn windows_without_samples_change_nothing() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(ms(10))
            .build()
            .unwrap();
        let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 5);
        for i in 1..=50 {
            assert_eq!(controller.on_time(Nanos::ZERO + ms(100 * i)), 3);
        }
        // Dropped requests are no samples either.
        controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, true));
        assert_eq!(controller.on_time(Nanos::ZERO + ms(10_000)), 3);
        assert_eq!(controller.sample_rtt(), None);
        assert_eq!(controller.gradient(), None);
        // No minRTT window in fixed mode, however long the limit sits at the minimum.
        assert_eq!(controller.min_rtt_deadline(), None);
    }

    #[test]
    fn longest_jitter_range_does_not_overflow() {
        let config = EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .min_rtt_calc_interval(Duration::from_nanos(u64::MAX))
            .jitter_percent(100.0)
            .min_rtt_request_count(1)
            .build()
            .unwrap();
        let mut controller = EnvoyGradient::with_random(config, Nanos::ZERO, || u64::MAX);
        controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, false));
        assert_eq!(controller.min_rtt_deadline(), Some(Nanos::MAX));
    }
}
