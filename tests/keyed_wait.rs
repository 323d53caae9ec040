//! Waiting on a `KeyedLimiter`: one FIFO queue per key, through the same queue and
//! alarms as a `Limiter`, on a `ManualClock`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::noop_waker;
use tollgate::algorithm::Gcra;
use tollgate::time::ManualClock;
use tollgate::{AcquireError, Denied, KeyedConfig, KeyedLimiter, PermitSource, Quota};

type Keyed = KeyedLimiter<String, Gcra, ManualClock>;

/// 10 a second with a burst of 1: one permit every 100 ms per key.
fn keyed() -> (Keyed, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap().burst(1).unwrap();
    let limiter =
        KeyedLimiter::with_clock(Gcra::new(quota), KeyedConfig::new(100), clock.clone()).unwrap();
    (limiter, clock)
}

fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = noop_waker();
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn waiters_on_one_key_are_served_in_arrival_order() {
    let (limiter, clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let mut first = Box::pin(limiter.acquire("ann", 1));
    let mut second = Box::pin(limiter.acquire("ann", 1));
    assert!(poll(&mut first).is_pending());
    assert!(poll(&mut second).is_pending());
    assert_eq!(limiter.waiters(), 2);
    clock.advance(ms(100));
    assert_eq!(poll(&mut first), Poll::Ready(Ok(ms(100))));
    assert!(
        poll(&mut second).is_pending(),
        "the second waits its own 100 ms"
    );
    clock.advance(ms(100));
    assert_eq!(poll(&mut second), Poll::Ready(Ok(ms(200))));
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn waiting_on_one_key_holds_up_no_other() {
    let (limiter, _clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let mut waiting = Box::pin(limiter.acquire("ann", 1));
    assert!(poll(&mut waiting).is_pending());
    assert!(limiter.try_acquire("bob", 1).is_ok());
    assert_eq!(
        poll(&mut Box::pin(limiter.acquire("cy", 1))),
        Poll::Ready(Ok(Duration::ZERO))
    );
}

/// While someone waits on a key, `try_acquire` for it does not overtake them, even
/// once the permit is due: the waiter was first.
#[test]
fn try_acquire_does_not_overtake_a_waiter_on_its_key() {
    let (limiter, clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let mut waiting = Box::pin(limiter.acquire("ann", 1));
    assert!(poll(&mut waiting).is_pending());
    let denied = limiter.try_acquire("ann", 1).unwrap_err();
    assert!(denied.is_limited());
    clock.advance(ms(100));
    assert!(poll(&mut waiting).is_ready());
    clock.advance(ms(100));
    assert!(
        limiter.try_acquire("ann", 1).is_ok(),
        "the queue is gone with its waiter"
    );
}

#[test]
fn a_timeout_known_to_be_too_short_fails_at_once() {
    let (limiter, _clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let waited = poll(&mut limiter.acquire_timeout("ann", 1, ms(50)));
    assert_eq!(waited, Poll::Ready(Err(AcquireError::TimedOut)));
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn a_cancelled_waiter_gives_its_booking_back_to_the_next() {
    let (limiter, clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let mut first = Box::pin(limiter.acquire("ann", 1));
    let mut second = Box::pin(limiter.acquire("ann", 1));
    assert!(poll(&mut first).is_pending());
    assert!(poll(&mut second).is_pending());
    drop(first); // it had booked the permit due at 100 ms
    clock.advance(ms(100));
    assert_eq!(poll(&mut second), Poll::Ready(Ok(ms(100))));
}

#[test]
fn more_than_the_capacity_is_never_and_fails_at_once() {
    let (limiter, _clock) = keyed();
    let waited = poll(&mut limiter.acquire("ann", 2));
    assert!(matches!(waited, Poll::Ready(Err(AcquireError::Insufficient(i))) if i.capacity() == 1));
}

#[test]
fn close_fails_waiters_and_later_calls() {
    let (limiter, _clock) = keyed();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    let mut waiting = Box::pin(limiter.acquire("ann", 1));
    assert!(poll(&mut waiting).is_pending());
    limiter.close();
    assert_eq!(poll(&mut waiting), Poll::Ready(Err(AcquireError::Closed)));
    assert_eq!(
        poll(&mut limiter.acquire("bob", 1)),
        Poll::Ready(Err(AcquireError::Closed))
    );
    assert_eq!(limiter.try_acquire("bob", 1), Err(Denied::Closed));
    // Regression: a booking ahead went through on a closed keyed limiter, as it
    // does not on a closed `Limiter`.
    assert_eq!(limiter.reserve("carl", 1, ms(500)), Err(Denied::Closed));
}

#[test]
fn clones_share_the_table_and_the_queues() {
    let (limiter, clock) = keyed();
    let other = limiter.clone();
    assert!(limiter.try_acquire("ann", 1).is_ok());
    assert!(other.try_acquire("ann", 1).is_err());
    let mut waiting = Box::pin(other.acquire("ann", 1));
    assert!(poll(&mut waiting).is_pending());
    assert_eq!(limiter.waiters(), 1);
    clock.advance(ms(100));
    assert!(poll(&mut waiting).is_ready());
}

/// As a permit source keyed by `str` (its keys are `String`s): decided at once, and
/// waiting through the key's queue.
#[test]
fn a_keyed_limiter_is_a_permit_source_by_borrowed_key() {
    let (limiter, clock) = keyed();
    assert!(matches!(
        PermitSource::<str>::decide_now(&limiter, "ann", 1),
        Some(Ok(Ok(_)))
    ));
    assert!(matches!(
        PermitSource::<str>::decide_now(&limiter, "ann", 1),
        Some(Ok(Err(_)))
    ));
    let mut waiting = PermitSource::<str>::wait(&limiter, "ann", 1, None);
    assert!(poll(&mut waiting).is_pending());
    clock.advance(ms(100));
    // A rate's grant holds nothing to give back.
    assert!(matches!(poll(&mut waiting), Poll::Ready(Ok(release)) if !release.holds()));
    let api = limiter.clone().for_key("bob");
    assert!(matches!(api.decide_now(&(), 1), Some(Ok(Ok(_)))));
}

/// Regression: a keyed `RefreshPeriod` of 10 a second, its key started 1.1 s before
/// the clock's end (so its second cycle starts 100 ms before the end and its third
/// after it), granted every `acquire(1)` of 1,000 where 20 is the most: bookings in
/// cycles past the end had a saturated wait, due at the end at once.
#[test]
fn a_keyed_refresh_period_grants_nothing_past_the_clocks_end() {
    use tollgate::algorithm::RefreshPeriod;
    use tollgate::time::Nanos;

    let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 1_100_000_000));
    let refresh = RefreshPeriod::new(10, Duration::from_secs(1), Duration::ZERO).unwrap();
    let limiter: KeyedLimiter<u32, RefreshPeriod, ManualClock> =
        KeyedLimiter::with_clock(refresh, KeyedConfig::new(4), clock.clone()).unwrap();
    assert!(
        limiter.try_acquire(&7, 1).is_ok(),
        "the key's cycles start now"
    );
    clock.advance(ms(850));
    let mut waiting: Vec<_> = (0..1_000)
        .map(|_| Box::pin(limiter.acquire(&7, 1)))
        .collect();
    let mut granted = 1;
    for round in 0..3 {
        waiting.retain_mut(|future| match poll(future) {
            Poll::Ready(Ok(_)) => {
                granted += 1;
                false
            }
            Poll::Ready(Err(_)) => false,
            Poll::Pending => true,
        });
        if round == 0 {
            clock.set(Nanos::MAX);
        }
    }
    assert_eq!(granted, 20, "{} still waiting", waiting.len());
    assert_eq!(limiter.len(), 1);
}
