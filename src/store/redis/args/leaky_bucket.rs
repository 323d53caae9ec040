//! Leaky bucket, as GCRA: `{interval µs, tolerance µs (interval × capacity), capacity}`.

use super::{exact_count, whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::{Algorithm, LeakyBucket};
use crate::error::ConfigError;

pub(super) fn args(bucket: &LeakyBucket) -> Result<Vec<Arg>, ConfigError> {
    let interval = whole_micros(bucket.drain_interval(), "interval")?;
    let capacity = exact_count(bucket.capacity(), "capacity")?;
    let tolerance = interval
        .checked_mul(capacity)
        .filter(|&t| t <= MAX_SCRIPT_MICROS)
        .ok_or(ConfigError::Overflow {
            parameter: "capacity",
        })?;
    Ok(vec![
        Arg::Int(interval),
        Arg::Int(tolerance),
        Arg::Int(capacity),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;
    use std::time::Duration;

    #[test]
    fn whole_microsecond_intervals_convert() {
        let bucket = LeakyBucket::new(3, Quota::per_second(10).unwrap()).unwrap();
        assert_eq!(
            args(&bucket),
            Ok(vec![Arg::Int(100_000), Arg::Int(300_000), Arg::Int(3)])
        );
    }

    #[test]
    fn sub_microsecond_interval_is_rejected() {
        let bucket = LeakyBucket::new(1, Quota::per_second(3).unwrap()).unwrap();
        assert!(matches!(
            args(&bucket),
            Err(ConfigError::OutOfRange {
                parameter: "interval",
                ..
            })
        ));
    }

    #[test]
    fn drain_time_beyond_two_to_the_52_micros_is_rejected() {
        let drain = Quota::with_period(Duration::from_secs(1 << 32)).unwrap();
        assert!(args(&LeakyBucket::new(1, drain).unwrap()).is_ok());
        assert_eq!(
            args(&LeakyBucket::new(2, drain).unwrap()),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
        let interval = Quota::with_period(Duration::from_secs(1 << 33)).unwrap();
        assert_eq!(
            args(&LeakyBucket::new(1, interval).unwrap()),
            Err(super::super::too_long("interval", MAX_SCRIPT_MICROS))
        );
    }

    #[test]
    fn capacity_beyond_two_to_the_52_is_rejected() {
        let micro = Quota::with_period(Duration::from_micros(1)).unwrap();
        let largest = LeakyBucket::new(1 << 52, micro).unwrap();
        assert_eq!(args(&largest).unwrap()[2], Arg::Int(1 << 52));
        assert_eq!(
            args(&LeakyBucket::new((1 << 52) + 1, micro).unwrap()),
            Err(ConfigError::Overflow {
                parameter: "capacity"
            })
        );
    }
}
