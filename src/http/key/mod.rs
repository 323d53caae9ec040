//! Keys for the server layer: who a request counts against.
//!
//! - this file: the [`Key`] type and the [`KeyExtractor`] trait;
//! - [`Global`], [`HeaderKey`] and [`ClientIp`], one file each;
//! - `proxies.rs`: the trusted proxy networks and the walk through the forwarded list;
//! - `error.rs`: [`KeyError`] and [`InvalidNetwork`].
//!
//! The `Forwarded` / `X-Forwarded-For` grammar is in [`wire`](crate::http::wire), with
//! the rest of the header grammar.

mod client_ip;
mod error;
mod global;
mod header;
mod proxies;

use std::fmt;
use std::ops::Deref;

use http::request::Parts;

pub use client_ip::{ClientIp, ForwardedHeader};
pub use error::{InvalidNetwork, KeyError};
pub use global::Global;
pub use header::HeaderKey;

/// Reads the key a request counts against from its head.
///
/// The key is a [`Key`]: text borrowed from the request or the extractor, short text
/// held inline (an IP address), or a `String`. Closures
/// `Fn(&Parts) -> Result<String, KeyError>` are extractors too.
///
/// # Examples
///
/// ```
/// use tollgate::http::{Key, KeyError, KeyExtractor};
///
/// // The first segment of the path: a tenant.
/// let tenant = |request: &http::request::Parts| -> Result<String, KeyError> {
///     request
///         .uri
///         .path()
///         .split('/')
///         .nth(1)
///         .filter(|s| !s.is_empty())
///         .map(str::to_owned)
///         .ok_or_else(|| KeyError::Other("no tenant in the path".into()))
/// };
/// let (parts, ()) = http::Request::get("/acme/orders").body(()).unwrap().into_parts();
/// assert_eq!(tenant.extract(&parts)?, "acme");
///
/// // Without a `String`: the segment borrowed from the request.
/// struct Tenant;
///
/// impl KeyExtractor for Tenant {
///     fn extract<'a>(&'a self, request: &'a http::request::Parts) -> Result<Key<'a>, KeyError> {
///         match request.uri.path().split('/').nth(1) {
///             Some(tenant) if !tenant.is_empty() => Ok(Key::from(tenant)),
///             _ => Err(KeyError::Other("no tenant in the path".into())),
///         }
///     }
/// }
/// assert_eq!(Tenant.extract(&parts)?, "acme");
/// # Ok::<(), KeyError>(())
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of `request`.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request carries no usable key.
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<String, KeyError> + Send + Sync + 'static,
{
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError> {
        self(request).map(Key::from)
    }
}

/// The most bytes a [`Key`] holds inline: an IPv6 address with a prefix length
/// (`ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128`, 43 bytes) fits.
const INLINE: usize = 46;

/// A key read from a request: borrowed, held inline when short, or owned. It reads as
/// a `str`.
///
/// Keys of an in-process store live only as long as the check, so an extractor that
/// borrows the key from the request ([`HeaderKey`], [`Global`]) or formats it into
/// the key itself ([`ClientIp`], [`Key::format`]) costs no allocation.
///
/// # Examples
///
/// ```
/// use std::net::Ipv4Addr;
/// use tollgate::http::Key;
///
/// let borrowed = Key::from("k-42");
/// let inline = Key::format(format_args!("{}", Ipv4Addr::new(192, 0, 2, 1)));
/// let owned = Key::from("x".repeat(100));
/// assert_eq!(borrowed, "k-42");
/// assert_eq!(inline.as_str(), "192.0.2.1");
/// assert_eq!(owned.len(), 100);
/// assert_eq!(String::from(inline), "192.0.2.1");
/// ```
#[derive(Clone)]
pub struct Key<'a>(Repr<'a>);

#[derive(Clone)]
enum Repr<'a> {
    Borrowed(&'a str),
    /// UTF-8: only whole `str`s are ever copied in.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Owned(String),
}

impl<'a> Key<'a> {
    /// `args` formatted: inline when it fits in a few dozen bytes (an IP address
    /// does), in a `String` otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Key;
    ///
    /// let tenant = "acme";
    /// let key = Key::format(format_args!("{tenant}/orders"));
    /// assert_eq!(key, "acme/orders");
    /// ```
    pub fn format(args: fmt::Arguments<'_>) -> Key<'a> {
        let mut inline = Inline {
            len: 0,
            bytes: [0; INLINE],
        };
        match fmt::Write::write_fmt(&mut inline, args) {
            Ok(()) => Key(Repr::Inline {
                // At most `INLINE`, which fits a `u8`.
                len: inline.len as u8,
                bytes: inline.bytes,
            }),
            Err(_) => Key(Repr::Owned(fmt::format(args))),
        }
    }

    /// The key as text.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Key;
    ///
    /// assert_eq!(Key::from("global").as_str(), "global");
    /// ```
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Borrowed(s) => s,
            Repr::Inline { len, bytes } => std::str::from_utf8(&bytes[..usize::from(*len)])
                .expect("an inline key holds whole `str`s only"),
            Repr::Owned(s) => s,
        }
    }

    /// The key as a `String`, for a check that outlives the request (a remote store).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Key;
    ///
    /// assert_eq!(Key::from("k-42").into_string(), "k-42");
    /// ```
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(s) => s,
            _ => self.as_str().to_owned(),
        }
    }
}

/// The inline buffer [`Key::format`] writes to; it refuses what does not fit.
struct Inline {
    len: usize,
    bytes: [u8; INLINE],
}

impl fmt::Write for Inline {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Deref for Key<'_> {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Key<'_> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Key<'_> {
    fn eq(&self, other: &Key<'_>) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Key<'_> {}

impl PartialEq<str> for Key<'_> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Key<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Key<'_> {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl<'a> From<&'a str> for Key<'a> {
    fn from(s: &'a str) -> Key<'a> {
        Key(Repr::Borrowed(s))
    }
}

impl From<String> for Key<'_> {
    fn from(s: String) -> Self {
        Key(Repr::Owned(s))
    }
}

impl From<Key<'_>> for String {
    fn from(key: Key<'_>) -> String {
        key.into_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    #[test]
    fn keys_are_inline_up_to_their_buffer_then_strings() {
        let fits = "x".repeat(INLINE);
        let key = Key::format(format_args!("{fits}"));
        assert!(matches!(key.0, Repr::Inline { .. }));
        assert_eq!(key, fits);
        let long = "x".repeat(INLINE + 1);
        let key = Key::format(format_args!("{long}"));
        assert!(matches!(key.0, Repr::Owned(_)));
        assert_eq!(key, long);
        // The longest IPv6 key, with a prefix, fits.
        let longest = ClientIp::new().ipv6_prefix(128).unwrap();
        let peer = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:1";
        let mut request = http::Request::get("/").body(()).unwrap();
        request
            .extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        let (request, ()) = request.into_parts();
        let key = longest.extract(&request).unwrap();
        assert!(matches!(key.0, Repr::Inline { .. }));
        assert_eq!(key, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128");
        assert_eq!(key.clone().into_string(), key.as_str());
    }
}
