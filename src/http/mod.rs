//! tower middleware for HTTP (feature `http`): a server layer that answers 429 with
//! rate-limit headers, and a client layer that waits for permits and backs off when
//! the server says so.
//!
//! The server layer asks a [`Limits`] about each request: [`KeyedLimits`] (any
//! [`PermitSource`](crate::PermitSource) keyed by `str`: a
//! [`KeyedLimiter`](crate::KeyedLimiter) in process, a
//! [`SharedLimiter`](crate::store::SharedLimiter) over the memory store or Redis) or
//! the rules of a config file (feature `config`). Keys come from a
//! [`KeyExtractor`]: [`ClientIp`] (behind trusted proxies only), [`HeaderKey`],
//! [`Global`], or a closure. [`wire`] reads and writes the rate-limit fields.
//!
//! [`shed`] (feature `shed`) is load shedding by criticality class: a server layer
//! answering 503 with `Retry-After` to the classes a [`Shedder`] sheds, and a client
//! layer passing a request's class on to the calls it makes. [`adaptive`] (feature
//! `adaptive`) holds server and client layers to an adaptive concurrency limit.
//!
#![cfg_attr(feature = "shed", doc = "[`Shedder`]: crate::shed::Shedder")]
// Without their features, the names go to the list of features.
#![cfg_attr(
    not(feature = "shed"),
    doc = "[`shed`]: crate#features",
    doc = "[`Shedder`]: crate#features"
)]
#![cfg_attr(not(feature = "adaptive"), doc = "[`adaptive`]: crate#features")]
//!
//! # Servers (`axum` for axum's peer address)
//!
//! [`RateLimitLayer`](server::RateLimitLayer) is tower middleware for axum and hyper.
//! Each request's head gives a key ([`ClientIp`], a header, one global key or a
//! closure); a [`SharedLimiter`](crate::store::SharedLimiter) over the memory store or
//! Redis decides. Every clone of the layer shares one limiter, so it works with axum's
//! `Router::layer` (tower's `RateLimit` is not `Clone`). The [`server`] page has the
//! axum example, the table of responses and the body of a 429.
//!
//! - [`ClientIp`] reads the connection's peer. It believes `X-Forwarded-For` (or
//!   `Forwarded`) only from proxies you name with `.trust("10.0.0.0/8")`, walking the
//!   list from the right, so a client cannot choose its own key.
//! - Several rules on one key:
//!   [`SharedLimiter::all_of`](crate::store::SharedLimiter::all_of); per route: axum's
//!   `route_layer`.
//! - Over the limit: `429` with `Retry-After` (whole seconds, at least 1, never before
//!   `t`), the IETF draft-10 `RateLimit-Policy` and `RateLimit` fields, `Cache-Control:
//!   no-store` and a JSON body. Admitted responses carry `RateLimit-Policy` and
//!   `RateLimit` too. `RateLimit: "login";r=0;t=12` reports one policy: `r` the permits
//!   left and `t` the seconds until more than `r` are free (the draft's "additional
//!   quota ... made available"), the same on a 200 and a 429.
//!   [`.legacy_headers(true)`](server::RateLimitLayer::legacy_headers) adds
//!   `X-RateLimit-Limit`, `-Remaining` and `-Reset`, where **Reset is the number of
//!   seconds until the limit is full again** (not a Unix time). [`wire`] says more.
//! - A per-key concurrency limit (a [`KeyedLimiter`](crate::KeyedLimiter) of
//!   [`Concurrency`](crate::algorithm::Concurrency), or a store's concurrency rule)
//!   holds each request's permit until its response body ends or is dropped; the next
//!   request over it is a 429 without `Retry-After`.
//! - A request that can never pass (its cost exceeds the quota) is a 429 without
//!   `Retry-After`; a missing key header 400; a server that records no peer address
//!   500; a failing store 503 (wrap it in [`Resilient`](crate::store::Resilient) to
//!   fail open or fall back).
//!
//! Rules can come from an envoy-style YAML file instead (feature `config`): the
//! `config` module, whose page shows a server's answers to `curl -i`.
//!
//! # Clients
//!
//! [`ThrottleLayer`](client::ThrottleLayer) wraps a tower client (hyper-util's
//! `Client`, for one) and **waits** for a permit before each call, FIFO, from any
//! [`PermitSource`](crate::PermitSource): an in-process [`Limiter`](crate::Limiter), a
//! [`SharedLimiter`](crate::store::SharedLimiter) on one key
//! (`limiter.for_key("api.example.com")`) shared across processes, or an
//! `Arc<Semaphore>` whose permit is held until the response arrives. When the server
//! answers 429, or sends `Retry-After` (seconds or a date), `RateLimit` with `r=0`, or,
//! failing both, an exhausted `X-RateLimit-Reset`, the layer pauses every caller of
//! every clone until then. Pending calls are cancellation-safe: a dropped call gives
//! its booked permits back. The 429 itself is returned, not retried (a body may not be
//! replayable): put tower's `Retry` outside the layer to retry. The [`client`] page
//! says more.
//!
//! ```
//! use tower::{service_fn, Layer};
//! use tollgate::http::client::ThrottleLayer;
//! use tollgate::{algorithm::Gcra, Limiter, Quota};
//!
//! # fn main() -> Result<(), tollgate::ConfigError> {
//! let layer = ThrottleLayer::new(Limiter::new(Gcra::new(Quota::per_second(100)?)));
//! let client = layer.layer(service_fn(|_request: http::Request<()>| async move {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(()))
//! }));
//! # let _ = client; Ok(()) }
//! ```
//!
//! `cargo run --example api_client --features http` runs two clients against a fake
//! API on loopback that refuses more than 5 calls per second.

#[cfg(feature = "adaptive")]
pub mod adaptive;
mod body;
pub mod client;
mod key;
mod limits;
pub mod server;
#[cfg(feature = "shed")]
pub mod shed;
pub mod wire;

pub use key::{
    ClientIp, ForwardedHeader, Global, HeaderKey, InvalidNetwork, Key, KeyError, KeyExtractor,
};
pub use limits::{
    CheckError, CheckFuture, DescribeLimits, KeyedLimits, Limits, Policies, Policy, Verdict,
};
