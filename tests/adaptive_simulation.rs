//! Deterministic simulations of the adaptive limiter against a service with a
//! concurrency knee (`tests/sim`), on the model of Vector's adaptive-concurrency
//! scenarios, judged with ranges as Vector's are.
//!
//! The service answers in 10 ms up to 10 requests in flight (the knee, N); each
//! request past the knee adds 20% of that (so its throughput *falls* past the knee:
//! 1,000/s at N, 571/s at M); past 40 in flight (M) it drops requests. Each
//! algorithm, offered twice the service's capacity, must:
//!
//! - settle near the knee: its mean limit after warm-up within a range per
//!   algorithm (below);
//! - keep in-flight requests within the service's limit M, up to a documented
//!   margin (M + 5 for Vegas and Gradient, whose limits pass M now and then, with
//!   at most 1% dropped; 1.5 M for AIMD, which learns M only from drops), and keep
//!   in flight within its own limit up to the last decrease (the limiter never
//!   admits past its limit: only a lowered limit leaves more in flight);
//! - hold p99 latency under a ramp from half to three times the capacity, where the
//!   unlimited service's p99 reaches the client's timeout;
//! - in LIFO mode (a backlog of 10, the FIFO run's timeout), meet the same ranges,
//!   keep the backlog within its size, and serve with a median latency below 0.8
//!   of the FIFO run's on the same arrivals.
//!
//! A partitioned limiter (Windowed(Gradient2), `live` 0.5 and `batch` 0.3 of the
//! limit) under a surge of `batch` keeps refusing `live` rarely, in strict mode
//! never past the limit, in Netflix's mode past it by at most the partitions' own
//! limits.
//!
//! Measured with seeds 1 and 2 (fail fast), 7 (FIFO and LIFO) and 11 (ramp); the
//! ranges also held for seeds 3 to 6, 8 to 10, 12 and 13 when tuned (8 and 9 for
//! LIFO; 1 to 3 for the partitioned runs). They leave room for
//! other seeds, not for a different behaviour. Run with `--nocapture` to see the
//! reports.
//!
//! Per algorithm (the tuning in [`algorithm`]):
//!
//! - AIMD learns only from drops: it rides at the service's limit M, not its knee,
//!   so its range is around M, its in-flight goes past M by the requests sent before
//!   the drops come back, and its p99 is the latency at M. When drops are seen only
//!   at the client's timeout (a service that hangs), it overshoots far past M and
//!   its p99 is the timeout; the ramp test uses a service that rejects at once.
//! - Vegas, Gradient2 and Windowed(Gradient2) settle between N and 2.5 N: they
//!   tolerate a queue (Vegas's alpha–beta of 3–6; Gradient2's RTT tolerance of 1.5).
//! - Gradient (v1) is run without its probe: the probe resets the no-load RTT every
//!   1,000 samples and, under overload, the limit then climbed to 144 before the
//!   new baseline is learnt (seen here with upstream's default).
//! - Envoy's gradient controller pins concurrency at its `min_concurrency` (3) while
//!   it re-measures the minimum RTT every 2 s, then settles just past the knee.
#![cfg(feature = "adaptive")]

mod sim;

use std::time::Duration;

use sim::{Load, Overload, Report, Run, Service, limiter, simulate, simulate_partitioned};
use tollgate::adaptive::limit::{
    AimdLimit, EnvoyGradient, EnvoyGradientConfig, Gradient2Limit, GradientLimit, LimitAlgorithm,
    VegasLimit, WindowedBuilder,
};
use tollgate::adaptive::partition::PartitionMode;
use tollgate::adaptive::{PartitionedLimiter, WhenLimited};
use tollgate::time::{Clock, ManualClock};

/// N = 10, M = 40, 10 ms at the knee; rejects past M at once (Vector's `defer`).
const SERVICE: Service = Service {
    base: Duration::from_millis(10),
    knee: 10,
    growth: 0.2,
    max_inflight: 40,
    jitter: 0.1,
    overload: Overload::Reject,
};

/// The same service, which never answers a request past M: the client gives up
/// after 250 ms (Vector's `drop`).
const HANGS: Service = Service {
    overload: Overload::Hang(Duration::from_millis(250)),
    ..SERVICE
};

const FIFO_TIMEOUT: Duration = Duration::from_millis(50);
/// The LIFO runs wait as long as the FIFO ones, in a backlog of 10.
const LIFO_BACKLOG: usize = 10;

#[derive(Clone, Copy, Debug)]
enum Algorithm {
    Aimd,
    Vegas,
    Gradient,
    Gradient2,
    Windowed,
    Envoy,
}

/// Each algorithm from a limit of 10 within [1, 200], seeded where it draws.
fn algorithm(which: Algorithm, clock: &ManualClock) -> Box<dyn LimitAlgorithm> {
    match which {
        Algorithm::Aimd => Box::new(
            AimdLimit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .build()
                .unwrap(),
        ),
        Algorithm::Vegas => Box::new(
            VegasLimit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .seed(1)
                .build()
                .unwrap(),
        ),
        Algorithm::Gradient => Box::new(
            GradientLimit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .probe_interval(None)
                .seed(1)
                .build()
                .unwrap(),
        ),
        Algorithm::Gradient2 => Box::new(gradient2()),
        Algorithm::Windowed => Box::new(
            WindowedBuilder::new()
                .min_window(Duration::from_millis(100))
                .max_window(Duration::from_millis(200))
                .build(gradient2())
                .unwrap(),
        ),
        Algorithm::Envoy => {
            let config = EnvoyGradientConfig::builder()
                .concurrency_update_interval(Duration::from_millis(100))
                .min_rtt_calc_interval(Duration::from_secs(2))
                .max_concurrency_limit(200)
                .build()
                .unwrap();
            Box::new(EnvoyGradient::with_seed(config, clock.now(), 1))
        }
    }
}

fn gradient2() -> Gradient2Limit {
    Gradient2Limit::builder()
        .min_limit(1)
        .initial_limit(10)
        .max_limit(200)
        .build()
        .unwrap()
}

/// Twice the capacity for 5 s; statistics over the last 3 s.
fn steady(which: Algorithm, mode: WhenLimited, seed: u64) -> Report {
    let clock = ManualClock::new();
    let limiter = limiter(algorithm(which, &clock), mode, &clock);
    let run = Run {
        length: Duration::from_secs(5),
        load: Load::Constant(2.0 * SERVICE.capacity()),
        warm_up: Duration::from_secs(2),
        tick: Duration::from_millis(10),
        seed,
    };
    let report = simulate(SERVICE, run, Some(limiter));
    println!("{which:?} {mode:?} seed {seed}: {report}");
    report
}

/// From half to three times the capacity over 8 s; statistics after the first.
fn ramp(which: Option<Algorithm>, service: Service) -> Report {
    let clock = ManualClock::new();
    let limiter =
        which.map(|which| limiter(algorithm(which, &clock), WhenLimited::FailFast, &clock));
    let run = Run {
        length: Duration::from_secs(8),
        load: Load::Ramp(0.5 * service.capacity(), 3.0 * service.capacity()),
        warm_up: Duration::from_secs(1),
        tick: Duration::from_millis(10),
        seed: 11,
    };
    let report = simulate(service, run, limiter);
    println!("{which:?} ramp: {report}");
    println!("  per second (limit, admitted, p99): {:?}", report.seconds);
    report
}

/// What one algorithm must show.
struct Expect {
    which: Algorithm,
    /// The mean limit after warm-up, in multiples of the knee N.
    mean: (f64, f64),
    /// The most in flight after warm-up.
    inflight: u64,
    /// The most in flight above the limit just lowered.
    over_limit: u64,
    /// The share of requests the service dropped after warm-up.
    drops: f64,
    /// p99 under the ramp, in multiples of the latency at the knee.
    p99: f64,
    /// The service the ramp runs against.
    ramp_service: Service,
}

fn check(expect: Expect) {
    let knee = SERVICE.knee as f64;
    let fifo = WhenLimited::fifo(FIFO_TIMEOUT).unwrap();
    let lifo = WhenLimited::lifo(LIFO_BACKLOG, FIFO_TIMEOUT).unwrap();
    let runs = [
        (
            steady(expect.which, WhenLimited::FailFast, 1),
            Duration::ZERO,
        ),
        (
            steady(expect.which, WhenLimited::FailFast, 2),
            Duration::ZERO,
        ),
        // A waiter's latency includes its wait.
        (steady(expect.which, fifo, 7), FIFO_TIMEOUT),
        (steady(expect.which, lifo, 7), FIFO_TIMEOUT),
    ];
    for (report, _) in &runs {
        let mean = report.limit_mean / knee;
        assert!(
            (expect.mean.0..=expect.mean.1).contains(&mean),
            "{:?}: mean limit {mean:.2} N outside {:?}: {report}",
            expect.which,
            expect.mean
        );
        assert!(
            report.inflight_max <= expect.inflight,
            "{:?}: {} in flight: {report}",
            expect.which,
            report.inflight_max
        );
        assert!(
            report.working_max <= SERVICE.max_inflight,
            "the service never works on more than M"
        );
        assert!(
            report.over_limit_max <= expect.over_limit,
            "{:?}: {} in flight past the limit: {report}",
            expect.which,
            report.over_limit_max
        );
        let drops = report.dropped_late as f64 / report.answered_late.max(1) as f64;
        assert!(
            drops <= expect.drops,
            "{:?}: {:.1}% dropped: {report}",
            expect.which,
            drops * 100.0
        );
    }
    let at_knee = SERVICE.latency_at(SERVICE.knee);
    let bound = at_knee.mul_f64(expect.p99);
    for (report, wait) in &runs {
        assert!(report.p99 <= bound + *wait, "{:?}: {report}", expect.which);
    }
    // The same arrivals waiting newest first: the backlog stays within its size
    // (FIFO's queue grew past 100), and the requests served waited less (LIFO's
    // median latency measured at 0.27 to 0.6 of FIFO's, by algorithm).
    let (fifo, lifo) = (&runs[2].0, &runs[3].0);
    println!(
        "{:?}: waiting at most {} (FIFO {}), p50 {:?} (FIFO {:?})",
        expect.which, lifo.waiting_max, fifo.waiting_max, lifo.p50, fifo.p50
    );
    assert!(lifo.waiting_max <= LIFO_BACKLOG as u64, "{lifo}");
    assert!(fifo.waiting_max > LIFO_BACKLOG as u64, "{fifo}");
    assert!(
        lifo.p50 < fifo.p50.mul_f64(0.8),
        "{:?}: LIFO p50 {:?}, FIFO p50 {:?}",
        expect.which,
        lifo.p50,
        fifo.p50
    );
    let report = ramp(Some(expect.which), expect.ramp_service);
    assert!(
        report.p99 <= bound,
        "{:?}: ramp p99 {:?} past {bound:?}: {report}",
        expect.which,
        report.p99
    );
    let drops = report.dropped_late as f64 / report.answered_late.max(1) as f64;
    assert!(drops <= expect.drops, "{:?}: ramp: {report}", expect.which);
}

#[test]
fn aimd_rides_at_the_service_limit() {
    check(Expect {
        which: Algorithm::Aimd,
        mean: (2.5, 4.5),
        inflight: 60,
        over_limit: 30,
        drops: 0.3,
        p99: 8.0,
        ramp_service: SERVICE,
    });
}

#[test]
fn vegas_settles_near_the_knee() {
    check(Expect {
        which: Algorithm::Vegas,
        mean: (1.0, 2.5),
        // M + 3 seen with FIFO waiters: Vegas's probe lifts the limit past M at times.
        inflight: 45,
        over_limit: 5,
        drops: 0.01,
        p99: 7.0,
        ramp_service: HANGS,
    });
}

#[test]
fn gradient_settles_near_the_knee() {
    check(Expect {
        which: Algorithm::Gradient,
        mean: (1.5, 2.5),
        // M + 1 seen with FIFO waiters, who take permits as soon as the limit rises.
        inflight: 45,
        over_limit: 15,
        drops: 0.01,
        p99: 8.0,
        ramp_service: HANGS,
    });
}

#[test]
fn gradient2_settles_near_the_knee() {
    check(Expect {
        which: Algorithm::Gradient2,
        mean: (1.0, 2.5),
        inflight: 40,
        over_limit: 15,
        drops: 0.01,
        p99: 8.0,
        ramp_service: HANGS,
    });
}

#[test]
fn windowed_gradient2_settles_near_the_knee() {
    check(Expect {
        which: Algorithm::Windowed,
        mean: (1.2, 2.5),
        inflight: 25,
        over_limit: 3,
        drops: 0.0,
        p99: 4.0,
        ramp_service: HANGS,
    });
}

#[test]
fn envoy_gradient_settles_near_the_knee() {
    check(Expect {
        which: Algorithm::Envoy,
        mean: (1.0, 2.0),
        inflight: 40,
        over_limit: 15,
        // With its timers firing at their deadlines (issue 24), the ramp saw 2 of
        // 5,006 requests dropped at the client's timeout (none before, when the
        // minRTT windows opened late).
        drops: 0.001,
        p99: 7.0,
        ramp_service: HANGS,
    });
}

/// The contrast: without a limit, the ramp past capacity fills the service to M and
/// most requests past it wait for the client's timeout.
#[test]
fn without_a_limit_p99_reaches_the_timeout() {
    let report = ramp(None, HANGS);
    assert_eq!(report.p99, Duration::from_millis(250), "{report}");
    assert!(report.inflight_max > 10 * SERVICE.max_inflight, "{report}");
    let rejecting = ramp(None, SERVICE);
    assert!(
        rejecting.p99 >= SERVICE.latency_at(SERVICE.max_inflight),
        "{rejecting}"
    );
}

/// The simulation is reproducible: the same seed gives the same run, to the
/// nanosecond; another seed gives another.
#[test]
fn the_same_seed_gives_the_same_run() {
    let run = |seed| {
        let clock = ManualClock::new();
        let limiter = limiter(
            algorithm(Algorithm::Vegas, &clock),
            WhenLimited::FailFast,
            &clock,
        );
        let run = Run {
            length: Duration::from_millis(500),
            load: Load::Constant(SERVICE.capacity()),
            warm_up: Duration::ZERO,
            tick: Duration::from_millis(10),
            seed,
        };
        simulate(SERVICE, run, Some(limiter)).to_string()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

/// The partitioned limiter on the same service, Windowed(Gradient2) as its
/// algorithm, offered twice the capacity: 15% from `live` (a share of 0.5), 85%
/// from `batch` (0.3); the rest of the limit is a common burst pool.
fn partitioned(mode: PartitionMode, seed: u64) -> Report {
    let clock = ManualClock::new();
    let limiter = PartitionedLimiter::builder(algorithm(Algorithm::Windowed, &clock))
        .partition("live", 0.5)
        .partition("batch", 0.3)
        .mode(mode)
        .clock(clock.clone())
        .build()
        .unwrap();
    let run = Run {
        length: Duration::from_secs(5),
        load: Load::Constant(2.0 * SERVICE.capacity()),
        warm_up: Duration::from_secs(2),
        tick: Duration::from_millis(10),
        seed,
    };
    let report = simulate_partitioned(SERVICE, run, limiter, &[("live", 0.15), ("batch", 0.85)]);
    println!("partitioned {mode:?} seed {seed}: {report}");
    for p in &report.partitions {
        println!(
            "  {}: offered {}, admitted {}, refused {} ({:.1}%)",
            p.name,
            p.offered,
            p.admitted,
            p.rejected,
            100.0 * p.rejected_share()
        );
    }
    report
}

/// Batch's surge is refused while live keeps most of its requests, the limit still
/// settles near the knee, and p99 holds. Measured with seeds 1 to 3: the limit
/// 17..21 (mean 18.6 to 19.5), live refused 6.2 to 7.1%, batch 73.5 to 75.8%, p99
/// 31 to 33 ms, never more in flight than the limit in strict mode; Netflix's mode
/// refused live 14.5 to 18.4% and went past the limit by 4 to 6.
#[test]
fn partitioned_limiter_keeps_the_live_share_under_a_batch_surge() {
    let knee = SERVICE.knee as f64;
    let p99 = SERVICE.latency_at(SERVICE.knee).mul_f64(4.0);
    for seed in [1, 2] {
        let report = partitioned(PartitionMode::Strict, seed);
        let mean = report.limit_mean / knee;
        assert!(
            (1.2..=2.5).contains(&mean),
            "mean limit {mean:.2} N: {report}"
        );
        let (live, batch) = (&report.partitions[0], &report.partitions[1]);
        assert!(live.rejected_share() < 0.15, "live: {live:?}");
        assert!(batch.rejected_share() > 0.6, "batch: {batch:?}");
        // Strict: past the limit only while a lowered limit drains (as the plain
        // limiter's margin for this algorithm).
        assert!(report.over_limit_max <= 3, "{report}");
        assert!(report.inflight_max <= 25, "{report}");
        assert_eq!(report.dropped, 0, "{report}");
        assert!(report.p99 <= p99, "{report}");
    }
    // Netflix's mode: a partition under its share is admitted past the global
    // limit, by at most the partitions' own limits (⌈21 × 0.5⌉ + ⌈21 × 0.3⌉ at the
    // highest limit seen); live still fares far better than batch.
    let report = partitioned(PartitionMode::NetflixCompatible, 1);
    let (live, batch) = (&report.partitions[0], &report.partitions[1]);
    assert!(live.rejected_share() < 0.3, "live: {live:?}");
    assert!(batch.rejected_share() > 0.6, "batch: {batch:?}");
    let shares = (report.limit_max as f64 * 0.5).ceil() + (report.limit_max as f64 * 0.3).ceil();
    assert!(report.over_limit_max as f64 <= shares, "{report}");
    assert!(report.inflight_max <= SERVICE.max_inflight, "{report}");
    assert!(report.p99 <= p99, "{report}");
}
