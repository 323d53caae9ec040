//! Why a throttled call failed.

use std::convert::Infallible;
use std::fmt;

use crate::decision::InsufficientCapacity;
use crate::store::StoreError;

/// Why a call through [`Throttle`](super::Throttle) failed: the inner service's own
/// error, or why no permit was had.
///
/// [`Insufficient`](ThrottleError::Insufficient) and [`Closed`](ThrottleError::Closed)
/// are **never**: the same call can never go. [`TimedOut`](ThrottleError::TimedOut) is
/// **not now**. A [`Store`](ThrottleError::Store) error may pass.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tollgate::http::client::ThrottleError;
/// use tollgate::InsufficientCapacity;
///
/// let error: ThrottleError<Infallible> = ThrottleError::Insufficient(InsufficientCapacity::new(5, 1));
/// assert!(error.is_never());
/// assert_eq!(
///     error.to_string(),
///     "requested 5 permits, but at most 1 can ever be granted at once"
/// );
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ThrottleError<E = Infallible> {
    /// The inner service failed; the request was sent (or the inner service was not
    /// ready for it).
    Inner(E),
    /// The permit (and the end of any pause) could not be had within the timeout;
    /// known at once when the wait was already known to be longer. Nothing was sent.
    TimedOut,
    /// The call costs more permits than the limiter can ever grant at once. Nothing was
    /// sent.
    Insufficient(InsufficientCapacity),
    /// The in-process limiter was closed. Nothing was sent.
    Closed,
    /// The store behind a shared limiter could not decide. Nothing was sent.
    Store(StoreError),
}

impl<E> ThrottleError<E> {
    /// Whether the same call can never go: too costly, or the limiter is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::http::client::ThrottleError;
    ///
    /// assert!(ThrottleError::<Infallible>::Closed.is_never());
    /// assert!(!ThrottleError::<Infallible>::TimedOut.is_never());
    /// ```
    pub fn is_never(&self) -> bool {
        matches!(self, ThrottleError::Insufficient(_) | ThrottleError::Closed)
    }

    /// Whether the wait for a permit timed out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::http::client::ThrottleError;
    ///
    /// assert!(ThrottleError::<Infallible>::TimedOut.is_timed_out());
    /// ```
    pub fn is_timed_out(&self) -> bool {
        matches!(self, ThrottleError::TimedOut)
    }

    /// The inner service's error, if that is what this is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::http::client::ThrottleError;
    ///
    /// assert_eq!(ThrottleError::Inner("refused").into_inner(), Some("refused"));
    /// assert_eq!(ThrottleError::<&str>::TimedOut.into_inner(), None);
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            ThrottleError::Inner(e) => Some(e),
            _ => None,
        }
    }
}

impl ThrottleError<Infallible> {
    /// The same error, for a service whose error type is `E`.
    pub(crate) fn widen<E>(self) -> ThrottleError<E> {
        match self {
            ThrottleError::Inner(never) => match never {},
            ThrottleError::TimedOut => ThrottleError::TimedOut,
            ThrottleError::Insufficient(i) => ThrottleError::Insufficient(i),
            ThrottleError::Closed => ThrottleError::Closed,
            ThrottleError::Store(e) => ThrottleError::Store(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for ThrottleError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleError::Inner(e) => write!(f, "inner service: {e}"),
            ThrottleError::TimedOut => f.write_str("timed out waiting for permits"),
            ThrottleError::Insufficient(i) => i.fmt(f),
            ThrottleError::Closed => f.write_str("the limiter is closed"),
            ThrottleError::Store(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ThrottleError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ThrottleError::Inner(e) => Some(e),
            ThrottleError::Store(e) => Some(e),
            _ => None,
        }
    }
}
