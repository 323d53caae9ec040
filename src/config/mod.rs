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
pub use unit::{Algorithm, Unit};
