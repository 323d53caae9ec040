//! [`ConfigLimits`]: the rules of a file as the server layer's
//! [`Limits`](crate::http::Limits), with descriptors built from each request's head.

use std::fmt;

use http::HeaderName;
use http::request::Parts;

use super::limiter::{AppliedLimit, CheckNow, ConfigDecision, ConfigLimiter, ShadowDenial};
use super::matcher::Descriptor;
use crate::http::{
    CheckError, CheckFuture, KeyError, KeyExtractor, Limits, Policies, Policy, Verdict,
};
use crate::store::Store;
use crate::sync::Arc;

/// Where one entry of a request's descriptor comes from: its key in the rules file,
/// and how its value is read from the request's head.
///
/// # Examples
///
/// ```
/// use http::HeaderName;
/// use tollgate::config::RequestEntry;
///
/// let entries = [
///     RequestEntry::path(),
///     RequestEntry::method(),
///     RequestEntry::header(HeaderName::from_static("x-api-key"), "api_key"),
///     RequestEntry::generic_key("public"),
/// ];
/// assert_eq!(entries[2].key(), "api_key");
/// ```
#[derive(Clone)]
pub struct RequestEntry {
    key: String,
    source: Source,
}

type ReadValue = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

#[derive(Clone)]
enum Source {
    /// An extractor: its error fails the check.
    Extract(Arc<dyn KeyExtractor>),
    Path,
    Method,
    /// A header: absent or not visible ASCII, the descriptor is left out.
    Header(HeaderName),
    Constant(String),
    /// A closure: `None` leaves the descriptor out.
    Optional(ReadValue),
}

impl fmt::Debug for RequestEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Extract(_) => "extractor".to_owned(),
            Source::Path => "path".to_owned(),
            Source::Method => "method".to_owned(),
            Source::Header(name) => format!("header {name}"),
            Source::Constant(value) => format!("{value:?}"),
            Source::Optional(_) => "closure".to_owned(),
        };
        f.debug_struct("RequestEntry")
            .field("key", &self.key)
            .field("source", &source)
            .finish()
    }
}

impl RequestEntry {
    /// `remote_address`: the client's address, as `client_ip` reads it (usually
    /// [`ClientIp`](crate::http::ClientIp), which trusts the proxies it is told to).
    /// When it fails, the check fails with its [`KeyError`] (the layer answers 500 when
    /// the server records no peer address, 400 otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::remote_address(tollgate::http::ClientIp::new())])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("remote_address", "192.0.2.7")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote_address(client_ip: impl KeyExtractor) -> RequestEntry {
        RequestEntry::extract("remote_address", client_ip)
    }

    /// `path`: the URI's path, without the query.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::path()])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("path", "/orders")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path() -> RequestEntry {
        RequestEntry {
            key: "path".to_owned(),
            source: Source::Path,
        }
    }

    /// `method`: the request method, as `GET`.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::method()])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("method", "POST")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn method() -> RequestEntry {
        RequestEntry {
            key: "method".to_owned(),
            source: Source::Method,
        }
    }

    /// `key`: the value of the header `name`. Without the header (or with a value that
    /// is not visible ASCII) the descriptor holding this entry is left out, as envoy's
    /// `request_headers` action does.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::header(HeaderName::from_static("x-tenant"), "tenant")])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("tenant", "acme")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn header(name: HeaderName, key: impl Into<String>) -> RequestEntry {
        RequestEntry {
            key: key.into(),
            source: Source::Header(name),
        }
    }

    /// `generic_key`: always `value`, as envoy's `generic_key` action.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::generic_key("all")])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("generic_key", "all")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn generic_key(value: impl Into<String>) -> RequestEntry {
        RequestEntry {
            key: "generic_key".to_owned(),
            source: Source::Constant(value.into()),
        }
    }

    /// `key`: read by `extractor` (a closure `Fn(&Parts) -> Result<String, KeyError>`
    /// is one). Its error fails the check.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::extract("host", |_: &http::request::Parts| Ok::<_, tollgate::http::KeyError>("example.org".to_owned()))])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("host", "example.org")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extract(key: impl Into<String>, extractor: impl KeyExtractor) -> RequestEntry {
        RequestEntry {
            key: key.into(),
            source: Source::Extract(Arc::new(extractor)),
        }
    }

    /// `key`: read by `value`; `None` leaves the descriptor out.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::optional("query", |p: &http::request::Parts| p.uri.query().map(str::to_owned))])]);
    /// let (mut parts, ()) = http::Request::post("/orders?page=2").header("x-tenant", "acme").body(())?.into_parts();
    /// parts.extensions.insert(std::net::SocketAddr::from(([192, 0, 2, 7], 4000)));
    /// assert_eq!(limits.descriptors_of(&parts)?, [Descriptor::new().entry("query", "page=2")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn optional(
        key: impl Into<String>,
        value: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> RequestEntry {
        RequestEntry {
            key: key.into(),
            source: Source::Optional(Arc::new(value)),
        }
    }

    /// The key this entry has in the rules file.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// assert_eq!(RequestEntry::method().key(), "method");
    /// # let _ = limiter;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// The entries of one descriptor a request produces.
///
/// # Examples
///
/// ```
/// use tollgate::config::{RequestDescriptor, RequestEntry};
///
/// let per_path_and_method = RequestDescriptor::new([RequestEntry::path(), RequestEntry::method()]);
/// assert_eq!(per_path_and_method.entries().len(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct RequestDescriptor {
    entries: Vec<RequestEntry>,
}

impl RequestDescriptor {
    /// A descriptor of `entries`, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::{RequestDescriptor, RequestEntry};
    ///
    /// let per_client_path = RequestDescriptor::new([RequestEntry::path(), RequestEntry::method()]);
    /// assert_eq!(per_client_path.entries()[1].key(), "method");
    /// ```
    pub fn new(entries: impl IntoIterator<Item = RequestEntry>) -> RequestDescriptor {
        RequestDescriptor {
            entries: entries.into_iter().collect(),
        }
    }

    /// The entries.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// assert_eq!(RequestDescriptor::new([RequestEntry::path()]).entries()[0].key(), "path");
    /// # let _ = limiter;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn entries(&self) -> &[RequestEntry] {
        &self.entries
    }
}

type ShadowHook = Arc<dyn Fn(&ShadowDenial) + Send + Sync>;

/// The rules of a file over a store, as the server layer's [`Limits`]: each request's
/// head gives its descriptors, and [`ConfigLimiter::check`] decides them at a cost of
/// one permit.
///
/// Which descriptors a request produces is chosen with [`RequestDescriptor`]s;
/// [`by_client_and_path`](ConfigLimits::by_client_and_path) is the usual choice:
/// `[remote_address]`, `[path]` and `[remote_address, path]`.
///
/// A request whose descriptors match no limit (or only `unlimited` ones) passes with
/// no rate-limit fields ([`Verdict::unlimited`]). Shadow limits never deny: their
/// denials go to a `tracing` event (target `tollgate::config`, level `INFO`) and to
/// the hook of [`on_shadow_denial`](ConfigLimits::on_shadow_denial).
///
/// # Examples
///
/// ```
/// use std::net::SocketAddr;
/// use tollgate::config::{ConfigLimiter, ConfigLimits, RequestEntry, RuleSet};
/// use tollgate::http::{ClientIp, Limits};
/// use tollgate::store::MemoryStore;
/// use tollgate::KeyedConfig;
///
/// # futures::executor::block_on(async {
/// let rules = RuleSet::from_yaml("
/// domain: api
/// descriptors:
///   - key: remote_address
///     rate_limit: { unit: second, requests_per_unit: 10 }
///     descriptors:
///       - key: path
///         value: /login
///         rate_limit: { name: login, unit: minute, requests_per_unit: 5 }
/// ")?;
/// let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10_000), "rl")?)?;
/// let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new());
///
/// let (mut parts, ()) = http::Request::get("/login").body(())?.into_parts();
/// parts.extensions.insert(SocketAddr::from(([10, 0, 0, 1], 5000)));
/// let verdict = limits.check(&parts).await?;
/// assert!(verdict.is_admitted());
/// assert_eq!(verdict.policies[verdict.decisive].name, "login");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct ConfigLimits<S> {
    limiter: Arc<ConfigLimiter<S>>,
    descriptors: Arc<[RequestDescriptor]>,
    policies: Arc<[Policy]>,
    on_shadow_denial: Option<ShadowHook>,
}

impl<S> Clone for ConfigLimits<S> {
    fn clone(&self) -> Self {
        ConfigLimits {
            limiter: self.limiter.clone(),
            descriptors: self.descriptors.clone(),
            policies: self.policies.clone(),
            on_shadow_denial: self.on_shadow_denial.clone(),
        }
    }
}

impl<S> fmt::Debug for ConfigLimits<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigLimits")
            .field("limiter", &self.limiter)
            .field("descriptors", &self.descriptors)
            .finish_non_exhaustive()
    }
}

impl<S: Store + 'static> ConfigLimits<S> {
    /// `limiter`, each request producing `descriptors` (each one left out when an
    /// entry of it has no value, see [`RequestEntry`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::store::MemoryStore;
    /// use tollgate::KeyedConfig;
    ///
    /// let rules = RuleSet::from_yaml("
    /// domain: api
    /// descriptors:
    ///   - key: api_key
    ///     rate_limit: { unit: hour, requests_per_unit: 1000 }
    /// ")?;
    /// let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10_000), "rl")?)?;
    /// let limits = ConfigLimits::new(
    ///     limiter,
    ///     [RequestDescriptor::new([RequestEntry::header(HeaderName::from_static("x-api-key"), "api_key")])],
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(
        limiter: ConfigLimiter<S>,
        descriptors: impl IntoIterator<Item = RequestDescriptor>,
    ) -> ConfigLimits<S> {
        let policies = limiter
            .rules()
            .limits()
            .iter()
            .filter(|l| !l.is_shadow())
            .map(|l| policy(AppliedLimit::of(l)))
            .collect();
        ConfigLimits {
            limiter: Arc::new(limiter),
            descriptors: descriptors.into_iter().collect(),
            policies,
            on_shadow_denial: None,
        }
    }

    /// `limiter`, each request producing three descriptors: `[remote_address]`,
    /// `[path]` and `[remote_address, path]`, the address read by `client_ip` (usually
    /// [`ClientIp`](crate::http::ClientIp)). Rules for a client, for a route, and for
    /// a client on a route then all apply.
    ///
    /// # Examples
    ///
    /// See [`ConfigLimits`].
    pub fn by_client_and_path(
        limiter: ConfigLimiter<S>,
        client_ip: impl KeyExtractor,
    ) -> ConfigLimits<S> {
        let client = RequestEntry::remote_address(client_ip);
        ConfigLimits::new(
            limiter,
            [
                RequestDescriptor::new([client.clone()]),
                RequestDescriptor::new([RequestEntry::path()]),
                RequestDescriptor::new([client, RequestEntry::path()]),
            ],
        )
    }

    /// The same limits, calling `hook` with every shadow denial (say, to count it).
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::path()])])
    ///     .on_shadow_denial(|denial| eprintln!("{} would deny", denial.limit.name));
    /// # let _ = limits;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_shadow_denial(
        self,
        hook: impl Fn(&ShadowDenial) + Send + Sync + 'static,
    ) -> ConfigLimits<S> {
        ConfigLimits {
            on_shadow_denial: Some(Arc::new(hook)),
            ..self
        }
    }

    /// The limiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::HeaderName;
    /// use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// use tollgate::{store::MemoryStore, KeyedConfig};
    ///
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::path()])]);
    /// assert_eq!(limits.limiter().rules().domain(), "api");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limiter(&self) -> &ConfigLimiter<S> {
        &self.limiter
    }

    /// The descriptors `request` produces.
    ///
    /// # Errors
    ///
    /// The [`KeyError`] of an entry read by an extractor
    /// ([`remote_address`](RequestEntry::remote_address),
    /// [`extract`](RequestEntry::extract)) that fails.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tollgate::config::{ConfigLimiter, ConfigLimits, Descriptor, RequestDescriptor, RequestEntry, RuleSet};
    /// # use tollgate::{store::MemoryStore, KeyedConfig};
    /// # let rules = RuleSet::from_yaml("{domain: api, descriptors: []}")?;
    /// # let limiter = ConfigLimiter::new(rules, MemoryStore::new(KeyedConfig::new(10), "rl")?)?;
    /// let limits = ConfigLimits::new(
    ///     limiter,
    ///     [RequestDescriptor::new([RequestEntry::method(), RequestEntry::path()])],
    /// );
    /// let (parts, ()) = http::Request::post("/orders?page=2").body(())?.into_parts();
    /// assert_eq!(
    ///     limits.descriptors_of(&parts)?,
    ///     [Descriptor::new().entry("method", "POST").entry("path", "/orders")]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn descriptors_of(&self, request: &Parts) -> Result<Vec<Descriptor>, KeyError> {
        // An extractor shared by several descriptors reads the request once.
        let mut extracted: Vec<(*const (), String)> = Vec::new();
        let mut out = Vec::with_capacity(self.descriptors.len());
        'descriptors: for descriptor in self.descriptors.iter() {
            let mut built = Descriptor::new();
            for entry in &descriptor.entries {
                let value = match &entry.source {
                    Source::Extract(extractor) => {
                        let id = Arc::as_ptr(extractor).cast::<()>();
                        match extracted.iter().find(|(seen, _)| *seen == id) {
                            Some((_, value)) => value.clone(),
                            None => {
                                let value = extractor.extract(request)?.into_string();
                                extracted.push((id, value.clone()));
                                value
                            }
                        }
                    }
                    Source::Path => request.uri.path().to_owned(),
                    Source::Method => request.method.as_str().to_owned(),
                    Source::Header(name) => {
                        match request.headers.get(name).and_then(|v| v.to_str().ok()) {
                            Some(value) => value.to_owned(),
                            None => continue 'descriptors,
                        }
                    }
                    Source::Constant(value) => value.clone(),
                    Source::Optional(read) => match read(request) {
                        Some(value) => value,
                        None => continue 'descriptors,
                    },
                };
                built.push(entry.key.clone(), value);
            }
            out.push(built);
        }
        Ok(out)
    }
}

impl<S: Store + 'static> Limits for ConfigLimits<S> {
    /// Decided at once when the store can (the memory store), without an allocation
    /// for the future; otherwise a boxed future that awaits the store.
    fn check(&self, request: &Parts) -> CheckFuture {
        let descriptors = match self.descriptors_of(request) {
            Ok(descriptors) => descriptors,
            Err(e) => return CheckFuture::ready(Err(e.into())),
        };
        let admitted = match self.limiter.try_check_now(&descriptors, 1) {
            CheckNow::Decided(decided) => {
                let hook = self.on_shadow_denial.as_deref();
                return CheckFuture::ready(
                    decided
                        .map(|decision| verdict(decision, hook))
                        .map_err(CheckError::from),
                );
            }
            CheckNow::Later => None,
            CheckNow::ShadowLater(admitted) => Some(admitted),
        };
        let limiter = self.limiter.clone();
        let hook = self.on_shadow_denial.clone();
        CheckFuture::new(async move {
            let decision = match admitted {
                None => limiter.check(&descriptors, 1).await?,
                Some(admitted) => limiter.check_shadow(&descriptors, 1, admitted).await?,
            };
            Ok(verdict(decision, hook.as_deref()))
        })
    }

    fn policies(&self) -> Vec<Policy> {
        self.policies.to_vec()
    }
}

/// The verdict of `decision`, its shadow denial reported.
fn verdict(
    decision: ConfigDecision,
    hook: Option<&(dyn Fn(&ShadowDenial) + Send + Sync)>,
) -> Verdict {
    let (decision, applied, decisive, shadow) = decision.into_parts();
    if let Some(shadow) = shadow {
        tracing::info!(
            target: "tollgate::config",
            limit = %shadow.limit.name,
            denied = %shadow.denied,
            "shadow limit would deny"
        );
        if let Some(hook) = hook {
            hook(&shadow);
        }
    }
    match decision {
        None => Verdict::unlimited(),
        Some(decision) => Verdict::new(
            decision,
            applied.into_iter().map(policy).collect::<Policies>(),
            decisive,
        ),
    }
}

fn policy(limit: AppliedLimit) -> Policy {
    Policy {
        name: limit.name,
        quota: limit.quota,
        window: limit.window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RuleSet;
    use crate::http::ClientIp;
    use crate::store::{MemoryStore, Reply, Request, StoreError};
    use crate::sync::{AtomicU64, Mutex, Ordering};
    use crate::table::KeyedConfig;
    use crate::time::ManualClock;
    use futures::executor::block_on;
    use std::net::SocketAddr;

    /// The memory store, deciding at once only on the calls `now` allows (by the
    /// count of attempts so far), as a store that sometimes must wait.
    struct Sometimes {
        store: MemoryStore<ManualClock>,
        attempts: AtomicU64,
        now: fn(u64) -> bool,
    }

    #[async_trait::async_trait]
    impl Store for Sometimes {
        async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
            self.store.execute(request).await
        }

        fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
            let attempt = self.attempts.fetch_add(1, Ordering::SeqCst);
            (self.now)(attempt).then(|| self.store.try_execute_now(request))?
        }
    }

    /// The shadow limit counts only what the enforced one admits.
    const RULES: &str = "
domain: api
descriptors:
  - key: remote_address
    rate_limit: { name: per_client, unit: minute, requests_per_unit: 3 }
  - key: path
    rate_limit: { name: per_path, unit: minute, requests_per_unit: 2 }
    shadow_mode: true
";

    /// (admitted, remaining, decisive policy) of five requests, and the shadow
    /// denials reported.
    fn five_requests(now: fn(u64) -> bool) -> (Vec<(bool, u64, String)>, usize) {
        let store = Sometimes {
            store: MemoryStore::with_clock(KeyedConfig::new(100), "rl", ManualClock::new())
                .unwrap(),
            attempts: AtomicU64::new(0),
            now,
        };
        let limiter = ConfigLimiter::new(RuleSet::from_yaml(RULES).unwrap(), store).unwrap();
        let shadow = Arc::new(Mutex::new(Vec::new()));
        let seen = shadow.clone();
        let limits = ConfigLimits::by_client_and_path(limiter, ClientIp::new())
            .on_shadow_denial(move |denial| seen.lock().push(denial.limit.name.clone()));
        let verdicts = (0..5)
            .map(|_| {
                let (mut head, ()) = http::Request::get("/x").body(()).unwrap().into_parts();
                head.extensions
                    .insert(SocketAddr::from(([192, 0, 2, 1], 1)));
                let verdict = block_on(limits.check(&head)).unwrap();
                let remaining = match &verdict.decision {
                    Some(Ok(admitted)) => admitted.remaining(),
                    Some(Err(crate::decision::Denied::Limited(limited))) => limited.remaining(),
                    other => panic!("{other:?}"),
                };
                let policy = verdict.decisive_policy().unwrap().name.clone();
                (verdict.is_admitted(), remaining, policy)
            })
            .collect();
        let shadow = shadow.lock();
        assert!(shadow.iter().all(|name| name == "per_path"));
        (verdicts, shadow.len())
    }

    /// At once, awaited, or the enforced request at once and the shadow one awaited:
    /// the same verdicts and the same shadow denials.
    #[test]
    fn checks_decided_at_once_and_awaited_agree() {
        let at_once = five_requests(|_| true);
        let expected = (
            vec![
                (true, 2, "per_client".to_owned()),
                (true, 1, "per_client".to_owned()),
                (true, 0, "per_client".to_owned()),
                (false, 0, "per_client".to_owned()),
                (false, 0, "per_client".to_owned()),
            ],
            1,
        );
        assert_eq!(at_once, expected);
        assert_eq!(five_requests(|_| false), expected);
        // Odd attempts wait: every admitted request's shadow request is awaited, and
        // a denied one leaves the next request's enforced request to be awaited.
        assert_eq!(five_requests(|attempt| attempt % 2 == 0), expected);
    }
}
