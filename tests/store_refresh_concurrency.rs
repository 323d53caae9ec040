//! Resilience4j's refresh-period limiter and the leased concurrency limit in the
//! stores: each Redis script decides as the memory store (the pure algorithm) under
//! random requests, alone and with a GCRA rule; on the server's clock its keys hold
//! the state and TTL the algorithm implies; and a leased limit frees the permits of a
//! holder that died once the lease has passed.
#![cfg(feature = "redis")]

mod common;

use std::ops::Range;
use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use common::store::{Ask, Differential, EPOCH_MICROS, Step, connect};
use proptest::prelude::*;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::algorithm::{Concurrency, Gcra, Leased, RefreshPeriod};
use tollgate::store::{
    Check, Op, RedisStore, Reply, Request, Rule, SharedLimiter, Store, StoreError,
};
use tollgate::{ConfigError, Denied, Quota};

/// Refresh periods of whole µs from 1 ms to 3 s, 1–10 permits each, timeouts up to
/// 3 s (a store's reservations wait up to the request's own `max_wait`).
fn refresh_period() -> impl Strategy<Value = (Rule, u64)> {
    (1_000u64..3_000_000, 1u64..=10, 0u64..3_000_000).prop_map(|(period, limit, timeout)| {
        let rule = RefreshPeriod::new(
            limit,
            Duration::from_micros(period),
            Duration::from_micros(timeout),
        )
        .unwrap();
        (Rule::from(rule), period)
    })
}

/// 1–10 permits, leases of whole µs from 1 ms to 3 s.
fn leased() -> impl Strategy<Value = (Rule, u64)> {
    (1u64..=10, 1_000u64..3_000_000).prop_map(|(max, lease)| {
        let limit = Concurrency::new(max).unwrap();
        let rule = Leased::new(limit, Duration::from_micros(lease)).unwrap();
        (Rule::from(rule), lease)
    })
}

/// Intervals of whole µs from 1 ms to 2 s, bursts 1–8.
fn gcra() -> impl Strategy<Value = Rule> {
    (1_000u64..2_000_000, 1u64..8).prop_map(|(interval, burst)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        Rule::from(Gcra::new(quota.burst(burst).unwrap()))
    })
}

/// Steps whose gaps and waits often are whole multiples of `unit` (a refresh period
/// or a lease) or one µs either side of one, so that cycle boundaries and lease ends
/// are hit exactly; for up to `max_n` permits (sometimes one more).
fn steps_around(unit: u64, max_n: u64, len: Range<usize>) -> impl Strategy<Value = Vec<Step>> {
    let multiple = move |k: u64| k * unit;
    let dt = prop_oneof![
        2 => Just(0u64),
        4 => 0..=unit * 3 / 2,
        1 => Just(unit),
        1 => Just(unit - 1),
        1 => Just(unit + 1),
        1 => (2u64..4).prop_map(multiple),
    ];
    let max_wait = prop_oneof![
        1 => Just(0u64),
        2 => 0..=unit * 3,
        1 => (1u64..4).prop_map(multiple),
        1 => (1u64..4).prop_map(move |k| k * unit - 1),
    ];
    let ask = prop_oneof![
        5 => Just(Ask::Acquire),
        1 => Just(Ask::Peek),
        2 => Just(Ask::Reserve),
        2 => Just(Ask::Refund),
    ];
    let step = (dt, ask, 0..=max_n + 1, max_wait, 0u8..2).prop_map(
        |(dt_micros, ask, n, max_wait_micros, tag)| Step {
            dt_micros,
            ask,
            n,
            max_wait_micros,
            tag,
        },
    );
    prop::collection::vec(step, len)
}

/// A rule of `rule`, a start, and steps around its time unit for up to `max_n`
/// permits.
fn case(
    rule: impl Strategy<Value = (Rule, u64)>,
    max_n: u64,
) -> impl Strategy<Value = (Rule, u64, Vec<Step>)> {
    rule.prop_flat_map(move |(rule, unit)| {
        (
            Just(rule),
            0u64..1_000_000_000,
            steps_around(unit, max_n, 1..32),
        )
    })
}

#[test]
fn refresh_period_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    // Up to 20 permits: reservations book several cycles ahead.
    diff.run(
        64,
        case(refresh_period(), 20),
        |diff, (rule, start, steps)| diff.check(&[rule], start, &steps),
    );
}

#[test]
fn refresh_period_with_gcra_decides_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (case(refresh_period(), 10), gcra());
    diff.run(48, strategy, |diff, ((rule, start, steps), gcra)| {
        diff.check(&[rule, gcra], start, &steps)
    });
}

#[test]
fn leased_concurrency_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    diff.run(64, case(leased(), 10), |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn leased_concurrency_with_gcra_decides_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (case(leased(), 10), gcra());
    diff.run(48, strategy, |diff, ((rule, start, steps), gcra)| {
        diff.check(&[gcra, rule], start, &steps)
    });
}

/// The server's clock, µs since the epoch.
async fn server_micros(connection: &mut MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(connection).await.unwrap();
    secs * 1_000_000 + micros
}

/// A key's state, as its space-separated integers.
async fn state(connection: &mut MultiplexedConnection, key: &str) -> Vec<i64> {
    let text: String = connection.get(key).await.unwrap();
    // "<kind>:<fields>".
    let (_, fields) = text.split_once(':').expect("a kind before the state");
    fields.split(' ').map(|f| f.parse().unwrap()).collect()
}

#[tokio::test]
async fn refresh_period_on_the_server_clock_keeps_its_cycle_start_and_ttl() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    // 3 permits every 10 s.
    let rule = RefreshPeriod::new(3, Duration::from_secs(10), Duration::ZERO).unwrap();
    let limiter =
        SharedLimiter::new(RedisStore::new(connection.clone(), "r4j").unwrap(), rule).unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 2).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 1);
    // The first request starts cycle 0: the full limit is back 10 s on.
    assert_eq!(admitted.reset_after(), Duration::from_secs(10));
    let s = state(&mut connection, &key).await;
    assert!(
        before <= s[0] && s[0] <= after,
        "start {} not in [{before}, {after}]",
        s[0]
    );
    assert_eq!(s[1..], [0, 1], "cycle 0 with 1 permit left");
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 9_000 && ttl <= 11_000,
        "ttl {ttl} ms for 10 s and 1 s of slack"
    );

    // Reserving 3 books the next cycle: the permits go negative.
    let reservation = limiter
        .reserve("k", 3, Duration::from_secs(15))
        .await
        .unwrap()
        .unwrap();
    let at = server_micros(&mut connection).await;
    let wait = reservation.wait().as_micros() as i64;
    assert!(
        wait <= 10_000_000 && wait >= 10_000_000 - (at - s[0]),
        "wait {wait} µs"
    );
    let booked = state(&mut connection, &key).await;
    assert_eq!(booked, [s[0], 0, -2], "2 permits of the next cycle booked");
    // Full again two cycles on: 20 s after the start.
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 19_000 && ttl <= 21_000,
        "ttl {ttl} ms for 20 s and 1 s of slack"
    );

    // A denial changes nothing; a refund gives the booking back.
    let denied = limiter.check("k", 1).await.unwrap().unwrap_err();
    assert!(denied.is_limited());
    assert_eq!(state(&mut connection, &key).await, booked);
    limiter.refund("k", 3).await.unwrap();
    assert_eq!(state(&mut connection, &key).await, [s[0], 0, 1]);
}

#[tokio::test]
async fn leased_concurrency_on_the_server_clock_keeps_its_lease_and_ttl() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let rule = Leased::new(Concurrency::new(3).unwrap(), Duration::from_secs(30)).unwrap();
    let limiter =
        SharedLimiter::new(RedisStore::new(connection.clone(), "conc").unwrap(), rule).unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 2).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 1);
    let s = state(&mut connection, &key).await;
    assert_eq!(s[0], 2, "2 permits held");
    assert!(
        before <= s[1] && s[1] <= after,
        "renewed at {} not in [{before}, {after}]",
        s[1]
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 29_000 && ttl <= 31_000,
        "ttl {ttl} ms for 30 s and 1 s of slack"
    );

    let denied = limiter.check("k", 2).await.unwrap().unwrap_err();
    match denied {
        Denied::Limited(l) => {
            assert_eq!(l.remaining(), 1);
            assert_eq!(l.retry_after(), None, "permits return by release");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        state(&mut connection, &key).await,
        s,
        "a denial renews nothing"
    );

    limiter.refund("k", 1).await.unwrap();
    assert_eq!(state(&mut connection, &key).await[0], 1);
    limiter.refund("k", 1).await.unwrap();
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "nothing held: the key is gone");
}

#[tokio::test]
async fn a_leased_limit_frees_the_permits_of_a_holder_that_never_released_them() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let lease = 5_000_000;
    let rule = Rule::from(
        Leased::new(Concurrency::new(2).unwrap(), Duration::from_micros(lease)).unwrap(),
    );
    let store = RedisStore::new(connection.clone(), "lease").unwrap();
    let checks = [Check::new("", &rule)];
    let key = store.redis_key("k", "");
    let run = |op: Op, micros: u64| {
        let request =
            Request::new("k", &checks, op).at(Duration::from_micros(EPOCH_MICROS + micros));
        let store = store.clone();
        async move { store.execute(&request).await.unwrap() }
    };

    // A holder takes both permits, then dies without releasing them.
    assert!(run(Op::Acquire(2), 0).await.is_admitted());
    let denied = run(Op::Acquire(1), lease - 1).await;
    assert!(!denied.is_admitted(), "held until the lease ends");
    // Once the lease has passed, the dead holder's permits are free.
    let Reply::Decision(Ok(admitted)) = run(Op::Acquire(1), lease).await else {
        panic!("not admitted after the lease");
    };
    assert_eq!(admitted.remaining(), 1);
    assert_eq!(
        state(&mut connection, &key).await,
        [1, (EPOCH_MICROS + lease) as i64]
    );

    // A live holder's acquire renews the lease of every permit held.
    assert!(run(Op::Acquire(1), lease + 4_000_000).await.is_admitted());
    let still_held = run(Op::Acquire(1), 2 * lease + 1).await;
    assert!(!still_held.is_admitted(), "renewed at lease + 4 s");
    // One release renews the rest; releasing more than is held frees everything.
    assert_eq!(run(Op::Refund(1), 2 * lease + 2).await, Reply::Refunded);
    assert_eq!(
        state(&mut connection, &key).await,
        [1, (EPOCH_MICROS + 2 * lease + 2) as i64]
    );
    assert_eq!(run(Op::Refund(5), 2 * lease + 3).await, Reply::Refunded);
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "nothing held: the key is gone");
}

#[tokio::test]
async fn malformed_states_are_conflicts_and_inexact_rules_are_typed_errors() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let store = RedisStore::new(connection.clone(), "bad").unwrap();
    let refresh = RefreshPeriod::new(2, Duration::from_secs(1), Duration::ZERO).unwrap();
    let leased = Leased::new(Concurrency::new(2).unwrap(), Duration::from_secs(1)).unwrap();
    let refresh = SharedLimiter::new(store.clone(), refresh).unwrap();
    let leased = SharedLimiter::new(store.clone(), leased).unwrap();
    let cases: [(&str, &[&str]); 2] = [
        ("r", &["x", "1 2", "1 2 3 4", "1.5 0 1", "1 0 -0.5"]),
        ("c", &["x", "1", "1 2 3", "-1 5", "1.5 5", "1 5.5"]),
    ];
    for (key, states) in cases {
        for stored in states {
            // Under the rule's own kind, so that the state's parser must refuse it.
            let kind = if key == "r" {
                "refresh_period"
            } else {
                "concurrency"
            };
            let () = connection
                .set(store.redis_key(key, ""), format!("{kind}:{stored}"))
                .await
                .unwrap();
            let result = if key == "r" {
                refresh.check(key, 1).await
            } else {
                leased.check(key, 1).await
            };
            assert!(
                matches!(result, Err(StoreError::KeyConflict { .. })),
                "{key} = {stored:?}: {result:?}"
            );
        }
    }

    let sub_micro = RefreshPeriod::new(1, Duration::from_nanos(2_500), Duration::ZERO).unwrap();
    assert!(matches!(
        SharedLimiter::new(store.clone(), sub_micro),
        Err(StoreError::Config(ConfigError::OutOfRange {
            parameter: "refresh_period",
            ..
        }))
    ));
    let too_fast = RefreshPeriod::new(3, Duration::from_micros(1), Duration::ZERO).unwrap();
    assert!(matches!(
        SharedLimiter::new(store.clone(), too_fast),
        Err(StoreError::Config(ConfigError::OutOfRange {
            parameter: "limit_for_period",
            ..
        }))
    ));
    let sub_micro = Leased::new(Concurrency::new(1).unwrap(), Duration::from_nanos(1_500)).unwrap();
    assert!(matches!(
        SharedLimiter::new(store, sub_micro),
        Err(StoreError::Config(ConfigError::OutOfRange {
            parameter: "lease",
            ..
        }))
    ));
}
