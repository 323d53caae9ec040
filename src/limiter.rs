//! The in-process limiter: one algorithm, one state, shared by any number of threads.

use std::fmt;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::clock::{Clock, MonotonicClock, Nanos};
use crate::decision::{Decision, Denied, Reservation};
use crate::engine::Cell;

/// A thread-safe limiter over one [`Algorithm`], reading time from a [`Clock`].
///
/// Lock-free for algorithms whose state fits one atomic word ([`Gcra`], aligned
/// [`FixedWindow`], [`LeakyBucket`], [`Concurrency`]); a short critical section around
/// the pure decision for the rest.
///
/// [`Gcra`]: crate::algorithm::Gcra
/// [`FixedWindow`]: crate::algorithm::FixedWindow
/// [`LeakyBucket`]: crate::algorithm::LeakyBucket
/// [`Concurrency`]: crate::algorithm::Concurrency
///
/// # Examples
///
/// ```
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
///
/// let limiter = Limiter::new(Gcra::new(Quota::per_second(100)?.burst(10)?));
/// let admitted = limiter.try_acquire(1)?;
/// assert_eq!(admitted.remaining(), 9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Limiter<A: Algorithm, C: Clock = MonotonicClock> {
    cell: A::Cell,
    clock: C,
}

impl<A: Algorithm> Limiter<A> {
    /// A limiter on the default monotonic clock, starting now.
    pub fn new(algorithm: A) -> Limiter<A> {
        Limiter::with_clock(algorithm, MonotonicClock::new())
    }
}

/// # Deciding
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// A limiter reading time from `clock`, starting at the clock's current time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), clock.clone());
    /// assert!(limiter.try_acquire(1).is_ok());
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.try_acquire(1).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_clock(algorithm: A, clock: C) -> Limiter<A, C> {
        let now = clock.now();
        Limiter {
            cell: A::Cell::new(algorithm, now),
            clock,
        }
    }

    /// Takes `n` permits now if the limit allows, and never waits.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] with a `retry_after` when the permits are not available
    /// now; [`Denied::Insufficient`] when `n` exceeds what the limiter can ever grant
    /// at once. A denied request consumes nothing.
    #[inline]
    pub fn try_acquire(&self, n: u64) -> Decision {
        self.cell.acquire(self.clock.now(), n)
    }

    /// Decides on `n` permits as [`try_acquire`](Limiter::try_acquire) would, without
    /// consuming any.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Limiter::try_acquire).
    pub fn peek(&self, n: u64) -> Decision {
        self.cell.peek(self.clock.now(), n)
    }

    /// Books `n` permits now for use after the returned wait, if that wait is at most
    /// `max_wait`. The booking counts against the limit at once: this is how a large
    /// request goes now while later callers pay for it.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] when the wait would exceed `max_wait` (its `retry_after` is
    /// how much sooner that is), or when the algorithm cannot book future capacity
    /// and none is free now; [`Denied::Insufficient`] as for `try_acquire`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::clock::ManualClock;
    ///
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(1)?), ManualClock::new());
    /// assert!(limiter.reserve(1, Duration::ZERO)?.is_immediate());
    /// let later = limiter.reserve(1, Duration::from_secs(1))?;
    /// assert_eq!(later.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&self, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        self.cell.reserve(self.clock.now(), n, max_wait)
    }

    /// Gives back `n` permits taken earlier and not used.
    pub fn refund(&self, n: u64) {
        self.cell.refund(self.clock.now(), n)
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The current time on the limiter's clock.
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }
}

/// # Reconfiguring and inspecting
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Changes the configuration at run time, keeping the state: `f` receives the
    /// algorithm, its state and the current time, as one atomic step.
    ///
    /// `f` may run more than once if a decision races with it; only the last run
    /// counts, so it should only compute and assign.
    ///
    /// # Errors
    ///
    /// Whatever `f` returns; on `Err` the configuration and state are left as they
    /// were.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1)?));
    /// limiter.reconfigure(|gcra, _state, _now| {
    ///     gcra.set_quota(Quota::per_second(100)?);
    ///     Ok::<(), tollgate::ConfigError>(())
    /// })?;
    /// assert_eq!(limiter.algorithm().capacity(), 100);
    /// # use tollgate::algorithm::Algorithm;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn reconfigure<E>(
        &self,
        mut f: impl FnMut(&mut A, &mut A::State, Nanos) -> Result<(), E>,
    ) -> Result<(), E> {
        let now = self.clock.now();
        self.cell.update(&mut |alg, state| {
            let (mut new_alg, mut new_state) = (alg.clone(), state.clone());
            f(&mut new_alg, &mut new_state, now)?;
            *alg = new_alg;
            *state = new_state;
            Ok(())
        })
    }

    /// A copy of the current configuration.
    pub fn algorithm(&self) -> A {
        self.cell.snapshot().0
    }

    /// A copy of the current state.
    pub fn state(&self) -> A::State {
        self.cell.snapshot().1
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for Limiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("cell", &self.cell)
            .field("clock", &self.clock)
            .finish()
    }
}
