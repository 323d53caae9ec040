//! Time: the [`Clock`] trait, the default [`MonotonicClock`], the opt-in
//! [`CoarseClock`] read with one load, the [`ManualClock`] that tests advance by hand, and the [`Scheduler`] thread that rings the alarms of
//! clocks that move in real time.
//!
//! Every limiter reads time through a clock, and algorithms receive it as a [`Nanos`]
//! value, so a test can drive any limiter through virtual time without sleeping.
//! Waiting goes through the same clock: a waiter sets an [`Alarm`] on it, and a
//! [`ManualClock`] rings due alarms when the test moves it.
//!
//! This is the bottom layer: it imports nothing of the crate but the sync shim, the
//! unit conversions and the configuration error.

mod clock;
mod coarse;
mod manual;
mod monotonic;
mod nanos;
mod scheduler;
mod sleep;

pub use clock::{Alarm, Clock};
pub use coarse::CoarseClock;
pub(crate) use coarse::SHARED_RESOLUTION;
pub use manual::ManualClock;
pub use monotonic::MonotonicClock;
pub use nanos::Nanos;
pub use scheduler::{Scheduler, SchedulerStats};
pub use sleep::Sleep;
