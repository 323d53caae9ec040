//! Errors from building or reconfiguring a limiter, and from waiting for permits.
//!
//! Being rate-limited is not an error of this kind: it is a [`Denied`](crate::Denied)
//! decision.

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

/// A parameter that would make a limiter panic, overflow, wait forever or let
/// everything through.
///
/// Returned at construction and on reconfiguration, never at decision time.
///
/// # Examples
///
/// ```
/// use tollgate::{ConfigError, Quota};
///
/// assert_eq!(
///     Quota::per_second(0).unwrap_err(),
///     ConfigError::Zero { parameter: "count" }
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The parameter must be greater than zero.
    Zero {
        /// Which parameter.
        parameter: &'static str,
    },
    /// The parameter must not be negative.
    Negative {
        /// Which parameter.
        parameter: &'static str,
        /// The value given.
        value: f64,
    },
    /// The parameter was NaN.
    NotANumber {
        /// Which parameter.
        parameter: &'static str,
    },
    /// The parameter was infinite where that means nothing.
    Infinite {
        /// Which parameter.
        parameter: &'static str,
    },
    /// The parameter, or a product computed from it, does not fit the limiter's
    /// arithmetic.
    Overflow {
        /// Which parameter.
        parameter: &'static str,
    },
    /// The parameter, a length of time, is longer than the arithmetic that holds it.
    TooLong {
        /// Which parameter.
        parameter: &'static str,
        /// The longest value accepted.
        max: Duration,
        /// What holds the value, in words: why `max` is the bound.
        within: &'static str,
    },
    /// The parameter is out of its allowed range.
    OutOfRange {
        /// Which parameter.
        parameter: &'static str,
        /// What the range is, in words.
        expected: &'static str,
    },
}

impl ConfigError {
    /// The name of the offending parameter.
    pub fn parameter(&self) -> &'static str {
        match *self {
            ConfigError::Zero { parameter }
            | ConfigError::Negative { parameter, .. }
            | ConfigError::NotANumber { parameter }
            | ConfigError::Infinite { parameter }
            | ConfigError::Overflow { parameter }
            | ConfigError::TooLong { parameter, .. }
            | ConfigError::OutOfRange { parameter, .. } => parameter,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Zero { parameter } => write!(f, "{parameter} must be greater than zero"),
            ConfigError::Negative { parameter, value } => {
                write!(f, "{parameter} must not be negative (got {value})")
            }
            ConfigError::NotANumber { parameter } => write!(f, "{parameter} is NaN"),
            ConfigError::Infinite { parameter } => write!(f, "{parameter} must be finite"),
            ConfigError::Overflow { parameter } => write!(f, "{parameter} is too large"),
            ConfigError::TooLong {
                parameter,
                max,
                within,
            } => {
                write!(
                    f,
                    "{parameter} is too long for {within}: the longest accepted is {max:?}"
                )?;
                let years = max.as_secs() / SECONDS_PER_YEAR;
                if years > 0 {
                    write!(f, " (about {years} years)")?;
                }
                Ok(())
            }
            ConfigError::OutOfRange {
                parameter,
                expected,
            } => write!(f, "{parameter} must be {expected}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A Julian year, for saying how long a [`ConfigError::TooLong`] bound is.
const SECONDS_PER_YEAR: u64 = 31_557_600;

/// The request asks for more permits than the limiter can ever grant at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InsufficientCapacity {
    requested: u64,
    capacity: u64,
}

impl InsufficientCapacity {
    /// A denial of `requested` by a limiter that grants at most `capacity` at once.
    pub const fn new(requested: u64, capacity: u64) -> InsufficientCapacity {
        InsufficientCapacity {
            requested,
            capacity,
        }
    }

    /// How many permits were asked for.
    pub const fn requested(&self) -> u64 {
        self.requested
    }

    /// The most the limiter can grant at once.
    pub const fn capacity(&self) -> u64 {
        self.capacity
    }
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "requested {} permits, but at most {} can ever be granted at once",
            self.requested, self.capacity
        )
    }
}

impl std::error::Error for InsufficientCapacity {}

/// Why a wait for permits ended without them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::AcquireError;
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new());
/// limiter.try_acquire(1)?;
/// // The next permit comes in 1 s: a 10 ms timeout fails at once.
/// let waited = limiter.acquire_blocking_timeout(1, Duration::from_millis(10));
/// assert_eq!(waited, Err(AcquireError::TimedOut));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// `E` is what the permit source itself can fail with: nothing for an in-process
/// limiter ([`Infallible`], the default), a
/// `StoreError` for a limit kept in a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError<E = Infallible> {
    /// The limiter was closed: no permit will ever be granted.
    Closed,
    /// The request asks for more than the limiter can ever grant at once.
    Insufficient(InsufficientCapacity),
    /// The permits could not be had within the timeout; known at once when the
    /// wait was already known to be longer.
    TimedOut,
    /// The permits could only be had after the clock's end (`Nanos::MAX`, where a
    /// [`ManualClock`](crate::time::ManualClock) stops), which no wait reaches: never,
    /// as [`Closed`](AcquireError::Closed) is. Denials that end by a release still
    /// wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::RefreshPeriod;
    /// use tollgate::time::{ManualClock, Nanos};
    /// use tollgate::{AcquireError, Limiter};
    ///
    /// // 10 a second, made 250 ms before the clock's end: no second cycle starts.
    /// let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 250_000_000));
    /// let cycle = RefreshPeriod::new(10, Duration::from_secs(1), Duration::ZERO)?;
    /// let limiter = Limiter::with_clock(cycle, clock);
    /// limiter.try_acquire(10)?;
    /// let never = limiter.acquire_blocking(1);
    /// assert_eq!(never, Err(AcquireError::PastClockEnd));
    /// assert!(never.unwrap_err().is_never());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    PastClockEnd,
    /// A bounded queue was full.
    QueueFull {
        /// The units the queue holds at most.
        capacity: u64,
    },
    /// The permit source could not decide (a store that failed); the waiter holds
    /// nothing.
    Source(E),
}

impl<E> AcquireError<E> {
    /// Whether the same request can never succeed: closed, too large, or due past the
    /// clock's end.
    pub fn is_never(&self) -> bool {
        matches!(
            self,
            AcquireError::Closed | AcquireError::Insufficient(_) | AcquireError::PastClockEnd
        )
    }

    /// The same outcome for a source that fails with `F`: what an in-process error
    /// becomes where a store's is expected.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::AcquireError;
    ///
    /// let local: AcquireError = AcquireError::TimedOut;
    /// let widened: AcquireError<std::io::Error> = local.map_source(|never| match never {});
    /// assert!(matches!(widened, AcquireError::TimedOut));
    /// ```
    pub fn map_source<F>(self, f: impl FnOnce(E) -> F) -> AcquireError<F> {
        match self {
            AcquireError::Closed => AcquireError::Closed,
            AcquireError::Insufficient(i) => AcquireError::Insufficient(i),
            AcquireError::TimedOut => AcquireError::TimedOut,
            AcquireError::PastClockEnd => AcquireError::PastClockEnd,
            AcquireError::QueueFull { capacity } => AcquireError::QueueFull { capacity },
            AcquireError::Source(e) => AcquireError::Source(f(e)),
        }
    }
}

impl AcquireError {
    /// An in-process outcome where a source's error type `E` is expected: `Source`
    /// cannot occur in process.
    pub fn widen<E>(self) -> AcquireError<E> {
        self.map_source(|never| match never {})
    }
}

impl<E: fmt::Display> fmt::Display for AcquireError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Closed => f.write_str("the limiter is closed"),
            AcquireError::Insufficient(i) => i.fmt(f),
            AcquireError::TimedOut => f.write_str("timed out waiting for permits"),
            AcquireError::PastClockEnd => f.write_str("the permits are due past the clock's end"),
            AcquireError::QueueFull { capacity } => {
                write!(f, "the queue is full ({capacity} units)")
            }
            AcquireError::Source(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for AcquireError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AcquireError::Source(e) => Some(e),
            _ => None,
        }
    }
}

/// Checks that a float parameter is a finite number greater than zero.
pub(crate) fn positive_finite(parameter: &'static str, value: f64) -> Result<f64, ConfigError> {
    if value.is_nan() {
        Err(ConfigError::NotANumber { parameter })
    } else if value < 0.0 {
        Err(ConfigError::Negative { parameter, value })
    } else if value == 0.0 {
        Err(ConfigError::Zero { parameter })
    } else if value.is_infinite() {
        Err(ConfigError::Infinite { parameter })
    } else {
        Ok(value)
    }
}

/// Checks that a float parameter is a finite number, zero allowed.
pub(crate) fn non_negative_finite(parameter: &'static str, value: f64) -> Result<f64, ConfigError> {
    if value == 0.0 {
        Ok(0.0)
    } else {
        positive_finite(parameter, value)
    }
}

/// Checks that an integer parameter is not zero.
pub(crate) fn non_zero(parameter: &'static str, value: u64) -> Result<u64, ConfigError> {
    if value == 0 {
        Err(ConfigError::Zero { parameter })
    } else {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_checks_name_the_problem() {
        assert_eq!(
            positive_finite("rate", f64::NAN),
            Err(ConfigError::NotANumber { parameter: "rate" })
        );
        assert_eq!(
            positive_finite("rate", -1.0),
            Err(ConfigError::Negative {
                parameter: "rate",
                value: -1.0
            })
        );
        assert_eq!(
            positive_finite("rate", 0.0),
            Err(ConfigError::Zero { parameter: "rate" })
        );
        assert_eq!(
            positive_finite("rate", f64::INFINITY),
            Err(ConfigError::Infinite { parameter: "rate" })
        );
        assert_eq!(non_negative_finite("warmup", 0.0), Ok(0.0));
        assert_eq!(
            non_negative_finite("warmup", f64::NEG_INFINITY),
            Err(ConfigError::Negative {
                parameter: "warmup",
                value: f64::NEG_INFINITY
            })
        );
    }

    #[test]
    fn too_long_says_what_holds_it_and_the_longest_accepted() {
        let e = ConfigError::TooLong {
            parameter: "lease",
            max: Duration::from_micros(1 << 52),
            within: "the Redis scripts",
        };
        assert_eq!(
            e.to_string(),
            "lease is too long for the Redis scripts: the longest accepted is \
             4503599627.370496s (about 142 years)"
        );
        assert_eq!(e.parameter(), "lease");
        let short = ConfigError::TooLong {
            parameter: "gap",
            max: Duration::from_secs(5),
            within: "a test",
        };
        assert_eq!(
            short.to_string(),
            "gap is too long for a test: the longest accepted is 5s"
        );
    }

    #[test]
    fn display_is_lowercase_and_names_the_parameter() {
        let e = ConfigError::Zero { parameter: "count" };
        assert_eq!(e.to_string(), "count must be greater than zero");
        assert_eq!(e.parameter(), "count");
    }
}
