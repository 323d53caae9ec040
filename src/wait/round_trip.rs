//! Bookings that need a round trip: how a remote gate's queue (a store's, decided in
//! another process) keeps its order while every decision leaves the process.
//!
//! A remote gate cannot decide under the queue's lock. When the first waiter is to
//! book, the queue instead hands it the turn (`TURN`, and a wake-up); the waiter
//! takes it (`BOOKING`), calls [`Gate::reserve_remote`] and polls that future in its
//! own task, outside every lock. Its reply comes back through
//! [`settle`](Waiting::settle), which applies it under the lock as if the gate had
//! decided there: granted, booked for later (an alarm), denied for a while (an
//! alarm, or [`Gate::release_poll`] when only a release brings capacity back), or
//! failed. The waiters behind it wait holding nothing, as behind any first waiter.
//!
//! While a round trip is in flight:
//! - a release or reconfiguration that serves the queue cannot decide for the
//!   booking waiter; it notes `recheck`, and a denial that comes back is asked
//!   again at once, since it may predate what changed;
//! - the booking waiter has no timeout alarm: the `max_wait` it books with bounds it;
//! - a waiter that leaves hands its booking in flight to [`Gate::abandon`], which
//!   finishes it and gives back what it booked; one closed out gives back its booking
//!   when [`settle`](Waiting::settle) finds it gone;
//! - a round trip that fails ends that waiter's wait with the error
//!   ([`settle_failed`](Waiting::settle_failed)), and the next waiter takes the turn.

use std::future::Future;
use std::pin::Pin;

use super::gate::Gate;
use super::queue::{Effects, Entry, Waiting};
use super::slot::{BOOKING, DONE, Slot, TURN, WAITING};
use crate::decision::{Denied, Reservation};
use crate::sync::{Arc, Ordering};

/// A booking made by a round trip: what a remote gate's first waiter awaits.
pub(crate) type RemoteBooking<E> =
    Pin<Box<dyn Future<Output = Result<Result<Reservation, Denied>, E>> + Send>>;

impl<G: Gate> Waiting<G> {
    /// The first waiter of a remote gate, holding `slot`, booked `booked` by its round
    /// trip: the queue applies it as if the gate had decided under the lock, and
    /// serves the waiters behind.
    pub(crate) fn settle(&self, slot: &Arc<Slot>, booked: Result<Reservation, Denied>) {
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            // A booked wait counts from now, when the reply is read, not from when
            // the store decided it, which this process cannot know: late by the
            // reply's flight, never early.
            let now = self.gate.now();
            let first = inner
                .waiters
                .front()
                .is_some_and(|e| Arc::ptr_eq(&e.slot, slot));
            if first && slot.state.load(Ordering::Acquire) == BOOKING {
                slot.state.store(WAITING, Ordering::Release);
                let recheck = std::mem::take(&mut inner.recheck);
                let mut alarm = None;
                if !self.apply(&mut inner, now, booked, &mut effects, &mut alarm) {
                    self.drain(&mut inner, now, &mut effects);
                } else if recheck
                    && inner
                        .waiters
                        .front()
                        .is_some_and(|e| e.booked_until.is_none())
                {
                    // Denied on a state that a release has changed since.
                    let head = inner.waiters.front_mut().expect("checked");
                    Self::hand_turn(head, &mut effects);
                } else if let Some(at) = alarm {
                    // `drain` would hand the turn straight back: arm and stop here.
                    self.arm(&mut inner, at, &mut effects);
                    self.publish_len(&inner);
                }
            } else if let Ok(r) = booked {
                // Closed while the round trip was in flight: give the booking back.
                self.gate.refund(now, r.permits());
            }
        }
        self.deliver(effects);
    }

    /// Gives a remote gate's first waiter the turn to book, and wakes it.
    pub(super) fn hand_turn(head: &mut Entry, effects: &mut Effects) {
        effects.wakes.push(head.slot.post(TURN));
    }

    /// The first waiter's round trip failed: it leaves with the error, and the next
    /// waiter takes the turn.
    pub(crate) fn settle_failed(&self, slot: &Arc<Slot>) {
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            let now = self.gate.now();
            slot.state.store(DONE, Ordering::Release);
            if let Some(index) = inner
                .waiters
                .iter()
                .position(|e| Arc::ptr_eq(&e.slot, slot))
            {
                inner.waiters.remove(index);
                self.drain(&mut inner, now, &mut effects);
            }
        }
        self.deliver(effects);
    }

    /// Whether `entry` has the turn of a remote gate, or is using it: its round trip,
    /// bounded by its timeout, settles it, so no timeout alarm is needed for it.
    pub(super) fn is_booking(entry: &Entry) -> bool {
        matches!(entry.slot.state.load(Ordering::Relaxed), TURN | BOOKING)
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;
    use std::time::Duration;

    use futures::channel::oneshot;

    use super::super::future::WaitFor;
    use super::super::testing::{Woken, poll};
    use super::*;
    use crate::algorithm::{Algorithm, Concurrency, Gcra};
    use crate::decision::Decision;
    use crate::engine::Core;
    use crate::error::AcquireError;
    use crate::quota::Quota;
    use crate::sync::Mutex;
    use crate::time::{Alarm, Clock, ManualClock, Nanos};

    type Reply = Result<Result<Reservation, Denied>, &'static str>;

    /// A gate decided "elsewhere": each booking is a round trip that the test answers
    /// by hand, from a core it holds.
    struct Remote<A: Algorithm> {
        core: Core<A, ManualClock>,
        /// Round trips in flight: the permits asked for, and where the reply goes.
        calls: Mutex<Vec<(u64, oneshot::Sender<Reply>)>>,
        /// Bookings in flight whose waiter left, and their permits.
        abandoned: Mutex<Vec<(u64, RemoteBooking<&'static str>)>>,
    }

    impl<A: Algorithm> Remote<A> {
        fn new(algorithm: A, clock: &ManualClock) -> Arc<Waiting<Remote<A>>> {
            Waiting::new(Remote {
                core: Core::new(algorithm, clock.clone()),
                calls: Mutex::new(Vec::new()),
                abandoned: Mutex::new(Vec::new()),
            })
        }

        /// Answers the oldest round trip in flight as the core decides now.
        fn answer(&self) {
            let (n, reply) = self.calls.lock().remove(0);
            let booked = self.core.reserve(self.now(), n, Duration::MAX);
            reply.send(Ok(booked)).expect("the waiter listens");
        }

        fn fail(&self) {
            let (_, reply) = self.calls.lock().remove(0);
            reply.send(Err("down")).expect("the waiter listens");
        }

        fn in_flight(&self) -> usize {
            self.calls.lock().len()
        }
    }

    impl<A: Algorithm> Gate for Remote<A> {
        type Error = &'static str;

        fn now(&self) -> Nanos {
            self.core.now()
        }
        fn acquire(&self, now: Nanos, n: u64) -> Decision {
            self.core.acquire(now, n)
        }
        fn peek(&self, now: Nanos, n: u64) -> Decision {
            self.core.peek(now, n)
        }
        fn reserve(&self, now: Nanos, n: u64, max_wait: Duration) -> Result<Reservation, Denied> {
            self.core.reserve(now, n, max_wait)
        }
        fn refund(&self, now: Nanos, n: u64) {
            self.core.refund(now, n)
        }
        fn capacity(&self) -> u64 {
            self.core.capacity()
        }
        fn books_ahead(&self) -> bool {
            self.core.books_ahead()
        }
        fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn Alarm>) {
            self.core.set_alarm(deadline, alarm)
        }
        fn is_remote(&self) -> bool {
            true
        }
        fn reserve_remote(&self, n: u64, _max_wait: Duration) -> RemoteBooking<&'static str> {
            let (reply, answer) = oneshot::channel();
            self.calls.lock().push((n, reply));
            Box::pin(async move { answer.await.unwrap_or(Err("no answer")) })
        }
        fn abandon(&self, booking: RemoteBooking<&'static str>, n: u64) {
            self.abandoned.lock().push((n, booking));
        }
    }

    fn gcra(clock: &ManualClock) -> Arc<Waiting<Remote<Gcra>>> {
        let quota = Quota::per_second(10).unwrap().burst(1).unwrap();
        Remote::new(Gcra::new(quota), clock)
    }

    #[test]
    fn the_first_waiter_books_by_a_round_trip_and_goes_when_its_booking_is_due() {
        let clock = ManualClock::new();
        let queue = gcra(&clock);
        let woken = Woken::new();
        let mut wait = WaitFor::new(&*queue, 1, None);
        // Even with the permit free, it is asked for by a round trip.
        assert!(poll(&mut wait, &woken).is_pending());
        assert_eq!(queue.gate.in_flight(), 1);
        let before = woken.count();
        queue.gate.answer();
        assert_eq!(woken.count(), before + 1, "the answer wakes the waiter");
        assert_eq!(poll(&mut wait, &woken), Poll::Ready(Ok(Duration::ZERO)));

        // The next one books for 100 ms from now, and waits for its alarm.
        let mut next = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut next, &woken).is_pending());
        queue.gate.answer();
        assert!(poll(&mut next, &woken).is_pending());
        assert_eq!(clock.next_alarm(), Some(Nanos::new(100_000_000)));
        clock.advance(Duration::from_millis(100));
        assert_eq!(
            poll(&mut next, &woken),
            Poll::Ready(Ok(Duration::from_millis(100)))
        );
        assert_eq!(queue.waiters(), 0);
    }

    #[test]
    fn a_waiter_that_leaves_mid_round_trip_hands_on_its_booking_and_its_turn() {
        let clock = ManualClock::new();
        let queue = gcra(&clock);
        let woken = Woken::new();
        let mut first = WaitFor::new(&*queue, 1, None);
        let mut next = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut first, &woken).is_pending());
        assert!(poll(&mut next, &woken).is_pending());
        assert_eq!(queue.gate.in_flight(), 1, "one round trip at a time");
        drop(first);
        // The booking in flight is the gate's to finish; the next waiter has the turn.
        assert_eq!(queue.gate.abandoned.lock().len(), 1);
        assert!(poll(&mut next, &woken).is_pending());
        assert_eq!(queue.gate.in_flight(), 2);
        queue.gate.calls.lock().remove(0); // the abandoned call, unanswered
        queue.gate.answer();
        assert_eq!(poll(&mut next, &woken), Poll::Ready(Ok(Duration::ZERO)));
    }

    #[test]
    fn a_failed_round_trip_ends_its_wait_and_the_next_waiter_takes_the_turn() {
        let clock = ManualClock::new();
        let queue = gcra(&clock);
        let woken = Woken::new();
        let mut first = WaitFor::new(&*queue, 1, None);
        let mut next = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut first, &woken).is_pending());
        assert!(poll(&mut next, &woken).is_pending());
        queue.gate.fail();
        assert_eq!(
            poll(&mut first, &woken),
            Poll::Ready(Err(AcquireError::Source("down")))
        );
        assert!(poll(&mut next, &woken).is_pending());
        queue.gate.answer();
        assert_eq!(poll(&mut next, &woken), Poll::Ready(Ok(Duration::ZERO)));
    }

    #[test]
    fn a_booking_that_comes_back_after_a_close_is_given_back() {
        let clock = ManualClock::new();
        let queue = Remote::new(Concurrency::new(1).unwrap(), &clock);
        let woken = Woken::new();
        let mut wait = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut wait, &woken).is_pending());
        queue.close();
        queue.gate.answer();
        assert_eq!(
            poll(&mut wait, &woken),
            Poll::Ready(Err(AcquireError::Closed))
        );
        assert!(queue.gate.core.peek(clock.now(), 1).is_ok(), "given back");
    }

    #[test]
    fn a_release_during_a_round_trip_has_a_denial_asked_again_at_once() {
        let clock = ManualClock::new();
        let queue = Remote::new(Concurrency::new(1).unwrap(), &clock);
        assert!(queue.gate.core.acquire(clock.now(), 1).is_ok());
        let woken = Woken::new();
        let mut wait = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut wait, &woken).is_pending());
        // Denied as the store saw it, but a release came while the answer flew.
        let (n, reply) = queue.gate.calls.lock().remove(0);
        let denied = queue.gate.core.reserve(clock.now(), n, Duration::MAX);
        assert!(denied.is_err());
        queue.release(1);
        reply.send(Ok(denied)).expect("the waiter listens");
        assert!(poll(&mut wait, &woken).is_pending());
        assert_eq!(queue.gate.in_flight(), 1, "asked again at once");
        queue.gate.answer();
        assert_eq!(poll(&mut wait, &woken), Poll::Ready(Ok(Duration::ZERO)));
    }
}
