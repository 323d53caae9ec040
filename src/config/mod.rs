//! Rules from a YAML file, in the style of envoy's ratelimit service (feature
//! `config`).
//!
//! ```yaml
//! domain: api
//! descriptors:
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 10 }
//!   - key: path
//!     value: "/login"
//!     rate_limit: { name: login, unit: minute, requests_per_unit: 5, algorithm: gcra }
//! ```
//!
//! - [`RuleSet`]: the file, checked in full when read. Every problem is a
//!   [`ConfigFileError`] naming its line and column.
//! - [`RuleSet::limits_for`]: which limits a request's [`Descriptor`]s match, and
//!   under which keys (pure: no store, no clock).
//! - [`ConfigLimiter`]: the rules over a [`Store`](crate::store::Store), every
//!   matched limit of a request decided in one all-or-nothing request.
//! - `ConfigLimits` (with feature `http`): the server layer's
//!   `Limits`, building descriptors from each request's head.
//!
//! Differences from envoy: `algorithm` and `burst` choose how a limit counts (envoy
//! has fixed windows only); a request denied by one limit consumes nothing from the
//! others (envoy counts it in every one); a value ending in `*` matches by its
//! longest prefix rather than the first listed.
//!
//! # Algorithms
//!
//! A `rate_limit`'s `algorithm` is the name of a [`RuleKind`](crate::algorithm::RuleKind),
//! the same name the store uses in its keys and script. A rules file builds these from
//! `requests_per_unit` per `unit`:
//!
//! | `algorithm`       | rule                                                   |
//! |-------------------|--------------------------------------------------------|
//! | `fixed_window`    | [`FixedWindow`](crate::algorithm::FixedWindow), windows aligned to the Unix epoch (the default, as envoy) |
//! | `gcra`            | [`Gcra`](crate::algorithm::Gcra): a token bucket; `burst` permits at once (default `requests_per_unit`) |
//! | `sliding_counter` | [`SlidingCounter`](crate::algorithm::SlidingCounter): the current and the weighted previous window |
//! | `sliding_log`     | [`SlidingLog`](crate::algorithm::SlidingLog): exact rolling window, one entry per permit |
//! | `leaky_bucket`    | [`LeakyBucket`](crate::algorithm::LeakyBucket): capacity `burst` (default `requests_per_unit`), draining `requests_per_unit` per unit |
//!
//! `sliding_window`, the name the rules file gave the sliding counter before it took
//! the store's name, is still read as `sliding_counter`. Any other name is an error
//! that lists these. A limit's keys start with the canonical name, so a limit written
//! as `sliding_window` counts under `sliding_counter` keys.
//!
//! # The file, and a server's answers
//!
//! [`RuleSet::from_file`] reads envoy-ratelimit YAML: a domain, descriptors matched
//! level by level (exact value, then `prefix*`, then the bare key), `unit` and
//! `requests_per_unit`, `unlimited`, `shadow_mode`, `replaces`, and, a tollgate
//! addition, `algorithm` per limit (`fixed_window` by default, `gcra`,
//! `sliding_counter` (`sliding_window` is accepted too), `sliding_log`,
//! `leaky_bucket`): the names the store uses. Unknown keys and bad values are errors
//! naming their line (`rules.yaml:6:26: requests_per_unit must be greater than zero`).
//! All limits a request matches are decided in one all-or-nothing store request.
//!
//! `cargo run --example rate_limited_server --features axum,config` serves
//! `examples/rules.yaml` on 127.0.0.1:3000 (10 requests a second per client, 5 logins
//! a minute per client, `/health` unlimited, a daily `/export` limit in shadow mode).
//! The sixth `curl -i http://127.0.0.1:3000/login` within a minute:
//!
//! ```text
//! HTTP/1.1 429 Too Many Requests
//! content-type: application/json
//! cache-control: no-store
//! ratelimit-policy: "per_client";q=10;w=1, "login";q=5;w=60
//! retry-after: 12
//! ratelimit: "login";r=0;t=12
//! x-ratelimit-limit: 5
//! x-ratelimit-remaining: 0
//! x-ratelimit-reset: 60
//! content-length: 118
//! date: Sat, 21 Nov 2026 21:07:23 GMT
//!
//! {"error":"rate_limited","message":"rate limit \"login\" exceeded: retry after 12 s","retry_after":12,"policy":"login"}
//! ```
//!
//! The first one, admitted:
//!
//! ```text
//! HTTP/1.1 200 OK
//! content-type: text/plain; charset=utf-8
//! ratelimit-policy: "per_client";q=10;w=1, "login";q=5;w=60
//! ratelimit: "login";r=4;t=12
//! x-ratelimit-limit: 5
//! x-ratelimit-remaining: 4
//! x-ratelimit-reset: 12
//! content-length: 8
//! date: Sat, 21 Nov 2026 21:07:23 GMT
//!
//! welcome
//! ```
//!
//! (`login` is a token bucket of 5 a minute: one token returns every 12 s.)
//!
//! The fifth, the last admitted, and the sixth 10 ms later agree on `t`: the next
//! login is free in 12 s, the bucket is full in 60 s.
//!
//! ```text
//! HTTP/1.1 200 OK
//! ratelimit: "login";r=0;t=12
//! x-ratelimit-remaining: 0
//! x-ratelimit-reset: 60
//!
//! HTTP/1.1 429 Too Many Requests
//! retry-after: 12
//! ratelimit: "login";r=0;t=12
//! x-ratelimit-remaining: 0
//! x-ratelimit-reset: 60
//! ```

mod error;
mod file;
#[cfg(feature = "http")]
mod http;
mod limiter;
mod locate;
mod matcher;
mod rules;
mod unit;
mod wildcard;

pub use error::{ConfigFileError, ConfigFileErrorKind, Location};
#[cfg(feature = "http")]
pub use http::{ConfigLimits, RequestDescriptor, RequestEntry};
pub use limiter::{AppliedLimit, ConfigDecision, ConfigLimiter, ShadowDenial};
pub use matcher::{Descriptor, DescriptorMatch, Matched, MatchedLimit};
pub use rules::{Limit, RuleSet};
pub use unit::Unit;
