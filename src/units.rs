//! Saturating time arithmetic shared by the clock and the algorithms: conversions
//! between [`Duration`], `u64` nanoseconds and wider integers, and where period
//! boundaries fall.
//!
//! Decisions never fail on arithmetic: a result past what a `u64` of nanoseconds holds
//! (584 years) saturates. Parameters are the exception: one that does not fit is a
//! [`ConfigError`] at construction.

use std::time::Duration;

use crate::error::{ConfigError, non_zero};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The longest time a parameter may span: the clock's range, `u64::MAX` nanoseconds
/// (about 584 years).
pub(crate) const LONGEST: Duration = Duration::from_nanos(u64::MAX);

/// What [`LONGEST`] bounds, in a [`ConfigError::TooLong`]'s words.
pub(crate) const CLOCK_RANGE: &str = "the clock's range (u64 nanoseconds)";

/// The error of a parameter longer than [`LONGEST`].
pub(crate) const fn too_long(parameter: &'static str) -> ConfigError {
    ConfigError::TooLong {
        parameter,
        max: LONGEST,
        within: CLOCK_RANGE,
    }
}

/// Whole nanoseconds of `d`, saturating at `u64::MAX` (584 years).
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    saturating_u64(d.as_nanos())
}

/// Whole nanoseconds of the parameter `d`.
///
/// # Errors
///
/// [`ConfigError::TooLong`] past `u64::MAX` nanoseconds.
pub(crate) fn nanos_of(parameter: &'static str, d: Duration) -> Result<u64, ConfigError> {
    u64::try_from(d.as_nanos()).map_err(|_| too_long(parameter))
}

/// Whole nanoseconds of the parameter `d`, at least one: a window or period length.
///
/// # Errors
///
/// [`ConfigError::Zero`] for zero, [`ConfigError::TooLong`] past `u64::MAX`
/// nanoseconds.
pub(crate) fn positive_nanos(parameter: &'static str, d: Duration) -> Result<u64, ConfigError> {
    non_zero(parameter, nanos_of(parameter, d)?)
}

/// `x`, or `u64::MAX` if it does not fit.
pub(crate) fn saturating_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// `x`, or the nearest end of `i64`'s range if it does not fit.
pub(crate) fn saturating_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

/// A nanosecond count as a [`Duration`]: zero if not positive, [`Duration::MAX`] if
/// too long. Unlike a `u64`, it reaches past 584 years.
pub(crate) fn duration_from_nanos(x: i128) -> Duration {
    let Ok(x) = u128::try_from(x) else {
        return Duration::ZERO;
    };
    match u64::try_from(x / NANOS_PER_SECOND) {
        // The remainder is below 10^9, so it fits a u32.
        Ok(secs) => Duration::new(secs, (x % NANOS_PER_SECOND) as u32),
        Err(_) => Duration::MAX,
    }
}

/// Nanoseconds from `now` until `at`, zero once it has come; until the clock's last
/// instant when `at` lies past it (`None`): the wait of what never happens on this
/// clock.
pub(crate) fn until(at: Option<u64>, now: u64) -> u64 {
    at.map_or(u64::MAX - now, |at| at.saturating_sub(now))
}

/// Nanoseconds from `elapsed` to the start of period `index`, where period `k` starts
/// at `k × length`; zero once it has started. Saturates.
pub(crate) fn until_period(length: u64, elapsed: u128, index: u128) -> u128 {
    index
        .saturating_mul(u128::from(length))
        .saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_saturate() {
        assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
        assert_eq!(duration_to_nanos(Duration::from_nanos(7)), 7);
        assert_eq!(saturating_u64(u128::MAX), u64::MAX);
        assert_eq!(saturating_i64(i128::MIN), i64::MIN);
        assert_eq!(saturating_i64(i128::MAX), i64::MAX);
        assert_eq!(saturating_i64(-3), -3);
    }

    #[test]
    fn wide_nanos_reach_past_584_years() {
        assert_eq!(duration_from_nanos(-5), Duration::ZERO);
        assert_eq!(
            duration_from_nanos(1_500_000_000),
            Duration::from_millis(1500)
        );
        let past_u64 = i128::from(u64::MAX) * 2;
        assert_eq!(duration_from_nanos(past_u64).as_nanos(), past_u64 as u128);
        assert_eq!(duration_from_nanos(i128::MAX), Duration::MAX);
    }

    #[test]
    fn parameters_that_do_not_fit_are_errors() {
        assert_eq!(nanos_of("gap", Duration::MAX), Err(too_long("gap")));
        assert_eq!(nanos_of("gap", LONGEST), Ok(u64::MAX));
        assert_eq!(
            nanos_of("gap", LONGEST + Duration::from_nanos(1)),
            Err(too_long("gap"))
        );
        assert_eq!(nanos_of("gap", Duration::ZERO), Ok(0));
        assert_eq!(
            positive_nanos("window", Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "window"
            })
        );
        assert_eq!(
            positive_nanos("window", Duration::from_nanos(u64::MAX)),
            Ok(u64::MAX)
        );
    }

    #[test]
    fn a_time_past_the_clocks_end_is_waited_for_until_the_end() {
        assert_eq!(until(Some(10), 3), 7);
        assert_eq!(until(Some(3), 10), 0);
        assert_eq!(until(None, 10), u64::MAX - 10);
    }

    #[test]
    fn period_starts() {
        assert_eq!(until_period(100, 250, 3), 50);
        assert_eq!(until_period(100, 250, 2), 0);
        assert_eq!(until_period(u64::MAX, 0, u128::MAX), u128::MAX);
    }
}
