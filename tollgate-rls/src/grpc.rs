//! The gRPC side: Envoy's `RateLimitService` over the engine.
//!
//! Errors are answered as the Go service answers them: its errors are plain Go errors,
//! which gRPC sends as status `UNKNOWN` with the error's text, for instance
//! `rate limit domain must not be empty`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use futures_util::FutureExt as _;
use tonic::{Request, Response, Status};

use crate::engine::{Engine, RlsError};

/// `ShouldRateLimit` over an [`Engine`].
#[derive(Debug, Clone)]
pub struct RateLimitGrpc {
    engine: Arc<Engine>,
}

impl RateLimitGrpc {
    /// The service over `engine`.
    pub fn new(engine: Arc<Engine>) -> RateLimitGrpc {
        RateLimitGrpc { engine }
    }

    /// The service, ready to add to a tonic server.
    pub fn into_server(self) -> RateLimitServiceServer<RateLimitGrpc> {
        RateLimitServiceServer::new(self)
    }
}

/// The gRPC status the Go service answers for `error`: `UNKNOWN`, with its text.
///
/// # Examples
///
/// ```
/// use tollgate_rls::engine::RlsError;
/// use tollgate_rls::grpc::status_of;
///
/// let status = status_of(&RlsError::EmptyDomain);
/// assert_eq!(status.code(), tonic::Code::Unknown);
/// assert_eq!(status.message(), "rate limit domain must not be empty");
/// ```
pub fn status_of(error: &RlsError) -> Status {
    Status::unknown(error.to_string())
}

#[tonic::async_trait]
impl RateLimitService for RateLimitGrpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        answer(&self.engine, &request.into_inner())
            .await
            .map(Response::new)
    }
}

/// `ShouldRateLimit`'s answer to `request`, or the status the call ends with; tonic's
/// service and the [hot path](crate::hot_path) both answer with it.
pub(crate) async fn answer(
    engine: &Engine,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, Status> {
    tracing::debug!(domain = %request.domain, "ShouldRateLimit");
    // A panic is an INTERNAL answer, not a reset: caught here rather than in a task of
    // its own, which cost a spawn and a wake-up across threads per call.
    let decided = AssertUnwindSafe(engine.should_rate_limit(request))
        .catch_unwind()
        .await;
    match decided {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) => {
            // The Go service logs its request errors at debug only.
            if matches!(e, RlsError::Store(_)) {
                tracing::warn!("ShouldRateLimit: {e}");
            } else {
                tracing::debug!("ShouldRateLimit: {e}");
            }
            Err(status_of(&e))
        }
        Err(panic) => {
            let e = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!("ShouldRateLimit failed: {e}");
            Err(Status::internal("the rate limit decision failed"))
        }
    }
}
