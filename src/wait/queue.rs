//! The waiters' queue in front of a [`Gate`]: FIFO (or unfair, or newest first),
//! cancellation-safe, woken by alarms and releases.
//!
//! Only the first waiter ever holds capacity: it books it with
//! [`Gate::reserve`] and sets one alarm for the moment it may go. The waiters behind
//! it hold nothing, so when a waiter leaves (granted, cancelled or timed out) the
//! next one books from the state as it is then, and capacity given back by a
//! cancelled booking goes to the next waiter at once. The module's essay
//! (`wait/mod.rs`) says who holds which lock and how the paths interleave.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use super::gate::Gate;
use super::slot::{
    BOOKING, CLOSED, DONE, GRANTED, INSUFFICIENT, PAST_END, Slot, TIMED_OUT, TURN, WAITING, Wake,
};
use crate::decision::{Decision, Denied, Reservation};
use crate::error::AcquireError;
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering, Weak, fence};
use crate::time::{Alarm, Nanos};

/// How waiters are served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fairness {
    /// First come, first served: a waiting request for 10 is not overtaken by later
    /// requests for 1, and `try_acquire` fails while anyone waits.
    #[default]
    Fifo,
    /// Any waiter that fits goes, and `try_acquire` ignores the queue: more
    /// throughput under mixed request sizes, but a large request can starve.
    Unfair,
}

/// A waiter's place in the line.
pub(super) struct Entry {
    pub(super) slot: Arc<Slot>,
    n: u64,
    /// Capacity booked for this waiter, usable from this time. Only the first waiter
    /// ever books.
    pub(super) booked_until: Option<Nanos>,
    /// Give up at this time.
    deadline: Option<Nanos>,
}

/// What the queue's lock guards.
pub(super) struct Inner {
    pub(super) waiters: VecDeque<Entry>,
    /// Capacity may have come back while a remote gate's first waiter was booking:
    /// if its booking is denied, it asks again at once rather than at its alarm.
    pub(super) recheck: bool,
    /// The earliest alarm set and not yet rung.
    alarm_at: Option<Nanos>,
    closed: bool,
}

/// A gate and the queue in front of it, shared by a limiter and its waiters.
pub(crate) struct Waiting<G> {
    pub(crate) gate: G,
    /// `waiters << 1 | closed`: the fast path's one load.
    word: AtomicU64,
    /// When the current alarm rings: a hint for a denied `try_acquire`.
    alarm_hint: AtomicU64,
    unfair: AtomicBool,
    /// Newest first: a waiter that fits goes before those that came earlier (an
    /// adaptive limiter's LIFO backlog). For gates whose capacity comes back by
    /// release; set before anyone waits.
    lifo: AtomicBool,
    /// The most units waiting plus the gate's backlog, for a bounded queue.
    max_units: AtomicU64,
    /// The queue's lock.
    pub(super) inner: Mutex<Inner>,
    /// Itself, to arm its alarms with.
    me: Weak<Waiting<G>>,
}

/// What starting to wait gave.
pub(crate) enum Begin {
    /// Decided without queueing.
    Ready(Result<(), AcquireError>),
    /// Queued at the time given, then decided before `begin` returned: an alarm
    /// already due when armed rings at once, so the wait ran from then to now.
    Decided(Result<(), AcquireError>, Nanos),
    /// Queued at the time given, which its deadline counts from.
    Waiting(Arc<Slot>, Nanos),
}

/// Wake-ups and an alarm to deliver once the queue lock is released.
#[derive(Default)]
pub(super) struct Effects {
    pub(super) wakes: Vec<Wake>,
    alarm: Option<Nanos>,
}

impl<G: Gate> Waiting<G> {
    pub(crate) fn new(gate: G) -> Arc<Waiting<G>> {
        Arc::new_cyclic(|me| Waiting {
            gate,
            word: AtomicU64::new(0),
            alarm_hint: AtomicU64::new(0),
            unfair: AtomicBool::new(false),
            lifo: AtomicBool::new(false),
            max_units: AtomicU64::new(u64::MAX),
            inner: Mutex::new(Inner {
                waiters: VecDeque::new(),
                recheck: false,
                alarm_at: None,
                closed: false,
            }),
            me: me.clone(),
        })
    }

    /// Bounds the queue: a wait that would take the units waiting, plus the gate's
    /// backlog, past `max` fails at once with [`AcquireError::QueueFull`].
    pub(crate) fn set_max_units(&self, max: u64) {
        self.max_units.store(max, Ordering::Relaxed);
    }

    pub(crate) fn set_fairness(&self, fairness: Fairness) {
        self.unfair
            .store(fairness == Fairness::Unfair, Ordering::Relaxed);
    }

    pub(crate) fn fairness(&self) -> Fairness {
        if self.unfair.load(Ordering::Relaxed) {
            Fairness::Unfair
        } else {
            Fairness::Fifo
        }
    }

    /// Serves the newest waiter first (or, with `false`, the oldest).
    pub(crate) fn set_lifo(&self, lifo: bool) {
        self.lifo.store(lifo, Ordering::Relaxed);
    }

    fn is_lifo(&self) -> bool {
        self.lifo.load(Ordering::Relaxed)
    }

    fn is_unfair(&self) -> bool {
        self.unfair.load(Ordering::Relaxed)
    }

    /// Whether anything stands between a caller and the gate: waiters (in FIFO mode)
    /// or a close.
    #[inline]
    pub(crate) fn is_contended(&self) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        word & 1 != 0 || (word != 0 && !self.is_unfair())
    }

    /// `try_acquire` for a caller who will not wait, respecting the queue.
    #[inline(always)]
    pub(crate) fn try_acquire(&self, n: u64) -> Decision {
        // One test on the hot path: no waiters and open. Unfair waiting and the rest
        // are sorted out off it.
        if self.word.load(Ordering::Relaxed) == 0 {
            return self.gate.acquire(self.gate.decision_time(), n);
        }
        self.try_acquire_contended(n)
    }

    #[cold]
    fn try_acquire_contended(&self, n: u64) -> Decision {
        let word = self.word.load(Ordering::Acquire);
        if word & 1 != 0 {
            return Err(Denied::Closed);
        }
        // `n == 0` takes nothing, so it overtakes no one.
        if word == 0 || n == 0 || self.is_unfair() {
            return self.gate.acquire(self.gate.decision_time(), n);
        }
        // Waiters come first: deny, pointing at when the first of them is served.
        let now = self.gate.now();
        match self.gate.peek(now, n) {
            Err(denied) => Err(denied),
            Ok(admitted) => {
                // No alarm armed: the first waiter waits for a release, not a time.
                if self.inner.lock().alarm_at.is_none() {
                    return Err(crate::decision::Limited::on_release(admitted.limit(), 0).into());
                }
                let hint = Nanos::new(self.alarm_hint.load(Ordering::Relaxed));
                Err(crate::decision::Limited::new(
                    hint.saturating_since(now),
                    admitted.limit(),
                    0,
                    admitted.reset_after(),
                )
                .into())
            }
        }
    }

    /// Starts waiting for `n` permits, giving up `timeout` from now.
    ///
    /// Inlined into every acquire future: its common case, a local gate granting at
    /// once with no one waiting and the queue open, is a test of the queue's word and
    /// the gate's decision. Everything else, the decision included when it denies,
    /// goes out of line (with the future's boxed queued state, a semaphore's acquire
    /// and release went from 254 instructions to 165, callgrind).
    #[inline(always)]
    pub(crate) fn begin(
        &self,
        n: u64,
        timeout: Option<Duration>,
        wake: impl FnOnce() -> Wake,
    ) -> Begin {
        if n != 0 && !self.gate.is_remote() && self.word.load(Ordering::Relaxed) == 0 {
            return match self
                .gate
                .reserve(self.gate.decision_time(), n, Duration::ZERO)
            {
                Ok(_) => Begin::Ready(Ok(())),
                Err(denied) => self.begin_denied(denied, n, timeout, wake),
            };
        }
        self.begin_slow(n, timeout, wake)
    }

    /// [`begin`](Waiting::begin) past its common case.
    #[inline(never)]
    fn begin_slow(&self, n: u64, timeout: Option<Duration>, wake: impl FnOnce() -> Wake) -> Begin {
        if n == 0 {
            // Takes nothing, so it overtakes no one.
            let closed = self.is_closed();
            return Begin::Ready(if closed {
                Err(AcquireError::Closed)
            } else {
                Ok(())
            });
        }
        if self.gate.is_remote() {
            // Decided by the first waiter's round trip, in order.
        } else if !self.is_contended() {
            match self
                .gate
                .reserve(self.gate.decision_time(), n, Duration::ZERO)
            {
                Ok(_) => return Begin::Ready(Ok(())),
                Err(denied) => return self.begin_denied(denied, n, timeout, wake),
            }
        } else if !self.is_closed() {
            // Behind waiters: a request that can never go fails now, not at its turn.
            // (A remote gate's capacity is known without asking it.)
            if let Some(never) = self.never(n) {
                return Begin::Ready(Err(AcquireError::Insufficient(never)));
            }
        }
        self.enqueue(n, timeout, wake)
    }

    /// [`begin`](Waiting::begin) after the gate denied `n` with no one waiting: an
    /// error at once, or a place in the queue. (The denial is not asked for again:
    /// an algorithm may count every attempt.)
    #[inline(never)]
    fn begin_denied(
        &self,
        denied: Denied,
        n: u64,
        timeout: Option<Duration>,
        wake: impl FnOnce() -> Wake,
    ) -> Begin {
        match denied {
            Denied::Insufficient(_) => {
                if let Some(never) = self.never(n) {
                    return Begin::Ready(Err(AcquireError::Insufficient(never)));
                }
            }
            Denied::Closed => return Begin::Ready(Err(AcquireError::Closed)),
            Denied::Limited(_) => {}
        }
        self.enqueue(n, timeout, wake)
    }

    /// Queues a waiter for `n` permits, giving up `timeout` from now.
    fn enqueue(&self, n: u64, timeout: Option<Duration>, wake: impl FnOnce() -> Wake) -> Begin {
        let now = self.gate.now();
        let deadline = timeout.map(|t| now + t);
        let slot = Slot::new(wake());
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            if inner.closed {
                return Begin::Ready(Err(AcquireError::Closed));
            }
            let capacity = self.max_units.load(Ordering::Relaxed);
            if capacity != u64::MAX {
                let units = Self::unbooked_units(&inner)
                    .saturating_add(self.gate.backlog(now))
                    .saturating_add(n);
                if units > capacity {
                    return Begin::Ready(Err(AcquireError::QueueFull { capacity }));
                }
            }
            // Fail fast: the first waiter is booked to go later than this one may wait.
            // An unbooked first waiter's time is unknown (a release may come first),
            // and the armed alarm may be another waiter's deadline.
            if let (Some(deadline), Some(first)) = (deadline, inner.waiters.front()) {
                if first.booked_until.is_some_and(|t| t > deadline) {
                    return Begin::Ready(Err(AcquireError::TimedOut));
                }
            }
            inner.waiters.push_back(Entry {
                slot: Arc::clone(&slot),
                n,
                booked_until: None,
                deadline,
            });
            self.publish_len(&inner);
            // Pairs with the fence in `release`: a release that saw no waiter
            // happened before this drain reads the gate.
            fence(Ordering::SeqCst);
            self.drain(&mut inner, now, &mut effects);
        }
        self.deliver(effects);
        match slot.peek_outcome(n) {
            Some(outcome) => Begin::Decided(outcome, now),
            None => Begin::Waiting(slot, now),
        }
    }

    /// Whether a denial of `n` permits at `now`, retrying after `retry` (`None`: at a
    /// release), is never granted: the retry lands at the clock's end, and the gate
    /// denies there too. No alarm can be set past the end, so such a waiter would
    /// otherwise wait forever.
    #[cold]
    fn past_the_end(&self, now: Nanos, n: u64, retry: Option<Duration>) -> bool {
        retry.is_some_and(|r| now + r == Nanos::MAX)
            && (now == Nanos::MAX || self.gate.denies_at_the_end(n))
    }

    /// Whether `n` is more than the gate can ever grant at once.
    fn never(&self, n: u64) -> Option<crate::decision::InsufficientCapacity> {
        let capacity = self.gate.capacity();
        (n > capacity).then(|| crate::decision::InsufficientCapacity::new(n, capacity))
    }

    /// The waiter of `slot`, asking for `n`, left before taking its outcome: it gives
    /// back whatever it held, and the next waiter moves up.
    pub(crate) fn cancel(&self, slot: &Arc<Slot>, n: u64) {
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            let now = self.gate.now();
            match slot.state.swap(DONE, Ordering::AcqRel) {
                // A round trip in flight is the waiter's to hand to the gate
                // (`Gate::abandon`), which gives back what it books.
                WAITING | TURN | BOOKING => {
                    let position = inner
                        .waiters
                        .iter()
                        .position(|e| Arc::ptr_eq(&e.slot, slot));
                    if let Some(index) = position {
                        let entry = inner.waiters.remove(index).expect("found");
                        if entry.booked_until.is_some() {
                            self.gate.refund(now, n);
                        }
                        self.publish_len(&inner);
                        if index == 0 || self.is_unfair() {
                            self.drain(&mut inner, now, &mut effects);
                        }
                    }
                }
                GRANTED => {
                    // Granted, never used.
                    self.gate.refund(now, n);
                    self.rebook_first(&mut inner, now);
                    self.drain(&mut inner, now, &mut effects);
                }
                _ => {}
            }
        }
        self.deliver(effects);
    }

    /// Gives back `n` permits taken earlier (a dropped semaphore permit, a refund), and
    /// serves the waiters they may now satisfy.
    pub(crate) fn release(&self, n: u64) {
        self.gate.refund(self.gate.decision_time(), n);
        // Pairs with the fence in `begin`: either this sees the new waiter, or the
        // waiter's drain sees the refund.
        fence(Ordering::SeqCst);
        if self.word.load(Ordering::SeqCst) >> 1 == 0 {
            return;
        }
        self.serve();
    }

    /// Serves waiters with the gate as it is now: a release or a reconfiguration may
    /// have made room.
    pub(crate) fn serve(&self) {
        self.serve_after(false);
    }

    fn serve_after(&self, alarm_rang: bool) {
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            let now = self.gate.now();
            if alarm_rang {
                // Whatever alarm this was, the drain below sets the one still needed;
                // an alarm that rang a hair early by this clock is set again.
                inner.alarm_at = None;
            } else {
                self.rebook_first(&mut inner, now);
            }
            self.drain(&mut inner, now, &mut effects);
        }
        self.deliver(effects);
    }

    /// Capacity came back (a release, a refund, a reconfiguration): the first waiter,
    /// if booked for later, may now go sooner.
    fn rebook_first(&self, inner: &mut Inner, now: Nanos) {
        if let Some(first) = inner.waiters.front_mut() {
            if let Some(until) = first.booked_until.filter(|&until| until > now) {
                if let Some(sooner) = self.gate.rebook(now, first.n, until) {
                    first.booked_until = Some(sooner);
                }
            }
        }
    }

    /// Fails every waiter and every later acquire with `Closed`.
    pub(crate) fn close(&self) {
        let mut effects = Effects::default();
        {
            let mut inner = self.inner.lock();
            inner.closed = true;
            let now = self.gate.now();
            while let Some(entry) = inner.waiters.pop_front() {
                if entry.booked_until.is_some() {
                    self.gate.refund(now, entry.n);
                }
                self.finish(entry, CLOSED, &mut effects);
            }
            self.word.store(1, Ordering::SeqCst);
        }
        self.deliver(effects);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Acquire) & 1 != 0
    }

    /// Waiters in the queue.
    pub(crate) fn waiters(&self) -> usize {
        usize::try_from(self.word.load(Ordering::Acquire) >> 1).unwrap_or(usize::MAX)
    }

    /// Units asked for by waiters that have not booked yet (a booked waiter's units
    /// are the gate's backlog).
    fn unbooked_units(inner: &Inner) -> u64 {
        inner
            .waiters
            .iter()
            .filter(|e| e.booked_until.is_none())
            .fold(0u64, |sum, e| sum.saturating_add(e.n))
    }

    /// Units waiting and not yet booked, and when the first waiter may go.
    pub(crate) fn queued(&self) -> (u64, Option<Nanos>) {
        let inner = self.inner.lock();
        let units = Self::unbooked_units(&inner);
        let first = inner
            .waiters
            .front()
            .and_then(|e| e.booked_until.or(inner.alarm_at));
        (units, first)
    }

    pub(super) fn publish_len(&self, inner: &Inner) {
        let len = u64::try_from(inner.waiters.len()).unwrap_or(u64::MAX >> 1);
        self.word
            .store(len << 1 | u64::from(inner.closed), Ordering::SeqCst);
    }

    /// Grants, fails and books what the gate allows at `now`, in queue order, and
    /// notes the alarm the queue needs next.
    pub(super) fn drain(&self, inner: &mut Inner, now: Nanos, effects: &mut Effects) {
        self.expire(inner, now, effects);
        let mut alarm = None;
        if self.is_unfair() && !self.gate.is_remote() {
            self.drain_unfair(inner, now, effects, &mut alarm);
        } else if self.is_lifo() && !self.gate.is_remote() {
            self.drain_lifo(inner, now, effects, &mut alarm);
        } else {
            while let Some(head) = inner.waiters.front_mut() {
                if let Some(until) = head.booked_until {
                    if until > now {
                        alarm = Some(until);
                        break;
                    }
                    let entry = inner.waiters.pop_front().expect("front");
                    self.finish(entry, GRANTED, effects);
                    continue;
                }
                if self.gate.is_remote() {
                    // The first waiter books by a round trip, unless it already is:
                    // then its answer may predate what changed, so it asks again.
                    match head.slot.state.load(Ordering::Acquire) {
                        WAITING => Self::hand_turn(head, effects),
                        BOOKING => inner.recheck = true,
                        _ => {}
                    }
                    break;
                }
                let max_wait = head
                    .deadline
                    .map_or(Duration::MAX, |d| d.saturating_since(now));
                let booked = self.gate.reserve(now, head.n, max_wait);
                if self.apply(inner, now, booked, effects, &mut alarm) {
                    break;
                }
            }
        }
        let timeout = inner
            .waiters
            .iter()
            .filter(|e| !Self::is_booking(e))
            .filter_map(|e| e.deadline)
            .min();
        let needed = match (alarm, timeout) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        };
        if let Some(at) = needed {
            self.arm(inner, at, effects);
        }
        self.publish_len(inner);
    }

    /// Notes that the queue needs an alarm at `at`: one is set (once the lock is
    /// released) unless an earlier one is armed, whose ring re-arms what is still
    /// needed.
    pub(super) fn arm(&self, inner: &mut Inner, at: Nanos, effects: &mut Effects) {
        self.alarm_hint.store(at.as_u64(), Ordering::Relaxed);
        if inner.alarm_at.is_none_or(|armed| at < armed) {
            inner.alarm_at = Some(at);
            effects.alarm = Some(at);
        }
    }

    /// Applies the first waiter's booking at `now`: grants, books ahead, fails, or
    /// leaves it waiting. Returns whether the queue must stop there (the first
    /// waiter still waits).
    pub(super) fn apply(
        &self,
        inner: &mut Inner,
        now: Nanos,
        booked: Result<Reservation, Denied>,
        effects: &mut Effects,
        alarm: &mut Option<Nanos>,
    ) -> bool {
        let head = inner.waiters.front_mut().expect("a first waiter");
        match booked {
            Ok(r) if r.is_immediate() => {
                let entry = inner.waiters.pop_front().expect("front");
                self.finish(entry, GRANTED, effects);
                false
            }
            Ok(r) => {
                let until = now + r.wait();
                head.booked_until = Some(until);
                *alarm = Some(until);
                true
            }
            Err(Denied::Limited(limited))
                if self.past_the_end(now, head.n, limited.retry_after()) =>
            {
                let entry = inner.waiters.pop_front().expect("front");
                self.finish(entry, PAST_END, effects);
                false
            }
            Err(Denied::Limited(limited)) => {
                // None: capacity comes back by release, not with time; a remote gate
                // may not see the release, so it asks again after a while.
                let retry = limited.retry_after().or_else(|| self.gate.release_poll());
                let fits_in_time = head.deadline.is_none_or(|d| {
                    !self.gate.books_ahead() && now + retry.unwrap_or_default() <= d
                });
                if fits_in_time {
                    *alarm = retry.filter(|r| !r.is_zero()).map(|r| now + r);
                    return true;
                }
                let entry = inner.waiters.pop_front().expect("front");
                self.finish(entry, TIMED_OUT, effects);
                false
            }
            Err(Denied::Insufficient(i)) => {
                let entry = inner.waiters.pop_front().expect("front");
                if entry.deadline.is_some() && self.never(entry.n).is_none() {
                    // Too much to get within the deadline, not never.
                    self.finish(entry, TIMED_OUT, effects);
                } else {
                    entry.slot.capacity.store(i.capacity(), Ordering::Relaxed);
                    self.finish(entry, INSUFFICIENT, effects);
                }
                false
            }
            Err(Denied::Closed) => {
                let entry = inner.waiters.pop_front().expect("front");
                self.finish(entry, CLOSED, effects);
                false
            }
        }
    }

    /// Every waiter that fits now goes, whatever its place.
    fn drain_unfair(
        &self,
        inner: &mut Inner,
        now: Nanos,
        effects: &mut Effects,
        alarm: &mut Option<Nanos>,
    ) {
        let mut index = 0;
        while index < inner.waiters.len() {
            // Booked while the queue was fair: its permits are paid for.
            if let Some(until) = inner.waiters[index].booked_until {
                if until <= now {
                    let entry = inner.waiters.remove(index).expect("in range");
                    self.finish(entry, GRANTED, effects);
                } else {
                    *alarm = Some(alarm.map_or(until, |a: Nanos| a.min(until)));
                    index += 1;
                }
                continue;
            }
            let n = inner.waiters[index].n;
            match self.gate.acquire(now, n) {
                Ok(_) => {
                    let entry = inner.waiters.remove(index).expect("in range");
                    self.finish(entry, GRANTED, effects);
                }
                Err(Denied::Limited(limited))
                    if self.past_the_end(now, n, limited.retry_after()) =>
                {
                    let entry = inner.waiters.remove(index).expect("in range");
                    self.finish(entry, PAST_END, effects);
                }
                Err(Denied::Limited(limited)) => {
                    // None: capacity comes back by release, not with time.
                    let retry = limited.retry_after().unwrap_or_default();
                    let at = now + retry;
                    // As in FIFO order: a gate that books ahead knows the wait.
                    let too_late = inner.waiters[index]
                        .deadline
                        .is_some_and(|d| self.gate.books_ahead() && at > d);
                    if too_late {
                        let entry = inner.waiters.remove(index).expect("in range");
                        self.finish(entry, TIMED_OUT, effects);
                        continue;
                    }
                    if !retry.is_zero() {
                        *alarm = Some(alarm.map_or(at, |a: Nanos| a.min(at)));
                    }
                    index += 1;
                }
                Err(Denied::Insufficient(i)) => {
                    let entry = inner.waiters.remove(index).expect("in range");
                    entry.slot.capacity.store(i.capacity(), Ordering::Relaxed);
                    self.finish(entry, INSUFFICIENT, effects);
                }
                Err(Denied::Closed) => {
                    let entry = inner.waiters.remove(index).expect("in range");
                    self.finish(entry, CLOSED, effects);
                }
            }
        }
    }

    /// Newest first: the last waiter goes while it fits; the ones before it wait
    /// until it has gone. Nobody books ahead: a waiter takes its permits when they
    /// are there.
    fn drain_lifo(
        &self,
        inner: &mut Inner,
        now: Nanos,
        effects: &mut Effects,
        alarm: &mut Option<Nanos>,
    ) {
        while let Some(newest) = inner.waiters.back() {
            match self.gate.acquire(now, newest.n) {
                Ok(_) => {
                    let entry = inner.waiters.pop_back().expect("a last waiter");
                    self.finish(entry, GRANTED, effects);
                }
                Err(Denied::Limited(limited))
                    if self.past_the_end(now, newest.n, limited.retry_after()) =>
                {
                    let entry = inner.waiters.pop_back().expect("a last waiter");
                    self.finish(entry, PAST_END, effects);
                }
                Err(Denied::Limited(limited)) => {
                    // None: capacity comes back by release, not with time.
                    *alarm = limited
                        .retry_after()
                        .filter(|r| !r.is_zero())
                        .map(|r| now + r);
                    break;
                }
                Err(Denied::Insufficient(i)) => {
                    let entry = inner.waiters.pop_back().expect("a last waiter");
                    entry.slot.capacity.store(i.capacity(), Ordering::Relaxed);
                    self.finish(entry, INSUFFICIENT, effects);
                }
                Err(Denied::Closed) => {
                    let entry = inner.waiters.pop_back().expect("a last waiter");
                    self.finish(entry, CLOSED, effects);
                }
            }
        }
    }

    /// Fails the unbooked waiters whose deadline has passed.
    fn expire(&self, inner: &mut Inner, now: Nanos, effects: &mut Effects) {
        let expired = |e: &Entry| {
            e.booked_until.is_none() && e.deadline.is_some_and(|d| d <= now) && !Self::is_booking(e)
        };
        if !inner.waiters.iter().any(expired) {
            return;
        }
        let mut kept = VecDeque::with_capacity(inner.waiters.len());
        for entry in inner.waiters.drain(..) {
            if expired(&entry) {
                self.finish(entry, TIMED_OUT, effects);
            } else {
                kept.push_back(entry);
            }
        }
        inner.waiters = kept;
    }

    fn finish(&self, entry: Entry, outcome: u8, effects: &mut Effects) {
        effects.wakes.push(entry.slot.post(outcome));
    }

    /// Wakes and arms outside the queue lock: a manual clock rings due alarms on the
    /// spot, and a woken waiter may come straight back to the queue.
    pub(super) fn deliver(&self, effects: Effects) {
        // The alarm first: a waker that panics must not leave the queue without one.
        if let (Some(at), Some(me)) = (effects.alarm, self.me.upgrade()) {
            self.gate.set_alarm(at, me);
        }
        for wake in effects.wakes {
            wake.wake();
        }
    }
}

impl<G: Gate> Alarm for Waiting<G> {
    fn ring(&self) {
        self.serve_after(true);
    }
}

impl<G> fmt::Debug for Waiting<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.word.load(Ordering::Relaxed);
        f.debug_struct("Waiting")
            .field("waiters", &(word >> 1))
            .field("closed", &(word & 1 != 0))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;
    use std::time::Duration;

    use super::super::future::WaitFor;
    use super::super::testing::{Woken, concurrency, gcra, poll};
    use super::*;
    use crate::time::{Clock, ManualClock};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let clock = ManualClock::new();
        let queue = concurrency(2, &clock);
        assert!(queue.try_acquire(2).is_ok());
        let woken = Woken::new();
        let mut two = WaitFor::new(&*queue, 2, None);
        let mut one = WaitFor::new(&*queue, 1, None);
        let mut other = WaitFor::new(&*queue, 1, None);
        for wait in [&mut two, &mut one, &mut other] {
            assert!(poll(wait, &woken).is_pending());
        }
        assert_eq!(queue.waiters(), 3);
        // One permit back fits the waiters behind, but the first needs two.
        queue.release(1);
        assert!(queue.try_acquire(1).is_err(), "waiters come first");
        assert!(poll(&mut one, &woken).is_pending());
        queue.release(1);
        assert_eq!(poll(&mut two, &woken), Poll::Ready(Ok(Duration::ZERO)));
        assert!(poll(&mut one, &woken).is_pending());
        queue.release(2);
        assert_eq!(poll(&mut one, &woken), Poll::Ready(Ok(Duration::ZERO)));
        assert_eq!(poll(&mut other, &woken), Poll::Ready(Ok(Duration::ZERO)));
        assert_eq!(queue.waiters(), 0);
    }

    /// A manual clock that another thread moves to the alarm's deadline just before
    /// the alarm is armed: the alarm is due when set, and rings at once.
    #[derive(Clone, Debug)]
    struct MovedWhileArming(ManualClock);

    impl Clock for MovedWhileArming {
        fn now(&self) -> Nanos {
            self.0.now()
        }

        fn unix_origin(&self) -> Duration {
            self.0.unix_origin()
        }

        fn set_alarm(&self, deadline: Nanos, alarm: Arc<dyn crate::time::Alarm>) {
            self.0.advance(deadline.saturating_since(self.0.now()));
            self.0.set_alarm(deadline, alarm)
        }
    }

    #[test]
    fn a_wait_granted_while_it_queues_counts_the_time_it_waited() {
        // Regression: granted by its own alarm before `begin` returned, the wait was
        // reported as not having waited at all (0 ns instead of 100 ms).
        let clock = MovedWhileArming(ManualClock::new());
        let quota = crate::quota::Quota::per_second(10)
            .unwrap()
            .burst(1)
            .unwrap();
        let queue = Waiting::new(crate::engine::Core::new(
            crate::algorithm::Gcra::new(quota),
            clock.clone(),
        ));
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut wait = WaitFor::new(&*queue, 1, Some(ms(150)));
        assert_eq!(poll(&mut wait, &woken), Poll::Ready(Ok(ms(100))));
        assert_eq!(queue.waiters(), 0);
    }

    #[test]
    fn an_unfair_queue_lets_a_waiter_that_fits_go_first() {
        let clock = ManualClock::new();
        let queue = concurrency(2, &clock);
        queue.set_fairness(Fairness::Unfair);
        assert!(queue.try_acquire(2).is_ok());
        let woken = Woken::new();
        let mut two = WaitFor::new(&*queue, 2, None);
        let mut one = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut two, &woken).is_pending());
        assert!(poll(&mut one, &woken).is_pending());
        queue.release(1);
        assert_eq!(poll(&mut one, &woken), Poll::Ready(Ok(Duration::ZERO)));
        assert!(poll(&mut two, &woken).is_pending());
    }

    #[test]
    fn a_cancelled_first_waiter_hands_its_booking_to_the_next() {
        let clock = ManualClock::new();
        let queue = gcra(1, 1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut first = WaitFor::new(&*queue, 1, None);
        let mut next = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut first, &woken).is_pending());
        assert!(poll(&mut next, &woken).is_pending());
        assert_eq!(queue.queued(), (1, Some(Nanos::new(1_000_000_000))));
        drop(first);
        // The booking for 1 s went back, and the next waiter booked it.
        assert_eq!(queue.waiters(), 1);
        assert_eq!(queue.queued(), (0, Some(Nanos::new(1_000_000_000))));
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            poll(&mut next, &woken),
            Poll::Ready(Ok(Duration::from_secs(1)))
        );
    }

    #[test]
    fn a_cancelled_grant_goes_to_the_next_waiter() {
        let clock = ManualClock::new();
        let queue = concurrency(1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut granted = WaitFor::new(&*queue, 1, None);
        let mut next = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut granted, &woken).is_pending());
        assert!(poll(&mut next, &woken).is_pending());
        queue.release(1);
        assert_eq!(woken.count(), 1, "the first waiter is woken");
        // It leaves without taking the permit: the next waiter gets it.
        drop(granted);
        assert_eq!(woken.count(), 2);
        assert_eq!(poll(&mut next, &woken), Poll::Ready(Ok(Duration::ZERO)));
        assert!(
            queue.try_acquire(1).is_err(),
            "the permit was passed on, not freed"
        );
    }

    #[test]
    fn an_alarm_wakes_the_first_waiter_when_its_booking_comes_due() {
        let clock = ManualClock::new();
        let queue = gcra(10, 1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut wait = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut wait, &woken).is_pending());
        assert_eq!(clock.next_alarm(), Some(Nanos::new(100_000_000)));
        clock.advance(ms(99));
        assert_eq!(woken.count(), 0);
        assert!(poll(&mut wait, &woken).is_pending());
        clock.advance(ms(1));
        assert_eq!(woken.count(), 1);
        assert_eq!(poll(&mut wait, &woken), Poll::Ready(Ok(ms(100))));
        assert_eq!(clock.pending_alarms(), 0);
    }

    #[test]
    fn an_alarm_at_the_deadline_times_a_waiter_out_and_serves_the_next() {
        let clock = ManualClock::new();
        let queue = concurrency(1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut impatient = WaitFor::new(&*queue, 1, Some(ms(50)));
        let mut patient = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut impatient, &woken).is_pending());
        assert!(poll(&mut patient, &woken).is_pending());
        assert_eq!(clock.next_alarm(), Some(Nanos::new(50_000_000)));
        clock.advance(ms(50));
        assert_eq!(
            poll(&mut impatient, &woken),
            Poll::Ready(Err(AcquireError::TimedOut))
        );
        queue.release(1);
        assert_eq!(poll(&mut patient, &woken), Poll::Ready(Ok(ms(50))));
    }

    #[test]
    fn a_stale_alarm_finds_nothing_due_and_arms_what_is_still_needed() {
        let clock = ManualClock::new();
        let queue = concurrency(1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut soon = WaitFor::new(&*queue, 1, Some(ms(10)));
        let mut later = WaitFor::new(&*queue, 1, Some(ms(30)));
        assert!(poll(&mut soon, &woken).is_pending());
        assert!(poll(&mut later, &woken).is_pending());
        drop(soon);
        // The alarm for the first deadline rings for nobody, and arms the second.
        clock.advance(ms(10));
        assert_eq!(clock.next_alarm(), Some(Nanos::new(30_000_000)));
        assert!(poll(&mut later, &woken).is_pending());
        clock.advance(ms(20));
        assert_eq!(
            poll(&mut later, &woken),
            Poll::Ready(Err(AcquireError::TimedOut))
        );
        assert_eq!(clock.pending_alarms(), 0);
    }

    #[test]
    fn a_close_fails_every_waiter_and_gives_back_their_bookings() {
        let clock = ManualClock::new();
        let queue = gcra(10, 1, &clock);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut booked = WaitFor::new(&*queue, 1, None);
        let mut behind = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut booked, &woken).is_pending());
        assert!(poll(&mut behind, &woken).is_pending());
        queue.close();
        assert_eq!(
            poll(&mut booked, &woken),
            Poll::Ready(Err(AcquireError::Closed))
        );
        assert_eq!(
            poll(&mut behind, &woken),
            Poll::Ready(Err(AcquireError::Closed))
        );
        assert_eq!(queue.try_acquire(1), Err(Denied::Closed));
        // The booking for 100 ms went back: at 100 ms the gate grants one again.
        clock.advance(ms(100));
        assert!(queue.gate.acquire(clock.now(), 1).is_ok());
    }

    #[test]
    fn a_bounded_queue_refuses_what_would_overflow_it() {
        let clock = ManualClock::new();
        let queue = concurrency(1, &clock);
        queue.set_max_units(2);
        assert!(queue.try_acquire(1).is_ok());
        let woken = Woken::new();
        let mut two = WaitFor::new(&*queue, 2, None);
        // More than the limit can ever grant: refused at once.
        assert_eq!(
            poll(&mut two, &woken),
            Poll::Ready(Err(AcquireError::Insufficient(
                crate::decision::InsufficientCapacity::new(2, 1)
            )))
        );
        let mut first = WaitFor::new(&*queue, 1, None);
        let mut second = WaitFor::new(&*queue, 1, None);
        let mut third = WaitFor::new(&*queue, 1, None);
        assert!(poll(&mut first, &woken).is_pending());
        assert!(poll(&mut second, &woken).is_pending());
        assert_eq!(
            poll(&mut third, &woken),
            Poll::Ready(Err(AcquireError::QueueFull { capacity: 2 }))
        );
    }
}
