//! [`Limits`]: what the server layer consults for each request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;

use super::key::{KeyError, KeyExtractor};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::store::{SharedLimiter, Store, StoreError};

/// The future of a [`Limits::check`].
pub type CheckFuture = Pin<Box<dyn Future<Output = Result<Verdict, CheckError>> + Send>>;

/// Decides whether a request may pass, from its head.
///
/// The check reads what it needs from the head at once (a key, descriptors) and returns
/// a `'static` future, so that the request can go on to the inner service afterwards.
pub trait Limits: Send + Sync + 'static {
    /// Decides `request`: takes its permits if every limit that applies admits it.
    ///
    /// # Errors
    ///
    /// [`CheckError::Key`] when the request carries no usable key (the layer answers
    /// 400), [`CheckError::Store`] when the store could not decide (503).
    ///
    /// # Cancel safety
    ///
    /// As the store's [`execute`](crate::store::Store::execute): dropped, the decision
    /// is unknown.
    fn check(&self, request: &Parts) -> CheckFuture;

    /// Every policy this can report, for documentation and `RateLimit-Policy`.
    fn policies(&self) -> Vec<Policy>;
}

/// One limit as the `RateLimit-Policy` field describes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// Its name: a structured-field string (printable ASCII).
    pub name: String,
    /// The most requests (permits) the policy grants at once: `q`.
    pub quota: u64,
    /// The time over which `quota` applies: `w`, in whole seconds when sent.
    pub window: Duration,
}

/// The answer of [`Limits::check`]: the decision, and the policies it was made under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// `None` when no limit applied (the request passes with no rate-limit fields).
    pub decision: Option<Decision>,
    /// The policies that applied.
    pub policies: Vec<Policy>,
    /// Which of `policies` the decision reports: the one that denied, or the one
    /// closest to exhaustion.
    pub decisive: usize,
}

impl Verdict {
    /// `decision` made under `policies`, reported under `policies[decisive]`.
    pub fn new(decision: Decision, policies: Vec<Policy>, decisive: usize) -> Verdict {
        Verdict {
            decision: Some(decision),
            policies,
            decisive,
        }
    }

    /// No limit applied.
    pub fn unlimited() -> Verdict {
        Verdict {
            decision: None,
            policies: Vec::new(),
            decisive: 0,
        }
    }

    /// Whether the request may pass.
    pub fn is_admitted(&self) -> bool {
        !matches!(self.decision, Some(Err(_)))
    }
}

/// Why a request could not be checked.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The request carries no usable key.
    Key(KeyError),
    /// The store could not decide.
    Store(StoreError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Key(e) => e.fmt(f),
            CheckError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Key(e) => Some(e),
            CheckError::Store(e) => Some(e),
        }
    }
}

impl From<KeyError> for CheckError {
    fn from(e: KeyError) -> Self {
        CheckError::Key(e)
    }
}

impl From<StoreError> for CheckError {
    fn from(e: StoreError) -> Self {
        CheckError::Store(e)
    }
}

/// A [`SharedLimiter`] per key, the key read from each request by a [`KeyExtractor`].
pub struct KeyedLimits<K, S, C> {
    pub(crate) extractor: K,
    pub(crate) limiter: SharedLimiter<S, C>,
    pub(crate) policies: Arc<[Policy]>,
}

impl<K: fmt::Debug, S, C> fmt::Debug for KeyedLimits<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimits")
            .field("extractor", &self.extractor)
            .field("limiter", &self.limiter)
            .finish()
    }
}

// Implemented by the server layer's module: `KeyedLimits::new(extractor, limiter)`,
// deriving each rule's `Policy`, and `Limits for KeyedLimits`.
#[allow(dead_code)]
fn _assert_bounds<K: KeyExtractor, S: Store + 'static, C: Clock>() {}
