//! The [`Gate`] contract: what a waiter queue needs from the limiter it stands in
//! front of, and what the queue promises in return.

use std::convert::Infallible;
use std::time::Duration;

use super::round_trip::RemoteBooking;
use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::engine::Core;
use crate::observe::Events;
use crate::sync::Arc;
use crate::time::{Alarm, Clock, Nanos};

/// What a queue waits on: a limiter's decision, its clock and its alarms.
///
/// A local gate decides under the queue's lock. A remote one ([`Gate::is_remote`]: a
/// store) needs a round trip: the queue then hands the turn to its first waiter, which
/// books through [`Gate::reserve_remote`] outside the lock and reports back with
/// [`Waiting::settle`](super::queue::Waiting::settle). Order, timeouts, cancellation
/// and alarms are the same for both.
///
/// # What a gate promises
///
/// - Each decision (`acquire`, `peek`, `reserve`, `refund`, `rebook`, `backlog`) is
///   atomic on its own. The queue calls them under its lock, and the lock-free paths
///   (`try_acquire`, an uncontended `begin`, `release`) without it, so a gate takes
///   only locks of its own, and never calls back into its queue.
/// - A grant or a booking has taken its permits; a denial takes nothing; `refund(n)`
///   gives back what a grant or booking of `n` took (the queue refunds those its
///   waiter never used). A booking `Ok(r)` of `reserve(now, n, max_wait)` is due at
///   `now + r.wait()`, within `max_wait`.
/// - A `Limited` denial's `retry_after` is when asking again may succeed; `None`
///   means capacity comes back only by a release, which the gate's owner reports to
///   the queue ([`Waiting::release`](super::queue::Waiting::release) or
///   [`serve`](super::queue::Waiting::serve)): the queue arms no alarm for it.
/// - `set_alarm` rings the alarm once [`now`](Gate::now) reads the deadline or later,
///   perhaps at once on the calling thread, and holds it weakly. The queue calls it
///   with its lock released.
/// - A remote gate still answers `acquire`, `peek`, `reserve` and `refund` without a
///   round trip (with "not now" if it must): the lock-free paths and a close call
///   them; its first waiter's turn goes through `reserve_remote` instead.
pub(crate) trait Gate: Send + Sync + 'static {
    /// What deciding can fail with: nothing in process, a store's error otherwise.
    type Error: Send + 'static;

    fn now(&self) -> Nanos;
    /// The time the lock-free paths (`try_acquire`, `release`) decide at: [`now`],
    /// unless the gate's decisions ignore time (a semaphore), which then spares them
    /// a clock read. Deadlines always come from `now`.
    ///
    /// [`now`]: Gate::now
    #[inline]
    fn decision_time(&self) -> Nanos {
        self.now()
    }
    /// Takes `n` permits at `now` if they are free.
    fn acquire(&self, now: Nanos, n: u64) -> Decision;
    /// What `acquire` would decide, taking nothing.
    fn peek(&self, now: Nanos, n: u64) -> Decision;
    /// Books `n` permits due within `max_wait` of `now` (at once, if the algorithm
    /// does not book ahead).
    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied>;
    /// Gives back `n` permits granted or booked and not used.
    fn refund(&self, now: Nanos, n: u64);
    /// The most one request can ever be granted. A gate may deny less as
    /// `Insufficient` when it cannot grant it within a `max_wait`; that is not never.
    fn capacity(&self) -> u64;
    /// Whether a denied `reserve(n, max_wait)` means the wait exceeds `max_wait`
    /// (the algorithm books ahead), rather than "not available right now".
    fn books_ahead(&self) -> bool;
    /// Rings `alarm` once the gate's clock reads `deadline`.
    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>);
    /// Whether `n` permits are still denied, for a time, at the clock's end: then a
    /// denial whose retry lands there is never granted. Asked only off the hot path;
    /// a gate that cannot tell (a store decides by its own clock) says no.
    fn denies_at_the_end(&self, _n: u64) -> bool {
        false
    }
    /// Books again, from the state as it is now, `n` permits booked for `until`, if
    /// that makes them due sooner; returns the new time. Otherwise changes nothing.
    fn rebook(&self, _now: Nanos, _n: u64, _until: Nanos) -> Option<Nanos> {
        None
    }
    /// Units the gate holds that still count against a bounded queue: booked, not yet
    /// gone.
    fn backlog(&self, _now: Nanos) -> u64 {
        0
    }
    /// Where the outcomes of waits are reported, if anywhere.
    fn events(&self) -> Option<&Events> {
        None
    }
    /// The key the queue waits on, for the events of a keyed limiter's queues.
    fn event_key(&self) -> Option<&str> {
        None
    }
    /// Whether decisions need a round trip, made by the first waiter outside the lock.
    fn is_remote(&self) -> bool {
        false
    }
    /// Books `n` permits usable within `max_wait`, by a round trip. A local gate books
    /// at once.
    fn reserve_remote(&self, n: u64, max_wait: Duration) -> RemoteBooking<Self::Error> {
        let booked = self.reserve(self.now(), n, max_wait);
        Box::pin(std::future::ready(Ok(booked)))
    }
    /// Takes over a booking in flight whose waiter left: the store books whether or
    /// not anyone still waits, so a remote gate finishes it in the background and
    /// gives back what it booked. A local gate books at once, never in flight.
    fn abandon(&self, booking: RemoteBooking<Self::Error>, _n: u64) {
        drop(booking);
    }
    /// How long a remote gate's first waiter waits before asking again when capacity
    /// comes back only by release, which another process does unseen.
    fn release_poll(&self) -> Option<Duration> {
        None
    }
}

// An in-process limiter's gate. Here rather than beside `Core` in `engine`: the
// engine sits below this layer and must not import it.
impl<A: Algorithm, C: Clock> Gate for Core<A, C> {
    type Error = Infallible;

    #[inline]
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    #[inline(always)]
    fn acquire(&self, now: Nanos, n: u64) -> Decision {
        self.cell.acquire(now, n)
    }

    fn peek(&self, now: Nanos, n: u64) -> Decision {
        self.cell.peek(now, n)
    }

    #[inline]
    fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
        self.cell.reserve(now, n, max_wait)
    }

    fn refund(&self, now: Nanos, n: u64) {
        self.cell.refund(now, n)
    }

    fn capacity(&self) -> u64 {
        self.cell.snapshot().0.capacity()
    }

    fn books_ahead(&self) -> bool {
        A::BOOKS_AHEAD
    }

    fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
        self.clock.set_alarm(deadline, alarm)
    }

    fn denies_at_the_end(&self, n: u64) -> bool {
        matches!(self.cell.peek(Nanos::MAX, n), Err(Denied::Limited(l)) if l.retry_after().is_some())
    }

    fn rebook(&self, now: Nanos, n: u64, until: Nanos) -> Option<Nanos> {
        self.cell.rebook(now, n, until)
    }

    fn backlog(&self, now: Nanos) -> u64 {
        let (algorithm, state) = self.cell.snapshot();
        algorithm.backlog(&state, now)
    }

    fn events(&self) -> Option<&Events> {
        Core::events(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Concurrency, Gcra};
    use crate::quota::Quota;
    use crate::sync::AtomicU64;
    use crate::sync::Ordering::SeqCst;
    use crate::time::ManualClock;

    fn ms(n: u64) -> Nanos {
        Nanos::new(n * 1_000_000)
    }

    /// What every gate promises about taking and giving back, with `free` permits
    /// free at `now` and none coming back before a refund.
    fn takes_and_gives_back(gate: &impl Gate, now: Nanos, free: u64) {
        assert!(gate.peek(now, free).is_ok());
        assert!(gate.acquire(now, free).is_ok());
        // A denial takes nothing: asking again changes nothing.
        for _ in 0..2 {
            assert!(matches!(gate.acquire(now, 1), Err(Denied::Limited(_))));
            assert!(matches!(gate.peek(now, 1), Err(Denied::Limited(_))));
        }
        gate.refund(now, free);
        assert!(gate.acquire(now, free).is_ok());
        gate.refund(now, free);
        assert!(matches!(
            gate.reserve(now, gate.capacity() + 1, Duration::MAX),
            Err(Denied::Insufficient(_))
        ));
    }

    #[test]
    fn a_core_takes_and_gives_back() {
        let clock = ManualClock::new();
        let quota = Quota::per_second(10).unwrap().burst(3).unwrap();
        takes_and_gives_back(&Core::new(Gcra::new(quota), clock.clone()), clock.now(), 3);
        let concurrency = Core::new(Concurrency::new(2).unwrap(), clock.clone());
        takes_and_gives_back(&concurrency, clock.now(), 2);
    }

    #[test]
    fn a_booking_is_due_within_its_max_wait_and_made_again_sooner_when_capacity_returns() {
        let clock = ManualClock::new();
        let core = Core::new(Gcra::new(Quota::per_second(10).unwrap()), clock);
        let now = Nanos::ZERO;
        assert!(core.books_ahead());
        assert!(core.acquire(now, 10).is_ok());
        let first = core.reserve(now, 1, Duration::from_secs(1)).unwrap();
        assert_eq!(first.wait(), Duration::from_millis(100));
        let second = core.reserve(now, 1, Duration::from_secs(1)).unwrap();
        assert_eq!(second.wait(), Duration::from_millis(200));
        assert!(core.reserve(now, 1, Duration::from_millis(250)).is_err());
        // The first booking goes back: the second may go at 100 ms.
        core.refund(now, 1);
        assert_eq!(core.rebook(now, 1, ms(200)), Some(ms(100)));
        // Not sooner again: nothing changes.
        assert_eq!(core.rebook(now, 1, ms(100)), None);
        assert!(core.reserve(now, 1, Duration::from_millis(150)).is_err());
    }

    #[test]
    fn a_concurrency_core_waits_for_a_release_not_a_time() {
        let core = Core::new(Concurrency::new(1).unwrap(), ManualClock::new());
        assert!(!core.books_ahead());
        assert!(core.acquire(Nanos::ZERO, 1).is_ok());
        match core.reserve(Nanos::ZERO, 1, Duration::from_secs(1)) {
            Err(Denied::Limited(limited)) => assert_eq!(limited.retry_after(), None),
            other => panic!("expected a denial until a release, got {other:?}"),
        }
        assert!(!core.denies_at_the_end(1));
    }

    struct Rings(AtomicU64);

    impl Alarm for Rings {
        fn ring(&self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn a_core_rings_its_alarm_on_its_clock_and_holds_it_weakly() {
        let clock = ManualClock::new();
        let core = Core::new(Concurrency::new(1).unwrap(), clock.clone());
        let alarm = Arc::new(Rings(AtomicU64::new(0)));
        core.set_alarm(ms(5), alarm.clone());
        clock.advance(Duration::from_millis(4));
        assert_eq!(alarm.0.load(SeqCst), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(alarm.0.load(SeqCst), 1);
        // Already due: rings at once, on this thread.
        core.set_alarm(ms(5), alarm.clone());
        assert_eq!(alarm.0.load(SeqCst), 2);
        // Held weakly: dropped before its time, it is gone, and rings nothing.
        let gone = Arc::new(Rings(AtomicU64::new(0)));
        let watched = Arc::downgrade(&gone);
        core.set_alarm(ms(10), gone);
        assert!(watched.upgrade().is_none());
        clock.advance(Duration::from_millis(5));
        assert_eq!(clock.pending_alarms(), 0);
    }
}
