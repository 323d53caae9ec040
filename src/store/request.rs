//! What a store is asked, and what it answers.

use std::time::Duration;

use super::StoreError;
use super::rule::{RuleOutcome, Step};
use crate::algorithm::{Rule, later_denial, tighter};
use crate::decision::{Decision, Denied, InsufficientCapacity, Reservation};
use crate::error::ConfigError;

/// What a [`Request`] asks of its rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Take `n` permits if every rule admits them now. `0` peeks.
    Acquire(u64),
    /// Decide as [`Acquire`](Op::Acquire) would, taking nothing.
    Peek(u64),
    /// Take `n` permits to be used after a wait of at most `max_wait`. With one rule,
    /// algorithms that book ahead grant future waits; with several rules, only
    /// immediate reservations are granted, as [`AllOf`](crate::algorithm::AllOf) does.
    Reserve {
        /// The permits.
        n: u64,
        /// The longest acceptable wait (a store counting in microseconds truncates it).
        max_wait: Duration,
    },
    /// Give back `n` permits taken earlier and not used (or release held permits).
    Refund(u64),
}

impl Op {
    /// The permits asked for.
    pub fn permits(&self) -> u64 {
        match *self {
            Op::Acquire(n) | Op::Peek(n) | Op::Refund(n) | Op::Reserve { n, .. } => n,
        }
    }

    /// What each of `checks` checks is asked: with several rules, a reservation is an
    /// immediate acquire.
    pub(crate) fn step(&self, checks: usize) -> Step {
        match *self {
            Op::Acquire(n) => Step::Acquire(n),
            Op::Peek(n) => Step::Peek(n),
            Op::Reserve { n, max_wait } if checks == 1 => Step::Reserve(n, max_wait),
            Op::Reserve { n, .. } => Step::Acquire(n),
            Op::Refund(n) => Step::Refund(n),
        }
    }
}

/// One rule applied to one key of a request.
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    /// The key under the request's hash tag: `""` when the tag alone names it.
    pub key: &'a str,
    /// The rule.
    pub rule: &'a Rule,
}

impl<'a> Check<'a> {
    /// `rule` applied to `key`.
    pub fn new(key: &'a str, rule: &'a Rule) -> Check<'a> {
        Check { key, rule }
    }
}

/// All rules of one request, decided together and all-or-nothing, in one round trip.
///
/// Every key is stored as `{prefix}:{tag}:{key}` (or `{prefix}:{tag}` for an empty
/// key), where the braces are literal: the tag is the Redis Cluster hash tag, so all
/// keys of a request share one slot, as an atomic script requires.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::store::{Check, Op, Request, Rule};
/// use tollgate::Quota;
///
/// let per_second = Rule::from(Gcra::new(Quota::per_second(10)?));
/// let per_minute = Rule::from(Gcra::new(Quota::per_minute(100)?));
/// let checks = [Check::new("s", &per_second), Check::new("m", &per_minute)];
/// let request = Request::new("user-42", &checks, Op::Acquire(1));
/// assert_eq!(request.checks.len(), 2);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The hash tag shared by every key of the request.
    pub tag: &'a str,
    /// The rules, each on its key.
    pub checks: &'a [Check<'a>],
    /// What is asked.
    pub op: Op,
    /// An explicit time, since the Unix epoch, instead of the store's clock: for tests
    /// under virtual time. Redis truncates it to whole microseconds.
    pub at: Option<Duration>,
}

impl<'a> Request<'a> {
    /// `op` on every check under `tag`, at the store's time.
    pub fn new(tag: &'a str, checks: &'a [Check<'a>], op: Op) -> Request<'a> {
        Request {
            tag,
            checks,
            op,
            at: None,
        }
    }

    /// The same request at `since_epoch` instead of the store's clock.
    pub fn at(self, since_epoch: Duration) -> Request<'a> {
        Request {
            at: Some(since_epoch),
            ..self
        }
    }

    /// The answer known without asking the store: a request with no rule is an error,
    /// one for more than some rule can ever grant is denied for good.
    pub(crate) fn precheck(&self) -> Result<Option<Reply>, StoreError> {
        if self.checks.is_empty() {
            return Err(ConfigError::Zero { parameter: "rules" }.into());
        }
        let capacity = self
            .checks
            .iter()
            .map(|c| c.rule.capacity())
            .min()
            .unwrap_or(0);
        let n = self.op.permits();
        if n <= capacity || matches!(self.op, Op::Refund(_)) {
            return Ok(None);
        }
        let never = Denied::from(InsufficientCapacity::new(n, capacity));
        Ok(Some(match self.op {
            Op::Reserve { .. } => Reply::Reservation(Err(never)),
            _ => Reply::Decision(Err(never)),
        }))
    }

    /// Combines the checks' verdicts as [`AllOf`](crate::algorithm::AllOf) does: the
    /// tightest admission, or the denial that waits longest.
    pub(crate) fn combine(
        &self,
        verdicts: impl IntoIterator<Item = RuleOutcome>,
    ) -> Result<Reply, StoreError> {
        let mut verdicts = verdicts.into_iter();
        let first = verdicts
            .next()
            .ok_or_else(|| StoreError::Protocol("no verdict for the request".into()))?;
        let mut combined = match first {
            RuleOutcome::Decision(d) => RuleOutcome::Decision(of_rule(d, 0)),
            other => other,
        };
        for (i, verdict) in verdicts.enumerate() {
            combined = match (combined, verdict) {
                // Each decision says which check it is, so that the combined one names
                // the deciding rule (quotas alone may tie).
                (RuleOutcome::Decision(a), RuleOutcome::Decision(b)) => {
                    RuleOutcome::Decision(combine_decisions(a, of_rule(b, i + 1)))
                }
                (RuleOutcome::Refunded, RuleOutcome::Refunded) => RuleOutcome::Refunded,
                (a, b) => {
                    return Err(StoreError::Protocol(format!(
                        "mixed verdicts {a:?} and {b:?} in one request"
                    )));
                }
            };
        }
        self.answer(combined)
    }

    /// The answer to this request from its one combined verdict.
    #[inline(always)]
    pub(crate) fn answer(&self, verdict: RuleOutcome) -> Result<Reply, StoreError> {
        match (self.op, verdict) {
            (Op::Acquire(_) | Op::Peek(_), RuleOutcome::Decision(_))
            | (Op::Reserve { .. }, RuleOutcome::Reservation(_))
            | (Op::Refund(_), RuleOutcome::Refunded) => Ok(verdict),
            (Op::Reserve { n, .. }, RuleOutcome::Decision(d)) => Ok(Reply::Reservation(
                d.map(|_| Reservation::new(n, Duration::ZERO)),
            )),
            (op, verdict) => Err(StoreError::Protocol(format!(
                "verdict {verdict:?} for {op:?}"
            ))),
        }
    }
}

fn of_rule(decision: Decision, index: usize) -> Decision {
    match decision {
        Ok(admitted) => Ok(admitted.of_rule(index)),
        Err(denied) => Err(denied.of_rule(index)),
    }
}

fn combine_decisions(a: Decision, b: Decision) -> Decision {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(tighter(a, b)),
        (Err(a), Ok(_)) => Err(a),
        (Ok(_), Err(b)) => Err(b),
        (Err(a), Err(b)) => Err(later_denial(Some(a), b)),
    }
}

/// A store's answer to a [`Request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// The answer to [`Op::Acquire`] and [`Op::Peek`].
    Decision(Decision),
    /// The answer to [`Op::Reserve`].
    Reservation(Result<Reservation, Denied>),
    /// The answer to [`Op::Refund`].
    Refunded,
}

impl Reply {
    /// Whether the request was admitted (or reserved, or refunded).
    pub fn is_admitted(&self) -> bool {
        match self {
            Reply::Decision(d) => d.is_ok(),
            Reply::Reservation(r) => r.is_ok(),
            Reply::Refunded => true,
        }
    }

    /// The decision, for [`Op::Acquire`] and [`Op::Peek`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Protocol`] for another outcome.
    pub fn into_decision(self) -> Result<Decision, StoreError> {
        match self {
            Reply::Decision(d) => Ok(d),
            other => Err(StoreError::Protocol(format!("{other:?} is not a decision"))),
        }
    }

    /// The reservation, for [`Op::Reserve`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Protocol`] for another outcome.
    pub fn into_reservation(self) -> Result<Result<Reservation, Denied>, StoreError> {
        match self {
            Reply::Reservation(r) => Ok(r),
            other => Err(StoreError::Protocol(format!(
                "{other:?} is not a reservation"
            ))),
        }
    }
}
