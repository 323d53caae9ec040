//! [`KeyedLimits`]: a permit source per key, the key read from each request.

use std::fmt;

use http::request::Parts;

use super::{CheckError, CheckFuture, DescribeLimits, Held, Limits, Policies, Policy, Verdict};
use crate::decision::{Decision, Denied};
use crate::http::key::KeyExtractor;
use crate::permits::{Decided, PermitSource};
use crate::store::StoreError;
use crate::sync::Arc;

/// What one request costs, in permits.
#[derive(Clone)]
enum Cost {
    Fixed(u64),
    Computed(Arc<dyn Fn(&Parts) -> u64 + Send + Sync>),
}

impl fmt::Debug for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cost::Fixed(n) => write!(f, "{n}"),
            Cost::Computed(_) => f.write_str("<fn>"),
        }
    }
}

/// A permit source per key, the key read from each request by a [`KeyExtractor`].
///
/// Each request costs one permit, or what [`cost`](KeyedLimits::cost) /
/// [`cost_with`](KeyedLimits::cost_with) say. Every rule of the source is a
/// [`Policy`], as its [`DescribeLimits`] says: named as the rule (a single unnamed
/// rule, as [`SharedLimiter::new`](crate::store::SharedLimiter::new) makes, is
/// `"default"`), with the quota its decisions report as their `limit` (the rule's
/// capacity; for Guava's limiters the permits idle time stores, at least 1, and for
/// Resilience4j's the permits per period) and the window
/// [`Rule::window`](crate::store::Rule::window).
///
/// # The decisive policy
///
/// With several rules ([`SharedLimiter::all_of`](crate::store::SharedLimiter::all_of)) the store combines their decisions
/// into one: the admission of the rule with the fewest permits remaining, whole (its
/// limit, remaining and reset, all of that rule), or the denial with the longest
/// wait, or a request more costly than some rule can ever grant. So `r` and `t` of
/// the `RateLimit` field are always one rule's. The verdict's `decisive` policy is
/// the rule that combined decision speaks for ([`Admitted::rule`](crate::Admitted::rule),
/// [`Limited::rule`](crate::Limited::rule)), so that the policy named is the one
/// whose `r` and `t` are reported, even when two rules have the same quota (for a
/// request too costly, the first rule whose capacity equals the one reported).
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::http::{HeaderKey, KeyedLimits, Limits};
/// use tollgate::store::{MemoryStore, SharedLimiter};
/// use tollgate::{KeyedConfig, Quota};
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(10_000), "api")?;
/// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(2)?))?;
/// let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), limiter);
/// assert_eq!(limits.policies()[0].name, "default");
///
/// let request = http::Request::get("/").header("x-api-key", "k1").body(()).unwrap();
/// let (head, ()) = request.into_parts();
/// assert!(limits.check(&head).await?.is_admitted());
/// assert!(limits.check(&head).await?.is_admitted());
/// assert!(!limits.check(&head).await?.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct KeyedLimits<K, P> {
    pub(crate) extractor: K,
    pub(crate) source: P,
    pub(crate) policies: Policies,
    /// Each rule's capacity, as a request too costly reports it.
    capacities: Arc<[u64]>,
    cost: Cost,
}

impl<K: fmt::Debug, P: fmt::Debug> fmt::Debug for KeyedLimits<K, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimits")
            .field("extractor", &self.extractor)
            .field("source", &self.source)
            .field("cost", &self.cost)
            .finish()
    }
}

impl<K: KeyExtractor, P: PermitSource<str> + DescribeLimits> KeyedLimits<K, P> {
    /// Requests keyed by `extractor`, each costing one permit of `limiter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{FixedWindow, Gcra};
    /// use tollgate::http::{ClientIp, KeyedLimits, Limits, Policy};
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(10_000), "api")?;
    /// let limiter = SharedLimiter::all_of(store, [
    ///     ("burst", Gcra::new(Quota::per_second(10)?.burst(100)?).into()),
    ///     ("daily", FixedWindow::new(1_000, Duration::from_secs(86_400))?.into()),
    /// ])?;
    /// let limits = KeyedLimits::new(ClientIp::new(), limiter);
    /// assert_eq!(limits.policies(), [
    ///     Policy::new("burst", 100, Duration::from_secs(10)),
    ///     Policy::new("daily", 1_000, Duration::from_secs(86_400)),
    /// ]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(extractor: K, source: P) -> KeyedLimits<K, P> {
        let policies: Policies = source.policies().into_iter().collect();
        let capacities = source.capacities();
        KeyedLimits {
            extractor,
            source,
            policies,
            capacities: capacities.into(),
            cost: Cost::Fixed(1),
        }
    }

    /// Every request costs `permits`. A cost of 0 takes nothing and only reports
    /// (a peek).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::{Global, KeyedLimits, Limits};
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// # futures::executor::block_on(async {
    /// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// let limits = KeyedLimits::new(Global, limiter).cost(4);
    /// let (head, ()) = http::Request::get("/").body(()).unwrap().into_parts();
    /// let verdict = limits.check(&head).await?;
    /// assert_eq!(verdict.decision.unwrap()?.remaining(), 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn cost(mut self, permits: u64) -> KeyedLimits<K, P> {
        self.cost = Cost::Fixed(permits);
        self
    }

    /// Each request costs what `cost` reads from its head, such as a batch size.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::{Global, KeyedLimits, Limits};
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// # futures::executor::block_on(async {
    /// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// // `x-batch: 3` costs 3 permits; no header costs 1.
    /// let limits = KeyedLimits::new(Global, limiter).cost_with(|head| {
    ///     head.headers
    ///         .get("x-batch")
    ///         .and_then(|v| v.to_str().ok()?.parse().ok())
    ///         .unwrap_or(1)
    /// });
    /// let request = http::Request::get("/").header("x-batch", "3").body(()).unwrap();
    /// let (head, ()) = request.into_parts();
    /// assert_eq!(limits.check(&head).await?.decision.unwrap()?.remaining(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn cost_with<F>(mut self, cost: F) -> KeyedLimits<K, P>
    where
        F: Fn(&Parts) -> u64 + Send + Sync + 'static,
    {
        self.cost = Cost::Computed(Arc::new(cost));
        self
    }

    /// The limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::http::{Global, KeyedLimits};
    /// use tollgate::store::{MemoryStore, SharedLimiter};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(10), "api")?;
    /// let limiter = SharedLimiter::new(store, Gcra::new(Quota::per_second(10)?))?;
    /// let limits = KeyedLimits::new(Global, limiter);
    /// assert_eq!(limits.limiter().capacity(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &P {
        &self.source
    }
}

impl<K, P> Limits for KeyedLimits<K, P>
where
    K: KeyExtractor,
    P: PermitSource<str> + DescribeLimits,
    P::Error: Into<StoreError>,
{
    /// Decided at once when the source can (in process, or a memory store), without
    /// an allocation for the future; otherwise a boxed future that awaits the source.
    /// Permits a grant holds (a semaphore's, a key's concurrency permits) are held
    /// by the verdict, and by the server layer to the end of the response body.
    fn check(&self, request: &Parts) -> CheckFuture {
        let key = match self.extractor.extract(request) {
            Ok(key) => key,
            Err(e) => return CheckFuture::ready(Err(e.into())),
        };
        let n = match &self.cost {
            Cost::Fixed(n) => *n,
            Cost::Computed(cost) => cost(request),
        };
        // A source with a hub of its own reports the decision there, keyed.
        let reported = self.source.events().is_some();
        if let Some(decided) = self.source.decide_now(&key, n) {
            return CheckFuture::ready(
                decided
                    .map_err(|e| CheckError::Store(e.into()))
                    .map(|decided| {
                        verdict::<P>(decided, &self.policies, &self.capacities, reported)
                    }),
            );
        }
        let decision = self.source.decide(&key, n);
        let policies = self.policies.clone();
        let capacities = self.capacities.clone();
        CheckFuture::new(async move {
            let decided = decision.await.map_err(|e| CheckError::Store(e.into()))?;
            Ok(verdict::<P>(decided, &policies, &capacities, reported))
        })
    }

    fn policies(&self) -> Vec<Policy> {
        self.policies.to_vec()
    }
}

/// The verdict of a decision, holding the grant's permits if it holds any;
/// `reported` if the source reported it.
fn verdict<P: PermitSource<str>>(
    decided: Decided<P::Permit>,
    policies: &Policies,
    capacities: &[u64],
    reported: bool,
) -> Verdict {
    let (decision, held) = match decided {
        Ok(grant) => {
            let (admitted, permit) = grant.into_parts();
            (Ok(admitted), Held::new(P::into_release(permit)))
        }
        Err(denied) => (Err(denied), Held::default()),
    };
    let decisive = decisive(policies, capacities, &decision);
    let mut verdict = Verdict::new(decision, policies.clone(), decisive);
    verdict.held = held;
    verdict.reported = reported;
    verdict
}

/// The index of the policy `decision` speaks for: the rule the combined decision
/// says decided, or, for a request too costly, the first whose capacity is the one
/// reported.
#[inline]
fn decisive(policies: &[Policy], capacities: &[u64], decision: &Decision) -> usize {
    let found = match decision {
        Ok(admitted) => Some(admitted.rule()),
        Err(Denied::Limited(limited)) => Some(limited.rule()),
        Err(Denied::Insufficient(i)) => capacities.iter().position(|&c| c == i.capacity()),
        Err(Denied::Closed) => None,
    };
    found.filter(|&i| i < policies.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use crate::algorithm::{
        Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod, SlidingCounter,
        SlidingLog, SmoothBursty, SmoothWarmingUp,
    };
    use crate::decision::{Admitted, InsufficientCapacity, Limited};
    use crate::http::KeyError;
    use crate::http::key::{Global, HeaderKey};
    use crate::quota::Quota;
    use crate::store::{MemoryStore, Rule, SharedLimiter, Store};
    use crate::table::KeyedConfig;
    use crate::time::ManualClock;
    use futures::executor::block_on;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn store() -> MemoryStore<ManualClock> {
        MemoryStore::with_clock(KeyedConfig::new(100), "t", ManualClock::new()).unwrap()
    }

    fn head(headers: &[(&str, &str)]) -> Parts {
        let mut builder = http::Request::get("/");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn every_kind_of_rule_is_a_policy_whose_quota_is_the_limit_its_decisions_report() {
        let rules: Vec<(Rule, Policy)> = vec![
            (
                Gcra::new(Quota::per_second(10).unwrap().burst(20).unwrap()).into(),
                Policy::new("default", 20, secs(2)),
            ),
            (
                LeakyBucket::new(5, Quota::per_second(1).unwrap())
                    .unwrap()
                    .into(),
                Policy::new("default", 5, secs(5)),
            ),
            (
                FixedWindow::new(100, secs(60)).unwrap().into(),
                Policy::new("default", 100, secs(60)),
            ),
            (
                FixedWindow::from_first_hit(7, secs(9)).unwrap().into(),
                Policy::new("default", 7, secs(9)),
            ),
            (
                SlidingLog::new(3, secs(10)).unwrap().into(),
                Policy::new("default", 3, secs(10)),
            ),
            (
                SlidingCounter::new(50, secs(30)).unwrap().into(),
                Policy::new("default", 50, secs(30)),
            ),
            (
                SmoothBursty::new(5.0).unwrap().into(),
                Policy::new("default", 5, secs(1)),
            ),
            (
                SmoothWarmingUp::new(5.0, secs(2)).unwrap().into(),
                Policy::new("default", 10, secs(2)),
            ),
            (
                RefreshPeriod::new(4, secs(1), Duration::ZERO)
                    .unwrap()
                    .into(),
                Policy::new("default", 4, secs(1)),
            ),
            (
                Leased::new(Concurrency::new(8).unwrap(), secs(30))
                    .unwrap()
                    .into(),
                Policy::new("default", 8, secs(30)),
            ),
        ];
        for (rule, expected) in rules {
            let limiter = SharedLimiter::new(store(), rule.clone()).unwrap();
            let limits = KeyedLimits::new(Global, limiter);
            assert_eq!(
                limits.policies(),
                std::slice::from_ref(&expected),
                "{rule:?}"
            );
            let verdict = block_on(limits.check(&head(&[]))).unwrap();
            let admitted = verdict.decision.unwrap().unwrap();
            assert_eq!(admitted.limit(), expected.quota, "{rule:?}");
        }
    }

    #[test]
    fn a_smooth_limiter_without_burst_reports_one_permit_per_stable_interval() {
        let rule: Rule = SmoothBursty::with_max_burst_seconds(4.0, 0.0)
            .unwrap()
            .into();
        let limits = KeyedLimits::new(Global, SharedLimiter::new(store(), rule).unwrap());
        assert_eq!(
            limits.policies(),
            [Policy::new("default", 1, Duration::from_millis(250))]
        );
    }

    #[test]
    fn the_decisive_policy_is_the_rule_the_decision_names() {
        let policies = [
            Policy::new("burst", 10, secs(1)),
            Policy::new("daily", 1000, secs(86_400)),
            Policy::new("same", 1000, secs(3_600)),
        ];
        let capacities = [10, 1000, 1000];
        let admitted = |limit, rule| Ok(Admitted::new(limit, 1, secs(1)).of_rule(rule));
        assert_eq!(decisive(&policies, &capacities, &admitted(10, 0)), 0);
        assert_eq!(decisive(&policies, &capacities, &admitted(1000, 1)), 1);
        // Equal quotas: the rule the decision names, not the first of that quota.
        assert_eq!(decisive(&policies, &capacities, &admitted(1000, 2)), 2);
        let limited = Limited::new(secs(1), 1000, 0, secs(1)).of_rule(2);
        assert_eq!(decisive(&policies, &capacities, &Err(limited.into())), 2);
        // An index past the policies (no such rule) names the first.
        assert_eq!(decisive(&policies, &capacities, &admitted(10, 7)), 0);
        let never = Err(Denied::Insufficient(InsufficientCapacity::new(11, 10)));
        assert_eq!(decisive(&policies, &capacities, &never), 0);
        assert_eq!(decisive(&policies, &capacities, &Err(Denied::Closed)), 0);
    }

    #[test]
    fn several_rules_report_the_one_that_denies() {
        let limiter = SharedLimiter::all_of(
            store(),
            [
                ("burst", Gcra::new(Quota::per_second(5).unwrap()).into()),
                ("minute", FixedWindow::new(3, secs(60)).unwrap().into()),
            ],
        )
        .unwrap();
        let limits = KeyedLimits::new(Global, limiter);
        let check = || block_on(limits.check(&head(&[]))).unwrap();
        // 5 and 3 permits: after one request the window has 2 left, the bucket 4.
        let first = check();
        assert_eq!(first.decisive_policy().unwrap().name, "minute");
        assert_eq!(first.decision.unwrap().unwrap().remaining(), 2);
        check();
        check();
        let denied = check();
        assert!(!denied.is_admitted());
        assert_eq!(denied.decisive_policy().unwrap().name, "minute");
        assert_eq!(denied.policies.len(), 2);
    }

    #[test]
    fn a_request_costing_more_than_the_capacity_is_never_admitted() {
        let limiter = SharedLimiter::new(store(), Gcra::new(Quota::per_second(5).unwrap()));
        let limits = KeyedLimits::new(Global, limiter.unwrap()).cost_with(|head| {
            head.headers
                .get("x-cost")
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1)
        });
        let verdict = block_on(limits.check(&head(&[("x-cost", "6")]))).unwrap();
        assert!(matches!(
            verdict.decision,
            Some(Err(Denied::Insufficient(_)))
        ));
        let verdict = block_on(limits.check(&head(&[("x-cost", "5")]))).unwrap();
        assert_eq!(verdict.decision.unwrap().unwrap().remaining(), 0);
    }

    #[test]
    fn a_missing_key_fails_without_asking_the_store() {
        let limiter = SharedLimiter::new(store(), Gcra::new(Quota::per_second(5).unwrap()));
        let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), limiter.unwrap());
        let error = block_on(limits.check(&head(&[]))).unwrap_err();
        assert!(matches!(error, CheckError::Key(KeyError::MissingHeader(_))));
        assert!(limits.limiter().store().is_empty());
    }

    /// The waste it guards: every check copied the policies (a `String` each) into
    /// its verdict; now every verdict shares the one list.
    #[test]
    fn verdicts_share_the_policies_without_copying_them() {
        let limiter = SharedLimiter::new(store(), Gcra::new(Quota::per_second(5).unwrap()));
        let limits = KeyedLimits::new(Global, limiter.unwrap());
        let first = block_on(limits.check(&head(&[]))).unwrap();
        let second = block_on(limits.check(&head(&[]))).unwrap();
        assert!(Policies::ptr_eq(&first.policies, &second.policies));
        assert!(Policies::ptr_eq(&first.policies, &limits.policies));
    }

    /// The memory store behind a store that cannot decide at once, as a remote one.
    struct Remote(MemoryStore<ManualClock>);

    #[async_trait::async_trait]
    impl Store for Remote {
        async fn execute(
            &self,
            request: &crate::store::Request<'_>,
        ) -> Result<crate::store::Reply, StoreError> {
            self.0.execute(request).await
        }
    }

    #[test]
    fn a_memory_store_decides_the_check_at_once() {
        let limiter = SharedLimiter::new(store(), Gcra::new(Quota::per_second(1).unwrap()));
        let limits = KeyedLimits::new(Global, limiter.unwrap());
        let first = limits.check(&head(&[])).into_ready();
        assert!(first.unwrap().unwrap().is_admitted());
        let second = limits.check(&head(&[])).into_ready();
        assert!(!second.unwrap().unwrap().is_admitted());
    }

    #[test]
    fn a_store_that_cannot_decide_at_once_is_awaited() {
        let limiter = SharedLimiter::new(Remote(store()), Gcra::new(Quota::per_second(1).unwrap()));
        let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), limiter.unwrap());
        let check = |key| {
            let pending = limits.check(&head(&[("x-api-key", key)])).into_ready();
            block_on(pending.expect_err("a future to await")).unwrap()
        };
        assert!(check("a").is_admitted());
        assert!(!check("a").is_admitted());
        assert!(check("b").is_admitted());
    }

    #[test]
    fn a_ready_check_yields_its_result_once() {
        let mut check = CheckFuture::ready(Ok(Verdict::unlimited()));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            Pin::new(&mut check).poll(&mut cx),
            Poll::Ready(Ok(_))
        ));
        assert!(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = Pin::new(&mut check).poll(&mut cx);
            }))
            .is_err()
        );
    }

    #[test]
    fn policies_compare_by_content_and_format_their_field_once() {
        let list = vec![Policy::new("p", 10, secs(1))];
        let a = Policies::from(list.clone());
        let b: Policies = list.iter().cloned().collect();
        assert_eq!(a, b);
        assert!(!Policies::ptr_eq(&a, &b));
        assert_eq!(a.field().unwrap(), r#""p";q=10;w=1"#);
        assert_eq!(Policies::from(Vec::new()).field(), None);
        assert!(Policies::ptr_eq(
            &Policies::default(),
            &Policies::from(Vec::new())
        ));
    }

    #[test]
    fn keys_count_apart() {
        let limiter = SharedLimiter::new(store(), Gcra::new(Quota::per_second(1).unwrap()));
        let limits = KeyedLimits::new(HeaderKey::from_static("x-api-key"), limiter.unwrap());
        let check = |key| block_on(limits.check(&head(&[("x-api-key", key)]))).unwrap();
        assert!(check("a").is_admitted());
        assert!(!check("a").is_admitted());
        assert!(check("b").is_admitted());
    }
}
