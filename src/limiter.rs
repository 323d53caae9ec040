//! The in-process limiter: one algorithm, one state, shared by any number of threads
//! and tasks, which can decide at once or wait their turn.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::engine::Core;
use crate::error::AcquireError;
use crate::observe::{EventKind, Events};
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock, Nanos};
use crate::wait::Fairness;
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::queue::Waiting;

/// A thread-safe limiter over one [`Algorithm`], reading time from a [`Clock`].
///
/// Deciding is lock-free for algorithms whose state fits one atomic word ([`Gcra`],
/// aligned [`FixedWindow`], [`LeakyBucket`], [`Concurrency`]) and a short critical
/// section around the pure decision for the rest. Waiting is FIFO by default: a
/// request that must wait joins a queue, and while anyone waits `try_acquire` fails
/// rather than overtake them.
///
/// Clones share one limiter.
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
    shared: Arc<Waiting<Core<A, C>>>,
}

impl<A: Algorithm> Limiter<A> {
    /// A limiter on the default monotonic clock, starting now.
    pub fn new(algorithm: A) -> Limiter<A> {
        Limiter::with_clock(algorithm, MonotonicClock::new())
    }
}

/// # Deciding at once
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// A limiter reading time from `clock`, starting at the clock's current time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
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
        Limiter {
            shared: Waiting::new(Core::new(algorithm, clock)),
        }
    }

    /// Takes `n` permits now if the limit allows, and never waits.
    ///
    /// Under [`Fairness::Fifo`] (the default) it is denied while others wait, even if
    /// the permits are free: they were first.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] with a `retry_after` when the permits are not available
    /// now; [`Denied::Insufficient`] when `n` exceeds what the limiter can ever grant
    /// at once; [`Denied::Closed`] after [`close`](Limiter::close). A denied request
    /// consumes nothing.
    #[inline]
    pub fn try_acquire(&self, n: u64) -> Decision {
        let decision = self.shared.try_acquire(n);
        self.shared.gate.report(n, &decision);
        decision
    }

    /// Decides on `n` permits as the algorithm would now, without consuming any and
    /// without regard to waiters.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Limiter::try_acquire), waiters aside.
    pub fn peek(&self, n: u64) -> Decision {
        let gate = &self.shared.gate;
        gate.peek(gate.now(), n)
    }

    /// Books `n` permits now for use after the returned wait, if that wait is at most
    /// `max_wait`. The booking counts against the limit at once: this is how a large
    /// request goes now while later callers pay for it. A booking does not join the
    /// queue of waiters; [`acquire`](Limiter::acquire) does.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`] when the wait would exceed `max_wait` (its `retry_after` is
    /// how much sooner that is), or when the algorithm cannot book future capacity
    /// and none is free now; [`Denied::Insufficient`] as for `try_acquire`.
    ///
    /// Reported to the limiter's [`Events`] as `Admitted` when immediate, as `Waited`
    /// with the booked wait otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(1)?), ManualClock::new());
    /// assert!(limiter.reserve(1, Duration::ZERO)?.is_immediate());
    /// let later = limiter.reserve(1, Duration::from_secs(1))?;
    /// assert_eq!(later.wait(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(&self, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        let gate = &self.shared.gate;
        let reservation = if self.shared.is_closed() {
            Err(Denied::Closed)
        } else {
            gate.reserve(gate.now(), n, max_wait)
        };
        gate.report_reservation(n, &reservation);
        reservation
    }

    /// Gives back `n` permits taken earlier and not used; waiters they satisfy go.
    pub fn refund(&self, n: u64) {
        self.shared.release(n)
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &C {
        &self.shared.gate.clock
    }

    /// The current time on the limiter's clock.
    pub fn now(&self) -> Nanos {
        self.shared.gate.now()
    }
}

/// # Waiting
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Waits until `n` permits are granted; resolves to the time waited on the
    /// limiter's clock.
    ///
    /// Waiters are served in arrival order ([`Fairness::Fifo`]): the first books its
    /// permits and sleeps until they are due, the others queue behind it. Prepaying
    /// algorithms ([`SmoothBursty`](crate::algorithm::SmoothBursty)) let a large
    /// request go at once and make the next caller wait for it, as Guava does.
    ///
    /// A wake-up late by more than one emission interval costs a token bucket with a
    /// burst of 1 that slot for good: it never grants two permits closer than the
    /// interval. Where steady throughput matters more than strict spacing, a burst of
    /// a few permits absorbs late wake-ups (see `benches/README.md`, precision).
    ///
    /// # Errors
    ///
    /// [`AcquireError::Insufficient`] at once if `n` exceeds what the limiter can ever
    /// grant; [`AcquireError::Closed`] if the limiter is closed before the permits are
    /// granted; [`AcquireError::PastClockEnd`] when they would be due only past the
    /// clock's end.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes gives back whatever it had booked or
    /// been granted, and the next waiter moves up. Nothing is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?.burst(1)?), clock.clone());
    /// assert_eq!(limiter.acquire(1).await?, Duration::ZERO);
    ///
    /// let mut next = Box::pin(limiter.acquire(1));
    /// assert!(futures::poll!(next.as_mut()).is_pending());
    /// clock.advance(Duration::from_millis(100)); // rings the limiter's alarm
    /// assert_eq!(next.await?, Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire(&self, n: u64) -> Acquire<'_, A, C> {
        Acquire {
            wait: WaitFor::new(&*self.shared, n, None),
        }
    }

    /// As [`acquire`](Limiter::acquire), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As `acquire`, and [`AcquireError::TimedOut`]: at once when the wait is already
    /// known to exceed `timeout` (the first waiter goes later, or the algorithm's
    /// booking would), otherwise when `timeout` has passed. Permits booked within the
    /// timeout are granted even if the wake-up itself comes late (a busy scheduler, a
    /// manual clock moved in one jump): they were due in time.
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    pub fn acquire_timeout(&self, n: u64, timeout: Duration) -> Acquire<'_, A, C> {
        Acquire {
            wait: WaitFor::new(&*self.shared, n, Some(timeout)),
        }
    }

    /// Blocks the calling thread until `n` permits are granted; returns the time
    /// waited. For plain threads; in async code use [`acquire`](Limiter::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Limiter::acquire).
    pub fn acquire_blocking(&self, n: u64) -> Result<Duration, AcquireError> {
        WaitFor::new(&*self.shared, n, None).block()
    }

    /// As [`acquire_blocking`](Limiter::acquire_blocking), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Limiter::acquire_timeout).
    pub fn acquire_blocking_timeout(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError> {
        WaitFor::new(&*self.shared, n, Some(timeout)).block()
    }

    /// Closes the limiter: every waiter and every later acquire fails with
    /// [`AcquireError::Closed`], and `try_acquire` with [`Denied::Closed`].
    /// Permits booked by waiters are given back.
    pub fn close(&self) {
        self.shared.close()
    }

    /// Whether [`close`](Limiter::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// How many callers are waiting.
    pub fn waiters(&self) -> usize {
        self.shared.waiters()
    }

    /// Sets how waiters are served; the default is [`Fairness::Fifo`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::Fairness;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(100)?)).with_fairness(Fairness::Unfair);
    /// assert_eq!(limiter.fairness(), Fairness::Unfair);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_fairness(self, fairness: Fairness) -> Limiter<A, C> {
        self.shared.set_fairness(fairness);
        self
    }

    /// How waiters are served.
    pub fn fairness(&self) -> Fairness {
        self.shared.fairness()
    }
}

/// # Observing
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Reports every decision of this limiter to `events`: `try_acquire` and
    /// `reserve` decisions, the end of every `acquire` (`Admitted` at once, `Waited`
    /// with the time waited on the limiter's clock, or `Denied` with the reason), and
    /// [`drain`](Limiter::drain)s. `peek` and `refund` decide nothing and report
    /// nothing.
    ///
    /// Clones share the limiter and its events. A limiter reports to one hub: on a
    /// limiter that already has one (a clone of one given events), this changes
    /// nothing; subscribe more listeners to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::{Limiter, Quota};
    ///
    /// let events = Events::new("api");
    /// events.subscribe(|event: &Event<'_>| println!("{event}")).detach();
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?)).with_events(events);
    /// assert_eq!(limiter.events().map(|e| e.name()), Some("api"));
    /// limiter.try_acquire(1)?; // prints "api: 1 permits admitted"
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_events(self, events: Events) -> Limiter<A, C> {
        self.shared.gate.attach(events);
        self
    }

    /// The hub this limiter reports to, if any.
    pub fn events(&self) -> Option<&Events> {
        self.shared.gate.events()
    }

    /// Takes every permit the limiter could grant now, so that the next ones come
    /// with time (Resilience4j's `drainPermissions`, for when the service behind the
    /// limit says it is overloaded); returns how many were taken. Bookings of waiters
    /// stay. Reported as [`EventKind::Drained`] with the permits taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Limiter, Quota};
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// limiter.try_acquire(3)?;
    /// assert_eq!(limiter.drain(), 7);
    /// assert!(limiter.try_acquire(1).is_err());
    /// clock.advance(Duration::from_millis(100));
    /// assert!(limiter.try_acquire(1).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&self) -> u64 {
        if self.shared.is_closed() {
            return 0;
        }
        let gate = &self.shared.gate;
        let now = gate.now();
        let drained = gate.cell.update(&mut |algorithm, state| {
            let left = algorithm
                .peek(state, now, 0)
                .map_or(0, |admitted| admitted.remaining());
            if left == 0 {
                return 0;
            }
            match algorithm.acquire(state, now, left) {
                Ok(_) => left,
                Err(_) => 0,
            }
        });
        if let Some(events) = gate.events() {
            events.emit(drained, EventKind::Drained);
        }
        drained
    }
}

/// # Reconfiguring and inspecting
impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Changes the configuration at run time, keeping the state: `f` receives the
    /// algorithm, its state and the current time, as one atomic step. Waiters that
    /// the new configuration lets through go at once.
    ///
    /// `f` may run more than once if a decision races with it; only the last run
    /// counts, so it should only compute and assign. Decisions that start after this
    /// returns use the new configuration; on a lock-free limiter, one already in
    /// flight may still complete under the old one.
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
    /// use tollgate::algorithm::{Algorithm, Gcra};
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1)?));
    /// limiter.reconfigure(|gcra, _state, _now| {
    ///     gcra.set_quota(Quota::per_second(100)?);
    ///     Ok::<(), tollgate::ConfigError>(())
    /// })?;
    /// assert_eq!(limiter.algorithm().capacity(), 100);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn reconfigure<E>(
        &self,
        mut f: impl FnMut(&mut A, &mut A::State, Nanos) -> Result<(), E>,
    ) -> Result<(), E> {
        let gate = &self.shared.gate;
        let now = gate.now();
        gate.cell.update(&mut |alg, state| {
            let (mut new_alg, mut new_state) = (alg.clone(), state.clone());
            f(&mut new_alg, &mut new_state, now)?;
            *alg = new_alg;
            *state = new_state;
            Ok(())
        })?;
        self.shared.serve();
        Ok(())
    }

    /// A copy of the current configuration.
    pub fn algorithm(&self) -> A {
        self.shared.gate.cell.snapshot().0
    }

    /// A copy of the current state.
    pub fn state(&self) -> A::State {
        self.shared.gate.cell.snapshot().1
    }
}

impl<A: Algorithm, C: Clock> Clone for Limiter<A, C> {
    fn clone(&self) -> Self {
        Limiter {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for Limiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("cell", &self.shared.gate.cell)
            .field("clock", &self.shared.gate.clock)
            .field("queue", &*self.shared)
            .finish()
    }
}

/// The future of [`Limiter::acquire`] and [`Limiter::acquire_timeout`]: the time
/// waited, or why the wait failed.
///
/// # Cancel safety
///
/// Dropping it gives back what it had booked or been granted.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, A: Algorithm, C: Clock> {
    wait: WaitFor<&'a Waiting<Core<A, C>>, Core<A, C>>,
}

impl<A: Algorithm, C: Clock> Future for Acquire<'_, A, C> {
    type Output = Result<Duration, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<A: Algorithm, C: Clock> fmt::Debug for Acquire<'_, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire").finish_non_exhaustive()
    }
}

/// In process: decided at once, never failing; a grant holds nothing. For a limit on
/// work at once, give the integrations a [`Semaphore`](crate::Semaphore) behind an
/// `Arc`, whose grant gives its permits back when dropped: permits a
/// `Limiter<Concurrency>` grants through this trait come back only by
/// [`refund`](PermitSource::refund), which the integrations call only for work they
/// did not do.
impl<A: Algorithm, C: Clock> PermitSource for Limiter<A, C> {
    type Permit = ();
    type Error = Infallible;

    fn capacity(&self) -> u64 {
        self.shared.gate.capacity()
    }

    /// The smaller of `max` and what the limiter grants at once: its capacity, or for
    /// an algorithm that grants more than that only by waiting (a refresh period's),
    /// what it grants without waiting.
    fn chunk(&self, max: u64) -> u64 {
        let n = max.min(self.capacity());
        match self.peek(n) {
            Err(Denied::Insufficient(at_once)) if (1..n).contains(&at_once.capacity()) => {
                at_once.capacity()
            }
            _ => n,
        }
    }

    fn decide_now(&self, _: &(), n: u64) -> Option<Result<Decided<()>, Infallible>> {
        Some(Ok(self
            .try_acquire(n)
            .map(|admitted| Grant::new(admitted, ()))))
    }

    fn decide(&self, _: &(), n: u64) -> PermitFuture<Result<Decided<()>, Infallible>> {
        let decided = self.try_acquire(n).map(|admitted| Grant::new(admitted, ()));
        Box::pin(std::future::ready(Ok(decided)))
    }

    fn wait(
        &self,
        _: &(),
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<(), AcquireError>> {
        WaitFor::new(Arc::clone(&self.shared), n, timeout).into_permit_future()
    }

    fn refund(&self, _: &(), n: u64) {
        Limiter::refund(self, n)
    }
}
