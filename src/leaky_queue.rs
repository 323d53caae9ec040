//! The leaky bucket as a queue: producers wait their turn, and requests leave one unit
//! every interval, in arrival order, like nginx `limit_req` without `nodelay`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::algorithm::LeakyBucket;
use crate::engine::Core;
use crate::error::AcquireError;
use crate::error::ConfigError;
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::quota::Quota;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::queue::Waiting;

/// A bounded queue drained at a constant rate: each request of `n` units leaves once
/// the units ahead of it have drained, one every `drain.emission_interval()`, and a
/// request that would take the queue past `capacity` units is refused at once.
///
/// The departure times come from the bucket's schedule, not from when the scheduler
/// thread happens to wake, so a late wake-up delays one departure without slowing the
/// rate.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{LeakyQueue, Quota};
/// use tollgate::time::ManualClock;
/// use tollgate::AcquireError;
///
/// # futures::executor::block_on(async {
/// let clock = ManualClock::new();
/// let queue = LeakyQueue::with_clock(2, Quota::per_second(10)?, clock.clone())?;
/// assert_eq!(queue.enqueue(1).await?, Duration::ZERO); // leaves at once
/// let mut second = Box::pin(queue.enqueue(1));
/// assert!(futures::poll!(second.as_mut()).is_pending());
/// assert_eq!(queue.queue_len(), 2);
/// // Full: a third unit is refused at once.
/// assert_eq!(queue.enqueue(1).await, Err(AcquireError::QueueFull { capacity: 2 }));
/// clock.advance(Duration::from_millis(100));
/// assert_eq!(second.await?, Duration::from_millis(100));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct LeakyQueue<C: Clock = MonotonicClock> {
    shared: Arc<Waiting<Drain<C>>>,
}

type Drain<C> = Core<LeakyBucket, C>;

impl LeakyQueue {
    /// A queue of at most `capacity` units, draining at `drain`'s rate, on the
    /// default monotonic clock.
    ///
    /// # Errors
    ///
    /// As [`LeakyBucket::new`]: a zero capacity, or a full bucket that would take more
    /// than 584 years to drain.
    pub fn new(capacity: u64, drain: Quota) -> Result<LeakyQueue, ConfigError> {
        LeakyQueue::with_clock(capacity, drain, MonotonicClock::new())
    }
}

impl<C: Clock> LeakyQueue<C> {
    /// As [`LeakyQueue::new`], reading time from `clock`.
    ///
    /// # Errors
    ///
    /// As [`LeakyQueue::new`].
    pub fn with_clock(capacity: u64, drain: Quota, clock: C) -> Result<LeakyQueue<C>, ConfigError> {
        let shared = Waiting::new(Core::new(LeakyBucket::new(capacity, drain)?, clock));
        shared.set_max_units(capacity);
        Ok(LeakyQueue { shared })
    }

    /// Reports the end of every [`enqueue`](LeakyQueue::enqueue) to `events`:
    /// `Admitted` for a request that left at once, `Waited` with its time in the
    /// queue, or `Denied` (`QueueFull`, `Insufficient`, `Closed`).
    ///
    /// Clones share the hub, and the first hub attached stays: where one is attached
    /// already (here or on a clone), this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::{LeakyQueue, Quota};
    ///
    /// let events = Events::new("uploads");
    /// events.subscribe(|event: &Event<'_>| println!("{event}")).detach();
    /// let queue = LeakyQueue::new(100, Quota::per_second(10)?)?.with_events(events);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_events(self, events: crate::observe::Events) -> LeakyQueue<C> {
        self.shared.gate.attach(events);
        self
    }

    /// Joins the queue with `n` units and waits for its turn to leave; resolves to
    /// the time waited.
    ///
    /// # Errors
    ///
    /// [`AcquireError::QueueFull`] at once if the queue would hold more than its
    /// capacity; [`AcquireError::Insufficient`] if `n` alone exceeds it;
    /// [`AcquireError::Closed`] after [`close`](LeakyQueue::close).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the queue; the units it had booked are given back
    /// and the requests behind it move up.
    pub fn enqueue(&self, n: u64) -> Enqueue<'_, C> {
        Enqueue {
            wait: WaitFor::new(&*self.shared, n, None),
        }
    }

    /// As [`enqueue`](LeakyQueue::enqueue), blocking the calling thread.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](LeakyQueue::enqueue).
    pub fn enqueue_blocking(&self, n: u64) -> Result<Duration, AcquireError> {
        WaitFor::new(&*self.shared, n, None).block()
    }

    /// A copy of the bucket: its capacity and drain rate.
    #[cfg(feature = "http")]
    pub(crate) fn bucket(&self) -> LeakyBucket {
        self.shared.gate.cell.snapshot().0
    }

    /// The hub it reports to, if any.
    #[cfg(feature = "http")]
    pub(crate) fn events(&self) -> Option<&crate::observe::Events> {
        self.shared.gate.events()
    }

    /// Units in the queue: waiting, plus booked and not yet drained.
    pub fn queue_len(&self) -> u64 {
        let (waiting, _) = self.shared.queued();
        let now = self.shared.gate.now();
        waiting.saturating_add(self.shared.gate.backlog(now))
    }

    /// How long one more unit enqueued now would wait.
    pub fn expected_wait(&self) -> Duration {
        let (waiting, _) = self.shared.queued();
        let gate = &self.shared.gate;
        let (bucket, state) = gate.cell.snapshot();
        let drained = bucket.expected_wait(&state, gate.now());
        drained.saturating_add(
            bucket
                .drain_interval()
                .saturating_mul(u32::try_from(waiting).unwrap_or(u32::MAX)),
        )
    }

    /// Closes the queue: waiting and later requests fail with
    /// [`AcquireError::Closed`].
    pub fn close(&self) {
        self.shared.close()
    }

    /// Requests waiting.
    pub fn waiters(&self) -> usize {
        self.shared.waiters()
    }
}

impl<C: Clock> fmt::Debug for LeakyQueue<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeakyQueue")
            .field("cell", &self.shared.gate.cell)
            .field("queue", &*self.shared)
            .finish()
    }
}

/// The future of [`LeakyQueue::enqueue`]: the time waited.
///
/// # Cancel safety
///
/// Dropping it leaves the queue and gives back what it had booked.
#[must_use = "futures do nothing unless polled"]
pub struct Enqueue<'a, C: Clock> {
    wait: WaitFor<&'a Waiting<Drain<C>>, Drain<C>>,
}

impl<C: Clock> Future for Enqueue<'_, C> {
    type Output = Result<Duration, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<C: Clock> fmt::Debug for Enqueue<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enqueue").finish_non_exhaustive()
    }
}

/// A grant is a place in the queue that leaves at once; a wait is
/// [`enqueue`](LeakyQueue::enqueue)'s, bounded by the queue.
impl<C: Clock> PermitSource for LeakyQueue<C> {
    type Permit = ();
    type Error = std::convert::Infallible;

    fn capacity(&self) -> u64 {
        self.shared.gate.capacity()
    }

    fn decide_now(&self, _: &(), n: u64) -> Option<Result<Decided<()>, std::convert::Infallible>> {
        Some(Ok(self.admit_now(n)))
    }

    fn decide(
        &self,
        _: &(),
        n: u64,
    ) -> PermitFuture<Result<Decided<()>, std::convert::Infallible>> {
        Box::pin(std::future::ready(Ok(self.admit_now(n))))
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
        self.shared.release(n);
    }
}

impl<C: Clock> LeakyQueue<C> {
    /// A place that leaves at once, if the queue is empty and the bucket has room.
    fn admit_now(&self, n: u64) -> Decided<()> {
        let decision = self.shared.try_acquire(n);
        self.shared.gate.report(n, &decision);
        decision.map(|admitted| Grant::new(admitted, ()))
    }
}
