//! Envoy's Rate Limit Quota Service (RLQS):
//! `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas`.
//!
//! With RLQS, Envoy decides every request itself, from a quota the service assigns
//! it, and reports what it admitted and refused; no call is made per request. Each
//! Envoy keeps one stream open per domain and reports each bucket (a map of
//! strings its `bucket_id_builder` makes from the request) when it first sees it and
//! then every few seconds. The service answers each report with an assignment for
//! every bucket reported, and pushes new ones to the other Envoys of a bucket when
//! its shares move.
//!
//! **Which limit.** A bucket is looked up in the same domain files as
//! `ShouldRateLimit`'s descriptors: its pairs, sorted by key, are one descriptor of
//! the stream's domain. `requests_per_unit` per unit is then the quota of all the
//! Envoys reporting that bucket together. A bucket that no limit matches, an
//! `unlimited` one and one in shadow mode are allowed outright (`ALLOW_ALL`); a limit
//! of 0 refuses everything (`DENY_ALL`).
//!
//! **How it is split.** Each Envoy's demand is read from its reports (requests per
//! second, times the unit); the quota is split max-min fair on those demands with
//! headroom, every token handed out and the shares adding up to the limit
//! ([`share::split`]). An Envoy not yet measured asks for everything, so a new one
//! gets an equal share at once. An Envoy's share is sent as a token bucket of that
//! many tokens refilled with as many every unit (Envoy's filter enforces
//! `TokenBucket` and `BlanketRule`, not `RequestsPerTimeUnit`); a share of 0 as
//! `DENY_ALL`. In all, the Envoys of a bucket are given at most its limit per unit.
//! When shares move, an Envoy keeps the fill level of its old bucket (Envoy's rule),
//! so the unit in which they move may admit up to one share more.
//!
//! **Time to live.** Every assignment carries [`QuotaOptions::assignment_ttl`] (whole
//! seconds, longer than Envoy's 5 s report period), renewed by each report; an
//! Envoy that loses the service falls back to its `expired_assignment_behavior`
//! when it runs out. A bucket reported idle [`QuotaOptions::abandon_after`] times
//! in a row is abandoned (Envoy forgets it until its next request), and its share
//! goes to the others; so does the share of an Envoy whose stream ends.
//!
//! **One service.** The shares are kept in this process: several replicas behind
//! one load balancer would each hand out the whole limit. The service is served
//! with the memory backend only; with Redis, a stream is refused with
//! `FAILED_PRECONDITION`, saying why.
//!
//! A report without a domain is of the domain the stream last named (Envoy names it
//! in the first report, and in practice in every one).
//!
//! **Bad input**: a stream whose first report names no domain, or a bucket id that
//! is missing, empty, or has an empty key or value, ends with `INVALID_ARGUMENT`
//! naming what is wrong.

pub mod buckets;
pub mod share;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    self, AbandonAction, QuotaAssignmentAction,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use futures_util::Stream;
use tokio::sync::mpsc;
use tollgate::config::{Descriptor, DescriptorMatch};
use tonic::{Request, Response, Status, Streaming};

use crate::engine::Engine;
use buckets::{Assignment, BucketKey, BucketLimit, Buckets, Update, Usage};

/// How the quota service assigns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuotaOptions {
    /// Each assignment's time to live, in whole seconds (Envoy reads only those).
    pub assignment_ttl: Duration,
    /// Idle reports in a row after which a bucket is abandoned (0: never).
    pub abandon_after: u32,
}

impl Default for QuotaOptions {
    /// 15 s (three of Envoy's report periods) and 12 idle reports (a minute).
    fn default() -> QuotaOptions {
        QuotaOptions {
            assignment_ttl: Duration::from_secs(15),
            abandon_after: 12,
        }
    }
}

type Outbox = mpsc::UnboundedSender<Result<RateLimitQuotaResponse, Status>>;

/// The streams open, and the buckets they report.
#[derive(Debug)]
struct Shared {
    buckets: Buckets,
    streams: HashMap<u64, Outbox>,
}

/// The quota service over an [`Engine`]'s domain files.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::time::ManualClock;
/// use tollgate_rls::backend::{Backend, BackendOptions};
/// use tollgate_rls::domains::Domains;
/// use tollgate_rls::engine::Engine;
/// use tollgate_rls::quota::{QuotaGrpc, QuotaOptions};
///
/// let backend = Backend::memory_with_clock(&BackendOptions::memory(), ManualClock::new())?;
/// let engine = Arc::new(Engine::with_backend(Domains::default(), backend));
/// let service = QuotaGrpc::new(engine, QuotaOptions::default()).into_server();
/// # drop(service);
/// # Ok::<(), tollgate::store::StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct QuotaGrpc {
    engine: Arc<Engine>,
    options: QuotaOptions,
    shared: Arc<Mutex<Shared>>,
    next_stream: Arc<AtomicU64>,
    refusal: Option<&'static str>,
}

impl QuotaGrpc {
    /// The service, assigning the limits of `engine`'s domain files.
    pub fn new(engine: Arc<Engine>, options: QuotaOptions) -> QuotaGrpc {
        QuotaGrpc {
            engine,
            shared: Arc::new(Mutex::new(Shared {
                buckets: Buckets::new(options.abandon_after),
                streams: HashMap::new(),
            })),
            options,
            next_stream: Arc::new(AtomicU64::new(1)),
            refusal: None,
        }
    }

    /// The service refusing every stream with `FAILED_PRECONDITION` and `why`.
    pub fn refusing(engine: Arc<Engine>, why: &'static str) -> QuotaGrpc {
        QuotaGrpc {
            refusal: Some(why),
            ..QuotaGrpc::new(engine, QuotaOptions::default())
        }
    }

    /// The service, ready to add to a tonic server.
    pub fn into_server(self) -> RateLimitQuotaServiceServer<QuotaGrpc> {
        RateLimitQuotaServiceServer::new(self)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves consistent maps (each step is one
        // insert or remove), so the state is used as it is.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One report of `stream`: its own answer (if any), and the pushes to the
    /// others are sent from here.
    fn report(
        &self,
        stream: u64,
        domain: &str,
        reports: &RateLimitQuotaUsageReports,
    ) -> Result<Option<RateLimitQuotaResponse>, Status> {
        let mut keyed = Vec::with_capacity(reports.bucket_quota_usages.len());
        for (i, usage) in reports.bucket_quota_usages.iter().enumerate() {
            let key = bucket_key(domain, usage.bucket_id.as_ref())
                .map_err(|e| Status::invalid_argument(format!("bucket_quota_usages[{i}]: {e}")))?;
            let usage = Usage {
                allowed: usage.num_requests_allowed,
                denied: usage.num_requests_denied,
                elapsed: usage.time_elapsed.map_or(Duration::ZERO, duration_of),
            };
            keyed.push((key, usage));
        }
        let limits: Vec<BucketLimit> = keyed.iter().map(|(key, _)| self.limit_of(key)).collect();
        let mut shared = self.lock();
        let mut updates = Vec::new();
        for ((key, usage), limit) in keyed.iter().zip(limits) {
            updates.extend(shared.buckets.report(stream, key, limit, *usage));
        }
        Ok(self.route(&shared, stream, updates))
    }

    /// Sends each update to its stream, one response per stream; `own`'s is returned.
    fn route(
        &self,
        shared: &Shared,
        own: u64,
        updates: Vec<Update>,
    ) -> Option<RateLimitQuotaResponse> {
        let mut by_stream: HashMap<u64, Vec<BucketAction>> = HashMap::new();
        for update in updates {
            by_stream
                .entry(update.stream)
                .or_default()
                .push(self.action(&update));
        }
        let own_actions = by_stream.remove(&own);
        for (stream, actions) in by_stream {
            if let Some(outbox) = shared.streams.get(&stream) {
                let _ = outbox.send(Ok(RateLimitQuotaResponse {
                    bucket_action: actions,
                }));
            }
        }
        own_actions.map(|actions| RateLimitQuotaResponse {
            bucket_action: actions,
        })
    }

    fn action(&self, update: &Update) -> BucketAction {
        let bucket_id = Some(BucketId {
            bucket: update.key.1.iter().cloned().collect(),
        });
        let action = match update.assignment {
            None => bucket_action::BucketAction::AbandonAction(AbandonAction {}),
            Some(assignment) => {
                bucket_action::BucketAction::QuotaAssignmentAction(QuotaAssignmentAction {
                    assignment_time_to_live: Some(PbDuration {
                        seconds: i64::try_from(self.options.assignment_ttl.as_secs())
                            .unwrap_or(i64::MAX),
                        nanos: 0,
                    }),
                    rate_limit_strategy: Some(strategy(assignment)),
                })
            }
        };
        BucketAction {
            bucket_id,
            bucket_action: Some(action),
        }
    }

    /// What the domain files say of `key` now.
    fn limit_of(&self, key: &BucketKey) -> BucketLimit {
        let domains = self.engine.domains();
        let Some(rules) = domains.get(&key.0) else {
            return BucketLimit::None;
        };
        let descriptor: Descriptor = key
            .1
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let matched = rules.limits_for(std::slice::from_ref(&descriptor));
        match matched.descriptors().first() {
            Some(DescriptorMatch::Unlimited) => BucketLimit::Unlimited,
            Some(DescriptorMatch::Limit(m)) if !m.limit().is_shadow() => {
                let limit = m.limit();
                BucketLimit::Limited {
                    tokens: if m.limit().rule().is_some() {
                        limit.requests_per_unit()
                    } else {
                        0
                    },
                    unit: limit.unit().duration(),
                }
            }
            _ => BucketLimit::None,
        }
    }

    /// The stream is gone: its shares go to the others.
    fn leave(&self, stream: u64) {
        let mut shared = self.lock();
        shared.streams.remove(&stream);
        let updates = shared.buckets.leave(stream);
        let _ = self.route(&shared, stream, updates);
    }
}

/// A bucket's key from its domain and id.
///
/// # Errors
///
/// A message naming what is wrong: no id, no pairs, an empty key or value.
fn bucket_key(domain: &str, id: Option<&BucketId>) -> Result<BucketKey, String> {
    let Some(id) = id else {
        return Err("bucket_id is missing".into());
    };
    if id.bucket.is_empty() {
        return Err("bucket_id has no pairs".into());
    }
    let mut pairs: Vec<(String, String)> = Vec::with_capacity(id.bucket.len());
    for (k, v) in &id.bucket {
        if k.is_empty() || v.is_empty() {
            return Err(format!(
                "bucket_id has an empty key or value ({k:?}: {v:?})"
            ));
        }
        pairs.push((k.clone(), v.clone()));
    }
    pairs.sort();
    Ok((domain.to_owned(), pairs))
}

fn duration_of(d: PbDuration) -> Duration {
    let seconds = u64::try_from(d.seconds).unwrap_or(0);
    let nanos = u32::try_from(d.nanos).unwrap_or(0).min(999_999_999);
    Duration::new(seconds, nanos)
}

/// An assignment as Envoy's filter enforces it.
fn strategy(assignment: Assignment) -> RateLimitStrategy {
    let strategy = match assignment {
        Assignment::AllowAll => Strategy::BlanketRule(BlanketRule::AllowAll as i32),
        Assignment::DenyAll => Strategy::BlanketRule(BlanketRule::DenyAll as i32),
        Assignment::Tokens { tokens, unit } => {
            // Envoy holds tokens in a u32: a larger share is a full u32 bucket.
            let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
            Strategy::TokenBucket(TokenBucket {
                max_tokens: tokens,
                tokens_per_fill: Some(UInt32Value { value: tokens }),
                // Units are whole seconds; Envoy divides by whole seconds.
                fill_interval: Some(PbDuration {
                    seconds: i64::try_from(unit.as_secs().max(1)).unwrap_or(i64::MAX),
                    nanos: 0,
                }),
            })
        }
    };
    RateLimitStrategy {
        strategy: Some(strategy),
    }
}

/// The responses of one stream.
pub type QuotaStream =
    Pin<Box<dyn Stream<Item = Result<RateLimitQuotaResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl RateLimitQuotaService for QuotaGrpc {
    type StreamRateLimitQuotasStream = QuotaStream;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<QuotaStream>, Status> {
        if let Some(why) = self.refusal {
            return Err(Status::failed_precondition(why));
        }
        let mut inbound = request.into_inner();
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let (outbox, mut responses) = mpsc::unbounded_channel();
        self.lock().streams.insert(stream, outbox.clone());
        let service = self.clone();
        tokio::spawn(async move {
            let mut domain = String::new();
            loop {
                let reports = match inbound.message().await {
                    Ok(Some(reports)) => reports,
                    Ok(None) => break,
                    Err(status) => {
                        tracing::debug!("StreamRateLimitQuotas {stream}: {status}");
                        break;
                    }
                };
                if !reports.domain.is_empty() {
                    domain.clone_from(&reports.domain);
                }
                let answer = if domain.is_empty() {
                    Err(Status::invalid_argument(
                        "the first report must name a domain",
                    ))
                } else {
                    service.report(stream, &domain, &reports)
                };
                match answer {
                    Ok(Some(response)) => {
                        let _ = outbox.send(Ok(response));
                    }
                    Ok(None) => {}
                    Err(status) => {
                        let _ = outbox.send(Err(status));
                        break;
                    }
                }
            }
            service.leave(stream);
        });
        let responses: QuotaStream = Box::pin(futures_util::stream::poll_fn(move |cx| {
            responses.poll_recv(cx)
        }));
        Ok(Response::new(responses))
    }
}
