//! Waiting for permits: the queue of waiters in front of every limiter, and the
//! futures that wait in it.
//!
//! A limiter that cannot grant a request now queues it. The first waiter books its
//! permits ([`Algorithm::reserve`](crate::algorithm::Algorithm::reserve)) and sets one
//! alarm on the limiter's [`Clock`](crate::time::Clock) for when it may go; the
//! others wait behind it holding nothing. Alarms ring on the
//! [`Scheduler`](crate::time::Scheduler) thread (or, for a
//! [`ManualClock`](crate::time::ManualClock), when the test moves the clock).
//! Dropping a waiting future gives back what it booked, and the next waiter moves up.
//!
//! # The pieces
//!
//! - [`gate`]: the [`Gate`](gate::Gate) contract, what the queue needs from a
//!   limiter (decisions, a clock, alarms), and its implementation for the engine's
//!   `Core`, which the in-process limiters share. Keyed and store limiters implement
//!   it beside themselves (`KeyedGate`, `SharedGate`, `BatchedGate`).
//! - [`queue`]: [`Waiting`](queue::Waiting), a gate and the line of waiters in front
//!   of it.
//! - `slot`: one waiter's cell, where the queue posts its outcome and finds its waker.
//! - [`round_trip`]: bookings that leave the process, for a store's gate.
//! - [`future`]: [`WaitFor`](future::WaitFor), the state machine behind every
//!   acquire future and blocking wait.
//! - [`per_key`]: a queue for each key that has waiters, for keyed limiters.
//!
//! `Limiter::try_acquire` is [`Waiting::try_acquire`](queue::Waiting::try_acquire),
//! which with nobody waiting is the gate's `acquire`: for a `Core`, its cell's
//! (`crate::engine`).
//!
//! # Implementation
//!
//! ## The line
//!
//! An acquire starts with [`Waiting::begin`](queue::Waiting::begin): with nobody
//! waiting and the queue open (one load of `word`), it asks the gate at once, and a
//! grant costs nothing more. Otherwise the caller gets an `Entry` at the back of the
//! line and an `Arc<Slot>` to poll, and the queue drains: it takes from the front
//! what the gate allows now.
//!
//! Only the first waiter ever asks the gate. `drain` has it `reserve` its permits
//! within its deadline: granted now, it leaves and the next one asks; booked for
//! later, it keeps `booked_until` and the queue arms an alarm for then; denied for a
//! while, the queue arms an alarm for the retry; denied until a release (a
//! concurrency limit), no alarm. The waiters behind it hold nothing, so one leaving
//! undoes no one's booking, and what a cancelled booking gives back goes to the next
//! waiter at once. ([`Fairness::Unfair`] instead grants every waiter that fits, and
//! the newest-first order of an adaptive limiter's backlog takes permits as they come,
//! booking nothing.)
//!
//! ## Invariants
//!
//! 1. Whenever the queue's lock is free, `word` is `waiters << 1 | closed`: each
//!    change to the line publishes it before the lock is released. The lock-free
//!    paths read only `word`.
//! 2. At most one waiter holds a booking: the first in line.
//! 3. A slot gets at most one outcome, posted as its entry leaves the line; a waiter
//!    still in line reads `WAITING`, `TURN` or `BOOKING`.
//! 4. Whenever the lock is free and some waiter is to be decided by time alone (a
//!    booking coming due, a retry, a deadline; a round trip in flight is bounded by
//!    its own `max_wait`), an alarm is armed at or before the earliest such time;
//!    `alarm_at` is the earliest armed and not yet rung. Alarms are never taken
//!    back: one that finds nothing to do arms what is still needed.
//! 5. Nothing is lost: a waiter that leaves gives back its booking, or a grant it
//!    never took, and a close gives back every booking.
//!
//! ## Locks
//!
//! Outermost first; holding one, a thread takes only those below it:
//!
//! 1. `Queues::map` (`per_key`), to find or make a key's queue; never held while
//!    waiting or deciding.
//! 2. `Waiting::inner`, the queue's lock: the line, `alarm_at`, `recheck`, `closed`.
//!    Every change to the line, and every decision the queue makes for a waiter, is
//!    under it.
//! 3. `Slot::wake`, one waiter's waker: the queue takes the waker out under its own
//!    lock; the waiter puts one in holding nothing else.
//! 4. The gate's own (a locked cell's mutex, a keyed table's shard), only inside a
//!    decision, which never calls back into the queue.
//!
//! The clock's locks and the wakers are taken under none of these: the queue collects
//! the wake-ups and the alarm it needs in `Effects` under its lock, and delivers them
//! once it is released (`deliver`). A `ManualClock` rings an alarm already due on the
//! thread that sets it, which would take the queue's lock again, and a woken task may
//! run at once and come straight back. The alarm goes first, so that a waker that
//! panics cannot leave the queue without one.
//!
//! Three paths decide on the gate without the queue's lock: `try_acquire` and `begin`
//! when nobody waits (or when the queue is unfair), and `release`, which refunds and
//! then takes the lock only if `word` shows waiters. A release racing a new waiter is
//! not lost: the release refunds, fences (`SeqCst`) and reads `word`; the waiter is
//! pushed, `word` published, a fence, and its drain reads the gate. Either the release
//! sees the waiter and serves it, or the waiter's drain sees the refund.
//!
//! ## How a grant, a cancel and an alarm interleave
//!
//! All three take the queue's lock for their whole change to the line, so they
//! interleave only as wholes; what crosses the lock is the slot.
//!
//! - **A grant** posts `GRANTED` on the slot (a release store), takes the waker out
//!   and removes the entry; the wake-up follows once the lock is released. The waiter
//!   ([`Slot::poll`](slot::Slot::poll)) reads the state; finding nothing, it stores
//!   its waker under the slot's lock and reads again. The queue takes the waker after
//!   posting, under that same lock, so the waiter either sees the outcome on its
//!   second read or has stored the waker the queue takes and wakes.
//! - **A cancel** (a waiting future dropped:
//!   [`Waiting::cancel`](queue::Waiting::cancel)) swaps its slot to `DONE` under the
//!   queue's lock. Still in line, its entry leaves, its booking if any is refunded,
//!   and if it was first the line drains, so the next waiter asks the gate as it is
//!   now. Granted but not yet taken, the permits are refunded, the first waiter's
//!   booking is made again if that makes it due sooner (`Gate::rebook`), and the
//!   line drains. A grant and a cancel thus meet in one order or the other: the
//!   cancel returns the grant, or the grant never sees the waiter.
//! - **An alarm** rings on the scheduler's thread, on the thread that moves a
//!   `ManualClock`, or on the thread that sets one already due; the clock holds it
//!   weakly, so a dropped limiter's rings nothing. Under the lock it forgets
//!   `alarm_at`, whichever alarm it was, and drains at the clock's time: unbooked
//!   waiters past their deadline fail with `TimedOut`, a booking come due is granted,
//!   the next first waiter books, and the one alarm still needed is armed. An alarm
//!   left by a waiter since cancelled or granted by a release finds nothing due; one
//!   that rings a hair early arms the same time again.
//!
//! A booking is granted when it comes due even if the wake-up is late or the deadline
//! has passed meanwhile: it was booked within the deadline. A new waiter whose
//! deadline comes before the booked first waiter's time fails at once.
//!
//! ## Round trips
//!
//! A store's gate ([`Gate::is_remote`](gate::Gate::is_remote)) cannot decide under the
//! lock. Its first waiter is handed the turn instead and books from its own task
//! outside every lock; the reply is applied under the lock as if the gate had decided
//! there. [`round_trip`] tells how releases, cancels, closes and failures meet a
//! booking in flight.

pub(crate) mod future;
pub(crate) mod gate;
pub(crate) mod per_key;
pub(crate) mod queue;
pub(crate) mod round_trip;
mod slot;

pub use queue::Fairness;

/// What the waiting core's unit tests share: limiters on a manual clock, and a waker
/// that counts.
#[cfg(test)]
mod testing {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    use super::queue::Waiting;
    use crate::algorithm::{Concurrency, Gcra};
    use crate::engine::Core;
    use crate::quota::Quota;
    use crate::sync::{Arc, AtomicU64, Ordering};
    use crate::time::ManualClock;

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    pub(super) struct Woken(AtomicU64);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Woken {
        pub(super) fn new() -> Arc<Woken> {
            Arc::default()
        }

        pub(super) fn count(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Polls once, waking `woken`.
    pub(super) fn poll<F: Future + Unpin>(future: &mut F, woken: &Arc<Woken>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(woken));
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    /// A GCRA limiter's queue: `per_second`, with a burst of `burst`.
    pub(super) fn gcra(
        per_second: u64,
        burst: u64,
        clock: &ManualClock,
    ) -> Arc<Waiting<Core<Gcra, ManualClock>>> {
        let quota = Quota::per_second(per_second).unwrap().burst(burst).unwrap();
        Waiting::new(Core::new(Gcra::new(quota), clock.clone()))
    }

    /// A concurrency limit's queue: `max` permits at once, back only by release.
    pub(super) fn concurrency(
        max: u64,
        clock: &ManualClock,
    ) -> Arc<Waiting<Core<Concurrency, ManualClock>>> {
        Waiting::new(Core::new(Concurrency::new(max).unwrap(), clock.clone()))
    }
}
