//! [`EnvoyGradientConfig`] and its builder: Envoy's `GradientControllerConfig`, checked
//! when built.

use std::time::Duration;

use crate::error::{ConfigError, non_zero};
use crate::units::positive_nanos;

/// The shortest minRTT recalculation interval Envoy's configuration accepts.
const MIN_RTT_INTERVAL_FLOOR: Duration = Duration::from_millis(1);

/// How minRTT is obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MinRttSource {
    /// Measured in minRTT windows, this long apart before jitter.
    Measured(Duration),
    /// Given: no minRTT windows (Envoy's `fixed_value`).
    Fixed(Duration),
}

/// The validated parameters of an [`EnvoyGradient`](super::EnvoyGradient), with
/// Envoy's defaults.
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
    pub(super) min_rtt: MinRttSource,
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
    pub(super) fn probe_pins_limit(&self) -> bool {
        self.min_concurrency_limit.is_none()
    }

    pub(super) fn measures_min_rtt(&self) -> bool {
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
