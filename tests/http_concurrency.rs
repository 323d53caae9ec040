//! Per-key concurrency behind `RateLimitLayer::keyed`, over real HTTP on loopback: an
//! axum server on 127.0.0.1:0 and a hyper client. A permit is held from the check to
//! the end of the response body (or its drop), for a `KeyedLimiter` of `Concurrency`
//! and for a store's concurrency rule, in memory and in Redis.
//!
//! Every slow handler waits on a signal the test gives, never on the clock; every
//! network step is bounded, so that a hang fails the test instead of stalling it.

#![cfg(feature = "axum")]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use common::http::serve;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Semaphore as Signal, watch};
use tower::{Layer, Service, ServiceExt};

use tollgate::algorithm::{Concurrency, Leased};
use tollgate::http::server::RateLimitLayer;
use tollgate::http::{DescribeLimits, HeaderKey};
use tollgate::store::{MemoryStore, SharedLimiter, StoreError};
use tollgate::{KeyedConfig, KeyedLimiter, PermitSource};

/// Requests one user may have in flight.
const N: usize = 2;

const HOUR: Duration = Duration::from_secs(3_600);

/// Bounds every network step and every wait for the server.
const GUARD: Duration = Duration::from_secs(20);

async fn guarded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {GUARD:?}"))
}

/// What the handlers and the test tell each other.
#[derive(Clone)]
struct Signals {
    /// A permit per slow request that reached its handler.
    entered: Arc<Signal>,
    /// Set to `true` to let every slow handler answer.
    open: watch::Receiver<bool>,
    /// A permit per streamed body the server dropped.
    dropped: Arc<Signal>,
}

/// Adds a permit to `dropped` when the body holding it is dropped.
struct OnDrop(Arc<Signal>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.add_permits(1);
    }
}

/// `/fast` answers at once; `/slow` once the test opens the gate; `/stream` sends its
/// head and one chunk, then nothing more, and reports its body's drop.
fn routes(signals: &Signals) -> Router {
    let slow = {
        let signals = signals.clone();
        move || {
            let mut signals = signals.clone();
            async move {
                signals.entered.add_permits(1);
                signals.open.wait_for(|open| *open).await.unwrap();
                "slow"
            }
        }
    };
    let stream = {
        let dropped = Arc::clone(&signals.dropped);
        move || {
            let guard = OnDrop(Arc::clone(&dropped));
            async move {
                let first = futures::stream::once(async { Ok::<_, Infallible>(Bytes::from("a")) });
                let rest = Guarded {
                    stream: futures::stream::pending(),
                    _guard: guard,
                };
                Body::from_stream(futures::StreamExt::chain(first, rest))
            }
        }
    };
    Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route("/slow", get(slow))
        .route("/stream", get(stream))
}

/// A stream that keeps a guard for as long as it lives.
struct Guarded<S> {
    stream: S,
    _guard: OnDrop,
}

impl<S: futures::Stream + Unpin> futures::Stream for Guarded<S> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        std::pin::Pin::new(&mut self.stream).poll_next(cx)
    }
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn request(addr: SocketAddr, path: &str, user: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .header("x-user", user)
        .body(Empty::new())
        .unwrap()
}

/// The status of `GET path` as `user`, its body read to the end.
async fn status_of(addr: SocketAddr, path: &str, user: &str) -> StatusCode {
    let response = guarded("GET", client().request(request(addr, path, user)))
        .await
        .unwrap();
    let status = response.status();
    guarded("body", response.into_body().collect())
        .await
        .unwrap();
    status
}

/// A server of [`routes`] behind `RateLimitLayer::keyed` over `limiter`, keyed by
/// `x-user`, and the signals of its handlers, with the gate's sender.
async fn server<P>(limiter: P) -> (SocketAddr, Signals, watch::Sender<bool>)
where
    P: PermitSource<str> + DescribeLimits,
    P::Error: Into<StoreError>,
{
    let (open, gate) = watch::channel(false);
    let signals = Signals {
        entered: Arc::new(Signal::new(0)),
        open: gate,
        dropped: Arc::new(Signal::new(0)),
    };
    let layer = RateLimitLayer::keyed(HeaderKey::from_static("x-user"), limiter);
    let addr = serve(routes(&signals).layer(layer)).await;
    (addr, signals, open)
}

/// Waits until `count` permits were added to `signal`, and takes them.
async fn wait_for(what: &str, signal: &Signal, count: usize) {
    let permits = guarded(what, signal.acquire_many(count as u32))
        .await
        .unwrap();
    permits.forget();
}

/// When a release reaches the limit: at once in process; for Redis, when the store's
/// refund, a task of its own, has run.
#[derive(Clone, Copy, PartialEq)]
enum Arrives {
    AtOnce,
    InTheBackground,
}

/// Checks that `user` is served (`/fast`), at once or once the release arrives.
async fn served(addr: SocketAddr, user: &str, arrives: Arrives) {
    match arrives {
        Arrives::AtOnce => assert_eq!(status_of(addr, "/fast", user).await, StatusCode::OK),
        Arrives::InTheBackground => {
            guarded("served again", async {
                while status_of(addr, "/fast", user).await != StatusCode::OK {
                    tokio::task::yield_now().await;
                }
            })
            .await
        }
    }
}

/// N slow requests of one user in flight: the next is 429 and other users are still
/// served; once the N are answered and read, the user is served again, as often as
/// requests end.
async fn n_in_flight_then_served_again<P>(limiter: P, arrives: Arrives)
where
    P: PermitSource<str> + DescribeLimits,
    P::Error: Into<StoreError>,
{
    let (addr, signals, open) = server(limiter).await;

    // Sequential requests each end before the next: more than N of them pass.
    for _ in 0..=N {
        served(addr, "bob", arrives).await;
    }

    let slow: Vec<_> = (0..N)
        .map(|_| tokio::spawn(status_of(addr, "/slow", "alice")))
        .collect();
    wait_for("N slow requests", &signals.entered, N).await;
    let refused = guarded("GET", client().request(request(addr, "/fast", "alice")))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        refused.headers().get("retry-after"),
        None,
        "a release, not a time, frees it"
    );
    served(addr, "bob", arrives).await;

    open.send(true).unwrap();
    for request in slow {
        assert_eq!(guarded("slow", request).await.unwrap(), StatusCode::OK);
    }
    for _ in 0..=N {
        served(addr, "alice", arrives).await;
    }
}

/// N responses whose bodies the client drops after the first chunk: the server drops
/// them too, and the user is served again.
async fn a_dropped_body_releases<P>(limiter: P, arrives: Arrives)
where
    P: PermitSource<str> + DescribeLimits,
    P::Error: Into<StoreError>,
{
    let (addr, signals, _open) = server(limiter).await;
    let mut bodies = Vec::new();
    for _ in 0..N {
        let response = guarded("GET", client().request(request(addr, "/stream", "carol")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let first = guarded("first chunk", body.frame()).await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "a");
        bodies.push(body);
    }
    assert_eq!(
        status_of(addr, "/fast", "carol").await,
        StatusCode::TOO_MANY_REQUESTS,
        "the streams hold both permits"
    );
    drop(bodies);
    wait_for("the server dropping the bodies", &signals.dropped, N).await;
    for _ in 0..=N {
        served(addr, "carol", arrives).await;
    }
}

fn keyed_limiter() -> KeyedLimiter<String, Concurrency> {
    KeyedLimiter::new(Concurrency::new(N as u64).unwrap(), KeyedConfig::new(100)).unwrap()
}

fn memory_limiter() -> SharedLimiter<MemoryStore> {
    let store = MemoryStore::new(KeyedConfig::new(100), "users").unwrap();
    let rule = Leased::new(Concurrency::new(N as u64).unwrap(), HOUR).unwrap();
    SharedLimiter::new(store, rule).unwrap()
}

// The bug these guard: per-key concurrency behind the layer took a permit per request
// and never gave it back, so after N requests a user was refused for good.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_concurrency_limiter_admits_n_at_once_per_user_and_releases_at_the_body_end() {
    n_in_flight_then_served_again(keyed_limiter(), Arrives::AtOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_concurrency_limiter_releases_when_the_client_drops_the_body() {
    a_dropped_body_releases(keyed_limiter(), Arrives::AtOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_store_concurrency_rule_admits_n_at_once_per_user_and_releases_at_the_body_end() {
    n_in_flight_then_served_again(memory_limiter(), Arrives::AtOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_store_concurrency_rule_releases_when_the_client_drops_the_body() {
    a_dropped_body_releases(memory_limiter(), Arrives::AtOnce).await;
}

/// A service around `handler`, behind the layer over a memory store's concurrency rule
/// of one permit, keyed by `x-user`.
fn one_at_a_time<F, Fut>(
    handler: F,
) -> impl Service<
    Request<()>,
    Response = Response<tollgate::http::server::RateLimitBody<Body>>,
    Error = &'static str,
    Future: Send,
> + Clone
where
    F: Fn(Request<()>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Response<Body>, &'static str>> + Send + 'static,
{
    let store = MemoryStore::new(KeyedConfig::new(10), "one").unwrap();
    let rule = Leased::new(Concurrency::new(1).unwrap(), HOUR).unwrap();
    let limiter = SharedLimiter::new(store, rule).unwrap();
    RateLimitLayer::keyed(HeaderKey::from_static("x-user"), limiter)
        .layer(tower::service_fn(handler))
}

fn as_dave() -> Request<()> {
    Request::get("/").header("x-user", "dave").body(()).unwrap()
}

/// The bug it guards: a permit taken for a request whose handler failed was never
/// given back.
#[tokio::test]
async fn an_inner_service_error_releases() {
    let mut service = one_at_a_time(|_| async { Err("broken") });
    for _ in 0..3 {
        let result = service.ready().await.unwrap().call(as_dave()).await;
        assert_eq!(result.unwrap_err(), "broken", "admitted every time");
    }
}

/// The bug it guards: a request dropped before its response (a client gone) kept
/// its permit for good.
#[tokio::test]
async fn a_response_future_dropped_before_the_response_releases() {
    let mut service = one_at_a_time(|_| std::future::pending());
    let first = service.ready().await.unwrap().call(as_dave());
    let second = service.ready().await.unwrap().call(as_dave());
    let refused = futures::FutureExt::now_or_never(second).unwrap().unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(first);
    let mut third = std::pin::pin!(service.ready().await.unwrap().call(as_dave()));
    assert!(
        futures::poll!(third.as_mut()).is_pending(),
        "admitted, and waiting on the handler"
    );
}

/// The bug it guards: a grant over a concurrency rule held nothing. With a rate
/// beside it, dropping the grant gives back the concurrency permit and not the rate's.
#[test]
fn a_grant_gives_back_the_concurrency_rule_and_not_the_rate_beside_it() {
    use tollgate::algorithm::FixedWindow;

    let store = MemoryStore::new(KeyedConfig::new(10), "both").unwrap();
    let limiter = SharedLimiter::all_of(
        store,
        [
            (
                "hourly",
                FixedWindow::from_first_hit(3, HOUR).unwrap().into(),
            ),
            (
                "in_flight",
                Leased::new(Concurrency::new(1).unwrap(), HOUR)
                    .unwrap()
                    .into(),
            ),
        ],
    )
    .unwrap();
    let take = || match limiter.decide_now("erin", 1) {
        Some(Ok(Ok(grant))) => Some(grant.into_permit()),
        Some(Ok(Err(_))) => None,
        other => panic!("{other:?}"),
    };
    for _ in 0..3 {
        let held = take().expect("admitted");
        assert!(held.holds());
        assert!(take().is_none(), "one in flight");
    }
    assert!(take().is_none(), "the hour's 3 are spent, released or not");
}

/// A grant over a rate holds nothing: no permit to give back, and no allocation.
#[test]
fn a_grant_over_a_rate_holds_nothing() {
    use tollgate::Quota;
    use tollgate::algorithm::Gcra;

    let keyed: KeyedLimiter<String, Gcra> = KeyedLimiter::new(
        Gcra::new(Quota::per_second(10).unwrap()),
        KeyedConfig::new(10),
    )
    .unwrap();
    let Some(Ok(Ok(grant))) = keyed.decide_now("frank", 1) else {
        panic!()
    };
    assert!(!grant.into_permit().holds());
    let store = MemoryStore::new(KeyedConfig::new(10), "rate").unwrap();
    let shared = SharedLimiter::new(store, Gcra::new(Quota::per_second(10).unwrap())).unwrap();
    let Some(Ok(Ok(grant))) = shared.decide_now("frank", 1) else {
        panic!()
    };
    assert!(!grant.into_permit().holds());
}

/// A permit waited for holds the key's permits as one decided at once does.
#[tokio::test]
async fn a_permit_waited_for_is_given_back_when_dropped() {
    let limiter = keyed_limiter();
    let held: Vec<_> = (0..N)
        .map(|_| match limiter.decide_now("gina", 1) {
            Some(Ok(Ok(grant))) => grant.into_permit(),
            other => panic!("{other:?}"),
        })
        .collect();
    let mut waiting = std::pin::pin!(limiter.wait("gina", 1, None));
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    drop(held);
    let permit = guarded("wait", waiting).await.unwrap();
    assert!(permit.holds());
    let shared = memory_limiter();
    let permit = guarded("wait", shared.wait("gina", 1, None)).await.unwrap();
    assert!(permit.holds());
}

/// A store whose answers arrive when the test lets them, as a remote store's over a
/// slow network: the memory store decides at once, the answer waits on the gate.
struct Slow {
    store: MemoryStore,
    gate: watch::Receiver<bool>,
}

#[async_trait::async_trait]
impl tollgate::store::Store for Slow {
    async fn execute(
        &self,
        request: &tollgate::store::Request<'_>,
    ) -> Result<tollgate::store::Reply, StoreError> {
        let reply = self.store.execute(request).await;
        self.gate.clone().wait_for(|open| *open).await.unwrap();
        reply
    }
}

/// The bug it guards: a request dropped while its check was on the wire left the
/// permit the store took in use until the lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_dropped_before_the_store_answers_gives_back_what_it_took() {
    let (open, gate) = watch::channel(false);
    let store = MemoryStore::new(KeyedConfig::new(10), "slow").unwrap();
    let rule = Leased::new(Concurrency::new(1).unwrap(), HOUR).unwrap();
    let limiter = SharedLimiter::new(Slow { store, gate }, rule).unwrap();
    let mut service = RateLimitLayer::keyed(HeaderKey::from_static("x-user"), limiter.clone())
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }));
    let mut dropped = Box::pin(service.ready().await.unwrap().call(as_dave()));
    assert!(futures::poll!(dropped.as_mut()).is_pending(), "on the wire");
    drop(dropped);
    open.send(true).unwrap();
    let admitted = guarded("admitted again", async {
        loop {
            match limiter.decide("dave", 1).await.unwrap() {
                Ok(grant) => break grant,
                Err(_) => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    assert!(admitted.into_permit().holds());
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use common::redis::{RedisServer, require_redis};
    use tollgate::store::RedisStore;

    async fn limiter(server: &RedisServer) -> SharedLimiter<RedisStore> {
        let store = RedisStore::connect(&server.url(), "users").await.unwrap();
        let rule = Leased::new(Concurrency::new(N as u64).unwrap(), HOUR).unwrap();
        SharedLimiter::new(store, rule).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_concurrency_rule_admits_n_at_once_per_user_and_releases_at_the_body_end() {
        let Some(()) = require_redis() else { return };
        let redis = RedisServer::start();
        n_in_flight_then_served_again(limiter(&redis).await, Arrives::InTheBackground).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_concurrency_rule_releases_when_the_client_drops_the_body() {
        let Some(()) = require_redis() else { return };
        let redis = RedisServer::start();
        a_dropped_body_releases(limiter(&redis).await, Arrives::InTheBackground).await;
    }
}
