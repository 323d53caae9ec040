//! Shaping: streams, readers and writers held to a rate.
//!
//! - [`ThrottleExt::throttle`] / [`throttle_by`](ThrottleExt::throttle_by): any
//!   [`Stream`](futures_core::Stream) whose items each wait for one permit, or for
//!   what a cost function says, from a [`Limiter`](crate::Limiter).
//! - [`Shaped`]: a reader or writer held to a limiter of bytes per second, reading and
//!   writing in chunks no larger than the limiter grants at once; tokio's
//!   `AsyncRead`/`AsyncWrite` with feature `tokio`, futures-io's with feature
//!   `futures-io`.
//!
//! All of them wait in the limiter's FIFO queue, on its clock: several streams,
//! readers and writers over clones of one limiter share its rate in arrival order,
//! and under a [`ManualClock`](crate::time::ManualClock) they move only when the
//! test moves the clock. Dropping one gives back whatever it had booked.
//!
//! A shaper spends the permits it is granted, and counts on time to bring them
//! back: over a limiter whose permits come back only when given back (a
//! [`Concurrency`](crate::algorithm::Concurrency) limit), it stalls once it has spent
//! them all. Shape with a rate.
//!
//! # Examples
//!
//! ```
//! use futures::StreamExt;
//! use tollgate::{Limiter, Quota};
//! use tollgate::algorithm::Gcra;
//! use tollgate::shape::ThrottleExt;
//!
//! # futures::executor::block_on(async {
//! // Two streams share 1,000 items/s.
//! let limiter = Limiter::new(Gcra::new(Quota::per_second(1000)?));
//! let a = futures::stream::iter(0..10).throttle(limiter.clone());
//! let b = futures::stream::iter(10..20).throttle(limiter);
//! let merged: Vec<_> = futures::stream::select(a, b).collect().await;
//! assert_eq!(merged.len(), 20);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod io;
mod pacer;
mod stream;

pub use io::Shaped;
pub use stream::{Each, ItemCost, Refused, ThrottleExt, Throttled};
