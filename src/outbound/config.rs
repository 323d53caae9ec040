//! [`LearningConfig`]: the parameters of a [`LearnedRate`](super::LearnedRate), the
//! AWS SDKs' by default.

use std::time::Duration;

use crate::error::{ConfigError, positive_finite};

use super::cubic::{DEFAULT_BETA, DEFAULT_SCALE, check_beta};
use super::send_rate::DEFAULT_SMOOTHING;

/// How a [`LearnedRate`](super::LearnedRate) learns: the AWS SDKs' adaptive retry
/// mode by default (beta 0.7, scale 0.4, smoothing 0.8 over half-second buckets, a
/// floor of 0.5 calls a second, at most twice the measured rate), and pauses the
/// partner asks for of at most an hour.
///
/// Each setter checks its value, so that nothing the caller sets or the partner
/// says holds calls for ever: pauses and measuring buckets are at most
/// [`LONGEST_WAIT`](LearningConfig::LONGEST_WAIT) (an hour), and the floor, which
/// the partner's announced limits respect too, is at least one call in it. A call
/// waits at most an hour for its token, plus at most an hour behind the debt of a
/// call larger than the bucket.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::outbound::LearningConfig;
///
/// let config = LearningConfig::new()
///     .beta(0.5)?
///     .min_rate(2.0)?
///     .max_pause(Duration::from_secs(60))?;
/// assert_ne!(config, LearningConfig::new());
/// assert!(LearningConfig::new().beta(1.0).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearningConfig {
    pub(crate) beta: f64,
    pub(crate) scale: f64,
    pub(crate) smoothing: f64,
    pub(crate) buckets_per_second: f64,
    pub(crate) min_rate: f64,
    pub(crate) max_growth: f64,
    pub(crate) max_pause: Duration,
}

impl Default for LearningConfig {
    fn default() -> Self {
        LearningConfig::new()
    }
}

impl LearningConfig {
    /// The longest any setting may make a call wait, as the crate's other waits
    /// (`adaptive::WhenLimited::MAX_TIMEOUT`): an
    /// hour. It bounds [`max_pause`](LearningConfig::max_pause) and
    /// [`measure_every`](LearningConfig::measure_every), and
    /// [`min_rate`](LearningConfig::min_rate) is at least one call in it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::LearningConfig;
    ///
    /// let hour = LearningConfig::LONGEST_WAIT;
    /// assert!(LearningConfig::new().max_pause(hour).is_ok());
    /// assert!(LearningConfig::new().max_pause(hour + Duration::from_nanos(1)).is_err());
    /// ```
    pub const LONGEST_WAIT: Duration = Duration::from_secs(3600);

    /// The AWS SDKs' parameters.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// assert_eq!(LearningConfig::new(), LearningConfig::default());
    /// ```
    pub fn new() -> LearningConfig {
        LearningConfig {
            beta: DEFAULT_BETA,
            scale: DEFAULT_SCALE,
            smoothing: DEFAULT_SMOOTHING,
            buckets_per_second: 2.0,
            min_rate: 0.5,
            max_growth: 2.0,
            max_pause: Duration::from_secs(3600),
        }
    }

    /// A throttle cuts the rate to `beta` of the rate sent at (0.7).
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside (0, 1), [`ConfigError::NotANumber`] for
    /// NaN.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().beta(0.5)?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn beta(mut self, beta: f64) -> Result<LearningConfig, ConfigError> {
        self.beta = check_beta(beta)?;
        Ok(self)
    }

    /// How fast the rate grows back after a throttle (0.4).
    ///
    /// # Errors
    ///
    /// Not a positive finite number: [`ConfigError::Zero`],
    /// [`ConfigError::Negative`], [`ConfigError::NotANumber`],
    /// [`ConfigError::Infinite`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().scale(0.8)?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn scale(mut self, scale: f64) -> Result<LearningConfig, ConfigError> {
        self.scale = positive_finite("scale", scale)?;
        Ok(self)
    }

    /// The weight of the latest bucket in the measured sending rate (0.8).
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] outside (0, 1], [`ConfigError::NotANumber`] for
    /// NaN.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().smoothing(1.0)?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn smoothing(mut self, smoothing: f64) -> Result<LearningConfig, ConfigError> {
        if smoothing.is_nan() {
            return Err(ConfigError::NotANumber {
                parameter: "smoothing",
            });
        }
        if !(smoothing > 0.0 && smoothing <= 1.0) {
            return Err(ConfigError::OutOfRange {
                parameter: "smoothing",
                expected: "in (0, 1]",
            });
        }
        self.smoothing = smoothing;
        Ok(self)
    }

    /// The buckets the sending rate is measured in (500 ms): the rate is measured
    /// once a bucket ends, so a longer one leaves the learned rate at the floor for
    /// longer.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for zero; [`ConfigError::TooLong`] beyond
    /// [`LONGEST_WAIT`](LearningConfig::LONGEST_WAIT) (an hour): with
    /// `Duration::MAX` the rate would never be measured.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().measure_every(std::time::Duration::from_secs(1))?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn measure_every(mut self, bucket: Duration) -> Result<LearningConfig, ConfigError> {
        if bucket.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "measure_every",
            });
        }
        if bucket > LearningConfig::LONGEST_WAIT {
            return Err(ConfigError::TooLong {
                parameter: "measure_every",
                max: LearningConfig::LONGEST_WAIT,
                within: "the longest wait for the rate, an hour",
            });
        }
        self.buckets_per_second = 1.0 / bucket.as_secs_f64();
        Ok(self)
    }

    /// The slowest calls go, in calls a second (0.5): below it the rate would take
    /// minutes to measure. It holds for the partner's announced limits too (its
    /// `RateLimit-Policy` quota and its `RateLimit` remaining calls): a partner
    /// holds calls off for longer only with a pause (`Retry-After`, or nothing
    /// remaining), which [`max_pause`](LearningConfig::max_pause) bounds. For a
    /// partner whose quota is slower than the floor, lower the floor.
    ///
    /// # Errors
    ///
    /// Not a positive finite number: [`ConfigError::Zero`],
    /// [`ConfigError::Negative`], [`ConfigError::NotANumber`],
    /// [`ConfigError::Infinite`]; [`ConfigError::OutOfRange`] below one call in
    /// [`LONGEST_WAIT`](LearningConfig::LONGEST_WAIT) (1/3600 a second): a call
    /// would wait longer than an hour for its token.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().min_rate(0.1)?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rate(mut self, rate: f64) -> Result<LearningConfig, ConfigError> {
        let rate = positive_finite("min_rate", rate)?;
        if rate < 1.0 / LearningConfig::LONGEST_WAIT.as_secs_f64() {
            return Err(ConfigError::OutOfRange {
                parameter: "min_rate",
                expected: "at least one call an hour (1/3600 a second)",
            });
        }
        self.min_rate = rate;
        Ok(self)
    }

    /// The learned rate never exceeds this multiple of the measured sending rate
    /// (2): it grows only as fast as the caller proves it sends.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] below 1, [`ConfigError::NotANumber`],
    /// [`ConfigError::Infinite`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::LearningConfig;
    ///
    /// LearningConfig::new().max_growth(1.5)?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_growth(mut self, factor: f64) -> Result<LearningConfig, ConfigError> {
        if factor.is_nan() {
            return Err(ConfigError::NotANumber {
                parameter: "max_growth",
            });
        }
        if factor.is_infinite() {
            return Err(ConfigError::Infinite {
                parameter: "max_growth",
            });
        }
        if factor < 1.0 {
            return Err(ConfigError::OutOfRange {
                parameter: "max_growth",
                expected: "at least 1",
            });
        }
        self.max_growth = factor;
        Ok(self)
    }

    /// The longest pause a partner's answer can impose (an hour): a bounded wait
    /// however large a `Retry-After` it sends. It also bounds how long the
    /// partner's remaining calls (`RateLimit`'s `t`) pace calls. Zero ignores
    /// pauses and remaining calls.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooLong`] beyond [`LONGEST_WAIT`](LearningConfig::LONGEST_WAIT)
    /// (an hour): a partner could hold every call for centuries.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::LearningConfig;
    ///
    /// let config = LearningConfig::new().max_pause(Duration::from_secs(60))?;
    /// assert!(LearningConfig::new().max_pause(Duration::MAX).is_err());
    /// # drop(config);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_pause(mut self, max: Duration) -> Result<LearningConfig, ConfigError> {
        if max > LearningConfig::LONGEST_WAIT {
            return Err(ConfigError::TooLong {
                parameter: "max_pause",
                max: LearningConfig::LONGEST_WAIT,
                within: "the longest wait for the rate, an hour",
            });
        }
        self.max_pause = max;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_typed_errors() {
        let c = LearningConfig::new();
        assert_eq!(
            c.beta(f64::NAN).unwrap_err(),
            ConfigError::NotANumber { parameter: "beta" }
        );
        assert!(matches!(c.beta(0.0), Err(ConfigError::OutOfRange { .. })));
        assert_eq!(
            c.scale(-1.0).unwrap_err(),
            ConfigError::Negative {
                parameter: "scale",
                value: -1.0
            }
        );
        assert!(matches!(
            c.smoothing(0.0),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(matches!(
            c.smoothing(f64::NAN),
            Err(ConfigError::NotANumber { .. })
        ));
        assert_eq!(
            c.measure_every(Duration::ZERO).unwrap_err(),
            ConfigError::Zero {
                parameter: "measure_every"
            }
        );
        assert!(c.measure_every(Duration::from_nanos(1)).is_ok());
        assert!(c.measure_every(LearningConfig::LONGEST_WAIT).is_ok());
        assert_eq!(
            c.min_rate(0.0).unwrap_err(),
            ConfigError::Zero {
                parameter: "min_rate"
            }
        );
        assert_eq!(
            c.min_rate(f64::INFINITY).unwrap_err(),
            ConfigError::Infinite {
                parameter: "min_rate"
            }
        );
        assert!(matches!(
            c.max_growth(0.5),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(matches!(
            c.max_growth(f64::NAN),
            Err(ConfigError::NotANumber { .. })
        ));
        assert_eq!(
            c.max_pause(LearningConfig::LONGEST_WAIT).unwrap().max_pause,
            LearningConfig::LONGEST_WAIT
        );
        assert_eq!(
            c.max_pause(Duration::ZERO).unwrap().max_pause,
            Duration::ZERO
        );
        assert!(c.min_rate(1.0 / 3600.0).is_ok());
    }

    // The bug: `measure_every(Duration::MAX)` was accepted, so the sending rate was
    // never measured and the learned rate stayed at the floor.
    #[test]
    fn measuring_every_more_than_an_hour_is_a_typed_error() {
        let c = LearningConfig::new();
        let too_long = ConfigError::TooLong {
            parameter: "measure_every",
            max: Duration::from_secs(3600),
            within: "the longest wait for the rate, an hour",
        };
        assert_eq!(c.measure_every(Duration::MAX).unwrap_err(), too_long);
        assert_eq!(
            c.measure_every(Duration::from_secs(3600) + Duration::from_nanos(1))
                .unwrap_err(),
            too_long
        );
        assert_eq!(
            c.measure_every(Duration::from_secs(3600))
                .unwrap()
                .buckets_per_second,
            1.0 / 3600.0
        );
    }

    // The bug: `max_pause(Duration::MAX)` let a partner's `Retry-After` hold every
    // call for 584 years, and a floor of 1e-300 calls a second a call for as long.
    #[test]
    fn waits_longer_than_an_hour_are_typed_errors() {
        let c = LearningConfig::new();
        assert_eq!(
            c.max_pause(Duration::MAX).unwrap_err().parameter(),
            "max_pause"
        );
        assert!(matches!(
            c.max_pause(Duration::from_secs(3601)),
            Err(ConfigError::TooLong { .. })
        ));
        assert_eq!(
            c.min_rate(1e-300).unwrap_err(),
            ConfigError::OutOfRange {
                parameter: "min_rate",
                expected: "at least one call an hour (1/3600 a second)",
            }
        );
        assert!(matches!(
            c.min_rate(1.0 / 3601.0),
            Err(ConfigError::OutOfRange { .. })
        ));
    }
}
