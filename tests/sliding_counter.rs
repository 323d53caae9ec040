//! The sliding window counter against a reference that keeps every window's count and
//! searches for the retry time.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::Limiter;
use tollgate::algorithm::{Algorithm, SlidingCounter};
use tollgate::time::{ManualClock, Nanos};

/// Counts per window, never rolled or forgotten.
struct Reference {
    limit: u128,
    window: u128,
    counts: HashMap<u128, u128>,
}

impl Reference {
    fn count(&self, index: u128) -> u128 {
        self.counts.get(&index).copied().unwrap_or(0)
    }

    /// `previous × (W − elapsed) + current × W`: W times Cloudflare's estimate.
    fn used(&self, t: u128) -> u128 {
        let (index, elapsed) = (t / self.window, t % self.window);
        let previous = if index == 0 { 0 } else { self.count(index - 1) };
        previous * (self.window - elapsed) + self.count(index) * self.window
    }

    fn fits(&self, t: u128, n: u128) -> bool {
        self.used(t) + n * self.window <= self.limit * self.window
    }

    /// `Ok(remaining)`, `Err(Some(retry_after))`, `Err(None)` for never.
    fn acquire(&mut self, now: u128, n: u128) -> Result<u128, Option<u128>> {
        if n > self.limit {
            return Err(None);
        }
        if self.fits(now, n) {
            *self.counts.entry(now / self.window).or_insert(0) += n;
            return Ok((self.limit * self.window - self.used(now)) / self.window);
        }
        // The estimate only falls while nothing is taken: search the first time it fits.
        let (mut low, mut high) = (now, (now / self.window + 2) * self.window);
        assert!(self.fits(high, n));
        while high - low > 1 {
            let mid = (low + high) / 2;
            if self.fits(mid, n) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Err(Some(high - now))
    }

    fn idle_at(&self) -> u128 {
        let last = self.counts.iter().filter(|c| *c.1 > 0).map(|c| *c.0).max();
        last.map_or(0, |index| (index + 2) * self.window)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_the_reference(
        limit in 1u64..20,
        window in prop_oneof![1u64..10, 1u64..1_000],
        ops in prop::collection::vec((prop_oneof![0u64..4, 0u64..1_500], 0u64..25), 1..200),
    ) {
        let counter = SlidingCounter::new(limit, Duration::from_nanos(window)).unwrap();
        let mut reference = Reference {
            limit: limit as u128,
            window: window as u128,
            counts: HashMap::new(),
        };
        let mut state = counter.initial_state(Nanos::ZERO);
        let mut now = 0u64;
        for (advance, n) in ops {
            now += advance;
            let got = counter
                .acquire(&mut state, Nanos::new(now), n)
                .map(|a| a.remaining() as u128)
                .map_err(|d| d.retry_after().map(|r| r.as_nanos()));
            prop_assert_eq!(got, reference.acquire(now as u128, n as u128), "acquire {} at {}", n, now);
            prop_assert_eq!(counter.idle_at(&state).as_u64() as u128, reference.idle_at());
        }
    }

    #[test]
    fn estimate_agrees_with_floating_point_away_from_ties(
        limit in 1u64..1_000,
        window in 1_000u64..1_000_000,
        shares in (0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0),
        elapsed in 0.0f64..1.0,
    ) {
        // Both windows' counts fit the limit at the start of the second.
        let previous = (shares.0 * limit as f64) as u64;
        let current = ((limit - previous) as f64 * shares.1) as u64;
        let n = 1 + ((limit - 1) as f64 * shares.2) as u64;
        let counter = SlidingCounter::new(limit, Duration::from_nanos(window)).unwrap();
        let mut state = counter.initial_state(Nanos::ZERO);
        counter.acquire(&mut state, Nanos::ZERO, previous).unwrap();
        counter.acquire(&mut state, Nanos::new(window), current).unwrap();
        let elapsed = (elapsed * window as f64) as u64;
        let estimate = previous as f64 * (window - elapsed) as f64 / window as f64 + current as f64;
        let slack = estimate + n as f64 - limit as f64;
        prop_assume!(slack.abs() > 1e-6);
        let admitted = counter.acquire(&mut state, Nanos::new(window + elapsed), n).is_ok();
        prop_assert_eq!(admitted, slack < 0.0);
    }
}

#[test]
fn limiter_refunds_and_reconfigures() {
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(
        SlidingCounter::new(4, Duration::from_secs(1)).unwrap(),
        clock.clone(),
    );
    limiter.try_acquire(4).unwrap();
    assert!(limiter.try_acquire(1).is_err());
    limiter.refund(2);
    assert!(limiter.try_acquire(2).is_ok());
    limiter.reconfigure(|c, _, _| c.set_limit(6)).unwrap();
    assert!(limiter.try_acquire(2).is_ok());
    assert!(limiter.reserve(1, Duration::from_secs(10)).is_err());
    clock.advance(Duration::from_secs(2));
    assert_eq!(limiter.try_acquire(0).unwrap().remaining(), 6);
}
