//! Sliding window counter: `{limit, window µs}`.

use super::{exact_count, whole_micros, Arg, MAX_SCRIPT_MICROS};
use crate::algorithm::SlidingCounter;
use crate::error::ConfigError;

/// The rule's parameters, or why the script cannot run it exactly.
///
/// The window is held to 2^51 µs, so that the end of the window after next (when a
/// state expires) stays below 2^53 µs; products of a count and the window may pass
/// 2^53 and the script computes them exactly by long multiplication.
///
/// Admissions, `remaining` and `reset_after` equal the in-process algorithm's.
/// `retry_after` can only be a whole µs in a reply, and the in-process one is the
/// earliest nanosecond at which the estimate fits: a weight of `spare × window /
/// previous` is rarely a whole µs (a window of 1 s, a previous count of 3). The
/// script answers the earliest whole µs instead, which is the in-process answer
/// rounded up to the µs, and equal to it whenever the window is a multiple of every
/// count from 1 to the limit. Rejecting every other configuration would reject
/// three per second, so they run, and a retry at the script's time always fits.
pub(super) fn args(counter: &SlidingCounter) -> Result<Vec<Arg>, ConfigError> {
    let window = whole_micros(counter.window(), "window")?;
    if window > MAX_SCRIPT_MICROS / 2 {
        return Err(super::too_long("window", MAX_SCRIPT_MICROS / 2));
    }
    let limit = exact_count(counter.limit(), "limit")?;
    Ok(vec![Arg::Int(limit), Arg::Int(window)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn counter(limit: u64, window: Duration) -> SlidingCounter {
        SlidingCounter::new(limit, window).unwrap()
    }

    #[test]
    fn whole_microsecond_windows_convert() {
        assert_eq!(
            args(&counter(50, Duration::from_secs(60))),
            Ok(vec![Arg::Int(50), Arg::Int(60_000_000)])
        );
    }

    #[test]
    fn sub_microsecond_windows_are_rejected() {
        assert!(matches!(
            args(&counter(3, Duration::from_nanos(2_500))),
            Err(ConfigError::OutOfRange {
                parameter: "window",
                ..
            })
        ));
    }

    #[test]
    fn windows_beyond_two_to_the_51_micros_are_rejected() {
        let fits = Duration::from_micros(MAX_SCRIPT_MICROS / 2);
        assert!(args(&counter(1, fits)).is_ok());
        assert_eq!(
            args(&counter(1, fits + Duration::from_micros(1))),
            Err(super::super::too_long("window", MAX_SCRIPT_MICROS / 2))
        );
    }

    #[test]
    fn limits_beyond_two_to_the_52_are_rejected() {
        let window = Duration::from_secs(1);
        assert!(args(&counter(MAX_SCRIPT_MICROS, window)).is_ok());
        assert_eq!(
            args(&counter(MAX_SCRIPT_MICROS + 1, window)),
            Err(ConfigError::Overflow { parameter: "limit" })
        );
    }
}
