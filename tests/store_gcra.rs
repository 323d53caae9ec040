//! GCRA in the stores: the Redis script decides as the memory store (the pure `Gcra`)
//! under random requests, alone and with a second GCRA rule, and its replies carry
//! redis-cell's `CL.THROTTLE` fields.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::store::{steps, Differential};
use proptest::prelude::*;
use tollgate::algorithm::Gcra;
use tollgate::store::Rule;
use tollgate::Quota;

/// Intervals of whole µs from 1 ms to 2 s, bursts 1–8.
fn gcra() -> impl Strategy<Value = Rule> {
    (1_000u64..2_000_000, 1u64..8).prop_map(|(interval, burst)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        Rule::from(Gcra::new(quota.burst(burst).unwrap()))
    })
}

#[test]
fn gcra_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (gcra(), 0u64..1_000_000_000, steps(3_000_000, 8, 1..32));
    diff.run(64, strategy, |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn two_gcra_rules_decide_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (
        gcra(),
        gcra(),
        0u64..1_000_000_000,
        steps(3_000_000, 8, 1..32),
    );
    diff.run(48, strategy, |diff, (a, b, start, steps)| {
        diff.check(&[a, b], start, &steps)
    });
}
