//! `Semaphore`: guards give permits back, the count never exceeds the maximum nor
//! goes below zero, and the types cross threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use tollgate::semaphore::{OwnedPermit, Permit};
use tollgate::{Limiter, Semaphore};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn semaphore_and_permits_are_send_and_sync() {
    assert_send_sync::<Semaphore>();
    assert_send_sync::<Permit<'static>>();
    assert_send_sync::<OwnedPermit>();
    assert_send_sync::<Limiter<tollgate::algorithm::Concurrency>>();
}

#[test]
fn dropping_guards_returns_permits() {
    let semaphore = Arc::new(Semaphore::new(5).unwrap());
    let borrowed = semaphore.try_acquire(2).unwrap();
    let owned = semaphore.try_acquire_owned(3).unwrap();
    assert_eq!(semaphore.available_permits(), 0);
    assert!(semaphore.try_acquire(1).unwrap_err().is_limited());
    drop(borrowed);
    assert_eq!(semaphore.available_permits(), 2);
    drop(owned);
    assert_eq!(semaphore.available_permits(), 5);
}

#[test]
fn owned_permit_outlives_the_callers_handle() {
    let semaphore = Arc::new(Semaphore::new(1).unwrap());
    let permit = semaphore.try_acquire_owned(1).unwrap();
    let weak = Arc::downgrade(&semaphore);
    drop(semaphore);
    let semaphore = weak
        .upgrade()
        .expect("the permit keeps the semaphore alive");
    assert_eq!(semaphore.available_permits(), 0);
    drop(permit);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn denials_say_never_or_not_now() {
    let semaphore = Semaphore::new(2).unwrap();
    let never = semaphore.try_acquire(3).unwrap_err();
    assert!(never.is_never());
    let _held = semaphore.try_acquire(2).unwrap();
    let not_now = semaphore.try_acquire(1).unwrap_err();
    assert!(not_now.is_limited());
    assert_eq!(not_now.retry(), Some(tollgate::Retry::OnRelease));
}

#[test]
fn zero_permits_is_an_error() {
    assert_eq!(
        Semaphore::new(0).unwrap_err(),
        tollgate::ConfigError::Zero { parameter: "max" }
    );
    let semaphore = Semaphore::new(1).unwrap();
    assert!(semaphore.set_max_permits(0).is_err());
    assert_eq!(semaphore.max_permits(), 1);
}

/// Threads contending for permits never hold more than the maximum at once, and every
/// permit comes back.
#[test]
fn threads_never_hold_more_than_the_maximum() {
    const MAX: u64 = 3;
    let semaphore = Arc::new(Semaphore::new(MAX).unwrap());
    let holding = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (semaphore, holding) = (Arc::clone(&semaphore), Arc::clone(&holding));
            std::thread::spawn(move || {
                for i in 0..2_000u64 {
                    if let Ok(permit) = semaphore.try_acquire_owned(1 + i % 2) {
                        let now = holding.fetch_add(permit.num_permits(), Ordering::SeqCst)
                            + permit.num_permits();
                        assert!(now <= MAX, "{now} permits held at once");
                        holding.fetch_sub(permit.num_permits(), Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(semaphore.available_permits(), MAX);
}

#[derive(Clone, Debug)]
enum Op {
    Acquire(u64),
    AcquireOwned(u64),
    /// Drops the held permit at this index (modulo the number held).
    Drop(usize),
    Forget(usize),
    SetMax(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..6u64).prop_map(Op::Acquire),
        3 => (0..6u64).prop_map(Op::AcquireOwned),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::Forget),
        1 => (0..6u64).prop_map(Op::SetMax),
    ]
}

enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl Held<'_> {
    fn num_permits(&self) -> u64 {
        match self {
            Held::Borrowed(p) => p.num_permits(),
            Held::Owned(p) => p.num_permits(),
        }
    }

    fn forget(self) {
        match self {
            Held::Borrowed(p) => p.forget(),
            Held::Owned(p) => p.forget(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Against a model that counts permits in use: a grant never takes the count above
    /// the maximum (it can stand above a maximum lowered while permits were held, and
    /// then only falls), and releases never take it below zero.
    #[test]
    fn in_use_stays_within_max_and_never_underflows(
        initial in 1..6u64,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let semaphore = Arc::new(Semaphore::new(initial).unwrap());
        let (mut max, mut in_use, mut forgotten) = (initial, 0u64, 0u64);
        let mut held: Vec<Held<'_>> = Vec::new();
        for op in ops {
            match op {
                Op::Acquire(n) | Op::AcquireOwned(n) => {
                    let granted = match op {
                        Op::Acquire(_) => semaphore.try_acquire(n).map(Held::Borrowed),
                        _ => semaphore.try_acquire_owned(n).map(Held::Owned),
                    };
                    let fits = n == 0 || in_use + n <= max;
                    match granted {
                        Ok(permit) => {
                            prop_assert!(fits, "granted {} with {} of {} in use", n, in_use, max);
                            prop_assert_eq!(permit.num_permits(), n);
                            in_use += n;
                            held.push(permit);
                        }
                        Err(denied) => {
                            prop_assert!(!fits);
                            prop_assert_eq!(denied.is_never(), n > max);
                        }
                    }
                }
                Op::Drop(i) if !held.is_empty() => {
                    let permit = held.swap_remove(i % held.len());
                    in_use -= permit.num_permits();
                    drop(permit);
                }
                Op::Forget(i) if !held.is_empty() => {
                    let permit = held.swap_remove(i % held.len());
                    forgotten += permit.num_permits();
                    permit.forget();
                }
                Op::SetMax(m) => {
                    let result = semaphore.set_max_permits(m);
                    prop_assert_eq!(result.is_ok(), m > 0);
                    if m > 0 {
                        max = m;
                    }
                }
                Op::Drop(_) | Op::Forget(_) => {}
            }
            prop_assert_eq!(semaphore.max_permits(), max);
            prop_assert_eq!(semaphore.available_permits(), max.saturating_sub(in_use));
            prop_assert_eq!(in_use, held.iter().map(Held::num_permits).sum::<u64>() + forgotten);
        }
        drop(held);
        prop_assert_eq!(semaphore.available_permits(), max.saturating_sub(forgotten));
    }
}

/// The bug: a `try_acquire` denied because others already wait reported a retry of
/// 0 ns, a time that promises nothing; the first waiter waits for a release.
#[test]
fn a_try_acquire_behind_waiters_waits_for_a_release() {
    use std::future::Future;

    let semaphore = Semaphore::new(2).unwrap();
    let _held = semaphore.try_acquire(1).unwrap();
    let mut waiter = Box::pin(semaphore.acquire(2));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(waiter.as_mut().poll(&mut cx).is_pending());
    // One permit is free, but the waiter for two was first.
    let denied = semaphore.try_acquire(1).map(drop).unwrap_err();
    assert_eq!(
        denied.retry(),
        Some(tollgate::Retry::OnRelease),
        "{denied:?}"
    );
}

// ---------------------------------------------------------------------------------
// Timeouts, on the semaphore's clock
// ---------------------------------------------------------------------------------

mod timeouts {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Duration;

    use tollgate::time::{Alarm, Clock, ManualClock, Nanos};
    use tollgate::{AcquireError, PermitSource, Semaphore};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Woken(AtomicU64);

    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_with<F: Future + Unpin>(future: &mut F, woken: &Arc<Woken>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(woken));
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        poll_with(future, &Arc::default())
    }

    fn ready<F: Future + Unpin>(future: &mut F) -> F::Output {
        match poll(future) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("still pending"),
        }
    }

    #[test]
    fn acquire_timeout_fails_at_the_deadline_and_takes_nothing() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(1, clock.clone()).unwrap();
        let held = semaphore.try_acquire(1).unwrap();
        let woken = Arc::new(Woken::default());
        let mut waiting = semaphore.acquire_timeout(1, ms(100));
        assert!(poll_with(&mut waiting, &woken).is_pending());
        clock.advance(ms(99));
        assert_eq!(woken.0.load(Ordering::SeqCst), 0);
        assert!(poll(&mut waiting).is_pending());
        clock.advance(ms(1));
        assert!(matches!(ready(&mut waiting), Err(AcquireError::TimedOut)));
        assert_eq!(semaphore.waiters(), 0);
        drop(held);
        assert_eq!(semaphore.available_permits(), 1);
    }

    #[test]
    fn acquire_timeout_is_granted_by_a_release_before_the_deadline() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(1, clock.clone()).unwrap();
        let held = semaphore.try_acquire(1).unwrap();
        let mut waiting = semaphore.acquire_timeout(1, ms(100));
        assert!(poll(&mut waiting).is_pending());
        clock.advance(ms(60));
        drop(held);
        let permit = ready(&mut waiting).unwrap();
        clock.advance(ms(100));
        assert_eq!(permit.num_permits(), 1);
        assert_eq!(semaphore.available_permits(), 0);
        drop(permit);
        assert_eq!(semaphore.available_permits(), 1);
    }

    #[test]
    fn a_timeout_with_permits_free_is_granted_at_once() {
        let semaphore = Semaphore::with_clock(2, ManualClock::new()).unwrap();
        let permit = ready(&mut semaphore.acquire_timeout(2, Duration::ZERO)).unwrap();
        assert_eq!(permit.num_permits(), 2);
        assert!(matches!(
            ready(&mut semaphore.acquire_timeout(3, ms(10))),
            Err(AcquireError::Insufficient(_))
        ));
    }

    #[test]
    fn waiters_with_timeouts_are_served_in_arrival_order() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(1, clock.clone()).unwrap();
        let mut held = Some(semaphore.try_acquire(1).unwrap());
        let mut waiters: Vec<_> = (0..3)
            .map(|_| semaphore.acquire_timeout(1, ms(1_000)))
            .collect();
        for waiter in &mut waiters {
            assert!(poll(waiter).is_pending());
        }
        for i in 0..3 {
            clock.advance(ms(10));
            drop(held.take());
            for later in &mut waiters[i + 1..] {
                assert!(poll(later).is_pending(), "waiter {} overtook {i}", i + 1);
            }
            held = Some(ready(&mut waiters[i]).unwrap());
        }
        assert_eq!(semaphore.waiters(), 0);
    }

    #[test]
    fn a_timed_out_head_lets_the_waiter_behind_it_go() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(2, clock.clone()).unwrap();
        let first = semaphore.try_acquire(1).unwrap();
        let _second = semaphore.try_acquire(1).unwrap();
        let mut big = semaphore.acquire_timeout(2, ms(10));
        let mut small = semaphore.acquire(1);
        assert!(poll(&mut big).is_pending());
        assert!(poll(&mut small).is_pending());
        drop(first);
        assert!(
            poll(&mut small).is_pending(),
            "behind the head in FIFO order"
        );
        clock.advance(ms(10));
        assert!(matches!(ready(&mut big), Err(AcquireError::TimedOut)));
        let permit = ready(&mut small).unwrap();
        assert_eq!(permit.num_permits(), 1);
        assert_eq!(semaphore.available_permits(), 0);
    }

    #[test]
    fn a_cancelled_timed_waiter_leaves_and_the_next_one_moves_up() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(1, clock.clone()).unwrap();
        let held = semaphore.try_acquire(1).unwrap();
        let mut first = semaphore.acquire_timeout(1, ms(50));
        let mut second = semaphore.acquire_timeout(1, ms(500));
        assert!(poll(&mut first).is_pending());
        assert!(poll(&mut second).is_pending());
        drop(first);
        assert_eq!(semaphore.waiters(), 1);
        // The cancelled waiter's deadline passes: nothing happens to the next one.
        clock.advance(ms(100));
        assert!(poll(&mut second).is_pending());
        drop(held);
        let permit = ready(&mut second).unwrap();
        assert_eq!(semaphore.available_permits(), 0);
        drop(permit);
        assert_eq!(semaphore.available_permits(), 1);
    }

    #[test]
    fn a_granted_timed_waiter_dropped_unpolled_passes_its_permits_on() {
        let clock = ManualClock::new();
        let semaphore = Semaphore::with_clock(1, clock.clone()).unwrap();
        let held = semaphore.try_acquire(1).unwrap();
        let mut granted = semaphore.acquire_timeout(1, ms(50));
        let mut next = semaphore.acquire_timeout(1, ms(50));
        assert!(poll(&mut granted).is_pending());
        assert!(poll(&mut next).is_pending());
        drop(held);
        drop(granted);
        assert!(ready(&mut next).is_ok());
    }

    #[test]
    fn acquire_owned_timeout_times_out_and_is_granted() {
        let clock = ManualClock::new();
        let semaphore = Arc::new(Semaphore::with_clock(1, clock.clone()).unwrap());
        let held = semaphore.try_acquire_owned(1).unwrap();
        let mut late = semaphore.acquire_owned_timeout(1, ms(20));
        assert!(poll(&mut late).is_pending());
        clock.advance(ms(20));
        assert!(matches!(ready(&mut late), Err(AcquireError::TimedOut)));

        let mut in_time = semaphore.acquire_owned_timeout(1, ms(20));
        assert!(poll(&mut in_time).is_pending());
        drop(held);
        let permit = ready(&mut in_time).unwrap();
        assert!(Arc::ptr_eq(permit.semaphore(), &semaphore));
    }

    #[test]
    fn acquire_blocking_timeout_returns_when_the_clock_passes_the_deadline() {
        let clock = ManualClock::new();
        let semaphore = Arc::new(Semaphore::with_clock(1, clock.clone()).unwrap());
        let _held = semaphore.try_acquire_owned(1).unwrap();
        let blocked = {
            let semaphore = Arc::clone(&semaphore);
            std::thread::spawn(move || {
                semaphore
                    .acquire_blocking_timeout(1, ms(30))
                    .map(|p| p.num_permits())
            })
        };
        while semaphore.waiters() == 0 {
            std::thread::yield_now();
        }
        clock.advance(ms(30));
        assert_eq!(blocked.join().unwrap(), Err(AcquireError::TimedOut));
    }

    /// Regression: `PermitSource::wait` on an `Arc<Semaphore>` took a timeout and
    /// ignored it (the semaphore had no clock), so a throttle over a semaphore could
    /// wait forever.
    #[test]
    fn permit_source_wait_honours_its_timeout() {
        let clock = ManualClock::new();
        let semaphore = Arc::new(Semaphore::with_clock(1, clock.clone()).unwrap());
        let _held = semaphore.try_acquire_owned(1).unwrap();
        let mut waiting = semaphore.wait(&(), 1, Some(ms(40)));
        assert!(poll(&mut waiting).is_pending());
        clock.advance(ms(40));
        assert!(matches!(ready(&mut waiting), Err(AcquireError::TimedOut)));
    }

    /// A manual clock that counts its readings.
    #[derive(Clone, Debug, Default)]
    struct CountingClock {
        clock: ManualClock,
        reads: Arc<AtomicU64>,
    }

    impl Clock for CountingClock {
        fn now(&self) -> Nanos {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.clock.now()
        }

        fn unix_origin(&self) -> Duration {
            self.clock.unix_origin()
        }

        fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
            self.clock.set_alarm(deadline, alarm)
        }
    }

    /// The clock times waits only: taking and giving back permits without waiting
    /// reads no time, as before the semaphore had a clock.
    #[test]
    fn acquiring_and_releasing_without_waiting_read_no_clock() {
        let clock = CountingClock::default();
        let semaphore = Semaphore::with_clock(2, clock.clone()).unwrap();
        let reads = clock.reads.load(Ordering::SeqCst);
        for _ in 0..10 {
            let a = semaphore.try_acquire(1).unwrap();
            let b = ready(&mut semaphore.acquire(1)).unwrap();
            assert!(semaphore.try_acquire(1).is_err());
            drop((a, b));
        }
        assert_eq!(clock.reads.load(Ordering::SeqCst), reads);
    }

    #[test]
    fn semaphore_alone_still_names_the_default_type() {
        let semaphore: Semaphore = Semaphore::new(1).unwrap();
        let _clock: &tollgate::time::MonotonicClock = semaphore.clock();
        let _permit: tollgate::semaphore::Permit<'_> = semaphore.try_acquire(1).unwrap();
    }
}

// The bug: the acquire futures carried their whole queued state inline (the slot,
// the wait's span, a remote gate's booking), which every acquire granted at once
// wrote and dropped: a semaphore's acquire + release ran 254 instructions where
// the first version ran 177 (callgrind). Queued state is boxed now; a size past
// these bounds brings it back inline.
#[test]
fn acquire_futures_granted_at_once_carry_no_queued_state() {
    use std::mem::size_of;
    use tollgate::algorithm::Gcra;
    use tollgate::futures::{Acquire, AcquirePermit};
    use tollgate::time::MonotonicClock;

    assert!(size_of::<AcquirePermit<'static>>() <= 64);
    assert!(size_of::<Acquire<'static, Gcra, MonotonicClock>>() <= 48);
}
