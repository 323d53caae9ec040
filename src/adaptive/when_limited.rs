//! [`WhenLimited`]: what an adaptive limiter does with a request it cannot admit at once.

use std::time::Duration;

use crate::error::ConfigError;

/// What an [`AdaptiveLimiter`](super::AdaptiveLimiter) does with a request that
/// finds every permit held: refuse it, or let it wait, oldest or newest first.
///
/// Netflix's `SimpleLimiter` (fail fast), `BlockingLimiter` (FIFO) and
/// `LifoBlockingLimiter` (LIFO backlog).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::WhenLimited;
///
/// let lifo = WhenLimited::lifo(100, Duration::from_secs(1))?;
/// assert_eq!(lifo.timeout(), Some(Duration::from_secs(1)));
/// assert!(WhenLimited::lifo(0, Duration::from_secs(1)).is_err());
/// assert!(WhenLimited::fifo(Duration::MAX).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenLimited {
    /// Refuse at once: `acquire` fails with
    /// [`AcquireError::TimedOut`](crate::AcquireError::TimedOut) (a wait of zero).
    #[default]
    FailFast,
    /// Wait in arrival order for at most `timeout`; the queue is unbounded.
    Fifo {
        /// The longest a request waits.
        timeout: Duration,
    },
    /// Wait in a backlog of at most `backlog` requests for at most `timeout`; a
    /// freed permit goes to the newest waiter, whose caller is the most likely to be
    /// still there. A request that finds the backlog full is refused at once with
    /// [`AcquireError::QueueFull`](crate::AcquireError::QueueFull).
    Lifo {
        /// The most requests waiting at once.
        backlog: usize,
        /// The longest a request waits.
        timeout: Duration,
    },
}

impl WhenLimited {
    /// The longest wait accepted, as Netflix's `BlockingLimiter.MAX_TIMEOUT`: an
    /// hour. A wait for a concurrency permit longer than that is a caller that has
    /// gone, or one that waits forever.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::WhenLimited;
    ///
    /// assert!(WhenLimited::fifo(WhenLimited::MAX_TIMEOUT).is_ok());
    /// assert!(WhenLimited::fifo(WhenLimited::MAX_TIMEOUT + Duration::from_nanos(1)).is_err());
    /// ```
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

    /// Waits in arrival order, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `timeout` (that is [`WhenLimited::FailFast`]);
    /// [`ConfigError::TooLong`] beyond [`MAX_TIMEOUT`](WhenLimited::MAX_TIMEOUT).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::WhenLimited;
    ///
    /// assert_eq!(
    ///     WhenLimited::fifo(Duration::from_millis(50))?,
    ///     WhenLimited::Fifo { timeout: Duration::from_millis(50) },
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn fifo(timeout: Duration) -> Result<WhenLimited, ConfigError> {
        let mode = WhenLimited::Fifo { timeout };
        mode.check()?;
        Ok(mode)
    }

    /// Waits newest first in a backlog of at most `backlog` requests, for at most
    /// `timeout` each.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `backlog` or `timeout`;
    /// [`ConfigError::TooLong`] for a `timeout` beyond
    /// [`MAX_TIMEOUT`](WhenLimited::MAX_TIMEOUT).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::WhenLimited;
    /// use tollgate::ConfigError;
    ///
    /// assert_eq!(
    ///     WhenLimited::lifo(0, Duration::from_secs(1)),
    ///     Err(ConfigError::Zero { parameter: "backlog" }),
    /// );
    /// ```
    pub fn lifo(backlog: usize, timeout: Duration) -> Result<WhenLimited, ConfigError> {
        let mode = WhenLimited::Lifo { backlog, timeout };
        mode.check()?;
        Ok(mode)
    }

    /// How long a request may wait: `None` when failing fast.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::WhenLimited;
    ///
    /// assert_eq!(WhenLimited::FailFast.timeout(), None);
    /// assert_eq!(WhenLimited::fifo(Duration::from_millis(50))?.timeout(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn timeout(&self) -> Option<Duration> {
        match *self {
            WhenLimited::FailFast => None,
            WhenLimited::Fifo { timeout } | WhenLimited::Lifo { timeout, .. } => Some(timeout),
        }
    }

    /// Checks the parameters, however the mode was made.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if let WhenLimited::Lifo { backlog: 0, .. } = self {
            return Err(ConfigError::Zero {
                parameter: "backlog",
            });
        }
        match self.timeout() {
            Some(timeout) if timeout.is_zero() => Err(ConfigError::Zero {
                parameter: "timeout",
            }),
            Some(timeout) if timeout > WhenLimited::MAX_TIMEOUT => Err(ConfigError::TooLong {
                parameter: "timeout",
                max: WhenLimited::MAX_TIMEOUT,
                within: "a wait for a concurrency permit",
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_fast_is_the_default_and_has_no_timeout() {
        assert_eq!(WhenLimited::default(), WhenLimited::FailFast);
        assert_eq!(WhenLimited::FailFast.timeout(), None);
        assert_eq!(WhenLimited::FailFast.check(), Ok(()));
    }

    #[test]
    fn zero_and_absurd_parameters_are_typed_errors() {
        let second = Duration::from_secs(1);
        assert_eq!(
            WhenLimited::fifo(Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "timeout"
            })
        );
        assert_eq!(
            WhenLimited::lifo(10, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "timeout"
            })
        );
        assert_eq!(
            WhenLimited::lifo(0, second),
            Err(ConfigError::Zero {
                parameter: "backlog"
            })
        );
        for timeout in [
            WhenLimited::MAX_TIMEOUT + Duration::from_nanos(1),
            Duration::MAX,
        ] {
            assert!(matches!(
                WhenLimited::fifo(timeout),
                Err(ConfigError::TooLong {
                    parameter: "timeout",
                    ..
                })
            ));
            assert!(WhenLimited::lifo(1, timeout).is_err());
        }
        // Made by hand, checked all the same.
        assert!(
            WhenLimited::Lifo {
                backlog: 0,
                timeout: second
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn the_bounds_themselves_are_accepted() {
        assert!(WhenLimited::fifo(WhenLimited::MAX_TIMEOUT).is_ok());
        assert!(WhenLimited::fifo(Duration::from_nanos(1)).is_ok());
        assert!(WhenLimited::lifo(usize::MAX, WhenLimited::MAX_TIMEOUT).is_ok());
        assert!(WhenLimited::lifo(1, Duration::from_nanos(1)).is_ok());
    }
}
