//! KeyedLimiter: independence of keys, the memory bound, eviction, and agreement with
//! one plain `Limiter` per key under virtual time.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::{Clock, ManualClock, MonotonicClock};
use tollgate::{ConfigError, Denied, KeyedConfig, KeyedLimiter, Limiter, Quota, WhenFull};

fn gcra(per_second: u64, burst: u64) -> Gcra {
    Gcra::new(Quota::per_second(per_second).unwrap().burst(burst).unwrap())
}

fn keyed<K>(
    algorithm: Gcra,
    config: KeyedConfig,
) -> (KeyedLimiter<K, Gcra, ManualClock>, ManualClock)
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::with_clock(algorithm, config, clock.clone()).unwrap();
    (limiter, clock)
}

#[test]
fn keys_have_independent_limits() {
    let (limiter, clock) = keyed::<u32>(gcra(10, 3), KeyedConfig::new(100));
    for remaining in [2, 1, 0] {
        assert_eq!(limiter.try_acquire(&1, 1).unwrap().remaining(), remaining);
    }
    let denied = limiter.try_acquire(&1, 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(limiter.try_acquire(&2, 3).unwrap().remaining(), 0);
    assert_eq!(limiter.peek(&3, 1).unwrap().remaining(), 2);
    clock.advance(Duration::from_millis(100));
    assert!(limiter.try_acquire(&1, 1).is_ok());
    assert!(limiter.try_acquire(&1, 1).is_err());
    assert_eq!(limiter.len(), 2);
}

#[test]
fn idle_keys_are_evicted() {
    let (limiter, clock) = keyed::<u32>(gcra(10, 10), KeyedConfig::new(1_000));
    for key in 0..50 {
        limiter.try_acquire(&key, 1 + u64::from(key % 5)).unwrap();
    }
    assert_eq!(limiter.len(), 50);
    assert_eq!(limiter.sweep(), 0, "nothing is idle yet");
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        limiter.sweep(),
        10,
        "keys that took one permit are idle after 100 ms"
    );
    clock.advance(Duration::from_millis(400));
    assert_eq!(limiter.sweep(), 40);
    assert!(limiter.is_empty());
}

#[test]
fn idle_keys_leave_below_the_bound_without_an_explicit_sweep() {
    let (limiter, clock) = keyed::<u32>(gcra(10, 1), KeyedConfig::new(100_000).shards(1));
    for round in 0..20 {
        for key in 0..100 {
            limiter.try_acquire(&(round * 100 + key), 1).unwrap();
        }
        clock.advance(Duration::from_millis(100));
    }
    assert!(limiter.len() <= 100, "{}", limiter.len());
}

#[test]
fn evicting_an_idle_key_changes_no_decision() {
    let (limiter, clock) = keyed::<u32>(gcra(10, 2), KeyedConfig::new(10));
    limiter.try_acquire(&1, 2).unwrap();
    clock.advance(Duration::from_millis(250));
    let before = limiter.peek(&1, 2).unwrap();
    assert_eq!(limiter.sweep(), 1);
    assert_eq!(limiter.peek(&1, 2).unwrap(), before);
}

#[test]
fn a_flood_of_unique_keys_stays_within_max_keys_and_is_served() {
    // Keys live one second after a request; the flood lasts half a second.
    let (limiter, clock) = keyed::<u32>(gcra(1, 2), KeyedConfig::new(1_000));
    limiter.try_acquire(&u32::MAX, 2).unwrap();
    for key in 0..100_000 {
        assert!(
            limiter.try_acquire(&key, 1).is_ok(),
            "newcomer {key} denied"
        );
        if key % 100 == 0 {
            assert!(limiter.len() <= 1_000);
        }
        clock.advance(Duration::from_micros(5));
    }
    assert_eq!(limiter.len(), 1_000);
    // The key present before the flood used its whole burst: further from idle than
    // any flood key, it was never the one evicted, and is still at its limit.
    assert!(limiter.try_acquire(&u32::MAX, 1).is_err());
}

#[test]
fn a_flood_of_unique_keys_fills_a_denying_table_and_no_further() {
    // Keys live one second after a request; the flood lasts half a second.
    let (limiter, clock) = keyed::<u32>(
        gcra(1, 2),
        KeyedConfig::new(1_000).when_full(WhenFull::Deny),
    );
    limiter.try_acquire(&u32::MAX, 1).unwrap();
    let mut admitted = 0;
    for key in 0..100_000 {
        if limiter.try_acquire(&key, 1).is_ok() {
            admitted += 1;
        }
        if key % 100 == 0 {
            assert!(limiter.len() <= 1_000);
        }
        clock.advance(Duration::from_micros(5));
    }
    assert_eq!(limiter.len(), 1_000);
    assert_eq!(
        admitted, 999,
        "every shard filled to its share, and no further"
    );
    // The key present before the flood was neither lost nor reset: it still has the
    // one permit it had left, and no more.
    assert!(limiter.try_acquire(&u32::MAX, 1).is_ok());
    assert!(limiter.try_acquire(&u32::MAX, 1).is_err());
}

#[test]
fn a_flood_of_short_lived_keys_recycles_memory() {
    // Keys are idle 1 ms after their request and arrive every 10 us: about 100 live.
    let (limiter, clock) = keyed::<u32>(gcra(1_000, 1), KeyedConfig::new(1_000));
    let mut denied = 0;
    for key in 0..100_000 {
        denied += usize::from(limiter.try_acquire(&key, 1).is_err());
        assert!(key % 1_000 != 0 || limiter.len() <= 1_000);
        clock.advance(Duration::from_micros(10));
    }
    assert!(limiter.len() <= 1_000);
    assert_eq!(denied, 0, "idle keys made room for every newcomer");
}

#[test]
fn full_bound_denies_new_keys_until_the_next_key_is_idle() {
    let (limiter, clock) = keyed::<String>(
        gcra(1, 1),
        KeyedConfig::new(2).shards(1).when_full(WhenFull::Deny),
    );
    limiter.try_acquire("a", 1).unwrap(); // idle at 1 s
    clock.advance(Duration::from_millis(500));
    limiter.try_acquire("b", 1).unwrap(); // idle at 1.5 s
    clock.advance(Duration::from_millis(100));

    let denied = limiter.try_acquire("c", 1).unwrap_err();
    let Denied::Limited(limited) = denied else {
        panic!("expected Limited, got {denied:?}");
    };
    assert_eq!(limited.retry_after(), Some(Duration::from_millis(400)));
    assert_eq!(limited.remaining(), 0);
    assert_eq!(limited.limit(), 1);
    assert_eq!(
        limiter
            .reserve("c", 1, Duration::from_secs(10))
            .unwrap_err()
            .retry_after(),
        Some(Duration::from_millis(400))
    );
    assert_eq!(limiter.peek("c", 1).unwrap_err(), denied);
    assert!(
        limiter.peek("c", 0).is_ok(),
        "a peek of nothing always succeeds"
    );
    assert!(
        limiter.try_acquire("c", 2).unwrap_err().is_never(),
        "never stays never"
    );
    assert!(
        limiter.try_acquire("b", 1).is_err(),
        "b keeps its own limit"
    );
    assert_eq!(limiter.len(), 2);

    clock.advance(Duration::from_millis(400));
    assert!(
        limiter.try_acquire("c", 1).is_ok(),
        "a was idle and made room"
    );
    assert_eq!(limiter.len(), 2);
}

#[test]
fn reconfigure_applies_to_every_key_and_keeps_their_states() {
    let (limiter, _clock) = keyed::<u32>(gcra(1, 1), KeyedConfig::new(100));
    for key in 0..10 {
        limiter.try_acquire(&key, 1).unwrap();
    }
    limiter
        .reconfigure(|alg| {
            *alg = gcra(1, 2);
            Ok::<(), ConfigError>(())
        })
        .unwrap();
    assert_eq!(limiter.algorithm(), gcra(1, 2));
    for key in 0..10 {
        // One permit of the new burst of two was already taken.
        assert_eq!(limiter.try_acquire(&key, 1).unwrap().remaining(), 0);
        assert!(limiter.try_acquire(&key, 1).is_err());
    }
    assert_eq!(limiter.try_acquire(&10, 2).unwrap().remaining(), 0);
}

#[test]
fn failed_reconfigure_changes_nothing() {
    let (limiter, _clock) = keyed::<u32>(gcra(1, 1), KeyedConfig::new(100));
    let result = limiter.reconfigure(|alg| {
        alg.set_quota(Quota::per_second(0)?);
        Ok(())
    });
    assert_eq!(result, Err(ConfigError::Zero { parameter: "count" }));
    assert_eq!(limiter.algorithm(), gcra(1, 1));
    assert_eq!(limiter.try_acquire(&1, 1).unwrap().limit(), 1);
}

#[test]
fn borrowed_str_finds_string_keys() {
    let (limiter, _clock) = keyed::<String>(gcra(1, 2), KeyedConfig::new(100));
    limiter.try_acquire("alice", 1).unwrap();
    let owned = String::from("alice");
    assert_eq!(limiter.try_acquire(&owned, 1).unwrap().remaining(), 0);
    assert!(limiter.try_acquire("alice", 1).is_err());
    assert!(limiter.peek("alice", 1).is_err());
    limiter.refund("alice", 1);
    assert!(limiter.try_acquire("alice", 1).is_ok());
    assert_eq!(limiter.len(), 1);
}

#[test]
fn peek_and_zero_permits_store_no_key() {
    let (limiter, _clock) = keyed::<u32>(gcra(1, 1), KeyedConfig::new(100));
    assert!(limiter.peek(&1, 1).is_ok());
    assert!(limiter.try_acquire(&2, 0).is_ok());
    assert!(limiter.reserve(&3, 0, Duration::ZERO).is_ok());
    assert!(limiter.try_acquire(&4, 5).unwrap_err().is_never());
    limiter.refund(&5, 1);
    assert!(limiter.is_empty());
}

#[test]
fn reservations_book_per_key() {
    let (limiter, clock) = keyed::<u32>(gcra(10, 1), KeyedConfig::new(100));
    assert!(
        limiter
            .reserve(&1, 1, Duration::ZERO)
            .unwrap()
            .is_immediate()
    );
    let later = limiter.reserve(&1, 1, Duration::from_secs(1)).unwrap();
    assert_eq!(later.wait(), Duration::from_millis(100));
    let too_long = limiter
        .reserve(&1, 1, Duration::from_millis(150))
        .unwrap_err();
    assert_eq!(too_long.retry_after(), Some(Duration::from_millis(50)));
    assert!(
        limiter
            .reserve(&2, 1, Duration::ZERO)
            .unwrap()
            .is_immediate()
    );
    clock.advance(Duration::from_millis(200));
    assert_eq!(limiter.sweep(), 2);
}

#[test]
fn bad_configurations_are_typed_errors() {
    let build = |config: KeyedConfig| {
        KeyedLimiter::<u32, Gcra>::new(gcra(1, 1), config).map(|l| l.max_keys())
    };
    assert_eq!(
        build(KeyedConfig::new(0)),
        Err(ConfigError::Zero {
            parameter: "max_keys"
        })
    );
    assert_eq!(
        build(KeyedConfig::new(10).shards(0)),
        Err(ConfigError::Zero {
            parameter: "shards"
        })
    );
    for shards in [3, 12, 1 << 15] {
        assert!(matches!(
            build(KeyedConfig::new(10).shards(shards)),
            Err(ConfigError::OutOfRange {
                parameter: "shards",
                ..
            })
        ));
        assert!(KeyedConfig::new(10).shards(shards).validate().is_err());
    }
    assert_eq!(build(KeyedConfig::new(1).shards(1 << 14)), Ok(1));
    assert_eq!(build(KeyedConfig::new(usize::MAX)), Ok(usize::MAX));
}

#[test]
fn shards_never_outnumber_keys() {
    let limiter =
        KeyedLimiter::<u32, Gcra>::new(gcra(1, 1), KeyedConfig::new(5).shards(64)).unwrap();
    assert_eq!(limiter.shards(), 4);
    assert_eq!(limiter.max_keys(), 5);
    let limiter = KeyedLimiter::<u32, Gcra>::new(gcra(1, 1), KeyedConfig::new(1)).unwrap();
    assert_eq!(limiter.shards(), 1);
}

#[test]
fn limiters_are_send_and_sync() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<KeyedLimiter<String, Gcra>>();
    send_sync::<KeyedLimiter<std::net::IpAddr, Gcra, ManualClock>>();
    send_sync::<KeyedLimiter<u64, Gcra, MonotonicClock>>();
    send_sync::<KeyedConfig>();
}

#[test]
fn threads_share_one_limit_per_key() {
    let limiter = std::sync::Arc::new(
        KeyedLimiter::<u32, Gcra, ManualClock>::with_clock(
            Gcra::new(Quota::per_hour(100).unwrap()),
            KeyedConfig::new(64),
            ManualClock::new(),
        )
        .unwrap(),
    );
    let admitted: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let limiter = &limiter;
                scope.spawn(move || {
                    (0..1_000)
                        .map(|i| u64::from(limiter.try_acquire(&(i % 8), 1).is_ok()))
                        .sum::<u64>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(
        admitted,
        8 * 100,
        "each of 8 keys granted exactly its burst"
    );
}

#[test]
fn debug_shows_the_shape_not_the_keys() {
    let (limiter, _clock) = keyed::<u32>(gcra(1, 1), KeyedConfig::new(10).shards(2));
    limiter.try_acquire(&1, 1).unwrap();
    let text = format!("{limiter:?}");
    assert!(text.contains("len: 1"), "{text}");
    assert!(text.contains("max_keys: 10"), "{text}");
    assert!(text.contains("shards: 2"), "{text}");
}

#[derive(Clone, Debug)]
enum Op {
    Acquire(u8, u64),
    Peek(u8, u64),
    Reserve(u8, u64, u64),
    Refund(u8, u64),
    Advance(u64),
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 0u64..5).prop_map(|(k, n)| Op::Acquire(k, n)),
        1 => (0u8..12, 0u64..5).prop_map(|(k, n)| Op::Peek(k, n)),
        1 => (0u8..12, 0u64..5, 0u64..400).prop_map(|(k, n, w)| Op::Reserve(k, n, w)),
        1 => (0u8..12, 0u64..3).prop_map(|(k, n)| Op::Refund(k, n)),
        3 => (0u64..300).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
    ]
}

fn quota() -> impl Strategy<Value = Gcra> {
    (1u64..20, 1u64..5).prop_map(|(per_second, burst)| gcra(per_second, burst))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With room for every key, a keyed limiter decides exactly as one `Limiter` per
    /// key would, evictions included.
    #[test]
    fn matches_one_limiter_per_key(
        alg in quota(),
        shards in prop::sample::select(vec![1usize, 2, 4, 8]),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let clock = ManualClock::new();
        let limiter: KeyedLimiter<u8, Gcra, ManualClock> =
            KeyedLimiter::with_clock(alg, KeyedConfig::new(64).shards(shards), clock.clone()).unwrap();
        let mut reference: HashMap<u8, Limiter<Gcra, ManualClock>> = HashMap::new();
        for op in ops {
            match op {
                Op::Acquire(k, n) => {
                    let expected = reference_limiter(&mut reference, &clock, alg, k).try_acquire(n);
                    prop_assert_eq!(limiter.try_acquire(&k, n), expected);
                }
                Op::Peek(k, n) => {
                    let expected = reference_limiter(&mut reference, &clock, alg, k).peek(n);
                    prop_assert_eq!(limiter.peek(&k, n), expected);
                }
                Op::Reserve(k, n, w) => {
                    let w = Duration::from_millis(w);
                    let expected = reference_limiter(&mut reference, &clock, alg, k).reserve(n, w);
                    prop_assert_eq!(limiter.reserve(&k, n, w), expected);
                }
                Op::Refund(k, n) => {
                    reference_limiter(&mut reference, &clock, alg, k).refund(n);
                    limiter.refund(&k, n);
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::Sweep => {
                    limiter.sweep();
                    let now = clock.now();
                    let live = reference
                        .values()
                        .filter(|l| alg.idle_at(&l.state()) > now)
                        .count();
                    prop_assert_eq!(limiter.len(), live, "exactly the live keys remain");
                }
            }
            prop_assert!(limiter.len() <= 12);
        }
    }

    /// However keys come and go, a denying limiter never holds more than `max_keys`,
    /// and never admits what one `Limiter` per key would deny.
    #[test]
    fn never_exceeds_max_keys_nor_over_admits(
        alg in quota(),
        max_keys in 1usize..10,
        shards in prop::sample::select(vec![1usize, 2, 4]),
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let clock = ManualClock::new();
        let limiter: KeyedLimiter<u8, Gcra, ManualClock> = KeyedLimiter::with_clock(
            alg,
            KeyedConfig::new(max_keys).shards(shards).when_full(WhenFull::Deny),
            clock.clone(),
        )
        .unwrap();
        let mut reference: HashMap<u8, Limiter<Gcra, ManualClock>> = HashMap::new();
        for op in ops {
            match op {
                Op::Acquire(k, n) => {
                    let model = reference_limiter(&mut reference, &clock, alg, k);
                    let expected = model.peek(n);
                    let got = limiter.try_acquire(&k, n);
                    match (&got, &expected) {
                        (Ok(_), _) => {
                            prop_assert_eq!(&got, &expected);
                            model.try_acquire(n).unwrap();
                        }
                        (Err(d), Ok(_)) => {
                            // Turned away only for lack of room, never for ever.
                            prop_assert!(d.is_limited());
                            prop_assert!(d.retry_after().unwrap() > Duration::ZERO);
                            if shards == 1 {
                                prop_assert_eq!(limiter.len(), max_keys);
                            }
                        }
                        (Err(_), Err(_)) => prop_assert_eq!(&got, &expected),
                    }
                }
                Op::Peek(k, n) => {
                    let expected = reference_limiter(&mut reference, &clock, alg, k).peek(n);
                    let got = limiter.peek(&k, n);
                    if got.is_ok() {
                        prop_assert_eq!(got, expected);
                    }
                }
                Op::Reserve(k, n, w) => {
                    let w = Duration::from_millis(w);
                    let model = reference_limiter(&mut reference, &clock, alg, k);
                    let mut state = model.state();
                    let expected = alg.reserve(&mut state, clock.now(), n, w);
                    let got = limiter.reserve(&k, n, w);
                    if got.is_ok() {
                        prop_assert_eq!(got, expected);
                        model.reserve(n, w).unwrap();
                    }
                }
                Op::Refund(k, n) => {
                    reference_limiter(&mut reference, &clock, alg, k).refund(n);
                    limiter.refund(&k, n);
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                Op::Sweep => {
                    limiter.sweep();
                }
            }
            prop_assert!(limiter.len() <= max_keys, "{} > {}", limiter.len(), max_keys);
        }
    }

    /// Under the default policy, a full table still serves every newcomer a fresh
    /// state would admit, and never holds more than `max_keys`, whatever the keys held
    /// have taken.
    #[test]
    fn an_evicting_table_serves_every_newcomer_within_max_keys(
        alg in quota(),
        max_keys in 1usize..10,
        shards in prop::sample::select(vec![1usize, 2, 4]),
        ops in prop::collection::vec(
            prop_oneof![
                (0u32..4, 0u64..5).prop_map(|(k, n)| (Some(k), n, 0)),
                (0u64..5).prop_map(|n| (None, n, 0)),
                (0u64..300).prop_map(|ms| (None, 0, ms)),
            ],
            1..200,
        ),
    ) {
        let clock = ManualClock::new();
        let limiter: KeyedLimiter<u32, Gcra, ManualClock> =
            KeyedLimiter::with_clock(alg, KeyedConfig::new(max_keys).shards(shards), clock.clone())
                .unwrap();
        let mut newcomer = 1_000;
        for (key, n, advance) in ops {
            clock.advance(Duration::from_millis(advance));
            match key {
                // One of a few keys used again and again: any decision.
                Some(key) => {
                    let _ = limiter.try_acquire(&key, n);
                }
                // A key never seen: admitted whenever a fresh state admits.
                None => {
                    newcomer += 1;
                    let fresh = Limiter::with_clock(alg, clock.clone()).try_acquire(n);
                    prop_assert_eq!(limiter.try_acquire(&newcomer, n), fresh);
                }
            }
            prop_assert!(limiter.len() <= max_keys, "{} > {}", limiter.len(), max_keys);
        }
    }
}

fn reference_limiter<'a>(
    reference: &'a mut HashMap<u8, Limiter<Gcra, ManualClock>>,
    clock: &ManualClock,
    alg: Gcra,
    key: u8,
) -> &'a Limiter<Gcra, ManualClock> {
    reference
        .entry(key)
        .or_insert_with(|| Limiter::with_clock(alg, clock.clone()))
}

/// A clock that reads whatever the test last stored, so readings can go backwards as
/// they do between threads.
#[derive(Clone, Debug)]
struct Scripted(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Clock for Scripted {
    fn now(&self) -> tollgate::time::Nanos {
        tollgate::time::Nanos::new(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }

    fn unix_origin(&self) -> Duration {
        Duration::ZERO
    }
}

/// The bug: a thread that read the clock at 1.000 s evicted a key whose window had
/// ended; a thread that read 0.999 s then started the key afresh in the old window, and
/// after 1.000 s the new window admitted its full limit again: twice the limit used
/// after the sweep.
#[test]
fn a_late_clock_reading_does_not_restart_an_evicted_key_in_the_past() {
    let time = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let set = |ms: u64| time.store(ms * 1_000_000, std::sync::atomic::Ordering::SeqCst);
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let keyed: KeyedLimiter<u32, FixedWindow, Scripted> =
        KeyedLimiter::with_clock(window, KeyedConfig::new(100), Scripted(time.clone())).unwrap();
    assert!(keyed.try_acquire(&1, 1).is_ok());
    set(1000);
    assert_eq!(keyed.sweep(), 1);
    set(999);
    assert!(keyed.try_acquire(&1, 1).is_ok());
    set(1000);
    assert!(
        keyed.try_acquire(&1, 1).is_err(),
        "the window from 1.000 s already gave its one permit"
    );
}

/// Key 0 spends its limit, and 1 ms later keys 1 to 100 send one request each through
/// a table of 4 keys: key 0 must stay spent.
fn spent_key_survives_a_flood<A: Algorithm>(name: &str, algorithm: A) {
    let clock = ManualClock::new();
    let limiter: KeyedLimiter<u32, A, ManualClock> =
        KeyedLimiter::with_clock(algorithm, KeyedConfig::new(4).shards(1), clock.clone()).unwrap();
    let spent = (0..10)
        .filter(|_| limiter.try_acquire(&0, 1).is_ok())
        .count();
    assert!(spent >= 1, "{name}");
    clock.advance(Duration::from_millis(1));
    for key in 1..=100 {
        assert!(
            limiter.try_acquire(&key, 1).is_ok(),
            "{name}: newcomer {key}"
        );
    }
    assert_eq!(limiter.len(), 4);
    let again = (0..10)
        .filter(|_| limiter.try_acquire(&0, 1).is_ok())
        .count();
    assert_eq!(again, 0, "{name}: key 0 was reset by the flood");
}

/// Regression: a flooder could reset its own spent key. Key 0 was evicted because it
/// would be idle first (its window ends 1 ms before the flood keys'), or because keys
/// tied on their idle time (every key of a fixed window does), though forgetting it
/// gave back ten permits and forgetting a flood key one: key 0 was then admitted 10
/// more times in the same window.
#[test]
fn a_flooder_cannot_reset_its_own_spent_key_in_a_small_table() {
    let second = Duration::from_secs(1);
    spent_key_survives_a_flood("sliding log", SlidingLog::new(10, second).unwrap());
    spent_key_survives_a_flood("fixed window", FixedWindow::new(10, second).unwrap());
    spent_key_survives_a_flood(
        "first-hit window",
        FixedWindow::from_first_hit(10, second).unwrap(),
    );
    spent_key_survives_a_flood("sliding counter", SlidingCounter::new(10, second).unwrap());
    spent_key_survives_a_flood("smooth bursty", SmoothBursty::new(10.0).unwrap());
    spent_key_survives_a_flood(
        "smooth warming up",
        SmoothWarmingUp::new(10.0, second).unwrap(),
    );
    spent_key_survives_a_flood("gcra", gcra(10, 10));
    spent_key_survives_a_flood(
        "refresh period",
        RefreshPeriod::new(10, second, Duration::ZERO).unwrap(),
    );
    spent_key_survives_a_flood(
        "leaky bucket",
        LeakyBucket::new(10, Quota::per_second(10).unwrap()).unwrap(),
    );
}

/// Regression: every `RefreshPeriod` key that had taken a permit counted as booked
/// ahead, so a full table never evicted one: a fifth key was denied for 3,599 s where
/// `Gcra` admitted it. The reach of an acquisition was measured by acquiring the
/// capacity, which for a refresh period counts permits only a wait gets, and was
/// denied.
#[test]
fn a_full_refresh_period_table_makes_room_for_a_new_key_as_gcra_does() {
    fn fifth_key<A: Algorithm>(algorithm: A) -> tollgate::Decision {
        let clock = ManualClock::new();
        let limiter: KeyedLimiter<u32, A, ManualClock> =
            KeyedLimiter::with_clock(algorithm, KeyedConfig::new(4).shards(1), clock.clone())
                .unwrap();
        for key in 0..4 {
            limiter.try_acquire(&key, 1).unwrap();
        }
        clock.advance(Duration::from_secs(1));
        let fifth = limiter.try_acquire(&4, 1);
        assert_eq!(limiter.len(), 4);
        fifth
    }
    let hour = Duration::from_secs(3_600);
    assert!(fifth_key(Gcra::new(Quota::new(10, hour).unwrap())).is_ok());
    let refresh = RefreshPeriod::new(10, hour, Duration::ZERO).unwrap();
    assert_eq!(fifth_key(refresh).map(|a| a.remaining()), Ok(9));
}

/// A step of the flood against one key: the flooder's own key asks for some permits,
/// a key never seen asks for the flood's share, or time passes.
#[derive(Clone, Debug)]
enum Flood {
    Own(u64),
    New,
    Advance(u64),
}

fn flood() -> impl Strategy<Value = Flood> {
    prop_oneof![
        3 => (1u64..=10).prop_map(Flood::Own),
        4 => Just(Flood::New),
        2 => (0u64..50).prop_map(Flood::Advance),
        1 => (0u64..1_500).prop_map(Flood::Advance),
    ]
}

/// The most `limiter` admits now, up to `limit`.
fn admits_now<A: Algorithm>(limiter: &Limiter<A, ManualClock>, limit: u64) -> u64 {
    (1..=limit)
        .rev()
        .find(|&n| limiter.peek(n).is_ok())
        .unwrap_or(0)
}

/// The eviction bound, checked on one algorithm with a limit of 10 per second: in a
/// one-shard table of `capacity` keys (at least 2, at most the sample of 8, so that
/// every key of the shard is compared), where every other key is new and takes `m`
/// permits once, each time the flooder's own key is forgotten the fresh state it
/// restarts from admits at most `m` permits more than its state did. For a sliding
/// log and a fixed window, its admissions in any window are then at most
/// `10 + m × (times it was forgotten in that window)`.
fn check_eviction_bound<A: Algorithm>(
    algorithm: A,
    window: Option<&str>,
    capacity: usize,
    m: u64,
    steps: &[Flood],
) -> Result<(), TestCaseError> {
    const LIMIT: u64 = 10;
    const W: u64 = 1_000_000_000;
    const OWN: u32 = 0;
    let clock = ManualClock::new();
    let keyed: KeyedLimiter<u32, A, ManualClock> = KeyedLimiter::with_clock(
        algorithm.clone(),
        KeyedConfig::new(capacity).shards(1),
        clock.clone(),
    )
    .unwrap();
    // The own key's state had it never been forgotten; `None` when it starts fresh.
    let mut shadow: Option<Limiter<A, ManualClock>> = None;
    let mut admitted: Vec<(u64, u64)> = Vec::new();
    let mut forgotten: Vec<u64> = Vec::new();
    let mut next_key = 1;
    for step in steps {
        let now = clock.now().as_u64();
        match *step {
            Flood::Own(n) => {
                if let Some(state) = shadow.as_ref().map(Limiter::state) {
                    if algorithm.idle_at(&state) <= clock.now() {
                        // Idle: the table may forget it, changing no decision.
                        keyed.sweep();
                        shadow = None;
                    }
                }
                let model = shadow
                    .get_or_insert_with(|| Limiter::with_clock(algorithm.clone(), clock.clone()));
                let expected = model.try_acquire(n);
                let got = keyed.try_acquire(&OWN, n);
                prop_assert_eq!(
                    got.is_ok(),
                    expected.is_ok(),
                    "own key asks {} at {}",
                    n,
                    now
                );
                if got.is_ok() {
                    admitted.push((now, n));
                }
            }
            Flood::New => {
                prop_assert!(
                    keyed.try_acquire(&next_key, m).is_ok(),
                    "newcomers are served"
                );
                next_key += 1;
                let Some(model) = &shadow else { continue };
                if keyed.peek(&OWN, 0) != model.peek(0) {
                    // Forgotten: what the fresh state admits beyond the kept one.
                    let fresh = Limiter::with_clock(algorithm.clone(), clock.clone());
                    let gift = admits_now(&fresh, LIMIT).saturating_sub(admits_now(model, LIMIT));
                    prop_assert!(
                        gift <= m,
                        "forgetting the own key at {} gave back {}",
                        now,
                        gift
                    );
                    forgotten.push(now);
                    shadow = None;
                }
            }
            Flood::Advance(ms) => clock.advance(Duration::from_millis(ms)),
        }
        prop_assert!(keyed.len() <= capacity);
    }
    let in_window = |start: u64, end: u64| {
        let permits: u64 = admitted
            .iter()
            .filter(|&&(t, _)| start <= t && t <= end)
            .map(|&(_, n)| n)
            .sum();
        let resets = forgotten
            .iter()
            .filter(|&&t| start <= t && t <= end)
            .count() as u64;
        (permits, LIMIT + m * resets)
    };
    for &(t, _) in &admitted {
        let (start, end) = match window {
            // Every window (t - W, t] that ends at an admission.
            Some("sliding") => ((t + 1).saturating_sub(W), t),
            // The fixed window of the admission.
            Some("fixed") => (t / W * W, t / W * W + W - 1),
            _ => continue,
        };
        let (permits, bound) = in_window(start, end);
        prop_assert!(
            permits <= bound,
            "{} admitted in [{}, {}], bound {}",
            permits,
            start,
            end,
            bound
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// What an eviction can hand back to a key, per window, is bounded: a key is
    /// forgotten only if forgetting it gives back no more than forgetting each other
    /// key it is compared with. Against flood keys that each take `m` permits, each
    /// eviction hands the flooder's own key back at most `m` permits, and in any
    /// window of a sliding log or a fixed window it is admitted at most
    /// `limit + m × (its evictions in that window)`. Before the fix, a key spent to its
    /// limit was evicted first whenever its window ended first or tied.
    #[test]
    fn an_eviction_hands_a_key_back_no_more_than_a_flood_key_holds(
        capacity in 2usize..=8,
        m in 1u64..=3,
        steps in prop::collection::vec(flood(), 1..300),
    ) {
        let second = Duration::from_secs(1);
        check_eviction_bound(SlidingLog::new(10, second).unwrap(), Some("sliding"), capacity, m, &steps)?;
        check_eviction_bound(FixedWindow::new(10, second).unwrap(), Some("fixed"), capacity, m, &steps)?;
        check_eviction_bound(FixedWindow::from_first_hit(10, second).unwrap(), None, capacity, m, &steps)?;
        check_eviction_bound(SlidingCounter::new(10, second).unwrap(), None, capacity, m, &steps)?;
        check_eviction_bound(gcra(10, 10), None, capacity, m, &steps)?;
        check_eviction_bound(
            RefreshPeriod::new(10, second, Duration::ZERO).unwrap(),
            None,
            capacity,
            m,
            &steps,
        )?;
    }
}
