//! Waiting on a store: a `SharedLimiter`'s first waiter books by a round trip outside
//! the queue's lock, racing releases and cancellations.
#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use loom_tests::poll_once;
use std::time::Duration;
use tollgate::algorithm::{Concurrency, Leased};
use tollgate::store::{MemoryStore, SharedLimiter};
use tollgate::time::ManualClock;
use tollgate::KeyedConfig;

fn limiter() -> Arc<SharedLimiter<MemoryStore<ManualClock>, ManualClock>> {
    let clock = ManualClock::new();
    let store = MemoryStore::with_clock(KeyedConfig::new(4), "loom", clock.clone()).unwrap();
    Arc::new(
        SharedLimiter::with_clock(
            store,
            Leased::new(Concurrency::new(1).unwrap(), Duration::from_secs(60)).unwrap(),
            clock,
        )
        .unwrap(),
    )
}

/// The only permit is given back while another thread waits for it: the waiter, whose
/// booking was denied or is about to be, is always woken and granted (a lost wake-up
/// leaves it parked, which loom reports as a deadlock).
#[test]
fn a_refund_racing_a_waiter_grants_it() {
    loom::model(|| {
        let limiter = limiter();
        assert!(limiter.try_acquire("k", 1).unwrap().unwrap().is_ok());
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || block_on(limiter.refund("k", 1)).unwrap())
        };
        block_on(limiter.acquire("k", 1)).expect("granted");
        refunder.join().unwrap();
        assert_eq!(limiter.waiters(), 0);
        // The waiter holds the permit: nothing is left for another.
        assert!(limiter.try_acquire("k", 1).unwrap().unwrap().is_err());
    });
}

/// The first waiter gives up while the permit comes back: the turn passes to the one
/// behind it, which is granted, and the cancelled one holds nothing.
#[test]
fn a_cancelled_first_waiter_hands_the_turn_on() {
    loom::model(|| {
        let limiter = limiter();
        assert!(limiter.try_acquire("k", 1).unwrap().unwrap().is_ok());
        let mut first = Box::pin(limiter.acquire("k", 1));
        assert!(poll_once(first.as_mut()).is_pending());
        let behind = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || block_on(limiter.acquire("k", 1)).is_ok())
        };
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || block_on(limiter.refund("k", 1)).unwrap())
        };
        drop(first);
        refunder.join().unwrap();
        assert!(behind.join().unwrap(), "the next waiter is granted");
        assert_eq!(limiter.waiters(), 0);
        assert!(limiter.try_acquire("k", 1).unwrap().unwrap().is_err());
    });
}
