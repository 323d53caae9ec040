//! Exact at the extremes: periods as long as the clock, clocks at their ends, denials
//! that wait for a release, and what users read of them. Each test is named for the
//! behaviour, and says what the bug was.

mod common;

use std::time::Duration;

use tollgate::algorithm::{
    Algorithm, CellReply, Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod,
    SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
#[cfg(feature = "store")]
use tollgate::store::{MemoryStore, SharedLimiter};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{ConfigError, Denied, KeyedConfig, KeyedLimiter, Limiter, Quota, Retry, Semaphore};

const SECOND: Duration = Duration::from_secs(1);
const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// Regression: `Quota::new(1, 500 years)` was accepted, answered `retry_after` 84.9
/// years, and admitted a second request at 84.9 years: the TAT saturated at the clock's
/// end, 584.5 years, and 500 years before that had passed.
#[test]
fn a_quota_of_one_per_500_years_never_admits_a_second_request_early() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Gcra::new(Quota::new(1, 500 * YEAR).unwrap()), clock.clone());
    assert!(limiter.try_acquire(1).is_ok());
    let mut waited = Duration::ZERO;
    for step in [
        84 * YEAR,
        YEAR,
        414 * YEAR,
        YEAR - SECOND,
        SECOND,
        90 * YEAR,
    ] {
        clock.advance(step);
        waited += step;
        let denied = limiter.try_acquire(1).unwrap_err();
        let retry = denied.retry_after().expect("a time");
        assert!(
            waited + retry >= 500 * YEAR,
            "at {waited:?}: retry after {retry:?}"
        );
    }
}

/// Every limiter of 10 a second, asked 1,000 times over the clock's last second and
/// 1,000 times more at its last instant: what it admits, and of that, at the end.
fn admitted_at_the_clocks_end<A: Algorithm>(algorithm: A) -> (usize, usize) {
    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 1_000_000_000));
    let limiter = Limiter::with_clock(algorithm, clock.clone());
    let mut admitted = 0;
    for _ in 0..1_000 {
        clock.advance(Duration::from_millis(1));
        admitted += usize::from(limiter.try_acquire(1).is_ok());
    }
    assert_eq!(clock.now(), Nanos::MAX);
    let at_the_end = (0..1_000)
        .filter(|_| limiter.try_acquire(1).is_ok())
        .count();
    (admitted + at_the_end, at_the_end)
}

/// Regression: with a clock within a second of `u64::MAX` ns, `Gcra`, `LeakyBucket` and
/// `SlidingLog` admitted 1,000 requests of 1,000 against a limit of 10: times past the
/// clock's end saturated at its last instant, where everything had "expired".
#[test]
fn near_the_clocks_end_no_limiter_admits_more_than_its_limit() {
    let ten = Quota::per_second(10).unwrap();
    let cases = [
        ("gcra", admitted_at_the_clocks_end(Gcra::new(ten))),
        (
            "leaky bucket",
            admitted_at_the_clocks_end(LeakyBucket::new(10, ten).unwrap()),
        ),
        (
            "sliding log",
            admitted_at_the_clocks_end(SlidingLog::new(10, SECOND).unwrap()),
        ),
        (
            "fixed window",
            admitted_at_the_clocks_end(FixedWindow::new(10, SECOND).unwrap()),
        ),
        (
            "first-hit window",
            admitted_at_the_clocks_end(FixedWindow::from_first_hit(10, SECOND).unwrap()),
        ),
        (
            "sliding counter",
            admitted_at_the_clocks_end(SlidingCounter::new(10, SECOND).unwrap()),
        ),
        (
            "refresh period",
            admitted_at_the_clocks_end(RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap()),
        ),
        (
            "smooth bursty",
            admitted_at_the_clocks_end(SmoothBursty::new(10.0).unwrap()),
        ),
        (
            "smooth warming up",
            admitted_at_the_clocks_end(SmoothWarmingUp::new(10.0, SECOND).unwrap()),
        ),
    ];
    for (name, (admitted, at_the_end)) in cases {
        // One window of the limit, one more window's refill across the second, and no
        // more than one window's worth once the clock has stopped.
        assert!((1..=20).contains(&admitted), "{name}: {admitted} admitted");
        assert!(
            at_the_end <= 10,
            "{name}: {at_the_end} admitted at the clock's end"
        );
    }
}

/// Regression: `Concurrency` and `Leased` denials said `retry_after: 0ns`, as if
/// permits were free now; they come back when a holder releases them.
#[test]
fn a_denial_by_a_concurrency_limit_waits_for_a_release_not_for_zero() {
    let semaphore = Semaphore::new(1).unwrap();
    let _held = semaphore.try_acquire(1).unwrap();
    let denied = semaphore.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry(), Some(Retry::OnRelease));
    assert_eq!(denied.retry_after(), None);
    assert!(denied.is_limited());
    assert_eq!(
        denied.to_string(),
        "limited, retry once permits are released"
    );

    // The same, leased through a store.
    #[cfg(feature = "store")]
    {
        let clock = ManualClock::new();
        let store =
            MemoryStore::with_clock(KeyedConfig::new(10), "extremes", clock.clone()).unwrap();
        let leased = Leased::new(Concurrency::new(1).unwrap(), 30 * SECOND).unwrap();
        let limiter = SharedLimiter::new(store, leased).unwrap();
        assert!(limiter.try_acquire("k", 1).unwrap().unwrap().is_ok());
        let denied = limiter.try_acquire("k", 1).unwrap().unwrap().unwrap_err();
        assert_eq!(denied.retry(), Some(Retry::OnRelease));
    }
}

/// Regression: `Leased::new` took `Duration::MAX` and saturated it; a lease past the
/// clock's range is refused, naming the longest accepted.
#[test]
fn every_period_past_the_clocks_range_is_refused_naming_the_longest() {
    let longest = Quota::MAX_PERIOD;
    let past = longest + Duration::from_nanos(1);
    let refusals: [(&str, Result<(), ConfigError>); 10] = [
        ("period", Quota::new(1, past).map(drop)),
        ("window", FixedWindow::new(1, past).map(drop)),
        ("window", FixedWindow::from_first_hit(1, past).map(drop)),
        ("window", SlidingLog::new(1, past).map(drop)),
        (
            "min_gap",
            SlidingLog::new(1, SECOND).unwrap().min_gap(past).map(drop),
        ),
        (
            "window",
            SlidingLog::new(1, SECOND).unwrap().set_window(past),
        ),
        ("window", SlidingCounter::new(1, past).map(drop)),
        (
            "refresh_period",
            RefreshPeriod::new(1, past, SECOND).map(drop),
        ),
        (
            "lease",
            Leased::new(Concurrency::new(1).unwrap(), past).map(drop),
        ),
        (
            "lease",
            Leased::new(Concurrency::new(1).unwrap(), Duration::MAX).map(drop),
        ),
    ];
    for (parameter, refused) in refusals {
        let e = refused.unwrap_err();
        assert!(
            matches!(e, ConfigError::TooLong { parameter: p, max, .. } if p == parameter && max == longest),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with("the longest accepted is 18446744073.709551615s (about 584 years)"),
            "{e}"
        );
    }
    // The longest itself is accepted everywhere.
    assert!(Quota::new(1, longest).is_ok());
    assert!(FixedWindow::new(1, longest).is_ok());
    assert!(FixedWindow::from_first_hit(1, longest).is_ok());
    assert!(
        SlidingLog::new(1, longest)
            .unwrap()
            .min_gap(longest)
            .is_ok()
    );
    assert!(SlidingCounter::new(1, longest).is_ok());
    assert!(RefreshPeriod::new(1, longest, Duration::MAX).is_ok());
    assert!(Leased::new(Concurrency::new(1).unwrap(), longest).is_ok());
    // Guava's limiters count microseconds in doubles: their warm-up stops at 2^53 µs.
    let warm = SmoothWarmingUp::new(1.0, Duration::from_micros((1 << 53) + 1)).unwrap_err();
    assert!(warm.to_string().contains("(about 285 years)"), "{warm}");
}

/// Regression: a GCRA request above the burst on a fresh key replied "0 remaining",
/// though nothing was taken; `CL.THROTTLE` replies the whole burst as left.
#[test]
fn a_gcra_request_above_the_burst_replies_with_what_is_left() {
    let limiter = Limiter::with_clock(Gcra::from_cell(4, 1, SECOND).unwrap(), ManualClock::new());
    let never = limiter.try_acquire(6);
    assert!(matches!(never, Err(Denied::Insufficient(_))));
    assert_eq!(CellReply::from_decision(&never), None);
    let left = limiter.peek(0).unwrap();
    assert_eq!(CellReply::never(&left).to_array(), [1, 5, 5, -1, 0]);
    limiter.try_acquire(2).unwrap();
    let left = limiter.peek(0).unwrap();
    assert_eq!(CellReply::never(&left).to_array(), [1, 5, 3, -1, 2]);
}

/// Regression: envoy reads unit names in any case (`Minute`, `SECOND`); the rules file
/// took only `minute` and `MINUTE`.
#[cfg(feature = "config")]
#[test]
fn rules_files_read_unit_names_in_any_case() {
    use tollgate::config::{RuleSet, Unit};

    let rules = RuleSet::from_yaml(
        "
domain: api
descriptors:
  - key: a
    rate_limit: { unit: Minute, requests_per_unit: 1 }
  - key: b
    rate_limit: { unit: SECOND, requests_per_unit: 1 }
  - key: c
    rate_limit: { unit: hOuR, requests_per_unit: 1 }
",
    )
    .unwrap();
    let units: Vec<Unit> = rules.limits().iter().map(|l| l.unit()).collect();
    assert_eq!(units, [Unit::Minute, Unit::Second, Unit::Hour]);
    let unknown = RuleSet::from_yaml(
        "
domain: api
descriptors:
  - key: a
    rate_limit: { unit: Fortnight, requests_per_unit: 1 }
",
    )
    .unwrap_err();
    assert!(unknown.to_string().contains("'Fortnight'"), "{unknown}");
}

/// Regression: `examples/rate_limited_server.rs` printed a broken rules file's error
/// in `Debug` form (what returning it from `main` prints), not as the README shows it.
/// Runs the example built beside this test; `cargo test` builds examples unless told
/// to build only some targets, and then this test says so and skips.
#[cfg(all(feature = "axum", feature = "config"))]
#[test]
fn rate_limited_server_prints_a_broken_rules_file_as_people_read_it() {
    use std::process::Command;

    let deps = std::env::current_exe().unwrap();
    let example = deps
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("rate_limited_server"))
        .unwrap();
    if !example.exists() {
        eprintln!("note: skipping: {} was not built", example.display());
        return;
    }
    let rules = std::env::temp_dir().join(format!("tollgate-broken-{}.yaml", std::process::id()));
    std::fs::write(
        &rules,
        "domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      \
         unit: fortnight\n      requests_per_unit: 10\n",
    )
    .unwrap();
    let expected = tollgate::config::RuleSet::from_file(&rules).unwrap_err();
    let output = Command::new(&example)
        .arg("--rules")
        .arg(&rules)
        .output()
        .unwrap();
    std::fs::remove_file(&rules).unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    // As `Display` prints it, `file:line:column: message`, not in `Debug` form.
    assert_eq!(stderr, format!("error: {expected}\n"));
    assert!(
        stderr.contains(&format!("{}:5:", rules.display())),
        "{stderr}"
    );
}

/// Regression: a 429 for a permit in use said `Retry-After: 1` (a zero wait, rounded
/// up to the least the field says); a release comes at no known time, so the answer
/// has no `Retry-After` and no `t`.
#[cfg(feature = "axum")]
#[tokio::test]
async fn a_429_for_a_permit_in_use_sends_no_retry_after() {
    use axum::Router;
    use axum::routing::get;
    use http::StatusCode;
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tollgate::http::server::RateLimitLayer;
    use tollgate::http::{Global, KeyedLimits};

    let clock = ManualClock::new();
    let store = MemoryStore::with_clock(KeyedConfig::new(10), "extremes", clock).unwrap();
    let leased = Leased::new(Concurrency::new(1).unwrap(), 30 * SECOND).unwrap();
    let limiter = SharedLimiter::all_of(store, [("uploads", leased.into())]).unwrap();
    let layer = RateLimitLayer::new(KeyedLimits::new(Global, limiter));
    // The first request holds its permit until its response ends: the handler
    // answers once the test lets it.
    let entered = std::sync::Arc::new(tokio::sync::Notify::new());
    let go = std::sync::Arc::new(tokio::sync::Notify::new());
    let (entered_in, go_in) = (entered.clone(), go.clone());
    let app = Router::new()
        .route(
            "/",
            get(move || async move {
                entered_in.notify_one();
                go_in.notified().await;
                "hello"
            }),
        )
        .layer(layer);
    let addr = common::http::serve(app).await;

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
    let first = tokio::spawn(client.get(uri.clone()));
    entered.notified().await;
    let denied = client.get(uri).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(
        denied.headers().get("retry-after").is_none(),
        "{:?}",
        denied.headers()
    );
    assert_eq!(denied.headers()["ratelimit"], r#""uploads";r=0"#);
    let body = denied.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert_eq!(
        body,
        r#"{"error":"rate_limited","message":"rate limit \"uploads\" exceeded: retry once a request in progress completes","policy":"uploads"}"#
    );
    go.notify_one();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), StatusCode::OK);
}

#[cfg(feature = "redis")]
mod redis_store {
    use super::*;
    use crate::common::redis::{RedisServer, require_redis};
    use tollgate::store::{RedisStore, StoreError};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Regression: `SharedLimiter::new` refused `Leased(Concurrency, Duration::MAX)`
    /// saying the lease was not a whole number of microseconds; it is too long for
    /// the Redis scripts' arithmetic, and the error says so and gives the longest.
    #[test]
    fn a_lease_too_long_for_redis_is_refused_naming_the_longest() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let runtime = runtime();
        let store = runtime
            .block_on(RedisStore::connect(&server.url(), "extremes"))
            .unwrap();
        let longest = Leased::new(Concurrency::new(1).unwrap(), Quota::MAX_PERIOD).unwrap();
        let Err(StoreError::Config(e)) = SharedLimiter::new(store.clone(), longest) else {
            panic!("accepted a lease of 584 years");
        };
        assert_eq!(
            e.to_string(),
            "lease is too long for the Redis scripts' arithmetic (whole microseconds, exact \
             in a double): the longest accepted is 4503599627.370496s (about 142 years)"
        );
        let fits = Leased::new(Concurrency::new(1).unwrap(), Duration::from_micros(1 << 52));
        assert!(SharedLimiter::new(store, fits.unwrap()).is_ok());
    }

    /// Redis's twin of the release: its script answers a wait of -1, not 0, and the
    /// store reads it as a wait for a release.
    #[test]
    fn a_redis_concurrency_denial_waits_for_a_release() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let runtime = runtime();
        let store = runtime
            .block_on(RedisStore::connect(&server.url(), "extremes"))
            .unwrap();
        let leased = Leased::new(Concurrency::new(1).unwrap(), 30 * SECOND).unwrap();
        let limiter = SharedLimiter::new(store, leased).unwrap();
        let first = runtime.block_on(limiter.check("k", 1)).unwrap();
        assert!(first.is_ok());
        let denied = runtime
            .block_on(limiter.check("k", 1))
            .unwrap()
            .unwrap_err();
        assert_eq!(denied.retry(), Some(Retry::OnRelease));
    }

    /// The scripts' twin of the clock's end: an explicit time past 2^52 µs (the year
    /// 2112) would lose the microseconds a rule's spans add in the scripts' doubles,
    /// so that a GCRA's TAT stopped moving and everything passed; it is refused.
    #[test]
    fn redis_refuses_explicit_times_its_doubles_cannot_hold() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let runtime = runtime();
        let store = runtime
            .block_on(RedisStore::connect(&server.url(), "extremes"))
            .unwrap();
        let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10).unwrap())).unwrap();
        let last = Duration::from_micros(1 << 52);
        assert!(
            runtime
                .block_on(limiter.check_at("k", 1, last))
                .unwrap()
                .is_ok()
        );
        let past = Duration::from_micros((1 << 52) + 1);
        let Err(StoreError::Config(e)) = runtime.block_on(limiter.check_at("k", 1, past)) else {
            panic!("decided at a time past 2^52 µs");
        };
        assert!(
            matches!(
                e,
                ConfigError::TooLong {
                    parameter: "at",
                    ..
                }
            ),
            "{e:?}"
        );
        let far = Duration::from_micros(u64::MAX);
        assert!(runtime.block_on(limiter.check_at("k", 1, far)).is_err());
    }
}

/// One key of a keyed limiter and a plain `Limiter` (both starting with the first
/// request), side by side over the clock's last second and at its last instant, the keyed one swept after every request: their
/// decisions must agree.
fn keyed_agrees_with_a_limiter_at_the_clocks_end<A: Algorithm>(name: &str, algorithm: A) {
    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 1_000_000_000));
    let plain = Limiter::with_clock(algorithm.clone(), clock.clone());
    let keyed: KeyedLimiter<u32, A, ManualClock> =
        KeyedLimiter::with_clock(algorithm, KeyedConfig::new(4).shards(1), clock.clone()).unwrap();
    let mut admitted = 0;
    for step in 0..2_001 {
        let expected = plain.try_acquire(1);
        admitted += usize::from(expected.is_ok());
        let got = keyed.try_acquire(&0, 1);
        assert_eq!(
            got.is_ok(),
            expected.is_ok(),
            "{name}, step {step}: keyed {got:?}, plain {expected:?}"
        );
        keyed.sweep();
        if step < 1_000 {
            clock.advance(Duration::from_millis(1));
        }
    }
    assert_eq!(clock.now(), Nanos::MAX);
    assert!(
        admitted <= 20,
        "{name}: the plain limiter admitted {admitted}"
    );
}

/// Regression: at the clock's end a keyed limiter stopped limiting. A state idle past
/// the end saturated its idle time to `Nanos::MAX`, which the table read as idle at
/// the last instant: at `Nanos::MAX` a key was never stored (`SlidingLog` 10 per second
/// admitted 1,000 of 1,000 and `len()` stayed 0) and `sweep()` forgot keys spent just
/// before it. Every algorithm, against a plain `Limiter`.
#[test]
fn a_keyed_limiter_at_the_clocks_end_limits_as_a_limiter_does() {
    let ten = Quota::per_second(10).unwrap();
    keyed_agrees_with_a_limiter_at_the_clocks_end("gcra", Gcra::new(ten));
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "leaky bucket",
        LeakyBucket::new(10, ten).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "sliding log",
        SlidingLog::new(10, SECOND).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "fixed window",
        FixedWindow::new(10, SECOND).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "first-hit window",
        FixedWindow::from_first_hit(10, SECOND).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "sliding counter",
        SlidingCounter::new(10, SECOND).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "refresh period",
        RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "smooth bursty",
        SmoothBursty::new(10.0).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "smooth warming up",
        SmoothWarmingUp::new(10.0, SECOND).unwrap(),
    );
    keyed_agrees_with_a_limiter_at_the_clocks_end("concurrency", Concurrency::new(10).unwrap());
    keyed_agrees_with_a_limiter_at_the_clocks_end(
        "leased",
        Leased::new(Concurrency::new(10).unwrap(), SECOND).unwrap(),
    );
}

/// Regression: a `SlidingLog` key spent half a second before the clock's end was
/// forgotten by `sweep()` at the end, and then admitted its limit again.
#[test]
fn a_key_spent_just_before_the_clocks_end_is_not_swept() {
    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 500_000_000));
    let log = SlidingLog::new(10, SECOND).unwrap();
    let keyed: KeyedLimiter<u32, SlidingLog, ManualClock> =
        KeyedLimiter::with_clock(log, KeyedConfig::new(4), clock.clone()).unwrap();
    keyed.try_acquire(&0, 10).unwrap();
    clock.set(Nanos::MAX);
    assert_eq!(keyed.sweep(), 0);
    assert_eq!(keyed.len(), 1);
    assert!(keyed.try_acquire(&0, 1).is_err());
}

/// A `RefreshPeriod` of 10 a second created 1.1 s before the clock's end: its second
/// cycle starts 100 ms before the end and its third after it, so 20 permits are all
/// that can ever be granted.
fn refresh_period_near_the_end() -> (Limiter<RefreshPeriod, ManualClock>, ManualClock) {
    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 1_100_000_000));
    let limiter = Limiter::with_clock(
        RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap(),
        clock.clone(),
    );
    clock.advance(Duration::from_millis(850));
    (limiter, clock)
}

/// Regression: 250 ms before the clock's end, 100,000 `reserve(1, Duration::MAX)` on a
/// `RefreshPeriod` all succeeded: the waits to cycles past the end saturated, and
/// every booking was due at the end at once. A booking past the end is now denied,
/// with a retry at the end.
#[test]
fn a_refresh_period_books_nothing_past_the_clocks_end() {
    let (limiter, clock) = refresh_period_near_the_end();
    let granted: Vec<_> = (0..100_000)
        .map_while(|_| limiter.reserve(1, Duration::MAX).ok())
        .collect();
    assert_eq!(granted.len(), 20);
    assert!(
        granted
            .iter()
            .all(|r| r.wait() <= Duration::from_millis(150))
    );
    let denied = limiter.reserve(1, Duration::MAX).unwrap_err();
    assert!(denied.is_limited(), "{denied:?}");
    let left = Duration::from_nanos(u64::MAX - clock.now().as_u64());
    assert_eq!(denied.retry_after(), Some(left));
}

/// Regression: the same limiter granted 1,000 `acquire(1)` futures of 1,000 where 20 is
/// the most it can grant: none is granted past that, even at the clock's end, and the
/// rest fail (they waited forever).
#[test]
fn refresh_period_acquires_past_the_clocks_end_are_not_granted() {
    use std::future::Future;
    use std::task::{Context, Poll};

    let (limiter, clock) = refresh_period_near_the_end();
    let mut context = Context::from_waker(futures::task::noop_waker_ref());
    let mut futures: Vec<_> = (0..1_000).map(|_| Box::pin(limiter.acquire(1))).collect();
    let mut granted = 0;
    let mut failed = 0;
    for step in 0..3 {
        futures.retain_mut(|future| match future.as_mut().poll(&mut context) {
            Poll::Ready(Ok(_)) => {
                granted += 1;
                false
            }
            Poll::Ready(Err(_)) => {
                failed += 1;
                false
            }
            Poll::Pending => true,
        });
        if step == 0 {
            clock.set(Nanos::MAX);
        }
    }
    assert_eq!(granted, 20, "{failed} failed, {} pending", futures.len());
    // The rest are due in cycles no clock reaches: they fail, not wait for ever.
    assert_eq!((failed, futures.len()), (980, 0));
}

/// A memory store's key, half a second before the clock's end and at its end (swept
/// there): what one rule of 10 a second admits at the end, and in all.
#[cfg(feature = "store")]
fn store_admits_at_the_clocks_end(rule: tollgate::store::Rule) -> (usize, usize) {
    use tollgate::store::{Check, Op, Request};
    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 500_000_000));
    let store = MemoryStore::with_clock(KeyedConfig::new(4), "end", clock.clone()).unwrap();
    let checks = [Check::new("", &rule)];
    let request = Request::new("key", &checks, Op::Acquire(1));
    let admit = || {
        (0..1_000)
            .filter(|_| store.execute_now(&request).unwrap().is_admitted())
            .count()
    };
    let before = admit();
    clock.set(Nanos::MAX);
    store.sweep();
    let at_the_end = admit();
    assert_eq!(store.len(), 1, "{rule:?}: the key is held");
    (before + at_the_end, at_the_end)
}

/// Regression: the memory store, on the same table, forgot every state at the clock's
/// end (idle times saturated there read as idle): one key of `SlidingLog` 10 per second
/// admitted 1,000 of 1,000 at `Nanos::MAX` and was never stored.
#[cfg(feature = "store")]
#[test]
fn a_memory_store_at_the_clocks_end_still_limits() {
    use tollgate::store::Rule;
    let ten = Quota::per_second(10).unwrap();
    let rules = [
        Rule::from(Gcra::new(ten)),
        Rule::from(LeakyBucket::new(10, ten).unwrap()),
        Rule::from(SlidingLog::new(10, SECOND).unwrap()),
        Rule::from(FixedWindow::new(10, SECOND).unwrap()),
        Rule::from(FixedWindow::from_first_hit(10, SECOND).unwrap()),
        Rule::from(SlidingCounter::new(10, SECOND).unwrap()),
        Rule::from(RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap()),
        Rule::from(SmoothBursty::new(10.0).unwrap()),
        Rule::from(SmoothWarmingUp::new(10.0, SECOND).unwrap()),
    ];
    for rule in rules {
        let (admitted, at_the_end) = store_admits_at_the_clocks_end(rule.clone());
        assert!(admitted <= 20, "{rule:?}: {admitted} admitted");
        assert!(at_the_end <= 10, "{rule:?}: {at_the_end} at the end");
    }
}
