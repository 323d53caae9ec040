//! Waiting for permits: the FIFO waiter queue and the futures that wait in it.
//!
//! A limiter that cannot grant a request now queues it. The first waiter books its
//! permits ([`Algorithm::reserve`](crate::algorithm::Algorithm::reserve)) and sets one
//! alarm on the limiter's [`Clock`](crate::time::Clock) for when it may go; the
//! others wait behind it holding nothing. Alarms ring on the [`Scheduler`](crate::time::Scheduler) thread (or,
//! for a [`ManualClock`](crate::time::ManualClock), when the test moves the clock).
//! Dropping a waiting future gives back what it booked, and the next waiter moves up.

pub(crate) mod future;
pub(crate) mod keyed;
pub(crate) mod queue;

pub use queue::Fairness;
