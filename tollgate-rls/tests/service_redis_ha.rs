//! The service binary over Redis as managed services run it: over TLS with an ACL user
//! whose password a URL must escape (`REDIS_TLS`, `REDIS_TLS_CACERT`, `REDIS_AUTH`),
//! and through Sentinels (`REDIS_TYPE=SENTINEL`, `REDIS_URL=master,sentinel,…`).

mod common;

#[path = "../../tests/common/redis.rs"]
#[allow(dead_code, clippy::collapsible_if)]
mod redis;
#[path = "../../tests/common/tls.rs"]
#[allow(dead_code)]
mod tls;

use self::redis::{RedisSentinels, RedisServer, require_redis};
use self::tls::TestCertificates;
use common::{Rls, command, rules};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

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

fn start(config: &tempfile::TempDir, env: &[(&str, String)]) -> Rls {
    let mut cmd = command(&["--config", config.path().to_str().unwrap()]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Rls::spawn(cmd)
}

/// 5 a minute: five answered OK with the remaining counting down, the sixth over.
async fn five_a_minute(env: &[(&str, String)]) {
    let config = tempfile::tempdir().unwrap();
    std::fs::write(
        config.path().join("shop.yaml"),
        rules("shop", "user", 5, "minute"),
    )
    .unwrap();
    let rls = start(&config, env);
    let mut client = RateLimitServiceClient::connect(rls.grpc_url())
        .await
        .unwrap();
    for i in 0..5u32 {
        let answer = client
            .should_rate_limit(request("ann"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::Ok as i32, "request {i}");
        assert_eq!(answer.statuses[0].limit_remaining, 4 - i, "request {i}");
    }
    let answer = client
        .should_rate_limit(request("ann"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, Code::OverLimit as i32);
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_over_tls_with_an_acl_user() {
    let Some(()) = require_redis() else { return };
    let certificates = TestCertificates::new();
    let password = "p@ss:w/rd#1";
    let redis = RedisServer::start_tls(&certificates.files, Some(("alice", password)));
    five_a_minute(&[
        ("BACKEND_TYPE", "redis".to_owned()),
        ("REDIS_SOCKET_TYPE", "tcp".to_owned()),
        ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
        ("REDIS_TLS", "true".to_owned()),
        (
            "REDIS_TLS_CACERT",
            certificates.files.ca.display().to_string(),
        ),
        ("REDIS_AUTH", format!("alice:{password}")),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_through_sentinels() {
    let Some(()) = require_redis() else { return };
    let group = tokio::task::spawn_blocking(|| RedisSentinels::start("rls", 3))
        .await
        .unwrap();
    let sentinels: Vec<String> = group
        .sentinel_urls()
        .iter()
        .map(|u| {
            u.trim_start_matches("redis://")
                .trim_end_matches('/')
                .to_owned()
        })
        .collect();
    five_a_minute(&[
        ("BACKEND_TYPE", "redis".to_owned()),
        ("REDIS_TYPE", "SENTINEL".to_owned()),
        ("REDIS_URL", format!("rls,{}", sentinels.join(","))),
    ])
    .await;
    drop(group);
}
