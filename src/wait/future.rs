//! The state machine behind every acquire future and blocking wait.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::sync::Arc;
use crate::time::Nanos;
use crate::wait::queue::{Begin, Gate, Slot, Waiting, Wake};
use crate::AcquireError;

/// Waits for `n` permits from a [`Waiting`] gate, held by `R` (a reference, or an
/// `Arc` for futures that own their limiter); resolves to the time waited.
pub(crate) struct WaitFor<R: Deref<Target = Waiting<G>>, G: Gate> {
    waiting: R,
    n: u64,
    timeout: Option<Duration>,
    state: State,
}

enum State {
    Start,
    Queued {
        slot: Arc<Slot>,
        since: Nanos,
        /// `tollgate.wait`, made only once the wait queues.
        span: tracing::Span,
    },
    Done,
}

impl<R: Deref<Target = Waiting<G>>, G: Gate> WaitFor<R, G> {
    pub(crate) fn new(waiting: R, n: u64, timeout: Option<Duration>) -> Self {
        WaitFor {
            waiting,
            n,
            timeout,
            state: State::Start,
        }
    }

    /// Advances the wait; `wake` is called when the outcome may have changed.
    fn step(&mut self, wake: impl FnOnce() -> Wake) -> Poll<Result<Duration, AcquireError>> {
        let (outcome, queued) = match &self.state {
            State::Start => match self.waiting.begin(self.n, self.timeout, wake) {
                Begin::Ready(outcome) => (outcome.map(|()| Duration::ZERO), false),
                Begin::Waiting(slot) => {
                    let since = self.waiting.gate.now();
                    let span = self.span();
                    self.state = State::Queued { slot, since, span };
                    return Poll::Pending;
                }
            },
            State::Queued { slot, since, span } => {
                let _entered = span.enter();
                match self.waiting.poll_slot(slot, self.n, wake) {
                    Some(outcome) => {
                        let outcome =
                            outcome.map(|()| self.waiting.gate.now().saturating_since(*since));
                        record_end(span, &outcome);
                        (outcome, true)
                    }
                    None => return Poll::Pending,
                }
            }
            // Polled again after completing: nothing more to report.
            State::Done => return Poll::Ready(Err(AcquireError::Closed)),
        };
        self.state = State::Done;
        if let Some(events) = self.waiting.gate.events() {
            events.emit_wait(None, self.n, &outcome, queued);
        }
        Poll::Ready(outcome)
    }

    #[cold]
    fn span(&self) -> tracing::Span {
        let span = tracing::debug_span!(
            "tollgate.wait",
            source = tracing::field::Empty,
            permits = self.n,
            timeout = ?self.timeout,
            outcome = tracing::field::Empty,
            waited = tracing::field::Empty,
        );
        if let Some(events) = self.waiting.gate.events() {
            span.record("source", events.name());
        }
        span
    }

    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Duration, AcquireError>> {
        if let State::Queued { slot, .. } = &self.state {
            // Skip re-registering the same waker on spurious polls.
            if Waiting::<G>::will_wake(slot, cx.waker()) && !Waiting::<G>::is_decided(slot) {
                return Poll::Pending;
            }
        }
        self.step(|| Wake::Task(cx.waker().clone()))
    }

    /// Blocks the thread until the wait ends.
    pub(crate) fn block(mut self) -> Result<Duration, AcquireError> {
        loop {
            if let Poll::Ready(outcome) = self.step(Slot::thread_wake) {
                return outcome;
            }
            std::thread::park();
        }
    }
}

impl<R: Deref<Target = Waiting<G>>, G: Gate> Drop for WaitFor<R, G> {
    fn drop(&mut self) {
        if let State::Queued { slot, span, .. } = &self.state {
            span.record("outcome", "cancelled");
            self.waiting.cancel(slot, self.n);
        }
    }
}

/// Notes on a wait's span how it ended.
fn record_end(span: &tracing::Span, outcome: &Result<Duration, AcquireError>) {
    match outcome {
        Ok(waited) => {
            span.record("outcome", "granted");
            span.record("waited", tracing::field::debug(waited));
        }
        Err(error) => {
            span.record("outcome", tracing::field::display(error));
        }
    }
}

impl<R: Deref<Target = Waiting<G>>, G: Gate> Unpin for WaitFor<R, G> {}

impl<R: Deref<Target = Waiting<G>>, G: Gate> Future for WaitFor<R, G> {
    type Output = Result<Duration, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().poll(cx)
    }
}
