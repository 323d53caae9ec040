//! Timing calls split across threads that start together: shared by the criterion
//! harness (`harness.rs`) and the paired runs (`paired.rs`).

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// Runs calls `0..iters` of `op(thread, index)`, a contiguous share on each of
/// `threads` threads (so keyed benchmarks see distinct keys per thread), and returns
/// the time from the first thread's start to the last one's end. Thread start-up is
/// not counted: the threads wait at a barrier and time themselves.
pub fn split_across_threads<R>(
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
