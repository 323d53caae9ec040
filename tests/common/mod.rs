//! Shared by the integration tests: random steps on any algorithm, at any time and
//! of any size, checked against the `Algorithm` contract.

// Each test file uses only some of these.
#![allow(dead_code)]

#[cfg(feature = "store")]
pub mod each;
pub mod events;
#[cfg(feature = "axum")]
pub mod http;
pub mod redis;
#[cfg(feature = "redis")]
pub mod store;
#[cfg(feature = "redis-tls")]
pub mod tls;

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::time::Nanos;

/// One call on an algorithm: times and sizes are raw nanoseconds and permits.
#[derive(Debug, Clone)]
pub enum Op {
    Acquire(u64, u64),
    Reserve(u64, u64, u64),
    Refund(u64, u64),
    Peek(u64, u64),
}

/// Any time (mostly within 5 s, and the clock's end), any size (mostly up to `max_n`).
pub fn op(max_n: u64) -> impl Strategy<Value = Op> {
    let t = prop_oneof![
        0u64..5_000_000_000,
        Just(u64::MAX),
        Just(u64::MAX - 1),
        any::<u64>(),
    ];
    let n = prop_oneof![0..=max_n, Just(u64::MAX), any::<u64>()];
    let w = prop_oneof![0u64..5_000_000_000, Just(u64::MAX)];
    prop_oneof![
        4 => (t.clone(), n.clone()).prop_map(|(t, n)| Op::Acquire(t, n)),
        2 => (t.clone(), n.clone(), w).prop_map(|(t, n, w)| Op::Reserve(t, n, w)),
        1 => (t.clone(), n.clone()).prop_map(|(t, n)| Op::Refund(t, n)),
        1 => (t, n).prop_map(|(t, n)| Op::Peek(t, n)),
    ]
}

/// Applies `op`, checking that a denial changes nothing, that `n == 0` is admitted
/// and changes nothing, and, if `timed` (permits come back with time, not from
/// their holders), that a denied acquire would succeed after its `retry_after`.
pub fn apply<A: Algorithm>(a: &A, s: &mut A::State, op: &Op, timed: bool)
where
    A::State: PartialEq,
{
    let before = s.clone();
    match *op {
        Op::Acquire(t, n) => match a.acquire(s, Nanos::new(t), n) {
            Ok(_) => assert!(n > 0 || *s == before, "n == 0 changed the state"),
            Err(denied) => {
                assert!(n > 0, "n == 0 denied: {denied:?}");
                assert!(*s == before, "a denial changed the state");
                if let (true, Some(retry)) = (timed, denied.retry_after()) {
                    let later = Nanos::new(t) + retry;
                    if later < Nanos::MAX && retry < Duration::from_secs(1 << 40) {
                        let again = a.peek(s, later, n);
                        assert!(
                            again.is_ok(),
                            "{n} at {t}: still denied after {retry:?}: {again:?}, state {s:?}"
                        );
                    }
                }
            }
        },
        Op::Reserve(t, n, w) => {
            let reserved = a.reserve(s, Nanos::new(t), n, Duration::from_nanos(w));
            assert!(n > 0 || reserved.is_ok(), "n == 0 denied: {reserved:?}");
            if reserved.is_err() || n == 0 {
                assert!(*s == before, "a denial or n == 0 changed the state");
            }
        }
        Op::Refund(t, n) => a.refund(s, Nanos::new(t), n),
        Op::Peek(t, n) => {
            let peeked = a.peek(s, Nanos::new(t), n);
            assert!(n > 0 || peeked.is_ok(), "n == 0 denied: {peeked:?}");
        }
    }
    let _ = a.idle_at(s);
}

/// [`apply`]s every op to a fresh state of a timed algorithm.
pub fn drive<A: Algorithm>(a: &A, ops: &[Op])
where
    A::State: PartialEq,
{
    let mut s = a.initial_state(Nanos::ZERO);
    for op in ops {
        apply(a, &mut s, op, true);
    }
}
