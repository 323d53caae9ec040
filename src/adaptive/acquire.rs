//! [`AdaptiveAcquire`]: the future of [`AdaptiveLimiter::acquire`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::LimitAlgorithm;
use super::limiter::AdaptiveLimiter;
use super::permit::AdaptivePermit;
use crate::decision::Denied;
use crate::error::AcquireError;
use crate::semaphore::{Permits, Shared};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};
use crate::wait::future::WaitFor;

/// The future of [`AdaptiveLimiter::acquire`] and
/// [`acquire_timeout`](AdaptiveLimiter::acquire_timeout): an [`AdaptivePermit`], or
/// why none was had.
///
/// # Cancel safety
///
/// Dropping it before it completes leaves the queue; a permit granted to it and not
/// yet handed over is given back, and goes to the next waiter.
#[must_use = "futures do nothing unless polled"]
pub struct AdaptiveAcquire<L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock> {
    limiter: Arc<AdaptiveLimiter<L, C>>,
    state: State<C>,
}

enum State<C: Clock> {
    /// Decided at the first poll, without queueing.
    FailFast,
    Wait(WaitFor<Shared<C>, Permits<C>>),
    Done,
}

impl<L: LimitAlgorithm, C: Clock> AdaptiveAcquire<L, C> {
    /// Waits at most `timeout` in the limiter's queue; `None` fails fast.
    pub(super) fn new(
        limiter: Arc<AdaptiveLimiter<L, C>>,
        timeout: Option<Duration>,
    ) -> AdaptiveAcquire<L, C> {
        let state = match timeout {
            None => State::FailFast,
            Some(timeout) => State::Wait(WaitFor::new(
                Arc::clone(limiter.permits().waiting()),
                1,
                Some(timeout),
            )),
        };
        AdaptiveAcquire { limiter, state }
    }
}

impl<L: LimitAlgorithm, C: Clock> Future for AdaptiveAcquire<L, C> {
    type Output = Result<AdaptivePermit<L, C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let outcome = match &mut this.state {
            State::FailFast => this.limiter.try_acquire_owned().map_err(refused),
            // Granted: the guard is made in this same poll, so no permit is left
            // without an owner.
            State::Wait(wait) => match wait.poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => outcome.map(|_| this.limiter.admitted()),
            },
            // Polled again after completing: nothing more to hand over.
            State::Done => Err(AcquireError::Closed),
        };
        this.state = State::Done;
        Poll::Ready(outcome)
    }
}

/// A refusal without waiting, as a wait's error: a wait of zero that timed out.
pub(super) fn refused(denied: Denied) -> AcquireError {
    match denied {
        Denied::Limited(_) => AcquireError::TimedOut,
        Denied::Insufficient(i) => AcquireError::Insufficient(i),
        Denied::Closed => AcquireError::Closed,
    }
}

impl<L: LimitAlgorithm, C: Clock> fmt::Debug for AdaptiveAcquire<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::FailFast => "fail fast",
            State::Wait(_) => "waiting",
            State::Done => "done",
        };
        f.debug_struct("AdaptiveAcquire")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
