//! Keys for the server layer: who a request counts against.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Deref;

use http::header::FORWARDED;
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue};

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

/// One key for every request: a global limit, shared by every clone of the layer.
///
/// The key is `"global"`, not empty: a store's hash tag is the key, and Redis Cluster
/// hashes a key with an empty tag `{}` whole, which would put the rules of one request
/// in different slots.
///
/// # Examples
///
/// ```
/// use tollgate::http::{Global, KeyExtractor};
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(Global.extract(&parts)?, "global");
/// # Ok::<(), tollgate::http::KeyError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract<'a>(&'a self, _: &'a Parts) -> Result<Key<'a>, KeyError> {
        Ok(Key::from("global"))
    }
}

/// The value of a request header, such as an API key.
///
/// The first value of the header is the key. A missing or empty value, or one that is
/// not visible ASCII, is [`KeyError::MissingHeader`]: the server layer answers 400.
///
/// # Examples
///
/// ```
/// use tollgate::http::{HeaderKey, KeyError, KeyExtractor};
///
/// let key = HeaderKey::from_static("x-api-key");
/// let request = http::Request::get("/").header("x-api-key", "k-42").body(()).unwrap();
/// let (parts, ()) = request.into_parts();
/// assert_eq!(key.extract(&parts)?, "k-42");
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert!(matches!(key.extract(&parts), Err(KeyError::MissingHeader(_))));
/// # Ok::<(), KeyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    pub(crate) name: HeaderName,
}

impl HeaderKey {
    /// Keys by the header `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// let key = HeaderKey::new(http::header::AUTHORIZATION);
    /// assert_eq!(key.name(), "authorization");
    /// ```
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey { name }
    }

    /// Keys by the header `name`, a lowercase literal.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// let key = HeaderKey::from_static("x-api-key");
    /// assert_eq!(key.name(), "x-api-key");
    /// ```
    ///
    /// # Panics
    ///
    /// As [`HeaderName::from_static`]: if `name` is not a valid, lowercase header name.
    pub fn from_static(name: &'static str) -> HeaderKey {
        HeaderKey::new(HeaderName::from_static(name))
    }

    /// The header read.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// assert_eq!(HeaderKey::from_static("x-tenant").name(), "x-tenant");
    /// ```
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl KeyExtractor for HeaderKey {
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError> {
        request
            .headers
            .get(&self.name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(Key::from)
            .ok_or_else(|| KeyError::MissingHeader(self.name.clone()))
    }
}

/// Which header a trusted proxy reports the client in.
///
/// Only one is read: a proxy that sets one passes the other through from the client
/// unchanged, so reading both would let a client choose its key.
///
/// # Examples
///
/// ```
/// use tollgate::http::{ClientIp, ForwardedHeader};
///
/// let key = ClientIp::new().trust("10.0.0.0/8")?.header(ForwardedHeader::Forwarded);
/// # Ok::<(), tollgate::http::InvalidNetwork>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
}

/// The client's IP address: the connection's peer, or, when the peer is a trusted
/// proxy, the address that proxy reports in `X-Forwarded-For` / `Forwarded`.
///
/// The peer address is read from the request's extensions: a [`SocketAddr`] or an
/// [`IpAddr`], or axum's `ConnectInfo<SocketAddr>` (feature `axum`; serve the router
/// with `into_make_service_with_connect_info::<SocketAddr>()`). A request without one
/// is [`KeyError::NoPeerAddress`]: the server is misconfigured, and the layer answers
/// 500 rather than counting every client against one key.
///
/// # Trusted proxies
///
/// With no trusted network (the default), forwarded headers are ignored: anyone can
/// write them. With some, the forwarded list is walked **right to left**, starting
/// from the peer: while the address at hand is a trusted proxy, the next address to
/// the left is the one that proxy saw. The key is the first address that is not a
/// trusted proxy. A client can prepend what it likes to the list, but every trusted
/// proxy appends the address it saw, so the walk stops at the real client before it
/// reaches anything the client wrote. An entry that is not an IP address (`unknown`,
/// an obfuscated `_identifier`, garbage) ends the walk: the request counts against
/// the last address known, the proxy that reported it. Empty entries are skipped, a
/// port (even an obfuscated one, `192.0.2.1:_p`) is ignored, and a byte that is not
/// UTF-8 spoils only the entry it is in.
///
/// Addresses are keyed in canonical form: an IPv4-mapped IPv6 peer (`::ffff:1.2.3.4`,
/// from a dual-stack listener) is keyed as `1.2.3.4`. An IPv6 host usually holds a
/// whole /64: [`ipv6_prefix(64)`](ClientIp::ipv6_prefix) keys it by that network, so
/// that it cannot dodge its limit by changing address.
///
/// # Examples
///
/// ```
/// use std::net::SocketAddr;
/// use tollgate::http::{ClientIp, KeyExtractor};
///
/// let key = ClientIp::new().trust("10.0.0.0/8")?;
///
/// // Through the proxy 10.0.0.2: the client wrote "6.6.6.6", the proxy appended the
/// // address it saw.
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9")
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert("10.0.0.2:41000".parse::<SocketAddr>()?);
/// let (parts, ()) = request.into_parts();
/// assert_eq!(key.extract(&parts)?, "203.0.113.9");
///
/// // Straight from a client: its header is ignored.
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6")
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert("198.51.100.4:5000".parse::<SocketAddr>()?);
/// let (parts, ()) = request.into_parts();
/// assert_eq!(key.extract(&parts)?, "198.51.100.4");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ClientIp {
    /// Networks as (address with the host bits cleared, prefix length).
    pub(crate) trusted_proxies: Vec<(IpAddr, u8)>,
    header: ForwardedHeader,
    /// Key IPv6 clients by their network of this many bits, not their address.
    ipv6_prefix: Option<u8>,
}

impl ClientIp {
    /// The peer's address, trusting no proxy.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use tollgate::http::{ClientIp, KeyExtractor};
    ///
    /// let mut request = http::Request::get("/").body(()).unwrap();
    /// request.extensions_mut().insert("[::ffff:192.0.2.1]:80".parse::<SocketAddr>()?);
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(ClientIp::new().extract(&parts)?, "192.0.2.1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> ClientIp {
        ClientIp::default()
    }

    /// Also trusts the proxies in `network`: an address (`"10.1.2.3"`, `"::1"`) or a
    /// CIDR network (`"10.0.0.0/8"`, `"fd00::/8"`). Host bits below the prefix are
    /// ignored, as in `"10.1.2.3/8"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::ClientIp;
    ///
    /// let key = ClientIp::new().trust("10.0.0.0/8")?.trust("::1")?;
    /// assert!(ClientIp::new().trust("10.0.0.0/33").is_err());
    /// # Ok::<(), tollgate::http::InvalidNetwork>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`InvalidNetwork`] if `network` is not an address, or its prefix length is not
    /// a number within the address's bits (32 for IPv4, 128 for IPv6).
    pub fn trust(mut self, network: &str) -> Result<ClientIp, InvalidNetwork> {
        self.trusted_proxies.push(parse_network(network)?);
        Ok(self)
    }

    /// Reads the client from `header` when the peer is trusted (by default
    /// `X-Forwarded-For`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use tollgate::http::{ClientIp, ForwardedHeader, KeyExtractor};
    ///
    /// let key = ClientIp::new().trust("127.0.0.1")?.header(ForwardedHeader::Forwarded);
    /// let mut request = http::Request::get("/")
    ///     .header("forwarded", r#"for="[2001:db8::17]:4711";proto=https"#)
    ///     .header("x-forwarded-for", "6.6.6.6")
    ///     .body(())
    ///     .unwrap();
    /// request.extensions_mut().insert("127.0.0.1:9000".parse::<SocketAddr>()?);
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(key.extract(&parts)?, "2001:db8::17");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn header(mut self, header: ForwardedHeader) -> ClientIp {
        self.header = header;
        self
    }

    /// Keys IPv6 clients by their network of `prefix` bits (as `"2001:db8:1:2::/64"`)
    /// rather than by their address. A host usually holds a whole /64 and can pick a
    /// fresh address in it for every request: keyed by address, it would never be
    /// limited. IPv4 clients (IPv4-mapped ones included) are keyed by address.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use tollgate::http::{ClientIp, KeyExtractor};
    ///
    /// let key = ClientIp::new().ipv6_prefix(64)?;
    /// let mut request = http::Request::get("/").body(()).unwrap();
    /// request.extensions_mut().insert("[2001:db8:1:2:aaaa::9]:443".parse::<SocketAddr>()?);
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(key.extract(&parts)?, "2001:db8:1:2::/64");
    /// assert!(ClientIp::new().ipv6_prefix(129).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`InvalidNetwork`] for a prefix longer than 128 bits.
    pub fn ipv6_prefix(mut self, prefix: u8) -> Result<ClientIp, InvalidNetwork> {
        if prefix > 128 {
            return Err(InvalidNetwork {
                input: prefix.to_string(),
                reason: "an IPv6 prefix length is at most 128",
            });
        }
        self.ipv6_prefix = Some(prefix);
        Ok(self)
    }

    /// Whether `ip` is in a trusted network.
    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies
            .iter()
            .any(|&(network, prefix)| mask(ip, prefix) == Some(network))
    }

    /// The client's address for a request from `peer`.
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.is_trusted(client) {
            return client;
        }
        let hops = match self.header {
            ForwardedHeader::XForwardedFor => x_forwarded_for(headers),
            ForwardedHeader::Forwarded => forwarded_for(headers),
        };
        for hop in hops.into_iter().rev() {
            match hop {
                Some(ip) => client = ip.to_canonical(),
                None => break,
            }
            if !self.is_trusted(client) {
                break;
            }
        }
        client
    }
}

/// The address formatted into the key itself, no `String`: IPv4 by hand (the common
/// case, and `Display` is several times slower), IPv6 through `Display`.
impl KeyExtractor for ClientIp {
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError> {
        let peer = peer_address(request).ok_or(KeyError::NoPeerAddress)?;
        let client = self.client(peer, &request.headers);
        Ok(match (client, self.ipv6_prefix) {
            (IpAddr::V4(v4), _) => ipv4_key(v4),
            (IpAddr::V6(_), Some(prefix)) => {
                let network = mask(client, prefix).unwrap_or(client);
                Key::format(format_args!("{network}/{prefix}"))
            }
            (IpAddr::V6(v6), None) => Key::format(format_args!("{v6}")),
        })
    }
}

/// `ip` in dotted decimal, as its `Display` writes it.
fn ipv4_key<'a>(ip: Ipv4Addr) -> Key<'a> {
    let mut bytes = [0; INLINE];
    let mut len = 0;
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            bytes[len] = b'.';
            len += 1;
        }
        if octet >= 100 {
            bytes[len] = b'0' + octet / 100;
            len += 1;
        }
        if octet >= 10 {
            bytes[len] = b'0' + octet / 10 % 10;
            len += 1;
        }
        bytes[len] = b'0' + octet % 10;
        len += 1;
    }
    // At most 15 bytes.
    Key(Repr::Inline {
        len: len as u8,
        bytes,
    })
}

/// The connection's peer, as the server recorded it in the request's extensions.
fn peer_address(request: &Parts) -> Option<IpAddr> {
    let extensions = &request.extensions;
    if let Some(addr) = extensions.get::<SocketAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    extensions.get::<IpAddr>().copied()
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// A header line as text: a byte that is not UTF-8 spoils only the entry it is in,
/// not the whole line (a proxy appends to the line the client sent).
fn line(value: &HeaderValue) -> Cow<'_, str> {
    String::from_utf8_lossy(value.as_bytes())
}

/// `s` without HTTP's optional whitespace around it.
fn trim_ows(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Every `X-Forwarded-For` entry, left to right across all the header's lines: `None`
/// for one that is not an address. Empty entries are skipped, as RFC 9110 asks of
/// lists.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let mut hops = Vec::new();
    for value in headers.get_all(X_FORWARDED_FOR) {
        let value = line(value);
        let entries = value.split(',').map(trim_ows).filter(|hop| !hop.is_empty());
        hops.extend(entries.map(parse_node));
    }
    hops
}

/// The `for=` of every RFC 7239 `Forwarded` element, left to right: `None` for an
/// element without one or whose node is not an address. Empty elements are skipped.
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let mut hops = Vec::new();
    for value in headers.get_all(FORWARDED) {
        let value = line(value);
        for element in split_unquoted(&value, ',') {
            if trim_ows(element).is_empty() {
                continue;
            }
            let node = split_unquoted(element, ';').into_iter().find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                trim_ows(name)
                    .eq_ignore_ascii_case("for")
                    .then(|| unquote(trim_ows(value)))
            });
            hops.push(node.and_then(|node| parse_node(&node)));
        }
    }
    hops
}

/// `s` split at each `separator` outside a quoted string.
fn split_unquoted(s: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The content of an RFC 7230 quoted string, or `s` as it is if it is a token.
fn unquote(s: &str) -> String {
    let Some(inner) = s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return s.to_owned();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// An address, with or without a port: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`. The port may be an RFC 7239 obfuscated one
/// (`192.0.2.1:_hidden`): the address is still known.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Some(rest) = node.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok
            .then(|| ip.parse::<Ipv6Addr>().ok())
            .flatten()
            .map(IpAddr::V6);
    }
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    // An IPv6 address with a port is bracketed, so this is IPv4 with a port.
    let (ip, port) = node.split_once(':')?;
    is_port(port)
        .then(|| ip.parse::<Ipv4Addr>().ok())
        .flatten()
        .map(IpAddr::V4)
}

/// An RFC 7239 node-port: up to 5 digits, or `_` and an obfuscated identifier.
fn is_port(port: &str) -> bool {
    let digits = (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
    let obfuscated = port.strip_prefix('_').is_some_and(|id| {
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    digits || obfuscated
}

/// `ip` with every bit after the first `prefix` cleared; `None` if the prefix is
/// longer than the address.
fn mask(ip: IpAddr, prefix: u8) -> Option<IpAddr> {
    let prefix = u32::from(prefix);
    match ip {
        IpAddr::V4(v4) if prefix <= 32 => {
            let keep = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            Some(IpAddr::V4((u32::from(v4) & keep).into()))
        }
        IpAddr::V6(v6) if prefix <= 128 => {
            let keep = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            Some(IpAddr::V6((u128::from(v6) & keep).into()))
        }
        _ => None,
    }
}

fn parse_network(network: &str) -> Result<(IpAddr, u8), InvalidNetwork> {
    let invalid = |reason| InvalidNetwork {
        input: network.to_owned(),
        reason,
    };
    let trimmed = network.trim();
    let (address, prefix) = match trimmed.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (trimmed, None),
    };
    let bracketed = address.strip_prefix('[').and_then(|a| a.strip_suffix(']'));
    let ip = match bracketed {
        Some(v6) => v6.parse::<Ipv6Addr>().map(IpAddr::V6),
        None => address.parse::<IpAddr>(),
    }
    .map_err(|_| invalid("not an IP address"))?
    .to_canonical();
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => bits,
        Some(p) => p.parse::<u8>().ok().filter(|&p| p <= bits).ok_or_else(|| {
            invalid(if ip.is_ipv4() {
                "the prefix length is not a number from 0 to 32"
            } else {
                "the prefix length is not a number from 0 to 128"
            })
        })?,
    };
    let network = mask(ip, prefix).ok_or_else(|| invalid("the prefix is too long"))?;
    Ok((network, prefix))
}

/// A trusted network that could not be parsed: see [`ClientIp::trust`].
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
    input: String,
    reason: &'static str,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(peer: Option<&str>, headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::get("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let mut request = builder.body(()).unwrap();
        if let Some(peer) = peer {
            request
                .extensions_mut()
                .insert(peer.parse::<SocketAddr>().unwrap());
        }
        request.into_parts().0
    }

    fn key(extractor: &ClientIp, peer: &str, headers: &[(&str, &str)]) -> String {
        extractor
            .extract(&parts(Some(peer), headers))
            .unwrap()
            .into_string()
    }

    #[test]
    fn untrusted_peer_cannot_spoof_its_key() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let spoof = [
            ("x-forwarded-for", "1.1.1.1"),
            ("forwarded", "for=1.1.1.1"),
            ("x-real-ip", "1.1.1.1"),
        ];
        assert_eq!(key(&ip, "203.0.113.5:1000", &spoof), "203.0.113.5");
        let nobody = ClientIp::new();
        assert_eq!(key(&nobody, "10.0.0.1:1000", &spoof), "10.0.0.1");
    }

    #[test]
    fn a_client_prepending_entries_behind_a_trusted_proxy_is_keyed_by_what_the_proxy_saw() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "1.1.1.1, 2.2.2.2, 203.0.113.7")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
    }

    #[test]
    fn a_chain_of_trusted_proxies_is_walked_right_to_left() {
        let ip = ClientIp::new()
            .trust("10.0.0.0/8")
            .unwrap()
            .trust("192.168.1.1")
            .unwrap();
        let h = [(
            "x-forwarded-for",
            "6.6.6.6, 203.0.113.7, 10.9.9.9, 192.168.1.1",
        )];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        // The same entries over several header lines.
        let h = [
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "203.0.113.7, 10.9.9.9"),
            ("x-forwarded-for", "192.168.1.1"),
        ];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
    }

    #[test]
    fn a_client_inside_a_trusted_network_cannot_spoof_through_an_untrusted_address() {
        // 192.168.1.2 is not trusted: it is what the proxy saw, whatever is to its left.
        let ip = ClientIp::new().trust("192.168.1.1/32").unwrap();
        let h = [("x-forwarded-for", "10.0.0.9, 192.168.1.2")];
        assert_eq!(key(&ip, "192.168.1.1:1000", &h), "192.168.1.2");
    }

    #[test]
    fn all_trusted_yields_the_leftmost_address() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "10.1.1.1, 10.2.2.2")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "10.1.1.1");
    }

    #[test]
    fn a_trusted_peer_without_the_header_is_the_key() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        assert_eq!(key(&ip, "10.0.0.2:1000", &[]), "10.0.0.2");
        assert_eq!(
            key(&ip, "10.0.0.2:1000", &[("x-forwarded-for", "")]),
            "10.0.0.2"
        );
    }

    #[test]
    fn garbage_ends_the_walk_at_the_last_address_known() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "203.0.113.7, unknown, 10.3.3.3")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "10.3.3.3");
        let h = [("x-forwarded-for", "not an address")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "10.0.0.2");
    }

    #[test]
    fn entries_with_ports_and_brackets_are_addresses() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "203.0.113.7:5555")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        let h = [("x-forwarded-for", "[2001:db8::1]:80")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "2001:db8::1");
        let h = [("x-forwarded-for", "[2001:db8::2]")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "2001:db8::2");
    }

    /// The bug: a byte that is not UTF-8 anywhere in a line voided the whole line, so
    /// a client sending `X-Forwarded-For: \xff` through a proxy that appends to it
    /// was keyed as the proxy, escaping its own limit.
    #[test]
    fn a_byte_that_is_not_utf8_spoils_only_its_entry() {
        let with = |name: &str, value: &[u8]| {
            let mut request = http::Request::get("/").body(()).unwrap();
            request.headers_mut().append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
            request
                .extensions_mut()
                .insert("10.0.0.2:1000".parse::<SocketAddr>().unwrap());
            request.into_parts().0
        };
        let xff = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let request = with("x-forwarded-for", b"6.6.6.\xff, 203.0.113.7");
        assert_eq!(xff.extract(&request).unwrap(), "203.0.113.7");
        let rfc = xff.clone().header(ForwardedHeader::Forwarded);
        let request = with("forwarded", b"for=\"\xfe\", for=203.0.113.8");
        assert_eq!(rfc.extract(&request).unwrap(), "203.0.113.8");
        // Behind two proxies, garbage the first one reports still ends the walk.
        let request = with("x-forwarded-for", b"203.0.113.7, \xff, 10.3.3.3");
        assert_eq!(xff.extract(&request).unwrap(), "10.3.3.3");
    }

    /// The bug: empty list entries (`a, , b` or a trailing comma, which RFC 9110 says
    /// to ignore) ended the walk, keying the client as its proxy.
    #[test]
    fn empty_entries_are_skipped() {
        let ip = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "203.0.113.7, , 10.1.1.1,")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        let rfc = ip.header(ForwardedHeader::Forwarded);
        let h = [("forwarded", "for=203.0.113.7,, for=10.1.1.1 ,")];
        assert_eq!(key(&rfc, "10.0.0.2:1000", &h), "203.0.113.7");
    }

    /// The bug: an obfuscated port (RFC 7239 `for="192.0.2.43:_p"`) made the node
    /// unreadable, though its address is plain.
    #[test]
    fn obfuscated_ports_are_ignored_and_bad_ports_are_not_addresses() {
        let ip = ClientIp::new()
            .trust("10.0.0.0/8")
            .unwrap()
            .header(ForwardedHeader::Forwarded);
        let h = [("forwarded", r#"for="203.0.113.7:_abc-1""#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        let h = [("forwarded", r#"for="[2001:db8::1]:_x.y""#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "2001:db8::1");
        for bad in [
            "203.0.113.7:",
            "203.0.113.7:123456",
            "203.0.113.7:_",
            "203.0.113.7:_a b",
            "[2001:db8::1]x",
            "[2001:db8::1]:",
            "[203.0.113.7]",
            "2001:db8::1:_x",
        ] {
            assert_eq!(parse_node(bad), None, "{bad}");
        }
        assert_eq!(
            parse_node("2001:db8::1"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(
            parse_node("203.0.113.7:80"),
            Some("203.0.113.7".parse().unwrap())
        );
    }

    #[test]
    fn forwarded_is_read_only_when_chosen() {
        let xff = ClientIp::new().trust("10.0.0.0/8").unwrap();
        let rfc = xff.clone().header(ForwardedHeader::Forwarded);
        let h = [
            ("forwarded", "for=198.51.100.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ];
        assert_eq!(key(&xff, "10.0.0.2:1000", &h), "203.0.113.7");
        assert_eq!(key(&rfc, "10.0.0.2:1000", &h), "198.51.100.1");
    }

    #[test]
    fn forwarded_elements_pairs_and_quotes() {
        let ip = ClientIp::new()
            .trust("10.0.0.0/8")
            .unwrap()
            .header(ForwardedHeader::Forwarded);
        let h = [(
            "forwarded",
            r#"for=6.6.6.6, For="[2001:db8:cafe::17]:4711";proto=https;by=10.0.0.1, for=10.1.1.1"#,
        )];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "2001:db8:cafe::17");
        // A comma inside a quoted value does not split the element.
        let h = [("forwarded", r#"for=6.6.6.6;x="a,b", for=203.0.113.7"#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        // An obfuscated node or an element without `for` ends the walk.
        let h = [("forwarded", r#"for=6.6.6.6, for="_hidden""#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "10.0.0.2");
        let h = [("forwarded", "for=6.6.6.6, proto=http")];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "10.0.0.2");
    }

    #[test]
    fn ipv4_mapped_peers_are_keyed_and_trusted_as_ipv4() {
        let ip = ClientIp::new().trust("127.0.0.1").unwrap();
        assert_eq!(key(&ip, "[::ffff:192.0.2.1]:80", &[]), "192.0.2.1");
        let h = [("x-forwarded-for", "203.0.113.7")];
        assert_eq!(key(&ip, "[::ffff:127.0.0.1]:80", &h), "203.0.113.7");
    }

    #[test]
    fn networks_parse_with_typed_errors() {
        let parsed = |s| parse_network(s);
        assert_eq!(parsed("10.1.2.3/8"), Ok(("10.0.0.0".parse().unwrap(), 8)));
        assert_eq!(parsed("10.1.2.3"), Ok(("10.1.2.3".parse().unwrap(), 32)));
        assert_eq!(parsed("0.0.0.0/0"), Ok(("0.0.0.0".parse().unwrap(), 0)));
        assert_eq!(parsed("fd00::1/8"), Ok(("fd00::".parse().unwrap(), 8)));
        assert_eq!(parsed("::1"), Ok(("::1".parse().unwrap(), 128)));
        for bad in [
            "",
            "10.0.0.0/",
            "10.0.0.0/33",
            "10.0.0/8",
            "::/129",
            "x/8",
            "10.0.0.0/-1",
        ] {
            let error = parsed(bad).unwrap_err();
            assert_eq!(error.input(), bad);
        }
    }

    #[test]
    fn network_membership() {
        let ip = ClientIp::new()
            .trust("10.0.0.0/8")
            .unwrap()
            .trust("2001:db8::/32")
            .unwrap();
        assert!(ip.is_trusted("10.255.0.1".parse().unwrap()));
        assert!(!ip.is_trusted("11.0.0.1".parse().unwrap()));
        assert!(ip.is_trusted("2001:db8:1::1".parse().unwrap()));
        assert!(!ip.is_trusted("2001:db9::1".parse().unwrap()));
        let everyone = ClientIp::new().trust("0.0.0.0/0").unwrap();
        assert!(everyone.is_trusted("8.8.8.8".parse().unwrap()));
        assert!(!everyone.is_trusted("::8".parse().unwrap()));
    }

    #[test]
    fn ipv6_clients_can_be_keyed_by_network() {
        let ip = ClientIp::new().ipv6_prefix(64).unwrap();
        assert_eq!(key(&ip, "[2001:db8:0:1::5]:1", &[]), "2001:db8:0:1::/64");
        assert_eq!(
            key(&ip, "[2001:db8:0:1:ffff::]:1", &[]),
            "2001:db8:0:1::/64"
        );
        assert_eq!(key(&ip, "[2001:db8:0:2::5]:1", &[]), "2001:db8:0:2::/64");
        assert_eq!(key(&ip, "192.0.2.1:1", &[]), "192.0.2.1");
        assert_eq!(key(&ip, "[::ffff:192.0.2.1]:1", &[]), "192.0.2.1");
        // Behind a trusted proxy, the forwarded client's network.
        let proxied = ip.trust("10.0.0.0/8").unwrap();
        let h = [("x-forwarded-for", "2001:db8:7:7:1::1")];
        assert_eq!(key(&proxied, "10.0.0.1:1", &h), "2001:db8:7:7::/64");
        assert_eq!(ClientIp::new().ipv6_prefix(129).unwrap_err().input(), "129");
    }

    #[test]
    fn no_peer_address_is_an_error() {
        assert_eq!(
            ClientIp::new().extract(&parts(None, &[("x-forwarded-for", "1.1.1.1")])),
            Err(KeyError::NoPeerAddress)
        );
    }

    /// Every octet width in every position, against `Display`.
    #[test]
    fn ipv4_keys_read_as_display_writes_them() {
        let octets = [0, 1, 9, 10, 42, 99, 100, 199, 200, 255];
        for a in octets {
            for b in octets {
                for c in octets {
                    for d in octets {
                        let ip = Ipv4Addr::new(a, b, c, d);
                        assert_eq!(ipv4_key(ip).as_str(), ip.to_string());
                    }
                }
            }
        }
    }

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
        let request = parts(Some(peer), &[]);
        let key = longest.extract(&request).unwrap();
        assert!(matches!(key.0, Repr::Inline { .. }));
        assert_eq!(key, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128");
        assert_eq!(key.clone().into_string(), key.as_str());
    }

    #[test]
    fn header_keys() {
        let k = HeaderKey::from_static("x-api-key");
        assert_eq!(
            k.extract(&parts(None, &[("x-api-key", "a"), ("x-api-key", "b")])),
            Ok("a".into())
        );
        assert_eq!(
            k.extract(&parts(None, &[("x-api-key", "")])),
            Err(KeyError::MissingHeader(k.name().clone()))
        );
    }
}
