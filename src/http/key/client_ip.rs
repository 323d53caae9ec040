//! Keys by the client's IP address: the [`ClientIp`] extractor.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use http::HeaderMap;
use http::request::Parts;
use ipnet::Ipv6Net;

use super::proxies::TrustedProxies;
use super::{INLINE, InvalidNetwork, Key, KeyError, KeyExtractor, Repr};
use crate::http::wire;

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
    trusted_proxies: TrustedProxies,
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
        self.trusted_proxies.add(network)?;
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

    /// The client's address for a request from `peer`.
    #[inline]
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusted_proxies.contains(peer) {
            return peer;
        }
        let hops = match self.header {
            ForwardedHeader::XForwardedFor => wire::x_forwarded_for(headers),
            ForwardedHeader::Forwarded => wire::forwarded_for(headers),
        };
        self.trusted_proxies.walk(peer, hops)
    }
}

/// The address formatted into the key itself, no `String`: IPv4 by hand (the common
/// case, and `Display` is several times slower), IPv6 through `Display`.
impl KeyExtractor for ClientIp {
    #[inline(always)]
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError> {
        let peer = peer_address(request).ok_or(KeyError::NoPeerAddress)?;
        let client = self.client(peer, &request.headers);
        Ok(match (client, self.ipv6_prefix) {
            (IpAddr::V4(v4), _) => ipv4_key(v4),
            (IpAddr::V6(v6), Some(prefix)) => match Ipv6Net::new(v6, prefix) {
                Ok(network) => Key::format(format_args!("{}", network.trunc())),
                // `ipv6_prefix` took at most 128 bits.
                Err(_) => Key::format(format_args!("{v6}")),
            },
            (IpAddr::V6(v6), None) => Key::format(format_args!("{v6}")),
        })
    }
}

/// `ip` in dotted decimal, as its `Display` writes it.
#[inline]
fn ipv4_key<'a>(ip: Ipv4Addr) -> Key<'a> {
    // At most 15 bytes, gathered in a register an octet at a time and stored at
    // once: stored a byte at a time, the key's copies that follow would wait on
    // each byte (store forwarding fails on wider loads of narrow stores).
    let [first, rest @ ..] = ip.octets();
    let (text, mut len) = octet_text(first);
    let mut text = u128::from(text);
    for octet in rest {
        let (digits, digits_len) = octet_text(octet);
        text |= u128::from(u32::from(b'.') | digits << 8) << (8 * len);
        len += 1 + digits_len;
    }
    let mut bytes = [0; INLINE];
    bytes[..16].copy_from_slice(&text.to_le_bytes());
    Key(Repr::Inline {
        len: len as u8,
        bytes,
    })
}

/// `octet` in decimal, its digits in the low bytes of a `u32` (first digit lowest),
/// and how many there are.
#[inline]
fn octet_text(octet: u8) -> (u32, u32) {
    let digit = |d: u8| u32::from(b'0' + d);
    let (hundreds, tens, units) = (octet / 100, octet / 10 % 10, octet % 10);
    if octet >= 100 {
        (digit(hundreds) | digit(tens) << 8 | digit(units) << 16, 3)
    } else if octet >= 10 {
        (digit(tens) | digit(units) << 8, 2)
    } else {
        (digit(units), 1)
    }
}

/// The connection's peer, as the server recorded it in the request's extensions.
#[inline]
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderName, HeaderValue};

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
    fn obfuscated_ports_are_ignored() {
        let ip = ClientIp::new()
            .trust("10.0.0.0/8")
            .unwrap()
            .header(ForwardedHeader::Forwarded);
        let h = [("forwarded", r#"for="203.0.113.7:_abc-1""#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "203.0.113.7");
        let h = [("forwarded", r#"for="[2001:db8::1]:_x.y""#)];
        assert_eq!(key(&ip, "10.0.0.2:1000", &h), "2001:db8::1");
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
        // A network written in IPv4-mapped form trusts the IPv4 peers it maps.
        let mapped = ClientIp::new().trust("::ffff:10.0.0.0/104").unwrap();
        assert_eq!(key(&mapped, "10.9.8.7:80", &h), "203.0.113.7");
        assert_eq!(key(&mapped, "[::ffff:10.9.8.7]:80", &h), "203.0.113.7");
        assert_eq!(key(&mapped, "11.0.0.1:80", &h), "11.0.0.1");
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
        let everyone = ClientIp::new().ipv6_prefix(0).unwrap();
        assert_eq!(key(&everyone, "[2001:db8::1]:1", &[]), "::/0");
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
}
