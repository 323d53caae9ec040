//! What a response asks of the client: how long to hold off, from every field that
//! can say so.

use std::time::Duration;

use http::header::{HeaderMap, RETRY_AFTER};

use super::{legacy, rate_limit, retry_after};

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
/// use tollgate::http::wire::backoff;
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
    legacy::exhausted_reset(headers, now_since_epoch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::wire::rate_limit_policy;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
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

    /// A behaviour change with httpdate: a `Retry-After` date before 1970 is not a
    /// date (it was a zero wait), so the legacy pair is read as if it were absent.
    #[test]
    fn a_date_before_1970_is_no_retry_after() {
        let h = headers(&[
            ("retry-after", "Tue, 01 Jan 1901 00:00:00 GMT"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "7"),
        ]);
        assert_eq!(backoff(&h, Duration::ZERO), Some(Duration::from_secs(7)));
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
            }
        }
    }
}
