//! A `Resilient` Redis store while its real `redis-server` is killed and restarted under
//! continuous requests from several tasks: no panic, no error; while Redis is down the
//! policy decides (open: all admitted; closed: all denied; fallback: at most the local
//! share) and the breaker short-circuits (counted in calls, not timed); once Redis is
//! back the decisions come from it again; and every key Redis holds has a TTL.
#![cfg(feature = "redis")]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::redis::{RedisServer, require_redis};
use redis::aio::ConnectionManager;
use tollgate::algorithm::Gcra;
use tollgate::store::{
    BreakerState, FailurePolicy, RedisStore, Resilient, ResilientStats, SharedLimiter,
};
use tollgate::{Decision, Quota};

/// Each key's limit: a burst of 40 refilled at 40 per hour, so that no permit comes
/// back within a test.
const BURST: u64 = 40;
/// Nodes sharing the limit under the fallback: 10 permits per key each.
const NODES: u32 = 4;
const SHARE: u64 = BURST / NODES as u64;
/// Keys the tasks spread their requests over.
const KEYS: usize = 8;
/// Tasks issuing requests continuously.
const TASKS: usize = 4;
/// Requests that each phase lasts at least, counted over all tasks.
const UP_REQUESTS: u64 = 200;
const DOWN_REQUESTS: u64 = 800;
const BACK_REQUESTS: u64 = 200;
/// The bound on every wait for the tasks or for recovery.
const PATIENCE: Duration = Duration::from_secs(10);

type Limiter = SharedLimiter<Resilient<RedisStore<ConnectionManager>>>;

/// When a request started: the server up, killed, between kill and restart (not
/// judged: a probe then may reach the restarted server), restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Up = 0,
    Down = 1,
    Gap = 2,
    Back = 3,
}

const PHASES: [Phase; 4] = [Phase::Up, Phase::Down, Phase::Gap, Phase::Back];

/// What the tasks saw, by the phase in which each request started.
#[derive(Default)]
struct Tally {
    phase: AtomicUsize,
    requests: [AtomicU64; 4],
    in_flight: [AtomicU64; 4],
    admitted: [AtomicU64; 4],
    /// Admitted while Redis was down, per key.
    admitted_down: [AtomicU64; KEYS],
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

    fn record(&self, phase: usize, key: usize, result: &Result<Decision, String>) {
        match result {
            Ok(Ok(_)) => {
                self.admitted[phase].fetch_add(1, Ordering::SeqCst);
                if phase == Phase::Down as usize {
                    self.admitted_down[key].fetch_add(1, Ordering::SeqCst);
                }
            }
            Ok(Err(_)) => {}
            Err(e) => self.errors.lock().unwrap().push(e.clone()),
        }
        self.requests[phase].fetch_add(1, Ordering::SeqCst);
    }
}

/// Requests `key-0` … `key-7` in turn, one per millisecond or so, until told to stop.
async fn issue(limiter: Limiter, tally: Arc<Tally>, task: usize) {
    let mut i = task;
    while !tally.stop.load(Ordering::SeqCst) {
        let key = i % KEYS;
        let phase = tally.phase.load(Ordering::SeqCst);
        tally.in_flight[phase].fetch_add(1, Ordering::SeqCst);
        let result = limiter
            .check(&format!("key-{key}"), 1)
            .await
            .map_err(|e| e.to_string());
        tally.in_flight[phase].fetch_sub(1, Ordering::SeqCst);
        tally.record(phase, key, &result);
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

/// Whether a fresh key is decided by Redis: its whole burst admitted (more than any
/// node's share, and nothing under fail-closed), then a denial (nothing under
/// fail-open). A call the policy decides in between spoils the check.
async fn decided_by_redis(limiter: &Limiter, key: &str) -> bool {
    for _ in 0..BURST {
        if !matches!(limiter.check(key, 1).await, Ok(Ok(_))) {
            return false;
        }
    }
    matches!(limiter.check(key, 1).await, Ok(Err(_)))
}

/// Every key on the server, and those without a TTL.
async fn keys_without_ttl(url: &str) -> (usize, Vec<String>) {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let mut cursor = 0u64;
    let (mut seen, mut missing) = (0, Vec::new());
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await
            .unwrap();
        for key in keys {
            seen += 1;
            let pttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut connection)
                .await
                .unwrap();
            if pttl == -1 {
                missing.push(key);
            }
        }
        if next == 0 {
            return (seen, missing);
        }
        cursor = next;
    }
}

/// What a run under one policy saw.
struct Run {
    tally: Arc<Tally>,
    /// The store's counters when the server had just been killed, and when the
    /// outage was over.
    at_kill: ResilientStats,
    at_restart: ResilientStats,
}

/// Runs the tasks through a kill and a restart of the server under `policy`.
async fn run(policy: FailurePolicy, prefix: &str) -> Option<Run> {
    require_redis()?;
    let mut server = RedisServer::start();
    let redis = RedisStore::connect(&server.url(), prefix).await.unwrap();
    // The deadline is generous: a loaded test machine must not time out a healthy
    // Redis. Outage calls fail at once (the port refuses connections).
    let store = Resilient::builder(redis, policy)
        .deadline(Duration::from_millis(250))
        .failure_threshold(3)
        .cool_down(Duration::from_millis(100))
        .build()
        .unwrap();
    let quota = Quota::per_hour(BURST).unwrap();
    let limiter: Limiter = SharedLimiter::new(store, Gcra::new(quota)).unwrap();
    let tally = Arc::new(Tally::default());
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(issue(limiter.clone(), tally.clone(), task)))
        .collect();

    wait_for("requests to Redis", || {
        tally.requests(Phase::Up) >= UP_REQUESTS
    })
    .await;
    tokio::task::block_in_place(|| server.kill());
    let at_kill = limiter.store().stats();
    tally.enter(Phase::Down);
    wait_for("requests while Redis is down", || {
        tally.requests(Phase::Down) >= DOWN_REQUESTS
    })
    .await;
    tally.enter(Phase::Gap);
    wait_for("the outage's requests to end", || {
        tally.in_flight[Phase::Down as usize].load(Ordering::SeqCst) == 0
    })
    .await;
    let at_restart = limiter.store().stats();
    tokio::task::block_in_place(|| server.restart());
    tally.enter(Phase::Back);

    let deadline = Instant::now() + PATIENCE;
    for attempt in 0.. {
        if limiter.store().stats().state == BreakerState::Closed
            && decided_by_redis(&limiter, &format!("fresh-{attempt}")).await
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery: {:?}",
            limiter.store().stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let back = tally.requests(Phase::Back);
    wait_for("requests after recovery", || {
        tally.requests(Phase::Back) >= back + BACK_REQUESTS
    })
    .await;
    tally.stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("a task panicked");
    }

    let errors = tally.errors.lock().unwrap().clone();
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let (keys, missing) = keys_without_ttl(&server.url()).await;
    assert!(keys > 0, "Redis holds no key after recovery");
    assert!(missing.is_empty(), "keys without a TTL: {missing:?}");
    for phase in PHASES {
        eprintln!(
            "{policy:?} {phase:?}: {} requests, {} admitted",
            tally.requests(phase),
            tally.admitted(phase)
        );
    }
    eprintln!("{policy:?}: at kill {at_kill:?}, at restart {at_restart:?}");
    Some(Run {
        tally,
        at_kill,
        at_restart,
    })
}

impl Run {
    /// The breaker opened during the outage and then kept calls away from Redis.
    fn check_short_circuits(&self) {
        let (before, after) = (&self.at_kill, &self.at_restart);
        assert_ne!(after.state, BreakerState::Closed, "{after:?}");
        let calls = after.calls - before.calls;
        let requests = self.tally.requests(Phase::Down);
        let short = after.short_circuited - before.short_circuited;
        assert!(short > 0, "nothing short-circuited: {after:?}");
        assert!(
            calls * 4 < requests,
            "{calls} calls reached the store for {requests} requests during the outage"
        );
        assert!(
            after.failures >= 3,
            "the breaker opened on fewer failures: {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_admits_everything_while_redis_is_down() {
    let Some(run) = run(FailurePolicy::Open, "open").await else {
        return;
    };
    let down = run.tally.requests(Phase::Down);
    assert_eq!(run.tally.admitted(Phase::Down), down, "a denial while open");
    assert!(run.tally.admitted(Phase::Up) > 0, "Redis admitted nothing");
    run.check_short_circuits();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_denies_everything_while_redis_is_down() {
    let Some(run) = run(FailurePolicy::Closed, "closed").await else {
        return;
    };
    assert_eq!(
        run.tally.admitted(Phase::Down),
        0,
        "an admission while closed"
    );
    assert!(run.tally.admitted(Phase::Up) > 0, "Redis admitted nothing");
    run.check_short_circuits();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_admits_at_most_the_local_share_while_redis_is_down() {
    let Some(run) = run(FailurePolicy::Fallback { nodes: NODES }, "fallback").await else {
        return;
    };
    let per_key: Vec<u64> = run
        .tally
        .admitted_down
        .iter()
        .map(|a| a.load(Ordering::SeqCst))
        .collect();
    assert!(
        per_key.iter().all(|&a| a <= SHARE),
        "more than the share of {SHARE}: {per_key:?}"
    );
    assert!(
        per_key.iter().sum::<u64>() > 0,
        "the fallback admitted nothing"
    );
    run.check_short_circuits();
}
