//! Criterion benchmarks: tollgate next to its peers, one topic file per area.
//!
//! Run `cargo bench --bench main -- <filter>`; `benches/README.md` tells how to read
//! the ratios.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

mod clock;
mod gcra;
mod harness;
mod waiting;

/// Short runs: the suite shares small machines, and these operations take
/// nanoseconds, so three seconds of samples already give tight intervals. Command-line
/// options (`--measurement-time`, `--sample-size`) still override these.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = clock::bench, gcra::bench, waiting::bench
}
criterion_main!(benches);
