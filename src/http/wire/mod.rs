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
//!   - `RateLimit: "burst";r=0;t=12` reports the decisive policy, both numbers of
//!     that one policy: `r` the permits remaining, `t` the seconds until more than
//!     `r` are free, rounded up, on an admission and a denial alike (see
//!     [below](#the-reset-parameter-t)).
//! - `Retry-After` (RFC 9110): written on a denial in delay-seconds: the time until
//!   the denied request can pass, rounded up and at least 1, so never earlier than
//!   `t` (equal for a one-permit request); read as delay-seconds or an HTTP-date
//!   (through the `httpdate` crate).
//! - Optionally the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//!   `X-RateLimit-Reset` of the decisive policy. `X-RateLimit-Reset` is a **delta**:
//!   the seconds until the policy is back to its full quota, rounded up (as
//!   `reset_after`), not a Unix time. Read as a fallback only: see [`backoff`].
//! - `Forwarded` (RFC 7239) and `X-Forwarded-For`, read by
//!   [`ClientIp`](crate::http::ClientIp) behind trusted proxies.
//!
//! The server layer writes these fields from its verdicts
//! ([`server::insert`](crate::http::server::insert)); [`backoff`] reads how long a
//! response asks the client to hold off. Every reader takes untrusted input: it never
//! panics, and a value it cannot read is ignored (as RFC 9651 asks of structured
//! fields: one syntax error voids the field).
//!
//! # The reset parameter `t`
//!
//! Draft-10 defines it in section 4.1.2: "the number of seconds until additional
//! quota associated with the quota policy is made available", and adds that the
//! client "MUST NOT assume that all its service limit will be fully restored" by
//! then. Section 6 asks that `Retry-After` "SHOULD NOT reference a point in time
//! earlier than the reset parameter". So `t` is not the time until the policy is
//! full again (that is `X-RateLimit-Reset`), and it means the same on every
//! response: the seconds until more than `r` permits are free, as
//! [`Admitted::next_permit_after`](crate::Admitted::next_permit_after) and
//! [`Limited::next_permit_after`](crate::Limited::next_permit_after) tell it.
//! (Draft-11 renames `t` the "effective window", "the number of seconds within
//! which the client can use no more than the available quota": the same number.)
//!
//! With `"login";q=5;w=60` (a token bucket, one permit back every 12 s), the fifth
//! request of a burst and the sixth, 10 ms later, read:
//!
//! ```text
//! 200  RateLimit: "login";r=0;t=12                  X-RateLimit-Reset: 60
//! 429  RateLimit: "login";r=0;t=12  Retry-After: 12  X-RateLimit-Reset: 60
//! ```
//!
//! `t` is exact for a bucket that refills continuously, for a sliding counter, for
//! Guava's limiters, and for limits whose permits come back all at once (a fixed
//! window: the window's end), in process and over a store (Redis included) alike.
//! Where the decision does not say when the next permit comes back (a sliding log),
//! it is the time until the policy is full, which no permit comes back after: a
//! client that waits `t` never waits too little.
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
//! use tollgate::http::{server, wire};
//! use tollgate::http::{Policy, Verdict};
//! use tollgate::{Denied, Limited};
//!
//! let policies = vec![Policy::new("burst", 100, Duration::from_secs(60))];
//! let denied = Limited::new(Duration::from_millis(11_200), 100, 0, Duration::from_secs(60));
//! let verdict = Verdict::new(Err(Denied::Limited(denied)), policies, 0);
//!
//! let mut fields = HeaderMap::new();
//! server::insert(&mut fields, &verdict, true);
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
pub(crate) mod policy;
mod ratelimit;
mod retry_after;

use std::time::Duration;

use http::HeaderName;

pub use backoff::backoff;
pub(crate) use forwarded::{forwarded_for, x_forwarded_for};
pub use ratelimit::{
    RateLimitItem, RateLimitPolicyItem, policy_value, rate_limit, rate_limit_policy,
    ratelimit_value, sf_string,
};
pub use retry_after::retry_after;
pub(crate) use retry_after::retry_after_seconds;

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
