//! [`Verdict`]: the answer of a check, holding a granted guard permit.

use std::fmt;

use super::{Policies, Policy};
use crate::decision::Decision;
use crate::permits::Release;
use crate::sync::Arc;

/// The answer of [`Limits::check`](crate::http::Limits::check): the decision, and the policies it was made under.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::{Policy, Verdict};
/// use tollgate::Admitted;
///
/// let policy = Policy::new("default", 10, Duration::from_secs(1));
/// let verdict = Verdict::new(Ok(Admitted::new(10, 9, Duration::from_millis(100))), vec![policy], 0);
/// assert!(verdict.is_admitted());
/// ```
#[derive(Clone, Debug)]
pub struct Verdict {
    /// `None` when no limit applied (the request passes with no rate-limit fields).
    pub decision: Option<Decision>,
    /// The policies that applied: shared, so that a [`Limits`](crate::http::Limits) with fixed policies
    /// hands out the same list, and its `RateLimit-Policy` value, to every request
    /// without copying or formatting them.
    pub policies: Policies,
    /// Which of `policies` the decision reports: the one that denied, or the one
    /// closest to exhaustion.
    pub decisive: usize,
    /// Permits held with the decision (a semaphore's, a key's concurrency permits),
    /// given back when the last clone of the verdict, or of what it handed them to,
    /// is dropped: the server layer moves them to the response body, which holds
    /// them to its end.
    pub(crate) held: Held,
    /// Whether the source that decided reported the decision to a hub of its own
    /// ([`DescribeLimits::events`](crate::http::DescribeLimits::events)): the server
    /// layer then reports it to no other, so that each request is reported once.
    pub(crate) reported: bool,
}

/// Verdicts compare by what they report: the decision, the policies and the decisive
/// one; not by the permits they hold or where they were reported.
impl PartialEq for Verdict {
    fn eq(&self, other: &Verdict) -> bool {
        self.decision == other.decision
            && self.policies == other.policies
            && self.decisive == other.decisive
    }
}

impl Eq for Verdict {}

/// Permits a verdict holds, shared by its clones; a grant that holds nothing costs
/// no allocation.
#[derive(Clone, Default)]
pub(crate) struct Held(Option<Arc<Release>>);

impl Held {
    /// Whether permits are held.
    #[inline]
    pub(crate) fn is_held(&self) -> bool {
        self.0.is_some()
    }

    #[inline]
    pub(crate) fn new(release: Release) -> Held {
        if !release.holds() {
            // Nothing to give back: skip the drop glue on the path of every request.
            std::mem::forget(release);
            return Held(None);
        }
        Held::holding(release)
    }

    /// Out of line: only a grant that holds permits comes here.
    #[cold]
    #[inline(never)]
    fn holding(release: Release) -> Held {
        Held(Some(Arc::new(release)))
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Held(permit)"
        } else {
            "Held(nothing)"
        })
    }
}

impl Verdict {
    /// `decision` made under `policies`, reported under `policies[decisive]`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::{Policy, Verdict};
    /// use tollgate::{Denied, Limited};
    ///
    /// let policy = Policy::new("default", 10, Duration::from_secs(1));
    /// let denied = Denied::Limited(Limited::new(Duration::from_millis(100), 10, 0, Duration::from_secs(1)));
    /// let verdict = Verdict::new(Err(denied), vec![policy], 0);
    /// assert!(!verdict.is_admitted());
    /// assert_eq!(verdict.decisive_policy().unwrap().name, "default");
    /// ```
    pub fn new(decision: Decision, policies: impl Into<Policies>, decisive: usize) -> Verdict {
        Verdict {
            decision: Some(decision),
            policies: policies.into(),
            decisive,
            held: Held::default(),
            reported: false,
        }
    }

    /// No limit applied.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Verdict;
    ///
    /// assert!(Verdict::unlimited().is_admitted());
    /// ```
    pub fn unlimited() -> Verdict {
        Verdict {
            decision: None,
            policies: Policies::default(),
            decisive: 0,
            held: Held::default(),
            reported: false,
        }
    }

    /// Whether the request may pass.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Verdict;
    ///
    /// assert!(Verdict::unlimited().is_admitted());
    /// ```
    #[inline]
    pub fn is_admitted(&self) -> bool {
        !matches!(self.decision, Some(Err(_)))
    }

    /// The policy the decision reports, `policies[decisive]`, if there is one.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::Verdict;
    ///
    /// assert_eq!(Verdict::unlimited().decisive_policy(), None);
    /// ```
    #[inline]
    pub fn decisive_policy(&self) -> Option<&Policy> {
        self.policies.get(self.decisive)
    }
}
