//! A limiter per key over a million keys: tollgate's `KeyedLimiter<u64, Gcra>` against
//! governor's keyed `RateLimiter` (a `DashMap`), the same quota per key and the same
//! keys in the same order (`i % 1_000_000`).
//!
//! tollgate runs twice: with room for every key (`max_keys` = 10⁶) and with a tenth
//! of that (10⁵), where the keys that do not fit are denied. Before timing, each
//! limiter is filled with one call per key, and the heap that filling left is printed
//! (counted exactly by `memory.rs`'s allocator).

use std::num::NonZeroU32;

use criterion::Criterion;
use governor::DefaultKeyedRateLimiter;
use tollgate::algorithm::Gcra;
use tollgate::{KeyedConfig, KeyedLimiter, Quota};

use crate::harness::{self, bench_single_thread, bench_two_threads};
use crate::memory::{self, Usage};

/// Distinct keys, visited in turn.
const KEYS: u64 = 1_000_000;

/// The scenario: every key comes back about every 0.1 s, well within its quota.
const SCENARIO: &str = "1m_keys";

/// A thousand per hour per key: a visit pushes a key's bucket 3.6 s ahead, so every
/// key stays live (not evictable) for the whole run, and the few dozen visits each
/// key gets in a run stay far below its burst of a thousand: every call that finds
/// its key is admitted.
fn tollgate_quota() -> Quota {
    Quota::per_hour(1_000).expect("valid quota")
}

fn governor_quota() -> governor::Quota {
    governor::Quota::per_hour(NonZeroU32::new(1_000).expect("non-zero"))
}

fn tollgate(max_keys: usize) -> KeyedLimiter<u64, Gcra> {
    KeyedLimiter::new(Gcra::new(tollgate_quota()), KeyedConfig::new(max_keys))
        .expect("valid keyed limiter")
}

/// What filling a limiter with one call per key did.
struct Filled<L> {
    limiter: L,
    admitted: u64,
    stored: usize,
    usage: Usage,
}

/// Builds a limiter and makes one call for each key, measuring the heap it holds
/// afterwards.
fn fill<L>(
    build: impl FnOnce() -> L,
    call: impl Fn(&L, u64) -> bool,
    len: impl Fn(&L) -> usize,
) -> Filled<L> {
    let ((limiter, admitted), usage) = memory::measure(|| {
        let limiter = build();
        let admitted = (0..KEYS).filter(|&key| call(&limiter, key)).count() as u64;
        (limiter, admitted)
    });
    let stored = len(&limiter);
    Filled {
        limiter,
        admitted,
        stored,
        usage,
    }
}

fn report<L>(peer: &str, bound: Option<usize>, filled: &Filled<L>) {
    let mb = |bytes: usize| bytes as f64 / 1e6;
    let per_key = if filled.stored == 0 {
        0.0
    } else {
        filled.usage.live as f64 / filled.stored as f64
    };
    let bound = match bound {
        Some(max_keys) => format!(
            "max_keys {max_keys}: {}",
            if filled.stored <= max_keys {
                "within bound"
            } else {
                "OVER BOUND"
            }
        ),
        None => "unbounded".to_string(),
    };
    println!(
        "keyed memory {peer:<18} {} of {KEYS} calls admitted, {} keys stored, \
         {:.1} MB live ({per_key:.1} B per stored key), {:.1} MB peak; {bound}",
        filled.admitted,
        filled.stored,
        mb(filled.usage.live),
        mb(filled.usage.peak),
    );
}

pub fn bench(c: &mut Criterion) {
    // Filled one at a time, each weighed alone, and kept for both groups.
    println!("keyed memory: heap held after one call for each of {KEYS} keys");
    let mut tollgate_limiters = Vec::new();
    for (peer, max_keys) in [
        ("tollgate.max_1m", 1_000_000),
        ("tollgate.max_100k", 100_000),
    ] {
        let filled = fill(
            || tollgate(max_keys),
            |limiter, key| limiter.try_acquire(&key, 1).is_ok(),
            KeyedLimiter::len,
        );
        report(peer, Some(max_keys), &filled);
        assert!(
            filled.stored <= max_keys,
            "{peer} holds more than its bound"
        );
        tollgate_limiters.push((peer, filled.limiter));
    }
    let filled = fill(
        || DefaultKeyedRateLimiter::<u64>::keyed(governor_quota()),
        |limiter, key| limiter.check_key(&key).is_ok(),
        DefaultKeyedRateLimiter::len,
    );
    report("governor", None, &filled);
    let governor = filled.limiter;

    let mut group = harness::group(c, "keyed");
    for (peer, limiter) in &tollgate_limiters {
        bench_single_thread(&mut group, peer, SCENARIO, |i| {
            limiter.try_acquire(&(i % KEYS), 1)
        });
    }
    bench_single_thread(&mut group, "governor", SCENARIO, |i| {
        governor.check_key(&(i % KEYS))
    });
    group.finish();

    let mut group = harness::group(c, "keyed_two_threads");
    for (peer, limiter) in &tollgate_limiters {
        bench_two_threads(&mut group, peer, SCENARIO, |i| {
            limiter.try_acquire(&(i % KEYS), 1)
        });
    }
    bench_two_threads(&mut group, "governor", SCENARIO, |i| {
        governor.check_key(&(i % KEYS))
    });
    group.finish();
}
