//! [`Locked`]: an algorithm and its state under one short mutex.

use std::fmt;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::sync::Mutex;
use crate::time::Nanos;

/// An algorithm and its state under one mutex. The critical section is the pure
/// decision: no allocation, I/O or clock read inside.
pub(crate) struct Locked<A: Algorithm> {
    inner: Mutex<(A, A::State)>,
}

impl<A: Algorithm> fmt::Debug for Locked<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = self.inner.lock();
        f.debug_struct("Locked")
            .field("algorithm", &guard.0)
            .field("state", &guard.1)
            .finish()
    }
}

impl<A: Algorithm> Locked<A> {
    pub(crate) fn new(algorithm: A, now: Nanos) -> Self {
        let state = algorithm.initial_state(now);
        Locked {
            inner: Mutex::new((algorithm, state)),
        }
    }

    pub(crate) fn acquire(&self, now: Nanos, n: u64) -> Decision {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.acquire(state, now, n)
    }

    pub(crate) fn peek(&self, now: Nanos, n: u64) -> Decision {
        let guard = self.inner.lock();
        guard.0.peek(&guard.1, now, n)
    }

    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.reserve(state, now, n, max_wait)
    }

    pub(crate) fn refund(&self, now: Nanos, n: u64) {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.refund(state, now, n)
    }

    pub(crate) fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        f(alg, state)
    }

    pub(crate) fn snapshot(&self) -> (A, A::State) {
        self.inner.lock().clone()
    }
}
