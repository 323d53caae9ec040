//! A shedder whose decision is a future ([`AsyncShedder`]) behind the
//! [`ShedLayer`](super::ShedLayer): [`Async`], the marker that selects it, and
//! [`AsyncShedService`], which awaits the decision before calling its inner service.

use std::fmt;
use std::mem;
use std::ops::Deref;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::ShedBody;
use super::classify::Classify;
use super::deferred_future::AsyncShedFuture;
use super::layer::Settings;
use crate::shed::AsyncShedder;
use crate::sync::Arc;

/// An [`AsyncShedder`] as a [`ShedLayer`](super::ShedLayer) holds it: made by
/// [`ShedLayer::new_async`](super::ShedLayer::new_async), it makes the layer build
/// an [`AsyncShedService`]. It dereferences to the shedder.
///
/// # Examples
///
/// ```
/// use std::future::{ready, Ready};
/// use tollgate::http::shed::ShedLayer;
/// use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
///
/// struct Open(Classes);
/// impl AsyncShedder for Open {
///     type Slot = ();
///     type Decision = Ready<ShedDecision<()>>;
///     fn decision(&self, _: &Class) -> Self::Decision { ready(ShedDecision::Admit(())) }
///     fn classes(&self) -> &Classes { &self.0 }
/// }
///
/// let layer = ShedLayer::new_async(Open(Classes::google()));
/// assert_eq!(layer.shedder().classes().len(), 4); // through `Async`'s `Deref`
/// ```
#[derive(Debug)]
pub struct Async<S>(pub(super) S);

impl<S> Async<S> {
    /// The shedder.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::future::{ready, Ready};
    /// # use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
    /// # struct Open(Classes);
    /// # impl AsyncShedder for Open {
    /// #     type Slot = ();
    /// #     type Decision = Ready<ShedDecision<()>>;
    /// #     fn decision(&self, _: &Class) -> Self::Decision { ready(ShedDecision::Admit(())) }
    /// #     fn classes(&self) -> &Classes { &self.0 }
    /// # }
    /// use tollgate::http::shed::ShedLayer;
    ///
    /// let layer = ShedLayer::new_async(Open(Classes::google()));
    /// assert_eq!(layer.shedder().get_ref().0.len(), 4);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.0
    }
}

impl<S> Deref for Async<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.0
    }
}

/// The service a [`ShedLayer`](super::ShedLayer) over an [`AsyncShedder`]
/// ([`ShedLayer::new_async`](super::ShedLayer::new_async)) wraps around `I`.
///
/// Each call classes the request and asks the shedder; the response future awaits
/// the decision, then answers itself (shed) or calls the inner service with the
/// [`Class`](crate::shed::Class) in the request's extensions, holding the slot until
/// the response body ends, as [`ShedService`](super::ShedService) does.
///
/// As tower's `AsyncFilter` does, the service made ready by `poll_ready` goes into
/// the response future and a clone takes its place: `I` is `Clone` (an axum
/// `Router`, a `Buffer`). A shed request leaves that service uncalled.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::future::{ready, Ready};
/// use tollgate::http::shed::ShedLayer;
/// use tollgate::shed::{AsyncShedder, Class, Classes, Shed, ShedDecision, ShedReason};
/// use tower::{Layer, Service, ServiceExt};
///
/// // Sheds everything below `critical`.
/// struct CriticalOnly(Classes);
/// impl AsyncShedder for CriticalOnly {
///     type Slot = ();
///     type Decision = Ready<ShedDecision<()>>;
///     fn decision(&self, class: &Class) -> Self::Decision {
///         ready(if *class >= self.0.parse("critical") {
///             ShedDecision::Admit(())
///         } else {
///             ShedDecision::Shed(Shed::new(class.clone(), ShedReason::Full, None))
///         })
///     }
///     fn classes(&self) -> &Classes { &self.0 }
/// }
///
/// # futures::executor::block_on(async {
/// let hello = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
/// });
/// let mut service = ShedLayer::new_async(CriticalOnly(Classes::google())).layer(hello);
/// let critical = http::Request::get("/").header("x-criticality", "critical").body(())?;
/// assert_eq!(service.ready().await?.call(critical).await?.status(), 200);
/// let sheddable = http::Request::get("/").header("x-criticality", "sheddable").body(())?;
/// let shed = service.ready().await?.call(sheddable).await?;
/// assert_eq!(shed.status(), 503);
/// assert_eq!(shed.headers()["retry-after"], "1"); // the layer's fallback
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct AsyncShedService<I, S, C> {
    inner: I,
    shedder: Arc<Async<S>>,
    classifier: Arc<C>,
    settings: Settings,
}

impl<I, S, C> AsyncShedService<I, S, C> {
    pub(super) fn new(
        inner: I,
        shedder: Arc<Async<S>>,
        classifier: Arc<C>,
        settings: Settings,
    ) -> AsyncShedService<I, S, C> {
        AsyncShedService {
            inner,
            shedder,
            classifier,
            settings,
        }
    }

    /// The inner service (the one the next call will use).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::future::{ready, Ready};
    /// # use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
    /// # struct Open(Classes);
    /// # impl AsyncShedder for Open {
    /// #     type Slot = ();
    /// #     type Decision = Ready<ShedDecision<()>>;
    /// #     fn decision(&self, _: &Class) -> Self::Decision { ready(ShedDecision::Admit(())) }
    /// #     fn classes(&self) -> &Classes { &self.0 }
    /// # }
    /// use tollgate::http::shed::ShedLayer;
    /// use tower::Layer;
    ///
    /// let service = ShedLayer::new_async(Open(Classes::google())).layer(42);
    /// assert_eq!(*service.get_ref(), 42);
    /// ```
    pub fn get_ref(&self) -> &I {
        &self.inner
    }

    /// The shedder, shared with the layer and every clone.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::future::{ready, Ready};
    /// # use tollgate::shed::{AsyncShedder, Class, Classes, ShedDecision};
    /// # struct Open(Classes);
    /// # impl AsyncShedder for Open {
    /// #     type Slot = ();
    /// #     type Decision = Ready<ShedDecision<()>>;
    /// #     fn decision(&self, _: &Class) -> Self::Decision { ready(ShedDecision::Admit(())) }
    /// #     fn classes(&self) -> &Classes { &self.0 }
    /// # }
    /// use std::sync::Arc;
    /// use tollgate::http::shed::ShedLayer;
    /// use tower::Layer;
    ///
    /// let layer = ShedLayer::new_async(Open(Classes::google()));
    /// let service = layer.layer(());
    /// assert!(Arc::ptr_eq(service.shedder(), layer.shedder()));
    /// ```
    pub fn shedder(&self) -> &Arc<Async<S>> {
        &self.shedder
    }
}

impl<I: Clone, S, C> Clone for AsyncShedService<I, S, C> {
    fn clone(&self) -> Self {
        AsyncShedService {
            inner: self.inner.clone(),
            shedder: Arc::clone(&self.shedder),
            classifier: Arc::clone(&self.classifier),
            settings: self.settings,
        }
    }
}

impl<I: fmt::Debug, S, C> fmt::Debug for AsyncShedService<I, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncShedService")
            .field("inner", &self.inner)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<I, S, C, ReqBody, ResBody> Service<Request<ReqBody>> for AsyncShedService<I, S, C>
where
    I: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    S: AsyncShedder,
    C: Classify,
{
    type Response = Response<ShedBody<ResBody, S::Slot>>;
    type Error = I::Error;
    type Future = AsyncShedFuture<S::Decision, I, Request<ReqBody>, I::Future, S::Slot>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), I::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (mut head, body) = request.into_parts();
        let class = self.classifier.classify(&head, self.shedder.0.classes());
        let decision = self.shedder.0.decision(&class);
        head.extensions.insert(class);
        // The ready service answers this request; its clone waits for `poll_ready`.
        let clone = self.inner.clone();
        let ready = mem::replace(&mut self.inner, clone);
        AsyncShedFuture::deciding(
            decision,
            ready,
            Request::from_parts(head, body),
            self.settings,
        )
    }
}
