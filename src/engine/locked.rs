//! [`Locked`]: an algorithm and its state under one short mutex.

use std::fmt;
use std::time::Duration;

use super::hint::DenialHint;
use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Reservation};
use crate::sync::Mutex;
use crate::time::Nanos;

/// An algorithm and its state under one mutex. The critical section is the pure
/// decision: no allocation, I/O or clock read inside.
///
/// A repeated denial of one permit is answered from a [`DenialHint`] without the
/// lock.
pub(crate) struct Locked<A: Algorithm> {
    inner: Mutex<Inner<A>>,
    hint: DenialHint,
}

struct Inner<A: Algorithm> {
    algorithm: A,
    state: A::State,
    /// The latest time a decision was asked at: a denial at an earlier one may be
    /// decided as of this one, so only a denial at the latest time is a hint.
    latest: Nanos,
}

impl<A: Algorithm> fmt::Debug for Locked<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = self.inner.lock();
        f.debug_struct("Locked")
            .field("algorithm", &guard.algorithm)
            .field("state", &guard.state)
            .finish()
    }
}

impl<A: Algorithm> Locked<A> {
    pub(crate) fn new(algorithm: A, now: Nanos) -> Self {
        let state = algorithm.initial_state(now);
        Locked {
            inner: Mutex::new(Inner {
                algorithm,
                state,
                latest: now,
            }),
            hint: DenialHint::default(),
        }
    }

    #[inline]
    pub(crate) fn acquire(&self, now: Nanos, n: u64) -> Decision {
        if n == 1 {
            if let Some(denied) = self.hint.deny(now) {
                return Err(denied);
            }
        }
        self.acquire_locked(now, n)
    }

    fn acquire_locked(&self, now: Nanos, n: u64) -> Decision {
        let mut guard = self.inner.lock_briefly();
        let inner = &mut *guard;
        let latest = inner.latest <= now;
        inner.latest = inner.latest.max(now);
        let decision = inner.algorithm.acquire(&mut inner.state, now, n);
        match &decision {
            Err(Denied::Limited(limited)) if n == 1 && latest && inner.algorithm.denial_lasts() => {
                self.hint.record(now, limited)
            }
            // A denial that does not last may have changed the state.
            Err(_) if !inner.algorithm.denial_lasts() => self.hint.clear(),
            Err(_) => {}
            Ok(_) if n == 0 => {}
            Ok(_) => self.hint.clear(),
        }
        decision
    }

    pub(crate) fn peek(&self, now: Nanos, n: u64) -> Decision {
        let guard = self.inner.lock_briefly();
        guard.algorithm.peek(&guard.state, now, n)
    }

    pub(crate) fn reserve(
        &self,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        let mut guard = self.inner.lock_briefly();
        let inner = &mut *guard;
        inner.latest = inner.latest.max(now);
        let reservation = inner.algorithm.reserve(&mut inner.state, now, n, max_wait);
        if reservation.is_ok() {
            self.hint.clear();
        }
        reservation
    }

    pub(crate) fn refund(&self, now: Nanos, n: u64) {
        let mut guard = self.inner.lock_briefly();
        let inner = &mut *guard;
        inner.latest = inner.latest.max(now);
        inner.algorithm.refund(&mut inner.state, now, n);
        self.hint.clear();
    }

    pub(crate) fn update<R>(&self, f: &mut dyn FnMut(&mut A, &mut A::State) -> R) -> R {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let result = f(&mut inner.algorithm, &mut inner.state);
        self.hint.clear();
        result
    }

    pub(crate) fn snapshot(&self) -> (A, A::State) {
        let guard = self.inner.lock();
        (guard.algorithm.clone(), guard.state.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{RefreshPeriod, SlidingLog, SmoothBursty};
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Acquire(u64),
        Reserve(u64, u64),
        Refund(u64),
        Peek(u64),
    }

    fn op() -> impl Strategy<Value = (i64, Op)> {
        let step = prop_oneof![Just(0i64), -1_000i64..1_000, -1_000_000i64..900_000_000];
        let op = prop_oneof![
            4 => (1u64..3).prop_map(Op::Acquire),
            1 => (1u64..3, 0u64..2_000_000_000).prop_map(|(n, w)| Op::Reserve(n, w)),
            1 => (1u64..3).prop_map(Op::Refund),
            1 => (0u64..3).prop_map(Op::Peek),
        ];
        (step, op)
    }

    /// The cell, hint and all, answers exactly as the bare algorithm.
    fn same_as_bare<A: Algorithm>(alg: A, ops: &[(i64, Op)]) -> Result<(), TestCaseError> {
        let mut now = 1u64 << 40;
        let cell = Locked::new(alg.clone(), Nanos::new(now));
        let mut state = alg.initial_state(Nanos::new(now));
        for (step, op) in ops {
            now = now.saturating_add_signed(*step);
            let t = Nanos::new(now);
            match *op {
                Op::Acquire(n) => {
                    prop_assert_eq!(cell.acquire(t, n), alg.acquire(&mut state, t, n));
                    // Again at once and a little later: the hint's answers.
                    prop_assert_eq!(cell.acquire(t, n), alg.acquire(&mut state, t, n));
                    let later = t + Duration::from_micros(3);
                    prop_assert_eq!(cell.acquire(later, n), alg.acquire(&mut state, later, n));
                }
                Op::Reserve(n, w) => {
                    let max_wait = Duration::from_nanos(w);
                    prop_assert_eq!(
                        cell.reserve(t, n, max_wait),
                        alg.reserve(&mut state, t, n, max_wait)
                    );
                }
                Op::Refund(n) => {
                    cell.refund(t, n);
                    alg.refund(&mut state, t, n);
                }
                Op::Peek(n) => prop_assert_eq!(cell.peek(t, n), alg.peek(&state, t, n)),
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn a_hinted_sliding_log_decides_as_the_bare_algorithm(
            ops in prop::collection::vec(op(), 1..80),
        ) {
            same_as_bare(SlidingLog::new(2, Duration::from_secs(1)).unwrap(), &ops)?;
        }

        #[test]
        fn a_sliding_log_counting_blocked_attempts_decides_as_the_bare_algorithm(
            ops in prop::collection::vec(op(), 1..80),
        ) {
            let log = SlidingLog::new(2, Duration::from_secs(1)).unwrap().count_blocked(true);
            same_as_bare(log, &ops)?;
        }

        #[test]
        fn a_hinted_smooth_limiter_decides_as_the_bare_algorithm(
            ops in prop::collection::vec(op(), 1..80),
        ) {
            same_as_bare(SmoothBursty::new(2.0).unwrap(), &ops)?;
        }

        #[test]
        fn a_hinted_refresh_period_decides_as_the_bare_algorithm(
            ops in prop::collection::vec(op(), 1..80),
        ) {
            let alg = RefreshPeriod::new(2, Duration::from_secs(1), Duration::ZERO).unwrap();
            same_as_bare(alg, &ops)?;
        }
    }

    #[test]
    fn a_changed_configuration_forgets_the_hint() {
        let cell = Locked::new(
            SlidingLog::new(1, Duration::from_secs(1)).unwrap(),
            Nanos::ZERO,
        );
        assert!(cell.acquire(Nanos::ZERO, 1).is_ok());
        assert!(cell.acquire(Nanos::ZERO, 1).is_err());
        cell.update(&mut |alg, _| alg.set_limit(2).unwrap());
        assert!(cell.acquire(Nanos::ZERO, 1).is_ok());
    }
}
