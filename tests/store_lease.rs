//! `LeaseLimiter` against a real `redis-server`: simulated nodes (each its own limiter
//! and connection) on one key never admit more than the limit, slices shrink near the
//! limit, unused permits go back (released, at the end of a lease, when the last
//! clone is dropped), a dead node's slice is bounded, a lease from before a Redis
//! restart names nothing after it, and bad input is a typed error.
//!
//! Fixed windows here start when the test does (an offset puts a window's start on
//! the current millisecond), so no window ends during a test. Lease terms run on a
//! `ManualClock` unless a test needs real time (the GCRA bound, the records' expiry).
#![cfg(feature = "redis")]

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::redis::{RedisServer, require_redis};
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use tollgate::algorithm::{FixedWindow, Gcra, SlidingCounter, SlidingLog};
use tollgate::store::{LeaseLimiter, Rule, StoreError};
use tollgate::time::{Clock, ManualClock, MonotonicClock};
use tollgate::{ConfigError, Denied, Quota};

type Node = LeaseLimiter<MultiplexedConnection, ManualClock>;

async fn connect(server: &RedisServer) -> MultiplexedConnection {
    let client = redis::Client::open(server.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// A fixed window of `length` whose current window started at most a millisecond ago.
fn window_from_now(limit: u64, length: Duration) -> FixedWindow {
    let length_ms = length.as_millis() as u64;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Window i starts at i × length − offset: put a start on now.
    let offset_ms = (length_ms - now_ms % length_ms) % length_ms;
    FixedWindow::new(limit, length)
        .unwrap()
        .aligned_to_unix_epoch(Duration::from_millis(offset_ms))
}

fn hour_window(limit: u64) -> Rule {
    Rule::from(window_from_now(limit, Duration::from_secs(3_600)))
}

async fn node(server: &RedisServer, clock: &ManualClock, rule: &Rule) -> Node {
    LeaseLimiter::with_clock(connect(server).await, "l", rule.clone(), clock.clone()).unwrap()
}

/// The permits granted in the current window, as Redis counts them.
async fn granted(probe: &mut MultiplexedConnection, key: &str) -> u64 {
    let granted: Option<u64> = probe.hget(key, "g").await.unwrap();
    granted.unwrap_or(0)
}

async fn tat(probe: &mut MultiplexedConnection, key: &str) -> u64 {
    let tat: Option<u64> = probe.hget(key, "t").await.unwrap();
    tat.unwrap_or(0)
}

/// Takes one permit at a time until denied; the permits admitted.
async fn drain<C: Clock>(node: &LeaseLimiter<MultiplexedConnection, C>, tag: &str) -> u64 {
    let mut admitted = 0;
    while node.check(tag, 1).await.unwrap().is_ok() {
        admitted += 1;
    }
    admitted
}

#[tokio::test]
async fn only_windows_sliding_counters_and_gcras_are_accepted() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let connection = connect(&server).await;
    let rejected = [
        Rule::from(SlidingLog::new(10, Duration::from_secs(1)).unwrap()),
        Rule::from(FixedWindow::from_first_hit(10, Duration::from_secs(1)).unwrap()),
        Rule::from(
            FixedWindow::new(10, Duration::from_secs(1))
                .unwrap()
                .counting_denied()
                .unwrap(),
        ),
    ];
    for rule in rejected {
        let error = LeaseLimiter::new(connection.clone(), "l", rule).unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::Config(ConfigError::OutOfRange {
                    parameter: "rule",
                    ..
                })
            ),
            "{error:?}"
        );
    }
    // Times the script cannot hold exactly.
    let sub_micro = Gcra::new(Quota::with_period(Duration::from_nanos(1_500)).unwrap());
    assert!(matches!(
        LeaseLimiter::new(connection.clone(), "l", sub_micro),
        Err(StoreError::Config(ConfigError::OutOfRange { .. }))
    ));
    let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    assert!(matches!(
        LeaseLimiter::new(connection.clone(), "a{b", window),
        Err(StoreError::Config(ConfigError::OutOfRange {
            parameter: "prefix",
            ..
        }))
    ));
    let gcra = Gcra::new(Quota::per_second(100).unwrap());
    assert!(LeaseLimiter::new(connection, "l", gcra).is_ok());
}

#[tokio::test]
async fn bad_sizes_and_terms_are_typed_errors() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let limiter = LeaseLimiter::new(connect(&server).await, "l", hour_window(100)).unwrap();
    let zero = |e: ConfigError, name: &str| {
        assert!(
            matches!(e, ConfigError::Zero { parameter } if parameter == name),
            "{e:?}"
        )
    };
    let range = |e: ConfigError, name: &str| {
        assert!(
            matches!(e, ConfigError::OutOfRange { parameter, .. } if parameter == name),
            "{e:?}"
        )
    };
    zero(limiter.clone().with_max_slice(0).unwrap_err(), "max_slice");
    range(
        limiter.clone().with_max_slice(101).unwrap_err(),
        "max_slice",
    );
    range(
        limiter.clone().with_max_slice(u64::MAX).unwrap_err(),
        "max_slice",
    );
    assert_eq!(
        limiter.clone().with_max_slice(100).unwrap().max_slice(),
        100
    );
    zero(limiter.clone().with_divisor(0).unwrap_err(), "divisor");
    range(
        limiter.clone().with_divisor(u64::MAX).unwrap_err(),
        "divisor",
    );
    zero(
        limiter
            .clone()
            .with_refill_period(Duration::ZERO)
            .unwrap_err(),
        "refill_period",
    );
    range(
        limiter
            .clone()
            .with_refill_period(Duration::from_secs(1))
            .unwrap_err(),
        "refill_period",
    );
    zero(
        limiter.clone().with_lease_term(Duration::ZERO).unwrap_err(),
        "term",
    );
    range(
        limiter
            .clone()
            .with_lease_term(Duration::from_nanos(1_500))
            .unwrap_err(),
        "term",
    );
    assert!(matches!(
        limiter.clone().with_lease_term(Duration::MAX),
        Err(ConfigError::TooLong {
            parameter: "term",
            ..
        })
    ));
    assert!(matches!(
        limiter
            .clone()
            .with_lease_term(Duration::from_secs(3_600 * 24 * 365 * 200)),
        Err(ConfigError::TooLong {
            parameter: "term",
            ..
        })
    ));
    zero(limiter.clone().with_max_keys(0).unwrap_err(), "max_keys");
    // A shorter term shortens the refill period with it.
    let short = limiter
        .clone()
        .with_lease_term(Duration::from_millis(5))
        .unwrap();
    assert_eq!(short.refill_period(), Duration::from_millis(5));

    // More than the capacity: never, decided without Redis; a key too long.
    assert!(matches!(
        limiter.check("k", 101).await.unwrap(),
        Err(Denied::Insufficient(_))
    ));
    assert!(matches!(
        limiter.try_acquire("k", u64::MAX),
        Some(Ok(Err(Denied::Insufficient(_))))
    ));
    let long = "k".repeat(2_000);
    assert!(matches!(
        limiter.check(&long, 1).await,
        Err(StoreError::KeyTooLong { .. })
    ));
    assert!(limiter.is_empty());
}

#[tokio::test]
async fn a_key_holding_something_else_is_a_conflict() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let limiter = LeaseLimiter::new(connect(&server).await, "l", hour_window(100)).unwrap();
    let _: () = probe.set(limiter.redis_key("k"), "7").await.unwrap();
    assert!(matches!(
        limiter.check("k", 1).await,
        Err(StoreError::KeyConflict { .. })
    ));
    // A GCRA's state under the same key is another rule's.
    let gcra = LeaseLimiter::new(
        connect(&server).await,
        "l",
        Gcra::new(Quota::per_second(10).unwrap()),
    )
    .unwrap();
    assert!(gcra.check("g", 1).await.unwrap().is_ok());
    let window = LeaseLimiter::new(connect(&server).await, "l", hour_window(10)).unwrap();
    assert!(matches!(
        window.check("g", 1).await,
        Err(StoreError::KeyConflict { .. })
    ));
}

/// Four nodes hammer one key of a fixed window from tasks of their own: together they
/// never admit more than the limit, and once they give back what they hold, Redis
/// counts exactly what they admitted, so a fifth node gets the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_on_one_key_never_admit_more_than_the_limit() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let rule = hour_window(2_000);
    let mut nodes = Vec::new();
    for _ in 0..4 {
        nodes.push(node(&server, &clock, &rule).await);
    }
    let mut tasks = Vec::new();
    for node in &nodes {
        for _ in 0..4 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                let mut denied = 0;
                // Ask until denied a few times in a row: the last slices are one
                // permit each, decided in Redis.
                while denied < 20 {
                    match node.check("k", 1).await.unwrap() {
                        Ok(_) => {
                            admitted += 1;
                            denied = 0;
                        }
                        Err(_) => {
                            denied += 1;
                            tokio::task::yield_now().await;
                        }
                    }
                }
                admitted
            }));
        }
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    let key = nodes[0].redis_key("k");
    let held: u64 = nodes.iter().map(|n| n.held("k")).sum();
    assert!(admitted <= 2_000, "admitted {admitted} of 2,000");
    assert!(granted(&mut probe, &key).await >= admitted + held);

    for node in &nodes {
        node.release_all().await.unwrap();
        assert_eq!(node.held("k"), 0);
    }
    assert_eq!(granted(&mut probe, &key).await, admitted);
    let fifth = node(&server, &clock, &rule).await;
    assert_eq!(admitted + drain(&fifth, "k").await, 2_000);
}

/// The leases live in Redis now, by field: the permits each was granted.
async fn leases(probe: &mut MultiplexedConnection, key: &str) -> HashMap<String, u64> {
    let fields: HashMap<String, String> = probe.hgetall(key).await.unwrap();
    fields
        .into_iter()
        .filter(|(field, _)| field.starts_with("l:"))
        .map(|(field, record)| {
            let permits = record.split(' ').next().unwrap().parse().unwrap();
            (field, permits)
        })
        .collect()
}

/// One node alone: each slice is at most an eighth of what remains, so slices
/// shrink near the limit down to one permit, decided in Redis; the node still admits
/// exactly the limit.
#[tokio::test]
async fn slices_shrink_to_one_permit_near_the_limit() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(800)).await;
    let key = a.redis_key("k");
    let mut admitted = 0;
    let mut seen = HashMap::new();
    let mut slices = Vec::new();
    while a.check("k", 1).await.unwrap().is_ok() {
        admitted += 1;
        for (id, permits) in leases(&mut probe, &key).await {
            if seen.insert(id, permits).is_none() {
                // What was available when it was granted is at most what this node
                // had not admitted before this request.
                let available = 800 - (admitted - 1);
                assert!(
                    permits <= (available / 8).max(1),
                    "a slice of {permits} with at most {available} available"
                );
                slices.push(permits);
            }
        }
    }
    assert_eq!(admitted, 800);
    assert!(slices.len() > 8, "{slices:?}");
    assert!(slices.iter().any(|&s| s >= 50), "{slices:?}");
    assert_eq!(slices.last(), Some(&1), "{slices:?}");
    assert_eq!(granted(&mut probe, &key).await, 800);
}

#[tokio::test]
async fn release_gives_back_what_a_node_holds() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000)).await;
    let key = a.redis_key("k");
    // The first lease is the request alone; the next is sized by the rate seen.
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert_eq!(a.held("k"), 0);
    let admitted = a.check("k", 1).await.unwrap().unwrap();
    let held = a.held("k");
    assert!(held > 10, "held {held}");
    assert_eq!(admitted.remaining(), 1_000 - 2);
    assert_eq!(granted(&mut probe, &key).await, 2 + held);
    // Decisions from the slice cost no round trip, and count nothing in Redis.
    for _ in 0..5 {
        assert!(matches!(a.try_acquire("k", 1), Some(Ok(Ok(_)))));
    }
    assert_eq!(granted(&mut probe, &key).await, 2 + held);
    assert_eq!(a.release("k").await.unwrap(), held - 5);
    assert_eq!(a.held("k"), 0);
    assert_eq!(granted(&mut probe, &key).await, 7);
    assert_eq!(a.release("k").await.unwrap(), 0, "given back twice");
    assert_eq!(granted(&mut probe, &key).await, 7);

    // Every key written expires: with the window, plus a second.
    let keys: Vec<String> = probe.keys("*").await.unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        let ttl: i64 = probe.pttl(&key).await.unwrap();
        assert!(ttl > 3_590_000 && ttl <= 3_601_000, "{key}: PTTL {ttl}");
    }
}

/// A GCRA's lease moves the TAT `n` intervals later; giving back the unused moves it
/// back, as long as the bucket has carried that debt since.
#[tokio::test]
async fn a_gcra_lease_is_a_lease_of_time() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    // 10 per second: an interval of 100 ms, far longer than these calls.
    let rule = Rule::from(Gcra::new(
        Quota::per_second(10).unwrap().burst(100).unwrap(),
    ));
    let a = node(&server, &clock, &rule).await;
    let key = a.redis_key("k");
    assert!(a.check("k", 1).await.unwrap().is_ok());
    let first = tat(&mut probe, &key).await;
    assert!(a.check("k", 1).await.unwrap().is_ok());
    let held = a.held("k");
    assert!(held > 1, "held {held}");
    assert_eq!(tat(&mut probe, &key).await, first + (1 + held) * 100_000);
    assert_eq!(a.release("k").await.unwrap(), held);
    assert_eq!(tat(&mut probe, &key).await, first + 100_000);
    let ttl: i64 = probe.pttl(&key).await.unwrap();
    // The lease record's grace (1 s after the 20 ms term), plus a second.
    assert!(ttl > 1_000 && ttl <= 2_100, "PTTL {ttl}");
}

/// A lease ends after its term on the node's clock: the next decision gives its
/// unused permits back and takes a new one, in one call.
#[tokio::test]
async fn an_ended_lease_goes_back_with_the_next_call() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000)).await;
    let key = a.redis_key("k");
    let mut admitted = 0;
    for _ in 0..3 {
        assert!(a.check("k", 1).await.unwrap().is_ok());
        admitted += 1;
    }
    assert!(a.held("k") > 0);
    assert_eq!(granted(&mut probe, &key).await, admitted + a.held("k"));
    clock.advance(a.lease_term());
    assert_eq!(
        a.try_acquire("k", 1).map(|d| d.is_ok()),
        None,
        "the lease ended"
    );
    assert!(a.check("k", 1).await.unwrap().is_ok());
    admitted += 1;
    assert_eq!(granted(&mut probe, &key).await, admitted + a.held("k"));
}

/// Redis denies: the node holds the denial for a refill period without asking, then
/// asks again.
#[tokio::test]
async fn a_denial_is_held_for_a_refill_period() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let rule = hour_window(3);
    let a = node(&server, &clock, &rule).await;
    let b = node(&server, &clock, &rule).await;
    assert_eq!(drain(&a, "k").await, 3);
    let denied = a.try_acquire("k", 1).unwrap().unwrap().unwrap_err();
    assert!(denied.retry_after().unwrap() > Duration::from_secs(3_500));
    assert!(a.try_acquire("k", 1).unwrap().unwrap().is_err());
    // A look takes nothing and is never held back.
    assert!(a.check("k", 0).await.unwrap().is_ok());
    clock.advance(a.refill_period());
    assert!(a.try_acquire("k", 1).is_none(), "asks Redis again");
    assert!(b.check("k", 1).await.unwrap().is_err());
}

/// A dead node takes its slice with it, no more: the others get the rest at once,
/// and the slice comes back with the next window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_s_slice_comes_back_with_the_next_window() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let clock = ManualClock::new();
    let window = Duration::from_secs(2);
    let rule = Rule::from(window_from_now(1_000, window));
    let started = Instant::now();
    let a = node(&server, &clock, &rule).await;
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.check("k", 1).await.unwrap().is_ok());
    let held = a.held("k");
    assert!(held > 0 && held <= 1_000 / 8);
    // Killed: nothing given back, nothing spawned.
    std::mem::forget(a);
    let b = node(&server, &clock, &rule).await;
    assert_eq!(drain(&b, "k").await, 1_000 - 2 - held);
    // Real time: the window ends on the server's clock.
    loop {
        clock.advance(b.refill_period());
        if b.check("k", 1).await.unwrap().is_ok() {
            break;
        }
        assert!(started.elapsed() < window * 3, "no new window");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started.elapsed() >= window - Duration::from_millis(50));
    assert_eq!(1 + drain(&b, "k").await, 1_000);
}

/// A dead node's GCRA lease records go from Redis once its term and a second of grace
/// have passed on the server's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_s_lease_records_go_after_the_term() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let rule = Rule::from(Gcra::new(Quota::per_second(1_000).unwrap()));
    let a = node(&server, &ManualClock::new(), &rule).await;
    let key = a.redis_key("k");
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.held("k") > 0);
    std::mem::forget(a);
    // The lease it replaced (settled with its next call, which never comes) and
    // the one it held.
    let records: u64 = probe.zcard(format!("{key}:leases")).await.unwrap();
    assert_eq!(records, 2);
    let b =
        LeaseLimiter::with_clock(connect(&server).await, "l", rule, MonotonicClock::new()).unwrap();
    let started = Instant::now();
    loop {
        // A look once b's own lease ended: a call that prunes and takes nothing.
        assert!(b.check("k", 0).await.unwrap().is_ok());
        let records: u64 = probe.zcard(format!("{key}:leases")).await.unwrap();
        if records == 0 && leases(&mut probe, &key).await.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{records} records left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(started.elapsed() >= Duration::from_millis(900));
}

/// The last clone dropped gives back what the node held, from a spawned task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_clone_gives_back_what_it_held() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000)).await;
    let key = a.redis_key("k");
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.held("k") > 0);
    let clone = a.clone();
    drop(a);
    assert!(clone.held("k") > 0, "a clone is the same node");
    drop(clone);
    let started = Instant::now();
    while granted(&mut probe, &key).await != 2 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "nothing given back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn closed_it_denies_and_gives_back() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000)).await;
    let key = a.redis_key("k");
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(a.check("k", 1).await.unwrap().is_ok());
    let held = a.held("k");
    assert_eq!(a.close().await.unwrap(), held);
    assert!(a.is_closed());
    assert_eq!(granted(&mut probe, &key).await, 2);
    assert_eq!(a.check("k", 1).await.unwrap(), Err(Denied::Closed));
    assert_eq!(
        a.clone().try_acquire("k", 1).unwrap().unwrap(),
        Err(Denied::Closed)
    );
}

/// A full table decides a new key exactly in Redis, holding nothing for it; once a
/// held key's lease ends, it makes room.
#[tokio::test]
async fn a_full_table_decides_new_keys_exactly() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000))
        .await
        .with_max_keys(1)
        .unwrap();
    for _ in 0..2 {
        assert!(a.check("x", 1).await.unwrap().is_ok());
    }
    assert!(a.held("x") > 0);
    for expected in 1..=3 {
        assert!(a.check("y", 1).await.unwrap().is_ok());
        assert_eq!(a.held("y"), 0);
        assert_eq!(granted(&mut probe, &a.redis_key("y")).await, expected);
    }
    assert_eq!(a.len(), 1);
    clock.advance(a.lease_term());
    assert!(a.check("y", 1).await.unwrap().is_ok());
    assert_eq!(a.len(), 1);
    assert!(a.check("y", 1).await.unwrap().is_ok());
    assert!(a.held("y") > 0, "y is held now");
}

/// A key forgotten to make room for another gives back what its slice still held:
/// Redis counts only what was admitted, and no lease record of it is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_key_gives_its_leases_back() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(1_000))
        .await
        .with_max_keys(1)
        .unwrap();
    let x = a.redis_key("x");
    for _ in 0..2 {
        assert!(a.check("x", 1).await.unwrap().is_ok());
    }
    assert!(a.held("x") > 0);
    assert_eq!(granted(&mut probe, &x).await, 2 + a.held("x"));
    clock.advance(a.lease_term());
    // "y" needs the room: "x" is forgotten, and its unused permits go back from a
    // task of this runtime.
    assert!(a.check("y", 1).await.unwrap().is_ok());
    assert_eq!(a.held("x"), 0);
    let mut given_back = false;
    for _ in 0..500 {
        if granted(&mut probe, &x).await == 2 && leases(&mut probe, &x).await.is_empty() {
            given_back = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        given_back,
        "granted {}, leases {:?}",
        granted(&mut probe, &x).await,
        leases(&mut probe, &x).await
    );
}

/// Before a Redis restart without persistence, node A holds a lease; after it, B
/// takes one. A's give-back names nothing in the new data set: it credits nothing,
/// and B's lease stays counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_from_before_a_redis_restart_names_nothing_after_it() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let url = server.url();
    let manager = |url: String| async move {
        let client = redis::Client::open(url).unwrap();
        ConnectionManager::new(client).await.unwrap()
    };
    let clock = ManualClock::new();
    let rule = hour_window(1_000);
    let a = LeaseLimiter::with_clock(manager(url.clone()).await, "l", rule.clone(), clock.clone())
        .unwrap();
    for _ in 0..2 {
        assert!(a.check("k", 1).await.unwrap().is_ok());
    }
    assert!(a.held("k") > 0);

    tokio::task::block_in_place(|| server.restart());
    assert_eq!(server.url(), url, "restarted on another port");

    let b = LeaseLimiter::with_clock(manager(url.clone()).await, "l", rule, clock.clone()).unwrap();
    for _ in 0..2 {
        assert!(b.check("k", 1).await.unwrap().is_ok());
    }
    let mut probe = connect(&server).await;
    let key = b.redis_key("k");
    let held = b.held("k");
    let before = granted(&mut probe, &key).await;
    assert_eq!(before, 2 + held);
    // A's connection reconnects; A's leases name nothing now.
    let deadline = Instant::now() + Duration::from_secs(10);
    let credited = loop {
        match a.release("k").await {
            Err(StoreError::Connection(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(credited, 0, "A credited B's permits");
    assert_eq!(granted(&mut probe, &key).await, before);
    assert_eq!(b.release("k").await.unwrap(), held);
    assert_eq!(granted(&mut probe, &key).await, 2);
}

/// GCRA nodes on real time: over the run, the fleet admits at most
/// `burst + rate × (run + term)`, and close to the bucket's own admissions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_nodes_admit_within_burst_plus_rate_over_the_run_and_the_term() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let rule = Rule::from(Gcra::new(
        Quota::per_second(1_000).unwrap().burst(200).unwrap(),
    ));
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(
            LeaseLimiter::with_clock(
                connect(&server).await,
                "g",
                rule.clone(),
                MonotonicClock::new(),
            )
            .unwrap(),
        );
    }
    let term = nodes[0].lease_term();
    let run = Duration::from_millis(400);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for node in &nodes {
        for _ in 0..3 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0u64;
                let began = Instant::now();
                while began.elapsed() < run {
                    if node.check("k", 1).await.unwrap().is_ok() {
                        admitted += 1;
                    }
                    tokio::task::yield_now().await;
                }
                admitted
            }));
        }
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let bound = 200.0 + 1_000.0 * (elapsed + term).as_secs_f64();
    assert!(
        (admitted as f64) <= bound,
        "admitted {admitted} over {elapsed:?}, bound {bound}"
    );
    // Nowhere near stranding the quota: at least the burst and most of the rate.
    let floor = 200.0 + 1_000.0 * run.as_secs_f64() * 0.5;
    assert!(admitted as f64 >= floor, "admitted only {admitted}");
}

#[test]
fn the_limiter_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<LeaseLimiter<MultiplexedConnection>>();
    send_sync::<LeaseLimiter<ConnectionManager, ManualClock>>();
    fn send<T: Send>(_: &T) {}
    let _ = |node: &LeaseLimiter<MultiplexedConnection>| send(&node.check("k", 1));
    let _ = |node: &LeaseLimiter<MultiplexedConnection>| send(&node.release_all());
}

/// Waiting: a waiter sleeps for the denial's `retry_after` and asks again (a GCRA of
/// 100 per second on the monotonic clock: about 10 ms); a timeout shorter than the
/// wait fails at once; more than the capacity never waits; `close` fails waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_waits_for_the_denial_s_retry_after() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let rule = Rule::from(Gcra::new(Quota::per_second(100).unwrap().burst(2).unwrap()));
    let a =
        LeaseLimiter::with_clock(connect(&server).await, "w", rule, MonotonicClock::new()).unwrap();
    let started = Instant::now();
    for _ in 0..6 {
        tokio::time::timeout(Duration::from_secs(5), a.acquire("k", 1))
            .await
            .expect("a wait hung")
            .unwrap();
    }
    // A burst of 2, then one every 10 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(
        a.acquire("k", 3).await,
        Err(tollgate::AcquireError::Insufficient(_))
    ));
    assert_eq!(a.waiters(), 0);

    let clock = ManualClock::new();
    let b = node(&server, &clock, &hour_window(1)).await;
    assert!(b.check("k", 1).await.unwrap().is_ok());
    // The window ends in an hour: a timeout of a second fails at once.
    assert!(matches!(
        b.acquire_timeout("k", 1, Duration::from_secs(1)).await,
        Err(tollgate::AcquireError::TimedOut)
    ));
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.acquire("k", 1).await })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.waiters() == 0 {
        assert!(Instant::now() < deadline, "the waiter never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Callers would overtake the waiter: denied.
    assert!(b.try_acquire("k", 1).unwrap().unwrap().is_err());
    b.close().await.unwrap();
    assert!(matches!(
        waiter.await.unwrap(),
        Err(tollgate::AcquireError::Closed)
    ));
}

#[tokio::test]
async fn decisions_are_reported_with_their_key() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let log = common::events::Log::default();
    let clock = ManualClock::new();
    let a = node(&server, &clock, &hour_window(2))
        .await
        .with_events(common::events::hub("leases", &log));
    assert!(a.check("k", 1).await.unwrap().is_ok());
    assert!(matches!(a.try_acquire("k", 1), None | Some(Ok(Ok(_)))));
    assert!(a.check("k", 2).await.unwrap().is_err());
    let seen = log.all();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.key.as_deref() == Some("k") && s.source == "leases")
    );
    assert_eq!(seen[0].kind, tollgate::observe::EventKind::Admitted);
    assert!(matches!(
        seen.last().unwrap().kind,
        tollgate::observe::EventKind::Denied { .. }
    ));
}

/// A sliding window counter (windows of 2^40 µs, about 12.7 days, so that none ends
/// during the test): nodes never admit past the limit, and what they give back is
/// counted off exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_counter_nodes_never_admit_more_than_the_limit() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut probe = connect(&server).await;
    let clock = ManualClock::new();
    let counter = SlidingCounter::new(500, Duration::from_micros(1 << 40)).unwrap();
    let rule = Rule::from(counter);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(node(&server, &clock, &rule).await);
    }
    let mut admitted = 0;
    for _ in 0..300 {
        for node in &nodes {
            if node.check("k", 1).await.unwrap().is_ok() {
                admitted += 1;
            }
        }
    }
    assert_eq!(
        admitted,
        500 - nodes.iter().map(|n| n.held("k")).sum::<u64>()
    );
    let key = nodes[0].redis_key("k");
    for node in &nodes {
        node.release_all().await.unwrap();
    }
    let current: u64 = probe.hget(&key, "c").await.unwrap();
    assert_eq!(current, admitted);
    let fresh = node(&server, &clock, &rule).await;
    assert_eq!(admitted + drain(&fresh, "k").await, 500);
}

/// A sliding window counter of 100 per second on the server's clock: the window
/// after a full one admits about what the full one no longer weighs (half of it,
/// half-way through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_window_weighs_on_the_next_as_the_sliding_counter_says() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let rule = Rule::from(SlidingCounter::new(100, Duration::from_secs(1)).unwrap());
    let unix = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // Start early in a window, so that filling it does not cross into the next.
    while unix().subsec_millis() > 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let clock = ManualClock::new();
    let a = node(&server, &clock, &rule).await;
    let b = node(&server, &clock, &rule).await;
    assert_eq!(drain(&a, "k").await + drain(&b, "k").await, 100);
    // Half-way through the next window.
    let next = unix().as_secs() + 1;
    while unix() < Duration::from_millis(next * 1_000 + 500) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let fresh = node(&server, &clock, &rule).await;
    let admitted = drain(&fresh, "k").await;
    let late = unix().subsec_millis();
    assert!(late < 900, "the test ran late: {late} ms into the window");
    // The previous window weighs ⌈100 × (1 − elapsed)⌉ when each permit is granted.
    assert!((45..=90).contains(&admitted), "admitted {admitted}");
}
