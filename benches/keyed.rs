//! A limiter per key over a million keys: tollgate's `KeyedLimiter<u64, Gcra>` against
//! governor's keyed `RateLimiter` (a `DashMap`), the same quota per key and the same
//! keys in the same order (`i % 1_000_000`).
//!
//! tollgate runs twice: with `max_keys` = 10⁶, room for every key, and with a tenth
//! of that, 10⁵. Two scenarios: keys that stay live through the run (the bound of 10⁵
//! must deny the keys that do not fit) and keys that go idle between their calls
//! (tollgate evicts them to make room). Before timing, each limiter is filled with one
//! call per key, and the heap that filling left is printed (counted exactly by
//! `memory.rs`'s allocator).
//!
//! Group `keyed_vs_store`: the two ways to limit per key in process, on the same keys
//! in the same order. `keyed_limiter` is `KeyedLimiter<String, Gcra>::try_acquire(&str,
//! 1)`, `tollgate.shared_limiter` is `SharedLimiter<MemoryStore>::try_acquire(&str, 1)`
//! (the store a deployment can swap for Redis), both with `KeyedConfig::new(100_000)`
//! and the same quota; `benches/ratios.py` prints the second over the first. Keys:
//! `1_key`, one key over and over, and `10k_keys`, 10,000 keys in turn (`10.0.x.y`, as
//! the HTTP bench's client addresses). `_admitted`: 1 per second with a burst of 10⁹,
//! so every call is admitted and every key stays stored; `_denied`: 1 per hour, spent
//! for every key before timing, so every call is denied.

use std::num::NonZeroU32;

use criterion::Criterion;
use governor::DefaultKeyedRateLimiter;
use tollgate::algorithm::Gcra;
use tollgate::store::{MemoryStore, SharedLimiter};
use tollgate::{KeyedConfig, KeyedLimiter, Quota, WhenFull};

use crate::harness::{self, bench_single_thread, bench_two_threads};
use crate::memory::{self, Usage};

/// Distinct keys, visited in turn.
const KEYS: u64 = 1_000_000;

/// How long a key stays live after a call; every key comes back about every 0.1 s
/// (a million calls later), and every call that finds or stores its key is admitted.
#[derive(Clone, Copy)]
enum Keys {
    /// A thousand per hour per key: a call pushes the key's bucket 3.6 s ahead, so
    /// every key stays live (not evictable) for the whole run, and the few dozen calls
    /// each key gets stay far below its burst of a thousand. A bound below a million
    /// keys must deny the keys that do not fit.
    LongLived,
    /// A thousand per second per key: a key is idle a millisecond after its call, long
    /// before it comes back. tollgate evicts idle keys as it needs room; governor
    /// keeps every key it has seen.
    ShortLived,
}

impl Keys {
    const ALL: [Keys; 2] = [Keys::LongLived, Keys::ShortLived];

    fn name(self) -> &'static str {
        match self {
            Keys::LongLived => "1m_keys",
            Keys::ShortLived => "1m_keys_short_lived",
        }
    }

    fn tollgate(self, max_keys: usize, when_full: WhenFull) -> KeyedLimiter<u64, Gcra> {
        let quota = match self {
            Keys::LongLived => Quota::per_hour(1_000),
            Keys::ShortLived => Quota::per_second(1_000),
        };
        KeyedLimiter::new(
            Gcra::new(quota.expect("valid quota")),
            KeyedConfig::new(max_keys).when_full(when_full),
        )
        .expect("valid keyed limiter")
    }

    fn governor(self) -> DefaultKeyedRateLimiter<u64> {
        let count = NonZeroU32::new(1_000).expect("non-zero");
        let quota = match self {
            Keys::LongLived => governor::Quota::per_hour(count),
            Keys::ShortLived => governor::Quota::per_second(count),
        };
        DefaultKeyedRateLimiter::<u64>::keyed(quota)
    }
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

fn report<L>(keys: Keys, peer: &str, bound: Option<usize>, filled: &Filled<L>) {
    let mb = |bytes: usize| bytes as f64 / 1e6;
    let per_key = if filled.stored == 0 {
        0.0
    } else {
        filled.usage.live as f64 / filled.stored as f64
    };
    let bound = match bound {
        Some(max_keys) if filled.stored <= max_keys => format!("within max_keys {max_keys}"),
        Some(max_keys) => format!("OVER max_keys {max_keys}"),
        None => "unbounded".to_string(),
    };
    println!(
        "keyed memory {:<20} {peer:<18} {:>7} admitted, {:>7} keys stored, \
         {:>5.1} MB live ({per_key:.1} B/key), {:>5.1} MB peak, {bound}",
        keys.name(),
        filled.admitted,
        filled.stored,
        mb(filled.usage.live),
        mb(filled.usage.peak),
    );
}

/// `KeyedLimiter` against `SharedLimiter` over the memory store: see the module docs.
fn versus_store(c: &mut Criterion) {
    let mut group = harness::group(c, "keyed_vs_store");
    for (keys, count) in [("1_key", 1), ("10k_keys", 10_000)] {
        let names: Vec<String> = (0..count)
            .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
            .collect();
        let len = names.len() as u64;
        let at = |i: u64| names[(i % len) as usize].as_str();
        for (verdict, quota) in [
            (
                "admitted",
                Quota::per_second(1).and_then(|q| q.burst(1_000_000_000)),
            ),
            ("denied", Quota::per_hour(1)),
        ] {
            let quota = quota.expect("valid quota");
            let admits = verdict == "admitted";
            let scenario = format!("{keys}_{verdict}");

            let keyed: KeyedLimiter<String, Gcra> =
                KeyedLimiter::new(Gcra::new(quota), KeyedConfig::new(100_000))
                    .expect("valid keyed limiter");
            let store = MemoryStore::new(KeyedConfig::new(100_000), "b").expect("valid store");
            let shared = SharedLimiter::new(store, Gcra::new(quota)).expect("valid limiter");
            // One call per key stores every key (and spends the denied quota); a second
            // checks that the timed calls get the scenario's verdict.
            for name in &names {
                assert!(keyed.try_acquire(name.as_str(), 1).is_ok());
                assert!(matches!(shared.try_acquire(name, 1), Some(Ok(Ok(_)))));
            }
            for name in &names {
                assert_eq!(keyed.try_acquire(name.as_str(), 1).is_ok(), admits);
                let decided = shared.try_acquire(name, 1).expect("in process");
                assert_eq!(decided.expect("decided").is_ok(), admits);
            }

            bench_single_thread(&mut group, "keyed_limiter", &scenario, |i| {
                keyed.try_acquire(at(i), 1)
            });
            bench_single_thread(&mut group, "tollgate.shared_limiter", &scenario, |i| {
                shared.try_acquire(at(i), 1)
            });
        }
    }
    group.finish();
}

pub fn bench(c: &mut Criterion) {
    // First, as it needs none of the filled limiters below.
    versus_store(c);

    // Filled one at a time, each weighed alone, then kept for both groups.
    println!("keyed memory: heap held after one call for each of {KEYS} keys, in order");
    let mut tollgate_limiters = Vec::new();
    let mut governor_limiters = Vec::new();
    for keys in Keys::ALL {
        for (peer, max_keys, when_full) in [
            ("tollgate.max_1m", 1_000_000, WhenFull::default()),
            ("tollgate.max_100k", 100_000, WhenFull::default()),
            // The policy of old: a full table denies newcomers.
            ("tollgate.max_100k_deny", 100_000, WhenFull::Deny),
        ] {
            let filled = fill(
                || keys.tollgate(max_keys, when_full),
                |limiter, key| limiter.try_acquire(&key, 1).is_ok(),
                KeyedLimiter::len,
            );
            report(keys, peer, Some(max_keys), &filled);
            assert!(
                filled.stored <= max_keys,
                "{peer} holds more than its bound"
            );
            tollgate_limiters.push((keys, peer, filled.limiter));
        }
        let filled = fill(
            || keys.governor(),
            |limiter, key| limiter.check_key(&key).is_ok(),
            DefaultKeyedRateLimiter::len,
        );
        report(keys, "governor", None, &filled);
        governor_limiters.push((keys, filled.limiter));
    }

    let mut group = harness::group(c, "keyed");
    for (keys, peer, limiter) in &tollgate_limiters {
        bench_single_thread(&mut group, peer, keys.name(), |i| {
            limiter.try_acquire(&(i % KEYS), 1)
        });
    }
    for (keys, limiter) in &governor_limiters {
        bench_single_thread(&mut group, "governor", keys.name(), |i| {
            limiter.check_key(&(i % KEYS))
        });
    }
    group.finish();

    let mut group = harness::group(c, "keyed_two_threads");
    for (keys, peer, limiter) in &tollgate_limiters {
        bench_two_threads(&mut group, peer, keys.name(), |i| {
            limiter.try_acquire(&(i % KEYS), 1)
        });
    }
    for (keys, limiter) in &governor_limiters {
        bench_two_threads(&mut group, "governor", keys.name(), |i| {
            limiter.check_key(&(i % KEYS))
        });
    }
    group.finish();
}
