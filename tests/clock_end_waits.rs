//! Waits at the clock's end: a waiter whose grant would need time past `Nanos::MAX`
//! can never be granted, so it fails with a typed error instead of waiting forever.
//! Each test says what the bug was.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tollgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{AcquireError, KeyedConfig, KeyedLimiter, Limiter, Quota};

const SECOND: Duration = Duration::from_secs(1);

type Wait<'a> = Pin<Box<dyn Future<Output = Result<Duration, AcquireError>> + 'a>>;

/// How a set of waits ended.
#[derive(Debug, Default)]
struct Ends {
    granted: usize,
    errors: std::collections::BTreeMap<String, usize>,
    pending: usize,
}

/// Polls `waits` while the clock moves to its end in 50 ms steps, and a few times
/// more at the end: how they ended.
fn run(mut waits: Vec<Wait<'_>>, clock: &ManualClock) -> Ends {
    let mut context = Context::from_waker(futures::task::noop_waker_ref());
    let mut ends = Ends::default();
    for _ in 0..10 {
        waits.retain_mut(|wait| match wait.as_mut().poll(&mut context) {
            Poll::Ready(Ok(_)) => {
                ends.granted += 1;
                false
            }
            Poll::Ready(Err(e)) => {
                *ends.errors.entry(format!("{e:?}")).or_default() += 1;
                false
            }
            Poll::Pending => true,
        });
        clock.advance(Duration::from_millis(50));
    }
    assert_eq!(clock.now(), Nanos::MAX);
    ends.pending = waits.len();
    ends
}

/// A clock 250 ms before its end, on which `algorithm`'s limiter was made 1.1 s
/// before the end.
fn near_the_end() -> ManualClock {
    ManualClock::starting_at(Nanos::new(u64::MAX - 1_100_000_000))
}

/// 1,000 waits for one permit, 250 ms before the clock's end, on a plain limiter.
fn plain<A: Algorithm>(algorithm: A, timeout: Option<Duration>) -> Ends {
    let clock = near_the_end();
    let limiter = Limiter::with_clock(algorithm, clock.clone());
    clock.advance(Duration::from_millis(850));
    let waits = (0..1_000)
        .map(|_| -> Wait<'_> {
            match timeout {
                Some(t) => Box::pin(limiter.acquire_timeout(1, t)),
                None => Box::pin(limiter.acquire(1)),
            }
        })
        .collect();
    run(waits, &clock)
}

/// The same on one key of a keyed limiter.
fn keyed<A: Algorithm>(algorithm: A, timeout: Option<Duration>) -> Ends {
    let clock = near_the_end();
    let limiter: KeyedLimiter<u32, A, ManualClock> =
        KeyedLimiter::with_clock(algorithm, KeyedConfig::new(4).shards(1), clock.clone()).unwrap();
    // The key's state starts with the limiter's, as a plain one's does.
    assert!(limiter.try_acquire(&0, 0).is_ok());
    clock.advance(Duration::from_millis(850));
    let waits = (0..1_000)
        .map(|_| -> Wait<'_> {
            match timeout {
                Some(t) => Box::pin(limiter.acquire_timeout(&0, 1, t)),
                None => Box::pin(limiter.acquire(&0, 1)),
            }
        })
        .collect();
    run(waits, &clock)
}

/// Every time-limited algorithm of 10 a second, plain and keyed.
fn every(mut check: impl FnMut(&str, &dyn Fn(Option<Duration>) -> (Ends, Ends))) {
    fn both<A: Algorithm>(a: A) -> impl Fn(Option<Duration>) -> (Ends, Ends) {
        move |t| (plain(a.clone(), t), keyed(a.clone(), t))
    }
    let ten = Quota::per_second(10).unwrap();
    check("gcra", &both(Gcra::new(ten)));
    check("leaky bucket", &both(LeakyBucket::new(10, ten).unwrap()));
    check("sliding log", &both(SlidingLog::new(10, SECOND).unwrap()));
    check("fixed window", &both(FixedWindow::new(10, SECOND).unwrap()));
    check(
        "first-hit window",
        &both(FixedWindow::from_first_hit(10, SECOND).unwrap()),
    );
    check(
        "sliding counter",
        &both(SlidingCounter::new(10, SECOND).unwrap()),
    );
    check(
        "refresh period",
        &both(RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap()),
    );
    check("smooth bursty", &both(SmoothBursty::new(10.0).unwrap()));
    check(
        "smooth warming up",
        &both(SmoothWarmingUp::new(10.0, SECOND).unwrap()),
    );
}

/// Every wait ended, at most 20 granted, and the rest failed with `allowed` errors.
fn all_ended(name: &str, ends: &Ends, allowed: &[&str]) {
    assert_eq!(ends.pending, 0, "{name}: {ends:?}");
    assert!(ends.granted <= 20, "{name}: {ends:?}");
    assert!(
        ends.errors.keys().all(|e| allowed.contains(&e.as_str())),
        "{name}: {ends:?}"
    );
}

/// Regression: 250 ms before the clock's end, 1,000 `acquire(1)` futures on a
/// `RefreshPeriod` of 10 a second granted 20 and left 980 pending for good, even with
/// the clock at its end (the same on a keyed limiter, and for every other algorithm):
/// their retries lay past the end, where no alarm rings.
#[test]
fn a_wait_due_past_the_clocks_end_fails_instead_of_waiting_forever() {
    every(|name, run| {
        let (plain, keyed) = run(None);
        all_ended(&format!("{name}, plain"), &plain, &["PastClockEnd"]);
        all_ended(&format!("{name}, keyed"), &keyed, &["PastClockEnd"]);
        assert!(plain.granted > 0 && keyed.granted > 0, "{name}");
    });
}

/// The same with timeouts longer than what is left of the clock: each wait ends, as
/// never or as a timeout.
#[test]
fn a_timed_wait_due_past_the_clocks_end_ends() {
    every(|name, run| {
        for timeout in [Duration::MAX, Duration::from_secs(3_600)] {
            let (plain, keyed) = run(Some(timeout));
            let allowed = ["PastClockEnd", "TimedOut"];
            all_ended(&format!("{name}, plain, {timeout:?}"), &plain, &allowed);
            all_ended(&format!("{name}, keyed, {timeout:?}"), &keyed, &allowed);
        }
    });
}

/// A wait that is not due past the end is not failed: 250 ms before the end a sliding
/// log of 10 per 100 ms grants its next permits within the clock.
#[test]
fn a_wait_due_before_the_clocks_end_is_granted() {
    let clock = near_the_end();
    let limiter = Limiter::with_clock(
        SlidingLog::new(10, Duration::from_millis(100)).unwrap(),
        clock.clone(),
    );
    clock.advance(Duration::from_millis(850));
    let waits = (0..20)
        .map(|_| -> Wait<'_> { Box::pin(limiter.acquire(1)) })
        .collect();
    let ends = run(waits, &clock);
    assert_eq!(ends.granted, 20, "{ends:?}");
}

/// Regression: a blocking wait due past the clock's end parked its thread for good.
#[test]
fn a_blocking_wait_due_past_the_clocks_end_fails() {
    let clock = near_the_end();
    let limiter = std::sync::Arc::new(Limiter::with_clock(
        RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap(),
        clock.clone(),
    ));
    clock.advance(Duration::from_millis(850));
    while limiter.reserve(1, Duration::MAX).is_ok() {}
    let (sender, receiver) = std::sync::mpsc::channel();
    for timeout in [None, Some(Duration::MAX)] {
        let limiter = limiter.clone();
        let sender = sender.clone();
        std::thread::spawn(move || {
            let ended = match timeout {
                None => limiter.acquire_blocking(1),
                Some(t) => limiter.acquire_blocking_timeout(1, t),
            };
            sender.send((timeout, ended)).unwrap();
        });
    }
    clock.set(Nanos::MAX);
    for _ in 0..2 {
        // Only a guard against hanging the suite: the outcome is decided on the
        // manual clock.
        let (timeout, ended) = receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("the blocking wait ended");
        match timeout {
            None => assert_eq!(ended, Err(AcquireError::PastClockEnd)),
            // Begun at the end, its saturated deadline has come too.
            Some(_) => assert!(
                matches!(
                    ended,
                    Err(AcquireError::PastClockEnd | AcquireError::TimedOut)
                ),
                "{ended:?}"
            ),
        }
    }
}

/// A denial that ends by a release still waits at the clock's end: a holder may yet
/// give its permit back.
#[test]
fn a_wait_for_a_release_at_the_clocks_end_still_waits() {
    use tollgate::algorithm::Concurrency;
    let clock = ManualClock::starting_at(Nanos::MAX);
    let limiter = Limiter::with_clock(Concurrency::new(1).unwrap(), clock.clone());
    limiter.try_acquire(1).unwrap();
    let mut context = Context::from_waker(futures::task::noop_waker_ref());
    let mut wait = Box::pin(limiter.acquire(1));
    assert!(wait.as_mut().poll(&mut context).is_pending());
    limiter.refund(1);
    assert!(matches!(
        wait.as_mut().poll(&mut context),
        Poll::Ready(Ok(_))
    ));
}

/// `PastClockEnd` is never, as `Closed` is.
#[test]
fn past_the_clocks_end_is_never() {
    assert!(AcquireError::<std::convert::Infallible>::PastClockEnd.is_never());
    assert_eq!(
        AcquireError::<std::convert::Infallible>::PastClockEnd.to_string(),
        "the permits are due past the clock's end"
    );
}

/// Regression: through a memory store, 98 of 100 `acquire(1)` on a `SharedLimiter`
/// stayed pending past the clock's end too. A remote waiter now ends at the end at
/// the latest (the store decides by its own clock, so the queue only knows the wait
/// is past the end once its own clock is there).
#[cfg(feature = "store")]
#[test]
fn a_shared_wait_due_past_the_clocks_end_ends_at_the_end() {
    use tollgate::store::{MemoryStore, Rule, SharedLimiter};
    let ten = Quota::per_second(10).unwrap();
    let rules = [
        Rule::from(Gcra::new(ten)),
        Rule::from(SlidingLog::new(10, SECOND).unwrap()),
        Rule::from(FixedWindow::new(10, SECOND).unwrap()),
        Rule::from(RefreshPeriod::new(10, SECOND, Duration::ZERO).unwrap()),
    ];
    for rule in rules {
        let clock = near_the_end();
        let store = MemoryStore::with_clock(KeyedConfig::new(4), "end", clock.clone()).unwrap();
        let limiter = SharedLimiter::with_clock(store, rule.clone(), clock.clone()).unwrap();
        clock.advance(Duration::from_millis(850));
        let waits = (0..100)
            .map(|_| -> Wait<'_> {
                Box::pin(async {
                    limiter
                        .acquire("k", 1)
                        .await
                        .map_err(|e| e.map_source(|_| unreachable!()))
                })
            })
            .collect();
        let ends = run(waits, &clock);
        all_ended(&format!("{rule:?}"), &ends, &["PastClockEnd"]);
    }
}
