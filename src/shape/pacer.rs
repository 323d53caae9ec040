//! Permits for the shapers: taken at once when free, otherwise waited for in the
//! limiter's FIFO queue by a future that owns its limiter, so that a stream or a
//! reader can keep it between polls.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::wait::AcquireError;

/// `Limiter::acquire` on a clone of the limiter, which the future owns.
type Wait = Pin<Box<dyn Future<Output = Result<Duration, AcquireError>> + Send + Sync>>;

/// Holds permits of one limiter for one shaper; gives back on drop whatever it holds
/// or is waiting for.
pub(crate) struct Pacer<A: Algorithm, C: Clock> {
    limiter: Limiter<A, C>,
    /// A wait in flight, and for how many permits.
    wait: Option<(u64, Wait)>,
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
    pub(crate) fn poll_hold(
        &mut self,
        cx: &mut Context<'_>,
        n: u64,
    ) -> Poll<Result<u64, AcquireError>> {
        if self.held == 0 && self.wait.is_none() {
            match self.limiter.try_acquire(n) {
                Ok(_) => self.held = n,
                Err(Denied::Limited(_)) => {
                    let limiter = self.limiter.clone();
                    self.wait = Some((n, Box::pin(async move { limiter.acquire(n).await })));
                }
                Err(Denied::Insufficient(i)) => {
                    return Poll::Ready(Err(AcquireError::Insufficient(i)))
                }
                Err(Denied::Closed) => return Poll::Ready(Err(AcquireError::Closed)),
            }
        }
        if let Some((n, wait)) = &mut self.wait {
            let outcome = ready!(wait.as_mut().poll(cx));
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

    /// The smaller of `max` and what the limiter grants at once.
    #[cfg(any(feature = "tokio", feature = "futures-io"))]
    fn chunk(&self, max: u64) -> Result<u64, AcquireError> {
        match self.limiter.algorithm().capacity() {
            0 => Err(AcquireError::Insufficient(
                crate::decision::InsufficientCapacity::new(1, 0),
            )),
            capacity => Ok(max.min(capacity)),
        }
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
