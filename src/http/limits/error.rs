//! [`CheckError`]: why a request could not be checked.

use std::fmt;

use crate::http::key::KeyError;
use crate::store::StoreError;

/// Why a request could not be checked.
///
/// # Examples
///
/// ```
/// use tollgate::http::{CheckError, KeyError};
///
/// let error = CheckError::from(KeyError::NoPeerAddress);
/// assert_eq!(error.to_string(), "the request carries no peer address");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The request carries no usable key.
    Key(KeyError),
    /// The store could not decide.
    Store(StoreError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Key(e) => e.fmt(f),
            CheckError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Key(e) => Some(e),
            CheckError::Store(e) => Some(e),
        }
    }
}

impl From<KeyError> for CheckError {
    fn from(e: KeyError) -> Self {
        CheckError::Key(e)
    }
}

impl From<StoreError> for CheckError {
    fn from(e: StoreError) -> Self {
        CheckError::Store(e)
    }
}
