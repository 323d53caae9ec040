//! Why an outbound call through the adaptive client layer failed.

use std::fmt;

use crate::error::AcquireError;

/// Why a call through an [`AdaptiveClient`](super::AdaptiveClient) failed: the
/// limiter refused it (nothing was sent), or the inner service failed.
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::ClientError;
/// use tollgate::AcquireError;
///
/// let refused: ClientError<std::io::Error> = ClientError::Refused(AcquireError::TimedOut);
/// assert!(refused.is_refused());
/// assert_eq!(refused.to_string(), "refused by the adaptive limit: timed out waiting for permits");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError<E> {
    /// The inner service failed; the request was sent, or the inner service was
    /// not ready for it.
    Inner(E),
    /// The limiter admitted no more calls: every permit was held and the
    /// [`WhenLimited`](crate::adaptive::WhenLimited) refused at once
    /// ([`TimedOut`](AcquireError::TimedOut) when failing fast), its wait timed out,
    /// its backlog was full ([`QueueFull`](AcquireError::QueueFull)), or it was
    /// closed ([`Closed`](AcquireError::Closed)). Nothing was sent.
    Refused(AcquireError),
}

impl<E> ClientError<E> {
    /// Whether the limiter refused the call (nothing was sent).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::ClientError;
    ///
    /// assert!(!ClientError::Inner("reset").is_refused());
    /// ```
    pub fn is_refused(&self) -> bool {
        matches!(self, ClientError::Refused(_))
    }

    /// The inner service's error, if that is what this is.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::ClientError;
    ///
    /// assert_eq!(ClientError::Inner("reset").into_inner(), Some("reset"));
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            ClientError::Inner(e) => Some(e),
            ClientError::Refused(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for ClientError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Inner(e) => write!(f, "inner service: {e}"),
            ClientError::Refused(e) => write!(f, "refused by the adaptive limit: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ClientError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Inner(e) => Some(e),
            ClientError::Refused(e) => Some(e),
        }
    }
}
