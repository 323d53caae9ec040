//! [`PropagateClassLayer`]: outbound calls carry the class of the request that made
//! them.

use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Request};
use tower_layer::Layer;
use tower_service::Service;

use super::header::CLASS_HEADER;
use crate::shed::Class;

/// A tower layer for clients that sets the class header (`x-criticality` by
/// default) on each outbound request from the [`Class`] in its extensions.
///
/// The [`ShedLayer`](super::ShedLayer) puts each admitted request's `Class` into
/// its extensions; a handler that calls another service copies it onto the
/// outbound request (`outbound.extensions_mut().insert(class.clone())`), and this
/// layer writes it as the header the next server's [`ClassHeader`](super::ClassHeader)
/// reads. So a critical request's calls stay critical down the chain.
///
/// A request without a `Class` is sent unchanged; one that already has the header
/// keeps it (what the caller set explicitly wins). A class name that cannot be a
/// header value is not sent.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tollgate::http::shed::PropagateClassLayer;
/// use tollgate::shed::Classes;
/// use tower::{Layer, ServiceExt};
///
/// # futures::executor::block_on(async {
/// let client = PropagateClassLayer::new().layer(tower::service_fn(|request: http::Request<()>| async move {
///     Ok::<_, Infallible>(request.headers().get("x-criticality").cloned())
/// }));
/// let mut outbound = http::Request::new(());
/// outbound.extensions_mut().insert(Classes::google().parse("sheddable"));
/// assert_eq!(client.oneshot(outbound).await?.unwrap(), "sheddable");
/// # Ok::<(), Infallible>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct PropagateClassLayer {
    header: HeaderName,
}

impl PropagateClassLayer {
    /// Sets `x-criticality` ([`CLASS_HEADER`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::PropagateClassLayer;
    ///
    /// assert_eq!(PropagateClassLayer::new().header(), "x-criticality");
    /// ```
    pub fn new() -> PropagateClassLayer {
        PropagateClassLayer::with_header(CLASS_HEADER)
    }

    /// Sets the header `header`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::PropagateClassLayer;
    ///
    /// let layer = PropagateClassLayer::with_header(http::HeaderName::from_static("x-priority"));
    /// assert_eq!(layer.header(), "x-priority");
    /// ```
    pub fn with_header(header: HeaderName) -> PropagateClassLayer {
        PropagateClassLayer { header }
    }

    /// The header set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::{PropagateClassLayer, CLASS_HEADER};
    ///
    /// assert_eq!(PropagateClassLayer::default().header(), CLASS_HEADER);
    /// ```
    pub fn header(&self) -> &HeaderName {
        &self.header
    }
}

impl Default for PropagateClassLayer {
    fn default() -> PropagateClassLayer {
        PropagateClassLayer::new()
    }
}

impl<S> Layer<S> for PropagateClassLayer {
    type Service = PropagateClass<S>;

    fn layer(&self, inner: S) -> PropagateClass<S> {
        PropagateClass {
            inner,
            header: self.header.clone(),
        }
    }
}

/// The service a [`PropagateClassLayer`] wraps around a client `S`.
///
/// # Examples
///
/// ```
/// use tollgate::http::shed::PropagateClassLayer;
/// use tower::Layer;
///
/// let client = PropagateClassLayer::new().layer(42);
/// assert_eq!(*client.get_ref(), 42);
/// ```
#[derive(Clone, Debug)]
pub struct PropagateClass<S> {
    inner: S,
    header: HeaderName,
}

impl<S> PropagateClass<S> {
    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::PropagateClassLayer;
    /// use tower::Layer;
    ///
    /// assert_eq!(*PropagateClassLayer::new().layer("client").get_ref(), "client");
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, B> Service<Request<B>> for PropagateClass<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        if !request.headers().contains_key(&self.header) {
            let value = request
                .extensions()
                .get::<Class>()
                .and_then(|class| HeaderValue::from_str(class.name()).ok());
            if let Some(value) = value {
                request.headers_mut().insert(self.header.clone(), value);
            }
        }
        self.inner.call(request)
    }
}
