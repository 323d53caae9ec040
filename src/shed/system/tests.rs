//! The rule's checks, the window's numbers and the decision, against Sentinel's
//! tests and code (`SystemRuleManagerTest`, `StatisticNode`, `ArrayMetric`).

use std::time::Duration;

use super::check::{SystemStatus, bbr_allows, check};
use super::readings::{CpuTimes, cpu_usage, parse_loadavg, parse_stat};
use super::window::Window;
use super::{LoadCheck, ReadingError, SystemRule, Threshold};
use crate::error::ConfigError;

const MS: u64 = 1_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---- The rule ----

/// `testLoadInvalidRules`: Sentinel drops a negative load and a CPU usage of 2.7;
/// here each is an error naming the parameter.
#[test]
fn invalid_thresholds_are_typed_errors() {
    assert_eq!(
        SystemRule::builder().highest_system_load(-0.9).build(),
        Err(ConfigError::Negative {
            parameter: "highest_system_load",
            value: -0.9
        })
    );
    assert_eq!(
        SystemRule::builder().highest_cpu_usage(2.7).build(),
        Err(ConfigError::OutOfRange {
            parameter: "highest_cpu_usage",
            expected: "in [0, 1]"
        })
    );
}

/// `testLoadAndGetRules`.
#[test]
fn every_threshold_is_kept() {
    let rule = SystemRule::builder()
        .highest_system_load(1.2)
        .max_in_flight(17)
        .highest_cpu_usage(0.7)
        .qps(1500.0)
        .avg_rt(ms(50))
        .build()
        .unwrap();
    assert_eq!(rule.highest_system_load(), Some(1.2));
    assert_eq!(rule.max_in_flight(), Some(17));
    assert_eq!(rule.highest_cpu_usage(), Some(0.7));
    assert_eq!(rule.qps(), Some(1500.0));
    assert_eq!(rule.avg_rt(), Some(ms(50)));
    assert_eq!(rule.load_check(), LoadCheck::Bbr);
    assert_eq!(rule.window(), Duration::from_secs(1));
    assert_eq!(rule.buckets(), 2);
    assert_eq!(rule.sample_every(), Duration::from_secs(1));
    assert_eq!(rule.statistic_max_rt(), Duration::from_secs(5));
}

/// `testLoadDuplicateTypeOfRules`: of loads 1.2, 2.3 and 3.4 the lowest holds.
#[test]
fn strictest_takes_the_lowest_of_each() {
    let rules: Vec<SystemRule> = [1.2, 2.3, 3.4]
        .iter()
        .map(|&load| {
            SystemRule::builder()
                .highest_system_load(load)
                .build()
                .unwrap()
        })
        .collect();
    let merged = rules[1].strictest(&rules[0]).strictest(&rules[2]);
    assert_eq!(merged.highest_system_load(), Some(1.2));
    assert_eq!(merged.max_in_flight(), None);
    let other = SystemRule::builder()
        .max_in_flight(5)
        .avg_rt(ms(3))
        .build()
        .unwrap();
    let both = merged.strictest(&other);
    assert_eq!(both.highest_system_load(), Some(1.2));
    assert_eq!(both.max_in_flight(), Some(5));
    assert_eq!(both.avg_rt(), Some(ms(3)));
}

#[test]
fn nan_and_infinite_thresholds_are_refused() {
    type Set = fn(super::SystemRuleBuilder, f64) -> super::SystemRuleBuilder;
    let setters: [(&str, Set); 3] = [
        ("highest_system_load", |b, v| b.highest_system_load(v)),
        ("highest_cpu_usage", |b, v| b.highest_cpu_usage(v)),
        ("qps", |b, v| b.qps(v)),
    ];
    for (parameter, set) in setters {
        assert_eq!(
            set(SystemRule::builder(), f64::NAN).build(),
            Err(ConfigError::NotANumber { parameter })
        );
        assert_eq!(
            set(SystemRule::builder(), f64::NEG_INFINITY).build(),
            Err(ConfigError::Negative {
                parameter,
                value: f64::NEG_INFINITY
            })
        );
        let infinite = set(SystemRule::builder(), f64::INFINITY).build();
        assert!(
            matches!(
                infinite,
                Err(ConfigError::Infinite { .. } | ConfigError::OutOfRange { .. })
            ),
            "{parameter}: {infinite:?}"
        );
        assert_eq!(infinite.unwrap_err().parameter(), parameter);
    }
}

#[test]
fn settings_out_of_range_are_refused() {
    let base = || SystemRule::builder().max_in_flight(1);
    assert_eq!(
        SystemRule::builder().build(),
        Err(ConfigError::OutOfRange {
            parameter: "thresholds",
            expected: "at least one threshold set"
        })
    );
    assert_eq!(
        base().qps(0.0).build(),
        Err(ConfigError::Zero { parameter: "qps" })
    );
    assert_eq!(
        base().window(Duration::ZERO, 2).build(),
        Err(ConfigError::Zero {
            parameter: "window"
        })
    );
    assert_eq!(
        base().window(Duration::from_secs(1), 0).build(),
        Err(ConfigError::Zero {
            parameter: "buckets"
        })
    );
    assert_eq!(
        base()
            .window(Duration::from_secs(1), super::MAX_BUCKETS + 1)
            .build()
            .unwrap_err()
            .parameter(),
        "buckets"
    );
    assert_eq!(
        base()
            .window(Duration::from_nanos(1000), 3)
            .build()
            .unwrap_err()
            .parameter(),
        "window"
    );
    assert_eq!(
        base().sample_every(Duration::ZERO).build(),
        Err(ConfigError::Zero {
            parameter: "sample_every"
        })
    );
    assert_eq!(
        base().statistic_max_rt(Duration::ZERO).build(),
        Err(ConfigError::Zero {
            parameter: "statistic_max_rt"
        })
    );
    for too_long in [
        base().avg_rt(Duration::MAX).build(),
        base().window(Duration::MAX, 1).build(),
        base().sample_every(Duration::MAX).build(),
    ] {
        assert!(
            matches!(too_long, Err(ConfigError::TooLong { .. })),
            "{too_long:?}"
        );
    }
    // Zero is a threshold Sentinel accepts (its CPU test uses 0), and so is the longest RT.
    assert!(base().highest_cpu_usage(0.0).build().is_ok());
    assert!(base().max_in_flight(0).build().is_ok());
    assert!(
        base()
            .avg_rt(Duration::from_nanos(u64::MAX))
            .build()
            .is_ok()
    );
    assert!(base().max_in_flight(u64::MAX).build().is_ok());
}

// ---- The window (StatisticNode over 1 s in 2 buckets) ----

fn sentinel_window() -> Window {
    Window::new(Duration::from_secs(1), 2, Duration::from_secs(5))
}

/// An empty window: min RT is `statisticMaxRt`, max success QPS counts one success
/// per bucket (`Math.max(success, 1)`), average RT zero.
#[test]
fn empty_window_reads_as_sentinel_does() {
    let window = sentinel_window();
    assert_eq!(window.pass_qps(0), 0.0);
    assert_eq!(window.max_success_qps(0), 2.0);
    assert_eq!(window.min_rt(0), Duration::from_secs(5));
    assert_eq!(window.avg_rt(0), Duration::ZERO);
}

#[test]
fn statistics_over_two_buckets() {
    let mut window = sentinel_window();
    // Bucket [0, 500 ms): 3 passes, 3 completions of 10, 20 and 30 ms.
    for _ in 0..3 {
        window.add_pass(100 * MS);
    }
    for rt in [10, 20, 30] {
        window.add_completion(200 * MS, ms(rt));
    }
    // Bucket [500, 1000 ms): 5 completions of 4 ms, 1 block.
    for _ in 0..5 {
        window.add_completion(600 * MS, ms(4));
    }
    window.add_block(600 * MS);
    let now = 900 * MS;
    assert_eq!(window.pass_qps(now), 3.0);
    assert_eq!(window.block_qps(now), 1.0);
    // max(3, 5) × 2 buckets / 1 s.
    assert_eq!(window.max_success_qps(now), 10.0);
    assert_eq!(window.min_rt(now), ms(4));
    // (10 + 20 + 30 + 5 × 4) / 8.
    assert_eq!(window.avg_rt(now), ms(10));

    // At 1 s the first bucket leaves the window.
    let now = 1000 * MS;
    assert_eq!(window.pass_qps(now), 0.0);
    assert_eq!(window.max_success_qps(now), 10.0);
    assert_eq!(window.avg_rt(now), ms(4));
    // At 1.5 s both have left: min RT is back to 5 s (StatisticNodeTest).
    let now = 1500 * MS;
    assert_eq!(window.min_rt(now), Duration::from_secs(5));
    assert_eq!(window.max_success_qps(now), 2.0);
}

#[test]
fn a_reused_bucket_starts_empty() {
    let mut window = sentinel_window();
    window.add_completion(100 * MS, ms(1));
    // 1.1 s maps to the same slot as 0.1 s: it is emptied, not added to.
    window.add_completion(1100 * MS, ms(7));
    assert_eq!(window.min_rt(1100 * MS), ms(7));
    assert_eq!(window.max_success_qps(1100 * MS), 2.0);
}

#[test]
fn min_rt_has_sentinels_one_millisecond_floor() {
    let mut window = sentinel_window();
    window.add_completion(0, Duration::from_micros(200));
    assert_eq!(window.min_rt(0), ms(1));
    assert_eq!(window.avg_rt(0), Duration::from_micros(200));
}

#[test]
fn window_at_the_clocks_end() {
    let mut window = sentinel_window();
    let end = u64::MAX;
    window.add_pass(end - 10);
    window.add_completion(end, Duration::MAX);
    assert_eq!(window.pass_qps(end), 1.0);
    assert_eq!(window.avg_rt(end), Duration::from_nanos(u64::MAX));
    assert_eq!(window.min_rt(end), Duration::from_secs(5));
}

// ---- The check (checkSystem, checkBbr) ----

fn idle() -> SystemStatus {
    SystemStatus {
        max_success_qps: 2.0,
        min_rt: Duration::from_secs(5),
        ..SystemStatus::default()
    }
}

fn rule(build: impl FnOnce(super::SystemRuleBuilder) -> super::SystemRuleBuilder) -> SystemRule {
    build(SystemRule::builder()).build().unwrap()
}

/// Each threshold alone: under or at it admits (Sentinel compares with `>`), above
/// it sheds.
#[test]
fn each_threshold_alone() {
    let qps = rule(|b| b.qps(20.0));
    let at = |pass_qps| SystemStatus { pass_qps, ..idle() };
    assert_eq!(check(&qps, &at(19.0)), None);
    assert_eq!(check(&qps, &at(19.5)), Some(Threshold::Qps));

    let in_flight = rule(|b| b.max_in_flight(10));
    let at = |in_flight| SystemStatus {
        in_flight,
        ..idle()
    };
    assert_eq!(check(&in_flight, &at(10)), None);
    assert_eq!(check(&in_flight, &at(11)), Some(Threshold::InFlight));

    let rt = rule(|b| b.avg_rt(ms(10)));
    let at = |avg_rt| SystemStatus { avg_rt, ..idle() };
    assert_eq!(check(&rt, &at(ms(10))), None);
    assert_eq!(
        check(&rt, &at(ms(10) + Duration::from_nanos(1))),
        Some(Threshold::Rt)
    );

    let load = rule(|b| b.highest_system_load(3.0).load_check(LoadCheck::Alone));
    let at = |load_average| SystemStatus {
        load_average,
        ..idle()
    };
    assert_eq!(check(&load, &at(Some(3.0))), None);
    assert_eq!(check(&load, &at(None)), None);
    assert_eq!(check(&load, &at(Some(3.01))), Some(Threshold::Load));

    let cpu = rule(|b| b.highest_cpu_usage(0.6));
    let at = |cpu_usage| SystemStatus {
        cpu_usage,
        ..idle()
    };
    assert_eq!(check(&cpu, &at(Some(0.6))), None);
    assert_eq!(check(&cpu, &at(None)), None);
    assert_eq!(check(&cpu, &at(Some(0.61))), Some(Threshold::Cpu));
}

/// `testCheckMaxCpuUsageNotBBR`: a CPU threshold of 0 sheds on any usage.
#[test]
fn cpu_threshold_zero_sheds_any_usage() {
    let cpu = rule(|b| b.highest_cpu_usage(0.0));
    let busy = SystemStatus {
        cpu_usage: Some(0.01),
        ..idle()
    };
    assert_eq!(check(&cpu, &busy), Some(Threshold::Cpu));
}

/// Sentinel's SystemGuardDemo rule, with every threshold exceeded at once: the first
/// in checkSystem's order names the refusal, and each one found alone after those
/// before it are cleared.
#[test]
fn combined_thresholds_in_sentinels_order() {
    let demo = rule(|b| {
        b.highest_system_load(3.0)
            .highest_cpu_usage(0.6)
            .avg_rt(ms(10))
            .qps(20.0)
            .max_in_flight(10)
    });
    let mut status = SystemStatus {
        pass_qps: 25.0,
        in_flight: 50,
        avg_rt: ms(30),
        load_average: Some(6.0),
        cpu_usage: Some(0.9),
        max_success_qps: 10.0,
        min_rt: ms(20),
        ..idle()
    };
    assert_eq!(check(&demo, &status), Some(Threshold::Qps));
    status.pass_qps = 5.0;
    assert_eq!(check(&demo, &status), Some(Threshold::InFlight));
    status.in_flight = 8;
    assert_eq!(check(&demo, &status), Some(Threshold::Rt));
    status.avg_rt = ms(5);
    // 8 in flight > 10 QPS × 20 ms = 0.2.
    assert_eq!(check(&demo, &status), Some(Threshold::Bbr));
    status.load_average = Some(2.0);
    assert_eq!(check(&demo, &status), Some(Threshold::Cpu));
    status.cpu_usage = Some(0.5);
    assert_eq!(check(&demo, &status), None);
    // Load over its threshold but BBR allows (8 ≤ 1000 × 20 ms = 20): CPU decides.
    status.load_average = Some(6.0);
    status.max_success_qps = 1000.0;
    status.cpu_usage = Some(0.9);
    assert_eq!(check(&demo, &status), Some(Threshold::Cpu));
}

/// `checkBbr`: `currentThread > 1 && currentThread > maxSuccessQps * minRt / 1000`.
#[test]
fn bbr_table() {
    // (in flight, max success QPS, min RT ms, allowed)
    let table: &[(u64, f64, u64, bool)] = &[
        (0, 2.0, 1, true),
        (1, 2.0, 1, true), // one in flight is always allowed
        (1, 1e9, 1, true),
        (2, 2.0, 5000, true),   // capacity 10
        (10, 2.0, 5000, true),  // at capacity
        (11, 2.0, 5000, false), // above
        (2, 100.0, 10, false),  // capacity 1
        (2, 200.0, 10, true),   // capacity 2
        (3, 200.0, 10, false),
        (u64::MAX, 1e9, 5000, false),
        (u64::MAX, f64::MAX, 5000, true),
    ];
    for &(in_flight, max_success_qps, min_rt, allowed) in table {
        let status = SystemStatus {
            in_flight,
            max_success_qps,
            min_rt: ms(min_rt),
            ..idle()
        };
        assert_eq!(
            bbr_allows(&status),
            allowed,
            "{in_flight} in flight, {max_success_qps} QPS, {min_rt} ms"
        );
    }
}

#[test]
fn bbr_applies_only_while_the_load_is_high() {
    let load = rule(|b| b.highest_system_load(3.0));
    let mut status = SystemStatus {
        in_flight: 100,
        max_success_qps: 2.0,
        min_rt: ms(1),
        load_average: Some(3.0),
        ..idle()
    };
    assert_eq!(check(&load, &status), None);
    status.load_average = Some(3.5);
    assert_eq!(check(&load, &status), Some(Threshold::Bbr));
    status.in_flight = 1;
    assert_eq!(check(&load, &status), None);
}

#[test]
fn extremes_do_not_overflow() {
    let in_flight = rule(|b| b.max_in_flight(u64::MAX - 1));
    let status = SystemStatus {
        in_flight: u64::MAX,
        ..idle()
    };
    assert_eq!(check(&in_flight, &status), Some(Threshold::InFlight));
    let most = rule(|b| b.max_in_flight(u64::MAX).qps(f64::MAX));
    let status = SystemStatus {
        in_flight: u64::MAX,
        pass_qps: f64::MAX,
        ..idle()
    };
    assert_eq!(check(&most, &status), None);
}

/// Each threshold is its own shed reason, labelled `system_` and its name, so a
/// 503's body and a metric tell CPU from BBR.
#[test]
fn every_threshold_is_a_distinct_shed_reason() {
    use crate::shed::ShedReason;
    let labels: Vec<&str> = Threshold::ALL
        .iter()
        .map(|&t| ShedReason::System(t).as_str())
        .collect();
    for (label, threshold) in labels.iter().zip(Threshold::ALL) {
        assert_eq!(*label, format!("system_{threshold}"));
        assert_eq!(ShedReason::System(threshold).threshold(), Some(threshold));
    }
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), Threshold::ALL.len());
    assert_eq!(ShedReason::Full.threshold(), None);
}

// ---- /proc parsing ----

#[test]
fn parses_proc_stat_and_loadavg() {
    let stat = "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 3 0\nintr 1 2\n";
    // idle + iowait = 820; user..steal = 980 (guest is inside user).
    assert_eq!(
        parse_stat(stat),
        Ok(CpuTimes {
            idle: 820,
            total: 980
        })
    );
    assert_eq!(parse_stat("cpu  1 2 3 4\n").map(|t| t.total), Ok(10));
    let malformed = Err(ReadingError::Malformed { file: "/proc/stat" });
    assert_eq!(parse_stat("cpu0 1 2 3 4\n"), malformed);
    assert_eq!(parse_stat("cpu 1 2 x 4\n"), malformed);
    assert_eq!(parse_stat("cpu 1 2\n"), malformed);
    assert_eq!(parse_stat(""), malformed);

    assert_eq!(parse_loadavg("0.52 0.58 0.59 2/1234 5678\n"), Ok(0.52));
    let malformed = Err(ReadingError::Malformed {
        file: "/proc/loadavg",
    });
    assert_eq!(parse_loadavg(""), malformed);
    assert_eq!(parse_loadavg("NaN 1 1"), malformed);
    assert_eq!(parse_loadavg("-1 1 1"), malformed);
}

#[test]
fn cpu_usage_is_the_busy_share_between_reads() {
    let before = CpuTimes {
        idle: 800,
        total: 1000,
    };
    let after = CpuTimes {
        idle: 830,
        total: 1100,
    };
    assert_eq!(cpu_usage(before, after), Some(0.7));
    assert_eq!(cpu_usage(before, before), None); // no tick passed
    assert_eq!(cpu_usage(after, before), None); // counters went back
    let odd = CpuTimes {
        idle: 1000,
        total: 1100,
    };
    assert_eq!(cpu_usage(before, odd), None); // idle grew more than total
}

#[cfg(target_os = "linux")]
#[test]
fn proc_readings_read_this_machine() {
    use super::{ProcReadings, SystemReadings};
    let proc = ProcReadings::new().unwrap();
    let reading = proc.read().unwrap();
    let load = reading.load_average.unwrap();
    assert!(load >= 0.0);
    if let Some(usage) = reading.cpu_usage {
        assert!((0.0..=1.0).contains(&usage));
    }
}

#[cfg(not(target_os = "linux"))]
#[test]
fn proc_readings_are_unsupported_elsewhere() {
    assert_eq!(
        super::ProcReadings::new().unwrap_err(),
        ReadingError::Unsupported
    );
}
