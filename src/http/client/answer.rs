//! Reading an [`Answer`] from an HTTP response, with the parsers of
//! [`wire`](crate::http::wire): what the client layer reports to its
//! [`feedback`](super::ThrottleLayer::feedback).

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, Response, StatusCode};

use crate::http::wire::{backoff, rate_limit, rate_limit_policy};
use crate::outbound::Answer;

/// # Reading HTTP responses (feature `http`)
impl Answer {
    /// What `response` says of its call; see [`from_headers`](Answer::from_headers).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::Answer;
    ///
    /// let response = http::Response::builder()
    ///     .status(429)
    ///     .header("retry-after", "3")
    ///     .body(())?;
    /// let answer = Answer::from_response(&response, Duration::ZERO);
    /// assert!(answer.is_throttled());
    /// assert_eq!(answer.retry_after(), Some(Duration::from_secs(3)));
    /// # Ok::<(), http::Error>(())
    /// ```
    pub fn from_response<B>(response: &Response<B>, now_since_epoch: Duration) -> Answer {
        Answer::from_headers(response.status(), response.headers(), now_since_epoch)
    }

    /// What a response with `status` and `headers` says of its call, at the Unix time
    /// `now_since_epoch` (for `Retry-After` dates):
    ///
    /// - **throttled**: a 429, or a 503 with a `Retry-After` (RFC 9110's overload);
    /// - **retry after**: the longest hold-off the response asks for, as
    ///   [`wire::backoff`](crate::http::wire::backoff) reads it (`Retry-After`, a
    ///   `RateLimit` item with `r=0`, or the legacy `X-RateLimit-*` pair);
    /// - **remaining**: of the `RateLimit` items with calls left and a `t`, the one
    ///   allowing the fewest calls a second;
    /// - **quota**: of the `RateLimit-Policy` items counting requests over a window,
    ///   the one allowing the fewest calls a second.
    ///
    /// A field that cannot be read is ignored.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use tollgate::outbound::Answer;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("ratelimit", HeaderValue::from_static(r#""a";r=50;t=10, "b";r=3;t=6"#));
    /// headers.insert("ratelimit-policy", HeaderValue::from_static(r#""a";q=100;w=60"#));
    /// let answer = Answer::from_headers(StatusCode::OK, &headers, Duration::ZERO);
    /// assert!(!answer.is_throttled());
    /// assert_eq!(answer.remaining(), Some((3, Duration::from_secs(6))));
    /// assert_eq!(answer.quota(), Some((100, Duration::from_secs(60))));
    /// assert_eq!(answer.retry_after(), None);
    /// ```
    pub fn from_headers(
        status: StatusCode,
        headers: &HeaderMap,
        now_since_epoch: Duration,
    ) -> Answer {
        let throttled = status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::SERVICE_UNAVAILABLE && headers.contains_key(RETRY_AFTER));
        let mut answer = if throttled {
            Answer::throttled()
        } else {
            Answer::accepted()
        };
        if let Some(d) = backoff(headers, now_since_epoch) {
            answer = answer.with_retry_after(d);
        }
        let remaining = rate_limit(headers)
            .into_iter()
            .filter(|item| item.remaining() > 0)
            .filter_map(|item| Some((item.remaining(), item.reset()?)))
            .filter(|(_, t)| !t.is_zero())
            .min_by(|a, b| per_second(*a).total_cmp(&per_second(*b)));
        if let Some((r, t)) = remaining {
            answer = answer.with_remaining(r, t);
        }
        let quota = rate_limit_policy(headers)
            .into_iter()
            .filter(|p| p.unit().is_none_or(|u| u == "requests"))
            .filter_map(|p| Some((p.quota(), p.window()?)))
            .filter(|(_, w)| !w.is_zero())
            .min_by(|a, b| per_second(*a).total_cmp(&per_second(*b)));
        if let Some((q, w)) = quota {
            answer = answer.with_quota(q, w);
        }
        answer
    }
}

fn per_second((count, window): (u64, Duration)) -> f64 {
    count as f64 / window.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn throttled_is_a_429_or_an_overloaded_503() {
        let none = HeaderMap::new();
        let now = Duration::ZERO;
        assert!(Answer::from_headers(StatusCode::TOO_MANY_REQUESTS, &none, now).is_throttled());
        assert!(!Answer::from_headers(StatusCode::SERVICE_UNAVAILABLE, &none, now).is_throttled());
        let retry = headers(&[("retry-after", "1")]);
        assert!(Answer::from_headers(StatusCode::SERVICE_UNAVAILABLE, &retry, now).is_throttled());
        assert!(!Answer::from_headers(StatusCode::OK, &retry, now).is_throttled());
        assert_eq!(
            Answer::from_headers(StatusCode::OK, &none, now),
            Answer::accepted()
        );
    }

    #[test]
    fn exhausted_items_pause_and_the_rest_pace() {
        let h = headers(&[
            (
                "ratelimit",
                r#""a";r=0;t=4, "b";r=10;t=0, "c";r=2;t=20, "d";r=5"#,
            ),
            (
                "ratelimit-policy",
                r#""a";q=10;w=1, "bytes";q=1;w=60;qu="content-bytes", "c";q=7, "z";q=9;w=0"#,
            ),
        ]);
        let answer = Answer::from_headers(StatusCode::OK, &h, Duration::ZERO);
        assert_eq!(answer.retry_after(), Some(Duration::from_secs(4)));
        assert_eq!(answer.remaining(), Some((2, Duration::from_secs(20))));
        assert_eq!(answer.quota(), Some((10, Duration::from_secs(1))));
    }

    #[test]
    fn garbage_and_extremes_are_ignored_or_saturate() {
        let h = headers(&[
            ("ratelimit", "not a list ((("),
            ("ratelimit-policy", r#""a";q=999999999999999;w=1"#),
            ("retry-after", "99999999999999999999999"),
        ]);
        let answer = Answer::from_headers(StatusCode::TOO_MANY_REQUESTS, &h, Duration::MAX);
        assert_eq!(answer.retry_after(), Some(Duration::from_secs(u64::MAX)));
        assert_eq!(answer.remaining(), None);
        assert_eq!(
            answer.quota(),
            Some((999_999_999_999_999, Duration::from_secs(1)))
        );
    }
}
