//! [`UsageCounter`]: how many requests are in flight, taken and given back; and
//! [`LocalUsage`], the in-process one.

use std::fmt;

use crate::sync::{AtomicU64, Ordering};

/// Counts the requests in flight against a capacity, for the
/// [`FleetShedder`](super::FleetShedder).
///
/// Taking is one atomic step: a counter never admits on a count it read before
/// another caller changed it. A counter shared across processes implements the same
/// trait; its [`Lease`](UsageCounter::Lease) identifies what to give back (for
/// example a slot with a TTL that expires if its holder dies).
///
/// # Examples
///
/// ```
/// use tollgate::shed::{LocalUsage, UsageCounter};
///
/// let usage = LocalUsage::new();
/// let lease = usage.try_take(1).expect("below the limit");
/// assert!(usage.try_take(1).is_none());
/// usage.give_back(lease);
/// assert_eq!(usage.in_use(), 0);
/// ```
pub trait UsageCounter: Send + Sync + 'static {
    /// What a taken slot carries until it is given back.
    type Lease: Send + 'static;

    /// Takes one slot if fewer than `limit` are in use.
    fn try_take(&self, limit: u64) -> Option<Self::Lease>;

    /// Takes one slot whatever the count: for requests admitted in shadow mode or
    /// with shedding off, which still load the service.
    fn take(&self) -> Self::Lease;

    /// Gives back a slot taken by [`try_take`](UsageCounter::try_take) or
    /// [`take`](UsageCounter::take).
    fn give_back(&self, lease: Self::Lease);

    /// How many slots are in use now.
    fn in_use(&self) -> u64;
}

/// The in-process [`UsageCounter`]: one atomic counter, taken by compare-and-swap.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{LocalUsage, UsageCounter};
///
/// let usage = LocalUsage::new();
/// usage.take();
/// usage.take();
/// assert_eq!(usage.in_use(), 2);
/// assert!(usage.try_take(2).is_none());
/// ```
#[derive(Default)]
pub struct LocalUsage {
    in_use: AtomicU64,
}

impl LocalUsage {
    /// A counter at zero.
    pub fn new() -> LocalUsage {
        LocalUsage::default()
    }
}

impl UsageCounter for LocalUsage {
    type Lease = ();

    fn try_take(&self, limit: u64) -> Option<()> {
        // `n < limit`, so `n + 1` cannot overflow.
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| ())
    }

    fn take(&self) {
        // Saturates rather than wrapping; 2^64 requests in flight cannot happen.
        let _ = self
            .in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(1))
            });
    }

    fn give_back(&self, (): ()) {
        let _ = self
            .in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
    }

    fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Acquire)
    }
}

impl fmt::Debug for LocalUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalUsage")
            .field("in_use", &self.in_use())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Arc;

    #[test]
    fn taking_stops_at_the_limit_and_saturates_at_the_ends() {
        let usage = LocalUsage::new();
        assert!(usage.try_take(0).is_none());
        assert!(usage.try_take(2).is_some());
        assert!(usage.try_take(2).is_some());
        assert!(usage.try_take(2).is_none());
        usage.give_back(());
        usage.give_back(());
        usage.give_back(()); // one too many: stays at zero
        assert_eq!(usage.in_use(), 0);
        assert!(usage.try_take(u64::MAX).is_some());
    }

    #[test]
    fn threads_never_take_past_the_limit() {
        let usage = Arc::new(LocalUsage::new());
        let taken: u64 = (0..4)
            .map(|_| {
                let usage = Arc::clone(&usage);
                std::thread::spawn(move || {
                    (0..1000).filter(|_| usage.try_take(100).is_some()).count() as u64
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(taken, 100);
        assert_eq!(usage.in_use(), 100);
    }
}
