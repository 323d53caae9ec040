//! How an in-process limiter holds an algorithm and its state across threads.
//!
//! [`Locked`] keeps both under a short mutex. [`Atomic`] keeps a state that packs into
//! one `u64` in an atomic word and decides with a compare-and-swap loop, and keeps the
//! configuration in a sequence-locked set of words so that reconfiguring needs no lock
//! on the hot path.

use std::fmt;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::sync::{fence, spin_loop, AtomicU64, Mutex, Ordering};
use crate::time::Nanos;

/// Thread-safe storage of one algorithm and its state.
///
/// Chosen by [`Algorithm::Cell`]; users meet it only when writing their own algorithm.
pub trait Cell<A: Algorithm>: Send + Sync + fmt::Debug + 'static {
    /// Holds `algorithm` with its initial state at `now`.
    fn new(algorithm: A, now: Nanos) -> Self;
    /// [`Algorithm::acquire`], atomically.
    fn acquire(&self, now: Nanos, n: u64) -> Decision;
    /// [`Algorithm::peek`].
    fn peek(&self, now: Nanos, n: u64) -> Decision;
    /// [`Algorithm::reserve`], atomically.
    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied>;
    /// [`Algorithm::refund`], atomically.
    fn refund(&self, now: Nanos, n: u64);
    /// Runs `f` on the configuration and state as one atomic step and keeps what it
    /// leaves. `f` may run more than once if another thread changes the state
    /// meanwhile, each time on the old configuration and the latest state, so it must
    /// compute the same configuration from the same input.
    ///
    /// Every decision that starts after `update` returns uses the new configuration.
    /// In the lock-free [`Atomic`] cell, a decision already in flight when the update
    /// runs may still complete under the old one if `f` left the state word as it was
    /// (a configuration-only change): its compare-and-swap cannot tell. Readers would
    /// have to register to close that window, a cost on every decision for the sake
    /// of a rare reconfiguration.
    fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R;
    /// A copy of the configuration and state.
    fn snapshot(&self) -> (A, A::State);
}

/// An algorithm and its state under one mutex. The critical section is the pure
/// decision: no allocation, I/O or clock read inside.
pub struct Locked<A: Algorithm> {
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

impl<A: Algorithm> Cell<A> for Locked<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let state = algorithm.initial_state(now);
        Locked {
            inner: Mutex::new((algorithm, state)),
        }
    }

    fn acquire(&self, now: Nanos, n: u64) -> Decision {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.acquire(state, now, n)
    }

    fn peek(&self, now: Nanos, n: u64) -> Decision {
        let guard = self.inner.lock();
        guard.0.peek(&guard.1, now, n)
    }

    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.reserve(state, now, n, max_wait)
    }

    fn refund(&self, now: Nanos, n: u64) {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        alg.refund(state, now, n)
    }

    fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R {
        let mut guard = self.inner.lock();
        let (alg, state) = &mut *guard;
        f(alg, state)
    }

    fn snapshot(&self) -> (A, A::State) {
        self.inner.lock().clone()
    }
}

/// An algorithm whose state packs into one `u64` and whose configuration packs into
/// [`CONFIG_WORDS`] words, so that [`Atomic`] can run it without a lock.
pub trait WordAlgorithm: Algorithm<State = u64> {
    /// The configuration as words.
    fn to_words(&self) -> [u64; CONFIG_WORDS];
    /// The configuration back from [`WordAlgorithm::to_words`].
    fn from_words(words: [u64; CONFIG_WORDS]) -> Self;
}

/// How many `u64` words a [`WordAlgorithm`] configuration may use.
pub const CONFIG_WORDS: usize = 4;

/// Lock-free storage for a [`WordAlgorithm`].
///
/// Decisions read the configuration under a sequence lock (plain loads, retried only
/// while a reconfiguration is being written) and commit the state with one
/// compare-and-swap. A denial writes nothing, so a flood of denied requests does not
/// bounce the cache line between cores.
pub struct Atomic<A: WordAlgorithm> {
    state: Padded<AtomicU64>,
    version: AtomicU64,
    config: [AtomicU64; CONFIG_WORDS],
    writer: Mutex<()>,
    _algorithm: std::marker::PhantomData<fn() -> A>,
}

/// Keeps the hot state word off the configuration's cache line.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

impl<A: WordAlgorithm> fmt::Debug for Atomic<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Atomic")
            .field("algorithm", &self.config())
            .field("state", &self.state.0.load(Ordering::Relaxed))
            .finish()
    }
}

impl<A: WordAlgorithm> Atomic<A> {
    #[inline]
    fn config(&self) -> A {
        loop {
            let before = self.version.load(Ordering::Acquire);
            let words = [
                self.config[0].load(Ordering::Relaxed),
                self.config[1].load(Ordering::Relaxed),
                self.config[2].load(Ordering::Relaxed),
                self.config[3].load(Ordering::Relaxed),
            ];
            fence(Ordering::Acquire);
            if before & 1 == 0 && self.version.load(Ordering::Relaxed) == before {
                return A::from_words(words);
            }
            spin_loop();
        }
    }

    fn write_config(&self, algorithm: &A) {
        let version = self.version.load(Ordering::Relaxed);
        self.version
            .store(version.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (slot, word) in self.config.iter().zip(algorithm.to_words()) {
            slot.store(word, Ordering::Relaxed);
        }
        self.version
            .store(version.wrapping_add(2), Ordering::Release);
    }

    /// Runs `f` on a copy of the state and commits the copy if `f` succeeded and
    /// changed it. Each attempt reads the configuration afresh, so a retry after a
    /// reconfiguration decides under the new configuration.
    #[inline]
    fn commit<T, E>(&self, mut f: impl FnMut(&A, &mut u64) -> Result<T, E>) -> Result<T, E> {
        let mut current = self.state.0.load(Ordering::Acquire);
        loop {
            let alg = self.config();
            let mut next = current;
            let result = f(&alg, &mut next);
            if result.is_err() || next == current {
                return result;
            }
            match self.state.0.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return result,
                Err(actual) => current = actual,
            }
        }
    }
}

impl<A: WordAlgorithm> Cell<A> for Atomic<A> {
    fn new(algorithm: A, now: Nanos) -> Self {
        let words = algorithm.to_words();
        Atomic {
            state: Padded(AtomicU64::new(algorithm.initial_state(now))),
            version: AtomicU64::new(0),
            config: words.map(AtomicU64::new),
            writer: Mutex::new(()),
            _algorithm: std::marker::PhantomData,
        }
    }

    #[inline]
    fn acquire(&self, now: Nanos, n: u64) -> Decision {
        self.commit(|alg, state| alg.acquire(state, now, n))
    }

    #[inline]
    fn peek(&self, now: Nanos, n: u64) -> Decision {
        self.config()
            .peek(&self.state.0.load(Ordering::Acquire), now, n)
    }

    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        self.commit(|alg, state| alg.reserve(state, now, n, max_wait))
    }

    fn refund(&self, now: Nanos, n: u64) {
        let _ = self.commit(|alg, state| {
            alg.refund(state, now, n);
            Ok::<(), ()>(())
        });
    }

    fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut u64) -> R) -> R {
        let _writer = self.writer.lock();
        let old = self.config();
        let mut current = self.state.0.load(Ordering::Acquire);
        loop {
            let mut alg = old.clone();
            let mut next = current;
            let result = f(&mut alg, &mut next);
            // Publish the configuration before the state: a decision that read the old
            // configuration and commits after this point fails its compare-and-swap
            // if `f` changed the state, and retries under the new configuration. One
            // that commits first was decided before the update, on the state `f`
            // then sees again on its retry.
            self.write_config(&alg);
            match self
                .state
                .0
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return result,
                Err(actual) => current = actual,
            }
        }
    }

    fn snapshot(&self) -> (A, u64) {
        (self.config(), self.state.0.load(Ordering::Acquire))
    }
}
