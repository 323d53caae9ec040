//! Observability: events, metrics and tracing.
//!
//! - **Events**, as Resilience4j's rate limiter publishes them: attach an [`Events`]
//!   hub to a limiter ([`Limiter::with_events`](crate::Limiter::with_events),
//!   [`KeyedLimiter::with_events`](crate::KeyedLimiter::with_events),
//!   [`SharedLimiter::with_events`],
//!   `BatchedLimiter::with_events` (feature `redis`),
//!   [`LeakyQueue::with_events`](crate::LeakyQueue::with_events),
//!   [`Semaphore::with_events`](crate::Semaphore::with_events)) and
//!   [`subscribe`](Events::subscribe) listeners to it. Every decision is an
//!   [`Event`]: [`Admitted`](EventKind::Admitted), [`Waited`](EventKind::Waited)
//!   (granted after a wait, with the time waited on the limiter's clock),
//!   [`Denied`](EventKind::Denied) (with a [`DenyReason`]) or
//!   [`Drained`](EventKind::Drained); an adaptive limiter adds
//!   [`LimitChanged`](EventKind::LimitChanged) and
//!   [`Finished`](EventKind::Finished) (with the request's [`Outcome`]). Other
//!   components (an HTTP layer) emit into the same hubs with [`Events::emit`]; a
//!   decision is reported once, by whoever made it: the server layer reports a
//!   request only when its limiter has no hub of its own (`RateLimitLayer::events`,
//!   feature `http`).
//! - **Metrics** (feature `metrics`): [`MetricsRecorder`] is a listener counting
//!   admitted, denied and waited requests and a histogram of wait times through the
//!   [`metrics`](https://docs.rs/metrics) facade, labelled with the hub's name
//!   ([`Events::record_metrics`]).
//! - **Tracing**: waits that queue run in a `tollgate.wait` span (an immediate grant
//!   makes none); each call to a store from a
//!   [`SharedLimiter`] runs in a `tollgate.store` span
//!   with the op and the number of rules; [`Resilient`]
//!   reports failures, timeouts, fallbacks and breaker changes as `tracing` events.
//!   Spans are at `DEBUG` level, and keys appear only as fields at `DEBUG`, never in
//!   names. Without a subscriber `tracing` costs its own callsite checks only.
//!
//! The outbound learners report too:
//! [`LearnedRate::with_events`]
//! adds [`RateChanged`](EventKind::RateChanged) to its limiter's decisions, and
//! [`SreThrottle::with_events`]
//! reports each call it admits or refuses locally.
//!
//! On every limiter, clones share the hub and the first hub attached stays. A load
//! shedder's hub ([`shed`]) is instead a setting of each copy, as its
//! mode is: a later `with_events` replaces it.
//!
//! Nothing is emitted while nobody listens: a limiter without `Events` checks one
//! `Option` per decision, and one with `Events` but no listener one relaxed flag.
//!
//! # Examples
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use tollgate::algorithm::Gcra;
//! use tollgate::time::ManualClock;
//! use tollgate::observe::{Event, EventKind, Events};
//! use tollgate::{Limiter, Quota};
//!
//! # futures::executor::block_on(async {
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let events = Events::new("search");
//! let _subscription = events.subscribe({
//!     let log = Arc::clone(&log);
//!     move |event: &Event<'_>| log.lock().unwrap().push(event.kind)
//! });
//!
//! let clock = ManualClock::new();
//! let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(1)?), clock.clone())
//!     .with_events(events);
//! limiter.acquire(1).await?; // at once
//! let mut next = Box::pin(limiter.acquire(1));
//! assert!(futures::poll!(next.as_mut()).is_pending());
//! clock.advance(Duration::from_millis(100));
//! next.await?;
//!
//! assert_eq!(*log.lock().unwrap(), [
//!     EventKind::Admitted,
//!     EventKind::Waited { wait: Duration::from_millis(100) },
//! ]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # The shortest listener
//!
//! A hub can also be attached to the HTTP server layer (feature `http`). With feature
//! `metrics`, `events.record_metrics()` counts `tollgate_admitted_total`,
//! `tollgate_denied_total` (by `reason`), `tollgate_waited_total` and a
//! `tollgate_wait_seconds` histogram, labelled by the hub's name, never by key (the
//! full table is on [`MetricsRecorder`]). The shortest listener prints:
//!
//! ```
//! use tollgate::observe::{Event, Events};
//! use tollgate::{algorithm::Gcra, Limiter, Quota};
//!
//! # fn main() -> Result<(), tollgate::ConfigError> {
//! let events = Events::new("search");
//! let _subscription = events.subscribe(|event: &Event<'_>| println!("{event:?}"));
//! let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?)).with_events(events);
//! let _ = limiter.try_acquire(1); // prints an Admitted event
//! # Ok(()) }
//! ```
#![cfg_attr(
    feature = "store",
    doc = "[`SharedLimiter::with_events`]: crate::store::SharedLimiter::with_events",
    doc = "[`SharedLimiter`]: crate::store::SharedLimiter",
    doc = "[`Resilient`]: crate::store::Resilient"
)]
#![cfg_attr(
    feature = "outbound",
    doc = "[`LearnedRate::with_events`]: crate::outbound::LearnedRate::with_events",
    doc = "[`SreThrottle::with_events`]: crate::outbound::SreThrottle::with_events"
)]
#![cfg_attr(feature = "shed", doc = "[`shed`]: crate::shed")]
// Without their features, the names go to the list of features.
#![cfg_attr(
    not(feature = "store"),
    doc = "[`SharedLimiter::with_events`]: crate#features",
    doc = "[`SharedLimiter`]: crate#features",
    doc = "[`Resilient`]: crate#features"
)]
#![cfg_attr(
    not(feature = "outbound"),
    doc = "[`LearnedRate::with_events`]: crate#features",
    doc = "[`SreThrottle::with_events`]: crate#features"
)]
#![cfg_attr(not(feature = "shed"), doc = "[`shed`]: crate#features")]
#![cfg_attr(
    not(feature = "metrics"),
    doc = "[`MetricsRecorder`]: crate#features",
    doc = "[`Events::record_metrics`]: crate#features"
)]

mod event;
mod events;
#[cfg(feature = "metrics")]
mod metrics;
mod reporter;

#[cfg(feature = "metrics")]
pub use self::metrics::OUTBOUND_RATE;
#[cfg(feature = "metrics")]
pub use self::metrics::{
    ADAPTIVE_LIMIT, ADMITTED_TOTAL, DENIED_TOTAL, DRAINED_TOTAL, FINISHED_TOTAL, INFLIGHT,
    MetricsRecorder, RTT_SECONDS, SHED_TOTAL, WAIT_SECONDS, WAITED_TOTAL,
    WOULD_SHED_BY_REASON_TOTAL, WOULD_SHED_TOTAL,
};
pub use event::{DenyReason, Event, EventKind, Outcome};
pub use events::{Events, Listener, Subscription};
pub(crate) use reporter::Reporter;
