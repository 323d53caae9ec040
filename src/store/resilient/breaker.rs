//! The circuit breaker that a [`Resilient`](super::Resilient) store drives: whether a
//! request may call the store, and what each call's end tells about the store.
//!
//! The breaker knows nothing of stores, policies or logs: it is a state machine over
//! the clock, behind one lock, and reports the changes a caller counts and logs.

use std::time::Duration;

use crate::sync::{Mutex, MutexGuard};
use crate::time::{Clock, Nanos};

/// The circuit breaker's state.
///
/// # Examples
///
/// ```
/// use tollgate::store::{BreakerState, FailurePolicy, MemoryStore, Resilient};
/// use tollgate::KeyedConfig;
///
/// let store = Resilient::new(MemoryStore::new(KeyedConfig::new(100), "api")?, FailurePolicy::Open)?;
/// assert_eq!(store.stats().state, BreakerState::Closed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go to the store.
    Closed,
    /// Recent calls failed: requests go straight to the policy until the cool-down
    /// has passed and a request comes to probe the store.
    Open,
    /// One probe is with the store; other requests go to the policy until it answers.
    HalfOpen,
}

/// What a call told about the store's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallResult {
    /// The store answered.
    Answered,
    /// A timeout or an error that may pass.
    Failed,
    /// Nothing: the call was dropped, or failed for a reason of its own.
    NoSign,
}

/// A change of state worth counting and logging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// Failures opened the breaker, for a whole cool-down.
    Opened,
    /// A probe was answered: calls go to the store again.
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed { failures: u32 },
    Open { until: Nanos },
    HalfOpen,
}

/// Opens after `threshold` consecutive failures, for `cool_down`; then lets one probe
/// through, whose answer closes it and whose failure opens it again.
#[derive(Debug)]
pub(crate) struct Breaker {
    phase: Mutex<Phase>,
    threshold: u32,
    cool_down: Duration,
}

impl Breaker {
    /// A closed breaker. A `threshold` of zero opens it at the first failure.
    pub(crate) fn new(threshold: u32, cool_down: Duration) -> Breaker {
        Breaker {
            phase: Mutex::new(Phase::Closed { failures: 0 }),
            threshold,
            cool_down,
        }
    }

    /// How long the breaker stays open after failures.
    pub(crate) fn cool_down(&self) -> Duration {
        self.cool_down
    }

    fn lock(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock()
    }

    pub(crate) fn state(&self) -> BreakerState {
        match *self.lock() {
            Phase::Closed { .. } => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen => BreakerState::HalfOpen,
        }
    }

    /// A call to make, or `None` to go straight to the policy. The first call after
    /// the cool-down is the probe, and the breaker is half open until it ends.
    pub(crate) fn admit<'a, C: Clock>(&'a self, clock: &'a C) -> Option<Attempt<'a, C>> {
        let mut phase = self.lock();
        let probe = match *phase {
            Phase::Closed { .. } => false,
            Phase::Open { until } if clock.now() >= until => {
                *phase = Phase::HalfOpen;
                true
            }
            Phase::Open { .. } | Phase::HalfOpen => return None,
        };
        Some(Attempt {
            breaker: self,
            clock,
            probe,
            finished: false,
        })
    }

    /// How long until a call may go to the store: the rest of the cool-down while
    /// open, `probe_deadline` (the probe's deadline) while half open.
    pub(crate) fn closed_in(&self, now: Nanos, probe_deadline: Duration) -> Duration {
        match *self.lock() {
            Phase::Closed { .. } => Duration::ZERO,
            Phase::Open { until } => until.saturating_since(now),
            Phase::HalfOpen => probe_deadline,
        }
    }

    fn record(&self, probe: bool, result: CallResult, now: Nanos) -> Option<Transition> {
        let mut phase = self.lock();
        let before = *phase;
        let reopen = Phase::Open {
            until: now + self.cool_down,
        };
        *phase = match (before, probe, result) {
            // Only the probe decides a half-open breaker; answers to calls sent
            // before the breaker opened change nothing once it is open.
            (Phase::HalfOpen, true, CallResult::Answered) => Phase::Closed { failures: 0 },
            (Phase::HalfOpen, true, CallResult::Failed) => reopen,
            // A dropped probe goes back to open with no cool-down, so that the next
            // call probes: the store did not fail.
            (Phase::HalfOpen, true, CallResult::NoSign) => Phase::Open { until: now },
            (Phase::Closed { .. }, _, CallResult::Answered) => Phase::Closed { failures: 0 },
            (Phase::Closed { failures }, _, CallResult::Failed) => {
                let failures = failures.saturating_add(1);
                if failures >= self.threshold {
                    reopen
                } else {
                    Phase::Closed { failures }
                }
            }
            (unchanged, _, _) => unchanged,
        };
        match (before, *phase, result) {
            (Phase::Closed { .. } | Phase::HalfOpen, Phase::Open { .. }, CallResult::Failed) => {
                Some(Transition::Opened)
            }
            (Phase::HalfOpen, Phase::Closed { .. }, _) => Some(Transition::Closed),
            _ => None,
        }
    }
}

/// A call the breaker let through. It must end with [`finish`](Attempt::finish);
/// dropped unfinished, it tells nothing (a dropped probe lets the next call probe).
#[derive(Debug)]
pub(crate) struct Attempt<'a, C: Clock> {
    breaker: &'a Breaker,
    clock: &'a C,
    probe: bool,
    finished: bool,
}

impl<C: Clock> Attempt<'_, C> {
    /// Records what the call told; the change of state it made, if any.
    pub(crate) fn finish(mut self, result: CallResult) -> Option<Transition> {
        self.finished = true;
        self.breaker.record(self.probe, result, self.clock.now())
    }
}

impl<C: Clock> Drop for Attempt<'_, C> {
    fn drop(&mut self) {
        if !self.finished {
            self.breaker
                .record(self.probe, CallResult::NoSign, self.clock.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::ManualClock;

    const COOL_DOWN: Duration = Duration::from_secs(1);
    const DEADLINE: Duration = Duration::from_millis(5);

    fn breaker() -> (Breaker, ManualClock) {
        (Breaker::new(3, COOL_DOWN), ManualClock::new())
    }

    /// Admits a call and ends it with `result`.
    fn call(breaker: &Breaker, clock: &ManualClock, result: CallResult) -> Option<Transition> {
        breaker.admit(clock).expect("admitted").finish(result)
    }

    fn trip(breaker: &Breaker, clock: &ManualClock) {
        call(breaker, clock, CallResult::Failed);
        call(breaker, clock, CallResult::Failed);
        assert_eq!(
            call(breaker, clock, CallResult::Failed),
            Some(Transition::Opened)
        );
    }

    #[test]
    fn opens_at_the_threshold_of_consecutive_failures() {
        let (breaker, clock) = breaker();
        for _ in 0..2 {
            assert_eq!(call(&breaker, &clock, CallResult::Failed), None);
            assert_eq!(breaker.state(), BreakerState::Closed);
        }
        assert_eq!(
            call(&breaker, &clock, CallResult::Failed),
            Some(Transition::Opened)
        );
        assert_eq!(breaker.state(), BreakerState::Open);
        assert!(breaker.admit(&clock).is_none());
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), COOL_DOWN);
    }

    #[test]
    fn only_an_answer_resets_the_count_of_failures() {
        let (breaker, clock) = breaker();
        for _ in 0..5 {
            call(&breaker, &clock, CallResult::Failed);
            call(&breaker, &clock, CallResult::Failed);
            drop(breaker.admit(&clock));
            call(&breaker, &clock, CallResult::NoSign);
            call(&breaker, &clock, CallResult::Answered);
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
        call(&breaker, &clock, CallResult::Failed);
        call(&breaker, &clock, CallResult::Failed);
        drop(breaker.admit(&clock));
        assert_eq!(
            call(&breaker, &clock, CallResult::Failed),
            Some(Transition::Opened),
            "a dropped call neither counts nor resets"
        );
    }

    #[test]
    fn one_probe_after_the_cool_down_and_its_answer_closes() {
        let (breaker, clock) = breaker();
        trip(&breaker, &clock);
        clock.advance(COOL_DOWN - Duration::from_nanos(1));
        assert!(breaker.admit(&clock).is_none());
        assert_eq!(
            breaker.closed_in(clock.now(), DEADLINE),
            Duration::from_nanos(1)
        );
        clock.advance(Duration::from_nanos(1));
        let probe = breaker.admit(&clock).expect("the probe");
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        assert!(breaker.admit(&clock).is_none(), "one probe at a time");
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), DEADLINE);
        assert_eq!(probe.finish(CallResult::Answered), Some(Transition::Closed));
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), Duration::ZERO);
    }

    #[test]
    fn a_failed_probe_opens_for_a_whole_cool_down() {
        let (breaker, clock) = breaker();
        trip(&breaker, &clock);
        clock.advance(COOL_DOWN);
        let probe = breaker.admit(&clock).expect("the probe");
        clock.advance(DEADLINE);
        assert_eq!(probe.finish(CallResult::Failed), Some(Transition::Opened));
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), COOL_DOWN);
    }

    #[test]
    fn a_dropped_probe_lets_the_next_call_probe_at_once() {
        let (breaker, clock) = breaker();
        trip(&breaker, &clock);
        clock.advance(COOL_DOWN);
        drop(breaker.admit(&clock).expect("the probe"));
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), Duration::ZERO);
        let probe = breaker.admit(&clock).expect("probes again");
        assert_eq!(probe.finish(CallResult::NoSign), None, "nothing opened");
        assert!(breaker.admit(&clock).is_some(), "and again");
    }

    /// A call sent while closed and ending once the breaker is open (or half open)
    /// must not move the cool-down, nor end the probe's turn.
    #[test]
    fn late_calls_change_nothing_once_the_breaker_is_open() {
        let (breaker, clock) = breaker();
        let late = breaker.admit(&clock).unwrap();
        let late_answer = breaker.admit(&clock).unwrap();
        trip(&breaker, &clock);
        clock.advance(COOL_DOWN / 2);
        assert_eq!(late.finish(CallResult::Failed), None);
        assert_eq!(breaker.closed_in(clock.now(), DEADLINE), COOL_DOWN / 2);
        clock.advance(COOL_DOWN / 2);
        let probe = breaker.admit(&clock).unwrap();
        assert_eq!(late_answer.finish(CallResult::Answered), None);
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        assert_eq!(probe.finish(CallResult::Failed), Some(Transition::Opened));
    }
}
