//! [`Atomic`]: lock-free storage for an algorithm whose state packs into one word.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use crate::algorithm::{Algorithm, CONFIG_WORDS, Packing};
use crate::decision::{Decision, Denied, Reservation};
use crate::sync::{AtomicU64, Mutex, Ordering, fence, spin_loop};
use crate::time::Nanos;

/// Lock-free storage for an algorithm with a [`Packing`].
///
/// Decisions read the configuration under a sequence lock (plain loads, retried only
/// while a reconfiguration is being written) and commit the state with one
/// compare-and-swap. A denial writes nothing, so a flood of denied requests does not
/// bounce the cache line between cores.
pub(crate) struct Atomic<A: Algorithm> {
    state: Padded<AtomicU64>,
    version: AtomicU64,
    config: [AtomicU64; CONFIG_WORDS],
    writer: Mutex<()>,
    _algorithm: PhantomData<fn() -> A>,
}

/// Keeps the hot state word off the configuration's cache line.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

impl<A: Algorithm> fmt::Debug for Atomic<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Atomic")
            .field("algorithm", &self.config())
            .field("state", &self.state.0.load(Ordering::Relaxed))
            .finish()
    }
}

impl<A: Algorithm> Atomic<A> {
    /// The packing: a constant for each `A`, so its functions are called directly.
    #[inline(always)]
    fn packing() -> Packing<A> {
        match A::PACKING {
            Some(packing) => packing,
            None => unreachable!("an Atomic cell is built only for a packed algorithm"),
        }
    }

    /// Holds `algorithm` with its initial state at `now`. The caller checked that `A`
    /// has a packing.
    pub(crate) fn new(algorithm: A, now: Nanos) -> Self {
        let packing = Self::packing();
        let words = (packing.pack)(&algorithm);
        Atomic {
            state: Padded(AtomicU64::new((packing.state_to_word)(
                &algorithm.initial_state(now),
            ))),
            version: AtomicU64::new(0),
            config: words.map(AtomicU64::new),
            writer: Mutex::new(()),
            _algorithm: PhantomData,
        }
    }

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
                return (Self::packing().unpack)(words);
            }
            spin_loop();
        }
    }

    fn write_config(&self, algorithm: &A) {
        let version = self.version.load(Ordering::Relaxed);
        self.version
            .store(version.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (slot, word) in self.config.iter().zip((Self::packing().pack)(algorithm)) {
            slot.store(word, Ordering::Relaxed);
        }
        self.version
            .store(version.wrapping_add(2), Ordering::Release);
    }

    /// Runs `f` on a copy of the state and commits the copy if `f` succeeded and
    /// changed it. Each attempt reads the configuration afresh, so a retry after a
    /// reconfiguration decides under the new configuration.
    #[inline]
    pub(crate) fn try_commit<T, E>(
        &self,
        f: impl FnMut(&A, &mut A::State) -> Result<T, E>,
    ) -> Result<T, E> {
        self.commit(f)
    }

    #[inline(always)]
    fn commit<T, E>(&self, mut f: impl FnMut(&A, &mut A::State) -> Result<T, E>) -> Result<T, E> {
        let packing = Self::packing();
        let mut current = self.state.0.load(Ordering::Acquire);
        loop {
            let alg = self.config();
            let mut next = (packing.word_to_state)(current);
            // The result is returned as it came, not unwrapped and wrapped again: under
            // edition 2024 that copied a reservation twice more (a semaphore's
            // `acquire(1)` granted at once: 162 instructions against 149, callgrind).
            let decided = f(&alg, &mut next);
            #[allow(clippy::question_mark)]
            if decided.is_err() {
                return decided;
            }
            let next = (packing.state_to_word)(&next);
            if next == current {
                return decided;
            }
            match self.state.0.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return decided,
                Err(actual) => current = actual,
            }
        }
    }

    /// [`commit`](Atomic::commit) written out for [`Algorithm::acquire`]: through the
    /// closure, a GCRA admission costs 12 more instructions (callgrind: 97 against 85).
    #[inline(always)]
    pub(crate) fn acquire(&self, now: Nanos, n: u64) -> Decision {
        let packing = Self::packing();
        let mut current = self.state.0.load(Ordering::Acquire);
        loop {
            let alg = self.config();
            let mut next = (packing.word_to_state)(current);
            // Not `?`: through `Try` the denial is built in a temporary and copied
            // again (94 instructions a GCRA denial against 80).
            let admitted = match alg.acquire(&mut next, now, n) {
                Ok(admitted) => admitted,
                Err(denied) => {
                    // A denial that changed the state (a fixed window counting denied
                    // acquires) is committed too; any other costs one comparison.
                    let next = (packing.state_to_word)(&next);
                    if next == current {
                        return Err(denied);
                    }
                    match self.state.0.compare_exchange_weak(
                        current,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Err(denied),
                        Err(actual) => {
                            current = actual;
                            continue;
                        }
                    }
                }
            };
            let next = (packing.state_to_word)(&next);
            if next == current {
                return Ok(admitted);
            }
            match self.state.0.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(admitted),
                Err(actual) => current = actual,
            }
        }
    }

    #[inline]
    pub(crate) fn peek(&self, now: Nanos, n: u64) -> Decision {
        let state = (Self::packing().word_to_state)(self.state.0.load(Ordering::Acquire));
        self.config().peek(&state, now, n)
    }

    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.commit(|alg, state| alg.reserve(state, now, n, max_wait))
    }

    pub(crate) fn refund(&self, now: Nanos, n: u64) {
        let _ = self.commit(|alg, state| {
            alg.refund(state, now, n);
            Ok::<(), ()>(())
        });
    }

    pub(crate) fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R {
        let packing = Self::packing();
        let _writer = self.writer.lock();
        let old = self.config();
        let mut current = self.state.0.load(Ordering::Acquire);
        loop {
            let mut alg = old.clone();
            let mut next = (packing.word_to_state)(current);
            let result = f(&mut alg, &mut next);
            let next = (packing.state_to_word)(&next);
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

    pub(crate) fn snapshot(&self) -> (A, A::State) {
        let state = (Self::packing().word_to_state)(self.state.0.load(Ordering::Acquire));
        (self.config(), state)
    }
}
