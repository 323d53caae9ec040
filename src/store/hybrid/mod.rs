//! Hybrid modes: less traffic to a shared store, for a bounded or no loss of exactness.
//!
//! - [`DeniedCache`] wraps any [`Store`](super::Store) and remembers "denied until T"
//!   answers, so that a client hammering a key that is over its limit stops costing a
//!   round trip per request (envoy ratelimit's local cache of over-limit keys). It
//!   never admits what the store would deny: it only repeats denials the store gave.
//! - [`BatchedLimiter`] (feature `redis`) counts fixed windows in this process and
//!   sends its increments to Redis every `sync_interval`, one script call per key
//!   (Kong's `sync_rate`). Most decisions cost no round trip at all; in exchange the
//!   nodes together may admit more than the limit, by about
//!   `nodes × rate per node × sync_interval`.
//! - [`LeaseLimiter`] (feature `redis`) leases each process a slice of what remains
//!   of a fixed window, a sliding window counter or a GCRA bucket, in one atomic script call, and admits from it
//!   locally with one compare-and-swap: in-process speed, and never more than the
//!   limit, since Redis grants only what the rule admits.

#[cfg(feature = "redis")]
pub(crate) mod batched;
mod denied_cache;
#[cfg(feature = "redis")]
pub(crate) mod lease;
mod slice;

#[cfg(feature = "redis")]
pub use batched::BatchedLimiter;
pub use denied_cache::DeniedCache;
#[cfg(feature = "redis")]
pub use lease::LeaseLimiter;
#[cfg(loom)]
pub use slice::LoomSlice;
