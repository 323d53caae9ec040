//! The domains of a configuration directory: one [`RuleSet`] per domain.
//!
//! The directory is read as the Go service's file provider reads its runtime
//! directory: every file under it, in subdirectories too, whatever its name (the Go
//! service does not look at extensions either); names starting with a dot are skipped
//! only when [`DomainsSource::ignore_dot_files`] is set (`RUNTIME_IGNOREDOTFILES`,
//! which also skips dot directories such as Kubernetes' `..data`). A symlink to a file
//! is read through; a symlink to a directory is not followed. Files are taken in the
//! order of their paths.
//!
//! Each file holds one domain. Two files of the same domain are an error for the
//! second unless domains are merged (`MERGE_DOMAIN_CONFIG`), when their descriptor
//! trees are joined into one and checked together.
//!
//! [`DomainDir`] keeps the last version of each file that loaded: a file that no longer
//! loads keeps its previous version in force (or stays out, if it never loaded), and
//! its error is reported with its `file:line:column`, while every other change is
//! applied.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tollgate::config::{ConfigFileError, RuleSet};

use crate::settings::DomainsSource;

/// The rules of every domain, by name.
///
/// # Examples
///
/// ```
/// use tollgate::config::RuleSet;
/// use tollgate_rls::domains::Domains;
///
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - key: user
///     rate_limit: { unit: minute, requests_per_unit: 20 }
/// ")?;
/// let domains = Domains::from_rule_sets([rules])?;
/// assert!(domains.get("api").is_some());
/// assert_eq!(domains.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct Domains {
    by_name: HashMap<String, Arc<RuleSet>>,
}

impl Domains {
    /// The rules of `domain`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::Domains;
    ///
    /// assert!(Domains::default().get("api").is_none());
    /// ```
    pub fn get(&self, domain: &str) -> Option<&RuleSet> {
        self.by_name.get(domain).map(|rules| &**rules)
    }

    /// Whether no domain is loaded.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::Domains;
    ///
    /// assert!(Domains::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// How many domains are loaded.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::Domains;
    ///
    /// assert_eq!(Domains::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The names of the loaded domains, sorted.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    /// use tollgate_rls::domains::Domains;
    ///
    /// let a = RuleSet::from_yaml("{domain: a, descriptors: [{key: k}]}")?;
    /// let b = RuleSet::from_yaml("{domain: b, descriptors: [{key: k}]}")?;
    /// assert_eq!(Domains::from_rule_sets([b, a])?.names(), ["a", "b"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Domains from rules already read.
    ///
    /// # Errors
    ///
    /// [`DomainsError::DuplicateDomain`] when two rule sets name the same domain.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::RuleSet;
    /// use tollgate_rls::domains::Domains;
    ///
    /// let a = RuleSet::from_yaml("{domain: a, descriptors: [{key: k}]}")?;
    /// let again = RuleSet::from_yaml("{domain: a, descriptors: [{key: j}]}")?;
    /// let err = Domains::from_rule_sets([a, again]).unwrap_err();
    /// assert_eq!(err.to_string(), "duplicate domain 'a' in config file");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_rule_sets(
        rules: impl IntoIterator<Item = RuleSet>,
    ) -> Result<Domains, DomainsError> {
        let mut by_name = HashMap::new();
        for rules in rules {
            let domain = rules.domain().to_owned();
            if by_name.contains_key(&domain) {
                return Err(DomainsError::DuplicateDomain {
                    path: PathBuf::new(),
                    line: None,
                    domain,
                    first: PathBuf::new(),
                });
            }
            by_name.insert(domain, Arc::new(rules));
        }
        Ok(Domains { by_name })
    }

    /// Every file of `dir` (see the [module](self)), all of which must load.
    ///
    /// # Errors
    ///
    /// The directory's error, or the first file that does not load, or a domain in two
    /// files.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::Domains;
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config");
    /// let domains = Domains::load_dir(dir.as_ref())?;
    /// assert!(!domains.is_empty());
    /// # Ok::<(), tollgate_rls::domains::DomainsError>(())
    /// ```
    pub fn load_dir(dir: &Path) -> Result<Domains, DomainsError> {
        let mut files = DomainDir::new(DomainsSource::dir(dir), false);
        let load = files.load()?;
        match load.errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(load.domains),
        }
    }
}

/// A directory that did not read, or a file that did not load.
#[derive(Debug)]
#[non_exhaustive]
pub enum DomainsError {
    /// A directory or a file could not be read (or a file is not UTF-8).
    Io(PathBuf, std::io::Error),
    /// A file did not load.
    File(PathBuf, Box<ConfigFileError>),
    /// A file names a domain that an earlier file already holds, and domains are not
    /// merged.
    DuplicateDomain {
        /// The file refused.
        path: PathBuf,
        /// The line of its `domain:`, when found.
        line: Option<usize>,
        /// The domain.
        domain: String,
        /// The file that holds the domain.
        first: PathBuf,
    },
    /// The files of a merged domain do not load together (two of them define the same
    /// descriptor, say).
    Merge {
        /// The domain.
        domain: String,
        /// Its files.
        files: Vec<PathBuf>,
        /// What is wrong with the joined tree (its lines are those of no file).
        message: String,
    },
}

impl fmt::Display for DomainsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DomainsError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            DomainsError::File(path, e) => match (e.path(), e.location()) {
                (Some(_), _) => write!(f, "{e}"),
                (None, Some(at)) => write!(
                    f,
                    "{}:{}:{}: {}",
                    path.display(),
                    at.line(),
                    at.column(),
                    e.kind()
                ),
                (None, None) => write!(f, "{}: {}", path.display(), e.kind()),
            },
            DomainsError::DuplicateDomain {
                path,
                line,
                domain,
                first,
            } => {
                if !path.as_os_str().is_empty() {
                    write!(f, "{}", path.display())?;
                    if let Some(line) = line {
                        write!(f, ":{line}:1")?;
                    }
                    f.write_str(": ")?;
                }
                write!(f, "duplicate domain '{domain}' in config file")?;
                if !first.as_os_str().is_empty() {
                    write!(f, " (already in {})", first.display())?;
                }
                Ok(())
            }
            DomainsError::Merge {
                domain,
                files,
                message,
            } => {
                write!(f, "domain '{domain}' merged from")?;
                for file in files {
                    write!(f, " {}", file.display())?;
                }
                write!(f, ": {message}")
            }
        }
    }
}

impl std::error::Error for DomainsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DomainsError::Io(_, e) => Some(e),
            DomainsError::File(_, e) => Some(&**e),
            DomainsError::DuplicateDomain { .. } | DomainsError::Merge { .. } => None,
        }
    }
}

/// The result of reading the directory once.
#[derive(Debug)]
#[non_exhaustive]
pub struct Load {
    /// The domains now in force.
    pub domains: Domains,
    /// What did not load this time; each such file keeps its previous version.
    pub errors: Vec<DomainsError>,
    /// How many files were read.
    pub files: usize,
}

/// A configuration directory, with the last version of each file that loaded.
///
/// # Examples
///
/// ```
/// use tollgate_rls::domains::DomainDir;
/// use tollgate_rls::settings::DomainsSource;
///
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config");
/// let mut files = DomainDir::new(DomainsSource::dir(dir), false);
/// let load = files.load()?;
/// assert!(load.errors.is_empty());
/// assert!(files.load_if_changed()?.is_none());
/// # Ok::<(), tollgate_rls::domains::DomainsError>(())
/// ```
#[derive(Debug)]
pub struct DomainDir {
    source: DomainsSource,
    merge: bool,
    files: BTreeMap<PathBuf, FileState>,
    /// Which file held each domain at the last load: it keeps the domain when another
    /// file claims it.
    owners: HashMap<String, PathBuf>,
    /// The domains of the last load, kept for a merged domain that stops loading.
    current: Domains,
    /// The fingerprint of the directory at the last load.
    fingerprint: Option<u64>,
}

/// Every file's path and content, or why it could not be read.
type Contents = Vec<(PathBuf, std::io::Result<Vec<u8>>)>;

#[derive(Debug)]
struct FileState {
    hash: u64,
    good: Option<Arc<Good>>,
}

#[derive(Debug)]
struct Good {
    text: String,
    rules: Arc<RuleSet>,
}

impl DomainDir {
    /// The directory of `source`; `merge` joins files of the same domain.
    ///
    /// Unless `source.watch_root` is set, the root's symlink is resolved now, once:
    /// later swaps of it are not followed, as the Go service's directory watch.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::domains::DomainDir;
    /// use tollgate_rls::settings::DomainsSource;
    ///
    /// let files = DomainDir::new(DomainsSource::dir("/etc/rls"), true);
    /// assert_eq!(files.dir(), std::path::Path::new("/etc/rls"));
    /// ```
    pub fn new(mut source: DomainsSource, merge: bool) -> DomainDir {
        if !source.watch_root
            && let Ok(real_root) = std::fs::canonicalize(&source.root)
            && let Ok(below) = source.dir.strip_prefix(&source.root)
        {
            source.dir = real_root.join(below);
            source.root = real_root;
        }
        DomainDir {
            source,
            merge,
            files: BTreeMap::new(),
            owners: HashMap::new(),
            current: Domains::default(),
            fingerprint: None,
        }
    }

    /// The directory read.
    pub fn dir(&self) -> &Path {
        &self.source.dir
    }

    /// Reads the directory and every file in it.
    ///
    /// # Errors
    ///
    /// [`DomainsError::Io`] when the directory cannot be read; the domains in force do
    /// not change. A file that does not load is not an error here: it is in
    /// [`Load::errors`].
    pub fn load(&mut self) -> Result<Load, DomainsError> {
        let contents = self.read_all()?;
        Ok(self.apply(contents))
    }

    /// As [`load`](DomainDir::load), but `None` when no file changed since the last
    /// load (the directory and the contents of its files are compared).
    ///
    /// # Errors
    ///
    /// As [`load`](DomainDir::load).
    pub fn load_if_changed(&mut self) -> Result<Option<Load>, DomainsError> {
        let contents = self.read_all()?;
        let mut hasher = DefaultHasher::new();
        for (path, content) in &contents {
            path.hash(&mut hasher);
            match content {
                Ok(bytes) => bytes.hash(&mut hasher),
                Err(e) => e.kind().to_string().hash(&mut hasher),
            }
        }
        if self.fingerprint == Some(hasher.finish()) {
            return Ok(None);
        }
        Ok(Some(self.apply(contents)))
    }

    /// Every file's path and content (or why it could not be read), sorted by path.
    fn read_all(&self) -> Result<Contents, DomainsError> {
        let mut paths = Vec::new();
        walk(&self.source.dir, self.source.ignore_dot_files, &mut paths)?;
        paths.sort();
        Ok(paths
            .into_iter()
            .map(|path| {
                let content = std::fs::read(&path);
                (path, content)
            })
            .collect())
    }

    fn apply(&mut self, contents: Contents) -> Load {
        let mut hasher = DefaultHasher::new();
        let mut errors = Vec::new();
        let mut files = BTreeMap::new();
        let count = contents.len();
        for (path, content) in contents {
            path.hash(&mut hasher);
            let previous = self.files.remove(&path);
            let bytes = match content {
                Ok(bytes) => bytes,
                Err(e) => {
                    e.kind().to_string().hash(&mut hasher);
                    errors.push(DomainsError::Io(path.clone(), e));
                    let good = previous.and_then(|p| p.good);
                    files.insert(path, FileState { hash: 0, good });
                    continue;
                }
            };
            bytes.hash(&mut hasher);
            let hash = hash_of(&bytes);
            if let Some(p) = &previous
                && p.hash == hash
                && p.good.is_some()
            {
                files.insert(
                    path,
                    FileState {
                        hash,
                        good: p.good.clone(),
                    },
                );
                continue;
            }
            let previous_good = previous.and_then(|p| p.good);
            let good = match String::from_utf8(bytes) {
                Err(_) => Err(DomainsError::Io(
                    path.clone(),
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is not UTF-8"),
                )),
                Ok(text) => RuleSet::from_yaml(&text)
                    .map(|rules| {
                        Arc::new(Good {
                            text,
                            rules: Arc::new(rules),
                        })
                    })
                    .map_err(|e| DomainsError::File(path.clone(), Box::new(e))),
            };
            let good = match good {
                Ok(good) => Some(good),
                Err(e) => {
                    errors.push(e);
                    previous_good
                }
            };
            files.insert(path, FileState { hash, good });
        }
        self.files = files;
        self.fingerprint = Some(hasher.finish());
        let domains = self.assemble(&mut errors);
        self.current = domains.clone();
        Load {
            domains,
            errors,
            files: count,
        }
    }

    /// The domains of the files that have a good version.
    fn assemble(&mut self, errors: &mut Vec<DomainsError>) -> Domains {
        // The file that held a domain before goes first, then the rest in path order.
        let mut good: Vec<(&PathBuf, &Arc<Good>)> = self
            .files
            .iter()
            .filter_map(|(path, state)| state.good.as_ref().map(|good| (path, good)))
            .collect();
        let owners = &self.owners;
        good.sort_by_key(|(path, g)| (owners.get(g.rules.domain()) != Some(*path), *path));
        let mut by_domain: BTreeMap<&str, Vec<(&PathBuf, &Arc<Good>)>> = BTreeMap::new();
        for (path, g) in good {
            by_domain
                .entry(g.rules.domain())
                .or_default()
                .push((path, g));
        }
        let mut by_name = HashMap::new();
        let mut owners = HashMap::new();
        for (domain, files) in by_domain {
            let (first_path, first) = files[0];
            owners.insert(domain.to_owned(), first_path.clone());
            if files.len() == 1 {
                by_name.insert(domain.to_owned(), first.rules.clone());
                continue;
            }
            if !self.merge {
                by_name.insert(domain.to_owned(), first.rules.clone());
                for (path, g) in &files[1..] {
                    errors.push(DomainsError::DuplicateDomain {
                        path: (*path).clone(),
                        line: domain_line(&g.text),
                        domain: domain.to_owned(),
                        first: first_path.clone(),
                    });
                }
                continue;
            }
            let mut by_path = files.clone();
            by_path.sort_by_key(|(path, _)| *path);
            match merged(by_path.iter().map(|(_, g)| g.text.as_str())) {
                Ok(rules) => {
                    by_name.insert(domain.to_owned(), Arc::new(rules));
                }
                Err(message) => {
                    errors.push(DomainsError::Merge {
                        domain: domain.to_owned(),
                        files: by_path.iter().map(|(p, _)| (*p).clone()).collect(),
                        message,
                    });
                    if let Some(previous) = self.current.by_name.get(domain) {
                        by_name.insert(domain.to_owned(), previous.clone());
                    }
                }
            }
        }
        self.owners = owners;
        Domains { by_name }
    }
}

/// The files under `dir`, as the Go service's runtime loader walks them.
fn walk(dir: &Path, ignore_dot_files: bool, out: &mut Vec<PathBuf>) -> Result<(), DomainsError> {
    let entries = std::fs::read_dir(dir).map_err(|e| DomainsError::Io(dir.to_owned(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| DomainsError::Io(dir.to_owned(), e))?;
        let name = entry.file_name();
        if ignore_dot_files && name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            // Gone since the listing: the next check sees the directory as it is.
            continue;
        };
        if kind.is_dir() {
            walk(&path, ignore_dot_files, out)?;
        } else if kind.is_symlink() {
            // Read through to a file; a directory link is not followed, nor is a
            // dangling link read.
            if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                out.push(path);
            }
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// The line of the top-level `domain:` key, for the duplicate domain message.
fn domain_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.starts_with("domain:") || line.starts_with("\"domain\":"))
        .map(|i| i + 1)
}

/// One rule set from several files of one domain: the first file's tree, with the
/// descriptors of the others appended, checked as one.
fn merged<'a>(texts: impl Iterator<Item = &'a str>) -> Result<RuleSet, String> {
    use serde_yaml_ng::Value;
    let mut root: Option<serde_yaml_ng::Mapping> = None;
    let key = Value::String("descriptors".to_owned());
    for text in texts {
        // Each text loaded alone, so it is a YAML mapping.
        let Ok(Value::Mapping(mapping)) = serde_yaml_ng::from_str::<Value>(text) else {
            return Err("a file is not a YAML mapping".to_owned());
        };
        match &mut root {
            None => root = Some(mapping),
            Some(root) => {
                let more = match mapping.get(&key) {
                    Some(Value::Sequence(more)) => more.clone(),
                    _ => Vec::new(),
                };
                match root.get_mut(&key) {
                    Some(Value::Sequence(list)) => list.extend(more),
                    _ => {
                        root.insert(key.clone(), Value::Sequence(more));
                    }
                }
            }
        }
    }
    let yaml = serde_yaml_ng::to_string(&root.unwrap_or_default()).map_err(|e| e.to_string())?;
    RuleSet::from_yaml(&yaml).map_err(|e| e.kind().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn rules(domain: &str, key: &str, n: u32) -> String {
        format!(
            "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit: {{ unit: minute, requests_per_unit: {n} }}\n"
        )
    }

    fn limit_of(domains: &Domains, domain: &str) -> u64 {
        domains.get(domain).unwrap().limits()[0].requests_per_unit()
    }

    #[test]
    fn every_file_in_every_subdirectory_dot_files_too() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &rules("a", "k", 1));
        write(dir.path(), "sub/b.conf", &rules("b", "k", 2));
        write(dir.path(), ".hidden", &rules("c", "k", 3));
        let mut files = DomainDir::new(DomainsSource::dir(dir.path()), false);
        let load = files.load().unwrap();
        assert!(load.errors.is_empty(), "{:?}", load.errors);
        assert_eq!(load.domains.names(), ["a", "b", "c"]);

        let mut source = DomainsSource::dir(dir.path());
        source.ignore_dot_files = true;
        write(dir.path(), ".dir/d.yaml", &rules("d", "k", 4));
        let load = DomainDir::new(source, false).load().unwrap();
        assert_eq!(load.domains.names(), ["a", "b"]);
    }

    #[test]
    fn a_broken_file_keeps_its_previous_version() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &rules("a", "k", 1));
        write(dir.path(), "b.yaml", &rules("b", "k", 2));
        let mut files = DomainDir::new(DomainsSource::dir(dir.path()), false);
        files.load().unwrap();

        write(
            dir.path(),
            "a.yaml",
            "domain: a\ndescriptors:\n  - key: [\n",
        );
        write(dir.path(), "b.yaml", &rules("b", "k", 20));
        let load = files.load_if_changed().unwrap().unwrap();
        assert_eq!(load.errors.len(), 1);
        let message = load.errors[0].to_string();
        let want = format!("{}:", dir.path().join("a.yaml").display());
        assert!(message.starts_with(&want), "{message}");
        assert!(
            message[want.len()..]
                .split(':')
                .take(2)
                .all(|n| n.parse::<u32>().is_ok()),
            "{message}"
        );
        assert_eq!(limit_of(&load.domains, "a"), 1);
        assert_eq!(limit_of(&load.domains, "b"), 20);
        assert!(files.load_if_changed().unwrap().is_none());

        // Fixed: the new version replaces the old one.
        write(dir.path(), "a.yaml", &rules("a", "k", 10));
        let load = files.load_if_changed().unwrap().unwrap();
        assert!(load.errors.is_empty());
        assert_eq!(limit_of(&load.domains, "a"), 10);

        // Removed: the domain goes.
        std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
        let load = files.load_if_changed().unwrap().unwrap();
        assert_eq!(load.domains.names(), ["b"]);
    }

    #[test]
    fn a_file_broken_from_the_start_stays_out() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", "domain: a\ndescriptors: 7\n");
        write(dir.path(), "b.yaml", &rules("b", "k", 2));
        let load = DomainDir::new(DomainsSource::dir(dir.path()), false)
            .load()
            .unwrap();
        assert_eq!(load.errors.len(), 1);
        assert_eq!(load.domains.names(), ["b"]);
        assert!(Domains::load_dir(dir.path()).is_err());
    }

    #[test]
    fn duplicate_domain_is_refused_unless_merged() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.yaml", &rules("api", "k", 1));
        let mut files = DomainDir::new(DomainsSource::dir(dir.path()), false);
        files.load().unwrap();
        // A new file sorting first does not take the domain from its holder.
        write(dir.path(), "a.yaml", &rules("api", "j", 2));
        let load = files.load_if_changed().unwrap().unwrap();
        assert_eq!(load.errors.len(), 1);
        let message = load.errors[0].to_string();
        assert!(message.contains("duplicate domain 'api'"), "{message}");
        assert!(message.contains("a.yaml:1:1"), "{message}");
        assert_eq!(limit_of(&load.domains, "api"), 1);

        let mut merged = DomainDir::new(DomainsSource::dir(dir.path()), true);
        let load = merged.load().unwrap();
        assert!(load.errors.is_empty(), "{:?}", load.errors);
        assert_eq!(load.domains.get("api").unwrap().limits().len(), 2);

        // Merged files defining the same descriptor do not load together; the
        // previous merge stays.
        write(dir.path(), "a.yaml", &rules("api", "k", 3));
        let load = merged.load_if_changed().unwrap().unwrap();
        assert_eq!(load.errors.len(), 1, "{:?}", load.errors);
        assert!(
            load.errors[0]
                .to_string()
                .starts_with("domain 'api' merged from")
        );
        assert_eq!(load.domains.get("api").unwrap().limits().len(), 2);
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = DomainDir::new(DomainsSource::dir(dir.path().join("nope")), false);
        assert!(matches!(files.load(), Err(DomainsError::Io(..))));
    }
}
