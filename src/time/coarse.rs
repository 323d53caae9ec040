//! [`CoarseClock`]: a clock read with one atomic load, refreshed by a thread.

use std::fmt;
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Clock, MonotonicClock, Nanos};
use crate::error::ConfigError;
// A real thread that loom never runs: std's primitives under every cfg.
use crate::sync::unmodeled::{Arc, AtomicU64, Mutex, Ordering, Weak};

/// The finest resolution accepted: below it the thread would do nothing but wake.
const FINEST: Duration = Duration::from_micros(1);

/// The coarsest resolution accepted: a reading a second behind is already too late
/// for anything a limiter times.
const COARSEST: Duration = Duration::from_secs(1);

/// The name of the thread that refreshes the reading.
const THREAD_NAME: &str = "tollgate-coarse-clock";

/// A clock whose [`now`](Clock::now) is one atomic load of a reading that a
/// background thread refreshes every `resolution`, for limiters that read the clock on
/// every request and need no more than that resolution.
/// `AdaptiveLimiter::new` picks one of 1 ms
/// by itself for an algorithm that asks no finer (AIMD: see
/// `LimitAlgorithm::time_resolution`);
/// elsewhere it is opt-in.
///
/// It is built over a [`MonotonicClock`] and shares its timeline and
/// [`unix_origin`](Clock::unix_origin). Its readings never go backwards and are at
/// most one resolution behind the source (plus however late the operating system
/// wakes the thread).
///
/// # What it is for
///
/// Timing that is compared with thresholds much longer than the resolution: the RTT
/// an `AimdLimit` compares with its timeout of
/// seconds, or rate limits whose windows or periods are much longer than the
/// resolution. An adaptive limiter reads its clock twice per request; on a coarse
/// clock of 1 ms those two reads cost two loads instead of two time-stamp counter
/// reads (see benches/README.md, "Adaptive limits").
///
/// # What it is not for
///
/// Algorithms that learn from the RTT itself: Vegas, Gradient, Gradient2 and Envoy's
/// gradient controller compare RTTs of fractions of a millisecond, which a coarse
/// clock reads as zero or as one resolution. Keep them on a [`MonotonicClock`].
///
/// # Cost
///
/// One thread per clock (clones share it), named `tollgate-coarse-clock`, waking
/// once per resolution: a thousand wakeups a second at 1 ms. It stops by itself
/// within a resolution of the last clone being dropped. Should the process be unable
/// to start it, the clock reads its source on every call instead: exact, at the cost
/// of a [`MonotonicClock`].
///
/// Alarms go to the process's global [`Scheduler`](super::Scheduler) (the default
/// of [`Clock::set_alarm`]), which counts real time: a waiter on this clock wakes up
/// to a resolution late.
///
/// An adaptive limiter (feature `adaptive`) takes one as any limiter does:
/// `AdaptiveLimiter::with_clock(AimdLimit::new(), WhenLimited::FailFast, clock)`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::CoarseClock;
/// use tollgate::{Limiter, Quota};
///
/// // 100 a minute, a permit every 600 ms: a millisecond is plenty.
/// let clock = CoarseClock::new(Duration::from_millis(1))?;
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_minute(100)?), clock);
/// assert!(limiter.try_acquire(1).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    shared: Arc<Shared>,
    /// The refresher thread could not start: every reading goes to the source.
    direct: bool,
}

/// What the clones share and the refresher holds weakly.
struct Shared {
    /// The latest reading of `source`, in nanoseconds on its timeline.
    reading: AtomicU64,
    source: MonotonicClock,
    resolution: Duration,
}

impl CoarseClock {
    /// A coarse clock over a new [`MonotonicClock`], refreshed every `resolution`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `resolution`, [`ConfigError::OutOfRange`] for
    /// one under 1 µs or over 1 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::time::{Clock, CoarseClock};
    /// use tollgate::ConfigError;
    ///
    /// let clock = CoarseClock::new(Duration::from_millis(1))?;
    /// let a = clock.now();
    /// assert!(clock.now() >= a);
    ///
    /// assert_eq!(
    ///     CoarseClock::new(Duration::ZERO).unwrap_err(),
    ///     ConfigError::Zero { parameter: "resolution" }
    /// );
    /// assert!(CoarseClock::new(Duration::from_nanos(500)).is_err());
    /// assert!(CoarseClock::new(Duration::from_secs(60)).is_err());
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(resolution: Duration) -> Result<CoarseClock, ConfigError> {
        CoarseClock::with_source(MonotonicClock::new(), resolution)
    }

    /// A coarse clock over `source`, on its timeline (same origin, same
    /// [`unix_origin`](Clock::unix_origin)), refreshed every `resolution`: for
    /// limiters that must agree on time with others reading `source` directly.
    ///
    /// # Errors
    ///
    /// As [`CoarseClock::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::time::{Clock, CoarseClock, MonotonicClock};
    ///
    /// let exact = MonotonicClock::new();
    /// let coarse = CoarseClock::with_source(exact.clone(), Duration::from_millis(1))?;
    /// assert_eq!(coarse.unix_origin(), exact.unix_origin());
    /// // One timeline: the coarse reading is never ahead of the exact one.
    /// assert!(coarse.now() <= exact.now());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_source(
        source: MonotonicClock,
        resolution: Duration,
    ) -> Result<CoarseClock, ConfigError> {
        CoarseClock::start(source, resolution, spawn_refresher).map(|(clock, _)| clock)
    }

    /// How often the reading is refreshed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::time::CoarseClock;
    ///
    /// let clock = CoarseClock::new(Duration::from_millis(2))?;
    /// assert_eq!(clock.resolution(), Duration::from_millis(2));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn resolution(&self) -> Duration {
        self.shared.resolution
    }

    /// The clock, and the refresher's handle if `spawn` started one.
    fn start(
        source: MonotonicClock,
        resolution: Duration,
        spawn: fn(Weak<Shared>, Duration) -> io::Result<JoinHandle<()>>,
    ) -> Result<(CoarseClock, Option<JoinHandle<()>>), ConfigError> {
        check_resolution(resolution)?;
        Ok(CoarseClock::start_checked(source, resolution, spawn))
    }

    /// [`start`](CoarseClock::start) at a resolution already checked.
    fn start_checked(
        source: MonotonicClock,
        resolution: Duration,
        spawn: fn(Weak<Shared>, Duration) -> io::Result<JoinHandle<()>>,
    ) -> (CoarseClock, Option<JoinHandle<()>>) {
        let shared = Arc::new(Shared {
            reading: AtomicU64::new(source.now().as_u64()),
            source,
            resolution,
        });
        let refresher = spawn(Arc::downgrade(&shared), resolution).ok();
        let clock = CoarseClock {
            shared,
            direct: refresher.is_none(),
        };
        (clock, refresher)
    }
}

/// The resolution of the coarse clock that limiters pick for themselves
/// ([`CoarseClock::shared`]).
pub(crate) const SHARED_RESOLUTION: Duration = Duration::from_millis(1);

/// The clock [`CoarseClock::shared`] hands out while any holder keeps it, with
/// whether it reads its source directly (no thread could be started).
static SHARED: Mutex<Option<(Weak<Shared>, bool)>> = Mutex::new(None);

impl CoarseClock {
    /// A coarse clock of [`SHARED_RESOLUTION`] over the process's shared
    /// [`MonotonicClock`] source, for limiters that pick a coarse clock themselves:
    /// all of them share one clock and one thread, which ends with the last of them.
    pub(crate) fn shared() -> CoarseClock {
        let mut shared = SHARED.lock();
        if let Some((weak, direct)) = &*shared {
            if let Some(live) = weak.upgrade() {
                return CoarseClock {
                    shared: live,
                    direct: *direct,
                };
            }
        }
        let (clock, _) =
            CoarseClock::start_checked(MonotonicClock::new(), SHARED_RESOLUTION, spawn_refresher);
        *shared = Some((Arc::downgrade(&clock.shared), clock.direct));
        clock
    }

    /// The monotonic clock it reads: its timeline, read exactly.
    pub(crate) fn source(&self) -> &MonotonicClock {
        &self.shared.source
    }
}

fn check_resolution(resolution: Duration) -> Result<(), ConfigError> {
    if resolution.is_zero() {
        return Err(ConfigError::Zero {
            parameter: "resolution",
        });
    }
    if !(FINEST..=COARSEST).contains(&resolution) {
        return Err(ConfigError::OutOfRange {
            parameter: "resolution",
            expected: "between 1 µs and 1 s",
        });
    }
    Ok(())
}

/// Starts the thread that refreshes the reading every `resolution`, until no clock
/// holds `shared`.
fn spawn_refresher(shared: Weak<Shared>, resolution: Duration) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(THREAD_NAME.to_string())
        .spawn(move || refresh(&shared, resolution))
}

fn refresh(shared: &Weak<Shared>, resolution: Duration) {
    loop {
        std::thread::sleep(resolution);
        // Upgraded only for the store: between wakeups the thread holds nothing, so
        // dropping the last clone frees the state and ends the loop.
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // The only writer, but `fetch_max` keeps the reading monotone whatever the
        // source does across the thread's migrations between cores.
        let now = shared.source.now().as_u64();
        shared.reading.fetch_max(now, Ordering::Relaxed);
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Nanos {
        if self.direct {
            return self.shared.source.now();
        }
        // One location, one writer that only raises it: each reader sees it rise.
        Nanos::new(self.shared.reading.load(Ordering::Relaxed))
    }

    fn unix_origin(&self) -> Duration {
        self.shared.source.unix_origin()
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock")
            .field("resolution", &self.shared.resolution)
            .field("now", &self.now())
            .field("refreshed", &!self.direct)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn millis(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Waits for `handle`'s thread to end, for at most `limit`.
    fn ended_within(handle: &JoinHandle<()>, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !handle.is_finished() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(millis(1));
        }
        true
    }

    #[test]
    fn the_refresher_is_named_and_ends_after_the_last_clone() {
        let (clock, handle) =
            CoarseClock::start(MonotonicClock::new(), millis(1), spawn_refresher).unwrap();
        let handle = handle.expect("the refresher started");
        assert_eq!(handle.thread().name(), Some(THREAD_NAME));
        let clone = clock.clone();
        drop(clock);
        // A clone still holds the state: the thread keeps refreshing it.
        std::thread::sleep(millis(5));
        assert!(!handle.is_finished());
        drop(clone);
        // Bounded: it wakes every millisecond; a minute covers any busy machine.
        assert!(ended_within(&handle, Duration::from_secs(60)));
        handle.join().unwrap();
    }

    #[test]
    fn without_its_thread_the_clock_reads_the_source() {
        fn fail(_: Weak<Shared>, _: Duration) -> io::Result<JoinHandle<()>> {
            Err(io::Error::other("no threads left"))
        }
        let source = MonotonicClock::new();
        let (clock, handle) = CoarseClock::start(source.clone(), millis(1), fail).unwrap();
        assert!(handle.is_none());
        let before = source.now();
        let read = clock.now();
        assert!(read >= before && read <= source.now());
    }

    // Limiters that pick a coarse clock themselves must not start a thread each.
    #[test]
    fn limiters_share_one_coarse_clock_while_any_holds_it() {
        let first = CoarseClock::shared();
        let second = CoarseClock::shared();
        assert!(Arc::ptr_eq(&first.shared, &second.shared));
        assert_eq!(first.resolution(), SHARED_RESOLUTION);
        // On its source's timeline, never ahead of it.
        assert!(first.now() <= first.source().now());
    }

    #[test]
    fn resolutions_outside_the_range_are_errors() {
        assert!(check_resolution(FINEST).is_ok());
        assert!(check_resolution(COARSEST).is_ok());
        assert!(check_resolution(FINEST - Duration::from_nanos(1)).is_err());
        assert!(check_resolution(COARSEST + Duration::from_nanos(1)).is_err());
    }
}
