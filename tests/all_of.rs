//! Combined rules: all-or-nothing against independent rules.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::Quota;
use tollgate::algorithm::{Algorithm, AllOf, Gcra, SlidingLog};
use tollgate::time::Nanos;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The combination admits exactly when every rule alone would, and a denial
    /// leaves every rule's state untouched.
    #[test]
    fn admits_iff_every_rule_admits(
        rules in prop::collection::vec((1u64..20, 1u64..200, 1u64..6), 1..7),
        ops in prop::collection::vec((0u64..50_000_000, 0u64..6), 1..100),
    ) {
        let rules: Vec<Gcra> = rules
            .into_iter()
            .map(|(count, ms, burst)| {
                Gcra::new(Quota::new(count, Duration::from_millis(ms)).unwrap().burst(burst).unwrap())
            })
            .collect();
        let all = AllOf::new(rules.clone()).unwrap();
        let mut state = all.initial_state(Nanos::ZERO);
        let mut now = 0;
        for (advance, n) in ops {
            now += advance;
            let t = Nanos::new(now);
            let each_admits = rules.iter().zip(&state).all(|(r, s)| r.peek(s, t, n).is_ok());
            let before = state.clone();
            let decision = all.acquire(&mut state, t, n);
            prop_assert_eq!(decision.is_ok(), each_admits);
            if decision.is_err() {
                prop_assert_eq!(&state, &before, "a combined denial changed a rule's state");
            }
            if let Ok(admitted) = &decision {
                // As each rule alone: every state acquired, and the fewest remaining.
                let mut alone = before.clone();
                let mut fewest = u64::MAX;
                for (rule, s) in rules.iter().zip(alone.iter_mut()) {
                    let each = rule.acquire(s, t, n).unwrap();
                    fewest = fewest.min(each.remaining());
                }
                prop_assert_eq!(&state, &alone);
                prop_assert_eq!(admitted.remaining(), fewest);
            }
        }
    }

    /// The same for rules whose state owns memory (checked first, then acquired),
    /// including logs that count blocked attempts: a combined denial records nothing.
    #[test]
    fn sliding_logs_admit_iff_every_rule_admits(
        rules in prop::collection::vec((1u64..8, 1u64..200, any::<bool>()), 1..4),
        ops in prop::collection::vec((0u64..50_000_000, 1u64..4), 1..100),
    ) {
        let rules: Vec<SlidingLog> = rules
            .into_iter()
            .map(|(limit, ms, blocked)| {
                SlidingLog::new(limit, Duration::from_millis(ms)).unwrap().count_blocked(blocked)
            })
            .collect();
        let all = AllOf::new(rules.clone()).unwrap();
        let mut state = all.initial_state(Nanos::ZERO);
        let mut now = 0;
        for (advance, n) in ops {
            now += advance;
            let t = Nanos::new(now);
            let each_admits = rules.iter().zip(&state).all(|(r, s)| r.peek(s, t, n).is_ok());
            let before = state.clone();
            let decision = all.acquire(&mut state, t, n);
            prop_assert_eq!(decision.is_ok(), each_admits);
            if decision.is_err() {
                prop_assert_eq!(&state, &before, "a combined denial changed a rule's state");
            } else {
                let mut alone = before.clone();
                for (rule, s) in rules.iter().zip(alone.iter_mut()) {
                    prop_assert!(rule.acquire(s, t, n).is_ok());
                }
                prop_assert_eq!(&state, &alone);
            }
        }
    }
}
