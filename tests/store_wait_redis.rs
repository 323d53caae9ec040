//! Waiting over the Redis store: a booked wait sleeps on the limiter's clock, and a
//! waiter dropped while it sleeps gives its booking back through a task on the tokio
//! runtime.
#![cfg(feature = "redis")]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use common::redis::{RedisServer, require_redis};
use tollgate::Quota;
use tollgate::algorithm::Gcra;
use tollgate::store::{RedisStore, SharedLimiter};
use tollgate::time::ManualClock;

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `future` until it is parked on the limiter's clock (its booking is in Redis).
async fn park<F: Future>(future: &mut Pin<Box<F>>, clock: &ManualClock) {
    let waker = Waker::from(Arc::new(Noop));
    let deadline = Instant::now() + Duration::from_secs(10);
    while clock.pending_alarms() == 0 {
        assert!(Instant::now() < deadline, "never parked");
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(polled.is_pending());
        tokio::task::yield_now().await;
    }
}

/// A limiter of one per minute on `server` whose key "k" is spent, sleeping on a
/// manual clock. One per minute, so the server's real clock never frees a permit
/// during a test.
async fn spent_limiter(
    server: &RedisServer,
) -> (SharedLimiter<RedisStore, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let gcra = Gcra::new(Quota::per_minute(1).unwrap());
    let store = RedisStore::connect(&server.url(), "wait").await.unwrap();
    let limiter = SharedLimiter::with_clock(store, gcra, clock.clone()).unwrap();
    assert!(limiter.check("k", 1).await.unwrap().is_ok());
    (limiter, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_booked_wait_is_refunded_in_redis() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (limiter, clock) = spent_limiter(&server).await;

    let mut waiter = Box::pin(limiter.acquire("k", 1));
    park(&mut waiter, &clock).await;
    let booked = limiter.peek("k", 1).await.unwrap().unwrap_err();
    let booked_retry = booked.retry_after().unwrap();
    assert!(booked_retry > Duration::from_secs(60), "{booked_retry:?}");

    drop(waiter);
    // The refund runs as a task; wait for Redis to show it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let retry = limiter
            .peek("k", 1)
            .await
            .unwrap()
            .unwrap_err()
            .retry_after();
        if retry.is_some_and(|r| r <= Duration::from_secs(60)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the booking was never given back"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booked_wait_ends_when_the_limiters_clock_reaches_it() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let (limiter, clock) = spent_limiter(&server).await;
    let mut waiter = Box::pin(limiter.acquire("k", 1));
    park(&mut waiter, &clock).await;
    clock.advance(Duration::from_secs(60));
    let waker = Waker::from(Arc::new(Noop));
    let polled = waiter.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(matches!(polled, Poll::Ready(Ok(_))), "{polled:?}");
    // A timeout shorter than the known wait fails at once and books nothing.
    let timed = limiter
        .acquire_timeout("k", 1, Duration::from_secs(1))
        .await;
    assert!(timed.is_err(), "{timed:?}");
}
