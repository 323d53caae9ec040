//! Permits for the shapers: waited for in the source's FIFO queue (at once when free)
//! by a wait that owns what it needs, so that a stream or a reader can keep it
//! between polls.

use std::fmt;
use std::task::{Context, Poll, ready};

use crate::error::AcquireError;
use crate::permits::{PermitFuture, PermitSource};
use crate::sync::Mutex;

type Wait<P> =
    PermitFuture<Result<<P as PermitSource>::Permit, AcquireError<<P as PermitSource>::Error>>>;

/// Holds permits of one source for one shaper; gives back on drop whatever it holds
/// or is waiting for.
pub(crate) struct Pacer<P: PermitSource> {
    source: P,
    /// A wait in flight, and for how many permits; under a lock only so that the
    /// shaper stays `Sync` (it is never contended).
    wait: Option<(u64, Mutex<Wait<P>>)>,
    /// Granted and neither used nor given back.
    held: u64,
    /// What the grant handed over: a guard is dropped once the permits are spent.
    permit: Option<P::Permit>,
}

impl<P: PermitSource> Pacer<P> {
    pub(crate) fn new(source: P) -> Pacer<P> {
        Pacer {
            source,
            wait: None,
            held: 0,
            permit: None,
        }
    }

    pub(crate) fn source(&self) -> &P {
        &self.source
    }

    /// Holds `n` permits, or as many as a grant or wait already under way is for:
    /// resolves to the number held, at least 1 when `n` is.
    ///
    /// Goes through the source's wait even when the permits are free, not a decision
    /// first: one decision, so one event, and the same refusals (an immediate
    /// decision refuses as `Insufficient` what a refresh-period limiter grants by
    /// waiting).
    pub(crate) fn poll_hold(
        &mut self,
        cx: &mut Context<'_>,
        n: u64,
    ) -> Poll<Result<u64, AcquireError<P::Error>>> {
        if self.held == 0 {
            let source = &self.source;
            let (n, wait) = self
                .wait
                .get_or_insert_with(|| (n, Mutex::new(source.wait(&(), n, None))));
            let outcome = ready!(wait.lock().as_mut().poll(cx));
            let n = *n;
            self.wait = None;
            self.permit = Some(outcome?);
            self.held = n;
        }
        Poll::Ready(Ok(self.held))
    }

    /// As [`poll_hold`](Pacer::poll_hold) for at most `max` permits (`max` ≥ 1), and
    /// never more than the source grants at once: the chunk a reader or writer may
    /// pass now.
    #[cfg(any(feature = "tokio", feature = "futures-io"))]
    pub(crate) fn poll_hold_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: u64,
    ) -> Poll<Result<u64, AcquireError<P::Error>>> {
        let n = if self.held == 0 && self.wait.is_none() {
            match self.source.chunk(max) {
                0 => {
                    let capacity = self.source.capacity();
                    return Poll::Ready(Err(AcquireError::Insufficient(
                        crate::error::InsufficientCapacity::new(1, capacity),
                    )));
                }
                n => n,
            }
        } else {
            max
        };
        self.poll_hold(cx, n)
    }

    /// Uses `used` of the permits held and gives back the rest.
    pub(crate) fn spend(&mut self, used: u64) {
        let unused = self.held.saturating_sub(used);
        self.held = 0;
        // A guard's permits come back as it drops; a rate's unused ones by refund.
        drop(self.permit.take());
        if unused > 0 {
            self.source.refund(&(), unused);
        }
    }

    /// Gives back the permits held, and cancels a wait under way (which gives back
    /// what it booked).
    pub(crate) fn release(&mut self) {
        self.wait = None;
        self.spend(0);
    }
}

impl<P: PermitSource> Drop for Pacer<P> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<P: PermitSource + fmt::Debug> fmt::Debug for Pacer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer")
            .field("source", &self.source)
            .field("waiting_for", &self.wait.as_ref().map(|(n, _)| *n))
            .field("held", &self.held)
            .finish()
    }
}
