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
    /// Reports a verdict's decision, one event per request, unless the source that
    /// decided reported it to a hub of its own.
    #[inline]
    pub(super) fn report(&self, verdict: &Verdict) {
        if let (Some(events), Some(decision)) = (&self.events, &verdict.decision) {
            if !verdict.reported {
                events.emit(1, EventKind::of_decision(decision));
            }
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
    /// With feature `metrics`, `Events::record_metrics` turns them into counters.
    ///
    /// Each request is reported once, to one hub. A limiter that reports to a hub of
    /// its own (its `with_events`, as
    /// [`DescribeLimits::events`](crate::http::DescribeLimits::events) tells) reports
    /// its decisions there, keyed and with their cost, and `events` hears none of
    /// them: a hub attached to both hears each request once.
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
    /// # Requests in flight per key
    ///
    /// Over a concurrency limit (a `KeyedLimiter` of
    /// [`Concurrency`](crate::algorithm::Concurrency), or a store's
    /// [`Leased`](crate::algorithm::Leased) rule: Stripe's concurrent-requests
    /// limiter), a request holds its key's permit until its response body ends, or
    /// until the body, or the response future, is dropped first (a client gone, the
    /// inner service failing): a key has at most that many requests in flight, and a
    /// request over it is answered 429 without `Retry-After`, since a release, not a
    /// time, frees a permit. A rate holds nothing, and a request over it costs no
    /// allocation for it. In memory the permit is back before the client reads the
    /// end of the body; over Redis the release is a background refund on the tokio
    /// runtime, best effort (one that fails leaves the permit taken until the lease
    /// ends).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Concurrency, Leased};
    /// use tollgate::http::HeaderKey;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::KeyedConfig;
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// # futures::executor::block_on(async {
    /// // At most 2 requests in flight per API key; a lease frees the permits of a
    /// // process that died holding them.
    /// let store = MemoryStore::new(KeyedConfig::new(100_000), "in_flight")?;
    /// let rule = Leased::new(Concurrency::new(2)?, Duration::from_secs(60))?;
    /// let limiter = SharedLimiter::new(store, rule)?;
    /// let layer = RateLimitLayer::keyed(HeaderKey::from_static("x-api-key"), limiter);
    /// let hello = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
    ///         bytes::Bytes::from("hello"),
    ///     )))
    /// });
    /// let mut service = layer.layer(hello);
    /// let request = || http::Request::get("/").header("x-api-key", "k1").body(()).unwrap();
    ///
    /// let first = service.ready().await?.call(request()).await?;
    /// let second = service.ready().await?.call(request()).await?;
    /// let third = service.ready().await?.call(request()).await?;
    /// assert_eq!(third.status(), 429);
    /// // The first body ends (here: dropped): its permit is back.
    /// drop(first);
    /// assert_eq!(service.ready().await?.call(request()).await?.status(), 200);
    /// # drop(second);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
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
    /// (its permit held until the response body ends: a limit on requests at once),
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
