//! Every bad input to the Redis store is a typed `StoreError` (or a typed denial),
//! never a panic and never a hang: malformed URLs, refused connections, passwords,
//! oversized keys, braces in the prefix, keys holding foreign state, rules the script
//! cannot count, empty requests, and requests larger than any rule's capacity.
#![cfg(feature = "redis")]

mod common;

use std::future::Future;
use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::algorithm::Gcra;
use tollgate::store::{
    Check, DEFAULT_MAX_KEY_LEN, Op, RedisStore, Reply, Request, Rule, Store, StoreError,
};
use tollgate::{Denied, Quota};

/// A realistic "now": µs since the epoch in 2023.
const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

/// How long any failing call may take: the store's own connect timeout is 1 s, retried
/// once. A bound on a hang, not a measurement.
const FAIL_FAST: Duration = Duration::from_secs(5);

fn at(micros: u64) -> Duration {
    Duration::from_micros(EPOCH_MICROS + micros)
}

/// One per 10 ms, burst `burst`.
fn gcra(burst: u64) -> Rule {
    let quota = Quota::with_period(Duration::from_millis(10)).unwrap();
    Rule::from(Gcra::new(quota.burst(burst).unwrap()))
}

/// `future`'s output, or a panic naming `what` if it takes longer than [`FAIL_FAST`].
async fn fast<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(FAIL_FAST, future).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: no answer within {FAIL_FAST:?}"),
    }
}

async fn raw_connection(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// A store on a server that has been killed: whatever it answers, it answered without
/// a round trip.
async fn store_without_server() -> Option<RedisStore<MultiplexedConnection>> {
    require_redis()?;
    let mut server = RedisServer::start();
    let connection = raw_connection(&server.url()).await;
    server.kill();
    Some(RedisStore::new(connection, "offline").unwrap())
}

const MALFORMED_URLS: &[&str] = &[
    "",
    "not a url",
    "127.0.0.1:6379",
    "http://127.0.0.1/",
    "redis://127.0.0.1:99999/",
    "redis://127.0.0.1:6379/not-a-db",
    "redis://[::1/",
    "redis://:@/",
];

#[tokio::test]
async fn malformed_urls_are_invalid_url() {
    for url in MALFORMED_URLS {
        let error = fast(url, RedisStore::connect(url, "bad"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidUrl(_)),
            "{url:?}: {error:?}"
        );
        assert!(error.is_permanent(), "{url:?}");
    }
}

#[tokio::test]
async fn malformed_cluster_urls_are_invalid_url() {
    for url in MALFORMED_URLS {
        let error = fast(url, RedisStore::connect_cluster(&[url], "bad"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidUrl(_)),
            "{url:?}: {error:?}"
        );
    }
    // A bad URL among good ones spoils the list, and so does an empty list.
    let mixed = ["redis://127.0.0.1:7000/", "http://127.0.0.1:7001/"];
    let error = fast("mixed", RedisStore::connect_cluster(&mixed, "bad"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::InvalidUrl(_)), "{error:?}");
    let error = fast("empty", RedisStore::connect_cluster(&[], "bad"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::InvalidUrl(_)), "{error:?}");
}

#[tokio::test]
async fn refused_connections_are_connection_errors() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let error = fast("connect", RedisStore::connect(&url, "refused"))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
    assert!(!error.is_permanent());

    let error = fast(
        "connect_cluster",
        RedisStore::connect_cluster(&[&url, &url], "refused"),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
}

#[tokio::test]
async fn wrong_or_missing_passwords_are_authentication_errors() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_password("s3cret");
    let port = server.port();
    // The right password works.
    let store = fast("right password", RedisStore::connect(&server.url(), "auth"))
        .await
        .unwrap();
    let rule = gcra(2);
    let checks = [Check::new("", &rule)];
    let outcome = store
        .execute(&Request::new("k", &checks, Op::Acquire(1)).at(at(0)))
        .await
        .unwrap();
    assert!(outcome.is_admitted());

    let wrong = format!("redis://:not-it@127.0.0.1:{port}/");
    let missing = format!("redis://127.0.0.1:{port}/");
    for url in [&wrong, &missing] {
        let error = fast(url, RedisStore::connect(url, "auth"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::Authentication(_)),
            "{url}: {error:?}"
        );
    }

    // A connection made without the password, past connect: the request itself fails.
    let client = redis::Client::open(missing.as_str()).unwrap();
    let connection = client.get_multiplexed_async_connection().await.unwrap();
    let store = RedisStore::new(connection, "auth").unwrap();
    let error = fast(
        "execute",
        store.execute(&Request::new("k", &checks, Op::Acquire(1))),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, StoreError::Authentication(_)), "{error:?}");
}

#[tokio::test]
async fn a_brace_in_the_prefix_is_a_config_error() {
    for prefix in ["a{b", "a}b", "{x}"] {
        let error = RedisStore::connect("redis://127.0.0.1:1/", prefix)
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::Config(_)),
            "{prefix}: {error:?}"
        );
        let error = RedisStore::connect_cluster(&["redis://127.0.0.1:1/"], prefix)
            .await
            .unwrap_err();
        assert!(
            matches!(error, StoreError::Config(_)),
            "{prefix}: {error:?}"
        );
    }
    let Some(store) = store_without_server().await else {
        return;
    };
    let error = RedisStore::new(store.connection().clone(), "p{").unwrap_err();
    assert!(matches!(error, StoreError::Config(_)), "{error:?}");
}

#[tokio::test]
async fn keys_longer_than_the_maximum_are_refused_without_a_round_trip() {
    let Some(store) = store_without_server().await else {
        return;
    };
    let rule = gcra(5);
    // "offline:{" + tag + "}" is the whole key.
    let fits = "t".repeat(DEFAULT_MAX_KEY_LEN - "offline:{}".len());
    let too_long = "t".repeat(DEFAULT_MAX_KEY_LEN - "offline:{}".len() + 1);
    let checks = [Check::new("", &rule)];

    let error = store
        .execute(&Request::new(&too_long, &checks, Op::Acquire(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::KeyTooLong { len, max } if len == DEFAULT_MAX_KEY_LEN + 1 && max == DEFAULT_MAX_KEY_LEN),
        "{error:?}"
    );
    assert!(error.is_permanent());
    // One byte less reaches the (dead) server.
    let error = store
        .execute(&Request::new(&fits, &checks, Op::Acquire(1)))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");

    // A lower maximum, reached by the key under the tag.
    let short = store.clone().max_key_len(20);
    let long_key = [Check::new("abcdefgh", &rule)];
    let error = short
        .execute(&Request::new("tag", &long_key, Op::Peek(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::KeyTooLong { len: 22, max: 20 }),
        "{error:?}"
    );
    // Every op is checked, refunds included.
    let error = short
        .execute(&Request::new("tag", &long_key, Op::Refund(1)))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::KeyTooLong { .. }), "{error:?}");
}

#[tokio::test]
async fn keys_holding_foreign_state_are_key_conflicts() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = raw_connection(&server.url()).await;
    let store = RedisStore::new(connection.clone(), "conflict").unwrap();
    let rule = gcra(3);
    let checks = [Check::new("", &rule)];

    // Another rule's state (several numbers, not one TAT), text no rule writes, a
    // list and a hash.
    let () = connection
        .set(store.redis_key("fields", ""), "3 1700000000000000")
        .await
        .unwrap();
    let () = connection
        .set(store.redis_key("text", ""), "hello")
        .await
        .unwrap();
    let () = connection
        .lpush(store.redis_key("list", ""), "x")
        .await
        .unwrap();
    let () = connection
        .hset(store.redis_key("hash", ""), "f", "1")
        .await
        .unwrap();
    for tag in ["fields", "text", "list", "hash"] {
        for op in [
            Op::Acquire(1),
            Op::Peek(1),
            Op::Refund(1),
            Op::Reserve {
                n: 1,
                max_wait: Duration::from_secs(1),
            },
        ] {
            let error = fast(
                tag,
                store.execute(&Request::new(tag, &checks, op).at(at(0))),
            )
            .await
            .unwrap_err();
            let expected = store.redis_key(tag, "");
            assert!(
                matches!(&error, StoreError::KeyConflict { key } if *key == expected),
                "{tag} {op:?}: {error:?}"
            );
            assert!(error.is_permanent());
        }
    }

    // With two rules, the conflict on the second leaves the first untouched.
    let () = connection
        .lpush(store.redis_key("pair", "b"), "x")
        .await
        .unwrap();
    let pair = [Check::new("a", &rule), Check::new("b", &rule)];
    let error = store
        .execute(&Request::new("pair", &pair, Op::Acquire(1)).at(at(0)))
        .await
        .unwrap_err();
    let expected = store.redis_key("pair", "b");
    assert!(
        matches!(&error, StoreError::KeyConflict { key } if *key == expected),
        "{error:?}"
    );
    let exists: bool = connection
        .exists(store.redis_key("pair", "a"))
        .await
        .unwrap();
    assert!(!exists, "a failed request wrote its first key");
    let kind: String = redis::cmd("TYPE")
        .arg(store.redis_key("list", ""))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(kind, "list", "the foreign key was changed");
}

#[tokio::test]
async fn rules_the_script_cannot_count_are_config_errors_without_a_round_trip() {
    let Some(store) = store_without_server().await else {
        return;
    };
    // 1/3 s is not a whole number of µs; 2^40 µs × 2^13 is past 2^52.
    let thirds = Rule::from(Gcra::new(Quota::per_second(3).unwrap()));
    let huge = {
        let quota = Quota::with_period(Duration::from_micros(1 << 40)).unwrap();
        Rule::from(Gcra::new(quota.burst(1 << 13).unwrap()))
    };
    for (rule, parameter) in [(&thirds, "interval"), (&huge, "burst")] {
        let error = store.check_rule(rule).unwrap_err();
        assert!(
            matches!(&error, StoreError::Config(e) if e.parameter() == parameter),
            "{error:?}"
        );
        // Executed anyway (alone, or after a good rule): refused before sending.
        let good = gcra(2);
        for checks in [
            vec![Check::new("", rule)],
            vec![Check::new("good", &good), Check::new("bad", rule)],
        ] {
            let error = store
                .execute(&Request::new("k", &checks, Op::Acquire(1)))
                .await
                .unwrap_err();
            assert!(
                matches!(&error, StoreError::Config(e) if e.parameter() == parameter),
                "{error:?}"
            );
            assert!(error.is_permanent());
        }
    }
    // A count past 2^52 cannot be sent either (a refund skips the capacity check).
    let one = gcra(1);
    let checks = [Check::new("", &one)];
    let error = store
        .execute(&Request::new("k", &checks, Op::Refund(1 << 53)))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Config(_)), "{error:?}");
}

#[tokio::test]
async fn a_request_without_rules_is_a_config_error() {
    let Some(store) = store_without_server().await else {
        return;
    };
    for op in [Op::Acquire(1), Op::Peek(0), Op::Refund(1)] {
        let error = store
            .execute(&Request::new("k", &[], op))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::Config(e) if e.parameter() == "rules"),
            "{op:?}: {error:?}"
        );
    }
}

#[tokio::test]
async fn more_than_the_capacity_is_insufficient_without_a_round_trip() {
    let Some(store) = store_without_server().await else {
        return;
    };
    let small = gcra(3);
    let large = gcra(10);
    let one = [Check::new("", &small)];
    let two = [Check::new("l", &large), Check::new("s", &small)];
    for checks in [&one[..], &two[..]] {
        for op in [
            Op::Acquire(4),
            Op::Peek(4),
            Op::Reserve {
                n: 4,
                max_wait: Duration::MAX,
            },
        ] {
            let outcome = store.execute(&Request::new("k", checks, op)).await.unwrap();
            let denied = match outcome {
                Reply::Decision(d) => d.unwrap_err(),
                Reply::Reservation(r) => r.unwrap_err(),
                other => panic!("{other:?}"),
            };
            match denied {
                Denied::Insufficient(i) => assert_eq!((i.requested(), i.capacity()), (4, 3)),
                other => panic!("{op:?}: {other:?}"),
            }
        }
    }
    // Within the capacity, the dead server is asked.
    let error = store
        .execute(&Request::new("k", &one, Op::Acquire(3)))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
}
