//! [`ShedLayer`]: the layer's configuration, shared by every clone.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use tower_layer::Layer;

use super::classify::Classify;
use super::deferred::{Async, AsyncShedService};
use super::header::ClassHeader;
use super::service::ShedService;
use crate::error::ConfigError;
use crate::shed::{AsyncShedder, Shedder};
use crate::sync::Arc;

/// The longest `Retry-After` the layer sends by default.
const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The `Retry-After` sent by default when the shedder gives no hint.
const DEFAULT_FALLBACK_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A tower layer that asks a [`Shedder`] about each request, by its criticality
/// class, and answers the shed ones itself: 503 by default, with `Retry-After`.
///
/// See [the module](super) for what each request goes through. Cloning the layer,
/// and every service it makes, shares the one shedder and classifier (each behind
/// an `Arc`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::shed::{ClassByRoute, ShedLayer};
/// use tollgate::shed::{Classes, FleetShedder};
///
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 500, 0.2)?;
/// let layer = ShedLayer::new(fleet)
///     .classify(ClassByRoute::new(&classes).route("/prefetch", "sheddable")?)
///     .status(http::StatusCode::TOO_MANY_REQUESTS)?
///     .max_retry_after(Duration::from_secs(30))?;
/// let router: axum::Router = axum::Router::new()
///     .route("/prefetch", axum::routing::get(|| async { "later" }))
///     .layer(layer);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct ShedLayer<S: ?Sized, C = ClassHeader> {
    shedder: Arc<S>,
    classifier: Arc<C>,
    settings: Settings,
}

/// How the layer answers a shed request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    pub(super) status: StatusCode,
    pub(super) max_retry_after: Duration,
    /// The `Retry-After` of a refusal without a hint; `None` sends none.
    pub(super) fallback_retry_after: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            status: StatusCode::SERVICE_UNAVAILABLE,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            fallback_retry_after: Some(DEFAULT_FALLBACK_RETRY_AFTER),
        }
    }
}

impl<S: Shedder> ShedLayer<S> {
    /// Sheds requests by `shedder`, each classed by its `x-criticality` header
    /// ([`ClassHeader::default`]), answering 503 with a `Retry-After` of at most an
    /// hour (1 s when the shedder gives no hint).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// assert_eq!(layer.shedder().capacity(), 100);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(shedder: S) -> ShedLayer<S> {
        ShedLayer::from_arc(Arc::new(shedder))
    }
}

impl<S: Shedder + ?Sized> ShedLayer<S> {
    /// As [`new`](ShedLayer::new), with a shedder shared with whoever else holds it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let fleet = Arc::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// let layer = ShedLayer::from_arc(Arc::clone(&fleet));
    /// assert!(Arc::ptr_eq(layer.shedder(), &fleet));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn from_arc(shedder: Arc<S>) -> ShedLayer<S> {
        ShedLayer {
            shedder,
            classifier: Arc::new(ClassHeader::default()),
            settings: Settings::default(),
        }
    }
}

impl<S: AsyncShedder> ShedLayer<Async<S>> {
    /// Sheds requests by an [`AsyncShedder`], whose decision is a future: the
    /// fleet-usage shedder through Redis, `FleetShedder<RedisUsage>` (feature
    /// `redis`). Otherwise as [`new`](ShedLayer::new).
    ///
    /// The layer's services are [`AsyncShedService`]s: each response future awaits
    /// the decision before calling the inner service, which must be `Clone` (see
    /// there). What the shedder answers when its store fails is its own policy
    /// ([`OnFailure`](crate::shed::OnFailure), open by default).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder, OnFailure, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let fleet = FleetShedder::with_counter(Classes::google(), 1_000, 0.2, usage)?
    ///     .on_failure(OnFailure::Open); // the default: Redis down, admit
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/", axum::routing::get(|| async { "hello" }))
    ///     .layer(ShedLayer::new_async(fleet));
    /// # drop(app);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new_async(shedder: S) -> ShedLayer<Async<S>> {
        ShedLayer {
            shedder: Arc::new(Async(shedder)),
            classifier: Arc::new(ClassHeader::default()),
            settings: Settings::default(),
        }
    }
}

impl<S: ?Sized, C> ShedLayer<S, C> {
    /// The same layer, classing requests by `classifier`: a
    /// [`ClassHeader`] on another header, a [`ClassByRoute`](super::ClassByRoute), a
    /// [`ClassByMethod`](super::ClassByMethod) or a closure.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Class, Classes, FleetShedder};
    ///
    /// let fleet = FleetShedder::new(Classes::google(), 100, 0.2)?;
    /// // Everything is sheddable but the health check.
    /// let layer = ShedLayer::new(fleet).classify(|request: &http::request::Parts, classes: &Classes| -> Class {
    ///     if request.uri.path() == "/health" { classes.highest() } else { classes.lowest() }
    /// });
    /// # drop(layer);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn classify<D: Classify>(self, classifier: D) -> ShedLayer<S, D> {
        ShedLayer {
            shedder: self.shedder,
            classifier: Arc::new(classifier),
            settings: self.settings,
        }
    }

    /// Answers shed requests with `status` (503 by default), such as 429.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] for a status that is not an error (below 400):
    /// a shed request must not look served.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::StatusCode;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// let layer = layer.status(StatusCode::TOO_MANY_REQUESTS)?;
    /// assert!(layer.status(StatusCode::OK).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn status(mut self, status: StatusCode) -> Result<ShedLayer<S, C>, ConfigError> {
        if !(status.is_client_error() || status.is_server_error()) {
            return Err(ConfigError::OutOfRange {
                parameter: "status",
                expected: "a 4xx or 5xx status",
            });
        }
        self.settings.status = status;
        Ok(self)
    }

    /// The longest `Retry-After` sent (an hour by default): a shedder's longer hint
    /// is cut to it.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero duration (a `Retry-After` is at least 1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// let layer = layer.max_retry_after(Duration::from_secs(60))?;
    /// assert!(layer.max_retry_after(Duration::ZERO).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_retry_after(mut self, max: Duration) -> Result<ShedLayer<S, C>, ConfigError> {
        if max.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "max_retry_after",
            });
        }
        self.settings.max_retry_after = max;
        Ok(self)
    }

    /// The `Retry-After` sent when the shedder gives no hint (1 s by default): the
    /// fleet-usage shedder cannot foresee when a request ends, and system
    /// protection when the load drops, so neither hints by default; yet a client
    /// told nothing may retry at once. `None` sends no `Retry-After` then. Like a
    /// hint, it is rounded up to whole seconds and cut to
    /// [`max_retry_after`](ShedLayer::max_retry_after).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `Some` zero duration (a `Retry-After` is at least
    /// 1 s; `None` sends none).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// let layer = layer.fallback_retry_after(Some(Duration::from_secs(5)))?;
    /// let layer = layer.fallback_retry_after(None)?; // no Retry-After without a hint
    /// assert!(layer.fallback_retry_after(Some(Duration::ZERO)).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn fallback_retry_after(
        mut self,
        fallback: Option<Duration>,
    ) -> Result<ShedLayer<S, C>, ConfigError> {
        if fallback.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::Zero {
                parameter: "fallback_retry_after",
            });
        }
        self.settings.fallback_retry_after = fallback;
        Ok(self)
    }

    /// The shedder, shared by every clone of the layer and every service it makes.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// assert_eq!(layer.shedder().in_flight(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn shedder(&self) -> &Arc<S> {
        &self.shedder
    }

    /// The classifier.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ShedLayer;
    /// use tollgate::shed::{Classes, FleetShedder};
    ///
    /// let layer = ShedLayer::new(FleetShedder::new(Classes::google(), 100, 0.2)?);
    /// assert_eq!(layer.classifier().name(), "x-criticality");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn classifier(&self) -> &Arc<C> {
        &self.classifier
    }
}

impl<S: ?Sized, C> Clone for ShedLayer<S, C> {
    fn clone(&self) -> Self {
        ShedLayer {
            shedder: Arc::clone(&self.shedder),
            classifier: Arc::clone(&self.classifier),
            settings: self.settings,
        }
    }
}

impl<S: ?Sized, C> fmt::Debug for ShedLayer<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("status", &self.settings.status)
            .field("max_retry_after", &self.settings.max_retry_after)
            .field("fallback_retry_after", &self.settings.fallback_retry_after)
            .finish_non_exhaustive()
    }
}

impl<I, S: Shedder + ?Sized, C: Classify> Layer<I> for ShedLayer<S, C> {
    type Service = ShedService<I, S, C>;

    fn layer(&self, inner: I) -> ShedService<I, S, C> {
        ShedService::new(
            inner,
            Arc::clone(&self.shedder),
            Arc::clone(&self.classifier),
            self.settings,
        )
    }
}

impl<I, S: AsyncShedder, C: Classify> Layer<I> for ShedLayer<Async<S>, C> {
    type Service = AsyncShedService<I, S, C>;

    fn layer(&self, inner: I) -> AsyncShedService<I, S, C> {
        AsyncShedService::new(
            inner,
            Arc::clone(&self.shedder),
            Arc::clone(&self.classifier),
            self.settings,
        )
    }
}
