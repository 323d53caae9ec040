//! The GCRA Redis script against the pure `Gcra`, on real `redis-server` processes:
//! same decisions under explicit time, TTLs on every key, `NOSCRIPT` and restarts
//! handled, typed errors.
#![cfg(feature = "redis")]

mod common;

use std::time::{Duration, Instant};

use common::redis::{RedisServer, require_redis};
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use redis::aio::MultiplexedConnection;
use tollgate::algorithm::Gcra;
use tollgate::store::{RedisStore, SharedLimiter, StoreError};
use tollgate::{Decision, Denied, Quota};

/// A realistic "now": µs since the epoch in 2023, so the script's doubles see real sizes.
const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

fn gcra(interval_micros: u64, burst: u64) -> Gcra {
    let quota = Quota::with_period(Duration::from_micros(interval_micros)).unwrap();
    Gcra::new(quota.burst(burst).unwrap())
}

/// A limiter connected through a `ConnectionManager`, as services use it.
async fn connect(
    url: &str,
    gcra: Gcra,
    prefix: &str,
) -> Result<SharedLimiter<RedisStore<ConnectionManager>>, StoreError> {
    SharedLimiter::new(RedisStore::connect(url, prefix).await?, gcra)
}

async fn connect_raw(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

#[tokio::test]
async fn admitted_calls_set_a_ttl_and_peeks_and_denials_write_nothing() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect_raw(&server.url()).await;
    // 1 per 10 s, burst 2.
    let store = SharedLimiter::new(
        RedisStore::new(connection.clone(), "ttl").unwrap(),
        gcra(10_000_000, 2),
    )
    .unwrap();
    let key = store.store().redis_key("k", "");
    let at = |s: u64| Duration::from_micros(EPOCH_MICROS + s * 1_000_000);

    assert!(store.check_at("k", 0, at(0)).await.unwrap().is_ok());
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "a peek on a fresh key created it");

    assert!(store.check_at("k", 2, at(0)).await.unwrap().is_ok());
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    // 20 s of debt, plus the script's second of slack.
    assert!(ttl > 20_000 && ttl <= 21_000, "ttl {ttl} ms");
    let tat: String = connection.get(&key).await.unwrap();
    // GCRA's value is its TAT in µs, negated: a form no other kind's value takes.
    assert_eq!(tat, format!("-{}", EPOCH_MICROS + 20_000_000));

    let denied = store.check_at("k", 1, at(5)).await.unwrap();
    assert_eq!(
        denied.unwrap_err().retry_after(),
        Some(Duration::from_secs(5))
    );
    let after: String = connection.get(&key).await.unwrap();
    assert_eq!(after, tat, "a denial changed the state");
    let ttl_after: i64 = connection.pttl(&key).await.unwrap();
    assert!(ttl_after <= ttl, "a denial extended the TTL");

    // On the server's clock too.
    let live = SharedLimiter::new(
        RedisStore::new(connection.clone(), "ttl").unwrap(),
        gcra(1_500, 3),
    )
    .unwrap();
    // The server's clock runs on while the reply and the PTTL travel: what has passed
    // since the check was sent bounds how far below its 1,004.5 ms the TTL may read.
    let sent = Instant::now();
    assert!(live.check("live", 3).await.unwrap().is_ok());
    let ttl: i64 = connection
        .pttl(live.store().redis_key("live", ""))
        .await
        .unwrap();
    let passed = i64::try_from(sent.elapsed().as_millis()).unwrap_or(i64::MAX);
    assert!(
        ttl >= 1_004 - passed - 1 && ttl <= 1_005,
        "ttl {ttl} ms for 4.5 ms of debt and 1 s of slack, {passed} ms later"
    );
}

#[tokio::test]
async fn server_time_decides_without_an_explicit_now() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let connection = connect_raw(&server.url()).await;
    let store = SharedLimiter::new(
        RedisStore::new(connection, "time").unwrap(),
        gcra(60_000_000, 2),
    )
    .unwrap();
    assert_eq!(store.check("k", 1).await.unwrap().unwrap().remaining(), 1);
    assert_eq!(store.check("k", 1).await.unwrap().unwrap().remaining(), 0);
    let denied = store.check("k", 1).await.unwrap().unwrap_err();
    let retry = denied.retry_after().unwrap();
    assert!(
        retry > Duration::from_secs(59) && retry <= Duration::from_secs(60),
        "{retry:?}"
    );
}

#[tokio::test]
async fn script_is_reloaded_after_script_flush() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect_raw(&server.url()).await;
    // The scripts' path: the library has no cache that `SCRIPT FLUSH` empties.
    let store = SharedLimiter::new(
        RedisStore::new(connection.clone(), "flush")
            .unwrap()
            .without_functions(),
        gcra(1_000_000, 5),
    )
    .unwrap();
    assert!(store.check("k", 1).await.unwrap().is_ok());
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut connection)
        .await
        .unwrap();
    let admitted = store.check("k", 1).await.unwrap().unwrap();
    assert_eq!(
        admitted.remaining(),
        3,
        "the state survived, the script reloaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_manager_recovers_after_a_server_restart() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let store = connect(&server.url(), gcra(1_000_000, 5), "restart")
        .await
        .unwrap();
    assert!(store.check("k", 1).await.unwrap().is_ok());

    tokio::task::block_in_place(|| server.kill());
    let down = store.check("k", 1).await;
    assert!(matches!(down, Err(StoreError::Connection(_))), "{down:?}");

    tokio::task::block_in_place(|| server.restart());
    let deadline = Instant::now() + Duration::from_secs(10);
    let decision = loop {
        match store.check("k", 1).await {
            Ok(decision) => break decision,
            Err(StoreError::Connection(e)) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no recovery: {e}"),
        }
    };
    // A restart empties the data set (and the script cache): a fresh bucket.
    assert_eq!(decision.unwrap().remaining(), 4);
}

#[tokio::test]
async fn more_than_the_burst_is_insufficient_without_a_round_trip() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let connection = connect_raw(&server.url()).await;
    let store = SharedLimiter::new(
        RedisStore::new(connection, "big").unwrap(),
        gcra(1_000_000, 3),
    )
    .unwrap();
    server.kill();
    let decision = store.check("k", 4).await.unwrap();
    match decision {
        Err(Denied::Insufficient(i)) => assert_eq!((i.requested(), i.capacity()), (4, 3)),
        other => panic!("{other:?}"),
    }
    let down: Result<Decision, StoreError> = store.check("k", 3).await;
    assert!(matches!(down, Err(StoreError::Connection(_))), "{down:?}");
}

#[tokio::test]
async fn malformed_url_is_a_typed_error() {
    for url in ["not a url", "http://127.0.0.1/", "redis://127.0.0.1:99999/"] {
        let error = connect(url, gcra(1_000_000, 1), "bad").await.unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidUrl(_)),
            "{url}: {error:?}"
        );
    }
}

#[tokio::test]
async fn refused_connection_is_a_typed_error() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let started = Instant::now();
    let error = connect(&url, gcra(1_000_000, 1), "refused")
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn quotas_the_script_cannot_count_are_rejected_without_a_round_trip() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let connection = connect_raw(&server.url()).await;
    server.kill();
    let store = RedisStore::new(connection, "x").unwrap();
    // 1/3 s is not a whole number of µs.
    let thirds = Gcra::new(Quota::per_second(3).unwrap());
    let error = SharedLimiter::new(store.clone(), thirds).unwrap_err();
    assert!(
        matches!(&error, StoreError::Config(e) if e.parameter() == "interval"),
        "{error:?}"
    );
    let huge = gcra(1 << 40, 1 << 13);
    let error = SharedLimiter::new(store, huge).unwrap_err();
    assert!(
        matches!(&error, StoreError::Config(e) if e.parameter() == "burst"),
        "{error:?}"
    );
}

// The GCRA script decides a one-key acquire of n = 1..9 inline, before the general
// code is even defined (for speed); any other request goes the general way. The
// inline path must decide, write and expire exactly as the general one: a key driven
// with n written "0k" (not one digit, so general) against one driven with "k".
#[tokio::test]
async fn the_inline_gcra_acquire_decides_and_writes_as_the_general_code() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect_raw(&server.url()).await;
    let script = redis::Script::new(RedisStore::<MultiplexedConnection>::script_source_for(&[
        tollgate::store::RuleKind::Gcra,
    ]));
    // 1 per 3 ms, burst 4 (tolerance 12 ms).
    let (interval, burst) = (3_000u64, 4u64);
    let mut now = EPOCH_MICROS;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |bound: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % bound
    };
    for step in 0..600 {
        // Mostly small steps, now and then one past the state's expiry (a stale key).
        now += match next(20) {
            0 => 30_000_000,
            1 => 0,
            _ => next(4_000),
        };
        // 0 and 5 (above the burst) go the general way on both keys.
        let n = next(6);
        let mut replies = Vec::new();
        for (key, n_text) in [("fast", n.to_string()), ("general", format!("0{n}"))] {
            let reply: redis::Value = script
                .key(key)
                .arg("acquire")
                .arg(&n_text)
                .arg(0)
                .arg(now)
                .arg("gcra")
                .arg(3)
                .arg(interval)
                .arg(interval * burst)
                .arg(burst)
                .invoke_async(&mut connection)
                .await
                .unwrap();
            let value: Option<String> = connection.get(key).await.unwrap();
            let expire_at: i64 = redis::cmd("PEXPIRETIME")
                .arg(key)
                .query_async(&mut connection)
                .await
                .unwrap();
            replies.push((reply, value, expire_at));
        }
        let (fast, general) = (&replies[0], &replies[1]);
        assert_eq!(fast.0, general.0, "step {step}: n {n} at {now}");
        assert_eq!(fast.1, general.1, "step {step}: n {n} at {now}");
        // The TTLs are set from the same decision; the server's clock moves a little
        // between the two calls.
        assert_eq!(fast.2 < 0, general.2 < 0, "step {step}");
        assert!(
            (fast.2 - general.2).abs() <= 100,
            "step {step}: {fast:?} {general:?}"
        );
    }
}
