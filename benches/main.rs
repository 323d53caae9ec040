//! Criterion benchmarks: tollgate next to its peers, one topic file per area.
//!
//! Run `cargo bench -p tollgate-benches --bench main -- <filter>`; `benches/README.md`
//! tells how to read the ratios.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

mod adaptive;
mod algorithms;
mod clock;
mod gcra;
mod harness;
mod keyed;
mod memory;
mod shed;
mod store;
mod threads;
mod waiting;

/// Short runs: the suite shares small machines and has about seventy benchmarks of
/// operations that take nanoseconds, so two seconds of samples each keep the whole
/// run to a few minutes with tight intervals. Command-line options
/// (`--warm-up-time`, `--measurement-time`, `--sample-size`) still override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = clock::bench, gcra::bench, algorithms::bench, keyed::bench, store::bench, waiting::bench,
        adaptive::bench, shed::bench
}
criterion_main!(benches);
