//! Random acquires, cancellations, releases and clock moves on waiting limiters,
//! checking that no permit is lost or created, that admitted work stays within the
//! algorithm's bound, that no waiter is left pending while its permits sit unused, and
//! that waiters are served in arrival order.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::noop_waker_ref;
use proptest::prelude::*;
use tollgate::algorithm::Gcra;
use tollgate::futures::{Acquire, AcquirePermit};
use tollgate::semaphore::Permit;
use tollgate::time::{Clock, ManualClock};
use tollgate::{AcquireError, Fairness};
use tollgate::{Limiter, Quota, Semaphore};

fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(noop_waker_ref()))
}

/// One step of a test; sizes and indices are reduced to what the limiter allows.
#[derive(Clone, Debug)]
enum Op {
    /// Starts an `acquire(n)`, polled once.
    Start(u64),
    /// Starts an `acquire_timeout(n, ms)`, polled once (the GCRA limiter only).
    StartTimed(u64, u64),
    /// Drops the pending future at this index (modulo how many there are).
    Cancel(usize),
    /// Moves the clock (GCRA), or drops a held permit (semaphore).
    Advance(u64),
    /// Polls every pending future, then checks the invariants.
    PollAll,
}

fn op(max_n: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=max_n + 1).prop_map(Op::Start),
        1 => (1..=max_n, 0u64..400).prop_map(|(n, t)| Op::StartTimed(n, t)),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => prop_oneof![Just(0u64), 1u64..350].prop_map(Op::Advance),
        3 => Just(Op::PollAll),
    ]
}

/// A started future, in arrival order.
struct Waiter<F> {
    n: u64,
    future: F,
}

type GcraWaiter<'a> = Waiter<Acquire<'a, Gcra, ManualClock>>;
type SemaphoreWaiter<'a> = Waiter<AcquirePermit<'a>>;

const INTERVAL_MS: u64 = 100;

/// The GCRA bound: by time `t` since the start, at most `burst + t / interval`
/// permits can have been admitted.
fn gcra_bound(burst: u64, elapsed: Duration) -> u64 {
    burst + (elapsed.as_millis() as u64) / INTERVAL_MS
}

const INTERVAL_NS: u64 = INTERVAL_MS * 1_000_000;

/// What the granted requests alone have used of a GCRA: the theoretical arrival time
/// they imply, each booked when it was seen granted (no earlier than it was).
#[derive(Default)]
struct Used {
    permits: u64,
    tat: u64,
}

impl Used {
    fn grant(&mut self, now: u64, n: u64) {
        self.permits += n;
        self.tat = self.tat.max(now) + n * INTERVAL_NS;
    }
}

type Gated = Limiter<Gcra, ManualClock>;

/// Starts a wait for `n` and polls it once.
fn gcra_start<'a>(
    limiter: &'a Gated,
    fair: bool,
    burst: u64,
    n: u64,
    timeout: Option<u64>,
    pending: &mut Vec<GcraWaiter<'a>>,
    used: &mut Used,
) -> Result<(), TestCaseError> {
    let waiters = limiter.waiters();
    let mut future = match timeout {
        Some(ms) => limiter.acquire_timeout(n, Duration::from_millis(ms)),
        None => limiter.acquire(n),
    };
    match poll(&mut future) {
        Poll::Ready(Ok(waited)) => {
            prop_assert_eq!(waited, Duration::ZERO);
            prop_assert!(
                n == 0 || waiters == 0 || !fair,
                "{} went at once past {} waiters",
                n,
                waiters
            );
            used.grant(limiter.now().as_u64(), n);
        }
        Poll::Ready(Err(AcquireError::Insufficient(i))) => {
            prop_assert!(n > burst);
            prop_assert_eq!((i.requested(), i.capacity()), (n, burst));
        }
        Poll::Ready(Err(AcquireError::TimedOut)) => prop_assert!(timeout.is_some()),
        Poll::Ready(Err(e)) => prop_assert!(false, "unexpected {:?}", e),
        Poll::Pending => {
            prop_assert!(n > 0 && n <= burst);
            pending.push(Waiter { n, future });
        }
    }
    Ok(())
}

/// Polls every pending wait, counting the permits granted.
fn gcra_poll_all(
    fair: bool,
    now: u64,
    pending: &mut Vec<GcraWaiter<'_>>,
    used: &mut Used,
) -> Result<(), TestCaseError> {
    let mut resolved = Vec::new();
    for (i, w) in pending.iter_mut().enumerate() {
        match poll(&mut w.future) {
            Poll::Pending => {}
            Poll::Ready(Ok(_)) => {
                used.grant(now, w.n);
                resolved.push((i, true));
            }
            Poll::Ready(Err(AcquireError::TimedOut)) => resolved.push((i, false)),
            Poll::Ready(Err(e)) => prop_assert!(false, "unexpected {:?}", e),
        }
    }
    // FIFO: nobody was granted while someone who came before still waits.
    if let Some(&(last_granted, _)) = resolved.iter().rev().find(|(_, ok)| fair && *ok) {
        let still_before = (0..last_granted).any(|i| !resolved.iter().any(|(r, _)| *r == i));
        prop_assert!(!still_before, "granted out of arrival order");
    }
    for (i, _) in resolved.into_iter().rev() {
        pending.remove(i);
    }
    Ok(())
}

fn check_gcra(fairness: Fairness, burst: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let fair = fairness == Fairness::Fifo;
    let clock = ManualClock::new();
    let quota = Quota::with_period(Duration::from_millis(INTERVAL_MS))
        .unwrap()
        .burst(burst)
        .unwrap();
    let limiter = Limiter::with_clock(Gcra::new(quota), clock.clone()).with_fairness(fairness);
    let mut pending: Vec<GcraWaiter<'_>> = Vec::new();
    let mut used = Used::default();

    for op in ops {
        match *op {
            Op::Start(n) => gcra_start(&limiter, fair, burst, n, None, &mut pending, &mut used)?,
            Op::StartTimed(n, ms) => {
                gcra_start(&limiter, fair, burst, n, Some(ms), &mut pending, &mut used)?
            }
            Op::Cancel(i) => {
                if !pending.is_empty() {
                    let i = i % pending.len();
                    pending.remove(i);
                }
            }
            Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Op::PollAll => {
                gcra_poll_all(fair, clock.now().as_u64(), &mut pending, &mut used)?;
                prop_assert_eq!(limiter.waiters(), pending.len());
                // Nobody waits while the first waiter's permits are free; unfair,
                // nobody waits while their own are.
                let first = if fair { 1 } else { pending.len() };
                for w in pending.iter().take(first) {
                    prop_assert!(
                        limiter.peek(w.n).is_err(),
                        "a waiter for {} is pending with its permits free",
                        w.n
                    );
                }
                // Nothing is held but what was granted and what the first waiter
                // booked (unfair waiters book nothing): cancelled and unclaimed
                // permits came back.
                let booked = match pending.first() {
                    Some(head) if fair => head.n * INTERVAL_NS,
                    _ => 0,
                };
                let now = clock.now().as_u64();
                prop_assert!(
                    limiter.state() <= used.tat.max(now) + booked,
                    "permits lost: state {} > {} + {} at {}",
                    limiter.state(),
                    used.tat,
                    booked,
                    now
                );
            }
        }
        let elapsed = clock.now().as_duration();
        prop_assert!(
            used.permits <= gcra_bound(burst, elapsed),
            "{} admitted by {:?}",
            used.permits,
            elapsed
        );
    }

    // Left alone, every waiter is served by the alarms it set, and nothing stays on
    // the clock.
    for _ in 0..1000 {
        gcra_poll_all(fair, clock.now().as_u64(), &mut pending, &mut used)?;
        match clock.next_alarm() {
            Some(at) => {
                clock.set(at);
            }
            None => break,
        }
    }
    prop_assert!(pending.is_empty(), "{} waiters stranded", pending.len());
    prop_assert_eq!(limiter.waiters(), 0);
    prop_assert_eq!(clock.pending_alarms(), 0);
    prop_assert!(used.permits <= gcra_bound(burst, clock.now().as_duration()));
    // Nothing was lost for good: a full burst comes back.
    clock.advance(Duration::from_millis(INTERVAL_MS * burst));
    prop_assert!(limiter.peek(burst).is_ok());
    Ok(())
}

/// Polls every pending wait; the granted permits join `held`.
fn semaphore_poll_all<'a>(
    pending: &mut Vec<SemaphoreWaiter<'a>>,
    held: &mut Vec<Permit<'a>>,
) -> Result<(), TestCaseError> {
    let mut granted = Vec::new();
    for (i, w) in pending.iter_mut().enumerate() {
        match poll(&mut w.future) {
            Poll::Pending => {}
            Poll::Ready(Ok(permit)) => {
                prop_assert_eq!(permit.num_permits(), w.n);
                held.push(permit);
                granted.push(i);
            }
            Poll::Ready(Err(e)) => prop_assert!(false, "unexpected {:?}", e),
        }
    }
    // FIFO: the granted are a prefix of the waiters.
    prop_assert!(
        granted.iter().enumerate().all(|(k, &i)| k == i),
        "granted out of arrival order: {:?}",
        granted
    );
    pending.drain(..granted.len());
    Ok(())
}

/// No permit lost or created, and nobody waits while the first waiter's permits are
/// free.
fn semaphore_check(
    semaphore: &Semaphore,
    max: u64,
    pending: &[SemaphoreWaiter<'_>],
    held: &[Permit<'_>],
) -> Result<(), TestCaseError> {
    let in_hand: u64 = held.iter().map(|p| p.num_permits()).sum();
    prop_assert_eq!(
        semaphore.available_permits() + in_hand,
        max,
        "permits lost or created"
    );
    prop_assert_eq!(semaphore.waiters(), pending.len());
    if let Some(head) = pending.first() {
        prop_assert!(
            head.n > semaphore.available_permits(),
            "the first waiter, for {}, is pending with {} free",
            head.n,
            semaphore.available_permits()
        );
    }
    Ok(())
}

fn check_semaphore(max: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let semaphore = Semaphore::new(max).unwrap();
    let mut pending: Vec<SemaphoreWaiter<'_>> = Vec::new();
    let mut held: Vec<Permit<'_>> = Vec::new();

    for op in ops {
        match *op {
            Op::Start(n) | Op::StartTimed(n, _) => {
                let waiters = semaphore.waiters();
                let mut future = semaphore.acquire(n);
                match poll(&mut future) {
                    Poll::Ready(Ok(permit)) => {
                        prop_assert!(n == 0 || waiters == 0, "{} went past waiters", n);
                        held.push(permit);
                    }
                    Poll::Ready(Err(AcquireError::Insufficient(i))) => {
                        prop_assert!(n > max);
                        prop_assert_eq!(i.capacity(), max);
                    }
                    Poll::Ready(Err(e)) => prop_assert!(false, "unexpected {:?}", e),
                    Poll::Pending => {
                        prop_assert!(n > 0 && n <= max);
                        pending.push(Waiter { n, future });
                    }
                }
            }
            Op::Cancel(i) => {
                if !pending.is_empty() {
                    let i = i % pending.len();
                    pending.remove(i);
                }
            }
            Op::Advance(i) => {
                if !held.is_empty() {
                    let i = i as usize % held.len();
                    drop(held.swap_remove(i));
                }
            }
            Op::PollAll => {
                semaphore_poll_all(&mut pending, &mut held)?;
                semaphore_check(&semaphore, max, &pending, &held)?;
            }
        }
    }

    // Giving every permit back serves every waiter, in order.
    while !pending.is_empty() || !held.is_empty() {
        held.clear();
        semaphore_poll_all(&mut pending, &mut held)?;
        semaphore_check(&semaphore, max, &pending, &held)?;
        prop_assert!(
            !held.is_empty() || pending.is_empty(),
            "waiters stranded with every permit free"
        );
    }
    prop_assert_eq!(semaphore.available_permits(), max);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn gcra_waiting_never_over_admits_strands_or_reorders(
        burst in 1u64..=4,
        ops in prop::collection::vec(op(4), 0..60),
    ) {
        check_gcra(Fairness::Fifo, burst, &ops)?;
    }

    #[test]
    fn unfair_gcra_waiting_never_over_admits_or_strands(
        burst in 1u64..=4,
        ops in prop::collection::vec(op(4), 0..60),
    ) {
        check_gcra(Fairness::Unfair, burst, &ops)?;
    }

    #[test]
    fn semaphore_waiting_conserves_permits_and_serves_in_order(
        max in 1u64..=4,
        ops in prop::collection::vec(op(4), 0..60),
    ) {
        check_semaphore(max, &ops)?;
    }
}
