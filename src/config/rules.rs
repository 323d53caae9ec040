//! [`RuleSet`]: the validated tree of a rules file, and its [`Limit`]s.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::{ConfigFileError, ConfigFileErrorKind, Location};
use super::file::{File, Metadata, Node, RateLimit};
use super::locate::{Step, locate};
use super::unit::{DEFAULT_ALGORITHM, Unit};
use super::wildcard::Pattern;
use crate::algorithm::{Rule, RuleKind};
use crate::error::ConfigError;

/// The rules of one file: a domain, and a tree of descriptors, some with a limit.
///
/// Built from YAML in the style of envoy's ratelimit service:
///
/// ```yaml
/// domain: api
/// descriptors:
///   - key: remote_address            # every client address, each counted apart
///     rate_limit: { unit: second, requests_per_unit: 10 }
///   - key: path
///     value: "/login"                # this value only
///     rate_limit: { name: login, unit: minute, requests_per_unit: 5, algorithm: gcra }
///   - key: path
///     value: "/api/*"                # values starting with "/api/"
///     descriptors:                   # nested: matched level by level
///       - key: method
///         value: POST
///         rate_limit: { unit: second, requests_per_unit: 2 }
/// ```
///
/// Each descriptor node has a `key`, an optional `value` (exact, or a pattern when it
/// holds `*`, each `*` matching any run of characters; without one, or with `""`, the
/// node matches every value, each counted apart), an optional `rate_limit`, nested
/// `descriptors`, and the flags of envoy's service: `shadow_mode`, `quota_mode`,
/// `detailed_metric`, `value_to_metric`, `share_threshold` (every value matching the
/// pattern shares one counter), and free-form `metadata`. A `rate_limit` holds `unit`
/// ([`Unit`]), `requests_per_unit` (0, or left out, blocks every request: see
/// [`Limit::is_blocking`]), and optionally `name`, `algorithm` (a [`RuleKind`]'s name,
/// default `fixed_window`: see [the table](crate::config#algorithms)), `burst` (for
/// `gcra` and `leaky_bucket`), `replaces: [{ name: … }]`, or just `unlimited: true`.
///
/// How requests are matched against the tree: see [`RuleSet::limits_for`].
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
/// ")?;
/// assert_eq!(rules.domain(), "api");
/// let matched = rules.limits_for(&[Descriptor::new().entry("remote_address", "10.0.0.1")]);
/// assert_eq!(matched.limits()[0].limit().requests_per_unit(), 10);
/// # Ok::<(), tollgate::config::ConfigFileError>(())
/// ```
pub struct RuleSet {
    domain: String,
    pub(crate) root: Level,
    pub(crate) limits: Vec<Limit>,
    /// The names each `unlimited: true` block replaces, by its index.
    pub(crate) unlimited_replaces: Vec<Vec<String>>,
    /// The files, kept to find a limit's line when a store refuses its rule: one, or
    /// more after [`merge`](RuleSet::merge).
    sources: Vec<Source>,
}

/// One file the rules were read from.
struct Source {
    yaml: String,
    path: Option<PathBuf>,
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleSet")
            .field("domain", &self.domain)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// One `rate_limit` of the file (not `unlimited`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::RuleKind;
/// use tollgate::config::{RuleSet, Unit};
///
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - key: path
///     value: /login
///     rate_limit: { name: login, unit: minute, requests_per_unit: 5, algorithm: gcra }
/// ")?;
/// let login = &rules.limits()[0];
/// assert_eq!(login.name(), "login");
/// assert_eq!((login.requests_per_unit(), login.unit()), (5, Unit::Minute));
/// assert_eq!(login.algorithm(), RuleKind::Gcra);
/// assert_eq!(login.window(), Duration::from_secs(60));
/// assert_eq!(rules.location_of(login).unwrap().line(), 6);
/// # Ok::<(), tollgate::config::ConfigFileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Limit {
    name: String,
    named: bool,
    /// `None` for `requests_per_unit: 0`, which no rule can hold.
    rule: Option<Rule>,
    requests_per_unit: u64,
    unit: Unit,
    algorithm: RuleKind,
    shadow: bool,
    quota_mode: bool,
    detailed_metric: bool,
    metadata: Option<Metadata>,
    replaces: Vec<String>,
    pub(crate) path: Vec<Step>,
    /// The index of the file it was read from (see `RuleSet::sources`).
    source: usize,
    /// The start of every key of this limit: the algorithm and the window, so that a
    /// file edited to another algorithm or unit never reads a state of the old one.
    pub(crate) key_prefix: String,
}

impl Limit {
    /// Its `name`, or, without one, the path of keys and values that leads to it, as
    /// `remote_address.path=/login`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!((per_user.name(), login.name()), ("per_user", "path=/login"));
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the file names it (only named limits can be replaced).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert!(per_user.is_named() && !login.is_named());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// The rule a store runs for it; `None` for a [blocking](Limit::is_blocking) limit,
    /// which no store is asked about.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(per_user.rule().unwrap().capacity(), 30);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn rule(&self) -> Option<&Rule> {
        self.rule.as_ref()
    }

    /// Whether it admits nothing: `requests_per_unit: 0` (or none given), which envoy's
    /// service reads as "every request is over the limit", a way to block a
    /// descriptor. [`ConfigLimiter`](super::ConfigLimiter) denies such a limit for
    /// good ([`Denied::Insufficient`](crate::Denied::Insufficient), capacity 0)
    /// without asking its store.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     value: mallory
    ///     rate_limit: { unit: second, requests_per_unit: 0 }
    /// ")?;
    /// let blocked = &rules.limits()[0];
    /// assert!(blocked.is_blocking() && blocked.rule().is_none());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_blocking(&self) -> bool {
        self.rule.is_none()
    }

    /// `quota_mode`: envoy's service reports this limit's denials without denying, as
    /// long as one descriptor of the request that is not in quota mode admits (a
    /// service's decision: [`ConfigLimiter`](super::ConfigLimiter) enforces it as any
    /// other limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: tenant
    ///     quota_mode: true
    ///     rate_limit: { unit: day, requests_per_unit: 10000 }
    /// ")?;
    /// assert!(rules.limits()[0].is_quota_mode());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_quota_mode(&self) -> bool {
        self.quota_mode
    }

    /// `detailed_metric`: the statistics of this limit are kept per request value
    /// (see [`MatchedLimit::stats_key`](super::MatchedLimit::stats_key)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     detailed_metric: true
    ///     rate_limit: { unit: minute, requests_per_unit: 60 }
    /// ")?;
    /// assert!(rules.limits()[0].is_detailed_metric());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_detailed_metric(&self) -> bool {
        self.detailed_metric
    }

    /// The `metadata` of its node, as written (`None` when absent or empty, as envoy
    /// reports it).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { unit: minute, requests_per_unit: 60 }
    ///     metadata:
    ///       owner: { team: payments, oncall: 3 }
    /// ")?;
    /// let metadata = rules.limits()[0].metadata().unwrap();
    /// assert_eq!(metadata["owner"]["team"], "payments");
    /// assert_eq!(metadata["owner"]["oncall"], 3);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn metadata(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.metadata.as_ref()
    }

    /// The names its `replaces` lists: a request matching this limit drops the
    /// limits of these names that its other descriptors match.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 60 }
    ///   - key: plan
    ///     value: gold
    ///     rate_limit: { unit: minute, requests_per_unit: 600, replaces: [{ name: per_user }] }
    /// ")?;
    /// assert_eq!(rules.limits()[1].replaces(), ["per_user"]);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// `requests_per_unit`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(per_user.requests_per_unit(), 30);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn requests_per_unit(&self) -> u64 {
        self.requests_per_unit
    }

    /// `unit`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(per_user.unit(), Unit::Minute);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// The unit's length: the window of the `RateLimit-Policy` this limit reports,
    /// unless a `burst` of another size makes it the time the bucket takes to fill.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(login.window(), Duration::from_secs(1));
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn window(&self) -> Duration {
        self.unit.duration()
    }

    /// `algorithm`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::algorithm::RuleKind;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!((per_user.algorithm(), login.algorithm()), (RuleKind::Gcra, RuleKind::FixedWindow));
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn algorithm(&self) -> RuleKind {
        self.algorithm
    }

    /// Whether its descriptor has `shadow_mode: true`: it counts, but never denies.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert!(per_user.is_shadow() && !login.is_shadow());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The quota its decisions report as their `limit`, and the window it applies
    /// over: `requests_per_unit` per unit, or with a `burst` of another size, the
    /// burst over the time the bucket takes to fill. So `r` never exceeds `q`.
    pub(crate) fn quota_and_window(&self) -> (u64, Duration) {
        match &self.rule {
            None => (0, self.window()),
            Some(rule) if rule.capacity() == self.requests_per_unit => {
                (self.requests_per_unit, self.window())
            }
            Some(rule) => (rule.capacity(), rule.window()),
        }
    }
}

/// The nodes of one level, by key.
#[derive(Debug, Default)]
pub(crate) struct Level {
    by_key: HashMap<String, KeyNodes>,
}

/// The nodes of one key at one level: by value, the patterns among those values in
/// file order, and the bare key.
#[derive(Debug, Default)]
struct KeyNodes {
    /// Every node with a value, a pattern's included: a request value written as the
    /// pattern is an exact match (as in envoy, whose map holds both).
    valued: HashMap<String, TreeNode>,
    /// The values holding `*`, in the order of the file (files, after a merge).
    patterns: Vec<Pattern>,
    any: Option<TreeNode>,
}

#[derive(Debug)]
pub(crate) struct TreeNode {
    pub(crate) action: Action,
    pub(crate) children: Level,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
    /// Where the node is: its file, and its index in the list that holds it.
    source: usize,
    position: usize,
}

/// What a matched node does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing: the node only leads to nested descriptors.
    Nothing,
    /// `unlimited: true`, with its index in `unlimited_replaces`.
    Unlimited(usize),
    /// The limit of this index.
    Limit(usize),
}

/// How an entry reached its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via<'a> {
    /// The node's value is the entry's.
    Exact,
    /// The node's value is this pattern, which the entry's value matches.
    Pattern(&'a str),
    /// The node has no value.
    Key,
}

impl Level {
    /// The node for `key` = `value`: the exact value first, then the first pattern (in
    /// file order) that matches, then the bare key.
    pub(crate) fn get(&self, key: &str, value: &str) -> Option<(&TreeNode, Via<'_>)> {
        let nodes = self.by_key.get(key)?;
        if let Some(node) = nodes.valued.get(value) {
            return Some((node, Via::Exact));
        }
        if let Some(pattern) = nodes.patterns.iter().find(|p| p.matches(value)) {
            let node = &nodes.valued[pattern.text()];
            return Some((node, Via::Pattern(pattern.text())));
        }
        nodes.any.as_ref().map(|node| (node, Via::Key))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn has(&self, key: &str, value: Option<&str>) -> bool {
        self.by_key.get(key).is_some_and(|nodes| match value {
            None => nodes.any.is_some(),
            Some(v) => nodes.valued.contains_key(v),
        })
    }

    /// Adds `node`, known not to be there yet, after the nodes of its key.
    fn insert(&mut self, key: String, value: Option<String>, node: TreeNode) {
        let nodes = self.by_key.entry(key).or_default();
        match value {
            None => nodes.any = Some(node),
            Some(v) => {
                if let Some(pattern) = Pattern::new(&v) {
                    nodes.patterns.push(pattern);
                }
                nodes.valued.insert(v, node);
            }
        }
    }

    /// Every node of the level, with its key and value, in no order.
    fn drain(self) -> Vec<(String, Option<String>, TreeNode)> {
        let mut all = Vec::new();
        for (key, nodes) in self.by_key {
            if let Some(node) = nodes.any {
                all.push((key.clone(), None, node));
            }
            for (value, node) in nodes.valued {
                all.push((key.clone(), Some(value), node));
            }
        }
        all
    }
}

impl TreeNode {
    /// Moves every index of the node and the tree below by `(limits, unlimited
    /// blocks, files)`, for a node merged into other rules.
    fn shift(&mut self, offsets: (usize, usize, usize)) {
        self.action = match self.action {
            Action::Nothing => Action::Nothing,
            Action::Unlimited(u) => Action::Unlimited(u + offsets.1),
            Action::Limit(l) => Action::Limit(l + offsets.0),
        };
        self.source += offsets.2;
        for nodes in self.children.by_key.values_mut() {
            for node in nodes.valued.values_mut().chain(nodes.any.as_mut()) {
                node.shift(offsets);
            }
        }
    }
}

impl Source {
    /// An error about the node at `path` of this file.
    fn error(&self, kind: ConfigFileErrorKind, path: &[Step]) -> ConfigFileError {
        let e = ConfigFileError::new(kind, locate(&self.yaml, path));
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }
}

/// The name envoy gives a node: `key_value`, or `key` without a value.
fn composite_of(key: &str, value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{key}_{v}"),
        None => key.to_owned(),
    }
}

/// # Reading a file
impl RuleSet {
    /// The rules of `yaml`, checked in full.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] for the first problem found, with its line and column:
    /// YAML syntax, unknown keys, lists of something else than mappings, values of the
    /// wrong type or out of range, an empty key, duplicate siblings, `*` in a key,
    /// `share_threshold` without a pattern, `unlimited` with a unit, an empty or
    /// self-naming `replaces`; see [`ConfigFileErrorKind`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, RuleSet};
    ///
    /// let err = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { unit: fortnight, requests_per_unit: 1 }
    /// ").unwrap_err();
    /// assert!(matches!(err.kind(), ConfigFileErrorKind::Format(_)));
    /// assert_eq!(err.line(), Some(5));
    /// ```
    pub fn from_yaml(yaml: &str) -> Result<RuleSet, ConfigFileError> {
        let file: File =
            serde_yaml_ng::from_str(yaml).map_err(|e| ConfigFileError::from_yaml(&e))?;
        Builder::new(yaml).build(file)
    }

    /// The rules of the file at `path`.
    ///
    /// # Errors
    ///
    /// [`ConfigFileErrorKind::Io`] if the file cannot be read, otherwise as
    /// [`from_yaml`](RuleSet::from_yaml); the error carries the path.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rules.yaml"))?;
    /// assert!(!rules.limits().is_empty());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<RuleSet, ConfigFileError> {
        let path = path.as_ref();
        let yaml = std::fs::read_to_string(path)
            .map_err(|e| ConfigFileError::new(ConfigFileErrorKind::Io(e), None).with_path(path))?;
        let mut rules = RuleSet::from_yaml(&yaml).map_err(|e| e.with_path(path))?;
        rules.sources[0].path = Some(path.to_owned());
        Ok(rules)
    }

    /// Adds the descriptors of `other`, rules of the same domain, after these: what
    /// envoy's service does with `MERGE_DOMAIN_CONFIG` for two files of one domain.
    /// As there, the top-level descriptors of `other` join these, and a top-level
    /// descriptor of `other` with the key and value of one of these is an error (the
    /// levels below are not merged); patterns of `other` are tried after these.
    ///
    /// # Errors
    ///
    /// [`ConfigFileErrorKind::DuplicateDescriptor`] at the line of `other`'s
    /// descriptor (and with `other`'s path, when read with
    /// [`from_file`](RuleSet::from_file)), or [`ConfigFileErrorKind::MergeDomain`]
    /// when the domains differ. On error `self` is unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, Descriptor, RuleSet};
    ///
    /// let mut rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - { key: key1, value: value1, rate_limit: { unit: minute, requests_per_unit: 10 } }
    /// ")?;
    /// let other = "
    /// domain: api
    /// descriptors:
    ///   - { key: key2, value: value2, rate_limit: { unit: minute, requests_per_unit: 20 } }
    /// ";
    /// rules.merge(RuleSet::from_yaml(other)?)?;
    /// let matched = rules.limits_for(&[Descriptor::new().entry("key2", "value2")]);
    /// assert_eq!(matched.limits()[0].limit().requests_per_unit(), 20);
    ///
    /// // The same file again: its descriptor is already there.
    /// let err = rules.merge(RuleSet::from_yaml(other)?).unwrap_err();
    /// assert!(matches!(err.kind(), ConfigFileErrorKind::DuplicateDescriptor { .. }));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "line 4 column 5: duplicate descriptor composite key 'api.key2_value2'"
    /// );
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn merge(&mut self, other: RuleSet) -> Result<(), ConfigFileError> {
        if other.domain != self.domain {
            let kind = ConfigFileErrorKind::MergeDomain {
                ours: self.domain.clone(),
                theirs: other.domain.clone(),
            };
            return Err(other.sources[0].error(kind, &[Step::Key("domain")]));
        }
        let RuleSet {
            root,
            limits,
            unlimited_replaces,
            sources,
            ..
        } = other;
        let mut nodes = root.drain();
        // The order of the files: patterns are tried in it.
        nodes.sort_by_key(|(_, _, node)| (node.source, node.position));
        let duplicate = nodes
            .iter()
            .find(|(key, value, _)| self.root.has(key, value.as_deref()));
        if let Some((key, value, node)) = duplicate {
            let kind = ConfigFileErrorKind::DuplicateDescriptor {
                key: key.clone(),
                value: value.clone(),
                composite: format!("{}.{}", self.domain, composite_of(key, value.as_deref())),
            };
            let path = [Step::Key("descriptors"), Step::Index(node.position)];
            return Err(sources[node.source].error(kind, &path));
        }
        let offsets = (
            self.limits.len(),
            self.unlimited_replaces.len(),
            self.sources.len(),
        );
        for (key, value, mut node) in nodes {
            node.shift(offsets);
            self.root.insert(key, value, node);
        }
        self.limits.extend(limits.into_iter().map(|mut limit| {
            limit.source += offsets.2;
            limit
        }));
        self.unlimited_replaces.extend(unlimited_replaces);
        self.sources.extend(sources);
        Ok(())
    }

    /// The domain: the hash tag of every key of these rules.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(rules.domain(), "api");
    /// # let _ = (per_user, login);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Every limit, in the order of the file.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(rules.limits().len(), 2);
    /// # let _ = (per_user, login);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// The limit named `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::config::{RuleSet, Unit};
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     shadow_mode: true
    ///     rate_limit: { name: per_user, unit: minute, requests_per_unit: 30, algorithm: gcra }
    ///   - key: path
    ///     value: /login
    ///     rate_limit: { unit: second, requests_per_unit: 2 }
    /// ")?;
    /// let (per_user, login) = (&rules.limits()[0], &rules.limits()[1]);
    /// assert_eq!(rules.limit("per_user").unwrap().requests_per_unit(), 30);
    /// assert!(rules.limit("nobody").is_none());
    /// # let _ = (per_user, login);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limit(&self, name: &str) -> Option<&Limit> {
        self.limits.iter().find(|l| l.name == name)
    }

    /// Where `limit`'s `rate_limit` block starts in the file. This reads the file
    /// again (positions are not kept), so it is meant for error messages.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: user
    ///     rate_limit:
    ///       unit: hour
    ///       requests_per_unit: 100
    /// ")?;
    /// let at = rules.location_of(&rules.limits()[0]).unwrap();
    /// assert_eq!((at.line(), at.column()), (6, 7));
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn location_of(&self, limit: &Limit) -> Option<Location> {
        locate(&self.sources.get(limit.source)?.yaml, &limit.path)
    }

    /// An error about `limit`, with its line and its file.
    pub(crate) fn error_at(&self, limit: &Limit, kind: ConfigFileErrorKind) -> ConfigFileError {
        self.sources[limit.source].error(kind, &limit.path)
    }
}

struct Builder<'s> {
    yaml: &'s str,
    domain: String,
    path: Vec<Step>,
    limits: Vec<Limit>,
    unlimited_replaces: Vec<Vec<String>>,
}

impl<'s> Builder<'s> {
    fn new(yaml: &'s str) -> Builder<'s> {
        Builder {
            yaml,
            domain: String::new(),
            path: Vec::new(),
            limits: Vec::new(),
            unlimited_replaces: Vec::new(),
        }
    }

    /// An error about the node at the current path followed by `steps`.
    fn error(&self, kind: ConfigFileErrorKind, steps: &[Step]) -> ConfigFileError {
        let mut path = self.path.clone();
        path.extend_from_slice(steps);
        ConfigFileError::new(kind, locate(self.yaml, &path))
    }

    fn build(mut self, file: File) -> Result<RuleSet, ConfigFileError> {
        if file.domain.is_empty() || file.domain.contains(['{', '}']) {
            return Err(self.error(
                ConfigFileErrorKind::Domain(file.domain),
                &[Step::Key("domain")],
            ));
        }
        self.domain = file.domain;
        self.path.push(Step::Key("descriptors"));
        let root = self.level(file.descriptors, &[], &self.domain.clone())?;
        self.path.pop();
        Ok(RuleSet {
            domain: self.domain,
            root,
            limits: self.limits,
            unlimited_replaces: self.unlimited_replaces,
            sources: vec![Source {
                yaml: self.yaml.to_owned(),
                path: None,
            }],
        })
    }

    /// The level of `nodes`, reached through `above` (the names of the nodes above)
    /// and `composite` (envoy's name of the path: `domain.key1_value1`).
    fn level(
        &mut self,
        nodes: Vec<Node>,
        above: &[String],
        composite: &str,
    ) -> Result<Level, ConfigFileError> {
        let mut level = Level::default();
        for (i, mut node) in nodes.into_iter().enumerate() {
            self.path.push(Step::Index(i));
            if node.key.is_empty() {
                return Err(self.error(ConfigFileErrorKind::Empty("key"), &[Step::Key("key")]));
            }
            if node.key.contains('*') {
                return Err(self.error(
                    ConfigFileErrorKind::WildcardInKey(node.key),
                    &[Step::Key("key")],
                ));
            }
            // As envoy: an empty value is no value.
            let value = node.value.take().filter(|v| !v.is_empty());
            let here = composite_of(&node.key, value.as_deref());
            let composite = format!("{composite}.{here}");
            if level.has(&node.key, value.as_deref()) {
                return Err(self.error(
                    ConfigFileErrorKind::DuplicateDescriptor {
                        key: node.key,
                        value,
                        composite,
                    },
                    &[],
                ));
            }
            let is_pattern = value.as_deref().is_some_and(|v| v.contains('*'));
            if node.share_threshold && !is_pattern {
                return Err(self.error(
                    ConfigFileErrorKind::ShareThresholdWithoutWildcard { composite: here },
                    &[Step::Key("share_threshold")],
                ));
            }
            let mut names = above.to_vec();
            names.push(match &value {
                Some(v) => format!("{}={v}", node.key),
                None => node.key.clone(),
            });
            let action = match &node.rate_limit {
                Some(rate_limit) => {
                    self.path.push(Step::Key("rate_limit"));
                    let action = self.rate_limit(rate_limit, &node, &names);
                    self.path.pop();
                    action?
                }
                None => Action::Nothing,
            };
            self.path.push(Step::Key("descriptors"));
            let children = self.level(std::mem::take(&mut node.descriptors), &names, &composite)?;
            self.path.pop();
            self.path.pop();

            let tree_node = TreeNode {
                action,
                children,
                value_to_metric: node.value_to_metric,
                share_threshold: node.share_threshold,
                source: 0,
                position: i,
            };
            level.insert(node.key, value, tree_node);
        }
        Ok(level)
    }

    /// The action of the `rate_limit` block of `node`, at the current path.
    fn rate_limit(
        &mut self,
        block: &RateLimit,
        node: &Node,
        names: &[String],
    ) -> Result<Action, ConfigFileError> {
        let mut replaces = Vec::with_capacity(block.replaces.len());
        for (i, replace) in block.replaces.iter().enumerate() {
            let at = [Step::Key("replaces"), Step::Index(i)];
            let name = match replace.name.as_deref() {
                None | Some("") => {
                    return Err(self.error(ConfigFileErrorKind::Empty("replaces"), &at));
                }
                Some(name) => name,
            };
            if block.name.as_deref() == Some(name) {
                return Err(self.error(
                    ConfigFileErrorKind::ReplacesItself(name.to_owned()),
                    &[at[0], at[1], Step::Key("name")],
                ));
            }
            replaces.push(name.to_owned());
        }
        if block.unlimited {
            // envoy refuses a unit, and ignores a count; tollgate's own keys have no
            // meaning without a count either.
            let extra = [
                ("unit", block.unit.is_some()),
                ("algorithm", block.algorithm.is_some()),
                ("burst", block.burst.is_some()),
            ];
            if let Some((field, _)) = extra.iter().find(|(_, given)| *given) {
                return Err(self.error(
                    ConfigFileErrorKind::UnlimitedWithLimit(field),
                    &[Step::Key(field)],
                ));
            }
            self.unlimited_replaces.push(replaces);
            return Ok(Action::Unlimited(self.unlimited_replaces.len() - 1));
        }
        let limit = self.limit(block, node, names, replaces)?;
        self.limits.push(limit);
        Ok(Action::Limit(self.limits.len() - 1))
    }

    fn limit(
        &self,
        block: &RateLimit,
        node: &Node,
        names: &[String],
        replaces: Vec<String>,
    ) -> Result<Limit, ConfigFileError> {
        let Some(unit) = block.unit else {
            return Err(self.error(ConfigFileErrorKind::MissingLimit("unit"), &[]));
        };
        // As envoy: no count is a count of zero, which blocks.
        let requests_per_unit = self.not_negative("requests_per_unit", block.requests_per_unit)?;
        let algorithm = block.algorithm.unwrap_or(DEFAULT_ALGORITHM);
        let burst = match block.burst {
            None => None,
            Some(_) if !algorithm.takes_burst() => {
                return Err(self.error(
                    ConfigFileErrorKind::BurstNotApplicable(algorithm),
                    &[Step::Key("burst")],
                ));
            }
            Some(0) => {
                let zero = ConfigError::Zero { parameter: "burst" };
                return Err(self.error(ConfigFileErrorKind::Limit(zero), &[Step::Key("burst")]));
            }
            Some(_) if requests_per_unit == 0 => {
                // A bucket that never refills is not what a blocking limit means.
                let zero = ConfigError::Zero {
                    parameter: "requests_per_unit",
                };
                let at: &[Step] = match block.requests_per_unit {
                    Some(_) => &[Step::Key("requests_per_unit")],
                    None => &[],
                };
                return Err(self.error(ConfigFileErrorKind::Limit(zero), at));
            }
            burst => Some(self.not_negative("burst", burst)?),
        };
        let rule = match requests_per_unit {
            0 => None,
            count => Some(
                algorithm
                    .build_rule(count, unit.duration(), burst)
                    .map_err(|e| {
                        let e = rename(e, burst.is_some());
                        let field = match e.parameter() {
                            "burst" => "burst",
                            "algorithm" => "algorithm",
                            _ => "requests_per_unit",
                        };
                        self.error(ConfigFileErrorKind::Limit(e), &[Step::Key(field)])
                    })?,
            ),
        };
        // As envoy: an empty name is no name.
        let name = block.name.clone().filter(|n| !n.is_empty());
        Ok(Limit {
            named: name.is_some(),
            name: name.unwrap_or_else(|| names.join(".")),
            rule,
            requests_per_unit,
            unit,
            algorithm,
            shadow: node.shadow_mode,
            quota_mode: node.quota_mode,
            detailed_metric: node.detailed_metric,
            metadata: node.metadata.clone().filter(|m| !m.is_empty()),
            replaces,
            path: self.path.clone(),
            source: 0,
            key_prefix: format!("{}:{}", algorithm.name(), unit.duration().as_secs()),
        })
    }

    /// `value`, or 0 when absent; an error when negative.
    fn not_negative(
        &self,
        field: &'static str,
        value: Option<i64>,
    ) -> Result<u64, ConfigFileError> {
        match value {
            None => Ok(0),
            Some(v) if v < 0 => {
                let e = ConfigError::Negative {
                    parameter: field,
                    value: v as f64,
                };
                Err(self.error(ConfigFileErrorKind::Limit(e), &[Step::Key(field)]))
            }
            Some(v) => Ok(v.unsigned_abs()),
        }
    }
}

/// A constructor's error in the file's words: its `count`, `limit` or `capacity` is
/// the file's `requests_per_unit` or `burst` (a leaky bucket's capacity is the burst
/// when one is given).
fn rename(e: ConfigError, burst_given: bool) -> ConfigError {
    let parameter = match e.parameter() {
        "burst" => "burst",
        "algorithm" => "algorithm",
        "capacity" if burst_given => "burst",
        "window" | "period" => "unit",
        _ => "requests_per_unit",
    };
    match e {
        ConfigError::Zero { .. } => ConfigError::Zero { parameter },
        ConfigError::Negative { value, .. } => ConfigError::Negative { parameter, value },
        ConfigError::NotANumber { .. } => ConfigError::NotANumber { parameter },
        ConfigError::Infinite { .. } => ConfigError::Infinite { parameter },
        ConfigError::Overflow { .. } => ConfigError::Overflow { parameter },
        ConfigError::TooLong { max, within, .. } => ConfigError::TooLong {
            parameter,
            max,
            within,
        },
        ConfigError::OutOfRange { expected, .. } => ConfigError::OutOfRange {
            parameter,
            expected,
        },
    }
}
