//! See what a limit does to your traffic before deploying it.
//!
//! The simulator replays traffic against tollgate's own limiters on virtual time:
//! every request is decided by the code that serves production (a rules file over a
//! memory store, at the request's time), so what it shows is what the limit does,
//! exactly and fast, and the same seed gives the same output byte for byte.
//!
//! - [`arrivals`]: traffic from a pattern (constant, Poisson, on-off bursts, a ramp)
//!   over one key or many with a Zipf popularity, from a seed.
//! - [`trace`]: traffic recorded as CSV.
//! - [`domains`]: the rate limit service's domain files, one or a directory, and the
//!   descriptors a request carries.
//! - [`replay`]: requests decided at their virtual times, counted per step: admitted,
//!   denied, queued, in flight, the limit, and wait and latency percentiles, as CSV
//!   and JSON.
//! - [`service`]: requests sent to a service with a concurrency knee through an
//!   adaptive limiter or a shedder.
//! - [`guava`]: Guava's documented warm-up shape, computed.
//! - [`scenarios`]: built-in comparisons, the same traffic against several limits.
//! - [`plot`]: a comparison drawn as SVG.
//! - [`report`]: scenarios side by side in one self-contained HTML page.
//!
//! `cargo run -p tollgate-sim -- scenario boundary` runs one; `-- list` names them.

pub mod arrivals;
pub mod domains;
mod error;
pub mod guava;
pub mod plot;
pub mod replay;
pub mod report;
pub mod scenarios;
pub mod service;
pub mod trace;

/// The service with a concurrency knee: the model the crate's adaptive-limit tests
/// run on (after Vector's adaptive-concurrency scenarios), shared with them rather
/// than copied ([`service`] drives it on the user's traffic).
#[path = "../../tests/sim/mod.rs"]
mod service_model;

pub use error::SimError;
