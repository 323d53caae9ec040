//! The adaptive limiter's lock-free feedback: an AIMD sample that leaves the limit as
//! it is skips the algorithm's lock, while another request's outcome changes the
//! limit under it.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::adaptive::limit::AimdLimit;
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::time::ManualClock;

/// A limit of 4, two requests in flight. The first (1 in flight at its start)
/// succeeds: no change at a limit of 4, so it takes no lock, but +1 at a limit of 2.
/// The second (2 in flight) is dropped: 4 → 2 under the lock. A skipped sample is
/// the same as one fed where it read the limit, so the limit ends as in one of the
/// two serial orders (drop last: 2; drop first: 3), the limit enforced is the
/// algorithm's, and no permit is lost or made.
#[test]
fn a_sample_skipped_without_the_lock_is_one_fed_at_its_read() {
    loom::model(|| {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(4)
            .max_limit(10)
            .backoff_ratio(0.5)
            .build()
            .unwrap();
        let limiter = Arc::new(
            AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, ManualClock::new()).unwrap(),
        );
        let succeeded = limiter.try_acquire_owned().unwrap();
        let dropped = limiter.try_acquire_owned().unwrap();

        let successor = thread::spawn(move || succeeded.success());
        dropped.dropped();
        successor.join().unwrap();

        let limit = limiter.limit();
        assert!(limit == 2 || limit == 3, "limit {limit}");
        // A tick applies the algorithm's own limit: the one enforced already.
        assert_eq!(limiter.tick(), limit);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), limit);
    });
}
