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
