//! [`RuleSet`]: the validated tree of a rules file, and its [`Limit`]s.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::error::{ConfigFileError, ConfigFileErrorKind, Location};
use super::file::{File, Node, RateLimit};
use super::locate::{Step, locate};
use super::unit::{DEFAULT_ALGORITHM, Unit};
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
/// Each descriptor node has a `key`, an optional `value` (exact, or a prefix when it
/// ends in `*`; without one the node matches every value, each counted apart), an
/// optional `rate_limit`, `shadow_mode` and nested `descriptors`. A `rate_limit`
/// holds `unit` ([`Unit`]), `requests_per_unit`, and optionally `name`, `algorithm`
/// (a [`RuleKind`]'s name, default `fixed_window`: see [the table](crate::config#algorithms)),
/// `burst` (for `gcra` and `leaky_bucket`),
/// `replaces: [{ name: … }]`, or just `unlimited: true`.
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
    /// What each `unlimited: true` node replaces, by limit index.
    pub(crate) unlimited_replaces: Vec<Vec<usize>>,
    /// The file, kept to find a limit's line when a store refuses its rule.
    source: String,
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
    rule: Rule,
    requests_per_unit: u64,
    unit: Unit,
    algorithm: RuleKind,
    shadow: bool,
    pub(crate) replaces: Vec<usize>,
    pub(crate) path: Vec<Step>,
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

    /// The rule a store runs for it.
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
    /// assert_eq!(per_user.rule().capacity(), 30);
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn rule(&self) -> &Rule {
        &self.rule
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
        match self.rule.capacity() {
            count if count == self.requests_per_unit => (count, self.window()),
            burst => (burst, self.rule.window()),
        }
    }
}

/// The nodes of one level, by key.
#[derive(Debug, Default)]
pub(crate) struct Level {
    by_key: HashMap<String, KeyNodes>,
}

/// The nodes of one key at one level: by exact value, by value prefix (longest
/// first), and the bare key.
#[derive(Debug, Default)]
struct KeyNodes {
    exact: HashMap<String, TreeNode>,
    prefixes: Vec<(String, TreeNode)>,
    any: Option<TreeNode>,
}

#[derive(Debug)]
pub(crate) struct TreeNode {
    pub(crate) action: Action,
    pub(crate) children: Level,
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

impl Level {
    /// The node for `key` = `value`: exact value first, then the longest matching
    /// prefix, then the bare key.
    pub(crate) fn get(&self, key: &str, value: &str) -> Option<&TreeNode> {
        let nodes = self.by_key.get(key)?;
        nodes
            .exact
            .get(value)
            .or_else(|| {
                nodes
                    .prefixes
                    .iter()
                    .find(|(prefix, _)| value.starts_with(prefix.as_str()))
                    .map(|(_, node)| node)
            })
            .or(nodes.any.as_ref())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// # Reading a file
impl RuleSet {
    /// The rules of `yaml`, checked in full.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] for the first problem found, with its line and column:
    /// YAML syntax, unknown keys, values of the wrong type or out of range, duplicate
    /// siblings or names, `replaces` naming no limit; see [`ConfigFileErrorKind`].
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
        RuleSet::from_yaml(&yaml).map_err(|e| e.with_path(path))
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
        locate(&self.source, &limit.path)
    }
}

struct Builder<'s> {
    yaml: &'s str,
    path: Vec<Step>,
    limits: Vec<Limit>,
    unlimited_replaces: Vec<Vec<usize>>,
    /// Every `name`, with its limit's index (`None` for an `unlimited` block).
    names: HashMap<String, Option<usize>>,
    /// `replaces` to resolve once every name is known: the owner, the name, its path.
    replaces: Vec<(Action, String, Vec<Step>)>,
}

impl<'s> Builder<'s> {
    fn new(yaml: &'s str) -> Builder<'s> {
        Builder {
            yaml,
            path: Vec::new(),
            limits: Vec::new(),
            unlimited_replaces: Vec::new(),
            names: HashMap::new(),
            replaces: Vec::new(),
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
        self.path.push(Step::Key("descriptors"));
        let root = self.level(&file.descriptors, &[])?;
        self.path.pop();
        self.resolve_replaces()?;
        Ok(RuleSet {
            domain: file.domain,
            root,
            limits: self.limits,
            unlimited_replaces: self.unlimited_replaces,
            source: self.yaml.to_owned(),
        })
    }

    /// The level of `nodes`, reached through `above` (the names of the nodes above).
    fn level(&mut self, nodes: &[Node], above: &[String]) -> Result<Level, ConfigFileError> {
        let mut level = Level::default();
        for (i, node) in nodes.iter().enumerate() {
            self.path.push(Step::Index(i));
            let value = node.value.as_deref();
            if node.key.is_empty() {
                return Err(self.error(ConfigFileErrorKind::Empty("key"), &[Step::Key("key")]));
            }
            if value == Some("") {
                return Err(self.error(ConfigFileErrorKind::Empty("value"), &[Step::Key("value")]));
            }
            let entry = level.by_key.entry(node.key.clone()).or_default();
            let taken = match value {
                None => entry.any.is_some(),
                Some(v) => match v.strip_suffix('*') {
                    Some(prefix) => entry.prefixes.iter().any(|(p, _)| p == prefix),
                    None => entry.exact.contains_key(v),
                },
            };
            if taken {
                return Err(self.error(
                    ConfigFileErrorKind::DuplicateDescriptor {
                        key: node.key.clone(),
                        value: node.value.clone(),
                    },
                    &[],
                ));
            }
            let mut names = above.to_vec();
            names.push(match value {
                Some(v) => format!("{}={v}", node.key),
                None => node.key.clone(),
            });
            let action = match &node.rate_limit {
                Some(rate_limit) => {
                    self.path.push(Step::Key("rate_limit"));
                    let action = self.rate_limit(rate_limit, node.shadow_mode, &names);
                    self.path.pop();
                    action?
                }
                None => Action::Nothing,
            };
            self.path.push(Step::Key("descriptors"));
            let children = self.level(&node.descriptors, &names)?;
            self.path.pop();
            self.path.pop();

            let tree_node = TreeNode { action, children };
            let entry = level.by_key.entry(node.key.clone()).or_default();
            match value {
                None => entry.any = Some(tree_node),
                Some(v) => match v.strip_suffix('*') {
                    Some(prefix) => {
                        entry.prefixes.push((prefix.to_owned(), tree_node));
                        // Longest first: the most specific prefix wins.
                        entry.prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
                    }
                    None => {
                        entry.exact.insert(v.to_owned(), tree_node);
                    }
                },
            }
        }
        Ok(level)
    }

    /// The action of a `rate_limit` block at the current path.
    fn rate_limit(
        &mut self,
        block: &RateLimit,
        shadow: bool,
        names: &[String],
    ) -> Result<Action, ConfigFileError> {
        let action = if block.unlimited {
            let extra = [
                ("unit", block.unit.is_some()),
                ("requests_per_unit", block.requests_per_unit.is_some()),
                ("algorithm", block.algorithm.is_some()),
                ("burst", block.burst.is_some()),
            ];
            if let Some((field, _)) = extra.iter().find(|(_, given)| *given) {
                return Err(self.error(
                    ConfigFileErrorKind::UnlimitedWithLimit(field),
                    &[Step::Key(field)],
                ));
            }
            self.unlimited_replaces.push(Vec::new());
            Action::Unlimited(self.unlimited_replaces.len() - 1)
        } else {
            let limit = self.limit(block, shadow, names)?;
            self.limits.push(limit);
            Action::Limit(self.limits.len() - 1)
        };
        if let Some(name) = &block.name {
            if self.names.contains_key(name) {
                return Err(self.error(
                    ConfigFileErrorKind::DuplicateName(name.clone()),
                    &[Step::Key("name")],
                ));
            }
            let index = match action {
                Action::Limit(index) => Some(index),
                _ => None,
            };
            self.names.insert(name.clone(), index);
        }
        for (i, replace) in block.replaces.iter().enumerate() {
            let mut path = self.path.clone();
            path.extend([Step::Key("replaces"), Step::Index(i), Step::Key("name")]);
            self.replaces.push((action, replace.name.clone(), path));
        }
        Ok(action)
    }

    fn limit(
        &self,
        block: &RateLimit,
        shadow: bool,
        names: &[String],
    ) -> Result<Limit, ConfigFileError> {
        let Some(unit) = block.unit else {
            return Err(self.error(ConfigFileErrorKind::MissingLimit("unit"), &[]));
        };
        let Some(requests_per_unit) = block.requests_per_unit else {
            return Err(self.error(ConfigFileErrorKind::MissingLimit("requests_per_unit"), &[]));
        };
        let requests_per_unit = self.positive("requests_per_unit", requests_per_unit)?;
        let algorithm = block.algorithm.unwrap_or(DEFAULT_ALGORITHM);
        let burst = match block.burst {
            Some(_) if !algorithm.takes_burst() => {
                return Err(self.error(
                    ConfigFileErrorKind::BurstNotApplicable(algorithm),
                    &[Step::Key("burst")],
                ));
            }
            Some(burst) => Some(self.positive("burst", burst)?),
            None => None,
        };
        let rule = algorithm
            .build_rule(requests_per_unit, unit.duration(), burst)
            .map_err(|e| {
                let e = rename(e, burst.is_some());
                let field = match e.parameter() {
                    "burst" => "burst",
                    "algorithm" => "algorithm",
                    _ => "requests_per_unit",
                };
                self.error(ConfigFileErrorKind::Limit(e), &[Step::Key(field)])
            })?;
        Ok(Limit {
            name: block.name.clone().unwrap_or_else(|| names.join(".")),
            named: block.name.is_some(),
            rule,
            requests_per_unit,
            unit,
            algorithm,
            shadow,
            replaces: Vec::new(),
            path: self.path.clone(),
            key_prefix: format!("{}:{}", algorithm.name(), unit.duration().as_secs()),
        })
    }

    fn positive(&self, field: &'static str, value: i64) -> Result<u64, ConfigFileError> {
        let e = match value {
            0 => ConfigError::Zero { parameter: field },
            v if v < 0 => ConfigError::Negative {
                parameter: field,
                value: v as f64,
            },
            v => return Ok(v.unsigned_abs()),
        };
        Err(self.error(ConfigFileErrorKind::Limit(e), &[Step::Key(field)]))
    }

    fn resolve_replaces(&mut self) -> Result<(), ConfigFileError> {
        for (owner, name, path) in std::mem::take(&mut self.replaces) {
            let at = || locate(self.yaml, &path);
            let target = match self.names.get(&name) {
                Some(Some(target)) => *target,
                // An unlimited block counts nothing: replacing it changes nothing.
                Some(None) => continue,
                None => {
                    return Err(ConfigFileError::new(
                        ConfigFileErrorKind::UnknownReplace(name),
                        at(),
                    ));
                }
            };
            match owner {
                Action::Limit(index) if index == target => {
                    return Err(ConfigFileError::new(
                        ConfigFileErrorKind::ReplacesItself(name),
                        at(),
                    ));
                }
                Action::Limit(index) => self.limits[index].replaces.push(target),
                Action::Unlimited(index) => self.unlimited_replaces[index].push(target),
                Action::Nothing => {}
            }
        }
        Ok(())
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
