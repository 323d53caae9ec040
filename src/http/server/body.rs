//! [`RateLimitBody`]: the inner service's body, or the layer's own JSON.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::http::body::BodyKind;
use crate::http::limits::Held;

pin_project! {
    /// The body of a [`RateLimitService`](super::RateLimitService)'s responses: the inner
    /// service's body on an admitted request, or the layer's JSON on a request it answered
    /// itself (429, 400, 500, 503).
    ///
    /// On an admitted request it also holds the permits the grant holds (a key's
    /// concurrency permits, a semaphore's), to the end of the body: they are given
    /// back when its last frame is sent, or when it is dropped before that (a client
    /// gone).
    ///
    /// The inner body is held in place, not boxed: any body works, and this one is
    /// `Unpin` when the inner one is.
    ///
    /// # Examples
    ///
    /// ```
    /// use http_body_util::BodyExt;
    /// use tollgate::http::server::RateLimitBody;
    ///
    /// # futures::executor::block_on(async {
    /// let body = RateLimitBody::new(http_body_util::Full::new(bytes::Bytes::from("hello")));
    /// assert_eq!(body.collect().await?.to_bytes(), "hello");
    ///
    /// let body = RateLimitBody::<http_body_util::Empty<bytes::Bytes>>::full(r#"{"error":"rate_limited"}"#);
    /// assert_eq!(body.collect().await?.to_bytes(), r#"{"error":"rate_limited"}"#);
    /// # Ok::<(), std::convert::Infallible>(())
    /// # }).unwrap();
    /// ```
    pub struct RateLimitBody<B> {
        // Before the body: dropped first, so that whoever sees the body dropped
        // finds the permits already given back.
        held: Held,
        #[pin]
        kind: BodyKind<B>,
    }
}

impl<B> RateLimitBody<B> {
    /// The inner service's `body`.
    ///
    /// # Examples
    ///
    /// ```
    /// use http_body::Body;
    /// use tollgate::http::server::RateLimitBody;
    ///
    /// let body = RateLimitBody::new(http_body_util::Empty::<bytes::Bytes>::new());
    /// assert!(body.is_end_stream());
    /// ```
    pub fn new(body: B) -> RateLimitBody<B> {
        RateLimitBody::holding(body, Held::default())
    }

    /// The inner service's `body`, holding `held` to its end.
    #[inline]
    pub(super) fn holding(body: B, held: Held) -> RateLimitBody<B> {
        RateLimitBody {
            held,
            kind: BodyKind::inner(body),
        }
    }

    /// A body of `bytes`, sent in one frame.
    ///
    /// # Examples
    ///
    /// ```
    /// use http_body::Body;
    /// use tollgate::http::server::RateLimitBody;
    ///
    /// let body = RateLimitBody::<http_body_util::Empty<bytes::Bytes>>::full("{}");
    /// assert_eq!(body.size_hint().exact(), Some(2));
    /// ```
    pub fn full(bytes: impl Into<Bytes>) -> RateLimitBody<B> {
        RateLimitBody {
            held: Held::default(),
            kind: BodyKind::full(bytes),
        }
    }
}

impl<B> fmt::Debug for RateLimitBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Inner { .. } => f.write_str("RateLimitBody::Inner(..)"),
            BodyKind::Full { bytes } => f.debug_tuple("RateLimitBody::Full").field(bytes).finish(),
        }
    }
}

impl<B> Body for RateLimitBody<B>
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
        let mut this = self.project();
        let polled = this.kind.as_mut().poll_frame(cx);
        // Given back with the last frame, before the client can see the end: a
        // server need not poll past a body that says it has ended.
        if this.held.is_held() {
            let ended = match &polled {
                Poll::Ready(Some(Ok(_))) => this.kind.is_end_stream(),
                Poll::Ready(_) => true,
                Poll::Pending => false,
            };
            if ended {
                *this.held = Held::default();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.kind.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.kind.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::marker::PhantomPinned;

    pin_project! {
        /// A body that is not `Unpin`: one frame, then the end.
        struct Pinned {
            frame: Option<Bytes>,
            #[pin]
            pinned: PhantomPinned,
        }
    }

    impl Body for Pinned {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.project().frame.take().map(|b| Ok(Frame::data(b))))
        }

        fn is_end_stream(&self) -> bool {
            self.frame.is_none()
        }

        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.frame.as_ref().map_or(0, |b| b.len() as u64))
        }
    }

    /// The inner body is polled in place, pinned where the response's body is.
    #[test]
    fn a_body_that_is_not_unpin_is_passed_through_in_place() {
        let body = RateLimitBody::new(Pinned {
            frame: Some(Bytes::from_static(b"hello")),
            pinned: PhantomPinned,
        });
        let mut body = std::pin::pin!(body);
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(!body.is_end_stream());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => assert_eq!(frame.into_data().unwrap(), "hello"),
            other => panic!("{other:?}"),
        }
        assert!(body.is_end_stream());
        assert!(matches!(
            body.as_mut().poll_frame(&mut cx),
            Poll::Ready(None)
        ));
    }
}
