//! Classes by path prefix: [`ClassByRoute`].

use http::request::Parts;

use super::classify::Classify;
use crate::error::ConfigError;
use crate::shed::{Class, Classes};
use crate::sync::Arc;

/// The class of the longest path prefix a request's path starts with, from a table
/// built against a [`Classes`] set; a path no prefix matches gets the default class.
///
/// A prefix matches whole segments: `/api` matches `/api` and `/api/orders`, not
/// `/apix`; `/` matches every path. The query is not part of the path.
///
/// Build the table against the shedder's own [`Classes`]: a shedder reads a class
/// of another set by its name ([`Classes::resolve`]), so a name the shedder's set
/// lacks is its default class.
///
/// Clones share the table.
///
/// # Examples
///
/// ```
/// use tollgate::http::shed::{ClassByRoute, Classify};
/// use tollgate::shed::Classes;
///
/// let classes = Classes::google();
/// let routes = ClassByRoute::new(&classes)
///     .route("/checkout", "critical_plus")?
///     .route("/prefetch", "sheddable")?
///     .route("/prefetch/hot", "sheddable_plus")?;
/// let class = |path: &str| {
///     let (parts, ()) = http::Request::get(path).body(()).unwrap().into_parts();
///     routes.classify(&parts, &classes).name().to_owned()
/// };
/// assert_eq!(class("/checkout/pay?card=1"), "critical_plus");
/// assert_eq!(class("/prefetch/hot/items"), "sheddable_plus"); // the longest prefix
/// assert_eq!(class("/prefetchx"), "critical"); // not a whole segment: the default
/// assert!(ClassByRoute::new(&classes).route("/x", "gold").is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClassByRoute {
    classes: Classes,
    /// Longest prefix first, so that the first match is the longest.
    routes: Arc<[(Arc<str>, Class)]>,
}

impl ClassByRoute {
    /// An empty table of names from `classes`: every request gets the default class
    /// until routes are added.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ClassByRoute;
    /// use tollgate::shed::Classes;
    ///
    /// let routes = ClassByRoute::new(&Classes::google());
    /// assert_eq!(routes.len(), 0);
    /// ```
    pub fn new(classes: &Classes) -> ClassByRoute {
        ClassByRoute {
            classes: classes.clone(),
            routes: Arc::from(Vec::new()),
        }
    }

    /// The same table, with paths under `prefix` in the class `name` (ASCII case
    /// ignored).
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] when `prefix` does not start with `/` or is in
    /// the table already (parameter `route`), or when `name` is not a class of the
    /// set (parameter `class`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ClassByRoute;
    /// use tollgate::shed::Classes;
    ///
    /// let routes = ClassByRoute::new(&Classes::google()).route("/admin", "critical_plus")?;
    /// assert_eq!(routes.len(), 1);
    /// assert!(routes.clone().route("admin", "critical").is_err()); // no leading slash
    /// assert!(routes.route("/admin", "critical").is_err()); // twice
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn route(self, prefix: &str, name: &str) -> Result<ClassByRoute, ConfigError> {
        if !prefix.starts_with('/') {
            return Err(ConfigError::OutOfRange {
                parameter: "route",
                expected: "a path prefix starting with '/'",
            });
        }
        // `/api/` and `/api` are the same prefix of whole segments.
        let prefix = match prefix.trim_end_matches('/') {
            "" => "/",
            trimmed => trimmed,
        };
        if self.routes.iter().any(|(seen, _)| &**seen == prefix) {
            return Err(ConfigError::OutOfRange {
                parameter: "route",
                expected: "each path prefix once",
            });
        }
        let class = self.classes.get(name).ok_or(ConfigError::OutOfRange {
            parameter: "class",
            expected: "the name of a class in the set",
        })?;
        let mut routes = self.routes.to_vec();
        routes.push((Arc::from(prefix), class));
        routes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(ClassByRoute {
            classes: self.classes,
            routes: Arc::from(routes),
        })
    }

    /// How many prefixes the table has.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether the table has no prefix.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// Whether `path` is `prefix` or lies under it, whole segments only.
fn under(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Classify for ClassByRoute {
    fn classify(&self, request: &Parts, classes: &Classes) -> Class {
        let path = request.uri.path();
        self.routes
            .iter()
            .find(|(prefix, _)| under(path, prefix))
            .map(|(_, class)| class.clone())
            .unwrap_or_else(|| classes.default_class())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_segments() {
        assert!(under("/api", "/api"));
        assert!(under("/api/", "/api"));
        assert!(under("/api/x", "/api"));
        assert!(!under("/apix", "/api"));
        assert!(!under("/ap", "/api"));
        assert!(under("/anything", "/"));
        assert!(under("/", "/"));
    }

    #[test]
    fn a_trailing_slash_names_the_same_prefix() {
        let classes = Classes::google();
        let routes = ClassByRoute::new(&classes)
            .route("/api/", "sheddable")
            .unwrap();
        assert_eq!(
            routes.clone().route("/api", "critical").unwrap_err(),
            ConfigError::OutOfRange {
                parameter: "route",
                expected: "each path prefix once"
            }
        );
        let (parts, ()) = http::Request::get("/api/x").body(()).unwrap().into_parts();
        assert_eq!(routes.classify(&parts, &classes).name(), "sheddable");
        let root = ClassByRoute::new(&classes)
            .route("///", "sheddable")
            .unwrap();
        assert_eq!(root.classify(&parts, &classes).name(), "sheddable");
    }
}
