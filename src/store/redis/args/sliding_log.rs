//! Sliding log: `{limit, window µs, min_gap µs, count_blocked (1 or 0)}`.

use super::{whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::SlidingLog;
use crate::error::ConfigError;

/// The largest limit the script runs. Its log holds up to `2 × limit` timestamps and
/// every request parses and rewrites the whole log, about 0.7 µs of script time per
/// entry (Redis 7.0, measured on a loaded 2-core machine), while Redis serves no one
/// else. This caps a request at 2,000 entries: about 1.5 ms and 20 KB in the worst
/// case of one entry per distinct µs, far less when permits share timestamps. (The
/// script treats a longer log as another rule's state.)
pub(super) const MAX_SCRIPT_LIMIT: u64 = 1_000;

/// The rule's parameters, or why the script cannot run it exactly.
///
/// Reservations book entries ahead, each at most `max(window, min_gap)` after the
/// newest, and at most `2 × limit` of them stand unexpired: `(2 × limit + 1) ×
/// max(window, min_gap)` is held to 2^52 µs so that every timestamp stays exact.
pub(super) fn args(log: &SlidingLog) -> Result<Vec<Arg>, ConfigError> {
    let window = whole_micros(log.window(), "window")?;
    let min_gap = whole_micros(log.minimum_gap(), "min_gap")?;
    let limit = log.limit();
    if limit > MAX_SCRIPT_LIMIT {
        return Err(ConfigError::OutOfRange {
            parameter: "limit",
            expected: "at most 1,000 in the Redis store (its log is one string of up to \
                       2 × limit timestamps, parsed on every request)",
        });
    }
    let (span, parameter) = if min_gap > window {
        (min_gap, "min_gap")
    } else {
        (window, "window")
    };
    (2 * limit + 1)
        .checked_mul(span)
        .filter(|&horizon| horizon <= MAX_SCRIPT_MICROS)
        .ok_or(ConfigError::Overflow { parameter })?;
    Ok(vec![
        Arg::Int(limit),
        Arg::Int(window),
        Arg::Int(min_gap),
        Arg::Int(u64::from(log.counts_blocked())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn log(limit: u64, window: Duration) -> SlidingLog {
        SlidingLog::new(limit, window).unwrap()
    }

    #[test]
    fn whole_microsecond_parameters_convert() {
        let plain = log(10, Duration::from_secs(1));
        assert_eq!(
            args(&plain),
            Ok(vec![
                Arg::Int(10),
                Arg::Int(1_000_000),
                Arg::Int(0),
                Arg::Int(0)
            ])
        );
        let full = plain
            .min_gap(Duration::from_millis(5))
            .unwrap()
            .count_blocked(true);
        assert_eq!(
            args(&full),
            Ok(vec![
                Arg::Int(10),
                Arg::Int(1_000_000),
                Arg::Int(5_000),
                Arg::Int(1)
            ])
        );
    }

    #[test]
    fn sub_microsecond_durations_are_rejected() {
        let window = log(3, Duration::from_nanos(1_500));
        assert!(matches!(
            args(&window),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let gap = log(3, Duration::from_secs(1))
            .min_gap(Duration::from_nanos(999))
            .unwrap();
        assert!(matches!(
            args(&gap),
            Err(ConfigError::OutOfRange {
                parameter: "min_gap",
                ..
            })
        ));
    }

    #[test]
    fn limits_above_the_script_bound_are_rejected() {
        assert!(args(&log(MAX_SCRIPT_LIMIT, Duration::from_secs(60))).is_ok());
        assert!(matches!(
            args(&log(MAX_SCRIPT_LIMIT + 1, Duration::from_secs(60))),
            Err(ConfigError::OutOfRange {
                parameter: "limit",
                ..
            })
        ));
    }

    #[test]
    fn booking_horizons_beyond_two_to_the_52_micros_are_rejected() {
        // 3 × span for a limit of 1.
        let fits = Duration::from_micros(MAX_SCRIPT_MICROS / 3);
        assert!(args(&log(1, fits)).is_ok());
        let too_far = fits + Duration::from_micros(1);
        assert_eq!(
            args(&log(1, too_far)),
            Err(ConfigError::Overflow {
                parameter: "window"
            })
        );
        let gap = log(1, Duration::from_secs(1)).min_gap(too_far).unwrap();
        assert_eq!(
            args(&gap),
            Err(ConfigError::Overflow {
                parameter: "min_gap"
            })
        );
        // A year's window holds a limit of 70, not 71.
        let year = Duration::from_secs(365 * 86_400);
        assert!(args(&log(70, year)).is_ok());
        assert!(args(&log(71, year)).is_err());
    }
}
