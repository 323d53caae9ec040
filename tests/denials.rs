//! A denial counts down: while nothing changes a limiter's state, the denial of one
//! permit at `t0` with `retry_after` r is, at any `t` in `[t0, t0 + r)`, the same
//! denial with `retry_after` and `reset_after` shortened by `t - t0` (and nothing
//! remaining), provided `t0` is the latest time the state has seen and the
//! algorithm's denials last (`Algorithm::denial_lasts`; a sliding log counting
//! blocked attempts changes its state on each denial, and is not repeated). The in-process
//! limiter relies on this to deny a repeated request without taking its lock. (Of
//! more than one permit, `remaining` may grow meanwhile; and a reading older than
//! one the state has seen is decided as of that later one by some algorithms.)

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{
    Algorithm, AllOf, Concurrency, FirstHit, FixedWindow, Gcra, Leased, RefreshPeriod,
    SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::Nanos;
use tollgate::{Denied, Quota};

/// Runs `ops` (time step, permits) on `alg`, and after each denial of one permit
/// checks the claim
/// at `probes` later instants within the retry.
fn counts_down<A: Algorithm>(
    alg: A,
    ops: &[(i64, u64)],
    probes: &[u64],
) -> Result<(), TestCaseError> {
    let mut now = 1u64 << 40;
    let mut latest = now;
    let mut state = alg.initial_state(Nanos::new(now));
    for &(step, n) in ops {
        // Steps back too: readings from threads that raced.
        now = now.saturating_add_signed(step);
        let t0 = Nanos::new(now);
        let decision = alg.acquire(&mut state, t0, n);
        let seen_later = now < latest;
        latest = latest.max(now);
        let Err(Denied::Limited(first)) = decision else {
            continue;
        };
        if n != 1 || seen_later {
            continue;
        }
        let Some(retry) = first.retry_after() else {
            continue;
        };
        for &p in probes {
            let later = (p as u128 * retry.as_nanos() / 1_000_000) as u64;
            if later as u128 >= retry.as_nanos() {
                continue;
            }
            let mut copy = state.clone();
            let again = alg.acquire(&mut copy, t0 + Duration::from_nanos(later), n);
            let Err(Denied::Limited(second)) = again else {
                return Err(TestCaseError::fail(format!(
                    "denied at {t0:?}, then {again:?} {later} ns later"
                )));
            };
            let elapsed = Duration::from_nanos(later);
            prop_assert_eq!(
                second.retry_after(),
                Some(retry - elapsed),
                "retry, {} ns later",
                later
            );
            prop_assert_eq!(
                second.reset_after(),
                first.reset_after().saturating_sub(elapsed),
                "reset, {} ns later",
                later
            );
            prop_assert_eq!(first.remaining(), 0);
            prop_assert_eq!(second.remaining(), 0);
            prop_assert_eq!(second.limit(), first.limit());
        }
    }
    Ok(())
}

fn ops() -> impl Strategy<Value = Vec<(i64, u64)>> {
    prop::collection::vec(
        (
            prop_oneof![Just(0i64), -1_000i64..1_000, -1_000_000i64..2_000_000_000],
            1u64..4,
        ),
        1..60,
    )
}

fn probes() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(0u64..1_000_000, 1..6)
}

const S: Duration = Duration::from_secs(1);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sliding_log_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        counts_down(SlidingLog::new(limit, S).unwrap(), &ops, &probes)?;
    }

    #[test]
    fn sliding_counter_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        counts_down(SlidingCounter::new(limit, S).unwrap(), &ops, &probes)?;
    }

    #[test]
    fn first_hit_window_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        let fw: FixedWindow<FirstHit> = FixedWindow::from_first_hit(limit, S).unwrap();
        counts_down(fw, &ops, &probes)?;
    }

    #[test]
    fn refresh_period_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        counts_down(RefreshPeriod::new(limit, S, Duration::ZERO).unwrap(), &ops, &probes)?;
    }

    #[test]
    fn smooth_bursty_denials_count_down(ops in ops(), probes in probes(), rate in 0.5f64..5.0) {
        counts_down(SmoothBursty::new(rate).unwrap(), &ops, &probes)?;
    }

    #[test]
    fn smooth_warming_up_denials_count_down(ops in ops(), probes in probes(), rate in 0.5f64..5.0) {
        counts_down(SmoothWarmingUp::new(rate, S).unwrap(), &ops, &probes)?;
    }

    #[test]
    fn all_of_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        let all = AllOf::new(vec![
            Gcra::new(Quota::new(limit, S).unwrap()),
            Gcra::new(Quota::new(limit * 10, S * 60).unwrap()),
        ]).unwrap();
        counts_down(all, &ops, &probes)?;
    }

    #[test]
    fn leased_denials_count_down(ops in ops(), probes in probes(), limit in 1u64..5) {
        counts_down(Leased::new(Concurrency::new(limit).unwrap(), S).unwrap(), &ops, &probes)?;
    }
}
