//! GCRA in the stores: the Redis script decides as the memory store (the pure `Gcra`)
//! under random requests, alone and with a second GCRA rule, and its replies carry
//! redis-cell's `CL.THROTTLE` fields.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::store::{Differential, EPOCH_MICROS, steps};
use proptest::prelude::*;
use tollgate::Quota;
use tollgate::algorithm::{Algorithm, CellReply, Gcra};
use tollgate::store::{Rule, SharedLimiter};
use tollgate::time::Nanos;

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

/// The store's replies carry `CL.THROTTLE`'s fields: mapped to redis-cell's reply, each
/// decision equals what `Gcra::cell_throttle` (checked against redis-cell's own table)
/// replies on the same state at the same time, requests above the burst included.
#[test]
fn gcra_store_replies_follow_cl_throttle() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (
        1_000u64..2_000_000,
        1u64..8,
        prop::collection::vec((0u64..3_000_000, 1u64..8), 1..32),
    );
    diff.run(48, strategy, |diff, (interval, burst, steps)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        let gcra = Gcra::new(quota.burst(burst).unwrap());
        let limiter = SharedLimiter::new(diff.redis_store(), gcra).unwrap();
        let mut state = gcra.initial_state(Nanos::ZERO);
        let mut now = EPOCH_MICROS;
        for (dt, n) in steps {
            now += dt;
            // One more than the burst too: never, answered from a peek at what is left.
            let n = n.min(burst + 1);
            let at = Duration::from_micros(now);
            let decision = diff.block_on(limiter.check_at("k", n, at)).unwrap();
            let reply = match CellReply::from_decision(&decision) {
                Some(reply) => reply,
                None => {
                    let peek = diff.block_on(limiter.check_at("k", 0, at)).unwrap();
                    CellReply::never(&peek.unwrap())
                }
            };
            let cell = gcra.cell_throttle(&mut state, Nanos::new(now * 1_000), n);
            prop_assert_eq!(reply.to_array(), cell.to_array());
        }
        Ok(())
    });
}
