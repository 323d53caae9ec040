//! The `Forwarded` (RFC 7239) and `X-Forwarded-For` lists, as the client IP extractor
//! reads them: every hop's address, left to right, `None` for a hop that names none.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::header::FORWARDED;
use http::{HeaderMap, HeaderName, HeaderValue};

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
pub(crate) fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
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
pub(crate) fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7239 node-ports: digits or an obfuscated `_identifier`; anything else
    /// makes the node unreadable.
    #[test]
    fn bad_ports_are_not_addresses() {
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
        assert_eq!(
            parse_node("203.0.113.7:_abc-1"),
            Some("203.0.113.7".parse().unwrap())
        );
    }
}
