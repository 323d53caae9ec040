//! [`RateLimitLayer`]: the layer's configuration, shared by every clone.

use std::fmt;

use tower_layer::Layer;

use super::service::RateLimitService;
use crate::http::key::{Global, KeyExtractor};
use crate::http::limits::{DescribeLimits, KeyedLimits, Limits, Verdict};
use crate::observe::{EventKind, Events};
use crate::permits::{EveryKey, PermitSource};
use crate::store::StoreError;
use crate::sync::Arc;

/// A tower layer that rate-limits requests by their [`Limits`], answering 429 with
/// rate-limit headers.
///
/// Cloning the layer, and every service it makes, shares one [`Limits`] (an `Arc`):
/// one limit for the whole server, however many connections and routes the framework
/// clones it into (unlike tower's `RateLimit`, which is not `Clone`).
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::ClientIp;
/// use tollgate::http::server::RateLimitLayer;
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// let store = MemoryStore::new(KeyedConfig::new(100_000), "api")?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
/// let layer = RateLimitLayer::keyed(ClientIp::new(), limiter).legacy_headers(true);
/// let router: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayer<L: ?Sized> {
    limits: Arc<L>,
    settings: Settings,
}

/// What the layer does besides deciding, shared by its services and their futures.
#[derive(Clone, Debug, Default)]
pub(super) struct Settings {
    pub(super) legacy_headers: bool,
    pub(super) events: Option<Events>,
}

impl Settings {
    /// Reports a verdict's decision, one event per request.
    #[inline]
    pub(super) fn report(&self, verdict: &Verdict) {
        if let (Some(events), Some(decision)) = (&self.events, &verdict.decision) {
            events.emit(1, EventKind::of_decision(decision));
        }
    }
}

impl<L: ?Sized> Clone for RateLimitLayer<L> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            limits: self.limits.clone(),
            settings: self.settings.clone(),
        }
    }
}

impl<L: ?Sized> fmt::Debug for RateLimitLayer<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("legacy_headers", &self.settings.legacy_headers)
            .field("events", &self.settings.events)
            .finish_non_exhaustive()
    }
}

impl<L: Limits> RateLimitLayer<L> {
    /// Limits requests by `limits`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::{HeaderKey, KeyedLimits};
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100_000), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), limiter).cost(2);
    /// let layer = RateLimitLayer::new(limits);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(limits: L) -> RateLimitLayer<L> {
        RateLimitLayer::from_arc(Arc::new(limits))
    }
}

impl<L: Limits + ?Sized> RateLimitLayer<L> {
    /// Limits requests by `limits`, shared with whoever else holds it: an
    /// `Arc<dyn Limits>` works too.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::{Global, KeyedLimits, Limits};
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{EveryKey, Limiter, Quota};
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
    /// let limits: Arc<dyn Limits> = Arc::new(KeyedLimits::new(Global, EveryKey::new(limiter)));
    /// let layer = RateLimitLayer::from_arc(limits);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_arc(limits: Arc<L>) -> RateLimitLayer<L> {
        RateLimitLayer {
            limits,
            settings: Settings::default(),
        }
    }

    /// Whether responses also carry `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (off by default; see [`wire`](crate::http::wire) for
    /// what they mean here).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{Limiter, Quota};
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
    /// let layer = RateLimitLayer::global(limiter).legacy_headers(true);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn legacy_headers(mut self, on: bool) -> RateLimitLayer<L> {
        self.settings.legacy_headers = on;
        self
    }

    /// Reports every decision to `events`: one [`Admitted`](EventKind::Admitted) or
    /// [`Denied`](EventKind::Denied) per request (counting requests, not their cost;
    /// a request no limit applies to, or that could not be checked, is not reported).
    /// With feature `metrics`, [`Events::record_metrics`] turns them into counters.
    /// Give the layer a hub of its own: a hub also attached to its
    /// [`SharedLimiter`](crate::store::SharedLimiter) would hear each request twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::observe::{Event, Events};
    /// use tollgate::{Limiter, Quota};
    ///
    /// let events = Events::new("api");
    /// let _subscription = events.subscribe(|event: &Event<'_>| println!("{:?}", event.kind));
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
    /// let layer = RateLimitLayer::global(limiter).events(events);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn events(mut self, events: Events) -> RateLimitLayer<L> {
        self.settings.events = Some(events);
        self
    }

    /// The limits.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::Limits;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{Limiter, Quota};
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
    /// let layer = RateLimitLayer::global(limiter);
    /// assert_eq!(layer.limits().policies()[0].quota, 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limits(&self) -> &Arc<L> {
        &self.limits
    }
}

impl<K, P> RateLimitLayer<KeyedLimits<K, P>>
where
    K: KeyExtractor,
    P: PermitSource<str> + DescribeLimits,
    P::Error: Into<StoreError>,
{
    /// Limits each key `extractor` reads by `limiter`, one permit per request: any
    /// [`PermitSource`] keyed by `str` that describes its limits, such as a
    /// [`KeyedLimiter`](crate::KeyedLimiter) of `String` keys or a
    /// [`SharedLimiter`](crate::store::SharedLimiter).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::ClientIp;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100_000), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// let layer = RateLimitLayer::keyed(ClientIp::new().trust("10.0.0.0/8")?, limiter);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed(extractor: K, limiter: P) -> Self {
        RateLimitLayer::new(KeyedLimits::new(extractor, limiter))
    }
}

impl<P> RateLimitLayer<KeyedLimits<Global, EveryKey<P>>>
where
    P: PermitSource + DescribeLimits,
    P::Error: Into<StoreError>,
{
    /// One limit for every request, shared by every clone of the layer: any single
    /// [`PermitSource`] that describes its limits, such as a
    /// [`Limiter`](crate::Limiter), a [`Semaphore`](crate::Semaphore) behind an `Arc`
    /// (its permit held until the response is answered: a limit on requests at once),
    /// a [`LeakyQueue`](crate::LeakyQueue), or a keyed source with its key fixed by
    /// [`for_key`](PermitSource::for_key).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{Limiter, Quota};
    ///
    /// let layer = RateLimitLayer::global(Limiter::new(Gcra::new(Quota::per_second(1_000)?)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A quota shared through a store, under one key:
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, PermitSource, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(1_000)?))?;
    /// let layer = RateLimitLayer::global(limiter.for_key("global"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn global(source: P) -> Self {
        RateLimitLayer::keyed(Global, EveryKey::new(source))
    }
}

impl<S, L: Limits + ?Sized> Layer<S> for RateLimitLayer<L> {
    type Service = RateLimitService<S, L>;

    fn layer(&self, inner: S) -> RateLimitService<S, L> {
        RateLimitService::new(inner, self.limits.clone(), self.settings.clone())
    }
}
