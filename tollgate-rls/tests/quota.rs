//! Envoy's Rate Limit Quota Service on the running binary, asked over gRPC streams as
//! Envoy's `rate_limit_quota` filter asks it: a report per bucket, then an assignment.

mod common;

use common::Rls;
use common::rlqs::{Envoy, tokens};
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

const CONFIG: &str = "\
domain: quota
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: blocked
    rate_limit: { unit: second, requests_per_unit: 0 }
  - key: free
    rate_limit: { unlimited: true }
";

fn start() -> (tempfile::TempDir, Rls) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quota.yaml"), CONFIG).unwrap();
    let rls = Rls::start(dir.path(), &[]);
    (dir, rls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoys_share_a_bucket_and_get_it_back() {
    let (_dir, rls) = start();
    let mut a = Envoy::connect(rls.grpc_url()).await.unwrap();
    a.report("quota", &[("user", "alice")], 1, 0);
    let (strategy, ttl) = a.assignment().await;
    assert_eq!(
        tokens(&strategy),
        Ok((20, 20, 60)),
        "the whole limit, per minute"
    );
    assert_eq!(ttl, 15);

    // A second Envoy reports the same bucket: each gets half, the first without asking.
    let mut b = Envoy::connect(rls.grpc_url()).await.unwrap();
    b.report("quota", &[("user", "alice")], 1, 0);
    assert_eq!(tokens(&b.assignment().await.0), Ok((10, 10, 60)));
    assert_eq!(tokens(&a.assignment().await.0), Ok((10, 10, 60)));

    // The first Envoy reports no request in 5 s: it keeps a token, the second the rest.
    a.report("quota", &[("user", "alice")], 0, 5);
    assert_eq!(tokens(&a.assignment().await.0), Ok((1, 1, 60)));
    assert_eq!(tokens(&b.assignment().await.0), Ok((19, 19, 60)));

    // The second leaves: the first has the whole limit again.
    drop(b);
    assert_eq!(tokens(&a.assignment().await.0), Ok((20, 20, 60)));

    // Another bucket of the same stream is its own: a different user.
    a.report("quota", &[("user", "bob")], 1, 0);
    assert_eq!(tokens(&a.assignment().await.0), Ok((20, 20, 60)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_unlimited_and_blocked_buckets() {
    let (_dir, rls) = start();
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    for (pairs, expected) in [
        (&[("free", "x")][..], BlanketRule::AllowAll),
        (&[("nobody", "x")][..], BlanketRule::AllowAll),
        (&[("blocked", "x")][..], BlanketRule::DenyAll),
    ] {
        envoy.report("quota", pairs, 1, 0);
        assert_eq!(
            tokens(&envoy.assignment().await.0),
            Err(expected),
            "{pairs:?}"
        );
    }
    // A report that leaves the domain out is of the domain last named (Envoy names it
    // in the first report only, or in every one).
    envoy.report("", &[("user", "carol")], 1, 0);
    assert_eq!(tokens(&envoy.assignment().await.0), Ok((20, 20, 60)));
    // A domain the files do not have: every request passes, as for ShouldRateLimit.
    envoy.report("elsewhere", &[("user", "alice")], 1, 0);
    assert_eq!(
        tokens(&envoy.assignment().await.0),
        Err(BlanketRule::AllowAll)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reports_end_the_stream_with_invalid_argument() {
    let (_dir, rls) = start();
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    envoy.report("", &[("user", "alice")], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("domain"), "{status:?}");

    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    envoy.report("quota", &[], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("no pairs"), "{status:?}");

    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    envoy.report("quota", &[("user", "")], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert!(
        status.message().contains("empty key or value"),
        "{status:?}"
    );

    // The service still answers others.
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    envoy.report("quota", &[("user", "alice")], 1, 0);
    assert_eq!(tokens(&envoy.assignment().await.0), Ok((20, 20, 60)));
}

/// SIGTERM: every quota stream ends with UNAVAILABLE, so that its Envoy reconnects to
/// a replica still serving, and the service exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_quota_streams_with_unavailable() {
    let (_dir, mut rls) = start();
    let mut envoy = Envoy::connect(rls.grpc_url()).await.unwrap();
    envoy.report("quota", &[("user", "alice")], 1, 0);
    assert_eq!(tokens(&envoy.assignment().await.0), Ok((20, 20, 60)));
    rls.sigterm();
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("draining"), "{status:?}");
    drop(envoy);
    let exit = tokio::task::spawn_blocking(move || rls.wait_exit(common::STARTUP))
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
