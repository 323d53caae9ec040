//! The response futures: a permit, then the inner call, then the body that ends it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::body::{AdaptiveBody, End};
use super::classify::{ClassifyError, ClassifyResponse, HttpStatus};
use super::error::ClientError;
use super::response::{Refusal, Rejection};
use crate::adaptive::{
    AdaptiveAcquire, AdaptiveLimiter, AdaptivePermit, LimitAlgorithm, WhenLimited,
};
use crate::decision::Denied;
use crate::error::AcquireError;
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock};

pin_project! {
    /// One call: a permit (at once, or waited for as the limiter's mode says), the
    /// inner service's call, and its response classified.
    struct Call<S, Req, L: LimitAlgorithm, C: Clock, K>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, L, C>,
        classify: Arc<K>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req, L: LimitAlgorithm, C: Clock>
    where
        S: Service<Req>,
    {
        /// Refused in `call`; answered when polled.
        Refused {
            error: Option<AcquireError>,
        },
        /// Waiting for a permit, with the inner service `poll_ready` made ready.
        Waiting {
            acquire: AdaptiveAcquire<L, C>,
            pending: Option<(S, Req)>,
        },
        Calling {
            #[pin]
            future: S::Future,
            permit: Option<AdaptivePermit<L, C>>,
        },
        Done,
    }
}

impl<S: Service<Req>, Req, L: LimitAlgorithm, C: Clock, K> Call<S, Req, L, C, K> {
    /// Failing fast, takes a permit and calls `inner` at once, or refuses. In the
    /// waiting modes, the future takes or waits for the permit when polled, holding
    /// `inner` (the service `poll_ready` made ready, a clone left in its place):
    /// one attempt per request, so the limiter's events count each request once.
    fn start(
        inner: &mut S,
        limiter: &Arc<AdaptiveLimiter<L, C>>,
        classify: &Arc<K>,
        request: Req,
    ) -> Self
    where
        S: Clone,
    {
        let state = if matches!(limiter.mode(), WhenLimited::FailFast) {
            match limiter.try_acquire_owned() {
                Ok(permit) => State::Calling {
                    future: inner.call(request),
                    permit: Some(permit),
                },
                Err(denied) => State::Refused {
                    error: Some(match denied {
                        Denied::Limited(_) => AcquireError::TimedOut,
                        Denied::Insufficient(i) => AcquireError::Insufficient(i),
                        Denied::Closed => AcquireError::Closed,
                    }),
                },
            }
        } else {
            let clone = inner.clone();
            let ready = std::mem::replace(inner, clone);
            State::Waiting {
                acquire: limiter.acquire(),
                pending: Some((ready, request)),
            }
        };
        Call {
            state,
            classify: Arc::clone(classify),
        }
    }

    fn state(&self) -> &'static str {
        match self.state {
            State::Refused { .. } => "refused",
            State::Waiting { .. } => "waiting",
            State::Calling { .. } => "calling",
            State::Done => "done",
        }
    }
}

type Output<B, L, C, K, E> = Result<Response<AdaptiveBody<B, L, C, K>>, ClientError<E>>;

impl<S, Req, B, L, C, K> Future for Call<S, Req, L, C, K>
where
    S: Service<Req, Response = Response<B>>,
    B: http_body::Body,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse + ClassifyError<S::Error>,
{
    type Output = Output<B, L, C, K, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Refused { error } => {
                    let error = error.take().unwrap_or(AcquireError::Closed);
                    this.state.set(State::Done);
                    return Poll::Ready(Err(ClientError::Refused(error)));
                }
                StateProj::Waiting { acquire, pending } => {
                    let acquired = ready!(Pin::new(acquire).poll(cx));
                    let next = match (acquired, pending.take()) {
                        (Ok(permit), Some((mut inner, request))) => State::Calling {
                            future: inner.call(request),
                            permit: Some(permit),
                        },
                        (Err(error), _) => State::Refused { error: Some(error) },
                        (Ok(_), None) => {
                            panic!("adaptive AdaptiveFuture polled after it completed")
                        }
                    };
                    this.state.set(next);
                }
                StateProj::Calling { future, permit } => {
                    let result = ready!(future.poll(cx));
                    let permit = permit.take();
                    this.state.set(State::Done);
                    let Some(permit) = permit else {
                        panic!("adaptive AdaptiveFuture polled after it completed");
                    };
                    return Poll::Ready(match result {
                        Ok(response) => {
                            let (parts, body) = response.into_parts();
                            let outcome = this.classify.classify(&parts);
                            let end = End::new(permit, Arc::clone(this.classify), outcome);
                            Ok(Response::from_parts(
                                parts,
                                AdaptiveBody::admitted(body, end),
                            ))
                        }
                        Err(error) => {
                            permit.finish(this.classify.classify_error(&error));
                            Err(ClientError::Inner(error))
                        }
                    });
                }
                StateProj::Done => panic!("adaptive AdaptiveFuture polled after it completed"),
            }
        }
    }
}

pin_project! {
    /// The response future of an [`AdaptiveService`](super::AdaptiveService): waits
    /// for a permit as the limiter's [`WhenLimited`] says, then calls the inner service; a
    /// refused request is answered by the layer (503 or 429).
    ///
    /// The permit goes into the response's [`AdaptiveBody`]; an error of the inner
    /// service ends it at once, classified by [`ClassifyError`] (a drop by
    /// default).
    ///
    /// # Cancel safety
    ///
    /// Dropped while it waits, it leaves the limiter's queue, and a permit granted
    /// to it and not yet handed over goes to the next waiter; the request was not
    /// sent. Dropped while the inner service runs, the inner future is dropped and
    /// the permit given back as ignored.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    /// use tollgate::adaptive::{limit::AimdLimit, AdaptiveLimiter, WhenLimited};
    /// use tollgate::http::adaptive::AdaptiveLayer;
    ///
    /// # futures::executor::block_on(async {
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let mut service = AdaptiveLayer::new(Arc::clone(&limiter)).layer(tower::service_fn(|_: ()| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// }));
    /// let future = service.call(());
    /// assert_eq!(limiter.inflight(), 1);
    /// drop(future); // cancelled: the permit goes back, ignored
    /// assert_eq!(limiter.inflight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct AdaptiveFuture<S, Req, L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock, K = HttpStatus>
    where
        S: Service<Req>,
    {
        #[pin]
        call: Call<S, Req, L, C, K>,
        rejection: Rejection,
    }
}

impl<S, Req, L, C, K> AdaptiveFuture<S, Req, L, C, K>
where
    S: Service<Req> + Clone,
    L: LimitAlgorithm,
    C: Clock,
{
    pub(super) fn start(
        inner: &mut S,
        limiter: &Arc<AdaptiveLimiter<L, C>>,
        classify: &Arc<K>,
        rejection: Rejection,
        request: Req,
    ) -> Self {
        AdaptiveFuture {
            call: Call::start(inner, limiter, classify, request),
            rejection,
        }
    }
}

impl<S: Service<Req>, Req, L: LimitAlgorithm, C: Clock, K> fmt::Debug
    for AdaptiveFuture<S, Req, L, C, K>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveFuture")
            .field("state", &self.call.state())
            .finish_non_exhaustive()
    }
}

impl<S, Req, B, L, C, K> Future for AdaptiveFuture<S, Req, L, C, K>
where
    S: Service<Req, Response = Response<B>>,
    B: http_body::Body,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse + ClassifyError<S::Error>,
{
    type Output = Result<Response<AdaptiveBody<B, L, C, K>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(match ready!(this.call.poll(cx)) {
            Ok(response) => Ok(response),
            Err(ClientError::Inner(error)) => Err(error),
            Err(ClientError::Refused(error)) => Ok(this.rejection.respond(Refusal::of(&error))),
        })
    }
}

pin_project! {
    /// The response future of an [`AdaptiveClient`](super::AdaptiveClient): waits
    /// for a permit as the limiter's [`WhenLimited`] says, then calls the inner service; a
    /// refused call fails with [`ClientError::Refused`] and is not sent.
    ///
    /// # Cancel safety
    ///
    /// As the server's [`AdaptiveFuture`]: dropped while it waits, it leaves the
    /// queue and nothing was sent; dropped during the call, the permit is given
    /// back as ignored.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
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
    /// let limiter = Arc::new(AdaptiveLimiter::new(AimdLimit::new(), WhenLimited::FailFast)?);
    /// let client = AdaptiveClientLayer::new(limiter).layer(tower::service_fn(|_: ()| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// }));
    /// let future = client.oneshot(());
    /// assert_eq!(future.await?.status(), 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct ClientFuture<S, Req, L: LimitAlgorithm = Box<dyn LimitAlgorithm>, C: Clock = MonotonicClock, K = HttpStatus>
    where
        S: Service<Req>,
    {
        #[pin]
        call: Call<S, Req, L, C, K>,
    }
}

impl<S, Req, L, C, K> ClientFuture<S, Req, L, C, K>
where
    S: Service<Req> + Clone,
    L: LimitAlgorithm,
    C: Clock,
{
    pub(super) fn start(
        inner: &mut S,
        limiter: &Arc<AdaptiveLimiter<L, C>>,
        classify: &Arc<K>,
        request: Req,
    ) -> Self {
        ClientFuture {
            call: Call::start(inner, limiter, classify, request),
        }
    }
}

impl<S: Service<Req>, Req, L: LimitAlgorithm, C: Clock, K> fmt::Debug
    for ClientFuture<S, Req, L, C, K>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientFuture")
            .field("state", &self.call.state())
            .finish_non_exhaustive()
    }
}

impl<S, Req, B, L, C, K> Future for ClientFuture<S, Req, L, C, K>
where
    S: Service<Req, Response = Response<B>>,
    B: http_body::Body,
    L: LimitAlgorithm,
    C: Clock,
    K: ClassifyResponse + ClassifyError<S::Error>,
{
    type Output = Output<B, L, C, K, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().call.poll(cx)
    }
}
