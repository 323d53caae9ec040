//! The [`Classify`] trait: which criticality class a request belongs to.

use http::request::Parts;

use crate::shed::{Class, Classes};

/// Reads a request's criticality [`Class`] from its head.
///
/// The [`ShedLayer`](super::ShedLayer) passes the shedder's [`Classes`]; a request
/// a classifier cannot place (no header, an unknown name, no matching route) gets
/// [`Classes::default_class`]. Classifying never fails: a missing label is not a
/// reason to refuse a request, only to rank it by default.
///
/// Implementations: [`ClassHeader`](super::ClassHeader) (the default, the
/// `x-criticality` header), [`ClassByRoute`](super::ClassByRoute) (path prefixes),
/// [`ClassByMethod`](super::ClassByMethod), and closures
/// `Fn(&Parts, &Classes) -> Class`.
///
/// # Examples
///
/// ```
/// use tollgate::http::shed::Classify;
/// use tollgate::shed::{Class, Classes};
///
/// // Requests from the batch tool are sheddable; the rest take the default.
/// let by_agent = |request: &http::request::Parts, classes: &Classes| -> Class {
///     match request.headers.get(http::header::USER_AGENT) {
///         Some(agent) if agent.as_bytes().starts_with(b"batch/") => classes.lowest(),
///         _ => classes.default_class(),
///     }
/// };
/// let classes = Classes::google();
/// let (parts, ()) = http::Request::get("/").header("user-agent", "batch/1.0").body(()).unwrap().into_parts();
/// assert_eq!(by_agent.classify(&parts, &classes).name(), "sheddable");
/// ```
pub trait Classify: Send + Sync + 'static {
    /// The class of `request`, one of `classes`.
    fn classify(&self, request: &Parts, classes: &Classes) -> Class;
}

impl<F> Classify for F
where
    F: Fn(&Parts, &Classes) -> Class + Send + Sync + 'static,
{
    fn classify(&self, request: &Parts, classes: &Classes) -> Class {
        self(request, classes)
    }
}
