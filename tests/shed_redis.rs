//! The fleet-usage shedder across processes through a real `redis-server`: shedders on
//! separate connections share one capacity and its reserve, taking is atomic, slots
//! given back or dropped return, and the slots of a process killed mid-request come
//! back once their leases run out.
//!
//! Leases run on Redis's own clock, so the crash test waits real time (about 3 s),
//! polling with bounded deadlines.
#![cfg(all(feature = "redis", feature = "shed"))]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::redis::{RedisCluster, RedisServer, require_redis};
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use tollgate::ConfigError;
use tollgate::shed::{
    Classes, FleetShedder, Mode, ModeSwitch, RedisSlot, RedisUsage, ShedDecision, ShedReason,
};
use tollgate::store::{RedisStore, StoreError};

/// Tells the test binary, run again as a child, to be the worker holding slots.
const WORKER_URL: &str = "TOLLGATE_SHED_WORKER_URL";
/// The slots the worker holds, of the fleet's capacity.
const WORKER_SLOTS: u64 = 3;
const CAPACITY: u64 = 4;
/// The worker's lease, and how often it renews it.
const WORKER_LEASE: Duration = Duration::from_millis(1_500);
const HEARTBEAT: Duration = Duration::from_millis(250);
/// The worker exits by itself after this, should the test die without killing it.
const WORKER_LIFETIME: Duration = Duration::from_secs(20);

async fn store(url: &str) -> RedisStore<ConnectionManager> {
    tokio::time::timeout(Duration::from_secs(5), RedisStore::connect(url, "shed"))
        .await
        .expect("connecting hung")
        .expect("connecting failed")
}

/// A shedder on a connection of its own, as another process would have.
async fn shedder(
    url: &str,
    capacity: u64,
    reserved: f64,
    lease: Duration,
) -> FleetShedder<RedisUsage> {
    let usage = RedisUsage::new(&store(url).await, "fleet", lease).unwrap();
    FleetShedder::with_counter(Classes::google(), capacity, reserved, usage).unwrap()
}

/// Polls `in_use` until it is `want`, for at most `within`; the time it took.
async fn wait_in_use(usage: &RedisUsage, want: u64, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let now = usage.in_use().await.unwrap();
        if now == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{now} slots in use, not {want}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn reason<S>(decision: &ShedDecision<S>) -> Option<ShedReason> {
    decision.shed().map(|s| s.reason())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shedders_share_the_fleet_capacity_and_its_reserve() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let a = shedder(&server.url(), 10, 0.2, lease).await;
    let b = shedder(&server.url(), 10, 0.2, lease).await;
    let classes = Classes::google();
    let (sheddable, critical) = (classes.parse("sheddable"), classes.parse("critical"));

    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(
            a.decide_async(&sheddable)
                .await
                .unwrap()
                .into_slot()
                .unwrap(),
        );
    }
    for _ in 0..3 {
        held.push(
            b.decide_async(&sheddable)
                .await
                .unwrap()
                .into_slot()
                .unwrap(),
        );
    }
    // 8 of 10 in flight across both: the rest is reserved for critical work.
    let refused = b.decide_async(&sheddable).await.unwrap();
    assert_eq!(reason(&refused), Some(ShedReason::Reserved));
    let refused = a.decide_async(&classes.lowest()).await.unwrap();
    assert_eq!(reason(&refused), Some(ShedReason::Reserved));
    for _ in 0..2 {
        held.push(
            a.decide_async(&critical)
                .await
                .unwrap()
                .into_slot()
                .unwrap(),
        );
    }
    let full = b.decide_async(&critical).await.unwrap();
    assert_eq!(reason(&full), Some(ShedReason::Full));
    assert_eq!(a.counter().in_use().await.unwrap(), 10);
    assert_eq!(b.counter().in_use().await.unwrap(), 10);

    // One given back by `a` is one more for `b`.
    assert!(held.pop().unwrap().release().await.unwrap());
    let slot = b
        .decide_async(&critical)
        .await
        .unwrap()
        .into_slot()
        .unwrap();
    assert_eq!(b.counter().in_use().await.unwrap(), 10);

    // Dropped slots are given back by spawned tasks.
    drop(slot);
    drop(held);
    wait_in_use(a.counter(), 0, Duration::from_secs(2)).await;
    assert!(a.decide_async(&sheddable).await.unwrap().is_admitted());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_decisions_of_two_shedders_never_pass_the_limit() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let a = shedder(&server.url(), 20, 0.5, lease).await;
    let b = shedder(&server.url(), 20, 0.5, lease).await;
    let low = Classes::google().lowest();
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let fleet = if i % 2 == 0 { a.clone() } else { b.clone() };
            let low = low.clone();
            tokio::spawn(async move { fleet.decide_async(&low).await.unwrap().into_slot().ok() })
        })
        .collect();
    let mut held = Vec::new();
    for task in tasks {
        held.extend(task.await.unwrap());
    }
    assert_eq!(held.len(), 10, "the shared limit is 20 × (1 − 0.5)");
    assert_eq!(a.counter().in_use().await.unwrap(), 10);
    for slot in held {
        assert!(slot.release().await.unwrap());
    }
    assert_eq!(a.counter().in_use().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_takes_the_slot_and_off_admits_everything() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let switch = ModeSwitch::new(Mode::Shadow);
    let fleet = shedder(&server.url(), 2, 0.5, Duration::from_secs(30))
        .await
        .with_mode(switch.clone());
    let low = Classes::google().lowest();
    let first = fleet.decide_async(&low).await.unwrap();
    assert!(matches!(first, ShedDecision::Admit(_)));
    let second = fleet.decide_async(&low).await.unwrap();
    assert!(second.is_admitted() && second.would_shed());
    assert_eq!(reason(&second), Some(ShedReason::Reserved));
    assert_eq!(fleet.counter().in_use().await.unwrap(), 2);

    switch.set(Mode::Off);
    let third = fleet.decide_async(&low).await.unwrap();
    assert!(matches!(third, ShedDecision::Admit(_)));
    assert_eq!(fleet.counter().in_use().await.unwrap(), 3);

    switch.set(Mode::Enforce);
    let refused = fleet
        .decide_async(&Classes::google().highest())
        .await
        .unwrap();
    assert_eq!(reason(&refused), Some(ShedReason::Full));
    assert_eq!(
        fleet.counter().in_use().await.unwrap(),
        3,
        "a refusal took a slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_renew_until_given_back_and_the_key_expires_with_the_last() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let store = store(&server.url()).await;
    let usage = RedisUsage::new(&store, "leases", Duration::from_secs(10)).unwrap();
    assert_eq!(usage.key(), "shed:{leases}");
    let first = usage.try_take(2).await.unwrap().unwrap();
    let second = usage.take().await.unwrap();
    assert_ne!(first.id(), second.id());
    assert!(usage.try_take(2).await.unwrap().is_none());

    let mut raw = store.connection().clone();
    let ttl: i64 = raw.pttl(usage.key()).await.unwrap();
    // The lease plus a second of slack.
    assert!(ttl > 10_000 && ttl <= 11_000, "ttl {ttl} ms");
    let mut members: Vec<String> = raw.zrange(usage.key(), 0, -1).await.unwrap();
    members.sort();
    let mut ids = [first.id().to_string(), second.id().to_string()];
    ids.sort();
    assert_eq!(members, ids);

    assert!(usage.renew(first).await.unwrap());
    assert!(usage.give_back(first).await.unwrap());
    assert!(!usage.give_back(first).await.unwrap(), "given back twice");
    assert!(
        !usage.renew(first).await.unwrap(),
        "renewed after its give-back"
    );
    assert!(usage.give_back(second).await.unwrap());
    let exists: bool = raw.exists(usage.key()).await.unwrap();
    assert!(!exists, "an empty set outlived its leases");
    // A lease id is never reused.
    let third = usage.take().await.unwrap();
    assert!(third.id() != first.id() && third.id() != second.id());
}

// Two live leases never share an id: the script refuses a take under a live lease's
// id (the caller then draws another) and leaves that lease as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_under_a_live_lease_s_id_is_refused_and_changes_nothing() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let store = store(&server.url()).await;
    let usage = RedisUsage::new(&store, "ids", Duration::from_secs(10)).unwrap();
    let live = usage.take().await.unwrap();
    let mut raw = store.connection().clone();
    let member = live.id().to_string();
    let before: f64 = raw.zscore(usage.key(), &member).await.unwrap();
    let script = redis::Script::new(include_str!("../src/shed/fleet_usage.lua"));
    let reply: Vec<i64> = script
        .key(usage.key())
        .arg("take")
        .arg(10)
        .arg("1")
        .arg(60_000_000)
        .arg(&member)
        .invoke_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(reply, [-1, 1, 0]);
    let after: f64 = raw.zscore(usage.key(), &member).await.unwrap();
    assert_eq!(after, before, "the live lease was moved");
    assert_eq!(usage.in_use().await.unwrap(), 1);
    assert!(usage.give_back(live).await.unwrap());
}

/// Runs `call` until it is not a connection error (a client reconnecting after a
/// restart), for at most 10 s.
async fn after_reconnect<T, F, Fut>(mut call: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = tokio::time::timeout(Duration::from_secs(2), call())
            .await
            .expect("a call to Redis hung");
        match answer {
            Err(StoreError::Connection(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

// The bug: lease ids came from a counter in Redis, lost with the set when Redis
// restarted without persistence; slot B after the restart got slot A's id 1, so
// `A.release()` freed B (a third request was then admitted at capacity 1) and
// `B.renew()` answered false.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_from_before_a_redis_restart_neither_frees_nor_renews_one_from_after() {
    let Some(()) = require_redis() else { return };
    let test = async {
        // The harness's server: 127.0.0.1 only, no persistence, same port on restart.
        let mut server = RedisServer::start();
        let url = server.url();
        assert!(url.starts_with("redis://127.0.0.1:"), "{url}");
        let low = Classes::google().lowest();
        let before = shedder(&url, 1, 0.0, Duration::from_secs(30)).await;
        let a = before
            .decide_async(&low)
            .await
            .unwrap()
            .into_slot()
            .unwrap();

        tokio::task::block_in_place(|| server.restart());
        assert_eq!(server.url(), url, "restarted on another port");

        let after = shedder(&url, 1, 0.0, Duration::from_secs(30)).await;
        assert_eq!(after.counter().in_use().await.unwrap(), 0, "data survived");
        let b = after.decide_async(&low).await.unwrap().into_slot().unwrap();
        let (a_id, b_id) = (a.lease().id(), b.lease().id());

        // A's connection reconnects; then A names nothing in the new set.
        after_reconnect(|| before.counter().in_use()).await.unwrap();
        assert!(!a.renew().await.unwrap(), "A renewed B's lease");
        assert!(!a.release().await.unwrap(), "A freed B's lease");
        assert!(b.renew().await.unwrap(), "B's lease is gone");
        assert_eq!(after.counter().in_use().await.unwrap(), 1);
        for fleet in [&before, &after] {
            let third = fleet.decide_async(&low).await.unwrap();
            assert_eq!(
                reason(&third),
                Some(ShedReason::Full),
                "admitted past capacity 1"
            );
        }
        assert!(b.release().await.unwrap());
        assert_ne!(a_id, b_id);
    };
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the restart test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configuration_is_a_typed_error() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let store = store(&server.url()).await;
    let config = |r: Result<RedisUsage, StoreError>| match r {
        Err(StoreError::Config(e)) => e,
        other => panic!("{other:?}"),
    };
    let lease = |d| config(RedisUsage::new(&store, "fleet", d));
    assert_eq!(
        lease(Duration::ZERO),
        ConfigError::Zero { parameter: "lease" }
    );
    for huge in [Duration::MAX, Duration::from_micros((1 << 52) + 1)] {
        let e = lease(huge);
        assert!(
            matches!(
                e,
                ConfigError::TooLong {
                    parameter: "lease",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    let e = lease(Duration::from_nanos(1_500));
    assert!(
        matches!(
            e,
            ConfigError::OutOfRange {
                parameter: "lease",
                ..
            }
        ),
        "{e:?}"
    );
    for name in ["", "a{b", "b}"] {
        let e = config(RedisUsage::new(&store, name, Duration::from_secs(1)));
        assert!(
            matches!(
                e,
                ConfigError::OutOfRange {
                    parameter: "name",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    let usage = || RedisUsage::new(&store, "fleet", Duration::from_secs(1)).unwrap();
    for reserved in [-0.1, 1.5, f64::INFINITY] {
        let e = FleetShedder::with_counter(Classes::google(), 10, reserved, usage()).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::OutOfRange {
                    parameter: "reserved",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    let e = FleetShedder::with_counter(Classes::google(), 10, f64::NAN, usage()).unwrap_err();
    assert_eq!(
        e,
        ConfigError::NotANumber {
            parameter: "reserved"
        }
    );
    let e = FleetShedder::with_counter(Classes::google(), 0, 0.2, usage()).unwrap_err();
    assert_eq!(
        e,
        ConfigError::Zero {
            parameter: "capacity"
        }
    );
}

/// Services hold these across `.await`s and in tasks.
#[test]
fn the_fleet_types_and_the_decision_future_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<RedisUsage>();
    send_sync::<RedisSlot>();
    send_sync::<FleetShedder<RedisUsage<ClusterConnection>>>();
    // Never polled: no runtime, no connection needed.
    let _ = |fleet: &FleetShedder<RedisUsage>| send(&decide_and_release(fleet));
}

async fn decide_and_release(fleet: &FleetShedder<RedisUsage>) -> Result<(), StoreError> {
    let class = Classes::google().lowest();
    if let Ok(slot) = fleet.decide_async(&class).await?.into_slot() {
        slot.renew().await?;
        slot.release().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_each_fleet_s_keys_share_its_slot() {
    let Some(()) = require_redis() else { return };
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let store = RedisStore::connect_cluster(&seeds, "shed").await.unwrap();
    let classes = Classes::google();
    // Several fleets, each on the master its name hashes to.
    for name in ["api", "search", "checkout", "images"] {
        let usage = RedisUsage::new(&store, name, Duration::from_secs(30)).unwrap();
        let fleet = FleetShedder::with_counter(classes.clone(), 2, 0.5, usage).unwrap();
        let slot = fleet
            .decide_async(&classes.lowest())
            .await
            .unwrap()
            .into_slot()
            .unwrap();
        let refused = fleet.decide_async(&classes.lowest()).await.unwrap();
        assert_eq!(reason(&refused), Some(ShedReason::Reserved), "{name}");
        assert_eq!(fleet.counter().in_use().await.unwrap(), 1, "{name}");
        assert!(slot.release().await.unwrap(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_redis_is_an_error_not_a_decision() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let fleet = shedder(&server.url(), 10, 0.2, Duration::from_secs(30)).await;
    server.kill();
    let low = Classes::google().lowest();
    let answer = tokio::time::timeout(Duration::from_secs(5), fleet.decide_async(&low))
        .await
        .expect("a decision on a dead Redis hung");
    let error = answer.unwrap_err();
    assert!(matches!(error, StoreError::Connection(_)), "{error:?}");
}

/// The child of the crash test (see there); without its variable, it does nothing.
///
/// It takes `WORKER_SLOTS` critical slots and renews them every `HEARTBEAT`, as a
/// process serving long requests would, until it is killed (or `WORKER_LIFETIME`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_holding_slots_for_the_crash_test() {
    let Ok(url) = std::env::var(WORKER_URL) else {
        return;
    };
    let fleet = shedder(&url, CAPACITY, 0.25, WORKER_LEASE).await;
    let critical = Classes::google().highest();
    let mut held = Vec::new();
    for _ in 0..WORKER_SLOTS {
        let slot = fleet.decide_async(&critical).await.unwrap().into_slot();
        held.push(slot.expect("room for the worker"));
    }
    let started = Instant::now();
    while started.elapsed() < WORKER_LIFETIME {
        tokio::time::sleep(HEARTBEAT).await;
        for slot in &held {
            assert!(slot.renew().await.unwrap(), "a lease ran out while renewed");
        }
    }
}

/// A real process takes slots and is killed with SIGKILL mid-request: nothing gives
/// its slots back, yet they come back once their leases run out on Redis's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_s_slots_come_back_after_its_lease() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let fleet = shedder(&server.url(), CAPACITY, 0.25, WORKER_LEASE).await;
    let classes = Classes::google();
    let (low, critical) = (classes.lowest(), classes.highest());

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker_holding_slots_for_the_crash_test"])
        .args(["--nocapture", "--test-threads=1"])
        .env(WORKER_URL, server.url())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("cannot run the test binary as the worker");
    wait_in_use(fleet.counter(), WORKER_SLOTS, Duration::from_secs(10)).await;

    // Alive, the worker's heartbeats keep its slots past one lease.
    tokio::time::sleep(WORKER_LEASE + Duration::from_millis(200)).await;
    assert_eq!(child.try_wait().unwrap(), None, "the worker exited");
    assert_eq!(fleet.counter().in_use().await.unwrap(), WORKER_SLOTS);

    child.kill().unwrap(); // SIGKILL: no destructor, no give-back
    child.wait().unwrap();
    let killed = Instant::now();
    assert_eq!(fleet.counter().in_use().await.unwrap(), WORKER_SLOTS);
    // Its slots still count: only critical work fits, in the reserve.
    let refused = fleet.decide_async(&low).await.unwrap();
    assert_eq!(reason(&refused), Some(ShedReason::Reserved));
    let last = fleet
        .decide_async(&critical)
        .await
        .unwrap()
        .into_slot()
        .unwrap();
    assert_eq!(
        reason(&fleet.decide_async(&critical).await.unwrap()),
        Some(ShedReason::Full)
    );
    last.release().await.unwrap();

    // Within one lease of the kill (plus margin), every slot is back.
    wait_in_use(fleet.counter(), 0, WORKER_LEASE + Duration::from_secs(1)).await;
    assert!(killed.elapsed() <= WORKER_LEASE + Duration::from_secs(1));
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(fleet.decide_async(&low).await.unwrap().into_slot().unwrap());
    }
    held.push(
        fleet
            .decide_async(&critical)
            .await
            .unwrap()
            .into_slot()
            .unwrap(),
    );
    assert_eq!(fleet.counter().in_use().await.unwrap(), CAPACITY);
}
