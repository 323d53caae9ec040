//! The Redis store on a real 3-master Redis Cluster: requests for many tags spread over
//! every master and each decides exactly; the keys of a multi-rule request share the
//! slot of their hash tag (and without it would span slots, which Redis refuses);
//! the script is reloaded on every node after `SCRIPT FLUSH`; every key has a TTL.
#![cfg(feature = "redis")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::redis::{RedisCluster, require_redis};
use futures::future::join_all;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use tollgate::algorithm::Gcra;
use tollgate::store::{Check, Op, RedisStore, Request, Rule, RuleKind, SharedLimiter};
use tollgate::{Denied, Quota};

/// A realistic "now": µs since the epoch in 2023.
const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

/// Enough tags that all three masters get some.
const TAGS: usize = 50;

fn at(micros: u64) -> Duration {
    Duration::from_micros(EPOCH_MICROS + micros)
}

fn gcra(interval: Duration, burst: u64) -> Rule {
    Rule::from(Gcra::new(
        Quota::with_period(interval).unwrap().burst(burst).unwrap(),
    ))
}

fn tags() -> Vec<String> {
    (0..TAGS).map(|i| format!("user-{i}")).collect()
}

/// A cluster, a store on it, and a plain connection to each master for inspection.
struct Fixture {
    // Dropped last: kills the nodes.
    _cluster: RedisCluster,
    store: RedisStore<ClusterConnection>,
    nodes: Vec<MultiplexedConnection>,
}

impl Fixture {
    async fn start(prefix: &str) -> Option<Fixture> {
        require_redis()?;
        let cluster = RedisCluster::start(3);
        let urls = cluster.urls();
        let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
        let store = RedisStore::connect_cluster(&seeds, prefix).await.unwrap();
        let mut nodes = Vec::new();
        for url in &urls {
            let client = redis::Client::open(url.as_str()).unwrap();
            nodes.push(client.get_multiplexed_async_connection().await.unwrap());
        }
        Some(Fixture {
            _cluster: cluster,
            store,
            nodes,
        })
    }

    /// The slot Redis Cluster hashes `key` to.
    async fn slot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut self.nodes[0].clone())
            .await
            .unwrap()
    }

    /// Every key under the store's prefix, per master, with its TTL in ms (-1 without).
    async fn keys_per_node(&self) -> Vec<BTreeMap<String, i64>> {
        let pattern = format!("{}:*", self.store.prefix());
        let mut out = Vec::new();
        for node in &self.nodes {
            let mut node = node.clone();
            let mut keys = BTreeMap::new();
            let mut cursor = 0u64;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut node)
                    .await
                    .unwrap();
                for key in batch {
                    let ttl: i64 = node.pttl(&key).await.unwrap();
                    keys.insert(key, ttl);
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            out.push(keys);
        }
        out
    }

    /// Whether each master has the script of GCRA rules cached, which the store
    /// sends their requests to.
    async fn script_cached(&self) -> Vec<bool> {
        let mut out = Vec::new();
        for node in &self.nodes {
            let exists: Vec<bool> = redis::cmd("SCRIPT")
                .arg("EXISTS")
                .arg(RedisStore::<ClusterConnection>::script_hash_for(&[
                    RuleKind::Gcra,
                ]))
                .query_async(&mut node.clone())
                .await
                .unwrap();
            out.push(exists[0]);
        }
        out
    }
}

/// Every key written has a TTL, and the keys sit on every master.
fn assert_spread_with_ttls(keys: &[BTreeMap<String, i64>], expected: usize) {
    let total: usize = keys.iter().map(BTreeMap::len).sum();
    assert_eq!(total, expected, "keys per master: {keys:?}");
    for (i, node) in keys.iter().enumerate() {
        assert!(!node.is_empty(), "master {i} holds no key: {keys:?}");
        for (key, ttl) in node {
            assert!(*ttl > 0, "{key} on master {i} has TTL {ttl}");
        }
    }
}

#[tokio::test]
async fn every_tag_gets_exactly_its_burst_on_whichever_master_holds_it() {
    let Some(fixture) = Fixture::start("burst").await else {
        return;
    };
    // One per 10 s, burst 5: at one instant, exactly 5 of 8 requests per tag. (Long
    // intervals keep the keys' real-time TTLs far longer than the test.)
    let limiter =
        SharedLimiter::new(fixture.store.clone(), gcra(Duration::from_secs(10), 5)).unwrap();
    let tags = tags();
    let names: Vec<&String> = tags.iter().flat_map(|tag| [tag; 8]).collect();
    let decisions = join_all(names.iter().map(|tag| limiter.check_at(tag, 1, at(0)))).await;
    let mut admitted = BTreeMap::<&str, u64>::new();
    for (tag, decision) in names.into_iter().zip(decisions) {
        match decision.unwrap() {
            Ok(_) => *admitted.entry(tag.as_str()).or_default() += 1,
            Err(Denied::Limited(limited)) => {
                assert_eq!(
                    limited.retry_after(),
                    Some(Duration::from_secs(10)),
                    "{tag}"
                )
            }
            Err(other) => panic!("{tag}: {other:?}"),
        }
    }
    for tag in &tags {
        assert_eq!(admitted.get(tag.as_str()), Some(&5), "{tag}: {admitted:?}");
    }

    // An interval later, exactly one more each, then none.
    for tag in &tags {
        let admitted = limiter.check_at(tag, 1, at(10_000_000)).await.unwrap();
        assert_eq!(admitted.unwrap().remaining(), 0, "{tag}");
        let denied = limiter.check_at(tag, 1, at(10_000_000)).await.unwrap();
        assert!(denied.is_err(), "{tag}");
    }

    // One key per tag, spread over all three masters, each with its TTL.
    assert_spread_with_ttls(&fixture.keys_per_node().await, TAGS);
}

#[tokio::test]
async fn a_multi_rule_request_decides_in_its_tags_slot() {
    let Some(fixture) = Fixture::start("multi").await else {
        return;
    };
    // One per 10 s (burst 2), per 10 min (burst 3) and per hour (burst 4).
    let limiter = SharedLimiter::all_of(
        fixture.store.clone(),
        [
            ("short", gcra(Duration::from_secs(10), 2)),
            ("medium", gcra(Duration::from_secs(600), 3)),
            ("long", gcra(Duration::from_secs(3600), 4)),
        ],
    )
    .unwrap();
    let ten_seconds = 10_000_000;
    let mut spanning = 0;
    for tag in &tags() {
        // Two at once (the short burst), a third 10 s later: the medium burst of 3 is
        // spent, so the fourth waits for it, and nothing is written.
        for (t, remaining) in [(0, 1), (0, 0), (ten_seconds, 0)] {
            let admitted = limiter.check_at(tag, 1, at(t)).await.unwrap();
            assert_eq!(admitted.unwrap().remaining(), remaining, "{tag} at {t}");
        }
        let keys = ["short", "medium", "long"].map(|name| fixture.store.redis_key(tag, name));
        let denied = limiter
            .check_at(tag, 1, at(2 * ten_seconds))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_secs(580)),
            "{tag}"
        );
        // One MGET reads them all: they share a slot.
        let after: Vec<Option<String>> = fixture
            .store
            .connection()
            .clone()
            .mget(&keys)
            .await
            .unwrap();
        assert!(after.iter().all(Option::is_some), "{tag}: {after:?}");
        assert_eq!(
            after[0].as_deref(),
            Some(format!("-{}", EPOCH_MICROS + 3 * ten_seconds).as_str()),
            "{tag}: the denial changed the short rule's state"
        );

        // One slot with the tag, and without it the same names would mostly span slots.
        let mut tagged = BTreeSet::new();
        let mut untagged = BTreeSet::new();
        for key in &keys {
            tagged.insert(fixture.slot(key).await);
            untagged.insert(fixture.slot(&key.replace(['{', '}'], "")).await);
        }
        assert_eq!(tagged.len(), 1, "{tag}: {keys:?}");
        if untagged.len() > 1 {
            spanning += 1;
        }
    }
    assert!(
        spanning > TAGS * 9 / 10,
        "only {spanning} of {TAGS} requests would span slots without the tag"
    );
    assert_spread_with_ttls(&fixture.keys_per_node().await, 3 * TAGS);
}

#[tokio::test]
async fn without_the_hash_tag_the_script_is_refused_as_cross_slot() {
    let Some(fixture) = Fixture::start("slots").await else {
        return;
    };
    let rule = gcra(Duration::from_secs(1), 2);
    let checks = [
        Check::new("a", &rule),
        Check::new("b", &rule),
        Check::new("c", &rule),
    ];
    let request = Request::new("user-1", &checks, Op::Acquire(1)).at(at(0));
    let call = fixture.store.script_call(&request).unwrap();
    let count: usize = call[0].parse().unwrap();
    assert_eq!(count, 3);
    let untagged: Vec<String> = call[1..=count]
        .iter()
        .map(|key| key.replace(['{', '}'], ""))
        .collect();
    let mut slots = BTreeSet::new();
    for key in &untagged {
        slots.insert(fixture.slot(key).await);
    }
    assert!(
        slots.len() > 1,
        "{untagged:?} share a slot: pick other names"
    );

    let eval = |keys: &[String]| {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(RedisStore::<ClusterConnection>::script_source())
            .arg(count)
            .arg(keys)
            .arg(&call[1 + count..]);
        cmd
    };
    let mut connection = fixture.store.connection().clone();
    let error = eval(&untagged)
        .query_async::<Vec<i64>>(&mut connection)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some("CROSSSLOT"), "{error:?}");
    // The same call with the tagged keys runs: all three admit.
    let reply: Vec<i64> = eval(&call[1..=count])
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(reply.len(), 15, "{reply:?}");
    assert!(reply.chunks(5).all(|v| v[0] == 1), "{reply:?}");
}

#[tokio::test]
async fn the_script_is_reloaded_on_every_node_after_script_flush() {
    let Some(fixture) = Fixture::start("flush").await else {
        return;
    };
    // The scripts' path: the library has no cache that `SCRIPT FLUSH` empties.
    let store = fixture.store.clone().without_functions();
    let limiter = SharedLimiter::new(store, gcra(Duration::from_secs(60), 5)).unwrap();
    let tags = tags();
    for tag in &tags {
        let admitted = limiter.check_at(tag, 1, at(0)).await.unwrap();
        assert_eq!(admitted.unwrap().remaining(), 4);
    }
    assert_eq!(fixture.script_cached().await, [true; 3]);

    for node in &fixture.nodes {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut node.clone())
            .await
            .unwrap();
    }
    assert_eq!(fixture.script_cached().await, [false; 3]);

    // Every tag, on whichever master, gets NOSCRIPT, reloads, and finds its state.
    for tag in &tags {
        let admitted = limiter.check_at(tag, 1, at(0)).await.unwrap();
        assert_eq!(admitted.unwrap().remaining(), 3, "{tag}");
    }
    assert_eq!(fixture.script_cached().await, [true; 3]);
    assert_spread_with_ttls(&fixture.keys_per_node().await, TAGS);
}
