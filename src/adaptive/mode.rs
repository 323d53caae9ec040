//! [`Mode`]: what an adaptive limiter does with a request it cannot admit at once.

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
/// use tollgate::adaptive::Mode;
///
/// let lifo = Mode::lifo(100, Duration::from_secs(1))?;
/// assert_eq!(lifo.timeout(), Some(Duration::from_secs(1)));
/// assert!(Mode::lifo(0, Duration::from_secs(1)).is_err());
/// assert!(Mode::fifo(Duration::MAX).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
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

impl Mode {
    /// The longest wait accepted, as Netflix's `BlockingLimiter.MAX_TIMEOUT`: an
    /// hour. A wait for a concurrency permit longer than that is a caller that has
    /// gone, or one that waits forever.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Mode;
    ///
    /// assert!(Mode::fifo(Mode::MAX_TIMEOUT).is_ok());
    /// assert!(Mode::fifo(Mode::MAX_TIMEOUT + Duration::from_nanos(1)).is_err());
    /// ```
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

    /// Waits in arrival order, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `timeout` (that is [`Mode::FailFast`]);
    /// [`ConfigError::TooLong`] beyond [`MAX_TIMEOUT`](Mode::MAX_TIMEOUT).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Mode;
    ///
    /// assert_eq!(
    ///     Mode::fifo(Duration::from_millis(50))?,
    ///     Mode::Fifo { timeout: Duration::from_millis(50) },
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn fifo(timeout: Duration) -> Result<Mode, ConfigError> {
        let mode = Mode::Fifo { timeout };
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
    /// [`MAX_TIMEOUT`](Mode::MAX_TIMEOUT).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Mode;
    /// use tollgate::ConfigError;
    ///
    /// assert_eq!(
    ///     Mode::lifo(0, Duration::from_secs(1)),
    ///     Err(ConfigError::Zero { parameter: "backlog" }),
    /// );
    /// ```
    pub fn lifo(backlog: usize, timeout: Duration) -> Result<Mode, ConfigError> {
        let mode = Mode::Lifo { backlog, timeout };
        mode.check()?;
        Ok(mode)
    }

    /// How long a request may wait: `None` when failing fast.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Mode;
    ///
    /// assert_eq!(Mode::FailFast.timeout(), None);
    /// assert_eq!(Mode::fifo(Duration::from_millis(50))?.timeout(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn timeout(&self) -> Option<Duration> {
        match *self {
            Mode::FailFast => None,
            Mode::Fifo { timeout } | Mode::Lifo { timeout, .. } => Some(timeout),
        }
    }

    /// Checks the parameters, however the mode was made.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if let Mode::Lifo { backlog: 0, .. } = self {
            return Err(ConfigError::Zero {
                parameter: "backlog",
            });
        }
        match self.timeout() {
            Some(timeout) if timeout.is_zero() => Err(ConfigError::Zero {
                parameter: "timeout",
            }),
            Some(timeout) if timeout > Mode::MAX_TIMEOUT => Err(ConfigError::TooLong {
                parameter: "timeout",
                max: Mode::MAX_TIMEOUT,
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
        assert_eq!(Mode::default(), Mode::FailFast);
        assert_eq!(Mode::FailFast.timeout(), None);
        assert_eq!(Mode::FailFast.check(), Ok(()));
    }

    #[test]
    fn zero_and_absurd_parameters_are_typed_errors() {
        let second = Duration::from_secs(1);
        assert_eq!(
            Mode::fifo(Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "timeout"
            })
        );
        assert_eq!(
            Mode::lifo(10, Duration::ZERO),
            Err(ConfigError::Zero {
                parameter: "timeout"
            })
        );
        assert_eq!(
            Mode::lifo(0, second),
            Err(ConfigError::Zero {
                parameter: "backlog"
            })
        );
        for timeout in [Mode::MAX_TIMEOUT + Duration::from_nanos(1), Duration::MAX] {
            assert!(matches!(
                Mode::fifo(timeout),
                Err(ConfigError::TooLong {
                    parameter: "timeout",
                    ..
                })
            ));
            assert!(Mode::lifo(1, timeout).is_err());
        }
        // Made by hand, checked all the same.
        assert!(Mode::Lifo {
            backlog: 0,
            timeout: second
        }
        .check()
        .is_err());
    }

    #[test]
    fn the_bounds_themselves_are_accepted() {
        assert!(Mode::fifo(Mode::MAX_TIMEOUT).is_ok());
        assert!(Mode::fifo(Duration::from_nanos(1)).is_ok());
        assert!(Mode::lifo(usize::MAX, Mode::MAX_TIMEOUT).is_ok());
        assert!(Mode::lifo(1, Duration::from_nanos(1)).is_ok());
    }
}
