//! Envoy's adaptive-concurrency gradient controller, as a pure state machine.
//!
//! The controller alternates between two kinds of windows. In a **minRTT window** the
//! limit is pinned to a small `min_concurrency` and the `p`-th percentile of the next
//! `request_count` latencies becomes the ideal round-trip time, minRTT; the limit then
//! returns to what it was. Otherwise, every `concurrency_update_interval` a **sample
//! window** closes: the percentile of its latencies is sampleRTT, and
//!
//! ```text
//! gradient  = max(0.5, min(2.0, minRTT × (1 + buffer) / sampleRTT))
//! limit     = old_limit × gradient
//! new_limit = clamp(⌊limit + √limit⌋, min_concurrency_limit, max_concurrency_limit)
//! ```
//!
//! The square-root headroom makes the limit grow while latency stays near minRTT. The
//! minRTT is measured again after `interval` plus a random jitter, and at once when
//! the limit has been set to its minimum for 5 sample windows in a row (a sign that
//! minRTT is stale). Latencies of requests that started before the current minRTT
//! window are discarded.
//!
//! Envoy drives its two timers from an event loop; here they fire when time is
//! reported, through [`LimitAlgorithm::on_time`](super::LimitAlgorithm::on_time) or
//! a sample's end, each at its own deadline and in the order of their deadlines, as
//! Envoy's dispatcher runs them: a timer reported late still opens its minRTT window
//! (the epoch before which latencies are discarded) or closes its sample window at
//! the instant it was due, and is rearmed from there. The limit during a minRTT window is simply
//! [`limit`](super::LimitAlgorithm::limit), so the enforcing limiter needs nothing
//! more than the trait. The tests port Envoy's `gradient_controller_test.cc` with its
//! numbers; percentiles follow libcircllhist's estimate, as Envoy's do.
//!
//! # Where this differs from Envoy, and why
//!
//! - Configuration durations keep their full precision; Envoy truncates them to whole
//!   milliseconds (its timers' unit). Whole-millisecond values behave the same. The
//!   jitter is drawn in whole milliseconds, as Envoy draws it.
//! - Where Envoy's arithmetic is undefined behaviour in C++ (a percentile past
//!   `i32::MAX` µs, about 35.8 minutes, cast to `int`; a limit or jitter range past
//!   `u32::MAX` cast to `uint32_t`), the conversions here saturate. No defined upstream
//!   behaviour exists there to select instead.
//! - A configuration Envoy accepts but cannot honour is refused:
//!   `min_concurrency` or `min_concurrency_limit` above `max_concurrency_limit`
//!   (Envoy then pins the limit to the minimum).
//! - Envoy's runtime overrides (changing parameters of a live controller) have no
//!   counterpart: build a new controller with a new configuration.

mod circllhist;
mod config;
mod controller;
#[cfg(test)]
mod tests;

pub use config::{EnvoyGradientConfig, EnvoyGradientConfigBuilder};
pub use controller::EnvoyGradient;
