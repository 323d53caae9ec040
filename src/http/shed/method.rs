//! Classes by request method: [`ClassByMethod`].

use http::Method;
use http::request::Parts;

use super::classify::Classify;
use crate::error::ConfigError;
use crate::shed::{Class, Classes};
use crate::sync::Arc;

/// The class of a request's method, from a table built against a [`Classes`] set;
/// a method not in the table gets the default class.
///
/// For example reads (`GET`, `HEAD`) as `sheddable_plus`, which a client can retry
/// or serve from a cache, and writes at the default `critical`.
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
/// use http::Method;
/// use tollgate::http::shed::{ClassByMethod, Classify};
/// use tollgate::shed::Classes;
///
/// let classes = Classes::google();
/// let methods = ClassByMethod::new(&classes)
///     .method(Method::GET, "sheddable_plus")?
///     .method(Method::HEAD, "sheddable")?;
/// let class = |method: Method| {
///     let (parts, ()) = http::Request::builder().method(method).body(()).unwrap().into_parts();
///     methods.classify(&parts, &classes).name().to_owned()
/// };
/// assert_eq!(class(Method::GET), "sheddable_plus");
/// assert_eq!(class(Method::POST), "critical"); // the default
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClassByMethod {
    classes: Classes,
    methods: Arc<[(Method, Class)]>,
}

impl ClassByMethod {
    /// An empty table of names from `classes`: every request gets the default class
    /// until methods are added.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ClassByMethod;
    /// use tollgate::shed::Classes;
    ///
    /// assert_eq!(ClassByMethod::new(&Classes::google()).len(), 0);
    /// ```
    pub fn new(classes: &Classes) -> ClassByMethod {
        ClassByMethod {
            classes: classes.clone(),
            methods: Arc::from(Vec::new()),
        }
    }

    /// The same table, with requests of `method` in the class `name` (ASCII case
    /// ignored).
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] when `method` is in the table already
    /// (parameter `method`) or `name` is not a class of the set (parameter `class`).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Method;
    /// use tollgate::http::shed::ClassByMethod;
    /// use tollgate::shed::Classes;
    ///
    /// let methods = ClassByMethod::new(&Classes::google()).method(Method::GET, "sheddable")?;
    /// assert!(methods.clone().method(Method::GET, "critical").is_err());
    /// assert!(methods.method(Method::PUT, "gold").is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn method(self, method: Method, name: &str) -> Result<ClassByMethod, ConfigError> {
        if self.methods.iter().any(|(seen, _)| *seen == method) {
            return Err(ConfigError::OutOfRange {
                parameter: "method",
                expected: "each method once",
            });
        }
        let class = self.classes.get(name).ok_or(ConfigError::OutOfRange {
            parameter: "class",
            expected: "the name of a class in the set",
        })?;
        let mut methods = self.methods.to_vec();
        methods.push((method, class));
        Ok(ClassByMethod {
            classes: self.classes,
            methods: Arc::from(methods),
        })
    }

    /// How many methods the table has.
    pub fn len(&self) -> usize {
        self.methods.len()
    }

    /// Whether the table has no method.
    pub fn is_empty(&self) -> bool {
        self.methods.is_empty()
    }
}

impl Classify for ClassByMethod {
    fn classify(&self, request: &Parts, classes: &Classes) -> Class {
        self.methods
            .iter()
            .find(|(method, _)| *method == request.method)
            .map(|(_, class)| class.clone())
            .unwrap_or_else(|| classes.default_class())
    }
}
