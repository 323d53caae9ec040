//! tollgate: rate limiting and permits.
//!
//! - **Exact algorithms** as pure state machines: GCRA token bucket, leaky bucket,
//!   fixed window, sliding log and counter, Guava's smooth limiters, Resilience4j's
//!   refresh-period limiter, concurrency permits and all-or-nothing combinations.
//! - **Time through a [`Clock`](time::Clock)**: a monotonic clock in production, a
//!   [`ManualClock`](time::ManualClock) in tests.
//! - **Decisions that say why**: [`Admitted`] with what remains, or [`Denied`] with a
//!   `retry_after`, or *never* when a request exceeds what can ever be granted.
//! - **Keyed limiting** with memory bounded by configuration.
//! - **Waiting** ([`Limiter::acquire`], [`Semaphore::acquire`],
//!   [`LeakyQueue::enqueue`]): FIFO-fair, cancellation-safe, with fail-fast timeouts,
//!   on any executor or a plain thread; one [`Scheduler`](time::Scheduler) thread rings
//!   the alarms of every waiting limiter, and idle limiters cost nothing.
//! - **Shared limits** ([`store`], feature `store`): the same algorithms over a
//!   [`Store`] — in memory, or in Redis / Redis Cluster (feature `redis`) as Lua
//!   scripts that are the same state machines, all rules of a request in one atomic
//!   round trip on the server's clock.
//! - **HTTP** (module `http`, feature `http`): a tower layer for servers answering 429
//!   with `Retry-After` and the IETF `RateLimit` fields, and one for clients that waits
//!   for permits and pauses on 429; rules from an envoy-style YAML file
//!   (module `config`, feature `config`).
//! - **Shaping** ([`shape`]): streams throttled per item or by cost, and tokio /
//!   futures-io readers and writers held to bytes per second.
//! - **Adaptive concurrency** ([`adaptive`], feature `adaptive`): limits that
//!   follow the service's latency (Netflix's and Envoy's algorithms).
//! - **Outbound rates** ([`outbound`], feature `outbound`): a client's rate
//!   learned from the partner's answers (CUBIC, SRE throttling).
//! - **Load shedding** ([`shed`], feature `shed`): criticality classes, Stripe's
//!   fleet-usage and worker-utilisation shedders, shadow mode and a kill switch.
//! - **Observability** ([`observe`]): events to subscribe to, `metrics` counters
//!   (feature `metrics`) and `tracing` spans.
//!
//! # Features
//!
//! None is on by default: the core above (the algorithms, [`Limiter`],
//! [`KeyedLimiter`], [`Semaphore`], [`LeakyQueue`], [`shape`], [`observe`]) builds
//! alone. Each family is one feature away: `adaptive`, `outbound`, `shed`, `store`;
//! `redis`, `http` and `config` bring `store` with them. In `http`, the layers of a
//! family (`http::adaptive`, `http::shed`, the client's `feedback`) come with that
//! family's feature. `tokio` and `futures-io` shape their readers and writers,
//! `axum` reads its peer address, `metrics` records through the `metrics` facade.
//!
//! # Names
//!
//! A method's name says what it does with permits, the same on every type; whether it
//! is `async` follows from where the state is, never from the name:
//!
//! | name | what it does | in process ([`Limiter`], [`KeyedLimiter`], [`Semaphore`]) | over a store ([`SharedLimiter`], `BatchedLimiter`) |
//! |---|---|---|---|
//! | `try_acquire` | decides now, never waits, no I/O | sync: a [`Decision`], or a semaphore's permit | sync, `None` when only a round trip can decide |
//! | `check` | decides by one round trip, never waits for permits | — | `async` |
//! | `peek`, `reserve`, `refund` | as their names say, at once | sync | `async` (a round trip) |
//! | `acquire`, `acquire_timeout` | waits in the FIFO queue for permits | `async` (a named future) | `async` (a named future) |
//! | `acquire_blocking`, `acquire_blocking_timeout` | the same wait, on the calling thread | sync | sync |
//!
//! The integrations see every source through [`PermitSource`] with the same split:
//! `decide_now` (sync, `None` when a round trip is needed), `decide` (a round trip),
//! `wait`. Constructors taking a clock are `with_clock`; `with_events` attaches a hub
//! ([`observe::Events`]) shared by every clone.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use tollgate::{Limiter, Quota};
//! use tollgate::algorithm::Gcra;
//! use tollgate::time::ManualClock;
//!
//! let clock = ManualClock::new();
//! let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(5)?), clock.clone());
//! for _ in 0..5 {
//!     assert!(limiter.try_acquire(1).is_ok());
//! }
//! let denied = limiter.try_acquire(1).unwrap_err();
//! assert_eq!(denied.retry_after(), Some(Duration::from_millis(200)));
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! # One permit source
//!
//! Every limiter is a [`PermitSource`]: [`Limiter`], [`LeakyQueue`], `Arc<Semaphore>`
//! (whose grants are guards that give the permits back when dropped), and, per key,
//! [`KeyedLimiter`] and [`SharedLimiter`]. The integrations
//! take any of them: the shapers ([`shape`]), the HTTP client layer
//! ([`for_key`](PermitSource::for_key) fixes a keyed source's key) and the server
//! layer (`RateLimitLayer::keyed` over a source keyed by `str`,
//! `RateLimitLayer::global` over any single one: a [`Semaphore`] there limits requests
//! at once). A source decides at once ([`decide_now`](PermitSource::decide_now), no
//! I/O), by a round trip ([`decide`](PermitSource::decide)), or waits in its FIFO
//! queue ([`wait`](PermitSource::wait)), and fails with one error type,
//! [`AcquireError<E>`](AcquireError), whose [`Source(E)`](AcquireError::Source) is a
//! store's own failure.
//!
//! ```
//! use tollgate::algorithm::Gcra;
//! use tollgate::{Limiter, PermitSource, Quota};
//!
//! fn admit<P: PermitSource>(source: &P) -> bool {
//!     matches!(source.decide_now(&(), 1), Some(Ok(Ok(_))))
//! }
//!
//! # fn main() -> Result<(), tollgate::ConfigError> {
//! assert!(admit(&Limiter::new(Gcra::new(Quota::per_second(10)?))));
//! # Ok(()) }
//! ```
//!
//! # Waiting
//!
//! ```
//! use std::time::Duration;
//! use tollgate::algorithm::SmoothBursty;
//! use tollgate::Limiter;
//!
//! async fn send_all(batches: &[u64]) -> Result<(), Box<dyn std::error::Error>> {
//!     let limiter = Limiter::new(SmoothBursty::new(50.0)?); // Guava's RateLimiter.create(50)
//!     for &size in batches {
//!         let waited = limiter.acquire(size).await?; // FIFO; dropping the future gives back
//!         println!("sent {size} after {waited:?}");
//!     }
//!     // Give up at once if the wait is already known to be longer than 100 ms.
//!     limiter.acquire_timeout(1, Duration::from_millis(100)).await?;
//!     Ok(())
//! }
//! ```
//!
//! - `acquire(n).await`, `acquire_timeout`, `acquire_blocking` on every [`Limiter`], on
//!   [`Semaphore`] (permits returned on drop), on [`LeakyQueue`]
//!   ([`enqueue`](LeakyQueue::enqueue): a bounded queue leaving at a constant rate),
//!   and per key on [`KeyedLimiter`] and [`SharedLimiter`] (one
//!   queue per key with waiters; a store's first waiter books by a round trip). Every
//!   one of them waits through the same queue and scheduler.
//! - **FIFO-fair** by default: a waiting request for 10 is not overtaken by later
//!   requests for 1, and `try_acquire` fails while anyone waits.
//!   [`Fairness::Unfair`] lets whatever fits go first.
//! - **Cancellation-safe**: only the first waiter books capacity; dropping a waiting
//!   future gives back what it booked, and the next waiter moves up at once.
//! - **Prepaying** algorithms wait as their reference does: a large
//!   [`SmoothBursty`](algorithm::SmoothBursty) request goes at once and the next caller
//!   waits for it, to Guava's microsecond.
//! - **One scheduler thread** ([`time::Scheduler`]) per process rings the alarms of all
//!   waiting limiters. A limiter with no waiter sets no alarm, so idle limiters cost
//!   nothing; the thread exits after a second with nothing to do. Under a
//!   [`ManualClock`](time::ManualClock), `advance` rings due alarms itself, so waiting
//!   tests are deterministic.
//! - Runs on any executor: tokio (multi-thread and current-thread), `futures`'
//!   executors, or plain threads.
//!
// Without its feature, a family's module is not in the docs: its links go to the
// list of features instead.
#![cfg_attr(not(feature = "adaptive"), doc = "[`adaptive`]: #features")]
#![cfg_attr(not(feature = "outbound"), doc = "[`outbound`]: #features")]
#![cfg_attr(not(feature = "shed"), doc = "[`shed`]: #features")]
#![cfg_attr(not(feature = "store"), doc = "[`store`]: #features")]
#![cfg_attr(
    feature = "store",
    doc = "[`Store`]: store::Store",
    doc = "[`SharedLimiter`]: store::SharedLimiter"
)]
#![cfg_attr(
    not(feature = "store"),
    doc = "[`Store`]: #features",
    doc = "[`SharedLimiter`]: #features"
)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]
// Parts of the core serve only two families: the algorithms' facts and the table's
// removal the stores use, and the semaphore's, wait queue's and coarse clock's parts
// the adaptive limiters use. Unused while those are off; dead code is found with
// every feature on, as clippy runs in CI.
#![cfg_attr(
    not(all(feature = "adaptive", feature = "store")),
    allow(dead_code, unused_imports)
)]

#[cfg(feature = "adaptive")]
pub mod adaptive;
pub mod algorithm;
#[cfg(feature = "config")]
pub mod config;
mod decision;
mod engine;
mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod keyed;
mod leaky_queue;
mod limiter;
pub mod observe;
#[cfg(feature = "outbound")]
pub mod outbound;
mod permits;
mod quota;
pub mod semaphore;
pub mod shape;
#[cfg(feature = "shed")]
pub mod shed;
#[cfg(feature = "store")]
pub mod store;
mod sync;
mod table;
pub mod time;
mod units;
mod wait;

/// The extension traits, to import with `use tollgate::prelude::*`.
pub mod prelude {
    pub use crate::shape::ThrottleExt;
}

/// The named futures returned by the `acquire` methods.
pub mod futures {
    #[cfg(feature = "adaptive")]
    pub use crate::adaptive::AdaptiveAcquire;
    pub use crate::keyed::acquire::KeyedAcquire;
    pub use crate::leaky_queue::Enqueue;
    pub use crate::limiter::Acquire;
    pub use crate::semaphore::{AcquireOwnedPermit, AcquirePermit};
    #[cfg(feature = "redis")]
    pub use crate::store::hybrid::batched::BatchedAcquire;
    #[cfg(feature = "redis")]
    pub use crate::store::hybrid::lease::LeaseAcquire;
    #[cfg(feature = "store")]
    pub use crate::store::limiter::SharedAcquire;
}

pub use decision::{Admitted, Decision, Denied, Limited, Reservation, Retry};
pub use error::{AcquireError, ConfigError, InsufficientCapacity};
pub use keyed::KeyedLimiter;
pub use leaky_queue::LeakyQueue;
pub use limiter::Limiter;
pub use permits::{Decided, EveryKey, ForKey, Grant, PermitFuture, PermitSource, Release};
pub use quota::Quota;
pub use semaphore::Semaphore;
pub use table::{KeyedConfig, WhenFull};
pub use wait::Fairness;

/// The README's examples, compiled and run as doctests. They show the families and
/// the integrations, so they run with those features on, as the README's test
/// command (`cargo test --all-features -p tollgate …`) has them.
#[cfg(all(
    doctest,
    feature = "adaptive",
    feature = "outbound",
    feature = "shed",
    feature = "redis",
    feature = "http",
    feature = "config"
))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
