//! Validated rates: how many permits per period, and how many at once.

use std::time::Duration;

use crate::error::{ConfigError, non_zero};
use crate::units::{LONGEST, nanos_of};

/// `count` permits per `period`, with up to `burst` at one instant.
///
/// Built only through constructors that validate, so a `Quota` always describes a
/// limiter that limits: no zero rate, no zero period, no interval shorter than a
/// nanosecond, no burst whose duration overflows.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::Quota;
///
/// let quota = Quota::per_second(100)?.burst(20)?;
/// assert_eq!(quota.count(), 100);
/// assert_eq!(quota.burst_size(), 20);
/// assert_eq!(quota.emission_interval(), Duration::from_millis(10));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
///
/// # Errors
///
/// Every constructor returns [`ConfigError`] for a count or period of zero, for more
/// than one permit per nanosecond, for a period beyond [`Quota::MAX_PERIOD`], and for
/// values whose products overflow.
///
/// # At the end of the clock
///
/// A limiter's state is a time on its clock, which ends at
/// [`Nanos::MAX`](crate::time::Nanos::MAX), 584 years after the clock's origin. A request
/// whose permits would reach past that end is denied, never admitted early: a quota of
/// one per 500 years admits once, and nothing more on that clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u64,
    period: Duration,
    burst: u64,
    /// `period / count`, rounded up so that rounding never admits more than the quota.
    interval_nanos: u64,
}

impl Quota {
    /// The longest period: `u64::MAX` nanoseconds (about 584 years), the clock's range.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{ConfigError, Quota};
    ///
    /// assert!(Quota::new(1, Quota::MAX_PERIOD).is_ok());
    /// let longer = Quota::MAX_PERIOD + Duration::from_nanos(1);
    /// assert!(matches!(
    ///     Quota::new(1, longer),
    ///     Err(ConfigError::TooLong { parameter: "period", max: Quota::MAX_PERIOD, .. })
    /// ));
    /// ```
    pub const MAX_PERIOD: Duration = LONGEST;

    /// `count` permits per `period`; the burst defaults to `count`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `count` or `period` is zero,
    /// [`ConfigError::OutOfRange`] if `count` exceeds one per nanosecond of `period`,
    /// [`ConfigError::TooLong`] if `period` exceeds [`Quota::MAX_PERIOD`].
    pub fn new(count: u64, period: Duration) -> Result<Quota, ConfigError> {
        let count = non_zero("count", count)?;
        if period.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "period",
            });
        }
        let period_nanos = nanos_of("period", period)?;
        if count > period_nanos {
            return Err(ConfigError::OutOfRange {
                parameter: "count",
                expected: "at most one per nanosecond of the period",
            });
        }
        let quota = Quota {
            count,
            period,
            burst: count,
            interval_nanos: period_nanos.div_ceil(count),
        };
        quota.check_burst()?;
        Ok(quota)
    }

    /// `count` permits per second.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_second(count: u64) -> Result<Quota, ConfigError> {
        Quota::new(count, Duration::from_secs(1))
    }

    /// `count` permits per minute.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_minute(count: u64) -> Result<Quota, ConfigError> {
        Quota::new(count, Duration::from_secs(60))
    }

    /// `count` permits per hour.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_hour(count: u64) -> Result<Quota, ConfigError> {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// `count` permits per day.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn per_day(count: u64) -> Result<Quota, ConfigError> {
        Quota::new(count, Duration::from_secs(86_400))
    }

    /// One permit every `interval`, with a burst of one.
    ///
    /// # Errors
    ///
    /// As [`Quota::new`].
    pub fn with_period(interval: Duration) -> Result<Quota, ConfigError> {
        Quota::new(1, interval)
    }

    /// The same rate, with up to `burst` permits at one instant.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a burst of zero, [`ConfigError::Overflow`] if
    /// `burst` intervals exceed 584 years.
    pub fn burst(self, burst: u64) -> Result<Quota, ConfigError> {
        let quota = Quota {
            burst: non_zero("burst", burst)?,
            ..self
        };
        quota.check_burst()?;
        Ok(quota)
    }

    fn check_burst(&self) -> Result<(), ConfigError> {
        self.interval_nanos
            .checked_mul(self.burst)
            .map(|_| ())
            .ok_or(ConfigError::Overflow { parameter: "burst" })
    }

    /// Permits per period.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// The period over which `count` permits are granted.
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// The most permits granted at one instant.
    pub const fn burst_size(&self) -> u64 {
        self.burst
    }

    /// The time one permit takes to replenish: `period / count`, rounded up to whole
    /// nanoseconds.
    pub const fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.interval_nanos)
    }

    pub(crate) const fn interval_nanos(&self) -> u64 {
        self.interval_nanos
    }

    /// Permits per second, as a float.
    pub fn per_second_f64(&self) -> f64 {
        self.count as f64 / self.period.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_count_is_an_error() {
        assert_eq!(
            Quota::per_second(0),
            Err(ConfigError::Zero { parameter: "count" })
        );
    }

    #[test]
    fn zero_period_is_an_error() {
        assert_eq!(
            Quota::with_period(Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "period"
            })
        );
    }

    #[test]
    fn zero_burst_is_an_error() {
        assert_eq!(
            Quota::per_second(1).unwrap().burst(0),
            Err(ConfigError::Zero { parameter: "burst" })
        );
    }

    #[test]
    fn more_than_one_per_nanosecond_is_an_error() {
        assert!(matches!(
            Quota::new(2, Duration::from_nanos(1)),
            Err(ConfigError::OutOfRange {
                parameter: "count",
                ..
            })
        ));
        assert!(Quota::new(1, Duration::from_nanos(1)).is_ok());
    }

    #[test]
    fn a_period_past_the_clocks_range_is_an_error_naming_the_longest() {
        let e = Quota::with_period(Duration::MAX).unwrap_err();
        assert_eq!(e, crate::units::too_long("period"));
        assert!(
            e.to_string()
                .contains("18446744073.709551615s (about 584 years)"),
            "{e}"
        );
        assert!(Quota::with_period(Quota::MAX_PERIOD).is_ok());
    }

    #[test]
    fn overflowing_burst_is_an_error() {
        assert_eq!(
            Quota::per_day(1).unwrap().burst(u64::MAX),
            Err(ConfigError::Overflow { parameter: "burst" })
        );
    }

    #[test]
    fn interval_rounds_up_so_it_never_over_admits() {
        let q = Quota::per_second(3).unwrap();
        assert_eq!(q.emission_interval(), Duration::from_nanos(333_333_334));
        assert!(q.interval_nanos() * 3 >= 1_000_000_000);
    }
}
