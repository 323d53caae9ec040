//! Waiting for permits: the FIFO waiter queue, the scheduler thread that wakes it,
//! and the errors a wait can end with.
//!
//! A limiter that cannot grant a request now queues it. The first waiter books its
//! permits ([`Algorithm::reserve`](crate::algorithm::Algorithm::reserve)) and sets one
//! alarm on the limiter's [`Clock`](crate::clock::Clock) for when it may go; the
//! others wait behind it holding nothing. Alarms ring on the [`Scheduler`] thread (or,
//! for a [`ManualClock`](crate::clock::ManualClock), when the test moves the clock).
//! Dropping a waiting future gives back what it booked, and the next waiter moves up.

use std::fmt;

use crate::decision::InsufficientCapacity;

pub(crate) mod future;
pub(crate) mod queue;
mod scheduler;
mod sleep;

pub use queue::Fairness;
pub use scheduler::{Scheduler, SchedulerStats};
pub use sleep::Sleep;

/// Why a wait for permits ended without them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::Gcra;
/// use tollgate::clock::ManualClock;
/// use tollgate::wait::AcquireError;
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new());
/// limiter.try_acquire(1)?;
/// // The next permit comes in 1 s: a 10 ms timeout fails at once.
/// let waited = limiter.acquire_blocking_timeout(1, Duration::from_millis(10));
/// assert_eq!(waited, Err(AcquireError::TimedOut));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// The limiter was closed: no permit will ever be granted.
    Closed,
    /// The request asks for more than the limiter can ever grant at once.
    Insufficient(InsufficientCapacity),
    /// The permits could not be had within the timeout; known at once when the
    /// wait was already known to be longer.
    TimedOut,
    /// A bounded queue was full.
    QueueFull {
        /// The units the queue holds at most.
        capacity: u64,
    },
}

impl AcquireError {
    /// Whether the same request can never succeed: closed, or too large.
    pub fn is_never(&self) -> bool {
        matches!(self, AcquireError::Closed | AcquireError::Insufficient(_))
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Closed => f.write_str("the limiter is closed"),
            AcquireError::Insufficient(i) => i.fmt(f),
            AcquireError::TimedOut => f.write_str("timed out waiting for permits"),
            AcquireError::QueueFull { capacity } => {
                write!(f, "the queue is full ({capacity} units)")
            }
        }
    }
}

impl std::error::Error for AcquireError {}
