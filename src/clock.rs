//! Time: the [`Clock`] trait, the default [`MonotonicClock`] and the [`ManualClock`]
//! that tests advance by hand.
//!
//! Every limiter reads time through a clock, and algorithms receive it as a [`Nanos`]
//! value, so a test can drive any limiter through virtual time without sleeping.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::sync::unmodeled::OnceLock;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, Weak};
use crate::units::duration_to_nanos;
use crate::wait::Scheduler;

/// A point on a clock's timeline: nanoseconds since the clock's origin.
///
/// `u64` nanoseconds cover more than 580 years; arithmetic on `Nanos` saturates
/// instead of overflowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(u64);

impl Nanos {
    /// The clock's origin.
    pub const ZERO: Nanos = Nanos(0);
    /// The last representable instant.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// A point `nanos` nanoseconds after the origin.
    #[inline]
    pub const fn new(nanos: u64) -> Nanos {
        Nanos(nanos)
    }

    /// A point `d` after the origin, saturating at [`Nanos::MAX`].
    pub fn from_duration(d: Duration) -> Nanos {
        Nanos(duration_to_nanos(d))
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The time since the origin as a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Duration) -> Nanos {
        Nanos(self.0.saturating_add(duration_to_nanos(rhs)))
    }
}

impl Sub<Duration> for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(duration_to_nanos(rhs)))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_duration())
    }
}

/// A source of time for limiters.
///
/// Clones of a clock share one timeline. Time never goes backwards.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now().saturating_since(t0), Duration::from_millis(5));
/// ```
pub trait Clock: Clone + Send + Sync + fmt::Debug + 'static {
    /// The current time on this clock's timeline.
    fn now(&self) -> Nanos;

    /// The Unix time at which this clock read [`Nanos::ZERO`], for limits aligned to
    /// wall-clock windows (envoy aligns windows to the Unix epoch).
    fn unix_origin(&self) -> Duration;

    /// Rings `alarm` once this clock reads `deadline` or later. Waiting limiters use
    /// it to wake their first waiter; nothing else ever sets one. The clock should
    /// hold the alarm weakly: one whose owner is gone need not ring.
    ///
    /// The default hands the alarm to the process's [`Scheduler`] thread, which
    /// counts the remaining time in real time: right for any clock that moves at the
    /// speed of real time. A clock that moves otherwise (like [`ManualClock`]) must ring
    /// its alarms itself. Callers hold no lock when they set an alarm, so an alarm
    /// already due may ring at once, on the calling thread.
    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        Scheduler::global().set_alarm_after(deadline.saturating_since(self.now()), alarm);
    }
}

/// What a [`Clock`] calls back at a deadline.
pub trait Alarm: Send + Sync + 'static {
    /// The deadline has passed. Called on the scheduler's thread, or on the thread that
    /// moved a manual clock; it must not block.
    fn ring(&self);
}

/// The default clock: monotonic, measured from the moment it was created.
///
/// It reads the CPU's invariant time-stamp counter through [`quanta`], calibrated
/// against `CLOCK_MONOTONIC`, which costs about half of [`std::time::Instant::now`];
/// where the CPU has no invariant counter, quanta reads the OS's monotonic clock
/// instead. Neither follows changes to the wall clock.
///
/// Readings taken on different threads may come out a few nanoseconds out of order,
/// as any two racing readings can; every limiter decides on late readings as if they
/// were taken at the latest time it has seen.
///
/// # Examples
///
/// ```
/// use tollgate::clock::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Debug)]
pub struct MonotonicClock {
    source: quanta::Clock,
    origin: u64,
    unix_origin: Duration,
    scheduler: Option<Scheduler>,
}

impl MonotonicClock {
    /// A clock whose origin is now; its alarms go to the process's global
    /// [`Scheduler`].
    pub fn new() -> MonotonicClock {
        // quanta probes the CPU (a CPUID, ~30 µs under some hypervisors) on every
        // `Clock::new`; probe once and clone, so creating a limiter stays cheap.
        static SOURCE: OnceLock<quanta::Clock> = OnceLock::new();
        let source = SOURCE.get_or_init(quanta::Clock::new).clone();
        MonotonicClock {
            origin: source.raw(),
            source,
            // A wall clock before 1970 is a broken host; treat it as the epoch.
            unix_origin: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            scheduler: None,
        }
    }

    /// The same clock, with its alarms on `scheduler` instead of the global one:
    /// for tests and for isolating a group of limiters on their own thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::clock::MonotonicClock;
    /// use tollgate::wait::Scheduler;
    ///
    /// let clock = MonotonicClock::new().with_scheduler(Scheduler::new("my-limiters"));
    /// # drop(clock);
    /// ```
    pub fn with_scheduler(self, scheduler: Scheduler) -> MonotonicClock {
        MonotonicClock {
            scheduler: Some(scheduler),
            ..self
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos(self.source.delta_as_nanos(self.origin, self.source.raw()))
    }

    fn unix_origin(&self) -> Duration {
        self.unix_origin
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        let delay = deadline.saturating_since(self.now());
        match &self.scheduler {
            Some(scheduler) => scheduler.set_alarm_after(delay, alarm),
            None => Scheduler::global().set_alarm_after(delay, alarm),
        }
    }
}

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
/// use tollgate::clock::{Clock, ManualClock, Nanos};
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
        clock.inner.now.store(start.0, Ordering::SeqCst);
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
        let moved = self.inner.now.fetch_max(t.0, Ordering::SeqCst) <= t.0;
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
        Nanos(self.inner.now.load(Ordering::SeqCst))
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

    #[test]
    fn nanos_arithmetic_saturates() {
        assert_eq!(Nanos::MAX + Duration::from_secs(1), Nanos::MAX);
        assert_eq!(Nanos::ZERO - Duration::from_secs(1), Nanos::ZERO);
        assert_eq!(
            Nanos::from_duration(Duration::MAX),
            Nanos::MAX,
            "durations past 584 years saturate"
        );
    }

    #[test]
    fn monotonic_clock_is_monotonic() {
        let c = MonotonicClock::new();
        let mut last = c.now();
        for _ in 0..1000 {
            let t = c.now();
            assert!(t >= last);
            last = t;
        }
    }
}
