//! Times for the algorithms' unit tests, in milliseconds, and script parameters.

use std::time::Duration;

use super::Arg;
use crate::time::Nanos;

/// Nanoseconds per millisecond.
pub(crate) const MS: u64 = 1_000_000;

/// Nanoseconds per second.
pub(crate) const S: u64 = 1_000_000_000;

/// The instant `ms` milliseconds after the origin.
pub(crate) fn at(ms: u64) -> Nanos {
    Nanos::new(ms * MS)
}

/// `ms` milliseconds.
pub(crate) fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Script parameters as doubles, as the script reads them.
pub(crate) fn floats(args: &[Arg]) -> Vec<f64> {
    args.iter()
        .map(|a| match *a {
            Arg::Float(v) => v,
            Arg::Int(v) => v as f64,
        })
        .collect()
}
