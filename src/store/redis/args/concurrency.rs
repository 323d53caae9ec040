//! Leased concurrency: `{max, lease µs}`.

use super::{exact_count, whole_micros, Arg};
use crate::algorithm::Leased;
use crate::error::ConfigError;

pub(super) fn args(rule: &Leased) -> Result<Vec<Arg>, ConfigError> {
    let max = exact_count(rule.limit().max(), "max")?;
    let lease = whole_micros(rule.lease(), "lease")?;
    Ok(vec![Arg::Int(max), Arg::Int(lease)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Concurrency;
    use std::time::Duration;

    fn leased(max: u64, lease: Duration) -> Leased {
        Leased::new(Concurrency::new(max).unwrap(), lease).unwrap()
    }

    #[test]
    fn whole_microsecond_leases_convert() {
        let rule = leased(5, Duration::from_millis(1_500));
        assert_eq!(args(&rule), Ok(vec![Arg::Int(5), Arg::Int(1_500_000)]));
    }

    #[test]
    fn sub_microsecond_lease_is_rejected() {
        let rule = leased(5, Duration::from_nanos(1_500));
        assert!(matches!(
            args(&rule),
            Err(ConfigError::OutOfRange {
                parameter: "lease",
                ..
            })
        ));
    }

    #[test]
    fn lease_beyond_two_to_the_52_micros_is_rejected() {
        let fits = leased(1, Duration::from_micros(1 << 52));
        assert!(args(&fits).is_ok());
        let huge = leased(1, Duration::from_micros((1 << 52) + 1));
        assert_eq!(args(&huge), Err(super::super::too_long("lease", 1 << 52)));
    }

    /// Regression: the longest lease the clock holds, which is not a whole number of
    /// µs, was rejected as "not a whole number of microseconds" instead of as too long
    /// for the Redis arithmetic.
    #[test]
    fn a_lease_too_long_for_redis_says_so_and_gives_the_longest() {
        let longest = leased(1, Duration::from_nanos(u64::MAX));
        let e = args(&longest).unwrap_err();
        assert_eq!(e, super::super::too_long("lease", 1 << 52));
        let text = e.to_string();
        assert!(
            text.starts_with("lease is too long for the Redis scripts' arithmetic"),
            "{text}"
        );
        assert!(
            text.contains("4503599627.370496s (about 142 years)"),
            "{text}"
        );
    }

    #[test]
    fn max_beyond_two_to_the_52_is_rejected() {
        let fits = leased(1 << 52, Duration::from_secs(1));
        assert!(args(&fits).is_ok());
        let huge = leased((1 << 52) + 1, Duration::from_secs(1));
        assert_eq!(args(&huge), Err(ConfigError::Overflow { parameter: "max" }));
    }
}
