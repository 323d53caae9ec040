//! `Store::execute_each` on Redis answers as on the memory store: the combined reply
//! and each check's own answer, for random requests of several checks with counts of
//! their own (a differential proptest on a real `redis-server`, alone and coalesced),
//! and for a table of cases on a single server, through the coalescer, and on a
//! 3-master Redis Cluster. A fixed window counting denied acquires writes its denial
//! when alone, and nothing in a denied request of several checks, in both stores.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::each::{Call, EPOCH_MICROS, asks, key, rules};
use common::redis::{RedisCluster, require_redis};
use common::store::{Differential, connect};
use futures::future::join_all;
use proptest::prelude::*;
use tollgate::KeyedConfig;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{
    Answers, Check, MemoryStore, Op, RedisStore, Reply, Request, Rule, Store, StoreError,
};
use tollgate::time::ManualClock;

fn memory(prefix: &str) -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), prefix, ManualClock::new()).unwrap()
}

/// Runs `calls` on a memory store and on `redis`, comparing every answer.
async fn compare<S: Store>(redis: &S, prefix: &str, calls: &[Call]) -> Result<(), String> {
    let rules = rules();
    let keys: Vec<String> = (0..rules.len()).map(key).collect();
    let memory = memory(prefix);
    let mut now = EPOCH_MICROS;
    for (i, call) in calls.iter().enumerate() {
        now += call.dt_ms * 1_000;
        let tag = call.tag();
        let checks = call.checks(&rules, &keys);
        let request = Request::new(&tag, &checks, call.op()).at(Duration::from_micros(now));
        let expected = memory.execute_each_now(&request).unwrap();
        let got = redis.execute_each(&request).await.unwrap();
        if expected != got {
            return Err(format!(
                "call {i} ({call:?}): memory {expected:?}, redis {got:?}, calls {calls:?}"
            ));
        }
        if got.checks().map(<[Reply]>::len) != Some(checks.len()) {
            return Err(format!("call {i}: no answer per check from redis: {got:?}"));
        }
    }
    Ok(())
}

#[test]
fn redis_answers_each_check_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    diff.run(48, asks(1..16), |diff, calls| {
        let redis = diff.redis_store();
        let prefix = redis.prefix().to_owned();
        diff.block_on(compare(&redis, &prefix, &calls))
            .map_err(TestCaseError::fail)?;
        let coalesced = diff.redis_store().coalescing(8);
        let prefix = coalesced.prefix().to_owned();
        diff.block_on(compare(&coalesced, &prefix, &calls))
            .map_err(TestCaseError::fail)
    });
}

/// One step of a case: the checks (rule, own count), the op, and the ms since the
/// case began.
type CaseStep = (Vec<(usize, Option<u64>)>, Op, u64);

struct Case {
    name: &'static str,
    steps: Vec<CaseStep>,
}

fn cases() -> Vec<Case> {
    let acquire = Op::Acquire;
    vec![
        Case {
            name: "own counts, zero only looks",
            steps: vec![
                (vec![(0, Some(2)), (3, Some(0))], acquire(1), 0),
                (vec![(0, None), (3, Some(3))], acquire(1), 0),
                (vec![(0, Some(0)), (3, Some(0))], acquire(5), 10),
            ],
        },
        Case {
            name: "a denied request answers the admitting check as if taken",
            steps: vec![
                (vec![(0, Some(3))], acquire(1), 0),
                (vec![(0, Some(1)), (4, Some(2))], acquire(1), 0),
                (vec![(4, Some(0))], acquire(1), 0),
            ],
        },
        Case {
            name: "over capacity: the precheck's reply, each check by a peek",
            steps: vec![
                (vec![(3, Some(1))], acquire(1), 0),
                (vec![(2, Some(5)), (3, Some(1)), (0, None)], acquire(1), 0),
                (vec![(2, Some(5)), (3, Some(1))], Op::Peek(2), 0),
                (vec![(2, Some(5))], acquire(1), 0),
            ],
        },
        Case {
            name: "a counting window writes its denial alone, nothing with others",
            steps: vec![
                (vec![(1, Some(3))], acquire(1), 0),
                (vec![(1, Some(2)), (0, Some(1))], acquire(1), 100),
                (vec![(1, Some(0)), (0, Some(0))], acquire(1), 100),
                (vec![(1, Some(2))], acquire(1), 200),
                (vec![(1, Some(0)), (0, Some(0))], acquire(1), 200),
                (vec![(1, Some(1))], Op::Peek(1), 300),
                (vec![(1, Some(0))], acquire(1), 1_000),
            ],
        },
        Case {
            name: "a first-hit counting window",
            steps: vec![
                (vec![(2, Some(2)), (3, Some(1))], acquire(1), 0),
                (vec![(2, Some(1))], acquire(1), 100),
                (vec![(2, Some(0)), (4, None)], acquire(1), 200),
                (vec![(2, Some(0))], acquire(1), 500),
            ],
        },
        Case {
            name: "refunds give back each check's own count",
            steps: vec![
                (vec![(0, Some(3)), (4, Some(1))], acquire(1), 0),
                (vec![(0, Some(2)), (4, Some(1))], Op::Refund(0), 0),
                (vec![(0, Some(0)), (4, Some(0))], acquire(1), 0),
            ],
        },
        Case {
            name: "reservations of several checks are immediate",
            steps: vec![
                (
                    vec![(3, None), (0, Some(2))],
                    Op::Reserve {
                        n: 2,
                        max_wait: Duration::from_secs(1),
                    },
                    0,
                ),
                (
                    vec![(3, None), (0, None)],
                    Op::Reserve {
                        n: 2,
                        max_wait: Duration::from_secs(1),
                    },
                    0,
                ),
                (
                    vec![(3, Some(1))],
                    Op::Reserve {
                        n: 1,
                        max_wait: Duration::from_secs(1),
                    },
                    0,
                ),
            ],
        },
    ]
}

/// Runs every case on a memory store and on `redis` (each case on a tag of its own),
/// comparing answers; returns them.
async fn run_cases<S: Store>(redis: &S, prefix: &str) -> Vec<Vec<Answers>> {
    let rules = rules();
    let keys: Vec<String> = (0..rules.len()).map(key).collect();
    let memory = memory(prefix);
    let mut all = Vec::new();
    for (c, case) in cases().iter().enumerate() {
        let tag = format!("case-{c}");
        let mut answers = Vec::new();
        for (s, (spec, op, ms)) in case.steps.iter().enumerate() {
            let checks: Vec<Check<'_>> = spec
                .iter()
                .map(|&(i, own)| {
                    let check = Check::new(&keys[i], &rules[i]);
                    own.map_or(check, |n| check.with_permits(n))
                })
                .collect();
            let at = Duration::from_micros(EPOCH_MICROS + ms * 1_000);
            let request = Request::new(&tag, &checks, *op).at(at);
            let expected = memory.execute_each_now(&request).unwrap();
            let got = redis.execute_each(&request).await.unwrap();
            assert_eq!(got, expected, "{} step {s}", case.name);
            assert_eq!(
                got.reply(),
                memory_execute(&request, &case.steps[..s], &tag),
                "{} step {s}: execute's reply",
                case.name
            );
            answers.push(got);
        }
        all.push(answers);
    }
    all
}

/// What `execute` answers `request` after `before`, on a fresh memory store.
fn memory_execute(request: &Request<'_>, before: &[CaseStep], tag: &str) -> Reply {
    let rules = rules();
    let keys: Vec<String> = (0..rules.len()).map(key).collect();
    let store = memory("replay");
    for (spec, op, ms) in before {
        let checks: Vec<Check<'_>> = spec
            .iter()
            .map(|&(i, own)| {
                let check = Check::new(&keys[i], &rules[i]);
                own.map_or(check, |n| check.with_permits(n))
            })
            .collect();
        let at = Duration::from_micros(EPOCH_MICROS + ms * 1_000);
        store
            .execute_now(&Request::new(tag, &checks, *op).at(at))
            .unwrap();
    }
    store.execute_now(request).unwrap()
}

fn remaining(reply: Reply) -> Option<u64> {
    reply.into_decision().unwrap().ok().map(|a| a.remaining())
}

/// The documented outcomes of the table, whichever store gave them.
fn check_documented(all: &[Vec<Answers>]) {
    let own = |c: usize, s: usize| all[c][s].checks().unwrap().to_vec();
    // own counts: 2 of 3 taken, the GCRA only looked at.
    assert_eq!(
        own(0, 0).into_iter().map(remaining).collect::<Vec<_>>(),
        [Some(1), Some(3)]
    );
    // as if taken: the sliding log would have 1 left of 3, though nothing was taken.
    assert!(!all[1][1].reply().is_admitted());
    assert_eq!(remaining(own(1, 1)[1]), Some(1));
    assert_eq!(remaining(all[1][2].reply()), Some(3));
    // over capacity: never for the first check, the others answered.
    assert!(
        all[2][1]
            .reply()
            .into_decision()
            .unwrap()
            .unwrap_err()
            .is_never()
    );
    assert!(
        own(2, 1)[0]
            .into_decision()
            .unwrap()
            .unwrap_err()
            .is_never()
    );
    assert_eq!(remaining(own(2, 1)[1]), Some(1));
    // counting: with another check, nothing written (3 of 4 still), alone over.
    assert!(!all[3][1].reply().is_admitted());
    assert_eq!(
        remaining(own(3, 2)[0]),
        Some(1),
        "the denial with others was not counted"
    );
    assert!(!all[3][3].reply().is_admitted());
    assert_eq!(remaining(own(3, 4)[0]), None, "alone, the denial counted");
    assert!(own(3, 4)[1].is_admitted());
    assert!(!all[3][5].reply().is_admitted());
    assert_eq!(remaining(all[3][6].reply()), Some(4), "the next window");
    // first hit: over until its window (opened at 0, 500 ms) ends.
    assert!(!all[4][2].reply().is_admitted());
    assert_eq!(remaining(all[4][3].reply()), Some(2));
    // refunds: 2 of the window's 3 back, the log's 1.
    assert_eq!(
        own(5, 2).into_iter().map(remaining).collect::<Vec<_>>(),
        [Some(2), Some(3)]
    );
    // reservations: the first granted on both, the second denied by the window.
    assert!(all[6][0].reply().is_admitted());
    assert!(!all[6][1].reply().is_admitted());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_cases_on_a_server_through_the_coalescer_and_on_a_cluster() {
    let Some(()) = require_redis() else {
        return;
    };
    let server = tokio::task::spawn_blocking(common::redis::RedisServer::start)
        .await
        .unwrap();
    let connection = connect(&server.url()).await;
    let plain = RedisStore::new(connection.clone(), "plain").unwrap();
    let all = run_cases(&plain, "plain").await;
    check_documented(&all);
    let coalesced = RedisStore::new(connection.clone(), "coalesced")
        .unwrap()
        .coalescing(16);
    check_documented(&run_cases(&coalesced, "coalesced").await);

    // Several requests with counts of their own in one batch call, each on its tag.
    let rules = rules();
    let keys: Vec<String> = (0..rules.len()).map(key).collect();
    let tags: Vec<String> = (0..8).map(|i| format!("batch-{i}")).collect();
    let checks: Vec<Vec<Check<'_>>> = (0..8)
        .map(|i| {
            vec![
                Check::new(&keys[1], &rules[1]).with_permits(i % 5),
                Check::new(&keys[3], &rules[3]),
            ]
        })
        .collect();
    let at = Duration::from_micros(EPOCH_MICROS);
    let requests: Vec<Request<'_>> = tags
        .iter()
        .zip(&checks)
        .map(|(tag, checks)| Request::new(tag, checks, Op::Acquire(1)).at(at))
        .collect();
    let got = join_all(requests.iter().map(|r| coalesced.execute_each(r))).await;
    let memory = memory("coalesced");
    for (request, got) in requests.iter().zip(got) {
        assert_eq!(got.unwrap(), memory.execute_each_now(request).unwrap());
    }

    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3))
        .await
        .unwrap();
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let clustered = RedisStore::connect_cluster(&seeds, "cluster")
        .await
        .unwrap();
    check_documented(&run_cases(&clustered, "cluster").await);
    drop(cluster);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_with_a_check_of_another_count_is_a_typed_error() {
    let Some(()) = require_redis() else {
        return;
    };
    let server = tokio::task::spawn_blocking(common::redis::RedisServer::start)
        .await
        .unwrap();
    let store = RedisStore::new(connect(&server.url()).await, "errors").unwrap();
    let rule = Rule::from(FixedWindow::new(5, Duration::from_secs(1)).unwrap());
    let checks = [
        Check::new("a", &rule).with_permits(1),
        Check::new("b", &rule),
    ];
    let reserve = Op::Reserve {
        n: 2,
        max_wait: Duration::ZERO,
    };
    let request = Request::new("t", &checks, reserve);
    for error in [
        store.execute(&request).await.unwrap_err(),
        store.execute_each(&request).await.unwrap_err(),
    ] {
        assert!(
            matches!(&error, StoreError::Config(e) if e.parameter() == "permits"),
            "{error:?}"
        );
    }
    drop(server);
}
