//! [`ManualClock`]: the clock tests move by hand.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::time::Duration;

use super::{Alarm, Clock, Nanos};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, Weak};
use crate::units::duration_to_nanos;

/// A clock that moves only when told to; clones share one time.
///
/// Moving it rings every alarm that has come due, on the thread that moved it, before
/// [`advance`](ManualClock::advance) or [`set`](ManualClock::set) returns. A test that
/// advances the clock therefore finds every waiter that became due already granted:
/// waiting is as deterministic as deciding.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::time::{Clock, ManualClock, Nanos};
///
/// let clock = ManualClock::new();
/// let shared = clock.clone();
/// shared.advance(Duration::from_secs(1));
/// assert_eq!(clock.now(), Nanos::new(1_000_000_000));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Default)]
struct ManualInner {
    now: AtomicU64,
    alarms: Mutex<Alarms>,
}

/// Pending alarms, earliest first; `seq` keeps equal deadlines in the order set.
#[derive(Default)]
struct Alarms {
    heap: BinaryHeap<Reverse<(Nanos, u64)>>,
    targets: std::collections::HashMap<u64, Weak<dyn Alarm>>,
    seq: u64,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .field("pending_alarms", &self.pending_alarms())
            .finish()
    }
}

impl ManualClock {
    /// A manual clock at [`Nanos::ZERO`].
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// A manual clock starting at `start`.
    pub fn starting_at(start: Nanos) -> ManualClock {
        let clock = ManualClock::new();
        clock.inner.now.store(start.as_u64(), Ordering::SeqCst);
        clock
    }

    /// Moves time forward by `d` (saturating at [`Nanos::MAX`]), then rings the alarms
    /// that came due.
    pub fn advance(&self, d: Duration) {
        let d = duration_to_nanos(d);
        let _ = self
            .inner
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(d))
            });
        self.ring_due();
    }

    /// Sets the time to `t`, if `t` is not earlier than the current time, then rings
    /// the alarms that came due.
    ///
    /// Returns `false`, and leaves the clock alone, when `t` is in the past: a clock
    /// never goes backwards.
    pub fn set(&self, t: Nanos) -> bool {
        let moved = self.inner.now.fetch_max(t.as_u64(), Ordering::SeqCst) <= t.as_u64();
        self.ring_due();
        moved
    }

    /// How many alarms are set and not yet rung: what waiting limiters have asked this
    /// clock for. Idle limiters set none.
    pub fn pending_alarms(&self) -> usize {
        self.inner.alarms.lock().heap.len()
    }

    /// The earliest pending alarm, if any.
    pub fn next_alarm(&self) -> Option<Nanos> {
        self.inner
            .alarms
            .lock()
            .heap
            .peek()
            .map(|Reverse((at, _))| *at)
    }

    /// Rings due alarms one at a time, without holding the lock while ringing, since a
    /// ringing alarm may set another.
    fn ring_due(&self) {
        loop {
            let now = self.now();
            let due = {
                let mut alarms = self.inner.alarms.lock();
                match alarms.heap.peek() {
                    Some(Reverse((at, _))) if *at <= now => {
                        let Reverse((_, seq)) = alarms.heap.pop().expect("peeked");
                        alarms.targets.remove(&seq)
                    }
                    _ => return,
                }
            };
            if let Some(alarm) = due.and_then(|weak| weak.upgrade()) {
                alarm.ring();
            }
        }
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos::new(self.inner.now.load(Ordering::SeqCst))
    }

    /// A manual clock reads Unix time: [`Nanos::ZERO`] is the epoch.
    fn unix_origin(&self) -> Duration {
        Duration::ZERO
    }

    /// Rings at once if `deadline` has passed; otherwise when the clock is moved past
    /// it.
    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        {
            let mut alarms = self.inner.alarms.lock();
            let seq = alarms.seq;
            alarms.seq += 1;
            alarms.heap.push(Reverse((deadline, seq)));
            alarms.targets.insert(seq, Arc::downgrade(&alarm));
        }
        // The clock may have passed the deadline before the alarm was stored.
        self.ring_due();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_nanos(7));
        assert_eq!(b.now(), Nanos::new(7));
    }

    #[test]
    fn manual_clock_never_goes_backwards() {
        let c = ManualClock::starting_at(Nanos::new(100));
        assert!(!c.set(Nanos::new(50)));
        assert_eq!(c.now(), Nanos::new(100));
        assert!(c.set(Nanos::new(150)));
        assert_eq!(c.now(), Nanos::new(150));
    }

    #[test]
    fn manual_clock_saturates() {
        let c = ManualClock::starting_at(Nanos::new(u64::MAX - 1));
        c.advance(Duration::from_secs(10));
        assert_eq!(c.now(), Nanos::MAX);
    }
}
