//! Waiting on a [`LeaseLimiter`]: one FIFO queue per tag with waiters, the crate's,
//! in front of a gate that decides as `check` does.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::redis::aio::ConnectionLike;

use super::{LeaseLimiter, NOT_NOW, Node};
use crate::decision::{Decision, Denied, Limited, Reservation};
use crate::error::AcquireError;
use crate::observe::Events;
use crate::store::StoreError;
use crate::sync::Arc;
use crate::time::{Alarm, Clock, Nanos};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::per_key::Joined;
use crate::wait::round_trip::RemoteBooking;

/// # Waiting
impl<Conn, C> LeaseLimiter<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// Waits until `n` permits for `tag` are taken; resolves to the time waited on
    /// this limiter's clock.
    ///
    /// Waiters on one tag are served in arrival order, through the same FIFO queue as
    /// every other limiter. The first decides as [`check`](Self::check) does (from the
    /// slice, or by a round trip); denied, it sleeps for the denial's `retry_after`
    /// (until the window ends, or until the bucket has the permits) and asks again,
    /// while the others queue behind it holding nothing. While callers wait on `tag`,
    /// `check` and `try_acquire` on it are denied (they would overtake them).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::algorithm::Gcra;
    /// # use tollgate::store::LeaseLimiter;
    /// # use tollgate::Quota;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// # let connection = redis::Client::open("redis://127.0.0.1/")?.get_multiplexed_async_connection().await?;
    /// let limiter = LeaseLimiter::new(connection, "api", Gcra::new(Quota::per_second(10)?))?;
    /// let waited = limiter.acquire("user-42", 1).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`AcquireError::Insufficient`] for more than the capacity,
    /// [`AcquireError::Closed`] after [`close`](Self::close), and
    /// [`AcquireError::Source`] with the [`StoreError`] of a lease the first waiter
    /// could not take (the next waiter then tries).
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits, it takes nothing. Dropped after its permits were taken
    /// and before it was polled again, they are lost to this node (counted in Redis,
    /// which only denies more).
    pub fn acquire(&self, tag: &str, n: u64) -> LeaseAcquire<Conn, C> {
        LeaseAcquire {
            wait: WaitFor::new(self.join(tag), n, None),
        }
    }

    /// [`acquire`](Self::acquire), giving up after `timeout`; failing at once when
    /// the first denial's `retry_after` already ends after it.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`AcquireError::TimedOut`].
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_timeout(&self, tag: &str, n: u64, timeout: Duration) -> LeaseAcquire<Conn, C> {
        LeaseAcquire {
            wait: WaitFor::new(self.join(tag), n, Some(timeout)),
        }
    }

    /// Blocks the calling thread until `n` permits for `tag` are taken, making the
    /// round trips on it; returns the time waited. The connection must be driven by
    /// a runtime on another thread.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_blocking(
        &self,
        tag: &str,
        n: u64,
    ) -> Result<Duration, AcquireError<StoreError>> {
        WaitFor::new(self.join(tag), n, None).block()
    }

    /// How many callers of this process wait, on every tag.
    pub fn waiters(&self) -> usize {
        self.queues.waiters()
    }

    fn join(&self, tag: &str) -> Joined<String, LeaseGate<Conn, C>> {
        let tag = tag.to_owned();
        self.queues.join(&tag, || LeaseGate {
            node: self.node.clone(),
            tag: tag.clone(),
        })
    }

    /// A denial for callers who would overtake this process's waiters on `tag`, or
    /// of a closed limiter.
    pub(super) fn queued_denial(&self, tag: &str, n: u64) -> Option<Denied> {
        if self.queues.is_closed() {
            return Some(Denied::Closed);
        }
        // `n == 0` takes nothing, so it overtakes no one.
        let queue = self.queues.get(tag).filter(|_| n > 0)?;
        if queue.waiters() == 0 {
            return None;
        }
        let now = self.node.clock.now();
        let retry = match queue.queued().1 {
            Some(first) => first.saturating_since(now),
            None => NOT_NOW,
        };
        Some(Limited::new(retry, self.node.shared.terms.capacity, 0, retry).into())
    }
}

/// The future of [`LeaseLimiter::acquire`]: resolves to the time waited.
///
/// # Cancel safety
///
/// As [`LeaseLimiter::acquire`].
#[must_use = "futures do nothing unless polled"]
pub struct LeaseAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    wait: WaitFor<Joined<String, LeaseGate<Conn, C>>, LeaseGate<Conn, C>>,
}

impl<Conn, C> Future for LeaseAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    type Output = Result<Duration, AcquireError<StoreError>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<Conn, C> fmt::Debug for LeaseAcquire<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseAcquire").finish_non_exhaustive()
    }
}

/// One tag's side of a [`LeaseLimiter`], as the tag's queue sees it: decided by the
/// first waiter, from the slice or by a round trip.
pub(super) struct LeaseGate<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
{
    node: Node<Conn, C>,
    tag: String,
}

impl<Conn, C> LeaseGate<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    /// A decision without a round trip, for the queue paths that a remote gate never
    /// takes; "not now" when one is needed.
    fn local(&self, n: u64) -> Decision {
        match self.node.decide_now(&self.tag, n) {
            Some(Ok(decision)) => decision,
            _ => Err(Limited::new(NOT_NOW, self.node.shared.terms.capacity, 0, NOT_NOW).into()),
        }
    }
}

impl<Conn, C> Gate for LeaseGate<Conn, C>
where
    Conn: ConnectionLike + Clone + Send + Sync + 'static,
    C: Clock,
{
    type Error = StoreError;

    fn now(&self) -> Nanos {
        self.node.clock.now()
    }

    fn acquire(&self, _now: Nanos, n: u64) -> Decision {
        self.local(n)
    }

    fn peek(&self, _now: Nanos, _n: u64) -> Decision {
        self.local(0)
    }

    fn reserve(&self, _now: Nanos, n: u64, _max_wait: Duration) -> Result<Reservation, Denied> {
        self.local(n).map(|_| Reservation::new(n, Duration::ZERO))
    }

    /// Permits granted to a waiter that left before taking them: lost to this node,
    /// still counted in Redis (which only denies more).
    fn refund(&self, _now: Nanos, _n: u64) {}

    fn capacity(&self) -> u64 {
        self.node.shared.terms.capacity
    }

    /// A denial's `retry_after` is the wait.
    fn books_ahead(&self) -> bool {
        false
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.node.clock.set_alarm(deadline, alarm)
    }

    fn events(&self) -> Option<&Events> {
        self.node.shared.events.get()
    }

    fn event_key(&self) -> Option<&str> {
        Some(&self.tag)
    }

    fn is_remote(&self) -> bool {
        true
    }

    /// Takes the permits now as `check` does; denied, the queue asks again after
    /// the denial's `retry_after`.
    fn reserve_remote(&self, n: u64, _max_wait: Duration) -> RemoteBooking<StoreError> {
        if let Some(decision) = self.node.decide_now(&self.tag, n) {
            return Box::pin(std::future::ready(decision.map(|d| booking(d, n))));
        }
        let node = self.node.clone();
        let tag = self.tag.clone();
        Box::pin(async move { Ok(booking(node.decide(&tag, n).await?, n)) })
    }
}

/// A decision as a booking: an admission now, or the denial.
fn booking(decision: Decision, n: u64) -> Result<Reservation, Denied> {
    decision.map(|_| Reservation::new(n, Duration::ZERO))
}
