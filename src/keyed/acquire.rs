//! Waiting on a [`KeyedLimiter`]: one FIFO queue per key with waiters, over the
//! key's state in the table, and the limiter as a [`PermitSource`].

use std::borrow::Borrow;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{Inner, KeyedLimiter};
use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::error::AcquireError;
use crate::observe::Events;
use crate::permits::{Decided, GiveBack, Grant, PermitFuture, PermitSource, Release};
use crate::sync::Arc;
use crate::time::{Alarm, Clock, Nanos};
use crate::wait::future::WaitFor;
use crate::wait::gate::Gate;
use crate::wait::per_key::Joined;

/// One key's side of a [`KeyedLimiter`], as the key's queue sees it: decided in the
/// table, under the shard's lock, like any other decision on the key.
pub(crate) struct KeyedGate<K, A: Algorithm, C> {
    inner: Arc<Inner<K, A, C>>,
    key: K,
}

impl<K, A, C> Gate for KeyedGate<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    type Error = Infallible;

    fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    fn acquire(&self, now: Nanos, n: u64) -> Decision {
        self.inner
            .table
            .with_state(&self.key, now, n, |alg, state, now| {
                alg.acquire(state, now, n)
            })
    }

    fn peek(&self, now: Nanos, n: u64) -> Decision {
        self.inner.table.peek(&self.key, now, n)
    }

    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        self.inner
            .table
            .with_state(&self.key, now, n, |alg, state, now| {
                alg.reserve(state, now, n, max_wait)
            })
    }

    fn refund(&self, now: Nanos, n: u64) {
        self.inner.table.refund(&self.key, now, n)
    }

    fn capacity(&self) -> u64 {
        self.inner.algorithm.lock().capacity()
    }

    fn books_ahead(&self) -> bool {
        A::BOOKS_AHEAD
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.inner.clock.set_alarm(deadline, alarm)
    }

    fn denies_at_the_end(&self, n: u64) -> bool {
        // A key no longer stored starts afresh when served, so it is not denied.
        matches!(
            self.inner.table.peek_stored(&self.key, Nanos::MAX, n),
            Some(Err(Denied::Limited(l))) if l.retry_after().is_some()
        )
    }

    fn events(&self) -> Option<&Events> {
        self.inner.events.events()
    }
}

/// # Waiting
impl<K, A, C> KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    /// Waits until `n` permits for `key` are granted; resolves to the time waited on
    /// the limiter's clock.
    ///
    /// Waiters on one key are served in arrival order, as on a
    /// [`Limiter`](crate::Limiter): the first books its permits and sleeps until they
    /// are due, the others queue behind it, and while anyone waits on the key,
    /// `try_acquire` for it is denied. Keys nobody waits on cost nothing here.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Insufficient`] at once for more than the limiter can ever
    /// grant; [`AcquireError::Closed`] after [`close`](KeyedLimiter::close);
    /// [`AcquireError::PastClockEnd`] when the permits would be due only past the
    /// clock's end.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back whatever it had booked, and the next waiter on
    /// the key moves up.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    /// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let quota = Quota::per_second(10)?.burst(1)?;
    /// let limiter: KeyedLimiter<String, _, _> =
    ///     KeyedLimiter::with_clock(Gcra::new(quota), KeyedConfig::new(100), clock.clone())?;
    /// assert!(limiter.try_acquire("ann", 1).is_ok());
    /// let mut next = Box::pin(limiter.acquire("ann", 1));
    /// assert!(futures::poll!(next.as_mut()).is_pending());
    /// clock.advance(Duration::from_millis(100)); // rings the key's alarm
    /// assert_eq!(next.await?, Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire<Q>(&self, key: &Q, n: u64) -> KeyedAcquire<K, A, C>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        KeyedAcquire {
            wait: WaitFor::new(self.join(key.to_owned()), n, None),
        }
    }

    /// As [`acquire`](KeyedLimiter::acquire), giving up after `timeout`: at once when
    /// the wait is already known to be longer.
    ///
    /// # Errors
    ///
    /// As `acquire`, and [`AcquireError::TimedOut`].
    ///
    /// # Cancel safety
    ///
    /// As `acquire`.
    pub fn acquire_timeout<Q>(&self, key: &Q, n: u64, timeout: Duration) -> KeyedAcquire<K, A, C>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        KeyedAcquire {
            wait: WaitFor::new(self.join(key.to_owned()), n, Some(timeout)),
        }
    }

    /// Blocks the calling thread until `n` permits for `key` are granted; returns the
    /// time waited.
    ///
    /// # Errors
    ///
    /// As [`acquire`](KeyedLimiter::acquire).
    pub fn acquire_blocking<Q>(&self, key: &Q, n: u64) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        WaitFor::new(self.join(key.to_owned()), n, None).block()
    }

    /// As [`acquire_blocking`](KeyedLimiter::acquire_blocking), giving up after
    /// `timeout`.
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](KeyedLimiter::acquire_timeout): at once when the wait
    /// is already known to exceed `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::time::ManualClock;
    /// use tollgate::{AcquireError, KeyedConfig, KeyedLimiter, Quota};
    ///
    /// let quota = Quota::per_second(10)?.burst(1)?;
    /// let limiter: KeyedLimiter<String, _, _> =
    ///     KeyedLimiter::with_clock(Gcra::new(quota), KeyedConfig::new(100), ManualClock::new())?;
    /// assert_eq!(limiter.acquire_blocking_timeout("ann", 1, Duration::ZERO), Ok(Duration::ZERO));
    /// // The next permit for "ann" comes in 100 ms: more than the timeout, known at once.
    /// assert_eq!(
    ///     limiter.acquire_blocking_timeout("ann", 1, Duration::from_millis(50)),
    ///     Err(AcquireError::TimedOut)
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking_timeout<Q>(
        &self,
        key: &Q,
        n: u64,
        timeout: Duration,
    ) -> Result<Duration, AcquireError>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        WaitFor::new(self.join(key.to_owned()), n, Some(timeout)).block()
    }

    /// Closes the limiter: every waiter and every later wait fails with
    /// [`AcquireError::Closed`], and `try_acquire` with [`Denied::Closed`]. Permits
    /// booked by waiters are given back.
    pub fn close(&self) {
        self.queues.close()
    }

    /// Whether [`close`](KeyedLimiter::close) was called.
    pub fn is_closed(&self) -> bool {
        self.queues.is_closed()
    }

    /// How many callers wait, on every key.
    pub fn waiters(&self) -> usize {
        self.queues.waiters()
    }

    fn join(&self, key: K) -> Joined<K, KeyedGate<K, A, C>> {
        self.queues.join(&key, || KeyedGate {
            inner: Arc::clone(&self.inner),
            key: key.clone(),
        })
    }
}

/// The future of [`KeyedLimiter::acquire`]: resolves to the time waited.
///
/// # Cancel safety
///
/// As [`KeyedLimiter::acquire`].
#[must_use = "futures do nothing unless polled"]
pub struct KeyedAcquire<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    wait: KeyWait<K, A, C>,
}

/// A wait in one key's queue.
type KeyWait<K, A, C> = WaitFor<Joined<K, KeyedGate<K, A, C>>, KeyedGate<K, A, C>>;

impl<K, A, C> Future for KeyedAcquire<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<Duration, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().wait.poll(cx)
    }
}

impl<K, A, C> fmt::Debug for KeyedAcquire<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedAcquire").finish_non_exhaustive()
    }
}

/// Per key, under any form the keys borrow as (`str` for `String` keys): decided at
/// once in process. A grant's [`Release`] holds nothing over a rate; over an
/// algorithm whose permits are [held](Algorithm::HELD) (a concurrency limit) it
/// holds the key's permits and gives them back when dropped.
impl<K, A, C, Q> PermitSource<Q> for KeyedLimiter<K, A, C>
where
    K: Borrow<Q> + Hash + Eq + Clone + Send + Sync + 'static,
    Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    A: Algorithm,
    C: Clock,
{
    type Permit = Release;
    type Error = Infallible;

    fn capacity(&self) -> u64 {
        self.inner.algorithm.lock().capacity()
    }

    #[inline]
    fn decide_now(&self, key: &Q, n: u64) -> Option<Result<Decided<Release>, Infallible>> {
        Some(Ok(self
            .try_acquire(key, n)
            .map(|a| Grant::new(a, self.held(key, n)))))
    }

    fn decide(&self, key: &Q, n: u64) -> PermitFuture<Result<Decided<Release>, Infallible>> {
        let decided = self
            .try_acquire(key, n)
            .map(|a| Grant::new(a, self.held(key, n)));
        Box::pin(std::future::ready(Ok(decided)))
    }

    fn wait(
        &self,
        key: &Q,
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<Release, AcquireError>> {
        let wait = WaitFor::new(self.join(key.to_owned()), n, timeout);
        if !A::HELD {
            return wait.into_permit_future_with(Release::nothing);
        }
        let (limiter, key) = (self.clone(), key.to_owned());
        wait.into_permit_future_with(move || limiter.held::<K>(&key, n))
    }

    fn refund(&self, key: &Q, n: u64) {
        KeyedLimiter::refund(self, key, n)
    }

    fn into_release(permit: Release) -> Release {
        permit
    }
}

impl<K, A, C> KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    /// What a grant of `n` permits for `key` holds: nothing over a rate (and no
    /// allocation), the permits over an algorithm whose permits are held.
    #[inline]
    fn held<Q>(&self, key: &Q, n: u64) -> Release
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        if !A::HELD || n == 0 {
            return Release::nothing();
        }
        Release::new(KeyedRelease {
            limiter: self.clone(),
            key: key.to_owned(),
            n,
        })
    }
}

/// A key's held permits, given back to its limiter.
struct KeyedRelease<K, A: Algorithm, C: Clock> {
    limiter: KeyedLimiter<K, A, C>,
    key: K,
    n: u64,
}

impl<K, A, C> GiveBack for KeyedRelease<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm,
    C: Clock,
{
    fn give_back(self: Box<Self>) {
        self.limiter.refund(&self.key, self.n);
    }
}
