//! One waiter's [`Slot`]: the outcome the queue writes for it and the wake-up the
//! queue calls.
//!
//! A slot's state moves one way, written by the queue under its lock and taken by
//! the waiter without it:
//!
//! ```text
//! WAITING ─queue→ GRANTED | CLOSED | TIMED_OUT | INSUFFICIENT | PAST_END ─waiter→ DONE
//! WAITING ─queue→ TURN ─waiter→ BOOKING ─settle→ WAITING, or an outcome as above
//! any ─the waiter leaves (cancel), or its round trip fails→ DONE
//! ```
//!
//! The queue writes an outcome only as it takes the waiter's entry out of the line,
//! so a slot gets at most one. `TURN` and `BOOKING` are a remote gate's first
//! waiter's (see `round_trip`).

use std::mem;
use std::task::Waker;

use crate::decision::InsufficientCapacity;
use crate::error::AcquireError;
use crate::sync::{Arc, AtomicU8, AtomicU64, Mutex, Ordering};

pub(super) const WAITING: u8 = 0;
pub(super) const GRANTED: u8 = 1;
pub(super) const CLOSED: u8 = 2;
pub(super) const TIMED_OUT: u8 = 3;
pub(super) const INSUFFICIENT: u8 = 4;
/// The outcome was handed to the caller, or the waiter left.
pub(super) const DONE: u8 = 5;
/// A remote gate's first waiter is to book by a round trip.
pub(super) const TURN: u8 = 6;
/// The waiter is booking by a round trip.
pub(super) const BOOKING: u8 = 7;
/// Due past the clock's end.
pub(super) const PAST_END: u8 = 8;

/// One waiter's shared cell: the outcome the queue writes and the wake-up it calls.
pub(crate) struct Slot {
    pub(super) state: AtomicU8,
    /// The capacity behind an `INSUFFICIENT` outcome.
    pub(super) capacity: AtomicU64,
    /// Taken after the queue's lock, never before it.
    wake: Mutex<Wake>,
}

pub(crate) enum Wake {
    Nobody,
    Task(Waker),
}

impl Wake {
    pub(super) fn wake(self) {
        match self {
            Wake::Nobody => {}
            Wake::Task(waker) => waker.wake(),
        }
    }
}

/// What polling a waiter's slot found.
pub(crate) enum Polled {
    /// The wait ended.
    Outcome(Result<(), AcquireError>),
    /// The waiter is to book by a round trip
    /// ([`Gate::reserve_remote`](super::gate::Gate::reserve_remote)), then
    /// [`Waiting::settle`](super::queue::Waiting::settle).
    Turn,
    Pending,
}

impl Slot {
    /// A waiting slot, to be woken through `wake`.
    pub(super) fn new(wake: Wake) -> Arc<Slot> {
        Arc::new(Slot {
            state: AtomicU8::new(WAITING),
            capacity: AtomicU64::new(0),
            wake: Mutex::new(wake),
        })
    }

    /// Posts `state` (an outcome, or the turn) for the waiter, and takes the wake-up
    /// that tells it, to call once the queue's lock is released.
    pub(super) fn post(&self, state: u8) -> Wake {
        self.state.store(state, Ordering::Release);
        mem::replace(&mut *self.wake.lock(), Wake::Nobody)
    }

    /// The outcome for a waiter asking for `n`, if the queue has decided; otherwise
    /// registers `wake` for it.
    #[inline]
    pub(crate) fn poll(&self, n: u64, wake: impl FnOnce() -> Wake) -> Polled {
        match self.take_outcome(n) {
            Polled::Pending => {}
            decided => return decided,
        }
        let replaced = mem::replace(&mut *self.wake.lock(), wake());
        // Dropped outside the lock: a waker's drop may run arbitrary code.
        drop(replaced);
        // A decision made while the wake-up was being stored.
        self.take_outcome(n)
    }

    /// Whether the slot already holds `waker`, to skip cloning it again.
    #[inline]
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        matches!(&*self.wake.lock(), Wake::Task(w) if w.will_wake(waker))
    }

    /// Whether the queue has decided the outcome, or handed the waiter the turn.
    #[inline]
    pub(crate) fn is_decided(&self) -> bool {
        !matches!(self.state.load(Ordering::Acquire), WAITING | DONE | BOOKING)
    }

    /// The outcome, if decided, without taking a turn.
    pub(super) fn peek_outcome(&self, n: u64) -> Option<Result<(), AcquireError>> {
        if self.state.load(Ordering::Acquire) == TURN {
            return None;
        }
        match self.take_outcome(n) {
            Polled::Outcome(outcome) => Some(outcome),
            _ => None,
        }
    }

    #[inline]
    fn take_outcome(&self, n: u64) -> Polled {
        let mut state = self.state.load(Ordering::Acquire);
        if state == TURN {
            // Only this waiter leaves TURN for BOOKING, but `close` may post CLOSED
            // meanwhile: a plain store would overwrite it and leave the waiter
            // pending after its round trip's booking is refunded.
            match self
                .state
                .compare_exchange(TURN, BOOKING, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Polled::Turn,
                Err(now) => state = now,
            }
        }
        let outcome = match state {
            WAITING | DONE | BOOKING | TURN => return Polled::Pending,
            GRANTED => Ok(()),
            CLOSED => Err(AcquireError::Closed),
            TIMED_OUT => Err(AcquireError::TimedOut),
            PAST_END => Err(AcquireError::PastClockEnd),
            _ => Err(AcquireError::Insufficient(InsufficientCapacity::new(
                n,
                self.capacity.load(Ordering::Relaxed),
            ))),
        };
        self.state.store(DONE, Ordering::Release);
        Polled::Outcome(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_is_taken_once() {
        let slot = Slot::new(Wake::Nobody);
        assert!(matches!(slot.poll(1, || Wake::Nobody), Polled::Pending));
        assert!(!slot.is_decided());
        slot.post(GRANTED).wake();
        assert!(slot.is_decided());
        assert!(matches!(
            slot.poll(1, || Wake::Nobody),
            Polled::Outcome(Ok(()))
        ));
        assert_eq!(slot.state.load(Ordering::Relaxed), DONE);
        assert!(matches!(slot.poll(1, || Wake::Nobody), Polled::Pending));
    }

    #[test]
    fn the_turn_is_taken_once_and_peeking_leaves_it() {
        let slot = Slot::new(Wake::Nobody);
        slot.post(TURN);
        assert_eq!(slot.peek_outcome(1), None);
        assert!(matches!(slot.poll(1, || Wake::Nobody), Polled::Turn));
        assert_eq!(slot.state.load(Ordering::Relaxed), BOOKING);
        assert!(!slot.is_decided());
        assert!(matches!(slot.poll(1, || Wake::Nobody), Polled::Pending));
    }

    #[test]
    fn an_insufficient_outcome_carries_the_capacity() {
        let slot = Slot::new(Wake::Nobody);
        slot.capacity.store(3, Ordering::Relaxed);
        slot.post(INSUFFICIENT);
        assert_eq!(
            slot.peek_outcome(5),
            Some(Err(AcquireError::Insufficient(InsufficientCapacity::new(
                5, 3
            ))))
        );
    }
}
