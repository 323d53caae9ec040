//! `ShouldRateLimit`: a request's descriptors against the domain's rules, decided over
//! a store, answered and counted as the Go service answers and counts.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value, value::Kind};
use tollgate::Denied;
use tollgate::algorithm::FixedWindow;
use tollgate::config::{Descriptor, DescriptorMatch, Unit};
use tollgate::store::{Check, Op, Reply, Request, Rule, Store, StoreError};
use tollgate::time::{Clock, MonotonicClock};

use crate::backend::{Backend, BackendOptions};
use crate::domains::Domains;
use crate::settings::{Counting, EngineOptions};
use crate::stats::Stats;
use crate::verdict::{
    self, AppliedLimit, DescriptorResult, HeaderNames, ResponseOptions, StoreAnswer, VerdictError,
};

/// Why a request got no answer: the Go service's errors.
#[derive(Debug)]
#[non_exhaustive]
pub enum RlsError {
    /// The request named no domain.
    EmptyDomain,
    /// The request carried no descriptor.
    NoDescriptors,
    /// A descriptor (its index in the request) has an entry with an empty key, which
    /// no rule can name.
    EmptyKey {
        /// The descriptor's index.
        descriptor: usize,
    },
    /// The store could not decide.
    Store(StoreError),
    /// No configuration has been loaded yet (Go: "no rate limit configuration loaded").
    NoConfig,
    /// A limit or a result the Go service would have crashed on (a limit override with
    /// an unknown unit, for one).
    Verdict(VerdictError),
}

impl RlsError {
    /// Whether Go counts this error as `call.should_rate_limit.redis_error` (the store
    /// failed) rather than `service_error`.
    pub fn is_store_error(&self) -> bool {
        matches!(self, RlsError::Store(_))
    }
}

impl std::fmt::Display for RlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RlsError::EmptyDomain => f.write_str("rate limit domain must not be empty"),
            RlsError::NoDescriptors => f.write_str("rate limit descriptor list must not be empty"),
            RlsError::EmptyKey { descriptor } => write!(
                f,
                "rate limit descriptor {descriptor} has an entry with an empty key"
            ),
            RlsError::Store(e) => write!(f, "store error: {e}"),
            RlsError::NoConfig => f.write_str("no rate limit configuration loaded"),
            RlsError::Verdict(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RlsError::Store(e) => Some(e),
            RlsError::Verdict(e) => Some(e),
            _ => None,
        }
    }
}

impl From<VerdictError> for RlsError {
    fn from(e: VerdictError) -> RlsError {
        RlsError::Verdict(e)
    }
}

/// Reads Unix time: the engine's windows, resets and local cache follow it.
type UnixNow = Arc<dyn Fn() -> Duration + Send + Sync>;

/// Decides `ShouldRateLimit` requests against the current domains.
///
/// Each descriptor resolves to at most one limit (the node its last entry reaches,
/// as the Go service resolves it, see [`tollgate::config::RuleSet::limits_for`]);
/// the limits are then decided over the [`Backend`]'s store:
///
/// - [`Counting::AllOrNothing`] (tollgate's default): every enforcing limit of the
///   request in one atomic store request, each with its own hits. A request over
///   any limit takes nothing from the others, so a client over one limit does not
///   use up another (envoyproxy/ratelimit#1060). Shadow-mode and quota-mode limits,
///   which never deny the request alone, are counted on their own once the
///   enforcing limits admitted, and only looked at otherwise.
/// - [`Counting::Each`] (the Go service): every descriptor counted on its own, its
///   fixed window counting denied hits too (the Go service's `INCRBY`), so a
///   request over one limit still counts in the others.
///
/// Then each descriptor's status, the stats and the response follow the Go service
/// ([`crate::verdict`]).
pub struct Engine {
    domains: ArcSwap<Domains>,
    backend: Backend,
    options: EngineOptions,
    stats: Arc<Stats>,
    now: UnixNow,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over an in-memory store, with the default options.
    ///
    /// # Errors
    ///
    /// The store's, if it cannot be built.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::Domains;
    /// use tollgate_rls::engine::Engine;
    ///
    /// let engine = Engine::in_memory(Domains::default())?;
    /// assert!(engine.domains().is_empty());
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn in_memory(domains: Domains) -> Result<Engine, StoreError> {
        let backend = Backend::memory_with_clock(&BackendOptions::memory(), MonotonicClock::new())?;
        Ok(Engine::new(
            domains,
            backend,
            EngineOptions::default(),
            Arc::new(Stats::new(DEFAULT_STATS_KEYS)),
        ))
    }

    /// An engine deciding over `backend` with the default options.
    pub fn with_backend(domains: Domains, backend: Backend) -> Engine {
        Engine::new(
            domains,
            backend,
            EngineOptions::default(),
            Arc::new(Stats::new(DEFAULT_STATS_KEYS)),
        )
    }

    /// An engine deciding over `backend` with `options`, counting into `stats`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate_rls::backend::{Backend, BackendOptions};
    /// use tollgate_rls::domains::Domains;
    /// use tollgate_rls::engine::Engine;
    /// use tollgate_rls::settings::EngineOptions;
    /// use tollgate_rls::stats::Stats;
    ///
    /// use tollgate::time::MonotonicClock;
    ///
    /// let backend = Backend::memory_with_clock(&BackendOptions::memory(), MonotonicClock::new())?;
    /// let stats = Arc::new(Stats::new(10_000));
    /// let engine = Engine::new(Domains::default(), backend, EngineOptions::default(), stats);
    /// assert!(Arc::ptr_eq(engine.stats(), engine.stats()));
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn new(
        domains: Domains,
        backend: Backend,
        options: EngineOptions,
        stats: Arc<Stats>,
    ) -> Engine {
        Engine {
            domains: ArcSwap::from_pointee(domains),
            backend,
            options,
            stats,
            now: Arc::new(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
            }),
        }
    }

    /// The same engine reading Unix time from `clock` (its `unix_origin` plus its
    /// `now`): give it the clock of a memory backend built with
    /// [`Backend::memory_with_clock`], so that windows and resets agree.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::time::ManualClock;
    /// use tollgate_rls::backend::{Backend, BackendOptions};
    /// use tollgate_rls::domains::Domains;
    /// use tollgate_rls::engine::Engine;
    ///
    /// let clock = ManualClock::new();
    /// let backend = Backend::memory_with_clock(&BackendOptions::memory(), clock.clone())?;
    /// let engine = Engine::with_backend(Domains::default(), backend).with_clock(clock);
    /// # let _ = engine;
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn with_clock<C: Clock>(self, clock: C) -> Engine {
        Engine {
            now: Arc::new(move || {
                clock
                    .unix_origin()
                    .saturating_add(Duration::from_nanos(clock.now().as_u64()))
            }),
            ..self
        }
    }

    /// The backend the engine decides over.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The stats the engine counts into.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The options the engine decides with.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Swaps in new domains; requests in flight finish on the old ones.
    pub fn set_domains(&self, domains: Domains) {
        self.domains.store(Arc::new(domains));
    }

    /// The current domains.
    pub fn domains(&self) -> Arc<Domains> {
        self.domains.load_full()
    }

    /// Decides `request`, counting its stats.
    ///
    /// # Errors
    ///
    /// [`RlsError::EmptyDomain`], [`RlsError::NoDescriptors`] and
    /// [`RlsError::EmptyKey`] for a request the Go service refuses or that names
    /// nothing; [`RlsError::Store`] when the store could not decide (with
    /// `--store-failure allow`, the backend answers instead); [`RlsError::Verdict`]
    /// for a limit override with an unknown unit.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the store's decision applied or not (a remote
    /// store may still apply it), as for [`Store::execute`].
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, RlsError> {
        let started = Instant::now();
        let answer = self.decide(request).await;
        self.stats.call("should_rate_limit", started.elapsed());
        match &answer {
            Err(e) if e.is_store_error() => self.stats.redis_error(),
            Err(_) => self.stats.service_error(),
            Ok(_) => {}
        }
        answer
    }

    async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, RlsError> {
        if request.domain.is_empty() {
            return Err(RlsError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(RlsError::NoDescriptors);
        }
        if let Some(descriptor) = request
            .descriptors
            .iter()
            .position(|d| d.entries.iter().any(|e| e.key.is_empty()))
        {
            return Err(RlsError::EmptyKey { descriptor });
        }
        let now = (self.now)();
        let now_unix = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let response_options = ResponseOptions {
            global_shadow_mode: self.options.shadow_mode,
            global_quota_mode: self.options.quota_mode,
            headers: self.options.response_headers.as_ref().map(|h| HeaderNames {
                limit: h.limit.clone(),
                remaining: h.remaining.clone(),
                reset: h.reset.clone(),
            }),
            dynamic_metadata: self.options.response_dynamic_metadata,
        };
        let domains = self.domains.load();
        let Some(rules) = domains.get(&request.domain) else {
            // Go counts it once per descriptor.
            for _ in &request.descriptors {
                self.stats.domain_not_found(&request.domain);
            }
            let results = vec![DescriptorResult::NoLimit; request.descriptors.len()];
            return self.respond(request, results, &response_options, now_unix);
        };
        let descriptors: Vec<Descriptor> = request
            .descriptors
            .iter()
            .map(|d| {
                d.entries
                    .iter()
                    .map(|e| (e.key.as_str(), e.value.as_str()))
                    .collect()
            })
            .collect();
        let matched = rules.limits_for(&descriptors);
        let hits = verdict::hits_addends(request);
        let metadata: Vec<Option<Struct>> = if self.options.response_dynamic_metadata {
            matched
                .descriptors()
                .iter()
                .map(|m| m.limit().and_then(|m| m.metadata()).map(json_struct))
                .collect()
        } else {
            Vec::new()
        };

        // What each descriptor is limited by, and where it counts.
        let mut plans: Vec<Plan<'_>> = Vec::with_capacity(request.descriptors.len());
        for (i, (descriptor, found)) in request
            .descriptors
            .iter()
            .zip(matched.descriptors())
            .enumerate()
        {
            let plan = if let Some(over) = &descriptor.limit {
                Plan::limited(override_limit(&request.domain, descriptor, over)?)
            } else {
                match found {
                    DescriptorMatch::Unlimited => Plan::Unlimited,
                    DescriptorMatch::Limit(m) => {
                        let limit = m.limit();
                        let unit = pb_unit(limit.unit())?;
                        let mut applied = AppliedLimit::new(
                            u32::try_from(limit.requests_per_unit()).unwrap_or(u32::MAX),
                            unit,
                        );
                        applied.name = if limit.is_named() { limit.name() } else { "" };
                        applied.shadow_mode = limit.is_shadow();
                        applied.quota_mode = m.is_quota_mode();
                        applied.metadata = metadata.get(i).and_then(Option::as_ref);
                        Plan::limited(Limited {
                            applied,
                            threshold: limit.requests_per_unit(),
                            rule: limit.rule().map(Cow::Borrowed),
                            key: Cow::Borrowed(m.key()),
                            stats_key: Cow::Borrowed(m.stats_key()),
                        })
                    }
                    _ => Plan::NoLimit,
                }
            };
            plans.push(plan);
        }

        // The local cache answers for keys it saw over their limit in this window.
        let mut answers: Vec<Option<StoreAnswer>> = vec![None; plans.len()];
        for (i, plan) in plans.iter().enumerate() {
            if let Plan::Limit(l) = plan {
                if self
                    .backend
                    .over_limit_locally(&l.key, l.applied.unit, now_unix)?
                {
                    answers[i] = Some(StoreAnswer::OverLimitLocally);
                } else if l.rule.is_none() {
                    // `requests_per_unit: 0`: every hit is over, no store asked.
                    answers[i] = Some(StoreAnswer::Counted {
                        before: 0,
                        after: hits[i],
                    });
                }
            }
        }
        match self.options.counting {
            Counting::Each => {
                self.count_each(request, &plans, &hits, &mut answers)
                    .await?
            }
            _ => {
                self.all_or_nothing(request, &plans, &hits, &mut answers)
                    .await?
            }
        }

        let mut results = Vec::with_capacity(plans.len());
        for (i, plan) in plans.iter().enumerate() {
            let result = match (plan, answers[i]) {
                (Plan::NoLimit, _) => DescriptorResult::NoLimit,
                (Plan::Unlimited, _) => DescriptorResult::Unlimited,
                (Plan::Limit(l), Some(answer)) => {
                    let decided = verdict::decide_descriptor(
                        &l.applied,
                        hits[i],
                        answer,
                        self.options.near_limit_ratio,
                        now_unix,
                    )?;
                    self.stats.add(&l.stats_key, &decided.counts);
                    if decided.newly_over_limit {
                        self.backend
                            .remember_over_limit(&l.key, l.applied.unit, now_unix)?;
                    }
                    DescriptorResult::limited(&l.applied, decided)
                }
                (Plan::Limit(_), None) => DescriptorResult::NoLimit,
            };
            results.push(result);
        }
        self.respond(request, results, &response_options, now_unix)
    }

    fn respond(
        &self,
        request: &RateLimitRequest,
        results: Vec<DescriptorResult<'_>>,
        options: &ResponseOptions,
        now_unix: i64,
    ) -> Result<RateLimitResponse, RlsError> {
        let answered = verdict::build_response(request, results, options, now_unix)?;
        if answered.global_shadow_mode {
            self.stats.global_shadow_mode();
        }
        Ok(answered.response)
    }

    /// Every enforcing limit in one all-or-nothing request; shadow and quota limits
    /// after it, each on its own, taking only if the enforcing ones admitted.
    async fn all_or_nothing(
        &self,
        request: &RateLimitRequest,
        plans: &[Plan<'_>],
        hits: &[u64],
        answers: &mut [Option<StoreAnswer>],
    ) -> Result<(), RlsError> {
        let quota = self.options.quota_mode;
        let pending = |enforcing: bool| -> Vec<usize> {
            plans
                .iter()
                .enumerate()
                .filter(|(i, p)| {
                    answers[*i].is_none()
                        && matches!(p, Plan::Limit(l) if l.enforces(quota) == enforcing)
                })
                .map(|(i, _)| i)
                .collect()
        };
        let (enforcing, others) = (pending(true), pending(false));
        // A request already over (a local cache hit, a blocking limit) takes nothing.
        let already_over = plans.iter().zip(answers.iter()).any(|(p, a)| {
            matches!(p, Plan::Limit(l) if l.enforces(quota))
                && a.is_some_and(|a| is_over(a, p.threshold()))
        });
        let mut admitted = !already_over;
        for group in self.by_store(plans, &enforcing) {
            let op = if admitted {
                Op::Acquire(1)
            } else {
                Op::Peek(1)
            };
            let decided = self
                .execute(request, plans, hits, &group, op, false)
                .await?;
            let all_admit = decided.iter().all(|(_, reply)| reply.is_admitted());
            let taken = all_admit && matches!(op, Op::Acquire(_));
            admitted &= all_admit;
            for (i, reply) in decided {
                let answer = store_answer(reply, plans[i].threshold(), hits[i]);
                answers[i] = Some(if taken {
                    answer
                } else {
                    untaken(answer, hits[i], plans[i].threshold())
                });
            }
        }
        let op = if admitted {
            Op::Acquire(1)
        } else {
            Op::Peek(1)
        };
        for i in others {
            let decided = self.execute(request, plans, hits, &[i], op, false).await?;
            for (i, reply) in decided {
                let taken = reply.is_admitted() && matches!(op, Op::Acquire(_));
                let answer = store_answer(reply, plans[i].threshold(), hits[i]);
                answers[i] = Some(if taken {
                    answer
                } else {
                    untaken(answer, hits[i], plans[i].threshold())
                });
            }
        }
        Ok(())
    }

    /// Every limit on its own, as the Go service counts: fixed windows count denied
    /// hits too. With STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, the counts are read
    /// first and only the limits that would go over count when some would.
    async fn count_each(
        &self,
        request: &RateLimitRequest,
        plans: &[Plan<'_>],
        hits: &[u64],
        answers: &mut [Option<StoreAnswer>],
    ) -> Result<(), RlsError> {
        let pending: Vec<usize> = (0..plans.len())
            .filter(|&i| answers[i].is_none() && matches!(plans[i], Plan::Limit(_)))
            .collect();
        let mut hits = hits.to_vec();
        if self.options.stop_cache_key_increment_when_overlimit {
            let any_over_locally = answers
                .iter()
                .any(|a| matches!(a, Some(StoreAnswer::OverLimitLocally)));
            let mut read: Vec<Option<(u32, u64, u64)>> = vec![None; plans.len()];
            for &i in &pending {
                let peeked = self
                    .execute(
                        request,
                        plans,
                        &vec![0; plans.len()],
                        &[i],
                        Op::Peek(0),
                        true,
                    )
                    .await?;
                for (i, reply) in peeked {
                    let threshold = plans[i].threshold();
                    let current = match store_answer(reply, threshold, 0) {
                        StoreAnswer::Counted { after, .. } => after,
                        StoreAnswer::OverLimitLocally => threshold,
                    };
                    read[i] = Some((
                        u32::try_from(threshold).unwrap_or(u32::MAX),
                        current,
                        hits[i],
                    ));
                }
            }
            let stopped = verdict::hits_when_stopping_at_limit(&read, any_over_locally);
            for &i in &pending {
                let counted = self
                    .execute(request, plans, &stopped, &[i], Op::Acquire(1), true)
                    .await?;
                for (i, reply) in counted {
                    // The stats count the hits asked, as Go's do, whatever was taken.
                    answers[i] = Some(store_answer(reply, plans[i].threshold(), hits[i]));
                }
            }
            hits.clear();
            return Ok(());
        }
        let decided = futures_util::future::try_join_all(pending.iter().map(|i| {
            self.execute(
                request,
                plans,
                &hits,
                std::slice::from_ref(i),
                Op::Acquire(1),
                true,
            )
        }))
        .await?;
        for (i, reply) in decided.into_iter().flatten() {
            answers[i] = Some(store_answer(reply, plans[i].threshold(), hits[i]));
        }
        Ok(())
    }

    /// `indices` grouped by the store they count in (per-second limits may have one
    /// of their own).
    fn by_store(&self, plans: &[Plan<'_>], indices: &[usize]) -> Vec<Vec<usize>> {
        let mut main = Vec::new();
        let mut per_second = Vec::new();
        for &i in indices {
            let store = self.backend.store_for(plans[i].unit());
            if Arc::ptr_eq(store, self.backend.store()) {
                main.push(i);
            } else {
                per_second.push(i);
            }
        }
        [main, per_second]
            .into_iter()
            .filter(|g| !g.is_empty())
            .collect()
    }

    /// One store request of the limits at `indices` (all in one store), each with its
    /// own hits; each one's reply.
    async fn execute(
        &self,
        request: &RateLimitRequest,
        plans: &[Plan<'_>],
        hits: &[u64],
        indices: &[usize],
        op: Op,
        counting_denied: bool,
    ) -> Result<Vec<(usize, Reply)>, RlsError> {
        // Limits of 0 requests never reach a store: their answer is known.
        let limits: Vec<(usize, &Limited<'_>, &Rule)> = indices
            .iter()
            .filter_map(|&i| match &plans[i] {
                Plan::Limit(l) => l.rule.as_deref().map(|rule| (i, l, rule)),
                _ => None,
            })
            .collect();
        let Some(&(_, first, _)) = limits.first() else {
            return Ok(Vec::new());
        };
        let rules: Vec<Cow<'_, Rule>> = limits
            .iter()
            .map(|&(_, _, rule)| {
                if counting_denied {
                    counting(rule)
                } else {
                    Ok(Cow::Borrowed(rule))
                }
            })
            .collect::<Result<_, RlsError>>()?;
        let checks: Vec<Check<'_>> = limits
            .iter()
            .zip(&rules)
            .map(|(&(i, l, _), rule)| Check::new(&l.key, rule).with_permits(hits[i]))
            .collect();
        let indices: Vec<usize> = limits.iter().map(|&(i, _, _)| i).collect();
        let store = self.backend.store_for(first.applied.unit);
        let answers = store
            .execute_each(&Request::new(&request.domain, &checks, op))
            .await
            .map_err(RlsError::Store)?;
        let reply = answers.reply();
        Ok(match answers.checks() {
            Some(each) => indices.iter().copied().zip(each.iter().copied()).collect(),
            // A fallback decision (a failing store, `--store-failure allow`) speaks for
            // every limit of the request.
            None => indices.iter().map(|&i| (i, reply)).collect(),
        })
    }
}

/// Room for this many distinct stats keys before they are folded.
const DEFAULT_STATS_KEYS: usize = 10_000;

/// What limits one descriptor.
enum Plan<'a> {
    NoLimit,
    Unlimited,
    Limit(Limited<'a>),
}

impl<'a> Plan<'a> {
    fn limited(limited: Limited<'a>) -> Plan<'a> {
        Plan::Limit(limited)
    }

    fn threshold(&self) -> u64 {
        match self {
            Plan::Limit(l) => l.threshold,
            _ => 0,
        }
    }

    fn unit(&self) -> PbUnit {
        match self {
            Plan::Limit(l) => l.applied.unit,
            _ => PbUnit::Unknown,
        }
    }
}

/// A descriptor's limit: how the Go service reports it, and where tollgate counts it.
struct Limited<'a> {
    applied: AppliedLimit<'a>,
    /// `requests_per_unit`, against which Go's counts are read.
    threshold: u64,
    /// `None` for a limit of 0 requests, which every hit is over.
    rule: Option<Cow<'a, Rule>>,
    key: Cow<'a, str>,
    stats_key: Cow<'a, str>,
}

impl Limited<'_> {
    /// Whether the limit denies the request on its own (not shadow, not quota, and
    /// not every limit in quota mode by QUOTA_MODE).
    fn enforces(&self, global_quota_mode: bool) -> bool {
        !self.applied.shadow_mode && !self.applied.quota_mode && !global_quota_mode
    }
}

/// A limit given by the request itself (Envoy's descriptor `limit` override): a fixed
/// window of its count per its unit, keyed and counted under the descriptor's entries,
/// never in shadow mode (as Go).
fn override_limit(
    domain: &str,
    descriptor: &RateLimitDescriptor,
    over: &RateLimitOverride,
) -> Result<Limited<'static>, RlsError> {
    let unit = PbUnit::try_from(over.unit).unwrap_or(PbUnit::Unknown);
    let seconds = verdict::unit_seconds(unit).ok_or(VerdictError::UnknownUnit(over.unit))?;
    let threshold = u64::from(over.requests_per_unit);
    let rule = if threshold == 0 {
        None
    } else {
        let window = FixedWindow::new(threshold, Duration::from_secs(seconds.unsigned_abs()))
            .map_err(|e| RlsError::Store(e.into()))?;
        Some(Cow::Owned(Rule::from(window)))
    };
    let mut stats_key = String::from(domain);
    let mut key = format!("override:{seconds}:{threshold}");
    for entry in &descriptor.entries {
        stats_key.push('.');
        stats_key.push_str(&entry.key);
        if !entry.value.is_empty() {
            stats_key.push('_');
            stats_key.push_str(&entry.value);
        }
        key.push('|');
        escape(&mut key, &entry.key);
        key.push('=');
        escape(&mut key, &entry.value);
    }
    Ok(Limited {
        applied: AppliedLimit::new(over.requests_per_unit, unit),
        threshold,
        rule,
        key: Cow::Owned(key),
        stats_key: Cow::Owned(stats_key),
    })
}

/// `%`, `|` and `=` escaped, so that two entry lists never share a key.
fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '|' => out.push_str("%7C"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

/// The rule with its fixed window counting denied hits (Go's counter).
fn counting(rule: &Rule) -> Result<Cow<'_, Rule>, RlsError> {
    let store_error = |e: tollgate::ConfigError| RlsError::Store(e.into());
    Ok(match rule {
        Rule::FixedWindow(w) => Cow::Owned(Rule::from(w.counting_denied().map_err(store_error)?)),
        Rule::FixedWindowFirstHit(w) => {
            Cow::Owned(Rule::from(w.counting_denied().map_err(store_error)?))
        }
        other => Cow::Borrowed(other),
    })
}

/// An admitting answer whose hits were not taken (another limit denied the request,
/// or it was only looked at): the count stays where it was, as Go reports a
/// descriptor it incremented by 0 (`INCRBY 0`, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT).
fn untaken(answer: StoreAnswer, hits: u64, threshold: u64) -> StoreAnswer {
    match answer {
        StoreAnswer::Counted { before, after } if after <= threshold => StoreAnswer::Counted {
            before: before.saturating_sub(hits),
            after: before,
        },
        other => other,
    }
}

/// Whether `answer` is over `threshold`, as Go reads it.
fn is_over(answer: StoreAnswer, threshold: u64) -> bool {
    match answer {
        StoreAnswer::OverLimitLocally => true,
        StoreAnswer::Counted { after, .. } => after > threshold,
    }
}

/// A store's answer for one limit, as the Go service's counts before and after the
/// hits: the count is what the limit no longer has (`threshold − remaining`), and
/// `before` is it less the hits, as Go reads `INCRBY`'s result (with
/// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT a limit may have been asked none). A denial
/// tells the count before it, and is always over (`after > threshold`), as Go's
/// counter is after a denied `INCRBY`.
fn store_answer(reply: Reply, threshold: u64, hits: u64) -> StoreAnswer {
    match reply.into_decision() {
        Ok(Ok(admitted)) => {
            let after = threshold.saturating_sub(admitted.remaining());
            StoreAnswer::Counted {
                before: after.saturating_sub(hits),
                after,
            }
        }
        Ok(Err(Denied::Limited(limited))) => {
            let before = threshold.saturating_sub(limited.remaining());
            StoreAnswer::Counted {
                before,
                after: before.saturating_add(hits).max(threshold.saturating_add(1)),
            }
        }
        // More hits than the limit holds (nothing was counted), or a closed store.
        Ok(Err(_)) | Err(_) => StoreAnswer::Counted {
            before: 0,
            after: hits.max(threshold.saturating_add(1)),
        },
    }
}

fn pb_unit(unit: Unit) -> Result<PbUnit, RlsError> {
    Ok(match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
        _ => return Err(RlsError::Verdict(VerdictError::UnknownUnit(0))),
    })
}

/// A rules file's `metadata` as the protobuf `Struct` of Envoy's dynamic metadata.
fn json_struct(map: &serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), json_value(v)))
            .collect(),
    }
}

fn json_value(value: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    let kind = match value {
        J::Null => Kind::NullValue(0),
        J::Bool(b) => Kind::BoolValue(*b),
        J::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Kind::StringValue(s.clone()),
        J::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(json_value).collect(),
        }),
        J::Object(map) => Kind::StructValue(json_struct(map)),
    };
    Value { kind: Some(kind) }
}
