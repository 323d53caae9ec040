//! The running binary as a client tollgate did not write sees it: Python's `grpcio`,
//! with the Envoy stubs the gRPC project generates from Envoy's protos (`xds-protos`),
//! runs tests/python/rls_grpcio_test.py against it: `ShouldRateLimit`, and the rate
//! limit quota service's streams.
//!
//! Needs `python3 -m pip install grpcio xds-protos` (`.ci/run` installs both). Without
//! them the test says so and passes, except with `CI=true`, where it fails.

use std::process::Command;

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
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/rls_grpcio_test.py"
    );
    let output = Command::new(&python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_tollgate-rls"))
        .output()
        .expect("run python");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "grpcio client failed:\n{report}");
    assert!(report.contains("OK"), "{report}");
}
