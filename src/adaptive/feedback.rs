//! [`Feedback`]: a limit algorithm behind its lock, fed with how requests ended. The
//! part every adaptive façade shares; each applies the limit to what it enforces.

use crate::observe::Outcome;
use crate::sync::Mutex;
use crate::time::Nanos;

use super::{LimitAlgorithm, Sample};

/// A [`LimitAlgorithm`] behind a lock, turning outcomes into samples.
///
/// The limit it hands to `apply` is at least 1: a limiter admitting nothing would
/// never hear of a request again. `apply` runs under the lock, so that limits are
/// applied in the order they were computed.
pub(super) struct Feedback<L> {
    algorithm: Mutex<L>,
}

impl<L: LimitAlgorithm> Feedback<L> {
    pub(super) fn new(algorithm: L) -> Feedback<L> {
        Feedback {
            algorithm: Mutex::new(algorithm),
        }
    }

    /// The algorithm's limit now, at least 1.
    pub(super) fn limit(&self) -> u64 {
        self.algorithm.lock().limit().max(1)
    }

    /// A request that started at `start` with `inflight` in flight (itself included)
    /// ended at `now` as `outcome`: a success or a drop is a sample; anything else
    /// only lets the time pass for the algorithm's timers. Answers what `apply`
    /// answers for the new limit.
    pub(super) fn record<R>(
        &self,
        outcome: Outcome,
        start: Nanos,
        now: Nanos,
        inflight: u64,
        apply: impl FnOnce(u64) -> R,
    ) -> R {
        let rtt = now.saturating_since(start);
        let mut algorithm = self.algorithm.lock();
        let limit = match outcome {
            Outcome::Success => algorithm.on_sample(Sample::new(start, rtt, inflight, false)),
            Outcome::Dropped => algorithm.on_sample(Sample::new(start, rtt, inflight, true)),
            _ => algorithm.on_time(now),
        };
        apply(limit.max(1))
    }

    /// Lets the algorithm see the time without a request ending
    /// ([`LimitAlgorithm::on_time`]); answers what `apply` answers for its limit.
    pub(super) fn tick<R>(&self, now: Nanos, apply: impl FnOnce(u64) -> R) -> R {
        let mut algorithm = self.algorithm.lock();
        let limit = algorithm.on_time(now);
        apply(limit.max(1))
    }
}
