//! Classes from a request header: [`ClassHeader`] and the default header name.

use http::HeaderName;
use http::request::Parts;

use super::classify::Classify;
use crate::shed::{Class, Classes};

/// The header a class travels in by default: `x-criticality`, after Google's
/// `X-Goog-Criticality` (whose values are the same names as [`Classes::google`]).
///
/// # Examples
///
/// ```
/// use tollgate::http::shed::CLASS_HEADER;
///
/// assert_eq!(CLASS_HEADER, "x-criticality");
/// ```
pub const CLASS_HEADER: HeaderName = HeaderName::from_static("x-criticality");

/// The class named by a request header, `x-criticality` by default.
///
/// The first value of the header is parsed by [`Classes::parse`], ignoring ASCII
/// case and the spaces and tabs around it; a missing header, a value that is not
/// visible ASCII or a name not in the set gives the default class.
///
/// Only trust the header from callers allowed to rank their own requests: a client
/// that sends `critical_plus` on everything is ranked that way. At the edge, strip
/// or overwrite it, or classify by route or method instead.
///
/// # Examples
///
/// ```
/// use tollgate::http::shed::{ClassHeader, Classify};
/// use tollgate::shed::Classes;
///
/// let classes = Classes::google();
/// let header = ClassHeader::default();
/// let (parts, ()) = http::Request::get("/").header("x-criticality", "Sheddable").body(()).unwrap().into_parts();
/// assert_eq!(header.classify(&parts, &classes).name(), "sheddable");
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(header.classify(&parts, &classes).name(), "critical"); // the default
/// ```
#[derive(Clone, Debug)]
pub struct ClassHeader {
    name: HeaderName,
}

impl ClassHeader {
    /// Classes from the header `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ClassHeader;
    ///
    /// let header = ClassHeader::new(http::HeaderName::from_static("x-priority"));
    /// assert_eq!(header.name(), "x-priority");
    /// ```
    pub fn new(name: HeaderName) -> ClassHeader {
        ClassHeader { name }
    }

    /// The header read.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::shed::ClassHeader;
    ///
    /// assert_eq!(ClassHeader::default().name(), "x-criticality");
    /// ```
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl Default for ClassHeader {
    /// Classes from [`CLASS_HEADER`], `x-criticality`.
    fn default() -> ClassHeader {
        ClassHeader::new(CLASS_HEADER)
    }
}

impl Classify for ClassHeader {
    fn classify(&self, request: &Parts, classes: &Classes) -> Class {
        request
            .headers
            .get(&self.name)
            .and_then(|value| value.to_str().ok())
            .map(|value| classes.parse(value.trim_matches([' ', '\t'])))
            .unwrap_or_else(|| classes.default_class())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(values: &[&[u8]]) -> Parts {
        let mut request = http::Request::get("/").body(()).unwrap();
        for value in values {
            request
                .headers_mut()
                .append(CLASS_HEADER, http::HeaderValue::from_bytes(value).unwrap());
        }
        request.into_parts().0
    }

    #[test]
    fn the_first_value_counts_and_anything_unreadable_is_the_default() {
        let classes = Classes::google();
        let header = ClassHeader::default();
        let class = |values: &[&[u8]]| header.classify(&parts(values), &classes).index();
        assert_eq!(class(&[b"sheddable", b"critical_plus"]), 3);
        assert_eq!(class(&[b" CRITICAL_PLUS\t"]), 0);
        assert_eq!(class(&[b""]), 1);
        assert_eq!(class(&[b"gold"]), 1);
        assert_eq!(class(&[b"sheddable\xff"]), 1);
        assert_eq!(class(&[]), 1);
    }
}
