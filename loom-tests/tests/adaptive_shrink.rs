//! The adaptive limiter: a limit lowered by one request's outcome while another
//! request gives its permit back.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::adaptive::limit::AimdLimit;
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::time::ManualClock;

/// A limit of 2, both held. One request is dropped (the limit halves, then its permit
/// goes back) while the other succeeds (+1, then its permit goes back). Whatever the
/// order, no permit is lost or made: once both have ended none is in flight, exactly
/// the limit is available, and that many can be taken again.
#[test]
fn concurrent_release_and_shrink_never_leak_or_lose_a_permit() {
    loom::model(|| {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(2)
            .max_limit(10)
            .backoff_ratio(0.5)
            .build()
            .unwrap();
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, ManualClock::new()).unwrap(),
        );
        let dropped = limiter.try_acquire_owned().unwrap();
        let succeeded = limiter.try_acquire().unwrap();

        let shrinker = thread::spawn(move || dropped.dropped());
        succeeded.success();
        shrinker.join().unwrap();

        let limit = limiter.limit();
        // Dropped first: 2 → 1, then the success (2 in flight at its start) → 2.
        // Success first: 2 → 3, then the drop → 1.
        assert!(limit == 1 || limit == 2, "limit {limit}");
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), limit);
        let again: Vec<_> = (0..limit).map(|_| limiter.try_acquire().unwrap()).collect();
        assert!(limiter.try_acquire().is_err());
        drop(again);
    });
}
