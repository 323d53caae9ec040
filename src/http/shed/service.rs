//! [`ShedService`]: classes each request and asks the shedder before the inner
//! service sees it.

use std::fmt;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::ShedBody;
use super::classify::Classify;
use super::future::ShedFuture;
use super::layer::Settings;
use crate::shed::Shedder;
use crate::sync::Arc;

/// The service a [`ShedLayer`](super::ShedLayer) wraps around `I`.
///
/// Each call classes the request, asks the shedder, and either answers itself (the
/// request was shed) or puts the [`Class`](crate::shed::Class) into the request's
/// extensions and calls the inner service, holding the shedder's slot until the
/// response body ends. The decision is made within `call`, without waiting; a shed
/// request leaves the inner service ready but uncalled, as tower's `LoadShed` does.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tollgate::http::shed::ShedLayer;
/// use tollgate::shed::{Classes, FleetShedder};
/// use tower::{Layer, Service, ServiceExt};
///
/// # futures::executor::block_on(async {
/// let fleet = FleetShedder::new(Classes::google(), 1, 1.0)?; // all reserved for critical work
/// let hello = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
/// });
/// let mut service = ShedLayer::new(fleet).layer(hello);
///
/// let critical = http::Request::get("/").header("x-criticality", "critical").body(())?;
/// assert_eq!(service.ready().await?.call(critical).await?.status(), 200);
/// let sheddable = http::Request::get("/").header("x-criticality", "sheddable").body(())?;
/// assert_eq!(service.ready().await?.call(sheddable).await?.status(), 503);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct ShedService<I, S: ?Sized, C> {
    inner: I,
    shedder: Arc<S>,
    classifier: Arc<C>,
    settings: Settings,
}

impl<I, S: ?Sized, C> ShedService<I, S, C> {
    pub(super) fn new(
        inner: I,
        shedder: Arc<S>,
        classifier: Arc<C>,
        settings: Settings,
    ) -> ShedService<I, S, C> {
        ShedService {
            inner,
            shedder,
            classifier,
            settings,
        }
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    /// use tower::Layer;
    ///
    /// let service = ShedLayer::new(FleetShedder::new(Classes::google(), 10, 0.2)?).layer(42);
    /// assert_eq!(*service.get_ref(), 42);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn get_ref(&self) -> &I {
        &self.inner
    }

    /// The shedder, shared with the layer and every clone.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    /// use tower::Layer;
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 10, 0.2)?);
    /// let service = layer.layer(());
    /// assert!(Arc::ptr_eq(service.shedder(), layer.shedder()));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn shedder(&self) -> &Arc<S> {
        &self.shedder
    }
}

impl<I: Clone, S: ?Sized, C> Clone for ShedService<I, S, C> {
    fn clone(&self) -> Self {
        ShedService {
            inner: self.inner.clone(),
            shedder: Arc::clone(&self.shedder),
            classifier: Arc::clone(&self.classifier),
            settings: self.settings,
        }
    }
}

impl<I: fmt::Debug, S: ?Sized, C> fmt::Debug for ShedService<I, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedService")
            .field("inner", &self.inner)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<I, S, C, ReqBody, ResBody> Service<Request<ReqBody>> for ShedService<I, S, C>
where
    I: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S: Shedder + ?Sized,
    C: Classify,
{
    type Response = Response<ShedBody<ResBody, S::Slot>>;
    type Error = I::Error;
    type Future = ShedFuture<I::Future, S::Slot>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), I::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (mut head, body) = request.into_parts();
        let class = self.classifier.classify(&head, self.shedder.classes());
        // `WouldShed` (shadow mode) runs the request as `Admit` does; the shedder
        // has reported it.
        match self.shedder.decide(&class).into_slot() {
            Ok(slot) => {
                head.extensions.insert(class);
                let future = self.inner.call(Request::from_parts(head, body));
                ShedFuture::calling(future, slot)
            }
            Err(shed) => ShedFuture::shed(shed, self.settings),
        }
    }
}
