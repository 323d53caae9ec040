//! Guava's `RateLimiterTest`, ported with the same expected sequences, and property
//! tests against a reference model of the formulas in `semantics.md`.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::ConfigError;
use tollgate::algorithm::{Algorithm, SmoothBursty, SmoothShape, SmoothState, SmoothWarmingUp};
use tollgate::time::Nanos;

/// The two Guava limiters behind one interface, for the harness.
trait Guava: Algorithm<State = SmoothState> {
    fn wait_for(&self, state: &mut SmoothState, now: Nanos, n: u64) -> Duration;
    fn change_rate(&mut self, state: &mut SmoothState, now: Nanos, rate: f64);
    fn max(&self) -> f64;
    fn permits_per_second(&self) -> f64;
}

impl<S: SmoothShape> Guava for tollgate::algorithm::Smooth<S> {
    fn wait_for(&self, state: &mut SmoothState, now: Nanos, n: u64) -> Duration {
        self.acquire_wait(state, now, n).unwrap()
    }
    fn change_rate(&mut self, state: &mut SmoothState, now: Nanos, rate: f64) {
        self.set_rate(state, now, rate).unwrap()
    }
    fn max(&self) -> f64 {
        self.max_permits()
    }
    fn permits_per_second(&self) -> f64 {
        self.rate()
    }
}

/// Guava's `FakeStopwatch` with a limiter: sleeps move time, and every sleep is
/// recorded as `R` (by the limiter) or `U` (by the user), in seconds.
struct Stopwatch<A: Guava> {
    limiter: A,
    state: SmoothState,
    now: Nanos,
    events: Vec<String>,
}

impl<A: Guava> Stopwatch<A> {
    fn new(limiter: A) -> Self {
        Stopwatch::starting_at(limiter, Nanos::ZERO)
    }

    fn starting_at(limiter: A, now: Nanos) -> Self {
        let state = limiter.initial_state(now);
        Stopwatch {
            limiter,
            state,
            now,
            events: Vec::new(),
        }
    }

    fn sleep(&mut self, caption: &str, d: Duration) {
        self.now = self.now + d;
        let us = d.as_micros();
        // Java's %3.2f rounds half up.
        let cents = (us + 5_000) / 10_000;
        self.events
            .push(format!("{caption}{}.{:02}", cents / 100, cents % 100));
    }

    fn sleep_millis(&mut self, ms: u64) {
        self.sleep("U", Duration::from_millis(ms));
    }

    /// Guava's `acquire(n)`: returns the wait in seconds.
    fn acquire(&mut self, n: u64) -> f64 {
        let wait = self.limiter.wait_for(&mut self.state, self.now, n);
        self.sleep("R", wait);
        wait.as_secs_f64()
    }

    /// Guava's `tryAcquire(n, timeout)`.
    fn try_acquire(&mut self, n: u64, timeout: Duration) -> bool {
        match self.limiter.reserve(&mut self.state, self.now, n, timeout) {
            Ok(r) => {
                self.sleep("R", r.wait());
                true
            }
            Err(_) => false,
        }
    }

    fn set_rate(&mut self, rate: f64) {
        self.limiter.change_rate(&mut self.state, self.now, rate);
    }

    fn assert_events(&mut self, expected: &[&str]) {
        assert_eq!(self.events.join(", "), expected.join(", "));
        self.events.clear();
    }

    /// Guava's `measureTotalTimeMillis`.
    fn measure_total_millis(&mut self, mut permits: u64, random: &mut Random) -> u64 {
        let start = self.now;
        while permits > 0 {
            let next = random.below(permits).max(1);
            permits -= next;
            self.acquire(next);
        }
        self.acquire(1); // repays any pending debt
        (self.now.as_u64() - start.as_u64()) / 1_000_000
    }
}

/// A small deterministic generator standing in for `java.util.Random`.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn bursty(rate: f64) -> Stopwatch<SmoothBursty> {
    Stopwatch::new(SmoothBursty::new(rate).unwrap())
}

fn warming(rate: f64, warmup_ms: u64, cold_factor: f64) -> Stopwatch<SmoothWarmingUp> {
    let limiter =
        SmoothWarmingUp::with_cold_factor(rate, Duration::from_millis(warmup_ms), cold_factor)
            .unwrap();
    Stopwatch::new(limiter)
}

const EPSILON: f64 = 1e-8;

#[test]
fn guava_simple() {
    let mut sw = bursty(5.0);
    sw.acquire(1);
    sw.acquire(1);
    sw.acquire(1);
    sw.assert_events(&["R0.00", "R0.20", "R0.20"]);
}

#[test]
fn guava_immediate_try_acquire() {
    let limiter = SmoothBursty::new(1.0).unwrap();
    let mut state = limiter.initial_state(Nanos::ZERO);
    assert!(limiter.acquire(&mut state, Nanos::ZERO, 1).is_ok());
    assert!(limiter.acquire(&mut state, Nanos::ZERO, 1).is_err());
}

#[test]
fn guava_double_min_value_is_rejected_instead_of_granting_once() {
    // Guava's testDoubleMinValueCanAcquireExactlyOnce: one permit, then never again.
    assert!(matches!(
        SmoothBursty::new(f64::MIN_POSITIVE),
        Err(ConfigError::OutOfRange { .. })
    ));
    assert!(SmoothBursty::new(f64::from_bits(1)).is_err());
}

#[test]
fn guava_simple_rate_update() {
    let mut limiter = SmoothWarmingUp::new(5.0, Duration::from_secs(5)).unwrap();
    let mut state = limiter.initial_state(Nanos::ZERO);
    assert_eq!(limiter.rate(), 5.0);
    limiter.set_rate(&mut state, Nanos::ZERO, 10.0).unwrap();
    assert_eq!(limiter.rate(), 10.0);
    assert!(limiter.set_rate(&mut state, Nanos::ZERO, 0.0).is_err());
    assert!(limiter.set_rate(&mut state, Nanos::ZERO, -10.0).is_err());
    assert_eq!(limiter.rate(), 10.0);
}

#[test]
fn guava_simple_with_wait() {
    let mut sw = bursty(5.0);
    sw.acquire(1);
    sw.sleep_millis(200);
    sw.acquire(1);
    sw.acquire(1);
    sw.assert_events(&["R0.00", "U0.20", "R0.00", "R0.20"]);
}

#[test]
fn guava_simple_acquire_return_values() {
    let mut sw = bursty(5.0);
    assert!((sw.acquire(1) - 0.0).abs() < EPSILON);
    sw.sleep_millis(200);
    assert!((sw.acquire(1) - 0.0).abs() < EPSILON);
    assert!((sw.acquire(1) - 0.2).abs() < EPSILON);
    sw.assert_events(&["R0.00", "U0.20", "R0.00", "R0.20"]);
}

#[test]
fn guava_simple_acquire_earliest_available_is_in_past() {
    let mut sw = bursty(5.0);
    assert_eq!(sw.acquire(1), 0.0);
    sw.sleep_millis(400);
    assert_eq!(sw.acquire(1), 0.0);
    assert_eq!(sw.acquire(1), 0.0);
    assert!((sw.acquire(1) - 0.2).abs() < EPSILON);
}

#[test]
fn guava_one_second_burst() {
    let mut sw = bursty(5.0);
    sw.sleep_millis(1000);
    sw.sleep_millis(1000);
    sw.acquire(1);
    sw.acquire(1);
    sw.acquire(3);
    sw.acquire(1);
    sw.acquire(1);
    sw.assert_events(&[
        "U1.00", "U1.00", "R0.00", "R0.00", "R0.00", "R0.00", "R0.20",
    ]);
}

#[test]
fn guava_create_warmup_parameter_validation() {
    assert!(SmoothWarmingUp::new(1.0, Duration::from_nanos(1)).is_ok());
    assert!(SmoothWarmingUp::new(1.0, Duration::ZERO).is_ok());
    assert!(SmoothWarmingUp::new(0.0, Duration::from_nanos(1)).is_err());
    // A negative warm-up cannot be expressed as a Duration.
}

#[test]
fn guava_warm_up() {
    let mut sw = warming(2.0, 4000, 3.0);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(500);
    sw.sleep_millis(4000);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(500);
    sw.sleep_millis(2000);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.assert_events(&[
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
        "U0.50",
        "U4.00",
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
        "U0.50",
        "U2.00",
        "R0.00, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50, R0.50",
    ]);
}

#[test]
fn guava_warm_up_with_cold_factor() {
    let mut sw = warming(5.0, 4000, 10.0);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(200);
    sw.sleep_millis(4000);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(200);
    sw.sleep_millis(1000);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.assert_events(&[
        "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20",
        "U0.20",
        "U4.00",
        "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20",
        "U0.20",
        "U1.00",
        "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20",
    ]);
}

#[test]
fn guava_warm_up_with_cold_factor_1() {
    let mut sw = warming(5.0, 4000, 1.0);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(340);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.assert_events(&[
        "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20",
        "U0.34",
        "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20",
    ]);
}

#[test]
fn guava_warm_up_and_update() {
    let mut sw = warming(2.0, 4000, 3.0);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(4500);
    for _ in 0..3 {
        sw.acquire(1);
    }
    sw.set_rate(4.0);
    sw.acquire(1);
    for _ in 0..4 {
        sw.acquire(1);
    }
    sw.sleep_millis(4250);
    for _ in 0..11 {
        sw.acquire(1);
    }
    sw.assert_events(&[
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
        "U4.50",
        "R0.00, R1.38, R1.13",
        "R0.88",
        "R0.34, R0.28, R0.25, R0.25",
        "U4.25",
        "R0.00, R0.72, R0.66, R0.59, R0.53, R0.47, R0.41",
        "R0.34, R0.28, R0.25, R0.25",
    ]);
}

#[test]
fn guava_warm_up_and_update_with_cold_factor() {
    let mut sw = warming(5.0, 4000, 10.0);
    for _ in 0..8 {
        sw.acquire(1);
    }
    sw.sleep_millis(4200);
    for _ in 0..3 {
        sw.acquire(1);
    }
    sw.set_rate(10.0);
    sw.acquire(1);
    for _ in 0..4 {
        sw.acquire(1);
    }
    sw.sleep_millis(4100);
    for _ in 0..11 {
        sw.acquire(1);
    }
    sw.assert_events(&[
        "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20",
        "U4.20",
        "R0.00, R1.75, R1.26",
        "R0.76",
        "R0.20, R0.10, R0.10, R0.10",
        "U4.10",
        "R0.00, R0.94, R0.81, R0.69, R0.57, R0.44, R0.32",
        "R0.20, R0.10, R0.10, R0.10",
    ]);
}

#[test]
fn guava_bursty_and_update() {
    let mut sw = bursty(1.0);
    sw.acquire(1);
    sw.acquire(1);
    sw.set_rate(2.0);
    sw.acquire(1);
    sw.acquire(2);
    sw.acquire(4);
    sw.acquire(1);
    sw.assert_events(&["R0.00", "R1.00", "R1.00", "R0.50", "R1.00", "R2.00"]);
}

#[test]
fn guava_try_acquire_no_wait_allowed() {
    let mut sw = bursty(5.0);
    assert!(sw.try_acquire(1, Duration::ZERO));
    assert!(!sw.try_acquire(1, Duration::ZERO));
    assert!(!sw.try_acquire(1, Duration::ZERO));
    sw.sleep_millis(100);
    assert!(!sw.try_acquire(1, Duration::ZERO));
}

#[test]
fn guava_try_acquire_some_wait_allowed() {
    let mut sw = bursty(5.0);
    assert!(sw.try_acquire(1, Duration::ZERO));
    assert!(sw.try_acquire(1, Duration::from_millis(200)));
    assert!(!sw.try_acquire(1, Duration::from_millis(100)));
    sw.sleep_millis(100);
    assert!(sw.try_acquire(1, Duration::from_millis(100)));
}

#[test]
fn guava_try_acquire_overflow() {
    let mut sw = bursty(5.0);
    assert!(sw.try_acquire(1, Duration::ZERO));
    sw.sleep_millis(100);
    assert!(sw.try_acquire(1, Duration::from_micros(i64::MAX as u64)));
    assert!(sw.try_acquire(1, Duration::MAX));
}

#[test]
fn guava_try_acquire_negative() {
    // Negative timeouts count as zero; a Duration is never negative.
    let mut sw = bursty(5.0);
    assert!(sw.try_acquire(5, Duration::ZERO));
    sw.sleep_millis(900);
    assert!(!sw.try_acquire(1, Duration::ZERO));
    sw.sleep_millis(100);
    assert!(sw.try_acquire(1, Duration::ZERO));
}

#[test]
fn guava_simple_weights() {
    let mut sw = bursty(1.0);
    for n in [1, 1, 2, 4, 8, 1] {
        sw.acquire(n);
    }
    sw.assert_events(&["R0.00", "R1.00", "R1.00", "R2.00", "R4.00", "R8.00"]);
}

#[test]
fn guava_infinity_is_rejected() {
    // testInfinity_*: Guava allows +inf and then admits everything.
    assert_eq!(
        SmoothBursty::new(f64::INFINITY),
        Err(ConfigError::Infinite {
            parameter: "permits_per_second"
        })
    );
    assert!(SmoothWarmingUp::new(f64::INFINITY, Duration::from_secs(10)).is_err());
    let mut limiter = SmoothBursty::new(1.0).unwrap();
    let mut state = limiter.initial_state(Nanos::ZERO);
    assert!(
        limiter
            .set_rate(&mut state, Nanos::ZERO, f64::INFINITY)
            .is_err()
    );
}

#[test]
fn guava_we_never_get_a_burst_more_than_one_sec() {
    let mut sw = bursty(1.0);
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    for rate in [1000u64, 1, 10, 1_000_000, 10, 1] {
        sw.sleep_millis(rate * 1000);
        sw.set_rate(rate as f64);
        let burst = sw.measure_total_millis(rate, &mut random);
        assert!(burst <= 1000, "rate {rate}: burst took {burst} ms");
        let after = sw.measure_total_millis(rate, &mut random);
        assert!(
            after >= 1000,
            "rate {rate}: after the burst took {after} ms"
        );
    }
}

#[test]
fn guava_time_to_warm_up_is_honoured_even_with_weights() {
    let mut random = Random(0x2545_F491_4F6C_DD1D);
    let warmup_permits = 10;
    let mut now = Nanos::ZERO;
    for _trial in 0..20 {
        for cold_factor in [2.0, 3.0, 10.0] {
            for qps in [4.0, 2.0, 1.0, 0.5, 0.1] {
                let warmup_ms =
                    ((1.0 + cold_factor) * warmup_permits as f64 / (2.0 * qps) * 1000.0) as u64;
                let limiter = SmoothWarmingUp::with_cold_factor(
                    qps,
                    Duration::from_millis(warmup_ms),
                    cold_factor,
                )
                .unwrap();
                let mut sw = Stopwatch::starting_at(limiter, now);
                assert_eq!(
                    sw.measure_total_millis(warmup_permits, &mut random),
                    warmup_ms
                );
                now = sw.now;
            }
        }
    }
}

#[test]
fn warm_up_and_bursty_agree_with_a_limiter_through_limiter_facade() {
    use tollgate::Limiter;
    use tollgate::time::ManualClock;
    let clock = ManualClock::new();
    let limiter = Limiter::with_clock(SmoothBursty::new(5.0).unwrap(), clock.clone());
    assert!(limiter.try_acquire(1).is_ok());
    let denied = limiter.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(200)));
    limiter
        .reconfigure(|b, s, now| b.set_rate(s, now, 10.0))
        .unwrap();
    clock.advance(Duration::from_millis(200));
    assert!(limiter.try_acquire(1).is_ok());
    let denied = limiter.try_acquire(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
}

// ---------------------------------------------------------------------------------
// Reference model: the formulas of semantics.md, written out plainly, in whole
// microseconds.

#[derive(Clone, Copy, Debug)]
enum Kind {
    Bursty { max_burst_seconds: f64 },
    Warming { warmup_us: i64, cold_factor: f64 },
}

#[derive(Clone, Debug)]
struct Model {
    kind: Kind,
    stable: f64,
    max: f64,
    threshold: f64,
    slope: f64,
    cool_down: f64,
    stored: f64,
    next_free: i64,
}

impl Model {
    fn new(kind: Kind, rate: f64) -> Model {
        let mut m = Model {
            kind,
            stable: 0.0,
            max: 0.0,
            threshold: 0.0,
            slope: 0.0,
            cool_down: 0.0,
            stored: 0.0,
            next_free: 0,
        };
        m.configure(rate);
        m.stored = match kind {
            Kind::Bursty { .. } => 0.0,
            Kind::Warming { .. } => m.max,
        };
        m
    }

    fn configure(&mut self, rate: f64) {
        self.stable = 1e6 / rate;
        match self.kind {
            Kind::Bursty { max_burst_seconds } => {
                self.max = max_burst_seconds * rate;
                self.cool_down = self.stable;
            }
            Kind::Warming {
                warmup_us,
                cold_factor,
            } => {
                if warmup_us == 0 {
                    // tollgate: no warm-up at all.
                    self.threshold = 0.0;
                    self.max = 0.0;
                    self.slope = 0.0;
                    self.cool_down = f64::INFINITY;
                } else {
                    let warmup = warmup_us as f64;
                    let cold_interval = cold_factor * self.stable;
                    self.threshold = 0.5 * warmup / self.stable;
                    self.max = self.threshold + 2.0 * warmup / (self.stable + cold_interval);
                    self.slope = (cold_interval - self.stable) / (self.max - self.threshold);
                    self.cool_down = warmup / self.max;
                }
            }
        }
    }

    fn resync(&mut self, now: i64) {
        if now > self.next_free {
            let new = (now - self.next_free) as f64 / self.cool_down;
            self.stored = self.max.min(self.stored + new);
            self.next_free = now;
        }
    }

    fn time(&self, p: f64) -> f64 {
        self.stable + p * self.slope
    }

    fn stored_to_wait(&self, stored: f64, mut k: f64) -> i64 {
        match self.kind {
            Kind::Bursty { .. } => 0,
            Kind::Warming { .. } => {
                let above = stored - self.threshold;
                let mut us = 0i64;
                if above > 0.0 {
                    let t = above.min(k);
                    us = (t * (self.time(above) + self.time(above - t)) / 2.0) as i64;
                    k -= t;
                }
                us + (self.stable * k) as i64
            }
        }
    }

    /// Returns `max(ret - now, 0)`.
    fn reserve(&mut self, n: u64, now: i64) -> i64 {
        self.resync(now);
        let ret = self.next_free;
        let spend = (n as f64).min(self.stored);
        let fresh = n as f64 - spend;
        let wait = self.stored_to_wait(self.stored, spend) + (fresh * self.stable) as i64;
        self.next_free = self.next_free.saturating_add(wait);
        self.stored -= spend;
        (ret - now).max(0)
    }

    /// `Ok(wait)` or `Err(retry_after)`, both in microseconds.
    fn try_acquire(&mut self, n: u64, now: i64, timeout: i64) -> Result<i64, i64> {
        if self.next_free - timeout > now {
            Err(self.next_free - timeout - now)
        } else {
            Ok(self.reserve(n, now))
        }
    }

    fn set_rate(&mut self, rate: f64, now: i64) {
        self.resync(now);
        let old_max = self.max;
        self.configure(rate);
        self.stored = match self.kind {
            Kind::Bursty { .. } if old_max == 0.0 => 0.0,
            Kind::Warming { .. } if old_max == 0.0 => self.max,
            _ => self.stored * self.max / old_max,
        };
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    AdvanceUs(u64),
    Acquire(u64),
    Reserve(u64, u64),
    AcquireWait(u64),
    SetRate(f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..3_000_000).prop_map(Op::AdvanceUs),
        3 => (0u64..12).prop_map(Op::Acquire),
        2 => ((0u64..12), (0u64..3_000_000)).prop_map(|(n, w)| Op::Reserve(n, w)),
        2 => (0u64..12).prop_map(Op::AcquireWait),
        1 => rate().prop_map(Op::SetRate),
    ]
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 1000.0]),
        0.05f64..200.0,
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        prop_oneof![Just(1.0), Just(0.0), 0.0f64..5.0]
            .prop_map(|max_burst_seconds| Kind::Bursty { max_burst_seconds }),
        (
            prop_oneof![Just(0i64), 1i64..10_000_000],
            prop_oneof![Just(3.0), Just(1.0), 1.0f64..12.0]
        )
            .prop_map(|(warmup_us, cold_factor)| Kind::Warming {
                warmup_us,
                cold_factor
            }),
    ]
}

/// The limiter under test, either kind.
#[derive(Clone, Debug)]
enum Smooth {
    Bursty(SmoothBursty),
    Warming(SmoothWarmingUp),
}

impl Smooth {
    fn new(kind: Kind, rate: f64) -> Smooth {
        match kind {
            Kind::Bursty { max_burst_seconds } => Smooth::Bursty(
                SmoothBursty::with_max_burst_seconds(rate, max_burst_seconds).unwrap(),
            ),
            Kind::Warming {
                warmup_us,
                cold_factor,
            } => Smooth::Warming(
                SmoothWarmingUp::with_cold_factor(
                    rate,
                    Duration::from_micros(warmup_us as u64),
                    cold_factor,
                )
                .unwrap(),
            ),
        }
    }

    fn initial_state(&self, now: Nanos) -> SmoothState {
        match self {
            Smooth::Bursty(a) => a.initial_state(now),
            Smooth::Warming(a) => a.initial_state(now),
        }
    }

    fn acquire(&self, s: &mut SmoothState, now: Nanos, n: u64) -> tollgate::Decision {
        match self {
            Smooth::Bursty(a) => a.acquire(s, now, n),
            Smooth::Warming(a) => a.acquire(s, now, n),
        }
    }

    fn reserve(
        &self,
        s: &mut SmoothState,
        now: Nanos,
        n: u64,
        w: Duration,
    ) -> Result<tollgate::Reservation, tollgate::Denied> {
        match self {
            Smooth::Bursty(a) => a.reserve(s, now, n, w),
            Smooth::Warming(a) => a.reserve(s, now, n, w),
        }
    }

    fn acquire_wait(
        &self,
        s: &mut SmoothState,
        now: Nanos,
        n: u64,
    ) -> Result<Duration, tollgate::Denied> {
        match self {
            Smooth::Bursty(a) => a.acquire_wait(s, now, n),
            Smooth::Warming(a) => a.acquire_wait(s, now, n),
        }
    }

    fn set_rate(&mut self, s: &mut SmoothState, now: Nanos, rate: f64) {
        match self {
            Smooth::Bursty(a) => a.set_rate(s, now, rate).unwrap(),
            Smooth::Warming(a) => a.set_rate(s, now, rate).unwrap(),
        }
    }

    fn max_permits(&self) -> f64 {
        match self {
            Smooth::Bursty(a) => a.max(),
            Smooth::Warming(a) => a.max(),
        }
    }

    fn rate(&self) -> f64 {
        match self {
            Smooth::Bursty(a) => a.permits_per_second(),
            Smooth::Warming(a) => a.permits_per_second(),
        }
    }
}

fn us(d: Duration) -> i64 {
    assert_eq!(d.subsec_nanos() % 1000, 0, "whole microseconds: {d:?}");
    d.as_micros() as i64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every decision, wait and state matches the formulas, bit for bit.
    #[test]
    fn matches_the_reference_model(
        kind in kind(),
        rate in rate(),
        start_us in 0u64..1_000_000_000,
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut limiter = Smooth::new(kind, rate);
        let start = Nanos::new(start_us * 1000);
        let mut state = limiter.initial_state(start);
        let mut model = Model::new(kind, rate);
        let mut now_us: i64 = 0;
        for op in ops {
            let now = Nanos::new(start.as_u64() + now_us as u64 * 1000);
            match op {
                Op::AdvanceUs(d) => now_us += d as i64,
                Op::Acquire(n) => {
                    let got = limiter.acquire(&mut state, now, n);
                    if n == 0 {
                        prop_assert!(got.is_ok());
                        continue;
                    }
                    match model.try_acquire(n, now_us, 0) {
                        Ok(wait) => {
                            prop_assert_eq!(wait, 0);
                            let admitted = got.unwrap();
                            let remaining = if model.next_free > now_us {
                                0
                            } else {
                                model.stored as u64
                            };
                            prop_assert_eq!(admitted.remaining(), remaining);
                            prop_assert_eq!(admitted.limit(), (model.max as u64).max(1));
                        }
                        Err(retry) => {
                            let denied = got.unwrap_err();
                            prop_assert_eq!(us(denied.retry_after().unwrap()), retry);
                        }
                    }
                }
                Op::Reserve(n, max_wait_us) => {
                    let got = limiter.reserve(&mut state, now, n, Duration::from_micros(max_wait_us));
                    if n == 0 {
                        prop_assert!(got.unwrap().is_immediate());
                        continue;
                    }
                    match model.try_acquire(n, now_us, max_wait_us as i64) {
                        Ok(wait) => prop_assert_eq!(us(got.unwrap().wait()), wait),
                        Err(retry) => {
                            prop_assert_eq!(us(got.unwrap_err().retry_after().unwrap()), retry)
                        }
                    }
                }
                Op::AcquireWait(n) => {
                    let got = limiter.acquire_wait(&mut state, now, n).unwrap();
                    let wait = if n == 0 { 0 } else { model.reserve(n, now_us) };
                    prop_assert_eq!(us(got), wait);
                }
                Op::SetRate(r) => {
                    limiter.set_rate(&mut state, now, r);
                    model.set_rate(r, now_us);
                }
            }
            prop_assert_eq!(state.stored_permits().to_bits(), model.stored.to_bits());
            prop_assert_eq!(
                state.next_free(),
                Nanos::new(start.as_u64() + model.next_free as u64 * 1000)
            );
        }
    }

    /// Over any run at one rate, the permits usable by time T (those whose wait has
    /// elapsed) never exceed `max_permits + rate * T` plus one prepaid request, give
    /// or take Guava's truncation of each request's cost (under 3 µs a request).
    #[test]
    fn never_admits_more_than_burst_plus_rate(
        kind in kind(),
        rate in rate(),
        steps in prop::collection::vec(
            ((0u64..2_000_000_000), (1u64..12), (0u8..3), (0u64..2_000_000_000)),
            1..60,
        ),
    ) {
        let limiter = Smooth::new(kind, rate);
        let mut state = limiter.initial_state(Nanos::ZERO);
        let mut now = Nanos::ZERO;
        // (instant usable, permits)
        let mut granted: Vec<(Nanos, u64)> = Vec::new();
        for (advance_ns, n, how, max_wait_ns) in steps {
            now = now + Duration::from_nanos(advance_ns);
            let wait = match how {
                0 => limiter.acquire(&mut state, now, n).ok().map(|_| Duration::ZERO),
                1 => limiter
                    .reserve(&mut state, now, n, Duration::from_nanos(max_wait_ns))
                    .ok()
                    .map(|r| r.wait()),
                _ => limiter.acquire_wait(&mut state, now, n).ok(),
            };
            if let Some(wait) = wait {
                granted.push((now + wait, n));
            }
            let usable: Vec<u64> = granted
                .iter()
                .filter(|(at, _)| *at <= now)
                .map(|&(_, n)| n)
                .collect();
            let total: u64 = usable.iter().sum();
            let largest = usable.iter().copied().max().unwrap_or(0) as f64;
            let seconds = now.as_duration().as_secs_f64();
            let slack = 3.0 * granted.len() as f64 * limiter.rate() / 1e6;
            let bound = limiter.max_permits() + limiter.rate() * seconds + largest + slack;
            prop_assert!(
                total as f64 <= bound + 1e-9,
                "{} permits usable by {:?}, bound {}", total, now, bound
            );
        }
    }

    /// A denial changes nothing, and a peek equals the acquire it predicts.
    #[test]
    fn denials_and_peeks_change_nothing(
        kind in kind(),
        rate in rate(),
        steps in prop::collection::vec(((0u64..1_000_000_000), (0u64..12)), 1..40),
    ) {
        let limiter = Smooth::new(kind, rate);
        let mut state = limiter.initial_state(Nanos::ZERO);
        let mut now = Nanos::ZERO;
        for (advance, n) in steps {
            now = now + Duration::from_nanos(advance);
            let before = state;
            let peeked = match &limiter {
                Smooth::Bursty(a) => a.peek(&state, now, n),
                Smooth::Warming(a) => a.peek(&state, now, n),
            };
            prop_assert_eq!(state, before);
            let got = limiter.acquire(&mut state, now, n);
            prop_assert_eq!(peeked, got);
            if got.is_err() || n == 0 {
                prop_assert_eq!(state, before);
            }
        }
    }
}
