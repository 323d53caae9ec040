//! Helpers every topic file uses, so that peers are measured the same way.
//!
//! Each benchmark is named `<group>/<peer>/<scenario>` (for example
//! `gcra/governor/mostly_deny`): `benches/ratios.py` pairs the `tollgate` peer with
//! the others by group and scenario.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};

use crate::threads::split_across_threads;

/// A benchmark group measured in wall time.
pub type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// A group in which one iteration is one call, so reports read as time per call and
/// calls per second.
pub fn group<'a>(c: &'a mut Criterion, name: &str) -> Group<'a> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    group
}

/// Measures `op` on the current thread, one call per iteration.
///
/// `op` receives the call's index (a keyed benchmark can pick its key from it). Its
/// whole result is kept opaque, so nothing it computes is optimised away.
pub fn bench_single_thread<R>(
    group: &mut Group<'_>,
    peer: &str,
    scenario: &str,
    mut op: impl FnMut(u64) -> R,
) {
    group.bench_function(BenchmarkId::new(peer, scenario), |b| {
        let mut index = 0u64;
        // The result is kept by reference: criterion's own black_box (a volatile
        // read) loads a returned struct byte by byte, and a copy into std's black_box
        // stalls on store forwarding, costs that grow with the size of the answer
        // rather than with the work behind it.
        b.iter(|| {
            index = index.wrapping_add(1);
            let result = op(index);
            black_box(&result);
        })
    });
}

/// Measures `op` called from two threads at once, splitting the calls of each sample
/// between them; the reported time per iteration is wall time per call.
pub fn bench_two_threads<R>(
    group: &mut Group<'_>,
    peer: &str,
    scenario: &str,
    op: impl Fn(u64) -> R + Sync,
) {
    bench_threads(group, peer, scenario, 2, op);
}

/// Measures `op` called from `threads` threads at once, as [`bench_two_threads`].
pub fn bench_threads<R>(
    group: &mut Group<'_>,
    peer: &str,
    scenario: &str,
    threads: u64,
    op: impl Fn(u64) -> R + Sync,
) {
    let op = |_thread: u64, index: u64| op(index);
    group.bench_function(BenchmarkId::new(peer, scenario), |b| {
        b.iter_custom(|iters| split_across_threads(iters, threads, &op))
    });
}

/// As [`bench_two_threads`], with `op` told which thread calls it (0 or 1) besides
/// the call's index, so that each thread can work on something of its own (its own
/// partition, say).
pub fn bench_two_threads_each<R>(
    group: &mut Group<'_>,
    peer: &str,
    scenario: &str,
    op: impl Fn(u64, u64) -> R + Sync,
) {
    group.bench_function(BenchmarkId::new(peer, scenario), |b| {
        b.iter_custom(|iters| split_across_threads(iters, 2, &op))
    });
}
