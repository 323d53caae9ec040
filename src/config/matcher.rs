//! Matching a request's descriptors against a [`RuleSet`]: [`Descriptor`] and
//! [`Matched`].

use std::fmt::Write;

use super::rules::{Action, Limit, RuleSet, TreeNode};

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
    limits: Vec<MatchedLimit<'a>>,
    unlimited: bool,
}

impl<'a> Matched<'a> {
    /// Every limit that applies, enforced and shadow, in the order of the descriptors.
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

/// One limit that applies to a request, and the store key it counts under.
#[derive(Clone, Debug)]
pub struct MatchedLimit<'a> {
    limit: &'a Limit,
    index: usize,
    key: String,
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
    /// assert_eq!(matched.limits()[0].key(), "fixed_window:1|user=ann");
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The index of the descriptor that matched it.
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
}

/// # Matching
impl RuleSet {
    /// The limits that apply to a request carrying `descriptors`.
    ///
    /// Each descriptor is matched level by level: its first entry against the
    /// top-level nodes, its second against the nodes nested in the one matched, and so
    /// on. At each level the node with the same key and value wins, then the node whose
    /// value ends in `*` with the longest prefix of the entry's value, then the node
    /// with the key and no value (which counts each value apart). As in envoy, matching
    /// never backtracks to a less specific node, and:
    ///
    /// - only the node matched by the descriptor's **last** entry applies its limit: a
    ///   longer descriptor does not count against the limits of the nodes it passes,
    ///   and one that runs out of nested levels before its last entry matches nothing;
    /// - a node with `unlimited: true` matches, and applies no limit;
    /// - a limit whose block `replaces` a name drops the matched limits of that name;
    /// - a limit matched twice under the same key (two equal descriptors) counts once.
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
    /// ")?;
    /// let names = |path: &str| {
    ///     rules.limits_for(&[Descriptor::new().entry("path", path)])
    ///         .limits().iter().map(|m| m.limit().name().to_owned()).collect::<Vec<_>>()
    /// };
    /// assert_eq!(names("/login"), ["login"]);
    /// assert_eq!(names("/orders"), ["per_path"]);
    /// assert!(names("/static/app.js").is_empty());
    /// # Ok::<(), tollgate::config::ConfigFileError>(())
    /// ```
    pub fn limits_for(&self, descriptors: &[Descriptor]) -> Matched<'_> {
        let mut limits: Vec<MatchedLimit<'_>> = Vec::new();
        let mut unlimited = false;
        let mut replaced: Vec<usize> = Vec::new();
        for (d, descriptor) in descriptors.iter().enumerate() {
            let Some(node) = self.find(descriptor.entries()) else {
                continue;
            };
            match node.action {
                Action::Nothing => {}
                Action::Unlimited(u) => {
                    unlimited = true;
                    replaced.extend_from_slice(&self.unlimited_replaces[u]);
                }
                Action::Limit(index) => {
                    let limit = &self.limits[index];
                    replaced.extend_from_slice(&limit.replaces);
                    let key = storage_key(&limit.key_prefix, descriptor.entries());
                    if !limits.iter().any(|m| m.index == index && m.key == key) {
                        limits.push(MatchedLimit {
                            limit,
                            index,
                            key,
                            descriptor: d,
                        });
                    }
                }
            }
        }
        limits.retain(|m| !replaced.contains(&m.index));
        Matched { limits, unlimited }
    }

    /// The node the last of `entries` reaches, if the path exists.
    fn find(&self, entries: &[(String, String)]) -> Option<&TreeNode> {
        let mut level = &self.root;
        let (last, above) = entries.split_last()?;
        for (key, value) in above {
            let node = level.get(key, value)?;
            if node.children.is_empty() {
                return None;
            }
            level = &node.children;
        }
        level.get(&last.0, &last.1)
    }
}

fn storage_key(prefix: &str, entries: &[(String, String)]) -> String {
    let mut key = String::with_capacity(
        prefix.len()
            + entries
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>(),
    );
    key.push_str(prefix);
    for (k, v) in entries {
        key.push('|');
        escape(&mut key, k);
        key.push('=');
        escape_value(&mut key, v);
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
        let key = storage_key("gcra:1", &entries(&[("path", &long)]));
        assert!(key.len() < 200, "{}", key.len());
        assert_ne!(key, storage_key("gcra:1", &entries(&[("path", &other)])));
        assert_eq!(key, storage_key("gcra:1", &entries(&[("path", &long)])));
    }

    #[test]
    fn keys_escape_their_separators() {
        assert_eq!(
            storage_key("gcra:1", &entries(&[("a", "b|c=d"), ("e", "")])),
            "gcra:1|a=b%7Cc%3Dd|e="
        );
        // Without escapes these two would both read "|a=b|c=d".
        assert_ne!(
            storage_key("p", &entries(&[("a", "b|c=d")])),
            storage_key("p", &entries(&[("a", "b"), ("c", "d")]))
        );
        assert_eq!(storage_key("p", &entries(&[("%", "%7C")])), "p|%25=%257C");
    }

    proptest::proptest! {
        /// Two entry lists share a key only if they are equal, whatever separators
        /// and escapes their texts hold.
        #[test]
        fn different_entries_never_share_a_key(
            a in proptest::collection::vec(("[a|=%7C]{0,3}", "[a|=%7C]{0,3}"), 0..3),
            b in proptest::collection::vec(("[a|=%7C]{0,3}", "[a|=%7C]{0,3}"), 0..3),
        ) {
            proptest::prop_assert_eq!(storage_key("p", &a) == storage_key("p", &b), a == b);
        }
    }
}
