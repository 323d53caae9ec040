//! The GCRA as a Redis script: the same decisions as [`Gcra`], shared by every process
//! that uses the same key.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisError, Script};

use crate::algorithm::{Algorithm, Gcra};
use crate::decision::{Admitted, Decision, InsufficientCapacity, Limited};
use crate::error::ConfigError;

/// The script: KEYS[1] = key; ARGV = interval µs, tolerance µs, n, optional now µs.
const GCRA_LUA: &str = include_str!("gcra.lua");

/// How long [`RedisGcra::connect`] waits for one connection attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest tolerance (burst × interval) the script accepts: 2^52 µs, about 142
/// years. The script computes `now + tolerance` in doubles, exact below 2^53, and `now`
/// in µs since the epoch stays below 2^52 until 2112.
const MAX_TOLERANCE_MICROS: u64 = 1 << 52;

/// A [`Gcra`] whose state lives in Redis, so that every process using the same key
/// shares one quota.
///
/// Each decision is one `EVALSHA` of a Lua script that is the same state machine as
/// [`Gcra`], run atomically on the server with the server's `TIME`, so the clocks of
/// the application servers never matter. The script stores the theoretical arrival time
/// in microseconds with a TTL that ends when the bucket is full again, and writes
/// nothing when it denies. It is reloaded automatically after a `NOSCRIPT` (a restart,
/// a failover or `SCRIPT FLUSH`).
///
/// A key `k` is stored as `{prefix}:{k}`: the braces make `k` the Cluster hash tag.
///
/// # Examples
///
/// ```no_run
/// use tollgate::algorithm::Gcra;
/// use tollgate::store::RedisGcra;
/// use tollgate::Quota;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let gcra = Gcra::new(Quota::per_second(10)?.burst(5)?);
/// let limiter = RedisGcra::connect("redis://127.0.0.1/", gcra, "api").await?;
/// match limiter.try_acquire("user-42", 1).await? {
///     Ok(admitted) => println!("{} left", admitted.remaining()),
///     Err(denied) => println!("retry after {:?}", denied.retry_after()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisGcra<C = ConnectionManager> {
    connection: C,
    gcra: Gcra,
    interval_micros: u64,
    tolerance_micros: u64,
    prefix: String,
    script: Script,
}

impl<C> fmt::Debug for RedisGcra<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisGcra")
            .field("gcra", &self.gcra)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisGcra<ConnectionManager> {
    /// Connects to the Redis at `url` through a [`ConnectionManager`], which reconnects
    /// by itself after the connection drops. A connection attempt times out after 1 s,
    /// and is retried once; for other settings, build the manager yourself and use
    /// [`new`](Self::new).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::{algorithm::Gcra, store::RedisGcra, Quota};
    /// # async fn run() -> Result<(), tollgate::store::StoreError> {
    /// let gcra = Gcra::new(Quota::per_minute(60).unwrap());
    /// let limiter = RedisGcra::connect("redis://127.0.0.1:6379/", gcra, "login").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] as [`new`](Self::new) does,
    /// [`StoreError::InvalidUrl`] for a malformed URL, and [`StoreError::Connection`]
    /// if Redis cannot be reached.
    pub async fn connect(url: &str, gcra: Gcra, prefix: &str) -> Result<Self, StoreError> {
        // Check the quota first: no connection for a limiter that cannot exist.
        script_units(&gcra)?;
        let client = Client::open(url).map_err(StoreError::InvalidUrl)?;
        // A down Redis must fail fast, not after the default six exponential retries
        // (about 10 s); a failed request triggers another reconnection anyway.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100))
            .set_connection_timeout(Some(CONNECT_TIMEOUT));
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(StoreError::from_redis)?;
        Ok(RedisGcra::new(connection, gcra, prefix)?)
    }
}

impl<C> RedisGcra<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// A limiter over `connection` (a [`ConnectionManager`] or a
    /// [`MultiplexedConnection`](redis::aio::MultiplexedConnection): cheap clones of one
    /// shared connection), storing its keys under `prefix`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::{algorithm::Gcra, store::RedisGcra, Quota};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let connection = client.get_multiplexed_async_connection().await?;
    /// let limiter = RedisGcra::new(connection, Gcra::new(Quota::per_second(5)?), "api")?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The script counts in whole microseconds, as doubles exact below 2^53:
    /// [`ConfigError::OutOfRange`] if the emission interval is not a whole number of
    /// microseconds (it would be rounded, and decisions would drift from [`Gcra`]'s),
    /// and [`ConfigError::Overflow`] if the tolerance (interval × burst) exceeds 2^52 µs,
    /// about 142 years (the TAT, now plus up to the tolerance, must stay below 2^53).
    pub fn new(connection: C, gcra: Gcra, prefix: &str) -> Result<Self, ConfigError> {
        let (interval_micros, tolerance_micros) = script_units(&gcra)?;
        Ok(RedisGcra {
            connection,
            gcra,
            interval_micros,
            tolerance_micros,
            prefix: prefix.to_owned(),
            script: Script::new(GCRA_LUA),
        })
    }

    /// The bucket this limiter applies.
    pub fn gcra(&self) -> &Gcra {
        &self.gcra
    }

    /// The Redis key of `key`: `{prefix}:{key}`, with `key` as the Cluster hash tag.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::{algorithm::Gcra, store::RedisGcra, Quota};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisGcra::connect("redis://127.0.0.1/", Gcra::new(Quota::per_second(5)?), "api").await?;
    /// assert_eq!(limiter.redis_key("user-42"), "api:{user-42}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}:{{{key}}}", self.prefix)
    }

    /// Takes `n` permits for `key` if they are all available now, on the server's clock.
    /// `n == 0` peeks.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tollgate::{algorithm::Gcra, store::RedisGcra, Quota};
    /// # async fn run(limiter: RedisGcra) -> Result<(), tollgate::store::StoreError> {
    /// if limiter.try_acquire("user-42", 1).await?.is_ok() {
    ///     // serve the request
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`StoreError`] if Redis could not decide: the decision is then unknown. A
    /// request for more than the burst is `Ok(Err(Denied::Insufficient))`, decided
    /// without a round trip.
    ///
    /// [`Denied::Insufficient`]: crate::Denied::Insufficient
    pub async fn try_acquire(&self, key: &str, n: u64) -> Result<Decision, StoreError> {
        self.decide(key, n, None).await
    }

    /// [`try_acquire`](Self::try_acquire) at an explicit time instead of the server's
    /// `TIME`: `now` since the Unix epoch, truncated to whole microseconds. For tests
    /// under virtual time; production code uses `try_acquire`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tollgate::{algorithm::Gcra, store::RedisGcra, Quota};
    /// # async fn run(limiter: RedisGcra) -> Result<(), tollgate::store::StoreError> {
    /// let decision = limiter.try_acquire_at("user-42", 1, Duration::from_secs(1_000)).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub async fn try_acquire_at(
        &self,
        key: &str,
        n: u64,
        now: Duration,
    ) -> Result<Decision, StoreError> {
        let micros = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
        self.decide(key, n, Some(micros)).await
    }

    async fn decide(&self, key: &str, n: u64, now: Option<u64>) -> Result<Decision, StoreError> {
        let burst = self.gcra.capacity();
        if n > burst {
            return Ok(Err(InsufficientCapacity::new(n, burst).into()));
        }
        let mut invocation = self.script.key(self.redis_key(key));
        invocation
            .arg(self.interval_micros)
            .arg(self.tolerance_micros)
            .arg(n);
        if let Some(now) = now {
            invocation.arg(now);
        }
        let mut connection = self.connection.clone();
        let reply: Vec<i64> = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(StoreError::from_redis)?;
        self.to_decision(&reply)
    }

    /// Maps the script's `{admitted, remaining, retry_after µs, reset_after µs}`.
    fn to_decision(&self, reply: &[i64]) -> Result<Decision, StoreError> {
        let &[admitted, remaining, retry_after, reset_after] = reply else {
            return Err(StoreError::Protocol(format!(
                "the GCRA script replied {reply:?}, not four integers"
            )));
        };
        let non_negative = |value: i64| {
            u64::try_from(value).map_err(|_| {
                StoreError::Protocol(format!("the GCRA script replied {reply:?}: a negative"))
            })
        };
        let remaining = non_negative(remaining)?;
        let retry_after = Duration::from_micros(non_negative(retry_after)?);
        let reset_after = Duration::from_micros(non_negative(reset_after)?);
        let burst = self.gcra.capacity();
        Ok(match admitted {
            1 => Ok(Admitted::new(burst, remaining, reset_after)),
            0 => Err(Limited::new(retry_after, burst, remaining, reset_after).into()),
            _ => {
                return Err(StoreError::Protocol(format!(
                    "the GCRA script replied {reply:?}: admitted is not 0 or 1"
                )))
            }
        })
    }
}

/// The interval and tolerance in whole microseconds, or why the script cannot run `gcra`.
fn script_units(gcra: &Gcra) -> Result<(u64, u64), ConfigError> {
    let interval = gcra.emission_interval();
    if interval.subsec_nanos() % 1_000 != 0 {
        return Err(ConfigError::OutOfRange {
            parameter: "interval",
            expected: "a whole number of microseconds (the Redis script counts in µs)",
        });
    }
    let overflow = ConfigError::Overflow { parameter: "burst" };
    let interval_micros = u64::try_from(interval.as_micros()).map_err(|_| overflow)?;
    let tolerance_micros = interval_micros
        .checked_mul(gcra.capacity())
        .filter(|&t| t <= MAX_TOLERANCE_MICROS)
        .ok_or(overflow)?;
    Ok((interval_micros, tolerance_micros))
}

/// Why a store could not decide. The decision is unknown: the caller's policy (fail open,
/// fail closed) applies.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The limiter's configuration cannot run in the store.
    Config(ConfigError),
    /// The URL is malformed or names an unsupported scheme.
    InvalidUrl(RedisError),
    /// Redis could not be reached, or the connection failed or timed out.
    Connection(RedisError),
    /// Redis answered with an error (the script failed, a wrong type at the key, a
    /// refused authentication, …).
    Server(RedisError),
    /// Redis answered something the script never returns.
    Protocol(String),
}

impl StoreError {
    fn from_redis(error: RedisError) -> StoreError {
        if error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_timeout()
        {
            StoreError::Connection(error)
        } else if error.kind() == redis::ErrorKind::InvalidClientConfig {
            StoreError::InvalidUrl(error)
        } else {
            StoreError::Server(error)
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Config(e) => write!(f, "limiter configuration: {e}"),
            StoreError::InvalidUrl(e) => write!(f, "invalid Redis URL: {e}"),
            StoreError::Connection(e) => write!(f, "Redis connection: {e}"),
            StoreError::Server(e) => write!(f, "Redis error: {e}"),
            StoreError::Protocol(what) => write!(f, "unexpected Redis reply: {what}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Config(e) => Some(e),
            StoreError::InvalidUrl(e) | StoreError::Connection(e) | StoreError::Server(e) => {
                Some(e)
            }
            StoreError::Protocol(_) => None,
        }
    }
}

impl From<ConfigError> for StoreError {
    fn from(e: ConfigError) -> StoreError {
        StoreError::Config(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;

    #[test]
    fn whole_microsecond_intervals_convert() {
        let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(3).unwrap());
        assert_eq!(script_units(&gcra), Ok((100_000, 300_000)));
    }

    #[test]
    fn sub_microsecond_interval_is_rejected() {
        let gcra = Gcra::new(Quota::per_second(3).unwrap());
        assert!(matches!(
            script_units(&gcra),
            Err(ConfigError::OutOfRange {
                parameter: "interval",
                ..
            })
        ));
    }

    #[test]
    fn tolerance_beyond_two_to_the_52_micros_is_rejected() {
        let interval = Duration::from_secs(1 << 32);
        let fits = Gcra::new(Quota::with_period(interval).unwrap().burst(1).unwrap());
        assert!(script_units(&fits).is_ok());
        let huge = Gcra::new(Quota::with_period(interval).unwrap().burst(2).unwrap());
        assert_eq!(
            script_units(&huge),
            Err(ConfigError::Overflow { parameter: "burst" })
        );
    }
}
