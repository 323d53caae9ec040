//! Envoy's Rate Limit Quota Service on the running binary, asked over gRPC streams as
//! Envoy's `rate_limit_quota` filter asks it: a report per bucket, then an assignment.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::Rls;
use envoy_types::pb::envoy::r#type::v3::RateLimitStrategy;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tokio::sync::mpsc;
use tonic::Streaming;

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

/// How long a test waits for an answer it expects.
const ANSWER: Duration = Duration::from_secs(10);

/// One Envoy's stream.
struct Envoy {
    reports: mpsc::UnboundedSender<RateLimitQuotaUsageReports>,
    answers: Streaming<RateLimitQuotaResponse>,
}

impl Envoy {
    async fn connect(rls: &Rls) -> Result<Envoy, tonic::Status> {
        let mut client = RateLimitQuotaServiceClient::connect(rls.grpc_url())
            .await
            .unwrap();
        let (reports, mut outbound) = mpsc::unbounded_channel();
        let outbound = futures_util::stream::poll_fn(move |cx| outbound.poll_recv(cx));
        let answers = client
            .stream_rate_limit_quotas(outbound)
            .await?
            .into_inner();
        Ok(Envoy { reports, answers })
    }

    fn report(&self, domain: &str, pairs: &[(&str, &str)], allowed: u64, seconds: i64) {
        let bucket: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.reports
            .send(RateLimitQuotaUsageReports {
                domain: domain.to_owned(),
                bucket_quota_usages: vec![BucketQuotaUsage {
                    bucket_id: Some(BucketId { bucket }),
                    time_elapsed: Some(PbDuration { seconds, nanos: 0 }),
                    num_requests_allowed: allowed,
                    num_requests_denied: 0,
                }],
            })
            .unwrap();
    }

    async fn answer(&mut self) -> Result<RateLimitQuotaResponse, tonic::Status> {
        match tokio::time::timeout(ANSWER, self.answers.message()).await {
            Ok(Ok(Some(answer))) => Ok(answer),
            Ok(Ok(None)) => panic!("the stream ended"),
            Ok(Err(status)) => Err(status),
            Err(_) => panic!("no answer within {ANSWER:?}"),
        }
    }

    /// The one assignment of the next answer: its strategy and time to live.
    async fn assignment(&mut self) -> (RateLimitStrategy, i64) {
        let answer = self.answer().await.unwrap();
        assert_eq!(answer.bucket_action.len(), 1, "{answer:?}");
        match answer.bucket_action[0].bucket_action {
            Some(BucketAction::QuotaAssignmentAction(a)) => (
                a.rate_limit_strategy.unwrap(),
                a.assignment_time_to_live.unwrap().seconds,
            ),
            ref other => panic!("not an assignment: {other:?}"),
        }
    }
}

/// A token bucket's tokens and fill interval, or the blanket rule.
fn tokens(strategy: &RateLimitStrategy) -> Result<(u32, u32, i64), BlanketRule> {
    match strategy.strategy.as_ref().unwrap() {
        Strategy::TokenBucket(b) => Ok((
            b.max_tokens,
            b.tokens_per_fill.unwrap().value,
            b.fill_interval.unwrap().seconds,
        )),
        Strategy::BlanketRule(rule) => Err(BlanketRule::try_from(*rule).unwrap()),
        other => panic!("{other:?}"),
    }
}

fn start() -> (tempfile::TempDir, Rls) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quota.yaml"), CONFIG).unwrap();
    let rls = Rls::start(dir.path(), &[]);
    (dir, rls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoys_share_a_bucket_and_get_it_back() {
    let (_dir, rls) = start();
    let mut a = Envoy::connect(&rls).await.unwrap();
    a.report("quota", &[("user", "alice")], 1, 0);
    let (strategy, ttl) = a.assignment().await;
    assert_eq!(
        tokens(&strategy),
        Ok((20, 20, 60)),
        "the whole limit, per minute"
    );
    assert_eq!(ttl, 15);

    // A second Envoy reports the same bucket: each gets half, the first without asking.
    let mut b = Envoy::connect(&rls).await.unwrap();
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
    let mut envoy = Envoy::connect(&rls).await.unwrap();
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
    let mut envoy = Envoy::connect(&rls).await.unwrap();
    envoy.report("", &[("user", "alice")], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("domain"), "{status:?}");

    let mut envoy = Envoy::connect(&rls).await.unwrap();
    envoy.report("quota", &[], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("no pairs"), "{status:?}");

    let mut envoy = Envoy::connect(&rls).await.unwrap();
    envoy.report("quota", &[("user", "")], 1, 0);
    let status = envoy.answer().await.unwrap_err();
    assert!(
        status.message().contains("empty key or value"),
        "{status:?}"
    );

    // The service still answers others.
    let mut envoy = Envoy::connect(&rls).await.unwrap();
    envoy.report("quota", &[("user", "alice")], 1, 0);
    assert_eq!(tokens(&envoy.assignment().await.0), Ok((20, 20, 60)));
}
