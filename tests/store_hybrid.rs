//! The hybrid modes: `DeniedCache` over a `MemoryStore` on a `ManualClock` (hits skip
//! the store, expiry, the bound, invalidation, and never a decision the store alone
//! would not make), and `BatchedLimiter` against a real `redis-server` with simulated
//! nodes (counts converge after a sync, TTLs, over-admission within the documented
//! bound, a failed sync).
#![cfg(feature = "store")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::executor::block_on;
use proptest::prelude::*;
use tollgate::algorithm::{
    Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, SlidingLog, SmoothBursty,
};
use tollgate::store::{
    Check, DeniedCache, MemoryStore, Op, Reply, Request, Rule, Store, StoreError,
};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{ConfigError, Denied, KeyedConfig, Quota};

/// 2023-11-14 22:13:20 UTC, on a whole second: fixed windows start there.
const START_SECS: u64 = 1_700_000_000;

fn clock() -> ManualClock {
    ManualClock::starting_at(Nanos::new(START_SECS * 1_000_000_000))
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A store that counts the requests it is asked.
struct Counting<S> {
    inner: S,
    calls: AtomicUsize,
}

impl<S> Counting<S> {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl<S: Store> Store for Counting<S> {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.execute(request).await
    }
}

type Inner = Arc<Counting<MemoryStore<ManualClock>>>;

fn memory(clock: &ManualClock) -> Inner {
    let store = MemoryStore::with_clock(KeyedConfig::new(1_000), "t", clock.clone()).unwrap();
    Arc::new(Counting {
        inner: store,
        calls: AtomicUsize::new(0),
    })
}

fn cached(max_entries: usize) -> (ManualClock, Inner, DeniedCache<Inner, ManualClock>) {
    let clock = clock();
    let inner = memory(&clock);
    let cache = DeniedCache::with_clock(inner.clone(), max_entries, clock.clone()).unwrap();
    (clock, inner, cache)
}

fn window(limit: u64, secs: u64) -> Rule {
    Rule::from(FixedWindow::new(limit, Duration::from_secs(secs)).unwrap())
}

fn run(store: &impl Store, tag: &str, rules: &[&Rule], op: Op) -> Reply {
    let checks: Vec<Check<'_>> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| Check::new(["a", "b", "c"][i], r))
        .collect();
    block_on(store.execute(&Request::new(tag, &checks, op))).unwrap()
}

fn retry_after(outcome: Reply) -> Option<Duration> {
    match outcome {
        Reply::Decision(Err(denied)) => denied.retry_after(),
        Reply::Reservation(Err(denied)) => denied.retry_after(),
        _ => None,
    }
}

#[test]
fn a_denial_is_repeated_without_the_store_its_wait_shortened() {
    let (clock, inner, cache) = cached(16);
    let rule = window(2, 1);
    assert!(run(&cache, "k", &[&rule], Op::Acquire(2)).is_admitted());
    let denied = run(&cache, "k", &[&rule], Op::Acquire(1));
    assert_eq!(retry_after(denied), Some(ms(1_000)));
    assert_eq!((inner.calls(), cache.hits(), cache.len()), (2, 0, 1));

    for step in 1..=9 {
        clock.advance(ms(100));
        let left = ms(1_000 - 100 * step);
        assert_eq!(
            retry_after(run(&cache, "k", &[&rule], Op::Acquire(1))),
            Some(left)
        );
        assert_eq!(
            retry_after(run(&cache, "k", &[&rule], Op::Peek(1))),
            Some(left)
        );
    }
    assert_eq!((inner.calls(), cache.hits()), (2, 18));
}

#[test]
fn an_entry_ends_at_the_retry_time() {
    let (clock, inner, cache) = cached(16);
    let rule = window(1, 1);
    clock.advance(ms(250));
    assert!(run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    clock.advance(ms(750) - Duration::from_nanos(1));
    assert_eq!(
        retry_after(run(&cache, "k", &[&rule], Op::Acquire(1))),
        Some(Duration::from_nanos(1))
    );
    assert_eq!(inner.calls(), 2);
    clock.advance(Duration::from_nanos(1));
    assert!(run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!(inner.calls(), 3);
}

#[test]
fn smaller_requests_other_tags_and_other_shapes_ask_the_store() {
    let (_clock, inner, cache) = cached(16);
    let rule = window(3, 1);
    let other = window(5, 1);
    assert!(run(&cache, "k", &[&rule], Op::Acquire(2)).is_admitted());
    assert!(!run(&cache, "k", &[&rule], Op::Acquire(2)).is_admitted());
    assert!(!run(&cache, "k", &[&rule], Op::Peek(2)).is_admitted());
    assert_eq!((inner.calls(), cache.hits()), (2, 1));

    // Fewer permits, or more (whose wait may be longer), ask the store.
    assert!(!run(&cache, "k", &[&rule], Op::Acquire(3)).is_admitted());
    assert!(run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(run(&cache, "j", &[&rule], Op::Acquire(1)).is_admitted());
    // Same key "a", another rule: another shape.
    let other_tag = "m";
    assert!(run(&cache, other_tag, &[&rule], Op::Acquire(3)).is_admitted());
    assert!(!run(&cache, other_tag, &[&rule], Op::Acquire(1)).is_admitted());
    run(&cache, other_tag, &[&other], Op::Acquire(1));
    run(&cache, other_tag, &[&other, &rule], Op::Acquire(1));
    assert_eq!((inner.calls(), cache.hits()), (9, 1));
}

#[test]
fn requests_of_several_rules_are_cached_as_one_shape() {
    let (clock, inner, cache) = cached(16);
    let second = window(10, 1);
    let minute = window(2, 60);
    assert!(run(&cache, "k", &[&second, &minute], Op::Acquire(2)).is_admitted());
    let denied = run(&cache, "k", &[&second, &minute], Op::Acquire(1));
    // The start is 20 s into a minute.
    assert_eq!(
        retry_after(denied),
        Some(Duration::from_secs(40)),
        "the minute's"
    );
    clock.advance(Duration::from_secs(5));
    let denied = run(&cache, "k", &[&second, &minute], Op::Acquire(1));
    assert_eq!(retry_after(denied), Some(Duration::from_secs(35)));
    assert_eq!((inner.calls(), cache.hits()), (2, 1));
}

#[test]
fn refunds_and_reservations_pass_through_and_invalidate() {
    let (_clock, inner, cache) = cached(16);
    let rule = window(1, 10);
    assert!(run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "j", &[&rule], Op::Acquire(2)).is_admitted()); // insufficient
    assert!(run(&cache, "j", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "j", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!((inner.calls(), cache.len()), (4, 2));

    assert_eq!(run(&cache, "k", &[&rule], Op::Refund(1)), Reply::Refunded);
    assert_eq!((inner.calls(), cache.len()), (5, 1), "only k's entry goes");
    assert!(run(&cache, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!(inner.calls(), 6);

    let reserve = Op::Reserve {
        n: 1,
        max_wait: Duration::ZERO,
    };
    assert!(!run(&cache, "j", &[&rule], reserve).is_admitted());
    assert_eq!((inner.calls(), cache.len()), (7, 0));
    assert!(!run(&cache, "j", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!((inner.calls(), cache.len()), (8, 1));

    cache.invalidate("j");
    assert!(cache.is_empty());
}

#[test]
fn a_refund_by_another_node_is_not_seen_until_the_retry_time() {
    // The documented cost: two nodes over one store, node B gives back what node A
    // was denied; A keeps denying until the recorded time, where the store admits.
    let clock = clock();
    let shared = memory(&clock);
    let node = || DeniedCache::with_clock(shared.clone(), 16, clock.clone()).unwrap();
    let (a, b) = (node(), node());
    let rule = window(1, 10);
    assert!(run(&b, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert!(!run(&a, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!(run(&b, "k", &[&rule], Op::Refund(1)), Reply::Refunded);
    assert!(run(&*shared, "k", &[&rule], Op::Peek(1)).is_admitted());
    assert!(!run(&a, "k", &[&rule], Op::Acquire(1)).is_admitted());
    assert_eq!(a.hits(), 1);
}

#[test]
fn at_the_bound_expired_entries_go_first() {
    let (clock, inner, cache) = cached(2);
    let short = window(1, 1);
    let long = window(1, 60);
    for (tag, rule) in [("a", &short), ("b", &long)] {
        assert!(run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
        assert!(!run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
    }
    assert_eq!((cache.len(), inner.calls()), (2, 4));
    clock.advance(Duration::from_secs(2)); // a's entry has expired, b's has not
    assert!(run(&cache, "c", &[&long], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "c", &[&long], Op::Acquire(1)).is_admitted());
    assert_eq!((cache.len(), inner.calls()), (2, 6));
    assert!(!run(&cache, "b", &[&long], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "c", &[&long], Op::Acquire(1)).is_admitted());
    assert_eq!((inner.calls(), cache.hits()), (6, 2), "b and c both kept");
}

#[test]
fn at_the_bound_without_expired_entries_the_soonest_to_expire_goes() {
    let (_clock, inner, cache) = cached(2);
    let ten = window(1, 10);
    let sixty = window(1, 60);
    for (tag, rule) in [("a", &sixty), ("b", &ten), ("c", &sixty)] {
        assert!(run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
        assert!(!run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
    }
    assert_eq!((cache.len(), inner.calls()), (2, 6));
    assert!(!run(&cache, "a", &[&sixty], Op::Acquire(1)).is_admitted());
    assert!(!run(&cache, "c", &[&sixty], Op::Acquire(1)).is_admitted());
    assert_eq!(inner.calls(), 6, "a and c kept");
    assert!(!run(&cache, "b", &[&ten], Op::Acquire(1)).is_admitted());
    assert_eq!(inner.calls(), 7, "b evicted");
    assert_eq!(cache.len(), 2);
}

#[test]
fn a_bound_of_zero_is_a_config_error() {
    let clock = clock();
    assert_eq!(
        DeniedCache::new(memory(&clock), 0).unwrap_err(),
        ConfigError::Zero {
            parameter: "max_entries"
        }
    );
    assert_eq!(
        DeniedCache::with_clock(memory(&clock), 0, clock.clone()).unwrap_err(),
        ConfigError::Zero {
            parameter: "max_entries"
        }
    );
}

#[test]
fn rules_whose_denials_end_otherwise_are_never_cached() {
    let (_clock, inner, cache) = cached(16);
    let counting = Rule::from(
        SlidingLog::new(1, Duration::from_secs(10))
            .unwrap()
            .count_blocked(true),
    );
    let leased =
        Rule::from(Leased::new(Concurrency::new(1).unwrap(), Duration::from_secs(30)).unwrap());
    for (tag, rule) in [("k", &counting), ("j", &leased)] {
        assert!(run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
        for _ in 0..3 {
            assert!(!run(&cache, tag, &[rule], Op::Acquire(1)).is_admitted());
        }
    }
    assert_eq!((inner.calls(), cache.hits(), cache.len()), (8, 0, 0));
}

#[test]
fn insufficient_requests_are_decided_without_the_store() {
    let (_clock, inner, cache) = cached(16);
    let rule = window(2, 1);
    let outcome = run(&cache, "k", &[&rule], Op::Acquire(3));
    assert!(matches!(
        outcome,
        Reply::Decision(Err(Denied::Insufficient(_)))
    ));
    assert_eq!((inner.calls(), cache.len()), (0, 0));
}

/// Rules whose denials the cache may repeat, with their exact `retry_after`.
fn cacheable_rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        (1u64..5, 1u64..2_000).prop_map(|(limit, ms)| Rule::from(
            FixedWindow::new(limit, Duration::from_millis(ms)).unwrap()
        )),
        (1u64..2_000, 1u64..5).prop_map(|(ms, burst)| {
            let quota = Quota::with_period(Duration::from_millis(ms)).unwrap();
            Rule::from(Gcra::new(quota.burst(burst).unwrap()))
        }),
        (1u64..5, 1u64..2_000).prop_map(|(limit, ms)| Rule::from(
            SlidingLog::new(limit, Duration::from_millis(ms)).unwrap()
        )),
        (1u64..5, 1u64..2_000).prop_map(|(capacity, ms)| {
            let drain = Quota::with_period(Duration::from_millis(ms)).unwrap();
            Rule::from(LeakyBucket::new(capacity, drain).unwrap())
        }),
        (1u32..50)
            .prop_map(|per_second| Rule::from(SmoothBursty::new(f64::from(per_second)).unwrap())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// One node, no refunds: the cache decides exactly as the store alone, and a
    /// denial it repeats waits exactly as long as the store's would.
    #[test]
    fn the_cache_decides_as_the_store_alone(
        rules in prop::collection::vec(cacheable_rule(), 1..3),
        steps in prop::collection::vec((0u64..400, 0u64..4, any::<bool>(), 0u8..2), 1..60),
    ) {
        let clock = clock();
        let plain = memory(&clock);
        let cache = DeniedCache::with_clock(memory(&clock), 8, clock.clone()).unwrap();
        let rules: Vec<&Rule> = rules.iter().collect();
        for (dt, n, peek, tag) in steps {
            clock.advance(Duration::from_millis(dt));
            let op = if peek { Op::Peek(n) } else { Op::Acquire(n) };
            let tag = ["x", "y"][usize::from(tag)];
            let expected = run(&plain, tag, &rules, op);
            let got = run(&cache, tag, &rules, op);
            prop_assert_eq!(got.is_admitted(), expected.is_admitted(), "{:?} at {:?}", op, clock.now());
            prop_assert_eq!(retry_after(got), retry_after(expected));
            if got.is_admitted() {
                prop_assert_eq!(got, expected);
            }
        }
    }
}

#[cfg(feature = "redis")]
mod batched {
    use std::time::{Duration, Instant};

    use redis::AsyncCommands;
    use redis::aio::{ConnectionManager, MultiplexedConnection};
    use tollgate::algorithm::{FixedWindow, Gcra};
    use tollgate::store::{BatchedLimiter, Rule, StoreError};
    use tollgate::time::{Clock, ManualClock};
    use tollgate::{ConfigError, Denied, Quota};

    use super::common::redis::{RedisServer, require_redis};
    use super::{START_SECS, clock, ms};

    type Node = BatchedLimiter<MultiplexedConnection, ManualClock>;

    async fn connect(server: &RedisServer) -> MultiplexedConnection {
        let client = redis::Client::open(server.url()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    /// One simulated node: its own connection, on the shared clock.
    async fn node(
        server: &RedisServer,
        clock: &ManualClock,
        limit: u64,
        window: Duration,
        interval: Duration,
    ) -> Node {
        let rule = FixedWindow::new(limit, window).unwrap();
        BatchedLimiter::with_clock(connect(server).await, "b", rule, interval, clock.clone())
            .unwrap()
    }

    /// Script calls the server has run.
    async fn script_calls(connection: &mut MultiplexedConnection) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(connection)
            .await
            .unwrap();
        info.lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|l| l.split(',').next())
            .map(|calls| calls.parse::<u64>().unwrap())
            .sum()
    }

    async fn count(connection: &mut MultiplexedConnection, key: &str) -> u64 {
        let value: Option<u64> = connection.get(key).await.unwrap();
        value.unwrap_or(0)
    }

    #[tokio::test]
    async fn only_fixed_windows_and_a_nonzero_key_bound_are_accepted() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let connection = connect(&server).await;
        let gcra = Rule::from(Gcra::new(Quota::per_second(10).unwrap()));
        let first_hit =
            Rule::from(FixedWindow::from_first_hit(10, Duration::from_secs(1)).unwrap());
        for rule in [gcra, first_hit] {
            let error = BatchedLimiter::new(connection.clone(), "b", rule, ms(100)).unwrap_err();
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
        let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
        let braces = BatchedLimiter::new(connection.clone(), "a{b", window, ms(100));
        assert!(matches!(braces, Err(StoreError::Config(_))));
        let limiter = BatchedLimiter::new(connection, "b", window, ms(100)).unwrap();
        assert_eq!(
            limiter.with_max_keys(0).unwrap_err(),
            ConfigError::Zero {
                parameter: "max_keys"
            }
        );
    }

    #[tokio::test]
    async fn decisions_between_syncs_cost_no_round_trip() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let a = node(&server, &clock, 100, Duration::from_secs(60), ms(100)).await;
        assert_eq!(a.redis_key("k"), format!("b:{{k}}:{}", START_SECS / 60));
        let named = a.clone().with_name("minute");
        assert_eq!(
            named.redis_key("k"),
            format!("b:{{k}}:minute:{}", START_SECS / 60)
        );

        assert!(a.check("k", 1).await.unwrap().is_ok()); // reads the count first
        let before = script_calls(&mut probe).await;
        for _ in 0..50 {
            clock.advance(ms(1));
            assert!(a.check("k", 1).await.unwrap().is_ok());
        }
        assert_eq!(
            script_calls(&mut probe).await,
            before,
            "no sync within 100 ms"
        );
        assert_eq!(count(&mut probe, &a.redis_key("k")).await, 0);

        clock.advance(ms(50)); // 100 ms since the first sync ended
        let admitted = a.check("k", 1).await.unwrap().unwrap();
        assert_eq!(admitted.remaining(), 100 - 52);
        assert_eq!(script_calls(&mut probe).await, before + 1);
        assert_eq!(count(&mut probe, &a.redis_key("k")).await, 51);
    }

    #[tokio::test]
    async fn counts_converge_after_a_sync_and_every_key_has_a_ttl() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let window = Duration::from_secs(10);
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(node(&server, &clock, 1_000, window, ms(200)).await);
        }
        let mut admitted = 0;
        for round in 0..30u64 {
            clock.advance(ms(10));
            for (i, node) in nodes.iter().enumerate() {
                let n = 1 + (round + i as u64) % 3;
                for tag in ["x", "y"] {
                    if node.check(tag, n).await.unwrap().is_ok() && tag == "x" {
                        admitted += n;
                    }
                }
            }
        }
        for node in &nodes {
            node.flush().await.unwrap();
        }
        let key = nodes[0].redis_key("x");
        assert_eq!(count(&mut probe, &key).await, admitted);

        // After the next sync (even of nothing), every node sees the global count.
        clock.advance(ms(200));
        for node in &nodes {
            let peek = node.peek("x", 0).await.unwrap().unwrap();
            assert_eq!(peek.remaining(), 1_000 - admitted);
            assert_eq!(peek.reset_after(), window - ms(500));
        }

        let keys: Vec<String> = probe.keys("*").await.unwrap();
        assert_eq!(keys.len(), 2, "{keys:?}");
        for key in keys {
            let ttl: i64 = probe.pttl(&key).await.unwrap();
            // The window's remaining 9.7 s (on this node's clock), plus 1 s of slack.
            assert!(ttl > 0 && ttl <= 10_700, "{key}: PTTL {ttl}");
        }
    }

    #[tokio::test]
    async fn a_new_window_counts_afresh() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let a = node(&server, &clock, 3, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 3).await.unwrap().is_ok());
        let denied = a.check("k", 1).await.unwrap().unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
        clock.advance(ms(999));
        let denied = a.check("k", 1).await.unwrap().unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(1)));
        clock.advance(ms(1));
        assert!(a.check("k", 3).await.unwrap().is_ok());
        let too_many = a.check("k", 4).await.unwrap();
        assert!(matches!(too_many, Err(Denied::Insufficient(_))));
    }

    /// `nodes` simulated nodes, each asked for one permit every `gap` of virtual time
    /// for one whole window; how many were admitted in all.
    async fn admitted_in_a_window(
        server: &RedisServer,
        nodes: usize,
        limit: u64,
        window: Duration,
        interval: Duration,
        gap: Duration,
    ) -> u64 {
        let clock = clock();
        let mut all = Vec::new();
        for _ in 0..nodes {
            all.push(node(server, &clock, limit, window, interval).await);
        }
        let mut admitted = 0;
        let start = clock.now();
        let end = start + window;
        while clock.now() < end {
            // Stagger the nodes within the gap, as independent processes would be.
            for node in &all {
                if node.check("hot", 1).await.unwrap().is_ok() {
                    admitted += 1;
                }
                clock.advance(gap / nodes as u32);
            }
        }
        let mut probe = connect(server).await;
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut probe)
            .await
            .unwrap();
        admitted
    }

    #[tokio::test]
    async fn over_admission_stays_within_the_documented_bound() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let limit = 1_000;
        let window = Duration::from_secs(10);
        for (nodes, interval_ms, rate) in [(4u64, 100u64, 100u64), (3, 250, 200), (2, 50, 1_000)] {
            let gap = Duration::from_secs(1) / rate as u32;
            let admitted =
                admitted_in_a_window(&server, nodes as usize, limit, window, ms(interval_ms), gap)
                    .await;
            // limit + (N − 1) × r × 2 × (sync_interval + rtt), rtt = 0 in virtual time.
            let bound = limit + (nodes - 1) * rate * 2 * interval_ms / 1_000;
            let offered = nodes * rate * window.as_secs();
            assert!(offered > limit);
            assert!(
                (limit..=bound).contains(&admitted),
                "{nodes} nodes, {interval_ms} ms, {rate}/s each: {admitted} admitted, bound {bound}"
            );
        }
    }

    #[tokio::test]
    async fn hammering_nodes_admit_at_most_the_limit_each() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let mut nodes = Vec::new();
        for _ in 0..4 {
            nodes.push(node(&server, &clock, 50, Duration::from_secs(10), ms(100)).await);
        }
        let mut admitted = 0;
        for node in &nodes {
            while node.check("hot", 1).await.unwrap().is_ok() {
                admitted += 1;
            }
        }
        // Each node read the count before the others synced: the worst case, N × limit.
        assert_eq!(admitted, 4 * 50);
        clock.advance(ms(100));
        for node in &nodes {
            assert!(node.check("hot", 1).await.unwrap().is_err());
        }
    }

    /// With a divisor, interleaved hammering admits within the documented bound,
    /// `limit + N × ⌊limit / divisor⌋`, far below the `N × limit` without one: each
    /// node spends an eighth of what remained before syncing again, and the request
    /// that syncs is decided in Redis.
    #[tokio::test]
    async fn with_a_divisor_hammering_nodes_admit_within_the_documented_bound() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let mut nodes = Vec::new();
        for _ in 0..4 {
            let node = node(&server, &clock, 400, Duration::from_secs(10), ms(100)).await;
            nodes.push(node.with_divisor(8).unwrap());
        }
        assert_eq!(nodes[0].divisor(), Some(8));
        let mut admitted = 0;
        for round in 0..200 {
            for node in &nodes {
                // Interleaved: each node's next request after the others'.
                if node.check("hot", 1).await.unwrap().is_ok() {
                    admitted += 1;
                }
            }
            if round % 50 == 49 {
                clock.advance(ms(1));
            }
        }
        for node in &nodes {
            node.flush().await.unwrap();
        }
        assert!(admitted <= 400 + 4 * 50, "admitted {admitted} of 400");
        // In practice a few permits over: the allowances shrink with what remains.
        assert!(admitted <= 440, "admitted {admitted} of 400");
        assert!(admitted >= 400, "admitted only {admitted} of 400");
        assert_eq!(
            count(&mut probe, &nodes[0].redis_key("hot")).await,
            admitted
        );
        let zero = nodes[0].clone().with_divisor(0).unwrap_err();
        assert_eq!(
            zero,
            ConfigError::Zero {
                parameter: "divisor"
            }
        );
    }

    #[tokio::test]
    async fn a_full_table_decides_new_keys_in_redis_exactly() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let a = node(&server, &clock, 2, Duration::from_secs(10), ms(100))
            .await
            .with_max_keys(1)
            .unwrap();
        assert!(a.check("x", 1).await.unwrap().is_ok()); // x holds 1 unsent
        assert!(a.peek("y", 2).await.unwrap().is_ok());
        assert!(a.check("y", 2).await.unwrap().is_ok());
        assert!(a.check("y", 1).await.unwrap().is_err());
        assert_eq!(a.len(), 1);
        assert_eq!(count(&mut probe, &a.redis_key("y")).await, 2);
        let ttl: i64 = probe.pttl(a.redis_key("y")).await.unwrap();
        assert!(ttl > 0 && ttl <= 11_000, "PTTL {ttl}");

        // Once x's admission is sent, x can be forgotten to make room.
        clock.advance(ms(100));
        assert!(a.check("x", 1).await.unwrap().is_ok());
        a.flush().await.unwrap();
        assert!(a.check("z", 1).await.unwrap().is_ok());
        assert_eq!(a.len(), 1);
        assert_eq!(count(&mut probe, &a.redis_key("x")).await, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sync_returns_its_error_and_keeps_the_admissions() {
        let Some(()) = require_redis() else { return };
        let mut server = RedisServer::start();
        let clock = clock();
        let client = redis::Client::open(server.url()).unwrap();
        let connection = ConnectionManager::new(client).await.unwrap();
        let rule = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
        let a = BatchedLimiter::with_clock(connection, "b", rule, ms(100), clock.clone()).unwrap();
        assert!(a.check("k", 3).await.unwrap().is_ok());

        tokio::task::block_in_place(|| server.kill());
        clock.advance(ms(100));
        let down = a.check("k", 1).await;
        assert!(matches!(down, Err(StoreError::Connection(_))), "{down:?}");
        // Meanwhile the node decides on what it knows.
        let mut admitted = 3;
        for _ in 0..4 {
            assert!(a.check("k", 1).await.unwrap().is_ok());
            admitted += 1;
        }

        tokio::task::block_in_place(|| server.restart());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            clock.advance(ms(100));
            match a.check("k", 1).await {
                Ok(decision) => {
                    assert!(decision.is_ok());
                    break;
                }
                Err(StoreError::Connection(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(ms(20)).await;
                }
                Err(e) => panic!("no recovery: {e}"),
            }
        }
        // The restart emptied Redis: the count is what was unsent, sent now.
        let mut probe = connect(&server).await;
        assert_eq!(count(&mut probe, &a.redis_key("k")).await, admitted);
    }

    // -----------------------------------------------------------------------------
    // Waiting, in the crate's FIFO queue
    // -----------------------------------------------------------------------------

    use std::future::Future;
    use std::pin::Pin;
    use std::task::Poll;

    use tollgate::{AcquireError, PermitSource};

    /// Polls once, on a waker that does nothing.
    fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let waker = futures::task::noop_waker();
        Pin::new(future).poll(&mut std::task::Context::from_waker(&waker))
    }

    #[tokio::test]
    async fn a_waiter_is_granted_when_the_next_window_opens() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let a = node(&server, &clock, 2, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 2).await.unwrap().is_ok());
        let mut waiting = a.acquire("k", 1);
        assert!(poll_once(&mut waiting).is_pending());
        assert_eq!(a.waiters(), 1);
        clock.advance(ms(999));
        assert!(poll_once(&mut waiting).is_pending());
        clock.advance(ms(1)); // the next window: the queue's alarm rings
        assert_eq!(waiting.await.unwrap(), Duration::from_secs(1));
        assert_eq!(a.waiters(), 0);
        // Granted in the new window, after reading its count: one of two taken.
        let admitted = a.check("k", 0).await.unwrap().unwrap();
        assert_eq!(admitted.remaining(), 1);
        a.flush().await.unwrap();
        assert_eq!(count(&mut probe, &a.redis_key("k")).await, 1);
    }

    #[tokio::test]
    async fn a_timeout_ending_before_the_window_fails_at_once() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let a = node(&server, &clock, 2, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 2).await.unwrap().is_ok());
        clock.advance(ms(50));
        // Decided between syncs: at the first poll.
        let mut short = a.acquire_timeout("k", 1, ms(949));
        assert!(matches!(
            poll_once(&mut short),
            Poll::Ready(Err(AcquireError::TimedOut))
        ));
        // Decided by a sync (one is due): without the clock moving.
        clock.advance(ms(100));
        let at = clock.now();
        assert!(matches!(
            a.acquire_timeout("k", 1, ms(600)).await,
            Err(AcquireError::TimedOut)
        ));
        assert_eq!(clock.now(), at);
        assert_eq!(a.waiters(), 0);
        // A timeout that reaches past the window's end waits for it.
        let mut in_time = a.acquire_timeout("k", 1, ms(851));
        assert!(poll_once(&mut in_time).is_pending());
        clock.advance(ms(850));
        assert_eq!(in_time.await.unwrap(), ms(850));
        // More than the limit is never, not a timeout.
        assert!(matches!(
            a.acquire_timeout("k", 3, ms(10)).await,
            Err(AcquireError::Insufficient(_))
        ));
    }

    #[tokio::test]
    async fn a_cancelled_waiter_gives_back_its_place_and_takes_nothing() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let mut probe = connect(&server).await;
        let clock = clock();
        let a = node(&server, &clock, 1, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 1).await.unwrap().is_ok());
        let mut first = a.acquire("k", 1);
        let mut second = a.acquire("k", 1);
        let mut third = a.acquire("k", 1);
        assert!(poll_once(&mut first).is_pending());
        assert!(poll_once(&mut second).is_pending());
        assert!(poll_once(&mut third).is_pending());
        drop(first); // the head leaves before its window
        assert_eq!(a.waiters(), 2);
        clock.advance(Duration::from_secs(1));
        // The next head starts its sync, then leaves mid round trip.
        assert!(poll_once(&mut second).is_pending());
        drop(second);
        assert_eq!(third.await.unwrap(), Duration::from_secs(1));
        assert!(a.check("k", 1).await.unwrap().is_err(), "one of one taken");
        a.flush().await.unwrap();
        assert_eq!(count(&mut probe, &a.redis_key("k")).await, 1);

        // Given back through the permit source: unsent admissions come back.
        clock.advance(Duration::from_secs(1));
        assert!(a.check("k", 0).await.unwrap().is_ok()); // reads the new window
        let grant = a.decide_now("k", 1).expect("between syncs").unwrap();
        assert!(grant.is_ok());
        assert!(a.try_acquire("k", 1).unwrap().unwrap().is_err());
        a.refund("k", 1);
        assert!(a.try_acquire("k", 1).unwrap().unwrap().is_ok());
    }

    #[tokio::test]
    async fn waiters_are_served_in_arrival_order() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let a = node(&server, &clock, 3, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 3).await.unwrap().is_ok());
        let mut big = a.acquire("k", 2);
        let mut one = a.acquire("k", 1);
        let mut late = a.acquire("k", 1);
        assert!(poll_once(&mut big).is_pending());
        assert!(poll_once(&mut one).is_pending());
        assert!(poll_once(&mut late).is_pending());

        clock.advance(Duration::from_secs(1));
        // Callers who do not wait are behind the waiters, even in a new window.
        let behind = a.check("k", 1).await.unwrap().unwrap_err();
        assert!(behind.is_limited());
        assert!(a.try_acquire("k", 1).unwrap().unwrap().is_err());
        assert!(poll_once(&mut late).is_pending(), "not its turn");
        assert!(poll_once(&mut one).is_pending(), "not its turn");
        assert_eq!(big.await.unwrap(), Duration::from_secs(1));
        assert_eq!(one.await.unwrap(), Duration::from_secs(1));
        // The window is spent (2 + 1): the last one waits for the next.
        assert!(poll_once(&mut late).is_pending());
        clock.advance(Duration::from_secs(1));
        assert_eq!(late.await.unwrap(), Duration::from_secs(2));
        assert_eq!(a.waiters(), 0);
    }

    #[tokio::test]
    async fn close_fails_waiters_and_later_calls() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let a = node(&server, &clock, 1, Duration::from_secs(1), ms(100)).await;
        assert!(a.check("k", 1).await.unwrap().is_ok());
        let mut waiting = a.acquire("k", 1);
        assert!(poll_once(&mut waiting).is_pending());
        a.close();
        assert!(a.is_closed());
        assert!(matches!(waiting.await, Err(AcquireError::Closed)));
        assert!(matches!(a.acquire("k", 1).await, Err(AcquireError::Closed)));
        assert_eq!(a.check("k", 1).await.unwrap(), Err(Denied::Closed));
        assert_eq!(
            a.try_acquire("other", 1).unwrap().unwrap().unwrap_err(),
            Denied::Closed
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn acquire_blocking_makes_its_sync_on_the_calling_thread() {
        let Some(()) = require_redis() else { return };
        let server = RedisServer::start();
        let clock = clock();
        let a = node(&server, &clock, 2, Duration::from_secs(1), ms(100)).await;
        let blocking = a.clone();
        let waited = tokio::task::spawn_blocking(move || blocking.acquire_blocking("k", 2))
            .await
            .unwrap();
        assert_eq!(waited.unwrap(), Duration::ZERO);
        assert!(matches!(
            a.acquire_blocking_timeout("k", 1, ms(10)),
            Err(AcquireError::TimedOut)
        ));
    }
}
