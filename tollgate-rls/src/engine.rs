//! `ShouldRateLimit`: a request's descriptors against the domain's rules, decided over
//! a store.
//!
//! (Skeleton: each descriptor decided on its own over a memory store. The Go
//! service's full semantics replace it.)

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit, rate_limit::Unit as PbUnit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tollgate::config::{Descriptor, Unit};
use tollgate::store::{Check, MemoryStore, Op, Request, Store, StoreError};

use crate::backend::Backend;
use crate::domains::Domains;
use crate::verdict::VerdictError;

/// Why a request got no answer: the Go service's errors.
#[derive(Debug)]
#[non_exhaustive]
pub enum RlsError {
    /// The request named no domain.
    EmptyDomain,
    /// The request carried no descriptor.
    NoDescriptors,
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

/// Decides `ShouldRateLimit` requests against the current domains.
pub struct Engine {
    domains: ArcSwap<Domains>,
    backend: Backend,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over an in-memory store.
    pub fn in_memory(domains: Domains) -> Result<Engine, StoreError> {
        let store = MemoryStore::new(tollgate::KeyedConfig::new(1_000_000), "rls")?;
        Ok(Engine::with_backend(
            domains,
            Backend::from_stores(Arc::new(store), None, 0),
        ))
    }

    /// An engine deciding over `backend` (see [`Backend::connect`]).
    pub fn with_backend(domains: Domains, backend: Backend) -> Engine {
        Engine {
            domains: ArcSwap::from_pointee(domains),
            backend,
        }
    }

    /// The backend the engine decides over.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Swaps in new domains; requests in flight finish on the old ones.
    pub fn set_domains(&self, domains: Domains) {
        self.domains.store(Arc::new(domains));
    }

    /// The current domains.
    pub fn domains(&self) -> Arc<Domains> {
        self.domains.load_full()
    }

    /// Decides `request`.
    ///
    /// # Errors
    ///
    /// [`RlsError::EmptyDomain`], [`RlsError::NoDescriptors`], or the store's error.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, RlsError> {
        if request.domain.is_empty() {
            return Err(RlsError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(RlsError::NoDescriptors);
        }
        let domains = self.domains.load();
        let hits = u64::from(request.hits_addend.max(1));
        let mut response = RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..Default::default()
        };
        for d in &request.descriptors {
            let descriptor: Descriptor = d
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            let mut status = DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            };
            if let Some(rules) = domains.get(&request.domain) {
                let matched = rules.limits_for(std::slice::from_ref(&descriptor));
                if let Some(m) = matched.enforced().next() {
                    let checks = [Check::new(m.key(), m.limit().rule())];
                    let reply = self
                        .backend
                        .store_for(pb_unit(m.limit().unit()))
                        .execute(&Request::new(&request.domain, &checks, Op::Acquire(hits)))
                        .await
                        .map_err(RlsError::Store)?
                        .into_decision()
                        .map_err(RlsError::Store)?;
                    let limit = m.limit();
                    status.current_limit = Some(RateLimit {
                        name: limit.name().to_owned(),
                        requests_per_unit: u32::try_from(limit.requests_per_unit())
                            .unwrap_or(u32::MAX),
                        unit: pb_unit(limit.unit()) as i32,
                    });
                    let (remaining, reset) = match reply {
                        Ok(a) => (a.remaining(), a.reset_after()),
                        Err(d) => {
                            status.code = Code::OverLimit as i32;
                            response.overall_code = Code::OverLimit as i32;
                            (0, d.retry_after().unwrap_or(Duration::ZERO))
                        }
                    };
                    status.limit_remaining = u32::try_from(remaining).unwrap_or(u32::MAX);
                    status.duration_until_reset =
                        Some(envoy_types::pb::google::protobuf::Duration {
                            seconds: i64::try_from(reset.as_secs()).unwrap_or(i64::MAX),
                            nanos: 0,
                        });
                }
            }
            response.statuses.push(status);
        }
        Ok(response)
    }
}

fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
        _ => PbUnit::Unknown,
    }
}
