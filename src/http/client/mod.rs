//! The client layer: waits for permits before each call, and backs off when the server
//! says so.
//!
//! [`ThrottleLayer`] wraps any tower client service taking `http::Request<B>` and
//! answering `http::Response<RB>` (hyper-util's legacy `Client`, reqwest through a
//! tower adapter, another layer). It never refuses a call for being over the limit: it
//! **waits**.
//!
//! # What a call does
//!
//! 1. If a **pause** is on, it sleeps until the pause ends (on the layer's
//!    [`Clock`](crate::time::Clock)).
//! 2. It waits for its permits from any [`PermitSource`](crate::PermitSource):
//!    [`cost`](ThrottleLayer::cost) (1 by default), or the [`Cost`] in the request's
//!    extensions. An in-process [`Limiter`](crate::Limiter) serves waiters first
//!    come, first served; a [`SharedLimiter`](crate::store::SharedLimiter) on one key
//!    ([`for_key`](crate::PermitSource::for_key)) shares one limit across processes
//!    through a store, waiting in the same kind of queue; a semaphore behind an `Arc`
//!    bounds the calls in flight, its permit held until the response arrives.
//! 3. If a pause began while it waited, it gives the permits back and starts again at
//!    1: a permit held through a pause would send every such caller at once when the
//!    pause ends.
//! 4. It readies and calls the inner service.
//! 5. It reads the answer and, if the server asks for it, **pauses every caller** of
//!    every clone of the layer: for the longest of
//!    - `Retry-After` on any response, in delay-seconds or as an HTTP-date;
//!    - the `t` of every item with `r=0` in a `RateLimit` field (IETF
//!      draft-ietf-httpapi-ratelimit-headers-10), e.g. `RateLimit: "default";r=0;t=3`;
//!    - only when neither of those is sent, `X-RateLimit-Reset` when
//!      `X-RateLimit-Remaining` is 0 (see [`wire::backoff`](crate::http::wire::backoff)
//!      for why, and for how a reset is read as a delay or a Unix time);
//!
//!    or, for a 429 that names none of them, the
//!    [`default_backoff`](ThrottleLayer::default_backoff) (1 s). No pause is ever longer
//!    than [`max_pause`](ThrottleLayer::max_pause) (an hour), and a pause only ever
//!    grows: a shorter answer does not cut a longer pause short.
//! 6. With a [`feedback`] set (feature `outbound`), it reports the answer to it
//!    (throttled or not, and the limits the fields announce): how a
//!    [`LearnedRate`] learns the server's
//!    rate and an [`SreThrottle`] counts
//!    what the server accepts. Given an [`Events`](crate::observe::Events) hub
//!    (their `with_events`), they report through it each call they let through or
//!    refuse locally, and a `LearnedRate` each change of its rate.
//!
//! # A 429 is returned, not retried
//!
//! The call that drew a 429 gets the 429 response: the layer pauses everyone else, and
//! retries nothing, because a request body is in general a stream that cannot be sent
//! twice. To retry requests that can be replayed, put tower's `Retry` layer (or a loop)
//! *outside* this one: each retry goes through the layer again, so it waits out the
//! pause and takes a permit like any other call.
//!
//! # Timeouts
//!
//! With [`timeout`](ThrottleLayer::timeout), a call fails with
//! [`ThrottleError::TimedOut`] when the pause and its permit cannot both be had within
//! the timeout, at once when that is known (a pause ends later, or the limiter's queue
//! goes later). The inner service's own time is not counted: bound it with tower's
//! `Timeout` layer.
//!
//! # Cancel safety
//!
//! Dropping a call's future while it waits for its permits gives back whatever the
//! limiter had booked for it, and the next waiter moves up; while it waits out a pause
//! it holds nothing. Nothing was sent either way, and no other caller is left waiting
//! on it. A permit given back during a pause is returned before the call sleeps.
//!
//! # Permits are spent
//!
//! A permit of a rate is spent, not returned when the response arrives. A source
//! whose grants are guards (a [`Semaphore`](crate::Semaphore) behind an `Arc`) gets
//! its permit back when the response arrives, or the call fails: that bounds the
//! calls in flight. A bare [`Concurrency`](crate::algorithm::Concurrency) limiter
//! hands out no guard, so its permits would never come back: use the semaphore.
//!
//! # Examples
//!
//! A 429 with `Retry-After: 2` holds the next call until the clock has moved 2 s:
//!
//! ```
//! use std::time::Duration;
//! use http::{Request, Response};
//! use tower::{service_fn, Layer, ServiceExt};
//! use tollgate::http::client::ThrottleLayer;
//! use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
//!
//! # futures::executor::block_on(async {
//! let clock = ManualClock::new();
//! let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
//! let layer = ThrottleLayer::with_clock(limiter, clock.clone());
//! let api = layer.layer(service_fn(|_: Request<()>| async {
//!     Response::builder().status(429).header("retry-after", "2").body(())
//! }));
//!
//! let refused = api.clone().oneshot(Request::new(())).await?;
//! assert_eq!(refused.status(), 429);
//! let mut next = Box::pin(api.oneshot(Request::new(())));
//! assert!(futures::poll!(next.as_mut()).is_pending());
//! clock.advance(Duration::from_secs(2));
//! assert!(futures::poll!(next.as_mut()).is_ready());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! hyper-util's client, held to 5 calls per second:
//!
//! ```no_run
//! use http_body_util::Empty;
//! use bytes::Bytes;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::{ServiceBuilder, ServiceExt};
//! use tollgate::http::client::ThrottleLayer;
//! use tollgate::{algorithm::Gcra, Limiter, Quota};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = Limiter::new(Gcra::new(Quota::per_second(5)?));
//! let client = ServiceBuilder::new()
//!     .layer(ThrottleLayer::new(limiter))
//!     .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
//! let request = http::Request::get("http://127.0.0.1:8080/items").body(Empty::new())?;
//! let response = client.clone().oneshot(request).await?;
//! println!("{}", response.status());
//! # Ok(()) }
//! ```
//!
#![cfg_attr(
    feature = "outbound",
    doc = "[`feedback`]: ThrottleLayer::feedback",
    doc = "[`LearnedRate`]: crate::outbound::LearnedRate",
    doc = "[`SreThrottle`]: crate::outbound::SreThrottle"
)]
// Without `outbound`, the names go to the list of features.
#![cfg_attr(
    not(feature = "outbound"),
    doc = "[`feedback`]: crate#features",
    doc = "[`LearnedRate`]: crate#features",
    doc = "[`SreThrottle`]: crate#features"
)]

#[cfg(feature = "outbound")]
mod answer;
mod error;
mod future;
mod layer;
mod pause;
mod service;

pub use error::ThrottleError;
pub use future::ThrottleFuture;
pub use layer::ThrottleLayer;
pub use service::Throttle;

/// The permits one request costs, overriding the layer's
/// [`cost`](ThrottleLayer::cost): put it in the request's extensions.
///
/// # Examples
///
/// ```
/// use tollgate::http::client::Cost;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Cost(10)); // a batch call, worth ten
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cost(pub u64);
