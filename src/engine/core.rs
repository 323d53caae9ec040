//! [`Core`]: an in-process limiter's decision side, which a
//! [`Limiter`](crate::Limiter), a [`LeakyQueue`](crate::LeakyQueue) and a
//! [`Semaphore`](crate::Semaphore) share.

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::observe::{Events, Reporter};
use crate::time::Clock;

use super::Cell;

/// An algorithm's cell, the clock it decides at and the events it reports to: what
/// the waiter queue in front of an in-process limiter waits on.
pub(crate) struct Core<A: Algorithm, C> {
    pub(crate) cell: Cell<A>,
    pub(crate) clock: C,
    /// Set at most once, before the limiter is shared in practice. std's `OnceLock`
    /// even under loom: the models never attach events, and reading an unset one is
    /// a plain load.
    events: Reporter,
}

impl<A: Algorithm, C: Clock> Core<A, C> {
    /// `algorithm` in its initial state at the clock's current time.
    pub(crate) fn new(algorithm: A, clock: C) -> Core<A, C> {
        let now = clock.now();
        Core {
            cell: Cell::new(algorithm, now),
            clock,
            events: Reporter::default(),
        }
    }

    /// Attaches `events`, unless some are attached already.
    pub(crate) fn attach(&self, events: Events) {
        self.events.attach(events);
    }

    pub(crate) fn events(&self) -> Option<&Events> {
        self.events.events()
    }

    /// Reports a decision on `n` permits, if anyone listens.
    #[inline]
    pub(crate) fn report(&self, n: u64, decision: &Decision) {
        self.events.decision(n, decision);
    }

    /// Reports a reservation of `n` permits, if anyone listens.
    #[inline]
    pub(crate) fn report_reservation(&self, n: u64, reservation: &Result<Reservation, Denied>) {
        self.events.reservation(n, reservation);
    }
}
