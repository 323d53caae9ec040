//! [`Policies`]: the limits a verdict reports, as `RateLimit-Policy` names them, with
//! the field formatted once.

use std::fmt;
use std::ops::Deref;

use http::HeaderValue;

use super::Policy;
use crate::http::wire::policy_value;
use crate::sync::Arc;

/// The policies a [`Verdict`](crate::http::Verdict) was made under, shared, with their `RateLimit-Policy`
/// value formatted once.
///
/// A [`Limits`](crate::http::Limits) whose policies are fixed builds this once and hands a clone (a
/// reference count) to every verdict: the field is then never formatted per request.
/// It reads as a slice of [`Policy`]. Equality compares the policies.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::{Policies, Policy};
///
/// let policies = Policies::from(vec![
///     Policy::new("burst", 100, Duration::from_secs(60)),
///     Policy::new("daily", 1_000, Duration::from_secs(86_400)),
/// ]);
/// assert_eq!(policies[1].name, "daily");
/// assert_eq!(policies.field().unwrap(), r#""burst";q=100;w=60, "daily";q=1000;w=86400"#);
/// assert!(Policies::default().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct Policies {
    /// `None` when empty: an unlimited verdict allocates nothing.
    shared: Option<Arc<PolicyList>>,
}

struct PolicyList {
    list: Box<[Policy]>,
    field: HeaderValue,
}

impl Policies {
    /// `policies`, their field formatted now.
    fn of(list: Box<[Policy]>) -> Policies {
        if list.is_empty() {
            return Policies::default();
        }
        let field = policy_value(&list);
        Policies {
            shared: Some(Arc::new(PolicyList { list, field })),
        }
    }

    /// The `RateLimit-Policy` value listing them; `None` when there are none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::{Policies, Policy};
    ///
    /// let policies = Policies::from([Policy::new("default", 10, Duration::from_secs(1))]);
    /// assert_eq!(policies.field().unwrap(), r#""default";q=10;w=1"#);
    /// ```
    #[inline]
    pub fn field(&self) -> Option<&HeaderValue> {
        self.shared.as_ref().map(|shared| &shared.field)
    }

    /// Whether `a` and `b` are clones of the same list (not merely equal).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::{Policies, Policy};
    ///
    /// let a = Policies::from([Policy::new("default", 10, Duration::from_secs(1))]);
    /// let b = Policies::from([Policy::new("default", 10, Duration::from_secs(1))]);
    /// assert!(Policies::ptr_eq(&a, &a.clone()));
    /// assert!(a == b && !Policies::ptr_eq(&a, &b));
    /// ```
    pub fn ptr_eq(a: &Policies, b: &Policies) -> bool {
        match (&a.shared, &b.shared) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Deref for Policies {
    type Target = [Policy];

    #[inline]
    fn deref(&self) -> &[Policy] {
        self.shared.as_ref().map_or(&[], |shared| &shared.list)
    }
}

impl fmt::Debug for Policies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Policies {
    fn eq(&self, other: &Policies) -> bool {
        **self == **other
    }
}

impl Eq for Policies {}

impl From<Vec<Policy>> for Policies {
    fn from(list: Vec<Policy>) -> Policies {
        Policies::of(list.into_boxed_slice())
    }
}

impl From<&[Policy]> for Policies {
    fn from(list: &[Policy]) -> Policies {
        Policies::of(list.into())
    }
}

impl<const N: usize> From<[Policy; N]> for Policies {
    fn from(list: [Policy; N]) -> Policies {
        Policies::of(Box::new(list))
    }
}

impl From<Arc<[Policy]>> for Policies {
    fn from(list: Arc<[Policy]>) -> Policies {
        Policies::of(list.as_ref().into())
    }
}

impl FromIterator<Policy> for Policies {
    fn from_iter<I: IntoIterator<Item = Policy>>(iter: I) -> Policies {
        Policies::of(iter.into_iter().collect())
    }
}
