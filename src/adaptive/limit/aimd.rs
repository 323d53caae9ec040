//! [`AimdLimit`]: additive increase, multiplicative decrease (Netflix's `AIMDLimit`).
//!
//! A loss-based limit: each successful sample taken while at least half the limit
//! was in use raises the limit by one; each drop, or a sample slower than the
//! timeout, multiplies it by the backoff ratio. Latency below the timeout is not
//! looked at.

use std::time::Duration;

use super::checks;
use super::{LimitAlgorithm, LimitRule};
use crate::adaptive::Sample;
use crate::error::ConfigError;

/// Upstream's defaults.
const DEFAULT_MIN: u64 = 20;
const DEFAULT_INITIAL: u64 = 20;
const DEFAULT_MAX: u64 = 200;
const DEFAULT_BACKOFF: f64 = 0.9;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Additive increase, multiplicative decrease: Netflix's `AIMDLimit`.
///
/// The arithmetic is upstream's, and so are the settings it accepts: an initial
/// limit outside `[min_limit, max_limit]` stands until the first sample clamps it
/// (upstream logs a warning), and a minimum of 0 lets the limit fall to 0, which an
/// enforcing limiter holds at 1 (a limit of 0 would admit nothing and never hear a
/// sample again; upstream's `SimpleLimiter` then refuses everything for good): the
/// next success raises it. Refused, with the reason in the error, as upstream does
/// not: a minimum above the maximum, a maximum of 0.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let mut aimd = AimdLimit::builder().initial_limit(30).build()?;
/// let ok = Sample::new(Nanos::ZERO, Duration::from_millis(1), 15, false);
/// assert_eq!(aimd.on_sample(ok), 31);
/// let dropped = Sample::new(Nanos::ZERO, Duration::from_millis(1), 15, true);
/// assert_eq!(aimd.on_sample(dropped), 27); // ⌊31 × 0.9⌋
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct AimdLimit {
    limit: u64,
    min: u64,
    max: u64,
    backoff_ratio: f64,
    timeout: Duration,
}

/// The settings of an [`AimdLimit`], checked by [`build`](AimdBuilder::build).
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::AimdLimit;
///
/// let aimd = AimdLimit::builder().min_limit(5).initial_limit(10).max_limit(50).build()?;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct AimdBuilder {
    min: u64,
    initial: u64,
    max: u64,
    backoff_ratio: f64,
    timeout: Duration,
}

impl AimdLimit {
    /// Upstream's defaults: limit 20 within `[20, 200]`, backoff 0.9, timeout 5 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
    ///
    /// assert_eq!(AimdLimit::new().limit(), 20);
    /// ```
    pub fn new() -> AimdLimit {
        AimdLimit {
            limit: DEFAULT_INITIAL,
            min: DEFAULT_MIN,
            max: DEFAULT_MAX,
            backoff_ratio: DEFAULT_BACKOFF,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A builder starting from upstream's defaults.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
    ///
    /// let aimd = AimdLimit::builder().max_limit(1000).build()?;
    /// assert_eq!(aimd.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder() -> AimdBuilder {
        AimdBuilder {
            min: DEFAULT_MIN,
            initial: DEFAULT_INITIAL,
            max: DEFAULT_MAX,
            backoff_ratio: DEFAULT_BACKOFF,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Default for AimdLimit {
    /// [`AimdLimit::new`].
    fn default() -> AimdLimit {
        AimdLimit::new()
    }
}

impl AimdBuilder {
    /// The limit before any sample (default 20). Outside `[min_limit, max_limit]`
    /// it stands until the first sample clamps it, as upstream.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut aimd = AimdLimit::builder().initial_limit(10).build()?; // min 20
    /// assert_eq!(aimd.limit(), 10);
    /// let idle = Sample::new(Nanos::ZERO, Duration::from_millis(1), 1, false);
    /// assert_eq!(aimd.on_sample(idle), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn initial_limit(self, initial: u64) -> AimdBuilder {
        AimdBuilder { initial, ..self }
    }

    /// The least the limit falls to (default 20). 0 is accepted, as upstream: an
    /// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter) holds a limit of 0 at 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    ///
    /// assert!(AimdLimit::builder().min_limit(0).build().is_ok());
    /// assert!(AimdLimit::builder().min_limit(201).build().is_err()); // above the max 200
    /// ```
    pub fn min_limit(self, min: u64) -> AimdBuilder {
        AimdBuilder { min, ..self }
    }

    /// The most the limit rises to (default 200).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    ///
    /// assert!(AimdLimit::builder().max_limit(20).build().is_ok());
    /// assert!(AimdLimit::builder().max_limit(19).build().is_err());
    /// ```
    pub fn max_limit(self, max: u64) -> AimdBuilder {
        AimdBuilder { max, ..self }
    }

    /// What a drop multiplies the limit by, in `[0.5, 1)` (default 0.9).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::AimdLimit;
    ///
    /// assert!(AimdLimit::builder().backoff_ratio(0.5).build().is_ok());
    /// assert!(AimdLimit::builder().backoff_ratio(1.0).build().is_err());
    /// ```
    pub fn backoff_ratio(self, backoff_ratio: f64) -> AimdBuilder {
        AimdBuilder {
            backoff_ratio,
            ..self
        }
    }

    /// The RTT beyond which a sample counts as a drop (default 5 s).
    /// [`Duration::MAX`] turns the timeout off: only drops lower the limit, and an
    /// [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter) then reads no clock for
    /// its requests ([`LimitAlgorithm::uses_time`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut aimd = AimdLimit::builder().timeout(Duration::from_millis(100)).build()?;
    /// let slow = Sample::new(Nanos::ZERO, Duration::from_millis(101), 20, false);
    /// assert_eq!(aimd.on_sample(slow), 20); // ⌊20 × 0.9⌋ = 18, held at the minimum 20
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn timeout(self, timeout: Duration) -> AimdBuilder {
        AimdBuilder { timeout, ..self }
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `timeout`; [`ConfigError::OutOfRange`] for
    /// `min_limit > max_limit`, a zero `max_limit`, or a `backoff_ratio` outside
    /// `[0.5, 1)`;
    /// [`ConfigError::NotANumber`] / [`ConfigError::Infinite`] for such a
    /// `backoff_ratio`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::adaptive::limit::AimdLimit;
    ///
    /// assert_eq!(
    ///     AimdLimit::builder().backoff_ratio(f64::NAN).build().unwrap_err(),
    ///     ConfigError::NotANumber { parameter: "backoff_ratio" }
    /// );
    /// ```
    pub fn build(self) -> Result<AimdLimit, ConfigError> {
        checks::limits(self.min, self.max)?;
        let backoff_ratio = checks::ratio(
            "backoff_ratio",
            self.backoff_ratio,
            |r| (0.5..1.0).contains(&r),
            "in [0.5, 1)",
        )?;
        if self.timeout.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "timeout",
            });
        }
        Ok(AimdLimit {
            limit: self.initial,
            min: self.min,
            max: self.max,
            backoff_ratio,
            timeout: self.timeout,
        })
    }
}

impl LimitAlgorithm for AimdLimit {
    fn limit(&self) -> u64 {
        self.limit
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        self.limit = self.rule().next(self.limit, &sample);
        self.limit
    }

    /// Only to compare the RTT with the timeout: a timeout of [`Duration::MAX`]
    /// never fires, and then the RTT is not needed.
    fn uses_time(&self) -> bool {
        self.timeout != Duration::MAX
    }

    /// A thousandth of the timeout: an RTT read that much off moves no decision
    /// by more than 0.1 % of the timeout.
    fn time_resolution(&self) -> Duration {
        self.timeout / 1000
    }

    fn has_timers(&self) -> bool {
        false
    }

    fn limit_rule(&self) -> Option<LimitRule> {
        Some(LimitRule::aimd(self.rule()))
    }
}

/// AIMD's arithmetic, apart from its limit: the one rule both
/// [`AimdLimit::on_sample`] and its [`LimitRule`] follow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    min: u64,
    max: u64,
    backoff_ratio: f64,
    timeout: Duration,
    /// The timeout in nanoseconds, saturating: exact for the RTTs a limiter
    /// measures, which are whole nanoseconds of at most `u64::MAX`.
    timeout_nanos: u64,
}

impl AimdLimit {
    fn rule(&self) -> Rule {
        Rule {
            min: self.min,
            max: self.max,
            backoff_ratio: self.backoff_ratio,
            timeout: self.timeout,
            timeout_nanos: u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

impl Rule {
    /// The limit after `sample`, from `limit`.
    #[inline]
    pub(crate) fn next(&self, limit: u64, sample: &Sample) -> u64 {
        let timed_out = sample.rtt > self.timeout;
        self.step(limit, sample.dropped || timed_out, sample.inflight)
    }

    /// [`next`](Self::next) of a sample given by its parts, its RTT in whole
    /// nanoseconds as a limiter measures it: what the limiter checks on every
    /// release, with no [`Duration`] built.
    #[inline]
    pub(crate) fn next_after(
        &self,
        limit: u64,
        rtt_nanos: u64,
        inflight: u64,
        dropped: bool,
    ) -> u64 {
        self.step(limit, dropped || rtt_nanos > self.timeout_nanos, inflight)
    }

    #[inline]
    fn step(&self, mut limit: u64, backs_off: bool, inflight: u64) -> u64 {
        if backs_off {
            limit = (limit as f64 * self.backoff_ratio) as u64;
        } else if inflight.saturating_mul(2) >= limit {
            // Grow only while the limit is in use: an idle limit says nothing.
            limit = limit.saturating_add(1);
        }
        limit.clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Nanos;

    fn sample(rtt: Duration, inflight: u64, dropped: bool) -> Sample {
        Sample::new(Nanos::ZERO, rtt, inflight, dropped)
    }

    /// A timeout and an RTT both past what nanoseconds in a u64 hold (584 years)
    /// still compare as durations, through the algorithm and through its rule.
    #[test]
    fn an_rtt_past_a_timeout_of_centuries_backs_off() {
        let centuries = Duration::from_secs(700 * 365 * 24 * 3600);
        let mut aimd = AimdLimit::builder().timeout(centuries).build().unwrap();
        let rule = aimd.limit_rule().unwrap();
        let slow = sample(Duration::MAX, 20, false);
        assert_eq!(
            rule.next(20, &slow),
            20,
            "⌊20 × 0.9⌋, held at the minimum 20"
        );
        assert_eq!(rule.next(30, &slow), 27);
        assert_eq!(aimd.on_sample(slow), 20);
        let fast = sample(centuries, 10, false);
        assert_eq!(
            rule.next(30, &fast),
            30,
            "at the timeout, not past it: no change"
        );
    }

    /// AIMDLimitTest.testDefault, unchanged: `initialLimit(10)` under the default
    /// minimum 20 stands until the first sample.
    #[test]
    fn test_default() {
        let limit = AimdLimit::builder().initial_limit(10).build().unwrap();
        assert_eq!(limit.limit(), 10);
    }

    /// An initial limit outside the bounds is clamped by the first sample, as
    /// upstream's `_update` clamps whatever it computes.
    #[test]
    fn an_initial_limit_outside_the_bounds_is_clamped_at_the_first_sample() {
        let mut low = AimdLimit::builder().initial_limit(10).build().unwrap();
        assert_eq!(
            low.on_sample(sample(Duration::from_millis(1), 10, false)),
            20
        );
        let mut high = AimdLimit::builder().initial_limit(500).build().unwrap();
        // ⌊500 × 0.9⌋ = 450, clamped to the maximum 200.
        assert_eq!(high.on_sample(sample(Duration::ZERO, 0, true)), 200);
    }

    /// A minimum of 0 lets AIMD fall to 0; the next success, which a limiter
    /// holding the limit at 1 lets through, raises it again.
    #[test]
    fn a_minimum_of_zero_falls_to_zero_and_recovers() {
        let mut limit = AimdLimit::builder()
            .min_limit(0)
            .initial_limit(1)
            .build()
            .unwrap();
        assert_eq!(limit.on_sample(sample(Duration::ZERO, 1, true)), 0);
        assert_eq!(limit.on_sample(sample(Duration::ZERO, 1, false)), 1);
    }

    /// AIMDLimitTest.increaseOnSuccess.
    #[test]
    fn increase_on_success() {
        let mut limit = AimdLimit::builder().initial_limit(20).build().unwrap();
        limit.on_sample(sample(Duration::from_millis(1), 10, false));
        assert_eq!(limit.limit(), 21);
    }

    /// AIMDLimitTest.decreaseOnDrops.
    #[test]
    fn decrease_on_drops() {
        let mut limit = AimdLimit::builder().initial_limit(30).build().unwrap();
        limit.on_sample(sample(Duration::ZERO, 0, true));
        assert_eq!(limit.limit(), 27);
    }

    /// AIMDLimitTest.successOverflow, unchanged (`minLimit(0)` included).
    #[test]
    fn success_overflow() {
        let mut limit = AimdLimit::builder()
            .initial_limit(21)
            .max_limit(21)
            .min_limit(0)
            .build()
            .unwrap();
        limit.on_sample(sample(Duration::from_millis(1), 10, false));
        // after success limit should still be at the max.
        assert_eq!(limit.limit(), 21);
    }

    #[test]
    fn timeout_counts_as_a_drop_and_idle_does_not_grow() {
        let mut limit = AimdLimit::builder()
            .initial_limit(100)
            .timeout(Duration::from_millis(10))
            .build()
            .unwrap();
        assert_eq!(
            limit.on_sample(sample(Duration::from_millis(10), 50, false)),
            101
        );
        assert_eq!(
            limit.on_sample(sample(Duration::from_millis(11), 50, false)),
            90
        );
        // 44 × 2 < 90: app-limited, no growth.
        assert_eq!(
            limit.on_sample(sample(Duration::from_millis(1), 44, false)),
            90
        );
    }

    #[test]
    fn builder_rejects_bad_settings() {
        let b = AimdLimit::builder;
        assert_eq!(
            b().backoff_ratio(0.49).build().unwrap_err().parameter(),
            "backoff_ratio"
        );
        assert_eq!(
            b().backoff_ratio(1.0).build().unwrap_err().parameter(),
            "backoff_ratio"
        );
        assert_eq!(
            b().backoff_ratio(f64::INFINITY).build().unwrap_err(),
            ConfigError::Infinite {
                parameter: "backoff_ratio"
            }
        );
        assert_eq!(
            b().timeout(Duration::ZERO).build().unwrap_err(),
            ConfigError::Zero {
                parameter: "timeout"
            }
        );
        assert_eq!(
            b().min_limit(300).build().unwrap_err().parameter(),
            "min_limit"
        );
        assert_eq!(
            b().min_limit(0)
                .max_limit(0)
                .build()
                .unwrap_err()
                .parameter(),
            "max_limit"
        );
        assert!(b().initial_limit(201).build().is_ok());
        assert!(b().initial_limit(0).min_limit(0).build().is_ok());
    }

    #[test]
    fn extremes_stay_within_bounds() {
        let mut limit = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(1)
            .max_limit(u64::MAX)
            .build()
            .unwrap();
        for _ in 0..3 {
            limit.on_sample(sample(Duration::ZERO, u64::MAX, false));
        }
        assert_eq!(limit.limit(), 4);
        limit.on_sample(sample(Duration::MAX, u64::MAX, false));
        assert_eq!(limit.limit(), 3);
        let mut top = AimdLimit::builder()
            .min_limit(u64::MAX)
            .initial_limit(u64::MAX)
            .max_limit(u64::MAX)
            .build()
            .unwrap();
        assert_eq!(
            top.on_sample(sample(Duration::ZERO, u64::MAX, false)),
            u64::MAX
        );
        assert_eq!(top.on_sample(sample(Duration::MAX, 0, true)), u64::MAX);
        let mut floor = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(1)
            .build()
            .unwrap();
        assert_eq!(floor.on_sample(sample(Duration::MAX, 0, true)), 1);
        assert_eq!(floor.on_sample(sample(Duration::ZERO, 0, false)), 1);
        assert_eq!(floor.on_sample(sample(Duration::ZERO, 1, false)), 2);
    }
}
