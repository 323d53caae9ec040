//! [`RateLimitFuture`]: the check, then the inner service's call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use tower_service::Service;

use pin_project_lite::pin_project;

use super::body::RateLimitBody;
use super::fields;
use super::layer::Settings;
use super::response;
use crate::http::limits::{CheckError, CheckFuture, Verdict};

pin_project! {
    /// The response future of a [`RateLimitService`](super::RateLimitService): awaits the
    /// request's check (unless it was decided at once), then answers itself or awaits the
    /// inner service.
    ///
    /// # Cancel safety
    ///
    /// Dropped while the check runs, the request is not sent to the inner service, and
    /// whether its permits were taken is unknown (as for the store's
    /// [`execute`](crate::store::Store::execute)); dropped later, the inner service's
    /// future is dropped, and the permits the grant holds (a key's concurrency
    /// permits, a semaphore's) are given back. Once it answers, the response body
    /// holds them to its end. A check decided at once (the memory store) took its permits,
    /// and an admitted request was passed to the inner service, before `call` returned.
    ///
    /// The inner service's future is held in place, not boxed: the response future is
    /// `Unpin` when that future is, whatever the service and the request body.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::{RateLimitLayer, RateLimitFuture};
        /// use tollgate::{Limiter, Quota};
    /// use tower::{Layer, Service};
    ///
    /// # futures::executor::block_on(async {
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1)?));
    /// let echo = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// });
    /// let mut service = RateLimitLayer::global(limiter).layer(echo);
    /// let future = service.call(http::Request::new(()));
    /// assert_eq!(future.await?.status(), 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct RateLimitFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
        legacy_headers: bool,
    }
}

/// What a check that must be awaited keeps until it completes: the inner service
/// `poll_ready` made ready, the request, and the settings to report the verdict to.
struct Pending<S, B> {
    inner: S,
    request: Request<B>,
    settings: Settings,
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwned]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        /// A check to await (a remote store). What waits with it is boxed, as the
        /// check's own future is: the future of a check decided at once stays small.
        Checking {
            check: CheckFuture,
            pending: Box<Pending<S, B>>,
        },
        /// Answered by the layer itself when polled (a denial is reported then, as
        /// when its check is awaited): a denial, or a failed check.
        Answering {
            checked: Result<Verdict, CheckError>,
            settings: Settings,
        },
        /// Admitted: the inner service's future, held in place, and the verdict whose
        /// fields its response gets.
        Calling {
            #[pin]
            future: S::Future,
            verdict: Verdict,
        },
        Done,
    }
}

impl<S: Service<Request<B>>, B> RateLimitFuture<S, B> {
    pub(super) fn new(
        check: CheckFuture,
        inner: S,
        request: Request<B>,
        settings: Settings,
    ) -> Self {
        RateLimitFuture {
            legacy_headers: settings.legacy_headers,
            state: State::Checking {
                check,
                pending: Box::new(Pending {
                    inner,
                    request,
                    settings,
                }),
            },
        }
    }

    /// The response to a check decided at once: an admitted request is sent to `inner`
    /// now; any other is answered when polled, as if its check had been awaited.
    #[inline]
    pub(super) fn decided(
        checked: Result<Verdict, CheckError>,
        inner: &mut S,
        request: Request<B>,
        settings: &Settings,
    ) -> Self {
        let state = match checked {
            Ok(verdict) if verdict.is_admitted() => {
                settings.report(&verdict);
                State::Calling {
                    future: inner.call(request),
                    verdict,
                }
            }
            checked => State::Answering {
                checked,
                settings: settings.clone(),
            },
        };
        RateLimitFuture {
            state,
            legacy_headers: settings.legacy_headers,
        }
    }
}

impl<S: Service<Request<B>>, B> fmt::Debug for RateLimitFuture<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Checking { .. } => "checking",
            State::Answering { .. } => "answering",
            State::Calling { .. } => "calling",
            State::Done => "done",
        };
        f.debug_struct("RateLimitFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Future for RateLimitFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<RateLimitBody<ResBody>>, S::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Checking { check, .. } => {
                    let checked = ready!(Pin::new(check).poll(cx));
                    let StateOwned::Checking { pending, .. } =
                        this.state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!("the state was Checking");
                    };
                    let Pending {
                        mut inner,
                        request,
                        settings,
                    } = *pending;
                    let next = match checked {
                        Ok(verdict) if verdict.is_admitted() => {
                            settings.report(&verdict);
                            State::Calling {
                                future: inner.call(request),
                                verdict,
                            }
                        }
                        checked => State::Answering { checked, settings },
                    };
                    this.state.set(next);
                }
                StateProj::Answering { checked, settings } => {
                    let response = match checked {
                        Ok(verdict) => {
                            settings.report(verdict);
                            response::denied(verdict, settings.legacy_headers)
                        }
                        Err(error) => response::check_error(error),
                    };
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Calling { future, verdict } => {
                    // An error, or this future dropped first, drops the verdict and
                    // gives back the permits it holds.
                    let mut response = match ready!(future.poll(cx)) {
                        Ok(response) => response,
                        Err(error) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(error));
                        }
                    };
                    fields::insert(response.headers_mut(), verdict, *this.legacy_headers);
                    let held = std::mem::take(&mut verdict.held);
                    this.state.set(State::Done);
                    return Poll::Ready(
                        Ok(response.map(|body| RateLimitBody::holding(body, held))),
                    );
                }
                StateProj::Done => panic!("RateLimitFuture polled after it completed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::marker::PhantomPinned;

    /// A service and a body that are not `Unpin`.
    #[derive(Clone)]
    struct Pinned(PhantomPinned);

    impl Service<Request<PhantomPinned>> for Pinned {
        type Response = Response<()>;
        type Error = std::convert::Infallible;
        type Future = std::future::Pending<Result<Response<()>, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<PhantomPinned>) -> Self::Future {
            std::future::pending()
        }
    }

    /// The bug it guards: the service and the request were boxed on every request
    /// only so that the future would be `Unpin`; it is `Unpin` without that, when
    /// the inner service's future is.
    #[test]
    fn the_future_is_unpin_whatever_the_service_and_body() {
        fn unpin<T: Unpin>() {}
        unpin::<RateLimitFuture<Pinned, PhantomPinned>>();
    }
}
