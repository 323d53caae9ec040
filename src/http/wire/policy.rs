//! [`Policy`]: one limit, as a `RateLimit-Policy` item names it.

use std::time::Duration;

/// One limit as the `RateLimit-Policy` field describes it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::Policy;
///
/// let policy = Policy::new("daily", 1_000, Duration::from_secs(86_400));
/// assert_eq!(policy.quota, 1_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// Its name: a structured-field string, so printable ASCII; any other byte is
    /// percent-encoded when sent (see [`wire`](crate::http::wire)).
    pub name: String,
    /// The most requests (permits) the policy grants at once: `q`.
    pub quota: u64,
    /// The time over which `quota` applies: `w`, in whole seconds when sent.
    pub window: Duration,
}

impl Policy {
    /// The policy `name`: `quota` permits over `window`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::Policy;
    ///
    /// let burst = Policy::new("burst", 100, Duration::from_secs(60));
    /// assert_eq!(burst.name, "burst");
    /// ```
    pub fn new(name: impl Into<String>, quota: u64, window: Duration) -> Policy {
        Policy {
            name: name.into(),
            quota,
            window,
        }
    }
}
