//! The Redis store through Sentinel, on a real master, replica and 3 Sentinels, while
//! tasks send requests: a killed master is followed to the promoted replica, and a
//! manual failover is followed at the Sentinels' announcements, the `Resilient` policy
//! deciding in between; what each failover over-admits is counted. A master name no
//! Sentinel knows and unreachable Sentinels are typed errors, in bounded time.
#![cfg(feature = "redis")]

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::redis::{RedisSentinels, require_redis};
use redis::ErrorKind;
use tollgate::algorithm::FixedWindow;
use tollgate::store::{
    BreakerState, FailurePolicy, RedisConnectOptions, RedisStore, Resilient, SentinelConnection,
    SharedLimiter, StoreError,
};

const MASTER: &str = "tollgate";
/// Each key's limit, in a window longer than any test.
const LIMIT: u64 = 400;
const KEYS: usize = 4;
const TASKS: usize = 2;
/// Requests before the failover, and after the store answers again.
const UP_REQUESTS: u64 = 200;
const BACK_REQUESTS: u64 = 200;
/// The bound on every wait: a killed master is replaced in about 3 s (1 s to call it
/// down, 1 to 2 s to promote the replica), and the lookups retry at most every second.
const PATIENCE: Duration = Duration::from_secs(15);

type Limiter = SharedLimiter<Resilient<RedisStore<SentinelConnection>>>;

/// When a request started: before the failover, during it (until the store decides
/// again on the new master), after.
#[derive(Clone, Copy, Debug)]
enum Phase {
    Up = 0,
    Failover = 1,
    Back = 2,
}

#[derive(Default)]
struct Tally {
    phase: AtomicUsize,
    requests: [AtomicU64; 3],
    admitted: [AtomicU64; 3],
    /// Admitted by the store (the policy is `Closed`: it admits nothing), per key.
    admitted_per_key: [AtomicU64; KEYS],
    errors: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Tally {
    fn requests(&self, phase: Phase) -> u64 {
        self.requests[phase as usize].load(Ordering::SeqCst)
    }

    fn admitted(&self, phase: Phase) -> u64 {
        self.admitted[phase as usize].load(Ordering::SeqCst)
    }

    fn enter(&self, phase: Phase) {
        self.phase.store(phase as usize, Ordering::SeqCst);
    }
}

async fn issue(limiter: Limiter, tally: Arc<Tally>, task: usize) {
    let mut i = task;
    while !tally.stop.load(Ordering::SeqCst) {
        let key = i % KEYS;
        let phase = tally.phase.load(Ordering::SeqCst);
        tally.requests[phase].fetch_add(1, Ordering::SeqCst);
        match limiter.check(&format!("key-{key}"), 1).await {
            Ok(Ok(_)) => {
                tally.admitted[phase].fetch_add(1, Ordering::SeqCst);
                tally.admitted_per_key[key].fetch_add(1, Ordering::SeqCst);
            }
            Ok(Err(_)) => {}
            Err(e) => tally.errors.lock().unwrap().push(e.to_string()),
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until `done` holds, for at most [`PATIENCE`].
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How the master goes away.
#[derive(Clone, Copy, Debug)]
enum Failover {
    /// SIGKILL: the Sentinels call it down after 1 s, then promote the replica.
    Kill,
    /// `SENTINEL FAILOVER`: the replica is promoted at once, the old master stays up.
    Manual,
}

/// What a run saw.
struct Run {
    tally: Arc<Tally>,
    /// From the failover until the connection moved to the new master.
    switch_after: Duration,
    /// From the failover until the store admitted again.
    back_after: Duration,
    /// Admitted beyond the limit, summed over the keys: decisions the failover lost.
    over_admitted: u64,
    /// The policy's decisions during the failover.
    policy_decisions: u64,
}

/// Tasks send requests to a store through the Sentinels while the master goes away as
/// `failover` says; then every key is spent to its limit, to count what was lost.
async fn run(failover: Failover, prefix: &str) -> Option<Run> {
    require_redis()?;
    let mut group = tokio::task::block_in_place(|| RedisSentinels::start(MASTER, 3));
    let urls = group.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redis = RedisStore::connect_sentinel(&urls, MASTER, prefix)
        .await
        .unwrap();
    let old_port = group.master_mut().port();
    let new_port = group.replica().port();
    assert!(
        redis
            .connection()
            .master_address()
            .ends_with(&format!(":{old_port}"))
    );
    let connection = redis.connection().clone();
    // Generous: a loaded machine must not time out a healthy Redis. Calls to a killed
    // master fail at once (the port refuses connections).
    let store = Resilient::builder(redis, FailurePolicy::Closed)
        .deadline(Duration::from_millis(250))
        .failure_threshold(3)
        .cool_down(Duration::from_millis(100))
        .build()
        .unwrap();
    let window = FixedWindow::new(LIMIT, Duration::from_secs(3_600)).unwrap();
    let limiter: Limiter = SharedLimiter::new(store, window).unwrap();
    let tally = Arc::new(Tally::default());
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(issue(limiter.clone(), tally.clone(), task)))
        .collect();

    wait_for("requests to the first master", || {
        tally.requests(Phase::Up) >= UP_REQUESTS
    })
    .await;
    let before = limiter.store().stats();
    tally.enter(Phase::Failover);
    let start = Instant::now();
    tokio::task::block_in_place(|| match failover {
        Failover::Kill => group.master_mut().kill(),
        Failover::Manual => group.failover(),
    });
    wait_for("the connection to move to the new master", || {
        connection.switches() >= 1
            && connection
                .master_address()
                .ends_with(&format!(":{new_port}"))
    })
    .await;
    let switch_after = start.elapsed();
    let admitted = tally.admitted(Phase::Failover);
    wait_for("the store to admit again", || {
        limiter.store().stats().state == BreakerState::Closed
            && tally.admitted(Phase::Failover) > admitted
    })
    .await;
    let back_after = start.elapsed();
    let during = limiter.store().stats();
    tally.enter(Phase::Back);
    wait_for("requests on the new master", || {
        tally.requests(Phase::Back) >= BACK_REQUESTS
    })
    .await;
    tally.stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("a task panicked");
    }
    let errors = tally.errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "errors: {errors:?}");

    // Spend every key: the new master admits what it believes is left.
    let fallbacks = limiter.store().stats().fallbacks;
    let mut over_admitted = 0;
    for key in 0..KEYS {
        let mut admitted = tally.admitted_per_key[key].load(Ordering::SeqCst);
        while matches!(limiter.check(&format!("key-{key}"), 1).await, Ok(Ok(_))) {
            admitted += 1;
            assert!(admitted <= 2 * LIMIT, "key-{key}: no end of admissions");
        }
        over_admitted += admitted.saturating_sub(LIMIT);
    }
    assert_eq!(
        limiter.store().stats().fallbacks,
        fallbacks,
        "the policy decided while spending the keys"
    );
    tokio::task::block_in_place(|| group.wait_for_master(new_port, PATIENCE));
    let run = Run {
        tally,
        switch_after,
        back_after,
        over_admitted,
        policy_decisions: during.fallbacks - before.fallbacks,
    };
    eprintln!(
        "{failover:?}: switched after {:?}, admitting again after {:?}; {} requests \
         during the failover, {} admitted, {} decided by the policy; over-admitted {} \
         (limit {LIMIT} on each of {KEYS} keys)",
        run.switch_after,
        run.back_after,
        run.tally.requests(Phase::Failover),
        run.tally.admitted(Phase::Failover),
        run.policy_decisions,
        run.over_admitted,
    );
    Some(run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_followed_to_the_promoted_replica() {
    let Some(run) = run(Failover::Kill, "kill").await else {
        return;
    };
    // While no master answered, the policy (`Closed`) decided: denials, no errors.
    assert!(run.policy_decisions > 0, "the policy decided nothing");
    assert!(
        run.tally.admitted(Phase::Back) > 0,
        "nothing admitted after"
    );
    // Down after 1 s, promoted within 1 to 2 s, a lookup at most every second.
    assert!(
        run.back_after < Duration::from_secs(10),
        "{:?}",
        run.back_after
    );
    // Replication runs with the replies: a killed master loses at most the writes of
    // its last turn, one per request in flight.
    assert!(
        run.over_admitted <= TASKS as u64,
        "over-admitted {}",
        run.over_admitted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_is_followed_at_the_announcement() {
    let Some(run) = run(Failover::Manual, "manual").await else {
        return;
    };
    // The old master stays writable for about 10 s: the connection moves when a
    // Sentinel announces +switch-master, long before.
    assert!(
        run.switch_after < Duration::from_secs(5),
        "{:?}",
        run.switch_after
    );
    assert!(
        run.tally.admitted(Phase::Back) > 0,
        "nothing admitted after"
    );
    // From the announced promotion to the new master, calls are held back and the
    // policy decides them: nothing is written to the old master that the promotion
    // would lose, but the calls then in flight.
    assert!(run.policy_decisions > 0, "the policy decided nothing");
    assert!(
        run.over_admitted <= TASKS as u64,
        "over-admitted {} with {} admitted during the failover",
        run.over_admitted,
        run.tally.admitted(Phase::Failover)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_name_no_sentinel_knows_is_a_connection_error() {
    if require_redis().is_none() {
        return;
    }
    let group = tokio::task::block_in_place(|| RedisSentinels::start(MASTER, 1));
    let urls = group.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let started = Instant::now();
    let error = RedisStore::connect_sentinel(&urls, "no-such-master", "p")
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    let StoreError::Connection(source) = &error else {
        panic!("{error:?}");
    };
    let redis = source.downcast_ref::<redis::RedisError>().unwrap();
    assert_eq!(redis.kind(), ErrorKind::MasterNameNotFoundBySentinel);
    assert!(!error.is_permanent());
    // The right name connects, with the longest timeouts too.
    let store = RedisStore::connect_sentinel(&urls, MASTER, "p")
        .await
        .unwrap();
    assert_eq!(store.connection().master_name(), MASTER);
    let longest = RedisConnectOptions::new()
        .connect_timeout(Duration::MAX)
        .response_timeout(Duration::MAX)
        .sentinel_timeout(Duration::MAX);
    let store = RedisStore::connect_sentinel_with(&urls, MASTER, "p", &longest)
        .await
        .unwrap();
    assert_eq!(store.connection().switches(), 0);
    // Coalescing works through the Sentinel connection too.
    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    let limiter = SharedLimiter::new(store.coalescing(8), window).unwrap();
    let checks = futures::future::join_all((0..3).map(|_| limiter.check("k", 1))).await;
    let admitted = checks.iter().filter(|c| matches!(c, Ok(Ok(_)))).count();
    assert_eq!(admitted, 2, "{checks:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_sentinels_are_a_connection_error_in_bounded_time() {
    // Nothing listens on a released port; a listener that never answers stands for a
    // black-holed Sentinel.
    let refused = {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("redis://{}", probe.local_addr().unwrap())
    };
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("redis://{}", silent.local_addr().unwrap());
    let options = RedisConnectOptions::new()
        .connect_timeout(Duration::from_millis(200))
        .response_timeout(Duration::from_millis(200))
        .sentinel_timeout(Duration::from_secs(1));
    for urls in [
        vec![refused.as_str()],
        vec![silent_url.as_str(), refused.as_str()],
    ] {
        let started = Instant::now();
        let error = RedisStore::connect_sentinel_with(&urls, MASTER, "p", &options)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?} for {urls:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn bad_arguments_are_typed_errors() {
    let config = |r: Result<RedisStore<SentinelConnection>, StoreError>| {
        matches!(r, Err(StoreError::Config(_)))
    };
    let urls = ["redis://127.0.0.1:1"];
    assert!(config(RedisStore::connect_sentinel(&[], MASTER, "p").await));
    assert!(config(RedisStore::connect_sentinel(&urls, "", "p").await));
    assert!(config(
        RedisStore::connect_sentinel(&urls, MASTER, "a{b").await
    ));
    for zero in [
        RedisConnectOptions::new().connect_timeout(Duration::ZERO),
        RedisConnectOptions::new().response_timeout(Duration::ZERO),
        RedisConnectOptions::new().sentinel_timeout(Duration::ZERO),
    ] {
        assert!(config(
            RedisStore::connect_sentinel_with(&urls, MASTER, "p", &zero).await
        ));
    }
    assert!(matches!(
        RedisStore::connect_sentinel(&["not a url"], MASTER, "p").await,
        Err(StoreError::InvalidUrl(_))
    ));
}
