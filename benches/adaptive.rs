//! Adaptive concurrency limits (issue 12): one acquire and one release per call,
//! against tokio's `Semaphore` (the plain permit underneath most of the peers),
//! congestion-limiter's `DefaultLimiter` and tower-acc's `ConcurrencyLimit`.
//!
//! Every limiter starts at a limit of 20 with one request in flight at a time, so
//! every acquire is admitted and AIMD never moves its limit (it grows only when at
//! least half the limit is in flight): what is measured is the bookkeeping around a
//! permit, not the algorithm's arithmetic.
//!
//! Like for like: tollgate's borrowed permit (`try_acquire`) against tokio's
//! `try_acquire`, its owned one (`try_acquire_owned`, `tollgate.owned`) against
//! tokio's `try_acquire_owned` (`tokio.owned`).

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use congestion_limiter::limiter::{DefaultLimiter, Limiter as _, Outcome};
use criterion::Criterion;
use futures::task::noop_waker_ref;
use tollgate::adaptive::limit::{AimdLimit, Gradient2Limit, WindowedLimit};
use tollgate::adaptive::partition::Partitions;
use tollgate::adaptive::{
    AdaptiveLimiter, AdaptivePermit, AdaptivePermitRef, LimitAlgorithm, WhenLimited,
};
use tollgate::time::{Clock, CoarseClock, MonotonicClock};
use tower::{Service, ServiceExt as _};

use crate::harness::{self, bench_single_thread, bench_two_threads, bench_two_threads_each};

/// The limit every limiter starts at (Netflix's and tower-acc's default for AIMD).
const LIMIT: u64 = 20;

/// Polls `future` once, as an executor would on its first poll; it must be ready.
#[inline]
fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(noop_waker_ref());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an uncontended call waited"),
    }
}

/// Upstream's AIMD: a timeout of 5 s, so every request is timed (two clock reads).
fn aimd() -> AimdLimit {
    AimdLimit::builder()
        .initial_limit(LIMIT)
        .build()
        .expect("valid AIMD")
}

/// AIMD without a timeout: only drops lower the limit, and no request is timed.
fn aimd_untimed() -> AimdLimit {
    AimdLimit::builder()
        .initial_limit(LIMIT)
        .timeout(Duration::MAX)
        .build()
        .expect("valid AIMD")
}

fn tollgate<L: LimitAlgorithm>(algorithm: L) -> Arc<AdaptiveLimiter<L>> {
    tollgate_on(algorithm, MonotonicClock::new())
}

/// Upstream's AIMD timed on a coarse clock of 1 ms: its two clock reads are two
/// loads.
fn tollgate_coarse() -> Arc<AdaptiveLimiter<AimdLimit, CoarseClock>> {
    let clock = CoarseClock::new(Duration::from_millis(1)).expect("valid resolution");
    tollgate_on(aimd(), clock)
}

fn tollgate_on<L: LimitAlgorithm, C: Clock>(algorithm: L, clock: C) -> Arc<AdaptiveLimiter<L, C>> {
    let limiter = Arc::new(
        AdaptiveLimiter::with_clock(algorithm, WhenLimited::FailFast, clock).expect("valid"),
    );
    check(|| {
        limiter
            .try_acquire()
            .map(AdaptivePermitRef::success)
            .is_ok()
    });
    check(|| {
        limiter
            .try_acquire_owned()
            .map(AdaptivePermit::success)
            .is_ok()
    });
    limiter
}

fn tokio_semaphore() -> Arc<tokio::sync::Semaphore> {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(LIMIT as usize));
    check(|| semaphore.try_acquire().is_ok());
    check(|| Arc::clone(&semaphore).try_acquire_owned().is_ok());
    semaphore
}

fn congestion_limiter() -> DefaultLimiter<congestion_limiter::limits::Aimd> {
    let limiter = DefaultLimiter::new(congestion_limiter::limits::Aimd::new_with_initial_limit(
        LIMIT as usize,
    ));
    check(|| match now(limiter.try_acquire()) {
        Some(token) => {
            now(limiter.release(token, Some(Outcome::Success)));
            true
        }
        None => false,
    });
    limiter
}

/// Makes sure every call of a scenario is admitted, so that no benchmark measures
/// denials by mistake.
fn check(mut admitted: impl FnMut() -> bool) {
    let calls = 10_000;
    assert_eq!((0..calls).filter(|_| admitted()).count(), calls);
}

/// The service every tower peer wraps: answers its request at once.
#[derive(Clone, Copy)]
struct Echo;

impl Service<u64> for Echo {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: u64) -> Self::Future {
        ready(Ok(request))
    }
}

/// tollgate's limiter as a tower service, the way tower-acc's is: a permit taken in
/// `poll_ready`, moved into the call, ended as a success when the answer is ready.
/// (tollgate's own adaptive tower layer speaks HTTP; this keeps the comparison to
/// the permit's bookkeeping.)
struct Adaptive {
    inner: Echo,
    limiter: Arc<AdaptiveLimiter<AimdLimit>>,
    permit: Option<AdaptivePermit<AimdLimit>>,
}

impl Service<u64> for Adaptive {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.permit.is_none() {
            match self.limiter.try_acquire_owned() {
                Ok(permit) => self.permit = Some(permit),
                // Fail-fast with a free permit in every benchmark: never taken.
                Err(_) => return Poll::Pending,
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: u64) -> Self::Future {
        let permit = self.permit.take().expect("poll_ready first");
        let answer = now(self.inner.call(request));
        permit.success();
        ready(answer)
    }
}

/// One request through a tower service: ready, called, answered.
#[inline]
fn serve<S: Service<u64>>(service: &mut S, request: u64) -> Result<S::Response, S::Error> {
    now(service.ready())?;
    now(service.call(request))
}

pub fn bench(c: &mut Criterion) {
    single_thread(c);
    two_threads(c);
    partitioned(c);
}

fn single_thread(c: &mut Criterion) {
    let mut group = harness::group(c, "adaptive");

    // Scenario `success`: the permit ends as a success, a sample for the algorithm.
    let limiter = tollgate(aimd());
    bench_single_thread(&mut group, "tollgate.aimd", "success", |_| {
        limiter.try_acquire().map(AdaptivePermitRef::success)
    });
    let coarse = tollgate_coarse();
    bench_single_thread(&mut group, "tollgate.aimd_coarse", "success", |_| {
        coarse.try_acquire().map(AdaptivePermitRef::success)
    });
    let untimed = tollgate(aimd_untimed());
    bench_single_thread(&mut group, "tollgate.aimd_untimed", "success", |_| {
        untimed.try_acquire().map(AdaptivePermitRef::success)
    });
    // The owned permit, on the untimed AIMD: what owning the limiter adds.
    bench_single_thread(&mut group, "tollgate.owned", "success", |_| {
        untimed.try_acquire_owned().map(AdaptivePermit::success)
    });
    let limiter = tollgate(WindowedLimit::new(Gradient2Limit::new()));
    bench_single_thread(&mut group, "tollgate.gradient2_windowed", "success", |_| {
        limiter.try_acquire().map(AdaptivePermitRef::success)
    });
    let limiter = congestion_limiter();
    bench_single_thread(&mut group, "congestion_limiter.aimd", "success", |_| {
        now(limiter.try_acquire()).map(|token| now(limiter.release(token, Some(Outcome::Success))))
    });
    // tollgate's own semaphore, the permits under the adaptive limiter: the part of
    // its cost that is not the sample.
    let semaphore = tollgate::Semaphore::new(LIMIT).expect("valid");
    check(|| semaphore.try_acquire(1).is_ok());
    bench_single_thread(&mut group, "tollgate.semaphore", "success", |_| {
        semaphore.try_acquire(1).is_ok()
    });
    let semaphore = tokio_semaphore();
    bench_single_thread(&mut group, "tokio", "success", |_| {
        semaphore.try_acquire().is_ok()
    });
    bench_single_thread(&mut group, "tokio.owned", "success", |_| {
        Arc::clone(&semaphore).try_acquire_owned().is_ok()
    });

    // Scenario `ignore`: the permit goes back with no sample.
    let limiter = tollgate(aimd());
    bench_single_thread(&mut group, "tollgate.aimd", "ignore", |_| {
        limiter.try_acquire().map(AdaptivePermitRef::ignore)
    });
    bench_single_thread(&mut group, "tollgate.aimd_coarse", "ignore", |_| {
        coarse.try_acquire().map(AdaptivePermitRef::ignore)
    });
    bench_single_thread(&mut group, "tollgate.owned", "ignore", |_| {
        untimed.try_acquire_owned().map(AdaptivePermit::ignore)
    });
    bench_single_thread(&mut group, "tollgate.aimd_untimed", "ignore", |_| {
        untimed.try_acquire().map(AdaptivePermitRef::ignore)
    });
    let limiter = congestion_limiter();
    bench_single_thread(&mut group, "congestion_limiter.aimd", "ignore", |_| {
        now(limiter.try_acquire()).map(|token| now(limiter.release(token, None)))
    });
    bench_single_thread(&mut group, "tokio", "ignore", |_| {
        semaphore.try_acquire().is_ok()
    });
    bench_single_thread(&mut group, "tokio.owned", "ignore", |_| {
        Arc::clone(&semaphore).try_acquire_owned().is_ok()
    });

    // Scenario `tower`: a request through a tower service over `Echo`, the
    // outcome a success. tower's static `ConcurrencyLimit` is the baseline.
    let mut service = Adaptive {
        inner: Echo,
        limiter: tollgate(aimd()),
        permit: None,
    };
    bench_single_thread(&mut group, "tollgate.aimd", "tower", |i| {
        serve(&mut service, i)
    });
    let mut service = tower_acc::ConcurrencyLimit::new(
        Echo,
        tower_acc::Aimd::builder()
            .initial_limit(LIMIT as usize)
            .build(),
    );
    check(|| serve(&mut service, 0).is_ok());
    bench_single_thread(&mut group, "tower_acc.aimd", "tower", |i| {
        serve(&mut service, i)
    });
    let mut service = tower::limit::ConcurrencyLimit::new(Echo, LIMIT as usize);
    check(|| serve(&mut service, 0).is_ok());
    bench_single_thread(&mut group, "tower_concurrency_limit", "tower", |i| {
        serve(&mut service, i)
    });
    bench_single_thread(&mut group, "echo", "tower", |i| serve(&mut Echo, i));
    group.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut group = harness::group(c, "adaptive_two_threads");
    let limiter = tollgate(aimd());
    bench_two_threads(&mut group, "tollgate.aimd", "success", |_| {
        limiter.try_acquire().map(AdaptivePermitRef::success)
    });
    bench_two_threads(&mut group, "tollgate.aimd", "ignore", |_| {
        limiter.try_acquire().map(AdaptivePermitRef::ignore)
    });
    let untimed = tollgate(aimd_untimed());
    bench_two_threads(&mut group, "tollgate.aimd_untimed", "success", |_| {
        untimed.try_acquire().map(AdaptivePermitRef::success)
    });
    let semaphore = tokio_semaphore();
    for scenario in ["success", "ignore"] {
        bench_two_threads(&mut group, "tokio", scenario, |_| {
            semaphore.try_acquire().is_ok()
        });
    }
    group.finish();
}

/// The partitioned core on two threads: each thread in a partition of its own
/// (`two_partitions`), or both in one (`one_partition`), next to tokio's semaphore
/// shared by both threads.
fn partitioned(c: &mut Criterion) {
    let mut group = harness::group(c, "adaptive_partitioned");
    let partitions = Partitions::builder(LIMIT)
        .partition("live", 0.5)
        .partition("batch", 0.5)
        .build()
        .expect("valid partitions");
    check(|| partitions.try_acquire("live").is_ok() && partitions.try_acquire("batch").is_ok());
    const NAMES: [&str; 2] = ["live", "batch"];
    bench_two_threads_each(&mut group, "tollgate", "two_partitions", |thread, _| {
        partitions.try_acquire(NAMES[thread as usize]).is_ok()
    });
    bench_two_threads(&mut group, "tollgate", "one_partition", |_| {
        partitions.try_acquire("live").is_ok()
    });
    let semaphore = tokio_semaphore();
    for scenario in ["two_partitions", "one_partition"] {
        bench_two_threads(&mut group, "tokio", scenario, |_| {
            semaphore.try_acquire().is_ok()
        });
    }
    group.finish();
}
