//! `Store::execute_each` on the memory store: for random requests of several checks,
//! each with or without a count of its own, the combined reply is what `execute`
//! answers, and each check's answer is what that check alone would get on a copy of
//! the store's state. And a fixed window counting denied acquires in a `Limiter`.
#![cfg(feature = "store")]

mod common;

use std::time::Duration;

use common::each::{Call, EPOCH_MICROS, alone, as_within, asks, key, rules};
use proptest::prelude::*;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{Check, MemoryStore, Request};
use tollgate::time::ManualClock;
use tollgate::{KeyedConfig, Limiter};

fn store() -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), "each", ManualClock::new()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn each_checks_answer_is_its_own_and_the_reply_is_executes(calls in asks(1..20)) {
        let rules = rules();
        let keys: Vec<String> = (0..rules.len()).map(key).collect();
        // `each` answers per check, `plain` executes the same requests: they stay equal.
        let (each, plain) = (store(), store());
        let mut history: Vec<(Call, u64)> = Vec::new();
        let mut now = EPOCH_MICROS;
        for (i, call) in calls.iter().enumerate() {
            now += call.dt_ms * 1_000;
            let tag = call.tag();
            let checks = call.checks(&rules, &keys);
            let request = Request::new(&tag, &checks, call.op()).at(Duration::from_micros(now));
            let answers = each.execute_each_now(&request).unwrap();
            let reply = plain.execute_now(&request).unwrap();
            prop_assert_eq!(answers.reply(), reply, "call {}: {:?}", i, call);
            let own = answers.checks().expect("the memory store answers per check");
            prop_assert_eq!(own.len(), checks.len());
            for (j, check) in checks.iter().enumerate() {
                // The check alone, on a copy: a store that saw the same history.
                let copy = store();
                for (past, at) in &history {
                    let tag = past.tag();
                    let checks = past.checks(&rules, &keys);
                    let past = Request::new(&tag, &checks, past.op()).at(Duration::from_micros(*at));
                    copy.execute_now(&past).unwrap();
                }
                let one = [*check];
                let n = check.permits().unwrap_or(request.op.permits());
                let expected = as_within(&request, n, copy.execute_now(&alone(&request, &one)).unwrap());
                prop_assert_eq!(own[j], expected, "call {} check {}: {:?} after {:?}", i, j, call, history);
            }
            history.push((call.clone(), now));
        }
    }
}

#[test]
fn a_limiter_over_a_counting_window_counts_its_denials() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(10, Duration::from_secs(1))
        .unwrap()
        .counting_denied()
        .unwrap();
    let limiter = Limiter::with_clock(window, clock.clone());
    assert!(limiter.try_acquire(8).is_ok());
    assert!(limiter.try_acquire(5).is_err());
    // The lock-free cell kept the denial's count: nothing fits, not even a check.
    assert!(limiter.try_acquire(1).is_err());
    assert!(limiter.try_acquire(0).is_err());
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.try_acquire(0).unwrap().remaining(), 10);
    // Without counting, the 2 left still fit.
    let plain = Limiter::with_clock(
        FixedWindow::new(10, Duration::from_secs(1)).unwrap(),
        ManualClock::new(),
    );
    assert!(plain.try_acquire(8).is_ok());
    assert!(plain.try_acquire(5).is_err());
    assert!(plain.try_acquire(2).is_ok());
}

#[test]
fn a_check_of_nothing_sees_a_counting_window_over_its_limit() {
    let store = store();
    let rules = rules();
    let keys: Vec<String> = (0..rules.len()).map(key).collect();
    let at = Duration::from_micros(EPOCH_MICROS);
    let ask = |checks: &[Check<'_>]| {
        let request = Request::new("t", checks, tollgate::store::Op::Acquire(1)).at(at);
        store.execute_each_now(&request).unwrap()
    };
    // Rule 1 counts denied acquires, 4 a second: 3, then 3 more pushes it over.
    let counting = |n| Check::new(&keys[1], &rules[1]).with_permits(n);
    assert!(ask(&[counting(3)]).reply().is_admitted());
    assert!(!ask(&[counting(3)]).reply().is_admitted());
    let answers = ask(&[counting(0), Check::new(&keys[0], &rules[0]).with_permits(0)]);
    assert!(!answers.reply().is_admitted());
    let each = answers.checks().unwrap();
    assert!(!each[0].is_admitted(), "over its limit");
    assert!(each[1].is_admitted());
}
