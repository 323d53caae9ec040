//! GCRA token bucket on the real clock: tollgate's `Limiter<Gcra>` against governor's
//! direct `RateLimiter`, with the same quota on both.

use std::num::NonZeroU32;

use criterion::Criterion;
use governor::DefaultDirectRateLimiter;
use tollgate::algorithm::Gcra;
use tollgate::{Limiter, Quota};

use crate::harness::{self, bench_single_thread, bench_two_threads};

/// Which way most calls go, and the quota that makes them go that way.
#[derive(Clone, Copy)]
enum Scenario {
    /// One permit per nanosecond with a burst of a second: a call costs more than a
    /// nanosecond, so the bucket never empties.
    MostlyAllow,
    /// One permit per hour: the first call is admitted, the rest denied.
    MostlyDeny,
}

impl Scenario {
    const ALL: [Scenario; 2] = [Scenario::MostlyAllow, Scenario::MostlyDeny];

    fn name(self) -> &'static str {
        match self {
            Scenario::MostlyAllow => "mostly_allow",
            Scenario::MostlyDeny => "mostly_deny",
        }
    }

    fn tollgate(self) -> Limiter<Gcra> {
        let quota = match self {
            Scenario::MostlyAllow => Quota::per_second(1_000_000_000),
            Scenario::MostlyDeny => Quota::per_hour(1),
        };
        let limiter = Limiter::new(Gcra::new(quota.expect("valid quota")));
        self.check(|| limiter.try_acquire(1).is_ok());
        limiter
    }

    fn governor(self) -> DefaultDirectRateLimiter {
        let quota = match self {
            Scenario::MostlyAllow => governor::Quota::per_second(nonzero(1_000_000_000)),
            Scenario::MostlyDeny => governor::Quota::per_hour(nonzero(1)),
        };
        let limiter = governor::RateLimiter::direct(quota);
        self.check(|| limiter.check().is_ok());
        limiter
    }

    /// Makes sure the quota does what the scenario's name says, so a change in either
    /// crate cannot silently turn an "allow" benchmark into a "deny" one.
    fn check(self, mut admitted: impl FnMut() -> bool) {
        let calls = 10_000;
        let allowed = (0..calls).filter(|_| admitted()).count();
        let expected = match self {
            Scenario::MostlyAllow => calls,
            Scenario::MostlyDeny => 1,
        };
        assert_eq!(allowed, expected, "scenario {}", self.name());
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

pub fn bench(c: &mut Criterion) {
    let mut group = harness::group(c, "gcra");
    for scenario in Scenario::ALL {
        let limiter = scenario.tollgate();
        bench_single_thread(&mut group, "tollgate", scenario.name(), |_| {
            limiter.try_acquire(1)
        });
        let limiter = scenario.governor();
        bench_single_thread(&mut group, "governor", scenario.name(), |_| limiter.check());
    }
    group.finish();

    let mut group = harness::group(c, "gcra_two_threads");
    for scenario in Scenario::ALL {
        let limiter = scenario.tollgate();
        bench_two_threads(&mut group, "tollgate", scenario.name(), |_| {
            limiter.try_acquire(1)
        });
        let limiter = scenario.governor();
        bench_two_threads(&mut group, "governor", scenario.name(), |_| limiter.check());
    }
    group.finish();
}
