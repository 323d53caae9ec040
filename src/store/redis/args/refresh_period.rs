//! Resilience4j's refresh period: `{period µs, limit per period, capacity}`.
//!
//! The timeout is not sent: a store's reservations wait up to the request's own
//! `max_wait`.

use super::{exact_count, whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::{Algorithm, RefreshPeriod};
use crate::error::ConfigError;

pub(super) fn args(rule: &RefreshPeriod) -> Result<Vec<Arg>, ConfigError> {
    let period = whole_micros(rule.refresh_period(), "refresh_period")?;
    let limit = exact_count(rule.limit_for_period(), "limit_for_period")?;
    // A grant waits at most 2^52 µs (the script's cap on `max_wait`), so reservations
    // book at most ⌈2^52 µs / period⌉ cycles ahead: the deepest debt. The script
    // counts it exactly up to 2^53.
    let deepest_debt = MAX_SCRIPT_MICROS
        .div_ceil(period)
        .checked_mul(limit)
        .filter(|&debt| debt <= 2 * MAX_SCRIPT_MICROS);
    if deepest_debt.is_none() {
        return Err(ConfigError::OutOfRange {
            parameter: "limit_for_period",
            expected: "such that limit_for_period × ⌈2^52 µs / refresh_period⌉, the \
                       deepest debt the Redis script counts, is at most 2^53 (about 2 \
                       permits per µs)",
        });
    }
    // A request asks for at most 2^52 permits, so a larger capacity never denies.
    let capacity = rule.capacity().min(MAX_SCRIPT_MICROS);
    Ok(vec![Arg::Int(period), Arg::Int(limit), Arg::Int(capacity)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rule(limit: u64, period: Duration) -> RefreshPeriod {
        RefreshPeriod::new(limit, period, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn whole_microsecond_periods_convert() {
        let r = rule(10, Duration::from_millis(250));
        assert_eq!(
            args(&r),
            Ok(vec![
                Arg::Int(250_000),
                Arg::Int(10),
                Arg::Int(r.capacity())
            ])
        );
        let fast = rule(1, Duration::from_micros(1));
        assert_eq!(args(&fast).unwrap()[2], Arg::Int(MAX_SCRIPT_MICROS));
    }

    #[test]
    fn sub_microsecond_period_is_rejected() {
        let r = rule(1, Duration::from_nanos(2_500));
        assert!(matches!(
            args(&r),
            Err(ConfigError::OutOfRange {
                parameter: "refresh_period",
                ..
            })
        ));
    }

    #[test]
    fn period_beyond_two_to_the_52_micros_is_rejected() {
        let r = rule(1, Duration::from_micros((1 << 52) + 1));
        assert_eq!(
            args(&r),
            Err(super::super::too_long("refresh_period", MAX_SCRIPT_MICROS))
        );
    }

    #[test]
    fn a_debt_beyond_two_to_the_53_is_rejected() {
        for fits in [
            rule(1_000_000, Duration::from_secs(1)),
            rule(1_000, Duration::from_millis(1)),
            rule(1, Duration::from_micros(1)),
            rule(2, Duration::from_micros(1)),
            rule(1 << 52, Duration::from_micros(1 << 52)),
        ] {
            assert!(args(&fits).is_ok(), "{fits:?}");
        }
        let too_fast = [
            rule(2_000_000, Duration::from_secs(1)),
            rule(3, Duration::from_micros(1)),
        ];
        for r in too_fast {
            assert!(
                matches!(
                    args(&r),
                    Err(ConfigError::OutOfRange {
                        parameter: "limit_for_period",
                        ..
                    })
                ),
                "{r:?}"
            );
        }
    }

    #[test]
    fn a_limit_beyond_two_to_the_52_is_rejected() {
        for limit in [(1 << 52) + 1, i64::MAX as u64] {
            let r = rule(limit, Duration::from_micros(1 << 52));
            assert_eq!(
                args(&r),
                Err(ConfigError::Overflow {
                    parameter: "limit_for_period"
                })
            );
        }
    }
}
