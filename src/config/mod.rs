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

mod error;
mod file;
#[cfg(feature = "http")]
mod http;
mod limiter;
mod locate;
mod matcher;
mod rules;
mod unit;

pub use error::{ConfigFileError, ConfigFileErrorKind, Location};
#[cfg(feature = "http")]
pub use http::{ConfigLimits, RequestDescriptor, RequestEntry};
pub use limiter::{AppliedLimit, ConfigDecision, ConfigLimiter, ShadowDenial};
pub use matcher::{Descriptor, Matched, MatchedLimit};
pub use rules::{Limit, RuleSet};
pub use unit::Unit;
