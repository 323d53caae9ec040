//! Load shedding for HTTP servers (feature `http`): a tower layer that ranks each
//! request by its criticality class and answers the shed ones itself, and a client
//! layer that passes the class on to outbound calls.
//!
//! # What a request goes through
//!
//! 1. A [`Classify`] reads its [`Class`](crate::shed::Class): [`ClassHeader`] (the
//!    default: the `x-criticality` header, named after Google's
//!    `X-Goog-Criticality`), [`ClassByRoute`] (path prefixes), [`ClassByMethod`], or
//!    a closure. A request it cannot place gets the set's
//!    [default class](crate::shed::Classes::default_class).
//! 2. The [`ShedLayer`]'s [`Shedder`](crate::shed::Shedder) decides at once, without
//!    waiting (an [`AsyncShedder`](crate::shed::AsyncShedder) behind
//!    [`ShedLayer::new_async`], such as the fleet shedder through Redis, decides in
//!    the response future, which awaits it before calling the inner service):
//!    - **admitted** (`Admit`, or `WouldShed` in shadow mode): the class is put
//!      into the request's extensions, the inner service is called, and the
//!      shedder's slot is held until the response body ends, or until the future or
//!      the body is dropped;
//!    - **shed**: the layer answers itself, as below, and the inner service never
//!      sees the request.
//! 3. With [`PropagateClassLayer`] on a client, an outbound request whose
//!    extensions carry the class sends it in the class header.
//!
//! # Responses
//!
//! A shed request gets 503 ([`ShedLayer::status`] changes it), `Cache-Control:
//! no-store`, and `Retry-After` in delay-seconds: the shedder's hint of how long to
//! wait or, without one, the layer's
//! [`fallback_retry_after`](ShedLayer::fallback_retry_after) (1 s by default; `None`
//! sends no `Retry-After`), rounded up, at least 1, at most
//! [`max_retry_after`](ShedLayer::max_retry_after) (an hour by default). The body is
//! JSON:
//!
//! ```json
//! {"error":"shed","message":"the server is overloaded: sheddable requests are shed (utilisation), retry after 10 s","class":"sheddable","reason":"utilisation","retry_after":10}
//! ```
//!
//! # Events and metrics
//!
//! The layer reports nothing itself: the shedder does, one event per decision
//! **keyed by the class name** (`Admitted`, `Denied { reason: Shed, .. }` or
//! `WouldShed`, the last two with the [`ShedReason`](crate::shed::ShedReason) as
//! the event's [`detail`](crate::observe::Event::detail)), into the [`Events`](crate::observe::Events) hub given to it (for
//! example [`FleetShedder::with_events`](crate::shed::FleetShedder::with_events)).
//! Counting by class is a listener reading `event.key`. For metrics per class,
//! subscribe `MetricsRecorder::with_keys(name, classes.names())` (feature
//! `metrics`): each class gets series labelled `key = <class>`; the classes are few,
//! so the number of series stays bounded. `tollgate_shed_total` counts refusals by
//! shed reason (`reserved`, `full`, `utilisation`, `system_cpu`, ...), another
//! bounded label.
//!
//! # Examples
//!
//! ```
//! use tollgate::http::shed::{ClassByRoute, ShedLayer};
//! use tollgate::shed::{Class, Classes, FleetShedder};
//!
//! let classes = Classes::new(["critical", "sheddable"])?;
//! let fleet = FleetShedder::new(classes.clone(), 200, 0.25)?;
//! let routes = ClassByRoute::new(&classes)
//!     .route("/checkout", "critical")?
//!     .route("/recommendations", "sheddable")?;
//! let app: axum::Router = axum::Router::new()
//!     .route("/checkout", axum::routing::post(|request: axum::extract::Request| async move {
//!         // The class, to pass on to outbound calls through `PropagateClassLayer`.
//!         let class = request.extensions().get::<Class>().cloned();
//!         format!("{class:?}")
//!     }))
//!     .route("/recommendations", axum::routing::get(|| async { "[]" }))
//!     .layer(ShedLayer::new(fleet).classify(routes));
//! # Ok::<(), tollgate::ConfigError>(())
//! ```

mod body;
mod classify;
mod deferred;
mod deferred_future;
mod future;
mod header;
mod layer;
mod method;
mod propagate;
mod response;
mod route;
mod service;

pub use body::ShedBody;
pub use classify::Classify;
pub use deferred::{Async, AsyncShedService};
pub use deferred_future::AsyncShedFuture;
pub use future::ShedFuture;
pub use header::{CLASS_HEADER, ClassHeader};
pub use layer::ShedLayer;
pub use method::ClassByMethod;
pub use propagate::{PropagateClass, PropagateClassLayer};
pub use route::ClassByRoute;
pub use service::ShedService;
