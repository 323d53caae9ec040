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
//!
//! # Costs, bursts and a measured writer
//!
//! A stream can wait for what a cost function says of each item, through the
//! [`prelude`](crate::prelude); readers and writers are held to bytes per second and
//! split large reads and writes into chunks no larger than the bucket, so no burst
//! exceeds it.
//!
//! ```
//! use futures::StreamExt;
//! use tollgate::prelude::*;
//! use tollgate::{algorithm::Gcra, Limiter, Quota};
//!
//! # futures::executor::block_on(async {
//! let limiter = Limiter::new(Gcra::new(Quota::per_second(1_000)?));
//! let sizes = futures::stream::iter([100_u64, 200, 300]);
//! let shaped: Vec<_> = sizes.throttle_by(limiter, |n: &u64| *n).collect().await;
//! assert!(shaped.iter().all(|item| item.is_ok()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! `cargo run --example shaped_copy --features tokio` copies a 6 MiB file at 2 MiB/s
//! through `Shaped<tokio::fs::File>` with a progress bar. Shaping a writer to 1 MiB/s
//! with a 64 KiB bucket for 10 s (`cargo bench -p tollgate-benches --bench shaping --features futures-io`)
//! holds the rate within 0.04 %, and no write exceeds the bucket, where
//! async-speed-limit on the same workload lets 256 KiB writes through whole (table in
//! `benches/README.md`).

mod io;
mod pacer;
mod stream;

pub use io::Shaped;
pub use stream::{Each, ItemCost, Refused, ThrottleExt, Throttled};
