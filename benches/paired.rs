//! Paired runs of the lock-free algorithms against governor: the two peers take turns
//! in short rounds on the same scenario, and each round gives one ratio.
//!
//! Criterion measures one benchmark after another, a few seconds each. On a shared
//! virtual machine the cost of reading the time-stamp counter, most of a denial's
//! cost, drifts by a third between such windows, so two figures taken seconds apart
//! can differ by more than the two crates do. Here each round runs both peers within
//! a few tens of milliseconds, alternating which goes first, and the report is the
//! median of the per-round ratios with its quartiles.
//!
//! The scenarios are `algorithms.rs`'s and `gcra.rs`'s: the same quotas, checked the
//! same way. The locked algorithms' admissions (`locked_admitting`) are
//! `algorithms.rs`'s `mostly_allow`: a sliding log of 1,000 per µs, whose log holds
//! 1,000 entries, and a refresh period of 10^9 per second. Then the permits against
//! tokio's `Semaphore`: a semaphore's `acquire(1).await` and a `Limiter`'s, granted
//! at once (polled once, as an executor would), against tokio's `acquire().await`,
//! each permit dropped at once; and an `AdaptiveLimiter` built as a user first would
//! (`AimdLimit::new()`, fail fast, `new`) taking a permit and ending it as a success,
//! against tokio's `try_acquire`. Run `cargo bench -p tollgate-benches --bench paired`,
//! or `cargo bench -p tollgate-benches --bench paired -- gcra` for the scenarios whose
//! name contains `gcra`.

use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use governor::DefaultDirectRateLimiter;
use tollgate::adaptive::limit::AimdLimit;
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::algorithm::{Algorithm, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingLog};
use tollgate::{Limiter, Quota, Semaphore};

mod threads;

use threads::split_across_threads;

/// Rounds per scenario; odd, so the median is one round's ratio.
const ROUNDS: usize = 41;
/// Wall time of one peer's share of a round.
const ROUND: Duration = Duration::from_millis(15);
const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// About one permit per nanosecond: every call is admitted.
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

    /// Fails the run if a limiter does not do what the scenario says.
    fn check(self, peer: &str, mut admitted: impl FnMut() -> bool) {
        let calls = 10_000;
        let allowed = (0..calls).filter(|_| admitted()).count();
        let expected = match self {
            Scenario::MostlyAllow => calls,
            Scenario::MostlyDeny => 1,
        };
        assert_eq!(allowed, expected, "{peer}/{}", self.name());
    }

    fn governor(self) -> DefaultDirectRateLimiter {
        let per_second = NonZeroU32::new(1_000_000_000).expect("non-zero");
        let quota = match self {
            Scenario::MostlyAllow => governor::Quota::per_second(per_second),
            Scenario::MostlyDeny => governor::Quota::per_hour(NonZeroU32::MIN),
        };
        let limiter = governor::RateLimiter::direct(quota);
        self.check("governor", || limiter.check().is_ok());
        limiter
    }

    fn tollgate<A: Algorithm>(self, peer: &str, algorithm: A) -> Limiter<A> {
        let limiter = Limiter::new(algorithm);
        self.check(peer, || limiter.try_acquire(1).is_ok());
        limiter
    }

    fn gcra(self) -> Gcra {
        Gcra::new(match self {
            Scenario::MostlyAllow => quota(1_000_000_000, SECOND),
            Scenario::MostlyDeny => quota(1, HOUR),
        })
    }

    fn fixed_window(self) -> FixedWindow {
        match self {
            Scenario::MostlyAllow => FixedWindow::new(FixedWindow::max_limit(SECOND), SECOND),
            Scenario::MostlyDeny => FixedWindow::new(1, HOUR),
        }
        .expect("valid fixed window")
    }

    fn leaky_bucket(self) -> LeakyBucket {
        match self {
            Scenario::MostlyAllow => LeakyBucket::new(1_000_000_000, quota(1_000_000_000, SECOND)),
            Scenario::MostlyDeny => LeakyBucket::new(1, quota(1, HOUR)),
        }
        .expect("valid leaky bucket")
    }
}

fn quota(count: u64, period: Duration) -> Quota {
    Quota::new(count, period).expect("valid quota")
}

/// Wall time of `calls` calls of `op`, split between `threads` threads that start
/// together.
fn timed<R>(calls: u64, threads: u64, op: &(impl Fn() -> R + Sync)) -> Duration {
    if threads == 1 {
        let start = Instant::now();
        for _ in 0..calls {
            let result = op();
            black_box(&result);
        }
        return start.elapsed();
    }
    split_across_threads(calls, threads, &|_, _| op())
}

/// The value at fraction `q` of the sorted `values`.
fn quantile(values: &[f64], q: f64) -> f64 {
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// Polls `future` once, as an executor would a future that is ready at once.
fn poll_once<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the scenario's permit is always available"),
    }
}

/// The permit scenarios against tokio's `Semaphore`.
fn permits(filter: Option<&str>) {
    println!();
    println!(
        "| scenario | threads | tollgate ns/call | tokio ns/call | ratio (median) | quartiles |"
    );
    println!("|---|---|---|---|---|---|");
    let tokio = tokio::sync::Semaphore::new(10);
    let tokio_acquire = || drop(poll_once(tokio.acquire()).expect("open"));
    let semaphore = Semaphore::new(10).expect("valid semaphore");
    pair(
        filter,
        "semaphore/acquire_ready",
        1,
        || drop(poll_once(semaphore.acquire(1)).expect("open")),
        tokio_acquire,
    );
    let limiter = Limiter::new(Scenario::MostlyAllow.gcra());
    pair(
        filter,
        "limiter/acquire_ready",
        1,
        || poll_once(limiter.acquire(1)).expect("admitted"),
        tokio_acquire,
    );
    let adaptive =
        AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast).expect("valid limiter");
    pair(
        filter,
        "adaptive/aimd_success",
        1,
        || adaptive.try_acquire().expect("below the limit").success(),
        || drop(tokio.try_acquire().expect("available")),
    );
}

/// Runs one scenario's rounds, tollgate against `peer` (governor, or tokio for the
/// permits), and prints its row, if `filter` lets it through.
fn pair<T, G>(
    filter: Option<&str>,
    name: &str,
    threads: u64,
    tollgate: impl Fn() -> T + Sync,
    peer: impl Fn() -> G + Sync,
) {
    if filter.is_some_and(|f| !name.contains(f)) {
        return;
    }
    // Calls per round, from a trial of the slower-looking peer.
    let trial = 100_000;
    let per_call = timed(trial, threads, &tollgate).max(timed(trial, threads, &peer));
    let calls = (ROUND.as_secs_f64() / per_call.as_secs_f64() * trial as f64).max(1_000.0) as u64;
    let calls = calls / threads * threads;
    let ns = |d: Duration| d.as_nanos() as f64 / calls as f64;
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (t, g) = if round % 2 == 0 {
            let t = timed(calls, threads, &tollgate);
            (t, timed(calls, threads, &peer))
        } else {
            let g = timed(calls, threads, &peer);
            (timed(calls, threads, &tollgate), g)
        };
        ours.push(ns(t));
        theirs.push(ns(g));
        ratios.push(ns(t) / ns(g));
    }
    for values in [&mut ours, &mut theirs, &mut ratios] {
        values.sort_by(f64::total_cmp);
    }
    println!(
        "| {name} | {threads} | {:.2} | {:.2} | **{:.3}** | {:.3}–{:.3} |",
        quantile(&ours, 0.5),
        quantile(&theirs, 0.5),
        quantile(&ratios, 0.5),
        quantile(&ratios, 0.25),
        quantile(&ratios, 0.75),
    );
}

/// The sliding log and the refresh period admitting, against governor admitting.
fn locked_admitting(filter: Option<&str>) {
    let scenario = Scenario::MostlyAllow;
    let governor = scenario.governor();
    let log = SlidingLog::new(1_000, Duration::from_micros(1)).expect("valid sliding log");
    let log = scenario.tollgate("sliding_log", log);
    // Fill the log to its 1,000 entries, as a long run keeps it.
    for _ in 0..2_000 {
        black_box(log.try_acquire(1).is_ok());
    }
    pair(
        filter,
        "sliding_log/mostly_allow",
        1,
        || log.try_acquire(1),
        || governor.check(),
    );
    let refresh =
        RefreshPeriod::new(1_000_000_000, SECOND, Duration::ZERO).expect("valid refresh period");
    let refresh = scenario.tollgate("refresh_period", refresh);
    pair(
        filter,
        "refresh_period/mostly_allow",
        1,
        || refresh.try_acquire(1),
        || governor.check(),
    );
}

fn main() {
    // Cargo passes `--bench`; anything else not starting with `--` filters by name.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
    let filter = filter.as_deref();
    println!(
        "{ROUNDS} rounds a scenario, {} ms a peer a round.",
        ROUND.as_millis()
    );
    println!();
    println!(
        "| scenario | threads | tollgate ns/call | governor ns/call | ratio (median) | quartiles |"
    );
    println!("|---|---|---|---|---|---|");
    for scenario in Scenario::ALL {
        let governor = scenario.governor();
        let gcra = scenario.tollgate("gcra", scenario.gcra());
        for threads in [1, 2] {
            pair(
                filter,
                &format!("gcra/{}", scenario.name()),
                threads,
                || gcra.try_acquire(1),
                || governor.check(),
            );
        }
        let window = scenario.tollgate("fixed_window", scenario.fixed_window());
        pair(
            filter,
            &format!("fixed_window/{}", scenario.name()),
            1,
            || window.try_acquire(1),
            || governor.check(),
        );
        let bucket = scenario.tollgate("leaky_bucket", scenario.leaky_bucket());
        pair(
            filter,
            &format!("leaky_bucket/{}", scenario.name()),
            1,
            || bucket.try_acquire(1),
            || governor.check(),
        );
    }
    locked_admitting(filter);
    permits(filter);
}
