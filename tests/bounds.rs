//! What each algorithm promises about the permits it grants, checked on the times at
//! which granted permits are used (now, or after a reservation's wait), under a
//! clock that only moves forward.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::Quota;
use tollgate::algorithm::{Algorithm, FixedWindow, Gcra, LeakyBucket, SlidingCounter, SlidingLog};
use tollgate::time::Nanos;

#[derive(Debug, Clone)]
enum Op {
    /// Advance, then acquire.
    Acquire(u64, u64),
    /// Advance, then reserve within a wait.
    Reserve(u64, u64, u64),
}

fn ops(max_n: u64, max_step: u64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            (0..max_step, 0..=max_n).prop_map(|(d, n)| Op::Acquire(d, n)),
            (0..max_step, 0..=max_n, 0..max_step * 20).prop_map(|(d, n, w)| Op::Reserve(d, n, w)),
        ],
        1..60,
    )
}

/// The granted permits: `(time of use, permits)`.
fn uses<A: Algorithm>(a: &A, ops: &[Op]) -> Vec<(u64, u64)> {
    let mut s = a.initial_state(Nanos::ZERO);
    let mut now = 0;
    let mut out = Vec::new();
    for op in ops {
        match *op {
            Op::Acquire(d, n) => {
                now += d;
                if n > 0 && a.acquire(&mut s, Nanos::new(now), n).is_ok() {
                    out.push((now, n));
                }
            }
            Op::Reserve(d, n, max_wait) => {
                now += d;
                let wait = Duration::from_nanos(max_wait);
                if let Ok(r) = a.reserve(&mut s, Nanos::new(now), n, wait) {
                    if n > 0 {
                        out.push((now + r.wait().as_nanos() as u64, n));
                    }
                }
            }
        }
    }
    out
}

/// Permits used in `[from, to)`.
fn used_in(uses: &[(u64, u64)], from: u64, to: u64) -> u64 {
    uses.iter()
        .filter(|&&(t, _)| from <= t && t < to)
        .map(|&(_, n)| n)
        .sum()
}

/// The most permits used in `[s, e]` over pairs of uses.
fn check_rate(uses: &[(u64, u64)], most: impl Fn(u64) -> u64) -> Result<(), TestCaseError> {
    for &(s, _) in uses {
        for &(e, _) in uses.iter().filter(|&&(e, _)| e >= s) {
            let used = used_in(uses, s, e + 1);
            prop_assert!(
                used <= most(e - s),
                "{} used in [{}, {}]: {:?}",
                used,
                s,
                e,
                uses
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sliding_log_never_exceeds_the_limit_in_any_window(
        limit in 1u64..6,
        window in 1u64..100,
        gap in 0u64..20,
        ops in ops(6, 40),
    ) {
        let log = SlidingLog::new(limit, Duration::from_nanos(window))
            .unwrap()
            .min_gap(Duration::from_nanos(gap))
            .unwrap();
        let u = uses(&log, &ops);
        for &(s, _) in &u {
            prop_assert!(used_in(&u, s, s + window) <= limit, "from {}: {:?}", s, u);
        }
    }

    #[test]
    fn fixed_window_never_exceeds_the_limit_in_a_window(
        limit in 1u64..6,
        window in 2u64..100,
        ops in ops(6, 40),
    ) {
        let Ok(fw) = FixedWindow::new(limit, Duration::from_nanos(window)) else {
            return Ok(());
        };
        let u = uses(&fw, &ops);
        for &(s, _) in &u {
            let start = s / window * window;
            prop_assert!(used_in(&u, start, start + window) <= limit, "{:?}", u);
        }
    }

    #[test]
    fn first_hit_never_exceeds_twice_the_limit_in_any_span(
        limit in 1u64..6,
        window in 2u64..100,
        ops in ops(6, 40),
    ) {
        let fw = FixedWindow::from_first_hit(limit, Duration::from_nanos(window)).unwrap();
        let u = uses(&fw, &ops);
        for &(s, _) in &u {
            prop_assert!(used_in(&u, s, s + window) <= 2 * limit, "{:?}", u);
        }
    }

    #[test]
    fn gcra_never_exceeds_burst_plus_rate(
        count in 1u64..6,
        period in 1u64..100,
        burst in 1u64..6,
        ops in ops(6, 40),
    ) {
        let quota = Quota::new(count, Duration::from_nanos(period.max(count)))
            .unwrap()
            .burst(burst)
            .unwrap();
        let interval = quota.emission_interval().as_nanos() as u64;
        let u = uses(&Gcra::new(quota), &ops);
        check_rate(&u, |span| burst + span / interval)?;
    }

    #[test]
    fn leaky_bucket_never_exceeds_capacity_plus_drain(
        capacity in 1u64..6,
        interval in 1u64..100,
        ops in ops(6, 40),
    ) {
        let drain = Quota::new(1, Duration::from_nanos(interval)).unwrap();
        let u = uses(&LeakyBucket::new(capacity, drain).unwrap(), &ops);
        check_rate(&u, |span| capacity + span / interval)?;
    }

    #[test]
    fn sliding_counter_never_exceeds_the_limit_in_an_aligned_window(
        limit in 1u64..6,
        window in 2u64..100,
        ops in ops(6, 40),
    ) {
        let counter = SlidingCounter::new(limit, Duration::from_nanos(window)).unwrap();
        let u = uses(&counter, &ops);
        for &(s, _) in &u {
            let start = s / window * window;
            prop_assert!(used_in(&u, start, start + window) <= limit, "{:?}", u);
        }
    }
}
