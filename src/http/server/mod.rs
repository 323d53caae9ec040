//! The server layer: answers 429 with rate-limit headers.
//!
//! [`RateLimitLayer`] asks a [`Limits`](crate::http::Limits) about each request's head
//! before the inner service sees it. Usually that is a
//! [`KeyedLimits`](crate::http::KeyedLimits): a key read from the request (the
//! client's IP address, an API key header, one global key) and a
//! [`SharedLimiter`](crate::store::SharedLimiter) over the memory store or Redis.
//!
//! A limit kept in this process only may use an in-process
//! [`KeyedLimiter`](crate::KeyedLimiter) instead: [`RateLimitLayer::keyed`] takes it as
//! it takes a `SharedLimiter`, and its check takes about half the time of the
//! store's (the rest of a request costs the same). The store is
//! worth its cost when the same code may run over Redis, or to report several named
//! rules per key; [the keyed module][keyed-or-shared] says when to use which, with the
//! measured difference.
//!
//! [keyed-or-shared]: crate::keyed#keyedlimiter-or-sharedlimitermemorystore
//!
//! # Responses
//!
//! | Outcome | Status | Fields | JSON `error` |
//! |---|---|---|---|
//! | admitted | the inner service's | `RateLimit-Policy`, `RateLimit` added | — |
//! | over the limit | 429 | `Retry-After`, `RateLimit-Policy`, `RateLimit` | `rate_limited` |
//! | costs more than the quota can ever grant | 429 | `RateLimit-Policy` | `cost_exceeds_quota` |
//! | key header missing or invalid, key too long | 400 | | `missing_key`, `invalid_key` |
//! | no peer address (server misconfigured) | 500 | | `no_peer_address` |
//! | the store failed | 503 | | `limiter_unavailable` |
//! | the limiter is closed | 503 | | `limiter_closed` |
//!
//! Every response the layer answers itself is `Content-Type: application/json` and
//! `Cache-Control: no-store` (RFC 6585: a 429 must not be stored), with a body such as
//!
//! ```json
//! {"error":"rate_limited","message":"rate limit \"default\" exceeded: retry after 12 s","retry_after":12,"policy":"default"}
//! ```
//!
//! A request that costs more than a policy can ever grant gets 429 with
//! `"retry_after":null` and no `Retry-After`: it can never pass, and waiting does not
//! help, but like any 429 it is the client asking too much of a rate limit. The
//! missing peer address is 500, not 400: it means the server does not record peers
//! (serve axum with `into_make_service_with_connect_info::<SocketAddr>()`), and
//! counting every client against one key instead would be wrong silently. A store
//! failure is 503 (its cause is logged, not sent); to admit or decide locally while
//! the store is down instead, wrap the store in a
//! [`Resilient`](crate::store::Resilient).
//!
//! Admitted responses get `RateLimit-Policy` and `RateLimit` appended to the inner
//! service's fields, and [`RateLimitLayer::legacy_headers`] adds `X-RateLimit-*`.
//! [`wire`](crate::http::wire) says what each field holds and how it is
//! rounded.
//!
//! # Sharing
//!
//! The layer holds its limits in an `Arc`: every clone of the layer and every service
//! it makes count against the same limit. That is the global variant tower's
//! `RateLimit` lacks (it is not `Clone`, so axum cannot use it): a `Router::layer`
//! is cloned into every route and connection, and they all share the one limiter.
//!
//! # Examples
//!
//! Per client IP address, over axum (the peer address comes from `ConnectInfo`):
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use axum::{routing::get, Router};
//! use tollgate::algorithm::Gcra;
//! use tollgate::http::ClientIp;
//! use tollgate::http::server::RateLimitLayer;
//! use tollgate::store::{MemoryStore, SharedLimiter};
//! use tollgate::{KeyedConfig, Quota};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new(KeyedConfig::new(100_000), "api")?;
//! let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?.burst(20)?))?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::keyed(ClientIp::new(), limiter));
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Several limits: two rules on one key with [`SharedLimiter::all_of`] (all must
//! admit; `RateLimit-Policy` lists both), a stricter limit on one route with axum's
//! `route_layer`, and a global limit over everything:
//!
//! [`SharedLimiter::all_of`]: crate::store::SharedLimiter::all_of
//!
//! ```
//! use std::time::Duration;
//! use axum::{routing::{get, post}, Router};
//! use tollgate::algorithm::{FixedWindow, Gcra};
//! use tollgate::http::{ClientIp, HeaderKey};
//! use tollgate::http::server::RateLimitLayer;
//! use tollgate::store::{MemoryStore, SharedLimiter};
//! use tollgate::{KeyedConfig, PermitSource, Quota};
//!
//! let store = || MemoryStore::new(KeyedConfig::new(100_000), "api");
//! let per_key = SharedLimiter::all_of(store()?, [
//!     ("burst", Gcra::new(Quota::per_second(10)?.burst(100)?).into()),
//!     ("daily", FixedWindow::new(10_000, Duration::from_secs(86_400))?.into()),
//! ])?;
//! let login = SharedLimiter::new(store()?, FixedWindow::new(5, Duration::from_secs(60))?)?;
//! let everyone = SharedLimiter::new(store()?, Gcra::new(Quota::per_second(1_000)?))?;
//!
//! let app: Router = Router::new()
//!     .route("/login", post(|| async { "welcome" }))
//!     .route_layer(RateLimitLayer::keyed(ClientIp::new().trust("10.0.0.0/8")?, login))
//!     .route("/orders", get(|| async { "[]" }))
//!     .layer(RateLimitLayer::keyed(HeaderKey::from_static("x-api-key"), per_key))
//!     .layer(RateLimitLayer::global(everyone.for_key("global")));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `route_layer` applies to the routes added before it, so `/login` has its own limit
//! and `/orders` does not; both count against the per-key and the global limits.

mod body;
mod fields;
mod future;
mod layer;
mod response;
mod service;

pub use body::RateLimitBody;
pub use fields::insert;
pub use future::RateLimitFuture;
pub use layer::RateLimitLayer;
pub use service::RateLimitService;
