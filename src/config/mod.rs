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
//!   [`ConfigFileError`] naming its line and column (and its file, when read with
//!   [`RuleSet::from_file`]). [`RuleSet::merge`] joins two files of one domain, as
//!   envoy's `MERGE_DOMAIN_CONFIG` does.
//! - [`RuleSet::limits_for`]: which limits a request's [`Descriptor`]s match, and
//!   under which keys (pure: no store, no clock). [`Matched::descriptors`] answers
//!   per descriptor as envoy's service does ([`DescriptorMatch`]), with envoy's
//!   statistics name ([`MatchedLimit::stats_key`]), `quota_mode`, `detailed_metric`
//!   and `metadata`: what a drop-in for envoy's ratelimit service needs.
//! - [`ConfigLimiter`]: the rules over a [`Store`](crate::store::Store), every
//!   matched limit of a request decided in one all-or-nothing request.
//! - `ConfigLimits` (with feature `http`): the server layer's
//!   `Limits`, building descriptors from each request's head.
//!
//! The file reads as envoy's ratelimit service reads it: the same keys (`domain`,
//! `descriptors`, `key`, `value`, `rate_limit` with `unit`, `requests_per_unit`,
//! `unlimited`, `name`, `replaces`; `shadow_mode`, `quota_mode`, `detailed_metric`,
//! `value_to_metric`, `share_threshold`, `metadata`), units in any case, the same
//! matching (exact value, then the first `*` pattern of the file, then the bare key),
//! and the same load errors.
//!
//! Differences from envoy:
//!
//! - `algorithm` and `burst` choose how a limit counts (envoy has fixed windows only).
//! - [`ConfigLimiter`] decides a request's limits all-or-nothing: a request denied by
//!   one limit consumes nothing from the others (envoy counts it in every one). A
//!   service that answers per descriptor, as envoy's does, decides from
//!   [`Matched::descriptors`] instead.
//! - Keys are compared for equality and only values are patterns. envoy matches the
//!   text `key_value` against `key_pattern`, so with a `_` in a key a pattern can
//!   reach into it (`{key: a, value: b*}` matches the entry `a_b` = `x`), and an exact
//!   `{key: a, value: b_c}` matches the entry `a_b` = `c`; for the same reason envoy
//!   refuses the siblings `{key: a_b}` and `{key: a, value: b}` as duplicates, which
//!   tollgate accepts. A `*` in a `key` is an error here (envoy would make it a
//!   pattern over `key_value`).
//! - Each level accepts only its own keys (`shadow_mode` inside `rate_limit` is an
//!   error); envoy accepts any of its keys anywhere and ignores the misplaced ones.
//! - The domain may not hold `{` or `}` (it is the Redis Cluster hash tag).
//! - `unlimited: true` with an unknown `unit` is an error (envoy ignores the unit's
//!   name when it is not one).
//!
//! //! # Algorithms
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
//! level by level (exact value, then the first pattern with `*` that matches, then the
//! bare key), `unit` and `requests_per_unit` (0 blocks: [`Limit::is_blocking`]),
//! `unlimited`, `shadow_mode`, `replaces`, envoy's statistics flags and `metadata`,
//! and, a tollgate addition, `algorithm` per limit (`fixed_window` by default, `gcra`,
//! `sliding_counter` (`sliding_window` is accepted too), `sliding_log`,
//! `leaky_bucket`): the names the store uses. Unknown keys and bad values are errors
//! naming their line (`rules.yaml:6:13: invalid rate limit unit 'fortnight', …`).
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
