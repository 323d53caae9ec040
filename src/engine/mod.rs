//! How an in-process limiter holds an algorithm and its state across threads.
//!
//! A [`Cell`] is [`Atomic`](atomic::Atomic) for an algorithm with a
//! [`Packing`](crate::algorithm::Packing): the state in one atomic word, decided with
//! a compare-and-swap loop, the configuration in a sequence-locked set of words so
//! that reconfiguring needs no lock on the hot path. Every other algorithm is
//! [`Locked`](locked::Locked): both under a short mutex, with a repeated denial of
//! one permit answered from a [`DenialHint`](hint::DenialHint) without it.
//!
//! The choice follows `Algorithm::PACKING`, a constant, so each limiter's branch on
//! it is decided when the crate compiles.
//!
//! A [`Core`] is a cell with its clock and events: an in-process limiter's decision
//! side, which the waiter queue (`crate::wait`, the layer above) waits on.

use std::fmt;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::time::Nanos;

mod atomic;
mod core;
mod hint;
mod locked;

use atomic::Atomic;
use locked::Locked;

pub(crate) use self::core::Core;

/// Thread-safe storage of one algorithm and its state.
// The lock-free cell pads its state word to a cache line of its own: that is the size.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Cell<A: Algorithm> {
    Atomic(Atomic<A>),
    Locked(Locked<A>),
}

macro_rules! either {
    ($cell:expr_2021, $inner:ident => $body:expr_2021) => {
        match $cell {
            Cell::Atomic($inner) => $body,
            Cell::Locked($inner) => $body,
        }
    };
}

impl<A: Algorithm> Cell<A> {
    /// Holds `algorithm` with its initial state at `now`.
    pub(crate) fn new(algorithm: A, now: Nanos) -> Self {
        if A::PACKING.is_some() {
            Cell::Atomic(Atomic::new(algorithm, now))
        } else {
            Cell::Locked(Locked::new(algorithm, now))
        }
    }

    /// [`Algorithm::acquire`], atomically.
    #[inline(always)]
    pub(crate) fn acquire(&self, now: Nanos, n: u64) -> Decision {
        // The kind `new` picked (a constant for each `A`) is tested for first: the
        // lock-free path then takes one branch fewer than through the match alone
        // (114 instructions a GCRA denial against 120, callgrind).
        if A::PACKING.is_some() {
            if let Cell::Atomic(cell) = self {
                return cell.acquire(now, n);
            }
        }
        either!(self, cell => cell.acquire(now, n))
    }

    /// [`Algorithm::peek`].
    #[inline]
    pub(crate) fn peek(&self, now: Nanos, n: u64) -> Decision {
        either!(self, cell => cell.peek(now, n))
    }

    /// [`Algorithm::reserve`], atomically.
    #[inline]
    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        either!(self, cell => cell.reserve(now, n, max_wait))
    }

    /// [`Algorithm::refund`], atomically.
    pub(crate) fn refund(&self, now: Nanos, n: u64) {
        either!(self, cell => cell.refund(now, n))
    }

    /// Runs `f` on the configuration and state as one atomic step and keeps what it
    /// leaves. `f` may run more than once if another thread changes the state
    /// meanwhile, each time on the old configuration and the latest state, so it must
    /// compute the same configuration from the same input.
    ///
    /// Every decision that starts after `update` returns uses the new configuration.
    /// In the lock-free cell, a decision already in flight when the update runs may
    /// still complete under the old one if `f` left the state word as it was (a
    /// configuration-only change): its compare-and-swap cannot tell. Readers would
    /// have to register to close that window, a cost on every decision for the sake
    /// of a rare reconfiguration.
    pub(crate) fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R {
        either!(self, cell => cell.update(f))
    }

    /// Books again, from the state as it is at `now`, `n` permits booked for `until`,
    /// if that makes them due sooner; returns the new time. Otherwise changes nothing.
    /// Gives the booking back and books it again as one step, keeping the result only
    /// if it is due sooner: a refund need not undo a booking exactly.
    pub(crate) fn rebook(&self, now: Nanos, n: u64, until: Nanos) -> Option<Nanos> {
        let max_wait = until.saturating_since(now);
        self.update(&mut |algorithm, state| {
            let mut again = state.clone();
            algorithm.refund(&mut again, now, n);
            match algorithm.reserve(&mut again, now, n, max_wait) {
                Ok(booked) if now + booked.wait() < until => {
                    *state = again;
                    Some(now + booked.wait())
                }
                _ => None,
            }
        })
    }

    /// Runs `f` on the configuration and a copy of the state, and keeps the copy if
    /// `f` answers `Some`: one compare-and-swap in the lock-free cell. For a caller
    /// with a decision of its own that needs no [`Decision`].
    #[inline]
    pub(crate) fn try_commit<T>(
        &self,
        mut f: impl FnMut(&A, &mut A::State) -> Option<T>,
    ) -> Option<T> {
        match self {
            Cell::Atomic(cell) => cell.try_commit(|alg, state| f(alg, state).ok_or(())).ok(),
            Cell::Locked(cell) => cell.update(&mut |alg, state| {
                let mut next = state.clone();
                let answer = f(alg, &mut next);
                if answer.is_some() {
                    *state = next;
                }
                answer
            }),
        }
    }

    /// A copy of the configuration and state.
    pub(crate) fn snapshot(&self) -> (A, A::State) {
        either!(self, cell => cell.snapshot())
    }
}

impl<A: Algorithm> fmt::Debug for Cell<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        either!(self, cell => cell.fmt(f))
    }
}
