//! `RefreshPeriod` against a reference model of Resilience4j's `AtomicRateLimiter`
//! (the pseudocode of `semantics.md`, in `i128`), under virtual time.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{Algorithm, RefreshPeriod, RefreshPeriodState};
use tollgate::time::{ManualClock, Nanos};
use tollgate::{Admitted, Denied, InsufficientCapacity, Limited, Limiter, Reservation};

/// Resilience4j's state machine, written straight from the pseudocode, plus
/// tollgate's changes: denials change nothing, refunds, drain of the current cycle.
#[derive(Clone, Debug)]
struct Model {
    limit: i128,
    period: i128,
    timeout: i128,
    start: i128,
    cycle: i128,
    permits: i128,
}

impl Model {
    fn new(limit: u64, period: u64, timeout: u64, start: u64) -> Model {
        Model {
            limit: limit.into(),
            period: period.into(),
            timeout: timeout.into(),
            start: start.into(),
            cycle: 0,
            permits: limit.into(),
        }
    }

    /// `(cycle, permits, nanoseconds since start)` at `now`.
    fn refreshed(&self, now: u64) -> (i128, i128, i128) {
        let elapsed = (i128::from(now) - self.start).max(0);
        let cycle = (elapsed / self.period).max(self.cycle);
        let permits = if cycle != self.cycle {
            (self.permits + (cycle - self.cycle) * self.limit).min(self.limit)
        } else {
            self.permits
        };
        (cycle, permits, elapsed)
    }

    fn nanos_to_wait(&self, cycle: i128, permits: i128, elapsed: i128, n: i128) -> i128 {
        if permits >= n {
            return 0;
        }
        let full_cycles = div_ceil(-(permits + self.limit - n), self.limit);
        full_cycles * self.period + ((cycle + 1) * self.period - elapsed)
    }

    /// The shortest wait `n` can ever have: a full cycle at its last nanosecond.
    fn best_wait(&self, n: i128) -> i128 {
        self.nanos_to_wait(0, self.limit, self.period - 1, n)
    }

    fn until_full(&self, cycle: i128, permits: i128, elapsed: i128) -> i128 {
        if permits >= self.limit {
            0
        } else {
            let cycles = div_ceil(self.limit - permits, self.limit);
            (cycle + cycles) * self.period - elapsed
        }
    }

    /// Returns the wait, or the denial.
    fn reserve(&mut self, now: u64, n: u64, max_wait: u64) -> Result<i128, Denied> {
        let (cycle, permits, elapsed) = self.refreshed(now);
        let (n, max_wait) = (i128::from(n), i128::from(max_wait));
        if n == 0 {
            return Ok(0);
        }
        let wait = self.nanos_to_wait(cycle, permits, elapsed, n);
        if wait > max_wait {
            if self.best_wait(n) > max_wait {
                let most = (1..=n).rev().find(|&k| self.best_wait(k) <= max_wait);
                return Err(InsufficientCapacity::new(n as u64, most.unwrap() as u64).into());
            }
            return Err(Limited::new(
                ns(wait - max_wait),
                self.limit as u64,
                permits.max(0) as u64,
                ns(self.until_full(cycle, permits, elapsed)),
            )
            .into());
        }
        self.cycle = cycle;
        self.permits = permits - n;
        Ok(wait)
    }

    fn acquire(&mut self, now: u64, n: u64) -> Result<Admitted, Denied> {
        self.reserve(now, n, 0)?;
        let (cycle, permits, elapsed) = self.refreshed(now);
        Ok(Admitted::new(
            self.limit as u64,
            permits.max(0) as u64,
            ns(self.until_full(cycle, permits, elapsed)),
        ))
    }

    fn refund(&mut self, now: u64, n: u64) {
        let (cycle, permits, _) = self.refreshed(now);
        if permits < self.limit {
            self.cycle = cycle;
            self.permits = (permits + i128::from(n)).min(self.limit);
        }
    }

    fn drain(&mut self, now: u64) {
        let (cycle, permits, _) = self.refreshed(now);
        self.cycle = cycle;
        self.permits = permits.min(0);
    }

    fn change_limit(&mut self, now: u64, limit: u64) {
        let (cycle, permits, _) = self.refreshed(now);
        self.cycle = cycle;
        self.permits = permits;
        self.limit = limit.into();
    }

    fn idle_at(&self) -> u64 {
        let cycles = if self.permits >= self.limit {
            0
        } else {
            div_ceil(self.limit - self.permits, self.limit)
        };
        (self.start + (self.cycle + cycles) * self.period) as u64
    }
}

/// Java's `divCeil` for a positive divisor, truncating towards zero like Java's `/`.
fn div_ceil(x: i128, y: i128) -> i128 {
    let q = (x + y - 1) / y;
    q.max(0)
}

fn ns(nanos: i128) -> Duration {
    Duration::from_nanos(nanos.max(0) as u64)
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Acquire(u64),
    Reserve(u64, u64),
    ReservePermission(u64),
    Refund(u64),
    Drain,
    ChangeLimit(u64),
    ChangeTimeout(u64),
}

fn op(period: u64, limit: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3 * period).prop_map(Op::Advance),
        3 => (0..=3 * limit).prop_map(Op::Acquire),
        3 => (0..=3 * limit, 0..5 * period).prop_map(|(n, w)| Op::Reserve(n, w)),
        2 => (0..=3 * limit).prop_map(Op::ReservePermission),
        1 => (0..=2 * limit).prop_map(Op::Refund),
        1 => Just(Op::Drain),
        1 => (1..=5u64).prop_map(Op::ChangeLimit),
        1 => (0..4 * period).prop_map(Op::ChangeTimeout),
    ]
}

fn scenario() -> impl Strategy<Value = (u64, u64, u64, u64, Vec<Op>)> {
    (1..=5u64, 1..=50u64, 0..200u64, 0..1_000u64).prop_flat_map(
        |(limit, period, timeout, start)| {
            (
                Just(limit),
                Just(period),
                Just(timeout),
                Just(start),
                proptest::collection::vec(op(period, limit), 1..60),
            )
        },
    )
}

fn same_state(r: &RefreshPeriod, s: &RefreshPeriodState, m: &Model) {
    assert_eq!(i128::from(s.active_cycle()), m.cycle);
    assert_eq!(i128::from(s.active_permissions()), m.permits);
    assert_eq!(i128::from(r.limit_for_period()), m.limit);
    assert_eq!(r.idle_at(s), Nanos::new(m.idle_at()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_the_reference_model((limit, period, timeout, start, ops) in scenario()) {
        let mut r = RefreshPeriod::new(
            limit,
            Duration::from_nanos(period),
            Duration::from_nanos(timeout),
        ).unwrap();
        let mut m = Model::new(limit, period, timeout, start);
        let mut now = start;
        let mut s = r.initial_state(Nanos::new(start));
        for op in ops {
            let t = Nanos::new(now);
            match op {
                Op::Advance(dt) => now += dt,
                Op::Acquire(n) => {
                    prop_assert_eq!(r.peek(&s, t, n), m.clone().acquire(now, n));
                    prop_assert_eq!(r.acquire(&mut s, t, n), m.acquire(now, n));
                }
                Op::Reserve(n, w) => {
                    let got = r.reserve(&mut s, t, n, Duration::from_nanos(w));
                    let want = m.reserve(now, n, w).map(|w| Reservation::new(n, ns(w)));
                    prop_assert_eq!(got, want);
                }
                Op::ReservePermission(n) => {
                    let got = r.reserve_permission(&mut s, t, n);
                    let want = m
                        .reserve(now, n, m.timeout as u64)
                        .map(|w| Reservation::new(n, ns(w)));
                    prop_assert_eq!(got, want);
                }
                Op::Refund(n) => {
                    r.refund(&mut s, t, n);
                    m.refund(now, n);
                }
                Op::Drain => {
                    r.drain(&mut s, t);
                    m.drain(now);
                }
                Op::ChangeLimit(l) => {
                    r.change_limit_for_period(&mut s, t, l).unwrap();
                    m.change_limit(now, l);
                }
                Op::ChangeTimeout(w) => {
                    r.change_timeout(Duration::from_nanos(w));
                    m.timeout = w.into();
                }
            }
            same_state(&r, &s, &m);
            let (cycle, permits, elapsed) = m.refreshed(now);
            prop_assert_eq!(i128::from(r.available_permissions(&s, Nanos::new(now))), permits);
            prop_assert_eq!(
                r.nanos_to_wait(&s, Nanos::new(now)),
                ns(m.nanos_to_wait(cycle, permits, elapsed, 1))
            );
        }
    }

    /// Counting each grant at the instant it may be used (now + wait), the permits
    /// used by the end of any cycle never exceed `limit × (cycles elapsed + 1)`:
    /// reservations borrow only from cycles that have begun by the time they are used.
    ///
    /// In a window of cycles `c1..=c2` that does not start at the limiter's start,
    /// grants usable at once never exceed `limit × (c2 - c1 + 1)`. Reservations can
    /// exceed that, as in Resilience4j: one made near a cycle's end counts the
    /// permits left in that cycle, but is used at the next cycle's start.
    #[test]
    fn permits_used_by_any_cycle_never_exceed_limit_per_cycle_elapsed(
        (limit, period, _timeout, start, ops) in scenario()
    ) {
        let r = RefreshPeriod::new(limit, Duration::from_nanos(period), Duration::ZERO).unwrap();
        let mut s = r.initial_state(Nanos::new(start));
        let mut now = start;
        let mut used_per_cycle = std::collections::BTreeMap::<u64, u64>::new();
        let mut immediate_per_cycle = std::collections::BTreeMap::<u64, u64>::new();
        for op in ops {
            let t = Nanos::new(now);
            let granted = match op {
                Op::Advance(dt) => {
                    now += dt;
                    None
                }
                Op::Acquire(n) => r.acquire(&mut s, t, n).ok().map(|_| (n, Duration::ZERO)),
                Op::Reserve(n, w) => r
                    .reserve(&mut s, t, n, Duration::from_nanos(w))
                    .ok()
                    .map(|res| (n, res.wait())),
                Op::ReservePermission(n) => r
                    .reserve(&mut s, t, n, Duration::from_nanos(10 * period))
                    .ok()
                    .map(|res| (n, res.wait())),
                Op::Drain => {
                    r.drain(&mut s, t);
                    None
                }
                // Refunds and limit changes are outside this property.
                Op::Refund(_) | Op::ChangeLimit(_) | Op::ChangeTimeout(_) => None,
            };
            if let Some((n, wait)) = granted {
                let used_at = now + wait.as_nanos() as u64 - start;
                *used_per_cycle.entry(used_at / period).or_default() += n;
                if wait.is_zero() {
                    *immediate_per_cycle.entry(used_at / period).or_default() += n;
                }
            }
        }
        let immediate: Vec<(u64, u64)> = immediate_per_cycle.into_iter().collect();
        for (i, &(c1, _)) in immediate.iter().enumerate() {
            let mut in_window = 0;
            for &(c2, n) in &immediate[i..] {
                in_window += n;
                prop_assert!(
                    in_window <= limit * (c2 - c1 + 1),
                    "{} permits usable at once in cycles {}..={}", in_window, c1, c2
                );
            }
        }
        let mut used = 0;
        for (cycle, n) in used_per_cycle {
            used += n;
            prop_assert!(
                used <= limit * (cycle + 1),
                "{} permits used by the end of cycle {}", used, cycle
            );
        }
    }

    /// A cancelled reservation gives back exactly what it took, and refunds never
    /// lift the permits above the limit.
    #[test]
    fn refunds_restore_exactly_and_never_exceed_the_limit(
        (limit, period, _timeout, start, ops) in scenario(),
        n in 1..=10u64,
        max_wait in 0..500u64,
    ) {
        let r = RefreshPeriod::new(limit, Duration::from_nanos(period), Duration::ZERO).unwrap();
        let mut s = r.initial_state(Nanos::new(start));
        let mut now = start;
        for op in ops {
            let t = Nanos::new(now);
            match op {
                Op::Advance(dt) => now += dt,
                Op::Acquire(k) => { let _ = r.acquire(&mut s, t, k); }
                Op::Reserve(k, w) => { let _ = r.reserve(&mut s, t, k, Duration::from_nanos(w)); }
                Op::Refund(k) => r.refund(&mut s, t, k),
                _ => {}
            }
            prop_assert!(r.available_permissions(&s, Nanos::new(now)) <= limit as i64);
        }
        let t = Nanos::new(now);
        let before = r.available_permissions(&s, t);
        if r.reserve(&mut s, t, n, Duration::from_nanos(max_wait)).is_ok() {
            r.refund(&mut s, t, n);
            prop_assert_eq!(r.available_permissions(&s, t), before);
        }
        r.refund(&mut s, t, u64::MAX);
        prop_assert_eq!(r.available_permissions(&s, t), limit as i64);
    }
}

#[test]
fn works_under_a_limiter_with_a_manual_clock() {
    let clock = ManualClock::new();
    let r4j =
        RefreshPeriod::new(2, Duration::from_millis(100), Duration::from_millis(100)).unwrap();
    let limiter = Limiter::with_clock(r4j, clock.clone());
    assert_eq!(limiter.try_acquire(2).unwrap().remaining(), 0);
    let denied = limiter.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    let reservation = limiter.reserve(1, Duration::from_millis(100)).unwrap();
    assert_eq!(reservation.wait(), Duration::from_millis(100));
    limiter.refund(1);
    clock.advance(Duration::from_millis(100));
    assert_eq!(limiter.try_acquire(1).unwrap().remaining(), 1);
    limiter
        .reconfigure(|r, state, now| r.change_limit_for_period(state, now, 5))
        .unwrap();
    assert_eq!(limiter.algorithm().limit_for_period(), 5);
    assert!(
        limiter.try_acquire(2).is_err(),
        "the new limit waits for the next cycle"
    );
    clock.advance(Duration::from_millis(100));
    assert!(limiter.try_acquire(5).is_ok());
    limiter
        .reconfigure(|r, state, now| {
            r.drain(state, now);
            Ok::<(), tollgate::ConfigError>(())
        })
        .unwrap();
    assert!(limiter.peek(1).is_err());
    assert!(
        limiter
            .reconfigure(|r, s, now| r.change_limit_for_period(s, now, 0))
            .is_err()
    );
    assert_eq!(limiter.algorithm().limit_for_period(), 5);
}
