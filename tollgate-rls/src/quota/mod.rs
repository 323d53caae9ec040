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
//! **Replicas.** With the memory backend the shares are kept in this process:
//! run one replica (several behind one load balancer would each hand out the whole
//! limit). With Redis (one server, a Cluster, or the master behind Sentinel) the
//! replicas share each bucket's limit through leases in Redis ([`lease`]): per
//! bucket, each replica holds a lease on a share of the limit, and its Envoys are
//! split that share, not the limit. One script call, on the backend's own
//! connection, records the replica's want (its Envoys' demands with headroom, or
//! everything while one is not yet measured) under its lease id, drops the records
//! of replicas gone silent, and grants the replica its max-min fair share of the
//! limit on every live lease's want ([`fleet::targets`]), **cut to what the other
//! live leases hold**: the grants of live leases never add up to more than the limit
//! ([`fleet::Ledger`] is the Rust reference of the script).
//!
//! - *Shares move as replicas call.* A replica calls on a report of the bucket when
//!   its lease is new, when its want moved (an Envoy joined, or a demand moved by a
//!   quarter), while it was granted less than its fair share, and otherwise at most
//!   every [`QuotaOptions::sync_interval`] (1 s; `--quota-sync-interval`). A
//!   replica whose share shrinks gives it up at its next call and pushes the
//!   smaller assignments to its Envoys at once; a growing one gets the tokens freed
//!   at its own next call. So a new replica (or one whose Envoys want more) starts
//!   with what the others leave, possibly nothing (`DENY_ALL`), and has its fair
//!   share within one report of each other replica of the bucket and one of its
//!   own: strict where a free-for-all would over-admit.
//! - *What a move can over-admit.* The grants recorded never exceed the limit. A
//!   shrinking replica's tokens are free in Redis a network hop before its Envoys
//!   hear of their smaller buckets, and Envoy keeps the fill level of an old bucket
//!   under a new assignment; so, as in one process, the unit in which shares move
//!   may admit up to the shrinking replicas' old shares more (at most one limit).
//! - *Replicas that stop.* When the last of a replica's Envoys leaves a bucket (its
//!   stream ends, or it abandons the bucket) the replica deletes its record; on
//!   SIGTERM the service ends every quota stream with `UNAVAILABLE` (its Envoys
//!   reconnect, through the load balancer, to a replica still serving) and deletes
//!   all its records ([`QuotaGrpc::drain`]). A replica that dies is forgotten after
//!   [`QuotaOptions::assignment_ttl`] plus the sync interval, when the last
//!   assignment it answered from its grant has run out in its Envoys: until then
//!   its share stays counted. Every record lives that long unless renewed, and the
//!   ledger's key as long as its longest-lived record.
//! - *Redis fails.* Under `--store-failure error` the report's stream ends with
//!   `UNAVAILABLE`: the Envoy keeps its assignments until their time to live, then
//!   follows its `expired_assignment_behavior`. Under `allow` a replica keeps the
//!   share granted while its record surely lives in Redis, in assignments that live
//!   only what is left of the record's life (so none outlives it), then assigns
//!   `ALLOW_ALL` until Redis answers again (also for a bucket it never had a share
//!   of), logging a warning for each failure.
//! - *Keys and Cluster.* A bucket's ledger is one hash,
//!   `{prefix}:rlqs:{domain and pairs}` ([`lease::ledger_key`]): one key, so one
//!   slot of a Cluster. The limit in each call is the caller's: while a reload
//!   reaches the replicas one by one, each grants against the limit it reads.
//!
//! **Draining** ([`QuotaGrpc::drain`], on SIGTERM, with either backend): every
//! quota stream ends with `UNAVAILABLE`, new ones are refused, and the leases are
//! given back.
//!
//! A report without a domain is of the domain the stream last named (Envoy names it
//! in the first report, and in practice in every one).
//!
//! **Bad input**: a stream whose first report names no domain, or a bucket id that
//! is missing, empty, or has an empty key or value, ends with `INVALID_ARGUMENT`
//! naming what is wrong.

pub mod buckets;
pub mod fleet;
pub mod lease;
pub mod share;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
use tollgate::time::Clock;
use tonic::{Request, Response, Status, Streaming};

use crate::engine::Engine;
use buckets::{Assignment, BucketKey, BucketLimit, Buckets, Update, Usage};
use fleet::Want;
use lease::Leases;

/// How the quota service assigns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuotaOptions {
    /// Each assignment's time to live, in whole seconds (Envoy reads only those).
    pub assignment_ttl: Duration,
    /// Idle reports in a row after which a bucket is abandoned (0: never).
    pub abandon_after: u32,
    /// With Redis: the longest a replica answers a bucket's reports from the share
    /// it holds before asking Redis again (0: every report asks).
    pub sync_interval: Duration,
}

impl Default for QuotaOptions {
    /// 15 s (three of Envoy's report periods), 12 idle reports (a minute), and a
    /// sync at most every second per bucket.
    fn default() -> QuotaOptions {
        QuotaOptions {
            assignment_ttl: Duration::from_secs(15),
            abandon_after: 12,
            sync_interval: Duration::from_secs(1),
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

/// The quota service over an [`Engine`]'s domain files: alone with the memory
/// backend, sharing each limit with the other replicas through leases with Redis.
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
    leases: Option<Arc<Leases>>,
    draining: Arc<AtomicBool>,
}

impl QuotaGrpc {
    /// The service, assigning the limits of `engine`'s domain files: through leases
    /// on the backend's Redis when it has one ([`Backend::redis`](crate::backend::Backend::redis)).
    pub fn new(engine: Arc<Engine>, options: QuotaOptions) -> QuotaGrpc {
        let leases = engine
            .backend()
            .redis()
            .map(|link| Arc::new(Leases::new(link.clone(), &options)));
        let mut buckets = Buckets::new(options.abandon_after);
        if leases.is_some() {
            buckets = buckets.leased();
        }
        QuotaGrpc {
            engine,
            shared: Arc::new(Mutex::new(Shared {
                buckets,
                streams: HashMap::new(),
            })),
            options,
            next_stream: Arc::new(AtomicU64::new(1)),
            leases,
            draining: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The same service, its leases deciding when to call Redis on `clock` (a
    /// [`ManualClock`](tollgate::time::ManualClock) in tests). Call it before serving.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::engine::Engine;
    /// use tollgate_rls::domains::Domains;
    /// use tollgate_rls::quota::{QuotaGrpc, QuotaOptions};
    ///
    /// let engine = Arc::new(Engine::in_memory(Domains::default())?);
    /// let service = QuotaGrpc::new(engine, QuotaOptions::default()).with_clock(ManualClock::new());
    /// assert!(service.leases().is_none(), "memory: no leases");
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn with_clock<C: Clock>(self, clock: C) -> QuotaGrpc {
        let leases = self
            .engine
            .backend()
            .redis()
            .map(|link| Arc::new(Leases::new(link.clone(), &self.options).with_clock(clock)));
        QuotaGrpc { leases, ..self }
    }

    /// The leases in Redis, when the replicas share the limits.
    pub fn leases(&self) -> Option<&Leases> {
        self.leases.as_deref()
    }

    /// Ends every quota stream with `UNAVAILABLE` (their Envoys reconnect to a
    /// replica still serving), refuses new ones, and gives the leases back: the
    /// number of live leases given back.
    ///
    /// # Cancel safety
    ///
    /// The streams end and new ones are refused at once; cancelling leaves the
    /// leases not yet given back until their time to live.
    pub async fn drain(&self) -> usize {
        self.draining.store(true, Ordering::Release);
        let outboxes: Vec<Outbox> = self.lock().streams.drain().map(|(_, o)| o).collect();
        for outbox in outboxes {
            let _ = outbox.send(Err(draining()));
        }
        match &self.leases {
            Some(leases) => leases.close().await,
            None => 0,
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
    async fn report(
        &self,
        stream: u64,
        domain: &str,
        reports: &RateLimitQuotaUsageReports,
    ) -> Result<Option<RateLimitQuotaResponse>, Status> {
        if self.draining.load(Ordering::Acquire) {
            return Err(draining());
        }
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
        let Some(leases) = &self.leases else {
            let mut shared = self.lock();
            let mut updates = Vec::new();
            for ((key, usage), limit) in keyed.iter().zip(limits) {
                updates.extend(shared.buckets.report(stream, key, limit, *usage));
            }
            return Ok(self.route(&shared, stream, updates));
        };

        // Record the usage; the limited buckets then ask their leases for a share.
        let mut updates = Vec::new();
        let mut due: Vec<(BucketKey, u64, Want)> = Vec::new();
        let mut unleased: Vec<(BucketKey, bool)> = Vec::new();
        {
            let mut shared = self.lock();
            for ((key, usage), limit) in keyed.iter().zip(limits) {
                if let Some(abandoned) = shared.buckets.record(stream, key, limit, *usage) {
                    updates.extend(abandoned);
                    unleased.push((key.clone(), false));
                    continue;
                }
                match limit {
                    BucketLimit::Limited { tokens, .. } if tokens > 0 => {
                        let want = shared.buckets.want(key).unwrap_or(Want::Unbounded);
                        due.push((key.clone(), tokens, want));
                    }
                    _ => {
                        // No limit to share (or one of 0): a lease held from before
                        // a reload goes back.
                        updates.extend(shared.buckets.rebalance(key, Some(stream)));
                        unleased.push((key.clone(), true));
                    }
                }
            }
        }
        for (key, anyway) in &unleased {
            self.give_back(leases, key, *anyway).await;
        }
        let shares = futures_util::future::join_all(
            due.iter()
                .map(|(key, tokens, want)| leases.share(key, *tokens, *want)),
        )
        .await;
        let mut shared = self.lock();
        let mut failure = None;
        for ((key, _, _), share) in due.iter().zip(shares) {
            match share {
                Ok((seq, share)) => {
                    shared.buckets.set_share(key, seq, share);
                    updates.extend(shared.buckets.rebalance(key, Some(stream)));
                }
                Err(e) => failure = Some(e),
            }
        }
        let own = self.route(&shared, stream, updates);
        match failure {
            // The others still hear of what moved; this stream ends.
            Some(e) => Err(Status::unavailable(e.to_string())),
            None => Ok(own),
        }
    }

    /// Gives back `key`'s lease: `anyway`, or if no stream of this process reports
    /// the bucket any more. A failure is logged: the record goes after its time to
    /// live.
    async fn give_back(&self, leases: &Leases, key: &BucketKey, anyway: bool) {
        let unused = || anyway || !self.lock().buckets.contains(key);
        if let Err(e) = leases.give_back(key, unused).await {
            tracing::warn!(
                bucket = %leases.ledger_key(key),
                "quota lease not given back ({e}); it goes after its time to live"
            );
        }
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
                        seconds: i64::try_from(
                            update.ttl.unwrap_or(self.options.assignment_ttl).as_secs(),
                        )
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

    /// The stream is gone: its shares go to the others, and the leases of buckets
    /// no other stream of this process reports go back.
    async fn leave(&self, stream: u64) {
        let emptied: Vec<BucketKey> = {
            let mut shared = self.lock();
            shared.streams.remove(&stream);
            let keys = match self.leases {
                Some(_) => shared.buckets.keys_of(stream),
                None => Vec::new(),
            };
            let updates = shared.buckets.leave(stream);
            let _ = self.route(&shared, stream, updates);
            keys.into_iter()
                .filter(|key| !shared.buckets.contains(key))
                .collect()
        };
        if let Some(leases) = &self.leases {
            for key in emptied {
                self.give_back(leases, &key, false).await;
            }
        }
    }
}

fn draining() -> Status {
    Status::unavailable("the quota service is draining")
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
        if self.draining.load(Ordering::Acquire) {
            return Err(draining());
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
                    service.report(stream, &domain, &reports).await
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
            service.leave(stream).await;
        });
        let responses: QuotaStream = Box::pin(futures_util::stream::poll_fn(move |cx| {
            responses.poll_recv(cx)
        }));
        Ok(Response::new(responses))
    }
}
