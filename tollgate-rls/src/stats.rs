//! The Go service's stats, under its names, exposed as Prometheus text.
//!
//! envoyproxy/ratelimit counts, in statsd terms (`src/stats/manager_impl.go`):
//!
//! | statsd name | when |
//! |---|---|
//! | `ratelimit.service.rate_limit.<stats key>.total_hits` | hits on a limit |
//! | `….over_limit` | hits over the limit |
//! | `….near_limit` | hits over the near-limit ratio, within the limit |
//! | `….within_limit` | hits within the limit |
//! | `….shadow_mode` | hits over the limit let through by the rule's shadow mode |
//! | `….over_limit_with_local_cache` | hits denied by the local over-limit cache |
//! | `ratelimit.service.rate_limit.<domain>.domain_not_found` | a request for an unknown domain |
//! | `ratelimit.service.config_load_success`, `config_load_error` | configuration loads |
//! | `ratelimit.service.call.should_rate_limit.redis_error`, `service_error` | failed calls |
//! | `ratelimit.service.global_shadow_mode` | an over-limit answer turned OK by `SHADOW_MODE` |
//! | `ratelimit_server.<method>.total_requests`, `.response_time` | calls, and their time |
//!
//! The stats key is the limit's key in the configuration, `domain.key_value.key2…`
//! (with `detailed_metric`, one per descriptor value), with `:` and `|` replaced by `_`
//! and the dots of IPv4 addresses by `_`, as Go's `SanitizeStatName` does.
//!
//! # What a dashboard sees
//!
//! Go exposes these through an in-process statsd exporter with the mapping of
//! `src/stats/prom/default_mapper.yaml`. [`Stats::render`] writes the same
//! Prometheus series:
//!
//! - `ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//!   with labels `domain` (the key's first dot-separated segment), `key1` (the
//!   second) and, when the key has a third, `key2`; further segments are dropped, and
//!   keys that map to the same labels add up, as the exporter's regex mapping does.
//!   The mapping file says `timer_type: histogram`, but that applies to timers only:
//!   Go's stats are statsd counters, so the exporter exposes **counters**, named
//!   without a `_total` suffix, and so does this module. (This is also why the
//!   Prometheus text is written here rather than by `prometheus-client`: its
//!   OpenMetrics counters always end in `_total`, and one family may not mix label
//!   sets, as `{domain,key1}` and `{domain,key1,key2}` do here.)
//! - `ratelimit_service_should_rate_limit_error{err_type="redis_error"|"service_error"}`,
//!   `ratelimit_service_config_load_success`, `ratelimit_service_config_load_error`,
//!   `ratelimit_service_total_requests{grpc_method}` and the histogram
//!   `ratelimit_service_response_time_seconds{grpc_method}` (the exporter's default
//!   buckets), as mapped.
//! - `ratelimit_service_global_shadow_mode`: the name the exporter gives the unmapped
//!   statsd name.
//!
//! Where Go's output is an accident of the mapping, this module differs, on purpose:
//!
//! - `over_limit_with_local_cache` is not in Go's mapping. For a key of three or more
//!   segments the (unanchored) `over_limit` regex catches it, so Go adds those hits to
//!   `ratelimit_service_rate_limit_over_limit` a second time; for a key of two
//!   segments it becomes one metric name per key. Here it is its own counter,
//!   `ratelimit_service_rate_limit_over_limit_with_local_cache`, labelled like the
//!   others.
//! - `domain_not_found` is unmapped in Go (one metric name per domain:
//!   `ratelimit_service_rate_limit_<domain>_domain_not_found`). Here it is
//!   `ratelimit_service_rate_limit_domain_not_found{domain}`.
//! - Go's stats reach Prometheus at each statsd flush (every few seconds); here a
//!   scrape sees every increment at once. As in Go, a series appears at its first
//!   non-zero value.
//! - Go's `EXTRA_TAGS` are not supported.
//!
//! [`Stats::statsd_counters`] gives every counter under its full statsd name, for
//! tests and debugging.
//!
//! # Bounded cardinality
//!
//! A `detailed_metric` rule makes one stats key per descriptor value, so the number of
//! keys is up to the clients. [`Stats::new`] takes a cap on distinct stats keys: past
//! it, a new key of domain `d` is counted under `d.__folded__` (labels
//! `domain="d", key1="__folded__"`), and every update so folded counts in
//! `tollgate_rls_stats_folded_total`. Domains are few (they come from the
//! configuration), and past [`MAX_FOLDED_DOMAINS`] of them even the domain is folded.
//! Domains of `domain_not_found` come from requests: they share the cap, past which
//! they count under the domain `__folded__`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The stats key segment that stands for every key folded away by the cap.
pub const FOLDED: &str = "__folded__";

/// How many per-domain folded series are kept before even the domain is folded.
pub const MAX_FOLDED_DOMAINS: usize = 1_000;

/// The default cap on distinct stats keys.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// The buckets of `ratelimit_service_response_time_seconds`: the statsd exporter's
/// default ones (Prometheus' `DefBuckets`), in seconds.
const RESPONSE_TIME_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The six per-limit stats, in the order [`LimitCounts`] holds them, with their
/// statsd suffixes.
const LIMIT_STATS: [&str; 6] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
    "over_limit_with_local_cache",
];

/// How much one decision adds to each stat of a limit: what
/// [`decide_descriptor`](crate::verdict::decide_descriptor) computes, and
/// [`Stats::add`] counts.
///
/// # Examples
///
/// ```
/// use tollgate_rls::stats::LimitCounts;
///
/// let counts = LimitCounts { total_hits: 3, within_limit: 3, ..LimitCounts::default() };
/// assert!(!counts.is_zero());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitCounts {
    /// Hits on the limit.
    pub total_hits: u64,
    /// Hits over the limit (including those the local cache denied).
    pub over_limit: u64,
    /// Hits past the near-limit threshold, within the limit.
    pub near_limit: u64,
    /// Hits within the limit.
    pub within_limit: u64,
    /// Hits over the limit let through by the rule's shadow mode.
    pub shadow_mode: u64,
    /// Hits denied by the local over-limit cache, without asking the store.
    pub over_limit_with_local_cache: u64,
}

impl LimitCounts {
    /// Whether every count is zero.
    pub fn is_zero(&self) -> bool {
        self.as_array() == [0; 6]
    }

    fn as_array(&self) -> [u64; 6] {
        [
            self.total_hits,
            self.over_limit,
            self.near_limit,
            self.within_limit,
            self.shadow_mode,
            self.over_limit_with_local_cache,
        ]
    }
}

/// The counters of one stats key.
#[derive(Debug, Default)]
struct LimitCounters([AtomicU64; 6]);

impl LimitCounters {
    fn add(&self, counts: &LimitCounts) {
        for (counter, n) in self.0.iter().zip(counts.as_array()) {
            if n != 0 {
                // Wrapping, as Go's uint64 counters do.
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    fn get(&self) -> [u64; 6] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

/// A handle on one stats key's counters: look it up once with [`Stats::limit`] and
/// add to it without a lookup.
///
/// # Examples
///
/// ```
/// use tollgate_rls::stats::{LimitCounts, Stats};
///
/// let stats = Stats::new(100);
/// let limit = stats.limit("api.path_/login");
/// limit.add(&LimitCounts { total_hits: 1, within_limit: 1, ..LimitCounts::default() });
/// assert!(stats.render().contains(r#"ratelimit_service_rate_limit_within_limit{domain="api",key1="path_/login"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct LimitStats {
    counters: Arc<LimitCounters>,
    folded: Option<Arc<AtomicU64>>,
}

impl LimitStats {
    /// Adds `counts` to this key's counters.
    pub fn add(&self, counts: &LimitCounts) {
        if let Some(folded) = &self.folded {
            folded.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.add(counts);
    }
}

/// Calls and their durations for one gRPC method.
#[derive(Debug)]
struct CallStats {
    total: AtomicU64,
    buckets: [AtomicU64; RESPONSE_TIME_BUCKETS.len()],
    /// The sum of durations, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl CallStats {
    fn new() -> CallStats {
        CallStats {
            total: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

#[derive(Debug, Default)]
struct Keys {
    /// Stats keys under the cap, and the folded ones (which do not count toward it).
    limits: HashMap<Box<str>, Arc<LimitCounters>>,
    /// How many of `limits` are folded series.
    folded_series: usize,
    not_found: HashMap<Box<str>, Arc<AtomicU64>>,
}

#[derive(Debug)]
struct Inner {
    max_keys: usize,
    keys: RwLock<Keys>,
    folded: Arc<AtomicU64>,
    config_load_success: AtomicU64,
    config_load_error: AtomicU64,
    redis_error: AtomicU64,
    service_error: AtomicU64,
    global_shadow_mode: AtomicU64,
    calls: RwLock<BTreeMap<Box<str>, Arc<CallStats>>>,
}

/// The service's stats: shared by clones, safe to update from any task.
///
/// # Examples
///
/// ```
/// use tollgate_rls::stats::{LimitCounts, Stats};
///
/// let stats = Stats::new(10_000);
/// stats.config_load(true);
/// stats.add("api.user", &LimitCounts { total_hits: 2, over_limit: 1, within_limit: 1, ..LimitCounts::default() });
/// let text = stats.render();
/// assert!(text.contains("ratelimit_service_config_load_success 1\n"));
/// assert!(text.contains(r#"ratelimit_service_rate_limit_over_limit{domain="api",key1="user"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct Stats {
    inner: Arc<Inner>,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats::new(DEFAULT_MAX_KEYS)
    }
}

impl Stats {
    /// Stats holding at most `max_keys` distinct stats keys (limits and unknown
    /// domains together); later keys are folded (see the [module docs](self)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate_rls::stats::{LimitCounts, Stats};
    ///
    /// let stats = Stats::new(1);
    /// let hit = LimitCounts { total_hits: 1, ..LimitCounts::default() };
    /// stats.add("api.a", &hit);
    /// stats.add("api.b", &hit); // over the cap: counted under api.__folded__
    /// assert_eq!(stats.folded(), 1);
    /// ```
    pub fn new(max_keys: usize) -> Stats {
        Stats {
            inner: Arc::new(Inner {
                max_keys,
                keys: RwLock::new(Keys::default()),
                folded: Arc::new(AtomicU64::new(0)),
                config_load_success: AtomicU64::new(0),
                config_load_error: AtomicU64::new(0),
                redis_error: AtomicU64::new(0),
                service_error: AtomicU64::new(0),
                global_shadow_mode: AtomicU64::new(0),
                calls: RwLock::new(BTreeMap::new()),
            }),
        }
    }

    /// The counters of the limit whose stats key is `stats_key` (sanitized here as Go
    /// does), created on first use. Past the cap, the folded series of its domain; the
    /// handle then counts each [`add`](LimitStats::add) as folded.
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tollgate_rls::stats::Stats::new(100);
    /// let a = stats.limit("api.client_10.0.0.1");
    /// a.add(&tollgate_rls::stats::LimitCounts { total_hits: 1, ..Default::default() });
    /// assert!(stats.statsd_counters().contains_key("ratelimit.service.rate_limit.api.client_10_0_0_1.total_hits"));
    /// ```
    pub fn limit(&self, stats_key: &str) -> LimitStats {
        let key = sanitize_stat_name(stats_key);
        {
            let keys = read(&self.inner.keys);
            if let Some(counters) = keys.limits.get(key.as_str()) {
                return LimitStats {
                    counters: Arc::clone(counters),
                    folded: None,
                };
            }
        }
        let mut keys = write(&self.inner.keys);
        if let Some(counters) = keys.limits.get(key.as_str()) {
            return LimitStats {
                counters: Arc::clone(counters),
                folded: None,
            };
        }
        if self.under_cap(&keys) {
            let counters = Arc::new(LimitCounters::default());
            keys.limits.insert(key.into(), Arc::clone(&counters));
            return LimitStats {
                counters,
                folded: None,
            };
        }
        let domain = key.split('.').next().unwrap_or_default();
        let mut folded_key = format!("{domain}.{FOLDED}");
        if !keys.limits.contains_key(folded_key.as_str())
            && keys.folded_series >= MAX_FOLDED_DOMAINS
        {
            folded_key = format!("{FOLDED}.{FOLDED}");
        }
        let counters = match keys.limits.get(folded_key.as_str()) {
            Some(c) => Arc::clone(c),
            None => {
                let c = Arc::new(LimitCounters::default());
                keys.limits.insert(folded_key.into(), Arc::clone(&c));
                keys.folded_series += 1;
                c
            }
        };
        LimitStats {
            counters,
            folded: Some(Arc::clone(&self.inner.folded)),
        }
    }

    /// Adds `counts` to the limit of `stats_key`: [`limit`](Stats::limit) and
    /// [`LimitStats::add`] in one call.
    pub fn add(&self, stats_key: &str, counts: &LimitCounts) {
        if !counts.is_zero() {
            self.limit(stats_key).add(counts);
        }
    }

    /// Counts a request for `domain`, which no configuration has.
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tollgate_rls::stats::Stats::new(100);
    /// stats.domain_not_found("nope");
    /// assert!(stats.render().contains(r#"ratelimit_service_rate_limit_domain_not_found{domain="nope"} 1"#));
    /// ```
    pub fn domain_not_found(&self, domain: &str) {
        let domain = sanitize_stat_name(domain);
        {
            let keys = read(&self.inner.keys);
            if let Some(c) = keys.not_found.get(domain.as_str()) {
                c.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let mut keys = write(&self.inner.keys);
        let folded = !keys.not_found.contains_key(domain.as_str()) && !self.under_cap(&keys);
        let name: Box<str> = if folded {
            self.inner.folded.fetch_add(1, Ordering::Relaxed);
            FOLDED.into()
        } else {
            domain.into()
        };
        keys.not_found
            .entry(name)
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a configuration load: `ok` (`config_load_success`) or not
    /// (`config_load_error`).
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tollgate_rls::stats::Stats::new(100);
    /// stats.config_load(false);
    /// assert!(stats.render().contains("ratelimit_service_config_load_error 1\n"));
    /// ```
    pub fn config_load(&self, ok: bool) {
        let counter = if ok {
            &self.inner.config_load_success
        } else {
            &self.inner.config_load_error
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call that failed because the store could not decide
    /// (`call.should_rate_limit.redis_error`).
    pub fn redis_error(&self) {
        self.inner.redis_error.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call refused as malformed, or made with no configuration loaded
    /// (`call.should_rate_limit.service_error`).
    pub fn service_error(&self) {
        self.inner.service_error.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an over-limit answer turned OK by the global shadow mode.
    pub fn global_shadow_mode(&self) {
        self.inner
            .global_shadow_mode
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call of gRPC `method` (`ShouldRateLimit`) that took `elapsed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let stats = tollgate_rls::stats::Stats::new(100);
    /// stats.call("ShouldRateLimit", Duration::from_millis(2));
    /// let text = stats.render();
    /// assert!(text.contains(r#"ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 1"#));
    /// assert!(text.contains(r#"ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 1"#));
    /// ```
    pub fn call(&self, method: &str, elapsed: Duration) {
        let existing = read(&self.inner.calls).get(method).cloned();
        let stats = match existing {
            Some(s) => s,
            None => Arc::clone(
                write(&self.inner.calls)
                    .entry(method.into())
                    .or_insert_with(|| Arc::new(CallStats::new())),
            ),
        };
        stats.total.fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        if let Some(i) = RESPONSE_TIME_BUCKETS.iter().position(|b| secs <= *b) {
            stats.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        stats.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// How many updates went to a folded series because of the cap.
    pub fn folded(&self) -> u64 {
        self.inner.folded.load(Ordering::Relaxed)
    }

    /// Every non-zero counter under its full statsd name, as Go names it
    /// (`ratelimit.service.rate_limit.api.user.total_hits`, …).
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tollgate_rls::stats::Stats::new(100);
    /// stats.redis_error();
    /// assert_eq!(stats.statsd_counters()["ratelimit.service.call.should_rate_limit.redis_error"], 1);
    /// ```
    pub fn statsd_counters(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        {
            let keys = read(&self.inner.keys);
            for (key, counters) in &keys.limits {
                for (suffix, value) in LIMIT_STATS.iter().zip(counters.get()) {
                    if value != 0 {
                        out.insert(
                            format!("ratelimit.service.rate_limit.{key}.{suffix}"),
                            value,
                        );
                    }
                }
            }
            for (domain, counter) in &keys.not_found {
                let value = counter.load(Ordering::Relaxed);
                if value != 0 {
                    out.insert(
                        format!("ratelimit.service.rate_limit.{domain}.domain_not_found"),
                        value,
                    );
                }
            }
        }
        let service = [
            (
                "ratelimit.service.config_load_success",
                &self.inner.config_load_success,
            ),
            (
                "ratelimit.service.config_load_error",
                &self.inner.config_load_error,
            ),
            (
                "ratelimit.service.call.should_rate_limit.redis_error",
                &self.inner.redis_error,
            ),
            (
                "ratelimit.service.call.should_rate_limit.service_error",
                &self.inner.service_error,
            ),
            (
                "ratelimit.service.global_shadow_mode",
                &self.inner.global_shadow_mode,
            ),
        ];
        for (name, counter) in service {
            let value = counter.load(Ordering::Relaxed);
            if value != 0 {
                out.insert(name.to_owned(), value);
            }
        }
        for (method, calls) in read(&self.inner.calls).iter() {
            let value = calls.total.load(Ordering::Relaxed);
            if value != 0 {
                out.insert(format!("ratelimit_server.{method}.total_requests"), value);
            }
        }
        out
    }

    /// Every stat as Prometheus text (format 0.0.4), under the names and labels Go's
    /// default mapping gives them (see the [module docs](self)).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Per-limit families: the exporter's labels, summed over keys that share them.
        let mut families: [BTreeMap<Vec<(&'static str, String)>, u64>; 6] = Default::default();
        let mut not_found = BTreeMap::new();
        {
            let keys = read(&self.inner.keys);
            for (key, counters) in &keys.limits {
                let labels = key_labels(key);
                for (family, value) in families.iter_mut().zip(counters.get()) {
                    if value != 0 {
                        let sum = family.entry(labels.clone()).or_insert(0);
                        *sum = sum.wrapping_add(value);
                    }
                }
            }
            for (domain, counter) in &keys.not_found {
                let value = counter.load(Ordering::Relaxed);
                if value != 0 {
                    not_found.insert(vec![("domain", domain.to_string())], value);
                }
            }
        }
        for (suffix, family) in LIMIT_STATS.iter().zip(&families) {
            family_text(
                &mut out,
                &format!("ratelimit_service_rate_limit_{suffix}"),
                &format!(
                    "Hits counted as {suffix}, per limit (statsd ratelimit.service.rate_limit.<key>.{suffix})."
                ),
                family,
            );
        }
        family_text(
            &mut out,
            "ratelimit_service_rate_limit_domain_not_found",
            "Requests for a domain that no configuration has.",
            &not_found,
        );
        let errors: BTreeMap<_, _> = [
            ("redis_error", &self.inner.redis_error),
            ("service_error", &self.inner.service_error),
        ]
        .into_iter()
        .map(|(kind, c)| {
            (
                vec![("err_type", kind.to_owned())],
                c.load(Ordering::Relaxed),
            )
        })
        .filter(|(_, v)| *v != 0)
        .collect();
        family_text(
            &mut out,
            "ratelimit_service_should_rate_limit_error",
            "ShouldRateLimit calls that failed, by cause.",
            &errors,
        );
        for (name, help, counter) in [
            (
                "ratelimit_service_config_load_success",
                "Configuration loads that succeeded.",
                &self.inner.config_load_success,
            ),
            (
                "ratelimit_service_config_load_error",
                "Configuration loads that failed.",
                &self.inner.config_load_error,
            ),
            (
                "ratelimit_service_global_shadow_mode",
                "Over-limit answers turned OK by the global shadow mode.",
                &self.inner.global_shadow_mode,
            ),
        ] {
            let value = counter.load(Ordering::Relaxed);
            let family: BTreeMap<_, _> = (value != 0)
                .then_some((Vec::new(), value))
                .into_iter()
                .collect();
            family_text(&mut out, name, help, &family);
        }
        self.render_calls(&mut out);
        let folded = self.folded();
        let _ = writeln!(
            out,
            "# HELP tollgate_rls_stats_folded_total Stats updates counted under a folded series, past the cap on distinct stats keys.\n\
             # TYPE tollgate_rls_stats_folded_total counter\n\
             tollgate_rls_stats_folded_total {folded}"
        );
        out
    }

    fn render_calls(&self, out: &mut String) {
        let calls = read(&self.inner.calls);
        let totals: BTreeMap<_, _> = calls
            .iter()
            .map(|(m, c)| {
                (
                    vec![("grpc_method", m.to_string())],
                    c.total.load(Ordering::Relaxed),
                )
            })
            .filter(|(_, v)| *v != 0)
            .collect();
        family_text(
            out,
            "ratelimit_service_total_requests",
            "gRPC calls, by method.",
            &totals,
        );
        if calls.is_empty() {
            return;
        }
        let name = "ratelimit_service_response_time_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} gRPC call durations, by method.\n# TYPE {name} histogram"
        );
        for (method, c) in calls.iter() {
            let method = escape_label(method);
            let mut cumulative = 0u64;
            for (bound, bucket) in RESPONSE_TIME_BUCKETS.iter().zip(&c.buckets) {
                cumulative += bucket.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "{name}_bucket{{grpc_method=\"{method}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let total = c.total.load(Ordering::Relaxed);
            let sum = c.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(
                out,
                "{name}_bucket{{grpc_method=\"{method}\",le=\"+Inf\"}} {total}\n\
                 {name}_sum{{grpc_method=\"{method}\"}} {sum}\n\
                 {name}_count{{grpc_method=\"{method}\"}} {total}"
            );
        }
    }

    fn under_cap(&self, keys: &Keys) -> bool {
        keys.limits.len() - keys.folded_series + keys.not_found.len() < self.inner.max_keys
    }
}

/// Writes one counter family; a family with no series is left out, as Go's exporter
/// has none before the first event.
fn family_text(
    out: &mut String,
    name: &str,
    help: &str,
    series: &BTreeMap<Vec<(&'static str, String)>, u64>,
) {
    if series.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (labels, value) in series {
        out.push_str(name);
        if !labels.is_empty() {
            out.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{label}=\"{}\"", escape_label(v));
            }
            out.push('}');
        }
        let _ = writeln!(out, " {value}");
    }
}

/// The exporter's labels for a stats key: `domain`, `key1` and `key2` from its first
/// three dot-separated segments.
fn key_labels(key: &str) -> Vec<(&'static str, String)> {
    ["domain", "key1", "key2"]
        .into_iter()
        .zip(key.split('.'))
        .map(|(label, segment)| (label, segment.to_owned()))
        .collect()
}

fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Go's `SanitizeStatName`: `:` and `|` become `_`, and so do the dots of anything
/// shaped like an IPv4 address (`\d{1,3}(\.\d{1,3}){3}`, leftmost first).
///
/// # Examples
///
/// ```
/// use tollgate_rls::stats::sanitize_stat_name;
///
/// assert_eq!(sanitize_stat_name("api.client_10.0.0.1:80|x"), "api.client_10_0_0_1_80_x");
/// ```
pub fn sanitize_stat_name(name: &str) -> String {
    let bytes: Vec<u8> = name
        .bytes()
        .map(|b| if b == b':' || b == b'|' { b'_' } else { b })
        .collect();
    let mut out = bytes.clone();
    let mut i = 0;
    while i < bytes.len() {
        match ipv4_at(&bytes, i) {
            Some(end) => {
                for b in &mut out[i..end] {
                    if *b == b'.' {
                        *b = b'_';
                    }
                }
                i = end;
            }
            None => i += 1,
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The end of an IPv4-shaped match starting at `start`, as Go's leftmost-first regex
/// `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}` finds it.
fn ipv4_at(bytes: &[u8], start: usize) -> Option<usize> {
    let digits = |from: usize| {
        bytes[from.min(bytes.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut i = start;
    for _ in 0..3 {
        // A run longer than three digits cannot be followed by the dot: no match here.
        let n = digits(i);
        if n == 0 || n > 3 || bytes.get(i + n) != Some(&b'.') {
            return None;
        }
        i += n + 1;
    }
    let n = digits(i);
    (n > 0).then_some(i + n.min(3))
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // A panic while holding the lock cannot leave the maps inconsistent.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(total: u64, over: u64, near: u64, within: u64) -> LimitCounts {
        LimitCounts {
            total_hits: total,
            over_limit: over,
            near_limit: near,
            within_limit: within,
            ..LimitCounts::default()
        }
    }

    #[test]
    fn renders_the_mapped_names_and_labels() {
        let stats = Stats::new(100);
        stats.add("domain1.key1_val1", &counts(1, 1, 0, 0));
        stats.add("domain1.key1_val1.key2_val2", &counts(2, 2, 0, 0));
        stats.add("domain1.key3_val3.key4_val4", &counts(1, 1, 0, 0));
        stats.add("domain1.key3_val3.key4_val4.key5_val5", &counts(2, 2, 0, 0));
        stats.config_load(true);
        stats.config_load(true);
        stats.config_load(false);
        stats.redis_error();
        stats.global_shadow_mode();
        let text = stats.render();
        // The exporter's own test (prometheus_sink_test.go, TestFlushCounterWithDifferentLabels):
        // keys beyond three segments add up into the three-segment series.
        for line in [
            "# TYPE ratelimit_service_rate_limit_over_limit counter",
            r#"ratelimit_service_rate_limit_over_limit{domain="domain1",key1="key1_val1"} 1"#,
            r#"ratelimit_service_rate_limit_over_limit{domain="domain1",key1="key1_val1",key2="key2_val2"} 2"#,
            r#"ratelimit_service_rate_limit_over_limit{domain="domain1",key1="key3_val3",key2="key4_val4"} 3"#,
            r#"ratelimit_service_rate_limit_total_hits{domain="domain1",key1="key3_val3",key2="key4_val4"} 3"#,
            "ratelimit_service_config_load_success 2",
            "ratelimit_service_config_load_error 1",
            r#"ratelimit_service_should_rate_limit_error{err_type="redis_error"} 1"#,
            "ratelimit_service_global_shadow_mode 1",
            "tollgate_rls_stats_folded_total 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Zero counters make no series, and no empty family.
        assert!(!text.contains("near_limit"));
        assert!(!text.contains("service_error"));
    }

    #[test]
    fn statsd_names_are_go_names() {
        let stats = Stats::new(100);
        stats.add("mongo_cps.database_users", &counts(3, 0, 1, 3));
        stats.domain_not_found("nope");
        stats.service_error();
        stats.call("ShouldRateLimit", Duration::from_millis(3));
        let names = stats.statsd_counters();
        assert_eq!(
            names.get("ratelimit.service.rate_limit.mongo_cps.database_users.total_hits"),
            Some(&3)
        );
        assert_eq!(
            names.get("ratelimit.service.rate_limit.mongo_cps.database_users.near_limit"),
            Some(&1)
        );
        assert_eq!(
            names.get("ratelimit.service.rate_limit.nope.domain_not_found"),
            Some(&1)
        );
        assert_eq!(
            names.get("ratelimit.service.call.should_rate_limit.service_error"),
            Some(&1)
        );
        assert_eq!(
            names.get("ratelimit_server.ShouldRateLimit.total_requests"),
            Some(&1)
        );
        assert!(
            !names.contains_key("ratelimit.service.rate_limit.mongo_cps.database_users.over_limit")
        );
    }

    #[test]
    fn renders_calls_as_a_histogram_in_seconds() {
        let stats = Stats::new(100);
        stats.call("ShouldRateLimit", Duration::from_millis(3));
        stats.call("ShouldRateLimit", Duration::from_millis(30));
        let text = stats.render();
        for line in [
            r#"ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 2"#,
            "# TYPE ratelimit_service_response_time_seconds histogram",
            r#"ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.005"} 1"#,
            r#"ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.05"} 2"#,
            r#"ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="+Inf"} 2"#,
            r#"ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 2"#,
            r#"ratelimit_service_response_time_seconds_sum{grpc_method="ShouldRateLimit"} 0.033"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn the_cap_folds_new_keys_into_their_domain_and_counts_them() {
        let stats = Stats::new(2);
        stats.add("api.user_1", &counts(1, 0, 0, 1));
        stats.add("api.user_2", &counts(1, 0, 0, 1));
        // Past the cap: folded, per domain.
        stats.add("api.user_3", &counts(1, 0, 0, 1));
        stats.add("api.user_4", &counts(2, 0, 0, 2));
        stats.add("web.page_x", &counts(1, 1, 0, 0));
        // Known keys still count on their own.
        stats.add("api.user_1", &counts(1, 0, 0, 1));
        assert_eq!(stats.folded(), 3);
        let text = stats.render();
        for line in [
            r#"ratelimit_service_rate_limit_total_hits{domain="api",key1="user_1"} 2"#,
            r#"ratelimit_service_rate_limit_total_hits{domain="api",key1="__folded__"} 3"#,
            r#"ratelimit_service_rate_limit_total_hits{domain="web",key1="__folded__"} 1"#,
            "tollgate_rls_stats_folded_total 3",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("user_3"));
        // Unknown domains share the cap.
        stats.domain_not_found("random-1");
        assert!(
            stats.render().contains(
                r#"ratelimit_service_rate_limit_domain_not_found{domain="__folded__"} 1"#
            )
        );
        assert_eq!(stats.folded(), 4);
    }

    #[test]
    fn folded_domains_are_bounded_too() {
        let stats = Stats::new(0);
        for d in 0..MAX_FOLDED_DOMAINS + 5 {
            stats.add(&format!("d{d}.k"), &counts(1, 0, 0, 1));
        }
        let keys = read(&stats.inner.keys);
        assert_eq!(keys.limits.len(), MAX_FOLDED_DOMAINS + 1);
        let all = &keys.limits[format!("{FOLDED}.{FOLDED}").as_str()];
        assert_eq!(all.get()[0], 5);
    }

    #[test]
    fn label_values_are_escaped() {
        let stats = Stats::new(10);
        stats.add("api.path_\"x\"\\y", &counts(1, 0, 0, 1));
        assert!(stats.render().contains(r#"key1="path_\"x\"\\y""#));
    }

    #[test]
    fn sanitizes_as_go() {
        assert_eq!(sanitize_stat_name("a:b|c"), "a_b_c");
        assert_eq!(
            sanitize_stat_name("d.ip_192.168.1.10.x"),
            "d.ip_192_168_1_10.x"
        );
        // Four digits before the first dot: the match starts one later.
        assert_eq!(sanitize_stat_name("1234.5.6.7"), "1234_5_6_7");
        // The last group takes at most three digits.
        assert_eq!(sanitize_stat_name("1.2.3.4567.8"), "1_2_3_4567.8");
        assert_eq!(sanitize_stat_name("1.2.3"), "1.2.3");
        assert_eq!(sanitize_stat_name("v1.2.3.x"), "v1.2.3.x");
        assert_eq!(sanitize_stat_name("1.2.3.4.5.6.7.8"), "1_2_3_4.5_6_7_8");
    }

    #[test]
    fn concurrent_updates_all_count() {
        let stats = Stats::new(1_000);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let stats = stats.clone();
                s.spawn(move || {
                    for i in 0..1_000 {
                        stats.add(&format!("api.k{}", i % 10), &counts(1, 0, 0, 1));
                    }
                });
            }
        });
        let total: u64 = stats
            .statsd_counters()
            .iter()
            .filter(|(k, _)| k.ends_with(".total_hits"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(total, 4_000);
    }
}
