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
        assert_eq!(
            args(&huge),
            Err(ConfigError::Overflow { parameter: "lease" })
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
