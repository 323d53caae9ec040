//! What a server says about its limits: `Retry-After` (delay-seconds or an HTTP-date),
//! the IETF draft-10 `RateLimit` and `RateLimit-Policy` structured fields, and the
//! legacy `X-RateLimit-Remaining` / `X-RateLimit-Reset` pair.
//!
//! Every parser here takes untrusted input: it never panics, and a value it cannot read
//! is ignored (as RFC 9651 asks of structured fields: one syntax error voids the field).

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, RETRY_AFTER};

use super::date::http_date;
use super::fields::{field_list, Bare, Member};
use crate::http::headers::{RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET};

// The separate fields of the draft's versions 00 to 06, before the structured fields.
const DRAFT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const DRAFT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// A legacy reset at or above this many is a Unix time in seconds (2001-09-09), not a
/// delay: no API asks a client to wait 31 years.
const EPOCH_SECONDS_FROM: u64 = 1_000_000_000;
/// A legacy reset at or above this many is a Unix time in milliseconds.
const EPOCH_MILLIS_FROM: u64 = 1_000_000_000_000;

/// How long the server asks the client to hold off, from the headers of one response:
/// the longest of
///
/// - every valid `Retry-After` (delay-seconds, or an HTTP-date counted from
///   `now_since_epoch`, the current Unix time; a date in the past means no wait);
/// - the `t` of every `RateLimit` item whose `r` is 0;
///
/// or, only when the response has neither a valid `Retry-After` nor a `RateLimit`
/// item, `X-RateLimit-Reset` when `X-RateLimit-Remaining` is 0 (and the draft's older
/// `RateLimit-Reset` / `RateLimit-Remaining` pair likewise). A reset below 10⁹ is a
/// delay in seconds; from 10⁹ to 10¹² it is a Unix time in seconds (GitHub's
/// convention); from 10¹² on, a Unix time in milliseconds. A fraction is allowed. The
/// legacy pair is a fallback because its meaning varies: many servers (tollgate's
/// among them) send the time until the quota is *full* again, which for a token
/// bucket is far later than the time until the next request may pass.
///
/// `None` when the response carries none of these; a 429 without any of them is for the
/// caller to judge (the client layer then pauses for its default back-off).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, HeaderValue};
/// use tollgate::http::client::backoff;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=3"#));
/// headers.insert("retry-after", HeaderValue::from_static("2"));
/// let wait = backoff(&headers, Duration::ZERO);
/// assert_eq!(wait, Some(Duration::from_secs(3)));
/// ```
pub fn backoff(headers: &HeaderMap, now_since_epoch: Duration) -> Option<Duration> {
    let retry_after = headers
        .get_all(RETRY_AFTER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| retry_after(v, now_since_epoch));
    let items = rate_limit(headers);
    let exhausted = items
        .iter()
        .filter(|item| item.remaining() == 0)
        .filter_map(|item| item.reset());
    let standard = retry_after.chain(exhausted).max();
    if standard.is_some() || !items.is_empty() {
        return standard;
    }
    [
        (X_RATELIMIT_REMAINING, X_RATELIMIT_RESET),
        (DRAFT_REMAINING, DRAFT_RESET),
    ]
    .into_iter()
    .filter_map(|(remaining, reset)| legacy_reset(headers, remaining, reset, now_since_epoch))
    .max()
}

/// Reads a `Retry-After` value: delay-seconds (`120`), or an HTTP-date in any of the
/// three forms RFC 9110 asks recipients to accept (`Sun, 06 Nov 1994 08:49:37 GMT`,
/// the obsolete `Sunday, 06-Nov-94 08:49:37 GMT` and asctime's
/// `Sun Nov  6 08:49:37 1994`), counted from `now_since_epoch`, the current Unix time.
///
/// A date in the past gives zero. The weekday must be a valid name but need not match
/// the date; a two-digit year is 19xx from 70 on and 20xx below. Delay-seconds beyond
/// `u64::MAX` saturate.
///
/// # Errors
///
/// `None` for anything else: a negative or fractional number, a malformed or
/// impossible date (31 April), trailing text.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::client::retry_after;
///
/// assert_eq!(retry_after("120", Duration::ZERO), Some(Duration::from_secs(120)));
/// let now = Duration::from_secs(784_111_770); // 08:49:30 on 6 November 1994
/// let date = retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now);
/// assert_eq!(date, Some(Duration::from_secs(7)));
/// assert_eq!(retry_after("soon", now), None);
/// ```
pub fn retry_after(value: &str, now_since_epoch: Duration) -> Option<Duration> {
    let value = value.trim_matches([' ', '\t']);
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(saturating_digits(value.as_bytes())));
    }
    let at = http_date(value)?;
    Some(Duration::from_secs(at).saturating_sub(now_since_epoch))
}

/// One item of a `RateLimit` field: what is left of a quota, and when more comes.
///
/// # Examples
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// use std::time::Duration;
/// use tollgate::http::client::rate_limit;
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
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12"#));
    /// let item = &tollgate::http::client::rate_limit(&headers)[0];
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
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=12"#));
    /// let item = &tollgate::http::client::rate_limit(&headers)[0];
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
    /// let item = &tollgate::http::client::rate_limit(&headers)[0];
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
/// use tollgate::http::client::rate_limit_policy;
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
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::client::rate_limit_policy(&headers)[0];
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
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::client::rate_limit_policy(&headers)[0];
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
    /// let policy = &tollgate::http::client::rate_limit_policy(&headers)[0];
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
    /// # use std::time::Duration;
    /// # use http::{HeaderMap, HeaderValue};
    /// # let mut headers = HeaderMap::new();
    /// # headers.insert("ratelimit-policy", HeaderValue::from_static(r#""daily";q=1000;w=86400;qu="requests""#));
    /// let policy = &tollgate::http::client::rate_limit_policy(&headers)[0];
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
/// skipped. The name may be a string (as the draft says) or a token.
///
/// # Examples
///
/// See [`RateLimitItem`].
pub fn rate_limit(headers: &HeaderMap) -> Vec<RateLimitItem> {
    field_list(headers, RATELIMIT)
        .into_iter()
        .filter_map(|member| {
            let Member::Item(name, params) = member else {
                return None;
            };
            let remaining = non_negative(params.get("r")?)?;
            let reset = match params.get("t") {
                Some(t) => Some(Duration::from_secs(non_negative(t)?)),
                None => None,
            };
            Some(RateLimitItem {
                policy: name.into_name()?,
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
    field_list(headers, RATELIMIT_POLICY)
        .into_iter()
        .filter_map(|member| {
            let Member::Item(name, params) = member else {
                return None;
            };
            let quota = non_negative(params.get("q")?)?;
            let window = match params.get("w") {
                Some(w) => Some(Duration::from_secs(non_negative(w)?)),
                None => None,
            };
            let unit = match params.get("qu") {
                Some(Bare::String(unit)) => Some(unit.clone()),
                Some(_) => return None,
                None => None,
            };
            Some(RateLimitPolicyItem {
                name: name.into_name()?,
                quota,
                window,
                unit,
            })
        })
        .collect()
}

/// The reset of a legacy pair, when its remaining count is 0.
fn legacy_reset(
    headers: &HeaderMap,
    remaining: HeaderName,
    reset: HeaderName,
    now_since_epoch: Duration,
) -> Option<Duration> {
    let remaining = headers.get(remaining)?.to_str().ok()?;
    if decimal(remaining.trim())? != Duration::ZERO {
        return None;
    }
    let reset = headers.get(reset)?.to_str().ok()?;
    let reset = decimal(reset.trim())?;
    let seconds = reset.as_secs();
    Some(if seconds >= EPOCH_MILLIS_FROM {
        // `decimal` read milliseconds as seconds; a fraction of a millisecond is noise.
        Duration::from_millis(seconds).saturating_sub(now_since_epoch)
    } else if seconds >= EPOCH_SECONDS_FROM {
        reset.saturating_sub(now_since_epoch)
    } else {
        reset
    })
}

/// `123` or `123.45` as seconds; saturating; no sign, no exponent.
fn decimal(s: &str) -> Option<Duration> {
    let (whole, fraction) = match s.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (s, None),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut nanos = 0u32;
    if let Some(fraction) = fraction {
        if fraction.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut scale = 100_000_000;
        for digit in fraction.bytes().take(9) {
            nanos += u32::from(digit - b'0') * scale;
            scale /= 10;
        }
    }
    Some(Duration::new(saturating_digits(whole.as_bytes()), nanos))
}

pub(super) fn saturating_digits(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}

fn non_negative(bare: &Bare) -> Option<u64> {
    match bare {
        Bare::Integer(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    const NOV_6_1994: u64 = 784_111_777; // 08:49:37 GMT

    #[test]
    fn retry_after_delay_seconds() {
        let now = Duration::from_secs(5);
        assert_eq!(retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 7\t", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn retry_after_rejects_garbage() {
        let now = Duration::ZERO;
        for bad in [
            "",
            " ",
            "-1",
            "1.5",
            "+3",
            "3s",
            "0x10",
            "soon",
            "1 2",
            "١٢",
            "NaN",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 31 Apr 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMTX",
            "Sun, 06 Nev 1994 08:49:37 GMT",
            "Dim, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 19a4 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37",
            "Sun Nov 6 08:49:37 1994",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun,",
            ", ",
            "Sun, ",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
            "Sun, 06 Nov 1994 08:49:\u{e9}7 GM",
        ] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_http_date_in_all_three_forms() {
        let now = Duration::from_secs(NOV_6_1994 - 10);
        let ten = Some(Duration::from_secs(10));
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), ten);
        assert_eq!(retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), ten);
        assert_eq!(retry_after("Sun Nov  6 08:49:37 1994", now), ten);
    }

    #[test]
    fn retry_after_date_in_the_past_is_zero() {
        let now = Duration::from_secs(NOV_6_1994 + 3600);
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after("Thu, 01 Jan 1901 00:00:00 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn http_dates_match_known_unix_times() {
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOV_6_1994));
        assert_eq!(
            http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
        assert_eq!(
            http_date("Tue, 14 Nov 2023 22:13:20 GMT"),
            Some(1_700_000_000)
        );
        assert_eq!(
            http_date("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(253_402_300_799)
        );
        assert_eq!(
            http_date("Sunday, 06-Nov-69 00:00:00 GMT"),
            Some(3_150_921_600)
        );
        assert_eq!(
            http_date("Sun Nov 16 08:49:37 1994"),
            Some(NOV_6_1994 + 10 * 86_400)
        );
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
            if let Ok(value) = HeaderValue::from_str(bad) {
                h.insert("ratelimit", value);
            } else {
                h.insert(
                    "ratelimit",
                    HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
                );
            }
            assert!(rate_limit(&h).is_empty(), "{bad:?}");
        }
        let mut h = headers(&[("ratelimit", r#""a";r=0;t=3"#)]);
        h.append("ratelimit", HeaderValue::from_bytes(b"\xff").unwrap());
        assert!(rate_limit(&h).is_empty(), "one bad line voids the field");
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

    #[test]
    fn legacy_reset_is_a_delay_or_a_unix_time() {
        let now = Duration::from_secs(1_700_000_000);
        let delay = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")]);
        assert_eq!(backoff(&delay, now), Some(Duration::from_secs(30)));
        let epoch = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000042"),
        ]);
        assert_eq!(backoff(&epoch, now), Some(Duration::from_secs(42)));
        let millis = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000001500"),
        ]);
        assert_eq!(backoff(&millis, now), Some(Duration::from_millis(1500)));
        let fraction = headers(&[
            ("x-ratelimit-remaining", "0.0"),
            ("x-ratelimit-reset", "2.5"),
        ]);
        assert_eq!(backoff(&fraction, now), Some(Duration::from_millis(2500)));
        let past = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1600000000"),
        ]);
        assert_eq!(backoff(&past, now), Some(Duration::ZERO));
        let draft = headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "7")]);
        assert_eq!(backoff(&draft, now), Some(Duration::from_secs(7)));
    }

    #[test]
    fn legacy_pair_is_ignored_unless_exhausted_and_valid() {
        let now = Duration::ZERO;
        for pairs in [
            &[("x-ratelimit-remaining", "3"), ("x-ratelimit-reset", "30")][..],
            &[("x-ratelimit-reset", "30")],
            &[("x-ratelimit-remaining", "0")],
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "-30")],
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30s")],
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", ".5")],
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "5.")],
            &[
                ("x-ratelimit-remaining", "none"),
                ("x-ratelimit-reset", "5"),
            ],
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1e3")],
        ] {
            assert_eq!(backoff(&headers(pairs), now), None, "{pairs:?}");
        }
    }

    #[test]
    fn backoff_takes_the_longest_signal() {
        let now = Duration::ZERO;
        let h = headers(&[
            ("retry-after", "2"),
            ("ratelimit", r#""a";r=0;t=5, "b";r=1;t=50, "c";r=0"#),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "4"),
        ]);
        assert_eq!(backoff(&h, now), Some(Duration::from_secs(5)));
        let h = headers(&[("retry-after", "2"), ("ratelimit", r#""a";r=0;t=5"#)]);
        assert_eq!(backoff(&h, now), Some(Duration::from_secs(5)));
        let h = headers(&[("retry-after", "garbage"), ("retry-after", "3")]);
        assert_eq!(backoff(&h, now), Some(Duration::from_secs(3)));
        assert_eq!(backoff(&HeaderMap::new(), now), None);
        let h = headers(&[("ratelimit", r#""a";r=1;t=5"#)]);
        assert_eq!(backoff(&h, now), None);
    }

    /// The bug: the legacy reset counted as much as `Retry-After`, so a client of a
    /// server sending the time until its token bucket is *full* again (tollgate's
    /// `X-RateLimit-Reset: 60`) paused 60 s where `Retry-After: 12` sufficed.
    #[test]
    fn the_legacy_reset_is_only_a_fallback() {
        let now = Duration::from_secs(1_700_000_000);
        let full_later = [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "60")];
        let mut h = headers(&full_later);
        h.append("retry-after", HeaderValue::from_static("12"));
        assert_eq!(backoff(&h, now), Some(Duration::from_secs(12)));
        // A RateLimit item says there is quota left: the legacy pair is not read.
        let mut h = headers(&full_later);
        h.append("ratelimit", HeaderValue::from_static(r#""a";r=3;t=60"#));
        assert_eq!(backoff(&h, now), None);
        // Alone, it is read.
        assert_eq!(
            backoff(&headers(&full_later), now),
            Some(Duration::from_secs(60))
        );
    }

    /// What the server layer sends, the client layer reads: every field, names with
    /// escapes and encoded bytes, and the largest numbers.
    #[test]
    fn what_the_server_layer_sends_the_client_layer_reads() {
        use crate::decision::{Admitted, Denied, Limited};
        use crate::http::{headers, Policy, Verdict};

        let name = "a \"b\" \\ k\u{e4}se";
        let policies = vec![
            Policy::new(name, 100, Duration::from_secs(60)),
            Policy::new("huge", u64::MAX, Duration::MAX),
        ];
        let limited = Limited::new(
            Duration::from_millis(11_200),
            100,
            0,
            Duration::from_secs(60),
        );
        let verdict = Verdict::new(Err(Denied::Limited(limited)), policies.clone(), 0);
        let mut h = HeaderMap::new();
        headers::insert(&mut h, &verdict, true);
        assert_eq!(backoff(&h, Duration::ZERO), Some(Duration::from_secs(12)));
        let items = rate_limit(&h);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].policy(), "a \"b\" \\ k%c3%a4se");
        assert_eq!(items[0].remaining(), 0);
        assert_eq!(items[0].reset(), Some(Duration::from_secs(12)));
        let read = rate_limit_policy(&h);
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].quota(), 100);
        assert_eq!(read[1].quota(), 999_999_999_999_999);
        assert_eq!(
            read[1].window(),
            Some(Duration::from_secs(999_999_999_999_999))
        );

        let admitted = Admitted::new(u64::MAX, u64::MAX, Duration::MAX);
        let verdict = Verdict::new(Ok(admitted), policies, 1);
        let mut h = HeaderMap::new();
        headers::insert(&mut h, &verdict, true);
        assert_eq!(rate_limit(&h)[0].remaining(), 999_999_999_999_999);
        assert_eq!(backoff(&h, Duration::ZERO), None);
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_bytes() {
        let now = Duration::from_secs(1_700_000_000);
        let alphabet = b" \t,;=\"\\:()?@%*-.0123456789abrtqwGMTSun/\xff";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| alphabet[((seed >> (i % 8 * 8)) as usize + i * 7) % alphabet.len()])
                .collect();
            let Ok(value) = HeaderValue::from_bytes(&bytes) else {
                continue;
            };
            let mut h = HeaderMap::new();
            for name in [
                "ratelimit",
                "ratelimit-policy",
                "retry-after",
                "x-ratelimit-remaining",
                "x-ratelimit-reset",
            ] {
                h.insert(name, value.clone());
            }
            let _ = backoff(&h, now);
            let _ = rate_limit_policy(&h);
            if let Ok(s) = value.to_str() {
                let _ = retry_after(s, now);
                let _ = http_date(s);
            }
        }
    }
}
