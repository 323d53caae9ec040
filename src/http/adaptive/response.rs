//! The answer to a request the adaptive limit refused: 503 or 429.

use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use super::body::AdaptiveBody;
use crate::adaptive::LimitAlgorithm;
use crate::error::AcquireError;
use crate::time::Clock;

/// The status the server layer refuses a request with when the adaptive limit is
/// reached. A closed limiter is always answered 503.
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::RejectStatus;
///
/// assert_eq!(RejectStatus::default().status(), http::StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(RejectStatus::TooManyRequests.status(), 429);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectStatus {
    /// 503 Service Unavailable (the default): the server is overloaded, whoever
    /// asks. Load balancers and gRPC clients (as `UNAVAILABLE`) retry elsewhere.
    #[default]
    ServiceUnavailable,
    /// 429 Too Many Requests: read by most clients as "slow down"; note that it
    /// usually means *this client* asks too much, which an adaptive limit does not
    /// know.
    TooManyRequests,
}

impl RejectStatus {
    /// The HTTP status.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::RejectStatus;
    ///
    /// assert_eq!(RejectStatus::ServiceUnavailable.status(), 503);
    /// ```
    pub fn status(self) -> StatusCode {
        match self {
            RejectStatus::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            RejectStatus::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

/// How the server layer answers a refusal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Rejection {
    pub(super) status: RejectStatus,
    /// Delay-seconds for `Retry-After`, at least 1.
    pub(super) retry_after: Option<u64>,
}

/// Why a request was refused, as the answer tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Every permit was held (and the wait, if any, timed out or found the backlog
    /// full).
    Overloaded,
    Closed,
}

impl Refusal {
    pub(super) fn of(error: &AcquireError) -> Refusal {
        match error {
            AcquireError::Closed => Refusal::Closed,
            _ => Refusal::Overloaded,
        }
    }
}

impl Rejection {
    /// The response to `refusal`: JSON, not to be stored.
    pub(super) fn respond<B, L: LimitAlgorithm, C: Clock, K>(
        &self,
        refusal: Refusal,
    ) -> Response<AdaptiveBody<B, L, C, K>> {
        let (status, body) = match refusal {
            Refusal::Overloaded => (
                self.status.status(),
                r#"{"error":"overloaded","message":"concurrency limit reached"}"#,
            ),
            Refusal::Closed => (
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"error":"limiter_closed","message":"the server is shutting down"}"#,
            ),
        };
        let mut response = Response::new(AdaptiveBody::full(bytes::Bytes::from_static(
            body.as_bytes(),
        )));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let (Refusal::Overloaded, Some(seconds)) = (refusal, self.retry_after) {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
