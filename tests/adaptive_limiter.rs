//! `AdaptiveLimiter`: permits that follow a limit algorithm, in its three modes, on a
//! `ManualClock`.
//!
//! Netflix's `SimpleLimiterTest`, `BlockingLimiterTest` and `LifoBlockingLimiterTest`
//! are ported where they apply: their `SettableLimit` is [`Settable`] (applied by the
//! next outcome or `tick`, where upstream's notifies at once), their timed waits are
//! steps of the manual clock, and their threads are futures polled in a fixed order.
#![cfg(feature = "adaptive")]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tollgate::adaptive::limit::{
    AimdLimit, Gradient2Limit, GradientLimit, LimitAlgorithm, VegasLimit, WindowedLimit,
};
use tollgate::adaptive::{
    AdaptiveAcquire, AdaptiveLimiter, AdaptivePermit, Sample, Timing, WhenLimited,
};
use tollgate::observe::{DenyReason, Event, EventKind, Events, Outcome};
use tollgate::time::{Clock, ManualClock, MonotonicClock};
use tollgate::{AcquireError, ConfigError, PermitSource};

/// A limit set from outside, as upstream's `SettableLimit`.
struct Settable(Arc<AtomicU64>);

impl LimitAlgorithm for Settable {
    fn limit(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn on_sample(&mut self, _: Sample) -> u64 {
        self.limit()
    }
}

type Limiter = Arc<AdaptiveLimiter<Settable, ManualClock>>;
type Permit = AdaptivePermit<Settable, ManualClock>;

struct Setup {
    limiter: Limiter,
    limit: Arc<AtomicU64>,
    clock: ManualClock,
}

impl Setup {
    fn new(limit: u64, mode: WhenLimited) -> Setup {
        let shared = Arc::new(AtomicU64::new(limit));
        let clock = ManualClock::new();
        let limiter =
            AdaptiveLimiter::with_clock(Settable(Arc::clone(&shared)), mode, clock.clone())
                .unwrap();
        Setup {
            limiter: Arc::new(limiter),
            limit: shared,
            clock,
        }
    }

    /// Sets the limit and lets the limiter see it.
    fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
        self.limiter.tick();
    }

    fn acquire_n(&self, n: usize) -> Vec<Permit> {
        (0..n)
            .map(|_| self.limiter.try_acquire_owned().unwrap())
            .collect()
    }
}

fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    Pin::new(future).poll(&mut cx)
}

fn pending(limiter: &Limiter) -> AdaptiveAcquire<Settable, ManualClock> {
    let mut waiting = limiter.acquire();
    assert!(poll(&mut waiting).is_pending());
    waiting
}

fn lifo(backlog: usize, timeout_ms: u64) -> WhenLimited {
    WhenLimited::lifo(backlog, Duration::from_millis(timeout_ms)).unwrap()
}

fn fifo(timeout_ms: u64) -> WhenLimited {
    WhenLimited::fifo(Duration::from_millis(timeout_ms)).unwrap()
}

fn assert_send_sync<T: Send + Sync + 'static>() {}

#[test]
fn the_limiter_its_permit_and_future_cross_threads() {
    assert_send_sync::<AdaptiveLimiter>();
    assert_send_sync::<AdaptivePermit>();
    assert_send_sync::<AdaptiveLimiter<AimdLimit, ManualClock>>();
    fn send<T: Send + 'static>() {}
    send::<AdaptiveAcquire>();
}

mod simple_limiter {
    //! Upstream's `SimpleLimiterTest` (fail fast).
    use super::*;

    #[test]
    fn use_limiter_capacity_until_total_limit() {
        let setup = Setup::new(10, WhenLimited::FailFast);
        let _held = setup.acquire_n(10);
        assert!(setup.limiter.try_acquire().unwrap_err().is_limited());
        assert_eq!(setup.limiter.inflight(), 10);
    }

    #[test]
    fn release_limit() {
        let setup = Setup::new(10, WhenLimited::FailFast);
        let mut held = setup.acquire_n(10);
        assert_eq!(setup.limiter.inflight(), 10);
        assert!(setup.limiter.try_acquire().is_err());
        held.remove(0).success();
        assert_eq!(setup.limiter.inflight(), 9);
        held.push(setup.limiter.try_acquire_owned().unwrap());
        assert_eq!(setup.limiter.inflight(), 10);
    }

    /// `testSimpleBypassLimiter`: with a bypass for "admin", ten "live" requests
    /// fill the limit of 10, one at a time; then "live" is refused and "admin"
    /// still goes, ten times, without counting.
    #[test]
    fn simple_bypass_limiter() {
        let shared = Arc::new(AtomicU64::new(10));
        let limiter = AdaptiveLimiter::with_clock(
            Settable(Arc::clone(&shared)),
            WhenLimited::FailFast,
            ManualClock::new(),
        )
        .unwrap()
        .with_bypass(|context: &str| context == "admin");
        let limiter = Arc::new(limiter);
        let mut held = Vec::new();
        for i in 0..10 {
            held.push(limiter.try_acquire_owned_for("live").unwrap());
            assert_eq!(limiter.inflight(), i + 1);
        }
        for _ in 0..10 {
            assert!(limiter.try_acquire_for("live").is_err());
            let admin = limiter.try_acquire_owned_for("admin").unwrap();
            assert!(admin.is_bypass());
            held.push(admin);
        }
        assert_eq!(limiter.inflight(), 10);
    }

    /// `testSimpleBypassLimiterDefault`: without a bypass, no context is let
    /// through past the limit.
    #[test]
    fn simple_bypass_limiter_default() {
        let setup = Setup::new(10, WhenLimited::FailFast);
        let mut held = Vec::new();
        for i in 0..10 {
            held.push(setup.limiter.try_acquire_owned_for("live").unwrap());
            assert_eq!(setup.limiter.inflight(), i + 1);
        }
        assert!(setup.limiter.try_acquire_for("live").is_err());
        assert!(setup.limiter.try_acquire_for("admin").is_err());
    }

    /// A bypassed request's outcome feeds nothing and its end gives nothing back;
    /// a context of another type than the predicate's is limited as any request.
    #[test]
    fn a_bypassed_request_feeds_nothing_and_other_context_types_are_limited() {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(2)
            .build()
            .unwrap();
        let limiter = AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, ManualClock::new())
            .unwrap()
            .with_bypass(|path: &String| path == "/health");
        let health = "/health".to_string();
        limiter.try_acquire_for(&health).unwrap().dropped();
        limiter.bypass().success();
        assert_eq!(limiter.limit(), 2, "no sample");
        assert_eq!(limiter.available_permits(), 2);
        // A `str` is not a `String`: no bypass.
        let counted = limiter.try_acquire_for("/health").unwrap();
        assert!(!counted.is_bypass());
        assert_eq!(limiter.inflight(), 1);
        counted.dropped();
        assert_eq!(limiter.limit(), 1, "2 × 0.9, a sample");
    }

    #[test]
    fn acquire_in_fail_fast_mode_never_waits() {
        let setup = Setup::new(1, WhenLimited::FailFast);
        let _held = setup.limiter.try_acquire().unwrap();
        let refused = futures::executor::block_on(setup.limiter.acquire());
        assert_eq!(refused.unwrap_err(), AcquireError::TimedOut);
        assert_eq!(
            setup.limiter.acquire_blocking().unwrap_err(),
            AcquireError::TimedOut
        );
        assert_eq!(setup.limiter.waiters(), 0);
    }
}

mod blocking_limiter {
    //! Upstream's `BlockingLimiterTest` (FIFO waits).
    use super::*;

    /// `test`: the limit drops from 10 to 1 while 10 are held; once all are
    /// released, one acquire goes at once.
    #[test]
    fn a_lowered_limit_still_admits_once_all_are_released() {
        let setup = Setup::new(10, fifo(1_000));
        let held = setup.acquire_n(10);
        setup.set_limit(1);
        for permit in held {
            permit.success();
        }
        let mut next = setup.limiter.acquire();
        let Poll::Ready(Ok(_next)) = poll(&mut next) else {
            panic!("admitted at once")
        };
        assert_eq!(setup.limiter.available_permits(), 0);
    }

    /// `testMultipleBlockedThreads`: 8 callers on a limit of 1, each ending at once,
    /// all get through.
    #[test]
    fn blocked_callers_all_get_through_one_at_a_time() {
        let setup = Setup::new(1, fifo(1_000));
        let first = setup.limiter.try_acquire().unwrap();
        let mut waiting: Vec<_> = (0..8).map(|_| pending(&setup.limiter)).collect();
        first.success();
        let mut order = Vec::new();
        while order.len() < 8 {
            let ready = (0..waiting.len())
                .find(|&i| !order.contains(&i) && granted_and_ended(poll(&mut waiting[i])))
                .expect("one waiter granted per release");
            // Its permit was ended at once, handing it to the next.
            order.push(ready);
        }
        assert_eq!(order, (0..8).collect::<Vec<_>>(), "FIFO");
        assert_eq!(setup.limiter.inflight(), 0);
    }

    /// `testTimeout`: with the one permit held, the next acquire times out after
    /// 50 ms, not before.
    #[test]
    fn a_wait_times_out_at_its_timeout() {
        let setup = Setup::new(1, fifo(50));
        let _held = setup.limiter.try_acquire().unwrap();
        let mut waiting = pending(&setup.limiter);
        setup.clock.advance(Duration::from_millis(49));
        assert!(poll(&mut waiting).is_pending());
        setup.clock.advance(Duration::from_millis(1));
        assert!(matches!(
            poll(&mut waiting),
            Poll::Ready(Err(AcquireError::TimedOut))
        ));
    }

    /// `testNoTimeout`: a caller that is never released keeps waiting (up to the
    /// mode's timeout, an hour at most).
    #[test]
    fn a_wait_without_release_keeps_waiting_until_its_timeout() {
        let setup = Setup::new(1, WhenLimited::fifo(WhenLimited::MAX_TIMEOUT).unwrap());
        let _held = setup.limiter.try_acquire().unwrap();
        let mut waiting = pending(&setup.limiter);
        setup.clock.advance(Duration::from_secs(1));
        assert!(poll(&mut waiting).is_pending());
        setup.clock.advance(WhenLimited::MAX_TIMEOUT);
        assert!(poll(&mut waiting).is_ready());
    }

    /// `failOnHighTimeout`: a day is refused, as a typed error.
    #[test]
    fn a_timeout_over_an_hour_is_refused() {
        let day = Duration::from_secs(86_400);
        assert!(matches!(
            WhenLimited::fifo(day),
            Err(ConfigError::TooLong {
                parameter: "timeout",
                ..
            })
        ));
        let by_hand = WhenLimited::Fifo { timeout: day };
        let limit = Arc::new(AtomicU64::new(1));
        assert!(AdaptiveLimiter::with_clock(Settable(limit), by_hand, ManualClock::new()).is_err());
    }

    #[test]
    fn a_raised_limit_lets_fifo_waiters_through_in_order() {
        let setup = Setup::new(2, fifo(1_000));
        let _held = setup.acquire_n(2);
        let mut waiting: Vec<_> = (0..3).map(|_| pending(&setup.limiter)).collect();
        setup.set_limit(4);
        let Poll::Ready(Ok(_first)) = poll(&mut waiting[0]) else {
            panic!("the first waiter goes")
        };
        let Poll::Ready(Ok(_second)) = poll(&mut waiting[1]) else {
            panic!("the second waiter goes")
        };
        assert!(poll(&mut waiting[2]).is_pending());
        assert_eq!(setup.limiter.inflight(), 4);
    }
}

/// Whether `polled` is a grant; its permit is ended at once, as a success.
fn granted_and_ended(polled: Poll<Result<Permit, AcquireError>>) -> bool {
    match polled {
        Poll::Ready(Ok(permit)) => {
            permit.success();
            true
        }
        Poll::Ready(Err(error)) => panic!("refused: {error}"),
        Poll::Pending => false,
    }
}

mod lifo_blocking_limiter {
    //! Upstream's `LifoBlockingLimiterTest`: a limit of 4, a backlog of 10, a
    //! backlog timeout of 1 s.
    use super::*;

    fn setup() -> Setup {
        Setup::new(4, lifo(10, 1_000))
    }

    #[test]
    fn block_when_full_and_timeout() {
        let setup = setup();
        let _held = setup.acquire_n(4);
        let mut waiting = pending(&setup.limiter);
        setup.clock.advance(Duration::from_millis(999));
        assert!(poll(&mut waiting).is_pending());
        setup.clock.advance(Duration::from_millis(1));
        assert!(matches!(
            poll(&mut waiting),
            Poll::Ready(Err(AcquireError::TimedOut))
        ));
        assert_eq!(setup.limiter.waiters(), 0);
    }

    #[test]
    fn unblock_when_full_before_timeout() {
        let setup = setup();
        let mut held = setup.acquire_n(4);
        let mut waiting = pending(&setup.limiter);
        setup.clock.advance(Duration::from_millis(250));
        held.remove(0).success();
        match poll(&mut waiting) {
            Poll::Ready(Ok(permit)) => assert_eq!(permit.start(), Some(setup.clock.now())),
            other => panic!("not granted: {:?}", other.map(|r| r.map(drop))),
        }
    }

    #[test]
    fn reject_when_backlog_size_reached() {
        let setup = setup();
        let _held = setup.acquire_n(4);
        let _backlog: Vec<_> = (0..10).map(|_| pending(&setup.limiter)).collect();
        let mut fifteenth = setup.limiter.acquire();
        assert!(matches!(
            poll(&mut fifteenth),
            Poll::Ready(Err(AcquireError::QueueFull { capacity: 10 }))
        ));
    }

    #[test]
    fn adapt_when_limit_increases() {
        let setup = setup();
        let _held = setup.acquire_n(4);
        setup.set_limit(5);
        let mut next = setup.limiter.acquire();
        assert!(matches!(poll(&mut next), Poll::Ready(Ok(_))));
    }

    #[test]
    fn adapt_when_limit_decreases() {
        let setup = setup();
        let mut held = setup.acquire_n(4);
        setup.set_limit(3);
        held.remove(0).success();
        let mut next = pending(&setup.limiter);
        setup.clock.advance(Duration::from_secs(1));
        assert!(matches!(
            poll(&mut next),
            Poll::Ready(Err(AcquireError::TimedOut))
        ));
    }

    /// `verifyFifoOrder` (which checks LIFO order): 5 waiters queued in turn, the 4
    /// held permits released one by one; each waiter ends its request at once.
    #[test]
    fn newest_waiter_first() {
        let setup = setup();
        let first_batch = setup.acquire_n(4);
        let mut waiting: Vec<_> = (0..5).map(|_| pending(&setup.limiter)).collect();
        let mut values = Vec::new();
        for permit in first_batch {
            setup.clock.advance(Duration::from_millis(100));
            permit.success();
            // Each success hands the permit to the newest waiter, whose success
            // hands it on.
            while let Some(i) = (0..5)
                .rev()
                .find(|&i| !values.contains(&i) && granted_and_ended(poll(&mut waiting[i])))
            {
                values.push(i);
            }
        }
        assert_eq!(values, [4, 3, 2, 1, 0]);
        assert_eq!(setup.limiter.inflight(), 0);
    }

    /// `timeoutAcquireRaceCondition`: a permit freed as waiters time out is never
    /// lost. Here the release and the timeouts fall on the same instant, and the
    /// granted waiter is dropped before it is polled (its caller gave up).
    #[test]
    fn a_permit_granted_as_waiters_time_out_is_not_lost() {
        let setup = Setup::new(4, lifo(1_000, 10));
        let _three = setup.acquire_n(3);
        for _round in 0..10 {
            let one = setup.limiter.try_acquire().unwrap();
            let mut waiting: Vec<_> = (0..10).map(|_| pending(&setup.limiter)).collect();
            setup.clock.advance(Duration::from_millis(10));
            one.success();
            let granted = waiting
                .iter_mut()
                .map(poll)
                .filter(|polled| matches!(polled, Poll::Ready(Ok(_))))
                .count();
            assert_eq!(granted, 0, "all timed out at the same instant");
            drop(waiting);
            assert_eq!(setup.limiter.inflight(), 3);

            let one = setup.limiter.try_acquire().unwrap();
            let waiting: Vec<_> = (0..10).map(|_| pending(&setup.limiter)).collect();
            one.success(); // granted to the newest, which is dropped unpolled
            drop(waiting);
            assert_eq!(setup.limiter.inflight(), 3);
            assert_eq!(setup.limiter.available_permits(), 1);
        }
    }

    #[test]
    fn a_cancelled_waiter_leaves_room_in_the_backlog() {
        let setup = Setup::new(1, lifo(2, 1_000));
        let _held = setup.limiter.try_acquire().unwrap();
        let first = pending(&setup.limiter);
        let _second = pending(&setup.limiter);
        let mut third = setup.limiter.acquire();
        assert!(matches!(
            poll(&mut third),
            Poll::Ready(Err(AcquireError::QueueFull { .. }))
        ));
        drop(first);
        assert_eq!(setup.limiter.waiters(), 1);
        let _third = pending(&setup.limiter);
    }

    #[test]
    fn blocking_acquire_is_served_by_a_release() {
        let setup = Setup::new(1, lifo(4, 60_000));
        let held = setup.limiter.try_acquire().unwrap();
        let waiter = {
            let limiter = Arc::clone(&setup.limiter);
            std::thread::spawn(move || limiter.acquire_blocking().map(AdaptivePermit::success))
        };
        while setup.limiter.waiters() == 0 {
            std::thread::yield_now();
        }
        held.success();
        waiter.join().unwrap().unwrap();
        assert_eq!(setup.limiter.inflight(), 0);
    }
}

mod shrink_and_grow {
    use super::*;

    #[test]
    fn shrink_below_inflight_then_release_all_leaves_exactly_the_new_limit() {
        for mode in [WhenLimited::FailFast, fifo(1_000), lifo(8, 1_000)] {
            let setup = Setup::new(8, mode);
            let held = setup.acquire_n(8);
            setup.set_limit(3);
            assert_eq!(setup.limiter.available_permits(), 0);
            for (i, permit) in held.into_iter().enumerate() {
                if i % 2 == 0 {
                    permit.success();
                } else {
                    drop(permit);
                }
            }
            assert_eq!(setup.limiter.inflight(), 0);
            assert_eq!(setup.limiter.limit(), 3);
            assert_eq!(setup.limiter.available_permits(), 3);
            let again = setup.acquire_n(3);
            assert!(setup.limiter.try_acquire().is_err());
            drop(again);
        }
    }

    #[test]
    fn waiters_see_a_shrink_before_the_permit_that_caused_it_is_returned() {
        // The outcome lowers the limit, then gives the permit back: the waiter
        // behind stays waiting, as 2 are still held under a limit of 2.
        let setup = Setup::new(3, fifo(1_000));
        let mut held = setup.acquire_n(3);
        let mut waiting = pending(&setup.limiter);
        setup.limit.store(2, Ordering::Relaxed);
        held.pop().unwrap().success();
        assert!(poll(&mut waiting).is_pending());
        held.pop().unwrap().success();
        assert!(matches!(poll(&mut waiting), Poll::Ready(Ok(_))));
    }
}

/// AIMD under a simulated overload: a backend that serves 5 requests at once drops
/// what comes beyond. Offered far more than that, the limit falls from 20 towards
/// the backend's capacity; once the backend recovers it grows back to its maximum.
#[test]
fn aimd_shrinks_under_overload_and_regrows() {
    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(20)
        .max_limit(30)
        .backoff_ratio(0.5)
        .build()
        .unwrap();
    let limiter =
        Arc::new(AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap());
    // One round: admit as many as the limit allows (of 100 offered), run them for
    // 10 ms, end them as the backend answers.
    let round = |capacity: usize| {
        let admitted: Vec<_> = (0..100).map_while(|_| limiter.try_acquire().ok()).collect();
        clock.advance(Duration::from_millis(10));
        for (i, permit) in admitted.into_iter().enumerate() {
            if i < capacity {
                permit.success();
            } else {
                permit.dropped();
            }
        }
        limiter.limit()
    };

    let overloaded: Vec<u64> = (0..20).map(|_| round(5)).collect();
    assert!(
        overloaded[0] < 20,
        "the first overloaded round shrinks the limit"
    );
    assert!(
        overloaded.iter().skip(5).all(|&limit| limit <= 10),
        "held near the backend's capacity: {overloaded:?}"
    );
    let recovered: Vec<u64> = (0..40).map(|_| round(usize::MAX)).collect();
    assert_eq!(*recovered.last().unwrap(), 30, "regrown: {recovered:?}");
    assert!(recovered.windows(2).all(|w| w[0] <= w[1]), "{recovered:?}");
    assert_eq!(limiter.inflight(), 0);
    assert_eq!(limiter.available_permits(), 30);
}

#[test]
fn events_report_limits_outcomes_and_rejections() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("backend");
    let _subscription = events.subscribe({
        let seen = Arc::clone(&seen);
        move |event: &Event<'_>| seen.lock().unwrap().push((event.permits, event.kind))
    });
    let limit = Arc::new(AtomicU64::new(2));
    let clock = ManualClock::new();
    let limiter = Arc::new(
        AdaptiveLimiter::with_clock(Settable(Arc::clone(&limit)), lifo(1, 100), clock.clone())
            .unwrap()
            .with_events(events),
    );
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    let mut waiting = pending(&limiter);
    let mut full = limiter.acquire();
    assert!(poll(&mut full).is_ready());
    clock.advance(Duration::from_millis(100));
    assert!(poll(&mut waiting).is_ready());
    limit.store(1, Ordering::Relaxed);
    clock.advance(Duration::from_millis(5));
    a.dropped();
    drop(b);

    let ms = Duration::from_millis;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            // The initial limit, reported as events are attached.
            (
                0,
                EventKind::LimitChanged {
                    previous: 0,
                    limit: 2
                }
            ),
            (1, EventKind::Admitted),
            (1, EventKind::Started { inflight: 1 }),
            (1, EventKind::Admitted),
            (1, EventKind::Started { inflight: 2 }),
            (
                1,
                EventKind::Denied {
                    reason: DenyReason::QueueFull,
                    retry_after: None
                }
            ),
            (
                1,
                EventKind::Denied {
                    reason: DenyReason::TimedOut,
                    retry_after: None
                }
            ),
            (
                0,
                EventKind::LimitChanged {
                    previous: 2,
                    limit: 1
                }
            ),
            (
                1,
                EventKind::Finished {
                    outcome: Outcome::Dropped,
                    rtt: ms(105),
                    inflight: 1
                }
            ),
            (
                1,
                EventKind::Finished {
                    outcome: Outcome::Ignored,
                    rtt: ms(105),
                    inflight: 0
                }
            ),
        ]
    );
}

/// A permit granted to a waiter reports its start too, and a limiter without
/// events reports nothing and reads no clock for an algorithm that needs none.
#[test]
fn events_report_waiters_starting() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("backend");
    let _subscription = events.subscribe({
        let seen = Arc::clone(&seen);
        move |event: &Event<'_>| seen.lock().unwrap().push(event.kind)
    });
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(1)
        .timeout(Duration::MAX)
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let limiter = Arc::new(
        AdaptiveLimiter::with_clock(aimd, lifo(1, 100), clock.clone())
            .unwrap()
            .with_events(events),
    );
    let held = limiter.try_acquire().unwrap();
    let mut waiting = limiter.acquire();
    assert!(poll(&mut waiting).is_pending());
    held.ignore();
    let Poll::Ready(Ok(permit)) = poll(&mut waiting) else {
        panic!("granted on release")
    };
    // Events need the time, whatever the algorithm: `Finished` reports it.
    assert_eq!(permit.start(), Some(clock.now()));
    assert_eq!(
        seen.lock().unwrap()[1..],
        [
            EventKind::Admitted,
            EventKind::Started { inflight: 1 },
            EventKind::Finished {
                outcome: Outcome::Ignored,
                rtt: Duration::ZERO,
                inflight: 1
            },
            EventKind::Waited {
                wait: Duration::ZERO
            },
            EventKind::Started { inflight: 1 },
        ]
    );
}

/// With events attached, the limit and in-flight gauges hold values from the
/// start: the initial limit when attached, the in-flight count at each admission.
#[cfg(feature = "metrics")]
#[test]
fn metrics_report_the_initial_limit_and_inflight_at_admission() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let events = Events::new("db");
    let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
    let setup = Setup::new(3, WhenLimited::FailFast);
    let limiter = Arc::new(Arc::into_inner(setup.limiter).unwrap().with_events(events));
    let gauge = |name: &str| {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, _, _, _)| key.key().name() == name)
            .map(|(_, _, _, value)| value)
    };
    assert_eq!(
        gauge("tollgate_adaptive_limit"),
        Some(DebugValue::Gauge(3.0.into()))
    );
    let _a = limiter.try_acquire().unwrap();
    let _b = limiter.try_acquire().unwrap();
    assert_eq!(
        gauge("tollgate_inflight"),
        Some(DebugValue::Gauge(2.0.into()))
    );
}

#[cfg(feature = "metrics")]
#[test]
fn metrics_record_the_limit_inflight_and_outcomes() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let events = Events::new("db");
    let _metrics = metrics::with_local_recorder(&recorder, || events.record_metrics());
    let setup = Setup::new(3, WhenLimited::FailFast);
    let limiter = Arc::new(Arc::into_inner(setup.limiter).unwrap().with_events(events));
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    let _c = limiter.try_acquire().unwrap();
    limiter.try_acquire().unwrap_err();
    setup.limit.store(2, Ordering::Relaxed);
    setup.clock.advance(Duration::from_millis(20));
    a.success();
    b.dropped();

    // One snapshot: taking one resets gauges and histograms.
    let snapshot = snapshotter.snapshot().into_vec();
    let value = |name: &str, label: Option<(&str, &str)>| {
        snapshot
            .iter()
            .find(|(key, _, _, _)| {
                let key = key.key();
                key.name() == name
                    && label
                        .is_none_or(|(k, v)| key.labels().any(|l| l.key() == k && l.value() == v))
            })
            .map(|(_, _, _, value)| value)
    };
    assert_eq!(
        value("tollgate_adaptive_limit", None),
        Some(&DebugValue::Gauge(2.0.into()))
    );
    assert_eq!(
        value("tollgate_inflight", None),
        Some(&DebugValue::Gauge(1.0.into()))
    );
    for (outcome, count) in [("success", 1), ("dropped", 1), ("ignored", 0)] {
        assert_eq!(
            value("tollgate_finished_total", Some(("outcome", outcome))),
            Some(&DebugValue::Counter(count)),
            "{outcome}"
        );
    }
    assert_eq!(
        value("tollgate_denied_total", Some(("reason", "limited"))),
        Some(&DebugValue::Counter(1))
    );
    match value("tollgate_rtt_seconds", None) {
        Some(DebugValue::Histogram(values)) => {
            assert_eq!(
                values.iter().map(|v| v.into_inner()).collect::<Vec<_>>(),
                [0.02, 0.02]
            )
        }
        other => panic!("no rtt histogram: {other:?}"),
    }
}

#[test]
fn any_permit_source_consumer_accepts_it() {
    fn admit<P: PermitSource>(source: &P) -> Option<P::Permit> {
        match source.decide_now(&(), 1) {
            Some(Ok(Ok(grant))) => Some(grant.into_permit()),
            _ => None,
        }
    }
    let setup = Setup::new(1, WhenLimited::FailFast);
    let permit = admit(&setup.limiter).expect("admitted");
    assert!(admit(&setup.limiter).is_none());
    permit.success();
    assert!(admit(&setup.limiter).is_some());
}

#[test]
fn adaptive_events_read_as_words() {
    let changed = EventKind::LimitChanged {
        previous: 10,
        limit: 8,
    };
    assert_eq!(
        Event::new("db", 0, changed).to_string(),
        "db: limit 10 -> 8"
    );
    let finished = EventKind::Finished {
        outcome: Outcome::Dropped,
        rtt: Duration::from_millis(12),
        inflight: 3,
    };
    assert_eq!(
        Event::new("db", 1, finished).to_string(),
        "db: 1 permits finished (dropped) after 12ms, 3 in flight"
    );
}

/// The clock an AIMD limiter built the plain way times its requests on: a coarse
/// clock of 1 ms, since its timeout is seconds.
fn plain_aimd() -> AdaptiveLimiter<AimdLimit> {
    AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast).unwrap()
}

// The bug: `AdaptiveLimiter::new(AimdLimit::new(), ..)` timed every request on the
// precise clock (two time-stamp counter reads, 204 instructions a request against
// tokio's 129), though AIMD only compares the RTT with a timeout of 5 s.
#[test]
fn an_aimd_limiter_built_plainly_times_requests_on_the_coarse_clock() {
    assert_eq!(
        plain_aimd().timing(),
        Timing::Coarse(Duration::from_millis(1))
    );
    // In every mode, and boxed as the default type parameter has it.
    let lifo = WhenLimited::lifo(10, Duration::from_secs(1)).unwrap();
    for mode in [
        WhenLimited::FailFast,
        WhenLimited::fifo(Duration::from_secs(1)).unwrap(),
        lifo,
    ] {
        let boxed: Box<dyn LimitAlgorithm> = Box::new(AimdLimit::new());
        let limiter = AdaptiveLimiter::new(boxed, mode).unwrap();
        assert_eq!(limiter.timing(), Timing::Coarse(Duration::from_millis(1)));
    }
}

/// How a limiter built with `new` in fail-fast mode times `algorithm`'s requests.
fn timing_of<L: LimitAlgorithm>(algorithm: L) -> Timing {
    AdaptiveLimiter::new(algorithm, WhenLimited::FailFast)
        .unwrap()
        .timing()
}

#[test]
fn algorithms_that_learn_from_the_rtt_stay_on_the_precise_clock() {
    assert_eq!(timing_of(VegasLimit::new()), Timing::Clock);
    assert_eq!(timing_of(GradientLimit::new()), Timing::Clock);
    assert_eq!(timing_of(Gradient2Limit::new()), Timing::Clock);
    assert_eq!(
        timing_of(WindowedLimit::new(Gradient2Limit::new())),
        Timing::Clock
    );
    // An AIMD whose timeout is short enough that a millisecond matters.
    let short = AimdLimit::builder().timeout(Duration::from_millis(100));
    assert_eq!(timing_of(short.build().unwrap()), Timing::Clock);
    // And one without a timeout reads no clock at all.
    let drops_only = AimdLimit::builder().timeout(Duration::MAX);
    assert_eq!(timing_of(drops_only.build().unwrap()), Timing::Untimed);
}

#[test]
fn a_given_clock_times_requests_exactly_and_events_force_the_precise_clock() {
    let mode = WhenLimited::FailFast;
    // The way to force the precise clock: pass it.
    let precise = AdaptiveLimiter::with_clock(AimdLimit::new(), mode, MonotonicClock::new());
    assert_eq!(precise.unwrap().timing(), Timing::Clock);
    // A manual clock stays exact: the sample's start is the clock's reading.
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(1_234_567));
    let manual =
        Arc::new(AdaptiveLimiter::with_clock(AimdLimit::new(), mode, clock.clone()).unwrap());
    assert_eq!(manual.timing(), Timing::Clock);
    assert_eq!(
        manual.try_acquire_owned().unwrap().start(),
        Some(clock.now())
    );
    // Events report each request's RTT: timed exactly.
    let observed = plain_aimd().with_events(Events::new("backend"));
    assert_eq!(observed.timing(), Timing::Clock);
}

#[test]
fn a_coarse_start_is_on_the_limiters_timeline_and_never_ahead_of_it() {
    let limiter = Arc::new(plain_aimd());
    let permit = limiter.try_acquire_owned().unwrap();
    let start = permit.start().expect("timed");
    // The coarse clock lags its source by up to a resolution (more on a busy
    // machine), but reads the same timeline: never past the limiter's clock.
    assert!(start <= limiter.clock().now());
    permit.success();
    assert_eq!(limiter.inflight(), 0);
}
