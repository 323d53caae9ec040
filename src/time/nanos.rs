//! [`Nanos`]: a point on a clock's timeline.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

use crate::units::duration_to_nanos;

/// A point on a clock's timeline: nanoseconds since the clock's origin.
///
/// `u64` nanoseconds cover more than 580 years; arithmetic on `Nanos` saturates
/// instead of overflowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(u64);

impl Nanos {
    /// The clock's origin.
    pub const ZERO: Nanos = Nanos(0);
    /// The last representable instant.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// A point `nanos` nanoseconds after the origin.
    #[inline]
    pub const fn new(nanos: u64) -> Nanos {
        Nanos(nanos)
    }

    /// A point `d` after the origin, saturating at [`Nanos::MAX`].
    pub fn from_duration(d: Duration) -> Nanos {
        Nanos(duration_to_nanos(d))
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The time since the origin as a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Duration) -> Nanos {
        Nanos(self.0.saturating_add(duration_to_nanos(rhs)))
    }
}

impl Sub<Duration> for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(duration_to_nanos(rhs)))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_duration())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_arithmetic_saturates() {
        assert_eq!(Nanos::MAX + Duration::from_secs(1), Nanos::MAX);
        assert_eq!(Nanos::ZERO - Duration::from_secs(1), Nanos::ZERO);
        assert_eq!(
            Nanos::from_duration(Duration::MAX),
            Nanos::MAX,
            "durations past 584 years saturate"
        );
    }
}
