//! Several rules combined, all-or-nothing: a request passes only if every rule admits
//! it, and a denial by one rule consumes nothing from the others.

use std::time::Duration;

use super::{Algorithm, check_capacity};
use crate::decision::{Admitted, Decision, Denied, Reservation};
use crate::error::ConfigError;
use crate::time::Nanos;

/// Every rule must admit: for example 100 per second **and** 20 per 100 ms.
///
/// The permits are taken from each rule only if all admit: a refusal by any rule
/// leaves every rule's state as it was. A denial reports the rule that makes the caller wait
/// longest, so retrying after its `retry_after` is not denied by another rule for the
/// same reason. An admission reports the rule with the fewest permits left: its
/// limit, remaining and reset, all of that one rule.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Limiter, Quota};
/// use tollgate::algorithm::{AllOf, Gcra};
/// use tollgate::time::ManualClock;
///
/// let rules = AllOf::new(vec![
///     Gcra::new(Quota::per_second(100)?),
///     Gcra::new(Quota::new(20, Duration::from_millis(100))?),
/// ])?;
/// let limiter = Limiter::with_clock(rules, ManualClock::new());
/// assert!(limiter.try_acquire(20).is_ok());
/// // The 20/100ms rule is spent; the 100/s rule keeps the 80 it still has.
/// assert!(limiter.try_acquire(1).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AllOf<A> {
    rules: Vec<A>,
}

impl<A: Algorithm> AllOf<A> {
    /// Combines `rules`, all of which must admit.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for an empty list: no rule would mean no limit.
    pub fn new(rules: Vec<A>) -> Result<AllOf<A>, ConfigError> {
        if rules.is_empty() {
            return Err(ConfigError::Zero { parameter: "rules" });
        }
        Ok(AllOf { rules })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[A] {
        &self.rules
    }

    /// Mutable access to one rule, for reconfiguring it; the state is kept.
    pub fn rule_mut(&mut self, index: usize) -> Option<&mut A> {
        self.rules.get_mut(index)
    }

    /// Checks every rule without consuming; the tightest admission, or the denial
    /// that waits longest.
    fn check(&self, states: &[A::State], now: Nanos, n: u64) -> Decision {
        let mut tightest: Option<Admitted> = None;
        let mut denial: Option<Denied> = None;
        for (i, (rule, state)) in self.rules.iter().zip(states).enumerate() {
            match rule.peek(state, now, n) {
                Ok(a) => {
                    let a = a.of_rule(i);
                    tightest = Some(match tightest {
                        Some(t) => tighter(t, a),
                        None => a,
                    })
                }
                Err(d) => denial = Some(later_denial(denial, d.of_rule(i))),
            }
        }
        match (denial, tightest) {
            (Some(d), _) => Err(d),
            (None, Some(a)) => Ok(a),
            // `new` refuses an empty list.
            (None, None) => Ok(Admitted::new(0, 0, Duration::ZERO)),
        }
    }
}

/// The most rules [`acquire_all`] saves states for, on the stack; more are checked
/// first, then acquired.
const SAVED: usize = 4;

/// Acquires from each rule in turn, each on its own state; if one refuses, puts back
/// every state as it was and answers `None`. One decision per rule when all admit,
/// where checking first and then acquiring takes two. The admissions fold as a check
/// folds them. For at most [`SAVED`] rules whose states are plain data.
#[inline]
fn acquire_all<A: Algorithm>(
    rules: &[A],
    states: &mut [A::State],
    now: Nanos,
    n: u64,
) -> Option<Admitted> {
    let mut saved: [Option<A::State>; SAVED] = [const { None }; SAVED];
    let mut folded: Option<Admitted> = None;
    let mut refused = false;
    for (i, ((rule, state), slot)) in rules
        .iter()
        .zip(states.iter_mut())
        .zip(&mut saved)
        .enumerate()
    {
        *slot = Some(state.clone());
        match rule.acquire(state, now, n) {
            Ok(admitted) => {
                let admitted = admitted.of_rule(i);
                folded = Some(match folded {
                    Some(before) => tighter(before, admitted),
                    None => admitted,
                })
            }
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    if refused {
        for (state, slot) in states.iter_mut().zip(saved) {
            if let Some(before) = slot {
                *state = before;
            }
        }
        return None;
    }
    folded
}

/// The admission with fewer permits left (the first on a tie), whole: its limit,
/// remaining and reset all describe that one rule, as a denial describes the rule
/// that denied. (It took the later reset of the two, so that an HTTP `RateLimit`
/// field paired one rule's `r` with another rule's `t`.) Compares and copies the
/// decisions as they are, without dividing out both `remaining` values.
#[inline]
pub(crate) fn tighter(a: Admitted, b: Admitted) -> Admitted {
    if b.fewer_remaining_than(&a) { b } else { a }
}

/// "Never" outranks "not now"; among "not now", the longer wait wins, and a wait
/// for a release outlasts any time.
pub(crate) fn later_denial(current: Option<Denied>, new: Denied) -> Denied {
    match (current, new) {
        (None, d) => d,
        (Some(d @ (Denied::Insufficient(_) | Denied::Closed)), _) => d,
        (Some(_), d @ (Denied::Insufficient(_) | Denied::Closed)) => d,
        (Some(Denied::Limited(a)), Denied::Limited(b)) => {
            if b.retry() > a.retry() {
                Denied::Limited(b)
            } else {
                Denied::Limited(a)
            }
        }
    }
}

impl<A: Algorithm> Algorithm for AllOf<A> {
    type State = Vec<A::State>;
    const HELD: bool = A::HELD;

    fn initial_state(&self, now: Nanos) -> Vec<A::State> {
        self.rules.iter().map(|r| r.initial_state(now)).collect()
    }

    fn acquire(&self, states: &mut Vec<A::State>, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.capacity())?;
        // A state without heap parts is copied for nothing, so each rule acquires at
        // once and a refusal puts the copies back. A state that owns memory (a
        // sliding log's entries) would be cloned on every call: check all first.
        if self.rules.len() <= SAVED && !std::mem::needs_drop::<A::State>() {
            return match acquire_all(&self.rules, states, now, n) {
                Some(admitted) => Ok(admitted),
                // Some rule refused, and every state is as it was: the denial is the
                // one that waits longest of all the rules', as a check finds it.
                None => self.check(states, now, n),
            };
        }
        let decision = self.check(states, now, n)?;
        for (rule, state) in self.rules.iter().zip(states.iter_mut()) {
            // Each rule admitted this exact request in `check`; a pure rule decides
            // the same again.
            let _ = rule.acquire(state, now, n);
        }
        Ok(decision)
    }

    fn peek(&self, states: &Vec<A::State>, now: Nanos, n: u64) -> Decision {
        check_capacity(n, self.capacity())?;
        self.check(states, now, n)
    }

    /// Immediate reservations only. Booking each rule at its own future time would let
    /// uses bunch up once delayed to the latest rule's time, breaking the earlier
    /// rules' limits; a denial's `retry_after` tells when to come back.
    fn reserve(
        &self,
        states: &mut Vec<A::State>,
        now: Nanos,
        n: u64,
        _max_wait: Duration,
    ) -> Result<Reservation, Denied> {
        self.acquire(states, now, n)
            .map(|_| Reservation::new(n, Duration::ZERO))
    }

    fn refund(&self, states: &mut Vec<A::State>, now: Nanos, n: u64) {
        for (rule, state) in self.rules.iter().zip(states.iter_mut()) {
            rule.refund(state, now, n);
        }
    }

    fn capacity(&self) -> u64 {
        self.rules.iter().map(A::capacity).min().unwrap_or(0)
    }

    /// When every rule's does.
    fn denial_lasts(&self) -> bool {
        self.rules.iter().all(A::denial_lasts)
    }

    fn idle_at(&self, states: &Vec<A::State>) -> Nanos {
        self.rules
            .iter()
            .zip(states)
            .map(|(r, s)| r.idle_at(s))
            .max()
            .unwrap_or(Nanos::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Gcra;
    use crate::quota::Quota;

    fn two_rules() -> AllOf<Gcra> {
        AllOf::new(vec![
            Gcra::new(Quota::per_second(100).unwrap()),
            Gcra::new(Quota::new(20, Duration::from_millis(100)).unwrap()),
        ])
        .unwrap()
    }

    #[test]
    fn empty_rules_are_an_error() {
        assert_eq!(
            AllOf::<Gcra>::new(vec![]),
            Err(ConfigError::Zero { parameter: "rules" })
        );
    }

    #[test]
    fn a_denial_by_one_rule_consumes_nothing_from_the_others() {
        let all = two_rules();
        let mut s = all.initial_state(Nanos::ZERO);
        all.acquire(&mut s, Nanos::ZERO, 20).unwrap();
        let before = s.clone();
        assert!(all.acquire(&mut s, Nanos::ZERO, 1).is_err());
        assert_eq!(s, before);
    }

    #[test]
    fn reports_the_tightest_rule() {
        let all = two_rules();
        let mut s = all.initial_state(Nanos::ZERO);
        let a = all.acquire(&mut s, Nanos::ZERO, 5).unwrap();
        assert_eq!((a.limit(), a.remaining()), (20, 15));
    }

    #[test]
    fn denial_waits_for_the_slowest_rule() {
        let all = AllOf::new(vec![
            Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap()),
            Gcra::new(Quota::per_second(1).unwrap().burst(1).unwrap()),
        ])
        .unwrap();
        let mut s = all.initial_state(Nanos::ZERO);
        all.acquire(&mut s, Nanos::ZERO, 1).unwrap();
        let d = all.acquire(&mut s, Nanos::ZERO, 1).unwrap_err();
        assert_eq!(d.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn capacity_is_the_smallest_rule() {
        let all = two_rules();
        assert_eq!(all.capacity(), 20);
        let mut s = all.initial_state(Nanos::ZERO);
        assert!(all.acquire(&mut s, Nanos::ZERO, 21).unwrap_err().is_never());
    }
}
