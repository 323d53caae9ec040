//! The legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`,
//! and the separate `RateLimit-Remaining` / `RateLimit-Reset` of the draft's versions
//! 00 to 06. The server layer writes the first three as plain integers (see
//! [`server::insert`](crate::http::server::insert)); the client layer reads a
//! remaining count and a reset, as a fallback only (see [`backoff`](super::backoff)).

use std::time::Duration;

use http::{HeaderMap, HeaderName};

use super::{X_RATELIMIT_REMAINING, X_RATELIMIT_RESET, saturating_digits};

const DRAFT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const DRAFT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// A legacy reset at or above this many is a Unix time in seconds (2001-09-09), not a
/// delay: no API asks a client to wait 31 years.
const EPOCH_SECONDS_FROM: u64 = 1_000_000_000;
/// A legacy reset at or above this many is a Unix time in milliseconds.
const EPOCH_MILLIS_FROM: u64 = 1_000_000_000_000;

/// The longest reset of the two legacy pairs whose remaining count is 0.
pub(super) fn exhausted_reset(headers: &HeaderMap, now_since_epoch: Duration) -> Option<Duration> {
    [
        (X_RATELIMIT_REMAINING, X_RATELIMIT_RESET),
        (DRAFT_REMAINING, DRAFT_RESET),
    ]
    .into_iter()
    .filter_map(|(remaining, reset)| pair_reset(headers, remaining, reset, now_since_epoch))
    .max()
}

/// The reset of one pair, when its remaining count is 0: below 10⁹ a delay in
/// seconds, below 10¹² a Unix time in seconds, from there a Unix time in milliseconds.
fn pair_reset(
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

    #[test]
    fn legacy_reset_is_a_delay_or_a_unix_time() {
        let now = Duration::from_secs(1_700_000_000);
        let reset = |pairs| exhausted_reset(&headers(pairs), now);
        let delay = [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "30")];
        assert_eq!(reset(&delay), Some(Duration::from_secs(30)));
        let epoch = [
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000042"),
        ];
        assert_eq!(reset(&epoch), Some(Duration::from_secs(42)));
        let millis = [
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000001500"),
        ];
        assert_eq!(reset(&millis), Some(Duration::from_millis(1500)));
        let fraction = [
            ("x-ratelimit-remaining", "0.0"),
            ("x-ratelimit-reset", "2.5"),
        ];
        assert_eq!(reset(&fraction), Some(Duration::from_millis(2500)));
        let past = [
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1600000000"),
        ];
        assert_eq!(reset(&past), Some(Duration::ZERO));
        let draft = [("ratelimit-remaining", "0"), ("ratelimit-reset", "7")];
        assert_eq!(reset(&draft), Some(Duration::from_secs(7)));
        let huge = [
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "99999999999999999999999"),
        ];
        assert_eq!(
            exhausted_reset(&headers(&huge), Duration::ZERO),
            Some(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn legacy_pair_is_ignored_unless_exhausted_and_valid() {
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
            assert_eq!(
                exhausted_reset(&headers(pairs), Duration::ZERO),
                None,
                "{pairs:?}"
            );
        }
    }
}
