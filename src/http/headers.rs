//! The rate-limit header fields the server layer sends.
//!
//! - `RateLimit-Policy` and `RateLimit`, as IETF draft-ietf-httpapi-ratelimit-headers-10
//!   defines them: structured-field lists whose items are the policy names, as
//!   sf-strings, with parameters.
//!   - `RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400` lists every
//!     policy: `q` its quota, `w` its window in seconds, rounded up (so that a client
//!     pacing itself at `q` per `w` stays within the limit), and left out for a
//!     policy without a window.
//!   - `RateLimit: "burst";r=0;t=12` reports the decisive policy: `r` the permits
//!     remaining, `t` the seconds until more quota, rounded up. On a denial `t` is the
//!     time until the same request can pass (its `retry_after`); on an admission, the
//!     time until the policy is back to its full quota (its `reset_after`).
//! - `Retry-After` (RFC 9110) on a denial, in delay-seconds: `t`, and at least 1.
//!   A denial that waits for permits to be released (a concurrency limit) sends no
//!   `Retry-After` and no `t`: no time promises a release.
//! - Optionally the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//!   `X-RateLimit-Reset` of the decisive policy. `X-RateLimit-Reset` is a **delta**:
//!   the seconds until the policy is back to its full quota, rounded up (as
//!   `reset_after`), not a Unix time.
//!
//! # Policy names
//!
//! An sf-string holds printable ASCII (space to `~`), with `"` and `\` escaped by a
//! backslash. A name with any other byte is not refused: each such byte is sent
//! percent-encoded, as `%` and two lowercase hex digits (`"käse"` is sent as
//! `"k%c3%a4se"`), so that the field stays valid whatever the configuration says.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use http::HeaderMap;
//! use tollgate::http::headers;
//! use tollgate::http::{Policy, Verdict};
//! use tollgate::{Denied, Limited};
//!
//! let policies = vec![Policy::new("burst", 100, Duration::from_secs(60))];
//! let denied = Limited::new(Duration::from_millis(11_200), 100, 0, Duration::from_secs(60));
//! let verdict = Verdict::new(Err(Denied::Limited(denied)), policies, 0);
//!
//! let mut fields = HeaderMap::new();
//! headers::insert(&mut fields, &verdict, true);
//! assert_eq!(fields["ratelimit-policy"], r#""burst";q=100;w=60"#);
//! assert_eq!(fields["ratelimit"], r#""burst";r=0;t=12"#);
//! assert_eq!(fields["retry-after"], "12");
//! assert_eq!(fields["x-ratelimit-limit"], "100");
//! assert_eq!(fields["x-ratelimit-remaining"], "0");
//! assert_eq!(fields["x-ratelimit-reset"], "60");
//! ```

use std::fmt::Write;
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::limits::{Policy, Verdict};
use crate::decision::{Denied, Limited};

/// `RateLimit-Policy`: every policy that applies to the request.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::headers::RATELIMIT_POLICY, "ratelimit-policy");
/// ```
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// `RateLimit`: what remains of the decisive policy.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::headers::RATELIMIT, "ratelimit");
/// ```
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Legacy `X-RateLimit-Limit`: the decisive policy's quota.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::headers::X_RATELIMIT_LIMIT, "x-ratelimit-limit");
/// ```
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");

/// Legacy `X-RateLimit-Remaining`: the permits the decisive policy has left.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::headers::X_RATELIMIT_REMAINING, "x-ratelimit-remaining");
/// ```
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// Legacy `X-RateLimit-Reset`: seconds (a delta, not a Unix time) until the decisive
/// policy is back to its full quota.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::headers::X_RATELIMIT_RESET, "x-ratelimit-reset");
/// ```
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// `d` in whole seconds, rounded up: what every field here sends.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::headers::seconds_up;
///
/// assert_eq!(seconds_up(Duration::ZERO), 0);
/// assert_eq!(seconds_up(Duration::from_nanos(1)), 1);
/// assert_eq!(seconds_up(Duration::from_secs(12)), 12);
/// assert_eq!(seconds_up(Duration::from_millis(12_001)), 13);
/// ```
pub fn seconds_up(d: Duration) -> u64 {
    // Saturating: `Duration::MAX` has a fraction too.
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// The largest sf-integer: RFC 9651 allows at most 15 digits.
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// `n` as an sf-integer, clamped to the largest one: a field with 16 digits would be
/// invalid whole, and a client would then ignore every policy in it.
fn sf_integer(n: u64) -> u64 {
    n.min(SF_INTEGER_MAX)
}

/// The `Retry-After` of a "not now" denial, in delay-seconds: its wait rounded up, so
/// never earlier than `t`, and at least 1; `None` when it waits for a release, which
/// no number of seconds promises.
pub(crate) fn retry_after_seconds(limited: &Limited) -> Option<u64> {
    limited.retry_after().map(|d| seconds_up(d).max(1))
}

/// `name` as a structured-field string, quotes included; see the
/// [module docs](self#policy-names) for names that are not printable ASCII.
///
/// # Examples
///
/// ```
/// use tollgate::http::headers::sf_string;
///
/// assert_eq!(sf_string("burst"), r#""burst""#);
/// assert_eq!(sf_string(r#"say "hi" \o/"#), r#""say \"hi\" \\o/""#);
/// assert_eq!(sf_string("käse\n"), r#""k%c3%a4se%0a""#);
/// ```
pub fn sf_string(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    push_sf_string(&mut out, name);
    out
}

/// Appends `name` as an sf-string to `out`, without a `String` of its own.
fn push_sf_string(out: &mut String, name: &str) {
    out.push('"');
    for byte in name.bytes() {
        match byte {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "%{byte:02x}");
            }
        }
    }
    out.push('"');
}

/// The `RateLimit-Policy` value listing `policies`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::headers::policy_value;
/// use tollgate::http::Policy;
///
/// let value = policy_value(&[
///     Policy::new("burst", 100, Duration::from_secs(60)),
///     Policy::new("daily", 1_000, Duration::from_secs(86_400)),
/// ]);
/// assert_eq!(value, r#""burst";q=100;w=60, "daily";q=1000;w=86400"#);
/// ```
pub fn policy_value(policies: &[Policy]) -> HeaderValue {
    let mut out = String::new();
    for (i, policy) in policies.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_sf_string(&mut out, &policy.name);
        let _ = write!(out, ";q={}", sf_integer(policy.quota));
        if !policy.window.is_zero() {
            let _ = write!(out, ";w={}", sf_integer(seconds_up(policy.window)));
        }
    }
    value(out)
}

/// The `RateLimit` value of `policy` with `remaining` permits and `t` seconds until
/// more quota; `t` is left out when given as `None` (more quota comes with a release,
/// not with time).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::headers::ratelimit_value;
/// use tollgate::http::Policy;
///
/// let burst = Policy::new("burst", 100, Duration::from_secs(60));
/// assert_eq!(ratelimit_value(&burst, 0, 12), r#""burst";r=0;t=12"#);
/// assert_eq!(ratelimit_value(&burst, 0, None), r#""burst";r=0"#);
/// ```
pub fn ratelimit_value(policy: &Policy, remaining: u64, t: impl Into<Option<u64>>) -> HeaderValue {
    // Sent on every response: digits by hand, as `write!` costs several times more.
    let mut out = String::with_capacity(policy.name.len() + 40);
    push_sf_string(&mut out, &policy.name);
    out.push_str(";r=");
    push_integer(&mut out, sf_integer(remaining));
    if let Some(t) = t.into() {
        out.push_str(";t=");
        push_integer(&mut out, sf_integer(t));
    }
    value(out)
}

/// Appends `n` in decimal to `out`.
fn push_integer(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[start..].iter().map(|&d| char::from(d)));
}

/// Adds the fields `verdict` calls for to `headers`: nothing for a verdict without a
/// decision; `RateLimit-Policy` listing its policies, and for an admission or a "not
/// now" denial `RateLimit` of the decisive policy; `Retry-After` on every "not now"
/// denial, even one without policies; and with `legacy`, `X-RateLimit-*` beside
/// `RateLimit`. Every sf-integer is clamped to 15 digits, the most RFC 9651 allows.
///
/// Fields are appended, not replaced: an inner layer's `RateLimit` items and this
/// one's make one list, as structured-field lists combine across field lines. A
/// request denied for good (more costly than the quota, or a closed limiter) gets no
/// `RateLimit`, which would need a remaining count, and no `Retry-After`, as waiting
/// does not help.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use tollgate::http::headers;
/// use tollgate::http::{Policy, Verdict};
/// use tollgate::Admitted;
///
/// let policies = vec![Policy::new("default", 10, Duration::from_secs(1))];
/// let admitted = Admitted::new(10, 7, Duration::from_millis(300));
/// let mut fields = HeaderMap::new();
/// headers::insert(&mut fields, &Verdict::new(Ok(admitted), policies, 0), false);
/// assert_eq!(fields["ratelimit-policy"], r#""default";q=10;w=1"#);
/// assert_eq!(fields["ratelimit"], r#""default";r=7;t=1"#);
/// assert_eq!(fields.len(), 2);
/// ```
pub fn insert(headers: &mut HeaderMap, verdict: &Verdict, legacy: bool) {
    let Some(decision) = &verdict.decision else {
        return;
    };
    // Formatted once, when the policies were built: a clone is a reference count.
    if let Some(field) = verdict.policies.field() {
        headers.append(RATELIMIT_POLICY, field.clone());
    }
    // `Retry-After` needs no policy: a 429 always says when to come back.
    if let Err(Denied::Limited(limited)) = decision {
        if let Some(seconds) = retry_after_seconds(limited) {
            headers.append(RETRY_AFTER, HeaderValue::from(seconds));
        }
    }
    let Some(policy) = verdict.decisive_policy() else {
        return;
    };
    let (limit, remaining, t, reset_after) = match decision {
        Ok(admitted) => (
            admitted.limit(),
            admitted.remaining(),
            Some(seconds_up(admitted.reset_after())),
            admitted.reset_after(),
        ),
        Err(Denied::Limited(limited)) => (
            limited.limit(),
            limited.remaining(),
            limited.retry_after().map(seconds_up),
            limited.reset_after(),
        ),
        Err(_) => return,
    };
    headers.append(RATELIMIT, ratelimit_value(policy, remaining, t));
    if legacy {
        headers.append(X_RATELIMIT_LIMIT, HeaderValue::from(limit));
        headers.append(X_RATELIMIT_REMAINING, HeaderValue::from(remaining));
        headers.append(
            X_RATELIMIT_RESET,
            HeaderValue::from(seconds_up(reset_after)),
        );
    }
}

/// A value built only of printable ASCII, which is always a valid field value.
fn value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Admitted, InsufficientCapacity};

    fn policy(name: &str, q: u64, w: Duration) -> Policy {
        Policy::new(name, q, w)
    }

    fn fields(map: &HeaderMap) -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX - 1, u64::MAX] {
            let mut out = String::from("x");
            push_integer(&mut out, n);
            assert_eq!(out, format!("x{n}"));
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
    }

    #[test]
    fn windows_round_up_and_zero_is_left_out() {
        let value = policy_value(&[
            policy("a", 20, Duration::from_millis(200)),
            policy("b", 5, Duration::from_millis(60_001)),
            policy("c", 3, Duration::ZERO),
        ]);
        assert_eq!(value, r#""a";q=20;w=1, "b";q=5;w=61, "c";q=3"#);
    }

    #[test]
    fn admitted_fields() {
        let verdict = Verdict::new(
            Ok(Admitted::new(100, 99, Duration::from_millis(600))),
            vec![
                policy("burst", 100, Duration::from_secs(60)),
                policy("daily", 1000, Duration::from_secs(86_400)),
            ],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
                ),
                ("ratelimit", r#""burst";r=99;t=1"#),
                ("x-ratelimit-limit", "100"),
                ("x-ratelimit-remaining", "99"),
                ("x-ratelimit-reset", "1"),
            ])
        );
    }

    #[test]
    fn limited_fields_report_the_decisive_policy() {
        let limited = Limited::new(
            Duration::from_millis(3_400),
            1000,
            2,
            Duration::from_secs(86_000),
        );
        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![
                policy("burst", 100, Duration::from_secs(60)),
                policy("daily", 1000, Duration::from_secs(86_400)),
            ],
            1,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[
                (
                    "ratelimit-policy",
                    r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
                ),
                ("retry-after", "4"),
                ("ratelimit", r#""daily";r=2;t=4"#),
                ("x-ratelimit-limit", "1000"),
                ("x-ratelimit-remaining", "2"),
                ("x-ratelimit-reset", "86000"),
            ])
        );
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        let limited = Limited::new(Duration::ZERO, 10, 0, Duration::ZERO);
        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![policy("p", 10, Duration::from_secs(1))],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, false);
        assert_eq!(map["retry-after"], "1");
        assert_eq!(map["ratelimit"], r#""p";r=0;t=0"#);
    }

    /// The bug: a quota, window or count above 15 digits was sent as is, which makes
    /// the whole field invalid (RFC 9651 integers have at most 15 digits), and
    /// `seconds_up(Duration::MAX)` overflowed.
    #[test]
    fn huge_numbers_are_clamped_to_the_largest_sf_integer() {
        assert_eq!(seconds_up(Duration::MAX), u64::MAX);
        let huge = policy("h", u64::MAX, Duration::MAX);
        assert_eq!(
            policy_value(std::slice::from_ref(&huge)),
            r#""h";q=999999999999999;w=999999999999999"#
        );
        assert_eq!(
            ratelimit_value(&huge, u64::MAX, 1_000_000_000_000_000),
            r#""h";r=999999999999999;t=999999999999999"#
        );
        let limited = Limited::new(Duration::MAX, u64::MAX, u64::MAX, Duration::MAX);
        let verdict = Verdict::new(Err(Denied::Limited(limited)), vec![huge], 0);
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        let t = map["ratelimit"]
            .to_str()
            .unwrap()
            .rsplit("t=")
            .next()
            .unwrap();
        let retry_after: u64 = map["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry_after >= t.parse::<u64>().unwrap());
        assert_eq!(map["x-ratelimit-limit"], u64::MAX.to_string().as_str());
    }

    /// The bug: a denial whose verdict had no policies (or a `decisive` index out of
    /// range) was a 429 without `Retry-After`.
    #[test]
    fn retry_after_is_sent_without_policies() {
        let limited = Limited::new(Duration::from_millis(2_500), 10, 0, Duration::ZERO);
        let verdict = Verdict::new(Err(Denied::Limited(limited)), Vec::<Policy>::new(), 0);
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(fields(&map), pairs(&[("retry-after", "3")]));

        let verdict = Verdict::new(
            Err(Denied::Limited(limited)),
            vec![policy("p", 10, Duration::from_secs(1))],
            7,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, false);
        assert_eq!(
            fields(&map),
            pairs(&[
                ("ratelimit-policy", r#""p";q=10;w=1"#),
                ("retry-after", "3")
            ])
        );
    }

    #[test]
    fn never_admitted_gets_only_the_policies() {
        let verdict = Verdict::new(
            Err(Denied::Insufficient(InsufficientCapacity::new(12, 10))),
            vec![policy("p", 10, Duration::from_secs(1))],
            0,
        );
        let mut map = HeaderMap::new();
        insert(&mut map, &verdict, true);
        assert_eq!(
            fields(&map),
            pairs(&[("ratelimit-policy", r#""p";q=10;w=1"#)])
        );
    }

    #[test]
    fn no_decision_or_no_policy_adds_nothing() {
        let mut map = HeaderMap::new();
        insert(&mut map, &Verdict::unlimited(), true);
        let admitted = Admitted::new(1, 0, Duration::ZERO);
        insert(
            &mut map,
            &Verdict::new(Ok(admitted), Vec::<Policy>::new(), 0),
            true,
        );
        assert!(map.is_empty());
    }

    #[test]
    fn fields_are_appended_to_an_inner_layers() {
        let mut map = HeaderMap::new();
        map.append(RATELIMIT, HeaderValue::from_static(r#""inner";r=1;t=1"#));
        let verdict = Verdict::new(
            Ok(Admitted::new(5, 4, Duration::from_secs(1))),
            vec![policy("outer", 5, Duration::from_secs(1))],
            0,
        );
        insert(&mut map, &verdict, false);
        let values: Vec<_> = map.get_all(RATELIMIT).iter().collect();
        assert_eq!(values, [r#""inner";r=1;t=1"#, r#""outer";r=4;t=1"#]);
    }
}
