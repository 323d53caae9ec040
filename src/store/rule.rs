//! How a store applies a [`Rule`] to a key's stored state: [`RuleState`], the state
//! of one key under a rule of any kind, and the [`Step`]s a request takes on it.
//!
//! The store is one reader of the algorithm registry (`crate::algorithm`'s
//! `algorithms!` list, in `src/algorithm/registry.rs`): `rule_states!` below turns the
//! list into the state enum and the `match`es that step it, so that a new algorithm
//! needs no line here.

use std::time::Duration;

use crate::algorithm::{Algorithm, Rule};
use crate::time::Nanos;

// The registry's reader here: the state a store keeps per key, and one dispatch per
// step, on the algorithm's own state.
macro_rules! rule_states {
    ($($(#[$doc:meta])* $variant:ident($ty:ty),)*) => {
        /// The state of one key under a [`Rule`].
        #[derive(Clone, Debug, PartialEq)]
        pub(crate) enum RuleState {
            $($variant(<$ty as Algorithm>::State),)*
        }

        impl Rule {
            /// A key's state before any request, at `now`.
            pub(crate) fn initial_state(&self, now: Nanos) -> RuleState {
                match self {
                    $(Rule::$variant(a) => RuleState::$variant(a.initial_state(now)),)*
                }
            }

            /// Applies `op` to `state`. `None` if the state is of another kind.
            pub(crate) fn apply(
                &self,
                state: &mut RuleState,
                now: Nanos,
                op: Step,
            ) -> Option<RuleOutcome> {
                Some(match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => step(a, s, now, op),)*
                    _ => return None,
                })
            }

            /// Applies `op` to `state`, and tells from when the state may be
            /// forgotten if `op` changed it (`None` if it did not): one dispatch,
            /// and the change seen on the algorithm's own state, not the enum of them
            /// all. `None` if the state is of another kind.
            #[inline]
            pub(crate) fn apply_changed(
                &self,
                state: &mut RuleState,
                now: Nanos,
                op: Step,
            ) -> Option<(RuleOutcome, Option<Nanos>)> {
                Some(match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => step_changed(a, s, now, op),)*
                    _ => return None,
                })
            }

            /// What forgetting `state` would give back at `now`, in the algorithm's
            /// own unit ([`Algorithm::forgetting_gives_back`]).
            fn forgetting_gives_back(&self, state: &RuleState, now: Nanos) -> u64 {
                match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => a.forgetting_gives_back(s, now),)*
                    _ => 0,
                }
            }

            /// From when `state` may be forgotten: a store drops the key then.
            pub(crate) fn expires_at(&self, state: &RuleState) -> Nanos {
                match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => a.idle_at(s),)*
                    _ => Nanos::ZERO,
                }
            }
        }
    };
}

crate::algorithm::algorithms!(rule_states);

/// What forgetting a key's state gives back, as a store records it when it writes the
/// state: in permits whatever the rule, so that keys of different rules in one store
/// compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GivesBack(u64);

impl GivesBack {
    /// Set for a token bucket, whose debt runs out with time: the rest is its
    /// emission interval, and the debt is read from the key's idle time.
    const DEBT: u64 = 1 << 63;

    pub(crate) const NOTHING: GivesBack = GivesBack(0);

    /// At `now`, for a key idle at `idle_at`, in 2⁻³² permits: a token bucket's debt
    /// to the fraction, so that its keys go in the order of their idle times.
    #[inline]
    pub(crate) fn at(self, idle_at: Nanos, now: Nanos) -> u64 {
        if self.0 & Self::DEBT == 0 {
            return self.0.saturating_mul(1 << 32);
        }
        let interval = (self.0 & !Self::DEBT) as f64;
        let debt = idle_at.as_u64().saturating_sub(now.as_u64()) as f64;
        // A float division, not a `u128` one (a call of 40 instructions, for each of
        // the 8 keys sampled); the cast saturates.
        (debt / interval * 4_294_967_296.0) as u64
    }
}

impl Rule {
    /// What forgetting `state` gives back from `now` on: for a token bucket its
    /// emission interval, as its debt then shrinks with time; for the rest what it
    /// gives back at `now`, which time only lessens.
    #[inline]
    pub(crate) fn gives_back(&self, state: &RuleState, now: Nanos) -> GivesBack {
        let interval = match self {
            Rule::Gcra(a) => a.words()[0],
            Rule::LeakyBucket(a) => a.words()[0],
            _ => {
                let permits = self.forgetting_gives_back(state, now);
                return GivesBack(permits.min(GivesBack::DEBT - 1));
            }
        };
        match interval {
            0 => GivesBack(0),
            _ => GivesBack(GivesBack::DEBT | interval.min(GivesBack::DEBT - 1)),
        }
    }
}

/// One step, and from when the state may be forgotten if the step changed it.
#[inline]
fn step_changed<A: Algorithm<State: PartialEq>>(
    algorithm: &A,
    state: &mut A::State,
    now: Nanos,
    op: Step,
) -> (RuleOutcome, Option<Nanos>) {
    if std::mem::needs_drop::<A::State>() {
        // A state that owns memory (a sliding log's entries) is not cloned on every
        // call to be compared: it changes unless a denial that lasts left it as it
        // was, which is what `denial_lasts` promises.
        let verdict = step(algorithm, state, now, op);
        let unchanged = !verdict.is_admitted() && algorithm.denial_lasts();
        return (verdict, (!unchanged).then(|| algorithm.idle_at(state)));
    }
    let before = state.clone();
    let verdict = step(algorithm, state, now, op);
    let expires_at = (*state != before).then(|| algorithm.idle_at(state));
    (verdict, expires_at)
}

/// One step of one algorithm on its own state.
#[inline]
fn step<A: Algorithm>(algorithm: &A, state: &mut A::State, now: Nanos, op: Step) -> RuleOutcome {
    match op {
        Step::Acquire(n) => RuleOutcome::Decision(algorithm.acquire(state, now, n)),
        Step::Peek(n) => RuleOutcome::Decision(algorithm.peek(state, now, n)),
        Step::Reserve(n, max_wait) => {
            RuleOutcome::Reservation(algorithm.reserve(state, now, n, max_wait))
        }
        Step::Refund(n) => {
            algorithm.refund(state, now, n);
            RuleOutcome::Refunded
        }
    }
}

/// What one check is asked to do; see [`Op`](crate::store::Op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Acquire(u64),
    Peek(u64),
    Reserve(u64, Duration),
    Refund(u64),
}

impl Step {
    /// The same step for `n` permits.
    #[inline]
    pub(crate) fn with_permits(self, n: u64) -> Step {
        match self {
            Step::Acquire(_) => Step::Acquire(n),
            Step::Peek(_) => Step::Peek(n),
            Step::Reserve(_, max_wait) => Step::Reserve(n, max_wait),
            Step::Refund(_) => Step::Refund(n),
        }
    }
}

/// One check's answer, before the answers of a request's checks are combined: of
/// the same type as the request's answer, so that a request of one check hands it on
/// as it is, with no copy into another enum.
pub(crate) use super::request::Reply as RuleOutcome;
