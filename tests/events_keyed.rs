//! Events of a `KeyedLimiter`, as a `Limiter` reports them: every `try_acquire`,
//! `reserve` and wait with the permits asked, exact waits on a `ManualClock`, one hub
//! shared by clones and kept once attached. Also `acquire_blocking_timeout`.

mod common;

use common::events::{Log, Seen, denied, hub, limited, waited};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::noop_waker;
use tollgate::algorithm::{Concurrency, Gcra};
use tollgate::observe::{DenyReason, EventKind, Events};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{AcquireError, KeyedConfig, KeyedLimiter, PermitSource, Quota};

type Keyed = KeyedLimiter<String, Gcra, ManualClock>;

/// 10 a second per key with a burst of `burst`, on a manual clock.
fn keyed(burst: u64) -> (Keyed, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().burst(burst).unwrap();
    let limiter =
        KeyedLimiter::with_clock(Gcra::new(quota), KeyedConfig::new(100), clock.clone()).unwrap();
    (limiter, clock)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(&noop_waker()))
}

#[test]
fn try_acquire_reports_admitted_and_denied_with_the_permits_asked() {
    let (limiter, clock) = keyed(2);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    limiter.try_acquire("ann", 2).unwrap();
    limiter.try_acquire("ann", 1).unwrap_err();
    limiter.try_acquire("bob", 3).unwrap_err();
    clock.advance(ms(100));
    limiter.try_acquire("ann", 1).unwrap();
    let seen = |permits, kind| Seen {
        source: "per-user".to_owned(),
        key: None,
        permits,
        kind,
    };
    assert_eq!(
        log.all(),
        [
            seen(2, EventKind::Admitted),
            seen(1, limited(ms(100))),
            seen(3, denied(DenyReason::Insufficient)),
            seen(1, EventKind::Admitted),
        ]
    );
}

#[test]
fn reserve_reports_admitted_waited_and_denied() {
    let (limiter, _clock) = keyed(1);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    assert!(limiter.reserve("ann", 1, ms(0)).unwrap().is_immediate());
    assert_eq!(limiter.reserve("ann", 1, ms(500)).unwrap().wait(), ms(100));
    limiter.reserve("ann", 1, ms(50)).unwrap_err();
    let kinds = log.kinds();
    assert_eq!(kinds[..2], [EventKind::Admitted, waited(100)]);
    assert!(
        matches!(
            kinds[2],
            EventKind::Denied {
                reason: DenyReason::Limited,
                ..
            }
        ),
        "{kinds:?}"
    );
    assert_eq!(kinds.len(), 3);
}

#[test]
fn waits_report_admitted_waited_and_why_they_failed() {
    let (limiter, clock) = keyed(1);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    let mut at_once = limiter.acquire("ann", 1);
    assert_eq!(poll(&mut at_once), Poll::Ready(Ok(Duration::ZERO)));
    let mut queued = limiter.acquire("ann", 1);
    assert!(poll(&mut queued).is_pending());
    // Overtaking the waiter is denied, and reported.
    limiter.try_acquire("ann", 1).unwrap_err();
    let mut too_late = limiter.acquire_timeout("ann", 1, ms(50));
    assert_eq!(
        poll(&mut too_late),
        Poll::Ready(Err(AcquireError::TimedOut))
    );
    clock.advance(ms(100));
    assert_eq!(poll(&mut queued), Poll::Ready(Ok(ms(100))));
    let mut too_big = limiter.acquire("ann", 2);
    assert!(matches!(
        poll(&mut too_big),
        Poll::Ready(Err(AcquireError::Insufficient(_)))
    ));
    let kinds = log.kinds();
    assert_eq!(kinds[0], EventKind::Admitted);
    assert!(kinds[1].is_denied(), "{kinds:?}");
    assert_eq!(
        kinds[2..],
        [
            denied(DenyReason::TimedOut),
            waited(100),
            denied(DenyReason::Insufficient),
        ]
    );
}

#[test]
fn blocking_waits_and_permit_source_decisions_report_too() {
    let (limiter, _clock) = keyed(1);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    assert_eq!(limiter.acquire_blocking("ann", 1), Ok(Duration::ZERO));
    assert_eq!(
        limiter.acquire_blocking_timeout("ann", 1, ms(10)),
        Err(AcquireError::TimedOut)
    );
    let decided = PermitSource::<str>::decide_now(&limiter, "bob", 1);
    assert!(matches!(decided, Some(Ok(Ok(_)))));
    assert_eq!(
        log.kinds(),
        [
            EventKind::Admitted,
            denied(DenyReason::TimedOut),
            EventKind::Admitted,
        ]
    );
}

#[test]
fn a_closed_limiter_reports_its_denials() {
    let (limiter, _clock) = keyed(1);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    limiter.close();
    assert!(limiter.try_acquire("ann", 1).is_err());
    assert_eq!(
        limiter.acquire_blocking("ann", 1),
        Err(AcquireError::Closed)
    );
    assert_eq!(
        log.kinds(),
        [denied(DenyReason::Closed), denied(DenyReason::Closed)]
    );
}

#[test]
fn peek_refund_and_sweep_report_nothing() {
    let (limiter, clock) = keyed(1);
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    limiter.peek("ann", 1).unwrap();
    limiter.refund("ann", 1);
    clock.advance(ms(100));
    limiter.sweep();
    assert!(log.kinds().is_empty());
}

#[test]
fn clones_made_before_and_after_share_the_hub() {
    let (limiter, _clock) = keyed(1);
    let before = limiter.clone();
    let log = Log::default();
    let limiter = limiter.with_events(hub("per-user", &log));
    let after = limiter.clone();
    before.try_acquire("ann", 1).unwrap();
    after.try_acquire("bob", 1).unwrap();
    let mut waiting = before.acquire("ann", 1);
    assert!(poll(&mut waiting).is_pending());
    drop(waiting); // cancelled: reports nothing
    assert_eq!(before.events().map(Events::name), Some("per-user"));
    assert_eq!(after.events().map(Events::name), Some("per-user"));
    assert_eq!(log.kinds(), [EventKind::Admitted, EventKind::Admitted]);
}

#[test]
fn a_second_hub_changes_nothing_the_first_stays() {
    let (limiter, _clock) = keyed(1);
    let (first, second) = (Log::default(), Log::default());
    let limiter = limiter.with_events(hub("first", &first));
    let clone = limiter.clone().with_events(hub("second", &second));
    clone.try_acquire("ann", 1).unwrap();
    limiter.try_acquire("bob", 1).unwrap();
    assert_eq!(limiter.events().map(Events::name), Some("first"));
    assert_eq!(clone.events().map(Events::name), Some("first"));
    assert_eq!(first.kinds().len(), 2);
    assert!(second.kinds().is_empty());
}

#[test]
fn without_a_hub_or_a_listener_nothing_is_reported() {
    let (limiter, _clock) = keyed(1);
    assert!(limiter.events().is_none());
    limiter.try_acquire("ann", 1).unwrap();
    let events = Events::new("unheard");
    let limiter = limiter.with_events(events.clone());
    limiter.try_acquire("ann", 1).unwrap_err();
    // A listener subscribed later hears what comes after it only.
    let log = Log::default();
    events.subscribe(log.clone()).detach();
    limiter.try_acquire("bob", 1).unwrap();
    assert_eq!(log.kinds(), [EventKind::Admitted]);
}

// ---------------------------------------------------------------------------------
// acquire_blocking_timeout
// ---------------------------------------------------------------------------------

#[test]
fn acquire_blocking_timeout_fails_at_once_when_the_wait_is_known_to_be_longer() {
    let (limiter, clock) = keyed(1);
    limiter.try_acquire("ann", 1).unwrap();
    assert_eq!(
        limiter.acquire_blocking_timeout("ann", 1, ms(99)),
        Err(AcquireError::TimedOut)
    );
    assert_eq!(clock.now(), Nanos::ZERO, "no time had to pass");
    assert_eq!(limiter.waiters(), 0);
    assert_eq!(clock.pending_alarms(), 0);
    // Nothing was booked: the key's next permit is still due at 100 ms.
    assert_eq!(
        limiter.peek("ann", 1).unwrap_err().retry_after(),
        Some(ms(100))
    );
    // Other keys are not held up.
    assert_eq!(
        limiter.acquire_blocking_timeout("bob", 1, ms(0)),
        Ok(Duration::ZERO)
    );
}

#[test]
fn acquire_blocking_timeout_is_granted_when_the_wait_fits() {
    let (limiter, clock) = keyed(1);
    limiter.try_acquire("ann", 1).unwrap();
    let blocked = {
        let limiter = limiter.clone();
        std::thread::spawn(move || limiter.acquire_blocking_timeout("ann", 1, ms(150)))
    };
    while limiter.waiters() == 0 {
        std::thread::yield_now();
    }
    clock.advance(ms(100)); // rings the key's alarm
    // Granted within the timeout, having waited from the time it queued: a reading
    // taken after queueing could already be past the clock's move (regression).
    assert_eq!(blocked.join().unwrap(), Ok(ms(100)));
    assert_eq!(limiter.waiters(), 0);
    // The permit was taken at 100 ms: the next is due at 200 ms.
    assert_eq!(
        limiter.peek("ann", 1).unwrap_err().retry_after(),
        Some(ms(100))
    );
}

#[test]
fn acquire_blocking_timeout_ends_at_its_deadline_when_the_wait_is_unknown() {
    // A concurrency limit cannot tell when a permit comes back: wait to the deadline.
    let clock = ManualClock::new();
    let limiter: KeyedLimiter<String, Concurrency, ManualClock> = KeyedLimiter::with_clock(
        Concurrency::new(1).unwrap(),
        KeyedConfig::new(100),
        clock.clone(),
    )
    .unwrap();
    limiter.try_acquire("ann", 1).unwrap();
    let blocked = {
        let limiter = limiter.clone();
        std::thread::spawn(move || limiter.acquire_blocking_timeout("ann", 1, ms(30)))
    };
    while limiter.waiters() == 0 {
        std::thread::yield_now();
    }
    clock.advance(ms(30));
    assert_eq!(blocked.join().unwrap(), Err(AcquireError::TimedOut));
    assert_eq!(limiter.waiters(), 0);
}
