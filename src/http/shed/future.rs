//! [`ShedFuture`]: the inner service's call holding the shedder's slot, or the
//! layer's own answer to a shed request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;

use super::body::ShedBody;
use super::layer::Settings;
use super::response;
use crate::shed::Shed;

pin_project! {
    /// The response future of a [`ShedService`](super::ShedService): the inner
    /// service's future, holding the shedder's slot `T`, or the layer's answer to a
    /// shed request.
    ///
    /// When the inner service answers, the slot moves into the response's
    /// [`ShedBody`], which releases it when the body ends or is dropped: a request
    /// counts as in flight until its response is sent.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the inner service's future and releases the slot
    /// at once; so does an inner service that fails. Nothing is left counted.
    ///
    /// # Panics
    ///
    /// If polled again after it completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    /// use tower::{Layer, Service};
    ///
    /// # futures::executor::block_on(async {
    /// let fleet = FleetShedder::new(Classes::google(), 10, 0.2)?;
    /// let echo = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
    /// });
    /// let mut service = ShedLayer::new(fleet.clone()).layer(echo);
    /// let future = service.call(http::Request::new(()));
    /// assert_eq!(fleet.in_flight(), 1);
    /// drop(future); // cancelled: the slot is released
    /// assert_eq!(fleet.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct ShedFuture<F, T> {
        #[pin]
        state: State<F, T>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, T> {
        /// Admitted: the inner service's future, held in place, and the slot.
        Calling {
            #[pin]
            future: F,
            slot: Option<T>,
        },
        /// Shed: answered by the layer when polled.
        Shed {
            shed: Shed,
            settings: Settings,
        },
        Done,
    }
}

impl<F, T> ShedFuture<F, T> {
    pub(super) fn calling(future: F, slot: T) -> ShedFuture<F, T> {
        ShedFuture {
            state: State::Calling {
                future,
                slot: Some(slot),
            },
        }
    }

    pub(super) fn shed(shed: Shed, settings: Settings) -> ShedFuture<F, T> {
        ShedFuture {
            state: State::Shed { shed, settings },
        }
    }
}

impl<F, T> fmt::Debug for ShedFuture<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Calling { .. } => "calling",
            State::Shed { .. } => "shed",
            State::Done => "done",
        };
        f.debug_struct("ShedFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl<F, T, B, E> Future for ShedFuture<F, T>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ShedBody<B, T>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let output = match this.state.as_mut().project() {
            StateProj::Calling { future, slot } => {
                let result = ready!(future.poll(cx));
                // On an error the slot is dropped here, with the state.
                result.map(|response| {
                    let slot = slot.take();
                    response.map(|body| ShedBody::new(body, slot))
                })
            }
            StateProj::Shed { shed, settings } => Ok(response::shed(shed, settings)),
            StateProj::Done => panic!("ShedFuture polled after it completed"),
        };
        this.state.set(State::Done);
        Poll::Ready(output)
    }
}
