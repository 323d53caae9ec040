//! A coalescing `RedisStore` (several requests per `EVALSHA`) decides as the memory
//! store in arrival order, fails only the caller of a conflicting request, never
//! strands a queued request when a caller is dropped, reloads its script after
//! `SCRIPT FLUSH`, and sets a TTL on every key it writes.
//!
//! Which requests share a call is made certain, not timed: `CLIENT PAUSE ... WRITE`
//! (from a second connection) holds the first call at the server while the others
//! queue behind it, and `CLIENT UNPAUSE` lets it go.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use common::store::{Differential, EPOCH_MICROS, connect, steps};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::algorithm::{Gcra, SmoothBursty};
use tollgate::store::{
    Check, MemoryStore, Op, RedisStore, Reply, Request, Rule, RuleKind, Store, StoreError,
};
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, Quota};

/// Bounds every wait for a reply, so a stranded request fails the test, not hangs it.
const HANG: Duration = Duration::from_secs(20);

fn gcra(interval_micros: u64, burst: u64) -> Rule {
    let quota = Quota::with_period(Duration::from_micros(interval_micros)).unwrap();
    Rule::from(Gcra::new(quota.burst(burst).unwrap()))
}

fn at(micros: u64) -> Duration {
    Duration::from_micros(EPOCH_MICROS + micros)
}

/// How many calls (`EVALSHA`, or `FCALL` where the server has Functions) the server
/// has run.
async fn evalsha_calls(connection: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    ["cmdstat_evalsha:calls=", "cmdstat_fcall:calls="]
        .iter()
        .filter_map(|prefix| info.lines().find_map(|line| line.strip_prefix(prefix)))
        .map(|rest| rest.split(',').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

async fn pause_writes(control: &mut MultiplexedConnection) {
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query_async(control)
        .await
        .unwrap();
}

async fn unpause(control: &mut MultiplexedConnection) {
    let () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async(control)
        .await
        .unwrap();
}

/// Lets every spawned task run until it waits (the test runtime has one thread).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A coalescing store on its own connection, and a second connection to steer the
/// server with. The scripts of the rules used here and the library are loaded (a call
/// runs the script of its requests' kinds), so that every call counted is a decision.
async fn stores(
    server: &RedisServer,
    prefix: &str,
    max_batch: usize,
) -> (RedisStore<MultiplexedConnection>, MultiplexedConnection) {
    let store = RedisStore::new(connect(&server.url()).await, prefix)
        .unwrap()
        .coalescing(max_batch);
    let mut control = connect(&server.url()).await;
    let kinds: [&[RuleKind]; 3] = [
        &[RuleKind::Gcra],
        &[RuleKind::SmoothBursty],
        &[RuleKind::Gcra, RuleKind::SmoothBursty],
    ];
    for kinds in kinds {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(RedisStore::<MultiplexedConnection>::script_source_for(
                kinds,
            ))
            .query_async(&mut control)
            .await
            .unwrap();
    }
    // And the library, where the server has Functions.
    let _: redis::RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(RedisStore::<MultiplexedConnection>::library_source())
        .query_async(&mut control)
        .await;
    (store, control)
}

/// `request` on a clone of `store`, in a task of its own.
fn spawn(
    store: &RedisStore<MultiplexedConnection>,
    tag: &str,
    rule: &Rule,
    op: Op,
    when: Option<Duration>,
) -> tokio::task::JoinHandle<Result<Reply, StoreError>> {
    let (store, tag, rule) = (store.clone(), tag.to_owned(), rule.clone());
    tokio::spawn(async move {
        let checks = [Check::new("", &rule)];
        let mut request = Request::new(&tag, &checks, op);
        if let Some(when) = when {
            request = request.at(when);
        }
        store.execute(&request).await
    })
}

async fn join(
    task: tokio::task::JoinHandle<Result<Reply, StoreError>>,
) -> Result<Reply, StoreError> {
    tokio::time::timeout(HANG, task)
        .await
        .expect("a request was stranded")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_at_one_instant_admit_exactly_the_burst_in_few_calls() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, mut control) = stores(&server, "burst", 64).await;
    // 1 per 10 s, a burst of 100: at one instant, exactly 100 of 2,000 get in.
    let rule = gcra(10_000_000, 100);
    let tasks: Vec<_> = (0..2_000)
        .map(|_| spawn(&store, "one", &rule, Op::Acquire(1), Some(at(0))))
        .collect();
    let mut remaining = Vec::new();
    for task in tasks {
        if let Reply::Decision(Ok(admitted)) = join(task).await.unwrap() {
            remaining.push(admitted.remaining());
        }
    }
    // Each admitted one saw the one before it: 99, 98, …, 0, once each.
    remaining.sort_unstable();
    assert_eq!(remaining, (0..100).collect::<Vec<u64>>());
    let calls = evalsha_calls(&mut control).await;
    assert!(
        calls < 2_000,
        "{calls} calls for 2,000 requests: nothing was coalesced"
    );
    let ttl: i64 = control.pttl(store.redis_key("one", "")).await.unwrap();
    assert!(ttl > 0, "no TTL: {ttl}");
}

/// Requests in a fixed arrival order, all but the first in calls behind a held one,
/// decide as the memory store deciding them one by one in that order.
#[tokio::test]
async fn queued_requests_decide_as_the_memory_store_in_arrival_order() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, mut control) = stores(&server, "order", 4).await;
    let memory =
        MemoryStore::with_clock(KeyedConfig::new(1_000), "order", ManualClock::new()).unwrap();
    let (fast, smooth) = (
        gcra(100_000, 3),
        Rule::from(SmoothBursty::new(3.0).unwrap()),
    );
    let asks: Vec<(&str, &Rule, Op, u64)> = vec![
        ("a", &fast, Op::Acquire(1), 0),
        ("a", &fast, Op::Acquire(2), 0),
        ("b", &smooth, Op::Acquire(1), 0),
        ("a", &fast, Op::Acquire(1), 0),
        ("a", &fast, Op::Peek(1), 0),
        (
            "b",
            &smooth,
            Op::Reserve {
                n: 2,
                max_wait: Duration::from_secs(2),
            },
            0,
        ),
        ("a", &fast, Op::Refund(1), 0),
        ("a", &fast, Op::Acquire(1), 0),
        ("a", &fast, Op::Acquire(1), 50_000),
        ("b", &smooth, Op::Acquire(1), 50_000),
        ("a", &fast, Op::Acquire(1), 0),
        ("a", &fast, Op::Acquire(1), 200_000),
    ];
    let before = evalsha_calls(&mut control).await;
    pause_writes(&mut control).await;
    let mut tasks = Vec::new();
    for &(tag, rule, op, micros) in &asks {
        tasks.push(spawn(&store, tag, rule, op, Some(at(micros))));
        settle().await;
    }
    unpause(&mut control).await;
    for (task, &(tag, rule, op, micros)) in tasks.into_iter().zip(&asks) {
        let checks = [Check::new("", rule)];
        let request = Request::new(tag, &checks, op).at(at(micros));
        let expected = memory.execute_now(&request).unwrap();
        assert_eq!(join(task).await.unwrap(), expected, "{request:?}");
    }
    // The first alone, then calls of up to 4 with one time each: [0 0 0 0] [0 0 0]
    // [50 50] [0] [200].
    assert_eq!(evalsha_calls(&mut control).await - before, 6);
    for tag in ["a", "b"] {
        let ttl: i64 = control.pttl(store.redis_key(tag, "")).await.unwrap();
        assert!(ttl > 0, "{tag}: no TTL: {ttl}");
    }
}

#[tokio::test]
async fn a_conflict_in_a_call_fails_only_its_caller() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, mut control) = stores(&server, "conflict", 64).await;
    let rule = gcra(1_000_000, 5);
    let () = control
        .set(store.redis_key("bad", ""), "not tollgate's")
        .await
        .unwrap();
    let before = evalsha_calls(&mut control).await;
    pause_writes(&mut control).await;
    let first = spawn(&store, "first", &rule, Op::Acquire(1), None);
    settle().await;
    let tasks: Vec<_> = ["good", "bad", "also-good"]
        .iter()
        .map(|tag| spawn(&store, tag, &rule, Op::Acquire(1), None))
        .collect();
    settle().await;
    unpause(&mut control).await;
    assert!(join(first).await.unwrap().is_admitted());
    let mut results = Vec::new();
    for task in tasks {
        results.push(join(task).await);
    }
    assert!(results[0].as_ref().unwrap().is_admitted());
    match &results[1] {
        Err(StoreError::KeyConflict { key }) => assert_eq!(key, &store.redis_key("bad", "")),
        other => panic!("expected a conflict: {other:?}"),
    }
    assert!(results[2].as_ref().unwrap().is_admitted());
    assert_eq!(
        evalsha_calls(&mut control).await - before,
        2,
        "not one call for the three"
    );
    let untouched: String = control.get(store.redis_key("bad", "")).await.unwrap();
    assert_eq!(untouched, "not tollgate's");
}

#[tokio::test]
async fn a_dropped_caller_strands_no_one() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, mut control) = stores(&server, "drop", 64).await;
    let rule = gcra(1_000_000, 5);

    // The caller sending the first call is dropped: the queued ones go all the same.
    pause_writes(&mut control).await;
    let leader = spawn(&store, "leader", &rule, Op::Acquire(1), None);
    settle().await;
    let queued: Vec<_> = ["b", "c", "d"]
        .iter()
        .map(|tag| spawn(&store, tag, &rule, Op::Acquire(1), None))
        .collect();
    settle().await;
    leader.abort();
    settle().await;
    // The next call is now sent by "b", and held in turn: drop "b" too. Its fellow
    // requests' outcome is unknown, as after a lost connection.
    let mut queued = queued.into_iter();
    let b = queued.next().unwrap();
    b.abort();
    settle().await;
    // A caller queued behind those, and one dropped while queued.
    let late = spawn(&store, "late", &rule, Op::Acquire(1), None);
    let gone = spawn(&store, "gone", &rule, Op::Acquire(1), None);
    settle().await;
    gone.abort();
    settle().await;
    unpause(&mut control).await;
    for task in queued {
        match join(task).await {
            Err(StoreError::Connection(_)) => {}
            other => panic!("expected an unknown outcome: {other:?}"),
        }
    }
    assert!(join(late).await.unwrap().is_admitted());
    let gone_written: bool = control.exists(store.redis_key("gone", "")).await.unwrap();
    assert!(!gone_written, "a request dropped while queued was sent");
    // The queue is free again: a new request goes at once.
    assert!(
        join(spawn(&store, "after", &rule, Op::Acquire(1), None))
            .await
            .unwrap()
            .is_admitted()
    );
}

#[tokio::test]
async fn a_call_after_script_flush_loads_the_script_again() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, mut control) = stores(&server, "flush", 64).await;
    // The scripts' path: the library has no cache that `SCRIPT FLUSH` empties.
    let store = store.without_functions();
    let rule = gcra(1_000_000, 5);
    assert!(
        join(spawn(&store, "k", &rule, Op::Acquire(1), None))
            .await
            .unwrap()
            .is_admitted()
    );
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut control)
        .await
        .unwrap();
    pause_writes(&mut control).await;
    let first = spawn(&store, "k", &rule, Op::Acquire(1), None);
    settle().await;
    let rest: Vec<_> = (0..3)
        .map(|_| spawn(&store, "k", &rule, Op::Acquire(1), None))
        .collect();
    settle().await;
    unpause(&mut control).await;
    let mut admitted = u64::from(join(first).await.unwrap().is_admitted());
    for task in rest {
        admitted += u64::from(join(task).await.unwrap().is_admitted());
    }
    assert_eq!(admitted, 4, "a burst of 5, one taken before");
}

#[tokio::test]
async fn a_max_batch_of_zero_counts_as_one() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (store, _control) = stores(&server, "zero", 0).await;
    assert!(
        format!("{store:?}").contains("coalescing: Some(1)"),
        "{store:?}"
    );
    let rule = gcra(1_000_000, 2);
    let tasks: Vec<_> = (0..3)
        .map(|_| spawn(&store, "k", &rule, Op::Acquire(1), Some(at(0))))
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += u64::from(join(task).await.unwrap().is_admitted());
    }
    assert_eq!(admitted, 2);
}

/// The differential harness's cases, one request at a time, through a coalescing
/// store: each goes alone, in batch mode.
fn check_coalescing(
    diff: &Differential,
    rules: &[Rule],
    start_micros: u64,
    steps: &[common::store::Step],
) -> Result<(), TestCaseError> {
    let store = diff.redis_store().coalescing(8);
    let memory =
        MemoryStore::with_clock(KeyedConfig::new(1_000), store.prefix(), ManualClock::new())
            .unwrap();
    let keys: Vec<String> = (0..rules.len()).map(|i| format!("r{i}")).collect();
    let checks: Vec<Check<'_>> = rules
        .iter()
        .zip(&keys)
        .map(|(rule, key)| Check::new(key, rule))
        .collect();
    let mut now = EPOCH_MICROS + start_micros;
    let mut connection = store.connection().clone();
    for (i, step) in steps.iter().enumerate() {
        now += step.dt_micros;
        let tag = format!("t{}", step.tag);
        let request = Request::new(&tag, &checks, step.op()).at(Duration::from_micros(now));
        let expected = memory.execute_now(&request);
        let got = diff.block_on(store.execute(&request));
        match (&expected, &got) {
            (Ok(e), Ok(g)) => prop_assert_eq!(e, g, "step {} ({:?}) of {:?}", i, step, steps),
            _ => prop_assert!(
                false,
                "step {i} ({step:?}): memory {expected:?}, redis {got:?}"
            ),
        }
        for key in &keys {
            let redis_key = store.redis_key(&tag, key);
            let ttl: i64 = diff.block_on(connection.pttl(&redis_key)).unwrap();
            prop_assert!(ttl != -1, "{} has no TTL after step {}", redis_key, i);
        }
    }
    Ok(())
}

fn gcra_rule() -> impl Strategy<Value = Rule> {
    (1_000u64..2_000_000, 1u64..8).prop_map(|(interval, burst)| gcra(interval, burst))
}

#[test]
fn differential_cases_decide_the_same_through_a_coalescing_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (
        gcra_rule(),
        gcra_rule(),
        0u64..1_000_000_000,
        steps(3_000_000, 8, 1..24),
    );
    diff.run(16, strategy, |diff, (a, b, start, steps)| {
        check_coalescing(diff, std::slice::from_ref(&a), start, &steps)?;
        check_coalescing(diff, &[a, b], start, &steps)
    });
}
