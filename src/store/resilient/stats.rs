//! What a [`Resilient`](super::Resilient) store counts: [`ResilientStats`].

use super::breaker::BreakerState;
use crate::sync::{AtomicU64, Ordering};

/// What a [`Resilient`](super::Resilient) store has done since it was built.
///
/// # Examples
///
/// ```
/// use tollgate::store::{BreakerState, FailurePolicy, MemoryStore, Resilient};
/// use tollgate::KeyedConfig;
///
/// let store = Resilient::new(MemoryStore::new(KeyedConfig::new(100), "api")?, FailurePolicy::Closed)?;
/// let stats = store.stats();
/// assert_eq!((stats.state, stats.calls, stats.opened), (BreakerState::Closed, 0, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ResilientStats {
    /// The breaker's state now.
    pub state: BreakerState,
    /// Requests sent to the inner store.
    pub calls: u64,
    /// Calls that failed, timeouts included (permanent errors are not failures: the
    /// store is not at fault).
    pub failures: u64,
    /// Calls abandoned at the deadline.
    pub timeouts: u64,
    /// Requests the failure policy decided instead of the inner store.
    pub fallbacks: u64,
    /// Requests not sent because the breaker was open (or half open, with its probe
    /// out).
    pub short_circuited: u64,
    /// Times the breaker opened: failures reaching the threshold, or a failed probe.
    /// A breaker that opens and closes again and again shows here.
    pub opened: u64,
}

/// The counters behind [`ResilientStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) calls: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) fallbacks: AtomicU64,
    pub(crate) short_circuited: AtomicU64,
    pub(crate) opened: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`: counts are read together only as a report, so no
    /// order between them is needed.
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, state: BreakerState) -> ResilientStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ResilientStats {
            state,
            calls: read(&self.calls),
            failures: read(&self.failures),
            timeouts: read(&self.timeouts),
            fallbacks: read(&self.fallbacks),
            short_circuited: read(&self.short_circuited),
            opened: read(&self.opened),
        }
    }
}
