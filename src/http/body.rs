//! [`BodyKind`]: what every layer's response body carries: the inner service's body,
//! or the layer's own answer in one piece. Each layer's body adds what it holds to
//! the end of the request (a slot, a permit) around it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The inner service's body, held in place (not boxed), or a whole body of the
    /// layer's own.
    #[project = BodyKindProj]
    pub(crate) enum BodyKind<B> {
        Inner {
            #[pin]
            body: B,
        },
        /// The whole body, until it is sent.
        Full {
            bytes: Option<Bytes>,
        },
    }
}

/// What polling a body of `B` answers.
pub(crate) type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

impl<B> BodyKind<B> {
    pub(crate) fn inner(body: B) -> BodyKind<B> {
        BodyKind::Inner { body }
    }

    pub(crate) fn full(bytes: impl Into<Bytes>) -> BodyKind<B> {
        BodyKind::Full {
            bytes: Some(bytes.into()),
        }
    }
}

impl<B: Body> BodyKind<B>
where
    B::Data: From<Bytes>,
{
    /// The layer's own body as its one frame (none if it is empty), then the end.
    pub(crate) fn poll_full(bytes: &mut Option<Bytes>) -> Polled<B> {
        Poll::Ready(
            bytes
                .take()
                .filter(|b| !b.is_empty())
                .map(|b| Ok(Frame::data(b.into()))),
        )
    }

    /// The next frame, with nothing held around it.
    pub(crate) fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled<B> {
        match self.project() {
            BodyKindProj::Inner { body } => body.poll_frame(cx),
            BodyKindProj::Full { bytes } => Self::poll_full(bytes),
        }
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        match self {
            BodyKind::Inner { body } => body.is_end_stream(),
            BodyKind::Full { bytes } => bytes.as_ref().is_none_or(Bytes::is_empty),
        }
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        match self {
            BodyKind::Inner { body } => body.size_hint(),
            BodyKind::Full { bytes } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}
