//! What a client reads in the answers, over real HTTP on loopback (an axum server on
//! 127.0.0.1:0 and a hyper client), every limiter on a `ManualClock`: the
//! `RateLimit` field's `r` and `t` of one policy and with one meaning, a shadow
//! denial as a log line, and the `Retry-After` of the adaptive layer's 503.

#![cfg(all(feature = "axum", feature = "config"))]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use common::http::serve;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::algorithm::{FixedWindow, Gcra, SlidingCounter};
use tollgate::config::{ConfigLimiter, ConfigLimits, RuleSet};
use tollgate::http::ClientIp;
use tollgate::http::server::RateLimitLayer;
use tollgate::store::{MemoryStore, Rule, SharedLimiter};
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, Quota};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn store(clock: &ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), "test", clock.clone()).unwrap()
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
}

impl Reply {
    fn one(&self, name: &str) -> Option<&str> {
        let values: Vec<_> = self.headers.get_all(name).iter().collect();
        assert!(values.len() <= 1, "{name}: {values:?}");
        values.first().map(|v| v.to_str().unwrap())
    }
}

async fn get_path(addr: SocketAddr, path: &str) -> Reply {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client
        .get(format!("http://{addr}{path}").parse().unwrap())
        .await
        .unwrap();
    let (head, body) = response.into_parts();
    body.collect().await.unwrap();
    Reply {
        status: head.status,
        headers: head.headers,
    }
}

fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/login", get(|| async { "welcome" }))
        .route("/search", get(|| async { "results" }))
}

/// The bug: two rules admitted a request and the field paired the tighter rule's `r`
/// with the other rule's later reset: `"per_client";r=8;t=80` for a 1 s window.
#[tokio::test]
async fn ratelimit_r_and_t_come_from_the_same_policy() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of(
        store(&clock),
        [
            (
                "per_client",
                Rule::from(FixedWindow::new(10, secs(1)).unwrap()),
            ),
            (
                "search",
                Rule::from(SlidingCounter::new(30, secs(60)).unwrap()),
            ),
        ],
    )
    .unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(routes().layer(layer)).await;

    get_path(addr, "/search").await;
    let second = get_path(addr, "/search").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.one("ratelimit"), Some(r#""per_client";r=8;t=1"#));
    assert_eq!(second.one("x-ratelimit-limit"), Some("10"));
    assert_eq!(second.one("x-ratelimit-remaining"), Some("8"));
    assert_eq!(second.one("x-ratelimit-reset"), Some("1"));
}

/// The same through the rules file of `examples/rate_limited_server.rs`, where the
/// newcomer met it: `/search` counts under `per_client` (10 a second) and `search`
/// (30 a minute, a sliding counter).
#[tokio::test]
async fn the_example_rules_report_per_client_with_its_own_reset_on_search() {
    let clock = ManualClock::new();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rules.yaml");
    let limiter = ConfigLimiter::new(RuleSet::from_file(path).unwrap(), store(&clock)).unwrap();
    let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new());
    let addr = serve(routes().layer(RateLimitLayer::new(limits))).await;

    get_path(addr, "/search").await;
    let second = get_path(addr, "/search").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.one("ratelimit"), Some(r#""per_client";r=8;t=1"#));
}

/// The bug: the same bucket in the same state answered `r=0;t=60` (the time until
/// full) on its last admission and `r=0;t=12` (the time until the next permit) on
/// the first denial 10 ms later. `t` now means the draft's "seconds until additional
/// quota ... is made available" on both; `Retry-After` is never earlier, and
/// `X-RateLimit-Reset` still tells when the bucket is full.
#[tokio::test]
async fn t_is_the_time_until_the_next_permit_on_admission_and_denial_alike() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of(
        store(&clock),
        [(
            "login",
            Rule::from(Gcra::new(Quota::per_minute(5).unwrap())),
        )],
    )
    .unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(routes().layer(layer)).await;

    let first = get_path(addr, "/login").await;
    // Four left; the next comes back once the one just taken is, in 12 s.
    assert_eq!(first.one("ratelimit"), Some(r#""login";r=4;t=12"#));
    assert_eq!(first.one("x-ratelimit-reset"), Some("12"));
    for _ in 0..3 {
        get_path(addr, "/login").await;
    }
    let last = get_path(addr, "/login").await;
    assert_eq!(last.status, StatusCode::OK);
    assert_eq!(last.one("ratelimit"), Some(r#""login";r=0;t=12"#));
    assert_eq!(last.one("x-ratelimit-reset"), Some("60"));
    assert_eq!(last.one("retry-after"), None);

    clock.advance(Duration::from_millis(10));
    let denied = get_path(addr, "/login").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.one("ratelimit"), Some(r#""login";r=0;t=12"#));
    assert_eq!(denied.one("retry-after"), Some("12"));
    assert_eq!(denied.one("x-ratelimit-reset"), Some("60"));

    // Part way to the next permit, both say what is left of the wait.
    clock.advance(Duration::from_millis(4_990));
    let later = get_path(addr, "/login").await;
    assert_eq!(later.one("ratelimit"), Some(r#""login";r=0;t=7"#));
    assert_eq!(later.one("retry-after"), Some("7"));
    clock.advance(secs(7));
    let again = get_path(addr, "/login").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.one("ratelimit"), Some(r#""login";r=0;t=12"#));
}

/// The bug: the example logged a shadow denial in its `Debug` form,
/// `ShadowDenial { limit: AppliedLimit { .. }, denied: Limited(..) }`; it has a
/// `Display` now, one line a log reader understands.
#[tokio::test]
async fn a_shadow_denial_reads_as_a_sentence() {
    use std::sync::{Arc, Mutex};

    let clock = ManualClock::new();
    let rules = RuleSet::from_yaml(
        "
domain: api
descriptors:
  - key: path
    value: /export
    shadow_mode: true
    rate_limit: { name: export_daily, unit: day, requests_per_unit: 1 }
",
    )
    .unwrap();
    let limiter = ConfigLimiter::new(rules, store(&clock)).unwrap();
    let logged = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&logged);
    let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new())
        .on_shadow_denial(move |denial| log.lock().unwrap().push(denial.to_string()));
    let app = Router::new()
        .route("/export", get(|| async { "export" }))
        .layer(RateLimitLayer::new(limits));
    let addr = serve(app).await;

    assert_eq!(get_path(addr, "/export").await.status, StatusCode::OK);
    clock.advance(secs(3_600));
    // Shadow mode: served all the same, and the would-be denial logged.
    assert_eq!(get_path(addr, "/export").await.status, StatusCode::OK);
    assert_eq!(
        *logged.lock().unwrap(),
        ["shadow limit export_daily: 1 per 86400s would deny: rate limited, retry after 82800s"]
    );
}

/// The bug: the adaptive layer's 503 carried no `Retry-After` unless configured,
/// where the shedding layer's 503 has one by default. It now says 1 s (the
/// documented `DEFAULT_RETRY_AFTER`), and `without_retry_after` leaves it out.
#[cfg(feature = "adaptive")]
#[tokio::test]
async fn the_adaptive_layers_503_says_when_to_retry() {
    use std::sync::Arc;

    use tollgate::adaptive::limit::AimdLimit;
    use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
    use tollgate::http::adaptive::AdaptiveLayer;

    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(1)
        .build()
        .unwrap();
    let limiter =
        Arc::new(AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap());
    // The first request holds the one permit until the test lets it finish.
    let (finish, finished) = tokio::sync::watch::channel(false);
    let slow = move || {
        let mut finished = finished.clone();
        async move {
            let _ = finished.wait_for(|done| *done).await;
            "done"
        }
    };
    let app = |layer: AdaptiveLayer<AimdLimit, ManualClock>| {
        Router::new().route("/", get(slow.clone())).layer(layer)
    };
    let addr = serve(app(AdaptiveLayer::new(Arc::clone(&limiter)))).await;
    let quiet = serve(app(
        AdaptiveLayer::new(Arc::clone(&limiter)).without_retry_after()
    ))
    .await;

    let held = tokio::spawn(get_path(addr, "/"));
    while limiter.inflight() == 0 {
        tokio::task::yield_now().await;
    }
    let refused = get_path(addr, "/").await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.one("retry-after"), Some("1"));
    let quiet = get_path(quiet, "/").await;
    assert_eq!(quiet.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(quiet.one("retry-after"), None);

    finish.send(true).unwrap();
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
}

/// The same for a sliding counter (the `search` rule of the example): its last
/// admission said `t=120` (until both windows' counts have decayed) where the
/// denial 10 ms later said `t=80` (until one more fits the estimate).
#[tokio::test]
async fn a_sliding_counter_says_the_same_t_on_its_last_admission_and_first_denial() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of(
        store(&clock),
        [(
            "search",
            Rule::from(SlidingCounter::new(3, secs(60)).unwrap()),
        )],
    )
    .unwrap();
    let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
    let addr = serve(routes().layer(layer)).await;

    get_path(addr, "/search").await;
    get_path(addr, "/search").await;
    let last = get_path(addr, "/search").await;
    assert_eq!(last.status, StatusCode::OK);
    // Three in this window: one more fits once a third of the next has passed.
    assert_eq!(last.one("ratelimit"), Some(r#""search";r=0;t=80"#));
    assert_eq!(last.one("x-ratelimit-reset"), Some("120"));

    clock.advance(Duration::from_millis(10));
    let denied = get_path(addr, "/search").await;
    assert_eq!(denied.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.one("ratelimit"), Some(r#""search";r=0;t=80"#));
    assert_eq!(denied.one("retry-after"), Some("80"));
}

/// The bug: an admission's `t` was the time until full, a denial's the time until
/// the next permit. `t` (`next_permit_after`) now means the same on the last
/// admission of a burst and on the first denial of one permit 10 ms later, for
/// every algorithm the server layer takes: the denial's is its `retry_after`, the
/// admission's 10 ms more.
#[test]
fn the_last_admission_and_the_first_denial_agree_on_t_for_every_algorithm() {
    use tollgate::algorithm::{Algorithm, FixedWindow, SlidingLog, SmoothBursty};
    use tollgate::{Denied, Limiter};

    fn check<A: Algorithm>(name: &str, algorithm: A) {
        let clock = ManualClock::new();
        clock.advance(Duration::from_millis(250));
        let limiter = Limiter::with_clock(algorithm, clock.clone());
        let mut last = None;
        for _ in 0..1_000 {
            match limiter.try_acquire(1) {
                Ok(admitted) => last = Some(admitted),
                Err(_) => break,
            }
        }
        let last = last.unwrap_or_else(|| panic!("{name}: nothing admitted"));
        clock.advance(Duration::from_millis(10));
        let Err(Denied::Limited(denied)) = limiter.try_acquire(1) else {
            panic!("{name}: not denied");
        };
        let retry = denied.retry_after().unwrap();
        assert_eq!(denied.next_permit_after(), Some(retry), "{name}");
        assert_eq!(
            last.next_permit_after(),
            retry + Duration::from_millis(10),
            "{name}: last admission {last:?}, denial {denied:?}"
        );
        assert!(last.next_permit_after() <= last.reset_after(), "{name}");
    }

    check("gcra", Gcra::new(Quota::per_minute(5).unwrap()));
    check("fixed window", FixedWindow::new(5, secs(60)).unwrap());
    check("sliding counter", SlidingCounter::new(5, secs(60)).unwrap());
    check("sliding log", SlidingLog::new(5, secs(60)).unwrap());
    check("smooth bursty", SmoothBursty::new(5.0).unwrap());
}
