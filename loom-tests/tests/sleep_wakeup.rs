//! `Sleep`: a task sleeping on a `ManualClock` while another thread moves the clock
//! past its deadline is always woken: the waker is stored before the alarm can ring,
//! or the sleep sees the new time itself.
#![cfg(loom)]

use std::time::Duration;

use loom::future::block_on;
use loom::thread;
use tollgate::time::Sleep;
use tollgate::time::{ManualClock, Nanos};

/// A lost wake-up would leave `block_on` parked forever, which loom reports.
#[test]
fn a_sleep_armed_while_the_clock_moves_always_wakes() {
    loom::model(|| {
        let clock = ManualClock::new();
        let mover = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(Duration::from_secs(1)))
        };
        // The deadline is fixed before the race: `Sleep::new` would read the clock.
        block_on(Sleep::until(clock.clone(), Nanos::new(1_000_000_000)));
        mover.join().unwrap();
        assert_eq!(clock.pending_alarms(), 0);
    });
}
