//! Every algorithm under random calls at any time and of any size: nothing panics,
//! a denial changes nothing, `n == 0` is an admitted peek, and a denied request
//! succeeds after its `retry_after`.

mod common;

use std::time::Duration;

use common::{drive, op};
use proptest::prelude::*;
use tollgate::algorithm::{
    AllOf, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter, SlidingLog, SmoothBursty,
    SmoothWarmingUp,
};
use tollgate::time::Nanos;
use tollgate::Quota;

fn ops(max_n: u64) -> impl Strategy<Value = Vec<common::Op>> {
    prop::collection::vec(op(max_n), 1..30)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gcra(count in 1u64..100, ms in 1u64..5000, burst in 1u64..100, ops in ops(120)) {
        let quota = Quota::new(count, Duration::from_millis(ms)).unwrap();
        drive(&Gcra::new(quota.burst(burst).unwrap()), &ops);
    }

    #[test]
    fn cell_throttle(
        max_burst in 0u64..50,
        count in 1u64..100,
        ms in 1u64..5000,
        ops in prop::collection::vec((0u64..5_000_000_000, 0u64..60), 1..30),
    ) {
        let g = Gcra::from_cell(max_burst, count, Duration::from_millis(ms)).unwrap();
        let mut s = 0u64;
        for (t, quantity) in ops {
            let _ = g.cell_throttle(&mut s, Nanos::new(t), quantity).to_array();
        }
    }

    #[test]
    fn leaky_bucket(capacity in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        let drain = Quota::new(1, Duration::from_millis(ms)).unwrap();
        drive(&LeakyBucket::new(capacity, drain).unwrap(), &ops);
    }

    #[test]
    fn fixed_window(limit in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        let window = Duration::from_millis(ms);
        drive(&FixedWindow::new(limit, window).unwrap(), &ops);
        drive(&FixedWindow::from_first_hit(limit, window).unwrap(), &ops);
    }

    #[test]
    fn fixed_window_tiny(limit in 1u64..4, ns in 2u64..20, ops in ops(5)) {
        let window = Duration::from_nanos(ns);
        if let Ok(fw) = FixedWindow::new(limit, window) {
            drive(&fw, &ops);
        }
        drive(&FixedWindow::from_first_hit(limit, window).unwrap(), &ops);
    }

    #[test]
    fn sliding_log(limit in 1u64..20, ms in 1u64..5000, gap in 0u64..2000, ops in ops(25)) {
        let log = SlidingLog::new(limit, Duration::from_millis(ms))
            .unwrap()
            .min_gap(Duration::from_millis(gap))
            .unwrap();
        drive(&log, &ops);
    }

    #[test]
    fn sliding_counter(limit in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        drive(&SlidingCounter::new(limit, Duration::from_millis(ms)).unwrap(), &ops);
    }

    #[test]
    fn smooth_bursty(rate in 0.001f64..1000.0, seconds in 0.0f64..10.0, ops in ops(2000)) {
        drive(&SmoothBursty::with_max_burst_seconds(rate, seconds).unwrap(), &ops);
    }

    #[test]
    fn smooth_warming_up(
        rate in 0.001f64..1000.0,
        warmup_ms in 0u64..10_000,
        cold_factor in 1.0f64..20.0,
        ops in ops(2000),
    ) {
        let warmup = Duration::from_millis(warmup_ms);
        drive(&SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap(), &ops);
    }

    #[test]
    fn refresh_period(
        limit in 1u64..100,
        period in 1u64..5_000_000_000,
        timeout in 0u64..5_000_000_000,
        ops in ops(400),
    ) {
        let (period, timeout) = (Duration::from_nanos(period), Duration::from_nanos(timeout));
        drive(&RefreshPeriod::new(limit, period, timeout).unwrap(), &ops);
    }

    #[test]
    fn all_of(count in 1u64..100, ms in 1u64..5000, limit in 1u64..100, ops in ops(120)) {
        let rules = vec![
            Gcra::new(Quota::new(count, Duration::from_millis(ms)).unwrap()),
            Gcra::new(Quota::new(limit, Duration::from_millis(ms / 3 + 1)).unwrap()),
        ];
        drive(&AllOf::new(rules).unwrap(), &ops);
    }
}
