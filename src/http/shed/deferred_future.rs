//! [`AsyncShedFuture`]: awaits an [`AsyncShedder`](crate::shed::AsyncShedder)'s
//! decision, then calls the inner service or answers a shed request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::body::ShedBody;
use super::future::ShedFuture;
use super::layer::Settings;
use crate::shed::ShedDecision;

pin_project! {
    /// The response future of an [`AsyncShedService`](super::AsyncShedService): the
    /// shedder's decision `D`, then the inner service `I`'s call of the request `R`
    /// (its future `F`, holding the slot `T`) or the layer's answer to a shed
    /// request, as [`ShedFuture`] does.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while the decision is pending drops the decision (for
    /// the fleet through Redis, a slot taken meanwhile is given back when its lease
    /// runs out) and the request, uncalled; afterwards, as [`ShedFuture`].
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::future::{ready, Ready};
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// struct Open(Classes);
    /// impl AsyncShedder for Open {
    ///     type Slot = ();
    ///     type Decision = Ready<ShedDecision<()>>;
    ///     fn decision(&self, _: &Class) -> Self::Decision { ready(ShedDecision::Admit(())) }
    ///     fn classes(&self) -> &Classes { &self.0 }
    /// }
    ///
    /// # futures::executor::block_on(async {
    /// let echo = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// });
    /// let mut service = ShedLayer::new_async(Open(Classes::google())).layer(echo);
    /// let future = service.ready().await?.call(http::Request::new(()));
    /// assert_eq!(future.await?.status(), 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct AsyncShedFuture<D, I, R, F, T> {
        #[pin]
        state: State<D, I, R, F, T>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<D, I, R, F, T> {
        /// Waiting for the decision, with the ready service and its request.
        Deciding {
            #[pin]
            decision: D,
            call: Option<(I, R)>,
            settings: Settings,
        },
        /// Decided: the call, or the layer's answer.
        Answering {
            #[pin]
            answer: ShedFuture<F, T>,
        },
    }
}

impl<D, I, R, F, T> AsyncShedFuture<D, I, R, F, T> {
    pub(super) fn deciding(
        decision: D,
        service: I,
        request: R,
        settings: Settings,
    ) -> AsyncShedFuture<D, I, R, F, T> {
        AsyncShedFuture {
            state: State::Deciding {
                decision,
                call: Some((service, request)),
                settings,
            },
        }
    }
}

impl<D, I, R, F, T> fmt::Debug for AsyncShedFuture<D, I, R, F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Deciding { .. } => "deciding",
            State::Answering { .. } => "answering",
        };
        f.debug_struct("AsyncShedFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<D, I, R, F, T, B, E> Future for AsyncShedFuture<D, I, R, F, T>
where
    D: Future<Output = ShedDecision<T>>,
    I: Service<R, Future = F, Response = Response<B>, Error = E>,
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ShedBody<B, T>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Deciding {
                    decision,
                    call,
                    settings,
                } => {
                    // `WouldShed` (shadow mode) runs the request as `Admit` does.
                    let answer = match ready!(decision.poll(cx)).into_slot() {
                        Ok(slot) => {
                            let (mut service, request) = call
                                .take()
                                .expect("AsyncShedFuture polled after it completed");
                            ShedFuture::calling(service.call(request), slot)
                        }
                        Err(shed) => ShedFuture::shed(shed, *settings),
                    };
                    this.state.set(State::Answering { answer });
                }
                StateProj::Answering { answer } => return answer.poll(cx),
            }
        }
    }
}
