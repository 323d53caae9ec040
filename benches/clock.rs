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

    group.finish();
}
