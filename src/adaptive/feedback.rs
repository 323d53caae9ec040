//! [`Feedback`]: a limit algorithm behind its lock, fed with how requests ended. The
//! part every adaptive façade shares; each applies the limit to what it enforces.

use crate::observe::Outcome;
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::time::Nanos;

use super::limit::LimitRule;
use super::{LimitAlgorithm, Sample};

/// A [`LimitAlgorithm`] behind a lock, turning outcomes into samples.
///
/// The limit it hands to `apply` is at least 1: a limiter admitting nothing would
/// never hear of a request again. `apply` runs under the lock, so that limits are
/// applied in the order they were computed.
///
/// For an algorithm with a [`LimitRule`] (its whole state is its limit), a sample
/// the rule says leaves the limit as it is takes no lock: one load of the limit. It
/// changes nothing in the algorithm, so skipping it is the same as feeding it at
/// that load, whatever the lock holders do meanwhile. A sample that changes the
/// limit goes through the lock, as any other algorithm's.
pub(super) struct Feedback<L> {
    algorithm: Mutex<L>,
    /// The algorithm's limit as of its last sample or tick, written under the lock:
    /// what the rule is applied to without it.
    current: AtomicU64,
    rule: Option<LimitRule>,
    uses_time: bool,
    has_timers: bool,
}

impl<L: LimitAlgorithm> Feedback<L> {
    pub(super) fn new(algorithm: L) -> Feedback<L> {
        Feedback {
            current: AtomicU64::new(algorithm.limit()),
            rule: algorithm.limit_rule(),
            uses_time: algorithm.uses_time(),
            has_timers: algorithm.has_timers(),
            algorithm: Mutex::new(algorithm),
        }
    }

    /// The algorithm's limit now, at least 1.
    pub(super) fn limit(&self) -> u64 {
        self.algorithm.lock().limit().max(1)
    }

    /// Whether samples need their `start` and `rtt` ([`LimitAlgorithm::uses_time`]).
    pub(super) fn uses_time(&self) -> bool {
        self.uses_time
    }

    /// Whether an ignored request needs the time: it lets the algorithm's timers
    /// run ([`LimitAlgorithm::has_timers`]).
    pub(super) fn has_timers(&self) -> bool {
        self.has_timers
    }

    /// A request that started at `start` with `inflight` in flight (itself included)
    /// ended at `now` as `outcome`: a success or a drop is a sample; anything else
    /// only lets the time pass for the algorithm's timers, if it has any. Answers
    /// what `apply` answers for the new limit, or the default (no change) when the
    /// limit stays as it was without the lock.
    #[inline]
    pub(super) fn record<R: Default>(
        &self,
        outcome: Outcome,
        start: Nanos,
        now: Nanos,
        inflight: u64,
        apply: impl FnOnce(u64) -> R,
    ) -> R {
        let rtt = now.saturating_since(start);
        let sample = match outcome {
            Outcome::Success => Sample::new(start, rtt, inflight, false),
            Outcome::Dropped => Sample::new(start, rtt, inflight, true),
            _ if self.has_timers => return self.tick(now, apply),
            _ => return R::default(),
        };
        self.sample(sample, apply)
    }

    /// Feeds `sample` to the algorithm and answers what `apply` answers for the new
    /// limit, or the default (no change) when the rule says it stays without the
    /// lock.
    #[inline]
    pub(super) fn sample<R: Default>(&self, sample: Sample, apply: impl FnOnce(u64) -> R) -> R {
        if let Some(rule) = &self.rule {
            let limit = self.current.load(Ordering::Acquire);
            if rule.next(limit, &sample) == limit {
                return R::default();
            }
        }
        let mut algorithm = self.algorithm.lock();
        let limit = algorithm.on_sample(sample);
        self.current.store(limit, Ordering::Release);
        apply(limit.max(1))
    }

    /// Whether a request that started at `start` with `inflight` in flight and ended
    /// at `now` as `outcome` leaves the limit as it is, told with one load and no
    /// lock: a request that is not a sample, for an algorithm without timers, or a
    /// sample that the crate's own AIMD rule says changes nothing. `false` when it
    /// cannot tell so cheaply; [`record`](Self::record) then decides. Nothing here
    /// can panic (a rule of the caller's own, which could, is left to `record`).
    #[inline]
    pub(super) fn leaves_unchanged(
        &self,
        outcome: Outcome,
        start: Nanos,
        now: Nanos,
        inflight: u64,
    ) -> bool {
        match outcome {
            Outcome::Success | Outcome::Dropped => {
                match self.rule.as_ref().and_then(LimitRule::as_aimd) {
                    Some(rule) => {
                        let limit = self.current.load(Ordering::Acquire);
                        let rtt_nanos = now.as_u64().saturating_sub(start.as_u64());
                        let dropped = outcome == Outcome::Dropped;
                        rule.next_after(limit, rtt_nanos, inflight, dropped) == limit
                    }
                    None => false,
                }
            }
            _ => !self.has_timers,
        }
    }

    /// Lets the algorithm see the time without a request ending
    /// ([`LimitAlgorithm::on_time`]); answers what `apply` answers for its limit.
    pub(super) fn tick<R>(&self, now: Nanos, apply: impl FnOnce(u64) -> R) -> R {
        let mut algorithm = self.algorithm.lock();
        let limit = algorithm.on_time(now);
        self.current.store(limit, Ordering::Release);
        apply(limit.max(1))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::adaptive::limit::AimdLimit;

    fn aimd(min: u64, initial: u64, max: u64, backoff: f64, timeout_ms: u64) -> AimdLimit {
        AimdLimit::builder()
            .min_limit(min)
            .initial_limit(initial)
            .max_limit(max)
            .backoff_ratio(backoff)
            .timeout(Duration::from_millis(timeout_ms))
            .build()
            .unwrap()
    }

    fn step() -> impl Strategy<Value = (u8, u64, u64)> {
        // outcome (success, drop, ignored), RTT in ms, in flight
        (0u8..3, 0u64..40, 0u64..60)
    }

    proptest! {
        /// AIMD through `Feedback`, its no-change samples skipped without the lock,
        /// answers after every sample the limit AIMD fed every sample under a lock
        /// answers; the lock is taken exactly when the limit changes, and the
        /// release's own check (`leaves_unchanged`) says so exactly then.
        #[test]
        fn aimd_without_the_lock_matches_aimd_under_it(
            min in 1u64..10,
            span in 0u64..40,
            start in 0u64..40,
            backoff in 0.5f64..1.0,
            timeout_ms in 1u64..30,
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            let max = min + span;
            let initial = min + start % (span + 1);
            let mut locked = aimd(min, initial, max, backoff, timeout_ms);
            let feedback = Feedback::new(aimd(min, initial, max, backoff, timeout_ms));
            prop_assert!(feedback.rule.is_some());
            for (outcome, rtt_ms, inflight) in steps {
                let outcome = [Outcome::Success, Outcome::Dropped, Outcome::Ignored][outcome as usize];
                let end = Nanos::ZERO + Duration::from_millis(rtt_ms);
                let before = locked.limit();
                let expected = match outcome {
                    Outcome::Ignored => before,
                    _ => locked.on_sample(Sample::new(
                        Nanos::ZERO,
                        Duration::from_millis(rtt_ms),
                        inflight,
                        outcome == Outcome::Dropped,
                    )),
                };
                let quick = feedback.leaves_unchanged(outcome, Nanos::ZERO, end, inflight);
                prop_assert_eq!(quick, expected == before, "the release's check without the lock");
                let applied = feedback.record(outcome, Nanos::ZERO, end, inflight, Some);
                prop_assert_eq!(feedback.limit(), expected.max(1));
                prop_assert_eq!(applied.is_some(), expected != before, "locked only on a change");
            }
        }
    }
}
