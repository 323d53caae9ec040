//! `Semaphore`: guards give permits back, the count never exceeds the maximum nor
//! goes below zero, and the types cross threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
