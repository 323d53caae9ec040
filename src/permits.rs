//! [`PermitSource`]: the one trait every limiter offers the integrations (the tower
//! layers and the shapers), whether its state is in process or in a store, and
//! whether it limits a rate or a number held at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::decision::{Admitted, Denied};
use crate::error::AcquireError;
use crate::sync::Mutex;

/// A future a [`PermitSource`] returns: boxed, so that it owns what it needs and can
/// be kept in a response future or a shaper between polls.
pub type PermitFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A source of permits: decide at once, decide by a round trip, or wait.
///
/// `Key` selects a limit: `()` for a single limiter ([`Limiter`](crate::Limiter),
/// [`Semaphore`](crate::Semaphore) behind an `Arc`, [`LeakyQueue`](crate::LeakyQueue)),
/// the key for a keyed one ([`KeyedLimiter`](crate::KeyedLimiter) under any form its
/// keys borrow as, `str` for a `SharedLimiter`).
/// [`for_key`](PermitSource::for_key) fixes a key, making a keyed source a single one.
///
/// What a grant hands over is a [`Permit`](PermitSource::Permit): nothing to hold for
/// a rate (`()`), a guard that gives the permits back when dropped for a semaphore,
/// and a [`Release`] for a keyed source (holding nothing over a rate, the key's
/// permits over a concurrency limit). An integration holds it for as long as the
/// work it admits lasts; [`into_release`](PermitSource::into_release) turns any
/// source's permit into a [`Release`] to hold alike.
///
/// # Examples
///
/// One function serving any source:
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::{Limiter, PermitSource, Quota};
///
/// fn admit<P: PermitSource>(source: &P) -> bool {
///     matches!(source.decide_now(&(), 1), Some(Ok(Ok(_))))
/// }
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new());
/// assert!(admit(&limiter));
/// assert!(!admit(&limiter));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub trait PermitSource<Key: ?Sized = ()>: Send + Sync + 'static {
    /// What a grant hands over, held while the admitted work lasts.
    type Permit: Send + 'static;
    /// What the source itself can fail with: [`Infallible`](std::convert::Infallible)
    /// in process, a `StoreError` for a store.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The most permits one request can ever be granted.
    fn capacity(&self) -> u64;

    /// The most of `max` permits one request is granted without waiting beyond what
    /// the limit itself imposes: a shaper's chunk. The default is `max` capped at the
    /// [`capacity`](PermitSource::capacity).
    fn chunk(&self, max: u64) -> u64 {
        max.min(self.capacity())
    }

    /// Decides on `n` permits for `key` now, without a round trip; `None` when the
    /// source needs one (call [`decide`](PermitSource::decide)), having done nothing.
    /// Never waits for permits.
    ///
    /// # Errors
    ///
    /// The source's own failure, inside the `Some`; being limited is `Ok(Err(..))`.
    fn decide_now(&self, key: &Key, n: u64) -> Option<Result<Decided<Self::Permit>, Self::Error>>;

    /// Decides on `n` permits for `key`, by a round trip where the source needs one.
    /// Never waits for permits.
    ///
    /// # Errors
    ///
    /// As [`decide_now`](PermitSource::decide_now).
    ///
    /// # Cancel safety
    ///
    /// Dropped before it completes, the decision is the source's: an in-process one
    /// decided before returning the future; a store may have taken the permits.
    fn decide(&self, key: &Key, n: u64)
    -> PermitFuture<Result<Decided<Self::Permit>, Self::Error>>;

    /// Waits, in the source's FIFO queue, until `n` permits for `key` are granted, or
    /// for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimedOut`] (at once when the wait is known to be longer),
    /// [`AcquireError::Insufficient`] for more than the capacity,
    /// [`AcquireError::Closed`], [`AcquireError::QueueFull`] for a bounded queue, and
    /// [`AcquireError::Source`] for the source's own failure.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives back whatever it booked; the next waiter moves up.
    fn wait(
        &self,
        key: &Key,
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<Self::Permit, AcquireError<Self::Error>>>;

    /// Gives back `n` permits for `key` granted and not used. A store's refund goes
    /// in the background, best effort: one that fails leaves them unused until their
    /// time passes. A guard ([`Permit`](PermitSource::Permit)) gives back by being
    /// dropped instead; this is for rates.
    fn refund(&self, key: &Key, n: u64);

    /// `permit` as a [`Release`], for an integration that holds the permits of any
    /// source alike (the HTTP server layer holds it to the end of the response body).
    /// The default holds a permit that has a size (a semaphore's guard) in a box, and
    /// nothing, without an allocation, for one that has none (`()`, dropped at once).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::{PermitSource, Semaphore};
    ///
    /// let semaphore = Arc::new(Semaphore::new(1)?);
    /// let Some(Ok(Ok(grant))) = semaphore.decide_now(&(), 1) else { panic!() };
    /// let release = <Arc<Semaphore>>::into_release(grant.into_permit());
    /// assert!(release.holds());
    /// assert_eq!(semaphore.available_permits(), 0);
    /// drop(release);
    /// assert_eq!(semaphore.available_permits(), 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    fn into_release(permit: Self::Permit) -> Release {
        if std::mem::size_of::<Self::Permit>() == 0 {
            drop(permit);
            return Release::nothing();
        }
        Release::new(Guard(Mutex::new(permit)))
    }

    /// This source with `key` fixed: a single source, for the integrations that take
    /// one (a client's throttle, a shaper).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::{KeyedConfig, KeyedLimiter, PermitSource, Quota};
    ///
    /// let limiter: KeyedLimiter<String, Gcra> =
    ///     KeyedLimiter::new(Gcra::new(Quota::per_second(5)?), KeyedConfig::new(100))?;
    /// let api = limiter.for_key("api.example.com");
    /// assert!(matches!(api.decide_now(&(), 1), Some(Ok(Ok(_)))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn for_key(self, key: &Key) -> ForKey<Self, Key>
    where
        Self: Sized,
        Key: ToOwned,
        Key::Owned: Send + Sync + 'static,
    {
        ForKey {
            source: self,
            key: key.to_owned(),
        }
    }
}

/// A decision that hands over a permit: granted with it, or denied.
pub type Decided<P> = Result<Grant<P>, Denied>;

/// Permits granted: what remains, and what to hold while the admitted work lasts.
#[derive(Debug)]
#[must_use = "a semaphore's permit is given back when the grant is dropped"]
pub struct Grant<P> {
    admitted: Admitted,
    permit: P,
}

impl<P> Grant<P> {
    /// A grant of `permit`, decided as `admitted`.
    pub fn new(admitted: Admitted, permit: P) -> Grant<P> {
        Grant { admitted, permit }
    }

    /// What the limiter reported: what remains, and when it resets.
    pub fn admitted(&self) -> &Admitted {
        &self.admitted
    }

    /// The permit, to hold while the work lasts.
    pub fn into_permit(self) -> P {
        self.permit
    }

    /// Both parts.
    pub fn into_parts(self) -> (Admitted, P) {
        (self.admitted, self.permit)
    }
}

/// A keyed [`PermitSource`] with its key fixed: a single source. Made by
/// [`PermitSource::for_key`].
pub struct ForKey<S, Key: ?Sized + ToOwned> {
    source: S,
    key: Key::Owned,
}

impl<S, Key: ?Sized + ToOwned> ForKey<S, Key> {
    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The key.
    pub fn key(&self) -> &Key {
        std::borrow::Borrow::borrow(&self.key)
    }
}

impl<S: Clone, Key: ?Sized + ToOwned> Clone for ForKey<S, Key>
where
    Key::Owned: Clone,
{
    fn clone(&self) -> Self {
        ForKey {
            source: self.source.clone(),
            key: self.key.clone(),
        }
    }
}

impl<S: fmt::Debug, Key: ?Sized + ToOwned> fmt::Debug for ForKey<S, Key>
where
    Key::Owned: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForKey")
            .field("source", &self.source)
            .field("key", &self.key)
            .finish()
    }
}

impl<S, Key> PermitSource for ForKey<S, Key>
where
    S: PermitSource<Key>,
    Key: ?Sized + ToOwned + 'static,
    Key::Owned: Send + Sync + 'static,
{
    type Permit = S::Permit;
    type Error = S::Error;

    fn capacity(&self) -> u64 {
        self.source.capacity()
    }

    fn chunk(&self, max: u64) -> u64 {
        self.source.chunk(max)
    }

    fn decide_now(&self, _: &(), n: u64) -> Option<Result<Decided<S::Permit>, S::Error>> {
        self.source.decide_now(self.key(), n)
    }

    fn decide(&self, _: &(), n: u64) -> PermitFuture<Result<Decided<S::Permit>, S::Error>> {
        self.source.decide(self.key(), n)
    }

    fn wait(
        &self,
        _: &(),
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<S::Permit, AcquireError<S::Error>>> {
        self.source.wait(self.key(), n, timeout)
    }

    fn refund(&self, _: &(), n: u64) {
        self.source.refund(self.key(), n)
    }

    fn into_release(permit: S::Permit) -> Release {
        S::into_release(permit)
    }
}

/// A single [`PermitSource`] that serves every key alike: one limit shared by all
/// keys, for an integration that asks a keyed source (the HTTP server layer's
/// `RateLimitLayer::global` wraps its
/// source in one). The reverse of [`ForKey`].
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
/// use tollgate::{EveryKey, Limiter, PermitSource, Quota};
///
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new());
/// let shared = EveryKey::new(limiter);
/// assert!(matches!(shared.decide_now("alice", 1), Some(Ok(Ok(_)))));
/// assert!(matches!(shared.decide_now("bob", 1), Some(Ok(Err(_)))));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct EveryKey<S> {
    source: S,
}

impl<S: PermitSource> EveryKey<S> {
    /// `source`, serving every key.
    pub fn new(source: S) -> EveryKey<S> {
        EveryKey { source }
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }
}

impl<S: PermitSource, Key: ?Sized> PermitSource<Key> for EveryKey<S> {
    type Permit = S::Permit;
    type Error = S::Error;

    fn capacity(&self) -> u64 {
        self.source.capacity()
    }

    fn chunk(&self, max: u64) -> u64 {
        self.source.chunk(max)
    }

    #[inline]
    fn decide_now(&self, _: &Key, n: u64) -> Option<Result<Decided<S::Permit>, S::Error>> {
        self.source.decide_now(&(), n)
    }

    fn decide(&self, _: &Key, n: u64) -> PermitFuture<Result<Decided<S::Permit>, S::Error>> {
        self.source.decide(&(), n)
    }

    fn wait(
        &self,
        _: &Key,
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<S::Permit, AcquireError<S::Error>>> {
        self.source.wait(&(), n, timeout)
    }

    fn refund(&self, _: &Key, n: u64) {
        self.source.refund(&(), n)
    }

    fn into_release(permit: S::Permit) -> Release {
        S::into_release(permit)
    }
}

/// Permits held while the work they admit lasts, given back when this is dropped:
/// what a grant of a [`KeyedLimiter`](crate::KeyedLimiter) or a
/// `SharedLimiter` hands over. Over a concurrency limit
/// (an algorithm whose permits are [held](crate::algorithm::Algorithm::HELD), such as
/// [`Concurrency`](crate::algorithm::Concurrency) or a store's
/// [`Leased`](crate::algorithm::Leased) rule) it gives the key's permits back; over a
/// rate it holds nothing, and costs no allocation.
///
/// A store's release goes as its [`refund`](PermitSource::refund) does: at once in
/// memory, in the background on the current tokio runtime for Redis (best effort:
/// one that fails, or finds no runtime, leaves the permits taken until their lease
/// ends).
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Concurrency;
/// use tollgate::{KeyedConfig, KeyedLimiter, PermitSource};
///
/// let limiter: KeyedLimiter<String, Concurrency> =
///     KeyedLimiter::new(Concurrency::new(1)?, KeyedConfig::new(100))?;
/// let Some(Ok(Ok(grant))) = limiter.decide_now("alice", 1) else { panic!() };
/// let release = grant.into_permit();
/// assert!(release.holds());
/// assert!(limiter.try_acquire("alice", 1).is_err());
/// drop(release);
/// assert!(limiter.try_acquire("alice", 1).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the permits are given back when this is dropped"]
#[derive(Default)]
pub struct Release(Option<Box<dyn GiveBack>>);

/// What a [`Release`] holds: gives its permits back once.
pub(crate) trait GiveBack: Send + Sync + 'static {
    fn give_back(self: Box<Self>);
}

/// Any permit, given back by being dropped.
struct Guard<P>(Mutex<P>);

impl<P: Send + 'static> GiveBack for Guard<P> {
    fn give_back(self: Box<Self>) {}
}

impl Release {
    /// Nothing held: what a grant over a rate hands over.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!tollgate::Release::nothing().holds());
    /// ```
    pub const fn nothing() -> Release {
        Release(None)
    }

    /// Holds `held`, given back when this is dropped.
    pub(crate) fn new(held: impl GiveBack) -> Release {
        Release(Some(Box::new(held)))
    }

    /// Whether permits are held, to be given back when this is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!tollgate::Release::default().holds());
    /// ```
    #[inline]
    pub fn holds(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Release {
    #[inline]
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            held.give_back();
        }
    }
}

impl fmt::Debug for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.holds() {
            "Release(held)"
        } else {
            "Release(nothing)"
        })
    }
}
