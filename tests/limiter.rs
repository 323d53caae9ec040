//! The in-process limiter shared by threads, under a manual clock.

use std::sync::Arc;
use std::time::Duration;

use tollgate::algorithm::{AllOf, Gcra};
use tollgate::time::ManualClock;
use tollgate::{ConfigError, Limiter, Quota};

/// With time frozen, threads racing on one lock-free limiter admit exactly the burst.
#[test]
fn racing_threads_never_over_admit() {
    let clock = ManualClock::new();
    let limiter = Arc::new(Limiter::with_clock(
        Gcra::new(Quota::per_second(1000).unwrap()),
        clock,
    ));
    let admitted: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let limiter = &limiter;
                s.spawn(move || {
                    (0..10_000)
                        .filter(|_| limiter.try_acquire(1).is_ok())
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 1000);
}

#[test]
fn locked_limiter_never_over_admits_either() {
    let rules = AllOf::new(vec![
        Gcra::new(Quota::per_second(500).unwrap()),
        Gcra::new(Quota::per_second(300).unwrap()),
    ])
    .unwrap();
    let limiter = Limiter::with_clock(rules, ManualClock::new());
    let admitted: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let limiter = &limiter;
                s.spawn(move || {
                    (0..2_000)
                        .filter(|_| limiter.try_acquire(1).is_ok())
                        .count() as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 300);
}

#[test]
fn reconfigure_keeps_state_and_rejects_bad_values() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(2).unwrap()), clock.clone());
    limiter.try_acquire(2).unwrap();
    let err = limiter
        .reconfigure(|gcra, _, _| {
            gcra.set_quota(Quota::per_second(0)?);
            Ok::<_, ConfigError>(())
        })
        .unwrap_err();
    assert_eq!(err, ConfigError::Zero { parameter: "count" });
    assert_eq!(
        limiter.algorithm(),
        Gcra::new(Quota::per_second(2).unwrap())
    );
    limiter
        .reconfigure(|gcra, _, _| {
            gcra.set_quota(Quota::per_second(4)?);
            Ok::<_, ConfigError>(())
        })
        .unwrap();
    // The 2 permits taken at 500 ms each are still owed: 1 s of debt, now counted at
    // 250 ms per permit against a 4-permit bucket.
    assert!(limiter.try_acquire(1).is_err());
    clock.advance(Duration::from_millis(250));
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn peek_and_refund() {
    let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1).unwrap()), ManualClock::new());
    assert!(limiter.peek(1).is_ok());
    limiter.try_acquire(1).unwrap();
    assert!(limiter.peek(1).is_err());
    limiter.refund(1);
    assert!(limiter.try_acquire(1).is_ok());
}
