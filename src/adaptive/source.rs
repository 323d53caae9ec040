//! The adaptive limiter as a [`PermitSource`], for the tower layers and shapers.

use std::convert::Infallible;
use std::time::Duration;

use super::LimitAlgorithm;
use super::limiter::AdaptiveLimiter;
use super::permit::AdaptivePermit;
use crate::decision::{Admitted, Denied};
use crate::error::{AcquireError, InsufficientCapacity};
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::sync::Arc;
use crate::time::Clock;

/// One request, one permit: a grant is an [`AdaptivePermit`], to end with the
/// request's outcome (dropped without one, it counts as ignored).
///
/// The [`capacity`](PermitSource::capacity) is 1: a request for more than one permit
/// is refused as never, and a request for none is granted a permit that holds
/// nothing and records nothing. [`wait`](PermitSource::wait) waits as the limiter's
/// [`WhenLimited`](super::WhenLimited) says, for at most the shorter of `timeout` and the mode's
/// timeout; in [`WhenLimited::FailFast`](super::WhenLimited::FailFast) it never waits.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
/// use tollgate::PermitSource;
///
/// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
/// let Some(Ok(Ok(grant))) = limiter.decide_now(&(), 1) else { panic!("admitted") };
/// assert_eq!(grant.admitted().remaining(), 19);
/// grant.into_permit().success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<L: LimitAlgorithm, C: Clock> PermitSource for Arc<AdaptiveLimiter<L, C>> {
    type Permit = AdaptivePermit<L, C>;
    type Error = Infallible;

    fn capacity(&self) -> u64 {
        1
    }

    fn decide_now(
        &self,
        _: &(),
        n: u64,
    ) -> Option<Result<Decided<AdaptivePermit<L, C>>, Infallible>> {
        Some(Ok(self.grant(n)))
    }

    fn decide(
        &self,
        _: &(),
        n: u64,
    ) -> PermitFuture<Result<Decided<AdaptivePermit<L, C>>, Infallible>> {
        Box::pin(std::future::ready(Ok(self.grant(n))))
    }

    fn wait(
        &self,
        _: &(),
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<AdaptivePermit<L, C>, AcquireError>> {
        match n {
            0 => Box::pin(std::future::ready(Ok(AdaptivePermit::empty(Arc::clone(
                self,
            ))))),
            1 => match timeout {
                Some(timeout) => Box::pin(self.acquire_timeout(timeout)),
                None => Box::pin(self.acquire()),
            },
            _ => Box::pin(std::future::ready(Err(AcquireError::Insufficient(
                InsufficientCapacity::new(n, 1),
            )))),
        }
    }

    /// Nothing: a permit goes back when its guard ends.
    fn refund(&self, _: &(), _: u64) {}
}

impl<L: LimitAlgorithm, C: Clock> AdaptiveLimiter<L, C> {
    /// `try_acquire` as a grant of `n` permits (0 or 1): the guard, and what
    /// remains.
    fn grant(self: &Arc<Self>, n: u64) -> Decided<AdaptivePermit<L, C>> {
        let permit = match n {
            0 => AdaptivePermit::empty(Arc::clone(self)),
            1 => self.try_acquire_owned()?,
            _ => return Err(Denied::Insufficient(InsufficientCapacity::new(n, 1))),
        };
        let admitted = Admitted::new(self.limit(), self.available_permits(), Duration::ZERO);
        Ok(Grant::new(admitted, permit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adaptive::WhenLimited;
    use crate::adaptive::limit::AimdLimit;
    use crate::time::ManualClock;

    fn limiter(mode: WhenLimited) -> Arc<AdaptiveLimiter<AimdLimit, ManualClock>> {
        let aimd = AimdLimit::builder()
            .min_limit(1)
            .initial_limit(1)
            .build()
            .unwrap();
        Arc::new(AdaptiveLimiter::with_clock(aimd, mode, ManualClock::new()).unwrap())
    }

    #[test]
    fn one_permit_per_request() {
        let limiter = limiter(WhenLimited::FailFast);
        assert_eq!(limiter.capacity(), 1);
        assert_eq!(limiter.chunk(100), 1);
        let two = limiter.decide_now(&(), 2).unwrap().unwrap().unwrap_err();
        assert!(two.is_never());
        let none = limiter.decide_now(&(), 0).unwrap().unwrap().unwrap();
        assert_eq!(limiter.inflight(), 0);
        drop(none);
        let one = limiter.decide_now(&(), 1).unwrap().unwrap().unwrap();
        assert_eq!(one.admitted().remaining(), 0);
        let refused = limiter.decide_now(&(), 1).unwrap().unwrap().unwrap_err();
        assert!(refused.is_limited());
        drop(one);
        assert_eq!(limiter.available_permits(), 1);
    }

    #[test]
    fn wait_takes_the_shorter_timeout_and_gives_back_when_dropped() {
        let limiter = limiter(WhenLimited::fifo(Duration::from_secs(10)).unwrap());
        let held = limiter.try_acquire_owned().unwrap();
        let clock = limiter.clock().clone();
        let mut waiting = limiter.wait(&(), 1, Some(Duration::from_secs(1)));
        assert!(
            futures::executor::block_on(futures::future::poll_immediate(&mut waiting)).is_none()
        );
        assert_eq!(limiter.waiters(), 1);
        clock.advance(Duration::from_secs(1));
        let outcome = futures::executor::block_on(waiting);
        assert!(matches!(outcome, Err(AcquireError::TimedOut)));

        // Granted, then cancelled before being polled: the permit goes back.
        let waiting = limiter.wait(&(), 1, None);
        let mut waiting = Box::pin(waiting);
        assert!(
            futures::executor::block_on(futures::future::poll_immediate(&mut waiting)).is_none()
        );
        held.success();
        assert_eq!(limiter.inflight(), 1, "granted to the waiter");
        drop(waiting);
        assert_eq!(limiter.inflight(), 0);
        assert_eq!(limiter.available_permits(), limiter.limit());
    }

    #[test]
    fn wait_for_none_or_too_many() {
        let limiter = limiter(WhenLimited::FailFast);
        let none = futures::executor::block_on(limiter.wait(&(), 0, None)).unwrap();
        drop(none);
        let many = futures::executor::block_on(limiter.wait(&(), 3, None));
        assert!(matches!(many, Err(AcquireError::Insufficient(_))));
        let one = futures::executor::block_on(limiter.wait(&(), 1, None)).unwrap();
        let refused = futures::executor::block_on(limiter.wait(&(), 1, None));
        assert!(matches!(refused, Err(AcquireError::TimedOut)));
        one.success();
    }
}
