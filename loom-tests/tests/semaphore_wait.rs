//! Waiting on a `Semaphore`: enqueue, wake and cancel racing a release.
#![cfg(loom)]

use std::sync::Arc;
use std::task::Poll;

use loom::future::block_on;
use loom::thread;
use loom_tests::poll_once;
use tollgate::AcquireError;
use tollgate::Semaphore;

/// The only permit is released while another thread queues for it: the waiter is
/// always woken and granted (a lost wake-up leaves it parked, which loom reports as a
/// deadlock).
#[test]
fn a_release_racing_an_enqueue_wakes_the_waiter() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        let releaser = thread::spawn(move || drop(held));

        let permit = block_on(semaphore.acquire(1)).expect("granted");
        assert_eq!(semaphore.available_permits(), 0);
        drop(permit);
        releaser.join().unwrap();
        assert_eq!(semaphore.available_permits(), 1);
        assert_eq!(semaphore.waiters(), 0);
    });
}

/// A queued waiter is polled again with a new waker (its future moved to another
/// task) while the permit is released: the grant wakes the new waker, not only the old
/// one.
#[test]
fn a_waiter_repolled_with_a_new_waker_is_woken() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        let mut waiting = Box::pin(semaphore.acquire_owned(1));
        assert!(poll_once(waiting.as_mut()).is_pending());
        let releaser = thread::spawn(move || drop(held));

        let permit = block_on(waiting).expect("granted");
        drop(permit);
        releaser.join().unwrap();
        assert_eq!(semaphore.available_permits(), 1);
    });
}

/// A waiter gives up (its future is dropped after one poll) while the permit it waits
/// for is released: the permit comes back whatever the order, granted or not.
#[test]
fn a_cancelled_waiter_leaks_no_permit() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        let releaser = thread::spawn(move || drop(held));

        if let Poll::Ready(outcome) = poll_once(semaphore.acquire(1)) {
            drop(outcome.expect("granted"));
        }
        releaser.join().unwrap();
        assert_eq!(semaphore.available_permits(), 1);
        assert_eq!(semaphore.waiters(), 0);
    });
}

/// The first of two waiters gives up while the permit is released: the second one
/// moves up and is granted.
#[test]
fn a_cancelled_head_hands_the_permit_to_the_next_waiter() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        // Queue the head first, so that the other waiter stands behind it.
        let mut head = Box::pin(semaphore.acquire_owned(1));
        assert!(poll_once(head.as_mut()).is_pending());

        let behind = {
            let semaphore = Arc::clone(&semaphore);
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire(1)).expect("granted");
                drop(permit);
            })
        };
        let releaser = thread::spawn(move || drop(held));
        drop(head);

        behind.join().unwrap();
        releaser.join().unwrap();
        assert_eq!(semaphore.available_permits(), 1);
        assert_eq!(semaphore.waiters(), 0);
    });
}

/// The semaphore is closed while another thread waits for its only permit: the wait
/// ends, with `Closed`, or with the permit if it got in before the close, and never
/// hangs; an acquire that starts after the close fails.
#[test]
fn a_close_racing_a_waiter_ends_the_wait() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        let waiter = {
            let semaphore = Arc::clone(&semaphore);
            thread::spawn(move || block_on(semaphore.acquire(1)).map(drop))
        };
        semaphore.close();
        assert!(semaphore.try_acquire(1).unwrap_err().is_never());
        drop(held);
        let outcome = waiter.join().unwrap();
        assert!(matches!(outcome, Ok(()) | Err(AcquireError::Closed)));
        assert_eq!(semaphore.available_permits(), 1);
        assert_eq!(semaphore.waiters(), 0);
    });
}
