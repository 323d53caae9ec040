//! Classifiers: which outcome a response, its trailers or an error is for the limit.

use std::fmt;

use http::response::Parts;
use http::{HeaderMap, StatusCode};

use crate::observe::Outcome;

/// Reads a response as an [`Outcome`] for the limit algorithm: a success (its
/// latency is a sample), a drop (the limit is too high) or ignored.
///
/// [`classify`](ClassifyResponse::classify) reads the head; when the body ends with
/// trailers, [`classify_trailers`](ClassifyResponse::classify_trailers) may override it
/// (a gRPC status sent at the end of a stream). Errors of the inner service are
/// read by [`ClassifyError`].
///
/// Provided: [`HttpStatus`] (the default), [`GrpcStatus`], and [`classify_fn`]
/// for a closure; [`on_error`](ClassifyResponse::on_error) replaces how errors are read.
///
/// # Examples
///
/// ```
/// use http::response::Parts;
/// use tollgate::http::adaptive::ClassifyResponse;
/// use tollgate::observe::Outcome;
///
/// /// Anything slower than the client would wait is a drop.
/// struct GaveUp;
///
/// impl ClassifyResponse for GaveUp {
///     fn classify(&self, response: &Parts) -> Outcome {
///         match response.headers.get("x-gave-up") {
///             Some(_) => Outcome::Dropped,
///             None => Outcome::Success,
///         }
///     }
/// }
///
/// let (parts, ()) = http::Response::builder().header("x-gave-up", "1").body(()).unwrap().into_parts();
/// assert_eq!(GaveUp.classify(&parts), Outcome::Dropped);
/// ```
pub trait ClassifyResponse {
    /// The outcome the response's head says.
    fn classify(&self, response: &Parts) -> Outcome;

    /// The outcome the body's trailers say, replacing the head's; `None` keeps it.
    /// Not called for a body that ends without trailers.
    fn classify_trailers(&self, trailers: &HeaderMap) -> Option<Outcome> {
        let _ = trailers;
        None
    }

    /// This classifier, with errors of the inner service read by `classify_error`
    /// instead of counting as drops.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io;
    /// use tollgate::http::adaptive::{ClassifyResponse, ClassifyError, HttpStatus};
    /// use tollgate::observe::Outcome;
    ///
    /// // Only timeouts say the limit is too high; other failures are the request's own.
    /// let classifier = HttpStatus::new().on_error(|error: &io::Error| match error.kind() {
    ///     io::ErrorKind::TimedOut => Outcome::Dropped,
    ///     _ => Outcome::Ignored,
    /// });
    /// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    /// assert_eq!(classifier.classify_error(&refused), Outcome::Ignored);
    /// ```
    fn on_error<F>(self, classify_error: F) -> OnError<Self, F>
    where
        Self: Sized,
    {
        OnError {
            classify: self,
            classify_error,
        }
    }
}

/// Reads an error of the inner service (of type `E`) as an [`Outcome`].
///
/// Every classifier this module provides counts every error as a drop: a timeout
/// (tower's `Elapsed`, a deadline) is the plainest sign of overload, and a service
/// that fails is one whose latency cannot be trusted. Use
/// [`ClassifyResponse::on_error`] to tell errors apart.
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::{ClassifyError, GrpcStatus};
/// use tollgate::observe::Outcome;
///
/// assert_eq!(GrpcStatus::new().classify_error(&"connection reset"), Outcome::Dropped);
/// ```
pub trait ClassifyError<E> {
    /// The outcome `error` says.
    fn classify_error(&self, error: &E) -> Outcome;
}

/// The default classifier: by HTTP status, the conventions of Netflix's servlet
/// limiter with overload statuses as drops.
///
/// | Status | Outcome |
/// |---|---|
/// | 429 Too Many Requests, 503 Service Unavailable, 504 Gateway Timeout | dropped |
/// | any other 5xx | [`server_errors`](HttpStatus::server_errors): success by default |
/// | 1xx to 4xx | success |
///
/// 429 and 503 are a downstream saying it is overloaded, 504 a timeout: each says
/// the limit is too high. Other server errors are successes by default, as
/// Netflix's servlet filter counts every response it sees: a 500 is usually a bug,
/// not load, and its latency is still a sample. [`outcome`](HttpStatus::outcome)
/// overrides any one status. Errors of the inner service are drops (Netflix's
/// filter ignores exceptions; here the common error is a timeout, which is load:
/// see [`ClassifyResponse::on_error`] to ignore the others).
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use tollgate::http::adaptive::HttpStatus;
/// use tollgate::observe::Outcome;
///
/// let classifier = HttpStatus::new();
/// assert_eq!(classifier.status(StatusCode::SERVICE_UNAVAILABLE), Outcome::Dropped);
/// assert_eq!(classifier.status(StatusCode::INTERNAL_SERVER_ERROR), Outcome::Success);
/// assert_eq!(classifier.status(StatusCode::NOT_FOUND), Outcome::Success);
///
/// let strict = HttpStatus::new().server_errors(Outcome::Dropped);
/// assert_eq!(strict.status(StatusCode::INTERNAL_SERVER_ERROR), Outcome::Dropped);
/// ```
#[derive(Clone, Debug)]
pub struct HttpStatus {
    server_errors: Outcome,
    overrides: Vec<(StatusCode, Outcome)>,
}

impl Default for HttpStatus {
    fn default() -> Self {
        HttpStatus::new()
    }
}

impl HttpStatus {
    /// 429, 503 and 504 are drops; everything else is a success.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::HttpStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// assert_eq!(HttpStatus::new().status(http::StatusCode::TOO_MANY_REQUESTS), Outcome::Dropped);
    /// ```
    pub fn new() -> HttpStatus {
        HttpStatus {
            server_errors: Outcome::Success,
            overrides: Vec::new(),
        }
    }

    /// What 5xx statuses other than 503 and 504 count as (success by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::HttpStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// let classifier = HttpStatus::new().server_errors(Outcome::Ignored);
    /// assert_eq!(classifier.status(http::StatusCode::BAD_GATEWAY), Outcome::Ignored);
    /// ```
    pub fn server_errors(mut self, outcome: Outcome) -> HttpStatus {
        self.server_errors = outcome;
        self
    }

    /// What `status` counts as, whatever the rules above say (the last call for a
    /// status wins).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use tollgate::http::adaptive::HttpStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// // A 429 of our own (per-user quota) says nothing about the service's load.
    /// let classifier = HttpStatus::new().outcome(StatusCode::TOO_MANY_REQUESTS, Outcome::Ignored);
    /// assert_eq!(classifier.status(StatusCode::TOO_MANY_REQUESTS), Outcome::Ignored);
    /// ```
    pub fn outcome(mut self, status: StatusCode, outcome: Outcome) -> HttpStatus {
        self.overrides.retain(|(s, _)| *s != status);
        self.overrides.push((status, outcome));
        self
    }

    /// The outcome of a response with `status`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::HttpStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// assert_eq!(HttpStatus::new().status(http::StatusCode::OK), Outcome::Success);
    /// ```
    pub fn status(&self, status: StatusCode) -> Outcome {
        if let Some((_, outcome)) = self.overrides.iter().find(|(s, _)| *s == status) {
            return *outcome;
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Outcome::Dropped,
            s if s.is_server_error() => self.server_errors,
            _ => Outcome::Success,
        }
    }
}

impl ClassifyResponse for HttpStatus {
    fn classify(&self, response: &Parts) -> Outcome {
        self.status(response.status)
    }
}

impl<E> ClassifyError<E> for HttpStatus {
    fn classify_error(&self, _: &E) -> Outcome {
        Outcome::Dropped
    }
}

/// gRPC status codes, as sent in `grpc-status`.
const OK: u32 = 0;
const CANCELLED: u32 = 1;
const DEADLINE_EXCEEDED: u32 = 4;
const RESOURCE_EXHAUSTED: u32 = 8;
const UNAVAILABLE: u32 = 14;
/// What gRPC reads an HTTP status other than 200 as, when no `grpc-status` came
/// (the gRPC spec's "HTTP to gRPC status code mapping"); only the ones we tell
/// apart: 429, 502, 503 and 504 are UNAVAILABLE, the rest are not overload.
const UNKNOWN: u32 = 2;

/// The classifier for gRPC: by the `grpc-status` of the response's head (a
/// trailers-only response) or, for a streamed response, of its trailers.
///
/// | `grpc-status` | Outcome |
/// |---|---|
/// | 14 `UNAVAILABLE`, 4 `DEADLINE_EXCEEDED`, 8 `RESOURCE_EXHAUSTED` | dropped |
/// | 1 `CANCELLED` | ignored (the caller gave up: no latency to learn from) |
/// | 0 `OK` | success |
/// | any other code | [`other_errors`](GrpcStatus::other_errors): success by default |
/// | not a number | ignored |
///
/// A response with no `grpc-status` in its head is read by its HTTP status, as a
/// gRPC client does: 200 is a success until the trailers say otherwise; 429, 502,
/// 503 and 504 are `UNAVAILABLE` (dropped); anything else is `UNKNOWN`. Errors of
/// the inner service are drops. Reading the status needs no gRPC crate: it is a
/// header.
///
/// Netflix's interceptors differ from each other: the client's drops only
/// `UNAVAILABLE` and ignores every other error; the server's drops `CANCELLED` and
/// `DEADLINE_EXCEEDED` and counts the rest as successes. Both are a few
/// [`outcome`](GrpcStatus::outcome) calls away.
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::{ClassifyResponse, GrpcStatus};
/// use tollgate::observe::Outcome;
///
/// let head = |status: &str| {
///     http::Response::builder().header("grpc-status", status).body(()).unwrap().into_parts().0
/// };
/// let grpc = GrpcStatus::new();
/// assert_eq!(grpc.classify(&head("0")), Outcome::Success);
/// assert_eq!(grpc.classify(&head("14")), Outcome::Dropped);
/// assert_eq!(grpc.classify(&head("1")), Outcome::Ignored);
///
/// let mut trailers = http::HeaderMap::new();
/// trailers.insert("grpc-status", "4".parse().unwrap());
/// assert_eq!(grpc.classify_trailers(&trailers), Some(Outcome::Dropped));
///
/// // Netflix's client interceptor: only UNAVAILABLE is a drop, other errors are ignored.
/// let netflix_client = GrpcStatus::new()
///     .other_errors(Outcome::Ignored)
///     .outcome(4, Outcome::Ignored)
///     .outcome(8, Outcome::Ignored);
/// assert_eq!(netflix_client.code(4), Outcome::Ignored);
/// assert_eq!(netflix_client.code(14), Outcome::Dropped);
/// ```
#[derive(Clone, Debug)]
pub struct GrpcStatus {
    other_errors: Outcome,
    overrides: Vec<(u32, Outcome)>,
}

impl Default for GrpcStatus {
    fn default() -> Self {
        GrpcStatus::new()
    }
}

impl GrpcStatus {
    /// The classifier described above.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::GrpcStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// assert_eq!(GrpcStatus::new().code(14), Outcome::Dropped);
    /// ```
    pub fn new() -> GrpcStatus {
        GrpcStatus {
            other_errors: Outcome::Success,
            overrides: Vec::new(),
        }
    }

    /// What codes other than `OK` and the four above count as (success by
    /// default: an error such as `NOT_FOUND` is the request's, and its latency is
    /// still a sample).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::GrpcStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// let grpc = GrpcStatus::new().other_errors(Outcome::Ignored);
    /// assert_eq!(grpc.code(5), Outcome::Ignored); // NOT_FOUND
    /// assert_eq!(grpc.code(0), Outcome::Success);
    /// ```
    pub fn other_errors(mut self, outcome: Outcome) -> GrpcStatus {
        self.other_errors = outcome;
        self
    }

    /// What `code` counts as, whatever the rules above say (the last call for a
    /// code wins).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::GrpcStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// // Netflix's server interceptor: a cancelled call is a drop.
    /// let grpc = GrpcStatus::new().outcome(1, Outcome::Dropped);
    /// assert_eq!(grpc.code(1), Outcome::Dropped);
    /// ```
    pub fn outcome(mut self, code: u32, outcome: Outcome) -> GrpcStatus {
        self.overrides.retain(|(c, _)| *c != code);
        self.overrides.push((code, outcome));
        self
    }

    /// The outcome of a call that ended with status `code`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::adaptive::GrpcStatus;
    /// use tollgate::observe::Outcome;
    ///
    /// assert_eq!(GrpcStatus::new().code(8), Outcome::Dropped); // RESOURCE_EXHAUSTED
    /// assert_eq!(GrpcStatus::new().code(5), Outcome::Success); // NOT_FOUND
    /// ```
    pub fn code(&self, code: u32) -> Outcome {
        if let Some((_, outcome)) = self.overrides.iter().find(|(c, _)| *c == code) {
            return *outcome;
        }
        match code {
            OK => Outcome::Success,
            UNAVAILABLE | DEADLINE_EXCEEDED | RESOURCE_EXHAUSTED => Outcome::Dropped,
            CANCELLED => Outcome::Ignored,
            _ => self.other_errors,
        }
    }

    /// The outcome `grpc-status` in `headers` says, if it is there.
    fn header(&self, headers: &HeaderMap) -> Option<Outcome> {
        let value = headers.get("grpc-status")?;
        let code = value
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        Some(code.map_or(Outcome::Ignored, |code| self.code(code)))
    }
}

impl ClassifyResponse for GrpcStatus {
    fn classify(&self, response: &Parts) -> Outcome {
        if let Some(outcome) = self.header(&response.headers) {
            return outcome;
        }
        let code = match response.status {
            StatusCode::OK => OK,
            StatusCode::TOO_MANY_REQUESTS
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => UNAVAILABLE,
            _ => UNKNOWN,
        };
        self.code(code)
    }

    fn classify_trailers(&self, trailers: &HeaderMap) -> Option<Outcome> {
        self.header(trailers)
    }
}

impl<E> ClassifyError<E> for GrpcStatus {
    fn classify_error(&self, _: &E) -> Outcome {
        Outcome::Dropped
    }
}

/// A closure as a [`ClassifyResponse`]: made by [`classify_fn`].
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::{classify_fn, ClassifyResponse};
/// use tollgate::observe::Outcome;
///
/// let classifier = classify_fn(|response: &http::response::Parts| {
///     if response.status == 418 { Outcome::Ignored } else { Outcome::Success }
/// });
/// let (teapot, ()) = http::Response::builder().status(418).body(()).unwrap().into_parts();
/// assert_eq!(classifier.classify(&teapot), Outcome::Ignored);
/// ```
#[derive(Clone, Copy)]
pub struct ClassifyFn<F> {
    f: F,
}

/// Classifies each response's head with `f`; errors of the inner service are
/// drops (see [`ClassifyResponse::on_error`]), trailers are not read.
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::{classify_fn, AdaptiveLayer};
/// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
/// use tollgate::observe::Outcome;
/// use std::sync::Arc;
///
/// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
/// let layer = AdaptiveLayer::new(limiter).classify(classify_fn(|response: &http::response::Parts| {
///     match response.headers.get("x-overloaded") {
///         Some(_) => Outcome::Dropped,
///         None => Outcome::Success,
///     }
/// }));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub fn classify_fn<F>(f: F) -> ClassifyFn<F>
where
    F: Fn(&Parts) -> Outcome,
{
    ClassifyFn { f }
}

impl<F> fmt::Debug for ClassifyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassifyFn").finish_non_exhaustive()
    }
}

impl<F: Fn(&Parts) -> Outcome> ClassifyResponse for ClassifyFn<F> {
    fn classify(&self, response: &Parts) -> Outcome {
        (self.f)(response)
    }
}

impl<F, E> ClassifyError<E> for ClassifyFn<F> {
    fn classify_error(&self, _: &E) -> Outcome {
        Outcome::Dropped
    }
}

/// A classifier whose errors are read by a closure: made by
/// [`ClassifyResponse::on_error`].
///
/// # Examples
///
/// ```
/// use tollgate::http::adaptive::{ClassifyResponse, ClassifyError, GrpcStatus};
/// use tollgate::observe::Outcome;
///
/// let classifier = GrpcStatus::new().on_error(|_: &std::io::Error| Outcome::Ignored);
/// let error = std::io::Error::other("reset");
/// assert_eq!(classifier.classify_error(&error), Outcome::Ignored);
/// ```
#[derive(Clone, Copy)]
pub struct OnError<K, F> {
    classify: K,
    classify_error: F,
}

impl<K: fmt::Debug, F> fmt::Debug for OnError<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnError")
            .field("classify", &self.classify)
            .finish_non_exhaustive()
    }
}

impl<K: ClassifyResponse, F> ClassifyResponse for OnError<K, F> {
    fn classify(&self, response: &Parts) -> Outcome {
        self.classify.classify(response)
    }

    fn classify_trailers(&self, trailers: &HeaderMap) -> Option<Outcome> {
        self.classify.classify_trailers(trailers)
    }
}

impl<K, F, E> ClassifyError<E> for OnError<K, F>
where
    F: Fn(&E) -> Outcome,
{
    fn classify_error(&self, error: &E) -> Outcome {
        (self.classify_error)(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, grpc: Option<&str>) -> Parts {
        let mut builder = http::Response::builder().status(status);
        if let Some(grpc) = grpc {
            builder = builder.header("grpc-status", grpc);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn http_statuses() {
        let c = HttpStatus::new();
        for (status, outcome) in [
            (200, Outcome::Success),
            (301, Outcome::Success),
            (404, Outcome::Success),
            (429, Outcome::Dropped),
            (500, Outcome::Success),
            (502, Outcome::Success),
            (503, Outcome::Dropped),
            (504, Outcome::Dropped),
        ] {
            assert_eq!(c.classify(&head(status, None)), outcome, "{status}");
        }
        let c = c
            .outcome(StatusCode::BAD_GATEWAY, Outcome::Ignored)
            .outcome(StatusCode::BAD_GATEWAY, Outcome::Dropped);
        assert_eq!(c.status(StatusCode::BAD_GATEWAY), Outcome::Dropped);
        assert_eq!(c.overrides.len(), 1);
    }

    #[test]
    fn grpc_statuses_in_the_head_and_by_http_status() {
        let c = GrpcStatus::new();
        assert_eq!(c.classify(&head(200, Some("14"))), Outcome::Dropped);
        assert_eq!(c.classify(&head(200, Some("4"))), Outcome::Dropped);
        assert_eq!(c.classify(&head(200, Some("8"))), Outcome::Dropped);
        assert_eq!(c.classify(&head(200, Some("1"))), Outcome::Ignored);
        assert_eq!(c.classify(&head(200, Some("13"))), Outcome::Success);
        assert_eq!(c.classify(&head(200, Some(" 0 "))), Outcome::Success);
        // Garbage and absurd values are not a status.
        assert_eq!(c.classify(&head(200, Some("x"))), Outcome::Ignored);
        assert_eq!(c.classify(&head(200, Some("-1"))), Outcome::Ignored);
        assert_eq!(
            c.classify(&head(200, Some("99999999999999999999"))),
            Outcome::Ignored
        );
        assert_eq!(c.classify(&head(200, None)), Outcome::Success);
        assert_eq!(c.classify(&head(503, None)), Outcome::Dropped);
        assert_eq!(c.classify(&head(502, None)), Outcome::Dropped);
        assert_eq!(c.classify(&head(500, None)), Outcome::Success);
        assert_eq!(c.classify_trailers(&HeaderMap::new()), None);
        // Overrides apply in the head, the trailers and by HTTP status.
        let c = c
            .outcome(14, Outcome::Ignored)
            .other_errors(Outcome::Dropped);
        assert_eq!(c.classify(&head(200, Some("14"))), Outcome::Ignored);
        assert_eq!(c.classify(&head(503, None)), Outcome::Ignored);
        assert_eq!(c.classify(&head(500, None)), Outcome::Dropped, "UNKNOWN");
        assert_eq!(c.classify(&head(200, Some("0"))), Outcome::Success);
        assert_eq!(c.classify(&head(200, Some("x"))), Outcome::Ignored);
    }
}
