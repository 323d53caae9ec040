//! Matching a request's descriptors against a [`RuleSet`]: [`Descriptor`] and
//! [`Matched`].

use std::fmt::Write;

use super::rules::{Action, Limit, RuleSet, TreeNode, Via};

/// What a request says about itself, as an ordered list of entries (key, value), such
/// as `[("remote_address", "10.0.0.1"), ("path", "/login")]`.
///
/// A request carries one or more descriptors; each is matched against the rules on
/// its own, and the request is limited if any of them is.
///
/// # Examples
///
/// ```
/// use tollgate::config::Descriptor;
///
/// let d = Descriptor::new().entry("remote_address", "10.0.0.1").entry("path", "/login");
/// assert_eq!(d.entries()[1], ("path".to_owned(), "/login".to_owned()));
/// let same: Descriptor = [("remote_address", "10.0.0.1"), ("path", "/login")].into_iter().collect();
/// assert_eq!(d, same);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Descriptor {
    entries: Vec<(String, String)>,
}

impl Descriptor {
    /// A descriptor without entries (which matches nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Descriptor;
    ///
    /// assert!(Descriptor::new().entries().is_empty());
    /// ```
    pub fn new() -> Descriptor {
        Descriptor::default()
    }

    /// The same descriptor with `key` = `value` appended.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Descriptor;
    ///
    /// let d = Descriptor::new().entry("path", "/login");
    /// assert_eq!(d.entries().len(), 1);
    /// ```
    pub fn entry(mut self, key: impl Into<String>, value: impl Into<String>) -> Descriptor {
        self.push(key, value);
        self
    }

    /// Appends `key` = `value`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Descriptor;
    ///
    /// let mut d = Descriptor::new();
    /// d.push("method", "POST");
    /// assert_eq!(d, Descriptor::new().entry("method", "POST"));
    /// ```
    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.entries.push((key.into(), value.into()));
    }

    /// The entries, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Descriptor;
    ///
    /// let d = Descriptor::new().entry("user", "ann");
    /// assert_eq!(d.entries(), [("user".to_owned(), "ann".to_owned())]);
    /// ```
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Descriptor {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Descriptor {
        Descriptor {
            entries: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// The limits a request's descriptors matched, each with the key it counts under.
///
/// Two views: [`limits`](Matched::limits) (with [`enforced`](Matched::enforced) and
/// [`shadow`](Matched::shadow)), the distinct limits to decide together, as
/// [`ConfigLimiter`](super::ConfigLimiter) does; and
/// [`descriptors`](Matched::descriptors), one answer per descriptor, as envoy's
/// service answers.
///
/// # Examples
///
/// ```
/// use tollgate::config::{Descriptor, RuleSet};
///
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - key: remote_address
///     rate_limit: { unit: second, requests_per_unit: 10 }
///   - key: remote_address
///     value: 10.0.0.9
///     rate_limit: { unlimited: true }
/// ")?;
/// let client = |ip: &str| [Descriptor::new().entry("remote_address", ip)];
/// assert_eq!(rules.limits_for(&client("10.0.0.1")).limits().len(), 1);
/// let trusted = rules.limits_for(&client("10.0.0.9"));
/// assert!(trusted.is_empty() && trusted.has_unlimited());
/// # Ok::<(), tollgate::config::ConfigFileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Matched<'a> {
    descriptors: Vec<DescriptorMatch<'a>>,
    limits: Vec<MatchedLimit<'a>>,
    unlimited: bool,
}

/// What one descriptor of a request matched: at most one limit, the one of the node
/// its **last** entry reaches (see [`RuleSet::limits_for`]).
///
/// # Examples
///
/// ```
/// use tollgate::config::{Descriptor, DescriptorMatch, RuleSet};
///
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
///   - { key: plan, value: gold, rate_limit: { unlimited: true, replaces: [{ name: per_user }] } }
///   - { key: path, rate_limit: { unit: minute, requests_per_unit: 100 } }
/// ")?;
/// let matched = rules.limits_for(&[
///     Descriptor::new().entry("user", "ann"),
///     Descriptor::new().entry("plan", "gold"),
///     Descriptor::new().entry("path", "/orders"),
///     Descriptor::new().entry("region", "eu"),
/// ]);
/// let answers = matched.descriptors();
/// assert!(matches!(&answers[0], DescriptorMatch::Replaced(m) if m.limit().name() == "per_user"));
/// assert!(matches!(answers[1], DescriptorMatch::Unlimited));
/// assert_eq!(answers[2].limit().unwrap().stats_key(), "api.path");
/// assert!(matches!(answers[3], DescriptorMatch::None));
/// # Ok::<(), tollgate::config::ConfigFileError>(())
/// ```
#[derive(Clone, Debug)]
pub enum DescriptorMatch<'a> {
    /// No node, or a node without a `rate_limit`: nothing limits this descriptor.
    None,
    /// A node with `unlimited: true`.
    Unlimited,
    /// A limit applies.
    Limit(MatchedLimit<'a>),
    /// The descriptor matched this limit, but another descriptor's limit (or
    /// unlimited block) `replaces` its name: it does not apply.
    Replaced(MatchedLimit<'a>),
}

impl<'a> DescriptorMatch<'a> {
    /// The limit that applies, for [`Limit`](DescriptorMatch::Limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{Descriptor, RuleSet};
    ///
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {unit: second, requests_per_unit: 5}}]}")?;
    /// let matched = rules.limits_for(&[Descriptor::new().entry("user", "ann")]);
    /// assert_eq!(matched.descriptors()[0].limit().unwrap().limit().requests_per_unit(), 5);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limit(&self) -> Option<&MatchedLimit<'a>> {
        match self {
            DescriptorMatch::Limit(m) => Some(m),
            _ => None,
        }
    }
}

impl<'a> Matched<'a> {
    /// One answer per descriptor of the request, in order: what envoy's service
    /// decides each descriptor by. Unlike [`limits`](Matched::limits), two equal
    /// descriptors get two answers.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{Descriptor, DescriptorMatch, RuleSet};
    ///
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, rate_limit: {unit: second, requests_per_unit: 5}}]}")?;
    /// let ann = Descriptor::new().entry("user", "ann");
    /// let matched = rules.limits_for(&[ann.clone(), ann]);
    /// assert_eq!(matched.descriptors().len(), 2);
    /// assert_eq!(matched.limits().len(), 1);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn descriptors(&self) -> &[DescriptorMatch<'a>] {
        &self.descriptors
    }

    /// Every limit that applies, enforced and shadow, in the order of the
    /// descriptors; a limit matched twice under the same key once.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert_eq!(matched.limits().len(), 2);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limits(&self) -> &[MatchedLimit<'a>] {
        &self.limits
    }

    /// The limits that can deny.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert_eq!(matched.enforced().map(|m| m.limit().name()).collect::<Vec<_>>(), ["per_user"]);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn enforced(&self) -> impl Iterator<Item = &MatchedLimit<'a>> {
        self.limits.iter().filter(|m| !m.limit.is_shadow())
    }

    /// The limits in shadow mode: counted, never denying.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert_eq!(matched.shadow().map(|m| m.limit().name()).collect::<Vec<_>>(), ["watch"]);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn shadow(&self) -> impl Iterator<Item = &MatchedLimit<'a>> {
        self.limits.iter().filter(|m| m.limit.is_shadow())
    }

    /// Whether no limit applies.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert!(!matched.is_empty());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Whether some descriptor matched an `unlimited: true` node.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert!(!matched.has_unlimited());
    /// assert!(rules.limits_for(&[Descriptor::new().entry("path", "/health")]).has_unlimited());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn has_unlimited(&self) -> bool {
        self.unlimited
    }
}

/// One limit that applies to a request, the store key it counts under, and the name
/// of its statistics.
#[derive(Clone, Debug)]
pub struct MatchedLimit<'a> {
    limit: &'a Limit,
    index: usize,
    key: String,
    stats_key: String,
    descriptor: usize,
}

impl<'a> MatchedLimit<'a> {
    /// The limit.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert_eq!(matched.limits()[0].limit().requests_per_unit(), 5);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limit(&self) -> &'a Limit {
        self.limit
    }

    /// The key under the domain's hash tag: the algorithm and window, then the
    /// request's entries down to the matched node, as
    /// `fixed_window:60|remote_address=10.0.0.1|path=/login`. `%`, `|` and `=` inside
    /// keys and values are written `%25`, `%7C` and `%3D`, so two different entry
    /// lists never share a key. A value over 128 bytes keeps its first 128 bytes
    /// followed by `%H` and a 64-bit FNV-1a hash of the whole value, so that a client
    /// cannot make a key the store refuses (two long values colliding in the hash
    /// would share a counter).
    ///
    /// An entry that reached its node through a pattern of a `share_threshold: true`
    /// node is written with the pattern instead of its value, as envoy's service
    /// writes its cache key: every value the pattern matches shares one counter.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, value: /files/*, share_threshold: true, rate_limit: { unit: minute, requests_per_unit: 100 } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/files/a.pdf"),
    /// ]);
    /// assert_eq!(matched.limits()[0].key(), "fixed_window:1|user=ann");
    /// assert_eq!(matched.limits()[1].key(), "fixed_window:60|path=/files/*");
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The name envoy's service gives this limit's statistics for this request (its
    /// `RateLimit.FullKey`, the prefix of `….total_hits`, `….over_limit`, …):
    /// `domain.key1_value1.key2`, one part per entry, joined by `.`:
    ///
    /// - an entry that reached a node by its value is `key_value`; through a pattern,
    ///   `key_pattern` (the `*` kept); through a bare key, `key`;
    /// - `value_to_metric: true` on the node writes the request's value instead (for
    ///   a pattern or a bare key), `share_threshold: true` the pattern (it wins over
    ///   `value_to_metric`);
    /// - `detailed_metric: true` on the limit's node writes every entry as the
    ///   request's `key_value` instead, except entries matched by a `share_threshold`
    ///   pattern, which keep the pattern (and then an empty value is written `key`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{Descriptor, RuleSet};
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: d
    /// descriptors:
    ///   - key: route
    ///     value_to_metric: true
    ///     descriptors:
    ///       - key: method
    ///         value: GET
    ///         descriptors:
    ///           - key: user
    ///             rate_limit: { unit: minute, requests_per_unit: 60 }
    ///   - key: wild
    ///     value: foo*
    ///     rate_limit: { unit: minute, requests_per_unit: 20 }
    ///   - key: ip
    ///     detailed_metric: true
    ///     rate_limit: { unit: second, requests_per_unit: 5 }
    /// ")?;
    /// let stats = |entries: &[(&str, &str)]| {
    ///     let d: Descriptor = entries.iter().copied().collect();
    ///     rules.limits_for(&[d]).limits()[0].stats_key().to_owned()
    /// };
    /// assert_eq!(stats(&[("route", "draw"), ("method", "GET"), ("user", "7")]), "d.route_draw.method_GET.user");
    /// assert_eq!(stats(&[("wild", "foo1")]), "d.wild_foo*");
    /// assert_eq!(stats(&[("ip", "10.0.0.1")]), "d.ip_10.0.0.1");
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn stats_key(&self) -> &str {
        &self.stats_key
    }

    /// The index of the descriptor that matched it (the first, for a limit two
    /// descriptors matched under one key).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: user, rate_limit: { name: per_user, unit: second, requests_per_unit: 5 } }
    ///   - { key: path, shadow_mode: true, rate_limit: { name: watch, unit: day, requests_per_unit: 9 } }
    ///   - { key: path, value: /health, rate_limit: { unlimited: true } }
    /// ")?;
    /// let matched = rules.limits_for(&[
    ///     Descriptor::new().entry("user", "ann"),
    ///     Descriptor::new().entry("path", "/orders"),
    /// ]);
    /// assert_eq!(matched.limits()[1].descriptor(), 1);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn descriptor(&self) -> usize {
        self.descriptor
    }

    /// The limit's [`is_quota_mode`](Limit::is_quota_mode).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, quota_mode: true, rate_limit: {unit: day, requests_per_unit: 5}}]}")?;
    /// let matched = rules.limits_for(&[Descriptor::new().entry("user", "ann")]);
    /// assert!(matched.limits()[0].is_quota_mode());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_quota_mode(&self) -> bool {
        self.limit.is_quota_mode()
    }

    /// The limit's [`is_detailed_metric`](Limit::is_detailed_metric).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, detailed_metric: true, rate_limit: {unit: day, requests_per_unit: 5}}]}")?;
    /// let matched = rules.limits_for(&[Descriptor::new().entry("user", "ann")]);
    /// assert!(matched.limits()[0].is_detailed_metric());
    /// assert_eq!(matched.limits()[0].stats_key(), "api.user_ann");
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_detailed_metric(&self) -> bool {
        self.limit.is_detailed_metric()
    }

    /// The `metadata` of the limit's node ([`Limit::metadata`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{Descriptor, RuleSet};
    /// let rules = RuleSet::from_yaml("{domain: api, descriptors: [{key: user, metadata: {tier: 2}, rate_limit: {unit: day, requests_per_unit: 5}}]}")?;
    /// let matched = rules.limits_for(&[Descriptor::new().entry("user", "ann")]);
    /// assert_eq!(matched.limits()[0].metadata().unwrap()["tier"], 2);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn metadata(&self) -> Option<&'a serde_json::Map<String, serde_json::Value>> {
        self.limit.metadata()
    }
}

/// # Matching
impl RuleSet {
    /// The limits that apply to a request carrying `descriptors`, as envoy's
    /// ratelimit service finds them.
    ///
    /// Each descriptor is matched level by level: its first entry against the
    /// top-level nodes, its second against the nodes nested in the one matched, and so
    /// on. At each level, among the nodes of the entry's key:
    ///
    /// 1. the node whose value is the entry's value;
    /// 2. else the first node, in the order of the file, whose value is a pattern the
    ///    entry's value matches (each `*` matches zero or more characters, anywhere in
    ///    the value: `/api/*`, `bar*b`, `svc*ep*rpc`);
    /// 3. else the node with the key and no value (which counts each value apart).
    ///
    /// Matching never backtracks to a less specific node, and:
    ///
    /// - only the node matched by the descriptor's **last** entry applies its limit: a
    ///   longer descriptor does not count against the limits of the nodes it passes,
    ///   and one that runs out of nested levels before its last entry matches nothing;
    /// - a node with `unlimited: true` matches, and applies no limit;
    /// - the names in the `replaces` of every matched limit and unlimited block are
    ///   collected, then every matched limit with one of these names is dropped
    ///   ([`DescriptorMatch::Replaced`]);
    /// - in [`limits`](Matched::limits), a limit matched twice under the same key (two
    ///   equal descriptors) counts once; [`descriptors`](Matched::descriptors) keeps
    ///   one answer per descriptor.
    ///
    /// Unlike envoy, which matches a pattern against the text `key_value` (so a
    /// pattern can reach across a `_` into the key: the node `{key: a, value: b*}`
    /// matches the entry `a_b` = `x`, and `{key: a, value: b_c}` the entry `a_b` =
    /// `c`), tollgate compares keys for equality and matches only the value.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{Descriptor, RuleSet};
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: path
    ///     rate_limit: { name: per_path, unit: second, requests_per_unit: 100 }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { name: login, unit: minute, requests_per_unit: 5 }
    ///   - key: path
    ///     value: /static/*
    ///     rate_limit: { unlimited: true }
    ///   - key: path
    ///     value: /api/*/export
    ///     rate_limit: { name: export, unit: hour, requests_per_unit: 10 }
    /// ")?;
    /// let names = |path: &str| {
    ///     rules.limits_for(&[Descriptor::new().entry("path", path)])
    ///         .limits().iter().map(|m| m.limit().name().to_owned()).collect::<Vec<_>>()
    /// };
    /// assert_eq!(names("/login"), ["login"]);
    /// assert_eq!(names("/orders"), ["per_path"]);
    /// assert_eq!(names("/api/v2/export"), ["export"]);
    /// assert!(names("/static/app.js").is_empty());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limits_for(&self, descriptors: &[Descriptor]) -> Matched<'_> {
        let mut answers = Vec::with_capacity(descriptors.len());
        let mut unlimited = false;
        let mut replacing: Vec<&str> = Vec::new();
        for (d, descriptor) in descriptors.iter().enumerate() {
            let entries = descriptor.entries();
            let steps = self.find(entries);
            let action = steps
                .as_ref()
                .and_then(|steps| steps.last())
                .map_or(Action::Nothing, |(node, _)| node.action);
            let answer = match action {
                Action::Nothing => DescriptorMatch::None,
                Action::Unlimited(u) => {
                    unlimited = true;
                    replacing.extend(self.unlimited_replaces[u].iter().map(String::as_str));
                    DescriptorMatch::Unlimited
                }
                Action::Limit(index) => {
                    let limit = &self.limits[index];
                    replacing.extend(limit.replaces().iter().map(String::as_str));
                    let steps = steps.as_deref().unwrap_or_default();
                    DescriptorMatch::Limit(MatchedLimit {
                        limit,
                        index,
                        key: storage_key(&limit.key_prefix, entries, steps),
                        stats_key: stats_key(self.domain(), limit, entries, steps),
                        descriptor: d,
                    })
                }
            };
            answers.push(answer);
        }
        let mut limits: Vec<MatchedLimit<'_>> = Vec::new();
        for answer in &mut answers {
            let DescriptorMatch::Limit(m) = answer else {
                continue;
            };
            if m.limit.is_named() && replacing.contains(&m.limit.name()) {
                let m = m.clone();
                *answer = DescriptorMatch::Replaced(m);
            } else if !limits.iter().any(|l| l.index == m.index && l.key == m.key) {
                limits.push(m.clone());
            }
        }
        Matched {
            descriptors: answers,
            limits,
            unlimited,
        }
    }

    /// The nodes `entries` reach, one per entry, if the last one reaches a node.
    fn find(&self, entries: &[(String, String)]) -> Option<Vec<(&TreeNode, Via<'_>)>> {
        let (last, above) = entries.split_last()?;
        let mut steps = Vec::with_capacity(entries.len());
        let mut level = &self.root;
        for (key, value) in above {
            let (node, via) = level.get(key, value)?;
            if node.children.is_empty() {
                return None;
            }
            steps.push((node, via));
            level = &node.children;
        }
        steps.push(level.get(&last.0, &last.1)?);
        Some(steps)
    }
}

/// The pattern entry `i` is counted under, if it reached a `share_threshold` node
/// through its pattern.
fn shared<'s>(steps: &[(&TreeNode, Via<'s>)], i: usize) -> Option<&'s str> {
    match steps.get(i) {
        Some((node, Via::Pattern(pattern))) if node.share_threshold => Some(pattern),
        _ => None,
    }
}

/// envoy's statistics name of `limit` for `entries` (see [`MatchedLimit::stats_key`]).
fn stats_key(
    domain: &str,
    limit: &Limit,
    entries: &[(String, String)],
    steps: &[(&TreeNode, Via<'_>)],
) -> String {
    let any_shared = (0..steps.len()).any(|i| shared(steps, i).is_some());
    let mut out = String::from(domain);
    for (i, (key, value)) in entries.iter().enumerate() {
        out.push('.');
        out.push_str(key);
        let written: Option<&str> = if limit.is_detailed_metric() {
            match shared(steps, i) {
                Some(pattern) => Some(pattern),
                None if any_shared => Some(value.as_str()).filter(|v| !v.is_empty()),
                // The one case where envoy writes `key_` for an empty value.
                None => Some(value.as_str()),
            }
        } else {
            let (node, via) = steps[i];
            match via {
                Via::Pattern(pattern) if node.share_threshold => Some(pattern),
                Via::Pattern(_) if node.value_to_metric => Some(value.as_str()),
                Via::Pattern(pattern) => Some(pattern),
                Via::Exact => Some(value.as_str()),
                Via::Key => node.value_to_metric.then_some(value.as_str()),
            }
            .filter(|v| !v.is_empty())
        };
        if let Some(written) = written {
            out.push('_');
            out.push_str(written);
        }
    }
    out
}

/// The store key of `entries` under `prefix`, a `share_threshold` pattern in place of
/// the value of each entry that reached its node through one.
fn storage_key(
    prefix: &str,
    entries: &[(String, String)],
    steps: &[(&TreeNode, Via<'_>)],
) -> String {
    let mut key = String::with_capacity(
        prefix.len()
            + entries
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>(),
    );
    key.push_str(prefix);
    for (i, (k, v)) in entries.iter().enumerate() {
        key.push('|');
        escape(&mut key, k);
        key.push('=');
        escape_value(&mut key, shared(steps, i).unwrap_or(v));
    }
    key
}

/// Values longer than this are kept only in part, then hashed: a client-chosen value
/// (a long path) must not make a key the store refuses.
const MAX_VALUE_LEN: usize = 128;

fn escape_value(out: &mut String, value: &str) {
    if value.len() <= MAX_VALUE_LEN {
        return escape(out, value);
    }
    let mut cut = MAX_VALUE_LEN;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    escape(out, &value[..cut]);
    // `%H` never comes out of `escape`, which writes `%` as `%25`.
    let _ = write!(out, "%H{:016x}", fnv1a(value.as_bytes()));
}

/// FNV-1a: stable across processes and builds, as keys shared through Redis must be.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' | '|' | '=' => {
                let _ = write!(out, "%{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn long_values_are_cut_and_hashed_to_a_bounded_key() {
        let long = "/a".repeat(5_000);
        let other = format!("{}b", &long[..long.len() - 1]);
        let key = storage_key("gcra:1", &entries(&[("path", &long)]), &[]);
        assert!(key.len() < 200, "{}", key.len());
        assert_ne!(
            key,
            storage_key("gcra:1", &entries(&[("path", &other)]), &[])
        );
        assert_eq!(
            key,
            storage_key("gcra:1", &entries(&[("path", &long)]), &[])
        );
    }

    #[test]
    fn keys_escape_their_separators() {
        assert_eq!(
            storage_key("gcra:1", &entries(&[("a", "b|c=d"), ("e", "")]), &[]),
            "gcra:1|a=b%7Cc%3Dd|e="
        );
        // Without escapes these two would both read "|a=b|c=d".
        assert_ne!(
            storage_key("p", &entries(&[("a", "b|c=d")]), &[]),
            storage_key("p", &entries(&[("a", "b"), ("c", "d")]), &[])
        );
        assert_eq!(
            storage_key("p", &entries(&[("%", "%7C")]), &[]),
            "p|%25=%257C"
        );
    }

    proptest::proptest! {
        /// Two entry lists share a key only if they are equal, whatever separators
        /// and escapes their texts hold.
        #[test]
        fn different_entries_never_share_a_key(
            a in proptest::collection::vec(("[a|=%7C]{0,3}", "[a|=%7C]{0,3}"), 0..3),
            b in proptest::collection::vec(("[a|=%7C]{0,3}", "[a|=%7C]{0,3}"), 0..3),
        ) {
            proptest::prop_assert_eq!(storage_key("p", &a, &[]) == storage_key("p", &b, &[]), a == b);
        }
    }
}
