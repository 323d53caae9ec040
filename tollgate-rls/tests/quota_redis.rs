//! The rate limit quota service over Redis: replicas sharing each bucket's limit
//! through leases, each on its own redis-server (or Cluster) started on loopback
//! ports; what a dead Redis does under each `--store-failure`; and the lease script
//! held to its Rust reference.

mod common;

#[path = "../../tests/common/redis.rs"]
#[allow(dead_code, clippy::collapsible_if)]
mod redis_harness;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::rlqs::{Envoy, granted};
use common::{Rls, STARTUP, command};
use redis::aio::MultiplexedConnection;
use redis_harness::{RedisCluster, RedisServer, require_redis};
use tollgate::time::ManualClock;
use tollgate_rls::backend::{Backend, BackendOptions, FailureMode};
use tollgate_rls::domains::Domains;
use tollgate_rls::engine::Engine;
use tollgate_rls::quota::fleet::{Ledger, MAX_TOKENS, Want};
use tollgate_rls::quota::lease::{Leases, ledger_key};
use tollgate_rls::quota::{QuotaGrpc, QuotaOptions};

const CONFIG: &str = "\
domain: quota
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 20 }
";

const ALICE: &[(&str, &str)] = &[("user", "alice")];

/// How long a test waits for a replica to see another's lease given back.
const GIVE_BACK: Duration = Duration::from_secs(10);

fn config() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quota.yaml"), CONFIG).unwrap();
    dir
}

/// A replica over the Redis of `env`, asking Redis on every report.
fn replica(config: &tempfile::TempDir, env: &[(&str, String)], args: &[&str]) -> Rls {
    let mut all = vec![
        "--config",
        config.path().to_str().unwrap(),
        "--quota-sync-interval",
        "0s",
    ];
    all.extend_from_slice(args);
    let mut cmd = command(&all);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Rls::spawn(cmd)
}

fn single(redis: &RedisServer) -> Vec<(&'static str, String)> {
    vec![
        ("BACKEND_TYPE", "redis".to_owned()),
        ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
        ("REDIS_TIMEOUT", "500ms".to_owned()),
    ]
}

async fn connection(url: String) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn alice_ledger() -> String {
    let key = (
        "quota".to_owned(),
        vec![("user".to_owned(), "alice".to_owned())],
    );
    ledger_key("ratelimit", &key)
}

/// Reports until the assignment is `want` (a replica sees another's lease given back
/// when that replica's give back lands).
async fn until_granted(envoy: &mut Envoy, want: u32) {
    let deadline = Instant::now() + GIVE_BACK;
    loop {
        let got = envoy.ask("quota", ALICE, 10, 5).await;
        if got == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "still {got:?}, not {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two replicas over one Redis (`env`), an Envoy on each: their assignments never add
/// up to more than the limit, follow the demands, and the whole limit goes to the
/// replica left when the other's Envoy leaves, or when the other drains on SIGTERM.
/// The replica left and its Envoy, still live.
async fn two_replicas_share_a_bucket(
    env: Vec<(&'static str, String)>,
) -> (tempfile::TempDir, Rls, Envoy) {
    let config = config();
    let (mut a, b) = (replica(&config, &env, &[]), replica(&config, &env, &[]));
    let mut ea = Envoy::connect(a.grpc_url()).await.unwrap();
    let mut eb = Envoy::connect(b.grpc_url()).await.unwrap();

    // Alone, A has the whole limit. B's Envoy joins: its fair share is half, but A
    // holds everything until its next report, so B starts with nothing.
    assert_eq!(ea.ask("quota", ALICE, 1, 0).await, Some(20));
    assert_eq!(eb.ask("quota", ALICE, 1, 0).await, Some(0));
    // A's Envoy admitted 1 in 5 s (12 a minute, 18 with headroom): A comes down to
    // its fair share, 10, and B, reporting 10 in 5 s, takes the other 10.
    assert_eq!(ea.ask("quota", ALICE, 1, 5).await, Some(10));
    assert_eq!(eb.ask("quota", ALICE, 10, 5).await, Some(10));
    // A's Envoy goes quiet: it keeps a token, and B gets the rest once A gave it up.
    assert_eq!(ea.ask("quota", ALICE, 0, 5).await, Some(1));
    assert_eq!(eb.ask("quota", ALICE, 10, 5).await, Some(19));

    // A's Envoy leaves: A gives its lease back, and B gets the whole limit.
    drop(ea);
    until_granted(&mut eb, 20).await;

    // A new Envoy on A: nothing until B gives up half, then half.
    let mut ea = Envoy::connect(a.grpc_url()).await.unwrap();
    assert_eq!(ea.ask("quota", ALICE, 1, 0).await, Some(0));
    assert_eq!(eb.ask("quota", ALICE, 10, 5).await, Some(10));
    assert_eq!(ea.ask("quota", ALICE, 1, 0).await, Some(10));

    // A drains on SIGTERM: its Envoy's stream ends with UNAVAILABLE (it would
    // reconnect to B), its lease goes back, and B gets the whole limit.
    a.sigterm();
    let status = ea.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    drop(ea);
    let exit = tokio::task::spawn_blocking(move || a.wait_exit(STARTUP))
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    until_granted(&mut eb, 20).await;
    (config, b, eb)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_a_bucket_through_redis() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let _left = two_replicas_share_a_bucket(single(&redis)).await;
    // One ledger, B's record alone in it, and a time to live on the key (the
    // assignment's, 15 s).
    let mut conn = connection(redis.url()).await;
    let ledger: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(alice_ledger())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(alice_ledger())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(0 < ttl && ttl <= 15_000, "{ttl}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys, vec![alice_ledger()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_a_bucket_on_a_redis_cluster() {
    let Some(()) = require_redis() else { return };
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3))
        .await
        .unwrap();
    let urls = cluster
        .urls()
        .iter()
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect::<Vec<_>>()
        .join(",");
    let env = vec![
        ("BACKEND_TYPE", "redis".to_owned()),
        ("REDIS_TYPE", "CLUSTER".to_owned()),
        ("REDIS_URL", urls),
    ];
    let left = two_replicas_share_a_bucket(env).await;
    drop(left);
    drop(cluster);
}

/// `--store-failure error`: a report whose lease Redis cannot renew ends its stream
/// with UNAVAILABLE; the Envoy keeps its assignment until its time to live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_ends_the_stream_under_store_failure_error() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let config = config();
    let rls = replica(&config, &single(&redis), &[]);
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    assert_eq!(envoy.ask("quota", ALICE, 1, 0).await, Some(20));
    let _redis = tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await
    .unwrap();
    envoy.report("quota", ALICE, 1, 5);
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("Redis"), "{status:?}");
    // Other streams are still served, and end the same way while Redis is down.
    let mut other = Envoy::connect(rls.grpc_url()).await.unwrap();
    other.report("quota", ALICE, 1, 0);
    assert_eq!(
        other.answer().await.unwrap_err().code(),
        tonic::Code::Unavailable
    );
}

/// `--store-failure allow`: a bucket keeps the share granted while its lease lives
/// in Redis; a bucket never granted is ALLOW_ALL. (After the record's time to live
/// the share turns ALLOW_ALL too: `a_failing_lease_is_kept_for_its_time_to_live`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_keeps_the_share_or_allows_all_under_store_failure_allow() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let config = config();
    let rls = replica(&config, &single(&redis), &["--store-failure", "allow"]);
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    assert_eq!(envoy.ask("quota", ALICE, 1, 0).await, Some(20));
    let _redis = tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await
    .unwrap();
    assert_eq!(envoy.ask("quota", ALICE, 1, 5).await, Some(20));
    assert_eq!(envoy.ask("quota", &[("user", "bob")], 1, 0).await, None);
    assert!(
        rls.stderr().contains("every request passes"),
        "{}",
        rls.stderr()
    );
}

/// The service in this process on a manual clock: a replica asks Redis again only
/// once the sync interval has passed, and under `allow` keeps a share Redis cannot
/// renew for the lease's time to live, then assigns ALLOW_ALL until Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_lease_is_kept_for_its_time_to_live() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let dir = config();
    let backend = Backend::connect(&BackendOptions {
        failure_mode: FailureMode::Allow,
        deadline: Duration::from_millis(500),
        ..BackendOptions::redis(redis.url())
    })
    .await
    .unwrap();
    let engine = Arc::new(Engine::with_backend(
        Domains::load_dir(dir.path()).unwrap(),
        backend,
    ));
    let clock = ManualClock::new();
    let service = QuotaGrpc::new(engine, QuotaOptions::default()).with_clock(clock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service.clone().into_server())
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let mut envoy = Envoy::connect(url).await.unwrap();
    assert_eq!(envoy.ask("quota", ALICE, 1, 0).await, Some(20));
    assert_eq!(service.leases().map(Leases::len), Some(1));
    // Measured (2 in 5 s): the want moved from everything to 36, so Redis is asked.
    assert_eq!(envoy.ask("quota", ALICE, 2, 5).await, Some(20));

    // Within the sync interval a report is answered from the share held: the ledger,
    // deleted behind the service's back, is not written again.
    let mut conn = connection(redis.url()).await;
    let deleted: i64 = redis::cmd("DEL")
        .arg(alice_ledger())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(envoy.ask("quota", ALICE, 2, 5).await, Some(20));
    let exists = |mut conn: MultiplexedConnection| async move {
        let n: i64 = redis::cmd("EXISTS")
            .arg(alice_ledger())
            .query_async(&mut conn)
            .await
            .unwrap();
        n == 1
    };
    assert!(!exists(conn.clone()).await);
    clock.advance(Duration::from_secs(1));
    assert_eq!(envoy.ask("quota", ALICE, 2, 5).await, Some(20));
    assert!(exists(conn).await);

    // Redis dies: the share is kept while its record lives (the assignment's 15 s
    // and the sync interval's 1 s from the last call), each assignment living only
    // what is left of the record's life; then ALLOW_ALL.
    redis = tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await
    .unwrap();
    let mut kept = async |advance: u64| {
        clock.advance(Duration::from_secs(advance));
        envoy.report("quota", ALICE, 2, 5);
        let (strategy, ttl) = envoy.assignment().await;
        (granted(&strategy), ttl)
    };
    // Within the sync interval, no call: the assignment's whole time to live.
    assert_eq!(kept(0).await, (Some(20), 15));
    // 13 s after the last call, 3 s are left of the record's 16 s.
    assert_eq!(kept(13).await, (Some(20), 3));
    assert_eq!(kept(2).await, (Some(20), 1));
    assert_eq!(kept(1).await, (None, 15));

    // Redis is back (empty): the lease is taken again at the next report.
    let _redis = tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await
    .unwrap();
    let deadline = Instant::now() + GIVE_BACK;
    while envoy.ask("quota", ALICE, 2, 5).await != Some(20) {
        assert!(Instant::now() < deadline, "the lease was not taken again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Draining gives the lease back and ends the stream.
    assert_eq!(service.drain().await, 1);
    assert_eq!(
        envoy.answer().await.unwrap_err().code(),
        tonic::Code::Unavailable
    );
}

/// Random calls of the lease script against its Rust reference, `fleet::Ledger`:
/// the same grants, targets and live counts; expired and malformed records dropped;
/// a take under a live id refused; the key's time to live that of its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_script_decides_as_the_rust_ledger() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let mut conn = connection(redis.url()).await;
    let script = redis::Script::new(Leases::script_source());
    const TTL: u64 = 3_600_000;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for (case, limit) in [0, 1, 7, 20, 1_000, 1 << 40, MAX_TOKENS, u64::MAX]
        .into_iter()
        .enumerate()
    {
        let key = format!("t:rlqs:{case}");
        let mut model = Ledger::default();
        for _ in 0..300 {
            let id = next(5) * 0x0101_0101_0101 + 1;
            let field = format!("{id:016x}");
            if next(8) == 0 {
                let gone: i64 = script
                    .key(&key)
                    .arg("give_back")
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(gone == 1, model.give_back(id));
                continue;
            }
            let want = match next(3) {
                0 => Want::Unbounded,
                _ => Want::Tokens(next(limit.clamp(1, 1 << 20) * 3)),
            };
            let take = next(4) == 0;
            let reply: Vec<i64> = script
                .key(&key)
                .arg(if take { "take" } else { "renew" })
                .arg(&field)
                .arg(limit.to_string())
                .arg(want.to_arg())
                .arg(TTL.to_string())
                .invoke_async(&mut conn)
                .await
                .unwrap();
            match model.sync(0, id, take, limit, want, TTL) {
                Ok(s) => assert_eq!(
                    reply,
                    vec![1, s.granted as i64, s.target as i64, s.live as i64],
                    "limit {limit}, id {id}, {want:?}"
                ),
                Err(_) => assert_eq!(reply[0], -1),
            }
            assert!(model.granted() <= limit.min(MAX_TOKENS));
        }
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            model.entries.is_empty() || (0 < ttl && ttl <= TTL as i64),
            "{ttl}"
        );
    }

    // An expired record and one that is not a record go; their grants free.
    let key = "t:rlqs:expired";
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(format!("{:016x}", 7))
        .arg("inf 100 1")
        .arg("junk")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let reply: Vec<i64> = script
        .key(key)
        .arg("take")
        .arg(format!("{:016x}", 8))
        .arg("100")
        .arg("inf")
        .arg("15000")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(reply, vec![1, 100, 100, 1]);
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(fields, vec![format!("{:016x}", 8)]);
    // Bad arguments are an error, not a record.
    let bad: redis::RedisResult<Vec<i64>> = script
        .key(key)
        .arg("renew")
        .arg(format!("{:016x}", 8))
        .arg("x")
        .arg("inf")
        .arg("15000")
        .invoke_async(&mut conn)
        .await;
    assert!(bad.is_err(), "{bad:?}");
}
