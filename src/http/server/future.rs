//! [`ResponseFuture`]: the check, then the inner service's call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::RateLimitBody;
use super::layer::Settings;
use super::response;
use crate::http::limits::{CheckError, CheckFuture, Verdict};
use crate::http::wire;

/// The response future of a [`RateLimitService`](super::RateLimitService): awaits the
/// request's check (unless it was decided at once), then answers itself or awaits the
/// inner service.
///
/// # Cancel safety
///
/// Dropped while the check runs, the request is not sent to the inner service, and
/// whether its permits were taken is unknown (as for the store's
/// [`execute`](crate::store::Store::execute)); dropped later, the inner service's
/// future is dropped. A check decided at once (the memory store) took its permits,
/// and an admitted request was passed to the inner service, before `call` returned.
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
/// use tollgate::http::server::{RateLimitLayer, ResponseFuture};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
/// use tower::{Layer, Service};
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(1)?))?;
/// let echo = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
/// });
/// let mut service = RateLimitLayer::global(limiter).layer(echo);
/// let future = service.call(http::Request::new(()));
/// assert_eq!(future.await?.status(), 200);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    state: State<S, B>,
    settings: Settings,
}

// `Checking` is large (the request, a verdict decided at once) but is the state every
// request starts in: boxing it would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
enum State<S: Service<Request<B>>, B> {
    Checking {
        check: CheckFuture,
        /// Moved out once the check admits, never polled in place.
        pending: Option<(S, Request<B>)>,
    },
    Calling {
        future: Pin<Box<S::Future>>,
        verdict: Verdict,
    },
    Done,
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    pub(super) fn new(
        check: CheckFuture,
        inner: S,
        request: Request<B>,
        settings: Settings,
    ) -> Self {
        ResponseFuture {
            state: State::Checking {
                check,
                pending: Some((inner, request)),
            },
            settings,
        }
    }
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    /// The response to a check decided at once: an admitted request is sent to `inner`
    /// now; any other is answered when polled, as if its check had been awaited.
    pub(super) fn decided(
        checked: Result<Verdict, CheckError>,
        inner: &mut S,
        request: Request<B>,
        settings: Settings,
    ) -> Self {
        let state = match checked {
            Ok(verdict) if verdict.is_admitted() => {
                settings.report(&verdict);
                State::Calling {
                    future: Box::pin(inner.call(request)),
                    verdict,
                }
            }
            checked => State::Checking {
                check: CheckFuture::ready(checked),
                pending: None,
            },
        };
        ResponseFuture { state, settings }
    }
}

// Only the boxed futures are ever polled; the service and the request are moved,
// never pinned, so the future need not box them to be `Unpin`.
impl<S: Service<Request<B>>, B> Unpin for ResponseFuture<S, B> {}

impl<S: Service<Request<B>>, B> fmt::Debug for ResponseFuture<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Checking { .. } => "checking",
            State::Calling { .. } => "calling",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<RateLimitBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Checking { check, pending } => {
                    let checked = ready!(Pin::new(check).poll(cx));
                    if let Ok(verdict) = &checked {
                        this.settings.report(verdict);
                    }
                    let verdict = match checked {
                        Ok(verdict) if verdict.is_admitted() => verdict,
                        Ok(verdict) => {
                            this.state = State::Done;
                            return Poll::Ready(Ok(response::denied(
                                &verdict,
                                this.settings.legacy_headers,
                            )));
                        }
                        Err(error) => {
                            this.state = State::Done;
                            return Poll::Ready(Ok(response::check_error(&error)));
                        }
                    };
                    let (mut inner, request) = pending
                        .take()
                        .expect("the request is pending until the check completes");
                    let future = Box::pin(inner.call(request));
                    this.state = State::Calling { future, verdict };
                }
                State::Calling { future, verdict } => {
                    let mut response = ready!(future.as_mut().poll(cx))?;
                    wire::insert(
                        response.headers_mut(),
                        verdict,
                        this.settings.legacy_headers,
                    );
                    this.state = State::Done;
                    return Poll::Ready(Ok(response.map(RateLimitBody::new)));
                }
                State::Done => panic!("ResponseFuture polled after it completed"),
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
    /// only so that the future would be `Unpin`; it is `Unpin` without that.
    #[test]
    fn the_future_is_unpin_whatever_the_service_and_body() {
        fn unpin<T: Unpin>() {}
        unpin::<ResponseFuture<Pinned, PhantomPinned>>();
    }
}
