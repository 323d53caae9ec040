//! A locked algorithm's denial hint: a repeated denial read without the lock never
//! outlives a change of state that has completed.
#![cfg(loom)]

use std::time::Duration;

use loom::thread;
use tollgate::algorithm::SlidingLog;
use tollgate::time::ManualClock;
use tollgate::Limiter;

/// One thread asks (and, denied, leaves a hint) while another raises the limit to
/// two and then asks: exactly two requests get through, whatever the interleaving.
/// A stale hint would deny both askers, leaving one.
#[test]
fn a_raised_limit_is_never_hidden_by_an_old_denial() {
    loom::model(|| {
        let log = SlidingLog::new(1, Duration::from_secs(1)).unwrap();
        let limiter = Limiter::with_clock(log, ManualClock::new());
        assert!(limiter.try_acquire(1).is_ok());
        let racer = {
            let limiter = limiter.clone();
            thread::spawn(move || limiter.try_acquire(1).is_ok())
        };
        limiter.reconfigure(|log, _, _| log.set_limit(2)).unwrap();
        let mine = limiter.try_acquire(1).is_ok();
        let theirs = racer.join().unwrap();
        assert_eq!(1 + usize::from(mine) + usize::from(theirs), 2);
    });
}
