//! The leaky bucket and both fixed windows (a third of them counting denied acquires)
//! in the stores: the Redis scripts decide as the memory store (the pure algorithms)
//! under random requests, alone and with a GCRA rule; and on the server's own clock, each writes its state in its documented shape
//! with a TTL that ends when the state may be forgotten.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use common::store::{Ask, Differential, Step, connect, server_micros};
use proptest::prelude::*;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::Quota;
use tollgate::algorithm::{FixedWindow, Gcra, LeakyBucket};
use tollgate::store::{RedisStore, Rule, SharedLimiter};

/// Times of whole µs from 1 ms to 3 s, spread over the orders of magnitude.
fn span_micros() -> impl Strategy<Value = u64> {
    prop_oneof![1_000u64..20_000, 20_000u64..500_000, 500_000u64..3_000_000]
}

/// A start within about 17 minutes of `EPOCH_MICROS`, so aligned windows fall anywhere.
fn start_micros() -> impl Strategy<Value = u64> {
    0u64..1_000_000_000
}

/// Up to 40 steps, a quarter of them on a second tag, for up to `capacity` permits
/// (sometimes one more, never granted); most within an eighth of a `span` of each
/// other, some up to two `span`s apart, with waits up to three `span`s. Reservations
/// and refunds come more often than in `steps`: windows booked ahead, and refunds
/// reaching back across them, take several requests within one window to show.
fn steps_for(span: u64, capacity: u64) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![
        2 => Just(0u64),
        5 => 0..=span / 8,
        1 => 0..=span * 2,
    ];
    let ask = prop_oneof![
        4 => Just(Ask::Acquire),
        1 => Just(Ask::Peek),
        3 => Just(Ask::Reserve),
        2 => Just(Ask::Refund),
    ];
    let step = (
        dt,
        ask,
        0..=capacity + 1,
        0..=span * 3,
        prop_oneof![3 => Just(0u8), 1 => Just(1u8)],
    )
        .prop_map(|(dt_micros, ask, n, max_wait_micros, tag)| Step {
            dt_micros,
            ask,
            n,
            max_wait_micros,
            tag,
        });
    prop::collection::vec(step, 1..40)
}

fn gcra() -> impl Strategy<Value = Rule> {
    (span_micros(), 1u64..=10).prop_map(|(interval, burst)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        Rule::from(Gcra::new(quota.burst(burst).unwrap()))
    })
}

fn leaky_bucket_of(interval_micros: u64, capacity: u64) -> LeakyBucket {
    let drain = Quota::with_period(Duration::from_micros(interval_micros)).unwrap();
    LeakyBucket::new(capacity, drain).unwrap()
}

fn aligned_of(limit: u64, window_micros: u64, offset_micros: u64) -> FixedWindow {
    // The offset is the Unix origin modulo the window; one below the window is itself.
    FixedWindow::new(limit, Duration::from_micros(window_micros))
        .unwrap()
        .aligned_to_unix_epoch(Duration::from_micros(offset_micros))
}

/// A rule of the kind under test, and the span its time moves on.
fn leaky_bucket() -> impl Strategy<Value = (Rule, u64)> {
    (span_micros(), 1u64..=10).prop_map(|(interval, capacity)| {
        (Rule::from(leaky_bucket_of(interval, capacity)), interval)
    })
}

/// A third of the windows count denied acquires (`FixedWindow::counting_denied`).
fn counting() -> impl Strategy<Value = bool> {
    prop_oneof![2 => Just(false), 1 => Just(true)]
}

fn aligned() -> impl Strategy<Value = (Rule, u64)> {
    (span_micros(), 1u64..=10, counting()).prop_flat_map(|(window, limit, counting)| {
        // A quarter on the epoch's multiples, the rest shifted.
        let offset = prop_oneof![1 => Just(0u64), 3 => 0..window];
        offset.prop_map(move |offset| {
            let rule = aligned_of(limit, window, offset);
            let rule = if counting {
                rule.counting_denied().unwrap()
            } else {
                rule
            };
            (Rule::from(rule), window)
        })
    })
}

fn first_hit() -> impl Strategy<Value = (Rule, u64)> {
    (span_micros(), 1u64..=10, counting()).prop_map(|(window, limit, counting)| {
        let rule = FixedWindow::from_first_hit(limit, Duration::from_micros(window)).unwrap();
        let rule = if counting {
            rule.counting_denied().unwrap()
        } else {
            rule
        };
        (Rule::from(rule), window)
    })
}

/// `kind` alone: `cases` random runs on both stores.
fn alone(cases: u32, kind: impl Strategy<Value = (Rule, u64)>) {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = kind.prop_flat_map(|(rule, span)| {
        let capacity = rule.capacity();
        (Just(rule), start_micros(), steps_for(span, capacity))
    });
    diff.run(cases, strategy, |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

/// `kind` and a GCRA rule in every request: all or nothing, as `AllOf`.
fn with_gcra(cases: u32, kind: impl Strategy<Value = (Rule, u64)>) {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (kind, gcra()).prop_flat_map(|((rule, span), gcra)| {
        let capacity = rule.capacity().min(gcra.capacity());
        (
            Just([rule, gcra]),
            start_micros(),
            steps_for(span, capacity),
        )
    });
    diff.run(cases, strategy, |diff, (rules, start, steps)| {
        diff.check(&rules, start, &steps)
    });
}

#[test]
fn leaky_bucket_script_decides_as_the_memory_store() {
    alone(64, leaky_bucket());
}

#[test]
fn aligned_fixed_window_script_decides_as_the_memory_store() {
    alone(64, aligned());
}

#[test]
fn first_hit_fixed_window_script_decides_as_the_memory_store() {
    alone(64, first_hit());
}

#[test]
fn leaky_bucket_with_gcra_decides_all_or_nothing_as_the_memory_store() {
    with_gcra(48, leaky_bucket());
}

#[test]
fn aligned_fixed_window_with_gcra_decides_all_or_nothing_as_the_memory_store() {
    with_gcra(48, aligned());
}

#[test]
fn first_hit_fixed_window_with_gcra_decides_all_or_nothing_as_the_memory_store() {
    with_gcra(48, first_hit());
}

/// The key's state as its whitespace-separated integers.
async fn stored_fields(connection: &mut MultiplexedConnection, key: &str) -> Vec<u64> {
    let state: String = connection.get(key).await.unwrap();
    // "<kind>:<fields>".
    let (_, fields) = state.split_once(':').expect("a kind before the state");
    fields
        .split(' ')
        .map(|f| f.parse().unwrap_or_else(|_| panic!("state {state:?}")))
        .collect()
}

/// Whether a PTTL read by server time `after` (µs) fits a key written at server time
/// `before` or later to expire `slack_ms` after `expires_at` (µs), as the script's PX
/// rounds up to whole ms.
fn ttl_fits(ttl_ms: i64, expires_at: u64, before: u64, after: u64, slack_ms: u64) -> bool {
    let (expires_at, before, after) = (expires_at as i64, before as i64, after as i64);
    let slack_ms = slack_ms as i64;
    // Set at a server time of at least `before`, rounded up to whole ms.
    let most = (expires_at - before + 999).div_euclid(1_000) + slack_ms;
    // Set at most at `after`, and counting down since.
    let least = (expires_at - after).div_euclid(1_000) + slack_ms - 1;
    ttl_ms > 0 && least <= ttl_ms && ttl_ms <= most
}

const SLACK_MS: u64 = 1_000;

#[tokio::test]
async fn leaky_bucket_stores_when_it_empties_with_a_ttl_to_then() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    // One unit drains every 1.5 ms; 3 fit.
    let limiter = SharedLimiter::new(
        RedisStore::new(connection.clone(), "leaky").unwrap(),
        leaky_bucket_of(1_500, 3),
    )
    .unwrap();
    let key = limiter.store().redis_key("k", "");

    assert!(limiter.peek("k", 3).await.unwrap().is_ok());
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "a peek created the key");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 3).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 0);
    assert_eq!(admitted.reset_after(), Duration::from_micros(4_500));

    let fields = stored_fields(&mut connection, &key).await;
    assert_eq!(fields.len(), 1, "the state is the time the bucket empties");
    let empty_at = fields[0];
    assert!(
        before + 4_500 <= empty_at && empty_at <= after + 4_500,
        "empty at {empty_at}, server time {before}..{after}"
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    let read = server_micros(&mut connection).await;
    assert!(
        ttl_fits(ttl, empty_at, before, read, SLACK_MS),
        "ttl {ttl} ms for 4.5 ms of drain and 1 s of slack"
    );
}

#[tokio::test]
async fn aligned_fixed_window_stores_its_index_with_a_ttl_to_the_window_end() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    // Windows of 2 s whose edges fall 700 ms before the epoch's multiples of 2 s.
    let (window, offset) = (2_000_000, 700_000);
    let limiter = SharedLimiter::new(
        RedisStore::new(connection.clone(), "aligned").unwrap(),
        aligned_of(2, window, offset),
    )
    .unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 1).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 1);

    let fields = stored_fields(&mut connection, &key).await;
    assert_eq!(
        fields.len(),
        2,
        "the state is the window's index and its count"
    );
    let (index, count) = (fields[0], fields[1]);
    assert_eq!(count, 1);
    assert!(
        (before + offset) / window <= index && index <= (after + offset) / window,
        "index {index}, server time {before}..{after}"
    );
    let end = (index + 1) * window - offset;
    let reset = admitted.reset_after();
    assert!(
        Duration::from_micros(end - after) <= reset && reset <= Duration::from_micros(end - before),
        "reset after {reset:?} for a window ending at {end}"
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    let read = server_micros(&mut connection).await;
    assert!(
        ttl_fits(ttl, end, before, read, SLACK_MS),
        "ttl {ttl} ms for a window ending at {end}, server time {before}..{read}"
    );

    // A refund of everything forgets the key at once.
    limiter.refund("k", 1).await.unwrap();
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "a state with nothing booked was kept");
}

#[tokio::test]
async fn first_hit_fixed_window_stores_its_start_with_a_ttl_to_its_end() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let window = 3_000_000;
    let limiter = SharedLimiter::new(
        RedisStore::new(connection.clone(), "first").unwrap(),
        FixedWindow::from_first_hit(2, Duration::from_micros(window)).unwrap(),
    )
    .unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 2).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 0);
    assert_eq!(admitted.reset_after(), Duration::from_micros(window));

    let fields = stored_fields(&mut connection, &key).await;
    assert_eq!(
        fields.len(),
        2,
        "the state is the window's start and its count"
    );
    let (start, count) = (fields[0], fields[1]);
    assert_eq!(count, 2);
    assert!(
        before <= start && start <= after,
        "start {start}, server time {before}..{after}"
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    let read = server_micros(&mut connection).await;
    assert!(
        ttl_fits(ttl, start + window, before, read, SLACK_MS),
        "ttl {ttl} ms for a 3 s window and 1 s of slack"
    );

    // A denial writes nothing; a reservation books the next window and moves the TTL.
    assert!(limiter.check("k", 1).await.unwrap().is_err());
    assert_eq!(stored_fields(&mut connection, &key).await, [start, 2]);
    let reservation = limiter
        .reserve("k", 1, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(reservation.wait() <= Duration::from_micros(window));
    assert_eq!(
        stored_fields(&mut connection, &key).await,
        [start + window, 1]
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    let read = server_micros(&mut connection).await;
    assert!(
        ttl_fits(ttl, start + 2 * window, before, read, SLACK_MS),
        "ttl {ttl} ms after booking the next window"
    );
}
