//! [`ShedBody`]: the inner service's body holding the shedder's slot, or the
//! layer's own JSON.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::http::body::{BodyKind, BodyKindProj};

pin_project! {
    /// The body of a [`ShedService`](super::ShedService)'s responses: the inner
    /// service's body, holding the shedder's slot `T` until the body ends (its last
    /// frame or an error is read) or is dropped; or the layer's JSON on a shed
    /// request.
    ///
    /// The inner body is held in place, not boxed: this one is `Unpin` when the
    /// inner one is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http_body_util::BodyExt;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    /// use tower::{Layer, ServiceExt};
    ///
    /// # futures::executor::block_on(async {
    /// let fleet = FleetShedder::new(Classes::google(), 10, 0.2)?;
    /// let hello = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
    /// });
    /// let service = ShedLayer::new(fleet.clone()).layer(hello);
    /// let response = service.oneshot(http::Request::new(())).await?;
    /// assert_eq!(fleet.in_flight(), 1); // until the body is read
    /// assert_eq!(response.into_body().collect().await?.to_bytes(), "hello");
    /// assert_eq!(fleet.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub struct ShedBody<B, T> {
        #[pin]
        kind: BodyKind<B>,
        slot: Option<T>,
    }
}

impl<B, T> ShedBody<B, T> {
    /// The inner service's `body`, releasing `slot` when it ends.
    pub(super) fn new(body: B, slot: Option<T>) -> ShedBody<B, T> {
        ShedBody {
            kind: BodyKind::inner(body),
            slot,
        }
    }

    /// A body of `bytes`, sent in one frame, holding no slot.
    pub(super) fn full(bytes: impl Into<Bytes>) -> ShedBody<B, T> {
        ShedBody {
            kind: BodyKind::full(bytes),
            slot: None,
        }
    }

    /// Whether the body still holds the shedder's slot: until the inner body ends.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    /// use tower::{Layer, ServiceExt};
    ///
    /// # futures::executor::block_on(async {
    /// let fleet = FleetShedder::new(Classes::google(), 10, 0.2)?;
    /// let hello = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
    /// });
    /// let response = ShedLayer::new(fleet).layer(hello).oneshot(http::Request::new(())).await?;
    /// assert!(response.body().holds_slot());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn holds_slot(&self) -> bool {
        self.slot.is_some()
    }
}

impl<B, T> fmt::Debug for ShedBody<B, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Inner { .. } => f
                .debug_struct("ShedBody::Inner")
                .field("holds_slot", &self.slot.is_some())
                .finish_non_exhaustive(),
            BodyKind::Full { bytes } => f.debug_tuple("ShedBody::Full").field(bytes).finish(),
        }
    }
}

impl<B, T> Body for ShedBody<B, T>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        match this.kind.project() {
            BodyKindProj::Inner { body } => {
                let frame = ready!(body.poll_frame(cx));
                // The response is sent (or has failed): its slot goes back now,
                // not when the server gets round to dropping the body.
                if !matches!(frame, Some(Ok(_))) {
                    this.slot.take();
                }
                Poll::Ready(frame)
            }
            BodyKindProj::Full { bytes } => BodyKind::<B>::poll_full(bytes),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.kind.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.kind.size_hint()
    }
}
