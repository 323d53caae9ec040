//! The client layer against a real HTTP server on 127.0.0.1: hyper-util's client in a
//! `ThrottleLayer`, on a `ManualClock` that the tests move by hand. A call's progress is
//! read with `futures::poll!`: pending while it waits, ready once the clock passes.
#![cfg(feature = "http")]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response as AxumResponse};
use futures::poll;
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, ServiceExt};

use tollgate::algorithm::Gcra;
use tollgate::http::client::{Cost, Throttle, ThrottleError, ThrottleLayer};
use tollgate::store::{MemoryStore, SharedLimiter};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{ConfigError, ForKey, KeyedConfig, Limiter, PermitSource, Quota};

type HttpClient = Client<HttpConnector, Empty<Bytes>>;
type Answer = (StatusCode, Vec<(&'static str, String)>);
type Outcome = Result<http::Response<Incoming>, ThrottleError<hyper_util::client::legacy::Error>>;
type Call = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// A server that answers the `i`-th request (from 0) as its script says, and records
/// the path of every request it received, in order.
struct TestServer {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    async fn start(script: impl Fn(usize) -> Answer + Send + Sync + 'static) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let recorded = Arc::clone(&hits);
        let app = Router::new().fallback(move |uri: Uri| {
            let (hits, script) = (Arc::clone(&recorded), Arc::clone(&script));
            async move {
                let i = {
                    let mut hits = hits.lock().unwrap();
                    hits.push(uri.path().to_owned());
                    hits.len() - 1
                };
                let (status, headers) = script(i);
                let mut response: AxumResponse = (status, "").into_response();
                for (name, value) in headers {
                    response
                        .headers_mut()
                        .insert(name, HeaderValue::from_str(&value).unwrap());
                }
                response
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        TestServer { addr, hits }
    }

    /// 429 with `headers` on the first request, 200 after.
    async fn refusing_first(headers: Vec<(&'static str, String)>) -> TestServer {
        TestServer::start(move |i| match i {
            0 => (StatusCode::TOO_MANY_REQUESTS, headers.clone()),
            _ => (StatusCode::OK, Vec::new()),
        })
        .await
    }

    async fn always_ok() -> TestServer {
        TestServer::start(|_| (StatusCode::OK, Vec::new())).await
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }

    fn get(&self, path: &str) -> http::Request<Empty<Bytes>> {
        http::Request::get(format!("http://{}{path}", self.addr))
            .body(Empty::new())
            .unwrap()
    }
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A limiter of `per_second` with a burst of `burst`, on `clock`.
fn limiter(clock: &ManualClock, per_second: u64, burst: u64) -> Limiter<Gcra, ManualClock> {
    let quota = Quota::per_second(per_second).unwrap().burst(burst).unwrap();
    Limiter::with_clock(Gcra::new(quota), clock.clone())
}

fn call<S>(service: &S, server: &TestServer, path: &str) -> Call
where
    S: tower::Service<
            http::Request<Empty<Bytes>>,
            Response = http::Response<Incoming>,
            Error = ThrottleError<hyper_util::client::legacy::Error>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    Box::pin(service.clone().oneshot(server.get(path)))
}

fn secs(s: u64) -> Nanos {
    Nanos::new(s * 1_000_000_000)
}

const MS: Duration = Duration::from_millis(1);

#[tokio::test]
async fn retry_after_pauses_the_next_request_until_the_clock_passes_it() {
    let server = TestServer::refusing_first(vec![("retry-after", "2".into())]).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let service = layer.layer(client());

    let refused = call(&service, &server, "/1").await.unwrap();
    assert_eq!(refused.status(), 429, "the 429 goes back to its caller");
    assert_eq!(layer.paused_until(), Some(secs(2)));

    let mut next = call(&service, &server, "/2");
    assert!(poll!(next.as_mut()).is_pending());
    assert_eq!(clock.next_alarm(), Some(secs(2)), "sleeping out the pause");
    clock.advance(Duration::from_secs(2) - MS);
    assert!(poll!(next.as_mut()).is_pending());
    assert_eq!(server.hits(), ["/1"], "nothing sent during the pause");

    clock.advance(MS);
    assert_eq!(next.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/1", "/2"]);
    assert_eq!(layer.paused_until(), None);
}

#[tokio::test]
async fn rate_limit_field_with_no_remaining_pauses_for_its_reset() {
    let header = r#""default";r=0;t=3"#.to_string();
    let server = TestServer::refusing_first(vec![("ratelimit", header)]).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    assert_eq!(layer.paused_until(), Some(secs(3)));
    let mut next = call(&service, &server, "/2");
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(3) - MS);
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(MS);
    assert_eq!(next.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/1", "/2"]);
}

#[tokio::test]
async fn exhausted_rate_limit_on_a_success_pauses_too() {
    let server = TestServer::start(|i| match i {
        0 => (
            StatusCode::OK,
            vec![("ratelimit", r#""hour";r=0;t=5, "day";r=90"#.into())],
        ),
        _ => (StatusCode::OK, Vec::new()),
    })
    .await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 200);
    assert_eq!(layer.paused_until(), Some(secs(5)));
    let mut next = call(&service, &server, "/2");
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(5));
    assert_eq!(next.await.unwrap().status(), 200);
}

#[tokio::test]
async fn http_date_retry_after_is_counted_from_the_clock() {
    // The manual clock reads Unix time: 1_700_000_000 s is Tue, 14 Nov 2023 22:13:20 GMT.
    let date = "Tue, 14 Nov 2023 22:13:23 GMT".to_string();
    let server = TestServer::refusing_first(vec![("retry-after", date)]).await;
    let clock = ManualClock::starting_at(secs(1_700_000_000));
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    assert_eq!(layer.paused_until(), Some(secs(1_700_000_003)));
    let mut next = call(&service, &server, "/2");
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(3) - MS);
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(MS);
    assert_eq!(next.await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_bare_429_pauses_for_the_default_backoff() {
    let server = TestServer::refusing_first(Vec::new()).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone())
        .default_backoff(Duration::from_millis(1500));
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    assert_eq!(layer.paused_until(), Some(Nanos::new(1_500_000_000)));
}

#[tokio::test]
async fn a_huge_retry_after_is_capped_by_max_pause() {
    let server = TestServer::refusing_first(vec![("retry-after", "999999999999".into())]).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone())
        .max_pause(Duration::from_secs(5))
        .unwrap();
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    assert_eq!(layer.paused_until(), Some(secs(5)));
}

// `max_pause(Duration::MAX)` was accepted: one `Retry-After` could pause every call
// for 584 years.
#[test]
fn a_max_pause_beyond_an_hour_is_a_typed_error() {
    let clock = ManualClock::new();
    let layer = || ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    for too_long in [Duration::from_secs(3601), Duration::MAX] {
        let err = layer().max_pause(too_long).unwrap_err();
        assert!(
            matches!(err, ConfigError::TooLong { parameter: "max_pause", max, .. } if max == Duration::from_secs(3600)),
            "{err:?}"
        );
    }
    assert!(layer().max_pause(Duration::from_secs(3600)).is_ok());
}

#[tokio::test]
async fn garbage_headers_are_ignored_and_a_429_falls_back_to_the_default() {
    let server = TestServer::start(|i| match i {
        0 => (
            StatusCode::OK,
            vec![
                ("retry-after", "soon".into()),
                ("ratelimit", r#""a";r=0;t=-4"#.into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset", "tomorrow".into()),
            ],
        ),
        _ => (
            StatusCode::TOO_MANY_REQUESTS,
            vec![("retry-after", "Sun, 31 Feb 2023 00:00:00 GMT".into())],
        ),
    })
    .await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 200);
    assert_eq!(
        layer.paused_until(),
        None,
        "no valid signal on a 200: no pause"
    );
    assert_eq!(call(&service, &server, "/2").await.unwrap().status(), 429);
    assert_eq!(
        layer.paused_until(),
        Some(secs(1)),
        "an invalid date: the default"
    );
}

#[tokio::test]
async fn concurrent_callers_of_every_clone_back_off_too() {
    let server = TestServer::refusing_first(vec![("retry-after", "2".into())]).await;
    let clock = ManualClock::new();
    // One permit a second: `/d` queues on the limiter before the 429 comes back.
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone());
    let service = layer.layer(client());
    let other_clone = layer.clone().layer(client());

    let mut first = call(&service, &server, "/a");
    assert!(
        poll!(first.as_mut()).is_pending(),
        "permit taken, request sent"
    );
    let mut queued = call(&other_clone, &server, "/d");
    assert!(poll!(queued.as_mut()).is_pending());
    assert_eq!(layer.permits().waiters(), 1);
    assert_eq!(first.await.unwrap().status(), 429);

    let mut b = call(&service.clone(), &server, "/b");
    let mut c = call(&other_clone, &server, "/c");
    assert!(poll!(b.as_mut()).is_pending());
    assert!(poll!(c.as_mut()).is_pending());

    // At 1 s the limiter grants `/d` its permit, in the pause: it gives it back and
    // sleeps out the pause with the others.
    clock.advance(Duration::from_secs(1));
    assert!(poll!(queued.as_mut()).is_pending());
    assert!(poll!(b.as_mut()).is_pending());
    assert!(poll!(c.as_mut()).is_pending());
    assert_eq!(server.hits(), ["/a"]);
    assert_eq!(layer.permits().waiters(), 0);

    clock.advance(Duration::from_secs(1));
    assert_eq!(queued.await.unwrap().status(), 200);
    // The pause is over, but the limiter still paces the rest: one per second.
    assert!(poll!(b.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert_eq!(b.await.unwrap().status(), 200);
    assert!(poll!(c.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1));
    assert_eq!(c.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/a", "/d", "/b", "/c"]);
}

#[tokio::test]
async fn waiting_for_permits_is_first_come_first_served() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/0").await.unwrap().status(), 200);
    let mut calls: Vec<Call> = ["/1", "/2", "/3"]
        .into_iter()
        .map(|path| call(&service, &server, path))
        .collect();
    for c in &mut calls {
        assert!(poll!(c.as_mut()).is_pending());
    }
    for _ in 0..3 {
        clock.advance(Duration::from_secs(1));
        // Later arrivals stay queued even when polled first.
        for c in calls[1..].iter_mut().rev() {
            assert!(poll!(c.as_mut()).is_pending());
        }
        let head = calls.remove(0);
        assert_eq!(head.await.unwrap().status(), 200);
    }
    assert_eq!(server.hits(), ["/0", "/1", "/2", "/3"]);
}

#[tokio::test]
async fn dropping_a_call_queued_for_a_permit_strands_no_one() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/a").await.unwrap().status(), 200);
    let mut b = call(&service, &server, "/b");
    let mut c = call(&service, &server, "/c");
    assert!(poll!(b.as_mut()).is_pending());
    assert!(poll!(c.as_mut()).is_pending());
    assert_eq!(layer.permits().waiters(), 2);

    drop(b); // the head of the queue, holding the booked permit
    assert_eq!(layer.permits().waiters(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(c.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/a", "/c"], "the dropped call sent nothing");
    assert_eq!(layer.permits().waiters(), 0);
    assert_eq!(clock.pending_alarms(), 0);
}

#[tokio::test]
async fn dropping_a_call_waiting_out_a_pause_strands_no_one() {
    let server = TestServer::refusing_first(vec![("retry-after", "2".into())]).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 2), clock.clone());
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    let mut dropped = call(&service, &server, "/dropped");
    let mut kept = call(&service, &server, "/kept");
    assert!(poll!(dropped.as_mut()).is_pending());
    assert!(poll!(kept.as_mut()).is_pending());
    drop(dropped);

    clock.advance(Duration::from_secs(2));
    assert_eq!(kept.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/1", "/kept"]);
    // Two permits at 2 s: the kept call's and this one's; the dropped call took none.
    let mut now = call(&service, &server, "/now");
    assert!(
        poll!(now.as_mut()).is_pending(),
        "sent, awaiting the answer"
    );
    assert_eq!(layer.permits().waiters(), 0);
    assert_eq!(now.await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_permit_granted_during_a_pause_is_given_back() {
    let server = TestServer::refusing_first(Vec::new()).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone())
        .default_backoff(Duration::from_millis(1500));
    let service = layer.layer(client());

    let mut first = call(&service, &server, "/a");
    assert!(poll!(first.as_mut()).is_pending());
    let mut queued = call(&service, &server, "/d");
    assert!(
        poll!(queued.as_mut()).is_pending(),
        "booked the permit due at 1 s"
    );
    assert_eq!(first.await.unwrap().status(), 429);

    // Granted at 1 s, inside the pause: it gives the permit back and sleeps; then it
    // is dropped while it sleeps.
    clock.advance(Duration::from_secs(1));
    assert!(poll!(queued.as_mut()).is_pending());
    drop(queued);

    // Were the permit kept, the next one would come at 2 s; it is there at 1.5 s.
    clock.advance(Duration::from_millis(500));
    let mut next = call(&service, &server, "/e");
    assert!(
        poll!(next.as_mut()).is_pending(),
        "sent, awaiting the answer"
    );
    assert_eq!(layer.permits().waiters(), 0);
    assert_eq!(next.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/a", "/e"]);
}

#[tokio::test]
async fn a_pause_longer_than_the_timeout_fails_at_once() {
    let server = TestServer::refusing_first(vec![("retry-after", "2".into())]).await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 100, 10), clock.clone());
    let patient = layer
        .clone()
        .timeout(Duration::from_secs(3))
        .layer(client());
    let hasty = layer
        .clone()
        .timeout(Duration::from_secs(1))
        .layer(client());

    assert_eq!(call(&hasty, &server, "/1").await.unwrap().status(), 429);
    let mut failed = call(&hasty, &server, "/hasty");
    match poll!(failed.as_mut()) {
        std::task::Poll::Ready(Err(e)) => {
            assert!(e.is_timed_out(), "{e}");
            assert_eq!(e.to_string(), "timed out waiting for permits");
        }
        other => panic!("expected an immediate timeout, got {other:?}"),
    }
    let mut waits = call(&patient, &server, "/patient");
    assert!(poll!(waits.as_mut()).is_pending());
    clock.advance(Duration::from_secs(2));
    assert_eq!(waits.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/1", "/patient"]);
}

#[tokio::test]
async fn a_permit_wait_longer_than_the_timeout_fails_at_once() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone())
        .timeout(Duration::from_millis(500));
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 200);
    let mut late = call(&service, &server, "/2");
    match poll!(late.as_mut()) {
        std::task::Poll::Ready(Err(ThrottleError::TimedOut)) => {}
        other => panic!("expected an immediate timeout, got {other:?}"),
    }
    assert_eq!(layer.permits().waiters(), 0);
    clock.advance(Duration::from_millis(500));
    let mut in_time = call(&service, &server, "/3");
    assert!(poll!(in_time.as_mut()).is_pending());
    clock.advance(Duration::from_millis(500));
    assert_eq!(in_time.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/1", "/3"]);
}

#[tokio::test]
async fn a_cost_the_limiter_can_never_grant_fails_at_once_even_in_a_pause() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 10, 2), clock.clone());
    let service = layer.clone().cost(3).layer(client());

    let e = call(&service, &server, "/3").await.unwrap_err();
    assert!(e.is_never());
    assert!(
        matches!(&e, ThrottleError::Insufficient(i) if i.requested() == 3 && i.capacity() == 2)
    );

    layer.pause_for(Duration::from_secs(60));
    let default_cost = layer.layer(client());
    let mut batch = server.get("/batch");
    batch.extensions_mut().insert(Cost(5));
    let e = default_cost.oneshot(batch).await.unwrap_err();
    assert!(e.is_never(), "{e}");
    assert!(server.hits().is_empty());
    assert_eq!(clock.pending_alarms(), 0);
}

#[tokio::test]
async fn the_inner_services_error_is_passed_through_with_its_source() {
    // Nothing listens on the port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let clock = ManualClock::new();
    let service = ThrottleLayer::with_clock(limiter(&clock, 10, 1), clock.clone()).layer(client());
    let request = http::Request::get(format!("http://127.0.0.1:{port}/"))
        .body(Empty::new())
        .unwrap();
    let e = service.oneshot(request).await.unwrap_err();
    assert!(matches!(e, ThrottleError::Inner(_)));
    assert!(e.to_string().starts_with("inner service: "), "{e}");
    assert!(std::error::Error::source(&e).is_some());
}

#[tokio::test]
async fn a_closed_limiter_fails_calls() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::new();
    let layer = ThrottleLayer::with_clock(limiter(&clock, 1, 1), clock.clone());
    let service = layer.layer(client());
    layer.permits().close();
    let e = call(&service, &server, "/").await.unwrap_err();
    assert!(matches!(e, ThrottleError::Closed));
    assert!(e.is_never());
}

type StoreLayer = ThrottleLayer<
    ForKey<SharedLimiter<Arc<MemoryStore<ManualClock>>, ManualClock>, str>,
    ManualClock,
>;

fn store_layer(clock: &ManualClock, store: &Arc<MemoryStore<ManualClock>>) -> StoreLayer {
    let rule = Gcra::new(Quota::per_second(1).unwrap());
    let limiter = SharedLimiter::with_clock(Arc::clone(store), rule, clock.clone()).unwrap();
    ThrottleLayer::with_clock(limiter.for_key("api.example"), clock.clone())
}

#[tokio::test]
async fn store_permits_are_shared_across_layers() {
    let server = TestServer::always_ok().await;
    let clock = ManualClock::starting_at(secs(1_700_000_000));
    let store =
        Arc::new(MemoryStore::with_clock(KeyedConfig::new(10), "clients", clock.clone()).unwrap());
    // Two layers, as two processes sharing one store would build them.
    let one = store_layer(&clock, &store).layer(client());
    let two = store_layer(&clock, &store).layer(client());

    assert_eq!(call(&one, &server, "/one").await.unwrap().status(), 200);
    let mut waits = call(&two, &server, "/two");
    assert!(poll!(waits.as_mut()).is_pending());
    clock.advance(Duration::from_secs(1) - MS);
    assert!(poll!(waits.as_mut()).is_pending());
    clock.advance(MS);
    assert_eq!(waits.await.unwrap().status(), 200);
    assert_eq!(server.hits(), ["/one", "/two"]);
}

#[tokio::test]
async fn store_permits_wait_out_a_pause() {
    let server = TestServer::refusing_first(vec![("retry-after", "2".into())]).await;
    let clock = ManualClock::starting_at(secs(1_700_000_000));
    let store =
        Arc::new(MemoryStore::with_clock(KeyedConfig::new(10), "clients", clock.clone()).unwrap());
    let layer = store_layer(&clock, &store);
    let service = layer.layer(client());

    assert_eq!(call(&service, &server, "/1").await.unwrap().status(), 429);
    let mut next = call(&service, &server, "/2");
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(Duration::from_secs(2) - MS);
    assert!(poll!(next.as_mut()).is_pending());
    clock.advance(MS);
    assert_eq!(next.await.unwrap().status(), 200);

    let costly = layer.clone().cost(2).layer(client());
    let e = call(&costly, &server, "/3").await.unwrap_err();
    assert!(e.is_never());
    assert_eq!(server.hits(), ["/1", "/2"]);
}

#[test]
fn services_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<ThrottleLayer<Limiter<Gcra, ManualClock>, ManualClock>>();
    send_sync::<Throttle<HttpClient, Limiter<Gcra, ManualClock>>>();
    send::<
        <Throttle<HttpClient, Limiter<Gcra, ManualClock>> as tower::Service<
            http::Request<Empty<Bytes>>,
        >>::Future,
    >();
    send_sync::<ThrottleError<hyper_util::client::legacy::Error>>();
    let _ = ManualClock::new().now();
}

/// A semaphore behind an `Arc` is a permit source whose grants are guards: the layer
/// holds one for each call until its answer arrives, so it bounds the calls in
/// flight; a call that fails gives its permit back too.
#[tokio::test]
async fn a_semaphore_bounds_the_calls_in_flight() {
    let semaphore = Arc::new(tollgate::Semaphore::new(1).unwrap());
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    let held = Arc::new(tokio::sync::Mutex::new(Some(held)));
    let inner = tower::service_fn(move |_: http::Request<()>| {
        let held = Arc::clone(&held);
        async move {
            // The first call waits for the test to let it answer; later ones answer.
            let first = held.lock().await.take();
            if let Some(first) = first {
                first.await.ok();
            }
            Ok::<_, std::convert::Infallible>(http::Response::new(()))
        }
    });
    let service = ThrottleLayer::new(Arc::clone(&semaphore)).layer(inner);

    let mut first = Box::pin(service.clone().oneshot(http::Request::new(())));
    assert!(poll!(first.as_mut()).is_pending());
    assert_eq!(
        semaphore.available_permits(),
        0,
        "held while the call is in flight"
    );
    let mut second = Box::pin(service.clone().oneshot(http::Request::new(())));
    assert!(poll!(second.as_mut()).is_pending(), "waits for the permit");

    release.send(()).unwrap();
    assert_eq!(first.await.unwrap().status(), StatusCode::OK);
    assert_eq!(second.await.unwrap().status(), StatusCode::OK);
    assert_eq!(semaphore.available_permits(), 1, "every permit came back");
}
