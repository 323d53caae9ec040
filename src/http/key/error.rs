//! Why a request has no key, and why a trusted network was refused.

use std::fmt;

use http::HeaderName;

/// A trusted network that could not be parsed: see [`ClientIp::trust`](super::ClientIp::trust).
///
/// # Examples
///
/// ```
/// use tollgate::http::ClientIp;
///
/// let error = ClientIp::new().trust("10.0.0.0/40").unwrap_err();
/// assert_eq!(error.input(), "10.0.0.0/40");
/// assert_eq!(
///     error.to_string(),
///     "invalid trusted network \"10.0.0.0/40\": the prefix length is not a number from 0 to 32"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidNetwork {
    pub(super) input: String,
    pub(super) reason: &'static str,
}

impl InvalidNetwork {
    /// The text that was given.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::ClientIp;
    ///
    /// let error = ClientIp::new().trust("nonsense").unwrap_err();
    /// assert_eq!(error.input(), "nonsense");
    /// ```
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for InvalidNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid trusted network {:?}: {}",
            self.input, self.reason
        )
    }
}

impl std::error::Error for InvalidNetwork {}

/// Why a request has no usable key.
///
/// # Examples
///
/// ```
/// use tollgate::http::{ClientIp, KeyError, KeyExtractor};
///
/// // No peer address in the extensions: the server is not recording it.
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(ClientIp::new().extract(&parts), Err(KeyError::NoPeerAddress));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The request has no peer address in its extensions.
    NoPeerAddress,
    /// The header is missing or not valid.
    MissingHeader(HeaderName),
    /// Another reason, from a custom extractor.
    Other(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NoPeerAddress => f.write_str("the request carries no peer address"),
            KeyError::MissingHeader(h) => write!(f, "the request has no valid {h} header"),
            KeyError::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for KeyError {}
