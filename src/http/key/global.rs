//! One key for every request: the [`Global`] extractor.

use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// One key for every request: a global limit, shared by every clone of the layer.
///
/// The key is `"global"`, not empty: a store's hash tag is the key, and Redis Cluster
/// hashes a key with an empty tag `{}` whole, which would put the rules of one request
/// in different slots.
///
/// # Examples
///
/// ```
/// use tollgate::http::{Global, KeyExtractor};
///
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(Global.extract(&parts)?, "global");
/// # Ok::<(), tollgate::http::KeyError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract<'a>(&'a self, _: &'a Parts) -> Result<Key<'a>, KeyError> {
        Ok(Key::from("global"))
    }
}
