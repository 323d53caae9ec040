//! Permits for the shapers: waited for in the limiter's FIFO queue (at once when
//! free) by a wait that owns its limiter, so that a stream or a reader can keep it
//! between polls.

use std::fmt;
use std::task::{ready, Context, Poll};

use crate::algorithm::Algorithm;
use crate::limiter::{AcquireOwned, Limiter};
use crate::time::Clock;
use crate::AcquireError;

/// Holds permits of one limiter for one shaper; gives back on drop whatever it holds
/// or is waiting for.
pub(crate) struct Pacer<A: Algorithm, C: Clock> {
    limiter: Limiter<A, C>,
    /// A wait in flight, and for how many permits.
    wait: Option<(u64, AcquireOwned<A, C>)>,
    /// Granted and neither used nor given back.
    held: u64,
}

impl<A: Algorithm, C: Clock> Pacer<A, C> {
    pub(crate) fn new(limiter: Limiter<A, C>) -> Pacer<A, C> {
        Pacer {
            limiter,
            wait: None,
            held: 0,
        }
    }

    pub(crate) fn limiter(&self) -> &Limiter<A, C> {
        &self.limiter
    }

    /// Holds `n` permits, or as many as a grant or wait already under way is for:
    /// resolves to the number held, at least 1 when `n` is.
    ///
    /// Goes through [`Limiter::acquire`]'s wait even when the permits are free, not
    /// `try_acquire` first: one decision, so one event, and the same refusals
    /// (`try_acquire` refuses as `Insufficient` what a refresh-period limiter grants
    /// by waiting).
    pub(crate) fn poll_hold(
        &mut self,
        cx: &mut Context<'_>,
        n: u64,
    ) -> Poll<Result<u64, AcquireError>> {
        if self.held == 0 {
            let limiter = &self.limiter;
            let (n, wait) = self
                .wait
                .get_or_insert_with(|| (n, limiter.acquire_owned(n)));
            let outcome = ready!(wait.poll(cx));
            let n = *n;
            self.wait = None;
            outcome?;
            self.held = n;
        }
        Poll::Ready(Ok(self.held))
    }

    /// As [`poll_hold`](Pacer::poll_hold) for at most `max` permits (`max` ≥ 1), and
    /// never more than the limiter grants at once: the chunk a reader or writer may
    /// pass now.
    #[cfg(any(feature = "tokio", feature = "futures-io"))]
    pub(crate) fn poll_hold_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: u64,
    ) -> Poll<Result<u64, AcquireError>> {
        let n = if self.held == 0 && self.wait.is_none() {
            self.chunk(max)?
        } else {
            max
        };
        self.poll_hold(cx, n)
    }

    /// The smaller of `max` and what the limiter grants at once: its capacity, or
    /// for an algorithm that grants more than that only by waiting (a refresh
    /// period's), what it grants without waiting.
    #[cfg(any(feature = "tokio", feature = "futures-io"))]
    fn chunk(&self, max: u64) -> Result<u64, AcquireError> {
        use crate::decision::{Denied, InsufficientCapacity};

        let n = match self.limiter.algorithm().capacity() {
            0 => return Err(AcquireError::Insufficient(InsufficientCapacity::new(1, 0))),
            capacity => max.min(capacity),
        };
        Ok(match self.limiter.peek(n) {
            Err(Denied::Insufficient(at_once)) if (1..n).contains(&at_once.capacity()) => {
                at_once.capacity()
            }
            _ => n,
        })
    }

    /// Uses `used` of the permits held and gives back the rest.
    pub(crate) fn spend(&mut self, used: u64) {
        let unused = self.held.saturating_sub(used);
        self.held = 0;
        if unused > 0 {
            self.limiter.refund(unused);
        }
    }

    /// Gives back the permits held, and cancels a wait under way (which gives back
    /// what it booked).
    pub(crate) fn release(&mut self) {
        self.wait = None;
        self.spend(0);
    }
}

impl<A: Algorithm, C: Clock> Drop for Pacer<A, C> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for Pacer<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer")
            .field("limiter", &self.limiter)
            .field("waiting_for", &self.wait.as_ref().map(|(n, _)| *n))
            .field("held", &self.held)
            .finish()
    }
}
