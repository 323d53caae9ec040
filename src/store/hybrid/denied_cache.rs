//! [`DeniedCache`]: a [`Store`] wrapper that repeats the store's own denials until
//! their retry time, without asking the store again.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use async_trait::async_trait;

use super::super::request::{Answers, Check, Op, Reply, Request};
use super::super::{Store, StoreError};
use crate::algorithm::Rule;
use crate::decision::{Denied, Limited};
use crate::error::ConfigError;
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::time::{Clock, MonotonicClock, Nanos};

/// A [`Store`] that remembers "over the limit until T" answers, so that requests for
/// a key known to be denied are denied in this process without a round trip (the
/// local cache of over-limit keys of envoy's ratelimit service).
///
/// When the inner store denies an [`Op::Acquire`] or [`Op::Peek`] of `n` permits with
/// [`Denied::Limited`], the cache records that this request's shape (its tag, and
/// every check's key and rule) is denied for `n` permits until the time the request
/// was sent plus the denial's `retry_after`. Until then an acquire or a peek of the
/// same shape for `n` permits is denied here, its `retry_after` shortened to the time
/// left (which is what the store would answer), and the inner store is not called.
/// Other counts of permits (a larger one would be denied too, but may wait longer),
/// other shapes and every other op go to the store; the newest denial of a shape
/// replaces the one held. [`Op::Refund`] and [`Op::Reserve`] pass
/// through and drop every entry under their tag, as does [`invalidate`](Self::invalidate).
///
/// # Why it never admits more than the store
///
/// The cache only ever answers with a denial, and only one the store itself gave:
/// `retry_after` is how long until the same request can succeed if nothing else
/// consumes permits, and other requests consuming permits (here or on other nodes)
/// only push that time later. The entry's clock starts when the request was *sent*,
/// which is no later than when the store decided, so the entry never outlives the
/// store's own answer. Every admission still comes from the store. In one process
/// the repeated denial is exactly what the store would answer (an admission through
/// the cache drops the denials of its tag, whose waits it lengthened); with other
/// processes consuming too, its `retry_after` is a lower bound.
///
/// # What it costs
///
/// A denial may outlive permits given back meanwhile: a refund (or a concurrency
/// release) made by another process is not seen here, and the cache keeps denying
/// until the recorded time, where the store would already admit. Refunds made through
/// this cache invalidate at once. Two kinds of rule are therefore never cached: a
/// [`Rule::Concurrency`] limit, whose denials end when holders release rather than at
/// a time, and a [`SlidingLog`](crate::algorithm::SlidingLog) that
/// [counts blocked attempts](crate::algorithm::SlidingLog::count_blocked), whose every
/// denial must reach the store to be counted. Requests with either pass through.
///
/// # Memory
///
/// At most `max_entries` entries, one per request shape denied. When a new denial
/// finds the cache full, expired entries go first, then the entry that expires
/// soonest.
///
/// Time is Unix time read from the clock (`unix_origin + now`), or the request's
/// explicit time, as in [`MemoryStore`](super::super::MemoryStore).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
/// use tollgate::time::ManualClock;
/// use tollgate::store::{DeniedCache, MemoryStore, SharedLimiter};
/// use tollgate::KeyedConfig;
///
/// # futures::executor::block_on(async {
/// let clock = ManualClock::new();
/// let store = MemoryStore::with_clock(KeyedConfig::new(1_000), "api", clock.clone())?;
/// let cache = DeniedCache::with_clock(store, 10_000, clock.clone())?;
/// let limiter = SharedLimiter::new(cache, FixedWindow::new(1, Duration::from_secs(1))?)?;
/// assert!(limiter.check("user-42", 1).await?.is_ok());
/// assert!(limiter.check("user-42", 1).await?.is_err()); // the store's denial
/// clock.advance(Duration::from_millis(400));
/// let denied = limiter.check("user-42", 1).await?.unwrap_err(); // the cache's
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(600)));
/// assert_eq!(limiter.store().hits(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct DeniedCache<S, C = MonotonicClock> {
    inner: S,
    clock: C,
    max_entries: usize,
    table: Mutex<Table>,
    hits: AtomicU64,
}

/// The denials held, findable by tag and by expiry.
#[derive(Default)]
struct Table {
    /// Entries by hash tag: one per request shape, and a tag usually has one shape.
    by_tag: HashMap<String, Vec<Entry>>,
    /// Every entry by its end, then its id: the first one expires soonest.
    by_expiry: BTreeMap<(Nanos, u64), String>,
    next_id: u64,
    /// Counts invalidations: a denial decided before one must not be stored after it.
    generation: u64,
}

/// One request shape denied for `permits` until `until`.
struct Entry {
    id: u64,
    /// Each check's key, rule and own count.
    checks: Box<[(String, Rule, Option<u64>)]>,
    permits: u64,
    until: Nanos,
    sent_at: Nanos,
    denial: Limited,
}

impl Entry {
    fn is_shape_of(&self, checks: &[Check<'_>]) -> bool {
        self.checks.len() == checks.len()
            && self
                .checks
                .iter()
                .zip(checks)
                .all(|((key, rule, permits), check)| {
                    key == check.key && rule == check.rule && *permits == check.permits()
                })
    }
}

impl Table {
    /// The denial for `n` permits of `request` at `now`, if one is held.
    fn lookup(&self, request: &Request<'_>, n: u64, now: Nanos) -> Option<Limited> {
        let entry = self
            .by_tag
            .get(request.tag)?
            .iter()
            .find(|e| e.is_shape_of(request.checks))?;
        if now >= entry.until || n != entry.permits {
            return None;
        }
        let elapsed = now.saturating_since(entry.sent_at);
        Some(Limited::new(
            entry.until.saturating_since(now),
            entry.denial.limit(),
            entry.denial.remaining(),
            entry.denial.reset_after().saturating_sub(elapsed),
        ))
    }

    fn insert(&mut self, request: &Request<'_>, entry: Entry, now: Nanos, max_entries: usize) {
        if let Some(old) = self
            .by_tag
            .get(request.tag)
            .and_then(|entries| entries.iter().find(|e| e.is_shape_of(request.checks)))
            .map(|e| (e.until, e.id))
        {
            self.remove(request.tag, old);
        }
        while let Some((&(until, id), tag)) = self.by_expiry.first_key_value() {
            if until > now && self.by_expiry.len() < max_entries {
                break;
            }
            let tag = tag.clone();
            self.remove(&tag, (until, id));
        }
        self.by_expiry
            .insert((entry.until, entry.id), request.tag.to_owned());
        self.by_tag
            .entry(request.tag.to_owned())
            .or_default()
            .push(entry);
    }

    fn remove(&mut self, tag: &str, (until, id): (Nanos, u64)) {
        self.by_expiry.remove(&(until, id));
        if let Some(entries) = self.by_tag.get_mut(tag) {
            entries.retain(|e| e.id != id);
            if entries.is_empty() {
                self.by_tag.remove(tag);
            }
        }
    }

    /// Drops the denials under `tag`, and any denial decided before now.
    fn invalidate(&mut self, tag: &str) {
        self.generation += 1;
        self.forget(tag);
    }

    fn forget(&mut self, tag: &str) {
        if let Some(entries) = self.by_tag.remove(tag) {
            for e in entries {
                self.by_expiry.remove(&(e.until, e.id));
            }
        }
    }
}

impl<S, C> fmt::Debug for DeniedCache<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeniedCache")
            .field("max_entries", &self.max_entries)
            .field("hits", &self.hits.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<S: Store> DeniedCache<S, MonotonicClock> {
    /// A cache of at most `max_entries` denials in front of `inner`, on the monotonic
    /// clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::{DeniedCache, MemoryStore};
    /// use tollgate::{ConfigError, KeyedConfig};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
    /// let cache = DeniedCache::new(store, 10_000)?;
    /// assert!(cache.is_empty());
    /// let store = MemoryStore::new(KeyedConfig::new(1_000), "api")?;
    /// assert_eq!(
    ///     DeniedCache::new(store, 0).unwrap_err(),
    ///     ConfigError::Zero { parameter: "max_entries" }
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `max_entries == 0`.
    pub fn new(inner: S, max_entries: usize) -> Result<Self, ConfigError> {
        DeniedCache::with_clock(inner, max_entries, MonotonicClock::new())
    }
}

impl<S: Store, C: Clock> DeniedCache<S, C> {
    /// A cache of at most `max_entries` denials in front of `inner`, reading time from
    /// `clock` (a [`ManualClock`](crate::time::ManualClock) in tests), which gives
    /// Unix time as `unix_origin + now`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::{DeniedCache, MemoryStore};
    /// use tollgate::time::ManualClock;
    /// use tollgate::KeyedConfig;
    ///
    /// let clock = ManualClock::new();
    /// let store = MemoryStore::with_clock(KeyedConfig::new(1_000), "api", clock.clone())?;
    /// let cache = DeniedCache::with_clock(store, 10_000, clock)?;
    /// assert_eq!(cache.max_entries(), 10_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `max_entries == 0`.
    pub fn with_clock(inner: S, max_entries: usize, clock: C) -> Result<Self, ConfigError> {
        if max_entries == 0 {
            return Err(ConfigError::Zero {
                parameter: "max_entries",
            });
        }
        Ok(DeniedCache {
            inner,
            clock,
            max_entries,
            table: Mutex::new(Table::default()),
            hits: AtomicU64::new(0),
        })
    }

    /// The store behind the cache.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The most denials held.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Denials held now, expired ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.table.lock().by_expiry.len()
    }

    /// Whether no denial is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Requests denied by the cache without calling the store, since it was built.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Forgets every denial under `tag`: for an application that learns of permits
    /// given back elsewhere (a refund by another process, say).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::store::{DeniedCache, MemoryStore};
    /// # use tollgate::KeyedConfig;
    /// # let cache = DeniedCache::new(MemoryStore::new(KeyedConfig::new(10), "api")?, 10)?;
    /// cache.invalidate("user-42");
    /// assert!(cache.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn invalidate(&self, tag: &str) {
        self.table.lock().invalidate(tag);
    }

    fn now(&self, request: &Request<'_>) -> Nanos {
        match request.at {
            Some(at) => Nanos::from_duration(at),
            None => Nanos::from_duration(self.clock.unix_origin()) + self.clock.now().as_duration(),
        }
    }

    /// An acquire or a peek: answered from the cache, or asked and its denial kept.
    async fn decide(&self, request: &Request<'_>, n: u64) -> Result<Reply, StoreError> {
        let asked = match self.lookup(request, n)? {
            Lookup::Known(reply) => return Ok(reply),
            Lookup::Ask(sent_at, generation) => (sent_at, generation),
        };
        let outcome = self.inner.execute(request).await?;
        self.keep(request, n, asked, &outcome);
        Ok(outcome)
    }

    /// [`decide`](Self::decide), asking the inner store for each check's answer: a
    /// denial from the cache has none.
    async fn decide_each(&self, request: &Request<'_>, n: u64) -> Result<Answers, StoreError> {
        let asked = match self.lookup(request, n)? {
            Lookup::Known(reply) => return Ok(Answers::new(reply)),
            Lookup::Ask(sent_at, generation) => (sent_at, generation),
        };
        let answers = self.inner.execute_each(request).await?;
        self.keep(request, n, asked, &answers.reply());
        Ok(answers)
    }

    /// The answer known before asking the store: the precheck's, or a denial held.
    fn lookup(&self, request: &Request<'_>, n: u64) -> Result<Lookup, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(Lookup::Known(known));
        }
        let sent_at = self.now(request);
        let table = self.table.lock();
        if let Some(denial) = table.lookup(request, n, sent_at) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Known(Reply::Decision(Err(Denied::Limited(denial)))));
        }
        Ok(Lookup::Ask(sent_at, table.generation))
    }

    /// Keeps the store's denial of `request`, sent at `sent_at` in `generation`; an
    /// admission that took permits drops its tag's denials.
    fn keep(
        &self,
        request: &Request<'_>,
        n: u64,
        (sent_at, generation): (Nanos, u64),
        outcome: &Reply,
    ) {
        let takes = matches!(request.op, Op::Acquire(_)) && request.most_permits() > 0;
        if takes && outcome.is_admitted() {
            // Permits taken under this tag make its denials' waits too short.
            let mut table = self.table.lock();
            if table.by_tag.contains_key(request.tag) {
                table.forget(request.tag);
            }
        } else if let Reply::Decision(Err(Denied::Limited(denial))) = *outcome {
            // A wait for a release may end at any time: zero, so it is not cached.
            let until = sent_at + denial.retry_after().unwrap_or_default();
            let now = self.now(request);
            let mut table = self.table.lock();
            // A refund or reservation since the request was sent may have freed what
            // this denial saw taken.
            if until > now && table.generation == generation {
                let entry = Entry {
                    id: table.next_id,
                    checks: request
                        .checks
                        .iter()
                        .map(|c| (c.key.to_owned(), c.rule.clone(), c.permits()))
                        .collect(),
                    permits: n,
                    until,
                    sent_at,
                    denial,
                };
                table.next_id += 1;
                table.insert(request, entry, now, self.max_entries);
            }
        }
    }
}

/// What the cache knows of a request before asking the store.
enum Lookup {
    /// The answer.
    Known(Reply),
    /// Nothing: the time the request is sent, and the table's generation then.
    Ask(Nanos, u64),
}

/// Whether the store's denial of `checks` holds until its retry time, whatever happens
/// in this process meanwhile (refunds aside, which invalidate): the rules themselves
/// say so, each in [`Rule::denial_lasts`].
fn cacheable(checks: &[Check<'_>]) -> bool {
    checks.iter().all(|c| c.rule.denial_lasts())
}

/// Drops the denials under a tag once a refund or reservation has run, or was
/// dropped while it ran (it may still have been applied).
struct InvalidateOnDrop<'a> {
    table: &'a Mutex<Table>,
    tag: &'a str,
}

impl Drop for InvalidateOnDrop<'_> {
    fn drop(&mut self) {
        self.table.lock().invalidate(self.tag);
    }
}

#[async_trait]
impl<S: Store, C: Clock> Store for DeniedCache<S, C> {
    /// Decides from the cache when it holds a denial for `request`, and otherwise as
    /// the inner store does (see [`DeniedCache`]).
    ///
    /// # Errors
    ///
    /// The inner store's errors.
    ///
    /// # Cancel safety
    ///
    /// As the inner store's. A refund or reservation dropped while it runs still drops
    /// the denials under its tag.
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        match request.op {
            Op::Acquire(n) | Op::Peek(n) if cacheable(request.checks) => {
                self.decide(request, n).await
            }
            Op::Acquire(_) | Op::Peek(_) => self.inner.execute(request).await,
            _ => {
                let _invalidate = InvalidateOnDrop {
                    table: &self.table,
                    tag: request.tag,
                };
                self.inner.execute(request).await
            }
        }
    }

    /// As [`execute`](Store::execute), with each check's answer from the inner
    /// store; a denial answered from the cache tells none.
    ///
    /// # Errors
    ///
    /// The inner store's errors.
    ///
    /// # Cancel safety
    ///
    /// As [`execute`](Store::execute).
    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        match request.op {
            Op::Acquire(n) | Op::Peek(n) if cacheable(request.checks) => {
                self.decide_each(request, n).await
            }
            Op::Acquire(_) | Op::Peek(_) => self.inner.execute_each(request).await,
            _ => {
                let _invalidate = InvalidateOnDrop {
                    table: &self.table,
                    tag: request.tag,
                };
                self.inner.execute_each(request).await
            }
        }
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        self.inner.check_rule(rule)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::executor::block_on;

    use super::*;
    use crate::algorithm::{RuleKind, SlidingLog, sample_rule};
    use crate::store::MemoryStore;
    use crate::table::KeyedConfig;
    use crate::time::ManualClock;

    /// A store that denies every request for a second, counting the requests it is
    /// asked: whatever the rule, its denial is one the cache could keep.
    #[derive(Default)]
    struct DeniesForASecond {
        calls: AtomicU64,
    }

    #[async_trait]
    impl Store for DeniesForASecond {
        async fn execute(&self, _request: &Request<'_>) -> Result<Reply, StoreError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let denial = Limited::new(Duration::from_secs(1), 1, 0, Duration::from_secs(1));
            Ok(Reply::Decision(Err(Denied::Limited(denial))))
        }
    }

    /// Whether a second denied acquire under `rules` is answered without the store.
    fn is_cached(rules: &[&Rule]) -> bool {
        let cache =
            DeniedCache::with_clock(DeniesForASecond::default(), 16, ManualClock::new()).unwrap();
        let checks: Vec<Check<'_>> = rules.iter().map(|rule| Check::new("k", rule)).collect();
        let request = Request::new("t", &checks, Op::Acquire(1));
        for _ in 0..2 {
            let outcome = block_on(cache.execute(&request)).unwrap();
            assert!(!outcome.is_admitted());
        }
        let calls = cache.inner().calls.load(Ordering::Relaxed);
        assert_eq!(calls + cache.hits(), 2);
        calls == 1
    }

    #[test]
    fn every_kind_of_rule_is_cached_exactly_when_its_denial_lasts() {
        let counting = Rule::from(
            SlidingLog::new(10, Duration::from_secs(1))
                .unwrap()
                .count_blocked(true),
        );
        let mut rules: Vec<Rule> = RuleKind::ALL.iter().map(|&k| sample_rule(k, 10)).collect();
        rules.push(counting);
        for rule in &rules {
            assert_eq!(is_cached(&[rule]), rule.denial_lasts(), "{rule:?}");
        }
        // The denials that do not last: a release or a counted attempt ends them.
        let passed_through: Vec<&Rule> = rules.iter().filter(|r| !is_cached(&[*r])).collect();
        assert!(
            matches!(
                passed_through[..],
                [Rule::Concurrency(_), Rule::SlidingLog(log)] if log.counts_blocked()
            ),
            "{passed_through:?}"
        );
    }

    #[test]
    fn a_request_is_cached_only_if_every_rules_denial_lasts() {
        let lasting = sample_rule(RuleKind::FixedWindow, 10);
        let released = sample_rule(RuleKind::Concurrency, 10);
        assert!(is_cached(&[&lasting, &lasting]));
        assert!(!is_cached(&[&lasting, &released]));
        assert!(!is_cached(&[&released, &lasting]));
    }

    #[test]
    fn each_checks_own_count_is_part_of_the_shape_and_a_cached_denial_tells_no_check() {
        let clock = ManualClock::new();
        let store = MemoryStore::with_clock(KeyedConfig::new(100), "p", clock.clone()).unwrap();
        let cache = DeniedCache::with_clock(store, 100, clock).unwrap();
        let rule = sample_rule(RuleKind::FixedWindow, 1);
        let each = |permits: u64| {
            let checks = [Check::new("k", &rule).with_permits(permits)];
            block_on(cache.execute_each(&Request::new("t", &checks, Op::Acquire(5)))).unwrap()
        };
        assert!(each(1).reply().is_admitted());
        let denied = each(1);
        assert!(!denied.reply().is_admitted());
        assert!(denied.checks().is_some(), "the store's denial");
        let cached = each(1);
        assert_eq!(cached.reply(), denied.reply());
        assert_eq!(cached.checks(), None, "the cache's denial");
        assert_eq!(cache.hits(), 1);
        // A check of nothing is another shape: the store admits it.
        assert!(each(0).reply().is_admitted());
        assert_eq!(cache.hits(), 1);
    }
}
