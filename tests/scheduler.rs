//! The scheduler thread on the real clock: it rings the alarms of waiting limiters on
//! a thread of its name, exits once idle, starts again on the next alarm, and idle
//! limiters never give it anything to do. Only completion and counters are asserted,
//! never timing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use tollgate::AcquireError;
use tollgate::algorithm::{Algorithm, Concurrency, Gcra};
use tollgate::time::Scheduler;
use tollgate::time::{Alarm, MonotonicClock};
use tollgate::{LeakyQueue, Limiter, Quota};

/// A limiter whose alarms go to `scheduler`: 200 per second, burst 1, so a wait
/// lasts up to 5 ms.
fn limiter_on(scheduler: &Scheduler) -> Limiter<Gcra> {
    let clock = MonotonicClock::new().with_scheduler(scheduler.clone());
    let quota = Quota::per_second(200).unwrap().burst(1).unwrap();
    Limiter::with_clock(Gcra::new(quota), clock)
}

/// Takes ten permits one after another: unless each call took longer than the
/// interval, some had to wait for an alarm.
fn take_ten(limiter: &Limiter<Gcra>) {
    for _ in 0..5 {
        limiter.acquire_blocking(1).unwrap();
        block_on(limiter.acquire(1)).unwrap();
    }
}

/// Waits, without asserting how long, until `done` holds; fails after `limit`.
fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < give_up, "never: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_short_wait_completes_through_the_schedulers_alarm() {
    let scheduler = Scheduler::new("tollgate-test-wait");
    let limiter = limiter_on(&scheduler);
    assert_eq!(scheduler.stats().alarms_set, 0);
    take_ten(&limiter);
    let stats = scheduler.stats();
    assert!(stats.alarms_set >= 1, "{stats:?}");
    assert!(stats.alarms_rung >= 1, "{stats:?}");
    assert!(stats.threads_started >= 1, "{stats:?}");
    assert_eq!(scheduler.name(), "tollgate-test-wait");
}

/// Notes the name of the thread it rang on.
#[derive(Default)]
struct RangOn {
    name: Mutex<Option<String>>,
    rang: AtomicBool,
}

impl Alarm for RangOn {
    fn ring(&self) {
        *self.name.lock().unwrap() = thread::current().name().map(str::to_owned);
        self.rang.store(true, Ordering::SeqCst);
    }
}

#[test]
fn alarms_ring_on_a_thread_named_after_the_scheduler() {
    let scheduler = Scheduler::new("tollgate-test-name");
    let alarm = Arc::new(RangOn::default());
    scheduler.set_alarm_after(Duration::ZERO, alarm.clone());
    eventually(Duration::from_secs(5), "the alarm rings", || {
        alarm.rang.load(Ordering::SeqCst)
    });
    assert_eq!(
        alarm.name.lock().unwrap().as_deref(),
        Some("tollgate-test-name")
    );
}

#[test]
fn the_thread_exits_when_idle_and_starts_again_on_the_next_alarm() {
    let scheduler = Scheduler::new("tollgate-test-linger");
    let limiter = limiter_on(&scheduler);
    take_ten(&limiter);
    assert!(scheduler.stats().threads_started >= 1);
    eventually(Duration::from_secs(5), "the idle thread exits", || {
        !scheduler.stats().running
    });
    let before = scheduler.stats();

    take_ten(&limiter);
    let after = scheduler.stats();
    assert!(after.threads_started > before.threads_started, "{after:?}");
    assert!(after.alarms_rung > before.alarms_rung, "{after:?}");
}

#[test]
fn idle_limiters_set_no_alarm() {
    let scheduler = Scheduler::new("tollgate-test-idle");
    let limiters: Vec<_> = (0..10_000).map(|_| limiter_on(&scheduler)).collect();
    for limiter in &limiters {
        assert!(limiter.try_acquire(1).is_ok());
    }
    // Denied requests wait for nothing either.
    for limiter in &limiters {
        let _ = limiter.try_acquire(1);
        let _ = limiter.peek(1);
    }
    let stats = scheduler.stats();
    assert_eq!(stats.alarms_set, 0, "{stats:?}");
    assert_eq!(stats.threads_started, 0, "{stats:?}");
    assert!(!stats.running);
}

#[test]
fn waits_that_end_at_once_set_no_alarm() {
    let scheduler = Scheduler::new("tollgate-test-immediate");
    let limiter = Limiter::with_clock(
        Gcra::new(Quota::per_second(10).unwrap().burst(100).unwrap()),
        MonotonicClock::new().with_scheduler(scheduler.clone()),
    );
    block_on(async {
        for _ in 0..100 {
            limiter.acquire(1).await.unwrap();
        }
    });
    assert_eq!(scheduler.stats().alarms_set, 0);
}

#[test]
fn a_leaky_queue_drains_through_its_scheduler() {
    let scheduler = Scheduler::new("tollgate-test-leaky");
    let clock = MonotonicClock::new().with_scheduler(scheduler.clone());
    let queue =
        Arc::new(LeakyQueue::with_clock(10, Quota::per_second(1000).unwrap(), clock).unwrap());
    let threads: Vec<_> = (0..5)
        .map(|_| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.enqueue_blocking(1))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(queue.waiters(), 0);
    assert!(scheduler.stats().alarms_rung >= 1);
}

#[test]
fn a_timed_wait_ends_at_its_deadline_through_the_scheduler() {
    // Nobody gives the concurrency permit back: only the deadline alarm ends it.
    let scheduler = Scheduler::new("tollgate-test-deadline");
    let clock = MonotonicClock::new().with_scheduler(scheduler.clone());
    let limiter = Limiter::with_clock(Concurrency::new(1).unwrap(), clock);
    limiter.try_acquire(1).unwrap();
    assert_eq!(
        limiter.acquire_blocking_timeout(1, Duration::from_millis(20)),
        Err(AcquireError::TimedOut)
    );
    assert_eq!(
        block_on(limiter.acquire_timeout(1, Duration::from_millis(20))),
        Err(AcquireError::TimedOut)
    );
    assert_eq!(limiter.waiters(), 0);
    assert!(scheduler.stats().alarms_rung >= 2);
}

/// An alarm that panics when it rings.
struct Panics;

impl Alarm for Panics {
    fn ring(&self) {
        panic!("an alarm that panics (expected in this test)");
    }
}

/// The bug: a panicking alarm killed the scheduler thread, losing every other pending
/// alarm, so a waiter behind it was never woken.
#[test]
fn a_panicking_alarm_does_not_strand_other_waiters() {
    let scheduler = Scheduler::new("tollgate-test-panic");
    let limiter = limiter_on(&scheduler);
    limiter.try_acquire(limiter.algorithm().capacity()).unwrap();
    let panics = Arc::new(Panics);
    scheduler.set_alarm_after(Duration::from_millis(5), panics.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = limiter.clone();
    thread::spawn(move || {
        let _ = tx.send(waiter.acquire_blocking(1));
    });
    let granted = rx.recv_timeout(Duration::from_secs(10));
    assert!(
        matches!(granted, Ok(Ok(_))),
        "{granted:?}; {:?}",
        scheduler.stats()
    );
}
