//! The parameter checks the limit algorithms' builders share.

use std::time::Duration;

use crate::error::ConfigError;

/// Checks the limits as upstream takes them: any initial limit (the first sample
/// brings it into `[min, max]`), any minimum, 0 included (an enforcing limiter
/// holds a limit of 0 at 1, so the next sample raises it). Refused, each with the
/// reason in its words: a minimum above the maximum (upstream then pins the limit
/// to the maximum and the minimum means nothing) and a maximum of 0 (the limit
/// could never rise above what a limiter holds it at).
pub(crate) fn limits(min: u64, max: u64) -> Result<(), ConfigError> {
    if max == 0 {
        return Err(ConfigError::OutOfRange {
            parameter: "max_limit",
            expected: "at least 1: a limit of at most 0 admits nothing and never adapts",
        });
    }
    if min > max {
        return Err(ConfigError::OutOfRange {
            parameter: "min_limit",
            expected: "at most max_limit: above it the limit is pinned to max_limit",
        });
    }
    Ok(())
}

/// Checks that `value` is a number for which `ok` holds; `expected` says which, in
/// words.
pub(crate) fn ratio(
    parameter: &'static str,
    value: f64,
    ok: impl Fn(f64) -> bool,
    expected: &'static str,
) -> Result<f64, ConfigError> {
    if value.is_nan() {
        Err(ConfigError::NotANumber { parameter })
    } else if value.is_infinite() {
        Err(ConfigError::Infinite { parameter })
    } else if !ok(value) {
        Err(ConfigError::OutOfRange {
            parameter,
            expected,
        })
    } else {
        Ok(value)
    }
}

/// A smoothing factor: in `(0, 1]`, where 1 takes each new estimate whole and 0
/// would never move.
pub(crate) fn smoothing(value: f64) -> Result<f64, ConfigError> {
    ratio(
        "smoothing",
        value,
        |s| s > 0.0 && s <= 1.0,
        "in (0, 1]: at 0 the limit never moves, above 1 it overshoots each estimate",
    )
}

/// An RTT tolerance: at least 1, the factor of latency growth accepted as no
/// queueing.
pub(crate) fn tolerance(value: f64) -> Result<f64, ConfigError> {
    ratio("rtt_tolerance", value, |t| t >= 1.0, "at least 1")
}

/// A window length of at least `floor`.
pub(crate) fn at_least(
    parameter: &'static str,
    value: Duration,
    floor: Duration,
    expected: &'static str,
) -> Result<Duration, ConfigError> {
    if value.is_zero() {
        Err(ConfigError::Zero { parameter })
    } else if value < floor {
        Err(ConfigError::OutOfRange {
            parameter,
            expected,
        })
    } else {
        Ok(value)
    }
}

/// A limit kept as `f64` clamped into `[min, max]`; NaN (from a user's function)
/// keeps `current`.
pub(crate) fn clamp(value: f64, min: u64, max: u64, current: f64) -> f64 {
    if value.is_nan() {
        return current;
    }
    value.min(max as f64).max(min as f64)
}

/// The nanoseconds of `d` as `f64`, the unit upstream's arithmetic works in.
pub(crate) fn nanos_f64(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// The integer part of a limit kept as `f64`, as Java's `(int)` cast takes it
/// (saturating, NaN as 0).
pub(crate) fn whole(limit: f64) -> u64 {
    limit as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream accepts any initial limit and a minimum of 0; only a minimum
    /// above the maximum, or a maximum of 0, cannot work.
    #[test]
    fn limits_take_what_upstream_takes() {
        assert_eq!(limits(0, 1), Ok(()));
        assert_eq!(limits(1, 1), Ok(()));
        assert_eq!(limits(0, 0).unwrap_err().parameter(), "max_limit");
        assert_eq!(limits(3, 2).unwrap_err().parameter(), "min_limit");
    }

    #[test]
    fn ratios_name_nan_and_infinity() {
        assert_eq!(
            smoothing(f64::NAN),
            Err(ConfigError::NotANumber {
                parameter: "smoothing"
            })
        );
        assert_eq!(
            tolerance(f64::INFINITY),
            Err(ConfigError::Infinite {
                parameter: "rtt_tolerance"
            })
        );
        assert_eq!(smoothing(0.0).unwrap_err().parameter(), "smoothing");
        assert_eq!(smoothing(1.0), Ok(1.0));
        assert_eq!(tolerance(0.99).unwrap_err().parameter(), "rtt_tolerance");
    }

    #[test]
    fn clamp_keeps_the_current_limit_for_nan() {
        assert_eq!(clamp(f64::NAN, 1, 10, 5.5), 5.5);
        assert_eq!(clamp(f64::INFINITY, 1, 10, 5.5), 10.0);
        assert_eq!(clamp(f64::NEG_INFINITY, 1, 10, 5.5), 1.0);
        assert_eq!(whole(f64::NAN), 0);
        assert_eq!(whole(1e30), u64::MAX);
    }
}
