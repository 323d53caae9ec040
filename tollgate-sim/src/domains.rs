//! The rate limit service's domain files: one file, or a directory read as
//! `tollgate-rls --config DIR` reads it, and the descriptors a request carries.

use std::path::{Path, PathBuf};

use tollgate::config::RuleSet;

use crate::error::SimError;

/// The domain of the file `path`: the service's format, every algorithm.
///
/// # Errors
///
/// [`SimError::Rules`] naming the file, line and column of what does not load.
pub fn load_file(path: &Path) -> Result<RuleSet, SimError> {
    RuleSet::from_file(path).map_err(|e| SimError::Rules(e.to_string()))
}

/// The domain `domain` of the directory `dir`, read as the service reads its
/// runtime directory (`tollgate-rls`'s `domains.rs`): every file under it, in
/// subdirectories too, whatever its name, in the order of their paths; a symlink to
/// a file is read through, one to a directory is not followed. Each file holds one
/// domain, and two files of one domain are an error (the service merges them only
/// with `MERGE_DOMAIN_CONFIG`). `domain` may be left out when the directory holds
/// one.
///
/// # Errors
///
/// [`SimError::Rules`] for a file that does not load (its file, line and column);
/// [`SimError::Domains`]: a directory that does not read, a domain held twice, no domain, several
/// and none chosen, or the one chosen missing (the others named).
///
/// # Examples
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(
///     dir.path().join("api.yaml"),
///     "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
/// ).unwrap();
/// let rules = tollgate_sim::domains::load_dir(dir.path(), None)?;
/// assert_eq!(rules.domain(), "api");
/// let err = tollgate_sim::domains::load_dir(dir.path(), Some("web")).unwrap_err();
/// assert!(err.to_string().contains("no domain \"web\""), "{err}");
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn load_dir(dir: &Path, domain: Option<&str>) -> Result<RuleSet, SimError> {
    let mut files = Vec::new();
    walk(dir, &mut files)?;
    files.sort();
    let mut loaded: Vec<(PathBuf, RuleSet)> = Vec::new();
    for path in files {
        let rules = load_file(&path)?;
        if let Some((first, _)) = loaded.iter().find(|(_, r)| r.domain() == rules.domain()) {
            return Err(SimError::Domains(format!(
                "{}: domain {:?} is already held by {}",
                path.display(),
                rules.domain(),
                first.display()
            )));
        }
        loaded.push((path, rules));
    }
    let names = loaded
        .iter()
        .map(|(_, r)| r.domain())
        .collect::<Vec<_>>()
        .join(", ");
    match domain {
        Some(name) => match loaded.iter().position(|(_, r)| r.domain() == name) {
            Some(i) => Ok(loaded.swap_remove(i).1),
            None => Err(SimError::Domains(format!(
                "no domain {name:?} in {} (it holds: {names})",
                dir.display()
            ))),
        },
        None if loaded.len() == 1 => Ok(loaded.remove(0).1),
        None if loaded.is_empty() => Err(SimError::Domains(format!(
            "{} holds no domain file",
            dir.display()
        ))),
        None => Err(SimError::Domains(format!(
            "{} holds several domains ({names}): choose one with --domain",
            dir.display()
        ))),
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), SimError> {
    let unreadable = |e: std::io::Error| SimError::Domains(format!("{}: {e}", dir.display()));
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        let kind = entry.file_type().map_err(unreadable)?;
        if kind.is_dir() {
            walk(&path, files)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            files.push(path);
        }
    }
    Ok(())
}

/// One entry of a descriptor: its key, and its value, or `None` for the request's
/// key.
pub type Entry = (String, Option<String>);

/// Parses a descriptor as `run --descriptor` takes it: `KEY` (its value is the
/// request's key) or `KEY=VALUE`, several joined by commas for a nested descriptor
/// (`header_match=api,method=POST`).
///
/// # Errors
///
/// [`SimError::Domains`] for an entry with an empty key, or no entry.
///
/// # Examples
///
/// ```
/// use tollgate_sim::domains::parse_descriptor;
///
/// let d = parse_descriptor("remote_address,path=/login")?;
/// assert_eq!(d, [("remote_address".to_owned(), None), ("path".to_owned(), Some("/login".to_owned()))]);
/// assert!(parse_descriptor("=x").is_err());
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn parse_descriptor(spec: &str) -> Result<Vec<Entry>, SimError> {
    let entries: Vec<Entry> = spec
        .split(',')
        .map(|entry| match entry.split_once('=') {
            Some((key, value)) => (key.trim().to_owned(), Some(value.trim().to_owned())),
            None => (entry.trim().to_owned(), None),
        })
        .collect();
    if entries.iter().any(|(key, _)| key.is_empty()) {
        return Err(SimError::Domains(format!(
            "descriptor {spec:?}: every entry needs a key (KEY or KEY=VALUE, comma-separated)"
        )));
    }
    Ok(entries)
}
