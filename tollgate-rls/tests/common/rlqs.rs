//! An Envoy's side of the rate limit quota service: one stream, reports sent as
//! Envoy's `rate_limit_quota` filter sends them, assignments read back.

use std::collections::HashMap;
use std::time::Duration;

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

/// How long a test waits for an answer it expects.
pub const ANSWER: Duration = Duration::from_secs(10);

/// One Envoy's stream.
pub struct Envoy {
    reports: mpsc::UnboundedSender<RateLimitQuotaUsageReports>,
    answers: Streaming<RateLimitQuotaResponse>,
}

impl Envoy {
    /// Opens a stream to the service at `url` (`http://host:port`).
    pub async fn connect(url: String) -> Result<Envoy, tonic::Status> {
        let mut client = RateLimitQuotaServiceClient::connect(url).await.unwrap();
        let (reports, mut outbound) = mpsc::unbounded_channel();
        let outbound = futures_util::stream::poll_fn(move |cx| outbound.poll_recv(cx));
        let answers = client
            .stream_rate_limit_quotas(outbound)
            .await?
            .into_inner();
        Ok(Envoy { reports, answers })
    }

    /// Reports one bucket: `allowed` requests in the last `seconds`.
    pub fn report(&self, domain: &str, pairs: &[(&str, &str)], allowed: u64, seconds: i64) {
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

    /// The next answer, or the status the stream ended with.
    pub async fn answer(&mut self) -> Result<RateLimitQuotaResponse, tonic::Status> {
        match tokio::time::timeout(ANSWER, self.answers.message()).await {
            Ok(Ok(Some(answer))) => Ok(answer),
            Ok(Ok(None)) => panic!("the stream ended"),
            Ok(Err(status)) => Err(status),
            Err(_) => panic!("no answer within {ANSWER:?}"),
        }
    }

    /// The one assignment of the next answer: its strategy and time to live.
    pub async fn assignment(&mut self) -> (RateLimitStrategy, i64) {
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

    /// Reports and reads the assignment: the tokens it grants (0 for `DENY_ALL`,
    /// `None` for `ALLOW_ALL`).
    pub async fn ask(
        &mut self,
        domain: &str,
        pairs: &[(&str, &str)],
        allowed: u64,
        seconds: i64,
    ) -> Option<u32> {
        self.report(domain, pairs, allowed, seconds);
        granted(&self.assignment().await.0)
    }
}

/// A token bucket's tokens and fill interval, or the blanket rule.
pub fn tokens(strategy: &RateLimitStrategy) -> Result<(u32, u32, i64), BlanketRule> {
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

/// The tokens a strategy grants per fill: 0 for `DENY_ALL`, `None` for `ALLOW_ALL`.
pub fn granted(strategy: &RateLimitStrategy) -> Option<u32> {
    match tokens(strategy) {
        Ok((max, per_fill, _)) => {
            assert_eq!(max, per_fill, "a bucket refilled whole each unit");
            Some(max)
        }
        Err(BlanketRule::DenyAll) => Some(0),
        Err(BlanketRule::AllowAll) => None,
    }
}
