//! The HTTP side: `/json`, `/healthcheck` and `/metrics`.
//!
//! As the Go service answers:
//! - `/json` (any method; `POST` in practice) takes a `RateLimitRequest` in JSON (see
//!   [`json`](crate::json)) and answers the `RateLimitResponse` in JSON with status
//!   200, 429 when the overall code is `OVER_LIMIT`, or 500 when it is `UNKNOWN`. A
//!   body that is not a request, and a request the service refuses (an empty domain,
//!   no descriptors, a store failure), answer `400 Bad Request` in plain text.
//! - `/healthcheck` answers `200` with the body `OK` while the service is healthy, a
//!   bare `500` otherwise, draining included (see [`Health`]).
//! - `/metrics` answers the Prometheus text of a [`MetricsText`].

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::engine::Engine;
use crate::health::Health;
use crate::json::{request_from_json, response_to_json};

/// Renders the metrics in the Prometheus text format, on each scrape.
pub type MetricsText = Arc<dyn Fn() -> String + Send + Sync>;

/// The content type of the Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone)]
struct AppState {
    engine: Arc<Engine>,
    health: Health,
    metrics: MetricsText,
}

/// The routes of the HTTP listener: `/json`, `/healthcheck`, `/metrics`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate_rls::domains::Domains;
/// use tollgate_rls::engine::Engine;
/// use tollgate_rls::health::Health;
/// use tollgate_rls::http::{MetricsText, router};
///
/// let engine = Arc::new(Engine::in_memory(Domains::default())?);
/// let metrics: MetricsText = Arc::new(String::new);
/// let app: axum::Router = router(engine, Health::new(false), metrics);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn router(engine: Arc<Engine>, health: Health, metrics: MetricsText) -> Router {
    Router::new()
        .route("/json", any(json))
        .route("/healthcheck", any(healthcheck))
        .route("/metrics", get(metrics_text))
        .with_state(AppState {
            engine,
            health,
            metrics,
        })
}

/// The routes of the Prometheus listener: the metrics at `path` only.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate_rls::http::{MetricsText, metrics_router};
///
/// let metrics: MetricsText = Arc::new(|| "up 1\n".to_owned());
/// let app: axum::Router = metrics_router("/metrics", metrics);
/// ```
pub fn metrics_router(path: &str, metrics: MetricsText) -> Router {
    Router::new().route(
        path,
        get(move || {
            let metrics = metrics.clone();
            async move { ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], metrics()) }
        }),
    )
}

async fn json(State(app): State<AppState>, body: Bytes) -> Response {
    let request = match request_from_json(&body) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!("error: {e}");
            return plain_status(StatusCode::BAD_REQUEST);
        }
    };
    let engine = app.engine.clone();
    // In a task of its own, so that a panic is a 500, not a dropped connection.
    let decided = tokio::spawn(async move { engine.should_rate_limit(&request).await }).await;
    let response = match decided {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            tracing::warn!("error: {e}");
            return plain_status(StatusCode::BAD_REQUEST);
        }
        Err(e) => {
            tracing::error!("the rate limit decision failed: {e}");
            return plain_status(StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    let status = match Code::try_from(response.overall_code) {
        Ok(Code::Ok) => StatusCode::OK,
        Ok(Code::OverLimit) => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        response_to_json(&response),
    )
        .into_response()
}

/// Go's `http.Error(w, http.StatusText(code), code)`.
fn plain_status(status: StatusCode) -> Response {
    let text = format!("{}\n", status.canonical_reason().unwrap_or(""));
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        text,
    )
        .into_response()
}

async fn healthcheck(State(app): State<AppState>) -> Response {
    if app.health.is_healthy() {
        (StatusCode::OK, "OK").into_response()
    } else {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

async fn metrics_text(State(app): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], (app.metrics)()).into_response()
}
