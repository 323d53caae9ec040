//! The alarm handoff: a limiter's first waiter arms an alarm on the clock while another
//! thread moves the clock past it. `ManualClock` rings due alarms on the thread that
//! moves it, as the scheduler thread rings them for a real clock.
#![cfg(loom)]

use std::time::Duration;

use loom::future::block_on;
use loom::thread;
use loom_tests::poll_once;
use tollgate::algorithm::Gcra;
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{Limiter, Quota};

/// The burst is spent, so `acquire(1)` waits 1 s, while another thread advances the
/// clock by 1 s: the waiter is always granted (a lost alarm leaves it parked, which
/// loom reports as a deadlock), and no alarm is left behind.
#[test]
fn a_waiter_armed_while_the_clock_moves_is_granted() {
    loom::model(|| {
        let clock = ManualClock::new();
        let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1).unwrap()), clock.clone());
        assert!(limiter.try_acquire(1).is_ok());
        let mover = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_secs(1)))
        };

        block_on(limiter.acquire(1)).expect("granted");
        mover.join().unwrap();
        assert_eq!(clock.now(), Nanos::new(1_000_000_000));
        assert_eq!(limiter.waiters(), 0);
        assert_eq!(clock.pending_alarms(), 0);
    });
}

/// The first waiter has booked the next permit and armed an alarm; it gives up while a
/// second waiter queues behind it and the clock moves past the booking. Its booking is
/// given back, the second waiter is granted by the time its own booking comes due
/// (2 s at the latest), and nothing is left armed or queued.
#[test]
fn a_cancelled_booking_never_strands_the_next_waiter() {
    loom::model(|| {
        let clock = ManualClock::new();
        let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1).unwrap()), clock.clone());
        assert!(limiter.try_acquire(1).is_ok());
        let mut head = Box::pin(limiter.acquire(1));
        assert!(poll_once(head.as_mut()).is_pending());
        assert_eq!(clock.next_alarm(), Some(Nanos::new(1_000_000_000)));

        let behind = {
            let limiter = limiter.clone();
            thread::spawn(move || block_on(limiter.acquire(1)).expect("granted"))
        };
        let mover = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_secs(1)))
        };
        drop(head);
        mover.join().unwrap();
        clock.advance(Duration::from_secs(1));
        behind.join().unwrap();
        assert_eq!(limiter.waiters(), 0);
        assert_eq!(clock.pending_alarms(), 0);
    });
}
