//! [`MonotonicClock`]: the default clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Alarm, Clock, Nanos, Scheduler};
use crate::sync::Arc;
use crate::sync::unmodeled::OnceLock;

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
/// use tollgate::time::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Debug)]
pub struct MonotonicClock {
    source: quanta::Clock,
    /// Nanoseconds per raw tick of `source`, as a fixed-point number with
    /// [`SCALE_BITS`] fractional bits.
    scale: u64,
    origin: u64,
    unix_origin: Duration,
    scheduler: Option<Scheduler>,
}

impl MonotonicClock {
    /// A clock whose origin is now; its alarms go to the process's global
    /// [`Scheduler`].
    pub fn new() -> MonotonicClock {
        let (source, scale) = shared_source();
        MonotonicClock {
            origin: source.raw(),
            source,
            scale,
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
    /// use tollgate::time::MonotonicClock;
    /// use tollgate::time::Scheduler;
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

/// The process's one probed and calibrated time source, with its scale. quanta
/// probes the CPU (a CPUID, ~27 µs under some hypervisors) on every
/// `quanta::Clock::new`; probing once and cloning (a copy) keeps
/// `MonotonicClock::new` at a counter read and a wall clock read.
fn shared_source() -> (quanta::Clock, u64) {
    static SOURCE: OnceLock<(quanta::Clock, u64)> = OnceLock::new();
    SOURCE.get_or_init(probe).clone()
}

fn probe() -> (quanta::Clock, u64) {
    #[cfg(test)]
    tests::PROBES.fetch_add(1, crate::sync::unmodeled::Ordering::Relaxed);
    let source = quanta::Clock::new();
    let scale = scale_of(&source);
    (source, scale)
}

/// Fractional bits of the scale: room for a counter as slow as one tick in 16 ms,
/// and a reading off from quanta's by less than one part in 10¹¹ for any counter
/// slower than 10 GHz.
const SCALE_BITS: u32 = 40;

/// quanta's own scale, taken once as a constant: its `delta_as_nanos` looks up the
/// kind of source and shifts by a stored amount on every reading. 2⁴⁰ ticks in
/// nanoseconds is the scale with 40 fractional bits, far inside quanta's calibration
/// error. Where quanta reads the OS clock, whose ticks are nanoseconds, the scale is
/// exactly one.
fn scale_of(source: &quanta::Clock) -> u64 {
    source.delta_as_nanos(0, 1 << SCALE_BITS)
}

/// `ticks` in nanoseconds at `scale`, saturating at the end of the clock.
#[inline]
fn ticks_to_nanos(ticks: u64, scale: u64) -> u64 {
    let nanos = (u128::from(ticks) * u128::from(scale)) >> SCALE_BITS;
    u64::try_from(nanos).unwrap_or(u64::MAX)
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Before the origin is a reading from a core whose counter lags: zero.
        let ticks = self.source.raw().saturating_sub(self.origin);
        Nanos::new(ticks_to_nanos(ticks, self.scale))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::unmodeled::{AtomicU64, Ordering};

    /// How many times the CPU was probed for a time source.
    pub(super) static PROBES: AtomicU64 = AtomicU64::new(0);

    /// Regression: every `MonotonicClock::new` used to build its own quanta clock,
    /// which probes the CPU with CPUID (26 µs each under this VM), so building 100,000
    /// limiters took seconds. The source is probed once per process.
    #[test]
    fn clocks_made_by_new_share_one_probed_source() {
        let clocks: Vec<MonotonicClock> = (0..1_000).map(|_| MonotonicClock::new()).collect();
        assert_eq!(PROBES.load(Ordering::Relaxed), 1);
        let first = format!("{:?}", clocks[0].source);
        assert!(clocks.iter().all(|c| format!("{:?}", c.source) == first));
    }

    /// The constant scale reads as quanta's own scaling does, to within one part in
    /// 10¹⁰, from a microsecond to a day of ticks.
    #[test]
    fn the_constant_scale_agrees_with_quanta() {
        let (source, scale) = shared_source();
        for ticks in [1_000u64, 1 << 20, 1 << 32, 1 << 40, 86_400_000_000_000] {
            let ours = ticks_to_nanos(ticks, scale);
            let theirs = source.delta_as_nanos(0, ticks);
            let error = ours.abs_diff(theirs);
            assert!(
                error <= 1 + theirs / 10_000_000_000,
                "{ticks} ticks: {ours} vs {theirs}"
            );
        }
    }

    /// At the end of the counter's range the reading saturates; it never wraps back
    /// to a small time.
    #[test]
    fn the_scale_saturates_at_the_clock_end() {
        let one = 1 << SCALE_BITS;
        assert_eq!(ticks_to_nanos(u64::MAX, 2 * one), u64::MAX);
        assert_eq!(ticks_to_nanos(u64::MAX, one), u64::MAX);
        assert_eq!(ticks_to_nanos(u64::MAX, one / 2), u64::MAX / 2);
        assert_eq!(ticks_to_nanos(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(ticks_to_nanos(0, u64::MAX), 0);
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
