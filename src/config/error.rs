//! [`ConfigFileError`]: what is wrong with a rules file, and where.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::algorithm::RuleKind;
use crate::error::ConfigError;
use crate::store::StoreError;

/// A position in the file: 1-based line and column.
///
/// # Examples
///
/// ```
/// use tollgate::config::RuleSet;
///
/// let err = RuleSet::from_yaml("domain: api\ndescriptors:\n  - key: a\n    colour: red\n")
///     .unwrap_err();
/// let at = err.location().unwrap();
/// assert_eq!((at.line(), at.column()), (4, 5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    line: usize,
    column: usize,
}

impl Location {
    /// Line `line`, column `column`, both counted from 1.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Location::new(4, 5).to_string(), "line 4 column 5");
    /// ```
    pub const fn new(line: usize, column: usize) -> Location {
        Location { line, column }
    }

    /// The line, from 1.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Location::new(4, 5).line(), 4);
    /// ```
    pub const fn line(&self) -> usize {
        self.line
    }

    /// The column, from 1.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Location::new(4, 5).column(), 5);
    /// ```
    pub const fn column(&self) -> usize {
        self.column
    }

    pub(crate) fn from_yaml(location: serde_yaml_ng::Location) -> Location {
        Location::new(location.line(), location.column())
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} column {}", self.line, self.column)
    }
}

/// A rules file that cannot be used: what is wrong ([`kind`](ConfigFileError::kind)),
/// and where ([`location`](ConfigFileError::location), and the file's path when read
/// from one).
///
/// Its `Display` reads `path:line:column: message`, or `line L column C: message`
/// without a path.
///
/// # Examples
///
/// ```
/// use tollgate::config::{ConfigFileErrorKind, RuleSet};
/// use tollgate::ConfigError;
///
/// let yaml = "\
/// domain: api
/// descriptors:
///   - key: remote_address
///     rate_limit: { unit: second, requests_per_unit: -1 }
/// ";
/// let err = RuleSet::from_yaml(yaml).unwrap_err();
/// assert!(matches!(
///     err.kind(),
///     ConfigFileErrorKind::Limit(ConfigError::Negative { parameter: "requests_per_unit", .. })
/// ));
/// assert_eq!(err.location().unwrap().line(), 4);
/// assert_eq!(
///     err.to_string(),
///     "line 4 column 52: requests_per_unit must not be negative (got -1)"
/// );
/// ```
#[derive(Debug)]
pub struct ConfigFileError {
    kind: ConfigFileErrorKind,
    location: Option<Location>,
    path: Option<PathBuf>,
}

/// What is wrong with a rules file.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigFileErrorKind {
    /// The file could not be read.
    Io(io::Error),
    /// Not YAML, or not the shape of a rules file: a syntax error, a value of the wrong
    /// type, an unknown key (every level refuses keys it does not know), an unknown
    /// `unit` or `algorithm`, a missing `domain` or `key`. The message is
    /// serde_yaml_ng's, with the path of the node.
    Format(String),
    /// The domain is empty, or holds a brace (it is the Redis Cluster hash tag of every
    /// key of the file, so a brace in it would change which text is hashed).
    Domain(String),
    /// A descriptor's `key` is empty (`"key"`), or a `replaces` entry names nothing
    /// (`"replaces"`).
    Empty(&'static str),
    /// Two siblings with the same `key` and `value`, in one file or in two merged ones
    /// ([`RuleSet::merge`](super::RuleSet::merge)).
    DuplicateDescriptor {
        /// The key.
        key: String,
        /// The value, `None` for two bare keys.
        value: Option<String>,
        /// The path as envoy names it: `domain.key1_value1.key2`.
        composite: String,
    },
    /// A `rate_limit` has neither `unit` nor `unlimited: true`.
    MissingLimit(&'static str),
    /// `unlimited: true` together with a unit, algorithm or burst.
    UnlimitedWithLimit(&'static str),
    /// A `burst` on an algorithm that takes none (see the [table](crate::config#algorithms)).
    BurstNotApplicable(RuleKind),
    /// A count, unit or burst the algorithm refuses: negative, or too large for the
    /// window.
    Limit(ConfigError),
    /// A limit `replaces` its own name.
    ReplacesItself(String),
    /// A `key` holds `*`: only values are patterns.
    WildcardInKey(String),
    /// `share_threshold: true` on a node whose value holds no `*`.
    ShareThresholdWithoutWildcard {
        /// The node's key and value as envoy writes them: `key_value`.
        composite: String,
    },
    /// [`RuleSet::merge`](super::RuleSet::merge) of rules of another domain.
    MergeDomain {
        /// The domain merged into.
        ours: String,
        /// The other file's domain.
        theirs: String,
    },
    /// The store cannot run a limit's rule (from
    /// [`ConfigLimiter::new`](super::ConfigLimiter::new)).
    Store(StoreError),
}

impl ConfigFileError {
    pub(crate) fn new(kind: ConfigFileErrorKind, location: Option<Location>) -> ConfigFileError {
        ConfigFileError {
            kind,
            location,
            path: None,
        }
    }

    pub(crate) fn from_yaml(e: &serde_yaml_ng::Error) -> ConfigFileError {
        let location = e.location().map(Location::from_yaml);
        let mut message = e.to_string();
        if let Some(at) = location {
            let suffix = format!(" at {at}");
            if message.ends_with(&suffix) {
                message.truncate(message.len() - suffix.len());
            }
        }
        ConfigFileError::new(ConfigFileErrorKind::Format(message), location)
    }

    pub(crate) fn with_path(mut self, path: &Path) -> ConfigFileError {
        self.path = Some(path.to_owned());
        self
    }

    /// What is wrong.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, Location, RuleSet};
    ///
    /// let err = RuleSet::from_yaml("{domain: api, descriptors: [{key: ''}]}").unwrap_err();
    /// assert!(matches!(err.kind(), ConfigFileErrorKind::Empty("key")));
    /// ```
    pub fn kind(&self) -> &ConfigFileErrorKind {
        &self.kind
    }

    /// Where, when the error is about a node of the file.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, Location, RuleSet};
    ///
    /// let err = RuleSet::from_yaml("{domain: api, descriptors: [{key: ''}]}").unwrap_err();
    /// assert_eq!(err.location(), Some(Location::new(1, 35)));
    /// ```
    pub fn location(&self) -> Option<Location> {
        self.location
    }

    /// The line, from 1, when the error is about a node of the file.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, Location, RuleSet};
    ///
    /// let err = RuleSet::from_yaml("{domain: api, descriptors: [{key: ''}]}").unwrap_err();
    /// assert_eq!(err.line(), Some(1));
    /// ```
    pub fn line(&self) -> Option<usize> {
        self.location.map(|l| l.line)
    }

    /// The file, when the rules were read from one.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{ConfigFileErrorKind, Location, RuleSet};
    ///
    /// let err = RuleSet::from_yaml("{domain: api, descriptors: [{key: ''}]}").unwrap_err();
    /// assert_eq!(err.path(), None);
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, self.location) {
            (Some(path), Some(at)) => write!(f, "{}:{}:{}: ", path.display(), at.line, at.column)?,
            (Some(path), None) => write!(f, "{}: ", path.display())?,
            (None, Some(at)) => write!(f, "{at}: ")?,
            (None, None) => {}
        }
        self.kind.fmt(f)
    }
}

impl fmt::Display for ConfigFileErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigFileErrorKind::Io(e) => write!(f, "cannot read the rules file: {e}"),
            ConfigFileErrorKind::Format(message) => f.write_str(message),
            ConfigFileErrorKind::Domain(domain) => write!(
                f,
                "domain {domain:?} must be non-empty and hold no '{{' or '}}' (it is the hash tag)"
            ),
            ConfigFileErrorKind::Empty("replaces") => {
                f.write_str("should not have an empty replaces entry")
            }
            ConfigFileErrorKind::Empty(what) => write!(f, "descriptor has empty {what}"),
            ConfigFileErrorKind::DuplicateDescriptor { composite, .. } => {
                write!(f, "duplicate descriptor composite key '{composite}'")
            }
            ConfigFileErrorKind::MissingLimit(field) => write!(
                f,
                "rate_limit without {field} (give unit and requests_per_unit, or unlimited: true)"
            ),
            ConfigFileErrorKind::UnlimitedWithLimit(field) => {
                write!(f, "should not specify rate limit {field} when unlimited")
            }
            ConfigFileErrorKind::BurstNotApplicable(algorithm) => {
                let bursty: Vec<&str> = RuleKind::ALL
                    .iter()
                    .filter(|kind| kind.takes_burst())
                    .map(|kind| kind.name())
                    .collect();
                write!(
                    f,
                    "burst does not apply to {algorithm} (only to {})",
                    bursty.join(" and ")
                )
            }
            ConfigFileErrorKind::Limit(e) => e.fmt(f),
            ConfigFileErrorKind::ReplacesItself(name) => write!(
                f,
                "replaces should not contain name of same descriptor ({name:?})"
            ),
            ConfigFileErrorKind::WildcardInKey(key) => write!(
                f,
                "descriptor key '{key}' holds '*': only values can be wildcard patterns"
            ),
            ConfigFileErrorKind::ShareThresholdWithoutWildcard { composite } => write!(
                f,
                "share_threshold can only be used with wildcard values (containing '*'), \
                 but found key '{composite}'"
            ),
            ConfigFileErrorKind::MergeDomain { ours, theirs } => {
                write!(f, "cannot merge domain '{theirs}' into domain '{ours}'")
            }
            ConfigFileErrorKind::Store(e) => write!(f, "the store cannot run this limit: {e}"),
        }
    }
}

impl std::error::Error for ConfigFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ConfigFileErrorKind::Io(e) => Some(e),
            ConfigFileErrorKind::Limit(e) => Some(e),
            ConfigFileErrorKind::Store(e) => Some(e),
            _ => None,
        }
    }
}
