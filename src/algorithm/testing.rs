//! Times for the algorithms' unit tests, in milliseconds.

use std::time::Duration;

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
