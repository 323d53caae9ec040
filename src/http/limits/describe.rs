//! [`DescribeLimits`]: what a permit source tells of its limits, for the server
//! layer's `RateLimit-Policy` and for a request too costly ever to pass, and where it
//! reports its decisions.

use std::hash::Hash;
use std::time::Duration;

use super::Policy;
use crate::algorithm::{Algorithm, Concurrency, LeakyBucket, Rule};
use crate::keyed::KeyedLimiter;
use crate::leaky_queue::LeakyQueue;
use crate::limiter::Limiter;
use crate::observe::Events;
use crate::permits::{EveryKey, ForKey, PermitSource};
use crate::semaphore::Semaphore;
use crate::store::{SharedLimiter, Store};
use crate::sync::Arc;
use crate::time::Clock;

/// What a permit source tells of its limits, for `RateLimit-Policy`: one [`Policy`]
/// per rule, and the most one request can be granted under each.
///
/// Implemented by every permit source the server layer takes:
/// - [`SharedLimiter`]: a policy per rule, named as the rule;
/// - [`KeyedLimiter`] and [`Limiter`] over an algorithm that converts into a
///   [`Rule`], and [`LeakyQueue`]: one, `"default"`, from the algorithm's own quota
///   and window (no store is involved);
/// - a [`Semaphore`] behind an `Arc`: one, `"default"`, its permits as the quota and
///   no window (a limit on requests at once, not on a rate);
/// - [`ForKey`] and [`EveryKey`]: as the source they wrap.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::{DescribeLimits, Policy};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?.burst(20)?))?;
/// assert_eq!(limiter.policies(), [Policy::new("default", 20, Duration::from_secs(2))]);
/// assert_eq!(limiter.capacities(), [20]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait DescribeLimits {
    /// One policy per rule, in the rules' order.
    fn policies(&self) -> Vec<Policy>;

    /// The most permits one request can be granted under each rule, in the same
    /// order; a request too costly for one is reported as that rule's.
    fn capacities(&self) -> Vec<u64>;

    /// The hub the source reports its own decisions to, if any (its `with_events`).
    /// The server layer reports a decision to its own hub only when the source has
    /// none, so that each request is reported once. The default is none.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::DescribeLimits;
    /// use tollgate::observe::Events;
    /// use tollgate::{Limiter, Quota};
    ///
    /// let limiter = Limiter::new(Gcra::new(Quota::per_second(10)?));
    /// assert!(DescribeLimits::events(&limiter).is_none());
    /// let limiter = limiter.with_events(Events::new("api"));
    /// assert_eq!(DescribeLimits::events(&limiter).map(Events::name), Some("api"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn events(&self) -> Option<&Events> {
        None
    }
}

/// The one policy, `"default"`, of an algorithm, as the algorithm registry describes
/// it: an in-process limiter needs no store for its policy.
fn one_rule<A: Algorithm + Into<Rule>>(algorithm: A) -> Vec<Policy> {
    let rule: Rule = algorithm.into();
    vec![Policy::new("default", rule.quota(), rule.window())]
}

/// One policy, `"default"`, from the algorithm's facts: every key has the same limit.
impl<K, A, C> DescribeLimits for KeyedLimiter<K, A, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    A: Algorithm + Into<Rule>,
    C: Clock,
{
    fn policies(&self) -> Vec<Policy> {
        one_rule(self.algorithm())
    }

    fn capacities(&self) -> Vec<u64> {
        vec![self.algorithm().capacity()]
    }

    fn events(&self) -> Option<&Events> {
        KeyedLimiter::events(self)
    }
}

/// One policy, `"default"`, as a semaphore's: the permits each key may hold at once
/// as the quota, no window (a store's concurrency rule is a [`Leased`] one, whose
/// window is its lease).
///
/// [`Leased`]: crate::algorithm::Leased
impl<K, C> DescribeLimits for KeyedLimiter<K, Concurrency, C>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
{
    fn policies(&self) -> Vec<Policy> {
        vec![Policy::new(
            "default",
            self.algorithm().max(),
            Duration::ZERO,
        )]
    }

    fn capacities(&self) -> Vec<u64> {
        vec![self.algorithm().max()]
    }

    fn events(&self) -> Option<&Events> {
        KeyedLimiter::events(self)
    }
}

/// One policy, `"default"`, from the algorithm's facts.
impl<A: Algorithm + Into<Rule>, C: Clock> DescribeLimits for Limiter<A, C> {
    fn policies(&self) -> Vec<Policy> {
        one_rule(self.algorithm())
    }

    fn capacities(&self) -> Vec<u64> {
        vec![self.algorithm().capacity()]
    }

    fn events(&self) -> Option<&Events> {
        Limiter::events(self)
    }
}

/// One policy, `"default"`: the bucket's.
impl<C: Clock> DescribeLimits for LeakyQueue<C> {
    fn policies(&self) -> Vec<Policy> {
        one_rule::<LeakyBucket>(self.bucket())
    }

    fn capacities(&self) -> Vec<u64> {
        vec![self.bucket().capacity()]
    }

    fn events(&self) -> Option<&Events> {
        LeakyQueue::events(self)
    }
}

/// One policy, `"default"`: the permits as the quota, no window.
impl<C: Clock> DescribeLimits for Arc<Semaphore<C>> {
    fn policies(&self) -> Vec<Policy> {
        vec![Policy::new("default", self.max_permits(), Duration::ZERO)]
    }

    fn capacities(&self) -> Vec<u64> {
        vec![self.max_permits()]
    }

    fn events(&self) -> Option<&Events> {
        Semaphore::events(self)
    }
}

impl<S: Store + 'static, C: Clock> DescribeLimits for SharedLimiter<S, C> {
    fn policies(&self) -> Vec<Policy> {
        self.rules()
            .map(|(name, rule)| {
                let name = if name.is_empty() { "default" } else { name };
                Policy::new(name, rule.quota(), rule.window())
            })
            .collect()
    }

    fn capacities(&self) -> Vec<u64> {
        self.rules().map(|(_, rule)| rule.capacity()).collect()
    }

    fn events(&self) -> Option<&Events> {
        SharedLimiter::events(self)
    }
}

impl<S: DescribeLimits, Key: ?Sized + ToOwned> DescribeLimits for ForKey<S, Key> {
    fn policies(&self) -> Vec<Policy> {
        self.source().policies()
    }

    fn capacities(&self) -> Vec<u64> {
        self.source().capacities()
    }

    fn events(&self) -> Option<&Events> {
        self.source().events()
    }
}

impl<S: PermitSource + DescribeLimits> DescribeLimits for EveryKey<S> {
    fn policies(&self) -> Vec<Policy> {
        self.source().policies()
    }

    fn capacities(&self) -> Vec<u64> {
        self.source().capacities()
    }

    fn events(&self) -> Option<&Events> {
        self.source().events()
    }
}
