//! Wall-clock precision of waiting: 1,000 tokio tasks (multi-thread runtime, two
//! workers) each loop on `acquire(1).await` from one 1,000/s limiter, and every grant's
//! wall time is logged. Reports, for tollgate's `Limiter<Gcra>` and the leaky-bucket
//! crate, with a burst of 1,000 and of 1:
//!
//! - admitted: grants logged within the run, against `burst + rate × elapsed`, with
//!   `elapsed` from the first grant to the end;
//! - wake lateness p50/p99/max (and min, which would be negative for an early grant):
//!   how long after its slot in the ideal schedule (the burst at the first grant, then
//!   one every 1/rate) each grant that waited was seen by its task;
//! - stalls: gaps between consecutive grants longer than 1.5/rate.
//!
//! Run `cargo bench -p tollgate-benches --bench precision` (about 15 s). Options after
//! `--`: `--secs S` runs every case for S seconds; `--burst B` runs only a burst of B
//! (5 s); `--refill N` has leaky-bucket add N tokens every N ms.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tollgate::algorithm::Gcra;
use tollgate::{Limiter, Quota};

const TASKS: usize = 1_000;
const RATE: u64 = 1_000;

/// The crates measured.
#[derive(Clone, Copy)]
enum Peer {
    Tollgate,
    LeakyBucket,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Tollgate => "tollgate",
            Peer::LeakyBucket => "leaky-bucket",
        }
    }
}

/// Grant times, in nanoseconds since the limiter was built, written by many tasks
/// without a lock.
struct GrantLog {
    times: Vec<AtomicU64>,
    len: AtomicUsize,
    origin: Instant,
}

impl GrantLog {
    /// A log for up to `capacity` grants, timed from `start()`'s return.
    fn new(capacity: usize, start: impl FnOnce()) -> GrantLog {
        let times = (0..capacity).map(|_| AtomicU64::new(0)).collect();
        start();
        GrantLog {
            times,
            len: AtomicUsize::new(0),
            origin: Instant::now(),
        }
    }

    fn record(&self) {
        let at = self.origin.elapsed().as_nanos() as u64;
        let index = self.len.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = self.times.get(index) {
            slot.store(at, Ordering::Relaxed);
        }
    }

    /// The grants seen up to `end` ns, in order.
    fn sorted_until(&self, end: u64) -> Vec<u64> {
        let len = self.len.load(Ordering::Acquire).min(self.times.len());
        let mut times: Vec<u64> = self.times[..len]
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .filter(|&t| t <= end)
            .collect();
        times.sort_unstable();
        times
    }
}

struct Report {
    admitted: usize,
    expected: f64,
    /// Gaps between consecutive grants longer than 1.5/rate: stalls, in which a
    /// limiter with a burst of one loses slots.
    stalls: usize,
    /// Lateness of the grants that waited, sorted, in ns (negative: early).
    lateness: Vec<i64>,
}

impl Report {
    fn error_percent(&self) -> f64 {
        (self.admitted as f64 - self.expected) / self.expected * 100.0
    }

    fn percentile(&self, p: f64) -> f64 {
        if self.lateness.is_empty() {
            return f64::NAN;
        }
        let rank = ((self.lateness.len() - 1) as f64 * p).round() as usize;
        self.lateness[rank] as f64 / 1e6
    }
}

/// Grant `i` (0-based) is due at its slot of the ideal schedule: the first `burst` at
/// the first grant, then one every 1/rate. That is the earliest a full bucket can
/// serve them: a bucket full before its first caller arrives holds no more than
/// `burst`, so the schedule starts at the first grant, not at the limiter's creation
/// (the tasks take a while to start). Only grants past the burst waited, so only they
/// have a wake lateness.
fn report(times: &[u64], burst: u64, elapsed_ns: u64) -> Report {
    let interval = 1_000_000_000 / RATE;
    let first = times.first().copied().unwrap_or(0);
    let lateness: Vec<i64> = times
        .iter()
        .enumerate()
        .skip(burst as usize)
        .map(|(i, &t)| {
            let due = first + (i as u64 + 1 - burst) * interval;
            t as i64 - due as i64
        })
        .collect();
    let mut lateness = lateness;
    lateness.sort_unstable();
    Report {
        admitted: times.len(),
        stalls: times
            .windows(2)
            .filter(|w| w[1] - w[0] > interval * 3 / 2)
            .count(),
        expected: burst as f64 + RATE as f64 * elapsed_ns.saturating_sub(first) as f64 / 1e9,
        lateness,
    }
}

/// Runs the workload against `acquire` for `run`, from a limiter built by `build`
/// just before the clock starts.
fn run_workload<L, F, Fut>(
    build: impl FnOnce() -> L,
    acquire: F,
    burst: u64,
    run: Duration,
) -> Report
where
    L: Send + Sync + 'static,
    F: Fn(Arc<L>) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let capacity = (burst + RATE * (run.as_secs() + 2)) as usize * 2;
    runtime.block_on(async move {
        let mut limiter = None;
        // The clock starts as the limiter is built, full.
        let log = Arc::new(GrantLog::new(capacity, || {
            limiter = Some(Arc::new(build()))
        }));
        let limiter = limiter.expect("built");
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    loop {
                        acquire(Arc::clone(&limiter)).await;
                        log.record();
                    }
                })
            })
            .collect();
        let end = log.origin + run;
        tokio::time::sleep_until(end.into()).await;
        let elapsed = log.origin.elapsed();
        // Aborting drops each pending acquire: both crates give its place back.
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        let times = log.sorted_until(elapsed.as_nanos() as u64);
        report(&times, burst, elapsed.as_nanos() as u64)
    })
}

fn run_peer(peer: Peer, burst: u64, run: Duration, refill: u64) -> Report {
    match peer {
        Peer::Tollgate => run_workload(
            move || {
                Limiter::new(Gcra::new(
                    Quota::per_second(RATE)
                        .and_then(|q| q.burst(burst))
                        .expect("valid quota"),
                ))
            },
            |limiter: Arc<Limiter<Gcra>>| async move {
                limiter.acquire(1).await.expect("open limiter");
            },
            burst,
            run,
        ),
        Peer::LeakyBucket => run_workload(
            move || {
                leaky_bucket::RateLimiter::builder()
                    .max(burst.max(refill) as usize)
                    .initial(burst as usize)
                    .refill(refill as usize)
                    .interval(Duration::from_millis(refill * 1000 / RATE))
                    .build()
            },
            |limiter: Arc<leaky_bucket::RateLimiter>| async move {
                limiter.acquire(1).await;
            },
            burst,
            run,
        ),
    }
}

/// The value after `name` on the command line (cargo bench passes `--bench` too).
fn option<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1)?.parse().ok()
}

fn main() {
    let custom: Option<f64> = option("--secs");
    // leaky-bucket adds `refill` tokens every `refill` ms: 1 by default, as the
    // issue's 1 token per 1 ms; `--refill 10` gives it coarser, fewer ticks.
    let refill: u64 = option("--refill").unwrap_or(1).clamp(1, 1000);
    // The workload (burst 1,000) for 5 s; burst 1 for half that, to keep the
    // whole run near 15 s.
    let cases = match option::<u64>("--burst") {
        Some(burst) => vec![(burst.max(1), 5.0)],
        None => vec![(1_000u64, 5.0), (1, 2.5)],
    };
    println!(
        "{TASKS} tasks, 2 workers, {RATE}/s; admitted vs burst + rate × elapsed; \
         lateness of waited grants vs their slot (first grant + k/rate); \
         leaky-bucket refills {refill} every {refill} ms"
    );
    println!(
        "{:<14} {:>6} {:>6} {:>9} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "crate",
        "burst",
        "secs",
        "admitted",
        "expected",
        "error%",
        "p50 ms",
        "p99 ms",
        "max ms",
        "min ms",
        "stalls"
    );
    for (burst, secs) in cases {
        let run = Duration::from_secs_f64(custom.unwrap_or(secs));
        for peer in [Peer::Tollgate, Peer::LeakyBucket] {
            let r = run_peer(peer, burst, run, refill);
            println!(
                "{:<14} {:>6} {:>6.1} {:>9} {:>10.1} {:>+8.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
                peer.name(),
                burst,
                run.as_secs_f64(),
                r.admitted,
                r.expected,
                r.error_percent(),
                r.percentile(0.50),
                r.percentile(0.99),
                r.lateness.last().map_or(f64::NAN, |&l| l as f64 / 1e6),
                r.lateness.first().map_or(f64::NAN, |&l| l as f64 / 1e6),
                r.stalls,
            );
        }
    }
}
