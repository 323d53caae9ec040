//! Helpers every topic file uses, so that peers are measured the same way.
//!
//! Each benchmark is named `<group>/<peer>/<scenario>` (for example
//! `gcra/governor/mostly_deny`): `benches/ratios.py` pairs the `tollgate` peer with
//! the others by group and scenario.

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};

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

/// Runs calls `0..iters` of `op(thread, index)`, a contiguous share on each of
/// `threads` threads (so keyed benchmarks see distinct keys per thread), and returns
/// the time from the first thread's start to the last one's end. Thread start-up is
/// not counted: the threads wait at a barrier and time themselves.
fn split_across_threads<R>(
    iters: u64,
    threads: u64,
    op: &(impl Fn(u64, u64) -> R + Sync),
) -> Duration {
    let barrier = Barrier::new(threads as usize);
    let share = |t: u64| (u128::from(iters) * u128::from(t) / u128::from(threads)) as u64;
    let spans: Vec<(Instant, Instant)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                let calls = share(t)..share(t + 1);
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for index in calls {
                        let result = op(t, index);
                        black_box(&result);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("benchmark thread panicked"))
            .collect()
    });
    let first_start = spans
        .iter()
        .map(|s| s.0)
        .min()
        .expect("at least one thread");
    let last_end = spans
        .iter()
        .map(|s| s.1)
        .max()
        .expect("at least one thread");
    last_end - first_start
}
