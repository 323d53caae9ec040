//! [`AdaptiveService`]: the server service, one permit per request.

use std::fmt;
use std::task::{Context, Poll};

use http::Response;
use tower_service::Service;

use super::body::AdaptiveBody;
use super::classify::{ClassifyError, ClassifyResponse, HttpStatus};
use super::future::AdaptiveFuture;
use super::response::Rejection;
use crate::adaptive::{AdaptiveLimiter, LimitAlgorithm};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

/// The service an [`AdaptiveLayer`](super::AdaptiveLayer) wraps around `S`.
///
/// In [`WhenLimited::FailFast`](crate::adaptive::WhenLimited::FailFast), `call` takes a permit
/// and calls the inner service at once, or refuses. In the waiting modes the
/// [`AdaptiveFuture`] takes or waits for the permit when polled, holding the inner
/// service `poll_ready` made ready and leaving a clone in its place (so
/// `S: Clone`, as tower's guide advises).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
/// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
/// use tollgate::http::adaptive::AdaptiveLayer;
///
/// # futures::executor::block_on(async {
/// let aimd = AimdLimit::builder().min_limit(1).initial_limit(1).build()?;
/// let limiter = Arc::new(AdaptiveLimiter::new(aimd, WhenLimited::FailFast)?);
/// let mut service = AdaptiveLayer::new(limiter).layer(tower::service_fn(|_: ()| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hi"))))
/// }));
/// let first = service.ready().await?.call(()).await?; // holds the only permit
/// let second = service.ready().await?.call(()).await?;
/// assert_eq!(second.status(), 503);
/// # drop(first);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct AdaptiveService<
    S,
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
    K = HttpStatus,
> {
    inner: S,
    limiter: Arc<AdaptiveLimiter<L, C>>,
    classify: Arc<K>,
    rejection: Rejection,
}

impl<S, L: LimitAlgorithm, C: Clock, K> AdaptiveService<S, L, C, K> {
    pub(super) fn new(
        inner: S,
        limiter: Arc<AdaptiveLimiter<L, C>>,
        classify: Arc<K>,
        rejection: Rejection,
    ) -> Self {
        AdaptiveService {
            inner,
            limiter,
            classify,
            rejection,
        }
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::Layer;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let service = AdaptiveLayer::new(limiter).layer(42);
    /// assert_eq!(*service.get_ref(), 42);
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
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(());
    /// assert!(Arc::ptr_eq(service.limiter(), &limiter));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter<L, C>> {
        &self.limiter
    }
}

impl<S: Clone, L: LimitAlgorithm, C: Clock, K> Clone for AdaptiveService<S, L, C, K> {
    fn clone(&self) -> Self {
        AdaptiveService {
            inner: self.inner.clone(),
            limiter: Arc::clone(&self.limiter),
            classify: Arc::clone(&self.classify),
            rejection: self.rejection,
        }
    }
}

impl<S: fmt::Debug, L: LimitAlgorithm, C: Clock, K> fmt::Debug for AdaptiveService<S, L, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveService")
            .field("inner", &self.inner)
            .field("limit", &self.limiter.limit())
            .field("rejection", &self.rejection)
            .finish_non_exhaustive()
    }
}

impl<S, Req, B, L, C, K> Service<Req> for AdaptiveService<S, L, C, K>
where
    S: Service<Req, Response = Response<B>> + Clone,
    B: http_body::Body,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse + ClassifyError<S::Error>,
{
    type Response = Response<AdaptiveBody<B, L, C, K>>;
    type Error = S::Error;
    type Future = AdaptiveFuture<S, Req, L, C, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        AdaptiveFuture::start(
            &mut self.inner,
            &self.limiter,
            &self.classify,
            self.rejection,
            request,
        )
    }
}
