//! Tables from Netflix's own code: every scenario below was run through upstream's
//! classes (concurrency-limits `main` at 78a74b9, compiled with a no-op slf4j) and
//! the limit after each sample recorded, with the bits of the final `f64` estimate.
//! Upstream publishes no unit tests for `GradientLimit`, `Gradient2Limit` or
//! `WindowedLimit`; these stand in for them. `Gradient2Pr134` is main's
//! `Gradient2Limit` with the `_update` of PR #134 (refs/pull/134/head, cc849e0), with
//! and without its drop rule: the reference for the default policies.
//!
//! Each scenario is a list of phases `(samples, rtt in ns, inflight, dropped)`.

#![cfg(feature = "adaptive")]

use std::time::Duration;

use tollgate::adaptive::Sample;
use tollgate::adaptive::limit::{
    Aggregation, DropPolicy, Gradient2Builder, Gradient2Limit, GradientLimit, LimitAlgorithm,
    VegasLimit, WindowedBuilder,
};
use tollgate::time::Nanos;

const MS: u64 = 1_000_000;

type Phase = (u64, u64, u64, bool);

const STEADY_OVERLOAD: &[Phase] = &[
    (20, 10 * MS, 1000, false),
    (30, 20 * MS, 1000, false),
    (30, 40 * MS, 1000, false),
    (20, 5 * MS, 1000, false),
    (20, 10 * MS, 1000, false),
];
const APP_LIMITED: &[Phase] = &[
    (10, 10 * MS, 1000, false),
    (10, 10 * MS, 5, false),
    (10, 30 * MS, 5, false),
    (10, 30 * MS, 1000, false),
];
/// Issue #176: dropped requests that return at once.
const FAST_DROPS: &[Phase] = &[
    (20, 10 * MS, 1000, false),
    (30, 50_000, 1000, true),
    (10, 10 * MS, 1000, false),
];
/// PR #134's discussion: latency held at twice its baseline.
const CREEP: &[Phase] = &[(10, 10 * MS, 1000, false), (150, 20 * MS, 1000, false)];
const MIXED: &[Phase] = &[
    (5, 10 * MS, 30, false),
    (5, 12 * MS, 30, true),
    (5, 30 * MS, 3, false),
    (5, 30 * MS, 3, true),
    (10, 8 * MS, 30, false),
    (5, 100 * MS, 30, false),
];

/// The limit after each sample, and the bits of the estimate after the last.
struct Table {
    limits: &'static [u64],
    last_estimate: u64,
}

fn samples(phases: &[Phase]) -> impl Iterator<Item = Sample> + '_ {
    phases.iter().flat_map(|&(n, rtt, inflight, dropped)| {
        (0..n).map(move |_| Sample::new(Nanos::ZERO, Duration::from_nanos(rtt), inflight, dropped))
    })
}

fn check<L: LimitAlgorithm>(
    name: &str,
    mut limit: L,
    estimate: impl Fn(&L) -> f64,
    phases: &[Phase],
    table: &Table,
) {
    let got: Vec<u64> = samples(phases).map(|s| limit.on_sample(s)).collect();
    assert_eq!(got, table.limits, "{name}");
    assert_eq!(
        estimate(&limit).to_bits(),
        table.last_estimate,
        "{name}: {} vs {}",
        estimate(&limit),
        f64::from_bits(table.last_estimate)
    );
}

const SCENARIOS: [(&str, &[Phase]); 5] = [
    ("STEADY_OVERLOAD", STEADY_OVERLOAD),
    ("APP_LIMITED", APP_LIMITED),
    ("FAST_DROPS", FAST_DROPS),
    ("CREEP", CREEP),
    ("MIXED", MIXED),
];

fn gradient2() -> Gradient2Builder {
    Gradient2Limit::builder()
        .min_limit(1)
        .initial_limit(20)
        .max_limit(200)
}

#[test]
fn gradient2_upstream_mode_matches_upstream() {
    let tables = [
        &GRADIENT2_UPSTREAM_STEADY_OVERLOAD,
        &GRADIENT2_UPSTREAM_APP_LIMITED,
        &GRADIENT2_UPSTREAM_FAST_DROPS,
        &GRADIENT2_UPSTREAM_CREEP,
        &GRADIENT2_UPSTREAM_MIXED,
    ];
    for ((name, phases), table) in SCENARIOS.iter().zip(tables) {
        let limit = gradient2().upstream().build().unwrap();
        check(name, limit, Gradient2Limit::estimated_limit, phases, table);
    }
    let defaults = Gradient2Limit::builder().upstream().build().unwrap();
    let tuned = Gradient2Limit::builder()
        .upstream()
        .min_limit(2)
        .initial_limit(50)
        .max_limit(80)
        .smoothing(0.5)
        .queue_size(7)
        .long_window(20)
        .rtt_tolerance(2.0)
        .build()
        .unwrap();
    let estimate = Gradient2Limit::estimated_limit;
    check(
        "defaults",
        defaults,
        estimate,
        MIXED,
        &GRADIENT2_UPSTREAM_DEFAULTS_MIXED,
    );
    check(
        "tuned",
        tuned,
        estimate,
        MIXED,
        &GRADIENT2_UPSTREAM_TUNED_MIXED,
    );
}

#[test]
fn gradient2_default_mode_matches_pr_134() {
    let tables = [
        &GRADIENT2_PR134_STEADY_OVERLOAD,
        &GRADIENT2_PR134_APP_LIMITED,
        &GRADIENT2_PR134_FAST_DROPS,
        &GRADIENT2_PR134_CREEP,
        &GRADIENT2_PR134_MIXED,
    ];
    for ((name, phases), table) in SCENARIOS.iter().zip(tables) {
        let limit = gradient2().build().unwrap();
        check(name, limit, Gradient2Limit::estimated_limit, phases, table);
    }
}

#[test]
fn gradient2_ignoring_drops_matches_pr_134_without_its_drop_rule() {
    let tables = [
        &GRADIENT2_PR134_NODROPS_STEADY_OVERLOAD,
        &GRADIENT2_PR134_NODROPS_APP_LIMITED,
        &GRADIENT2_PR134_NODROPS_FAST_DROPS,
        &GRADIENT2_PR134_NODROPS_CREEP,
        &GRADIENT2_PR134_NODROPS_MIXED,
    ];
    for ((name, phases), table) in SCENARIOS.iter().zip(tables) {
        let limit = gradient2().drop_policy(DropPolicy::Ignore).build().unwrap();
        check(name, limit, Gradient2Limit::estimated_limit, phases, table);
    }
}

/// Until the first congested or dropped sample the default mode is upstream's.
#[test]
fn gradient2_default_mode_is_upstream_until_the_defects_matter() {
    let prefixes = [
        (STEADY_OVERLOAD, &GRADIENT2_UPSTREAM_STEADY_OVERLOAD, 20),
        (APP_LIMITED, &GRADIENT2_UPSTREAM_APP_LIMITED, 20),
        (FAST_DROPS, &GRADIENT2_UPSTREAM_FAST_DROPS, 20),
        (CREEP, &GRADIENT2_UPSTREAM_CREEP, 10),
        (MIXED, &GRADIENT2_UPSTREAM_MIXED, 5),
    ];
    for (phases, table, n) in prefixes {
        let mut limit = gradient2().build().unwrap();
        let got: Vec<u64> = samples(phases)
            .take(n)
            .map(|s| limit.on_sample(s))
            .collect();
        assert_eq!(got, table.limits[..n]);
    }
}

/// The defects themselves, in upstream's own numbers.
#[test]
fn gradient2_defects_show_in_upstream_tables() {
    // #176: thirty fast drops raise upstream's limit from 36 to 60; the default
    // backs off to the minimum.
    assert_eq!(GRADIENT2_UPSTREAM_FAST_DROPS.limits[19], 36);
    assert_eq!(GRADIENT2_UPSTREAM_FAST_DROPS.limits[49], 60);
    assert_eq!(GRADIENT2_PR134_FAST_DROPS.limits[49], 1);
    // #134: latency held at twice its baseline keeps the gradient below 1 for the
    // first ~121 slow samples (until the long-term average passes 13.3 ms). Over
    // samples 40 to 120 upstream's limit climbs from 21 to 46 all the same; the
    // default's falls from 7 to 1. (Past that the average has adopted 20 ms as the
    // baseline, the gradient is 1 again, and both grow: by design.)
    let (upstream, fixed) = (
        GRADIENT2_UPSTREAM_CREEP.limits,
        GRADIENT2_PR134_CREEP.limits,
    );
    assert_eq!((upstream[40], upstream[120]), (21, 46));
    assert_eq!((fixed[40], fixed[120]), (7, 1));
    let mut limit = gradient2().build().unwrap();
    let mut gradient_below_one = 0;
    for s in samples(CREEP).take(121) {
        limit.on_sample(s);
        if s.rtt == Duration::from_millis(20) && 1.5 * limit.long_rtt_nanos() < 20e6 {
            gradient_below_one += 1;
        }
    }
    assert_eq!(gradient_below_one, 111);
}

#[test]
fn gradient_matches_upstream() {
    let noprobe = [
        &GRADIENT_NOPROBE_STEADY_OVERLOAD,
        &GRADIENT_NOPROBE_APP_LIMITED,
        &GRADIENT_NOPROBE_FAST_DROPS,
        &GRADIENT_NOPROBE_CREEP,
        &GRADIENT_NOPROBE_MIXED,
    ];
    let probe1 = [
        &GRADIENT_PROBE1_STEADY_OVERLOAD,
        &GRADIENT_PROBE1_APP_LIMITED,
        &GRADIENT_PROBE1_FAST_DROPS,
        &GRADIENT_PROBE1_CREEP,
        &GRADIENT_PROBE1_MIXED,
    ];
    for (((name, phases), noprobe), probe1) in SCENARIOS.iter().zip(noprobe).zip(probe1) {
        let limit = GradientLimit::builder()
            .probe_interval(None)
            .build()
            .unwrap();
        check(name, limit, GradientLimit::estimated_limit, phases, noprobe);
        // An interval of 1 probes every other sample whatever the jitter: 1 + [0, 1).
        let limit = GradientLimit::builder()
            .probe_interval(Some(1))
            .initial_limit(20)
            .min_limit(2)
            .max_limit(100)
            .build()
            .unwrap();
        check(name, limit, GradientLimit::estimated_limit, phases, probe1);
    }
}

/// No probe falls within these runs: the limit stays at 10 or more, so the first
/// probe is at least 150 samples away.
#[test]
fn vegas_matches_upstream() {
    let default = [
        &VEGAS_DEFAULT_STEADY_OVERLOAD,
        &VEGAS_DEFAULT_APP_LIMITED,
        &VEGAS_DEFAULT_FAST_DROPS,
        &VEGAS_DEFAULT_CREEP,
        &VEGAS_DEFAULT_MIXED,
    ];
    let smoothed = [
        &VEGAS_SMOOTHED_STEADY_OVERLOAD,
        &VEGAS_SMOOTHED_APP_LIMITED,
        &VEGAS_SMOOTHED_FAST_DROPS,
        &VEGAS_SMOOTHED_CREEP,
        &VEGAS_SMOOTHED_MIXED,
    ];
    for (((name, phases), default), smoothed) in SCENARIOS.iter().zip(default).zip(smoothed) {
        let limit = VegasLimit::builder().initial_limit(100).build().unwrap();
        check(name, limit, VegasLimit::estimated_limit, phases, default);
        let limit = VegasLimit::builder()
            .initial_limit(50)
            .max_limit(60)
            .smoothing(0.3)
            .build()
            .unwrap();
        check(name, limit, VegasLimit::estimated_limit, phases, smoothed);
    }
}

/// A delegate that records what it is fed.
#[derive(Debug, Default)]
struct Recorder {
    calls: Vec<(u64, u64, u64, bool)>,
}

impl LimitAlgorithm for Recorder {
    fn limit(&self) -> u64 {
        0
    }

    fn on_sample(&mut self, s: Sample) -> u64 {
        let rtt = u64::try_from(s.rtt.as_nanos()).unwrap();
        self.calls
            .push((s.start.as_u64(), rtt, s.inflight, s.dropped));
        0
    }
}

/// Stream A: every 7 ms, RTTs of 0 to 1.1 ms (some under the 100 µs threshold).
fn stream_a() -> impl Iterator<Item = Sample> {
    (0..600u64).map(|i| {
        Sample::new(
            Nanos::new(i * 7 * MS),
            Duration::from_nanos((i * 37 % 23) * 50_000),
            i % 17,
            i % 29 == 0,
        )
    })
}

/// Stream B: every 13 ms, RTTs of 100 to 320 ms.
fn stream_b() -> impl Iterator<Item = Sample> {
    (0..600u64).map(|i| {
        Sample::new(
            Nanos::new(i * 13 * MS),
            Duration::from_millis(100 + (i * 53 % 23) * 10),
            (i * 5) % 40,
            i % 31 == 7,
        )
    })
}

fn windowed_calls(
    builder: WindowedBuilder,
    stream: impl Iterator<Item = Sample>,
) -> Vec<(u64, u64, u64, bool)> {
    let mut windowed = builder.build(Recorder::default()).unwrap();
    for sample in stream {
        windowed.on_sample(sample);
    }
    windowed.into_inner().calls
}

#[test]
fn windowed_matches_upstream() {
    let ms = Duration::from_millis;
    let a = WindowedBuilder::new().min_window(ms(100));
    assert_eq!(windowed_calls(a, stream_a()), WINDOWED_A_DEFAULT);

    let p90 = Aggregation::Percentile {
        percentile: 0.9,
        capacity: 100,
    };
    let a = WindowedBuilder::new()
        .min_window(ms(100))
        .max_window(ms(300))
        .aggregation(p90);
    assert_eq!(windowed_calls(a, stream_a()), WINDOWED_A_P90);

    let b = WindowedBuilder::new()
        .min_window(ms(200))
        .max_window(ms(500))
        .window_size(12);
    assert_eq!(windowed_calls(b, stream_b()), WINDOWED_B_200_500MS_SIZE_12);

    let p50 = Aggregation::Percentile {
        percentile: 0.5,
        capacity: 16,
    };
    let b = WindowedBuilder::new()
        .min_window(ms(200))
        .max_window(ms(800))
        .min_rtt_threshold(ms(150))
        .aggregation(p50);
    // The one difference: window 13 holds more samples than the capacity, 16, and
    // one past it was dropped. Upstream ignores samples past the capacity whole, so
    // it never hears of that drop; here they still count (their RTTs are not kept).
    let mut expected = WINDOWED_B_P50_CAP_16_THR_150MS.to_vec();
    expected[13].3 = true;
    assert_eq!(windowed_calls(b, stream_b()), expected);
}

/// gradient2 upstream STEADY_OVERLOAD
const GRADIENT2_UPSTREAM_STEADY_OVERLOAD: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 35, 34, 33,
        32, 31, 31, 30, 29, 29, 28, 28, 27, 27, 26, 26, 26, 26, 25, 25, 25, 25, 24, 24, 24, 24, 24,
        24, 24, 24, 23, 22, 20, 19, 18, 17, 16, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 10, 10,
        9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 9, 10, 11, 11, 12, 13, 14, 15, 15, 16, 17, 18, 19, 19, 20,
        21, 22, 23, 23, 24, 25, 26, 27, 27, 28, 29, 30, 31, 31, 32, 33, 34, 35, 35, 36, 37, 38, 39,
        39, 40,
    ],
    last_estimate: 0x40445e8bb5ba60c2,
};

/// gradient2 pr134 STEADY_OVERLOAD
const GRADIENT2_PR134_STEADY_OVERLOAD: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 34, 32, 30,
        29, 28, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 16, 15, 14, 14, 13, 13, 12, 12, 11, 11,
        10, 10, 10, 9, 8, 7, 7, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 11, 12, 13, 13, 14, 15, 16, 17, 17, 18,
        19, 20, 21, 21, 22, 23, 24, 25, 25, 26, 27, 28, 29, 29, 30, 31, 32, 33,
    ],
    last_estimate: 0x4040800000000004,
};

/// gradient2 pr134-nodrops STEADY_OVERLOAD
const GRADIENT2_PR134_NODROPS_STEADY_OVERLOAD: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 34, 32, 30,
        29, 28, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 16, 15, 14, 14, 13, 13, 12, 12, 11, 11,
        10, 10, 10, 9, 8, 7, 7, 6, 5, 5, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 11, 12, 13, 13, 14, 15, 16, 17, 17, 18,
        19, 20, 21, 21, 22, 23, 24, 25, 25, 26, 27, 28, 29, 29, 30, 31, 32, 33,
    ],
    last_estimate: 0x4040800000000004,
};

/// gradient2 upstream APP_LIMITED
const GRADIENT2_UPSTREAM_APP_LIMITED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
        28, 28, 28, 28, 28, 28, 28, 26, 24, 23, 21, 20, 19, 18, 17, 17, 16,
    ],
    last_estimate: 0x40305e779cfa0694,
};

/// gradient2 pr134 APP_LIMITED
const GRADIENT2_PR134_APP_LIMITED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 25, 22, 20,
        18, 16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 6, 5, 5, 4, 4, 3,
    ],
    last_estimate: 0x400faeb983197b72,
};

/// gradient2 pr134-nodrops APP_LIMITED
const GRADIENT2_PR134_NODROPS_APP_LIMITED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 25, 22, 20,
        18, 16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 6, 5, 5, 4, 4, 3,
    ],
    last_estimate: 0x400faeb983197b72,
};

/// gradient2 upstream FAST_DROPS
const GRADIENT2_UPSTREAM_FAST_DROPS: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 36, 37, 38,
        39, 40, 40, 41, 42, 43, 44, 44, 45, 46, 47, 48, 48, 49, 50, 51, 52, 52, 53, 54, 55, 56, 56,
        57, 58, 59, 60, 54, 50, 45, 42, 38, 35, 32, 30, 28, 26,
    ],
    last_estimate: 0x403a219b7e3696ea,
};

/// gradient2 pr134 FAST_DROPS
const GRADIENT2_PR134_FAST_DROPS: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 32, 29, 26,
        23, 21, 19, 17, 15, 13, 12, 11, 10, 9, 8, 7, 6, 6, 5, 4, 4, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ],
    last_estimate: 0x3ff0000000000000,
};

/// gradient2 pr134-nodrops FAST_DROPS
const GRADIENT2_PR134_NODROPS_FAST_DROPS: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 29, 30, 31, 32, 32, 33, 34, 35, 36, 36, 37, 38,
        39, 40, 40, 41, 42, 43, 44, 44, 45, 46, 47, 48, 48, 49, 50, 51, 52, 52, 53, 54, 55, 56, 56,
        57, 58, 59, 60, 54, 48, 43, 39, 35, 31, 28, 25, 23, 20,
    ],
    last_estimate: 0x4034ebb36a3efce5,
};

/// gradient2 upstream CREEP
const GRADIENT2_UPSTREAM_CREEP: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 27, 26, 26, 25, 25, 25, 24, 24, 24, 23, 23, 23, 23,
        22, 22, 22, 22, 22, 22, 22, 21, 21, 21, 21, 21, 21, 21, 21, 21, 21, 21, 21, 21, 21, 22, 22,
        22, 22, 22, 22, 22, 22, 22, 22, 23, 23, 23, 23, 23, 23, 23, 24, 24, 24, 24, 24, 25, 25, 25,
        25, 25, 26, 26, 26, 26, 27, 27, 27, 27, 28, 28, 28, 29, 29, 29, 30, 30, 30, 30, 31, 31, 32,
        32, 32, 33, 33, 33, 34, 34, 35, 35, 35, 36, 36, 37, 37, 38, 38, 39, 39, 40, 40, 41, 41, 42,
        43, 43, 44, 44, 45, 46, 46, 47, 48, 48, 49, 50, 50, 51, 52, 53, 54, 54, 55, 56, 57, 58, 58,
        59, 60, 61, 62, 62, 63, 64, 65, 66, 66, 67, 68, 69, 70, 70, 71, 72, 73, 74, 74, 75, 76,
    ],
    last_estimate: 0x40531bd4404376de,
};

/// gradient2 pr134 CREEP
const GRADIENT2_PR134_CREEP: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 26, 25, 24, 22, 21, 20, 19, 18, 18, 17, 16, 15, 15,
        14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 9, 8, 8, 8, 7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5,
        5, 5, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 4, 5, 6, 7, 8, 8,
        9, 10, 11, 12, 12, 13, 14, 15, 16, 16, 17, 18, 19, 20, 20, 21, 22, 23, 24, 24,
    ],
    last_estimate: 0x4038cecf8680f3f8,
};

/// gradient2 pr134-nodrops CREEP
const GRADIENT2_PR134_NODROPS_CREEP: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 26, 25, 24, 22, 21, 20, 19, 18, 18, 17, 16, 15, 15,
        14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 9, 8, 8, 8, 7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5,
        5, 5, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 4, 5, 6, 7, 8, 8,
        9, 10, 11, 12, 12, 13, 14, 15, 16, 16, 17, 18, 19, 20, 20, 21, 22, 23, 24, 24,
    ],
    last_estimate: 0x4038cecf8680f3f8,
};

/// gradient2 upstream MIXED
const GRADIENT2_UPSTREAM_MIXED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 29, 30,
        31, 32, 32, 33, 34, 35, 36, 33, 30, 28, 26, 24,
    ],
    last_estimate: 0x403888a1dfb9389f,
};

/// gradient2 pr134 MIXED
const GRADIENT2_PR134_MIXED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 21, 19, 17, 15, 14, 12, 11, 10, 9, 8, 8, 7, 6, 5, 5, 6, 6, 7, 8, 9, 10,
        10, 11, 12, 13, 11, 10, 9, 8, 7,
    ],
    last_estimate: 0x401f5bc6d05bcd1e,
};

/// gradient2 pr134-nodrops MIXED
const GRADIENT2_PR134_NODROPS_MIXED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 25, 23, 21, 19, 17, 16, 14, 13, 12, 11, 12, 12, 13,
        14, 15, 16, 16, 17, 18, 19, 17, 15, 14, 12, 11,
    ],
    last_estimate: 0x4026d1f68bf5234e,
};

/// gradient2 upstream defaults MIXED
const GRADIENT2_UPSTREAM_DEFAULTS_MIXED: Table = Table {
    limits: &[
        20, 21, 22, 23, 24, 24, 25, 26, 27, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 29, 30,
        31, 32, 32, 33, 34, 35, 36, 33, 30, 28, 26, 24,
    ],
    last_estimate: 0x403888a1dfb9389f,
};

/// gradient2 upstream tuned MIXED
const GRADIENT2_UPSTREAM_TUNED_MIXED: Table = Table {
    limits: &[
        53, 57, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
        60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    ],
    last_estimate: 0x404e400000000000,
};

/// gradient noprobe STEADY_OVERLOAD
const GRADIENT_NOPROBE_STEADY_OVERLOAD: Table = Table {
    limits: &[
        57, 64, 72, 80, 88, 97, 106, 116, 126, 137, 148, 160, 172, 185, 198, 212, 226, 241, 256,
        272, 288, 304, 321, 338, 356, 374, 393, 412, 432, 452, 473, 494, 516, 538, 561, 584, 608,
        632, 657, 682, 708, 734, 761, 788, 816, 844, 873, 902, 932, 962, 872, 790, 717, 650, 590,
        536, 487, 442, 402, 366, 333, 303, 276, 252, 230, 210, 191, 175, 160, 146, 134, 123, 113,
        103, 95, 87, 80, 74, 68, 63, 70, 78, 86, 95, 104, 114, 124, 135, 146, 158, 170, 183, 196,
        210, 224, 238, 253, 268, 284, 300, 317, 334, 352, 370, 389, 408, 428, 448, 469, 490, 512,
        534, 557, 580, 604, 628, 653, 678, 704, 730,
    ],
    last_estimate: 0x4086d17a4780a716,
};

/// gradient probe1 STEADY_OVERLOAD
const GRADIENT_PROBE1_STEADY_OVERLOAD: Table = Table {
    limits: &[
        24, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
    ],
    last_estimate: 0x4010000000000000,
};

/// gradient noprobe APP_LIMITED
const GRADIENT_NOPROBE_APP_LIMITED: Table = Table {
    limits: &[
        57, 64, 72, 80, 88, 97, 106, 116, 126, 137, 137, 137, 137, 137, 137, 137, 137, 137, 137,
        137, 137, 137, 137, 137, 137, 137, 137, 137, 137, 137, 130, 123, 117, 111, 106, 101, 96,
        91, 87, 83,
    ],
    last_estimate: 0x4054dd49b0fd1b35,
};

/// gradient probe1 APP_LIMITED
const GRADIENT_PROBE1_APP_LIMITED: Table = Table {
    limits: &[
        24, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
    ],
    last_estimate: 0x4010000000000000,
};

/// gradient noprobe FAST_DROPS
const GRADIENT_NOPROBE_FAST_DROPS: Table = Table {
    limits: &[
        57, 64, 72, 80, 88, 97, 106, 116, 126, 137, 148, 160, 172, 185, 198, 212, 226, 241, 256,
        272, 266, 261, 256, 250, 245, 240, 236, 231, 226, 222, 217, 213, 209, 204, 200, 196, 192,
        189, 185, 181, 177, 174, 170, 167, 164, 160, 157, 154, 151, 148, 135, 124, 114, 104, 96,
        88, 81, 75, 69, 63,
    ],
    last_estimate: 0x404ff2f6d16463c6,
};

/// gradient probe1 FAST_DROPS
const GRADIENT_PROBE1_FAST_DROPS: Table = Table {
    limits: &[
        24, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
        4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
    ],
    last_estimate: 0x4010000000000000,
};

/// gradient noprobe CREEP
const GRADIENT_NOPROBE_CREEP: Table = Table {
    limits: &[
        57, 64, 72, 80, 88, 97, 106, 116, 126, 137, 148, 160, 172, 185, 198, 212, 226, 241, 256,
        272, 288, 304, 321, 338, 356, 374, 393, 412, 432, 452, 473, 494, 516, 538, 561, 584, 608,
        632, 657, 682, 708, 734, 761, 788, 816, 844, 873, 902, 932, 962, 993, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
        1000,
    ],
    last_estimate: 0x408f400000000000,
};

/// gradient probe1 CREEP
const GRADIENT_PROBE1_CREEP: Table = Table {
    limits: &[
        24, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
    ],
    last_estimate: 0x4010000000000000,
};

/// gradient noprobe MIXED
const GRADIENT_NOPROBE_MIXED: Table = Table {
    limits: &[
        57, 64, 64, 64, 64, 62, 61, 60, 59, 57, 57, 57, 57, 57, 57, 56, 55, 54, 53, 52, 59, 66, 66,
        66, 66, 66, 66, 66, 66, 66, 66, 66, 66, 66, 66,
    ],
    last_estimate: 0x405092baef8086ec,
};

/// gradient probe1 MIXED
const GRADIENT_PROBE1_MIXED: Table = Table {
    limits: &[
        24, 4, 8, 4, 8, 4, 4, 4, 4, 4, 8, 4, 8, 4, 8, 4, 4, 4, 4, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4,
        8, 4, 8, 4, 8,
    ],
    last_estimate: 0x4020000000000000,
};

/// vegas default STEADY_OVERLOAD
const VEGAS_DEFAULT_STEADY_OVERLOAD: Table = Table {
    limits: &[
        100, 112, 124, 136, 148, 160, 172, 184, 196, 208, 220, 232, 244, 256, 268, 280, 292, 304,
        316, 328, 326, 324, 322, 320, 318, 316, 314, 312, 310, 308, 306, 304, 302, 300, 298, 296,
        294, 292, 290, 288, 286, 284, 282, 280, 278, 276, 274, 272, 270, 268, 266, 264, 262, 260,
        258, 256, 254, 252, 250, 248, 246, 244, 242, 240, 238, 236, 234, 232, 230, 228, 226, 224,
        222, 220, 218, 216, 214, 212, 210, 208, 208, 220, 232, 244, 256, 268, 280, 292, 304, 316,
        328, 340, 352, 364, 376, 388, 400, 412, 424, 436, 434, 432, 430, 428, 426, 424, 422, 420,
        418, 416, 414, 412, 410, 408, 406, 404, 402, 400, 398, 396,
    ],
    last_estimate: 0x4078c00000000000,
};

/// vegas smoothed STEADY_OVERLOAD
const VEGAS_SMOOTHED_STEADY_OVERLOAD: Table = Table {
    limits: &[
        50, 51, 53, 55, 56, 57, 58, 58, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
        58, 58, 58, 57, 57, 57, 56, 56, 56, 56, 55, 55, 55, 54, 54, 54, 53, 53, 53, 53, 52, 52, 52,
        51, 51, 51, 50, 50, 50, 50, 49, 49, 49, 48, 48, 48, 47, 47, 47, 47, 46, 46, 46, 45, 45, 45,
        44, 44, 44, 44, 43, 43, 43, 42, 42, 42, 41, 41, 43, 45, 47, 49, 50, 52, 54, 56, 57, 58, 58,
        59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 58, 58, 58, 57, 57, 57, 56, 56, 56, 56, 55, 55,
        55, 54, 54, 54, 53,
    ],
    last_estimate: 0x404af667e3b4ee05,
};

/// vegas default APP_LIMITED
const VEGAS_DEFAULT_APP_LIMITED: Table = Table {
    limits: &[
        100, 112, 124, 136, 148, 160, 172, 184, 196, 208, 208, 208, 208, 208, 208, 208, 208, 208,
        208, 208, 208, 208, 208, 208, 208, 208, 208, 208, 208, 208, 206, 204, 202, 200, 198, 196,
        194, 192, 190, 188,
    ],
    last_estimate: 0x4067800000000000,
};

/// vegas smoothed APP_LIMITED
const VEGAS_SMOOTHED_APP_LIMITED: Table = Table {
    limits: &[
        50, 51, 53, 55, 56, 57, 58, 58, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
        59, 59, 59, 59, 59, 59, 59, 59, 58, 58, 58, 57, 57, 57, 57, 56, 56,
    ],
    last_estimate: 0x404c3aba6fd2f6aa,
};

/// vegas default FAST_DROPS
const VEGAS_DEFAULT_FAST_DROPS: Table = Table {
    limits: &[
        100, 112, 124, 136, 148, 160, 172, 184, 196, 208, 220, 232, 244, 256, 268, 280, 292, 304,
        316, 328, 328, 326, 324, 322, 320, 318, 316, 314, 312, 310, 308, 306, 304, 302, 300, 298,
        296, 294, 292, 290, 288, 286, 284, 282, 280, 278, 276, 274, 272, 270, 268, 266, 264, 262,
        260, 258, 256, 254, 252, 250,
    ],
    last_estimate: 0x406f400000000000,
};

/// vegas smoothed FAST_DROPS
const VEGAS_SMOOTHED_FAST_DROPS: Table = Table {
    limits: &[
        50, 51, 53, 55, 56, 57, 58, 58, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
        59, 58, 58, 58, 57, 57, 57, 56, 56, 56, 56, 55, 55, 55, 54, 54, 54, 53, 53, 53, 53, 52, 52,
        52, 51, 51, 51, 50, 50, 50, 50, 49, 49, 49, 48, 48, 48,
    ],
    last_estimate: 0x404824717881e960,
};

/// vegas default CREEP
const VEGAS_DEFAULT_CREEP: Table = Table {
    limits: &[
        100, 112, 124, 136, 148, 160, 172, 184, 196, 208, 206, 204, 202, 200, 198, 196, 194, 192,
        190, 188, 186, 184, 182, 180, 178, 176, 174, 172, 170, 168, 166, 164, 162, 160, 158, 156,
        154, 152, 150, 148, 146, 144, 142, 140, 138, 136, 134, 132, 130, 128, 126, 124, 122, 120,
        118, 116, 114, 112, 110, 108, 106, 104, 102, 100, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89,
        88, 87, 86, 85, 84, 83, 82, 81, 80, 79, 78, 77, 76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66,
        65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43,
        42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
        19, 18, 17, 16, 15, 14, 13, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    ],
    last_estimate: 0x4028000000000000,
};

/// vegas smoothed CREEP
const VEGAS_SMOOTHED_CREEP: Table = Table {
    limits: &[
        50, 51, 53, 55, 56, 57, 58, 58, 59, 59, 59, 58, 58, 58, 57, 57, 57, 57, 56, 56, 56, 55, 55,
        55, 54, 54, 54, 54, 53, 53, 53, 52, 52, 52, 51, 51, 51, 51, 50, 50, 50, 49, 49, 49, 48, 48,
        48, 48, 47, 47, 47, 46, 46, 46, 45, 45, 45, 45, 44, 44, 44, 43, 43, 43, 42, 42, 42, 42, 41,
        41, 41, 40, 40, 40, 39, 39, 39, 39, 38, 38, 38, 37, 37, 37, 36, 36, 36, 36, 35, 35, 35, 34,
        34, 34, 33, 33, 33, 33, 32, 32, 32, 31, 31, 31, 30, 30, 30, 30, 29, 29, 29, 28, 28, 28, 27,
        27, 27, 27, 26, 26, 26, 25, 25, 25, 24, 24, 24, 24, 23, 23, 23, 22, 22, 22, 21, 21, 21, 21,
        20, 20, 20, 19, 19, 19, 18, 18, 18, 18, 17, 17, 17, 16, 16, 16, 15, 15, 15, 15, 14, 14,
    ],
    last_estimate: 0x402ceae9bf4bd9d6,
};

/// vegas default MIXED
const VEGAS_DEFAULT_MIXED: Table = Table {
    limits: &[
        100, 100, 100, 100, 100, 98, 97, 96, 95, 94, 94, 94, 94, 94, 94, 93, 92, 91, 90, 89, 89,
        89, 89, 89, 89, 89, 89, 89, 89, 89, 89, 89, 89, 89, 89,
    ],
    last_estimate: 0x4056400000000000,
};

/// vegas smoothed MIXED
const VEGAS_SMOOTHED_MIXED: Table = Table {
    limits: &[
        50, 51, 53, 55, 56, 56, 56, 55, 55, 55, 55, 55, 55, 55, 55, 54, 54, 54, 54, 53, 53, 55, 56,
        57, 58, 58, 59, 59, 59, 59, 59, 59, 58, 58, 58,
    ],
    last_estimate: 0x404d1f62936a09ea,
};

/// windowed A default
const WINDOWED_A_DEFAULT: &[(u64, u64, u64, bool)] = &[
    (112000000, 585714, 16, false),
    (217000000, 626923, 14, true),
    (329000000, 590000, 16, false),
    (434000000, 585714, 16, true),
    (539000000, 626923, 16, false),
    (651000000, 590000, 16, true),
    (756000000, 585714, 16, false),
    (861000000, 626923, 16, true),
    (973000000, 590000, 16, false),
    (1078000000, 585714, 16, true),
    (1183000000, 626923, 16, false),
    (1295000000, 590000, 15, true),
    (1400000000, 585714, 16, false),
    (1505000000, 626923, 16, true),
    (1617000000, 590000, 16, false),
    (1722000000, 585714, 16, true),
    (1827000000, 626923, 16, true),
    (1939000000, 590000, 16, false),
    (2044000000, 585714, 16, true),
    (2149000000, 626923, 16, false),
    (2261000000, 590000, 15, true),
    (2366000000, 585714, 15, false),
    (2471000000, 626923, 16, true),
    (2583000000, 590000, 16, false),
    (2688000000, 585714, 15, true),
    (2793000000, 626923, 16, false),
    (2905000000, 590000, 16, true),
    (3010000000, 585714, 16, false),
    (3115000000, 626923, 16, true),
    (3227000000, 590000, 16, false),
    (3332000000, 585714, 16, true),
    (3437000000, 626923, 15, false),
    (3549000000, 590000, 16, true),
    (3654000000, 585714, 16, true),
    (3759000000, 626923, 16, false),
    (3871000000, 590000, 16, true),
    (3976000000, 585714, 16, false),
    (4081000000, 626923, 16, false),
    (4193000000, 590000, 16, false),
];

/// windowed A p90
const WINDOWED_A_P90: &[(u64, u64, u64, bool)] = &[
    (112000000, 1000000, 16, false),
    (217000000, 1000000, 14, true),
    (329000000, 1050000, 16, false),
    (434000000, 1000000, 16, true),
    (539000000, 1000000, 16, false),
    (651000000, 1050000, 16, true),
    (756000000, 1000000, 16, false),
    (861000000, 1000000, 16, true),
    (973000000, 1050000, 16, false),
    (1078000000, 1000000, 16, true),
    (1183000000, 1000000, 16, false),
    (1295000000, 1050000, 15, true),
    (1400000000, 1000000, 16, false),
    (1505000000, 1000000, 16, true),
    (1617000000, 1050000, 16, false),
    (1722000000, 1000000, 16, true),
    (1827000000, 1000000, 16, true),
    (1939000000, 1050000, 16, false),
    (2044000000, 1000000, 16, true),
    (2149000000, 1000000, 16, false),
    (2261000000, 1050000, 15, true),
    (2366000000, 1000000, 15, false),
    (2471000000, 1000000, 16, true),
    (2583000000, 1050000, 16, false),
    (2688000000, 1000000, 15, true),
    (2793000000, 1000000, 16, false),
    (2905000000, 1050000, 16, true),
    (3010000000, 1000000, 16, false),
    (3115000000, 1000000, 16, true),
    (3227000000, 1050000, 16, false),
    (3332000000, 1000000, 16, true),
    (3437000000, 1000000, 15, false),
    (3549000000, 1050000, 16, true),
    (3654000000, 1000000, 16, true),
    (3759000000, 1000000, 16, false),
    (3871000000, 1050000, 16, true),
    (3976000000, 1000000, 16, false),
    (4081000000, 1000000, 16, false),
    (4193000000, 1050000, 16, false),
];

/// windowed B 200-500ms size 12
const WINDOWED_B_200_500MS_SIZE_12: &[(u64, u64, u64, bool)] = &[
    (455000000, 207187500, 35, true),
    (637000000, 216428571, 35, true),
    (923000000, 205454545, 35, true),
    (1365000000, 210000000, 35, true),
    (1651000000, 205000000, 35, false),
    (1833000000, 216428571, 35, true),
    (2119000000, 205454545, 35, true),
    (2561000000, 210000000, 35, true),
    (2847000000, 205000000, 35, false),
    (3029000000, 216428571, 35, true),
    (3315000000, 205454545, 35, true),
    (3757000000, 210000000, 35, true),
    (4043000000, 205000000, 35, false),
    (4225000000, 216428571, 35, true),
    (4511000000, 205454545, 35, false),
    (4953000000, 210000000, 35, true),
    (5239000000, 205000000, 35, false),
    (5421000000, 216428571, 35, true),
    (5707000000, 205454545, 35, false),
    (6149000000, 210000000, 35, true),
    (6435000000, 205000000, 35, false),
    (6617000000, 216428571, 35, true),
    (6903000000, 205454545, 35, false),
    (7345000000, 210000000, 35, true),
    (7631000000, 205000000, 35, false),
];

/// windowed B p50 cap 16 thr 150ms
const WINDOWED_B_P50_CAP_16_THR_150MS: &[(u64, u64, u64, bool)] = &[
    (247000000, 240000000, 35, false),
    (585000000, 230000000, 35, true),
    (923000000, 230000000, 35, false),
    (1235000000, 230000000, 35, false),
    (1573000000, 220000000, 35, true),
    (1911000000, 230000000, 35, true),
    (2249000000, 230000000, 35, true),
    (2561000000, 230000000, 35, true),
    (2899000000, 220000000, 35, false),
    (3237000000, 220000000, 35, false),
    (3575000000, 230000000, 35, true),
    (3913000000, 230000000, 35, false),
    (4225000000, 230000000, 35, true),
    (4563000000, 220000000, 35, false),
    (4901000000, 230000000, 35, false),
    (5239000000, 230000000, 35, true),
    (5551000000, 230000000, 35, true),
    (5889000000, 220000000, 35, true),
    (6227000000, 220000000, 35, true),
    (6565000000, 230000000, 35, false),
    (6903000000, 230000000, 35, false),
    (7215000000, 230000000, 35, true),
    (7553000000, 220000000, 35, true),
];
