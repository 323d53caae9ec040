//! `PartitionedLimiter`: an adaptive limit shared by named partitions, on a
//! `ManualClock`. Shares, bursts, the bypass, limits that move with the samples,
//! Netflix's batch 10 + live 7 case, and a multi-thread run holding the strict bound.
#![cfg(feature = "adaptive")]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm};
use tollgate::adaptive::partition::PartitionMode;
use tollgate::adaptive::{PartitionedLimiter, PartitionedPermit, Sample};
use tollgate::observe::{DenyReason, Event, EventKind, Events, Outcome};
use tollgate::time::{ManualClock, Nanos};
use tollgate::{AcquireError, ConfigError, PermitSource};

type Limiter<L = AimdLimit> = PartitionedLimiter<L, ManualClock>;

/// AIMD starting at `limit`, free to fall to 1 and rise to 1000.
fn aimd(limit: u64) -> AimdLimit {
    AimdLimit::builder()
        .min_limit(1)
        .initial_limit(limit)
        .max_limit(1000)
        .build()
        .unwrap()
}

fn limiter(limit: u64, mode: PartitionMode, shares: &[(&str, f64)]) -> Limiter {
    shares
        .iter()
        .fold(
            PartitionedLimiter::builder(aimd(limit))
                .mode(mode)
                .clock(ManualClock::new()),
            |builder, &(name, share)| builder.partition(name, share),
        )
        .build()
        .unwrap()
}

/// `n` permits of `partition`, all admitted.
fn take<L: LimitAlgorithm>(
    limiter: &PartitionedLimiter<L, ManualClock>,
    partition: &str,
    n: usize,
) -> Vec<PartitionedPermit<L, ManualClock>> {
    (0..n)
        .map(|i| {
            limiter
                .try_acquire(partition)
                .unwrap_or_else(|denied| panic!("{partition} #{i} refused: {denied}"))
        })
        .collect()
}

const BATCH_LIVE: &[(&str, f64)] = &[("batch", 0.3), ("live", 0.7)];

#[test]
fn shares_are_honoured() {
    let limiter = limiter(10, PartitionMode::Strict, BATCH_LIVE);
    assert_eq!(limiter.partition_limit("batch"), 3);
    assert_eq!(limiter.partition_limit("live"), 7);
    let batch = take(&limiter, "batch", 3);
    let denied = limiter.try_acquire("batch").unwrap_err();
    assert!(
        denied.is_reserved(),
        "live's 7 stay reserved while it idles"
    );
    let live = take(&limiter, "live", 7);
    assert_eq!(limiter.in_flight(), 10);
    assert!(!limiter.try_acquire("live").unwrap_err().is_reserved());
    drop((batch, live));
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.limit(), 10, "ignored outcomes leave the limit");
}

#[test]
fn partitions_burst_into_spare_capacity_never_past_the_limit() {
    // 20% of the limit is nobody's: a common burst pool.
    let limiter = limiter(10, PartitionMode::Strict, &[("batch", 0.3), ("live", 0.5)]);
    let batch = take(&limiter, "batch", 5); // its 3 and the pool's 2
    assert!(limiter.try_acquire("batch").unwrap_err().is_reserved());
    assert!(limiter.try_acquire("unknown").unwrap_err().is_reserved());
    let live = take(&limiter, "live", 5);
    assert_eq!(limiter.in_flight(), 10);
    assert_eq!(limiter.in_flight_bound(), 10);
    assert!(limiter.try_acquire("live").is_err());

    // Batch ends: the pool is free again, for anyone.
    drop(batch);
    let unknown = take(&limiter, "someone else", 2);
    assert_eq!(limiter.partition_in_flight("someone else"), 2);
    assert!(limiter.try_acquire("someone else").is_err());
    let batch = take(&limiter, "batch", 3);
    assert_eq!(limiter.in_flight(), 10);
    drop((live, unknown, batch));
}

#[test]
fn bypassed_requests_take_no_room_and_feed_nothing() {
    let limiter = PartitionedLimiter::builder(aimd(1))
        .partition("live", 1.0)
        .clock(ManualClock::new())
        .bypass(|name: &str| name.starts_with("health"))
        .build()
        .unwrap();
    let live = limiter.try_acquire("live").unwrap();
    assert!(limiter.try_acquire("live").is_err());
    let health: Vec<_> = (0..5)
        .map(|_| limiter.try_acquire("health/ready").unwrap())
        .collect();
    assert!(
        health
            .iter()
            .all(|permit| permit.is_bypass() && permit.inflight() == 0)
    );
    assert_eq!(limiter.in_flight(), 1);
    limiter.clock().advance(Duration::from_secs(60)); // a timeout, were it counted
    for permit in health {
        permit.dropped();
    }
    assert_eq!(limiter.limit(), 1);
    assert_eq!(limiter.in_flight(), 1);
    // Naming the partition skips the predicate.
    assert!(limiter.try_acquire_partition("health/ready").is_err());
    live.success();
}

#[test]
fn a_resolver_maps_contexts_to_partitions() {
    struct Request {
        tenant: Option<&'static str>,
        path: &'static str,
    }
    let limiter = PartitionedLimiter::builder(aimd(4))
        .partition("gold", 0.5)
        .partition("free", 0.25)
        .clock(ManualClock::new())
        .resolver(|request: &Request| request.tenant)
        .bypass(|request: &Request| request.path == "/health")
        .build()
        .unwrap();
    let request = |tenant, path| Request { tenant, path };
    let gold = limiter.try_acquire(&request(Some("gold"), "/")).unwrap();
    let anonymous = limiter.try_acquire(&request(None, "/")).unwrap();
    let health = limiter.try_acquire(&request(None, "/health")).unwrap();
    assert_eq!(limiter.partition_in_flight("gold"), 1);
    assert_eq!(limiter.partition_in_flight("no such tenant"), 1);
    assert!(health.is_bypass());
    assert_eq!(limiter.in_flight(), 2);
    drop((gold, anonymous, health));
}

#[test]
fn aimd_drops_shrink_every_partitions_limit() {
    let limiter = limiter(10, PartitionMode::Strict, BATCH_LIVE);
    let clock = limiter.clock().clone();
    let mut live = take(&limiter, "live", 7);
    let batch = take(&limiter, "batch", 3);
    clock.advance(Duration::from_millis(5));
    // AIMD: ⌊10 × 0.9⌋ = 9, ⌊9 × 0.9⌋ = 8, ⌊8 × 0.9⌋ = 7.
    for (limit, batch_limit, live_limit) in [(9, 3, 7), (8, 3, 6), (7, 3, 5)] {
        live.pop().unwrap().dropped();
        assert_eq!(limiter.limit(), limit);
        assert_eq!(limiter.partition_limit("batch"), batch_limit); // ⌈limit × 0.3⌉
        assert_eq!(limiter.partition_limit("live"), live_limit); // ⌈limit × 0.7⌉
    }
    // 4 live and 3 batch hold the new limit of 7: nothing is revoked, nothing more
    // comes in.
    assert_eq!(limiter.in_flight(), 7);
    assert!(limiter.try_acquire("live").is_err());
    assert!(limiter.try_acquire("batch").is_err());
    drop(batch);
    assert!(limiter.try_acquire("live").is_ok());
    drop(live);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn successes_under_load_grow_every_partitions_limit() {
    let limiter = limiter(4, PartitionMode::Strict, &[("a", 0.5), ("b", 0.5)]);
    let mut held = take(&limiter, "a", 2);
    held.extend(take(&limiter, "b", 2));
    held.pop().unwrap().success(); // 4 in flight at its start: busy, +1
    assert_eq!(limiter.limit(), 5);
    assert_eq!(limiter.partition_limit("a"), 3);
    drop(held);
}

/// Records every sample, at a fixed limit.
struct Record(Arc<Mutex<Vec<Sample>>>, u64);

impl LimitAlgorithm for Record {
    fn limit(&self) -> u64 {
        self.1
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        self.0.lock().unwrap().push(sample);
        self.1
    }
}

#[test]
fn the_sample_carries_start_rtt_and_in_flight_at_admission() {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    let limiter = PartitionedLimiter::builder(Record(Arc::clone(&samples), 10))
        .partition("a", 0.5)
        .clock(clock.clone())
        .build()
        .unwrap();
    let first = limiter.try_acquire("a").unwrap();
    clock.advance(Duration::from_millis(3));
    let second = limiter.try_acquire("b").unwrap();
    clock.advance(Duration::from_millis(7));
    second.dropped();
    first.success();
    limiter.try_acquire("a").unwrap().ignore();
    drop(limiter.try_acquire("a").unwrap());
    limiter.try_acquire("a").unwrap().finish(Outcome::Success);
    let five = Nanos::new(5_000_000_000);
    let ten_ms = five + Duration::from_millis(10);
    assert_eq!(
        *samples.lock().unwrap(),
        [
            Sample::new(
                five + Duration::from_millis(3),
                Duration::from_millis(7),
                2,
                true
            ),
            Sample::new(five, Duration::from_millis(10), 1, false),
            Sample::new(ten_ms, Duration::ZERO, 1, false),
        ]
    );
}

#[test]
fn netflix_compatible_admits_batch_10_and_live_7_against_a_limit_of_10() {
    let limiter = limiter(10, PartitionMode::NetflixCompatible, BATCH_LIVE);
    let batch = take(&limiter, "batch", 10);
    assert!(limiter.try_acquire("batch").is_err());
    let live = take(&limiter, "live", 7);
    assert_eq!(limiter.in_flight(), 17);
    assert_eq!(live.last().unwrap().inflight(), 17);
    assert!(limiter.try_acquire("live").is_err());
    // The excess is bounded by the shares: 10 + 3 + 7.
    assert_eq!(limiter.in_flight_bound(), 20);
    assert!(limiter.in_flight() <= limiter.in_flight_bound());

    // The samples carry the excess: live's last started with 17 in flight, and
    // AIMD grows on it.
    let clock = limiter.clock().clone();
    clock.advance(Duration::from_millis(1));
    let mut live = live;
    live.pop().unwrap().success();
    assert_eq!(limiter.limit(), 11);
    drop((batch, live));

    // Strict refuses batch past its share while live is idle.
    let strict = self::limiter(10, PartitionMode::Strict, BATCH_LIVE);
    let _batch = take(&strict, "batch", 3);
    assert!(strict.try_acquire("batch").is_err());
    let _live = take(&strict, "live", 7);
    assert_eq!(strict.in_flight(), 10);
}

#[test]
fn events_report_admissions_refusals_limit_changes_and_ends() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("backend");
    let _subscription = events.subscribe({
        let seen = Arc::clone(&seen);
        move |event: &Event<'_>| {
            let key = event.key.map(String::from);
            seen.lock().unwrap().push((key, event.permits, event.kind));
        }
    });
    let limiter = PartitionedLimiter::builder(aimd(2))
        .partition("a", 0.5)
        .partition("b", 0.5)
        .clock(ManualClock::new())
        .bypass(|name: &str| name == "health")
        .events(events)
        .build()
        .unwrap();
    let a = limiter.try_acquire("a").unwrap();
    assert!(limiter.try_acquire("a").is_err());
    drop(limiter.try_acquire("health").unwrap());
    limiter.clock().advance(Duration::from_millis(4));
    a.dropped();
    let key = |name: &str| Some(name.to_string());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (
                None,
                0,
                EventKind::LimitChanged {
                    previous: 0,
                    limit: 2
                }
            ),
            (key("a"), 1, EventKind::Admitted),
            (None, 1, EventKind::Started { inflight: 1 }),
            (
                key("a"),
                1,
                EventKind::Denied {
                    reason: DenyReason::Limited,
                    retry_after: None
                }
            ),
            (
                None,
                0,
                EventKind::LimitChanged {
                    previous: 2,
                    limit: 1
                }
            ),
            (
                None,
                1,
                EventKind::Finished {
                    outcome: Outcome::Dropped,
                    rtt: Duration::from_millis(4),
                    inflight: 0
                }
            ),
        ]
    );
}

#[test]
fn bad_input_is_a_typed_error() {
    let one = |name: &str, share: f64| {
        PartitionedLimiter::builder(aimd(10))
            .partition(name, share)
            .build()
            .map(drop)
    };
    assert_eq!(
        one("a", f64::NAN),
        Err(ConfigError::NotANumber { parameter: "share" })
    );
    assert_eq!(one("a", 0.0), Err(ConfigError::Zero { parameter: "share" }));
    assert_eq!(
        one("a", -1.0),
        Err(ConfigError::Negative {
            parameter: "share",
            value: -1.0
        })
    );
    for share in [1.5, f64::INFINITY] {
        assert_eq!(one("a", share).unwrap_err().parameter(), "share");
    }
    assert_eq!(one("", 0.5).unwrap_err().parameter(), "partition name");
    let two = |a: (&str, f64), b: (&str, f64)| {
        PartitionedLimiter::builder(aimd(10))
            .partition(a.0, a.1)
            .partition(b.0, b.1)
            .build()
            .map(drop)
            .map_err(|error| error.parameter())
    };
    assert_eq!(two(("a", 0.6), ("b", 0.5)), Err("sum of shares"));
    assert_eq!(two(("a", 0.2), ("a", 0.2)), Err("partition name"));
    assert_eq!(
        PartitionedLimiter::builder(aimd(10)).build().map(drop),
        Err(ConfigError::Zero {
            parameter: "partition count"
        })
    );
    let lost = PartitionedLimiter::builder(aimd(10))
        .partition("a", 0.5)
        .bypass(|name: &str| name == "health")
        .resolver(|path: &String| Some(path.as_str()))
        .build();
    assert_eq!(lost.unwrap_err().parameter(), "bypass");
}

/// A limit answered by the test: 0 and `u64::MAX`.
struct Fixed(u64);

impl LimitAlgorithm for Fixed {
    fn limit(&self) -> u64 {
        self.0
    }

    fn on_sample(&mut self, _: Sample) -> u64 {
        self.0
    }
}

#[test]
fn extreme_limits_do_not_panic() {
    let zero = PartitionedLimiter::builder(Fixed(0))
        .partition("a", 1.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(zero.limit(), 1, "held at 1");
    let permit = zero.try_acquire("a").unwrap();
    zero.clock().advance(Duration::MAX);
    permit.dropped();
    assert_eq!((zero.limit(), zero.tick()), (1, 1));

    let max = PartitionedLimiter::builder(Fixed(u64::MAX))
        .partition("a", 0.5)
        .partition("b", 0.5)
        .mode(PartitionMode::NetflixCompatible)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert_eq!(max.in_flight_bound(), u64::MAX);
    max.try_acquire("a").unwrap().success();
    assert_eq!(max.partition_limit("b"), 1 << 63);
}

#[test]
fn a_panicking_algorithm_still_gives_the_request_back() {
    struct Panics;
    impl LimitAlgorithm for Panics {
        fn limit(&self) -> u64 {
            1
        }
        fn on_sample(&mut self, _: Sample) -> u64 {
            panic!("a broken algorithm")
        }
    }
    let limiter = PartitionedLimiter::builder(Panics)
        .partition("a", 1.0)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let permit = limiter.try_acquire("a").unwrap();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.success()));
    assert!(unwound.is_err());
    assert_eq!(limiter.in_flight(), 0);
    assert!(
        limiter.try_acquire("a").is_ok(),
        "the lock shrugs off the poison"
    );
}

#[test]
fn a_permit_source_keyed_by_partition_name() {
    let limiter = Arc::new(limiter(2, PartitionMode::Strict, &[("a", 0.5), ("b", 0.5)]));
    assert_eq!(limiter.capacity(), 1);
    let granted = limiter.decide_now("a", 1).unwrap().unwrap().unwrap();
    assert_eq!(granted.admitted().remaining(), 1);
    let refused = limiter.decide_now("a", 1).unwrap().unwrap().unwrap_err();
    assert!(refused.is_limited());
    assert!(
        limiter
            .decide_now("a", 2)
            .unwrap()
            .unwrap()
            .unwrap_err()
            .is_never()
    );
    let none = limiter.decide_now("a", 0).unwrap().unwrap().unwrap();
    assert_eq!(limiter.in_flight(), 1);
    drop(none);

    // Partitioned admission is fail fast: `wait` answers at once.
    let waited = futures::executor::block_on(limiter.wait("a", 1, Some(Duration::from_secs(9))));
    assert!(matches!(waited, Err(AcquireError::TimedOut)));
    let b = futures::executor::block_on(limiter.wait("b", 1, None)).unwrap();
    let many = futures::executor::block_on(limiter.wait("b", 3, None));
    assert!(matches!(many, Err(AcquireError::Insufficient(_))));
    let decided = futures::executor::block_on(limiter.decide("b", 1)).unwrap();
    assert!(decided.is_err());

    b.dropped(); // AIMD floor: 2 × 0.9 = 1
    assert_eq!(limiter.limit(), 1);
    granted.into_permit().success();
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn limiters_and_permits_cross_threads() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    fn send_static<T: Send + 'static>() {}
    send_sync_static::<PartitionedLimiter>();
    send_sync_static::<PartitionedLimiter<AimdLimit, ManualClock, String>>();
    send_sync_static::<PartitionedPermit>();
    send_static::<PartitionedPermit<AimdLimit, ManualClock>>();
}

/// A limit that only falls: one less every `step` samples, down to `floor`. With
/// it, the limit read before an acquire bounds the limit at admission.
struct Countdown {
    limit: u64,
    floor: u64,
    step: u64,
    seen: u64,
}

impl LimitAlgorithm for Countdown {
    fn limit(&self) -> u64 {
        self.limit
    }

    fn on_sample(&mut self, _: Sample) -> u64 {
        self.seen += 1;
        if self.seen % self.step == 0 && self.limit > self.floor {
            self.limit -= 1;
        }
        self.limit
    }
}

/// `threads` threads run `cycles` steps each through `limiter`: acquire a permit of
/// a pseudo-random partition, end the oldest held with a pseudo-random outcome when
/// refused or holding `hold`. `check` sees each admitted permit with the limit read
/// just before the acquire. Answers the highest in-flight any admission saw.
fn hammer<L: LimitAlgorithm>(
    limiter: &Limiter<L>,
    threads: usize,
    cycles: u64,
    hold: usize,
    check: impl Fn(&PartitionedPermit<L, ManualClock>, u64) + Sync,
) -> u64 {
    const NAMES: &[&str] = &["a", "b", "unknown"];
    let high_water = AtomicU64::new(0);
    let start = Barrier::new(threads);
    thread::scope(|scope| {
        for t in 0..threads {
            let (high_water, start, check) = (&high_water, &start, &check);
            scope.spawn(move || {
                let mut held = VecDeque::new();
                let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ t as u64;
                let end =
                    |permit: PartitionedPermit<L, ManualClock>, seed: u64| match (seed >> 40) % 4 {
                        0 => permit.dropped(),
                        1 => drop(permit),
                        _ => permit.success(),
                    };
                start.wait();
                for _ in 0..cycles {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let name = NAMES[(seed >> 33) as usize % NAMES.len()];
                    let before = limiter.limit();
                    match limiter.try_acquire(name) {
                        Ok(permit) => {
                            check(&permit, before);
                            high_water.fetch_max(permit.inflight(), Ordering::Relaxed);
                            held.push_back(permit);
                            if held.len() > hold {
                                end(held.pop_front().unwrap(), seed);
                            }
                        }
                        Err(_) => {
                            if let Some(permit) = held.pop_front() {
                                end(permit, seed);
                            }
                        }
                    }
                }
                for permit in held {
                    end(permit, seed);
                }
            });
        }
    });
    high_water.into_inner()
}

const STRESS_SHARES: &[(&str, f64)] = &[("a", 0.5), ("b", 0.25)];

#[test]
fn strict_never_admits_past_a_falling_limit_under_threads() {
    let countdown = Countdown {
        limit: 12,
        floor: 3,
        step: 2_000,
        seen: 0,
    };
    let limiter = STRESS_SHARES
        .iter()
        .fold(
            PartitionedLimiter::builder(countdown).clock(ManualClock::new()),
            |builder, &(name, share)| builder.partition(name, share),
        )
        .build()
        .unwrap();
    let check = |permit: &PartitionedPermit<Countdown, ManualClock>, before: u64| {
        assert!(
            permit.inflight() <= before,
            "{} in flight at admission against a limit of at most {before}",
            permit.inflight()
        );
    };
    // Only admitted requests give samples, and how many are admitted depends on how
    // the threads interleave (near the floor, a thread holding nothing is refused
    // and gives none): a busy machine can leave the limit a step short after one
    // round, so hammer again, within a bound, until it has fallen all the way.
    let mut high = 0;
    for _ in 0..5 {
        high = high.max(hammer(&limiter, 4, 20_000, 4, check));
        if limiter.limit() == 3 {
            break;
        }
    }
    assert!(high <= 12);
    assert_eq!(limiter.limit(), 3, "the limit fell all the way");
    assert_eq!(limiter.in_flight(), 0, "every request was given back");
    for name in ["a", "b", "unknown"] {
        assert_eq!(limiter.partition_in_flight(name), 0);
    }
}

#[test]
fn strict_aimd_under_threads_stays_within_its_maximum_and_gives_everything_back() {
    let aimd = AimdLimit::builder()
        .min_limit(2)
        .initial_limit(8)
        .max_limit(16)
        .build()
        .unwrap();
    let limiter = STRESS_SHARES
        .iter()
        .fold(
            PartitionedLimiter::builder(aimd).clock(ManualClock::new()),
            |builder, &(name, share)| builder.partition(name, share),
        )
        .build()
        .unwrap();
    let high = hammer(&limiter, 4, 20_000, 6, |permit, _| {
        assert!(permit.inflight() <= 16);
    });
    assert!(
        high <= 16,
        "in flight reached {high} against a maximum limit of 16"
    );
    assert_eq!(limiter.in_flight(), 0);
    assert!((2..=16).contains(&limiter.limit()));
}
