//! The state machine behind every acquire future and blocking wait.

use std::future::Future;
use std::mem::{self, ManuallyDrop};
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::gate::Gate;
use super::queue::{Begin, Waiting};
use super::round_trip::RemoteBooking;
use super::slot::{Polled, Slot, Wake};
use crate::error::AcquireError;
use crate::sync::{Arc, Mutex, thread};
use crate::time::Nanos;

/// Waits for `n` permits from a [`Waiting`] gate, held by `R` (a reference, or an
/// `Arc` for futures that own their limiter); resolves to the time waited.
pub(crate) struct WaitFor<R: Deref<Target = Waiting<G>>, G: Gate> {
    waiting: R,
    n: u64,
    timeout: Option<Duration>,
    state: State<G::Error>,
}

/// Boxed while queued, so that a future granted at once (the common case) stays
/// small; and without drop glue, so that dropping it is one test of the state
/// rather than a call (the box is dropped by hand: by [`WaitFor::end`]'s caller in
/// `step`, or by `drop`).
enum State<E> {
    Start,
    Queued(ManuallyDrop<Box<Queued<E>>>),
    Done,
}

struct Queued<E> {
    slot: Arc<Slot>,
    since: Nanos,
    /// `tollgate.wait`, made only once the wait queues.
    span: tracing::Span,
    /// A remote gate's booking in flight, made when the queue handed this waiter
    /// the turn. Under a lock only so that the future stays `Sync`; it is never
    /// contended.
    booking: Option<Mutex<RemoteBooking<E>>>,
    /// Whether it had to wait: a remote gate's first waiter granted on its first
    /// round trip did not.
    waited: bool,
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

    /// The first poll: starts the wait, which in the common case is granted at once.
    #[inline(always)]
    fn start(&mut self, cx: &mut Context<'_>) -> Poll<Result<Duration, AcquireError<G::Error>>> {
        match self
            .waiting
            .begin(self.n, self.timeout, || Wake::Task(cx.waker().clone()))
        {
            Begin::Ready(outcome) => self.end(
                outcome
                    .map(|()| Duration::ZERO)
                    .map_err(AcquireError::widen),
                false,
            ),
            Begin::Decided(outcome, since) => self.end(
                outcome
                    .map(|()| self.waiting.gate.now().saturating_since(since))
                    .map_err(AcquireError::widen),
                true,
            ),
            // The time the queue counted the deadline from: a reading taken
            // after `begin` could already be past an alarm rung meanwhile.
            Begin::Waiting(slot, since) => self.queued(slot, since, cx),
        }
    }

    #[inline(never)]
    fn queued(
        &mut self,
        slot: Arc<Slot>,
        since: Nanos,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Duration, AcquireError<G::Error>>> {
        let span = self.span();
        self.state = State::Queued(ManuallyDrop::new(Box::new(Queued {
            slot,
            since,
            span,
            booking: None,
            waited: false,
        })));
        self.step(cx)
    }

    /// A poll while queued.
    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Result<Duration, AcquireError<G::Error>>> {
        let State::Queued(queued) = &mut self.state else {
            // Polled again after completing: nothing more to report.
            return Poll::Ready(Err(AcquireError::Closed));
        };
        let Queued {
            slot,
            since,
            span,
            booking,
            waited,
        } = &mut ***queued;
        let _entered = span.enter();
        let waiting = &*self.waiting;
        let (outcome, had_waited) = loop {
            if let Some(call) = booking {
                let polled = call.lock().as_mut().poll(cx);
                match polled {
                    Poll::Pending => {}
                    Poll::Ready(Ok(booked)) => {
                        *booking = None;
                        waiting.settle(slot, booked);
                    }
                    Poll::Ready(Err(error)) => {
                        *booking = None;
                        waiting.settle_failed(slot);
                        span.record("outcome", "failed");
                        break (Err(AcquireError::Source(error)), *waited);
                    }
                }
            }
            match slot.poll(self.n, || Wake::Task(cx.waker().clone())) {
                Polled::Outcome(outcome) => {
                    let outcome = outcome.map(|()| waiting.gate.now().saturating_since(*since));
                    record_end(span, &outcome);
                    break (outcome.map_err(AcquireError::widen), *waited);
                }
                Polled::Turn => {
                    let max_wait = self.timeout.map_or(Duration::MAX, |t| {
                        (*since + t).saturating_since(waiting.gate.now())
                    });
                    *booking = Some(Mutex::new(waiting.gate.reserve_remote(self.n, max_wait)));
                }
                Polled::Pending => {
                    // A first waiter's round trip in flight is not a wait yet:
                    // granted by it, the waiter did not wait.
                    if booking.is_none() {
                        *waited = true;
                    }
                    return Poll::Pending;
                }
            }
        };
        drop(_entered);
        drop(self.take_queued());
        self.end(outcome, had_waited)
    }

    /// Leaves the queued state, with what it held.
    fn take_queued(&mut self) -> Option<Box<Queued<G::Error>>> {
        match mem::replace(&mut self.state, State::Done) {
            State::Queued(queued) => Some(ManuallyDrop::into_inner(queued)),
            _ => None,
        }
    }

    /// Ends the wait with `outcome`, and reports it. Not from the queued state,
    /// whose box it would leak: `step` takes it out first.
    #[inline(always)]
    fn end(
        &mut self,
        outcome: Result<Duration, AcquireError<G::Error>>,
        queued: bool,
    ) -> Poll<Result<Duration, AcquireError<G::Error>>> {
        self.state = State::Done;
        if let Some(events) = self.waiting.gate.events() {
            events.emit_wait(self.waiting.gate.event_key(), self.n, &outcome, queued);
        }
        Poll::Ready(outcome)
    }

    #[cold]
    fn span(&self) -> tracing::Span {
        let span = tracing::debug_span!(
            "tollgate.wait",
            source = tracing::field::Empty,
            key = tracing::field::Empty,
            permits = self.n,
            timeout = ?self.timeout,
            outcome = tracing::field::Empty,
            waited = tracing::field::Empty,
        );
        if let Some(events) = self.waiting.gate.events() {
            span.record("source", events.name());
        }
        if let Some(key) = self.waiting.gate.event_key() {
            span.record("key", key);
        }
        span
    }

    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Duration, AcquireError<G::Error>>> {
        match &self.state {
            State::Start => return self.start(cx),
            State::Queued(queued) => {
                // Skip re-registering the same waker on spurious polls.
                if queued.booking.is_none()
                    && queued.slot.will_wake(cx.waker())
                    && !queued.slot.is_decided()
                {
                    return Poll::Pending;
                }
            }
            State::Done => {}
        }
        self.step(cx)
    }

    /// Blocks the thread until the wait ends, running a remote gate's round trips on
    /// it too.
    pub(crate) fn block(mut self) -> Result<Duration, AcquireError<G::Error>> {
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(outcome) = self.poll(&mut cx) {
                return outcome;
            }
            thread::park();
        }
    }
}

impl<R, G> WaitFor<R, G>
where
    R: Deref<Target = Waiting<G>> + Send + 'static,
    G: Gate,
{
    /// The wait as a permit source's (boxed, granting `()`), spelled out so that this
    /// layer names nothing above it.
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_permit_future(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<(), AcquireError<G::Error>>> + Send + 'static>> {
        self.into_permit_future_with(|| ())
    }

    /// As [`into_permit_future`](Self::into_permit_future), granting what `permit`
    /// makes once the wait is granted.
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_permit_future_with<P: 'static>(
        self,
        permit: impl FnOnce() -> P + Send + 'static,
    ) -> Pin<Box<dyn Future<Output = Result<P, AcquireError<G::Error>>> + Send + 'static>> {
        Box::pin(async move { self.await.map(|_| permit()) })
    }
}

/// Wakes a thread blocked in [`WaitFor::block`].
struct Unpark(thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl<R: Deref<Target = Waiting<G>>, G: Gate> Drop for WaitFor<R, G> {
    #[inline]
    fn drop(&mut self) {
        if let State::Queued(_) = self.state {
            self.cancel();
        }
    }
}

impl<R: Deref<Target = Waiting<G>>, G: Gate> WaitFor<R, G> {
    /// Dropped while queued: leaves the queue, and hands a booking in flight to the
    /// gate.
    #[cold]
    #[inline(never)]
    fn cancel(&mut self) {
        let Some(mut queued) = self.take_queued() else {
            return;
        };
        queued.span.record("outcome", "cancelled");
        self.waiting.cancel(&queued.slot, self.n);
        if let Some(booking) = queued.booking.take() {
            self.waiting.gate.abandon(booking.into_inner(), self.n);
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
    type Output = Result<Duration, AcquireError<G::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().poll(cx)
    }
}
