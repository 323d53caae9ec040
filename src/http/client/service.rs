//! [`Throttle`]: the [`Service`] that waits, calls, and reads the answer.

use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tower_service::Service;

use super::layer::Settings;
use super::pause::Shared;
use super::{Cost, ThrottleError, ThrottleFuture};
#[cfg(feature = "outbound")]
use crate::outbound::{Answer, FeedbackHandle};
use crate::permits::PermitSource;
use crate::store::StoreError;
use crate::sync::Arc;
use crate::time::Nanos;
use crate::time::{Clock, MonotonicClock};

/// A client [`Service`] that waits for permits before each call and pauses every call
/// when the server says so; made by [`ThrottleLayer`](super::ThrottleLayer).
///
/// It is always ready: the wait happens in the [`ThrottleFuture`], which holds a clone
/// of the inner service and readies it only once the permit is granted, so that a
/// waiting call holds none of the inner service's capacity (a pooled connection, a
/// concurrency slot).
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use http::{Request, Response};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
/// use tollgate::http::client::ThrottleLayer;
/// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
///
/// # futures::executor::block_on(async {
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(2)?), ManualClock::new());
/// let client = ServiceBuilder::new()
///     .layer(ThrottleLayer::new(limiter))
///     .service(service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) }));
/// let response = client.oneshot(Request::new(())).await?;
/// assert_eq!(response.status(), 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Throttle<S, P, C = MonotonicClock> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared<P, C>>,
    pub(super) settings: Settings,
    #[cfg(feature = "outbound")]
    pub(super) feedback: Option<FeedbackHandle>,
}

impl<S, P, C: Clock> Throttle<S, P, C> {
    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::Layer;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let throttle = ThrottleLayer::with_clock(limiter, clock).layer("inner");
    /// assert_eq!(*throttle.get_ref(), "inner");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The end of the current pause on the layer's clock, if one is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::Layer;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let throttle = ThrottleLayer::with_clock(limiter, clock).layer("inner");
    /// assert_eq!(throttle.paused_until(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn paused_until(&self) -> Option<Nanos> {
        self.shared.paused_until()
    }

    /// Holds every call through this layer off for `d` from now, unless a longer pause
    /// is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::Layer;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let throttle = ThrottleLayer::with_clock(limiter, clock).layer("inner");
    /// throttle.pause_for(Duration::from_secs(2));
    /// assert_eq!(throttle.paused_until(), Some(tollgate::time::Nanos::new(2_000_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn pause_for(&self, d: Duration) {
        self.shared.pause_for(d)
    }
}

impl<S: Clone, P, C> Clone for Throttle<S, P, C> {
    fn clone(&self) -> Self {
        Throttle {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            settings: self.settings,
            #[cfg(feature = "outbound")]
            feedback: self.feedback.clone(),
        }
    }
}

impl<S, P, C, B, RB> Service<Request<B>> for Throttle<S, P, C>
where
    C: Clock,
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    P: PermitSource,
    P::Error: Into<StoreError>,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = ThrottleError<S::Error>;
    type Future = ThrottleFuture<Response<RB>, S::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    /// Waits for the end of any pause and for the call's permits, then calls the inner
    /// service, then pauses every caller if the answer asks for it.
    ///
    /// # Errors
    ///
    /// The future fails with [`ThrottleError::Insufficient`] at once when the call
    /// costs more than the limiter can ever grant, [`ThrottleError::TimedOut`] when
    /// the wait would exceed the timeout (at once when that is known),
    /// [`ThrottleError::Closed`] or [`ThrottleError::Store`] when the permit source
    /// fails, and [`ThrottleError::Inner`] with the inner service's error. A 429 is a
    /// response, not an error.
    fn call(&mut self, request: Request<B>) -> Self::Future {
        let mut inner = self.inner.clone();
        let shared = Arc::clone(&self.shared);
        let settings = self.settings;
        #[cfg(feature = "outbound")]
        let feedback = self.feedback.clone();
        let cost = request
            .extensions()
            .get::<Cost>()
            .map_or(settings.cost, |c| c.0);
        ThrottleFuture::new(async move {
            // Held until the answer arrives: a semaphore's permit bounds calls in flight.
            let _permit = shared
                .admit(cost, settings.timeout)
                .await
                .map_err(ThrottleError::widen)?;
            poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(ThrottleError::Inner)?;
            let response = inner.call(request).await.map_err(ThrottleError::Inner)?;
            shared.observe(&response, settings.backoff);
            #[cfg(feature = "outbound")]
            if let Some(feedback) = &feedback {
                feedback.on_answer(&Answer::from_response(&response, shared.now_since_epoch()));
            }
            Ok(response)
        })
    }
}
