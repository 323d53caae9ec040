//! The Go service's integration scenarios (envoyproxy/ratelimit,
//! `test/integration/integration_test.go`) reproduced on the engine, in process: a
//! memory backend on a manual clock stands for Redis, and the Go test's config files
//! (`test/integration/runtime/current/ratelimit/…`) are written to a temporary runtime
//! directory and loaded from there.
//!
//! - In [`Counting::Each`] (the Go service's counting) every status and every stat the
//!   Go test checks equals Go's, with and without a per-second store
//!   (`REDIS_PERSECOND`), the local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`),
//!   `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` and `CACHE_KEY_PREFIX`.
//! - In [`Counting::AllOrNothing`] (tollgate's default) the same steps run, and where
//!   the answers differ the test says why.
//!
//! Not reproduced: the `ratelimit.localcache.*` gauges (freecache's hit and miss
//! counts), which the engine does not keep; the local cache's effect is checked through
//! `over_limit_with_local_cache` and the cache's entries instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tollgate::time::{ManualClock, Nanos};
use tollgate_rls::backend::{Backend, BackendOptions, StoreKind};
use tollgate_rls::domains::{DomainDir, Domains};
use tollgate_rls::engine::Engine;
use tollgate_rls::health::Health;
use tollgate_rls::reload::{LoadOutcome, Reloader};
use tollgate_rls::settings::{Counting, DomainsSource, EngineOptions};
use tollgate_rls::stats::Stats;

// The Go test's config files, as they are at envoyproxy/ratelimit f2fb157.
const BASIC_YAML: &str = "\
domain: basic
descriptors:
  - key: key1
    rate_limit:
      unit: second
      requests_per_unit: 50

  - key: key1_local
    rate_limit:
      unit: second
      requests_per_unit: 50

  - key: one_per_minute
    rate_limit:
      unit: minute
      requests_per_unit: 1
";

const ANOTHER_YAML: &str = "\
domain: another
descriptors:
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20

  - key: key3
    rate_limit:
      unit: hour
      requests_per_unit: 10

  - key: key2_local
    rate_limit:
      unit: minute
      requests_per_unit: 20

  - key: key3_local
    rate_limit:
      unit: hour
      requests_per_unit: 10

  - key: key4
    rate_limit:
      unit: day
      requests_per_unit: 20

  - key: key4_local
    rate_limit:
      unit: day
      requests_per_unit: 20
";

const SHARE_THRESHOLD_YAML: &str = "\
domain: share-threshold-test
descriptors:
  # Test case 1: share_threshold: true - files/* should share threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  - key: files_no_share
    value: files_no_share/*
    rate_limit:
      unit: hour
      requests_per_unit: 10
";

/// `ratelimit/reload.yaml`: the template the reload test copies into `config/`.
const RELOAD_YAML: &str = "\
domain: reload
descriptors:
  - key: key1
    rate_limit:
      unit: second
      requests_per_unit: 50

  - key: block
    rate_limit:
      unit: second
      requests_per_unit: 0

  - key: one_per_minute
    rate_limit:
      unit: minute
      requests_per_unit: 1
";

/// The scenarios' Unix time: 20 s into a minute, 800 s into an hour, 80 000 s into a
/// day, so that no window ends while a scenario runs (the Go test's known flakiness).
const T0: u64 = 1_700_000_000;
const RESET_SECOND: i64 = 1;
const RESET_MINUTE: i64 = 40;
const RESET_HOUR: i64 = 2_800;
const RESET_DAY: i64 = 6_400;

/// The Go test's settings (`makeSimpleRedisSettings` and its variants).
#[derive(Clone, Copy, Debug, Default)]
struct Settings {
    /// Tollgate's all-or-nothing counting instead of Go's.
    all_or_nothing: bool,
    /// `REDIS_PERSECOND=true`: SECOND limits count in a store of their own.
    per_second: bool,
    /// `LOCAL_CACHE_SIZE_IN_BYTES=1000`.
    local_cache: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`.
    stop: bool,
    /// `CACHE_KEY_PREFIX=prefix:`.
    prefix: bool,
}

/// The Go runtime layout, written out: `runtime/current/ratelimit/config/*.yaml` and
/// the reload template beside `config/`.
fn runtime() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let ratelimit = root.path().join("runtime/current/ratelimit");
    let config = ratelimit.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("basic.yaml"), BASIC_YAML).unwrap();
    std::fs::write(config.join("another.yaml"), ANOTHER_YAML).unwrap();
    std::fs::write(config.join("share_threshold.yaml"), SHARE_THRESHOLD_YAML).unwrap();
    std::fs::write(ratelimit.join("reload.yaml"), RELOAD_YAML).unwrap();
    (root, config)
}

/// An engine as the Go runner would build it from `settings`, on a manual clock at
/// [`T0`].
struct Rls {
    engine: Arc<Engine>,
    clock: ManualClock,
    local_cache: bool,
}

impl Rls {
    fn start(settings: Settings, domains: Domains) -> Rls {
        let clock = ManualClock::starting_at(Nanos::from_duration(Duration::from_secs(T0)));
        let backend_options = BackendOptions {
            per_second: settings
                .per_second
                .then_some(StoreKind::Memory { max_keys: 10_000 }),
            key_prefix: if settings.prefix {
                "prefix:".into()
            } else {
                "ratelimit".into()
            },
            local_cache_bytes: if settings.local_cache { 1_000 } else { 0 },
            ..BackendOptions::memory()
        };
        let backend = Backend::memory_with_clock(&backend_options, clock.clone()).unwrap();
        let mut options = EngineOptions::default();
        options.counting = if settings.all_or_nothing {
            Counting::AllOrNothing
        } else {
            Counting::Each
        };
        options.stop_cache_key_increment_when_overlimit = settings.stop;
        let engine = Engine::new(domains, backend, options, Arc::new(Stats::new(10_000)))
            .with_clock(clock.clone());
        Rls {
            engine: Arc::new(engine),
            clock,
            local_cache: settings.local_cache,
        }
    }

    fn with_go_configs(settings: Settings) -> Rls {
        let (_root, config) = runtime();
        Rls::start(settings, Domains::load_dir(&config).unwrap())
    }

    async fn ask(&self, domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitResponse {
        self.engine
            .should_rate_limit(&request(domain, descriptors, 1))
            .await
            .unwrap()
    }

    /// A counter by its Go statsd name; 0 when never counted.
    fn stat(&self, name: &str) -> u64 {
        self.engine
            .stats()
            .statsd_counters()
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// `ratelimit.service.rate_limit.<full_key>.<suffix>`.
    fn limit_stat(&self, full_key: &str, suffix: &str) -> u64 {
        self.stat(&format!("ratelimit.service.rate_limit.{full_key}.{suffix}"))
    }

    /// Go's `getCacheKey`: local-cache runs use keys of their own.
    fn k(&self, key: &str) -> String {
        if self.local_cache {
            format!("{key}_local")
        } else {
            key.to_owned()
        }
    }

    fn local_cache_entries(&self) -> usize {
        self.engine
            .backend()
            .local_cache()
            .map_or(0, |cache| cache.len())
    }
}

/// Go's `common.NewRateLimitRequest`.
fn request(domain: &str, descriptors: &[&[(&str, &str)]], hits_addend: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| RateLimitDescriptor {
                entries: entries
                    .iter()
                    .map(|(key, value)| Entry {
                        key: (*key).to_owned(),
                        value: (*value).to_owned(),
                    })
                    .collect(),
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend,
    }
}

/// Go's `newDescriptorStatus`.
fn status(code: Code, rpu: u32, unit: Unit, remaining: u32, reset: i64) -> DescriptorStatus {
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: rpu,
            unit: unit as i32,
        }),
        limit_remaining: remaining,
        duration_until_reset: Some(PbDuration {
            seconds: reset,
            nanos: 0,
        }),
        ..DescriptorStatus::default()
    }
}

/// A descriptor no limit applies to.
fn no_limit() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        ..DescriptorStatus::default()
    }
}

fn response(code: Code, statuses: Vec<DescriptorStatus>) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code as i32,
        statuses,
        ..RateLimitResponse::default()
    }
}

/// Go's `testBasicBaseConfig`, steps 1 to 5.
async fn base(settings: Settings) {
    let rls = Rls::with_go_configs(settings);
    let each = !settings.all_or_nothing;
    let local = settings.local_cache;
    let (key1, key2, key3, key4) = (rls.k("key1"), rls.k("key2"), rls.k("key3"), rls.k("key4"));

    // Step 1: an unknown domain is not an error: no limit.
    let answer = rls.ask("foo", &[&[(&rls.k("hello"), "world")]]).await;
    assert_eq!(answer, response(Code::Ok, vec![no_limit()]));
    assert_eq!(
        rls.stat("ratelimit.service.rate_limit.foo.domain_not_found"),
        1
    );

    // Step 2: 50 a second.
    let answer = rls.ask("basic", &[&[(&key1, "foo")]]).await;
    assert_eq!(
        answer,
        response(
            Code::Ok,
            vec![status(Code::Ok, 50, Unit::Second, 49, RESET_SECOND)]
        )
    );
    assert_eq!(rls.limit_stat(&format!("basic.{key1}"), "total_hits"), 1);

    // Step 3: 20 a minute, 25 times: OVER_LIMIT from the 21st; with the local cache,
    // the 22nd on are answered without the store.
    let full2 = format!("another.{key2}");
    for i in 0..25u32 {
        let answer = rls.ask("another", &[&[(&key2, "r1")]]).await;
        let expected = if i < 20 {
            response(
                Code::Ok,
                vec![status(Code::Ok, 20, Unit::Minute, 19 - i, RESET_MINUTE)],
            )
        } else {
            response(
                Code::OverLimit,
                vec![status(Code::OverLimit, 20, Unit::Minute, 0, RESET_MINUTE)],
            )
        };
        assert_eq!(answer, expected, "step 3, i={i}, {settings:?}");
        let i = u64::from(i);
        assert_eq!(rls.limit_stat(&full2, "total_hits"), i + 1, "i={i}");
        assert_eq!(
            rls.limit_stat(&full2, "over_limit"),
            if i >= 20 { i - 19 } else { 0 },
            "i={i}"
        );
        assert_eq!(
            rls.limit_stat(&full2, "over_limit_with_local_cache"),
            if local && i >= 20 { i - 20 } else { 0 },
            "i={i}"
        );
    }
    // Go's arithmetic on the same hits (base_limiter.go): near the limit from 17 (16 =
    // floor(20 × 0.8)) to 20, within the limit 20 times.
    assert_eq!(rls.limit_stat(&full2, "near_limit"), 4);
    assert_eq!(rls.limit_stat(&full2, "within_limit"), 20);
    assert_eq!(rls.local_cache_entries(), usize::from(local));

    // Step 4: two keys in one request, key2 (20 a minute) and key3 (10 an hour).
    let full3 = format!("another.{key3}");
    for i in 0..15u32 {
        let answer = rls
            .ask("another", &[&[(&key2, "r2")], &[(&key3, "r2")]])
            .await;
        let over = i >= 10;
        let remaining2 = if !over {
            19 - i
        } else if !each {
            // All-or-nothing: key3 refuses the request, so key2 is not charged: its
            // count stays at 10 (Go charges it: 19 - i), and its status says so, as
            // Go's STOP reports a descriptor it did not increment.
            10
        } else if settings.stop {
            // STOP: key3 would go over, so only key3 is incremented; Go reports
            // key2's unchanged count.
            10
        } else {
            19 - i
        };
        let expected = response(
            if over { Code::OverLimit } else { Code::Ok },
            vec![
                status(Code::Ok, 20, Unit::Minute, remaining2, RESET_MINUTE),
                if over {
                    status(Code::OverLimit, 10, Unit::Hour, 0, RESET_HOUR)
                } else {
                    status(Code::Ok, 10, Unit::Hour, 9 - i, RESET_HOUR)
                },
            ],
        );
        assert_eq!(answer, expected, "step 4, i={i}, {settings:?}");
        let i = u64::from(i);
        assert_eq!(rls.limit_stat(&full2, "total_hits"), i + 26, "i={i}");
        assert_eq!(rls.limit_stat(&full2, "over_limit"), 5, "i={i}");
        assert_eq!(
            rls.limit_stat(&full2, "over_limit_with_local_cache"),
            if local { 4 } else { 0 },
            "i={i}"
        );
        assert_eq!(rls.limit_stat(&full3, "total_hits"), i + 1, "i={i}");
        assert_eq!(
            rls.limit_stat(&full3, "over_limit"),
            if i >= 10 { i - 9 } else { 0 },
            "i={i}"
        );
        assert_eq!(
            rls.limit_stat(&full3, "over_limit_with_local_cache"),
            if local && i >= 10 { i - 10 } else { 0 },
            "i={i}"
        );
    }
    // Go's arithmetic: key2 never nears 16 in this step (at most 15); key3 is near at 9
    // and 10 (8 = floor(10 × 0.8)), within 10 times, over 5 times.
    assert_eq!(rls.limit_stat(&full2, "near_limit"), 4);
    assert_eq!(rls.limit_stat(&full2, "within_limit"), 35);
    assert_eq!(rls.limit_stat(&full3, "near_limit"), 2);
    assert_eq!(rls.limit_stat(&full3, "within_limit"), 10);
    // key2's step-3 key and key3's key.
    assert_eq!(rls.local_cache_entries(), if local { 2 } else { 0 });

    // Step 5: duration_until_reset counts down (20 a day).
    let first = rls.ask("another", &[&[(&key4, "durTest")]]).await;
    rls.clock.advance(Duration::from_secs(2));
    let second = rls.ask("another", &[&[(&key4, "durTest")]]).await;
    assert_eq!(
        first,
        response(
            Code::Ok,
            vec![status(Code::Ok, 20, Unit::Day, 19, RESET_DAY)]
        )
    );
    assert_eq!(
        second,
        response(
            Code::Ok,
            vec![status(Code::Ok, 20, Unit::Day, 18, RESET_DAY - 2)]
        )
    );

    assert_eq!(
        rls.stat("ratelimit.service.call.should_rate_limit.redis_error"),
        0
    );
    assert_eq!(
        rls.stat("ratelimit.service.call.should_rate_limit.service_error"),
        0
    );
}

/// Every combination of the Go test's Redis settings (per-second store, local cache)
/// with `stop` as given.
fn matrix(all_or_nothing: bool, stops: &[bool]) -> Vec<Settings> {
    let mut out = Vec::new();
    for per_second in [false, true] {
        for local_cache in [false, true] {
            for &stop in stops {
                out.push(Settings {
                    all_or_nothing,
                    per_second,
                    local_cache,
                    stop,
                    prefix: false,
                });
            }
        }
    }
    out
}

/// TestBasicConfig: WithoutPerSecondRedis, WithPerSecondRedis and their
/// …WithLocalCache variants (also what TestBasicAuthConfig, TestBasicTLSConfig,
/// TestBasicAuthConfigWithRedisCluster, TestBasicAuthConfigWithRedisSentinel,
/// TestBasicConfigMemcache, TestMultiNodeMemcache and TestXdsProviderBasicConfig run),
/// in Go's counting.
#[tokio::test]
async fn basic_config_counts_as_go() {
    for settings in matrix(false, &[false]) {
        base(settings).await;
    }
}

/// TestBasicConfig: …WithstopCacheKeyIncrementWhenOverlimitConfig and
/// …WithLocalCacheAndstopCacheKeyIncrementWhenOverlimitConfig, in Go's counting.
#[tokio::test]
async fn basic_config_stop_cache_key_increment_counts_as_go() {
    for settings in matrix(false, &[true]) {
        base(settings).await;
    }
}

/// TestBasicConfig/WithoutPerSecondRedisWithCachePrefix (and
/// TestBasicConfigMemcache/MemcacheWithPrefix): the prefix changes no answer.
#[tokio::test]
async fn basic_config_with_cache_prefix_counts_as_go() {
    base(Settings {
        prefix: true,
        ..Settings::default()
    })
    .await;
}

/// TestBasicConfig's steps in tollgate's all-or-nothing counting: identical but for
/// step 4, where key2 is not charged once key3 refuses the request.
#[tokio::test]
async fn basic_config_all_or_nothing() {
    for settings in matrix(true, &[false, true]) {
        base(settings).await;
    }
}

/// Go's TestShareThreshold/WithoutPerSecondRedis: values under a `share_threshold`
/// pattern share one count; values under a plain pattern count apart.
#[tokio::test]
async fn share_threshold() {
    for all_or_nothing in [false, true] {
        let rls = Rls::with_go_configs(Settings {
            all_or_nothing,
            ..Settings::default()
        });
        let domain = "share-threshold-test";
        // Step 1: ten hits on files/a.pdf (a fresh store: all within the limit).
        for i in 0..10u32 {
            let answer = rls.ask(domain, &[&[("files", "files/a.pdf")]]).await;
            assert_eq!(
                answer,
                response(
                    Code::Ok,
                    vec![status(Code::Ok, 10, Unit::Hour, 9 - i, RESET_HOUR)]
                ),
                "i={i}"
            );
        }
        // Step 2: files/b.csv shares files/a.pdf's count.
        let answer = rls.ask(domain, &[&[("files", "files/b.csv")]]).await;
        assert_eq!(
            answer,
            response(
                Code::OverLimit,
                vec![status(Code::OverLimit, 10, Unit::Hour, 0, RESET_HOUR)]
            )
        );
        // Step 3: each value under files_no_share/* counts on its own.
        for i in 0..10 {
            let value = format!("files_no_share/{T0}-{i}");
            let answer = rls.ask(domain, &[&[("files_no_share", &value)]]).await;
            assert_eq!(
                answer,
                response(
                    Code::Ok,
                    vec![status(Code::Ok, 10, Unit::Hour, 9, RESET_HOUR)]
                ),
                "i={i}"
            );
        }
        // One stats key per config entry (Go's FullKey: key_value of the entry).
        assert_eq!(
            rls.limit_stat("share-threshold-test.files_files/*", "total_hits"),
            11
        );
        assert_eq!(
            rls.limit_stat("share-threshold-test.files_files/*", "over_limit"),
            1
        );
        assert_eq!(
            rls.limit_stat(
                "share-threshold-test.files_no_share_files_no_share/*",
                "total_hits"
            ),
            10
        );
    }
}

/// Go's testConfigReload (TestBasicReloadConfig/ReloadWithoutWatchRoot,
/// TestXdsProviderBasicConfigReload) on the engine: a domain that appears is used at
/// once, and one that goes away answers "no limit" again.
#[tokio::test]
async fn reload_swaps_domains() {
    for all_or_nothing in [false, true] {
        let (root, config) = runtime();
        let rls = Rls::start(
            Settings {
                all_or_nothing,
                ..Settings::default()
            },
            Domains::load_dir(&config).unwrap(),
        );
        // Step 1: the reload domain does not exist yet.
        let answer = rls.ask("reload", &[&[("block", "foo")]]).await;
        assert_eq!(answer, response(Code::Ok, vec![no_limit()]));
        assert_eq!(
            rls.stat("ratelimit.service.rate_limit.reload.domain_not_found"),
            1
        );

        // Step 2: reload.yaml copied into config/.
        copy_reload_template(root.path(), &config);
        rls.engine.set_domains(Domains::load_dir(&config).unwrap());

        // Step 3.
        let answer = rls.ask("reload", &[&[("key1", "foo")]]).await;
        assert_eq!(
            answer,
            response(
                Code::Ok,
                vec![status(Code::Ok, 50, Unit::Second, 49, RESET_SECOND)]
            )
        );
        // The template's blocking limit (0 a second) is in force too.
        let answer = rls.ask("reload", &[&[("block", "foo")]]).await;
        assert_eq!(
            answer,
            response(
                Code::OverLimit,
                vec![status(Code::OverLimit, 0, Unit::Second, 0, RESET_SECOND)]
            )
        );

        // Step 4: the file deleted.
        std::fs::remove_file(config.join("reload.yaml")).unwrap();
        rls.engine.set_domains(Domains::load_dir(&config).unwrap());
        let answer = rls.ask("reload", &[&[("key1", "foo")]]).await;
        assert_eq!(answer, response(Code::Ok, vec![no_limit()]));
        assert_eq!(
            rls.stat("ratelimit.service.rate_limit.reload.domain_not_found"),
            2
        );
        // The other domains kept their counts across both swaps.
        let answer = rls.ask("basic", &[&[("one_per_minute", "x")]]).await;
        assert_eq!(answer.overall_code, Code::Ok as i32);
        let answer = rls.ask("basic", &[&[("one_per_minute", "x")]]).await;
        assert_eq!(answer.overall_code, Code::OverLimit as i32);
    }
}

/// testConfigReload as the server runs it: the [`Reloader`] over the Go runtime
/// directory, with the server's `config_load_success` count. Copying the file in and
/// deleting it each count one load.
#[tokio::test]
async fn reload_through_the_directory_counts_loads() {
    let (root, config) = runtime();
    let rls = Rls::start(Settings::default(), Domains::default());
    let stats = rls.engine.stats().clone();
    let mut reloader = Reloader::new(
        DomainDir::new(DomainsSource::dir(&config), false),
        rls.engine.clone(),
        Health::new(false),
    )
    .with_on_load(Arc::new(move |outcome: &LoadOutcome| {
        stats.config_load(outcome.errors == 0);
    }));
    let loads = || rls.stat("ratelimit.service.config_load_success");
    reloader.load().unwrap();
    assert_eq!(loads(), 1);
    assert_eq!(rls.engine.domains().len(), 3);

    let answer = rls.ask("reload", &[&[("block", "foo")]]).await;
    assert_eq!(answer, response(Code::Ok, vec![no_limit()]));

    copy_reload_template(root.path(), &config);
    reloader.reload_if_changed().unwrap();
    assert_eq!(loads(), 2);
    let answer = rls.ask("reload", &[&[("key1", "foo")]]).await;
    assert_eq!(
        answer,
        response(
            Code::Ok,
            vec![status(Code::Ok, 50, Unit::Second, 49, RESET_SECOND)]
        )
    );

    // Nothing changed: no load.
    reloader.reload_if_changed().unwrap();
    assert_eq!(loads(), 2);

    // Deleting a file triggers a load.
    std::fs::remove_file(config.join("reload.yaml")).unwrap();
    reloader.reload_if_changed().unwrap();
    assert_eq!(loads(), 3);
    assert_eq!(rls.stat("ratelimit.service.config_load_error"), 0);
    let answer = rls.ask("reload", &[&[("key1", "foo")]]).await;
    assert_eq!(answer, response(Code::Ok, vec![no_limit()]));
}

fn copy_reload_template(root: &Path, config: &Path) {
    std::fs::copy(
        root.join("runtime/current/ratelimit/reload.yaml"),
        config.join("reload.yaml"),
    )
    .unwrap();
}
