//! The backend on real `redis-server` processes: one server and a 3-master Cluster,
//! counting under the key prefix; with Redis killed, `error` fails the call and `allow`
//! admits it, and counting resumes once Redis is back.

#[allow(dead_code, clippy::collapsible_if)]
#[path = "../../tests/common/redis.rs"]
mod redis_harness;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis_harness::{RedisCluster, RedisServer, require_redis};
use tollgate::algorithm::FixedWindow;
use tollgate::store::{Check, Op, Request, Rule, Store, StoreError};
use tollgate_rls::backend::{Backend, BackendOptions, FailureMode};

fn per_minute(n: u64) -> Rule {
    Rule::from(FixedWindow::new(n, Duration::from_secs(60)).unwrap())
}

async fn acquire(store: &dyn Store, tag: &str, rule: &Rule) -> Result<bool, StoreError> {
    let checks = [Check::new("k_v", rule)];
    let reply = store
        .execute(&Request::new(tag, &checks, Op::Acquire(1)))
        .await?;
    Ok(reply.is_admitted())
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_counts_under_the_key_prefix() {
    let Some(()) = require_redis() else { return };
    let server = RedisServer::start();
    let options = BackendOptions {
        key_prefix: "rls-test".into(),
        ..BackendOptions::redis(server.url())
    };
    let backend = Backend::connect(&options).await.unwrap();
    let rule = per_minute(2);
    let store = backend.store().as_ref();
    assert!(acquire(store, "api", &rule).await.unwrap());
    assert!(acquire(store, "api", &rule).await.unwrap());
    assert!(!acquire(store, "api", &rule).await.unwrap());
    // Another tag counts on its own.
    assert!(acquire(store, "web", &rule).await.unwrap());

    let client = redis::Client::open(server.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = connection.keys("*").await.unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.iter().all(|k| k.starts_with("rls-test:{")), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_cluster_counts_every_tag_exactly() {
    let Some(()) = require_redis() else { return };
    let cluster = RedisCluster::start(3);
    let backend = Backend::connect(&BackendOptions::redis_cluster(cluster.urls()))
        .await
        .unwrap();
    let rule = per_minute(3);
    let store = backend.store().as_ref();
    // Enough tags to land on every master.
    for tag in 0..30 {
        let tag = format!("domain-{tag}");
        for _ in 0..3 {
            assert!(acquire(store, &tag, &rule).await.unwrap(), "{tag}");
        }
        assert!(!acquire(store, &tag, &rule).await.unwrap(), "{tag}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn error_mode_fails_the_call_when_redis_dies() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let backend = Backend::connect(&BackendOptions::redis(server.url()))
        .await
        .unwrap();
    let rule = per_minute(5);
    assert!(
        acquire(backend.store().as_ref(), "api", &rule)
            .await
            .unwrap()
    );
    server.kill();
    let result = acquire(backend.store().as_ref(), "api", &rule).await;
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_mode_admits_while_redis_is_down_and_counts_again_after() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let options = BackendOptions {
        failure_mode: FailureMode::Allow,
        deadline: Duration::from_millis(500),
        ..BackendOptions::redis(server.url())
    };
    let backend = Backend::connect(&options).await.unwrap();
    let store = backend.store().as_ref();
    let rule = per_minute(1);
    assert!(acquire(store, "api", &rule).await.unwrap());
    assert!(!acquire(store, "api", &rule).await.unwrap());

    server.kill();
    // Over the limit, yet admitted: Redis cannot say.
    for _ in 0..10 {
        assert!(acquire(store, "api", &rule).await.unwrap());
    }

    server.restart();
    // The breaker lets a probe through after its cool-down; then the limit holds again
    // (the restarted server is empty: its first acquire is admitted).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let first = acquire(store, "fresh", &rule).await.unwrap();
        let second = acquire(store, "fresh", &rule).await.unwrap();
        if first && !second {
            break;
        }
        assert!(Instant::now() < deadline, "Redis was not used again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_redis_fails_at_start_whatever_the_mode() {
    let Some(()) = require_redis() else { return };
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    for failure_mode in [FailureMode::Error, FailureMode::Allow] {
        let options = BackendOptions {
            failure_mode,
            ..BackendOptions::redis(url.clone())
        };
        let result = Backend::connect(&options).await;
        assert!(
            matches!(result, Err(StoreError::Connection(_))),
            "{result:?}"
        );
    }
}
