//! The server layer over real HTTP on loopback: an axum server on 127.0.0.1:0 and a
//! hyper client. Every store runs on a `ManualClock`, so every field is exact.

#![cfg(feature = "axum")]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use bytes::Bytes;
use common::http::serve;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::algorithm::{FixedWindow, Gcra};
use tollgate::http::server::RateLimitLayer;
use tollgate::http::{ClientIp, Global, HeaderKey, KeyedLimits};
use tollgate::store::{MemoryStore, Rule, SharedLimiter, Store, StoreError};
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, PermitSource, Quota};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn store(clock: &ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), "test", clock.clone()).unwrap()
}

/// `rule` named `name` over a fresh store on `clock`.
fn limiter(
    clock: &ManualClock,
    name: &str,
    rule: impl Into<Rule>,
) -> SharedLimiter<MemoryStore<ManualClock>> {
    SharedLimiter::all_of(store(clock), [(name, rule.into())]).unwrap()
}

/// Serves `app` without recording peer addresses: a misconfigured server.
async fn serve_without_peers(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    /// Every value of field `name`, in order.
    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }

    /// The one value of field `name`, if any.
    fn one(&self, name: &str) -> Option<&str> {
        let values = self.all(name);
        assert!(values.len() <= 1, "{name}: {values:?}");
        values.first().copied()
    }

    /// The rate-limit and caching fields, in a fixed order, for exact comparison.
    fn limit_fields(&self) -> Vec<(&'static str, String)> {
        [
            "ratelimit-policy",
            "ratelimit",
            "retry-after",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "cache-control",
            "content-type",
        ]
        .into_iter()
        .filter_map(|name| {
            let values = self.all(name);
            (!values.is_empty()).then(|| (name, values.join(" | ")))
        })
        .collect()
    }
}

fn fields(expected: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    expected.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

async fn send(addr: SocketAddr, method: Method, path: &str, headers: &[(&str, &str)]) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (head, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: head.status,
        headers: head.headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    send(addr, Method::GET, path, headers).await
}

async fn get_path(addr: SocketAddr, path: &str) -> Reply {
    get_with(addr, path, &[]).await
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

#[tokio::test]
async fn over_the_limit_is_429_with_every_field_and_a_json_body() {
    let clock = ManualClock::new();
    let limiter =
        SharedLimiter::new(store(&clock), FixedWindow::new(2, secs(60)).unwrap()).unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(hello().layer(layer)).await;

    let first = get_path(addr, "/").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body, "hello");
    assert_eq!(
        first.limit_fields(),
        fields(&[
            ("ratelimit-policy", r#""default";q=2;w=60"#),
            ("ratelimit", r#""default";r=1;t=60"#),
            ("x-ratelimit-limit", "2"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset", "60"),
            ("content-type", "text/plain; charset=utf-8"),
        ])
    );

    clock.advance(Duration::from_millis(15_500));
    let second = get_path(addr, "/").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.one("ratelimit"), Some(r#""default";r=0;t=45"#));

    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        denied.limit_fields(),
        fields(&[
            ("ratelimit-policy", r#""default";q=2;w=60"#),
            ("ratelimit", r#""default";r=0;t=45"#),
            ("retry-after", "45"),
            ("x-ratelimit-limit", "2"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "45"),
            ("cache-control", "no-store"),
            ("content-type", "application/json"),
        ])
    );
    assert_eq!(
        denied.body,
        r#"{"error":"rate_limited","message":"rate limit \"default\" exceeded: retry after 45 s","retry_after":45,"policy":"default"}"#
    );
    let json: serde_json::Value = serde_json::from_str(&denied.body).unwrap();
    assert_eq!(json["retry_after"], 45);

    clock.advance(Duration::from_millis(44_500));
    let next_window = get_path(addr, "/").await;
    assert_eq!(next_window.status, StatusCode::OK);
    assert_eq!(next_window.one("ratelimit"), Some(r#""default";r=1;t=60"#));
}

#[tokio::test]
async fn admitted_responses_keep_the_inner_response_and_gain_the_fields() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock, "burst", Gcra::new(Quota::per_second(10).unwrap()));
    let app = Router::new()
        .route(
            "/made",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [("x-inner", "kept"), ("cache-control", "max-age=5")],
                    "made",
                )
            }),
        )
        .layer(RateLimitLayer::keyed(ClientIp::new(), limiter));
    let addr = serve(app).await;

    let reply = send(addr, Method::POST, "/made", &[]).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.body, "made");
    assert_eq!(reply.one("x-inner"), Some("kept"));
    assert_eq!(
        reply.limit_fields(),
        fields(&[
            ("ratelimit-policy", r#""burst";q=10;w=1"#),
            ("ratelimit", r#""burst";r=9;t=1"#),
            ("cache-control", "max-age=5"),
            ("content-type", "text/plain; charset=utf-8"),
        ])
    );
}

#[tokio::test]
async fn per_route_limits_under_a_global_limit() {
    let clock = ManualClock::new();
    let login = limiter(&clock, "login", FixedWindow::new(1, secs(60)).unwrap());
    let everyone = limiter(&clock, "global", FixedWindow::new(4, secs(60)).unwrap());
    let app = Router::new()
        .route("/login", post(|| async { "welcome" }))
        .route_layer(RateLimitLayer::keyed(ClientIp::new(), login))
        .route("/other", get(|| async { "other" }))
        .layer(RateLimitLayer::global(everyone.for_key("global")));
    let addr = serve(app).await;

    let first = send(addr, Method::POST, "/login", &[]).await;
    assert_eq!(first.status, StatusCode::OK);
    // The route's fields first (its response), then the global layer's.
    assert_eq!(
        first.all("ratelimit-policy"),
        [r#""login";q=1;w=60"#, r#""global";q=4;w=60"#]
    );
    assert_eq!(
        first.all("ratelimit"),
        [r#""login";r=0;t=60"#, r#""global";r=3;t=60"#]
    );

    let again = send(addr, Method::POST, "/login", &[]).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(again.one("retry-after"), Some("60"));
    assert_eq!(
        again.all("ratelimit"),
        [r#""login";r=0;t=60"#, r#""global";r=2;t=60"#]
    );
    assert!(again.body.contains(r#""policy":"login""#), "{}", again.body);

    // Another route has no login limit, only the global one (2 of 4 used).
    let other = get_path(addr, "/other").await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(other.all("ratelimit"), [r#""global";r=1;t=60"#]);
    assert_eq!(get_path(addr, "/other").await.status, StatusCode::OK);
    let over = get_path(addr, "/other").await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(over.all("ratelimit"), [r#""global";r=0;t=60"#]);
    // Denied globally before the route's own limit is asked.
    let login_over = send(addr, Method::POST, "/login", &[]).await;
    assert_eq!(login_over.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(login_over.all("ratelimit-policy"), [r#""global";q=4;w=60"#]);
}

#[tokio::test]
async fn clones_of_a_layer_share_one_limit() {
    let clock = ManualClock::new();
    let layer = RateLimitLayer::global(
        limiter(&clock, "shared", FixedWindow::new(3, secs(60)).unwrap()).for_key("global"),
    );
    let a = serve(hello().layer(layer.clone())).await;
    let b = serve(
        Router::new()
            .route("/", get(|| async { "b" }))
            .route("/x", get(|| async { "x" }))
            .layer(layer),
    )
    .await;

    assert_eq!(
        get_path(a, "/").await.one("ratelimit"),
        Some(r#""shared";r=2;t=60"#)
    );
    assert_eq!(
        get_path(b, "/").await.one("ratelimit"),
        Some(r#""shared";r=1;t=60"#)
    );
    assert_eq!(
        get_path(b, "/x").await.one("ratelimit"),
        Some(r#""shared";r=0;t=60"#)
    );
    assert_eq!(get_path(a, "/").await.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        get_path(b, "/x").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_header_key_counts_each_key_apart_and_a_missing_one_is_400() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock, "per-key", FixedWindow::new(1, secs(10)).unwrap());
    let addr = serve(hello().layer(RateLimitLayer::keyed(
        HeaderKey::from_static("x-api-key"),
        limiter,
    )))
    .await;

    let key = |k| [("x-api-key", k)];
    assert_eq!(get_with(addr, "/", &key("a")).await.status, StatusCode::OK);
    assert_eq!(
        get_with(addr, "/", &key("a")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get_with(addr, "/", &key("b")).await.status, StatusCode::OK);

    let missing = get_path(addr, "/").await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        missing.limit_fields(),
        fields(&[
            ("cache-control", "no-store"),
            ("content-type", "application/json")
        ])
    );
    assert_eq!(
        missing.body,
        r#"{"error":"missing_key","message":"the request has no valid x-api-key header"}"#
    );
}

#[tokio::test]
async fn x_forwarded_for_counts_only_from_a_trusted_proxy() {
    let clock = ManualClock::new();
    let rule = || FixedWindow::new(1, secs(60)).unwrap();
    // The test client connects from 127.0.0.1: untrusted here ...
    let direct = serve(hello().layer(RateLimitLayer::keyed(
        ClientIp::new(),
        limiter(&clock, "ip", rule()),
    )))
    .await;
    // ... and a trusted proxy here.
    let trusting = ClientIp::new().trust("127.0.0.0/8").unwrap();
    let proxied = serve(hello().layer(RateLimitLayer::keyed(
        trusting,
        limiter(&clock, "ip", rule()),
    )))
    .await;

    let xff = |v| [("x-forwarded-for", v)];
    // Untrusted: every claimed address is the peer's one key.
    assert_eq!(
        get_with(direct, "/", &xff("198.51.100.1")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        get_with(direct, "/", &xff("198.51.100.2")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );

    // Trusted: each forwarded client counts apart ...
    assert_eq!(
        get_with(proxied, "/", &xff("198.51.100.1")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        get_with(proxied, "/", &xff("198.51.100.2")).await.status,
        StatusCode::OK
    );
    // ... a client prepending a fresh address still counts as what the proxy saw ...
    assert_eq!(
        get_with(proxied, "/", &xff("203.0.113.50, 198.51.100.1"))
            .await
            .status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // ... and a request without the header counts against the proxy itself.
    assert_eq!(get_path(proxied, "/").await.status, StatusCode::OK);
    assert_eq!(
        get_path(proxied, "/").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_request_costing_more_than_the_quota_is_429_without_retry_after() {
    let clock = ManualClock::new();
    let limits = KeyedLimits::new(
        Global,
        limiter(&clock, "batch", FixedWindow::new(5, secs(60)).unwrap()),
    )
    .cost_with(|head| {
        head.headers
            .get("x-batch")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1)
    });
    let addr = serve(hello().layer(RateLimitLayer::new(limits).legacy_headers(true))).await;

    let never = get_with(addr, "/", &[("x-batch", "6")]).await;
    assert_eq!(never.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        never.limit_fields(),
        fields(&[
            ("ratelimit-policy", r#""batch";q=5;w=60"#),
            ("cache-control", "no-store"),
            ("content-type", "application/json"),
        ])
    );
    assert_eq!(
        never.body,
        r#"{"error":"cost_exceeds_quota","message":"this request costs 6 permits, more than rate limit \"batch\" ever grants at once (5): it can never pass, do not retry it unchanged","retry_after":null,"policy":"batch"}"#
    );

    // Nothing was taken: the whole quota is still there.
    let all = get_with(addr, "/", &[("x-batch", "5")]).await;
    assert_eq!(all.status, StatusCode::OK);
    assert_eq!(all.one("ratelimit"), Some(r#""batch";r=0;t=60"#));
}

#[tokio::test]
async fn no_peer_address_is_500() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock, "ip", FixedWindow::new(5, secs(60)).unwrap());
    let addr =
        serve_without_peers(hello().layer(RateLimitLayer::keyed(ClientIp::new(), limiter))).await;

    let reply = get_path(addr, "/").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        reply.limit_fields(),
        fields(&[
            ("cache-control", "no-store"),
            ("content-type", "application/json")
        ])
    );
    assert_eq!(
        reply.body,
        r#"{"error":"no_peer_address","message":"the server cannot tell who sent the request"}"#
    );
}

/// A store that cannot be reached.
#[derive(Debug)]
struct Unreachable;

#[async_trait::async_trait]
impl Store for Unreachable {
    async fn execute(
        &self,
        _: &tollgate::store::Request<'_>,
    ) -> Result<tollgate::store::Reply, StoreError> {
        Err(StoreError::Connection(
            "connection refused (10.9.9.9:6379)".into(),
        ))
    }
}

#[tokio::test]
async fn a_failing_store_is_503_without_its_details() {
    let limiter =
        SharedLimiter::new(Unreachable, Gcra::new(Quota::per_second(5).unwrap())).unwrap();
    let addr = serve(hello().layer(RateLimitLayer::keyed(ClientIp::new(), limiter))).await;

    let reply = get_path(addr, "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        reply.limit_fields(),
        fields(&[
            ("cache-control", "no-store"),
            ("content-type", "application/json")
        ])
    );
    assert_eq!(
        reply.body,
        r#"{"error":"limiter_unavailable","message":"the rate limiter could not decide; try again later"}"#
    );
}

#[tokio::test]
async fn several_rules_are_all_listed_and_the_tightest_reported() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of(
        store(&clock),
        [
            ("burst", Gcra::new(Quota::per_second(2).unwrap()).into()),
            ("minute", FixedWindow::new(3, secs(60)).unwrap().into()),
        ],
    )
    .unwrap();
    let addr = serve(hello().layer(RateLimitLayer::keyed(ClientIp::new(), limiter))).await;
    let policy = r#""burst";q=2;w=1, "minute";q=3;w=60"#;

    // Burst has 1 left, the minute 2: burst is the tighter, and `t` is burst's too:
    // its next permit in 500 ms (not the minute's reset, another rule's).
    let first = get_path(addr, "/").await;
    assert_eq!(
        first.limit_fields(),
        fields(&[
            ("ratelimit-policy", policy),
            ("ratelimit", r#""burst";r=1;t=1"#),
            ("content-type", "text/plain; charset=utf-8"),
        ])
    );
    assert_eq!(
        get_path(addr, "/").await.one("ratelimit"),
        Some(r#""burst";r=0;t=1"#)
    );

    // The burst denies for 500 ms.
    let burst = get_path(addr, "/").await;
    assert_eq!(burst.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        burst.limit_fields(),
        fields(&[
            ("ratelimit-policy", policy),
            ("ratelimit", r#""burst";r=0;t=1"#),
            ("retry-after", "1"),
            ("cache-control", "no-store"),
            ("content-type", "application/json"),
        ])
    );
    assert!(burst.body.contains(r#""policy":"burst""#), "{}", burst.body);

    // A second later the burst is full again, and the minute's last permit goes.
    clock.advance(secs(1));
    let last = get_path(addr, "/").await;
    assert_eq!(last.status, StatusCode::OK);
    assert_eq!(last.one("ratelimit"), Some(r#""minute";r=0;t=59"#));
    let minute = get_path(addr, "/").await;
    assert_eq!(minute.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(minute.one("ratelimit"), Some(r#""minute";r=0;t=59"#));
    assert_eq!(minute.one("retry-after"), Some("59"));
    assert!(
        minute.body.contains(r#""policy":"minute""#),
        "{}",
        minute.body
    );
}

/// Serves `service` with hyper alone, putting each connection's peer address into
/// the request's extensions as a `SocketAddr`.
async fn serve_with_hyper<S, B>(service: S) -> SocketAddr
where
    S: tower::Service<Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    S::Error: std::error::Error + Send + Sync + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    use tower::ServiceExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let service = service.clone();
            let per_request = hyper::service::service_fn(move |mut request: Request<_>| {
                request.extensions_mut().insert(peer);
                service.clone().oneshot(request)
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), per_request),
            );
        }
    });
    addr
}

#[tokio::test]
async fn a_plain_tower_service_served_by_hyper() {
    use tower::Layer;
    let clock = ManualClock::new();
    let limiter = limiter(&clock, "hyper", FixedWindow::new(1, secs(30)).unwrap());
    let hello = tower::service_fn(|_: Request<hyper::body::Incoming>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
            Bytes::from("hi"),
        )))
    });
    let service = RateLimitLayer::keyed(ClientIp::new(), limiter).layer(hello);
    let addr = serve_with_hyper(service).await;

    let ok = get_path(addr, "/").await;
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.body, "hi");
    assert_eq!(ok.one("ratelimit"), Some(r#""hyper";r=0;t=30"#));
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.one("retry-after"), Some("30"));
    assert_eq!(
        denied.body,
        r#"{"error":"rate_limited","message":"rate limit \"hyper\" exceeded: retry after 30 s","retry_after":30,"policy":"hyper"}"#
    );
}

/// What a framework needs of the layer: `Clone + Send + Sync`, futures and bodies
/// `Send`.
#[allow(dead_code)]
fn the_layer_is_send_sync_and_clone() {
    fn clone_send_sync<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + 'static>() {}
    type Limits = KeyedLimits<ClientIp, SharedLimiter<MemoryStore>>;
    type Service = tollgate::http::server::RateLimitService<axum::routing::Route, Limits>;
    clone_send_sync::<RateLimitLayer<Limits>>();
    clone_send_sync::<RateLimitLayer<dyn tollgate::http::Limits>>();
    clone_send_sync::<Service>();
    send::<tollgate::http::server::RateLimitFuture<axum::routing::Route, axum::body::Body>>();
    send::<tollgate::http::server::RateLimitBody<axum::body::Body>>();
}

#[tokio::test]
async fn every_decision_is_reported_to_the_layers_events() {
    use std::sync::{Arc, Mutex};
    use tollgate::observe::{DenyReason, Event, EventKind, Events};

    let clock = ManualClock::new();
    let events = Events::new("api");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let _subscription = events.subscribe({
        let seen = Arc::clone(&seen);
        move |event: &Event<'_>| {
            seen.lock()
                .unwrap()
                .push((event.source.to_owned(), event.kind))
        }
    });
    let layer = RateLimitLayer::global(
        limiter(&clock, "reported", FixedWindow::new(1, secs(60)).unwrap()).for_key("global"),
    )
    .events(events);
    let addr = serve(hello().layer(layer)).await;

    assert_eq!(get_path(addr, "/").await.status, StatusCode::OK);
    assert_eq!(
        get_path(addr, "/").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], ("api".to_owned(), EventKind::Admitted));
    assert!(matches!(
        seen[1].1,
        EventKind::Denied {
            reason: DenyReason::Limited,
            ..
        }
    ));
}

/// The bug: a request whose limiter reports to a hub too was reported twice, once by
/// the limiter and once by the layer (twice to the same hub when both had it). Each
/// decision is reported once, to one hub: the limiter's, keyed, with its cost; the
/// layer's only for a limiter with no hub of its own.
#[tokio::test]
async fn one_request_is_one_decision_event_however_the_hubs_are_attached() {
    use common::events::{Log, Seen, hub};
    use tollgate::observe::EventKind;

    let clock = ManualClock::new();
    let seen = |source: &str, key: Option<&str>, permits| Seen {
        source: source.to_owned(),
        key: key.map(str::to_owned),
        permits,
        kind: EventKind::Admitted,
    };
    let api_key = [("x-api-key", "k1")];

    // One hub, attached to the limiter and to the layer.
    let log = Log::default();
    let events = hub("api", &log);
    let shared =
        limiter(&clock, "one", FixedWindow::new(10, secs(60)).unwrap()).with_events(events.clone());
    let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), shared).cost(2);
    let addr = serve(hello().layer(RateLimitLayer::new(limits).events(events))).await;
    assert_eq!(get_with(addr, "/", &api_key).await.status, StatusCode::OK);
    assert_eq!(log.all(), [seen("api", Some("k1"), 2)]);

    // A hub each, one listener on both.
    let log = Log::default();
    let (store_events, layer_events) = (hub("store", &log), hub("api", &log));
    let shared =
        limiter(&clock, "each", FixedWindow::new(10, secs(60)).unwrap()).with_events(store_events);
    let layer =
        RateLimitLayer::keyed(HeaderKey::from_static("x-api-key"), shared).events(layer_events);
    let addr = serve(hello().layer(layer)).await;
    assert_eq!(get_with(addr, "/", &api_key).await.status, StatusCode::OK);
    assert_eq!(log.all(), [seen("store", Some("k1"), 1)]);

    // An in-process limiter with a hub, as the one global limit.
    let log = Log::default();
    let global =
        tollgate::Limiter::with_clock(FixedWindow::new(10, secs(60)).unwrap(), clock.clone())
            .with_events(hub("global", &log));
    let layer = RateLimitLayer::global(global).events(hub("api", &log));
    let addr = serve(hello().layer(layer)).await;
    assert_eq!(get_path(addr, "/").await.status, StatusCode::OK);
    assert_eq!(log.all(), [seen("global", None, 1)]);

    // The layer's hub alone hears every request, as before.
    let log = Log::default();
    let shared = limiter(&clock, "alone", FixedWindow::new(10, secs(60)).unwrap());
    let layer =
        RateLimitLayer::keyed(HeaderKey::from_static("x-api-key"), shared).events(hub("api", &log));
    let addr = serve(hello().layer(layer)).await;
    assert_eq!(get_with(addr, "/", &api_key).await.status, StatusCode::OK);
    assert_eq!(log.all(), [seen("api", None, 1)]);
}

/// The server layer takes an in-process `KeyedLimiter` directly, its one policy named
/// `"default"`: no store, no adapter.
#[tokio::test]
async fn a_keyed_limiter_serves_the_layer_directly() {
    let clock = ManualClock::new();
    let limiter: tollgate::KeyedLimiter<String, _, _> = tollgate::KeyedLimiter::with_clock(
        FixedWindow::new(1, secs(10)).unwrap(),
        KeyedConfig::new(100),
        clock.clone(),
    )
    .unwrap();
    let layer = RateLimitLayer::keyed(HeaderKey::from_static("x-api-key"), limiter.clone());
    let addr = serve(hello().layer(layer)).await;

    let key = |k| [("x-api-key", k)];
    let admitted = get_with(addr, "/", &key("a")).await;
    assert_eq!(admitted.status, StatusCode::OK);
    assert_eq!(
        admitted.headers["ratelimit-policy"],
        r#""default";q=1;w=10"#
    );
    assert_eq!(
        get_with(addr, "/", &key("a")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get_with(addr, "/", &key("b")).await.status, StatusCode::OK);
    assert_eq!(
        limiter.len(),
        2,
        "the layer decided in the limiter passed in"
    );
}

/// Issue 11: the server layer takes any permit source. A `Limiter` serves it
/// directly, as one limit for every request, with its policy in the fields.
#[tokio::test]
async fn a_limiter_serves_the_layer_as_one_global_limit() {
    let clock = ManualClock::new();
    let limiter = tollgate::Limiter::with_clock(FixedWindow::new(2, secs(10)).unwrap(), clock);
    let layer = RateLimitLayer::global(limiter.clone());
    let addr = serve(hello().layer(layer)).await;

    let first = get_with(addr, "/", &[("x-forwarded-for", "10.0.0.1")]).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.headers["ratelimit-policy"], r#""default";q=2;w=10"#);
    assert_eq!(first.headers["ratelimit"], r#""default";r=1;t=10"#);
    // Another client counts against the same limit.
    let second = get_with(addr, "/", &[("x-forwarded-for", "10.0.0.2")]).await;
    assert_eq!(second.status, StatusCode::OK);
    let third = get_path(addr, "/").await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.one("retry-after"), Some("10"));
    assert!(
        limiter.try_acquire(1).is_err(),
        "the layer decided in the limiter passed in"
    );
}

/// A semaphore behind an `Arc` limits requests at once: its permit is held until
/// the response body ends, and its policy has a quota and no window.
#[tokio::test]
async fn a_semaphore_serves_the_layer_as_a_limit_on_requests_at_once() {
    use std::sync::Arc;
    use tokio::sync::Notify;

    let semaphore = Arc::new(tollgate::Semaphore::new(1).unwrap());
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let app = Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route(
            "/slow",
            get({
                let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
                move || async move {
                    entered.notify_one();
                    release.notified().await;
                    "slow"
                }
            }),
        )
        .layer(RateLimitLayer::global(Arc::clone(&semaphore)));
    let addr = serve(app).await;

    let slow = tokio::spawn(async move { get_path(addr, "/slow").await });
    entered.notified().await;
    assert_eq!(
        semaphore.available_permits(),
        0,
        "the slow request holds the permit"
    );
    let refused = get_path(addr, "/fast").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers["ratelimit-policy"], r#""default";q=1"#);
    assert_eq!(
        refused.one("retry-after"),
        None,
        "a release, not a time, frees it"
    );

    release.notify_one();
    assert_eq!(slow.await.unwrap().status, StatusCode::OK);
    let after = get_path(addr, "/fast").await;
    assert_eq!(after.status, StatusCode::OK);
    assert_eq!(semaphore.available_permits(), 1, "given back once answered");
}

/// A leaky queue serves the layer with its bucket's policy.
#[tokio::test]
async fn a_leaky_queue_serves_the_layer() {
    let clock = ManualClock::new();
    let queue = tollgate::LeakyQueue::with_clock(2, Quota::per_second(1).unwrap(), clock).unwrap();
    let addr = serve(hello().layer(RateLimitLayer::global(queue))).await;

    let first = get_path(addr, "/").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.headers["ratelimit-policy"], r#""default";q=2;w=2"#);
    assert_eq!(get_path(addr, "/").await.status, StatusCode::OK);
    assert_eq!(
        get_path(addr, "/").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// Regression: the policy named was found by quota alone, so with two rules of 10
/// (a minute window listed first, a per-second bucket) the bucket's denial was
/// reported as `"per_minute";r=0;t=1`: one rule's name with another rule's numbers.
#[tokio::test]
async fn equal_quotas_name_the_rule_that_decided() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of(
        store(&clock),
        [
            ("per_minute", FixedWindow::new(10, secs(60)).unwrap().into()),
            (
                "per_second",
                Gcra::new(Quota::per_second(10).unwrap()).into(),
            ),
        ],
    )
    .unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter);
    let addr = serve(hello().layer(layer)).await;

    // 50 ms before the minute's window ends, both rules spent: the window comes back
    // in 50 ms, the bucket's next permit in 100 ms, so the bucket denies.
    clock.advance(Duration::from_millis(59_950));
    for i in 0..10 {
        let reply = get_path(addr, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}: {reply:?}");
    }
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    assert_eq!(denied.one("ratelimit"), Some(r#""per_second";r=0;t=1"#));
    assert_eq!(denied.one("retry-after"), Some("1"));

    // A second later the bucket is full and the next window open: both spent again,
    // the window denies for the rest of its minute.
    clock.advance(secs(1));
    for i in 0..10 {
        let reply = get_path(addr, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}: {reply:?}");
    }
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    assert_eq!(denied.one("ratelimit"), Some(r#""per_minute";r=0;t=60"#));
    assert_eq!(denied.one("retry-after"), Some("60"));
}
