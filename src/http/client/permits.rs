//! Where the client layer gets its permits: an in-process [`Limiter`], or a
//! [`SharedLimiter`] on one fixed key (limits shared across processes through a store).

use std::time::Duration;

use async_trait::async_trait;

use super::ThrottleError;
use crate::algorithm::Algorithm;
use crate::decision::InsufficientCapacity;
use crate::store::{SharedLimiter, Store};
use crate::time::Clock;
use crate::AcquireError;
use crate::Limiter;

/// A source of permits the client layer waits on: "acquire `n`, waiting if need be".
///
/// Implemented for [`Limiter`] and for [`StorePermits`]. The clock is the one the
/// layer measures pauses on and sleeps through them with.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::client::Permits;
/// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
///
/// # futures::executor::block_on(async {
/// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(1)?), ManualClock::new());
/// Permits::acquire(&limiter, 1, None).await?;
/// assert_eq!(Permits::capacity(&limiter), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait Permits: Send + Sync + 'static {
    /// The clock pauses are measured on.
    type Clock: Clock;

    /// The clock pauses are measured on.
    fn clock(&self) -> &Self::Clock;

    /// The most permits one call can ever be granted.
    fn capacity(&self) -> u64;

    /// Waits until `n` permits are granted, or for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`ThrottleError::TimedOut`], at once when the wait is known to exceed
    /// `timeout`; [`ThrottleError::Insufficient`] when `n` exceeds the capacity;
    /// [`ThrottleError::Closed`] or [`ThrottleError::Store`] as the source may fail.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes must give back whatever it booked.
    async fn acquire(&self, n: u64, timeout: Option<Duration>) -> Result<(), ThrottleError>;

    /// Gives back `n` permits granted and not used. Best effort: a source that fails
    /// to take them back leaves them unused.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the permits unused; nothing else is lost.
    async fn refund(&self, n: u64);
}

#[async_trait]
impl<A: Algorithm, C: Clock> Permits for Limiter<A, C> {
    type Clock = C;

    fn clock(&self) -> &C {
        Limiter::clock(self)
    }

    fn capacity(&self) -> u64 {
        self.algorithm().capacity()
    }

    async fn acquire(&self, n: u64, timeout: Option<Duration>) -> Result<(), ThrottleError> {
        let waited = match timeout {
            Some(timeout) => self.acquire_timeout(n, timeout).await,
            None => Limiter::acquire(self, n).await,
        };
        waited.map(drop).map_err(|e| match e {
            AcquireError::Closed => ThrottleError::Closed,
            AcquireError::Insufficient(i) => ThrottleError::Insufficient(i),
            // A limiter's queue is unbounded; were it full, no permit came in time.
            AcquireError::TimedOut | AcquireError::QueueFull { .. } => ThrottleError::TimedOut,
        })
    }

    async fn refund(&self, n: u64) {
        Limiter::refund(self, n)
    }
}

/// A [`SharedLimiter`] on one fixed key: every process that throttles with the same
/// store, rule and key shares one limit (through Redis, say).
///
/// The layer's pauses live in the process, on the limiter's clock
/// ([`SharedLimiter::with_clock`]); the permits live in the store.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::client::{StorePermits, ThrottleLayer};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// let store = MemoryStore::new(KeyedConfig::new(100), "clients")?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(5)?))?;
/// let layer = ThrottleLayer::new(StorePermits::new(limiter, "api.example.com"));
/// # drop(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct StorePermits<S, C> {
    limiter: SharedLimiter<S, C>,
    key: String,
}

impl<S: Store, C: Clock> StorePermits<S, C> {
    /// Permits for `key` from `limiter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::client::StorePermits;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100), "clients")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(5)?))?;
    /// let permits = StorePermits::new(limiter, "api.example.com");
    /// assert_eq!(permits.key(), "api.example.com");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(limiter: SharedLimiter<S, C>, key: impl Into<String>) -> StorePermits<S, C> {
        StorePermits {
            limiter,
            key: key.into(),
        }
    }

    /// The limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::client::StorePermits;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100), "clients")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(5)?))?;
    /// let permits = StorePermits::new(limiter, "api.example.com");
    /// assert_eq!(permits.limiter().capacity(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &SharedLimiter<S, C> {
        &self.limiter
    }

    /// The key every call counts against.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::client::StorePermits;
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100), "clients")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(5)?))?;
    /// let permits = StorePermits::new(limiter, "api.example.com");
    /// assert_eq!(permits.key(), "api.example.com");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }
}

#[async_trait]
impl<S: Store + 'static, C: Clock> Permits for StorePermits<S, C> {
    type Clock = C;

    fn clock(&self) -> &C {
        self.limiter.clock()
    }

    fn capacity(&self) -> u64 {
        self.limiter.capacity()
    }

    async fn acquire(&self, n: u64, timeout: Option<Duration>) -> Result<(), ThrottleError> {
        let acquired = match timeout {
            Some(timeout) => self.limiter.acquire_timeout(&self.key, n, timeout).await,
            None => self.limiter.acquire(&self.key, n).await,
        };
        acquired.map(drop).map_err(|e| match e {
            AcquireError::Closed => ThrottleError::Closed,
            AcquireError::Insufficient(i) => ThrottleError::Insufficient(i),
            AcquireError::Source(e) => ThrottleError::Store(e),
            _ => ThrottleError::TimedOut,
        })
    }

    async fn refund(&self, n: u64) {
        // A refund that fails leaves the permits unused until their time passes.
        let _ = self.limiter.refund(&self.key, n).await;
    }
}

/// Fails at once for more than `permits` can ever grant.
pub(super) fn check_capacity<P: Permits>(permits: &P, n: u64) -> Result<(), ThrottleError> {
    let capacity = permits.capacity();
    if n > capacity {
        return Err(ThrottleError::Insufficient(InsufficientCapacity::new(
            n, capacity,
        )));
    }
    Ok(())
}
