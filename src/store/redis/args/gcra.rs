//! GCRA: `{interval µs, tolerance µs, burst}`.

use super::{whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::{Algorithm, Gcra};
use crate::error::ConfigError;

pub(super) fn args(gcra: &Gcra) -> Result<Vec<Arg>, ConfigError> {
    let interval = whole_micros(gcra.emission_interval(), "interval")?;
    let overflow = ConfigError::Overflow { parameter: "burst" };
    let tolerance = interval
        .checked_mul(gcra.capacity())
        .filter(|&t| t <= MAX_SCRIPT_MICROS)
        .ok_or(overflow)?;
    Ok(vec![
        Arg::Int(interval),
        Arg::Int(tolerance),
        Arg::Int(gcra.capacity()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;
    use std::time::Duration;

    #[test]
    fn whole_microsecond_intervals_convert() {
        let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
        assert_eq!(
            args(&gcra),
            Ok(vec![Arg::Int(100_000), Arg::Int(300_000), Arg::Int(3)])
        );
    }

    #[test]
    fn sub_microsecond_interval_is_rejected() {
        let gcra = Gcra::new(Quota::per_second(3).unwrap());
        assert!(matches!(
            args(&gcra),
            Err(ConfigError::OutOfRange {
                parameter: "interval",
                ..
            })
        ));
    }

    #[test]
    fn tolerance_beyond_two_to_the_52_micros_is_rejected() {
        let interval = Duration::from_secs(1 << 32);
        let fits = Gcra::new(Quota::with_period(interval).unwrap().burst(1).unwrap());
        assert!(args(&fits).is_ok());
        let huge = Gcra::new(Quota::with_period(interval).unwrap().burst(2).unwrap());
        assert_eq!(
            args(&huge),
            Err(ConfigError::Overflow { parameter: "burst" })
        );
    }
}
