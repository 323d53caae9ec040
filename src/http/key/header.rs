//! Keys by a request header: the [`HeaderKey`] extractor.

use http::HeaderName;
use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// The value of a request header, such as an API key.
///
/// The first value of the header is the key. A missing or empty value, or one that is
/// not visible ASCII, is [`KeyError::MissingHeader`]: the server layer answers 400.
///
/// # Examples
///
/// ```
/// use tollgate::http::{HeaderKey, KeyError, KeyExtractor};
///
/// let key = HeaderKey::from_static("x-api-key");
/// let request = http::Request::get("/").header("x-api-key", "k-42").body(()).unwrap();
/// let (parts, ()) = request.into_parts();
/// assert_eq!(key.extract(&parts)?, "k-42");
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert!(matches!(key.extract(&parts), Err(KeyError::MissingHeader(_))));
/// # Ok::<(), KeyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    pub(crate) name: HeaderName,
}

impl HeaderKey {
    /// Keys by the header `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// let key = HeaderKey::new(http::header::AUTHORIZATION);
    /// assert_eq!(key.name(), "authorization");
    /// ```
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey { name }
    }

    /// Keys by the header `name`, a lowercase literal.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// let key = HeaderKey::from_static("x-api-key");
    /// assert_eq!(key.name(), "x-api-key");
    /// ```
    ///
    /// # Panics
    ///
    /// As [`HeaderName::from_static`]: if `name` is not a valid, lowercase header name.
    pub fn from_static(name: &'static str) -> HeaderKey {
        HeaderKey::new(HeaderName::from_static(name))
    }

    /// The header read.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::HeaderKey;
    ///
    /// assert_eq!(HeaderKey::from_static("x-tenant").name(), "x-tenant");
    /// ```
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl KeyExtractor for HeaderKey {
    fn extract<'a>(&'a self, request: &'a Parts) -> Result<Key<'a>, KeyError> {
        request
            .headers
            .get(&self.name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(Key::from)
            .ok_or_else(|| KeyError::MissingHeader(self.name.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::get("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn header_keys() {
        let k = HeaderKey::from_static("x-api-key");
        assert_eq!(
            k.extract(&parts(&[("x-api-key", "a"), ("x-api-key", "b")])),
            Ok("a".into())
        );
        assert_eq!(
            k.extract(&parts(&[("x-api-key", "")])),
            Err(KeyError::MissingHeader(k.name().clone()))
        );
    }
}
