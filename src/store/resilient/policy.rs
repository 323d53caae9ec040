//! What a [`Resilient`](super::Resilient) store answers without its inner store: the
//! public [`FailurePolicy`] and the [`Policy`] it builds, with a fallback's local store.

use std::time::Duration;

use super::super::request::{Check, Op, Reply, Request};
use super::super::{MemoryStore, StoreError};
use crate::algorithm::Rule;
use crate::decision::{Admitted, Denied, Limited, Reservation};
use crate::time::Clock;

/// What a [`Resilient`](super::Resilient) store answers when its inner store cannot
/// decide in time.
///
/// | op | `Open` | `Closed` | `Fallback` |
/// |---|---|---|---|
/// | [`Acquire`](Op::Acquire), [`Peek`](Op::Peek) | admitted | denied, [`Denied::Limited`] | the local share decides |
/// | [`Reserve`](Op::Reserve) | reserved, no wait | denied, [`Denied::Limited`] | the local share decides |
/// | [`Refund`](Op::Refund) | the error | the error | given back to the local share |
///
/// - An admission under `Open` carries `limit` = the smallest capacity among the
///   request's rules, `remaining` = 0 and `reset_after` = 0: nothing is known, so
///   nothing more is promised.
/// - A denial under `Closed` carries `retry_after` = the time until the breaker lets a
///   call through again (its remaining open time; zero while it is closed), `limit` =
///   the smallest capacity, `remaining` = 0 and `reset_after` = `retry_after`.
/// - Under `Fallback`, a request for more than a node's share (but not more than the
///   rule) is denied as [`Denied::Limited`], with `retry_after` the time until the
///   breaker lets a call through, not as [`Denied::Insufficient`]: the store may grant
///   it once it is back.
/// - A refund is not a decision a policy can make up: under `Open` and `Closed` the
///   caller gets the store's error (or [`StoreError::CircuitOpen`]) and the permits
///   stay taken in the store until they expire there.
///
/// Whatever the policy, a request for more than a rule can ever grant is denied as
/// [`Denied::Insufficient`], a request for zero permits is admitted, and permanent
/// errors ([`StoreError::is_permanent`]) are returned, never decided by the policy.
///
/// # Examples
///
/// ```
/// use tollgate::store::FailurePolicy;
///
/// // Four application servers: while Redis is down, each admits a quarter.
/// let policy = FailurePolicy::Fallback { nodes: 4 };
/// # let _ = policy;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Fail open: admit every request.
    Open,
    /// Fail closed: deny every request.
    Closed,
    /// Decide in this process's memory, each rule at its share for one of `nodes`
    /// nodes ([`Rule::per_node`]), so that the nodes together admit no more than
    /// the rule. The local state lives in this process only (each key forgotten once
    /// idle): it starts from nothing the store had counted, and is not carried to the
    /// store when it returns.
    Fallback {
        /// How many nodes share the limits.
        nodes: u32,
    },
}

/// A [`FailurePolicy`], with the local store of a fallback.
pub(crate) enum Policy<C> {
    Open,
    Closed,
    Local { nodes: u32, local: MemoryStore<C> },
}

impl<C: Clock> Policy<C> {
    /// The public name of this policy.
    pub(crate) fn public(&self) -> FailurePolicy {
        match self {
            Policy::Open => FailurePolicy::Open,
            Policy::Closed => FailurePolicy::Closed,
            Policy::Local { nodes, .. } => FailurePolicy::Fallback { nodes: *nodes },
        }
    }

    /// Whether the policy decides `op`: a refund is not a decision `Open` or `Closed`
    /// can make up.
    pub(crate) fn decides(&self, op: Op) -> bool {
        !matches!((op, self), (Op::Refund(_), Policy::Open | Policy::Closed))
    }

    /// The policy's answer for `request`, which the store could not decide;
    /// `retry_after` tells when the store may be called again.
    pub(crate) fn decide(
        &self,
        request: &Request<'_>,
        retry_after: impl Fn() -> Duration,
    ) -> Result<Reply, StoreError> {
        let n = request.op.permits();
        let limit = request
            .checks
            .iter()
            .map(|c| c.rule.capacity())
            .min()
            .unwrap_or(0);
        let admitted = || Ok(Admitted::new(limit, 0, Duration::ZERO));
        let denied = || {
            let retry_after = retry_after();
            Err(Denied::from(Limited::new(
                retry_after,
                limit,
                0,
                retry_after,
            )))
        };
        let decision = match self {
            Policy::Local { nodes, local } => {
                return decide_locally(request, *nodes, local, retry_after);
            }
            Policy::Open => admitted(),
            Policy::Closed if request.most_permits() == 0 => admitted(),
            Policy::Closed => denied(),
        };
        Ok(match request.op {
            Op::Reserve { .. } => {
                Reply::Reservation(decision.map(|_| Reservation::new(n, Duration::ZERO)))
            }
            _ => Reply::Decision(decision),
        })
    }

    /// Checks that each node's share of `rule` is a rule, under a fallback.
    pub(crate) fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        if let Policy::Local { nodes, .. } = self {
            rule.per_node(*nodes)?;
        }
        Ok(())
    }
}

/// `request` on the local store, each rule at its share.
fn decide_locally<C: Clock>(
    request: &Request<'_>,
    nodes: u32,
    local: &MemoryStore<C>,
    retry_after: impl Fn() -> Duration,
) -> Result<Reply, StoreError> {
    let shares = request
        .checks
        .iter()
        .map(|c| c.rule.per_node(nodes))
        .collect::<Result<Vec<Rule>, _>>()?;
    let checks: Vec<Check<'_>> = request
        .checks
        .iter()
        .zip(&shares)
        .map(|(c, share)| Check { rule: share, ..*c })
        .collect();
    let mut shared = Request::new(request.tag, &checks, request.op);
    shared.at = request.at;
    // More than a share, but not more than the rule: the store may grant it once it
    // is back, so "never" would be wrong.
    let for_now = |denied: Denied| match denied {
        Denied::Insufficient(i) => {
            let retry_after = retry_after();
            Denied::from(Limited::new(retry_after, i.capacity(), 0, retry_after))
        }
        other => other,
    };
    Ok(match local.execute_now(&shared)? {
        Reply::Decision(d) => Reply::Decision(d.map_err(for_now)),
        Reply::Reservation(r) => Reply::Reservation(r.map_err(for_now)),
        other => other,
    })
}
