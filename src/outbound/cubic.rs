//! [`Cubic`]: the CUBIC rate calculator of the AWS SDKs' adaptive retry mode, a pure
//! function of the time since the last throttle.

use crate::error::ConfigError;
use crate::time::Nanos;

/// How much a throttle cuts the rate: the rate falls to `beta` of what it was.
pub(crate) const DEFAULT_BETA: f64 = 0.7;
/// How fast the rate grows back after a throttle.
pub(crate) const DEFAULT_SCALE: f64 = 0.4;

/// The CUBIC rate calculator, as botocore's `CubicCalculator` and smithy-rs's
/// `ClientRateLimiter` compute it (same formulas, same order of operations, so the
/// same numbers).
///
/// After a throttle at a sending rate `w_max`, the rate drops to `beta · w_max`,
/// then grows back as `scale · (t − k)³ + w_max`, where `t` is the time since the
/// throttle in seconds and `k = ∛(w_max · (1 − beta) / scale)` the time it takes to
/// be back at `w_max`: slowly near `w_max`, faster beyond it, probing for more.
///
/// A pure state machine: time arrives as [`Nanos`] from the caller's
/// [`Clock`](crate::time::Clock), read as seconds.
///
/// # Examples
///
/// ```
/// use tollgate::outbound::Cubic;
/// use tollgate::time::Nanos;
///
/// let mut cubic = Cubic::new(0.7, 0.4)?;
/// let cut = cubic.throttled(10.0, Nanos::new(5_000_000_000));
/// assert!((cut - 7.0).abs() < 1e-12);
/// // k seconds after the throttle, the rate is back at 10.
/// let k = cubic.k();
/// let back = cubic.success(Nanos::new(5_000_000_000 + (k * 1e9) as u64));
/// assert!((back - 10.0).abs() < 1e-6);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cubic {
    beta: f64,
    scale: f64,
    /// The rate when last throttled.
    w_max: f64,
    /// Seconds from the last throttle back to `w_max`.
    k: f64,
    /// The last throttle, in seconds on the clock.
    last_throttle: f64,
}

impl Cubic {
    /// A calculator that cuts the rate to `beta` of itself on a throttle and grows
    /// it back at `scale` (the AWS SDKs use 0.7 and 0.4), as if last throttled at
    /// time zero at a rate of zero.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] for a `beta` outside (0, 1);
    /// [`ConfigError::NotANumber`], [`ConfigError::Zero`], [`ConfigError::Negative`]
    /// or [`ConfigError::Infinite`] for such a `scale` or `beta`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    /// use tollgate::ConfigError;
    ///
    /// assert!(Cubic::new(0.7, 0.4).is_ok());
    /// assert_eq!(
    ///     Cubic::new(1.0, 0.4).unwrap_err(),
    ///     ConfigError::OutOfRange { parameter: "beta", expected: "in (0, 1)" }
    /// );
    /// assert_eq!(Cubic::new(0.7, f64::NAN).unwrap_err(), ConfigError::NotANumber { parameter: "scale" });
    /// ```
    pub fn new(beta: f64, scale: f64) -> Result<Cubic, ConfigError> {
        let beta = check_beta(beta)?;
        let scale = crate::error::positive_finite("scale", scale)?;
        Ok(Cubic::starting(beta, scale, 0.0, 0.0))
    }

    /// Checked parameters, a starting `w_max` and the time of the last throttle.
    pub(crate) fn starting(beta: f64, scale: f64, w_max: f64, last_throttle: f64) -> Cubic {
        let mut cubic = Cubic {
            beta,
            scale,
            w_max,
            k: 0.0,
            last_throttle,
        };
        cubic.k = cubic.zero_point();
        cubic
    }

    /// The rate a success at `now` allows: `scale · (t − k)³ + w_max`. It changes
    /// nothing; before the first throttle it grows from zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    /// use tollgate::time::Nanos;
    ///
    /// let cubic = Cubic::new(0.7, 0.4)?;
    /// // Never throttled: 0.4 · 2³ two seconds in.
    /// assert!((cubic.success(Nanos::new(2_000_000_000)) - 3.2).abs() < 1e-12);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn success(&self, now: Nanos) -> f64 {
        self.success_at(seconds(now))
    }

    pub(crate) fn success_at(&self, now: f64) -> f64 {
        // smithy-rs's order of operations: `dt` includes `k`, cubed by `powi`.
        let dt = now - self.last_throttle - self.k;
        self.scale * dt.powi(3) + self.w_max
    }

    /// A throttle at `now` while sending at `rate`: `rate` becomes the new `w_max`,
    /// and the rate to use is `beta · rate`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    /// use tollgate::time::Nanos;
    ///
    /// let mut cubic = Cubic::new(0.6, 0.4)?;
    /// assert_eq!(cubic.throttled(10.0, Nanos::new(1_000_000_000)), 6.0);
    /// assert_eq!(cubic.w_max(), 10.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn throttled(&mut self, rate: f64, now: Nanos) -> f64 {
        self.throttled_at(rate, seconds(now))
    }

    pub(crate) fn throttled_at(&mut self, rate: f64, now: f64) -> f64 {
        self.w_max = rate;
        self.k = self.zero_point();
        self.last_throttle = now;
        rate * self.beta
    }

    /// The rate when last throttled.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    ///
    /// assert_eq!(Cubic::new(0.7, 0.4)?.w_max(), 0.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// Seconds from the last throttle until the rate is back at [`w_max`](Cubic::w_max).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    ///
    /// assert_eq!(Cubic::new(0.7, 0.4)?.k(), 0.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn k(&self) -> f64 {
        self.k
    }

    /// The last throttle, in seconds on the clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    /// use tollgate::time::Nanos;
    ///
    /// let mut cubic = Cubic::new(0.7, 0.4)?;
    /// cubic.throttled(5.0, Nanos::new(2_000_000_000));
    /// assert_eq!(cubic.last_throttle(), 2.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn last_throttle(&self) -> f64 {
        self.last_throttle
    }

    /// The factor a throttle cuts the rate by.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    ///
    /// assert_eq!(Cubic::new(0.7, 0.4)?.beta(), 0.7);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// How fast the rate grows back.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Cubic;
    ///
    /// assert_eq!(Cubic::new(0.7, 0.4)?.scale(), 0.4);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn scale(&self) -> f64 {
        self.scale
    }

    fn zero_point(&self) -> f64 {
        ((self.w_max * (1.0 - self.beta)) / self.scale).powf(1.0 / 3.0)
    }
}

/// `beta` in (0, 1): 1 would never cut the rate, 0 would stop sending.
pub(crate) fn check_beta(beta: f64) -> Result<f64, ConfigError> {
    if beta.is_nan() {
        return Err(ConfigError::NotANumber { parameter: "beta" });
    }
    if beta > 0.0 && beta < 1.0 {
        Ok(beta)
    } else {
        Err(ConfigError::OutOfRange {
            parameter: "beta",
            expected: "in (0, 1)",
        })
    }
}

/// `now` in seconds, as the AWS SDKs count time: a correctly rounded division, so
/// that 200 ms steps read exactly as the decimals upstream's tests write.
pub(crate) fn seconds(now: Nanos) -> f64 {
    now.as_u64() as f64 / 1e9
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// approx's `assert_relative_eq!` with its defaults (what smithy-rs's tests use):
    /// equal within `f64::EPSILON`, absolutely or relatively.
    #[track_caller]
    pub(crate) fn assert_relative_eq(expected: f64, actual: f64) {
        assert_relative_eq_within(expected, actual, f64::EPSILON);
    }

    #[track_caller]
    pub(crate) fn assert_relative_eq_within(expected: f64, actual: f64, epsilon: f64) {
        let diff = (expected - actual).abs();
        let largest = expected.abs().max(actual.abs());
        assert!(
            diff <= epsilon || diff <= largest * f64::EPSILON,
            "expected {expected}, got {actual}"
        );
    }

    /// Python's `assertAlmostEqual`: equal when rounded to 7 decimal places.
    #[track_caller]
    pub(crate) fn assert_almost_equal(expected: f64, actual: f64) {
        assert!(
            ((expected - actual) * 1e7).round() == 0.0,
            "expected {expected}, got {actual}"
        );
    }

    fn at(seconds: f64) -> Nanos {
        Nanos::new((seconds * 1e9).round() as u64)
    }

    /// botocore's `create_cubic_calculator`: start time 0.
    fn botocore(starting_max_rate: f64, beta: f64) -> Cubic {
        Cubic::starting(beta, DEFAULT_SCALE, starting_max_rate, 0.0)
    }

    // botocore tests/unit/retries/test_throttling.py

    #[test]
    fn botocore_starting_params() {
        let cubic = botocore(10.0, 0.7);
        assert_almost_equal(1.9574338205844317, cubic.k());
    }

    #[test]
    fn botocore_success_responses_until_max_hit() {
        let cubic = botocore(10.0, 0.7);
        let start_k = cubic.k();
        let start_w_max = cubic.w_max();
        for t in [start_k / 3.0, start_k / 2.0, start_k / 1.1] {
            assert!(cubic.success_at(t) <= start_w_max);
        }
        assert_almost_equal(10.0, cubic.success_at(start_k));
        for t in [start_k * 1.1, start_k * 2.0] {
            assert!(cubic.success_at(t) >= start_w_max);
        }
        // The same through the clock's nanoseconds.
        assert_almost_equal(10.0, cubic.success(at(start_k)));
    }

    #[test]
    fn botocore_error_response_decreases_rate_by_beta() {
        let mut cubic = botocore(10.0, 0.7);
        let rate_when_throttled = 8.0;
        let new_rate = cubic.throttled(rate_when_throttled, at(1.0));
        assert_almost_equal(rate_when_throttled * 0.7, new_rate);
        assert_eq!(cubic.w_max(), rate_when_throttled);
        assert_eq!(cubic.k(), 1.8171205928321397);
        assert_eq!(cubic.last_throttle(), 1.0);
    }

    #[test]
    fn botocore_t_0_should_match_beta_decrease() {
        let mut cubic = botocore(10.0, 0.6);
        let new_rate = cubic.throttled(10.0, at(1.0));
        assert_eq!(new_rate, 6.0);
        assert_almost_equal(6.0, cubic.success(at(1.0)));
    }

    // smithy-rs aws-smithy-runtime client/retries/client_rate_limiter.rs

    #[test]
    fn smithy_should_match_beta_decrease() {
        let mut throwaway = Cubic::starting(DEFAULT_BETA, DEFAULT_SCALE, 0.0, 0.0);
        assert_relative_eq(7.0, throwaway.throttled_at(10.0, 0.0));
        let cubic = Cubic::starting(DEFAULT_BETA, DEFAULT_SCALE, 10.0, 1.0);
        assert_relative_eq(7.0, cubic.success_at(1.0));
    }

    #[test]
    fn smithy_calculated_rate_with_successes() {
        let cubic = Cubic::starting(DEFAULT_BETA, DEFAULT_SCALE, 10.0, 5.0);
        for (t, expected) in [
            (5.0, 7.0),
            (6.0, 9.64893600966),
            (7.0, 10.000030849917364),
            (8.0, 10.453284520772092),
            (9.0, 13.408697022224185),
            (10.0, 21.26626835427364),
            (11.0, 36.425998516920465),
        ] {
            assert_relative_eq_within(expected, cubic.success_at(t), f64::EPSILON);
            // Through the clock: whole seconds read exactly.
            assert_eq!(cubic.success_at(t), cubic.success(at(t)));
        }
    }

    /// Upstream's test (ported from aws-sdk-go-v2) sets `w_max` to the rate *after*
    /// the cut on each throttle; so does this port, by hand, to keep its numbers.
    #[test]
    fn smithy_calculated_rate_with_throttles() {
        let mut cubic = Cubic::starting(DEFAULT_BETA, DEFAULT_SCALE, 10.0, 5.0);
        let mut calculated = 0.0;
        for (throttled, t, expected) in [
            (false, 5.0, 7.0),
            (false, 6.0, 9.64893600966),
            (true, 7.0, 6.754255206761999),
            (true, 8.0, 4.727978644733399),
            (false, 9.0, 4.670125557970046),
            (false, 10.0, 4.770870456867401),
            (false, 11.0, 6.011819748005445),
            (false, 12.0, 10.792973431384178),
        ] {
            if throttled {
                calculated *= cubic.beta();
                cubic = Cubic::starting(cubic.beta(), cubic.scale(), calculated, t);
            } else {
                calculated = cubic.success_at(t);
            }
            assert_relative_eq(expected, calculated);
        }
    }

    #[test]
    fn bad_parameters_are_typed_errors() {
        for beta in [0.0, 1.0, -0.5, 1.5, f64::INFINITY] {
            assert_eq!(
                Cubic::new(beta, 0.4).unwrap_err(),
                ConfigError::OutOfRange {
                    parameter: "beta",
                    expected: "in (0, 1)"
                }
            );
        }
        assert_eq!(
            Cubic::new(f64::NAN, 0.4).unwrap_err(),
            ConfigError::NotANumber { parameter: "beta" }
        );
        assert_eq!(
            Cubic::new(0.7, 0.0).unwrap_err(),
            ConfigError::Zero { parameter: "scale" }
        );
        assert_eq!(
            Cubic::new(0.7, -1.0).unwrap_err(),
            ConfigError::Negative {
                parameter: "scale",
                value: -1.0
            }
        );
        assert_eq!(
            Cubic::new(0.7, f64::INFINITY).unwrap_err(),
            ConfigError::Infinite { parameter: "scale" }
        );
    }

    #[test]
    fn extremes_stay_finite() {
        let mut cubic = Cubic::new(0.7, 0.4).unwrap();
        let cut = cubic.throttled(u64::MAX as f64, Nanos::MAX);
        assert!(cut.is_finite());
        assert!(cubic.success(Nanos::MAX).is_finite());
        assert!(cubic.success(Nanos::ZERO).is_finite());
    }
}
