//! Limits shared by many processes: the state lives in a [`Store`].
//!
//! A store decides a [`Request`]: one or more [`Rule`]s (the algorithms as
//! [`algorithm`](crate::algorithm) lists them, re-exported here), each on its key,
//! asked to acquire, peek, reserve or refund permits, all-or-nothing and atomically.
//! The same [`Rule`]s run in
//!
//! - [`MemoryStore`], in this process's memory: the reference, and the local
//!   fallback;
//! - `RedisStore` (feature `redis`), where every algorithm is a Lua script that is
//!   the same state machine as its in-process twin, run on the Redis server's clock.
//!
//! Keys are `{prefix}:{tag}:{key}`, with literal braces: the tag is the Redis Cluster
//! hash tag, so that one request's keys share a slot.
//!
//! On top of any store:
//!
//! - [`SharedLimiter`]: the limiter API per key (`try_acquire`, `reserve`,
//!   `acquire(n).await`, …), one round trip per call;
//! - [`Resilient`]: a per-call deadline, a [`FailurePolicy`] (open, closed, or a local
//!   fallback holding each node's share, [`Rule::per_node`]) and a circuit breaker;
//! - [`DeniedCache`]: known denials answered locally until their retry time;
//! - `BatchedLimiter` (feature `redis`): fixed windows counted locally and synced to
//!   Redis in batches, trading a bounded over-admission for fewer round trips.

use async_trait::async_trait;

use crate::sync::Arc;

mod detached;
mod error;
pub(crate) mod hybrid;
pub(crate) mod limiter;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod request;
mod resilient;
mod rule;
mod share;

#[cfg(feature = "redis")]
pub use self::redis::RedisStore;
#[cfg(feature = "redis")]
pub(crate) use self::redis::from_redis;
pub use crate::algorithm::{Rule, RuleKind};
pub use error::StoreError;
#[cfg(feature = "redis")]
pub use hybrid::BatchedLimiter;
pub use hybrid::DeniedCache;
pub use limiter::SharedLimiter;
pub use memory::MemoryStore;
pub use request::{Check, Op, Reply, Request};
pub use resilient::{BreakerState, FailurePolicy, Resilient, ResilientBuilder, ResilientStats};

/// The longest key (prefix, tag and key together) a store accepts by default, in bytes.
pub const DEFAULT_MAX_KEY_LEN: usize = 1024;

/// Where limits keep their state when it is shared, or decided outside the caller.
///
/// A store decides each [`Request`] atomically: every check of the request sees the
/// same instant, and with several checks either all take their permits or none does.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::{FixedWindow, Gcra};
/// use tollgate::store::{Check, MemoryStore, Op, Reply, Request, Rule, Store};
/// use tollgate::{KeyedConfig, Quota};
/// use std::time::Duration;
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
/// let burst = Rule::from(Gcra::new(Quota::per_second(10)?));
/// let daily = Rule::from(FixedWindow::new(1_000, Duration::from_secs(86_400))?);
/// let checks = [Check::new("burst", &burst), Check::new("daily", &daily)];
/// let outcome = store.execute(&Request::new("client-7", &checks, Op::Acquire(1))).await?;
/// assert!(outcome.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait Store: Send + Sync {
    /// Decides `request`.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the store could not decide: the decision is then unknown,
    /// and nothing may have been taken. A request for more permits than a rule can ever
    /// grant is not an error: it is decided as `Denied::Insufficient`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves the decision unknown: a remote
    /// store may still apply it.
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError>;

    /// Checks that this store can run `rule`, without a round trip: a limiter checks
    /// its rules once, when it is built. The default accepts every rule.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a rule the store cannot run exactly (the Redis
    /// scripts count whole microseconds, in doubles exact below 2^53).
    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        let _ = rule;
        Ok(())
    }

    /// Decides `request` without waiting, when this store can (an in-process store
    /// such as [`MemoryStore`]): callers then skip the future. `None` means "call
    /// [`execute`](Store::execute)"; that is the default.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute), inside the `Some`.
    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        let _ = request;
        None
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        (**self).execute(request).await
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        (**self).check_rule(rule)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        (**self).try_execute_now(request)
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for &S {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        (**self).execute(request).await
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        (**self).check_rule(rule)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        (**self).try_execute_now(request)
    }
}

/// `{prefix}:{tag}:{key}`, or `{prefix}:{tag}` for an empty key; the braces around the
/// tag are literal.
pub(crate) fn storage_key(prefix: &str, tag: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + tag.len() + key.len() + 4);
    out.push_str(prefix);
    out.push_str(":{");
    out.push_str(tag);
    out.push('}');
    if !key.is_empty() {
        out.push(':');
        out.push_str(key);
    }
    out
}

/// A prefix must not hold a brace: Redis Cluster would hash the text after it instead
/// of the tag.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.contains(['{', '}']) {
        return Err(crate::ConfigError::OutOfRange {
            parameter: "prefix",
            expected: "no '{' or '}' (the tag after it is the Cluster hash tag)",
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_tag_in_braces() {
        assert_eq!(storage_key("api", "user-1", "s"), "api:{user-1}:s");
        assert_eq!(storage_key("api", "user-1", ""), "api:{user-1}");
    }

    #[test]
    fn braces_in_the_prefix_are_refused() {
        assert!(validate_prefix("a{b").is_err());
        assert!(validate_prefix("api:v2").is_ok());
    }
}
