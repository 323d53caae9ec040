//! Waiting for permits under virtual time: FIFO fairness and the unfair mode, Guava's
//! prepay and Resilience4j's cycles through `acquire`, cancellation, timeouts, close,
//! the semaphore's and the leaky queue's waiting, and idle limiters costing no alarm.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::{ArcWake, waker};
use tollgate::algorithm::{
    Algorithm, Concurrency, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{AcquireError, Fairness};
use tollgate::{Denied, InsufficientCapacity, LeakyQueue, Limiter, Quota, Semaphore};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Count(AtomicUsize);

impl ArcWake for Count {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Count {
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Polls once with a waker that counts into `count`.
fn poll_with<F: Future + Unpin>(future: &mut F, count: &Arc<Count>) -> Poll<F::Output> {
    let waker = waker(Arc::clone(count));
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

/// Polls once, with a waker nobody looks at.
fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    poll_with(future, &Arc::default())
}

/// The outcome of a future that must be ready now.
fn ready<F: Future + Unpin>(future: &mut F) -> F::Output {
    match poll(future) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("expected the future to be ready"),
    }
}

fn gcra_limiter(per_second: u64, burst: u64) -> (Limiter<Gcra, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(per_second).unwrap().burst(burst).unwrap();
    (Limiter::with_clock(Gcra::new(quota), clock.clone()), clock)
}

/// Acquires `n` as one caller at a time would: waits, moving the clock to each alarm
/// the limiter sets (as Guava's stopwatch sleeps), and returns the time waited.
fn acquire_in_turn<A: Algorithm>(limiter: &Limiter<A, ManualClock>, n: u64) -> Duration {
    let clock = limiter.clock();
    let start = clock.now();
    let mut future = limiter.acquire(n);
    loop {
        match poll(&mut future) {
            Poll::Ready(waited) => {
                let waited = waited.expect("granted");
                assert_eq!(waited, clock.now().saturating_since(start));
                return waited;
            }
            Poll::Pending => {
                let at = clock
                    .next_alarm()
                    .expect("a pending waiter has an alarm set");
                assert!(clock.set(at));
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// FIFO fairness and the unfair mode
// ---------------------------------------------------------------------------------

#[test]
fn a_waiting_request_for_10_is_not_overtaken_by_later_requests_for_1() {
    // A sliding counter books nothing ahead: permits are free while the 10 waits.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(SlidingCounter::new(10, ms(1000)).unwrap(), clock.clone());
    limiter.try_acquire(5).unwrap();
    let mut big = limiter.acquire(10);
    assert!(poll(&mut big).is_pending());
    let mut smalls: Vec<_> = (0..3).map(|_| limiter.acquire(1)).collect();
    for small in &mut smalls {
        assert!(poll(small).is_pending(), "a later request for 1 overtook");
    }
    assert_eq!(limiter.waiters(), 4);
    // Permits are free, but those waiting come first.
    assert!(limiter.peek(1).is_ok());
    assert!(limiter.try_acquire(1).unwrap_err().is_limited());

    let mut order = Vec::new();
    let mut big_done = false;
    while order.len() < 4 {
        if !big_done && poll(&mut big).is_ready() {
            big_done = true;
            order.push(10);
        }
        for small in &mut smalls {
            if let Poll::Ready(granted) = poll(small) {
                granted.unwrap();
                order.push(1);
            }
        }
        smalls.retain_mut(|small| poll(small).is_pending());
        if order.len() < 4 {
            let at = clock.next_alarm().expect("waiters have an alarm");
            clock.set(at);
        }
    }
    assert_eq!(order, [10, 1, 1, 1]);
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn fifo_makes_small_requests_wait_for_the_window_after_a_large_ones() {
    // 10 per window; 5 left now. The request for 10 books the next window.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(FixedWindow::new(10, ms(1000)).unwrap(), clock.clone());
    limiter.try_acquire(5).unwrap();
    let mut big = limiter.acquire(10);
    assert!(poll(&mut big).is_pending());
    let mut smalls: Vec<_> = (0..3).map(|_| limiter.acquire(1)).collect();
    for small in &mut smalls {
        assert!(poll(small).is_pending(), "a later request for 1 overtook");
    }
    assert!(limiter.try_acquire(1).unwrap_err().is_limited());

    clock.advance(ms(1000));
    assert_eq!(ready(&mut big), Ok(ms(1000)));
    // The window is the big request's; the small ones go in the next one.
    for small in &mut smalls {
        assert!(poll(small).is_pending());
    }
    clock.advance(ms(1000));
    for small in &mut smalls {
        assert_eq!(ready(small), Ok(ms(2000)));
    }
    assert_eq!(limiter.waiters(), 0);
    assert!(limiter.try_acquire(1).is_ok(), "the queue is empty again");
}

#[test]
fn fifo_grants_a_gcra_queue_in_arrival_order_whatever_the_sizes() {
    let (limiter, clock) = gcra_limiter(10, 10);
    limiter.try_acquire(5).unwrap();
    // 5 left: the 10 books for 500 ms, the 1s queue behind it.
    let mut big = limiter.acquire(10);
    let mut small_a = limiter.acquire(1);
    let mut small_b = limiter.acquire(1);
    assert!(poll(&mut big).is_pending());
    assert!(poll(&mut small_a).is_pending());
    assert!(poll(&mut small_b).is_pending());
    assert!(limiter.try_acquire(1).unwrap_err().is_limited());

    clock.advance(ms(499));
    assert!(poll(&mut big).is_pending());
    clock.advance(ms(1));
    assert_eq!(ready(&mut big), Ok(ms(500)));
    assert!(poll(&mut small_a).is_pending());
    clock.advance(ms(100));
    assert_eq!(ready(&mut small_a), Ok(ms(600)));
    assert!(poll(&mut small_b).is_pending());
    clock.advance(ms(100));
    assert_eq!(ready(&mut small_b), Ok(ms(700)));
}

#[test]
fn unfair_mode_lets_small_requests_past_a_waiting_large_one() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(FixedWindow::new(10, ms(1000)).unwrap(), clock.clone())
        .with_fairness(Fairness::Unfair);
    assert_eq!(limiter.fairness(), Fairness::Unfair);
    limiter.try_acquire(5).unwrap();
    let mut big = limiter.acquire(10);
    assert!(poll(&mut big).is_pending());
    assert_eq!(limiter.waiters(), 1);
    // The small ones fit now and go, waiting or not.
    let mut small = limiter.acquire(1);
    assert_eq!(ready(&mut small), Ok(Duration::ZERO));
    assert!(limiter.try_acquire(4).is_ok());
    assert!(limiter.try_acquire(1).unwrap_err().is_limited());
    // The big one goes when its window comes.
    clock.advance(ms(1000));
    assert_eq!(ready(&mut big), Ok(ms(1000)));
}

#[test]
fn switching_to_unfair_honours_a_booked_waiter_instead_of_charging_it_twice() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending(), "booked for 100 ms");
    let unfair = limiter.clone().with_fairness(Fairness::Unfair);
    clock.advance(ms(100));
    assert_eq!(ready(&mut head), Ok(ms(100)));
    clock.advance(ms(100));
    assert!(
        unfair.try_acquire(1).is_ok(),
        "the booking was not paid twice"
    );
}

#[test]
fn unfair_acquire_timeout_fails_at_once_when_the_wait_is_known_to_exceed_it() {
    let (limiter, clock) = gcra_limiter(1, 1);
    let limiter = limiter.with_fairness(Fairness::Unfair);
    limiter.try_acquire(1).unwrap();
    let mut waited = limiter.acquire_timeout(1, ms(10));
    assert_eq!(ready(&mut waited), Err(AcquireError::TimedOut));
    assert_eq!(clock.now(), Nanos::ZERO);
    assert_eq!(limiter.waiters(), 0);
    let mut in_time = limiter.acquire_timeout(1, ms(1500));
    assert!(poll(&mut in_time).is_pending());
    clock.advance(ms(1000));
    assert_eq!(ready(&mut in_time), Ok(ms(1000)));
}

#[test]
fn unfair_mode_serves_any_waiter_that_fits() {
    let semaphore_like = Limiter::with_clock(Concurrency::new(3).unwrap(), ManualClock::new())
        .with_fairness(Fairness::Unfair);
    semaphore_like.try_acquire(3).unwrap();
    let mut big = semaphore_like.acquire(3);
    let mut small = semaphore_like.acquire(1);
    assert!(poll(&mut big).is_pending());
    assert!(poll(&mut small).is_pending());
    semaphore_like.refund(1);
    assert_eq!(ready(&mut small), Ok(Duration::ZERO), "the small one fits");
    assert!(poll(&mut big).is_pending());
    semaphore_like.refund(3);
    assert_eq!(ready(&mut big), Ok(Duration::ZERO));
}

// ---------------------------------------------------------------------------------
// Guava's prepay and Resilience4j's cycles
// ---------------------------------------------------------------------------------

#[test]
fn guava_bursty_waits_are_guavas_and_the_next_caller_pays_for_a_large_request() {
    // RateLimiter.create(5): acquire(1) -> 0, acquire(1) -> 0.2 s, acquire(1) -> 0.2 s.
    let limiter = Limiter::with_clock(SmoothBursty::new(5.0).unwrap(), ManualClock::new());
    assert_eq!(acquire_in_turn(&limiter, 1), Duration::ZERO);
    assert_eq!(acquire_in_turn(&limiter, 1), ms(200));
    // acquire(10) goes at its turn: it pays only for the permit before it...
    assert_eq!(acquire_in_turn(&limiter, 10), ms(200));
    // ...and the next caller pays for its 10 permits: 2 s.
    assert_eq!(acquire_in_turn(&limiter, 1), ms(2000));
    assert_eq!(acquire_in_turn(&limiter, 1), ms(200));
}

#[test]
fn guava_prepay_holds_for_concurrent_waiters_too() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    let mut a = limiter.acquire(1);
    let mut b = limiter.acquire(1);
    let mut c = limiter.acquire(10);
    let mut d = limiter.acquire(1);
    assert_eq!(ready(&mut a), Ok(Duration::ZERO));
    assert!(poll(&mut b).is_pending());
    assert!(poll(&mut c).is_pending());
    assert!(poll(&mut d).is_pending());
    clock.set(Nanos::new(200_000_000));
    assert_eq!(ready(&mut b), Ok(ms(200)));
    assert!(poll(&mut c).is_pending());
    clock.set(Nanos::new(400_000_000));
    assert_eq!(ready(&mut c), Ok(ms(400)));
    clock.set(Nanos::new(2_399_999_999));
    assert!(poll(&mut d).is_pending(), "d pays c's 10 permits: 2 s");
    clock.set(Nanos::new(2_400_000_000));
    assert_eq!(ready(&mut d), Ok(ms(2400)));
}

#[test]
fn guava_bursty_one_second_burst_through_acquire() {
    // Guava's testOneSecondBurst: R0.00 x4, then R0.20.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    clock.advance(ms(2000));
    let waits: Vec<_> = [1, 1, 3, 1, 1]
        .iter()
        .map(|&n| acquire_in_turn(&limiter, n))
        .collect();
    assert_eq!(
        waits,
        [Duration::ZERO; 4]
            .iter()
            .copied()
            .chain([ms(200)])
            .collect::<Vec<_>>()
    );
}

/// Guava's waits in hundredths of a second, as its tests print them.
fn cents(d: Duration) -> u128 {
    (d.as_micros() + 5_000) / 10_000
}

#[test]
fn guava_warm_up_waits_match_guava_through_acquire() {
    // Guava's testWarmUp: R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50,
    // cooling down fully after 4.5 s, and half way after 2.5 s.
    let clock = ManualClock::new();
    let warm = SmoothWarmingUp::new(2.0, ms(4000)).unwrap();
    let limiter = Limiter::with_clock(warm, clock.clone());
    let cold = [0, 138, 113, 88, 63, 50, 50, 50];
    let round = |expected: &[u128]| {
        let waits: Vec<u128> = (0..8)
            .map(|_| cents(acquire_in_turn(&limiter, 1)))
            .collect();
        assert_eq!(waits, expected);
    };
    round(&cold);
    clock.advance(ms(4500));
    round(&cold);
    clock.advance(ms(2500));
    round(&[0, 50, 50, 50, 50, 50, 50, 50]);
}

#[test]
fn guava_waits_through_acquire_equal_the_algorithms_own_to_the_microsecond() {
    let clock = ManualClock::new();
    let warm = SmoothWarmingUp::new(3.0, ms(2000)).unwrap();
    let limiter = Limiter::with_clock(warm, clock.clone());
    let mut reference = warm.initial_state(Nanos::ZERO);
    let sizes = [1, 4, 2, 7, 1, 1, 3, 9, 1, 2];
    for (i, &n) in sizes.iter().enumerate() {
        if i % 3 == 2 {
            clock.advance(ms(700));
        }
        let expected = warm.acquire_wait(&mut reference, clock.now(), n).unwrap();
        assert_eq!(
            acquire_in_turn(&limiter, n),
            expected,
            "request {i} for {n}"
        );
    }
}

#[test]
fn resilience4j_waiters_wait_for_their_cycle() {
    // 2 permits per 100 ms cycle; five callers at 10 ms.
    let clock = ManualClock::starting_at(Nanos::ZERO);
    let r4j = RefreshPeriod::new(2, ms(100), Duration::ZERO).unwrap();
    let limiter = Limiter::with_clock(r4j, clock.clone());
    clock.advance(ms(10));
    let mut callers: Vec<_> = (0..5).map(|_| limiter.acquire(1)).collect();
    let mut granted_at = vec![None; 5];
    for step in 0..=3 {
        for (i, caller) in callers.iter_mut().enumerate() {
            if granted_at[i].is_none() {
                if let Poll::Ready(waited) = poll(caller) {
                    granted_at[i] = Some(waited.unwrap() + ms(10));
                }
            }
        }
        if step < 3 {
            let next = (clock.now().as_u64() / 100_000_000 + 1) * 100_000_000;
            clock.set(Nanos::new(next));
        }
    }
    let expected = [10, 10, 100, 100, 200].map(|t| Some(ms(t)));
    assert_eq!(granted_at, expected);
}

#[test]
fn resilience4j_timeout_shorter_than_the_cycle_fails_at_once() {
    let clock = ManualClock::new();
    let r4j = RefreshPeriod::new(1, ms(100), Duration::ZERO).unwrap();
    let limiter = Limiter::with_clock(r4j, clock.clone());
    limiter.try_acquire(1).unwrap();
    clock.advance(ms(10));
    let mut short = limiter.acquire_timeout(1, ms(50));
    assert_eq!(ready(&mut short), Err(AcquireError::TimedOut));
    let mut long = limiter.acquire_timeout(1, ms(90));
    assert!(poll(&mut long).is_pending());
    clock.advance(ms(90));
    assert_eq!(ready(&mut long), Ok(ms(90)));
}

#[test]
fn resilience4j_request_above_the_cycle_limit_waits_several_cycles() {
    // Resilience4j reserves a weight above limit_for_period over several cycles; the
    // algorithm's capacity allows it, so waiting for it is no Insufficient.
    let clock = ManualClock::new();
    let r4j = RefreshPeriod::new(2, ms(100), Duration::ZERO).unwrap();
    assert!(r4j.capacity() > 5);
    let limiter = Limiter::with_clock(r4j, clock.clone());
    clock.advance(ms(10));
    let mut five = limiter.acquire(5);
    assert!(poll(&mut five).is_pending());
    clock.set(Nanos::new(199_999_999));
    assert!(poll(&mut five).is_pending());
    clock.set(Nanos::new(200_000_000));
    assert_eq!(ready(&mut five), Ok(ms(190)));
}

#[test]
fn resilience4j_timed_request_above_the_cycle_limit_times_out_rather_than_never() {
    let clock = ManualClock::new();
    let r4j = RefreshPeriod::new(2, ms(100), Duration::ZERO).unwrap();
    let limiter = Limiter::with_clock(r4j, clock.clone());
    clock.advance(ms(10));
    // 5 permits take until 200 ms: 50 ms is too short, but it is not "never".
    let mut short = limiter.acquire_timeout(5, ms(50));
    assert_eq!(ready(&mut short), Err(AcquireError::TimedOut));
    let mut enough = limiter.acquire_timeout(5, ms(190));
    assert!(poll(&mut enough).is_pending());
    clock.advance(ms(190));
    assert_eq!(ready(&mut enough), Ok(ms(190)));
}

// ---------------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------------

#[test]
fn dropping_the_booked_head_refunds_it_and_the_next_waiter_goes_at_once() {
    let (limiter, clock) = gcra_limiter(10, 10);
    limiter.try_acquire(10).unwrap();
    let mut head = limiter.acquire(10);
    assert!(poll(&mut head).is_pending(), "booked for 1 s");
    let count = Arc::new(Count::default());
    let mut next = limiter.acquire(1);
    assert!(poll_with(&mut next, &count).is_pending());
    clock.advance(ms(100));
    assert!(
        poll_with(&mut next, &count).is_pending(),
        "FIFO: behind the head"
    );
    drop(head);
    assert_eq!(count.get(), 1, "the next waiter was woken");
    assert_eq!(ready(&mut next), Ok(ms(100)));
    assert_eq!(limiter.waiters(), 0);
    // The head's 10 were given back: 1 s worth, less the 100 ms permit just taken.
    assert_eq!(limiter.peek(0).unwrap().remaining(), 0);
    clock.advance(ms(900));
    assert_eq!(limiter.peek(0).unwrap().remaining(), 9);
}

#[test]
fn dropping_the_booked_head_moves_the_next_waiter_up() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut first = limiter.acquire(1);
    let mut second = limiter.acquire(1);
    assert!(poll(&mut first).is_pending());
    assert!(poll(&mut second).is_pending());
    drop(first);
    // The second takes the first's slot, at 100 ms rather than 200 ms.
    clock.advance(ms(100));
    assert_eq!(ready(&mut second), Ok(ms(100)));
}

#[test]
fn dropping_a_waiter_behind_the_head_changes_nothing_for_the_others() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut first = limiter.acquire(1);
    let mut second = limiter.acquire(1);
    let mut third = limiter.acquire(1);
    for f in [&mut first, &mut second, &mut third] {
        assert!(poll(f).is_pending());
    }
    drop(second);
    assert_eq!(limiter.waiters(), 2);
    clock.advance(ms(100));
    assert_eq!(ready(&mut first), Ok(ms(100)));
    clock.advance(ms(100));
    assert_eq!(ready(&mut third), Ok(ms(200)));
}

#[test]
fn dropping_a_granted_but_unpolled_future_gives_its_permits_back() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let count = Arc::new(Count::default());
    let mut granted = limiter.acquire(1);
    assert!(poll_with(&mut granted, &count).is_pending());
    clock.advance(ms(100));
    assert_eq!(count.get(), 1, "woken at its time");
    drop(granted);
    assert!(
        limiter.try_acquire(1).is_ok(),
        "the permit granted and never taken came back"
    );
}

#[test]
fn a_granted_future_dropped_unpolled_lets_the_booked_waiter_behind_go_at_once() {
    // Found by the waiting proptest: the permit given back sat unused while the
    // waiter behind kept its later booking.
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut granted = limiter.acquire(1);
    let mut behind = limiter.acquire(1);
    assert!(poll(&mut granted).is_pending());
    assert!(poll(&mut behind).is_pending());
    clock.advance(ms(100));
    // `granted` has its permit; `behind` is booked for 200 ms.
    assert!(poll(&mut behind).is_pending());
    drop(granted);
    assert_eq!(
        ready(&mut behind),
        Ok(ms(100)),
        "it took the permit given back"
    );
    assert!(limiter.peek(1).is_err(), "and nothing more was created");
    clock.advance(ms(100));
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn refund_lets_a_booked_waiter_go_sooner() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending(), "booked for 100 ms");
    limiter.refund(1);
    assert_eq!(ready(&mut head), Ok(Duration::ZERO));
    assert!(limiter.try_acquire(1).is_err());
    clock.advance(ms(100));
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn refund_never_books_a_warming_up_waiter_later() {
    // A warm-up's refund gives back fresh permits only: booking again could come out
    // later, and then the first booking stands.
    let clock = ManualClock::new();
    let warm = SmoothWarmingUp::new(2.0, ms(4000)).unwrap();
    let limiter = Limiter::with_clock(warm, clock.clone());
    assert_eq!(ready(&mut limiter.acquire(1)), Ok(Duration::ZERO));
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending());
    let booked = clock.next_alarm().unwrap();
    let before = limiter.state();
    // Both serve the queue, which tries booking the first waiter again.
    limiter.refund(0);
    limiter.reconfigure(|_, _, _| Ok::<(), ()>(())).unwrap();
    assert_eq!(
        limiter.state(),
        before,
        "booking again would have been later"
    );
    assert_eq!(clock.next_alarm(), Some(booked));
    clock.set(booked);
    assert!(ready(&mut head).is_ok());
}

#[test]
fn dropping_a_future_never_polled_does_nothing() {
    let (limiter, _clock) = gcra_limiter(10, 1);
    let unpolled = limiter.acquire(1);
    drop(unpolled);
    assert!(limiter.try_acquire(1).is_ok());
}

#[test]
fn dropping_a_completed_future_gives_nothing_back() {
    let (limiter, _clock) = gcra_limiter(10, 1);
    let mut done = limiter.acquire(1);
    assert_eq!(ready(&mut done), Ok(Duration::ZERO));
    drop(done);
    assert!(limiter.try_acquire(1).is_err(), "the permit was used");
}

#[test]
fn dropping_every_waiter_leaves_the_limiter_as_before() {
    let (limiter, clock) = gcra_limiter(10, 5);
    limiter.try_acquire(5).unwrap();
    let before = limiter.state();
    let mut waiters: Vec<_> = (1..=4).map(|n| limiter.acquire(n)).collect();
    for w in &mut waiters {
        assert!(poll(w).is_pending());
    }
    drop(waiters);
    assert_eq!(limiter.waiters(), 0);
    assert_eq!(limiter.state(), before);
    // Stale alarms ring harmlessly and leave none behind.
    clock.advance(ms(10_000));
    assert_eq!(clock.pending_alarms(), 0);
}

// ---------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------

#[test]
fn acquire_timeout_fails_at_once_when_the_booking_would_exceed_it() {
    let (limiter, clock) = gcra_limiter(1, 1);
    limiter.try_acquire(1).unwrap();
    let before = limiter.state();
    let mut waited = limiter.acquire_timeout(1, ms(10));
    assert_eq!(ready(&mut waited), Err(AcquireError::TimedOut));
    assert_eq!(clock.now(), Nanos::ZERO, "no time had to pass");
    assert_eq!(limiter.state(), before, "nothing booked");
    assert_eq!(limiter.waiters(), 0);
    assert_eq!(clock.pending_alarms(), 0);
    assert_eq!(
        limiter.acquire_blocking_timeout(1, ms(999)),
        Err(AcquireError::TimedOut)
    );
}

#[test]
fn acquire_timeout_fails_at_once_when_the_first_waiter_goes_after_it() {
    let (limiter, clock) = gcra_limiter(1, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending(), "goes at 1 s");
    let mut late = limiter.acquire_timeout(1, ms(500));
    assert_eq!(ready(&mut late), Err(AcquireError::TimedOut));
    assert_eq!(clock.now(), Nanos::ZERO);
    assert_eq!(limiter.waiters(), 1);
}

#[test]
fn acquire_timeout_behind_the_head_fails_as_soon_as_its_booking_is_known_too_late() {
    let (limiter, clock) = gcra_limiter(1, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending(), "goes at 1 s");
    // The head goes in time, but this one would go at 2 s: known when it books at 1 s.
    let mut second = limiter.acquire_timeout(1, ms(1500));
    assert!(poll(&mut second).is_pending());
    clock.advance(ms(1000));
    assert_eq!(ready(&mut head), Ok(ms(1000)));
    assert_eq!(ready(&mut second), Err(AcquireError::TimedOut));
}

#[test]
fn acquire_timeout_that_may_fit_fails_at_its_deadline() {
    // A concurrency limit cannot tell when permits come back: wait until the deadline.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Concurrency::new(1).unwrap(), clock.clone());
    limiter.try_acquire(1).unwrap();
    let count = Arc::new(Count::default());
    let mut waiting = limiter.acquire_timeout(1, ms(50));
    assert!(poll_with(&mut waiting, &count).is_pending());
    assert_eq!(clock.next_alarm(), Some(Nanos::new(50_000_000)));
    clock.advance(ms(49));
    assert!(poll_with(&mut waiting, &count).is_pending());
    clock.advance(ms(1));
    assert!(count.get() >= 1, "woken at the deadline");
    assert_eq!(ready(&mut waiting), Err(AcquireError::TimedOut));
    assert_eq!(limiter.waiters(), 0);
    // A release in time is granted instead.
    let mut in_time = limiter.acquire_timeout(1, ms(50));
    assert!(poll(&mut in_time).is_pending());
    clock.advance(ms(20));
    limiter.refund(1);
    assert_eq!(ready(&mut in_time), Ok(ms(20)));
}

#[test]
fn acquire_timeout_behind_an_unbookable_head_expires_without_the_head() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Concurrency::new(2).unwrap(), clock.clone());
    limiter.try_acquire(2).unwrap();
    let mut head = limiter.acquire(2);
    let mut timed = limiter.acquire_timeout(1, ms(30));
    assert!(poll(&mut head).is_pending());
    assert!(poll(&mut timed).is_pending());
    clock.advance(ms(30));
    assert_eq!(ready(&mut timed), Err(AcquireError::TimedOut));
    assert!(poll(&mut head).is_pending());
    limiter.refund(2);
    assert_eq!(ready(&mut head), Ok(ms(30)));
}

#[test]
fn acquire_timeout_is_not_failed_at_once_by_another_waiters_deadline() {
    // Nobody knows when a concurrency permit comes back; another waiter's later
    // deadline says nothing about when the first waiter goes.
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Concurrency::new(1).unwrap(), clock.clone());
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    let mut patient = limiter.acquire_timeout(1, ms(10_000));
    assert!(poll(&mut head).is_pending());
    assert!(poll(&mut patient).is_pending());
    let mut hurried = limiter.acquire_timeout(1, ms(5_000));
    assert!(poll(&mut hurried).is_pending(), "it may still go in time");
    clock.advance(ms(1000));
    limiter.refund(1);
    assert_eq!(ready(&mut head), Ok(ms(1000)));
    limiter.refund(1);
    assert_eq!(ready(&mut patient), Ok(ms(1000)));
    limiter.refund(1);
    assert_eq!(ready(&mut hurried), Ok(ms(1000)));
}

#[test]
fn acquire_timeout_granted_in_time_reports_the_wait() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut waited = limiter.acquire_timeout(1, ms(100));
    assert!(poll(&mut waited).is_pending());
    clock.advance(ms(100));
    assert_eq!(ready(&mut waited), Ok(ms(100)));
}

// ---------------------------------------------------------------------------------
// Never-grantable requests and close
// ---------------------------------------------------------------------------------

#[test]
fn n_above_capacity_is_insufficient_at_once() {
    let (limiter, clock) = gcra_limiter(10, 5);
    let insufficient = AcquireError::Insufficient(InsufficientCapacity::new(6, 5));
    assert!(insufficient.is_never());
    let never = Err(insufficient);
    assert_eq!(ready(&mut limiter.acquire(6)), never);
    assert_eq!(ready(&mut limiter.acquire_timeout(6, ms(1))), never);
    assert_eq!(limiter.acquire_blocking(6), never);
    assert_eq!(clock.pending_alarms(), 0);
    assert_eq!(limiter.waiters(), 0);
}

#[test]
fn n_above_capacity_is_insufficient_at_once_even_behind_waiters() {
    let (limiter, clock) = gcra_limiter(10, 5);
    limiter.try_acquire(5).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending());
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(6, 5)));
    assert_eq!(ready(&mut limiter.acquire(6)), never);
    assert_eq!(limiter.waiters(), 1);
    assert_eq!(clock.now(), Nanos::ZERO);
}

#[test]
fn lowering_capacity_below_a_waiters_request_fails_it_as_never() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(Concurrency::new(4).unwrap(), clock);
    limiter.try_acquire(4).unwrap();
    let mut big = limiter.acquire(4);
    let mut small = limiter.acquire(1);
    assert!(poll(&mut big).is_pending());
    assert!(poll(&mut small).is_pending());
    limiter
        .reconfigure(|concurrency, _, _| concurrency.set_max(2))
        .unwrap();
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(4, 2)));
    assert_eq!(ready(&mut big), never);
    assert!(poll(&mut small).is_pending(), "4 are still held");
    limiter.refund(3);
    assert_eq!(ready(&mut small), Ok(Duration::ZERO));
}

#[test]
fn reconfiguring_never_makes_a_booked_waiter_later() {
    let (limiter, clock) = gcra_limiter(1, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending(), "booked for 1 s");
    limiter
        .reconfigure(|gcra, _, _| {
            gcra.set_quota(Quota::per_second(10)?.burst(1)?);
            Ok::<(), tollgate::ConfigError>(())
        })
        .unwrap();
    clock.advance(ms(1000));
    assert_eq!(ready(&mut head), Ok(ms(1000)));
}

#[test]
fn zero_permits_never_wait() {
    let (limiter, _clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    assert_eq!(ready(&mut limiter.acquire(0)), Ok(Duration::ZERO));
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending());
    assert_eq!(ready(&mut limiter.acquire(0)), Ok(Duration::ZERO));
}

#[test]
fn zero_permits_are_never_denied_behind_waiters() {
    let semaphore = Semaphore::new(1).unwrap();
    let _held = semaphore.try_acquire(1).unwrap();
    let mut head = semaphore.acquire(1);
    assert!(poll(&mut head).is_pending());
    assert_eq!(semaphore.try_acquire(0).unwrap().num_permits(), 0);
    assert_eq!(ready(&mut semaphore.acquire(0)).unwrap().num_permits(), 0);
    assert_eq!(semaphore.waiters(), 1);
}

#[test]
fn close_fails_waiters_and_later_acquires_and_gives_bookings_back() {
    let (limiter, clock) = gcra_limiter(1, 1);
    limiter.try_acquire(1).unwrap();
    let before = limiter.state();
    let first_count = Arc::new(Count::default());
    let mut first = limiter.acquire(1);
    let mut second = limiter.acquire(1);
    assert!(poll_with(&mut first, &first_count).is_pending());
    assert!(poll(&mut second).is_pending());
    assert_ne!(limiter.state(), before, "the head booked");

    limiter.close();
    assert!(limiter.is_closed());
    assert_eq!(first_count.get(), 1, "woken to learn it");
    assert_eq!(ready(&mut first), Err(AcquireError::Closed));
    assert_eq!(ready(&mut second), Err(AcquireError::Closed));
    assert_eq!(limiter.state(), before, "the booking was given back");
    assert_eq!(limiter.waiters(), 0);

    assert_eq!(ready(&mut limiter.acquire(1)), Err(AcquireError::Closed));
    assert_eq!(limiter.acquire_blocking(1), Err(AcquireError::Closed));
    assert_eq!(
        ready(&mut limiter.acquire_timeout(1, ms(5))),
        Err(AcquireError::Closed)
    );
    clock.advance(ms(5000));
    assert_eq!(limiter.try_acquire(1), Err(Denied::Closed));
    assert_eq!(limiter.reserve(1, Duration::MAX), Err(Denied::Closed));
}

#[test]
fn try_acquire_while_someone_waits_is_denied_with_the_next_free_time() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut head = limiter.acquire(1);
    assert!(poll(&mut head).is_pending());
    // The head has booked the next permit: the one after is at 200 ms.
    let denied = limiter.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(200)));
    clock.advance(ms(100));
    assert_eq!(ready(&mut head), Ok(ms(100)));
    assert!(limiter.try_acquire(1).unwrap_err().is_limited());
    clock.advance(ms(100));
    assert!(limiter.try_acquire(1).is_ok());
}

// ---------------------------------------------------------------------------------
// The semaphore
// ---------------------------------------------------------------------------------

#[test]
fn semaphore_release_wakes_the_next_waiter_in_fifo_order() {
    let semaphore = Semaphore::new(2).unwrap();
    let all = ready(&mut semaphore.acquire(2)).unwrap();
    let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
    let mut one = semaphore.acquire(1);
    let mut two = semaphore.acquire(2);
    let mut three = semaphore.acquire(1);
    assert!(poll_with(&mut one, &counts[0]).is_pending());
    assert!(poll_with(&mut two, &counts[1]).is_pending());
    assert!(poll_with(&mut three, &counts[2]).is_pending());
    assert_eq!(semaphore.waiters(), 3);

    drop(all);
    assert_eq!(
        counts.iter().map(|c| c.get()).collect::<Vec<_>>(),
        [1, 0, 0]
    );
    let p1 = ready(&mut one).unwrap();
    assert_eq!(p1.num_permits(), 1);
    // One permit is free, but the request for 2 is first: the 1 behind it waits.
    assert_eq!(semaphore.available_permits(), 1);
    assert!(poll(&mut two).is_pending());
    assert!(poll(&mut three).is_pending());
    assert!(semaphore.try_acquire(1).unwrap_err().is_limited());

    drop(p1);
    let p2 = ready(&mut two).unwrap();
    assert_eq!(p2.num_permits(), 2);
    assert!(poll(&mut three).is_pending());
    drop(p2);
    let p3 = ready(&mut three).unwrap();
    assert_eq!(semaphore.available_permits(), 1);
    drop(p3);
    assert_eq!(semaphore.available_permits(), 2);
    assert_eq!(semaphore.waiters(), 0);
}

#[test]
fn semaphore_acquire_owned_waits_and_the_permit_moves_to_a_thread() {
    let semaphore = Arc::new(Semaphore::new(1).unwrap());
    let held = semaphore.try_acquire_owned(1).unwrap();
    let mut waiting = semaphore.acquire_owned(1);
    assert!(poll(&mut waiting).is_pending());
    drop(held);
    let permit = ready(&mut waiting).unwrap();
    assert!(Arc::ptr_eq(permit.semaphore(), &semaphore));
    assert_eq!(semaphore.available_permits(), 0);
    std::thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn semaphore_dropping_the_head_lets_the_next_waiter_go() {
    let semaphore = Semaphore::new(2).unwrap();
    let held = semaphore.try_acquire(1).unwrap();
    let mut big = semaphore.acquire(2);
    let mut small = semaphore.acquire(1);
    assert!(poll(&mut big).is_pending());
    assert!(poll(&mut small).is_pending());
    drop(big);
    let permit = ready(&mut small).unwrap();
    assert_eq!(semaphore.available_permits(), 0);
    drop((permit, held));
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn semaphore_granted_but_unpolled_permits_come_back_when_dropped() {
    let semaphore = Semaphore::new(1).unwrap();
    let held = semaphore.try_acquire(1).unwrap();
    let mut granted = semaphore.acquire(1);
    let mut next = semaphore.acquire(1);
    assert!(poll(&mut granted).is_pending());
    assert!(poll(&mut next).is_pending());
    drop(held);
    assert_eq!(semaphore.available_permits(), 0, "granted to the first");
    drop(granted);
    assert!(ready(&mut next).is_ok(), "and passed on to the next");
}

#[test]
fn semaphore_close_fails_waiters_and_keeps_held_permits_valid() {
    let semaphore = Semaphore::new(1).unwrap();
    let held = semaphore.try_acquire(1).unwrap();
    let mut waiting = semaphore.acquire(1);
    assert!(poll(&mut waiting).is_pending());
    semaphore.close();
    assert!(semaphore.is_closed());
    assert!(matches!(ready(&mut waiting), Err(AcquireError::Closed)));
    assert!(matches!(
        ready(&mut semaphore.acquire(1)),
        Err(AcquireError::Closed)
    ));
    assert_eq!(semaphore.try_acquire(0).unwrap_err(), Denied::Closed);
    drop(held);
    assert_eq!(semaphore.available_permits(), 1);
    assert_eq!(semaphore.try_acquire(1).unwrap_err(), Denied::Closed);
    assert!(matches!(
        semaphore.acquire_blocking(1),
        Err(AcquireError::Closed)
    ));
}

#[test]
fn semaphore_request_above_the_maximum_is_insufficient_at_once() {
    let semaphore = Semaphore::new(2).unwrap();
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(3, 2)));
    assert_eq!(ready(&mut semaphore.acquire(3)).map(|_| ()), never);
    let _held = semaphore.try_acquire(2).unwrap();
    let mut head = semaphore.acquire(1);
    assert!(poll(&mut head).is_pending());
    assert_eq!(ready(&mut semaphore.acquire(3)).map(|_| ()), never);
}

#[test]
fn semaphore_lowering_the_maximum_below_a_waiters_request_fails_it() {
    let semaphore = Semaphore::new(3).unwrap();
    let held = semaphore.try_acquire(3).unwrap();
    let mut waiting = semaphore.acquire(3);
    assert!(poll(&mut waiting).is_pending());
    semaphore.set_max_permits(2).unwrap();
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(3, 2)));
    assert_eq!(ready(&mut waiting).map(|_| ()), never);
    drop(held);
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn semaphore_raising_the_maximum_serves_waiters() {
    let semaphore = Semaphore::new(1).unwrap();
    let _held = semaphore.try_acquire(1).unwrap();
    let mut waiting = semaphore.acquire(2);
    // 2 > max: never, unless the maximum grows first; here it is asked at once.
    assert!(matches!(
        ready(&mut waiting),
        Err(AcquireError::Insufficient(_))
    ));
    let mut one = semaphore.acquire(1);
    assert!(poll(&mut one).is_pending());
    semaphore.set_max_permits(2).unwrap();
    assert!(ready(&mut one).is_ok());
}

// ---------------------------------------------------------------------------------
// The leaky queue
// ---------------------------------------------------------------------------------

fn leaky_queue(capacity: u64, per_second: u64) -> (LeakyQueue<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let quota = Quota::per_second(per_second).unwrap();
    (
        LeakyQueue::with_clock(capacity, quota, clock.clone()).unwrap(),
        clock,
    )
}

#[test]
fn leaky_queue_departures_are_spaced_by_the_interval() {
    let (queue, clock) = leaky_queue(5, 10);
    let mut requests: Vec<_> = (0..5).map(|_| queue.enqueue(1)).collect();
    let mut left = vec![None; 5];
    for step in 0..5u64 {
        for (i, r) in requests.iter_mut().enumerate() {
            if left[i].is_none() {
                if let Poll::Ready(waited) = poll(r) {
                    left[i] = Some(waited.unwrap());
                }
            }
        }
        let gone = left.iter().filter(|l| l.is_some()).count() as u64;
        assert_eq!(gone, step + 1, "one departure per interval");
        clock.advance(ms(100));
    }
    let expected: Vec<_> = (0..5).map(|i| Some(ms(100 * i))).collect();
    assert_eq!(left, expected);
}

#[test]
fn leaky_queue_departures_are_weighted_by_size() {
    let (queue, clock) = leaky_queue(10, 10);
    assert_eq!(ready(&mut queue.enqueue(3)), Ok(Duration::ZERO));
    let mut after = queue.enqueue(2);
    let mut last = queue.enqueue(1);
    assert!(poll(&mut after).is_pending());
    assert!(poll(&mut last).is_pending());
    clock.advance(ms(299));
    assert!(poll(&mut after).is_pending());
    clock.advance(ms(1));
    assert_eq!(ready(&mut after), Ok(ms(300)));
    clock.advance(ms(199));
    assert!(poll(&mut last).is_pending());
    clock.advance(ms(1));
    assert_eq!(ready(&mut last), Ok(ms(500)));
}

#[test]
fn leaky_queue_overflow_is_rejected_at_once() {
    let (queue, clock) = leaky_queue(3, 10);
    let mut held: Vec<_> = (0..3).map(|_| queue.enqueue(1)).collect();
    for h in &mut held {
        let _ = poll(h);
    }
    assert_eq!(queue.queue_len(), 3);
    let full = Err(AcquireError::QueueFull { capacity: 3 });
    assert_eq!(ready(&mut queue.enqueue(1)), full);
    assert_eq!(queue.enqueue_blocking(1), full);
    assert_eq!(queue.waiters(), 2, "the refused request did not join");
    assert_eq!(clock.now(), Nanos::ZERO);
    // Once one unit has drained, there is room again.
    clock.advance(ms(100));
    assert_eq!(queue.queue_len(), 2);
    let mut fits = queue.enqueue(1);
    assert!(poll(&mut fits).is_pending());
    assert_eq!(queue.queue_len(), 3);
}

#[test]
fn leaky_queue_request_above_capacity_is_insufficient() {
    let (queue, _clock) = leaky_queue(3, 10);
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(4, 3)));
    assert_eq!(ready(&mut queue.enqueue(4)), never);
}

#[test]
fn leaky_queue_request_above_capacity_is_insufficient_even_behind_waiters() {
    let clock = ManualClock::new();
    let queue = LeakyQueue::with_clock(3, Quota::per_second(10).unwrap(), clock).unwrap();
    assert!(ready(&mut queue.enqueue(1)).is_ok());
    let mut waiting = queue.enqueue(1);
    assert!(poll(&mut waiting).is_pending());
    let never = Err(AcquireError::Insufficient(InsufficientCapacity::new(4, 3)));
    assert_eq!(ready(&mut queue.enqueue(4)), never);
}

#[test]
fn leaky_queue_reports_length_and_expected_wait() {
    let (queue, clock) = leaky_queue(10, 10);
    assert_eq!(
        (queue.queue_len(), queue.expected_wait()),
        (0, Duration::ZERO)
    );
    assert_eq!(ready(&mut queue.enqueue(1)), Ok(Duration::ZERO));
    // One unit draining: the next waits for it.
    assert_eq!((queue.queue_len(), queue.expected_wait()), (1, ms(100)));
    let mut second = queue.enqueue(2);
    let mut third = queue.enqueue(3);
    assert!(poll(&mut second).is_pending());
    assert!(poll(&mut third).is_pending());
    // 1 draining, 2 booked, 3 waiting: the next would leave after all six.
    assert_eq!(queue.queue_len(), 6);
    assert_eq!(queue.expected_wait(), ms(600));
    assert_eq!(queue.waiters(), 2);
    clock.advance(ms(100));
    assert_eq!(ready(&mut second), Ok(ms(100)));
    assert_eq!(queue.queue_len(), 5);
    assert_eq!(queue.expected_wait(), ms(500));
    clock.advance(ms(50));
    assert_eq!(queue.expected_wait(), ms(450));
}

#[test]
fn leaky_queue_cancel_moves_the_others_up() {
    let (queue, clock) = leaky_queue(5, 10);
    assert_eq!(ready(&mut queue.enqueue(1)), Ok(Duration::ZERO));
    let mut second = queue.enqueue(2);
    let mut third = queue.enqueue(1);
    assert!(poll(&mut second).is_pending());
    assert!(poll(&mut third).is_pending());
    assert_eq!(queue.queue_len(), 4);
    drop(second);
    assert_eq!(queue.queue_len(), 2);
    assert_eq!(queue.waiters(), 1);
    clock.advance(ms(100));
    assert_eq!(ready(&mut third), Ok(ms(100)), "left in the second's place");
}

#[test]
fn leaky_queue_a_departure_dropped_unpolled_lets_the_next_leave_in_its_place() {
    let (queue, clock) = leaky_queue(5, 10);
    assert_eq!(ready(&mut queue.enqueue(1)), Ok(Duration::ZERO));
    let mut departed = queue.enqueue(1);
    let mut next = queue.enqueue(1);
    assert!(poll(&mut departed).is_pending());
    assert!(poll(&mut next).is_pending());
    clock.advance(ms(100));
    assert!(poll(&mut next).is_pending(), "booked for 200 ms");
    drop(departed);
    assert_eq!(ready(&mut next), Ok(ms(100)));
    assert_eq!(queue.queue_len(), 1);
}

#[test]
fn leaky_queue_close_fails_waiters() {
    let (queue, _clock) = leaky_queue(5, 10);
    assert!(ready(&mut queue.enqueue(1)).is_ok());
    let mut waiting = queue.enqueue(1);
    assert!(poll(&mut waiting).is_pending());
    queue.close();
    assert_eq!(ready(&mut waiting), Err(AcquireError::Closed));
    assert_eq!(ready(&mut queue.enqueue(1)), Err(AcquireError::Closed));
    assert_eq!(queue.queue_len(), 1, "the booking was given back");
}

// ---------------------------------------------------------------------------------
// Idle cost
// ---------------------------------------------------------------------------------

#[test]
fn idle_limiters_put_nothing_on_the_clock() {
    let clock = ManualClock::new();
    let quota = Quota::per_second(10).unwrap();
    let limiters: Vec<_> = (0..10_000)
        .map(|_| Limiter::with_clock(Gcra::new(quota), clock.clone()))
        .collect();
    for limiter in &limiters {
        assert!(limiter.try_acquire(1).is_ok());
        assert_eq!(ready(&mut limiter.acquire(1)), Ok(Duration::ZERO));
    }
    clock.advance(ms(10_000));
    assert_eq!(clock.pending_alarms(), 0);
    let queues: Vec<_> = (0..1000)
        .map(|_| LeakyQueue::with_clock(5, quota, clock.clone()).unwrap())
        .collect();
    for q in &queues {
        assert!(ready(&mut q.enqueue(1)).is_ok());
    }
    assert_eq!(clock.pending_alarms(), 0);
}

#[test]
fn no_alarm_is_left_once_every_waiter_is_served() {
    let (limiter, clock) = gcra_limiter(100, 1);
    let mut waiters: Vec<_> = (0..50).map(|_| limiter.acquire(1)).collect();
    let mut pending = waiters.len();
    let mut done = vec![false; waiters.len()];
    while pending > 0 {
        for (i, w) in waiters.iter_mut().enumerate() {
            if !done[i] && poll(w).is_ready() {
                done[i] = true;
                pending -= 1;
            }
        }
        assert!(
            clock.pending_alarms() <= 1,
            "one alarm per limiter, not one per waiter"
        );
        if pending > 0 {
            clock.advance(ms(10));
        }
    }
    assert_eq!(clock.pending_alarms(), 0);
    assert_eq!(limiter.waiters(), 0);
}

/// The bug: a leaky bucket with no room yet denied the booking, and the queue took that
/// for "the wait exceeds the timeout", failing at once a request that leaves in time.
#[test]
fn a_full_leaky_bucket_waits_for_room_within_the_timeout() {
    let clock = ManualClock::new();
    let bucket = LeakyBucket::new(2, Quota::per_second(10).unwrap()).unwrap();
    let limiter = Limiter::with_clock(bucket, clock.clone());
    limiter.try_acquire(2).unwrap();
    let mut waiting = limiter.acquire_timeout(1, ms(250));
    assert!(poll(&mut waiting).is_pending());
    clock.advance(ms(100)); // room for one unit: it books and leaves by 200 ms
    clock.advance(ms(100));
    assert!(matches!(ready(&mut waiting), Ok(waited) if waited <= ms(250)));
}

/// Permits booked within the timeout are granted even when the wake-up comes late:
/// they were due in time (documented on `acquire_timeout`).
#[test]
fn a_booking_made_in_time_is_honoured_after_a_late_wake() {
    let (limiter, clock) = gcra_limiter(10, 1);
    limiter.try_acquire(1).unwrap();
    let mut waiting = limiter.acquire_timeout(1, ms(150));
    assert!(poll(&mut waiting).is_pending());
    clock.advance(ms(1000));
    assert_eq!(ready(&mut waiting), Ok(ms(1000)));
}
