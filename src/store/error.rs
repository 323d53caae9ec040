//! Why a store could not decide.

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;

/// Why a store could not decide. The decision is unknown: the caller's
/// [`FailurePolicy`](crate::store::FailurePolicy) applies.
///
/// Configuration problems ([`Config`](StoreError::Config),
/// [`KeyTooLong`](StoreError::KeyTooLong), [`InvalidUrl`](StoreError::InvalidUrl))
/// never go away by retrying; the others may.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// A rule's configuration cannot run in this store (or a request has no rule).
    Config(ConfigError),
    /// A key is longer than the store accepts.
    KeyTooLong {
        /// The key's length in bytes, prefix and hash tag included.
        len: usize,
        /// The most the store accepts.
        max: usize,
    },
    /// The key holds the state of another kind of rule.
    KeyConflict {
        /// The store's key.
        key: String,
    },
    /// The URL is malformed or names an unsupported scheme.
    InvalidUrl(Box<dyn std::error::Error + Send + Sync>),
    /// The server refused the credentials.
    Authentication(Box<dyn std::error::Error + Send + Sync>),
    /// The store could not be reached, or the connection failed.
    Connection(Box<dyn std::error::Error + Send + Sync>),
    /// The store did not answer within the call's deadline.
    Timeout(Duration),
    /// The circuit breaker is open: recent calls failed, so this one was not tried.
    CircuitOpen,
    /// The store answered with an error.
    Server(Box<dyn std::error::Error + Send + Sync>),
    /// The store answered something it never should.
    Protocol(String),
}

impl StoreError {
    /// Whether retrying the same call can never succeed: a configuration, a key or a URL
    /// the store rejects.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            StoreError::Config(_)
                | StoreError::KeyTooLong { .. }
                | StoreError::KeyConflict { .. }
                | StoreError::InvalidUrl(_)
        )
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Config(e) => write!(f, "limiter configuration: {e}"),
            StoreError::KeyTooLong { len, max } => {
                write!(f, "key of {len} bytes, longer than the store's {max}")
            }
            StoreError::KeyConflict { key } => {
                write!(f, "key {key:?} holds the state of another kind of rule")
            }
            StoreError::InvalidUrl(e) => write!(f, "invalid store URL: {e}"),
            StoreError::Authentication(e) => write!(f, "store authentication failed: {e}"),
            StoreError::Connection(e) => write!(f, "store connection: {e}"),
            StoreError::Timeout(d) => write!(f, "store did not answer within {d:?}"),
            StoreError::CircuitOpen => write!(f, "store circuit breaker is open"),
            StoreError::Server(e) => write!(f, "store error: {e}"),
            StoreError::Protocol(what) => write!(f, "unexpected store reply: {what}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Config(e) => Some(e),
            StoreError::InvalidUrl(e)
            | StoreError::Authentication(e)
            | StoreError::Connection(e)
            | StoreError::Server(e) => Some(&**e),
            _ => None,
        }
    }
}

/// An in-process source never fails: this lets an integration that reports a store's
/// failures take any source.
impl From<std::convert::Infallible> for StoreError {
    fn from(never: std::convert::Infallible) -> StoreError {
        match never {}
    }
}

impl From<ConfigError> for StoreError {
    fn from(e: ConfigError) -> StoreError {
        StoreError::Config(e)
    }
}
