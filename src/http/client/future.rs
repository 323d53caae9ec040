//! [`ThrottleFuture`]: one throttled call, from the wait to the answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::ThrottleError;

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, ThrottleError<E>>> + Send>>;

/// The future of a call through [`Throttle`](super::Throttle): it waits out any pause,
/// waits for the call's permits, calls the inner service, and pauses every other call
/// if the answer says the server is over its limit.
///
/// # Errors
///
/// See [`Throttle`](super::Throttle)'s `call`.
///
/// # Cancel safety
///
/// Dropping it while it waits for permits gives back whatever its limiter had booked,
/// and the next waiter moves up; while it waits out a pause, it holds nothing. Either
/// way nothing was sent. Once the permit is granted it is spent: dropping the future
/// after that does not give it back, as the request may already be on the wire.
#[must_use = "futures do nothing unless polled"]
pub struct ThrottleFuture<T, E> {
    inner: Boxed<T, E>,
}

impl<T, E> ThrottleFuture<T, E> {
    pub(super) fn new(
        future: impl Future<Output = Result<T, ThrottleError<E>>> + Send + 'static,
    ) -> Self {
        ThrottleFuture {
            inner: Box::pin(future),
        }
    }
}

impl<T, E> Future for ThrottleFuture<T, E> {
    type Output = Result<T, ThrottleError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ThrottleFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottleFuture").finish_non_exhaustive()
    }
}
