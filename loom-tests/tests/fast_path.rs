//! The lock-free fast path: racing `try_acquire`s never admit more than there is.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::algorithm::Gcra;
use tollgate::time::ManualClock;
use tollgate::{Limiter, Quota, Semaphore};

/// Three threads race for a burst of two at frozen time: exactly two get through.
#[test]
fn gcra_admits_exactly_its_burst() {
    loom::model(|| {
        let quota = Quota::per_second(1).unwrap().burst(2).unwrap();
        let limiter = Limiter::with_clock(Gcra::new(quota), ManualClock::new());
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let limiter = limiter.clone();
                thread::spawn(move || limiter.try_acquire(1).is_ok())
            })
            .collect();
        let mine = limiter.try_acquire(1).is_ok();
        let admitted = racers
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .chain([mine])
            .filter(|&ok| ok)
            .count();
        assert_eq!(admitted, 2);
    });
}

/// Three threads race for two permits: exactly two get one, and nothing is lost.
#[test]
fn semaphore_admits_exactly_its_permits() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(2).unwrap());
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let semaphore = Arc::clone(&semaphore);
                thread::spawn(move || semaphore.try_acquire_owned(1).ok())
            })
            .collect();
        let mine = semaphore.try_acquire_owned(1).ok();
        let permits: Vec<_> = racers
            .into_iter()
            .map(|racer| racer.join().unwrap())
            .chain([mine])
            .flatten()
            .collect();
        assert_eq!(permits.len(), 2);
        assert_eq!(semaphore.available_permits(), 0);
        drop(permits);
        assert_eq!(semaphore.available_permits(), 2);
    });
}
