//! [`ConfigLimiter`]: a [`RuleSet`] decided over a [`Store`].

use std::fmt;
use std::time::Duration;

use super::error::{ConfigFileError, ConfigFileErrorKind};
use super::matcher::{Descriptor, MatchedLimit};
use super::rules::{Limit, RuleSet};
use crate::decision::{Decision, Denied, InsufficientCapacity};
use crate::store::{Check, Op, Request, Store, StoreError};

/// The rules of a file over a [`Store`]: decides requests by their descriptors.
///
/// All enforced limits a request matches go to the store as **one** all-or-nothing
/// [`Request`]: either every limit takes the request's cost, or none does, so a
/// request denied by its per-route limit does not use up its per-client quota. The
/// request's hash tag is the file's domain, so in Redis Cluster all keys of a domain
/// share one slot (and one master): the atomic request needs that, since one request
/// mixes keys of different clients and routes. Split heavy traffic across domains,
/// each a file of its own, to spread it over the cluster.
///
/// Limits in `shadow_mode` go in a second request, sent only when the enforced ones
/// admit: they count what would pass if they were enforced too, and their denial is
/// reported ([`ConfigDecision::shadow_denial`]), never applied.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
/// use tollgate::store::MemoryStore;
/// use tollgate::KeyedConfig;
///
/// # futures::executor::block_on(async {
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - key: remote_address
///     rate_limit: { unit: second, requests_per_unit: 2 }
/// ")?;
/// let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10_000), "rl")?)?;
/// let request = [Descriptor::new().entry("remote_address", "10.0.0.1")];
/// let at = Duration::from_secs(1_700_000_000);
/// assert!(limiter.check_at(&request, 1, at).await?.is_admitted());
/// assert!(limiter.check_at(&request, 1, at).await?.is_admitted());
/// let third = limiter.check_at(&request, 1, at).await?;
/// assert!(!third.is_admitted());
/// assert_eq!(third.applied()[third.decisive()].name, "remote_address");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct ConfigLimiter<S> {
    rules: RuleSet,
    store: S,
}

impl<S> fmt::Debug for ConfigLimiter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigLimiter")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// A limit as a decision reports it: the `RateLimit-Policy` it stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AppliedLimit {
    /// The limit's [`name`](super::Limit::name).
    pub name: String,
    /// The quota its decisions report as their `limit`: `requests_per_unit`, or the
    /// `burst` of a bucket given one of another size.
    pub quota: u64,
    /// The time over which `quota` applies: the unit's length, or the time a bucket
    /// with such a `burst` takes to fill.
    pub window: Duration,
}

impl AppliedLimit {
    pub(crate) fn of(limit: &Limit) -> AppliedLimit {
        let (quota, window) = limit.quota_and_window();
        AppliedLimit {
            name: limit.name().to_owned(),
            quota,
            window,
        }
    }
}

/// As people read it: the name, then the quota over its window
/// (`login: 5 per 60s`), or the quota alone for a limit without one.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::config::AppliedLimit;
///
/// let limit = AppliedLimit { name: "login".into(), quota: 5, window: Duration::from_secs(60) };
/// assert_eq!(limit.to_string(), "login: 5 per 60s");
/// ```
impl fmt::Display for AppliedLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.window.is_zero() {
            write!(f, "{}: {}", self.name, self.quota)
        } else {
            write!(f, "{}: {} per {:?}", self.name, self.quota, self.window)
        }
    }
}

/// A shadow limit that would have denied the request.
///
/// Its [`Display`](fmt::Display) is a line for a log: which limit, and what its
/// denial would have said.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::config::{AppliedLimit, ShadowDenial};
/// use tollgate::{Denied, Limited};
///
/// let denial = ShadowDenial {
///     limit: AppliedLimit { name: "export_daily".into(), quota: 1000, window: Duration::from_secs(86_400) },
///     denied: Denied::Limited(Limited::new(Duration::from_secs(30), 1000, 0, Duration::from_secs(30))),
/// };
/// assert_eq!(
///     denial.to_string(),
///     "shadow limit export_daily: 1000 per 86400s would deny: rate limited, retry after 30s"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowDenial {
    /// The shadow limit that denied.
    pub limit: AppliedLimit,
    /// Its denial, which was not applied.
    pub denied: Denied,
}

impl fmt::Display for ShadowDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shadow limit {} would deny: {}", self.limit, self.denied)
    }
}

/// What [`ConfigLimiter::check`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigDecision {
    decision: Option<Decision>,
    applied: Vec<AppliedLimit>,
    decisive: usize,
    shadow_denial: Option<ShadowDenial>,
}

impl ConfigDecision {
    /// The decision of the enforced limits, or `None` when none applied.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert_eq!(decision.decision().unwrap().as_ref().unwrap().remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    /// Whether the request may pass: no enforced limit, or all of them admit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert!(decision.is_admitted());
    /// assert!(!limiter.check(&user, 1).await?.is_admitted());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn is_admitted(&self) -> bool {
        !matches!(self.decision, Some(Err(_)))
    }

    /// The enforced limits that applied, in the order of the request's descriptors.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert_eq!(decision.applied()[0].name, "per_user");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn applied(&self) -> &[AppliedLimit] {
        &self.applied
    }

    /// Which of [`applied`](Self::applied) the decision reports: the limit that
    /// denied, or the one with the fewest permits left. The store answers with one
    /// combined decision, so this is the first limit whose capacity is the decision's
    /// limit: of two limits with the same capacity, the first one.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert_eq!(decision.applied()[decision.decisive()].name, "per_user");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn decisive(&self) -> usize {
        self.decisive
    }

    /// The shadow limit that would have denied, if any (checked only when the
    /// enforced limits admit).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert_eq!(decision.shadow_denial(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn shadow_denial(&self) -> Option<&ShadowDenial> {
        self.shadow_denial.as_ref()
    }

    /// The parts: decision, applied limits, decisive index, shadow denial.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// let (verdict, applied, decisive, shadow) = decision.into_parts();
    /// assert!(verdict.unwrap().is_ok() && applied.len() == 1 && decisive == 0 && shadow.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn into_parts(
        self,
    ) -> (
        Option<Decision>,
        Vec<AppliedLimit>,
        usize,
        Option<ShadowDenial>,
    ) {
        (
            self.decision,
            self.applied,
            self.decisive,
            self.shadow_denial,
        )
    }
}

impl<S: Store> ConfigLimiter<S> {
    /// `rules` over `store`, under the store's prefix and the rules' domain.
    ///
    /// # Errors
    ///
    /// [`ConfigFileErrorKind::Store`], with the limit's line, if the store cannot run
    /// one of the rules (see [`Store::check_rule`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigLimiter, RuleSet};
    /// use tollgate::store::MemoryStore;
    /// use tollgate::KeyedConfig;
    ///
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user}]}")?;
    /// let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// assert_eq!(limiter.rules().domain(), "api");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(rules: RuleSet, store: S) -> Result<ConfigLimiter<S>, ConfigFileError> {
        for limit in rules.limits() {
            let Some(rule) = limit.rule() else {
                continue;
            };
            if let Err(e) = store.check_rule(rule) {
                return Err(rules.error_at(limit, ConfigFileErrorKind::Store(e)));
            }
        }
        Ok(ConfigLimiter { rules, store })
    }

    /// The rules.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert_eq!(limiter.rules().limits().len(), 1);
    /// # let _ = decision;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The store.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {name: per_user, unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let decision = limiter.check(&user, 1).await?;
    /// assert!(!limiter.store().is_empty());
    /// # let _ = decision;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Takes `cost` permits from every limit the request's `descriptors` match, if all
    /// of them admit it; `cost == 0` peeks. See [`RuleSet::limits_for`] for the
    /// matching.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] if the store could not decide. A cost above what a limit can
    /// ever grant is `Err(Denied::Insufficient)` in the decision, and so is any
    /// request a [blocking](super::Limit::is_blocking) limit matches (capacity 0),
    /// decided without the store.
    ///
    /// # Cancel safety
    ///
    /// As [`Store::execute`]: dropped before it completes, the decision is unknown
    /// (a remote store may still apply it), and the shadow request may not be sent.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {unit: second, requests_per_unit: 5}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let decision = limiter.check(&[Descriptor::new().entry("user", "ann")], 1).await?;
    /// match decision.decision() {
    ///     None => println!("no limit applies"),
    ///     Some(Ok(admitted)) => println!("{} left", admitted.remaining()),
    ///     Some(Err(denied)) => println!("retry after {:?}", denied.retry_after()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check(
        &self,
        descriptors: &[Descriptor],
        cost: u64,
    ) -> Result<ConfigDecision, StoreError> {
        self.run(descriptors, cost, None).await
    }

    /// [`check`](Self::check) at an explicit time since the Unix epoch instead of the
    /// store's clock: for tests under virtual time.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Cancel safety
    ///
    /// As [`check`](Self::check).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # futures::executor::block_on(async {
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {unit: second, requests_per_unit: 1}}]}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(100), "rl")?)?;
    /// let user = [Descriptor::new().entry("user", "ann")];
    /// let second_edge = Duration::from_secs(1_700_000_000);
    /// assert!(limiter.check_at(&user, 1, second_edge).await?.is_admitted());
    /// assert!(!limiter.check_at(&user, 1, second_edge).await?.is_admitted());
    /// // The next second of Unix time is a new window.
    /// assert!(limiter.check_at(&user, 1, second_edge + Duration::from_secs(1)).await?.is_admitted());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check_at(
        &self,
        descriptors: &[Descriptor],
        cost: u64,
        since_epoch: Duration,
    ) -> Result<ConfigDecision, StoreError> {
        self.run(descriptors, cost, Some(since_epoch)).await
    }

    async fn run(
        &self,
        descriptors: &[Descriptor],
        cost: u64,
        at: Option<Duration>,
    ) -> Result<ConfigDecision, StoreError> {
        let matched = self.rules.limits_for(descriptors);
        let enforced: Vec<&MatchedLimit<'_>> = matched.enforced().collect();
        let shadow: Vec<&MatchedLimit<'_>> = matched.shadow().collect();
        let mut decided = enforced_decision(&enforced, self.execute(&enforced, cost, at).await?);
        if decided.is_admitted() {
            decided.shadow_denial = shadow_denial(&shadow, self.execute(&shadow, cost, at).await?);
        }
        Ok(decided)
    }

    /// [`check`](Self::check) without a future, as far as the store decides without
    /// waiting ([`Store::try_execute_now`]): the same requests, the shadow one only
    /// when the enforced limits admit.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP layer's
    pub(crate) fn try_check_now(&self, descriptors: &[Descriptor], cost: u64) -> CheckNow {
        let matched = self.rules.limits_for(descriptors);
        let enforced: Vec<&MatchedLimit<'_>> = matched.enforced().collect();
        let decided = match self.execute_now(&enforced, cost) {
            None => return CheckNow::Later,
            Some(Err(e)) => return CheckNow::Decided(Err(e)),
            Some(Ok(decision)) => enforced_decision(&enforced, decision),
        };
        if !decided.is_admitted() {
            return CheckNow::Decided(Ok(decided));
        }
        let shadow: Vec<&MatchedLimit<'_>> = matched.shadow().collect();
        match self.execute_now(&shadow, cost) {
            None => CheckNow::ShadowLater(decided),
            Some(result) => CheckNow::Decided(result.map(|decision| ConfigDecision {
                shadow_denial: shadow_denial(&shadow, decision),
                ..decided
            })),
        }
    }

    /// The rest of a [`CheckNow::ShadowLater`]: the shadow request, awaited.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP layer's
    pub(crate) async fn check_shadow(
        &self,
        descriptors: &[Descriptor],
        cost: u64,
        decided: ConfigDecision,
    ) -> Result<ConfigDecision, StoreError> {
        let matched = self.rules.limits_for(descriptors);
        let shadow: Vec<&MatchedLimit<'_>> = matched.shadow().collect();
        let decision = self.execute(&shadow, cost, None).await?;
        Ok(ConfigDecision {
            shadow_denial: shadow_denial(&shadow, decision),
            ..decided
        })
    }

    /// One all-or-nothing request for `limits`; `None` when there are none.
    async fn execute(
        &self,
        limits: &[&MatchedLimit<'_>],
        cost: u64,
        at: Option<Duration>,
    ) -> Result<Option<Decision>, StoreError> {
        if limits.is_empty() {
            return Ok(None);
        }
        if let Some(denied) = blocked(limits, cost) {
            return Ok(Some(Err(denied)));
        }
        let checks = checks(limits);
        let mut request = Request::new(self.rules.domain(), &checks, Op::Acquire(cost));
        request.at = at;
        let outcome = self.store.execute(&request).await?;
        outcome.into_decision().map(Some)
    }

    /// [`execute`](Self::execute) at the store's time, if the store decides without
    /// waiting; `None`, having done nothing, if it cannot.
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP layer's
    fn execute_now(
        &self,
        limits: &[&MatchedLimit<'_>],
        cost: u64,
    ) -> Option<Result<Option<Decision>, StoreError>> {
        if limits.is_empty() {
            return Some(Ok(None));
        }
        if let Some(denied) = blocked(limits, cost) {
            return Some(Ok(Some(Err(denied))));
        }
        let checks = checks(limits);
        let request = Request::new(self.rules.domain(), &checks, Op::Acquire(cost));
        let outcome = self.store.try_execute_now(&request)?;
        Some(outcome.and_then(|outcome| outcome.into_decision().map(Some)))
    }
}

/// How far [`ConfigLimiter::try_check_now`] got.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP layer's
pub(crate) enum CheckNow {
    /// Decided, both requests.
    Decided(Result<ConfigDecision, StoreError>),
    /// Nothing done: the store cannot decide without waiting.
    Later,
    /// The enforced limits decided and admitted; the shadow request is still to send
    /// ([`ConfigLimiter::check_shadow`]).
    ShadowLater(ConfigDecision),
}

/// The denial of a request that `limits` include a blocking limit in: for good, as a
/// limit of capacity 0, all-or-nothing (the others are not asked).
fn blocked(limits: &[&MatchedLimit<'_>], cost: u64) -> Option<Denied> {
    limits
        .iter()
        .any(|m| m.limit().is_blocking())
        .then(|| InsufficientCapacity::new(cost, 0).into())
}

/// The store's checks of `limits`, none blocking (see [`blocked`]).
fn checks<'a>(limits: &[&'a MatchedLimit<'_>]) -> Vec<Check<'a>> {
    limits
        .iter()
        .filter_map(|m| m.limit().rule().map(|rule| Check::new(m.key(), rule)))
        .collect()
}

/// The decision of the enforced limits, before the shadow request.
fn enforced_decision(enforced: &[&MatchedLimit<'_>], decision: Option<Decision>) -> ConfigDecision {
    let decisive = decision
        .as_ref()
        .map_or(0, |decision| decisive_index(enforced, decision));
    ConfigDecision {
        decision,
        applied: enforced
            .iter()
            .map(|m| AppliedLimit::of(m.limit()))
            .collect(),
        decisive,
        shadow_denial: None,
    }
}

/// The shadow limit that would have denied, from the shadow request's decision.
fn shadow_denial(shadow: &[&MatchedLimit<'_>], decision: Option<Decision>) -> Option<ShadowDenial> {
    match decision {
        Some(Err(denied)) => {
            let decisive = decisive_index(shadow, &Err(denied));
            Some(ShadowDenial {
                limit: AppliedLimit::of(shadow[decisive].limit()),
                denied,
            })
        }
        _ => None,
    }
}

/// The limit a combined decision reports: the check the store says decided (it
/// combines as `AllOf` does, keeping the deciding rule's values whole); for a request
/// too costly, the first whose capacity is the one reported.
fn decisive_index(limits: &[&MatchedLimit<'_>], decision: &Decision) -> usize {
    let index = match decision {
        Ok(admitted) => admitted.rule(),
        Err(Denied::Limited(limited)) => limited.rule(),
        Err(Denied::Insufficient(insufficient)) => limits
            .iter()
            .position(|m| {
                m.limit().rule().map_or(0, |rule| rule.capacity()) == insufficient.capacity()
            })
            .unwrap_or(0),
        Err(Denied::Closed) => 0,
    };
    if index < limits.len() { index } else { 0 }
}
