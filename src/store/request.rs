//! What a store is asked, and what it answers.

use std::time::Duration;

use super::StoreError;
use super::rule::{RuleOutcome, Step};
use crate::algorithm::{Rule, later_denial, tighter};
use crate::decision::{Decision, Denied, InsufficientCapacity, Reservation};
use crate::error::ConfigError;

/// What a [`Request`] asks of its rules.
///
/// Each op asks `n` permits of every check, unless a check carries its own count
/// ([`Check::with_permits`]):
///
/// - [`Acquire`](Op::Acquire): each check takes its own count, all or none; a count
///   of `0` checks that rule without taking from it (the answer tells its remaining
///   and reset, and is denied only by a rule over its limit, such as a
///   [counting fixed window](crate::algorithm::FixedWindow::counting_denied)).
/// - [`Peek`](Op::Peek): each check is asked about its own count; nothing is taken.
/// - [`Refund`](Op::Refund): each check gives back its own count, so that a request
///   acquired with counts per check is given back with the same checks.
/// - [`Reserve`](Op::Reserve): a reservation is of `n` permits on every rule; a check
///   whose own count differs from `n` makes the request a [`StoreError::Config`].
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

    /// What each of `checks` checks is asked, unless a check carries its own count:
    /// with several rules, a reservation is an immediate acquire.
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

/// One rule applied to one key of a request, for the request's permits or for a
/// count of its own.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::store::{Check, Rule};
///
/// let minute = Rule::from(FixedWindow::new(100, Duration::from_secs(60))?);
/// let check = Check::new("minute", &minute);
/// assert_eq!(check.permits(), None);
/// assert_eq!(check.with_permits(0).permits(), Some(0));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    /// The key under the request's hash tag: `""` when the tag alone names it.
    pub key: &'a str,
    /// The rule.
    pub rule: &'a Rule,
    /// The check's own count, instead of the op's `n`.
    pub(crate) permits: Option<u64>,
}

impl<'a> Check<'a> {
    /// `rule` applied to `key`, for the permits of the request's [`Op`].
    pub fn new(key: &'a str, rule: &'a Rule) -> Check<'a> {
        Check {
            key,
            rule,
            permits: None,
        }
    }

    /// The same check for `n` permits of its own, instead of the op's: what `n` means
    /// for each op is on [`Op`]. Envoy's per-descriptor `hits_addend` is such a count
    /// (`0` checks without taking).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::FixedWindow;
    /// use tollgate::store::{Check, MemoryStore, Op, Request, Rule};
    /// use tollgate::KeyedConfig;
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100), "api")?;
    /// let rule = Rule::from(FixedWindow::new(10, Duration::from_secs(60))?);
    /// // Takes 3 from "a", and only looks at "b".
    /// let checks = [Check::new("a", &rule).with_permits(3), Check::new("b", &rule).with_permits(0)];
    /// let answers = store.execute_each_now(&Request::new("user-1", &checks, Op::Acquire(1)))?;
    /// let each = answers.checks().expect("the memory store answers per check");
    /// assert_eq!(each[0].into_decision()?.unwrap().remaining(), 7);
    /// assert_eq!(each[1].into_decision()?.unwrap().remaining(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_permits(self, n: u64) -> Check<'a> {
        Check {
            permits: Some(n),
            ..self
        }
    }

    /// The check's own count, if it has one; `None` means the op's `n`.
    pub fn permits(&self) -> Option<u64> {
        self.permits
    }

    /// `step` with this check's own count, if it has one.
    #[inline(always)]
    pub(crate) fn step(&self, step: Step) -> Step {
        match self.permits {
            None => step,
            Some(n) => step.with_permits(n),
        }
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

    /// The permits `check` (one of this request's) is asked.
    #[inline]
    pub(crate) fn permits_of(&self, check: &Check<'_>) -> u64 {
        check.permits.unwrap_or(self.op.permits())
    }

    /// The most permits any check is asked.
    pub(crate) fn most_permits(&self) -> u64 {
        self.checks
            .iter()
            .map(|c| self.permits_of(c))
            .max()
            .unwrap_or(0)
    }

    /// The answer known without asking the store: a request with no rule is an error,
    /// as is a reservation with a check asking other than its `n`; one that asks a
    /// rule more than it can ever grant is denied for good (for the count asked of
    /// the rule of least capacity among those).
    pub(crate) fn precheck(&self) -> Result<Option<Reply>, StoreError> {
        if self.checks.is_empty() {
            return Err(ConfigError::Zero { parameter: "rules" }.into());
        }
        let n = self.op.permits();
        // The capacity of the check of least capacity that can never grant what it
        // asks, and what it asks; `u64::MAX` while none is found (a rule of that
        // capacity grants any count).
        let (mut capacity, mut asked) = (u64::MAX, 0);
        for check in self.checks {
            let own = match check.permits {
                None => n,
                Some(k) => {
                    if k != n && matches!(self.op, Op::Reserve { .. }) {
                        return Err(ConfigError::OutOfRange {
                            parameter: "permits",
                            expected: "the reservation's n: a reservation is of the same \
                                       permits on every rule",
                        }
                        .into());
                    }
                    k
                }
            };
            let of_rule = check.rule.capacity();
            if own > of_rule && of_rule < capacity {
                (capacity, asked) = (of_rule, own);
            }
        }
        if capacity == u64::MAX || matches!(self.op, Op::Refund(_)) {
            return Ok(None);
        }
        let never = Denied::from(InsufficientCapacity::new(asked, capacity));
        Ok(Some(match self.op {
            Op::Reserve { .. } => Reply::Reservation(Err(never)),
            _ => Reply::Decision(Err(never)),
        }))
    }

    /// The same checks, peeked at: how a store tells each check's answer to a request
    /// the [`precheck`](Self::precheck) denied, writing nothing.
    pub(crate) fn as_peek(&self) -> Request<'a> {
        Request {
            op: Op::Peek(self.op.permits()),
            ..*self
        }
    }

    /// The answers to this request from its checks' `verdicts`, in order: the
    /// combined reply as [`combine`](Self::combine) gives it, and each check's own.
    pub(crate) fn answers(&self, mut verdicts: Vec<RuleOutcome>) -> Result<Answers, StoreError> {
        let reply = self.combine(verdicts.iter().copied())?;
        self.own_answers(&mut verdicts);
        Ok(Answers::with_checks(reply, verdicts))
    }

    /// The answers to this request, which the precheck answered `known`, from the
    /// verdicts of its [`as_peek`](Self::as_peek) twin.
    pub(crate) fn answers_after_precheck(
        &self,
        known: Reply,
        mut verdicts: Vec<RuleOutcome>,
    ) -> Result<Answers, StoreError> {
        if verdicts.len() != self.checks.len() {
            return Err(StoreError::Protocol(format!(
                "{} verdicts for {} checks",
                verdicts.len(),
                self.checks.len()
            )));
        }
        self.own_answers(&mut verdicts);
        Ok(Answers::with_checks(known, verdicts))
    }

    /// Each check's verdict as its answer to this request's op: an immediate
    /// acquire of a reservation of several checks is that check's reservation.
    fn own_answers(&self, verdicts: &mut [RuleOutcome]) {
        if let Op::Reserve { .. } = self.op {
            for (verdict, check) in verdicts.iter_mut().zip(self.checks) {
                if let RuleOutcome::Decision(d) = *verdict {
                    let n = self.permits_of(check);
                    *verdict = Reply::Reservation(d.map(|_| Reservation::new(n, Duration::ZERO)));
                }
            }
        }
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

/// A store's answers to a [`Request`], from [`Store::execute_each`](super::Store::execute_each):
/// the combined [`Reply`], exactly what [`execute`](super::Store::execute) returns, and,
/// when the store can tell, one answer per check, in the order of the checks.
///
/// A check's answer is its own decision at the request's instant, as the check alone
/// would have been answered on the same state (an [`Op::Acquire`] or [`Op::Peek`]: a
/// [`Reply::Decision`]; an [`Op::Reserve`]: a [`Reply::Reservation`], of several
/// checks an immediate one; an [`Op::Refund`]: [`Reply::Refunded`]):
///
/// - **An admitting check in a denied request** reports its numbers *as if its
///   permits were taken* (its `remaining` after them), though nothing was taken: the
///   answer it would have had alone. The memory store and the Redis script both
///   decide every check before writing, so they report the same numbers.
/// - **A request the precheck denies** (a check asking more than its rule can ever
///   grant) is answered by the precheck as `execute` answers it; with several checks,
///   each check's answer is then read by a peek (one round trip, which writes
///   nothing): the checks over their capacity are `Denied::Insufficient`.
/// - **A request a full [`MemoryStore`](super::MemoryStore) denies** for want of room
///   for a new key gives that denial to every check.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::store::{Check, MemoryStore, Op, Reply, Request, Rule, Store};
/// use tollgate::KeyedConfig;
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(100), "api")?;
/// let (small, large) = (
///     Rule::from(FixedWindow::new(1, Duration::from_secs(60))?),
///     Rule::from(FixedWindow::new(10, Duration::from_secs(60))?),
/// );
/// let checks = [Check::new("small", &small), Check::new("large", &large)];
/// let request = Request::new("user-1", &checks, Op::Acquire(2));
/// let answers = store.execute_each(&request).await?;
/// assert!(!answers.reply().is_admitted());
/// let each = answers.checks().expect("the memory store answers per check");
/// assert!(each[0].into_decision()?.unwrap_err().is_never());
/// // Admitted on its own, as if its 2 were taken: nothing was.
/// assert_eq!(each[1].into_decision()?.unwrap().remaining(), 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answers {
    reply: Reply,
    checks: Option<Vec<Reply>>,
}

impl Answers {
    /// The combined reply alone: a store that cannot tell each check's answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::{Answers, Reply};
    ///
    /// let answers = Answers::new(Reply::Refunded);
    /// assert_eq!(answers.reply(), Reply::Refunded);
    /// assert_eq!(answers.checks(), None);
    /// ```
    pub fn new(reply: Reply) -> Answers {
        Answers {
            reply,
            checks: None,
        }
    }

    /// The combined reply and each check's answer, in the order of the request's
    /// checks.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::{Answers, Reply};
    ///
    /// let answers = Answers::with_checks(Reply::Refunded, vec![Reply::Refunded; 2]);
    /// assert_eq!(answers.checks().map(<[_]>::len), Some(2));
    /// ```
    pub fn with_checks(reply: Reply, checks: Vec<Reply>) -> Answers {
        Answers {
            reply,
            checks: Some(checks),
        }
    }

    /// The combined reply: what [`execute`](super::Store::execute) returns.
    pub fn reply(&self) -> Reply {
        self.reply
    }

    /// Each check's answer, in order, if the store told them.
    pub fn checks(&self) -> Option<&[Reply]> {
        self.checks.as_deref()
    }

    /// The combined reply, and each check's answer if the store told them.
    pub fn into_parts(self) -> (Reply, Option<Vec<Reply>>) {
        (self.reply, self.checks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::FixedWindow;

    fn window(limit: u64) -> Rule {
        Rule::from(FixedWindow::new(limit, Duration::from_secs(1)).unwrap())
    }

    fn never(reply: Option<Reply>) -> Option<(u64, u64)> {
        match reply? {
            Reply::Decision(Err(Denied::Insufficient(i)))
            | Reply::Reservation(Err(Denied::Insufficient(i))) => {
                Some((i.requested(), i.capacity()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_precheck_denies_for_the_count_each_check_asks() {
        let (small, large) = (window(2), window(10));
        let checks = [Check::new("s", &small), Check::new("l", &large)];
        let precheck = |checks: &[Check<'_>], op| Request::new("t", checks, op).precheck();
        assert_eq!(
            never(precheck(&checks, Op::Acquire(3)).unwrap()),
            Some((3, 2))
        );
        assert_eq!(never(precheck(&checks, Op::Acquire(2)).unwrap()), None);
        let own = [
            Check::new("s", &small).with_permits(0),
            Check::new("l", &large).with_permits(11),
        ];
        assert_eq!(
            never(precheck(&own, Op::Acquire(1)).unwrap()),
            Some((11, 10))
        );
        assert_eq!(never(precheck(&own, Op::Peek(1)).unwrap()), Some((11, 10)));
        assert_eq!(never(precheck(&own, Op::Refund(1)).unwrap()), None);
        let fits = [
            Check::new("s", &small).with_permits(2),
            Check::new("l", &large),
        ];
        assert_eq!(never(precheck(&fits, Op::Acquire(10)).unwrap()), None);
        // Both too small: the one of least capacity names the denial.
        let both = [
            Check::new("l", &large).with_permits(20),
            Check::new("s", &small).with_permits(3),
        ];
        assert_eq!(
            never(precheck(&both, Op::Acquire(1)).unwrap()),
            Some((3, 2))
        );
    }

    #[test]
    fn a_reservation_with_a_check_asking_another_count_is_an_error() {
        let rule = window(10);
        let reserve = Op::Reserve {
            n: 2,
            max_wait: Duration::ZERO,
        };
        let same = [Check::new("a", &rule).with_permits(2)];
        assert!(
            Request::new("t", &same, reserve)
                .precheck()
                .unwrap()
                .is_none()
        );
        let other = [
            Check::new("a", &rule),
            Check::new("b", &rule).with_permits(1),
        ];
        let error = Request::new("t", &other, reserve).precheck().unwrap_err();
        assert!(error.is_permanent());
        assert!(matches!(
            error,
            StoreError::Config(ConfigError::OutOfRange {
                parameter: "permits",
                ..
            })
        ));
    }

    #[test]
    fn each_answer_of_a_reservation_of_several_checks_is_a_reservation() {
        let rule = window(10);
        let checks = [Check::new("a", &rule), Check::new("b", &rule)];
        let reserve = Op::Reserve {
            n: 3,
            max_wait: Duration::from_secs(1),
        };
        let request = Request::new("t", &checks, reserve);
        let admitted = Ok(crate::decision::Admitted::new(10, 7, Duration::ZERO));
        let verdicts = vec![RuleOutcome::Decision(admitted); 2];
        let answers = request.answers(verdicts).unwrap();
        assert_eq!(
            answers.reply(),
            Reply::Reservation(Ok(Reservation::new(3, Duration::ZERO)))
        );
        assert_eq!(
            answers.into_parts().1.unwrap(),
            vec![Reply::Reservation(Ok(Reservation::new(3, Duration::ZERO))); 2]
        );
    }
}
