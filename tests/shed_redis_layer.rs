//! The fleet-usage shedder through a real `redis-server` behind the tower
//! `ShedLayer` (`ShedLayer::new_async`): 503 with `Retry-After` when the fleet is
//! full, admission when it is not, slots held until the response body ends, and the
//! failure policy with Redis down (open by default, closed when chosen, shadow mode
//! admitting).
#![cfg(all(feature = "redis", feature = "http", feature = "shed"))]

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::redis::{RedisServer, require_redis};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tower::{Layer, Service, ServiceExt, service_fn};

use tollgate::http::shed::ShedLayer;
use tollgate::observe::{DenyReason, Event, EventKind, Events};
use tollgate::shed::{Classes, FleetShedder, Mode, ModeSwitch, OnFailure, RedisUsage};
use tollgate::store::RedisStore;

/// How long any one request may take before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(10);

async fn fleet(url: &str, capacity: u64, reserved: f64) -> FleetShedder<RedisUsage> {
    let store = tokio::time::timeout(Duration::from_secs(5), RedisStore::connect(url, "shed"))
        .await
        .expect("connecting hung")
        .expect("connecting failed");
    let usage = RedisUsage::new(&store, "layer", Duration::from_secs(30)).unwrap();
    FleetShedder::with_counter(Classes::google(), capacity, reserved, usage).unwrap()
}

/// Answers 200 "ok", counting its calls.
fn counted(
    calls: Arc<Mutex<u32>>,
) -> impl Service<
    Request<()>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send,
> + Clone {
    service_fn(move |_: Request<()>| {
        *calls.lock().unwrap() += 1;
        async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("ok")))) }
    })
}

fn labelled(class: &str) -> Request<()> {
    Request::get("/")
        .header("x-criticality", class)
        .body(())
        .unwrap()
}

/// One request through `service`, within the deadline.
async fn send<S>(service: &mut S, class: &str) -> S::Response
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    tokio::time::timeout(DEADLINE, async {
        service.ready().await.unwrap().call(labelled(class)).await
    })
    .await
    .expect("a request through the layer hung")
    .unwrap()
}

async fn body_of<B: http_body::Body>(response: Response<B>) -> String
where
    B::Error: std::fmt::Debug,
{
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Polls the fleet's count until it is `want`, for at most `within`.
async fn wait_in_use(usage: &RedisUsage, want: u64, within: Duration) {
    let started = Instant::now();
    loop {
        let now = usage.in_use().await.unwrap();
        if now == want {
            return;
        }
        assert!(started.elapsed() < within, "{now} in use, not {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The events of `events`, as (class, kind, detail).
type Seen = Arc<Mutex<Vec<(String, EventKind, Option<&'static str>)>>>;

fn record(events: &Events) -> (Seen, tollgate::observe::Subscription) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let subscription = events.subscribe(move |event: &Event<'_>| {
        sink.lock().unwrap().push((
            event.key.unwrap_or_default().to_owned(),
            event.kind,
            event.detail,
        ));
    });
    (seen, subscription)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_fleet_answers_503_with_retry_after_and_admits_when_not() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    // Capacity 2, one slot reserved for critical work; two layers on separate
    // connections, as two processes of the fleet.
    let a = fleet(&server.url(), 2, 0.5).await;
    let b = fleet(&server.url(), 2, 0.5).await;
    let events = Events::new("fleet");
    let (seen, _subscription) = record(&events);
    let b = b.with_events(events);
    let usage = a.clone();
    let calls = Arc::new(Mutex::new(0));
    let mut first = ShedLayer::new_async(a).layer(counted(Arc::clone(&calls)));
    let mut second = ShedLayer::new_async(b).layer(counted(Arc::clone(&calls)));

    // Admitted: the slot is held until the body is read.
    let held_low = send(&mut first, "sheddable").await;
    assert_eq!(held_low.status(), StatusCode::OK);
    assert_eq!(usage.counter().in_use().await.unwrap(), 1);

    // The shared part is full: the other process sheds non-critical work.
    let shed = send(&mut second, "sheddable").await;
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["retry-after"], "1", "the layer's fallback");
    assert_eq!(shed.headers()["content-type"], "application/json");
    let body = body_of(shed).await;
    assert!(body.contains(r#""reason":"reserved""#), "{body}");
    assert_eq!(*calls.lock().unwrap(), 1, "the shed request was served");

    // Critical work takes the reserve, then the fleet is full for it too.
    let held_critical = send(&mut second, "critical").await;
    assert_eq!(held_critical.status(), StatusCode::OK);
    let full = send(&mut first, "critical_plus").await;
    assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(full.headers()["retry-after"], "1");
    assert!(body_of(full).await.contains(r#""reason":"full""#));
    assert_eq!(usage.counter().in_use().await.unwrap(), 2);

    // Bodies read: the slots come back, and the fleet admits again.
    assert_eq!(body_of(held_low).await, "ok");
    assert_eq!(body_of(held_critical).await, "ok");
    wait_in_use(usage.counter(), 0, Duration::from_secs(2)).await;
    let admitted = send(&mut second, "sheddable").await;
    assert_eq!(admitted.status(), StatusCode::OK);
    drop(admitted);
    wait_in_use(usage.counter(), 0, Duration::from_secs(2)).await;
    assert_eq!(*calls.lock().unwrap(), 3);

    let shed = EventKind::Denied {
        reason: DenyReason::Shed,
        retry_after: None,
    };
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("sheddable".to_owned(), shed, Some("reserved")),
            ("critical".to_owned(), EventKind::Admitted, None),
            ("sheddable".to_owned(), EventKind::Admitted, None),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_the_layer_admits_by_default_and_sheds_when_failing_closed() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let open = fleet(&server.url(), 10, 0.2).await;
    assert_eq!(open.failure(), OnFailure::Open, "the default");
    let open_events = Events::new("open");
    let (open_seen, _open_subscription) = record(&open_events);
    let open = open.with_events(open_events);
    let closed_events = Events::new("closed");
    let (closed_seen, _closed_subscription) = record(&closed_events);
    let closed = fleet(&server.url(), 10, 0.2)
        .await
        .on_failure(OnFailure::Closed)
        .with_events(closed_events);
    let switch = ModeSwitch::new(Mode::Shadow);
    let shadow = fleet(&server.url(), 10, 0.2)
        .await
        .on_failure(OnFailure::Closed)
        .with_mode(switch.clone());

    let calls = Arc::new(Mutex::new(0));
    let mut open = ShedLayer::new_async(open).layer(counted(Arc::clone(&calls)));
    let mut closed = ShedLayer::new_async(closed)
        .fallback_retry_after(Some(Duration::from_secs(5)))
        .unwrap()
        .layer(counted(Arc::clone(&calls)));
    let mut shadow = ShedLayer::new_async(shadow).layer(counted(Arc::clone(&calls)));

    // Up: all three admit.
    for service in [&mut open, &mut closed, &mut shadow] {
        let response = send(service, "sheddable").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(body_of(response).await, "ok");
    }
    assert_eq!(*calls.lock().unwrap(), 3);

    server.kill();

    // Fail open: served, holding no slot.
    let response = send(&mut open, "sheddable").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_of(response).await, "ok");
    assert_eq!(*calls.lock().unwrap(), 4);

    // Fail closed: 503, reason `unavailable`, the layer's Retry-After.
    let response = send(&mut closed, "critical_plus").await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "5");
    let body = body_of(response).await;
    assert!(body.contains(r#""reason":"unavailable""#), "{body}");
    assert_eq!(
        *calls.lock().unwrap(),
        4,
        "a request failed closed was served"
    );

    // Failing closed in shadow mode only reports; with shedding off it admits.
    let response = send(&mut shadow, "sheddable").await;
    assert_eq!(response.status(), StatusCode::OK);
    switch.set(Mode::Off);
    let response = send(&mut shadow, "sheddable").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(*calls.lock().unwrap(), 6);

    let unavailable = Some("unavailable");
    assert_eq!(
        open_seen.lock().unwrap().last().cloned(),
        Some(("sheddable".to_owned(), EventKind::Admitted, unavailable))
    );
    assert_eq!(
        closed_seen.lock().unwrap().last().cloned(),
        Some((
            "critical_plus".to_owned(),
            EventKind::Denied {
                reason: DenyReason::Shed,
                retry_after: None
            },
            unavailable
        ))
    );
}
