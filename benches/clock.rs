//! The cost of reading time: every decision pays it once.

use std::time::Instant;

use criterion::Criterion;
use governor::clock::Clock as _;
use tollgate::time::Clock as _;

use crate::harness::{self, bench_single_thread};

pub fn bench(c: &mut Criterion) {
    let mut group = harness::group(c, "clock");

    let tollgate = tollgate::time::MonotonicClock::new();
    bench_single_thread(&mut group, "tollgate", "now", |_| tollgate.now());

    bench_single_thread(&mut group, "std", "now", |_| Instant::now());

    // governor's default: quanta's TSC clock, scaled to nanoseconds.
    let governor = governor::clock::DefaultClock::default();
    bench_single_thread(&mut group, "governor", "now", |_| governor.now());

    // Building a limiter builds its clock: 100,000 limiters should take well under
    // 50 ms. governor's default builds a quanta clock, which asks the CPU for its
    // features (CPUID) every time.
    bench_single_thread(&mut group, "tollgate", "monotonic_new", |_| {
        tollgate::time::MonotonicClock::new()
    });
    bench_single_thread(&mut group, "governor", "monotonic_new", |_| {
        governor::clock::DefaultClock::default()
    });

    group.finish();
}
