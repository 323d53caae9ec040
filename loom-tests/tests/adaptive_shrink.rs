//! The adaptive limiter: a limit lowered by one request's outcome while another
//! request gives its permit back, and a third takes one.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::adaptive::limit::AimdLimit;
use tollgate::adaptive::{AdaptiveLimiter, Mode};
use tollgate::time::ManualClock;

/// A limit of 3, all held. One request is dropped (the limit halves to 1, then its
/// permit goes back) while another succeeds (+1, then back) and a third thread takes
/// a freed permit if it can and ends it. Whatever the order, no permit is lost or
/// made: once all have ended, none is in flight and exactly the limit is available.
#[test]
fn concurrent_release_and_shrink_never_leak_or_lose_a_permit() {
    loom::model(|| {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(3)
            .max_limit(10)
            .backoff_ratio(0.5)
            .build()
            .unwrap();
        let limiter =
            Arc::new(AdaptiveLimiter::with_clock(aimd, Mode::FailFast, ManualClock::new()).unwrap());
        let dropped = limiter.try_acquire().unwrap();
        let succeeded = limiter.try_acquire().unwrap();
        let _last = limiter.try_acquire().unwrap();

        let shrinker = thread::spawn(move || dropped.dropped());
        let taker = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                if let Ok(permit) = limiter.try_acquire() {
                    assert!(permit.inflight() <= 3, "more admitted than ever allowed");
                    drop(permit);
                }
            })
        };
        succeeded.success();
        shrinker.join().unwrap();
        taker.join().unwrap();

        assert_eq!(limiter.inflight(), 1);
        drop(_last);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), limiter.limit());
    });
}
