//! The lock-free cell (a limiter over a packed algorithm): reconfigurations racing
//! decisions and readers.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::algorithm::{Algorithm, Concurrency, Gcra};
use tollgate::time::ManualClock;
use tollgate::{Limiter, Quota};

fn cell<A: Algorithm>(algorithm: A) -> Arc<Limiter<A, ManualClock>> {
    assert!(
        A::PACKING.is_some(),
        "these models are of the lock-free cell"
    );
    Arc::new(Limiter::with_clock(algorithm, ManualClock::new()))
}

fn set<A: Algorithm>(cell: &Limiter<A, ManualClock>, new: A) {
    cell.reconfigure(|alg, _, _| {
        *alg = new.clone();
        Ok::<(), ()>(())
    })
    .unwrap();
}

/// The scenario of `tests/engine.rs`, over every interleaving: A asks for 9 of 10
/// permits while the maximum drops to 2 and another acquire takes 1. A decision whose
/// compare-and-swap fails after the update retries under the new maximum, so the two
/// are never both admitted (the bug admitted 10 under a maximum of 2).
#[test]
fn a_retried_decision_uses_the_new_maximum() {
    loom::model(|| {
        let cell = cell(Concurrency::new(10).unwrap());
        let racing = Arc::clone(&cell);
        let a = thread::spawn(move || racing.try_acquire(9).is_ok());

        set(&cell, Concurrency::new(2).unwrap());
        let one = cell.try_acquire(1).is_ok();
        let a = a.join().unwrap();

        assert!(!(a && one), "admitted 10 under a maximum of 2");
        let (alg, in_use) = (cell.algorithm(), cell.state());
        assert_eq!(alg.max(), 2);
        assert_eq!(in_use, 9 * u64::from(a) + u64::from(one));
    });
}

/// A decision that happens after an update returns decides under the new
/// configuration, even while other decisions make the update retry.
#[test]
fn a_decision_after_the_update_sees_the_new_maximum() {
    loom::model(|| {
        let cell = cell(Concurrency::new(10).unwrap());
        let churn = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || cell.try_acquire(1).is_ok())
        };
        let updater = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || set(&cell, Concurrency::new(2).unwrap()))
        };
        updater.join().unwrap();
        let nine = cell.try_acquire(9);
        assert!(
            nine.is_err_and(|denied| denied.is_never()),
            "9 decided under the old maximum of 10"
        );
        assert!(churn.join().unwrap(), "1 fits under either maximum");
    });
}

/// The configuration spans several words under a sequence lock: a reader racing an
/// update sees the old or the new one whole, never a mix of the two.
#[test]
fn a_reader_never_sees_a_torn_configuration() {
    loom::model(|| {
        let old = Gcra::new(Quota::per_second(1).unwrap().burst(2).unwrap());
        let new = Gcra::new(Quota::per_second(3).unwrap().burst(5).unwrap());
        let cell = cell(old);
        // The reader is the spawned thread: loom then tries it at every store of the
        // update.
        let reader = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || cell.algorithm())
        };
        set(&cell, new);
        let seen = reader.join().unwrap();
        assert!(seen == old || seen == new, "torn configuration {seen:?}");
        assert_eq!(cell.algorithm(), new);
    });
}
