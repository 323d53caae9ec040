//! Permit guards: dropped on several threads at once, they give back exactly what
//! they held.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::Semaphore;

/// Three permits of different sizes are dropped on three threads at once: all four
/// permits come back, no more.
#[test]
fn concurrent_drops_restore_exactly_the_maximum() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(4).unwrap());
        let mine = semaphore.try_acquire_owned(2).unwrap();
        let droppers: Vec<_> = (0..2)
            .map(|_| {
                let permit = semaphore.try_acquire_owned(1).unwrap();
                thread::spawn(move || drop(permit))
            })
            .collect();
        drop(mine);
        for dropper in droppers {
            dropper.join().unwrap();
        }
        assert_eq!(semaphore.available_permits(), 4);
    });
}

/// A permit dropped while another thread takes the freed capacity: what is in use and
/// what is available always add up to the maximum.
#[test]
fn a_drop_racing_a_try_acquire_keeps_the_count() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(2).unwrap());
        let first = semaphore.try_acquire_owned(1).unwrap();
        let second = semaphore.try_acquire_owned(1).unwrap();
        let dropper = thread::spawn(move || drop(first));
        let taker = {
            let semaphore = Arc::clone(&semaphore);
            thread::spawn(move || semaphore.try_acquire_owned(1).ok())
        };
        dropper.join().unwrap();
        let taken = taker.join().unwrap();
        let in_use = 1 + taken.as_ref().map_or(0, |p| p.num_permits());
        assert_eq!(semaphore.available_permits(), 2 - in_use);
        drop((second, taken));
        assert_eq!(semaphore.available_permits(), 2);
    });
}
