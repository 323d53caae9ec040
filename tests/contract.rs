//! The `Algorithm` contract across reconfigurations: whatever was taken before and
//! however the configuration changed since, `n == 0` is an admitted peek that
//! changes nothing, and forgetting an idle or a fresh state gives nothing back.

mod common;

use std::time::Duration;

use common::{Op, apply, op};
use proptest::prelude::*;
use tollgate::Quota;
use tollgate::algorithm::{
    Algorithm, AllOf, Concurrency, FirstHit, FixedWindow, Gcra, LeakyBucket, RefreshPeriod,
    SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::Nanos;

#[derive(Debug, Clone)]
enum Step {
    Call(Op),
    /// At a time, to a setting drawn from a number.
    Reconfigure(u64, u64),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let time = prop_oneof![0u64..5_000_000_000, Just(u64::MAX)];
    prop::collection::vec(
        prop_oneof![
            3 => op(60).prop_map(Step::Call),
            1 => (time, any::<u64>()).prop_map(|(t, p)| Step::Reconfigure(t, p)),
        ],
        1..40,
    )
}

/// Runs `steps`, reconfiguring with `reconfigure`, and checks after each that
/// `n == 0` is admitted and changes nothing, at the clock's origin, at the step's
/// time and at its end.
fn zero_always_peeks<A: Algorithm>(
    mut a: A,
    timed: bool,
    steps: &[Step],
    reconfigure: impl Fn(&mut A, &mut A::State, Nanos, u64),
) -> Result<(), TestCaseError>
where
    A::State: PartialEq,
{
    let mut s = a.initial_state(Nanos::ZERO);
    for step in steps {
        let t = match *step {
            Step::Call(ref op) => {
                apply(&a, &mut s, op, timed);
                match *op {
                    Op::Acquire(t, _)
                    | Op::Reserve(t, _, _)
                    | Op::Refund(t, _)
                    | Op::Peek(t, _) => t,
                }
            }
            Step::Reconfigure(t, p) => {
                reconfigure(&mut a, &mut s, Nanos::new(t), p);
                t
            }
        };
        for now in [Nanos::ZERO, Nanos::new(t), Nanos::MAX] {
            let before = s.clone();
            prop_assert!(a.peek(&s, now, 0).is_ok(), "peek(0) at {:?}: {:?}", now, a);
            let acquired = a.acquire(&mut s, now, 0);
            prop_assert!(acquired.is_ok(), "acquire(0) at {:?}: {:?}", now, acquired);
            let reserved = a.reserve(&mut s, now, 0, Duration::ZERO);
            prop_assert!(reserved.is_ok(), "reserve(0) at {:?}: {:?}", now, reserved);
            prop_assert!(s == before, "n == 0 changed the state");
            // Forgetting an idle or a fresh state gives nothing back.
            let idle_at = a.idle_at(&s);
            if idle_at <= now && idle_at < Nanos::MAX {
                let gives = a.forgetting_gives_back(&s, now);
                prop_assert_eq!(gives, 0, "idle at {:?}, now {:?}: {:?}", idle_at, now, a);
            }
            let fresh = a.initial_state(now);
            prop_assert_eq!(a.forgetting_gives_back(&fresh, now), 0, "fresh: {:?}", a);
        }
    }
    Ok(())
}

/// A value in `1..=m` drawn from `p`.
fn pick(p: u64, m: u64) -> u64 {
    1 + p % m
}

fn quota(p: u64) -> Quota {
    Quota::per_second(pick(p, 50))
        .unwrap()
        .burst(pick(p >> 8, 50))
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Regression: after a lower GCRA burst or leaky bucket capacity, `acquire(0)`
    /// and `reserve(0, ..)` were denied.
    #[test]
    fn zero_is_an_admitted_peek_after_any_reconfiguration(steps in steps()) {
        zero_always_peeks(Gcra::new(quota(7)), true, &steps, |g, _, _, p| g.set_quota(quota(p)))?;
        let bucket = LeakyBucket::new(20, Quota::per_second(10).unwrap()).unwrap();
        zero_always_peeks(bucket, true, &steps, |b, _, _, p| {
            let _ = match p % 2 {
                0 => b.set_capacity(pick(p >> 1, 50)),
                _ => b.set_drain(Quota::per_second(pick(p >> 1, 50)).unwrap()),
            };
        })?;
        let aligned = FixedWindow::new(20, Duration::from_secs(1)).unwrap();
        zero_always_peeks(aligned, true, &steps, |fw, _, _, p| fw.set_limit(pick(p, 50)).unwrap())?;
        let first_hit: FixedWindow<FirstHit> =
            FixedWindow::from_first_hit(20, Duration::from_secs(1)).unwrap();
        zero_always_peeks(first_hit, true, &steps, |fw, _, _, p| fw.set_limit(pick(p, 50)).unwrap())?;
        let log = SlidingLog::new(20, Duration::from_secs(1)).unwrap();
        zero_always_peeks(log, true, &steps, |l, _, _, p| {
            let _ = match p % 2 {
                0 => l.set_limit(pick(p >> 1, 50)),
                _ => l.set_window(Duration::from_millis(pick(p >> 1, 5000))),
            };
        })?;
        let counter = SlidingCounter::new(20, Duration::from_secs(1)).unwrap();
        zero_always_peeks(counter, true, &steps, |c, _, _, p| c.set_limit(pick(p, 50)).unwrap())?;
        let bursty = SmoothBursty::new(10.0).unwrap();
        zero_always_peeks(bursty, true, &steps, |b, s, now, p| {
            let _ = match p % 2 {
                0 => b.set_rate(s, now, pick(p >> 1, 1000) as f64 / 10.0),
                _ => b.set_max_burst_seconds(s, now, pick(p >> 1, 100) as f64 / 10.0),
            };
        })?;
        let warm = SmoothWarmingUp::new(10.0, Duration::from_secs(2)).unwrap();
        zero_always_peeks(warm, true, &steps, |w, s, now, p| {
            w.set_rate(s, now, pick(p, 1000) as f64 / 10.0).unwrap()
        })?;
        let r4j = RefreshPeriod::new(20, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        zero_always_peeks(r4j, true, &steps, |r, s, now, p| match p % 2 {
            0 => r.change_limit_for_period(s, now, pick(p >> 1, 50)).unwrap(),
            _ => r.change_timeout(Duration::from_millis(p >> 1 & 0xffff)),
        })?;
        let permits = Concurrency::new(20).unwrap();
        zero_always_peeks(permits, false, &steps, |c, _, _, p| c.set_max(pick(p, 50)).unwrap())?;
        let rules = AllOf::new(vec![Gcra::new(quota(3)), Gcra::new(quota(5))]).unwrap();
        zero_always_peeks(rules, true, &steps, |all, _, _, p| {
            if let Some(rule) = all.rule_mut((p % 2) as usize) {
                rule.set_quota(quota(p >> 1));
            }
        })?;
    }
}
