//! Keys for the server layer: who a request counts against.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use http::request::Parts;
use http::HeaderName;

/// Reads the key a request counts against from its head.
///
/// Closures `Fn(&Parts) -> Result<String, KeyError>` are extractors too.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of `request`.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request carries no usable key.
    fn extract(&self, request: &Parts) -> Result<String, KeyError>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<String, KeyError> + Send + Sync + 'static,
{
    fn extract(&self, request: &Parts) -> Result<String, KeyError> {
        self(request)
    }
}

/// One key for every request: a global limit, shared by every clone of the layer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _: &Parts) -> Result<String, KeyError> {
        Ok(String::new())
    }
}

/// The value of a request header, such as an API key.
#[derive(Clone, Debug)]
pub struct HeaderKey {
    pub(crate) name: HeaderName,
}

impl HeaderKey {
    /// Keys by the header `name`.
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey { name }
    }
}

/// The client's IP address: the connection's peer, or, when the peer is a trusted
/// proxy, the address that proxy reports in `X-Forwarded-For` / `Forwarded`.
///
/// The peer address is read from the request's extensions: a [`SocketAddr`], or
/// axum's `ConnectInfo<SocketAddr>` (feature `axum`).
#[derive(Clone, Debug, Default)]
pub struct ClientIp {
    pub(crate) trusted_proxies: Vec<(IpAddr, u8)>,
}

/// Why a request has no usable key.
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

#[allow(dead_code)]
fn _peer(_: SocketAddr) {}
