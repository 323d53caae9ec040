//! [`AdaptiveBody`]: the response body that holds the request's permit to its end.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::http::body::{BodyKind, BodyKindProj};

use super::classify::ClassifyResponse;
use crate::adaptive::{AdaptivePermit, LimitAlgorithm};
use crate::observe::Outcome;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

use super::classify::HttpStatus;

pin_project! {
    /// The body of an adaptive layer's responses: the inner service's body, holding
    /// the request's [`AdaptivePermit`] until it ends, or the layer's own answer to a
    /// request it refused.
    ///
    /// **The request ends when its body does**: the permit is given back, with the
    /// outcome the classifier read from the head (or from the trailers, which may
    /// override it), when the inner body yields its last frame, reports
    /// [`is_end_stream`](Body::is_end_stream), or fails. A streamed response holds
    /// its permit while it streams, and its latency covers the whole body: the
    /// time the service was busy with it. A body that is empty from the start ends
    /// the request with its head.
    ///
    /// A body that fails counts as dropped. A body dropped before its end (the
    /// client went away) counts as dropped if its head did, and is ignored
    /// otherwise: its latency is cut short and says nothing about the limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use http_body_util::BodyExt;
    /// use tower::{Layer, ServiceExt};
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// # futures::executor::block_on(async {
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let hello = tower::service_fn(|_: ()| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
    /// });
    /// let response = AdaptiveLayer::new(Arc::clone(&limiter)).layer(hello).oneshot(()).await?;
    /// assert_eq!(limiter.inflight(), 1); // the body holds the permit
    /// assert_eq!(response.into_body().collect().await?.to_bytes(), "hello");
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct AdaptiveBody<B, L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock, K = HttpStatus> {
        #[pin]
        kind: BodyKind<B>,
        end: Option<End<L, C, K>>,
    }
}

/// The permit of a request whose body has not ended, and how to end it.
pub(super) struct End<L: LimitAlgorithm, C: Clock, K> {
    permit: Option<AdaptivePermit<L, C>>,
    classify: Arc<K>,
    /// What the head said.
    outcome: Outcome,
}

impl<L: LimitAlgorithm, C: Clock, K> End<L, C, K> {
    pub(super) fn new(permit: AdaptivePermit<L, C>, classify: Arc<K>, outcome: Outcome) -> Self {
        End {
            permit: Some(permit),
            classify,
            outcome,
        }
    }

    fn finish(&mut self, outcome: Outcome) {
        if let Some(permit) = self.permit.take() {
            permit.finish(outcome);
        }
    }
}

/// Ended early: a drop stays a drop; anything else has no full latency to learn from.
impl<L: LimitAlgorithm, C: Clock, K> Drop for End<L, C, K> {
    fn drop(&mut self) {
        let outcome = match self.outcome {
            Outcome::Dropped => Outcome::Dropped,
            _ => Outcome::Ignored,
        };
        self.finish(outcome);
    }
}

impl<B: Body, L: LimitAlgorithm, C: Clock, K> AdaptiveBody<B, L, C, K> {
    /// The inner service's `body`, ending the request with it.
    pub(super) fn admitted(body: B, mut end: End<L, C, K>) -> Self {
        let end = if body.is_end_stream() {
            let outcome = end.outcome;
            end.finish(outcome);
            None
        } else {
            Some(end)
        };
        AdaptiveBody {
            kind: BodyKind::inner(body),
            end,
        }
    }
}

impl<B, L: LimitAlgorithm, C: Clock, K> AdaptiveBody<B, L, C, K> {
    /// The layer's own answer: `bytes` in one frame.
    pub(super) fn full(bytes: Bytes) -> Self {
        AdaptiveBody {
            kind: BodyKind::full(bytes),
            end: None,
        }
    }
}

impl<B, L: LimitAlgorithm, C: Clock, K> fmt::Debug for AdaptiveBody<B, L, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            BodyKind::Inner { .. } => "inner",
            BodyKind::Full { .. } => "refused",
        };
        f.debug_struct("AdaptiveBody")
            .field("kind", &kind)
            .field("holds_permit", &self.end.is_some())
            .finish()
    }
}

impl<B, L, C, K> Body for AdaptiveBody<B, L, C, K>
where
    B: Body,
    B::Data: From<Bytes>,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        match this.kind.project() {
            BodyKindProj::Full { bytes } => BodyKind::<B>::poll_full(bytes),
            BodyKindProj::Inner { mut body } => {
                let polled = ready!(body.as_mut().poll_frame(cx));
                if let Some(mut end) = this.end.take() {
                    let outcome = match &polled {
                        None => Some(end.outcome),
                        Some(Err(_)) => Some(Outcome::Dropped),
                        Some(Ok(frame)) => match frame.trailers_ref() {
                            Some(trailers) => Some(
                                end.classify
                                    .classify_trailers(trailers)
                                    .unwrap_or(end.outcome),
                            ),
                            None if body.is_end_stream() => Some(end.outcome),
                            None => None,
                        },
                    };
                    match outcome {
                        Some(outcome) => end.finish(outcome),
                        None => *this.end = Some(end),
                    }
                }
                Poll::Ready(polled)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.kind.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.kind.size_hint()
    }
}
