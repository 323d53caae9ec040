//! The running binary as a client tollgate did not write sees it: Python's `grpcio`,
//! with the Envoy stubs the gRPC project generates from Envoy's protos (`xds-protos`),
//! runs tests/python/rls_grpcio_test.py against it: `ShouldRateLimit`, and the rate
//! limit quota service's streams, in memory and over a redis-server this test starts
//! (two replicas sharing a bucket through their leases).
//!
//! Needs `python3 -m pip install grpcio xds-protos` (`.ci/run` installs both) and
//! `redis-server`. Without them the test says so and passes, except with `CI=true`,
//! where it fails.

#[path = "../../tests/common/redis.rs"]
#[allow(dead_code, clippy::collapsible_if)]
mod redis_harness;

use std::process::Command;

use redis_harness::{RedisServer, require_redis};

#[test]
fn a_python_grpcio_client_gets_the_go_services_answers() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ready = Command::new(&python)
        .args([
            "-c",
            "import grpc, envoy.service.ratelimit.v3.rls_pb2_grpc, \
             envoy.service.rate_limit_quota.v3.rlqs_pb2_grpc",
        ])
        .output();
    if !ready.is_ok_and(|o| o.status.success()) {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(
            !ci,
            "CI=true: {python} with grpcio and xds-protos is required (pip install grpcio xds-protos)"
        );
        eprintln!("skipped: {python} lacks grpcio or xds-protos (pip install grpcio xds-protos)");
        return;
    }
    // The Redis cases need a server (with CI=true, `require_redis` fails without one).
    let redis = require_redis().map(|()| RedisServer::start());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/rls_grpcio_test.py"
    );
    let mut command = Command::new(&python);
    command.arg(script).arg(env!("CARGO_BIN_EXE_tollgate-rls"));
    match &redis {
        Some(redis) => command.env("TOLLGATE_TEST_REDIS", format!("127.0.0.1:{}", redis.port())),
        None => command.env_remove("TOLLGATE_TEST_REDIS"),
    };
    let output = command.output().expect("run python");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "grpcio client failed:\n{report}");
    assert!(report.contains("OK"), "{report}");
    if redis.is_some() {
        assert!(
            report.contains("test_two_replicas_share_a_bucket_through_redis")
                && !report.contains("skipped"),
            "{report}"
        );
    }
}
