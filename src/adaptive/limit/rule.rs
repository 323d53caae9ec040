//! [`LimitRule`]: an algorithm's next limit as a pure function of its limit.

use std::fmt;

use super::AimdRule;
use crate::adaptive::Sample;

/// The next limit as a pure function of the current limit and a sample: what an
/// algorithm whose whole state is its limit hands out through
/// [`LimitAlgorithm::limit_rule`](super::LimitAlgorithm::limit_rule), so that an
/// enforcing limiter can skip its lock for samples that change nothing.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::LimitRule;
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// // +1 per success, halved per drop, within [1, 100].
/// let rule = LimitRule::new(|limit, sample: &Sample| {
///     let next = if sample.dropped { limit / 2 } else { limit + 1 };
///     next.clamp(1, 100)
/// });
/// let dropped = Sample::new(Nanos::ZERO, Duration::ZERO, 1, true);
/// assert_eq!(rule.next(10, &dropped), 5);
/// ```
pub struct LimitRule(Next);

/// The function behind a rule: the crate's own AIMD inline (no call through a
/// pointer on every request's release), or any other.
enum Next {
    /// [`AimdLimit`](super::AimdLimit)'s.
    Aimd(AimdRule),
    /// One made with [`LimitRule::new`].
    Other(Box<OtherRule>),
}

/// A rule of the caller's own.
type OtherRule = dyn Fn(u64, &Sample) -> u64 + Send + Sync;

impl LimitRule {
    /// A rule answering `next(limit, sample)`.
    pub fn new(next: impl Fn(u64, &Sample) -> u64 + Send + Sync + 'static) -> LimitRule {
        LimitRule(Next::Other(Box::new(next)))
    }

    /// [`AimdLimit`](super::AimdLimit)'s rule.
    pub(crate) fn aimd(rule: AimdRule) -> LimitRule {
        LimitRule(Next::Aimd(rule))
    }

    /// The crate's AIMD rule, if this is it: a rule that cannot panic, which a
    /// limiter may then apply outside any guard.
    #[inline]
    pub(crate) fn as_aimd(&self) -> Option<&AimdRule> {
        match &self.0 {
            Next::Aimd(rule) => Some(rule),
            Next::Other(_) => None,
        }
    }

    /// The limit after `sample`, from `limit`.
    #[inline]
    pub fn next(&self, limit: u64, sample: &Sample) -> u64 {
        match &self.0 {
            Next::Aimd(rule) => rule.next(limit, sample),
            Next::Other(next) => next(limit, sample),
        }
    }
}

impl fmt::Debug for LimitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitRule").finish_non_exhaustive()
    }
}
