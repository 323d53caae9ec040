//! The partitioned limiter as a [`PermitSource`] keyed by the request's context, for
//! the tower layers and shapers.

use std::convert::Infallible;
use std::time::Duration;

use super::{PartitionedLimiter, PartitionedPermit};
use crate::adaptive::LimitAlgorithm;
use crate::adaptive::acquire::refused;
use crate::adaptive::partition::PartitionDenied;
use crate::decision::{Admitted, Denied, Limited};
use crate::error::{AcquireError, InsufficientCapacity};
use crate::permits::{Decided, Grant, PermitFuture, PermitSource};
use crate::sync::Arc;
use crate::time::Clock;

/// Keyed by the request's context, `Ctx`: `str`, the partition's name, unless a
/// [`resolver`](super::PartitionedLimiterBuilder::resolver) was set. The bypass
/// predicate applies. One request, one permit: a grant is a [`PartitionedPermit`],
/// to end with the request's outcome (dropped without one, it counts as ignored).
///
/// The [`capacity`](PermitSource::capacity) is 1: a request for more than one permit
/// is refused as never, and a request for none is granted a permit that holds
/// nothing and records nothing. A refusal is
/// [`Retry::OnRelease`](crate::Retry::OnRelease), reporting the global limit and
/// the room left under it. [`wait`](PermitSource::wait) never waits (see
/// [fail fast](PartitionedLimiter#fail-fast)): a refused request fails at once with
/// [`AcquireError::TimedOut`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::PartitionedLimiter;
/// use tollgate::PermitSource;
///
/// let limiter = Arc::new(
///     PartitionedLimiter::builder(AimdLimit::new()).partition("live", 0.5).build()?,
/// );
/// let Some(Ok(Ok(grant))) = limiter.decide_now("live", 1) else { panic!("admitted") };
/// assert_eq!(grant.admitted().remaining(), 19);
/// grant.into_permit().success();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<L, C, Ctx> PermitSource<Ctx> for Arc<PartitionedLimiter<L, C, Ctx>>
where
    L: LimitAlgorithm,
    C: Clock,
    Ctx: ?Sized + 'static,
{
    type Permit = PartitionedPermit<L, C>;
    type Error = Infallible;

    fn capacity(&self) -> u64 {
        1
    }

    fn decide_now(
        &self,
        ctx: &Ctx,
        n: u64,
    ) -> Option<Result<Decided<PartitionedPermit<L, C>>, Infallible>> {
        Some(Ok(self.grant(ctx, n)))
    }

    fn decide(
        &self,
        ctx: &Ctx,
        n: u64,
    ) -> PermitFuture<Result<Decided<PartitionedPermit<L, C>>, Infallible>> {
        Box::pin(std::future::ready(Ok(self.grant(ctx, n))))
    }

    fn wait(
        &self,
        ctx: &Ctx,
        n: u64,
        _: Option<Duration>,
    ) -> PermitFuture<Result<PartitionedPermit<L, C>, AcquireError>> {
        let outcome = self.grant(ctx, n).map(Grant::into_permit).map_err(refused);
        Box::pin(std::future::ready(outcome))
    }

    /// Nothing: a permit goes back when its guard ends.
    fn refund(&self, _: &Ctx, _: u64) {}
}

impl<L: LimitAlgorithm, C: Clock, Ctx: ?Sized + 'static> PartitionedLimiter<L, C, Ctx> {
    /// `try_acquire` as a grant of `n` permits (0 or 1): the guard, and the room
    /// left under the global limit.
    fn grant(&self, ctx: &Ctx, n: u64) -> Decided<PartitionedPermit<L, C>> {
        let permit = match n {
            0 => PartitionedPermit::empty(Arc::clone(&self.shared)),
            1 => self.try_acquire(ctx).map_err(limited)?,
            _ => return Err(Denied::Insufficient(InsufficientCapacity::new(n, 1))),
        };
        let limit = self.limit();
        let remaining = limit.saturating_sub(self.in_flight());
        Ok(Grant::new(
            Admitted::new(limit, remaining, Duration::ZERO),
            permit,
        ))
    }
}

/// A refusal waits for requests to end.
pub(super) fn limited(denied: PartitionDenied) -> Denied {
    let remaining = denied.limit().saturating_sub(denied.in_flight());
    Denied::Limited(Limited::on_release(denied.limit(), remaining))
}
