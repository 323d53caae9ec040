//! GCRA against a reference token bucket that counts credit in nanoseconds.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{Algorithm, Gcra};
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{Limiter, Quota};

/// A token bucket whose credit is time: `credit` nanoseconds buy `credit / interval`
/// permits, and credit grows one nanosecond per nanosecond up to `interval * burst`.
struct Reference {
    interval: u128,
    burst: u128,
    credit: u128,
    last: u128,
}

impl Reference {
    fn new(interval: u64, burst: u64) -> Reference {
        let (interval, burst) = (interval as u128, burst as u128);
        Reference {
            interval,
            burst,
            credit: interval * burst,
            last: 0,
        }
    }

    /// `Ok(remaining)` or `Err(retry_after_nanos)`, `None` for never.
    fn acquire(&mut self, now: u128, n: u128) -> Option<Result<u128, u128>> {
        if n > self.burst {
            return None;
        }
        self.credit = (self.credit + (now - self.last)).min(self.interval * self.burst);
        self.last = now;
        let cost = n * self.interval;
        if self.credit >= cost {
            self.credit -= cost;
            Some(Ok(self.credit / self.interval))
        } else {
            Some(Err(cost - self.credit))
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Acquire(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            (0u64..2_000_000).prop_map(Op::Advance),
            (0u64..6).prop_map(Op::Acquire),
        ],
        1..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decisions_match_the_reference(count in 1u64..50, period_ms in 1u64..100, burst in 1u64..5, ops in ops()) {
        let quota = Quota::new(count, Duration::from_millis(period_ms)).unwrap().burst(burst).unwrap();
        let gcra = Gcra::new(quota);
        let mut state = gcra.initial_state(Nanos::ZERO);
        let mut reference = Reference::new(quota.emission_interval().as_nanos() as u64, burst);
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Advance(d) => now += d,
                Op::Acquire(n) => {
                    let got = gcra.acquire(&mut state, Nanos::new(now), n);
                    match reference.acquire(now as u128, n as u128) {
                        None => prop_assert!(got.unwrap_err().is_never()),
                        Some(Ok(remaining)) => prop_assert_eq!(got.unwrap().remaining() as u128, remaining),
                        Some(Err(retry)) => prop_assert_eq!(
                            got.unwrap_err().retry_after(),
                            Some(Duration::from_nanos(retry as u64))
                        ),
                    }
                }
            }
        }
    }

    /// Over any interval [t1, t2] the admitted permits are at most
    /// burst + (t2 - t1) / interval.
    #[test]
    fn admits_at_most_burst_plus_rate_times_elapsed(per_sec in 1u64..1000, burst in 1u64..10, ops in ops()) {
        let clock = ManualClock::new();
        let quota = Quota::per_second(per_sec).unwrap().burst(burst).unwrap();
        let limiter = Limiter::with_clock(Gcra::new(quota), clock.clone());
        let interval = quota.emission_interval().as_nanos();
        let mut admitted: Vec<(u128, u128)> = Vec::new();
        for op in ops {
            match op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Acquire(n) => {
                    if limiter.try_acquire(n).is_ok() && n > 0 {
                        admitted.push((clock.now().as_u64() as u128, n as u128));
                    }
                }
            }
        }
        for i in 0..admitted.len() {
            let mut total = 0;
            for &(t, n) in &admitted[i..] {
                total += n;
                let elapsed = t - admitted[i].0;
                prop_assert!(total * interval <= burst as u128 * interval + elapsed,
                    "{} admitted in {} ns", total, elapsed);
            }
        }
    }

    /// A reservation is counted at once: reservations and acquisitions together never
    /// schedule more than the bucket allows.
    #[test]
    fn reservations_keep_the_schedule(burst in 1u64..5, waits in prop::collection::vec((0u64..3, 0u64..500_000_000), 1..50)) {
        let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(burst).unwrap());
        let mut state = gcra.initial_state(Nanos::ZERO);
        let mut now = 0u64;
        let mut uses: Vec<(u128, u128)> = Vec::new();
        for (n, advance) in waits {
            now += advance / 10;
            if let Ok(r) = gcra.reserve(&mut state, Nanos::new(now), n, Duration::from_nanos(advance)) {
                prop_assert!(r.wait() <= Duration::from_nanos(advance));
                if n > 0 {
                    uses.push((now as u128 + r.wait().as_nanos(), n as u128));
                }
            }
        }
        uses.sort();
        let interval = 100_000_000u128;
        for i in 0..uses.len() {
            let mut total = 0;
            for &(t, n) in &uses[i..] {
                total += n;
                prop_assert!(total * interval <= burst as u128 * interval + (t - uses[i].0));
            }
        }
    }
}

/// Regression: after `set_quota` lowered the burst below the debt already taken,
/// `n == 0` was denied instead of peeking.
#[test]
fn zero_peeks_after_the_burst_is_lowered() {
    let mut g = Gcra::new(Quota::per_second(10).unwrap());
    let mut s = g.initial_state(Nanos::ZERO);
    g.acquire(&mut s, Nanos::ZERO, 10).unwrap();
    g.set_quota(Quota::per_second(10).unwrap().burst(1).unwrap());
    let before = s;
    let peek = g.acquire(&mut s, Nanos::ZERO, 0).unwrap();
    assert_eq!(peek.remaining(), 0);
    assert_eq!(peek.reset_after(), Duration::from_secs(1));
    assert!(g.peek(&s, Nanos::ZERO, 0).is_ok());
    let reservation = g.reserve(&mut s, Nanos::ZERO, 0, Duration::ZERO).unwrap();
    assert!(reservation.is_immediate());
    assert_eq!(s, before);
}
