//! The HTTP layers over the Redis store, on real servers: private `redis-server`
//! processes (and a 3-master Redis Cluster) from tests/common, axum servers on
//! 127.0.0.1:0 and hyper-util clients.
//!
//! The Redis store decides on the server's `TIME`, so these tests cannot move its clock:
//! every limit has a window of an hour, in which the counts are exact whatever the
//! machine's load, and only the seconds sent (`t`, `Retry-After`) are checked within a
//! range. Windows are GCRA, sliding or opened by the first hit, never aligned to the
//! Unix epoch, so no run can straddle a window edge. Waits sleep on a `ManualClock`.
#![cfg(all(feature = "redis", feature = "axum", feature = "config"))]

mod common;

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use common::http::serve;
use common::redis::{RedisCluster, RedisServer, require_redis};
use futures::poll;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, ServiceExt};

use tollgate::algorithm::{FixedWindow, Gcra};
use tollgate::config::{ConfigLimiter, ConfigLimits, RuleSet};
use tollgate::http::ClientIp;
use tollgate::http::client::{ThrottleError, ThrottleLayer};
use tollgate::http::server::RateLimitLayer;
use tollgate::store::{BreakerState, FailurePolicy, RedisStore, Resilient, SharedLimiter, Store};
use tollgate::time::{Clock, ManualClock};
use tollgate::{ForKey, PermitSource, Quota};

const HOUR: Duration = Duration::from_secs(3_600);

/// How far the seconds sent may fall below their exact value: the time the test took
/// between the requests, on a loaded machine.
const SLACK: u64 = 30;

/// Bounds every network step, so that a hang fails the test instead of stalling it.
const GUARD: Duration = Duration::from_secs(20);

async fn guarded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {GUARD:?}"))
}

/// `exact` seconds, less at most the slack.
fn about(exact: u64) -> RangeInclusive<u64> {
    exact - SLACK..=exact
}

fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/search", get(|| async { "results" }))
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    /// The one value of field `name`, if any.
    fn one(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.get_all(name).iter();
        let first = values.next().map(|v| v.to_str().unwrap());
        assert!(values.next().is_none(), "{name} sent twice: {self:?}");
        first
    }

    /// The one `RateLimit` item: its policy name, `r` and `t`.
    fn rate_limit(&self) -> (String, u64, u64) {
        let field = self
            .one("ratelimit")
            .unwrap_or_else(|| panic!("no RateLimit: {self:?}"));
        let mut parts = field.split(';');
        let name = parts.next().unwrap().trim_matches('"').to_owned();
        let mut param = |key: &str| {
            let part = parts.next().unwrap_or_else(|| panic!("{field}: no {key}"));
            let value = part.strip_prefix(key).and_then(|p| p.strip_prefix('='));
            value
                .unwrap_or_else(|| panic!("{field}: {part}"))
                .parse()
                .unwrap()
        };
        let (r, t) = (param("r"), param("t"));
        (name, r, t)
    }

    /// `Retry-After` in seconds.
    fn retry_after(&self) -> u64 {
        self.one("retry-after")
            .unwrap_or_else(|| panic!("no Retry-After: {self:?}"))
            .parse()
            .unwrap()
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

async fn get_path(addr: SocketAddr, path: &str) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap();
    let response = guarded("GET", client.request(request)).await.unwrap();
    let (head, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: head.status,
        headers: head.headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

async fn connect(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect(&server.url(), prefix).await.unwrap()
}

/// A server limited per client address to 3 an hour (GCRA) over Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_by_client_ip_over_redis_sends_every_field() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let rule = Gcra::new(Quota::per_hour(3).unwrap());
    let limiter = SharedLimiter::new(connect(&redis, "ip").await, rule).unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(routes().layer(layer)).await;

    // One permit every 20 minutes, 3 at once: each admission leaves one fewer, the
    // next permit drips in 20 minutes (`t`), and the bucket is full again 20 minutes
    // per permit taken later (the legacy reset).
    for (i, remaining) in [2, 1, 0].into_iter().enumerate() {
        let reply = get_path(addr, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}: {reply:?}");
        assert_eq!(reply.body, "hello");
        assert_eq!(
            reply.one("ratelimit-policy"),
            Some(r#""default";q=3;w=3600"#)
        );
        let (name, r, t) = reply.rate_limit();
        assert_eq!((name.as_str(), r), ("default", remaining), "{reply:?}");
        assert!(about(1_200).contains(&t), "request {i}: t={t}, {reply:?}");
        assert_eq!(reply.one("x-ratelimit-limit"), Some("3"));
        assert_eq!(
            reply.one("x-ratelimit-remaining"),
            Some(&*remaining.to_string())
        );
        let reset: u64 = reply.one("x-ratelimit-reset").unwrap().parse().unwrap();
        let full = 1_200 * (3 - remaining);
        assert!(about(full).contains(&reset), "request {i}: {reply:?}");
        assert_eq!(reply.one("retry-after"), None);
    }

    let denied = get_path(addr, "/search").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    assert_eq!(denied.one("content-type"), Some("application/json"));
    assert_eq!(denied.one("cache-control"), Some("no-store"));
    assert_eq!(
        denied.one("ratelimit-policy"),
        Some(r#""default";q=3;w=3600"#)
    );
    let (name, r, t) = denied.rate_limit();
    assert_eq!((name.as_str(), r), ("default", 0));
    // The next permit drips in 20 minutes after the first was taken.
    assert!(about(1_200).contains(&t), "t={t}, {denied:?}");
    assert_eq!(denied.retry_after(), t);
    let json = denied.json();
    assert_eq!(json["error"], "rate_limited");
    assert_eq!(json["policy"], "default");
    assert_eq!(json["retry_after"], t);
    assert_eq!(
        json["message"],
        format!("rate limit \"default\" exceeded: retry after {t} s")
    );

    // A denial takes nothing: still denied, and still about 20 minutes.
    let again = get_path(addr, "/").await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(again.retry_after() <= t);
}

/// Regression: over Redis an admission's `t` was the time until the bucket is full,
/// so the last admission of 5 an hour said `t=3600` and the denial just after `t=720`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_the_last_admission_and_the_first_denial_agree_on_t() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let rule = Gcra::new(Quota::per_hour(5).unwrap());
    let limiter = SharedLimiter::new(connect(&redis, "t").await, rule).unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(routes().layer(layer)).await;

    let mut last = None;
    for i in 0..5 {
        let reply = get_path(addr, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}: {reply:?}");
        last = Some(reply);
    }
    let last = last.unwrap();
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");

    // One permit every 12 minutes: the next one is 720 s away on both answers, while
    // the bucket is full again in an hour.
    let (name, r, t_last) = last.rate_limit();
    assert_eq!((name.as_str(), r), ("default", 0), "{last:?}");
    let (name, r, t_denied) = denied.rate_limit();
    assert_eq!((name.as_str(), r), ("default", 0), "{denied:?}");
    assert!(about(720).contains(&t_last), "last admission: {last:?}");
    assert!(about(720).contains(&t_denied), "first denial: {denied:?}");
    assert!(t_denied <= t_last, "{last:?} then {denied:?}");
    assert!(t_last - t_denied <= 1, "{last:?} then {denied:?}");
    assert_eq!(denied.retry_after(), t_denied);
    let reset: u64 = last.one("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!(about(3_600).contains(&reset), "{last:?}");
}

/// A fleet member: its own axum server, its own layer, its own connection to Redis.
async fn fleet_member(redis: &RedisServer) -> (SocketAddr, RedisStore) {
    let store = connect(redis, "fleet").await;
    let rule = FixedWindow::from_first_hit(5, HOUR).unwrap();
    let limiter = SharedLimiter::new(store.clone(), rule).unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter);
    (serve(routes().layer(layer)).await, store)
}

/// Two servers with their own layers and connections share one limit through Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_one_limit_through_redis() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let (one, one_store) = fleet_member(&redis).await;
    let (two, two_store) = fleet_member(&redis).await;
    assert_eq!(
        one_store.redis_key("127.0.0.1", "default"),
        two_store.redis_key("127.0.0.1", "default")
    );

    // Five an hour from 127.0.0.1, whichever member answers.
    let members = [one, two, two, one, two];
    for (i, member) in members.into_iter().enumerate() {
        let reply = get_path(member, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "request {i}: {reply:?}");
        let (_, r, t) = reply.rate_limit();
        assert_eq!(r, 4 - i as u64, "request {i}: {reply:?}");
        assert!(about(3_600).contains(&t), "request {i}: t={t}");
    }
    for member in [one, two] {
        let denied = get_path(member, "/").await;
        assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
        let (_, r, t) = denied.rate_limit();
        assert_eq!(r, 0);
        // The window opened at the first request and lasts an hour.
        assert!(about(3_600).contains(&t), "t={t}");
        assert_eq!(denied.retry_after(), t);
        assert_eq!(denied.json()["error"], "rate_limited");
    }
}

/// Per client (GCRA, 4 an hour) and per path (`/search`: sliding log, 2 an hour).
const RULES: &str = "
domain: shop
descriptors:
  - key: remote_address
    rate_limit: { name: per_client, unit: hour, requests_per_unit: 4, algorithm: gcra }
  - key: path
    value: /search
    rate_limit: { name: search, unit: hour, requests_per_unit: 2, algorithm: sliding_log }
";

/// Serves the rules of [`RULES`] over `store`, and checks that the decisive policy of
/// each answer is the limit that ran out first.
async fn rules_over<S: Store + 'static>(store: S) {
    let rules = RuleSet::from_yaml(RULES).unwrap();
    let limiter = ConfigLimiter::new(rules, store).unwrap();
    let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new());
    let addr = serve(routes().layer(RateLimitLayer::new(limits))).await;

    // /search counts against both limits; the path's runs out first.
    for (i, remaining) in [1, 0].into_iter().enumerate() {
        let reply = get_path(addr, "/search").await;
        assert_eq!(reply.status, StatusCode::OK, "search {i}: {reply:?}");
        assert_eq!(reply.body, "results");
        assert_eq!(
            reply.one("ratelimit-policy"),
            Some(r#""per_client";q=4;w=3600, "search";q=2;w=3600"#)
        );
        let (name, r, _) = reply.rate_limit();
        assert_eq!((name.as_str(), r), ("search", remaining), "{reply:?}");
    }
    let denied = get_path(addr, "/search").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    let (name, r, t) = denied.rate_limit();
    assert_eq!((name.as_str(), r), ("search", 0));
    // The log frees its first entry an hour after it was written.
    assert!(about(3_600).contains(&t), "t={t}");
    assert_eq!(denied.retry_after(), t);
    assert_eq!(denied.json()["policy"], "search");

    // The denied search took nothing from the client's limit: two of four are left.
    for (i, remaining) in [1, 0].into_iter().enumerate() {
        let reply = get_path(addr, "/").await;
        assert_eq!(reply.status, StatusCode::OK, "/ {i}: {reply:?}");
        assert_eq!(
            reply.one("ratelimit-policy"),
            Some(r#""per_client";q=4;w=3600"#)
        );
        let (name, r, _) = reply.rate_limit();
        assert_eq!((name.as_str(), r), ("per_client", remaining), "{reply:?}");
    }
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    let (name, _, t) = denied.rate_limit();
    assert_eq!(name, "per_client");
    // One permit each 15 minutes, the first taken by the first search.
    assert!(about(900).contains(&t), "t={t}");
    assert_eq!(denied.json()["policy"], "per_client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_rules_over_redis() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    rules_over(connect(&redis, "rules").await).await;
}

/// The domain is every request's hash tag: a request's keys (one per matched limit)
/// share a slot, so one script can decide them on a cluster without `CROSSSLOT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_rules_over_redis_cluster() {
    let Some(()) = require_redis() else { return };
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::connect_cluster(&seeds, "rules").await.unwrap();
    rules_over(store).await;

    // Every key is on one node, in one slot: the domain's.
    let mut holders = Vec::new();
    for url in &urls {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut node = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("rules:*")
            .query_async(&mut node)
            .await
            .unwrap();
        if !keys.is_empty() {
            holders.push(keys);
        }
    }
    assert_eq!(holders.len(), 1, "keys on several nodes: {holders:?}");
    let keys = holders.remove(0);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys.iter().all(|k| k.starts_with("rules:{shop}:")),
        "{keys:?}"
    );
}

/// A "process" calling the API: its own connection to Redis, and a layer whose
/// permits are the shared quota of "api.example" (5 an hour), sleeping on `clock`.
async fn client_process(
    redis: &RedisServer,
    clock: &ManualClock,
) -> ThrottleLayer<ForKey<SharedLimiter<RedisStore, ManualClock>, str>, ManualClock> {
    let rule = FixedWindow::from_first_hit(5, HOUR).unwrap();
    let limiter =
        SharedLimiter::with_clock(connect(redis, "clients").await, rule, clock.clone()).unwrap();
    ThrottleLayer::with_clock(limiter.for_key("api.example"), clock.clone())
}

/// Two client layers share one Redis quota: the sixth call waits, or with a timeout
/// fails at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_layers_share_one_quota_through_redis() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    let api = serve(Router::new().route(
        "/",
        get(move || async move {
            counted.fetch_add(1, Ordering::SeqCst);
            "ok"
        }),
    ))
    .await;
    let clock = ManualClock::new();
    let http = || Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let one_layer = client_process(&redis, &clock).await;
    let two_layer = client_process(&redis, &clock).await;
    let (one, two) = (one_layer.layer(http()), two_layer.layer(http()));
    let request = || {
        Request::get(format!("http://{api}/"))
            .body(Empty::new())
            .unwrap()
    };

    for (i, process) in [&one, &two, &one, &two, &two].into_iter().enumerate() {
        let response = guarded("call", process.clone().oneshot(request())).await;
        assert_eq!(response.unwrap().status(), StatusCode::OK, "call {i}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 5);

    // The next window opens in about an hour, more than the timeout: known at once,
    // without sleeping (on the manual clock, a sleep would never end).
    let hasty = one_layer.timeout(Duration::from_secs(60)).layer(http());
    let timed_out = guarded("hasty call", hasty.oneshot(request())).await;
    assert!(
        matches!(timed_out, Err(ThrottleError::TimedOut)),
        "{timed_out:?}"
    );
    assert_eq!(clock.pending_alarms(), 0);

    // Without a timeout, the sixth call books the next window and sleeps on the clock.
    let mut waiting = Box::pin(two.oneshot(request()));
    guarded("booking", async {
        while clock.pending_alarms() == 0 {
            assert!(poll!(waiting.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
    })
    .await;
    let wait = clock.next_alarm().unwrap().saturating_since(clock.now());
    assert!(about(3_600).contains(&wait.as_secs()), "{wait:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 5);

    // Its permit is booked in Redis: once the clock has passed the wait, it is sent.
    clock.advance(wait);
    let response = guarded("booked call", waiting).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(hits.load(Ordering::SeqCst), 6);
}

/// The rule of the down-Redis tests: 3 an hour per client.
fn three_an_hour<S: Store + 'static>(store: S) -> SharedLimiter<S> {
    SharedLimiter::new(store, Gcra::new(Quota::per_hour(3).unwrap())).unwrap()
}

/// With Redis gone, the layer cannot decide: 503 and its JSON body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let limiter = three_an_hour(connect(&redis, "down").await);
    let addr = serve(routes().layer(RateLimitLayer::keyed(ClientIp::new(), limiter))).await;
    assert_eq!(get_path(addr, "/").await.status, StatusCode::OK);

    redis.kill();
    let reply = get_path(addr, "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{reply:?}");
    assert_eq!(reply.one("content-type"), Some("application/json"));
    assert_eq!(reply.one("cache-control"), Some("no-store"));
    assert_eq!(reply.one("ratelimit"), None);
    assert_eq!(
        reply.body,
        r#"{"error":"limiter_unavailable","message":"the rate limiter could not decide; try again later"}"#
    );
}

/// `Resilient` with `FailurePolicy::Open`: limits through Redis while it is up, and
/// admits while it is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_open_behind_resilient() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    // The deadline and breaker run on a manual clock: only Redis's own errors count.
    let store = Resilient::builder(connect(&redis, "open").await, FailurePolicy::Open)
        .clock(ManualClock::new())
        .build()
        .map(Arc::new)
        .unwrap();
    let limiter = three_an_hour(Arc::clone(&store));
    let addr = serve(routes().layer(RateLimitLayer::keyed(ClientIp::new(), limiter))).await;

    for _ in 0..3 {
        assert_eq!(get_path(addr, "/").await.status, StatusCode::OK);
    }
    let denied = get_path(addr, "/").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS, "{denied:?}");
    assert_eq!(store.stats().fallbacks, 0);

    redis.kill();
    let reply = get_path(addr, "/").await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    assert_eq!(reply.body, "hello");
    // Nothing is known, so nothing more is promised.
    assert_eq!(reply.rate_limit(), ("default".to_owned(), 0, 0));
    let stats = store.stats();
    assert_eq!((stats.fallbacks, stats.failures), (1, 1), "{stats:?}");
    assert_eq!(stats.state, BreakerState::Closed);
}
