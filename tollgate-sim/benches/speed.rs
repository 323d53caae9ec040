//! The simulator's speed: a million simulated requests, and the cost of each against
//! a plain `Limiter::try_acquire` loop in the same run.
//!
//! `cargo bench -p tollgate-sim --bench speed` (a few seconds). Each figure is the
//! best of five runs; the simulated requests are Poisson arrivals over 1,000 keys
//! (Zipf, exponent 1) decided by a rules file over a memory store at their virtual
//! times, counted per second; the loop is `Limiter::try_acquire(1)` on one GCRA
//! limiter, on a manual clock. The same arrivals are also sent through Gradient2 (fail
//! fast) to the service model, event by event, with every column of the series.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tollgate::adaptive::WhenLimited;
use tollgate::algorithm::Gcra;
use tollgate::time::ManualClock;
use tollgate::{Limiter, Quota};
use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
use tollgate_sim::replay::{RulesLimiter, replay};
use tollgate_sim::service::{self, Gate, KNEE_SERVICE, Setup, adaptive_algorithm};

const REQUESTS: usize = 1_000_000;

const RULES: &str = "\
domain: sim
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 50 }
";

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let out = f();
        best = best.min(started.elapsed());
        last = Some(out);
    }
    (best, last.expect("at least one run"))
}

fn main() {
    let traffic = Traffic {
        pattern: Pattern::Poisson { rate: 100_000.0 },
        keys: Keys::Zipf {
            n: 1_000,
            exponent: 1.0,
        },
        cost: 1,
        duration: Duration::from_secs(10),
    };
    let (generate, arrivals) = best_of(5, || traffic.arrivals(1).expect("traffic"));
    let n = arrivals.len();
    let (simulate, admitted) = best_of(5, || {
        let mut limiter = RulesLimiter::new(RULES, "user").expect("rules");
        let series = replay(
            "speed",
            &arrivals,
            &|k| traffic.key_name(k),
            &mut limiter,
            Duration::from_secs(1),
        )
        .expect("replay");
        series.admitted()
    });
    let (served, served_admitted) = best_of(5, || {
        let clock = ManualClock::new();
        let algorithm =
            adaptive_algorithm("gradient2", &KNEE_SERVICE, &clock, 1).expect("algorithm");
        let gate = Gate::adaptive(algorithm, WhenLimited::FailFast, &clock).expect("gate");
        let setup = Setup {
            service: KNEE_SERVICE,
            step: Duration::from_secs(1),
            tick: Duration::from_millis(10),
            seed: 1,
        };
        service::simulate("speed", &setup, &arrivals, &[], &gate, &clock)
            .expect("simulate")
            .total
            .admitted()
    });
    let quota = Quota::per_second(50).expect("quota");
    let (plain, plain_admitted) = best_of(5, || {
        let clock = ManualClock::new();
        let limiter = Limiter::with_clock(Gcra::new(quota), clock.clone());
        let mut admitted = 0u64;
        for i in 0..REQUESTS {
            if i % 10 == 0 {
                clock.advance(Duration::from_micros(100));
            }
            admitted += u64::from(black_box(limiter.try_acquire(1)).is_ok());
        }
        admitted
    });
    let per = |d: Duration, n: usize| d.as_nanos() as f64 / n as f64;
    println!("tollgate-sim speed (best of 5; load average {})", load());
    println!(
        "  traffic: {n} Poisson arrivals over 1,000 Zipf keys generated in {:.3} s ({:.0} ns each)",
        generate.as_secs_f64(),
        per(generate, n)
    );
    println!(
        "  simulation: {n} requests replayed through a rules file in {:.3} s ({:.0} ns each, {admitted} admitted)",
        simulate.as_secs_f64(),
        per(simulate, n)
    );
    println!(
        "  service model: {n} requests through Gradient2 to the service in {:.3} s ({:.0} ns each, {served_admitted} admitted)",
        served.as_secs_f64(),
        per(served, n)
    );
    println!(
        "  plain Limiter::try_acquire loop: {REQUESTS} calls in {:.3} s ({:.1} ns each, {plain_admitted} admitted)",
        plain.as_secs_f64(),
        per(plain, REQUESTS)
    );
    println!(
        "  a simulated request costs {:.1}x a plain try_acquire; 1M simulated requests (with their traffic) take {:.3} s",
        per(simulate, n) / per(plain, REQUESTS),
        (generate + simulate).as_secs_f64() * 1e6 / n as f64,
    );
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}
