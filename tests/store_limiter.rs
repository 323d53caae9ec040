//! `SharedLimiter` and `MemoryStore`: the limiter API over a store, waiting on a manual
//! clock (booked waits, polled waits, timeouts, cancellation), all-or-nothing rules,
//! forgetting idle keys, the key bound and typed errors.
#![cfg(feature = "store")]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tollgate::AcquireError;
use tollgate::algorithm::{
    Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod, SlidingCounter, SlidingLog,
    SmoothBursty, SmoothWarmingUp,
};
use tollgate::store::{
    Check, MemoryStore, Op, Reply, Request, Rule, SharedLimiter, Store, StoreError,
};
use tollgate::time::ManualClock;
use tollgate::{Denied, KeyedConfig, Quota, WhenFull};

fn store(clock: &ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), "test", clock.clone()).unwrap()
}

fn limiter(
    clock: &ManualClock,
    rule: impl Into<Rule>,
) -> SharedLimiter<MemoryStore<ManualClock>, ManualClock> {
    SharedLimiter::with_clock(store(clock), rule, clock.clone()).unwrap()
}

/// Counts wakes, to poll futures by hand.
#[derive(Default)]
struct Flag(std::sync::atomic::AtomicUsize);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn poll<F: Future>(future: &mut Pin<Box<F>>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Flag::default()));
    future.as_mut().poll(&mut Context::from_waker(&waker))
}

fn block<F: Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

#[test]
fn booked_waits_sleep_on_the_clock_in_arrival_order() {
    let clock = ManualClock::new();
    let limiter = limiter(
        &clock,
        Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap()),
    );
    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
    let mut first = Box::pin(limiter.acquire("k", 1));
    let mut second = Box::pin(limiter.acquire("k", 1));
    assert!(poll(&mut first).is_pending());
    assert!(poll(&mut second).is_pending());
    clock.advance(Duration::from_millis(100));
    assert!(matches!(poll(&mut first), Poll::Ready(Ok(_))));
    assert!(
        poll(&mut second).is_pending(),
        "booked 100 ms after the first"
    );
    clock.advance(Duration::from_millis(100));
    assert!(matches!(poll(&mut second), Poll::Ready(Ok(_))));
}

#[test]
fn a_dropped_booked_wait_gives_its_permits_back() {
    let clock = ManualClock::new();
    let limiter = limiter(
        &clock,
        Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap()),
    );
    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
    let mut waiter = Box::pin(limiter.acquire("k", 1));
    assert!(poll(&mut waiter).is_pending());
    drop(waiter);
    clock.advance(Duration::from_millis(100));
    let admitted = block(limiter.check("k", 1)).unwrap();
    assert!(
        admitted.is_ok(),
        "the cancelled booking still holds the slot: {admitted:?}"
    );
}

#[test]
fn a_timeout_shorter_than_the_known_wait_fails_at_once() {
    let clock = ManualClock::new();
    let limiter = limiter(
        &clock,
        Gcra::new(Quota::per_second(1).unwrap().burst(1).unwrap()),
    );
    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
    let waited = block(limiter.acquire_timeout("k", 1, Duration::from_millis(500)));
    assert!(matches!(waited, Err(AcquireError::TimedOut)), "{waited:?}");
    // Nothing was booked: the next permit is still due at 1 s.
    clock.advance(Duration::from_secs(1));
    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
}

#[test]
fn rules_that_cannot_book_are_retried_after_their_hint() {
    let clock = ManualClock::new();
    let window = SlidingCounter::new(2, Duration::from_secs(1)).unwrap();
    let limiter = limiter(&clock, window);
    assert!(block(limiter.check("k", 2)).unwrap().is_ok());
    let mut waiter = Box::pin(limiter.acquire("k", 1));
    assert!(poll(&mut waiter).is_pending());
    for _ in 0..20 {
        if let Poll::Ready(result) = poll(&mut waiter) {
            assert!(result.is_ok(), "{result:?}");
            return;
        }
        clock.advance(Duration::from_millis(100));
    }
    panic!("still waiting 2 s later");
}

#[test]
fn a_leaky_bucket_meter_wait_ends_when_it_has_drained() {
    let clock = ManualClock::new();
    let bucket = LeakyBucket::new(2, Quota::per_second(10).unwrap()).unwrap();
    let limiter = limiter(&clock, bucket);
    assert!(block(limiter.check("k", 2)).unwrap().is_ok());
    let mut waiter = Box::pin(limiter.acquire_timeout("k", 1, Duration::from_secs(1)));
    assert!(poll(&mut waiter).is_pending());
    clock.advance(Duration::from_millis(100));
    assert!(matches!(poll(&mut waiter), Poll::Ready(Ok(_))));
}

#[test]
fn more_than_the_capacity_is_never_granted_and_never_waited_for() {
    let clock = ManualClock::new();
    let limiter = limiter(&clock, Gcra::new(Quota::per_second(5).unwrap()));
    let decision = block(limiter.check("k", 6)).unwrap();
    assert!(
        matches!(decision, Err(Denied::Insufficient(_))),
        "{decision:?}"
    );
    let waited = block(limiter.acquire("k", 6));
    assert!(matches!(waited, Err(AcquireError::Insufficient(i)) if i.capacity() == 5));
}

#[test]
fn several_rules_take_all_or_nothing() {
    let clock = ManualClock::new();
    let limiter = SharedLimiter::all_of_with_clock(
        store(&clock),
        [
            (
                "burst",
                Rule::from(Gcra::new(Quota::per_second(100).unwrap())),
            ),
            (
                "window",
                Rule::from(FixedWindow::new(3, Duration::from_secs(60)).unwrap()),
            ),
        ],
        clock.clone(),
    )
    .unwrap();
    assert_eq!(
        block(limiter.check("k", 2)).unwrap().unwrap().remaining(),
        1
    );
    assert!(block(limiter.check("k", 2)).unwrap().is_err());
    // The denial took nothing from the burst rule: 98 left there, 1 in the window.
    let peek = block(limiter.peek("k", 1)).unwrap().unwrap();
    assert_eq!((peek.limit(), peek.remaining()), (3, 0));
    // Another key is untouched.
    assert!(block(limiter.check("other", 3)).unwrap().is_ok());
}

#[test]
fn duplicate_or_missing_rules_are_typed_errors() {
    let clock = ManualClock::new();
    let gcra = Rule::from(Gcra::new(Quota::per_second(1).unwrap()));
    let twice = SharedLimiter::all_of(store(&clock), [("a", gcra.clone()), ("a", gcra)]);
    assert!(matches!(twice, Err(StoreError::Config(_))), "{twice:?}");
    let none = SharedLimiter::all_of(store(&clock), Vec::<(&str, Rule)>::new());
    assert!(matches!(none, Err(StoreError::Config(_))), "{none:?}");
}

#[test]
fn idle_keys_are_forgotten() {
    let clock = ManualClock::new();
    let config = KeyedConfig::new(1_000).shards(1);
    let store = Arc::new(MemoryStore::with_clock(config, "idle", clock.clone()).unwrap());
    let limiter =
        SharedLimiter::new(store.clone(), Gcra::new(Quota::per_second(10).unwrap())).unwrap();
    for key in 0..100 {
        assert!(block(limiter.check(&key.to_string(), 1)).unwrap().is_ok());
    }
    assert_eq!(store.len(), 100);
    clock.advance(Duration::from_secs(1));
    // Full again: the next write sweeps them.
    for key in 100..200 {
        assert!(block(limiter.check(&key.to_string(), 1)).unwrap().is_ok());
    }
    assert!(store.len() < 200, "{} keys held", store.len());
}

#[test]
fn a_full_store_denies_new_keys_until_one_is_idle() {
    let clock = ManualClock::new();
    let config = KeyedConfig::new(4).shards(1).when_full(WhenFull::Deny);
    let store = MemoryStore::with_clock(config, "full", clock.clone()).unwrap();
    let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(1).unwrap())).unwrap();
    for key in ["a", "b", "c", "d"] {
        assert!(block(limiter.check(key, 1)).unwrap().is_ok());
    }
    let denied = block(limiter.check("e", 1)).unwrap().unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    // Known keys still decide.
    assert!(block(limiter.check("a", 1)).unwrap().is_err());
    clock.advance(Duration::from_secs(1));
    assert!(block(limiter.check("e", 1)).unwrap().is_ok());
}

#[test]
fn a_key_used_by_two_kinds_of_rule_is_a_conflict() {
    let clock = ManualClock::new();
    let store = store(&clock);
    let gcra = Rule::from(Gcra::new(Quota::per_second(1).unwrap()));
    let window = Rule::from(FixedWindow::new(1, Duration::from_secs(1)).unwrap());
    let first = [Check::new("", &gcra)];
    let second = [Check::new("", &window)];
    assert!(block(store.execute(&Request::new("k", &first, Op::Acquire(1)))).is_ok());
    let conflict = block(store.execute(&Request::new("k", &second, Op::Acquire(1))));
    assert!(
        matches!(conflict, Err(StoreError::KeyConflict { .. })),
        "{conflict:?}"
    );
}

#[test]
fn long_keys_and_braced_prefixes_are_typed_errors() {
    let clock = ManualClock::new();
    let store = store(&clock);
    let rule = Rule::from(Gcra::new(Quota::per_second(1).unwrap()));
    let checks = [Check::new("", &rule)];
    let long = "k".repeat(2_000);
    let result = block(store.execute(&Request::new(&long, &checks, Op::Acquire(1))));
    assert!(
        matches!(result, Err(StoreError::KeyTooLong { max: 1024, .. })),
        "{result:?}"
    );
    let braced = MemoryStore::with_clock(KeyedConfig::new(10), "a{b}", clock);
    assert!(matches!(braced, Err(StoreError::Config(_))));
}

#[test]
fn a_leased_concurrency_limit_is_released_by_refund_or_by_its_lease() {
    let clock = ManualClock::new();
    let limit = Leased::new(Concurrency::new(2).unwrap(), Duration::from_secs(30)).unwrap();
    let limiter = limiter(&clock, limit);
    assert!(block(limiter.check("k", 2)).unwrap().is_ok());
    assert!(block(limiter.check("k", 1)).unwrap().is_err());
    block(limiter.refund("k", 1)).unwrap();
    assert!(block(limiter.check("k", 1)).unwrap().is_ok());
    // The holders vanish; 30 s after the last renewal the permits are free.
    clock.advance(Duration::from_secs(30));
    assert!(block(limiter.check("k", 2)).unwrap().is_ok());
}

#[test]
fn reservations_prepay_and_several_rules_reserve_only_now() {
    let clock = ManualClock::new();
    let limiter = limiter(
        &clock,
        Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap()),
    );
    let now = block(limiter.reserve("k", 1, Duration::ZERO))
        .unwrap()
        .unwrap();
    assert!(now.is_immediate());
    let later = block(limiter.reserve("k", 1, Duration::from_secs(1)))
        .unwrap()
        .unwrap();
    assert_eq!(later.wait(), Duration::from_millis(100));

    let rule = Rule::from(Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap()));
    let checks = [Check::new("a", &rule), Check::new("b", &rule)];
    let store = store(&clock);
    let reserve = Op::Reserve {
        n: 1,
        max_wait: Duration::from_secs(1),
    };
    let first = block(store.execute(&Request::new("t", &checks, reserve))).unwrap();
    assert!(matches!(first, Reply::Reservation(Ok(r)) if r.is_immediate()));
    let second = block(store.execute(&Request::new("t", &checks, reserve))).unwrap();
    assert!(matches!(second, Reply::Reservation(Err(_))), "{second:?}");
}

/// The bug: a peek at a key whose state had expired at the peek's time reset the
/// stored state in place, so a later request with an earlier clock reading (another
/// process's, or a jittered one) found a fresh key and was admitted where Redis,
/// whose key is still there, denies.
#[test]
fn a_peek_at_an_expired_key_writes_nothing() {
    let store = MemoryStore::with_clock(KeyedConfig::new(10), "p", ManualClock::new()).unwrap();
    let rule = Rule::from(FixedWindow::from_first_hit(1, Duration::from_secs(10)).unwrap());
    let checks = [Check::new("r", &rule)];
    let at = |s: u64| Duration::from_secs(1_700_000_000 + s);
    let run = |op, s| {
        store
            .execute_now(&Request::new("k", &checks, op).at(at(s)))
            .unwrap()
            .is_admitted()
    };
    assert!(run(Op::Acquire(1), 0), "opens the window");
    assert!(run(Op::Peek(1), 20), "the window has ended by then");
    assert!(
        !run(Op::Acquire(1), 5),
        "an earlier reading still sees the spent window"
    );
}

/// A store whose replies wait, while `hold` is set, until `release` is notified: a
/// remote store that has decided (the command reached the server) and whose reply is
/// still in flight.
#[cfg(feature = "redis")]
struct Gated {
    inner: MemoryStore<ManualClock>,
    hold: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
    executed: std::sync::atomic::AtomicU64,
}

#[cfg(feature = "redis")]
#[async_trait::async_trait]
impl Store for Gated {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        let answer = self.inner.execute(request).await;
        self.executed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.hold.load(std::sync::atomic::Ordering::SeqCst) {
            self.release.notified().await;
        }
        answer
    }
}

/// Regression: a waiter cancelled while its booking was in flight left what the store
/// then booked taken (a concurrency lease: until it expired). The booking now ends
/// in the background, and what it booked is given back.
#[cfg(feature = "redis")]
#[tokio::test]
async fn a_waiter_cancelled_mid_round_trip_leaves_nothing_taken() {
    use std::sync::atomic::Ordering;

    let clock = ManualClock::new();
    let gated = Gated {
        inner: store(&clock),
        hold: true.into(),
        release: tokio::sync::Notify::new(),
        executed: 0.into(),
    };
    let rule = Leased::new(Concurrency::new(1).unwrap(), Duration::from_secs(60)).unwrap();
    let limiter = Arc::new(SharedLimiter::with_clock(gated, rule, clock.clone()).unwrap());

    let mut waiting = Box::pin(limiter.acquire("k", 1));
    assert!(poll(&mut waiting).is_pending(), "its booking is in flight");
    // The store has booked the one permit; its waiter leaves before the reply.
    drop(waiting);
    limiter.store().hold.store(false, Ordering::SeqCst);
    limiter.store().release.notify_one();
    // Bounded: the booking and the refund run as tasks on this runtime.
    for _ in 0..1_000 {
        if limiter.store().executed.load(Ordering::SeqCst) >= 2 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        limiter.store().executed.load(Ordering::SeqCst),
        2,
        "booked, then refunded"
    );
    assert!(
        limiter.check("k", 1).await.unwrap().is_ok(),
        "the permit is free"
    );
}

/// Key "spent" takes its 10 of 10 per second through a memory store holding 4 keys
/// (after `held` other keys took one permit each), and 1 ms later keys 1 to 100 take
/// one permit each under `flood` (the same rule, or another on the same store):
/// "spent" must stay spent.
fn spent_key_survives_a_store_flood(name: &str, held: usize, rule: Rule, flood: Rule) {
    let clock = ManualClock::new();
    let store = Arc::new(
        MemoryStore::with_clock(KeyedConfig::new(4).shards(1), "flood", clock.clone()).unwrap(),
    );
    let victim = SharedLimiter::with_clock(store.clone(), rule, clock.clone()).unwrap();
    let flooder =
        SharedLimiter::all_of_with_clock(store.clone(), [("f", flood)], clock.clone()).unwrap();
    let admitted = |limiter: &SharedLimiter<_, _>, key: &str| {
        limiter.try_acquire(key, 1).unwrap().unwrap().is_ok()
    };
    for key in 0..held {
        assert!(admitted(&victim, &format!("held-{key}")), "{name}");
    }
    let spent = (0..10).filter(|_| admitted(&victim, "spent")).count();
    assert!(spent >= 1, "{name}");
    clock.advance(Duration::from_millis(1));
    for key in 1..=100 {
        assert!(
            admitted(&flooder, &format!("flood-{key}")),
            "{name}: newcomer {key}"
        );
    }
    assert_eq!(store.len(), 4, "{name}");
    let again = (0..10).filter(|_| admitted(&victim, "spent")).count();
    assert_eq!(again, 0, "{name}: the spent key was reset by the flood");
}

/// Regression: a memory store evicted the key nearest to idle, as the keyed table
/// used to, so a flooder could reset its own spent key: a sliding log's window ends
/// 1 ms before the flood keys' (and every key of a fixed window ties), so after 100
/// one-permit keys the spent key was admitted 10 more times in the same window. Keys
/// of another rule in the same store (a token bucket) must not outweigh it either.
#[test]
fn a_flooder_cannot_reset_its_own_spent_key_in_a_small_memory_store() {
    let second = Duration::from_secs(1);
    let ten = Quota::per_second(10).unwrap();
    let rules = [
        (
            "sliding log",
            Rule::from(SlidingLog::new(10, second).unwrap()),
        ),
        (
            "fixed window",
            Rule::from(FixedWindow::new(10, second).unwrap()),
        ),
        (
            "first-hit window",
            Rule::from(FixedWindow::from_first_hit(10, second).unwrap()),
        ),
        (
            "sliding counter",
            Rule::from(SlidingCounter::new(10, second).unwrap()),
        ),
        (
            "smooth bursty",
            Rule::from(SmoothBursty::new(10.0).unwrap()),
        ),
        (
            "smooth warming up",
            Rule::from(SmoothWarmingUp::new(10.0, second).unwrap()),
        ),
        ("gcra", Rule::from(Gcra::new(ten))),
        (
            "refresh period",
            Rule::from(RefreshPeriod::new(10, second, Duration::ZERO).unwrap()),
        ),
        (
            "leaky bucket",
            Rule::from(LeakyBucket::new(10, ten).unwrap()),
        ),
    ];
    let token_bucket = Rule::from(Gcra::new(Quota::per_second(1_000).unwrap()));
    for (name, rule) in rules {
        // Written into a shard less than half full, and into one half full.
        for held in [0, 2] {
            let flooded = format!("{name}, {held} held");
            spent_key_survives_a_store_flood(&flooded, held, rule.clone(), rule.clone());
            let flooded = format!("{name}, {held} held, gcra flood");
            spent_key_survives_a_store_flood(&flooded, held, rule.clone(), token_bucket.clone());
        }
    }
}
