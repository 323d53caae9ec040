//! [`AdaptiveLayer`]: the server layer's configuration.

use std::fmt;
use std::time::Duration;

use tower_layer::Layer;

use super::classify::HttpStatus;
use super::response::{RejectStatus, Rejection};
use super::service::AdaptiveService;
use crate::adaptive::{AdaptiveLimiter, LimitAlgorithm};
use crate::error::ConfigError;
use crate::http::wire::seconds_up;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

/// A tower layer that holds a server's requests to an [`AdaptiveLimiter`]'s limit:
/// each request takes a permit (waiting as the limiter's
/// [`WhenLimited`](crate::adaptive::WhenLimited) says), the response's body holds it to its end,
/// and a classifier reads the response as a success, a drop or ignored.
///
/// Refused requests are answered 503 (or 429, [`reject_with`](AdaptiveLayer::reject_with)),
/// with `Retry-After: 1` ([`DEFAULT_RETRY_AFTER`](AdaptiveLayer::DEFAULT_RETRY_AFTER);
/// set by [`retry_after`](AdaptiveLayer::retry_after), left out by
/// [`without_retry_after`](AdaptiveLayer::without_retry_after)), as the shedding
/// layer answers. Every
/// clone of the layer, and every service it makes, shares the one limiter.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::adaptive::{limit::Gradient2Limit, AdaptiveLimiter, WhenLimited};
/// use tollgate::http::adaptive::{AdaptiveLayer, RejectStatus};
///
/// let limiter = Arc::new(AdaptiveLimiter::new(Gradient2Limit::new(), WhenLimited::lifo(100, Duration::from_millis(50))?)?);
/// let layer = AdaptiveLayer::new(limiter)
///     .reject_with(RejectStatus::TooManyRequests)
///     .retry_after(Duration::from_secs(1))?;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct AdaptiveLayer<
    L: LimitAlgorithm = Box<dyn LimitAlgorithm>,
    C: Clock = MonotonicClock,
    K = HttpStatus,
> {
    limiter: Arc<AdaptiveLimiter<L, C>>,
    classify: Arc<K>,
    rejection: Rejection,
}

impl<L: LimitAlgorithm, C: Clock> AdaptiveLayer<L, C> {
    /// The longest `Retry-After` accepted: an hour, as the client layer's longest
    /// pause. An overload that lasts longer is not one a client should wait out.
    pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

    /// The `Retry-After` refusals carry unless told otherwise: 1 s, the shortest
    /// the field can say, and the shedding layer's own default. An adaptive limit
    /// does not know when a permit comes back; it comes back when a request in
    /// flight ends, which at the limit is about one latency away. A client that
    /// honours the field comes back soon, and does not hammer the server meanwhile.
    pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

    /// Holds requests to `limiter`'s limit, reading responses by status
    /// ([`HttpStatus`]); refuses with 503 and `Retry-After: 1`
    /// ([`DEFAULT_RETRY_AFTER`](AdaptiveLayer::DEFAULT_RETRY_AFTER)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::VegasLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(VegasLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(limiter);
    /// assert_eq!(layer.limiter().limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(limiter: Arc<AdaptiveLimiter<L, C>>) -> AdaptiveLayer<L, C> {
        AdaptiveLayer {
            limiter,
            classify: Arc::new(HttpStatus::new()),
            rejection: Rejection {
                retry_after: Some(seconds_up(Self::DEFAULT_RETRY_AFTER)),
                ..Rejection::default()
            },
        }
    }
}

impl<L: LimitAlgorithm, C: Clock, K> AdaptiveLayer<L, C, K> {
    /// Reads responses with `classify` instead: a [`GrpcStatus`](super::GrpcStatus),
    /// a configured [`HttpStatus`], a closure ([`classify_fn`](super::classify_fn)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::{AdaptiveLayer, GrpcStatus};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(limiter).classify(GrpcStatus::new());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn classify<K2>(self, classify: K2) -> AdaptiveLayer<L, C, K2> {
        AdaptiveLayer {
            limiter: self.limiter,
            classify: Arc::new(classify),
            rejection: self.rejection,
        }
    }

    /// The status refused requests get: 503 (the default) or 429.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::{AdaptiveLayer, RejectStatus};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(limiter).reject_with(RejectStatus::TooManyRequests);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn reject_with(mut self, status: RejectStatus) -> Self {
        self.rejection.status = status;
        self
    }

    /// Sends `Retry-After` with refusals: `after` in whole seconds, rounded up,
    /// instead of [`DEFAULT_RETRY_AFTER`](AdaptiveLayer::DEFAULT_RETRY_AFTER) (an
    /// adaptive limit does not know when a permit comes back, so the value is a hint
    /// you choose).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for zero; [`ConfigError::TooLong`] beyond
    /// [`MAX_RETRY_AFTER`](AdaptiveLayer::MAX_RETRY_AFTER).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(limiter);
    /// assert!(layer.clone().retry_after(Duration::ZERO).is_err());
    /// assert!(layer.clone().retry_after(Duration::MAX).is_err());
    /// let layer = layer.retry_after(Duration::from_millis(1_500))?; // "Retry-After: 2"
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn retry_after(mut self, after: Duration) -> Result<Self, ConfigError> {
        if after.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "retry_after",
            });
        }
        if after > AdaptiveLayer::<L, C>::MAX_RETRY_AFTER {
            return Err(ConfigError::TooLong {
                parameter: "retry_after",
                max: AdaptiveLayer::<L, C>::MAX_RETRY_AFTER,
                within: "a Retry-After the client layer waits out",
            });
        }
        self.rejection.retry_after = Some(seconds_up(after));
        Ok(self)
    }

    /// Refusals carry no `Retry-After`: for clients that would wait it out where
    /// another server could answer at once (behind a load balancer that retries
    /// elsewhere).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(limiter).without_retry_after();
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn without_retry_after(mut self) -> Self {
        self.rejection.retry_after = None;
        self
    }

    /// The limiter, shared with every service the layer makes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let layer = AdaptiveLayer::new(Arc::clone(&limiter));
    /// assert!(Arc::ptr_eq(layer.limiter(), &limiter));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter<L, C>> {
        &self.limiter
    }
}

impl<L: LimitAlgorithm, C: Clock, K> Clone for AdaptiveLayer<L, C, K> {
    fn clone(&self) -> Self {
        AdaptiveLayer {
            limiter: Arc::clone(&self.limiter),
            classify: Arc::clone(&self.classify),
            rejection: self.rejection,
        }
    }
}

impl<L: LimitAlgorithm, C: Clock, K> fmt::Debug for AdaptiveLayer<L, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLayer")
            .field("limit", &self.limiter.limit())
            .field("reject_with", &self.rejection.status)
            .field("retry_after", &self.rejection.retry_after)
            .finish_non_exhaustive()
    }
}

impl<S, L: LimitAlgorithm, C: Clock, K> Layer<S> for AdaptiveLayer<L, C, K> {
    type Service = AdaptiveService<S, L, C, K>;

    fn layer(&self, inner: S) -> AdaptiveService<S, L, C, K> {
        AdaptiveService::new(
            inner,
            Arc::clone(&self.limiter),
            Arc::clone(&self.classify),
            self.rejection,
        )
    }
}
