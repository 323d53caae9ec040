//! The sliding log and the sliding window counter in the stores: their Redis scripts
//! decide as the memory store (the pure algorithms) under random requests, alone and
//! with a GCRA rule, and with clock readings older than the last request's; the
//! counter's `retry_after` is the pure one rounded up to the µs (equal on the windows
//! the shared harness draws). Foreign states are conflicts, and on the server's own
//! clock the scripts write the state and TTL they should.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use common::store::{Differential, EPOCH_MICROS, Step, connect, server_micros, steps};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use redis::AsyncCommands;
use tollgate::algorithm::{Gcra, SlidingCounter, SlidingLog};
use tollgate::store::{
    Check, MemoryStore, RedisStore, Reply, Request, Rule, SharedLimiter, Store, StoreError,
};
use tollgate::time::ManualClock;
use tollgate::{Denied, KeyedConfig, Limited, Quota};

/// Requests per case.
const STEPS: std::ops::Range<usize> = 1..32;

/// Intervals of whole µs from 1 ms to 2 s, bursts 1–8.
fn gcra() -> impl Strategy<Value = Rule> {
    (1_000u64..2_000_000, 1u64..8).prop_map(|(interval, burst)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        Rule::from(Gcra::new(quota.burst(burst).unwrap()))
    })
}

/// A sliding log of limit 1–10 over 1 ms–3 s, with the given gap and counting; with
/// steps up to half a window apart.
fn sliding_log(
    gap: impl Strategy<Value = u64>,
    count_blocked: impl Strategy<Value = bool>,
) -> impl Strategy<Value = (Rule, Vec<Step>)> {
    (1u64..=10, 1_000u64..=3_000_000, gap, count_blocked).prop_flat_map(
        |(limit, window, gap_per_mille, count_blocked)| {
            let log = SlidingLog::new(limit, Duration::from_micros(window))
                .unwrap()
                .min_gap(Duration::from_micros(window * gap_per_mille / 1000))
                .unwrap()
                .count_blocked(count_blocked);
            (Just(Rule::from(log)), steps(window / 2, limit, STEPS))
        },
    )
}

/// Every count from 1 to `limit` divides this.
fn lcm_up_to(limit: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    (1..=limit).fold(1, |acc, k| acc / gcd(acc, k) * k)
}

/// A sliding counter of limit 1–10 over 1 ms–3 s; with `exact`, windows are multiples
/// of every count up to the limit, so that the in-process `retry_after` is a whole µs.
fn sliding_counter(exact: bool) -> impl Strategy<Value = (Rule, Vec<Step>)> {
    (1u64..=10)
        .prop_flat_map(move |limit| {
            let unit = if exact { lcm_up_to(limit) } else { 1 };
            let windows = 1_000u64.div_ceil(unit)..=3_000_000 / unit;
            (Just(limit), windows.prop_map(move |k| k * unit))
        })
        .prop_flat_map(|(limit, window)| {
            let counter = SlidingCounter::new(limit, Duration::from_micros(window)).unwrap();
            (Just(Rule::from(counter)), steps(window / 2, limit, STEPS))
        })
}

/// Start times anywhere in 1000 s, so windows fall anywhere relative to them.
fn start() -> impl Strategy<Value = u64> {
    0u64..1_000_000_000
}

#[test]
fn sliding_log_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (sliding_log(Just(0), Just(false)), start());
    diff.run(64, strategy, |diff, ((rule, steps), start)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn sliding_log_with_a_minimum_gap_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    // Gaps from a tenth of the window to one and a half windows.
    let strategy = (sliding_log(100u64..=1_500, Just(false)), start());
    diff.run(48, strategy, |diff, ((rule, steps), start)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn sliding_log_counting_blocked_attempts_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let gap = prop_oneof![Just(0u64), 100u64..=1_500];
    let strategy = (sliding_log(gap, Just(true)), start());
    diff.run(48, strategy, |diff, ((rule, steps), start)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn sliding_log_with_a_gcra_rule_decides_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let gap = prop_oneof![2 => Just(0u64), 1 => 100u64..=1_500];
    let strategy = (sliding_log(gap, any::<bool>()), gcra(), start());
    diff.run(48, strategy, |diff, ((log, steps), gcra, start)| {
        diff.check(&[log, gcra], start, &steps)
    });
}

#[test]
fn sliding_counter_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (sliding_counter(true), start());
    diff.run(64, strategy, |diff, ((rule, steps), start)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn sliding_counter_with_a_gcra_rule_decides_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (sliding_counter(true), gcra(), start());
    diff.run(48, strategy, |diff, ((counter, steps), gcra, start)| {
        diff.check(&[counter, gcra], start, &steps)
    });
}

/// `outcome` with a denial's `retry_after` rounded up to the microsecond.
fn retry_in_whole_micros(outcome: Reply) -> Reply {
    let round = |denied: Denied| match denied {
        Denied::Limited(l) => Denied::from(Limited::new(
            Duration::from_micros(
                l.retry_after().expect("a time").as_nanos().div_ceil(1_000) as u64
            ),
            l.limit(),
            l.remaining(),
            l.reset_after(),
        )),
        other => other,
    };
    match outcome {
        Reply::Decision(Err(denied)) => Reply::Decision(Err(round(denied))),
        Reply::Reservation(Err(denied)) => Reply::Reservation(Err(round(denied))),
        other => other,
    }
}

/// One case for [`differential_with_earlier_readings`]: `steps` from `start`, each
/// made `back` µs before its time in the steps, as by a process whose clock reading
/// is older than the last request's.
#[derive(Debug)]
struct JitteredCase {
    rules: Vec<Rule>,
    start: u64,
    steps: Vec<Step>,
    back: Vec<u64>,
}

/// `rules` with `steps`, a quarter of them read up to a window of the first rule
/// early.
fn jittered(rules: Vec<Rule>, steps: Vec<Step>) -> impl Strategy<Value = JitteredCase> {
    let max_back = match &rules[0] {
        Rule::SlidingLog(log) => log.window(),
        Rule::SlidingCounter(counter) => counter.window(),
        other => panic!("no window in {other:?}"),
    }
    .as_micros() as u64;
    let len = steps.len();
    let back = prop_oneof![3 => Just(0u64), 1 => 0..=max_back];
    (start(), prop::collection::vec(back, len)).prop_map(move |(start, back)| JitteredCase {
        rules: rules.clone(),
        start,
        steps: steps.clone(),
        back,
    })
}

/// The differential test of `tests/common/store.rs`, on its own server, with times
/// that may step back, and with the memory store's outcome passed through `expect`.
fn differential_with_earlier_readings(
    cases: u32,
    strategy: impl Strategy<Value = JitteredCase>,
    expect: fn(Reply) -> Reply,
) {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connection = runtime.block_on(connect(&server.url()));
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let case = std::cell::Cell::new(0u32);
    let result = runner.run(&strategy, |c| {
        case.set(case.get() + 1);
        let prefix = format!("jittered{}", case.get());
        let redis_store = RedisStore::new(connection.clone(), &prefix).unwrap();
        let memory =
            MemoryStore::with_clock(KeyedConfig::new(1_000), &prefix, ManualClock::new()).unwrap();
        let keys: Vec<String> = (0..c.rules.len()).map(|i| format!("r{i}")).collect();
        let checks: Vec<Check<'_>> = c
            .rules
            .iter()
            .zip(&keys)
            .map(|(rule, key)| Check::new(key, rule))
            .collect();
        let mut now = EPOCH_MICROS + c.start;
        for (i, (step, back)) in c.steps.iter().zip(&c.back).enumerate() {
            now += step.dt_micros;
            let at = Duration::from_micros(now - back);
            let tag = format!("t{}", step.tag);
            let request = Request::new(&tag, &checks, step.op()).at(at);
            let expected = memory.execute_now(&request).map(expect);
            let got = runtime.block_on(redis_store.execute(&request));
            match (expected, got) {
                (Ok(e), Ok(g)) => prop_assert_eq!(e, g, "step {} of {:?}", i, c),
                (e, g) => {
                    return Err(TestCaseError::fail(format!(
                        "step {i}: memory {e:?}, redis {g:?}"
                    )));
                }
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// A request whose clock reading is older than the last one still counts what was
/// taken after it, in the script as in the pure log; alone and with a second log.
/// (Not with a GCRA rule: its script keeps an idle state that the memory store
/// forgets, which such a request can tell apart.)
#[test]
fn sliding_log_script_decides_as_the_memory_store_on_earlier_clock_readings() {
    let log = || {
        let gap = prop_oneof![2 => Just(0u64), 1 => 100u64..=1_500];
        sliding_log(gap, any::<bool>())
    };
    let strategy =
        (log(), log(), any::<bool>()).prop_flat_map(|((log, steps), (other, _), both)| {
            let rules = if both { vec![log, other] } else { vec![log] };
            jittered(rules, steps)
        });
    differential_with_earlier_readings(48, strategy, |outcome| outcome);
}

/// Limits up to 10^12 over windows up to an hour: counts times the window pass 2^53,
/// which the script multiplies exactly.
fn huge_sliding_counter() -> impl Strategy<Value = (Rule, Vec<Step>)> {
    (
        1_000_000u64..=1_000_000_000_000,
        1_000_000u64..=3_600_000_000,
    )
        .prop_flat_map(|(limit, window)| {
            let counter = SlidingCounter::new(limit, Duration::from_micros(window)).unwrap();
            (Just(Rule::from(counter)), steps(window / 2, limit, STEPS))
        })
}

/// Over any whole-µs window the script decides as the memory store, except that a
/// `retry_after` the pure algorithm computes to the nanosecond comes to the next whole
/// µs (see `script_args` in `src/algorithm/sliding_counter.rs`); earlier clock
/// readings and huge limits included.
#[test]
fn sliding_counter_script_retries_at_the_memory_stores_time_rounded_up_to_the_microsecond() {
    let counter = prop_oneof![3 => sliding_counter(false), 1 => huge_sliding_counter()];
    let strategy = (counter, sliding_counter(false), any::<bool>()).prop_flat_map(
        |((counter, steps), (other, _), both)| {
            let rules = if both {
                vec![counter, other]
            } else {
                vec![counter]
            };
            jittered(rules, steps)
        },
    );
    differential_with_earlier_readings(64, strategy, retry_in_whole_micros);
}

#[tokio::test]
async fn sliding_log_state_and_ttl_on_the_server_clock() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let log = SlidingLog::new(2, Duration::from_secs(10))
        .unwrap()
        .count_blocked(true);
    let limiter =
        SharedLimiter::new(RedisStore::new(connection.clone(), "log").unwrap(), log).unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 2).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    assert_eq!(admitted.remaining(), 0);
    // Two entries at one timestamp: one run.
    let state: String = connection.get(&key).await.unwrap();
    let fields: Vec<u64> = state
        .split_once(':')
        .unwrap()
        .1
        .split(' ')
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(fields.len(), 2, "state {state:?}");
    let taken_at = fields[0];
    assert!((before..=after).contains(&taken_at), "state {state:?}");
    assert_eq!(fields[1], 2);
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 10_900 && ttl <= 11_000,
        "ttl {ttl} ms for a 10 s window and 1 s of slack"
    );

    // A counted blocked attempt is written, and holds the window from its own time.
    let denied = limiter.check("k", 1).await.unwrap().unwrap_err();
    let after = server_micros(&mut connection).await;
    let state: String = connection.get(&key).await.unwrap();
    let fields: Vec<u64> = state
        .split_once(':')
        .unwrap()
        .1
        .split(' ')
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(fields.len(), 4, "state {state:?}");
    assert_eq!((fields[0], fields[1], fields[3]), (taken_at, 2, 1));
    let blocked_at = taken_at + fields[2];
    assert!(blocked_at <= after, "state {state:?}");
    let retry = denied.retry_after().unwrap();
    assert_eq!(
        retry,
        Duration::from_micros(taken_at + 10_000_000 - blocked_at),
        "the second entry at {taken_at} must leave the window"
    );
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 10_900 && ttl <= 11_000,
        "ttl {ttl} ms after the attempt"
    );

    // Refunding everything leaves no key behind.
    limiter.refund("k", 3).await.unwrap();
    let exists: bool = connection.exists(&key).await.unwrap();
    assert!(!exists, "an empty log was kept");
}

#[tokio::test]
async fn sliding_counter_state_and_ttl_on_the_server_clock() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    const WINDOW: u64 = 60_000_000;
    let counter = SlidingCounter::new(5, Duration::from_micros(WINDOW)).unwrap();
    let limiter = SharedLimiter::new(
        RedisStore::new(connection.clone(), "counter").unwrap(),
        counter,
    )
    .unwrap();
    let key = limiter.store().redis_key("k", "");

    let before = server_micros(&mut connection).await;
    let admitted = limiter.check("k", 3).await.unwrap().unwrap();
    let after = server_micros(&mut connection).await;
    let state: String = connection.get(&key).await.unwrap();
    let fields: Vec<u64> = state
        .split_once(':')
        .unwrap()
        .1
        .split(' ')
        .map(|f| f.parse().unwrap())
        .collect();
    let index = fields[0];
    assert!(
        (before / WINDOW..=after / WINDOW).contains(&index),
        "state {state:?}"
    );
    assert_eq!(&fields[1..], [3, 0], "state {state:?}");
    assert_eq!(admitted.remaining(), 2);
    // The current count has decayed by the end of the window after next.
    let expires_at = (index + 2) * WINDOW;
    let reset = admitted.reset_after().as_micros() as u64;
    assert!(
        (expires_at - after..=expires_at - before).contains(&reset),
        "reset_after {reset} µs"
    );
    let ttl = connection.pttl::<_, i64>(&key).await.unwrap() as u64;
    assert!(
        ttl <= (expires_at - before).div_ceil(1_000) + 1_000
            && ttl + 100 >= (expires_at - after) / 1_000 + 1_000,
        "ttl {ttl} ms for {reset} µs to go and 1 s of slack"
    );

    // A denial writes nothing.
    assert!(limiter.check("k", 3).await.unwrap().is_err());
    let unchanged: String = connection.get(&key).await.unwrap();
    assert_eq!(unchanged, state);

    // Refunding everything leaves nothing to remember, unless a new window began
    // meanwhile and the count became the previous one.
    limiter.refund("k", 3).await.unwrap();
    let after = server_micros(&mut connection).await;
    let left: Option<String> = connection.get(&key).await.unwrap();
    if after / WINDOW == index {
        assert_eq!(left, None, "a state of zero counts was kept");
    } else {
        assert_eq!(left, Some(format!("{} 0 3", index + 1)));
    }
}

/// A state this rule never wrote, another kind's or a damaged one, is a typed
/// conflict: never a panic, a guess, or a script that loops over a huge count.
#[tokio::test]
async fn foreign_or_malformed_states_are_key_conflicts() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let log = SlidingLog::new(3, Duration::from_secs(1)).unwrap();
    let counter = SlidingCounter::new(3, Duration::from_secs(1)).unwrap();
    let cases: [(Rule, &[&str]); 2] = [
        (
            Rule::from(log),
            &[
                "garbage",
                "1700000000000000",
                "28333333 2 1",
                "1700000000000000 0",
                "1700000000000000 1.5",
                "1700000000000000 1000000000000000",
                "1700000000000000 1000 1 1001",
                "1700000000000000 1 0 1",
                "1700000000000000 1 -5 1",
                "inf 1",
                "nan 1",
            ],
        ),
        (
            Rule::from(counter),
            &[
                "garbage",
                "1700000000000000",
                "1700000000000000 2",
                "1 2 3 4",
                "-1 0 0",
                "28333333 0.5 0",
                "28333333 inf 0",
                "nan 0 0",
            ],
        ),
    ];
    let at = Duration::from_micros(EPOCH_MICROS);
    for (i, (rule, states)) in cases.into_iter().enumerate() {
        let limiter = SharedLimiter::new(
            RedisStore::new(connection.clone(), &format!("bad{i}")).unwrap(),
            rule,
        )
        .unwrap();
        let key = limiter.store().redis_key("k", "");
        let kind = limiter.rules().next().unwrap().1.kind();
        for state in states {
            // Under the rule's own kind, so that the state's parser must refuse it.
            let () = connection
                .set(&key, format!("{kind}:{state}"))
                .await
                .unwrap();
            let got = limiter.check_at("k", 1, at).await;
            assert!(
                matches!(got, Err(StoreError::KeyConflict { .. })),
                "{state:?} under {:?}: {got:?}",
                limiter.rules().next()
            );
        }
    }
}
