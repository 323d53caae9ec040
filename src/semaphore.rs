//! A counting semaphore whose permits are RAII guards, like tokio's `Semaphore`, on
//! the lock-free [`Concurrency`] algorithm, with FIFO waiting and timeouts.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::algorithm::Concurrency;
use crate::decision::{Admitted, Decision, Denied, Reservation};
use crate::engine::Core;
use crate::error::AcquireError;
use crate::error::ConfigError;
use crate::observe::Events;
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::sync::Arc;
use crate::time::{Alarm, Clock, MonotonicClock, Nanos};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::queue::Waiting;

/// Time plays no part in a concurrency decision.
const NOW: Nanos = Nanos::ZERO;

/// The clock the permits are decided on: permits come back by release, never with
/// time, so it reads no time and sets no alarm.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeless;

impl Clock for Timeless {
    #[inline]
    fn now(&self) -> Nanos {
        NOW
    }

    fn unix_origin(&self) -> Duration {
        Duration::ZERO
    }

    /// Never called: a concurrency denial waits for a release, not a time.
    fn set_alarm(&self, _deadline: Nanos, _alarm: Arc<dyn Alarm>) {}
}

/// The semaphore's side of its queue: decisions on the lock-free [`Concurrency`]
/// cell, which read no time, and the waiters' deadlines on `clock`.
pub(crate) struct Permits<C> {
    core: Core<Concurrency, Timeless>,
    clock: C,
}

impl<C: Clock> Gate for Permits<C> {
    type Error = std::convert::Infallible;

    fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// `try_acquire` and a release read no clock.
    #[inline]
    fn decision_time(&self) -> Nanos {
        NOW
    }

    #[inline]
    fn acquire(&self, _now: Nanos, n: u64) -> Decision {
        self.core.acquire(NOW, n)
    }

    fn peek(&self, _now: Nanos, n: u64) -> Decision {
        self.core.peek(NOW, n)
    }

    #[inline]
    fn reserve(&self, _now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        self.core.reserve(NOW, n, max_wait)
    }

    #[inline]
    fn refund(&self, _now: Nanos, n: u64) {
        self.core.refund(NOW, n)
    }

    fn capacity(&self) -> u64 {
        self.core.capacity()
    }

    fn books_ahead(&self) -> bool {
        self.core.books_ahead()
    }

    /// A waiter's timeout: the only alarm a semaphore sets.
    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.clock.set_alarm(deadline, alarm)
    }

    fn events(&self) -> Option<&Events> {
        self.core.events()
    }
}

pub(crate) type Shared<C> = Arc<Waiting<Permits<C>>>;

/// A limit on how many permits are held at once. A permit is a guard that gives
/// its permits back when dropped.
///
/// Acquiring and releasing are one compare-and-swap each, without a lock and without
/// reading the clock, while no one waits. Waiters queue in arrival order: a waiter for
/// 10 is not overtaken by later requests for 1, and `try_acquire` fails while anyone
/// waits. The clock `C` times only the waits: their timeouts
/// ([`acquire_timeout`](Semaphore::acquire_timeout)) and how long they took.
///
/// # Examples
///
/// ```
/// use tollgate::Semaphore;
///
/// let semaphore = Semaphore::new(2)?;
/// let first = semaphore.try_acquire(1)?;
/// let second = semaphore.try_acquire(1)?;
/// assert!(semaphore.try_acquire(1).is_err());
/// drop(first);
/// assert_eq!(semaphore.available_permits(), 1);
/// # drop(second);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Semaphore<C: Clock = MonotonicClock> {
    shared: Shared<C>,
}

impl Semaphore {
    /// A semaphore with `permits` permits, all available, timing its waits on the
    /// default monotonic clock.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `permits` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Semaphore::new(10)?;
    /// assert_eq!(semaphore.available_permits(), 10);
    /// assert!(Semaphore::new(0).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits: u64) -> Result<Semaphore, ConfigError> {
        Semaphore::with_clock(permits, MonotonicClock::new())
    }
}

impl<C: Clock> Semaphore<C> {
    /// A semaphore with `permits` permits, all available, timing its waits on
    /// `clock` (a [`ManualClock`](crate::time::ManualClock) in tests).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `permits` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::time::ManualClock;
    /// use tollgate::{AcquireError, Semaphore};
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let semaphore = Semaphore::with_clock(1, clock.clone())?;
    /// let _held = semaphore.try_acquire(1)?;
    /// let mut waiting = Box::pin(semaphore.acquire_timeout(1, Duration::from_secs(1)));
    /// assert!(futures::poll!(waiting.as_mut()).is_pending());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(matches!(waiting.await, Err(AcquireError::TimedOut)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn with_clock(permits: u64, clock: C) -> Result<Semaphore<C>, ConfigError> {
        let core = Core::new(Concurrency::new(permits)?, Timeless);
        Ok(Semaphore {
            shared: Waiting::new(Permits { core, clock }),
        })
    }

    /// The clock that times its waits.
    pub fn clock(&self) -> &C {
        &self.shared.gate.clock
    }

    /// Takes `n` permits if that many are available now, and never waits. `n == 0`
    /// always succeeds, with a permit holding nothing.
    ///
    /// # Errors
    ///
    /// [`Denied::Insufficient`] if `n` exceeds [`max_permits`](Semaphore::max_permits);
    /// [`Denied::Limited`] if fewer than `n` are available, or if others are waiting.
    /// Fewer available, it waits for a release
    /// ([`Retry::OnRelease`](crate::Retry::OnRelease), no `retry_after`): permits come
    /// back when their holders drop them, not after a time. [`Denied::Closed`] after
    /// [`close`](Semaphore::close).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Semaphore::new(3)?;
    /// let permit = semaphore.try_acquire(2)?;
    /// assert_eq!(permit.num_permits(), 2);
    /// assert!(semaphore.try_acquire(2).unwrap_err().is_limited());
    /// assert!(semaphore.try_acquire(4).unwrap_err().is_never());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, n: u64) -> Result<Permit<'_, C>, Denied> {
        self.take(n)?;
        Ok(Permit {
            semaphore: self,
            permits: n,
        })
    }

    /// As [`try_acquire`](Semaphore::try_acquire), with a permit that owns a
    /// reference to the semaphore, so it can move into a spawned task or thread.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Semaphore::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Arc::new(Semaphore::new(1)?);
    /// let permit = semaphore.try_acquire_owned(1)?;
    /// std::thread::spawn(move || {
    ///     // ... work while holding the permit ...
    ///     drop(permit);
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(self: &Arc<Self>, n: u64) -> Result<OwnedPermit<C>, Denied> {
        self.take(n)?;
        Ok(OwnedPermit {
            semaphore: Arc::clone(self),
            permits: n,
        })
    }

    /// Permits that can be acquired now: zero while more are held than a lowered
    /// maximum allows.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Semaphore::new(5)?;
    /// let _permit = semaphore.try_acquire(2)?;
    /// assert_eq!(semaphore.available_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_permits(&self) -> u64 {
        let (concurrency, in_use) = self.shared.gate.core.cell.snapshot();
        concurrency.max().saturating_sub(in_use)
    }

    /// The most permits held at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// assert_eq!(Semaphore::new(5)?.max_permits(), 5);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_permits(&self) -> u64 {
        self.shared.gate.core.cell.snapshot().0.max()
    }

    /// Changes the most permits held at once. Permits already held stay valid: if
    /// more are held than the new maximum, acquisitions fail until enough are
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `max` is zero; nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Semaphore::new(4)?;
    /// let held = semaphore.try_acquire(3)?;
    /// semaphore.set_max_permits(2)?;
    /// assert_eq!(semaphore.available_permits(), 0);
    /// drop(held);
    /// assert_eq!(semaphore.available_permits(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_max_permits(&self, max: u64) -> Result<(), ConfigError> {
        let new = Concurrency::new(max)?;
        self.shared
            .gate
            .core
            .cell
            .update(&mut |concurrency, _in_use| *concurrency = new);
        // A raised maximum may let waiters through.
        self.shared.serve();
        Ok(())
    }

    /// Gives back `n` permits taken with [`take`](Semaphore::take) or a wait on
    /// [`waiting`](Semaphore::waiting), and serves the waiters.
    pub(crate) fn release(&self, n: u64) {
        if n > 0 {
            self.shared.release(n);
        }
    }

    /// Takes one permit if one is free and no one waits, and answers how many are
    /// held then, itself included: one compare-and-swap, no decision built and
    /// nothing reported (for an owner without events). `None` otherwise, and then
    /// [`take`](Semaphore::take) says why.
    #[inline]
    pub(crate) fn take_one(&self) -> Option<u64> {
        if self.shared.is_contended() {
            return None;
        }
        self.shared
            .gate
            .core
            .cell
            .try_commit(|concurrency, in_use| {
                // `Concurrency::acquire` of 1: the maximum is at least 1.
                (*in_use < concurrency.max()).then(|| {
                    *in_use += 1;
                    *in_use
                })
            })
    }

    /// Gives back `n` permits taken with [`take`](Semaphore::take), without looking
    /// for waiters: for an owner that never lets anyone wait on this semaphore (a
    /// fail-fast adaptive limiter), a release is then one compare-and-swap.
    #[inline]
    pub(crate) fn release_unwaited(&self, n: u64) {
        self.shared.gate.refund(NOW, n);
    }

    /// Where decisions and waits are reported, if anywhere.
    pub(crate) fn events(&self) -> Option<&Events> {
        self.shared.gate.core.events()
    }

    /// Permits held now.
    pub(crate) fn in_use(&self) -> u64 {
        self.shared.gate.core.cell.snapshot().1
    }

    /// The queue in front of the permits, for owners that wait on it with their own
    /// guard (the adaptive limiter).
    pub(crate) fn waiting(&self) -> &Shared<C> {
        &self.shared
    }

    /// Takes `n` permits without a guard, reporting the decision; the caller gives
    /// them back with [`release`](Semaphore::release).
    #[inline]
    pub(crate) fn take(&self, n: u64) -> Decision {
        let decision = self.shared.try_acquire(n);
        self.shared.gate.core.report(n, &decision);
        decision
    }

    /// Reports acquisitions to `events`: `try_acquire` as `Admitted` or `Denied`,
    /// and the end of every wait as `Admitted` (no queueing), `Waited` (with the time
    /// waited on the semaphore's clock) or `Denied`. Releases are not reported.
    ///
    /// Every holder of the semaphore shares the hub, and the first hub attached stays:
    /// where one is attached already, this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::Semaphore;
    ///
    /// let events = Events::new("db");
    /// events.subscribe(|event: &Event<'_>| println!("{event}")).detach();
    /// let semaphore = Semaphore::new(2)?.with_events(events);
    /// let _permit = semaphore.try_acquire(1)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_events(self, events: Events) -> Semaphore<C> {
        self.shared.gate.core.attach(events);
        self
    }
}

/// # Waiting
impl<C: Clock> Semaphore<C> {
    /// Waits until `n` permits are available, in arrival order.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Insufficient`] at once if `n` exceeds
    /// [`max_permits`](Semaphore::max_permits); [`AcquireError::Closed`] if the
    /// semaphore is closed first.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes gives back the permits if they had
    /// been granted, and the next waiter moves up. To give up after a time, use
    /// [`acquire_timeout`](Semaphore::acquire_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// # futures::executor::block_on(async {
    /// let semaphore = Semaphore::new(2)?;
    /// let first = semaphore.acquire(2).await?;
    /// let mut second = Box::pin(semaphore.acquire(1));
    /// assert!(futures::poll!(second.as_mut()).is_pending());
    /// drop(first);
    /// assert_eq!(second.await?.num_permits(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire(&self, n: u64) -> AcquirePermit<'_, C> {
        AcquirePermit {
            semaphore: self,
            wait: WaitFor::new(&*self.shared, n, None),
            n,
        }
    }

    /// As [`acquire`](Semaphore::acquire), giving up after `timeout` on the
    /// semaphore's clock. Permits come back by release, at no known time, so a wait
    /// never fails early: it fails when `timeout` has passed.
    ///
    /// # Errors
    ///
    /// As `acquire`, and [`AcquireError::TimedOut`] once `timeout` has passed.
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::time::ManualClock;
    /// use tollgate::Semaphore;
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let semaphore = Semaphore::with_clock(1, clock.clone())?;
    /// let held = semaphore.try_acquire(1)?;
    /// let mut waiting = Box::pin(semaphore.acquire_timeout(1, Duration::from_secs(5)));
    /// assert!(futures::poll!(waiting.as_mut()).is_pending());
    /// clock.advance(Duration::from_secs(2));
    /// drop(held);
    /// assert_eq!(waiting.await?.num_permits(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_timeout(&self, n: u64, timeout: Duration) -> AcquirePermit<'_, C> {
        AcquirePermit {
            semaphore: self,
            wait: WaitFor::new(&*self.shared, n, Some(timeout)),
            n,
        }
    }

    /// As [`acquire`](Semaphore::acquire), with a permit that owns a reference to the
    /// semaphore.
    ///
    /// # Errors
    ///
    /// As `acquire`.
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    pub fn acquire_owned(self: &Arc<Self>, n: u64) -> AcquireOwnedPermit<C> {
        AcquireOwnedPermit {
            semaphore: Arc::clone(self),
            wait: WaitFor::new(Arc::clone(&self.shared), n, None),
            n,
        }
    }

    /// As [`acquire_timeout`](Semaphore::acquire_timeout), with a permit that owns a
    /// reference to the semaphore.
    ///
    /// # Errors
    ///
    /// As `acquire_timeout`.
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    pub fn acquire_owned_timeout(
        self: &Arc<Self>,
        n: u64,
        timeout: Duration,
    ) -> AcquireOwnedPermit<C> {
        AcquireOwnedPermit {
            semaphore: Arc::clone(self),
            wait: WaitFor::new(Arc::clone(&self.shared), n, Some(timeout)),
            n,
        }
    }

    /// Blocks the calling thread until `n` permits are available.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Semaphore::acquire).
    pub fn acquire_blocking(&self, n: u64) -> Result<Permit<'_, C>, AcquireError> {
        self.block(n, None)
    }

    /// As [`acquire_blocking`](Semaphore::acquire_blocking), giving up after
    /// `timeout`.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Semaphore::acquire_timeout).
    pub fn acquire_blocking_timeout(
        &self,
        n: u64,
        timeout: Duration,
    ) -> Result<Permit<'_, C>, AcquireError> {
        self.block(n, Some(timeout))
    }

    fn block(&self, n: u64, timeout: Option<Duration>) -> Result<Permit<'_, C>, AcquireError> {
        WaitFor::new(&*self.shared, n, timeout).block()?;
        Ok(Permit {
            semaphore: self,
            permits: n,
        })
    }

    /// Closes the semaphore: waiters and later acquires fail with
    /// [`AcquireError::Closed`]. Permits already held stay valid.
    pub fn close(&self) {
        self.shared.close()
    }

    /// Whether [`close`](Semaphore::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// How many callers are waiting.
    pub fn waiters(&self) -> usize {
        self.shared.waiters()
    }
}

/// The future of [`Semaphore::acquire`].
///
/// # Cancel safety
///
/// Dropping it gives back permits granted and not yet handed over.
#[must_use = "futures do nothing unless polled"]
pub struct AcquirePermit<'a, C: Clock = MonotonicClock> {
    semaphore: &'a Semaphore<C>,
    wait: WaitFor<&'a Waiting<Permits<C>>, Permits<C>>,
    n: u64,
}

impl<'a, C: Clock> Future for AcquirePermit<'a, C> {
    type Output = Result<Permit<'a, C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.wait.poll(cx).map(|outcome| {
            outcome.map(|_| Permit {
                semaphore: this.semaphore,
                permits: this.n,
            })
        })
    }
}

impl<C: Clock> fmt::Debug for AcquirePermit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquirePermit")
            .field("permits", &self.n)
            .finish_non_exhaustive()
    }
}

/// The future of [`Semaphore::acquire_owned`].
///
/// # Cancel safety
///
/// Dropping it gives back permits granted and not yet handed over.
#[must_use = "futures do nothing unless polled"]
pub struct AcquireOwnedPermit<C: Clock = MonotonicClock> {
    semaphore: Arc<Semaphore<C>>,
    wait: WaitFor<Shared<C>, Permits<C>>,
    n: u64,
}

impl<C: Clock> Future for AcquireOwnedPermit<C> {
    type Output = Result<OwnedPermit<C>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.wait.poll(cx).map(|outcome| {
            outcome.map(|_| OwnedPermit {
                semaphore: Arc::clone(&this.semaphore),
                permits: this.n,
            })
        })
    }
}

impl<C: Clock> fmt::Debug for AcquireOwnedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireOwnedPermit")
            .field("permits", &self.n)
            .finish_non_exhaustive()
    }
}

impl<C: Clock> fmt::Debug for Semaphore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (concurrency, in_use) = self.shared.gate.core.cell.snapshot();
        f.debug_struct("Semaphore")
            .field("max_permits", &concurrency.max())
            .field("in_use", &in_use)
            .finish()
    }
}

/// Permits borrowed from a [`Semaphore`], given back when dropped.
///
/// # Examples
///
/// ```
/// use tollgate::Semaphore;
///
/// let semaphore = Semaphore::new(1)?;
/// {
///     let _permit = semaphore.try_acquire(1)?;
///     assert_eq!(semaphore.available_permits(), 0);
/// }
/// assert_eq!(semaphore.available_permits(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "permits are given back as soon as the guard is dropped"]
pub struct Permit<'a, C: Clock = MonotonicClock> {
    semaphore: &'a Semaphore<C>,
    permits: u64,
}

impl<C: Clock> Permit<'_, C> {
    /// How many permits this guard holds.
    pub fn num_permits(&self) -> u64 {
        self.permits
    }

    /// Keeps the permits taken for good: the semaphore never gets them back.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Semaphore::new(2)?;
    /// semaphore.try_acquire(1)?.forget();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(mut self) {
        self.permits = 0;
    }
}

impl<C: Clock> Drop for Permit<'_, C> {
    fn drop(&mut self) {
        self.semaphore.release(self.permits);
    }
}

impl<C: Clock> fmt::Debug for Permit<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

/// Permits from a [`Semaphore`] held through an `Arc`, given back when dropped.
/// Being `'static`, it can move into spawned threads and tasks.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::Semaphore;
///
/// let semaphore = Arc::new(Semaphore::new(3)?);
/// let permit = semaphore.try_acquire_owned(2)?;
/// assert_eq!(permit.num_permits(), 2);
/// assert!(Arc::ptr_eq(permit.semaphore(), &semaphore));
/// drop(permit);
/// assert_eq!(semaphore.available_permits(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "permits are given back as soon as the guard is dropped"]
pub struct OwnedPermit<C: Clock = MonotonicClock> {
    semaphore: Arc<Semaphore<C>>,
    permits: u64,
}

impl<C: Clock> OwnedPermit<C> {
    /// How many permits this guard holds.
    pub fn num_permits(&self) -> u64 {
        self.permits
    }

    /// The semaphore the permits came from.
    pub fn semaphore(&self) -> &Arc<Semaphore<C>> {
        &self.semaphore
    }

    /// Keeps the permits taken for good: the semaphore never gets them back.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::Semaphore;
    ///
    /// let semaphore = Arc::new(Semaphore::new(2)?);
    /// semaphore.try_acquire_owned(2)?.forget();
    /// assert_eq!(semaphore.available_permits(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(mut self) {
        self.permits = 0;
    }
}

impl<C: Clock> Drop for OwnedPermit<C> {
    fn drop(&mut self) {
        self.semaphore.release(self.permits);
    }
}

impl<C: Clock> fmt::Debug for OwnedPermit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

/// Permits held at once: a grant is an [`OwnedPermit`], given back when dropped.
impl<C: Clock> PermitSource for Arc<Semaphore<C>> {
    type Permit = OwnedPermit<C>;
    type Error = std::convert::Infallible;

    fn capacity(&self) -> u64 {
        self.max_permits()
    }

    fn decide_now(
        &self,
        _: &(),
        n: u64,
    ) -> Option<Result<Decided<OwnedPermit<C>>, std::convert::Infallible>> {
        Some(Ok(self.grant(n)))
    }

    fn decide(
        &self,
        _: &(),
        n: u64,
    ) -> PermitFuture<Result<Decided<OwnedPermit<C>>, std::convert::Infallible>> {
        Box::pin(std::future::ready(Ok(self.grant(n))))
    }

    fn wait(
        &self,
        _: &(),
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<OwnedPermit<C>, AcquireError>> {
        let semaphore = Arc::clone(self);
        let wait = WaitFor::new(Arc::clone(&self.shared), n, timeout);
        Box::pin(async move {
            wait.await?;
            Ok(OwnedPermit {
                semaphore,
                permits: n,
            })
        })
    }

    /// Nothing: a semaphore's permits come back when their guard is dropped.
    fn refund(&self, _: &(), _: u64) {}
}

impl<C: Clock> Semaphore<C> {
    /// `try_acquire_owned` as a grant: what remains, and the guard.
    fn grant(self: &Arc<Self>, n: u64) -> Decided<OwnedPermit<C>> {
        let permit = self.try_acquire_owned(n)?;
        let admitted = Admitted::new(self.max_permits(), self.available_permits(), Duration::ZERO);
        Ok(Grant::new(admitted, permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_a_permit_returns_its_permits() {
        let s = Semaphore::new(3).unwrap();
        let p = s.try_acquire(2).unwrap();
        assert_eq!(s.available_permits(), 1);
        drop(p);
        assert_eq!(s.available_permits(), 3);
    }

    #[test]
    fn forgotten_permits_stay_taken() {
        let s = Semaphore::new(3).unwrap();
        s.try_acquire(2).unwrap().forget();
        assert_eq!(s.available_permits(), 1);
    }

    #[test]
    fn zero_permits_always_succeed_and_return_nothing() {
        let s = Semaphore::new(1).unwrap();
        let _held = s.try_acquire(1).unwrap();
        let empty = s.try_acquire(0).unwrap();
        assert_eq!(empty.num_permits(), 0);
        drop(empty);
        assert_eq!(s.available_permits(), 0);
    }

    #[test]
    fn set_max_permits_zero_is_an_error_and_changes_nothing() {
        let s = Semaphore::new(2).unwrap();
        assert_eq!(
            s.set_max_permits(0),
            Err(ConfigError::Zero { parameter: "max" })
        );
        assert_eq!(s.max_permits(), 2);
    }

    #[test]
    fn raising_max_permits_frees_more_at_once() {
        let s = Semaphore::new(1).unwrap();
        let _held = s.try_acquire(1).unwrap();
        s.set_max_permits(3).unwrap();
        assert_eq!(s.available_permits(), 2);
        assert!(s.try_acquire(2).is_ok());
    }

    #[test]
    fn debug_shows_max_and_in_use() {
        let s = Semaphore::new(2).unwrap();
        let p = s.try_acquire(1).unwrap();
        assert_eq!(format!("{s:?}"), "Semaphore { max_permits: 2, in_use: 1 }");
        assert_eq!(format!("{p:?}"), "Permit { permits: 1, .. }");
    }
}
