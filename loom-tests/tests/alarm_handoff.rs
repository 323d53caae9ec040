//! The alarm handoff: a limiter's first waiter arms an alarm on the clock while another
//! thread moves the clock past it. `ManualClock` rings due alarms on the thread that
//! moves it, as the scheduler thread rings them for a real clock.
#![cfg(loom)]

use std::time::Duration;

use loom::future::block_on;
use loom::thread;
use tollgate::algorithm::Gcra;
use tollgate::clock::{Clock, ManualClock, Nanos};
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
