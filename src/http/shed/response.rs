//! The answer to a shed request: the configured status, `Retry-After`, and JSON.

use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response};
use serde::Serialize;

use super::body::ShedBody;
use super::layer::Settings;
use crate::http::wire::seconds_up;
use crate::shed::Shed;

/// The JSON body of a shed request's answer.
#[derive(Serialize)]
struct Problem<'a> {
    /// A stable, machine-readable code: `shed`.
    error: &'static str,
    /// For people.
    message: String,
    /// The class shed.
    class: &'a str,
    /// Why ([`ShedReason::as_str`](crate::shed::ShedReason::as_str)).
    reason: &'static str,
    /// The seconds sent in `Retry-After`, left out with the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
}

/// The `Retry-After` of `shed`, in delay-seconds: its hint, or the layer's fallback
/// without one, cut to `max` and rounded up to whole seconds, at least 1; `None`
/// when there is neither.
pub(super) fn retry_after_seconds(shed: &Shed, settings: &Settings) -> Option<u64> {
    shed.retry_after()
        .or(settings.fallback_retry_after)
        .map(|hint| seconds_up(hint.min(settings.max_retry_after)).max(1))
}

/// The answer to a shed request.
pub(super) fn shed<B, T>(shed: &Shed, settings: &Settings) -> Response<ShedBody<B, T>> {
    let seconds = retry_after_seconds(shed, settings);
    let mut message = format!(
        "the server is overloaded: {} requests are shed ({})",
        shed.class(),
        shed.reason()
    );
    if let Some(seconds) = seconds {
        message.push_str(&format!(", retry after {seconds} s"));
    }
    let problem = Problem {
        error: "shed",
        message,
        class: shed.class().name(),
        reason: shed.reason().as_str(),
        retry_after: seconds,
    };
    // A struct of strings and integers always serializes.
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = Response::new(ShedBody::full(body));
    *response.status_mut() = settings.status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(seconds) = seconds {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shed::{Classes, ShedReason};
    use http::StatusCode;
    use std::time::Duration;

    fn seconds(hint: Option<Duration>, max: Duration) -> Option<u64> {
        seconds_with(hint, max, None)
    }

    fn seconds_with(
        hint: Option<Duration>,
        max: Duration,
        fallback: Option<Duration>,
    ) -> Option<u64> {
        let shed = Shed::new(Classes::google().lowest(), ShedReason::Full, hint);
        let settings = Settings {
            status: StatusCode::SERVICE_UNAVAILABLE,
            max_retry_after: max,
            fallback_retry_after: fallback,
        };
        retry_after_seconds(&shed, &settings)
    }

    #[test]
    fn the_fallback_stands_in_for_a_missing_hint_only() {
        let hour = Duration::from_secs(3600);
        let second = Some(Duration::from_secs(1));
        assert_eq!(seconds_with(None, hour, second), Some(1));
        assert_eq!(
            seconds_with(None, hour, Some(Duration::from_millis(2_500))),
            Some(3)
        );
        assert_eq!(
            seconds_with(Some(Duration::from_secs(7)), hour, second),
            Some(7)
        );
        assert_eq!(
            seconds_with(None, Duration::from_secs(2), Some(Duration::from_secs(9))),
            Some(2)
        );
        assert_eq!(seconds_with(None, hour, None), None);
    }

    #[test]
    fn retry_after_is_rounded_up_capped_and_at_least_one_second() {
        let hour = Duration::from_secs(3600);
        assert_eq!(seconds(None, hour), None);
        assert_eq!(seconds(Some(Duration::ZERO), hour), Some(1));
        assert_eq!(seconds(Some(Duration::from_nanos(1)), hour), Some(1));
        assert_eq!(seconds(Some(Duration::from_millis(2_001)), hour), Some(3));
        assert_eq!(seconds(Some(Duration::MAX), hour), Some(3600));
        assert_eq!(seconds(Some(Duration::MAX), Duration::MAX), Some(u64::MAX));
        assert_eq!(
            seconds(Some(Duration::from_secs(90)), Duration::from_millis(1_500)),
            Some(2)
        );
    }
}
