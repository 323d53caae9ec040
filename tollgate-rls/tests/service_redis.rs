//! The service binary over Redis and Redis Cluster, started on loopback ports with its
//! own servers: the Go service's answers, the counts shared by two service processes,
//! and what a failing Redis does under each `--store-failure`.

mod common;

#[path = "../../tests/common/redis.rs"]
#[allow(dead_code, clippy::collapsible_if)]
mod redis_harness;

use std::time::Duration;

use common::{Rls, command, http, rules};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use redis_harness::{RedisCluster, RedisServer, require_redis};
use tonic::transport::Channel;

fn request(value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "shop".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: value.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

async fn client(rls: &Rls) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(rls.grpc_url())
        .await
        .unwrap()
}

fn config() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("shop.yaml"),
        rules("shop", "user", 20, "minute"),
    )
    .unwrap();
    dir
}

fn start(config: &tempfile::TempDir, env: &[(&str, String)]) -> Rls {
    let mut cmd = command(&["--config", config.path().to_str().unwrap()]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Rls::spawn(cmd)
}

/// 20 a minute through two processes sharing one Redis: the remaining counts down
/// across both, and the 21st is over, as the Go service's integration test expects of
/// one.
async fn twenty_a_minute_shared(env: Vec<(&'static str, String)>, value: &str) {
    let config = config();
    let (a, b) = (start(&config, &env), start(&config, &env));
    let (mut ca, mut cb) = (client(&a).await, client(&b).await);
    for i in 0..20u32 {
        let c = if i % 2 == 0 { &mut ca } else { &mut cb };
        let answer = c
            .should_rate_limit(request(value))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::Ok as i32, "request {i}");
        assert_eq!(
            answer.statuses[0].limit_remaining,
            20 - (i + 1),
            "request {i}"
        );
    }
    for c in [&mut ca, &mut cb] {
        let answer = c
            .should_rate_limit(request(value))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::OverLimit as i32);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_counts_across_processes() {
    let Some(()) = require_redis() else { return };
    let redis = RedisServer::start();
    let env = vec![
        ("BACKEND_TYPE", "redis".to_owned()),
        ("REDIS_TYPE", "SINGLE".to_owned()),
        ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
    ];
    twenty_a_minute_shared(env, "ann").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_cluster_counts_across_processes() {
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
    twenty_a_minute_shared(env, "bob").await;
    drop(cluster);
}

/// `--store-failure error` (the Go service): a call Redis cannot answer fails with
/// gRPC UNKNOWN, and counts `call.should_rate_limit.redis_error`; Envoy's
/// `failure_mode_deny` then decides.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_redis_fails_the_call_and_counts_a_redis_error() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let config = config();
    let rls = start(
        &config,
        &[
            ("BACKEND_TYPE", "redis".to_owned()),
            ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
            ("REDIS_TIMEOUT", "500ms".to_owned()),
        ],
    );
    let mut c = client(&rls).await;
    assert!(c.should_rate_limit(request("cy")).await.is_ok());
    tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await
    .unwrap();
    let status = c.should_rate_limit(request("cy")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown, "{status:?}");
    let metrics = http(rls.http, "GET", "/metrics", "");
    assert!(
        metrics
            .body
            .contains("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 1"),
        "{}",
        metrics.body
    );
}

/// `--store-failure allow`: tollgate's `Resilient` fail-open answers OK while Redis is
/// down, and limits again once it is back.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_redis_fails_open_with_store_failure_allow() {
    let Some(()) = require_redis() else { return };
    let mut redis = RedisServer::start();
    let config = config();
    let mut cmd = command(&[
        "--config",
        config.path().to_str().unwrap(),
        "--store-failure",
        "allow",
    ]);
    cmd.env("BACKEND_TYPE", "redis")
        .env("REDIS_URL", format!("127.0.0.1:{}", redis.port()))
        .env("REDIS_TIMEOUT", "500ms");
    let rls = Rls::spawn(cmd);
    let mut c = client(&rls).await;
    assert!(c.should_rate_limit(request("dee")).await.is_ok());
    let mut redis = tokio::task::spawn_blocking(move || {
        redis.kill();
        redis
    })
    .await
    .unwrap();
    for _ in 0..25 {
        let answer = c
            .should_rate_limit(request("dee"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::Ok as i32);
    }
    let redis = tokio::task::spawn_blocking(move || {
        redis.restart();
        redis
    })
    .await
    .unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", redis.port())).is_ok(),
        "redis-server is back on its port"
    );
    // Back: once the store is probed again, the count starts in the empty server and
    // limits (a deadline, not a timing assertion: the breaker's probe comes when it
    // comes).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut over = false;
    while !over && std::time::Instant::now() < deadline {
        let answer = c
            .should_rate_limit(request("dee"))
            .await
            .unwrap()
            .into_inner();
        over = answer.overall_code == Code::OverLimit as i32;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let log = rls.stderr();
    assert!(
        over,
        "Redis back, the limit applies again; stderr ends:\n{}",
        &log[log.len().saturating_sub(1500)..]
    );
}

/// `REDIS_PERSECOND`: limits of a second count in a Redis of their own, the others in
/// the main one, as the Go service splits them.
#[tokio::test(flavor = "multi_thread")]
async fn per_second_limits_count_in_their_own_redis() {
    let Some(()) = require_redis() else { return };
    let (main, per_second) = (RedisServer::start(), RedisServer::start());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("shop.yaml"),
        "domain: shop\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 20 }\n  - key: burst\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    )
    .unwrap();
    let mut cmd = command(&["--config", dir.path().to_str().unwrap()]);
    cmd.env("BACKEND_TYPE", "redis")
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{}", main.port()))
        .env("REDIS_PERSECOND", "true")
        .env(
            "REDIS_PERSECOND_URL",
            format!("127.0.0.1:{}", per_second.port()),
        );
    let rls = Rls::spawn(cmd);
    let mut c = client(&rls).await;
    let mut both = request("eve");
    both.descriptors.push(RateLimitDescriptor {
        entries: vec![Entry {
            key: "burst".into(),
            value: "eve".into(),
        }],
        ..Default::default()
    });
    let answer = c.should_rate_limit(both).await.unwrap().into_inner();
    assert_eq!(answer.overall_code, Code::Ok as i32);
    assert_eq!(answer.statuses[0].limit_remaining, 19);
    assert_eq!(answer.statuses[1].limit_remaining, 4);
    let keys = |url: String| async move {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .unwrap();
        keys
    };
    let (in_main, in_per_second) = (keys(main.url()).await, keys(per_second.url()).await);
    assert!(
        in_main.iter().all(|k| k.contains("user=eve")) && in_main.len() == 1,
        "{in_main:?}"
    );
    assert!(
        in_per_second.iter().all(|k| k.contains("burst=eve")) && in_per_second.len() == 1,
        "{in_per_second:?}"
    );
}
