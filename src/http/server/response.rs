//! The responses the layer answers itself: 429, and the errors of a check.

use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use serde::Serialize;

use super::body::RateLimitBody;
use super::fields;
use crate::decision::Denied;
use crate::http::key::KeyError;
use crate::http::limits::{CheckError, Verdict};
use crate::http::wire;
use crate::store::StoreError;

/// The JSON body of every response the layer answers itself.
#[derive(Serialize)]
struct Problem<'a> {
    /// A stable, machine-readable code.
    error: &'static str,
    /// For people.
    message: String,
    /// Seconds until the same request can pass; `null` when it never can, left out
    /// when the request was not decided or waits for a release.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<Option<u64>>,
    /// The decisive policy's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'a str>,
}

/// The answer to a denied `verdict`.
pub(super) fn denied<B>(verdict: &Verdict, legacy: bool) -> Response<RateLimitBody<B>> {
    let policy = verdict.decisive_policy().map(|p| p.name.as_str());
    let (status, problem) = match &verdict.decision {
        Some(Err(Denied::Limited(limited))) => {
            let seconds = wire::retry_after_seconds(limited);
            let when = match seconds {
                Some(seconds) => format!("retry after {seconds} s"),
                None => "retry once a request in progress completes".to_owned(),
            };
            let message = match policy {
                Some(name) => format!("rate limit \"{name}\" exceeded: {when}"),
                None => format!("rate limit exceeded: {when}"),
            };
            (
                StatusCode::TOO_MANY_REQUESTS,
                Problem {
                    error: "rate_limited",
                    message,
                    retry_after: seconds.map(Some),
                    policy,
                },
            )
        }
        Some(Err(Denied::Insufficient(i))) => (
            StatusCode::TOO_MANY_REQUESTS,
            Problem {
                error: "cost_exceeds_quota",
                message: format!(
                    "this request costs {} permits, more than {} ever grants at once \
                     ({}): it can never pass, do not retry it unchanged",
                    i.requested(),
                    policy.map_or("the rate limit".to_owned(), |name| format!(
                        "rate limit \"{name}\""
                    )),
                    i.capacity()
                ),
                retry_after: Some(None),
                policy,
            },
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            Problem {
                error: "limiter_closed",
                message: "the rate limiter is closed".to_owned(),
                retry_after: None,
                policy: None,
            },
        ),
    };
    let mut response = json(status, &problem);
    fields::insert(response.headers_mut(), verdict, legacy);
    response
}

/// The answer to a request that could not be checked.
pub(super) fn check_error<B>(error: &CheckError) -> Response<RateLimitBody<B>> {
    let (status, code, message) = match error {
        CheckError::Key(KeyError::NoPeerAddress) => {
            tracing::error!(
                "rate limit by client address, but the request has no peer address: serve \
                 axum with into_make_service_with_connect_info::<SocketAddr>(), or insert \
                 the SocketAddr into the request's extensions"
            );
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "no_peer_address",
                "the server cannot tell who sent the request".to_owned(),
            )
        }
        CheckError::Key(KeyError::MissingHeader(name)) => (
            StatusCode::BAD_REQUEST,
            "missing_key",
            format!("the request has no valid {name} header"),
        ),
        CheckError::Key(other) => (StatusCode::BAD_REQUEST, "invalid_key", other.to_string()),
        CheckError::Store(StoreError::KeyTooLong { len, max }) => (
            StatusCode::BAD_REQUEST,
            "invalid_key",
            format!("the request's rate-limit key is too long ({len} bytes, at most {max})"),
        ),
        CheckError::Store(e) => {
            tracing::warn!(error = %e, "rate limiter store failed; answering 503");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "limiter_unavailable",
                "the rate limiter could not decide; try again later".to_owned(),
            )
        }
    };
    json(
        status,
        &Problem {
            error: code,
            message,
            retry_after: None,
            policy: None,
        },
    )
}

fn json<B>(status: StatusCode, problem: &Problem<'_>) -> Response<RateLimitBody<B>> {
    // A struct of strings and integers always serializes.
    let body = serde_json::to_vec(problem).unwrap_or_default();
    let mut response = Response::new(RateLimitBody::full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{InsufficientCapacity, Limited};
    use crate::http::limits::Policy;
    use http_body_util::Empty;
    use std::time::Duration;

    type Body = Empty<bytes::Bytes>;

    fn body_of(response: Response<RateLimitBody<Body>>) -> String {
        use http_body::Body as _;
        let mut body = response.into_body();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap()
            }
            other => panic!("{other:?}"),
        }
    }

    fn policies() -> Vec<Policy> {
        vec![Policy::new("default", 10, Duration::from_secs(1))]
    }

    #[test]
    fn limited_body() {
        let limited = Limited::new(Duration::from_millis(100), 10, 0, Duration::from_secs(1));
        let verdict = Verdict::new(Err(Denied::Limited(limited)), policies(), 0);
        let response = denied::<Body>(&verdict, false);
        assert_eq!(response.status(), 429);
        assert_eq!(
            body_of(response),
            r#"{"error":"rate_limited","message":"rate limit \"default\" exceeded: retry after 1 s","retry_after":1,"policy":"default"}"#
        );
    }

    #[test]
    fn insufficient_body_has_a_null_retry_after() {
        let never = Denied::Insufficient(InsufficientCapacity::new(12, 10));
        let verdict = Verdict::new(Err(never), policies(), 0);
        let response = denied::<Body>(&verdict, false);
        assert_eq!(response.status(), 429);
        assert!(response.headers().get("retry-after").is_none());
        assert_eq!(
            body_of(response),
            r#"{"error":"cost_exceeds_quota","message":"this request costs 12 permits, more than rate limit \"default\" ever grants at once (10): it can never pass, do not retry it unchanged","retry_after":null,"policy":"default"}"#
        );
    }

    #[test]
    fn closed_is_unavailable() {
        let verdict = Verdict::new(Err(Denied::Closed), policies(), 0);
        let response = denied::<Body>(&verdict, false);
        assert_eq!(response.status(), 503);
        assert_eq!(
            body_of(response),
            r#"{"error":"limiter_closed","message":"the rate limiter is closed"}"#
        );
    }

    #[test]
    fn errors_map_to_statuses() {
        let cases = [
            (
                CheckError::Key(KeyError::NoPeerAddress),
                500,
                "no_peer_address",
            ),
            (
                CheckError::Key(KeyError::MissingHeader(http::HeaderName::from_static(
                    "x-k",
                ))),
                400,
                "missing_key",
            ),
            (
                CheckError::Key(KeyError::Other("no".into())),
                400,
                "invalid_key",
            ),
            (
                CheckError::Store(StoreError::KeyTooLong {
                    len: 2000,
                    max: 1024,
                }),
                400,
                "invalid_key",
            ),
            (
                CheckError::Store(StoreError::CircuitOpen),
                503,
                "limiter_unavailable",
            ),
        ];
        for (error, status, code) in cases {
            let response = check_error::<Body>(&error);
            assert_eq!(response.status(), status);
            assert_eq!(response.headers()["cache-control"], "no-store");
            assert_eq!(response.headers()["content-type"], "application/json");
            let body = body_of(response);
            assert!(
                body.starts_with(&format!(r#"{{"error":"{code}","message":"#)),
                "{body}"
            );
        }
    }
}
