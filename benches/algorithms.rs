//! Every algorithm in `tollgate::algorithm` on the real clock, one `try_acquire(1)`
//! per call, next to governor's direct `RateLimiter::check()` as the common baseline
//! (and async-lock's semaphore next to tollgate's).
//!
//! All run in one group per thread count (`algorithms`, `algorithms_two_threads`),
//! named `<group>/tollgate.<algorithm>/<scenario>`, so governor is measured once per
//! scenario rather than once per algorithm; `ratios.py` divides every `tollgate.*`
//! peer by governor's figure for the same scenario, and by a peer named after the
//! same topic (`async_lock.semaphore` for `tollgate.semaphore`).
//!
//! GCRA itself is in `gcra.rs`.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use governor::DefaultDirectRateLimiter;
use tollgate::algorithm::{
    Algorithm, AllOf, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::{Clock, MonotonicClock, Nanos};
use tollgate::{Limiter, Quota, Semaphore};

use crate::harness::{self, Group, bench_single_thread, bench_two_threads};

const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);

/// Which way most calls go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// A limit no caller can reach (about one permit per nanosecond): every call is
    /// admitted.
    MostlyAllow,
    /// One permit per hour: the first call is admitted, the rest denied.
    MostlyDeny,
    /// Guava's fastest rate, one permit per microsecond: about one call in thirty is
    /// admitted, the rest denied. Only for the smooth limiters, which cannot go
    /// faster, and governor at the same rate.
    MaxRate,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::MostlyAllow => "mostly_allow",
            Scenario::MostlyDeny => "mostly_deny",
            Scenario::MaxRate => "max_rate",
        }
    }

    /// Makes sure a limiter does what the scenario's name says, so a change in any
    /// crate cannot silently turn an "allow" benchmark into a "deny" one.
    fn check(self, peer: &str, mut admitted: impl FnMut() -> bool) {
        let calls = 10_000;
        if self == Scenario::MaxRate {
            // Spend any burst first: from then on about one call per microsecond wins.
            let drained = (0..100_000_000).any(|_| !admitted());
            assert!(drained, "{peer}/max_rate never denied");
        }
        let allowed = (0..calls).filter(|_| admitted()).count();
        let expected = match self {
            Scenario::MostlyAllow => allowed == calls,
            Scenario::MostlyDeny => allowed == 1,
            // Ten thousand calls take well over a microsecond, and each well under.
            Scenario::MaxRate => 0 < allowed && allowed < calls / 2,
        };
        assert!(
            expected,
            "{peer}/{}: {allowed} of {calls} admitted",
            self.name()
        );
    }
}

/// One thread, or two sharing each limiter.
#[derive(Clone, Copy)]
enum Threads {
    One,
    Two,
}

fn run<R>(
    group: &mut Group<'_>,
    threads: Threads,
    peer: &str,
    scenario: Scenario,
    op: impl Fn(u64) -> R + Sync,
) {
    match threads {
        Threads::One => bench_single_thread(group, peer, scenario.name(), op),
        Threads::Two => bench_two_threads(group, peer, scenario.name(), op),
    }
}

fn quota(count: u64, period: Duration) -> Quota {
    Quota::new(count, period).expect("valid quota")
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

fn governor(scenario: Scenario) -> DefaultDirectRateLimiter {
    let quota = match scenario {
        Scenario::MostlyAllow => governor::Quota::per_second(nonzero(1_000_000_000)),
        Scenario::MostlyDeny => governor::Quota::per_hour(nonzero(1)),
        // A second of burst, as Guava's bursty limiter stores at most.
        Scenario::MaxRate => governor::Quota::per_second(nonzero(1_000_000)),
    };
    let limiter = governor::RateLimiter::direct(quota);
    scenario.check("governor", || limiter.check().is_ok());
    limiter
}

/// A checked limiter on the default clock.
fn tollgate<A: Algorithm>(peer: &str, scenario: Scenario, algorithm: A) -> Limiter<A> {
    let limiter = Limiter::new(algorithm);
    scenario.check(peer, || limiter.try_acquire(1).is_ok());
    limiter
}

fn leaky_bucket(scenario: Scenario) -> LeakyBucket {
    match scenario {
        // Drains a unit per nanosecond and holds a second of them.
        Scenario::MostlyAllow => LeakyBucket::new(1_000_000_000, quota(1_000_000_000, SECOND)),
        _ => LeakyBucket::new(1, quota(1, HOUR)),
    }
    .expect("valid leaky bucket")
}

fn fixed_window(scenario: Scenario) -> FixedWindow {
    match scenario {
        // The most a one-second aligned window takes: about 5 × 10⁸.
        Scenario::MostlyAllow => FixedWindow::new(FixedWindow::max_limit(SECOND), SECOND),
        _ => FixedWindow::new(1, HOUR),
    }
    .expect("valid fixed window")
}

fn fixed_window_first_hit(scenario: Scenario) -> FixedWindow<tollgate::algorithm::FirstHit> {
    match scenario {
        Scenario::MostlyAllow => FixedWindow::from_first_hit(1_000_000_000, SECOND),
        _ => FixedWindow::from_first_hit(1, HOUR),
    }
    .expect("valid fixed window")
}

fn sliding_log(scenario: Scenario) -> SlidingLog {
    match scenario {
        // A thousand per microsecond: the same rate as the others, and a log of a
        // thousand entries (the log always keeps `limit` of them).
        Scenario::MostlyAllow => SlidingLog::new(1_000, Duration::from_micros(1)),
        _ => SlidingLog::new(1, HOUR),
    }
    .expect("valid sliding log")
}

fn sliding_counter(scenario: Scenario) -> SlidingCounter {
    match scenario {
        Scenario::MostlyAllow => SlidingCounter::new(1_000_000_000, SECOND),
        _ => SlidingCounter::new(1, HOUR),
    }
    .expect("valid sliding counter")
}

fn refresh_period(scenario: Scenario) -> RefreshPeriod {
    match scenario {
        Scenario::MostlyAllow => RefreshPeriod::new(1_000_000_000, SECOND, Duration::ZERO),
        _ => RefreshPeriod::new(1, HOUR, Duration::ZERO),
    }
    .expect("valid refresh period")
}

fn all_of_two_gcra(scenario: Scenario) -> AllOf<Gcra> {
    let second_rule = match scenario {
        Scenario::MostlyAllow => quota(60_000_000_000, Duration::from_secs(60)),
        _ => quota(1, HOUR),
    };
    AllOf::new(vec![
        Gcra::new(quota(1_000_000_000, SECOND)),
        Gcra::new(second_rule),
    ])
    .expect("valid rules")
}

fn smooth_bursty(scenario: Scenario) -> SmoothBursty {
    match scenario {
        Scenario::MostlyDeny => SmoothBursty::new(1.0 / 3600.0),
        _ => SmoothBursty::new(1_000_000.0),
    }
    .expect("valid bursty limiter")
}

fn smooth_warming_up(scenario: Scenario) -> SmoothWarmingUp {
    match scenario {
        Scenario::MostlyDeny => SmoothWarmingUp::new(1.0 / 3600.0, SECOND),
        _ => SmoothWarmingUp::new(1_000_000.0, Duration::from_millis(1)),
    }
    .expect("valid warming-up limiter")
}

/// The default clock, moved forward by hand: lets a bursty limiter store what a
/// long idle time would have given it, without the wait.
#[derive(Clone, Debug)]
struct JumpingClock {
    inner: MonotonicClock,
    jumped: Arc<AtomicU64>,
}

impl Clock for JumpingClock {
    fn now(&self) -> Nanos {
        Nanos::new(self.inner.now().as_u64() + self.jumped.load(Ordering::Relaxed))
    }

    fn unix_origin(&self) -> Duration {
        self.inner.unix_origin()
    }
}

/// Guava's bursty limiter can only admit most calls from stored permits (its rate
/// stops at 10⁶ per second, a permit per microsecond): this one is built at its
/// fastest rate with room for 10¹² permits, then its clock jumps 10⁶ seconds ahead so
/// they are all stored. Each call then takes a stored permit at no cost. The clock
/// costs a relaxed load and an add more than the default one.
fn smooth_bursty_stocked() -> Limiter<SmoothBursty, JumpingClock> {
    let clock = JumpingClock {
        inner: MonotonicClock::new(),
        jumped: Arc::new(AtomicU64::new(0)),
    };
    let bursty = SmoothBursty::with_max_burst_seconds(1_000_000.0, 1_000_000.0)
        .expect("valid bursty limiter");
    let limiter = Limiter::with_clock(bursty, clock.clone());
    clock
        .jumped
        .store(1_000_000 * 1_000_000_000, Ordering::Relaxed);
    Scenario::MostlyAllow.check("tollgate.smooth_bursty", || limiter.try_acquire(1).is_ok());
    limiter
}

/// tollgate's semaphore (the `Concurrency` algorithm): every permit is given back at
/// once, or the only permit is held for good.
fn semaphore(scenario: Scenario) -> Semaphore {
    match scenario {
        Scenario::MostlyAllow => {
            let semaphore = Semaphore::new(1_000).expect("valid semaphore");
            scenario.check("tollgate.semaphore", || semaphore.try_acquire(1).is_ok());
            semaphore
        }
        _ => {
            let semaphore = Semaphore::new(1).expect("valid semaphore");
            scenario.check("tollgate.semaphore", || {
                semaphore
                    .try_acquire(1)
                    .map(|permit| permit.forget())
                    .is_ok()
            });
            semaphore
        }
    }
}

fn async_lock_semaphore(scenario: Scenario) -> async_lock::Semaphore {
    match scenario {
        Scenario::MostlyAllow => {
            let semaphore = async_lock::Semaphore::new(1_000);
            scenario.check("async_lock.semaphore", || semaphore.try_acquire().is_some());
            semaphore
        }
        _ => {
            let semaphore = async_lock::Semaphore::new(1);
            scenario.check("async_lock.semaphore", || {
                semaphore.try_acquire().map(std::mem::forget).is_some()
            });
            semaphore
        }
    }
}

/// Benchmarks every algorithm once per scenario; each limiter is built for its one
/// benchmark.
fn bench_all(group: &mut Group<'_>, threads: Threads) {
    use Scenario::{MaxRate, MostlyAllow, MostlyDeny};

    // A macro rather than a function: each algorithm is a different type.
    macro_rules! limiter {
        ($peer:literal, $scenario:expr_2021, $make:ident) => {{
            let scenario = $scenario;
            let limiter = tollgate($peer, scenario, $make(scenario));
            run(group, threads, $peer, scenario, |_| limiter.try_acquire(1));
        }};
    }

    for scenario in [MostlyAllow, MostlyDeny, MaxRate] {
        let limiter = governor(scenario);
        run(group, threads, "governor", scenario, |_| limiter.check());
    }
    for scenario in [MostlyAllow, MostlyDeny] {
        limiter!("tollgate.leaky_bucket", scenario, leaky_bucket);
        limiter!("tollgate.fixed_window", scenario, fixed_window);
        limiter!(
            "tollgate.fixed_window_first_hit",
            scenario,
            fixed_window_first_hit
        );
        limiter!("tollgate.sliding_log", scenario, sliding_log);
        limiter!("tollgate.sliding_counter", scenario, sliding_counter);
        limiter!("tollgate.refresh_period", scenario, refresh_period);
        limiter!("tollgate.all_of_two_gcra", scenario, all_of_two_gcra);

        let semaphore = semaphore(scenario);
        run(group, threads, "tollgate.semaphore", scenario, |_| {
            // The permit, if any, is dropped here: given back at once.
            semaphore.try_acquire(1).is_ok()
        });
        let semaphore = async_lock_semaphore(scenario);
        run(group, threads, "async_lock.semaphore", scenario, |_| {
            semaphore.try_acquire().is_some()
        });
    }

    let limiter = smooth_bursty_stocked();
    run(
        group,
        threads,
        "tollgate.smooth_bursty",
        MostlyAllow,
        |_| limiter.try_acquire(1),
    );
    for scenario in [MostlyDeny, MaxRate] {
        limiter!("tollgate.smooth_bursty", scenario, smooth_bursty);
        limiter!("tollgate.smooth_warming_up", scenario, smooth_warming_up);
    }
}

pub fn bench(c: &mut Criterion) {
    let mut group = harness::group(c, "algorithms");
    bench_all(&mut group, Threads::One);
    group.finish();

    let mut group = harness::group(c, "algorithms_two_threads");
    bench_all(&mut group, Threads::Two);
    group.finish();
}
