//! [`RateLimitService`]: checks each request before the inner service sees it.

use std::fmt;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::body::RateLimitBody;
use super::future::RateLimitFuture;
use super::layer::Settings;
use crate::http::limits::Limits;
use crate::sync::Arc;

/// The service a [`RateLimitLayer`](super::RateLimitLayer) wraps around `S`.
///
/// Each call checks the request's head against the [`Limits`] (a round trip to the
/// store, for a shared one), then either answers itself (429, or an error status) or
/// calls the inner service and adds the rate-limit fields to its response. Clones
/// share the limits.
///
/// A check decided at once (an in-process store) answers or calls the inner service
/// within `call`. A check that must be awaited (a remote store) delays the inner
/// call, so `call` then takes the inner service that `poll_ready` made ready and
/// leaves a clone in its place (so `S: Clone`), as tower's guide advises.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::server::RateLimitLayer;
/// use tollgate::{Limiter, Quota};
/// use tower::{Layer, Service, ServiceExt};
///
/// # futures::executor::block_on(async {
/// let limiter = Limiter::new(Gcra::new(Quota::per_minute(1)?));
/// let hello = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(bytes::Bytes::from("hello"))))
/// });
/// let mut service = RateLimitLayer::global(limiter).layer(hello);
///
/// let response = service.ready().await?.call(http::Request::new(())).await?;
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["ratelimit"], r#""default";r=0;t=60"#);
///
/// let response = service.ready().await?.call(http::Request::new(())).await?;
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["retry-after"], "60");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct RateLimitService<S, L: ?Sized> {
    inner: S,
    limits: Arc<L>,
    settings: Settings,
}

impl<S, L: ?Sized> RateLimitService<S, L> {
    pub(super) fn new(inner: S, limits: Arc<L>, settings: Settings) -> Self {
        RateLimitService {
            inner,
            limits,
            settings,
        }
    }

    /// The inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{Limiter, Quota};
    /// use tower::Layer;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1)?));
    /// let service = RateLimitLayer::global(limiter).layer(42);
    /// assert_eq!(*service.get_ref(), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The limits, shared with the layer and every clone.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::server::RateLimitLayer;
    /// use tollgate::{Limiter, Quota};
    /// use tower::Layer;
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(1)?));
    /// let layer = RateLimitLayer::global(limiter);
    /// let service = layer.layer(());
    /// assert!(Arc::ptr_eq(service.limits(), layer.limits()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limits(&self) -> &Arc<L> {
        &self.limits
    }
}

impl<S: Clone, L: ?Sized> Clone for RateLimitService<S, L> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            limits: self.limits.clone(),
            settings: self.settings.clone(),
        }
    }
}

impl<S: fmt::Debug, L: ?Sized> fmt::Debug for RateLimitService<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<S, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitService<S, L>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    L: Limits + ?Sized,
{
    type Response = Response<RateLimitBody<ResBody>>;
    type Error = S::Error;
    type Future = RateLimitFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (head, body) = request.into_parts();
        let check = self.limits.check(&head);
        let request = Request::from_parts(head, body);
        match check.into_ready() {
            // Decided at once: the inner service `poll_ready` made ready is called now,
            // so it need not be cloned.
            Ok(checked) => {
                RateLimitFuture::decided(checked, &mut self.inner, request, &self.settings)
            }
            Err(check) => {
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                RateLimitFuture::new(check, ready, request, self.settings.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::FixedWindow;
    use crate::http::server::RateLimitLayer;
    use crate::permits::PermitSource;
    use crate::store::{
        MemoryStore, Reply, Request as StoreRequest, SharedLimiter, Store, StoreError,
    };
    use crate::sync::{AtomicU64, Ordering};
    use crate::table::KeyedConfig;
    use crate::time::ManualClock;
    use futures::executor::block_on;
    use std::future::poll_fn;
    use std::time::Duration;
    use tower_layer::Layer;

    /// A service that must be made ready before each call, as tower's `Buffer` or
    /// `ConcurrencyLimit` must: a clone starts unready, and a call spends readiness.
    struct Strict {
        ready: bool,
        calls: Arc<AtomicU64>,
    }

    impl Clone for Strict {
        fn clone(&self) -> Self {
            Strict {
                ready: false,
                calls: self.calls.clone(),
            }
        }
    }

    impl Service<Request<()>> for Strict {
        type Response = Response<()>;
        type Error = &'static str;
        type Future = std::future::Ready<Result<Response<()>, &'static str>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            self.ready = true;
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            let was_ready = std::mem::replace(&mut self.ready, false);
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if was_ready {
                Ok(Response::new(()))
            } else {
                Err("called without poll_ready")
            })
        }
    }

    /// The memory store behind a store that cannot decide at once, as a remote one.
    struct Remote(MemoryStore<ManualClock>);

    #[async_trait::async_trait]
    impl Store for Remote {
        async fn execute(&self, request: &StoreRequest<'_>) -> Result<Reply, StoreError> {
            self.0.execute(request).await
        }
    }

    /// The inner service made ready by `poll_ready` is the one called, whatever the
    /// verdict; a denial calls nothing. Checks decided at once call it in `call`.
    #[test]
    fn the_ready_inner_service_is_the_one_called() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", clock.clone()).unwrap();
        ready_inner_service_is_called(store, clock);
    }

    /// As above, with checks awaited: the next request readies a fresh clone.
    #[test]
    fn the_ready_inner_service_is_the_one_called_after_an_awaited_check() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", clock.clone()).unwrap();
        ready_inner_service_is_called(Remote(store), clock);
    }

    /// An admission decided at once is reported when the request is passed on, in
    /// `call`; a denial when it is answered, on the first poll, as if its check had
    /// been awaited: a response future dropped unpolled reports no denial.
    #[test]
    fn a_denial_decided_at_once_is_reported_when_answered() {
        use crate::observe::{Event, Events};

        let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", ManualClock::new());
        let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
        let limiter = SharedLimiter::new(store.unwrap(), window).unwrap();
        let events = Events::new("api");
        let seen = Arc::new(AtomicU64::new(0));
        let _subscription = events.subscribe({
            let seen = Arc::clone(&seen);
            move |_: &Event<'_>| {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        });
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(()))
        });
        let mut service = RateLimitLayer::global(limiter.for_key("global"))
            .events(events)
            .layer(inner);
        let admitted = service.call(Request::new(()));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(block_on(admitted).unwrap().status(), 200);
        drop(service.call(Request::new(())));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        let denied = service.call(Request::new(()));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(block_on(denied).unwrap().status(), 429);
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    /// A check awaited (a remote store) whose limiter reports to the layer's hub too
    /// is reported once, by the limiter: admitted and denied alike.
    #[test]
    fn an_awaited_decision_is_reported_once_where_the_limiter_reports() {
        use crate::observe::{Event, Events};

        let store = MemoryStore::with_clock(KeyedConfig::new(10), "t", ManualClock::new());
        let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
        let events = Events::new("api");
        let limiter = SharedLimiter::new(Remote(store.unwrap()), window)
            .unwrap()
            .with_events(events.clone());
        let keys = Arc::new(crate::sync::Mutex::new(Vec::new()));
        let _subscription = events.subscribe({
            let keys = Arc::clone(&keys);
            move |event: &Event<'_>| keys.lock().push(event.key.map(str::to_owned))
        });
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(()))
        });
        let mut service = RateLimitLayer::global(limiter.for_key("global"))
            .events(events)
            .layer(inner);
        assert_eq!(
            block_on(service.call(Request::new(()))).unwrap().status(),
            200
        );
        assert_eq!(
            block_on(service.call(Request::new(()))).unwrap().status(),
            429
        );
        let global = Some("global".to_owned());
        assert_eq!(*keys.lock(), [global.clone(), global]);
    }

    fn ready_inner_service_is_called<S: Store + 'static>(store: S, clock: ManualClock) {
        let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
        let limiter = SharedLimiter::new(store, window).unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let inner = Strict {
            ready: false,
            calls: calls.clone(),
        };
        let mut service = RateLimitLayer::global(limiter.for_key("global")).layer(inner);
        let mut send = || {
            block_on(async {
                poll_fn(|cx| service.poll_ready(cx)).await?;
                service.call(Request::new(())).await
            })
        };
        assert_eq!(send().unwrap().status(), 200);
        assert_eq!(send().unwrap().status(), 200);
        assert_eq!(send().unwrap().status(), 429);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        clock.advance(Duration::from_secs(60));
        assert_eq!(send().unwrap().status(), 200);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
