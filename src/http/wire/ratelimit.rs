//! `RateLimit` and `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10):
//! structured-field lists (RFC 9651) whose items are policy names with parameters,
//! read and written through `sfv`.

use std::borrow::Cow;
use std::fmt::Write;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use sfv::{
    BareItem, Integer, ItemSerializer, KeyRef, ListEntry, ListSerializer, Parameters, Parser,
    StringRef, key_ref,
};

use super::policy::Policy;
use super::{RATELIMIT, RATELIMIT_POLICY, seconds_up};

const Q: &KeyRef = key_ref("q");
const W: &KeyRef = key_ref("w");

/// `n` as an sf-integer, clamped to the largest one (15 digits): a field with a
/// larger integer would be invalid whole, and a client would then ignore every policy
/// in it.
fn sf_integer(n: u64) -> Integer {
    Integer::try_from(n).unwrap_or(Integer::MAX)
}

/// `name` as the text of an sf-string: itself when it is printable ASCII, else with
/// each byte that is not percent-encoded (see the [module docs](super#policy-names)).
fn sf_name(name: &str) -> Cow<'_, StringRef> {
    if let Ok(name) = StringRef::from_str(name) {
        return Cow::Borrowed(name);
    }
    let mut encoded = std::string::String::with_capacity(name.len() * 3);
    for byte in name.bytes() {
        match byte {
            0x20..=0x7e => encoded.push(char::from(byte)),
            _ => {
                let _ = write!(encoded, "%{byte:02x}");
            }
        }
    }
    let encoded = sfv::String::from_string(encoded)
        .map_err(|(error, _)| error)
        .expect("printable ASCII is a valid sf-string");
    Cow::Owned(encoded)
}

/// `name` as a structured-field string, quotes included; see the
/// [module docs](super#policy-names) for names that are not printable ASCII.
///
/// # Examples
///
/// ```
/// use tollgate::http::wire::sf_string;
///
/// assert_eq!(sf_string("burst"), r#""burst""#);
/// assert_eq!(sf_string(r#"say "hi" \o/"#), r#""say \"hi\" \\o/""#);
/// assert_eq!(sf_string("käse\n"), r#""k%c3%a4se%0a""#);
/// ```
pub fn sf_string(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    let _ = ItemSerializer::with_buffer(&mut out).bare_item(&*sf_name(name));
    out
}

/// The `RateLimit-Policy` value listing `policies`: each name with its quota `q` and,
/// unless it has none, its window `w` in seconds rounded up.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::wire::policy_value;
/// use tollgate::http::Policy;
///
/// let value = policy_value(&[
///     Policy::new("burst", 100, Duration::from_secs(60)),
///     Policy::new("daily", 1_000, Duration::from_secs(86_400)),
/// ]);
/// assert_eq!(value, r#""burst";q=100;w=60, "daily";q=1000;w=86400"#);
/// ```
pub fn policy_value(policies: &[Policy]) -> HeaderValue {
    let mut list = ListSerializer::new();
    for policy in policies {
        let item = list
            .bare_item(&*sf_name(&policy.name))
            .parameter(Q, sf_integer(policy.quota));
        if !policy.window.is_zero() {
            let _ = item.parameter(W, sf_integer(seconds_up(policy.window)));
        }
    }
    value(list.finish().unwrap_or_default())
}

/// The `RateLimit` value of `policy` with `remaining` permits and `t` seconds until
/// more quota, each clamped to the largest sf-integer; `t` is left out when given as
/// `None` (more quota comes with a release, not with time).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::wire::ratelimit_value;
/// use tollgate::http::Policy;
///
/// let burst = Policy::new("burst", 100, Duration::from_secs(60));
/// assert_eq!(ratelimit_value(&burst, 0, 12), r#""burst";r=0;t=12"#);
/// assert_eq!(ratelimit_value(&burst, 0, None), r#""burst";r=0"#);
/// ```
pub fn ratelimit_value(policy: &Policy, remaining: u64, t: impl Into<Option<u64>>) -> HeaderValue {
    // Sent on every response, so written by hand: through `sfv` (the name checked,
    // then escaped; the integers through `write!`) the field cost 177 ns against
    // 124 ns here (`benches/http.rs`, group `http_wire`, one run). The buffer is
    // sized exactly, so that it becomes the value's bytes without another
    // allocation. A test holds the two to the same bytes.
    let name = policy.name.as_bytes();
    let plain = name.iter().all(|&byte| is_plain(byte));
    let remaining = Decimal::new(sf_u64(remaining));
    let t = t.into().map(|t| Decimal::new(sf_u64(t)));
    let len = if plain {
        name.len() + 2
    } else {
        sf_string_len(name)
    } + b";r=".len()
        + remaining.len()
        + t.as_ref().map_or(0, |t| b";t=".len() + t.len());
    let mut out = Vec::with_capacity(len);
    if plain {
        out.push(b'"');
        out.extend_from_slice(name);
        out.push(b'"');
    } else {
        push_sf_string(&mut out, name);
    }
    out.extend_from_slice(b";r=");
    out.extend_from_slice(remaining.as_bytes());
    if let Some(t) = &t {
        out.extend_from_slice(b";t=");
        out.extend_from_slice(t.as_bytes());
    }
    debug_assert_eq!(out.len(), len, "the RateLimit value's length");
    HeaderValue::try_from(out).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `n` clamped to the largest sf-integer, as [`sf_integer`] does.
fn sf_u64(n: u64) -> u64 {
    const MAX: u64 = 999_999_999_999_999;
    n.min(MAX)
}

/// Whether an sf-string holds `byte` as itself: printable ASCII but `"` and `\\`.
fn is_plain(byte: u8) -> bool {
    matches!(byte, 0x20..=0x7e) && byte != b'"' && byte != b'\\'
}

/// The bytes [`push_sf_string`] writes for `name`, quotes included.
fn sf_string_len(name: &[u8]) -> usize {
    2 + name
        .iter()
        .map(|&byte| match byte {
            b'"' | b'\\' => 2,
            0x20..=0x7e => 1,
            _ => 3,
        })
        .sum::<usize>()
}

/// Appends `name` as an sf-string to `out`, as `sfv` writes [`sf_name`]'s result.
fn push_sf_string(out: &mut Vec<u8>, name: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &byte in name {
        match byte {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', byte]),
            0x20..=0x7e => out.push(byte),
            _ => out.extend_from_slice(&[
                b'%',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]),
        }
    }
    out.push(b'"');
}

/// The decimal digit pairs `00` to `99`, for writing two digits per division.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// A `u64` in decimal: its digits at the end of a buffer, written two at a time
/// from the last.
struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    fn new(mut n: u64) -> Decimal {
        let mut digits = [b'0'; 20];
        let mut start = digits.len();
        while n >= 100 {
            let pair = (n % 100) as usize * 2;
            n /= 100;
            start -= 2;
            digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            let pair = n as usize * 2;
            start -= 2;
            digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        } else {
            start -= 1;
            digits[start] = b'0' + n as u8;
        }
        Decimal { digits, start }
    }

    fn len(&self) -> usize {
        self.digits.len() - self.start
    }

    fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// A value built only of printable ASCII, which is always a valid field value.
fn value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// One item of a `RateLimit` field: what is left of a quota, and when more comes.
///
/// # Examples
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// use std::time::Duration;
/// use tollgate::http::wire::rate_limit;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12, "daily";r=800"#));
/// let items = rate_limit(&headers);
/// assert_eq!(items[0].policy(), "burst");
/// assert_eq!(items[0].remaining(), 0);
/// assert_eq!(items[0].reset(), Some(Duration::from_secs(12)));
/// assert_eq!(items[1].reset(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitItem {
    policy: String,
    remaining: u64,
    reset: Option<Duration>,
}

impl RateLimitItem {
    /// The policy's name (the item itself, a string in the draft).
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12"#));
    /// let item = &tollgate::http::wire::rate_limit(&headers)[0];
    /// assert_eq!(item.policy(), "burst");
    /// ```
    pub fn policy(&self) -> &str {
        &self.policy
    }

    /// `r`: the quota units left.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12"#));
    /// let item = &tollgate::http::wire::rate_limit(&headers)[0];
    /// assert_eq!(item.remaining(), 0);
    /// ```
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// `t`: how long until more quota is available, if the server said.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12"#));
    /// let item = &tollgate::http::wire::rate_limit(&headers)[0];
    /// assert_eq!(item.reset(), Some(Duration::from_secs(12)));
    /// ```
    pub fn reset(&self) -> Option<Duration> {
        self.reset
    }
}

/// One item of a `RateLimit-Policy` field: a quota and its window.
///
/// # Examples
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// use std::time::Duration;
/// use tollgate::http::wire::rate_limit_policy;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit-policy", HeaderValue::from_static(r#""burst";q=100;w=60"#));
/// let policies = rate_limit_policy(&headers);
/// assert_eq!(policies[0].name(), "burst");
/// assert_eq!(policies[0].quota(), 100);
/// assert_eq!(policies[0].window(), Some(Duration::from_secs(60)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitPolicyItem {
    name: String,
    quota: u64,
    window: Option<Duration>,
    unit: Option<String>,
}

impl RateLimitPolicyItem {
    /// The policy's name.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::wire::rate_limit_policy(&headers)[0];
    /// assert_eq!(policy.name(), "daily");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `q`: the quota, in quota units.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::wire::rate_limit_policy(&headers)[0];
    /// assert_eq!(policy.quota(), 1000);
    /// ```
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// `w`: the window, if given.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::wire::rate_limit_policy(&headers)[0];
    /// assert_eq!(policy.window(), Some(Duration::from_secs(86_400)));
    /// ```
    pub fn window(&self) -> Option<Duration> {
        self.window
    }

    /// `qu`: the quota unit (`"requests"`, `"content-bytes"`, ...), if given.
    ///
    /// # Examples
    ///
    /// ```
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::wire::rate_limit_policy(&headers)[0];
    /// assert_eq!(policy.unit(), Some("requests"));
    /// ```
    pub fn unit(&self) -> Option<&str> {
        self.unit.as_deref()
    }
}

/// The items of the response's `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-10),
/// in order. Several field lines are joined as one list.
///
/// # Errors
///
/// None: a field that is not a valid structured-field list yields no items, and an
/// item without a valid `r` (a non-negative integer), or with a `t` that is not one, is
/// skipped. The name may be a string (as the draft says) or a token. Parameters may
/// come in any order; unknown ones are ignored, and a repeated one counts as its last.
///
/// # Examples
///
/// See [`RateLimitItem`].
pub fn rate_limit(headers: &HeaderMap) -> Vec<RateLimitItem> {
    items(headers, RATELIMIT)
        .filter_map(|(name, params)| {
            let remaining = non_negative(params.get("r")?)?;
            let reset = match params.get("t") {
                Some(t) => Some(Duration::from_secs(non_negative(t)?)),
                None => None,
            };
            Some(RateLimitItem {
                policy: name,
                remaining,
                reset,
            })
        })
        .collect()
}

/// The items of the response's `RateLimit-Policy` fields, in order.
///
/// # Errors
///
/// None: as for [`rate_limit`], an invalid field yields no items, and an item without
/// a valid `q` (or with an invalid `w` or `qu`) is skipped.
///
/// # Examples
///
/// See [`RateLimitPolicyItem`].
pub fn rate_limit_policy(headers: &HeaderMap) -> Vec<RateLimitPolicyItem> {
    items(headers, RATELIMIT_POLICY)
        .filter_map(|(name, params)| {
            let quota = non_negative(params.get("q")?)?;
            let window = match params.get("w") {
                Some(w) => Some(Duration::from_secs(non_negative(w)?)),
                None => None,
            };
            let unit = match params.get("qu") {
                Some(BareItem::String(unit)) => Some(unit.as_str().to_owned()),
                Some(_) => return None,
                None => None,
            };
            Some(RateLimitPolicyItem {
                name,
                quota,
                window,
                unit,
            })
        })
        .collect()
}

/// The items of every line of the list field `name`, joined, with their names (a
/// string or a token) and parameters; none when any line is not a valid list. Inner
/// lists and items named otherwise are skipped.
fn items(
    headers: &HeaderMap,
    name: HeaderName,
) -> impl Iterator<Item = (String, Parameters)> + use<> {
    let mut joined = Vec::new();
    for line in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    let list: sfv::List = Parser::new(&joined).parse().unwrap_or_default();
    list.into_iter().filter_map(|member| {
        let ListEntry::Item(item) = member else {
            return None;
        };
        let name = match &item.bare_item {
            BareItem::String(s) => s.as_str().to_owned(),
            BareItem::Token(t) => t.as_str().to_owned(),
            _ => return None,
        };
        Some((name, item.params))
    })
}

fn non_negative(bare: &BareItem) -> Option<u64> {
    u64::try_from(bare.as_integer()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        let mut n = 1;
        for _ in 0..19 {
            for n in [n - 1, n, n + 1, n * 5] {
                assert_eq!(Decimal::new(n).as_bytes(), n.to_string().as_bytes());
                assert_eq!(Decimal::new(n).len(), n.to_string().len());
            }
            n = n.saturating_mul(10);
        }
        assert_eq!(
            Decimal::new(u64::MAX).as_bytes(),
            u64::MAX.to_string().as_bytes()
        );
    }

    /// Every kind of byte a name can hold, each alone and together: the length
    /// reserved is the length written.
    #[test]
    fn the_ratelimit_value_is_sized_exactly() {
        for name in [
            "",
            "default",
            "a\"b\\c",
            "\t\u{7f}",
            "k\u{e4}se",
            "50% \"\u{65e5}\"",
        ] {
            let mut out = Vec::new();
            push_sf_string(&mut out, name.as_bytes());
            assert_eq!(out.len(), sf_string_len(name.as_bytes()), "{name:?}");
            assert_eq!(out, sf_string(name).as_bytes(), "{name:?}");
        }
    }

    #[test]
    fn sf_strings_escape_and_encode() {
        assert_eq!(sf_string(""), r#""""#);
        assert_eq!(sf_string(" ~"), r#"" ~""#);
        assert_eq!(sf_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(sf_string("\t\x7f"), r#""%09%7f""#);
        assert_eq!(sf_string("日"), r#""%e6%97%a5""#);
        // Percent itself stays: only bytes an sf-string cannot hold are encoded.
        assert_eq!(sf_string("50%"), r#""50%""#);
        // Escapes and encoding together.
        assert_eq!(sf_string("\"é\""), r#""\"%c3%a9\"""#);
    }

    #[test]
    fn windows_round_up_and_zero_is_left_out() {
        let value = policy_value(&[
            Policy::new("a", 20, Duration::from_millis(200)),
            Policy::new("b", 5, Duration::from_millis(60_001)),
            Policy::new("c", 3, Duration::ZERO),
        ]);
        assert_eq!(value, r#""a";q=20;w=1, "b";q=5;w=61, "c";q=3"#);
        assert_eq!(policy_value(&[]), "");
    }

    /// The bug: a quota, window or count above 15 digits was sent as is, which makes
    /// the whole field invalid (RFC 9651 integers have at most 15 digits).
    #[test]
    fn huge_numbers_are_clamped_to_the_largest_sf_integer() {
        let huge = Policy::new("h", u64::MAX, Duration::MAX);
        assert_eq!(
            policy_value(std::slice::from_ref(&huge)),
            r#""h";q=999999999999999;w=999999999999999"#
        );
        assert_eq!(
            ratelimit_value(&huge, u64::MAX, 1_000_000_000_000_000),
            r#""h";r=999999999999999;t=999999999999999"#
        );
        assert_eq!(
            ratelimit_value(&huge, 999_999_999_999_999, 0),
            r#""h";r=999999999999999;t=0"#
        );
    }

    /// The hand-written `RateLimit` writer and `sfv`'s serializer write the same
    /// bytes, escapes and encoded names included.
    #[test]
    fn the_ratelimit_writer_matches_sfv() {
        for (name, remaining, t) in [
            ("burst", 0, 12),
            ("a \"b\" \\ k\u{e4}se", 7, 0),
            ("", u64::MAX, u64::MAX),
            ("\t\u{7f}50%\u{65e5}", 1, 999_999_999_999_999),
        ] {
            let policy = Policy::new(name, 1, Duration::from_secs(1));
            let mut list = ListSerializer::new();
            let _ = list
                .bare_item(&*sf_name(name))
                .parameter(key_ref("r"), sf_integer(remaining))
                .parameter(key_ref("t"), sf_integer(t));
            let expected = list.finish().unwrap();
            assert_eq!(ratelimit_value(&policy, remaining, t), expected.as_str());
        }
    }

    #[test]
    fn rate_limit_items() {
        let h = headers(&[("ratelimit", r#""burst";r=0;t=12, "daily";r=800;t=3600"#)]);
        let items = rate_limit(&h);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].policy(), "burst");
        assert_eq!(items[0].remaining(), 0);
        assert_eq!(items[0].reset(), Some(Duration::from_secs(12)));
        assert_eq!(items[1].remaining(), 800);
    }

    #[test]
    fn parameters_in_any_order_and_unknown_ones_ignored() {
        let h = headers(&[("ratelimit", r#""a";t=9;x=1;r=2;pk=:cHsdsRa894==:"#)]);
        let items = rate_limit(&h);
        assert_eq!(items[0].remaining(), 2);
        assert_eq!(items[0].reset(), Some(Duration::from_secs(9)));
        let h = headers(&[("ratelimit-policy", r#""b";w=60;qu="requests";q=10;zz"#)]);
        let policies = rate_limit_policy(&h);
        assert_eq!(policies[0].quota(), 10);
        assert_eq!(policies[0].window(), Some(Duration::from_secs(60)));
        assert_eq!(policies[0].unit(), Some("requests"));
    }

    #[test]
    fn quoted_names_with_escapes_are_read_unescaped() {
        let h = headers(&[("ratelimit", r#""say \"hi\" \\o/";r=1"#)]);
        assert_eq!(rate_limit(&h)[0].policy(), r#"say "hi" \o/"#);
    }

    #[test]
    fn rate_limit_joins_lines_and_reads_every_bare_item_type() {
        let h = headers(&[
            ("ratelimit", r#""a";r=1;pk=:cHsdsRa894==:"#),
            (
                "ratelimit",
                r#"b;r=2;t=1;x=?1;y=1.5;z=@1700000000;w=%"caf%c3%a9", (1 "two");q, "c";r=3"#,
            ),
        ]);
        let items = rate_limit(&h);
        let names: Vec<_> = items.iter().map(RateLimitItem::policy).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn rate_limit_skips_invalid_items() {
        let h = headers(&[(
            "ratelimit",
            r#""no-r";t=1, "neg";r=-1, "dec";r=1.5, "str";r="0", "bad-t";r=0;t=-3, 12;r=0, ?1;r=0, "ok";r=0;t=3"#,
        )]);
        let items = rate_limit(&h);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].policy(), "ok");
    }

    #[test]
    fn rate_limit_with_a_syntax_error_is_ignored_whole() {
        for bad in [
            r#""a";r=0;t=3,"#,
            r#""a";r=0;t=3,,"b";r=0"#,
            r#""a";r=0;t=3 "b""#,
            r#""unterminated;r=0"#,
            r#""a";R=0"#,
            r#""a";r=0;t=1234567890123456"#,
            r#""a";r=-1234567890123456"#,
            r#""a";r=0;t=1.2345"#,
            r#""a";r=0;t=1."#,
            r#""a\x";r=0"#,
            r#""a";r=0;t=3, (1 2"#,
            r#""a";r=0;b=:abc"#,
            r#""a";r=0;b=?2"#,
            r#""a";r=0;d=%"%zz""#,
            r#""a";r=0;d=%"%ff""#,
            "\"a\";r=0;t=\t3",
            r#"-;r=0"#,
            r#""a";r=--1"#,
            r#"@;r=0"#,
            "\u{e9}",
        ] {
            let mut h = HeaderMap::new();
            h.insert(
                "ratelimit",
                HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
            );
            assert!(rate_limit(&h).is_empty(), "{bad:?}");
        }
        let mut h = headers(&[("ratelimit", r#""a";r=0;t=3"#)]);
        h.append("ratelimit", HeaderValue::from_bytes(b"\xff").unwrap());
        assert!(rate_limit(&h).is_empty(), "one bad line voids the field");
    }

    /// The largest and smallest sf-integers are read; one digit more voids the field.
    #[test]
    fn integers_at_the_edge_of_the_range() {
        let h = headers(&[("ratelimit", r#""a";r=999999999999999;t=0"#)]);
        assert_eq!(rate_limit(&h)[0].remaining(), 999_999_999_999_999);
        let h = headers(&[("ratelimit", r#""a";r=-999999999999999, "b";r=1"#)]);
        assert_eq!(rate_limit(&h).len(), 1);
        let h = headers(&[("ratelimit", r#""a";r=1000000000000000"#)]);
        assert!(rate_limit(&h).is_empty());
    }

    #[test]
    fn rate_limit_accepts_whitespace_where_allowed() {
        let h = headers(&[("ratelimit", "  \"a\";r=0;t=3 ,\t\"b\"; r=1")]);
        assert_eq!(rate_limit(&h).len(), 2);
        assert!(rate_limit(&HeaderMap::new()).is_empty());
        assert!(rate_limit(&headers(&[("ratelimit", "")])).is_empty());
    }

    #[test]
    fn later_parameters_override_earlier_ones() {
        let h = headers(&[("ratelimit", r#""a";r=5;r=0;t=9"#)]);
        assert_eq!(rate_limit(&h)[0].remaining(), 0);
    }

    #[test]
    fn rate_limit_policy_items() {
        let h = headers(&[(
            "ratelimit-policy",
            r#""burst";q=100;w=60, "daily";q=1000;w=86400;qu="requests", "noq";w=1, "badqu";q=1;qu=requests"#,
        )]);
        let policies = rate_limit_policy(&h);
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].name(), "burst");
        assert_eq!(policies[0].window(), Some(Duration::from_secs(60)));
        assert_eq!(policies[0].unit(), None);
        assert_eq!(policies[1].quota(), 1000);
        assert_eq!(policies[1].unit(), Some("requests"));
    }
}
