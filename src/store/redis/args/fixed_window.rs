//! Fixed windows: aligned `{limit, window µs, offset µs}`, first hit `{limit, window µs}`.

use std::time::Duration;

use super::{exact_count, whole_micros, Arg};
use crate::algorithm::{Aligned, FirstHit, FixedWindow};
use crate::error::ConfigError;

pub(super) fn args_aligned(rule: &FixedWindow<Aligned>) -> Result<Vec<Arg>, ConfigError> {
    // The offset has no accessor of its own; the config words carry it.
    let offset = Duration::from_nanos(rule.words()[2]);
    Ok(vec![
        Arg::Int(exact_count(rule.limit(), "limit")?),
        Arg::Int(whole_micros(rule.window(), "window")?),
        Arg::Int(whole_micros(offset, "offset")?),
    ])
}

pub(super) fn args_first_hit(rule: &FixedWindow<FirstHit>) -> Result<Vec<Arg>, ConfigError> {
    Ok(vec![
        Arg::Int(exact_count(rule.limit(), "limit")?),
        Arg::Int(whole_micros(rule.window(), "window")?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_windows_convert_with_their_offset() {
        let fw = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
        assert_eq!(
            args_aligned(&fw),
            Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(0)])
        );
        let shifted = fw.aligned_to_unix_epoch(Duration::from_millis(1_700_000_000_300));
        assert_eq!(
            args_aligned(&shifted),
            Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(300_000)])
        );
    }

    #[test]
    fn first_hit_windows_convert() {
        let fw = FixedWindow::from_first_hit(3, Duration::from_millis(250)).unwrap();
        assert_eq!(
            args_first_hit(&fw),
            Ok(vec![Arg::Int(3), Arg::Int(250_000)])
        );
    }

    #[test]
    fn sub_microsecond_window_or_offset_is_rejected() {
        let window = Duration::from_nanos(1_500);
        let aligned = FixedWindow::new(1, window).unwrap();
        assert!(matches!(
            args_aligned(&aligned),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let first_hit = FixedWindow::from_first_hit(1, window).unwrap();
        assert!(matches!(
            args_first_hit(&first_hit),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
        let shifted = FixedWindow::new(1, Duration::from_secs(1))
            .unwrap()
            .aligned_to_unix_epoch(Duration::from_nanos(1_700_000_000_000_000_500));
        assert!(matches!(
            args_aligned(&shifted),
            Err(ConfigError::OutOfRange {
                parameter: "offset",
                ..
            })
        ));
    }

    #[test]
    fn windows_beyond_two_to_the_52_micros_are_rejected() {
        let fits = Duration::from_secs(1 << 32);
        assert!(args_aligned(&FixedWindow::new(1, fits).unwrap()).is_ok());
        let huge = Duration::from_secs(1 << 33);
        let overflow = Err(super::super::too_long(
            "window",
            super::super::MAX_SCRIPT_MICROS,
        ));
        assert_eq!(args_aligned(&FixedWindow::new(1, huge).unwrap()), overflow);
        assert_eq!(
            args_first_hit(&FixedWindow::from_first_hit(1, huge).unwrap()),
            overflow
        );
    }

    #[test]
    fn first_hit_limit_beyond_two_to_the_52_is_rejected() {
        let second = Duration::from_secs(1);
        let largest = FixedWindow::from_first_hit(1 << 52, second).unwrap();
        assert!(args_first_hit(&largest).is_ok());
        let huge = FixedWindow::from_first_hit((1 << 52) + 1, second).unwrap();
        assert_eq!(
            args_first_hit(&huge),
            Err(ConfigError::Overflow { parameter: "limit" })
        );
    }
}
