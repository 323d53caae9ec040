//! [`AdaptiveClientLayer`] and [`AdaptiveClient`]: outbound calls held to a limit
//! that follows the partner's latency and refusals.

use std::fmt;
use std::task::{Context, Poll};

use http::Response;
use tower_layer::Layer;
use tower_service::Service;

use super::body::AdaptiveBody;
use super::classify::{ClassifyError, ClassifyResponse, HttpStatus};
use super::error::ClientError;
use super::future::ClientFuture;
use crate::adaptive::{AdaptiveLimiter, LimitAlgorithm};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

/// A tower layer that holds outbound calls to an [`AdaptiveLimiter`]'s limit: each
/// call takes a permit (waiting as the limiter's [`WhenLimited`](crate::adaptive::WhenLimited)
/// says), and the partner's answer, read by a classifier, moves the limit. By
/// default ([`HttpStatus`]) 429, 503 and 504 are drops, and so is every error of
/// the inner service (a timeout, a refused connection); use
/// [`GrpcStatus`](super::GrpcStatus) for a gRPC partner.
///
/// A call the limiter refuses fails with [`ClientError::Refused`] and is not
/// sent. As on the server, the permit is held until the response's body ends.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
/// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
/// use tollgate::http::adaptive::AdaptiveClientLayer;
///
/// # futures::executor::block_on(async {
/// let aimd = AimdLimit::builder().min_limit(1).initial_limit(10).build()?;
/// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
/// let partner = tower::service_fn(|_: ()| async {
///     http::Response::builder().status(503).body(http_body_util::Empty::<bytes::Bytes>::new())
/// });
/// let client = AdaptiveClientLayer::new(Arc::clone(&limiter)).layer(partner);
/// let response = client.oneshot(()).await?;
/// drop(response); // a 503 from the partner: a drop
/// assert_eq!(limiter.limit(), 9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct AdaptiveClientLayer<
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
    K = HttpStatus,
> {
    limiter: Arc<AdaptiveLimiter<L, C>>,
    classify: Arc<K>,
}

impl<L: LimitAlgorithm, C: Clock> AdaptiveClientLayer<L, C> {
    /// Holds calls to `limiter`'s limit, reading answers by status ([`HttpStatus`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::{limit::VegasLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveClientLayer;
    ///
    /// let mode = WhenLimited::fifo(Duration::from_millis(100))?;
    /// let layer = AdaptiveClientLayer::new(Arc::new(AdaptiveLimiter::new(VegasLimit::new(), mode)?));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(limiter: Arc<AdaptiveLimiter<L, C>>) -> AdaptiveClientLayer<L, C> {
        AdaptiveClientLayer {
            limiter,
            classify: Arc::new(HttpStatus::new()),
        }
    }
}

impl<L: LimitAlgorithm, C: Clock, K> AdaptiveClientLayer<L, C, K> {
    /// Reads answers with `classify` instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::{AdaptiveClientLayer, GrpcStatus};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveClientLayer::new(limiter).classify(GrpcStatus::new());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn classify<K2>(self, classify: K2) -> AdaptiveClientLayer<L, C, K2> {
        AdaptiveClientLayer {
            limiter: self.limiter,
            classify: Arc::new(classify),
        }
    }

    /// The limiter, shared with every service the layer makes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveClientLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveClientLayer::new(Arc::clone(&limiter));
    /// assert!(Arc::ptr_eq(layer.limiter(), &limiter));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter<L, C>> {
        &self.limiter
    }
}

impl<L: LimitAlgorithm, C: Clock, K> Clone for AdaptiveClientLayer<L, C, K> {
    fn clone(&self) -> Self {
        AdaptiveClientLayer {
            limiter: Arc::clone(&self.limiter),
            classify: Arc::clone(&self.classify),
        }
    }
}

impl<L: LimitAlgorithm, C: Clock, K> fmt::Debug for AdaptiveClientLayer<L, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveClientLayer")
            .field("limit", &self.limiter.limit())
            .finish_non_exhaustive()
    }
}

impl<S, L: LimitAlgorithm, C: Clock, K> Layer<S> for AdaptiveClientLayer<L, C, K> {
    type Service = AdaptiveClient<S, L, C, K>;

    fn layer(&self, inner: S) -> AdaptiveClient<S, L, C, K> {
        AdaptiveClient {
            inner,
            limiter: Arc::clone(&self.limiter),
            classify: Arc::clone(&self.classify),
        }
    }
}

/// The client service an [`AdaptiveClientLayer`] wraps around `S`.
///
/// When the limiter fails fast, `call` takes a permit and calls the inner service
/// at once, or refuses. In the waiting modes the [`ClientFuture`] takes or waits
/// for the permit when polled, holding the inner service `poll_ready` made ready
/// (a clone left in its place, so `S: Clone`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
/// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
/// use tollgate::http::adaptive::AdaptiveClientLayer;
///
/// # futures::executor::block_on(async {
/// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
/// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
/// let mut client = AdaptiveClientLayer::new(limiter).layer(tower::service_fn(|_: ()| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hi"))))
/// }));
/// let held = client.ready().await?.call(()).await?;
/// let refused = client.ready().await?.call(()).await.unwrap_err();
/// assert!(refused.is_refused());
/// # drop(held);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct AdaptiveClient<
    S,
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
    K = HttpStatus,
> {
    inner: S,
    limiter: Arc<AdaptiveLimiter<L, C>>,
    classify: Arc<K>,
}

impl<S, L: LimitAlgorithm, C: Clock, K> AdaptiveClient<S, L, C, K> {
    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveClientLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let client = AdaptiveClientLayer::new(limiter).layer("partner");
    /// assert_eq!(*client.get_ref(), "partner");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The limiter, shared with the layer and every clone.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveClientLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let client = AdaptiveClientLayer::new(Arc::clone(&limiter)).layer(());
    /// assert!(Arc::ptr_eq(client.limiter(), &limiter));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter<L, C>> {
        &self.limiter
    }
}

impl<S: Clone, L: LimitAlgorithm, C: Clock, K> Clone for AdaptiveClient<S, L, C, K> {
    fn clone(&self) -> Self {
        AdaptiveClient {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            classify: Arc::clone(&self.classify),
        }
    }
}

impl<S: fmt::Debug, L: LimitAlgorithm, C: Clock, K> fmt::Debug for AdaptiveClient<S, L, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveClient")
            .field("inner", &self.inner)
            .field("limit", &self.limiter.limit())
            .finish_non_exhaustive()
    }
}

impl<S, Req, B, L, C, K> Service<Req> for AdaptiveClient<S, L, C, K>
where
    S: Service<Req, Response = Response<B>> + Clone,
    B: http_body::Body,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse + ClassifyError<S::Error>,
{
    type Response = Response<AdaptiveBody<B, L, C, K>>;
    type Error = ClientError<S::Error>;
    type Future = ClientFuture<S, Req, L, C, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ClientError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        ClientFuture::start(&mut self.inner, &self.limiter, &self.classify, request)
    }
}
