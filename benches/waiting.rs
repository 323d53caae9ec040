//! Awaiting a permit that is already there: the cost of `acquire(1).await` when it
//! never waits, against tokio's `Semaphore` and the leaky-bucket crate.
//!
//! Every peer's future is created, polled once with a no-op waker (it must be ready)
//! and dropped, with whatever it granted given back the peer's own way. A no-op waker
//! is the cheapest fair harness: no executor, no thread parking, the same for all.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use criterion::Criterion;
use futures::task::noop_waker_ref;
use tollgate::algorithm::Gcra;
use tollgate::{Limiter, Quota, Semaphore};

use crate::harness::{self, bench_single_thread};

/// More than any benchmark takes, so no peer ever waits.
const PLENTY: usize = 1 << 40;

/// Polls `future` once, as an executor would on its first poll; it must be ready.
#[inline]
fn ready<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(noop_waker_ref());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an uncontended acquire waited"),
    }
}

/// leaky-bucket with tokens to spare: a full bucket far larger than any run takes,
/// refilled to the brim every millisecond.
fn leaky_bucket(fair: bool) -> leaky_bucket::RateLimiter {
    leaky_bucket::RateLimiter::builder()
        .max(PLENTY)
        .initial(PLENTY)
        .refill(PLENTY)
        .interval(std::time::Duration::from_millis(1))
        .fair(fair)
        .build()
}

pub fn bench(c: &mut Criterion) {
    let mut group = harness::group(c, "acquire_ready");

    let semaphore = Semaphore::new(PLENTY as u64).expect("valid");
    bench_single_thread(&mut group, "tollgate", "semaphore", |_| {
        // The permit is dropped here: one acquire and one release per call.
        ready(semaphore.acquire(1)).is_ok()
    });

    // tokio's `acquire()` takes one permit.
    let semaphore = tokio::sync::Semaphore::new(PLENTY);
    bench_single_thread(&mut group, "tokio", "semaphore", |_| {
        ready(semaphore.acquire()).is_ok()
    });

    // The rate limiters have nothing to release: their permits come back with time.
    // A second's burst at one permit per nanosecond: a call takes longer than a
    // nanosecond, so the bucket never empties.
    let limiter = Limiter::new(Gcra::new(
        Quota::per_second(1_000_000_000).expect("valid quota"),
    ));
    bench_single_thread(&mut group, "tollgate", "rate_limiter", |_| {
        ready(limiter.acquire(1)).is_ok()
    });

    // Fair is leaky-bucket's default, as FIFO is tollgate's: every acquire takes its
    // lock. Unfair takes its lock-free fast path.
    let limiter = leaky_bucket(true);
    bench_single_thread(&mut group, "leaky_bucket", "rate_limiter", |_| {
        ready(limiter.acquire(1))
    });
    let limiter = leaky_bucket(false);
    bench_single_thread(&mut group, "leaky_bucket_unfair", "rate_limiter", |_| {
        ready(limiter.acquire(1))
    });
    group.finish();
}
