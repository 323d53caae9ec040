//! The [`Clock`] trait and the [`Alarm`]s a clock rings.

use std::fmt;
use std::time::Duration;

use super::{Nanos, Scheduler};
use crate::sync::Arc;

/// A source of time for limiters.
///
/// Clones of a clock share one timeline. Time never goes backwards.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::time::{Clock, ManualClock};
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
    /// speed of real time. A clock that moves otherwise (like [`ManualClock`](super::ManualClock)) must ring
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
