//! The in-process store: `MemoryStore::execute_now` on a request of one GCRA check
//! (what a `SharedLimiter` over the memory store asks for one key), and
//! `SharedLimiter::try_acquire` around it, against governor's keyed
//! `RateLimiter::check_key` on the same `String` keys in the same order.
//!
//! Every call is admitted (checked at setup). Keys: `1_key`, one key over and over,
//! and `10k_keys`, 10,000 keys in turn (`10.0.x.y`, as the HTTP bench's client
//! addresses). Two quotas, each with a burst of 10⁹:
//!
//! - 10⁹ per second (the HTTP bench's): a key is idle a nanosecond after its call,
//!   so the memory store finds it expired and starts it afresh on every call;
//! - `_live`: 1 per second, so every call pushes the key's bucket a second ahead and
//!   every key stays stored through the run.
//!
//! Each store and limiter gets one call per key before timing.

use std::num::NonZeroU32;
use std::time::Duration;

use criterion::Criterion;
use governor::DefaultKeyedRateLimiter;
use tollgate::algorithm::Gcra;
use tollgate::store::{Check, MemoryStore, Op, Request, Rule, SharedLimiter};
use tollgate::{KeyedConfig, Quota};

use crate::harness::{self, bench_single_thread};

fn names(count: u64) -> Vec<String> {
    (0..count)
        .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
        .collect()
}

/// Calls per second, and whether keys stay stored between calls.
#[derive(Clone, Copy)]
enum Rate {
    Idle,
    Live,
}

impl Rate {
    fn per_second(self) -> u32 {
        match self {
            Rate::Idle => 1_000_000_000,
            Rate::Live => 1,
        }
    }

    fn quota(self) -> Quota {
        Quota::per_second(u64::from(self.per_second()))
            .and_then(|q| q.burst(1_000_000_000))
            .expect("valid quota")
    }

    fn governor(self) -> governor::Quota {
        governor::Quota::with_period(Duration::from_secs(1) / self.per_second())
            .expect("non-zero period")
            .allow_burst(NonZeroU32::new(1_000_000_000).expect("non-zero"))
    }
}

pub fn bench(c: &mut Criterion) {
    let mut group = harness::group(c, "store");
    for (scenario, count, rate) in [
        ("1_key", 1, Rate::Idle),
        ("10k_keys", 10_000, Rate::Idle),
        ("1_key_live", 1, Rate::Live),
        ("10k_keys_live", 10_000, Rate::Live),
    ] {
        let names = names(count);
        let len = names.len() as u64;
        let at = |i: u64| &names[(i % len) as usize];

        let store = MemoryStore::new(KeyedConfig::new(100_000), "b").expect("valid store");
        let rule = Rule::from(Gcra::new(rate.quota()));
        let checks = [Check::new("", &rule)];
        let requests: Vec<Request<'_>> = names
            .iter()
            .map(|name| Request::new(name, &checks, Op::Acquire(1)))
            .collect();
        for request in &requests {
            let outcome = store.execute_now(request).expect("decided");
            assert!(outcome.is_admitted());
        }
        if let Rate::Live = rate {
            assert_eq!(store.len(), names.len());
        }
        bench_single_thread(&mut group, "tollgate.execute_now", scenario, |i| {
            store.execute_now(&requests[(i % len) as usize])
        });

        let store = MemoryStore::new(KeyedConfig::new(100_000), "b").expect("valid store");
        let limiter = SharedLimiter::new(store, Gcra::new(rate.quota())).expect("valid limiter");
        for name in &names {
            let decision = limiter.try_acquire(name, 1).expect("in process");
            assert!(decision.expect("decided").is_ok());
        }
        bench_single_thread(&mut group, "tollgate.try_acquire", scenario, |i| {
            limiter.try_acquire(at(i), 1)
        });

        let governor = DefaultKeyedRateLimiter::<String>::keyed(rate.governor());
        for name in &names {
            assert!(governor.check_key(name).is_ok());
        }
        bench_single_thread(&mut group, "governor", scenario, |i| {
            governor.check_key(at(i))
        });
    }
    group.finish();
}
