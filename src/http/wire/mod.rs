//! The rate-limit header grammar, read and written: what the server layer sends, what
//! the client layer reads, and the forwarded lists the client IP key reads.
//!
//! - `RateLimit-Policy` and `RateLimit`, as IETF draft-ietf-httpapi-ratelimit-headers-10
//!   defines them: structured-field lists (RFC 9651) whose items are the policy names,
//!   as sf-strings, with parameters. Read and written through the `sfv` crate.
//!   - `RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400` lists every
//!     policy: `q` its quota, `w` its window in seconds, rounded up (so that a client
//!     pacing itself at `q` per `w` stays within the limit), and left out for a
//!     policy without a window.
//!   - `RateLimit: "burst";r=0;t=12` reports the decisive policy: `r` the permits
//!     remaining, `t` the seconds until more quota, rounded up. On a denial `t` is the
//!     time until the same request can pass (its `retry_after`); on an admission, the
//!     time until the policy is back to its full quota (its `reset_after`).
//! - `Retry-After` (RFC 9110): written on a denial in delay-seconds, `t` and at least
//!   1; read as delay-seconds or an HTTP-date (through the `httpdate` crate).
//! - Optionally the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//!   `X-RateLimit-Reset` of the decisive policy. `X-RateLimit-Reset` is a **delta**:
//!   the seconds until the policy is back to its full quota, rounded up (as
//!   `reset_after`), not a Unix time. Read as a fallback only: see [`backoff`].
//! - `Forwarded` (RFC 7239) and `X-Forwarded-For`, read by
//!   [`ClientIp`](crate::http::ClientIp) behind trusted proxies.
//!
//! [`insert`] writes the fields of a server's verdict; [`backoff`] reads how long a
//! response asks the client to hold off. Every reader takes untrusted input: it never
//! panics, and a value it cannot read is ignored (as RFC 9651 asks of structured
//! fields: one syntax error voids the field).
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
//! use tollgate::http::wire;
//! use tollgate::http::{Policy, Verdict};
//! use tollgate::{Denied, Limited};
//!
//! let policies = vec![Policy::new("burst", 100, Duration::from_secs(60))];
//! let denied = Limited::new(Duration::from_millis(11_200), 100, 0, Duration::from_secs(60));
//! let verdict = Verdict::new(Err(Denied::Limited(denied)), policies, 0);
//!
//! let mut fields = HeaderMap::new();
//! wire::insert(&mut fields, &verdict, true);
//! assert_eq!(fields["ratelimit-policy"], r#""burst";q=100;w=60"#);
//! assert_eq!(fields["ratelimit"], r#""burst";r=0;t=12"#);
//! assert_eq!(fields["retry-after"], "12");
//! assert_eq!(fields["x-ratelimit-limit"], "100");
//! assert_eq!(fields["x-ratelimit-remaining"], "0");
//! assert_eq!(fields["x-ratelimit-reset"], "60");
//!
//! // What the server wrote, a client reads.
//! assert_eq!(wire::backoff(&fields, Duration::ZERO), Some(Duration::from_secs(12)));
//! assert_eq!(wire::rate_limit(&fields)[0].policy(), "burst");
//! ```

mod backoff;
mod forwarded;
mod legacy;
mod ratelimit;
mod retry_after;
mod verdict;

use std::time::Duration;

use http::HeaderName;

pub use backoff::backoff;
pub(crate) use forwarded::{forwarded_for, x_forwarded_for};
pub use ratelimit::{
    policy_value, rate_limit, rate_limit_policy, ratelimit_value, sf_string, RateLimitItem,
    RateLimitPolicyItem,
};
pub use retry_after::retry_after;
pub(crate) use retry_after::retry_after_seconds;
pub use verdict::insert;

/// `RateLimit-Policy`: every policy that applies to the request.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::wire::RATELIMIT_POLICY, "ratelimit-policy");
/// ```
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// `RateLimit`: what remains of the decisive policy.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::wire::RATELIMIT, "ratelimit");
/// ```
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Legacy `X-RateLimit-Limit`: the decisive policy's quota.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::wire::X_RATELIMIT_LIMIT, "x-ratelimit-limit");
/// ```
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");

/// Legacy `X-RateLimit-Remaining`: the permits the decisive policy has left.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::wire::X_RATELIMIT_REMAINING, "x-ratelimit-remaining");
/// ```
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// Legacy `X-RateLimit-Reset`: seconds (a delta, not a Unix time) until the decisive
/// policy is back to its full quota.
///
/// # Examples
///
/// ```
/// assert_eq!(tollgate::http::wire::X_RATELIMIT_RESET, "x-ratelimit-reset");
/// ```
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// `d` in whole seconds, rounded up: what every field here sends.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::wire::seconds_up;
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

/// Decimal digits as a `u64`, saturating: delay-seconds and legacy resets have no
/// upper bound.
fn saturating_digits(digits: &[u8]) -> u64 {
    digits.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}
