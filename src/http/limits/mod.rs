//! [`Limits`]: what the server layer consults for each request, and what it answers:
//! a [`Verdict`] under [`Policies`], or a [`CheckError`]. [`KeyedLimits`] asks any
//! permit source keyed by `str`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::request::Parts;

mod describe;
mod error;
mod keyed;
mod policy;
mod verdict;

pub use describe::DescribeLimits;
pub use error::CheckError;
pub use keyed::KeyedLimits;
pub use policy::Policies;
// Defined with the field grammar that writes it; `http::Policy` is its public path.
pub use crate::http::wire::policy::Policy;
pub(crate) use verdict::Held;
pub use verdict::Verdict;

/// The future of a [`Limits::check`]: its result at once when the check was decided
/// without waiting (an in-process store), or a boxed future otherwise.
///
/// A check decided at once costs no allocation, and the server layer calls the inner
/// service straight away.
///
/// # Cancel safety
///
/// A ready check has already been decided: dropping it discards the verdict, not the
/// permits taken. A pending one is as cancel safe as the future it boxes.
///
/// # Panics
///
/// If polled again after it completed.
///
/// # Examples
///
/// ```
/// use tollgate::http::{CheckFuture, Verdict};
///
/// # futures::executor::block_on(async {
/// let now = CheckFuture::ready(Ok(Verdict::unlimited()));
/// assert!(now.await?.is_admitted());
/// let later = CheckFuture::new(async { Ok(Verdict::unlimited()) });
/// assert!(later.await?.is_admitted());
/// # Ok::<(), tollgate::http::CheckError>(())
/// # }).unwrap();
/// ```
pub struct CheckFuture(Check);

type BoxedCheck = Pin<Box<dyn Future<Output = Result<Verdict, CheckError>> + Send>>;

enum Check {
    /// Decided; `None` once the result is taken.
    Ready(Option<Result<Verdict, CheckError>>),
    Pending(BoxedCheck),
}

impl CheckFuture {
    /// A check already decided: `result`, with no allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::{CheckError, CheckFuture, KeyError};
    ///
    /// # futures::executor::block_on(async {
    /// let failed = CheckFuture::ready(Err(CheckError::from(KeyError::NoPeerAddress)));
    /// assert!(failed.await.is_err());
    /// # });
    /// ```
    #[inline]
    pub fn ready(result: Result<Verdict, CheckError>) -> CheckFuture {
        CheckFuture(Check::Ready(Some(result)))
    }

    /// A check still to be decided by `future` (a round trip to a remote store), boxed.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::{CheckFuture, Verdict};
    ///
    /// # futures::executor::block_on(async {
    /// let check = CheckFuture::new(async { Ok(Verdict::unlimited()) });
    /// assert_eq!(check.await?.decision, None);
    /// # Ok::<(), tollgate::http::CheckError>(())
    /// # }).unwrap();
    /// ```
    pub fn new<F>(future: F) -> CheckFuture
    where
        F: Future<Output = Result<Verdict, CheckError>> + Send + 'static,
    {
        CheckFuture(Check::Pending(Box::pin(future)))
    }

    /// The result, if the check was decided at once; the future itself otherwise.
    #[inline]
    pub(crate) fn into_ready(self) -> Result<Result<Verdict, CheckError>, CheckFuture> {
        match self.0 {
            Check::Ready(Some(result)) => Ok(result),
            other => Err(CheckFuture(other)),
        }
    }
}

impl Future for CheckFuture {
    type Output = Result<Verdict, CheckError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Check::Ready(result) => Poll::Ready(
                result
                    .take()
                    .expect("CheckFuture polled after it completed"),
            ),
            Check::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl fmt::Debug for CheckFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Check::Ready(Some(result)) => {
                f.debug_tuple("CheckFuture::Ready").field(result).finish()
            }
            Check::Ready(None) => f.write_str("CheckFuture::Done"),
            Check::Pending(_) => f.write_str("CheckFuture::Pending(..)"),
        }
    }
}

/// Decides whether a request may pass, from its head.
///
/// The check reads what it needs from the head at once (a key, descriptors) and returns
/// a `'static` [`CheckFuture`], so that the request can go on to the inner service
/// afterwards. When it can decide without waiting (an in-process store), it returns
/// [`CheckFuture::ready`]: no allocation, and the layer calls the inner service within
/// its `call`. Otherwise [`CheckFuture::new`] boxes the future that decides.
///
/// # Examples
///
/// A limit that only applies to `POST` requests, over [`KeyedLimits`]:
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::{CheckFuture, Global, KeyedLimits, Limits, Policy, Verdict};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// struct Writes(KeyedLimits<Global, SharedLimiter<MemoryStore>>);
///
/// impl Limits for Writes {
///     fn check(&self, request: &http::request::Parts) -> CheckFuture {
///         if request.method == http::Method::POST {
///             self.0.check(request)
///         } else {
///             CheckFuture::ready(Ok(Verdict::unlimited()))
///         }
///     }
///
///     fn policies(&self) -> Vec<Policy> {
///         self.0.policies()
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(1_000), "writes")?;
/// let limits = Writes(KeyedLimits::new(Global, SharedLimiter::new(store, Gcra::new(Quota::per_second(1)?))?));
/// let (get, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(limits.check(&get).await?.decision, None);
/// let (post, ()) = http::Request::post("/").body(()).unwrap().into_parts();
/// assert!(limits.check(&post).await?.is_admitted());
/// assert!(!limits.check(&post).await?.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub trait Limits: Send + Sync + 'static {
    /// Decides `request`: takes its permits if every limit that applies admits it.
    ///
    /// # Errors
    ///
    /// [`CheckError::Key`] when the request carries no usable key (the layer answers
    /// 400, or 500 for a missing peer address), [`CheckError::Store`] when the store
    /// could not decide (503).
    ///
    /// # Cancel safety
    ///
    /// As the store's [`execute`](crate::store::Store::execute): dropped, the decision
    /// is unknown. A check decided at once has taken its permits before it returns.
    fn check(&self, request: &Parts) -> CheckFuture;

    /// Every policy this can report, for documentation and `RateLimit-Policy`.
    fn policies(&self) -> Vec<Policy>;
}
