//! Guava's limiters in the stores: the Redis script decides as the memory store (the
//! pure `SmoothBursty` and `SmoothWarmingUp`) under random requests, alone and with a
//! GCRA rule; Guava's own `RateLimiterTest` sequences give Guava's waits through Redis;
//! and on the server's clock the key holds the state with the TTL of its debt.
#![cfg(feature = "redis")]

mod common;

use std::time::Duration;

use common::redis::{RedisServer, require_redis};
use common::store::{Differential, EPOCH_MICROS, connect, steps};
use proptest::prelude::*;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tollgate::algorithm::{Gcra, SmoothBursty, SmoothWarmingUp};
use tollgate::store::{Check, Op, RedisStore, Request, Rule, SharedLimiter, Store};
use tollgate::{Quota, Reservation};

/// Rates whose stable interval is a whole number of µs, from 1 s down to 1 ms.
const RATES: [f64; 9] = [1.0, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];

/// A rate of `RATES` and its stable interval in µs.
fn rate() -> impl Strategy<Value = (f64, u64)> {
    prop::sample::select(&RATES[..]).prop_map(|rate| (rate, (1e6 / rate) as u64))
}

/// A bursty limiter storing up to 0–5 s of permits (0 s included), and its interval.
fn bursty() -> impl Strategy<Value = (Rule, u64)> {
    let seconds = prop::sample::select(&[0.0, 0.5, 1.0, 2.0, 5.0][..]);
    (rate(), seconds).prop_map(|((rate, interval), seconds)| {
        let rule = SmoothBursty::with_max_burst_seconds(rate, seconds).unwrap();
        (Rule::from(rule), interval)
    })
}

/// A warming-up limiter with 0–5 s of warm-up in whole ms (none now and then) and a
/// cold factor of 2–5, and its coldest interval in µs.
fn warming_up() -> impl Strategy<Value = (Rule, u64)> {
    let warmup_ms = prop_oneof![1 => Just(0u64), 6 => 1u64..=5_000];
    (rate(), warmup_ms, 2.0f64..=5.0).prop_map(|((rate, interval), warmup_ms, cold_factor)| {
        let warmup = Duration::from_millis(warmup_ms);
        let rule = SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap();
        (Rule::from(rule), (interval as f64 * cold_factor) as u64)
    })
}

/// Either of Guava's limiters.
fn smooth() -> impl Strategy<Value = (Rule, u64)> {
    prop_oneof![bursty(), warming_up()]
}

/// GCRA with intervals of whole µs from 1 ms to 2 s and bursts 1–8.
fn gcra() -> impl Strategy<Value = Rule> {
    (1_000u64..2_000_000, 1u64..8).prop_map(|(interval, burst)| {
        let quota = Quota::with_period(Duration::from_micros(interval)).unwrap();
        Rule::from(Gcra::new(quota.burst(burst).unwrap()))
    })
}

/// Steps a few of `interval` apart: requests mostly meet a live state, often in debt.
fn scaled_steps(interval_micros: u64) -> impl Strategy<Value = Vec<common::store::Step>> {
    steps(interval_micros * 4, 8, 1..32)
}

#[test]
fn smooth_bursty_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = bursty().prop_flat_map(|(rule, interval)| {
        (Just(rule), 0u64..1_000_000_000, scaled_steps(interval))
    });
    diff.run(64, strategy, |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn smooth_warming_up_script_decides_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = warming_up().prop_flat_map(|(rule, interval)| {
        (Just(rule), 0u64..1_000_000_000, scaled_steps(interval))
    });
    diff.run(64, strategy, |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

#[test]
fn smooth_and_gcra_rules_decide_all_or_nothing_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (smooth(), gcra()).prop_flat_map(|((smooth, interval), gcra)| {
        (
            Just(smooth),
            Just(gcra),
            any::<bool>(),
            0u64..1_000_000_000,
            scaled_steps(interval),
        )
    });
    diff.run(
        56,
        strategy,
        |diff, (smooth, gcra, smooth_first, start, steps)| {
            let rules = if smooth_first {
                [smooth, gcra]
            } else {
                [gcra, smooth]
            };
            diff.check(&rules, start, &steps)
        },
    );
}

#[test]
fn bursty_and_warming_up_on_two_keys_decide_as_the_memory_store() {
    let Some(diff) = Differential::start() else {
        return;
    };
    let strategy = (bursty(), warming_up()).prop_flat_map(|((a, interval), (b, _))| {
        (
            Just(a),
            Just(b),
            0u64..1_000_000_000,
            scaled_steps(interval),
        )
    });
    diff.run(48, strategy, |diff, (a, b, start, steps)| {
        diff.check(&[a, b], start, &steps)
    });
}

#[test]
fn stable_intervals_of_fractional_microseconds_decide_as_the_memory_store() {
    // 1e6 / 3 µs and the like: the script repeats Rust's doubles and truncations.
    let Some(diff) = Differential::start() else {
        return;
    };
    let rate = prop::sample::select(&[3.0, 7.0, 9.0, 11.0, 13.0, 30.0, 2.5, 0.3, 333.0][..]);
    let rule = (rate, 0u64..=3_000, 1.0f64..=5.0, any::<bool>()).prop_map(
        |(rate, warmup_ms, cold_factor, bursty)| {
            if bursty {
                Rule::from(SmoothBursty::with_max_burst_seconds(rate, cold_factor - 1.0).unwrap())
            } else {
                let warmup = Duration::from_millis(warmup_ms);
                Rule::from(SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap())
            }
        },
    );
    let strategy = (rule, 0u64..1_000_000_000, steps(1_500_000, 8, 1..32));
    diff.run(48, strategy, |diff, (rule, start, steps)| {
        diff.check(&[rule], start, &steps)
    });
}

/// Guava's `FakeStopwatch` over a Redis store: every request at an explicit time, each
/// sleep recorded as `R` (by the limiter) or `U` (by the user), in seconds.
struct Stopwatch {
    store: RedisStore<MultiplexedConnection>,
    rule: Rule,
    key: String,
    now_micros: u64,
    events: Vec<String>,
}

impl Stopwatch {
    fn new(connection: &MultiplexedConnection, key: &str, rule: impl Into<Rule>) -> Stopwatch {
        Stopwatch {
            store: RedisStore::new(connection.clone(), "guava").unwrap(),
            rule: rule.into(),
            key: key.to_owned(),
            now_micros: EPOCH_MICROS,
            events: Vec::new(),
        }
    }

    fn sleep(&mut self, caption: &str, micros: u64) {
        self.now_micros += micros;
        // Java's %3.2f rounds half up.
        let cents = (micros + 5_000) / 10_000;
        self.events
            .push(format!("{caption}{}.{:02}", cents / 100, cents % 100));
    }

    fn sleep_millis(&mut self, ms: u64) {
        self.sleep("U", ms * 1_000);
    }

    async fn reserve(&self, n: u64, max_wait: Duration) -> Option<Reservation> {
        let checks = [Check::new("", &self.rule)];
        let op = Op::Reserve { n, max_wait };
        let request =
            Request::new(&self.key, &checks, op).at(Duration::from_micros(self.now_micros));
        let outcome = self.store.execute(&request).await.unwrap();
        outcome.into_reservation().unwrap().ok()
    }

    /// Guava's `acquire(n)`: returns the wait in µs.
    async fn acquire(&mut self, n: u64) -> u64 {
        let wait = self.reserve(n, Duration::MAX).await.unwrap().wait();
        let micros = u64::try_from(wait.as_micros()).unwrap();
        self.sleep("R", micros);
        micros
    }

    /// Guava's `tryAcquire(n, timeout)`.
    async fn try_acquire(&mut self, n: u64, timeout: Duration) -> bool {
        match self.reserve(n, timeout).await {
            Some(reservation) => {
                let micros = u64::try_from(reservation.wait().as_micros()).unwrap();
                self.sleep("R", micros);
                true
            }
            None => false,
        }
    }

    fn assert_events(&mut self, expected: &[&str]) {
        assert_eq!(self.events.join(", "), expected.join(", "));
        self.events.clear();
    }
}

fn bursty_rule(rate: f64) -> SmoothBursty {
    SmoothBursty::new(rate).unwrap()
}

fn warming_rule(rate: f64, warmup_ms: u64, cold_factor: f64) -> SmoothWarmingUp {
    let warmup = Duration::from_millis(warmup_ms);
    SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap()
}

/// Guava's testSimple, testSimpleWithWait, testSimpleWeights and the tryAcquire tests,
/// where no request comes after the state went idle (a store forgets it then).
#[tokio::test]
async fn guava_bursty_sequences_through_redis() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let connection = connect(&server.url()).await;

    let mut sw = Stopwatch::new(&connection, "simple", bursty_rule(5.0));
    for _ in 0..3 {
        sw.acquire(1).await;
    }
    sw.assert_events(&["R0.00", "R0.20", "R0.20"]);

    let mut sw = Stopwatch::new(&connection, "with-wait", bursty_rule(5.0));
    assert_eq!(sw.acquire(1).await, 0);
    sw.sleep_millis(200);
    assert_eq!(sw.acquire(1).await, 0);
    assert_eq!(sw.acquire(1).await, 200_000);
    sw.assert_events(&["R0.00", "U0.20", "R0.00", "R0.20"]);

    let mut sw = Stopwatch::new(&connection, "weights", bursty_rule(1.0));
    for n in [1, 1, 2, 4, 8, 1] {
        sw.acquire(n).await;
    }
    sw.assert_events(&["R0.00", "R1.00", "R1.00", "R2.00", "R4.00", "R8.00"]);

    let mut sw = Stopwatch::new(&connection, "no-wait", bursty_rule(5.0));
    assert!(sw.try_acquire(1, Duration::ZERO).await);
    assert!(!sw.try_acquire(1, Duration::ZERO).await);
    assert!(!sw.try_acquire(1, Duration::ZERO).await);
    sw.sleep_millis(100);
    assert!(!sw.try_acquire(1, Duration::ZERO).await);

    let mut sw = Stopwatch::new(&connection, "some-wait", bursty_rule(5.0));
    assert!(sw.try_acquire(1, Duration::ZERO).await);
    assert!(sw.try_acquire(1, Duration::from_millis(200)).await);
    assert!(!sw.try_acquire(1, Duration::from_millis(100)).await);
    sw.sleep_millis(100);
    assert!(sw.try_acquire(1, Duration::from_millis(100)).await);

    let mut sw = Stopwatch::new(&connection, "overflow", bursty_rule(5.0));
    assert!(sw.try_acquire(1, Duration::ZERO).await);
    sw.sleep_millis(100);
    assert!(
        sw.try_acquire(1, Duration::from_micros(i64::MAX as u64))
            .await
    );
    assert!(sw.try_acquire(1, Duration::MAX).await);
    sw.assert_events(&["R0.00", "U0.10", "R0.10", "R0.20"]);

    let mut sw = Stopwatch::new(&connection, "negative", bursty_rule(5.0));
    assert!(sw.try_acquire(5, Duration::ZERO).await);
    sw.sleep_millis(900);
    assert!(!sw.try_acquire(1, Duration::ZERO).await);
    sw.sleep_millis(100);
    assert!(sw.try_acquire(1, Duration::ZERO).await);
}

/// Guava's testWarmUp and testWarmUpWithColdFactor up to the full cool-down (a store
/// forgets an idle state, and a fresh one is fully cold, as Guava's is by then), and
/// testWarmUpWithColdFactor1.
#[tokio::test]
async fn guava_warm_up_sequences_through_redis() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let connection = connect(&server.url()).await;

    let mut sw = Stopwatch::new(&connection, "warm-up", warming_rule(2.0, 4000, 3.0));
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.sleep_millis(500);
    sw.sleep_millis(4000);
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.assert_events(&[
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
        "U0.50",
        "U4.00",
        "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50",
    ]);

    let mut sw = Stopwatch::new(&connection, "cold-10", warming_rule(5.0, 4000, 10.0));
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.sleep_millis(200);
    sw.sleep_millis(4000);
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.assert_events(&[
        "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20",
        "U0.20",
        "U4.00",
        "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, R0.20, R0.20",
    ]);

    let mut sw = Stopwatch::new(&connection, "cold-1", warming_rule(5.0, 4000, 1.0));
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.sleep_millis(340);
    for _ in 0..8 {
        sw.acquire(1).await;
    }
    sw.assert_events(&[
        "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20",
        "U0.34",
        "R0.00, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20, R0.20",
    ]);
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

/// Guava's testTimeToWarmUpIsHonouredEvenWithWeights: from cold, 10 permits taken in
/// random weights last exactly the warm-up period.
#[tokio::test]
async fn guava_time_to_warm_up_is_honoured_even_with_weights_through_redis() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let connection = connect(&server.url()).await;
    let mut random = Random(0x2545_F491_4F6C_DD1D);
    let warmup_permits = 10u64;
    let mut trial = 0;
    let mut now_micros = EPOCH_MICROS;
    for _ in 0..3 {
        for cold_factor in [2.0, 3.0, 10.0] {
            for qps in [4.0, 2.0, 1.0, 0.5, 0.1] {
                let warmup_ms =
                    ((1.0 + cold_factor) * warmup_permits as f64 / (2.0 * qps) * 1000.0) as u64;
                let rule = warming_rule(qps, warmup_ms, cold_factor);
                trial += 1;
                let mut sw = Stopwatch::new(&connection, &format!("trial{trial}"), rule);
                sw.now_micros = now_micros;
                let mut permits = warmup_permits;
                while permits > 0 {
                    let next = random.below(permits).max(1);
                    permits -= next;
                    sw.acquire(next).await;
                }
                sw.acquire(1).await; // repays the pending debt
                assert_eq!(
                    (sw.now_micros - now_micros) / 1_000,
                    warmup_ms,
                    "{qps}/s, cold factor {cold_factor}"
                );
                now_micros = sw.now_micros;
            }
        }
    }
}

/// On the server's clock: the key holds "stored start next_free" and lives until its
/// stored permits are back at the maximum, plus the script's second of slack.
#[tokio::test]
async fn server_clock_state_and_ttl() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let mut connection = connect(&server.url()).await;
    let server_micros = |time: (u64, u64)| time.0 * 1_000_000 + time.1;

    // Guava's testWarmUp: fully cold, 8 stored permits; the first takes one, and the
    // next must wait 1.375 s.
    let warm = SharedLimiter::new(
        RedisStore::new(connection.clone(), "clock").unwrap(),
        warming_rule(2.0, 4000, 3.0),
    )
    .unwrap();
    let before: (u64, u64) = redis::cmd("TIME")
        .query_async(&mut connection)
        .await
        .unwrap();
    let admitted = warm.check("w", 1).await.unwrap().unwrap();
    let after: (u64, u64) = redis::cmd("TIME")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!((admitted.limit(), admitted.remaining()), (8, 0));
    assert_eq!(admitted.reset_after(), Duration::from_millis(1875));

    let key = warm.store().redis_key("w", "");
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(
        ttl > 1_875 && ttl <= 2_875,
        "ttl {ttl} ms: until fully cold again (1.875 s), plus 1 s of slack"
    );
    let state: String = connection.get(&key).await.unwrap();
    let fields: Vec<&str> = state.split_once(':').unwrap().1.split(' ').collect();
    assert_eq!((fields[0], fields[2]), ("7", "1375000"), "state {state}");
    let start: u64 = fields[1].parse().unwrap();
    assert!(
        (server_micros(before)..=server_micros(after)).contains(&start),
        "start {start} outside the server's TIME {before:?}..{after:?}"
    );

    let denied = warm.check("w", 1).await.unwrap().unwrap_err();
    let retry = denied.retry_after().unwrap();
    assert!(
        retry > Duration::from_millis(1_000) && retry <= Duration::from_micros(1_375_000),
        "{retry:?}"
    );
    let unchanged: String = connection.get(&key).await.unwrap();
    assert_eq!(unchanged, state, "a denial changed the state");

    // A peek on a fresh key writes nothing.
    let bursty = SharedLimiter::new(
        RedisStore::new(connection.clone(), "clock").unwrap(),
        bursty_rule(2.0),
    )
    .unwrap();
    assert!(bursty.check("b", 0).await.unwrap().is_ok());
    let exists: bool = connection
        .exists(bursty.store().redis_key("b", ""))
        .await
        .unwrap();
    assert!(!exists, "a peek on a fresh key created it");
    // 4 permits at 500 ms each are paid by the next caller: 2 s of debt, then 1 s to
    // store the 2 permits of a full burst, plus 1 s of slack.
    assert!(bursty.check("b", 4).await.unwrap().is_ok());
    let ttl: i64 = connection
        .pttl(bursty.store().redis_key("b", ""))
        .await
        .unwrap();
    assert!(ttl > 3_000 && ttl <= 4_000, "ttl {ttl} ms");
}
