//! tower layers over an [`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter): a
//! concurrency limit that follows latency, for a server's requests
//! ([`AdaptiveLayer`]) or a client's outbound calls ([`AdaptiveClientLayer`]).
//!
//! # What a request does
//!
//! 1. It takes a permit if one is free. When none is, the limiter's
//!    [`WhenLimited`](crate::adaptive::WhenLimited) decides: fail fast refuses at once; FIFO and
//!    LIFO wait (up to their timeout, and the LIFO backlog's size), in a queue
//!    that a dropped future leaves cleanly.
//! 2. Refused, the server layer answers 503 (or 429, [`RejectStatus`]) with an
//!    optional `Retry-After`; the client layer fails with
//!    [`ClientError::Refused`]. Nothing reaches the inner service.
//! 3. Admitted, the inner service is called; its response's head is read by a
//!    [`ClassifyResponse`] as a success, a drop or ignored, and the permit moves into the
//!    response's [`AdaptiveBody`].
//! 4. **The request's latency ends when the body does** (its last frame, or
//!    [`is_end_stream`](http_body::Body::is_end_stream)), not at the head: a
//!    streamed response keeps the service busy while it streams. Trailers may
//!    override the head's outcome (a gRPC status at the end of a stream). The
//!    outcome and the latency, on the limiter's clock, move the limit.
//! 5. An error of the inner service ends the request at once, read by
//!    [`ClassifyError`]: a drop by default (timeouts are the plainest sign of
//!    overload; tell errors apart with [`ClassifyResponse::on_error`]).
//!
//! # Classifiers
//!
//! | Classifier | Drops | Ignored |
//! |---|---|---|
//! | [`HttpStatus`] (default) | 429, 503, 504; other 5xx if configured | — |
//! | [`GrpcStatus`] | `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED` (head or trailers); HTTP 429, 502, 503, 504; any code if configured | `CANCELLED`, an unreadable status |
//! | [`classify_fn`] | whatever the closure says | |
//!
//! Every one counts an error of the inner service as a drop.
//!
//! # Cancel safety
//!
//! A response future dropped while it waits leaves the queue, and a permit
//! granted to it goes to the next waiter. Dropped during the inner call, or a body
//! dropped before its end, gives the permit back: ignored, unless the head already
//! said it was dropped. No permit is ever lost.
//!
//! # Examples
//!
//! A server whose concurrency limit follows its latency, refusing with 503 and
//! `Retry-After: 1` past it:
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use tollgate::adaptive::{limit::Gradient2Limit, AdaptiveLimiter, WhenLimited};
//! use tollgate::http::adaptive::AdaptiveLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mode = WhenLimited::lifo(100, Duration::from_millis(50))?;
//! let limiter = Arc::new(AdaptiveLimiter::new(Gradient2Limit::new(), mode)?);
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(AdaptiveLayer::new(limiter).retry_after(Duration::from_secs(1))?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A gRPC server: the layer reads `grpc-status` from the head or the trailers.
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::adaptive::{limit::VegasLimit, AdaptiveLimiter, WhenLimited};
//! use tollgate::http::adaptive::{AdaptiveLayer, GrpcStatus};
//!
//! let limiter = Arc::new(AdaptiveLimiter::new(VegasLimit::new(), WhenLimited::FailFast)?);
//! let layer = AdaptiveLayer::new(limiter).classify(GrpcStatus::new());
//! # Ok::<(), tollgate::ConfigError>(())
//! ```

mod body;
mod classify;
mod client;
mod error;
mod future;
mod layer;
mod response;
mod service;

pub use body::AdaptiveBody;
pub use classify::{
    ClassifyError, ClassifyFn, ClassifyResponse, GrpcStatus, HttpStatus, OnError, classify_fn,
};
pub use client::{AdaptiveClient, AdaptiveClientLayer};
pub use error::ClientError;
pub use future::{AdaptiveFuture, ClientFuture};
pub use layer::AdaptiveLayer;
pub use response::RejectStatus;
pub use service::AdaptiveService;
