//! Exact algorithms never admit more than their limit in a window, for any key, under
//! a simulated traffic of many keys. (This test found the memory store losing live
//! counts when one hash tag held more keys than a shard's share of the bound.)

use std::collections::HashMap;
use std::time::Duration;

use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
use tollgate_sim::replay::{Decide, RulesLimiter};

#[test]
fn a_fixed_window_admits_at_most_its_limit_per_key_and_window() {
    let rules = "domain: sim\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 50 }\n";
    let traffic = Traffic {
        pattern: Pattern::Poisson { rate: 60_000.0 },
        keys: Keys::Zipf {
            n: 1_000,
            exponent: 1.0,
        },
        cost: 1,
        duration: Duration::from_secs(3),
    };
    let arrivals = traffic.arrivals(1).unwrap();
    let mut limiter = RulesLimiter::new(rules, "user").unwrap();
    let mut counts: HashMap<(u32, u64), Vec<(Duration, bool)>> = HashMap::new();
    for a in &arrivals {
        let ok = limiter.decide(a.at, &traffic.key_name(a.key), 1).unwrap();
        let log = counts.entry((a.key, a.at.as_secs())).or_default();
        log.push((a.at, ok));
        let n = log.iter().filter(|(_, ok)| *ok).count();
        assert!(
            n <= 50,
            "key {} admitted {} in second {}: {:?}",
            a.key,
            n,
            a.at.as_secs(),
            log
        );
    }
}
