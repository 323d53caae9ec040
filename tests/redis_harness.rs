//! The Redis test harness against real servers: start, serve, crash, restart, refuse,
//! authenticate, and a 3-master Cluster.

mod common;

use std::time::{Duration, Instant};

use common::redis::{RedisCluster, RedisServer, require_binaries, require_redis};
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::{AsyncCommands, AsyncConnectionConfig, Client, ErrorKind, RedisResult};

/// Bounds every client step, so a hang fails the test instead of stalling it.
const STEP: Duration = Duration::from_secs(2);

async fn connect(url: &str) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_millis(500)));
    let client = Client::open(url)?;
    tokio::time::timeout(
        STEP,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .expect("connecting hung past its timeout")
}

#[tokio::test]
async fn server_sets_and_gets_over_a_multiplexed_connection() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    assert_ne!(server.port(), 6379, "must not use the shared instance");
    let mut conn = connect(&server.url()).await.unwrap();
    let () = conn.set("greeting", "hello").await.unwrap();
    let value: String = conn.get("greeting").await.unwrap();
    assert_eq!(value, "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_server_drops_and_refuses_connections_then_restarts_empty_on_its_port() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let port = server.port();
    let mut conn = connect(&server.url()).await.unwrap();
    let () = conn.set("key", 1).await.unwrap();

    server.kill();
    assert!(!server.is_running());
    let started = Instant::now();
    let on_dead: RedisResult<Option<i64>> = tokio::time::timeout(STEP, conn.get("key"))
        .await
        .expect("a command on a dropped connection hung");
    assert!(on_dead.is_err(), "a killed server answered: {on_dead:?}");
    let refused = connect(&server.url()).await.unwrap_err();
    assert!(refused.is_connection_refusal(), "{refused:?}");
    assert!(started.elapsed() < STEP, "took {:?}", started.elapsed());

    server.restart();
    assert_eq!(server.port(), port);
    let mut conn = connect(&server.url()).await.unwrap();
    let lost: Option<i64> = conn.get("key").await.unwrap();
    assert_eq!(lost, None, "nothing is persisted across a restart");
    let () = conn.set("key", 2).await.unwrap();
    assert_eq!(conn.get::<_, i64>("key").await.unwrap(), 2);
}

#[tokio::test]
async fn wrong_password_is_an_authentication_error_and_the_right_one_connects() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start_with_password("s3cret/pw");
    let wrong = format!("redis://:nope@127.0.0.1:{}/", server.port());
    let err = connect(&wrong).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AuthenticationFailed, "{err:?}");
    let mut conn = connect(&server.url()).await.unwrap();
    let () = conn.set("k", "v").await.unwrap();
    assert_eq!(conn.get::<_, String>("k").await.unwrap(), "v");
}

#[tokio::test]
async fn cluster_serves_keys_sharing_a_hash_tag_together() {
    let Some(()) = require_redis() else { return };
    let cluster = RedisCluster::start(3);
    let client = ClusterClient::builder(cluster.urls())
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut conn = tokio::time::timeout(STEP, client.get_async_connection())
        .await
        .expect("connecting to the cluster hung")
        .unwrap();
    let () = conn.set("{user:7}:tokens", 10).await.unwrap();
    let () = conn.set("{user:7}:stamp", 20).await.unwrap();
    // A multi-key command is refused across slots (CROSSSLOT): the tag keeps them in one.
    let both: Vec<i64> = conn
        .mget(&["{user:7}:tokens", "{user:7}:stamp"])
        .await
        .unwrap();
    assert_eq!(both, [10, 20]);
}

#[test]
fn missing_redis_is_skipped_outside_ci() {
    assert_eq!(
        require_binaries(&["tollgate-no-such-redis-server"], false),
        None
    );
}

#[test]
fn present_binaries_are_required_without_panicking_in_ci() {
    // The cargo that built this test exists whether or not Redis is installed.
    assert_eq!(require_binaries(&[env!("CARGO")], true), Some(()));
}

#[test]
#[should_panic(expected = "tollgate-no-such-redis-server not found; install it \
                           (apt-get install -y redis-server)")]
fn missing_redis_fails_the_run_in_ci() {
    require_binaries(&["tollgate-no-such-redis-server"], true);
}
