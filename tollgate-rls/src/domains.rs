//! The domains of a configuration directory: one [`RuleSet`] per domain.
//!
//! (Skeleton: every `*.yaml` / `*.yml` file of one directory, no merging.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tollgate::config::{ConfigFileError, RuleSet};

/// The rules of every domain, by name.
#[derive(Debug, Default)]
pub struct Domains {
    by_name: HashMap<String, RuleSet>,
}

impl Domains {
    /// The rules of `domain`.
    pub fn get(&self, domain: &str) -> Option<&RuleSet> {
        self.by_name.get(domain)
    }

    /// Whether no domain is loaded.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Every YAML file of `dir`.
    ///
    /// # Errors
    ///
    /// The first file that does not load.
    pub fn load_dir(dir: &Path) -> Result<Domains, DomainsError> {
        let mut by_name = HashMap::new();
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| DomainsError::Io(dir.to_owned(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        paths.sort();
        for path in paths {
            let rules =
                RuleSet::from_file(&path).map_err(|e| DomainsError::File(path.clone(), e))?;
            by_name.insert(rules.domain().to_owned(), rules);
        }
        Ok(Domains { by_name })
    }
}

/// A directory or a file that did not load.
#[derive(Debug)]
#[non_exhaustive]
pub enum DomainsError {
    /// The directory could not be read.
    Io(PathBuf, std::io::Error),
    /// A file did not load.
    File(PathBuf, ConfigFileError),
}

impl std::fmt::Display for DomainsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DomainsError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            DomainsError::File(_, e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DomainsError {}
