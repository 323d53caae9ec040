//! Rules from a YAML file (feature `config`): parsing, every error with its line,
//! matching (exact > wildcard > bare key, the depth rule, unlimited, replaces), and
//! decisions over a memory store on virtual time (all-or-nothing, shadow mode,
//! windows aligned to the Unix epoch).
#![cfg(feature = "config")]

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tollgate::config::{
    ConfigFileError, ConfigFileErrorKind, ConfigLimiter, Descriptor, DescriptorMatch, RuleSet, Unit,
};
use tollgate::store::{MemoryStore, Reply, Request, Rule, RuleKind, Store, StoreError};
use tollgate::time::ManualClock;
use tollgate::{ConfigError, Denied, KeyedConfig};

fn block<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

fn rules(yaml: &str) -> RuleSet {
    RuleSet::from_yaml(yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// The error of `yaml`, with its line.
fn error(yaml: &str) -> (ConfigFileError, usize) {
    let e = RuleSet::from_yaml(yaml).expect_err("the file should be refused");
    let line = e.line().unwrap_or_else(|| panic!("no line in {e}"));
    (e, line)
}

fn d(entries: &[(&str, &str)]) -> Descriptor {
    entries.iter().copied().collect()
}

/// The names of the limits `descriptors` match.
fn names(rules: &RuleSet, descriptors: &[Descriptor]) -> Vec<String> {
    rules
        .limits_for(descriptors)
        .limits()
        .iter()
        .map(|m| m.limit().name().to_owned())
        .collect()
}

fn memory(clock: &ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(KeyedConfig::new(1_000), "rl", clock.clone()).unwrap()
}

/// A whole minute of Unix time (1_700_000_040 is a multiple of 60).
const MINUTE_EDGE: Duration = Duration::from_secs(1_700_000_040);

// ---------------------------------------------------------------- parsing

#[test]
fn the_example_file_parses() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rules.yaml");
    let rules = RuleSet::from_file(path).unwrap();
    assert_eq!(rules.domain(), "api");
    let names: Vec<_> = rules.limits().iter().map(|l| l.name()).collect();
    assert_eq!(names, ["per_client", "login", "search", "export_daily"]);
    let login = rules.limit("login").unwrap();
    assert_eq!(login.algorithm(), RuleKind::Gcra);
    assert_eq!(login.unit(), Unit::Minute);
    assert!(rules.limit("export_daily").unwrap().is_shadow());
}

#[test]
fn every_unit_and_algorithm_parses() {
    let rules = rules(
        "domain: d
descriptors:
  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: MINUTE, requests_per_unit: 2, algorithm: gcra, burst: 4}}
  - {key: c, rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding_window}}
  - {key: d, rate_limit: {unit: day, requests_per_unit: 4, algorithm: sliding_log}}
  - {key: e, rate_limit: {unit: week, requests_per_unit: 5, algorithm: leaky_bucket, burst: 2}}
  - {key: f, rate_limit: {unit: month, requests_per_unit: 6, algorithm: fixed_window}}
  - {key: g, rate_limit: {unit: year, requests_per_unit: 7}}
",
    );
    let got: Vec<_> = rules
        .limits()
        .iter()
        .map(|l| {
            (
                l.name(),
                l.unit(),
                l.algorithm(),
                l.rule().unwrap().kind().name(),
                l.rule().unwrap().capacity(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a", Unit::Second, RuleKind::FixedWindow, "fixed_window", 1),
            ("b", Unit::Minute, RuleKind::Gcra, "gcra", 4),
            (
                "c",
                Unit::Hour,
                RuleKind::SlidingCounter,
                "sliding_counter",
                3
            ),
            ("d", Unit::Day, RuleKind::SlidingLog, "sliding_log", 4),
            ("e", Unit::Week, RuleKind::LeakyBucket, "leaky_bucket", 2),
            ("f", Unit::Month, RuleKind::FixedWindow, "fixed_window", 6),
            ("g", Unit::Year, RuleKind::FixedWindow, "fixed_window", 7),
        ]
    );
    assert_eq!(Unit::Year.duration(), Duration::from_secs(365 * 86_400));
}

/// The rules file called the sliding counter `sliding_window` where the store
/// called it `sliding_counter`; both names now read as the one kind, and its keys
/// carry the store's name.
#[test]
fn sliding_window_is_an_alias_of_sliding_counter() {
    let rules = rules(
        "domain: d
descriptors:
  - {key: old, rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_window}}
  - {key: new, rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_counter}}
",
    );
    let [old, new] = [&rules.limits()[0], &rules.limits()[1]];
    assert_eq!(old.algorithm(), RuleKind::SlidingCounter);
    assert_eq!(old.algorithm(), new.algorithm());
    assert_eq!(old.rule().unwrap(), new.rule().unwrap());
    let matched = rules.limits_for(&[d(&[("old", "x")])]);
    assert_eq!(matched.limits()[0].key(), "sliding_counter:60|old=x");
}

#[test]
fn unnamed_limits_are_named_by_their_path() {
    let rules = rules(
        "domain: d
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        value: /api/*
        rate_limit: {unit: second, requests_per_unit: 1}
",
    );
    let limit = &rules.limits()[0];
    assert_eq!(limit.name(), "remote_address.path=/api/*");
    assert!(!limit.is_named());
    // As envoy: an empty name is no name.
    let empty = RuleSet::from_yaml(
        "domain: d\ndescriptors:\n  - {key: a, rate_limit: {name: '', unit: second, requests_per_unit: 1}}\n",
    )
    .unwrap();
    assert!(!empty.limits()[0].is_named());
    assert_eq!(empty.limits()[0].name(), "a");
    assert_eq!(rules.location_of(limit).unwrap().line(), 7);
}

#[test]
fn numbers_and_booleans_are_values_too() {
    let rules = rules(
        "domain: d
descriptors:
  - {key: status, value: 404, rate_limit: {unit: second, requests_per_unit: 1}}
",
    );
    assert_eq!(names(&rules, &[d(&[("status", "404")])]), ["status=404"]);
}

// ---------------------------------------------------------------- errors

#[test]
fn yaml_syntax_errors_name_their_line() {
    let (e, line) = error("domain: d\ndescriptors:\n  - key: a\n   value: b\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Format(_)));
    assert_eq!(line, 4);
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    let (e, line) = error("domain: d\nversion: 2\n");
    assert_eq!(line, 2);
    assert!(e.to_string().contains("unknown field `version`"), "{e}");

    // envoy's keys, each where it has a meaning: `shadow_mode` is a descriptor's.
    let (e, line) = error(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, shadow_mode: true}\n",
    );
    assert_eq!(line, 4);
    assert!(e.to_string().contains("unknown field `shadow_mode`"), "{e}");

    let (_, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 1
      requests_per_second: 1
",
    );
    assert_eq!(line, 7);

    let (_, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 1
      replaces: [{name: x, why: y}]
",
    );
    assert_eq!(line, 7);
}

#[test]
fn unknown_units_and_algorithms_are_refused() {
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: 1
",
    );
    assert_eq!(line, 5);
    assert_eq!(e.location().unwrap().column(), 13);
    assert!(
        e.to_string()
            .contains("invalid rate limit unit 'fortnight', expected one of second"),
        "{e}"
    );

    let (_, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 1
      algorithm: token_bucket
",
    );
    assert_eq!(line, 7);
}

/// envoy's service reads `requests_per_unit: 0`, or none, as a limit nothing passes
/// (users block with it): the limit is read, and blocks.
#[test]
fn zero_and_missing_counts_block_and_negative_ones_are_refused() {
    let rules = rules(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: b
    descriptors:
      - key: c
        rate_limit:
          unit: second
",
    );
    assert!(rules.limits().iter().all(|l| l.is_blocking()));
    assert!(rules.limits().iter().all(|l| l.requests_per_unit() == 0));

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: -3}
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::Limit(ConfigError::Negative {
            parameter: "requests_per_unit",
            ..
        })
    ));
    assert_eq!(line, 4);

    // A bucket that never refills is not a blocking limit.
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 0
      algorithm: gcra
      burst: 5
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::Limit(ConfigError::Zero {
            parameter: "requests_per_unit"
        })
    ));
    assert_eq!(line, 6);

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit:
          requests_per_unit: 3
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::MissingLimit("unit")
    ));
    assert_eq!(line, 7);

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1.5}
",
    );
    assert!(matches!(e.kind(), ConfigFileErrorKind::Format(_)));
    assert_eq!(line, 4);
}

/// Regression: a limit of 0 was refused at load; envoy blocks with it. It is denied for
/// good without asking the store, and consumes nothing from the request's other limits.
#[test]
fn blocking_limits_deny_for_good_without_the_store() {
    let clock = ManualClock::new();
    let rules = rules(
        "domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: user
    value: mallory
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 0}
",
    );
    let limiter = ConfigLimiter::new(rules, memory(&clock)).unwrap();
    let mallory = [d(&[("user", "mallory")])];
    let decision = block(limiter.check_at(&mallory, 1, MINUTE_EDGE)).unwrap();
    assert!(matches!(
        decision.decision(),
        Some(Err(Denied::Insufficient(i))) if i.capacity() == 0
    ));
    assert!(limiter.store().is_empty(), "the store was asked");
    let both = [d(&[("user", "mallory")]), d(&[("user", "ann")])];
    assert!(
        !block(limiter.check_at(&both, 1, MINUTE_EDGE))
            .unwrap()
            .is_admitted()
    );
    // Ann's limit took nothing from the denied request.
    let ann = [d(&[("user", "ann")])];
    for _ in 0..2 {
        assert!(
            block(limiter.check_at(&ann, 1, MINUTE_EDGE))
                .unwrap()
                .is_admitted()
        );
    }
    // A blocking shadow limit reports, never denies.
    let shadowed = [d(&[("user", "bob")]), d(&[("path", "/")])];
    let decision = block(limiter.check_at(&shadowed, 1, MINUTE_EDGE)).unwrap();
    assert!(decision.is_admitted());
    assert!(decision.shadow_denial().is_some());
}

#[test]
fn counts_the_algorithm_cannot_hold_are_refused() {
    // An epoch-aligned window of one second holds at most 2^29 - 1 permits.
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::Limit(ConfigError::OutOfRange {
            parameter: "requests_per_unit",
            ..
        })
    ));
    assert_eq!(line, 6);

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 5000000
      algorithm: sliding_log
",
    );
    assert!(matches!(e.kind(), ConfigFileErrorKind::Limit(_)));
    assert_eq!(line, 6);
}

#[test]
fn bursts_apply_to_buckets_only_and_must_be_positive() {
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 5
      burst: 10
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::BurstNotApplicable(RuleKind::FixedWindow)
    ));
    assert_eq!(line, 7);

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: gcra
      burst: 0
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::Limit(ConfigError::Zero { parameter: "burst" })
    ));
    assert_eq!(line, 8);
}

#[test]
fn empty_keys_values_and_domains_are_refused() {
    let (e, line) = error("domain: d\ndescriptors:\n  - key: a\n  - key: ''\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Empty("key")));
    assert_eq!(line, 4);

    // As envoy: an empty value is no value.
    let empty_value = rules(
        "domain: d\ndescriptors:\n  - key: a\n    value: ''\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    assert_eq!(names(&empty_value, &[d(&[("a", "x")])]), ["a"]);

    let (e, line) = error("\ndomain: ''\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Domain(_)));
    assert_eq!(line, 2);

    let (e, line) = error("domain: 'a{b}'\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Domain(_)));
    assert_eq!(line, 1);

    let e = RuleSet::from_yaml("descriptors: []\n").unwrap_err();
    assert!(e.to_string().contains("missing field `domain`"), "{e}");
}

#[test]
fn duplicate_siblings_are_refused_at_the_second() {
    let (e, line) = error(
        "domain: d
descriptors:
  - key: path
    value: /a
  - key: path
    value: /b
  - key: path
    value: /a
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::DuplicateDescriptor { key, value: Some(v), composite }
            if key == "path" && v == "/a" && composite == "d.path_/a"
    ));
    assert_eq!(line, 7);
    assert_eq!(
        e.to_string(),
        "line 7 column 5: duplicate descriptor composite key 'd.path_/a'"
    );

    let (e, line) = error(
        "domain: d
descriptors:
  - key: user
    descriptors:
      - key: path
      - key: path
        value: /x*
      - key: path
        value: /x*
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::DuplicateDescriptor { .. }
    ));
    assert_eq!(line, 8);

    let (e, line) = error(
        "domain: d
descriptors:
  - {key: user}
  - {key: user}
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::DuplicateDescriptor { value: None, .. }
    ));
    assert_eq!(line, 4);

    // The same key and value under different parents are not siblings.
    rules(
        "domain: d
descriptors:
  - {key: a, descriptors: [{key: path, value: /x}]}
  - {key: b, descriptors: [{key: path, value: /x}]}
",
    );
}

/// envoy accepts two limits of one name (`replaces` then drops both) and a `replaces`
/// naming no limit of the file (it may name one of a merged file).
#[test]
fn names_may_repeat_and_replaces_may_name_nothing() {
    let rules = rules(
        "domain: d
descriptors:
  - key: a
    rate_limit: {name: n, unit: second, requests_per_unit: 1}
  - key: b
    descriptors:
      - key: c
        rate_limit:
          name: n
          unit: second
          requests_per_unit: 1
  - key: x
    rate_limit:
      unit: second
      requests_per_unit: 1
      replaces:
        - name: n
        - name: nowhere
",
    );
    let both = [d(&[("a", "1")]), d(&[("b", "1"), ("c", "2")])];
    assert_eq!(names(&rules, &both), ["n", "n"]);
    let all = [
        d(&[("a", "1")]),
        d(&[("b", "1"), ("c", "2")]),
        d(&[("x", "1")]),
    ];
    assert_eq!(names(&rules, &all), ["x"]);
}

#[test]
fn replaces_must_be_named_and_not_name_itself() {
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      name: a
      unit: second
      requests_per_unit: 1
      replaces: [{name: a}]
",
    );
    assert!(matches!(e.kind(), ConfigFileErrorKind::ReplacesItself(_)));
    assert_eq!(line, 8);

    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unit: second
      requests_per_unit: 1
      replaces:
        - name:
",
    );
    assert!(matches!(e.kind(), ConfigFileErrorKind::Empty("replaces")));
    assert_eq!(line, 8);
    assert!(
        e.to_string()
            .ends_with("should not have an empty replaces entry"),
        "{e}"
    );
}

#[test]
fn unlimited_blocks_replace_and_can_be_replaced_harmlessly() {
    // Replacing an unlimited block is allowed, and changes nothing.
    let rules = rules(
        "domain: d
descriptors:
  - key: a
    rate_limit: {name: free, unlimited: true}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: free}]}
",
    );
    assert_eq!(names(&rules, &[d(&[("b", "x")])]), ["b"]);
    let matched = rules.limits_for(&[d(&[("a", "x")]), d(&[("b", "x")])]);
    assert!(matched.has_unlimited());
}

#[test]
fn unlimited_takes_no_count() {
    let (e, line) = error(
        "domain: d
descriptors:
  - key: a
    rate_limit:
      unlimited: true
      unit: second
",
    );
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::UnlimitedWithLimit("unit")
    ));
    assert_eq!(line, 6);
    assert!(
        e.to_string()
            .ends_with("should not specify rate limit unit when unlimited"),
        "{e}"
    );
    // envoy ignores a count beside `unlimited`.
    let rules = rules(
        "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unlimited: true, requests_per_unit: 5}}\n",
    );
    assert!(rules.limits_for(&[d(&[("a", "x")])]).has_unlimited());
}

#[test]
fn file_errors_carry_the_path() {
    let e = RuleSet::from_file("/nonexistent/rules.yaml").unwrap_err();
    assert!(matches!(e.kind(), ConfigFileErrorKind::Io(_)));
    assert_eq!(e.path().unwrap().to_str(), Some("/nonexistent/rules.yaml"));

    let dir = std::env::temp_dir().join(format!("tollgate-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "domain: d\ndescriptors:\n  - key: a\n    colour: red\n",
    )
    .unwrap();
    let e = RuleSet::from_file(&path).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:4:5: ", path.display())),
        "{e}"
    );
}

// ---------------------------------------------------------------- matching

const PRIORITIES: &str = "domain: d
descriptors:
  - key: path
    rate_limit: {name: any_path, unit: second, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {name: api, unit: second, requests_per_unit: 50}
  - key: path
    value: /api/admin/*
    rate_limit: {name: admin, unit: second, requests_per_unit: 5}
  - key: path
    value: /api/login
    rate_limit: {name: login, unit: second, requests_per_unit: 1}
";

#[test]
fn exact_values_win_over_patterns_and_patterns_over_bare_keys() {
    let rules = rules(PRIORITIES);
    let of = |path: &str| names(&rules, &[d(&[("path", path)])]);
    assert_eq!(of("/api/login"), ["login"]);
    assert_eq!(of("/api/orders"), ["api"]);
    // As envoy: the first pattern of the file that matches, not the longest.
    assert_eq!(of("/api/admin/users"), ["api"], "the first pattern wins");
    assert_eq!(of("/static"), ["any_path"]);
    assert!(names(&rules, &[d(&[("method", "GET")])]).is_empty());
}

#[test]
fn bare_keys_count_each_value_apart() {
    let rules = rules(PRIORITIES);
    let matched = rules.limits_for(&[d(&[("path", "/a")]), d(&[("path", "/b")])]);
    let keys: Vec<_> = matched.limits().iter().map(|m| m.key()).collect();
    assert_eq!(keys, ["fixed_window:1|path=/a", "fixed_window:1|path=/b"]);
    // Equal descriptors count once.
    let matched = rules.limits_for(&[d(&[("path", "/a")]), d(&[("path", "/a")])]);
    assert_eq!(matched.limits().len(), 1);
}

#[test]
fn limits_apply_at_the_depth_of_the_last_entry() {
    let rules = rules(
        "domain: d
descriptors:
  - key: remote_address
    rate_limit: {name: client, unit: second, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /login
        rate_limit: {name: client_login, unit: minute, requests_per_unit: 5}
  - key: path
    value: /login
    descriptors:
      - key: method
        value: POST
        rate_limit: {name: login_post, unit: minute, requests_per_unit: 100}
",
    );
    let ip = ("remote_address", "10.0.0.1");
    assert_eq!(names(&rules, &[d(&[ip])]), ["client"]);
    // The longer descriptor counts only against the nested limit.
    assert_eq!(
        names(&rules, &[d(&[ip, ("path", "/login")])]),
        ["client_login"]
    );
    // No nested node for this path: nothing, not the parent's limit.
    assert!(names(&rules, &[d(&[ip, ("path", "/other")])]).is_empty());
    // Deeper than the tree: nothing.
    assert!(names(&rules, &[d(&[ip, ("path", "/login"), ("method", "GET")])]).is_empty());
    // A node without a limit at the last entry: nothing.
    assert!(names(&rules, &[d(&[("path", "/login")])]).is_empty());
    assert_eq!(
        names(&rules, &[d(&[("path", "/login"), ("method", "POST")])]),
        ["login_post"]
    );
    // All descriptors of a request, in order.
    assert_eq!(
        names(&rules, &[d(&[ip]), d(&[ip, ("path", "/login")])]),
        ["client", "client_login"]
    );
    // An empty descriptor matches nothing.
    assert!(names(&rules, &[Descriptor::new()]).is_empty());
}

#[test]
fn matching_never_backtracks_to_a_bare_key() {
    let rules = rules(
        "domain: d
descriptors:
  - key: user
    value: ann
  - key: user
    descriptors:
      - key: path
        rate_limit: {name: user_path, unit: second, requests_per_unit: 1}
",
    );
    // `user=ann` matches the exact node, which has no nested level: as in envoy, the
    // bare `user` node is not tried instead.
    assert!(names(&rules, &[d(&[("user", "ann"), ("path", "/")])]).is_empty());
    assert_eq!(
        names(&rules, &[d(&[("user", "bob"), ("path", "/")])]),
        ["user_path"]
    );
}

#[test]
fn unlimited_nodes_match_and_count_nothing() {
    let rules = rules(
        "domain: d
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 10.1.*
    rate_limit: {unlimited: true}
",
    );
    let matched = rules.limits_for(&[d(&[("remote_address", "10.1.2.3")])]);
    assert!(matched.is_empty());
    assert!(matched.has_unlimited());
    let matched = rules.limits_for(&[d(&[("remote_address", "10.2.2.3")])]);
    assert_eq!(matched.limits().len(), 1);
    assert!(!matched.has_unlimited());
}

#[test]
fn replaces_drops_the_named_limits() {
    let rules = rules(
        "domain: d
descriptors:
  - key: remote_address
    rate_limit: {name: per_client, unit: second, requests_per_unit: 10}
  - key: api_key
    value: premium
    rate_limit:
      unit: second
      requests_per_unit: 100
      replaces: [{name: per_client}]
  - key: api_key
    value: internal
    rate_limit:
      unlimited: true
      replaces: [{name: per_client}]
",
    );
    let ip = d(&[("remote_address", "10.0.0.1")]);
    assert_eq!(names(&rules, std::slice::from_ref(&ip)), ["per_client"]);
    assert_eq!(
        names(&rules, &[ip.clone(), d(&[("api_key", "premium")])]),
        ["api_key=premium"]
    );
    assert!(names(&rules, &[ip.clone(), d(&[("api_key", "internal")])]).is_empty());
    assert_eq!(
        names(&rules, &[ip, d(&[("api_key", "basic")])]),
        ["per_client"]
    );
}

#[test]
fn keys_carry_the_algorithm_window_and_escaped_entries() {
    let rules = rules(
        "domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: minute, requests_per_unit: 1, algorithm: gcra}
",
    );
    let matched = rules.limits_for(&[d(&[("a", "x|b=y"), ("b", "%")])]);
    assert_eq!(matched.limits()[0].key(), "gcra:60|a=x%7Cb%3Dy|b=%25");
}

// ---------------------------------------------------------------- decisions

/// Records the tag and keys of every request it passes on.
struct Recording<S> {
    inner: S,
    seen: Mutex<Vec<(String, Vec<String>)>>,
}

#[async_trait]
impl<S: Store> Store for Recording<S> {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        let keys = request.checks.iter().map(|c| c.key.to_owned()).collect();
        self.seen
            .lock()
            .unwrap()
            .push((request.tag.to_owned(), keys));
        self.inner.execute(request).await
    }
}

const LOGIN: &str = "domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per_client, unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {name: login, unit: minute, requests_per_unit: 2}
";

fn login_request(ip: &str) -> [Descriptor; 2] {
    [d(&[("remote_address", ip)]), d(&[("path", "/login")])]
}

#[test]
fn all_matched_limits_go_in_one_request_under_the_domain_tag() {
    let clock = ManualClock::new();
    let store = Recording {
        inner: memory(&clock),
        seen: Mutex::new(Vec::new()),
    };
    let limiter = ConfigLimiter::new(rules(LOGIN), store).unwrap();
    let decision = block(limiter.check(&login_request("10.0.0.1"), 1)).unwrap();
    assert!(decision.is_admitted());
    let seen = limiter.store().seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "api".to_owned(),
            vec![
                "fixed_window:1|remote_address=10.0.0.1".to_owned(),
                "fixed_window:60|path=/login".to_owned()
            ]
        )]
    );
}

#[test]
fn a_denial_consumes_nothing_from_the_other_limits() {
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let client = [d(&[("remote_address", "10.0.0.1")])];
    // Two logins from other clients use up the login limit.
    for ip in ["10.0.0.2", "10.0.0.3"] {
        assert!(
            block(limiter.check(&login_request(ip), 1))
                .unwrap()
                .is_admitted()
        );
    }
    for _ in 0..5 {
        let denied = block(limiter.check(&login_request("10.0.0.1"), 1)).unwrap();
        assert!(!denied.is_admitted());
        assert_eq!(denied.applied()[denied.decisive()].name, "login");
        let retry = denied.decision().unwrap().unwrap_err().retry_after();
        assert_eq!(retry, Some(Duration::from_secs(60)));
    }
    // The denied logins took nothing from the client's per-second limit.
    let peek = block(limiter.check(&client, 0)).unwrap();
    assert_eq!(peek.decision().unwrap().unwrap().remaining(), 10);
    assert_eq!(peek.applied()[peek.decisive()].name, "per_client");
}

/// Regression: the decisive limit was the first whose quota equals the decision's
/// limit, so with 10 a second per client and 10 a minute for the login path, a login
/// denied by the spent path limit was reported as `per_client`'s.
#[test]
fn equal_quotas_report_the_limit_that_decided() {
    const EQUAL: &str = "domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per_client, unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {name: login, unit: minute, requests_per_unit: 10}
";
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let limiter = ConfigLimiter::new(rules(EQUAL), memory(&clock)).unwrap();
    let client = [d(&[("remote_address", "10.0.0.1")])];
    // The client spends its per-second limit on other paths: denied by it, 1 s.
    for _ in 0..10 {
        assert!(block(limiter.check(&client, 1)).unwrap().is_admitted());
    }
    let denied = block(limiter.check(&login_request("10.0.0.1"), 1)).unwrap();
    assert_eq!(denied.applied()[denied.decisive()].name, "per_client");
    let retry = denied.decision().unwrap().unwrap_err().retry_after();
    assert_eq!(retry, Some(Duration::from_secs(1)));

    // A second later, ten other clients spend the login limit: denied by it, 59 s.
    clock.advance(Duration::from_secs(1));
    for i in 2..12 {
        let ip = format!("10.0.0.{i}");
        assert!(
            block(limiter.check(&login_request(&ip), 1))
                .unwrap()
                .is_admitted()
        );
    }
    let denied = block(limiter.check(&login_request("10.0.0.1"), 1)).unwrap();
    assert_eq!(denied.applied()[denied.decisive()].name, "login");
    let retry = denied.decision().unwrap().unwrap_err().retry_after();
    assert_eq!(retry, Some(Duration::from_secs(59)));
}

#[test]
fn the_decision_reports_the_limit_with_the_fewest_left() {
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let decision = block(limiter.check(&login_request("10.0.0.1"), 1)).unwrap();
    let admitted = decision.decision().unwrap().unwrap();
    assert_eq!((admitted.limit(), admitted.remaining()), (2, 1));
    let names: Vec<_> = decision.applied().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["per_client", "login"]);
    assert_eq!(decision.decisive(), 1);
    assert_eq!(decision.applied()[1].quota, 2);
    assert_eq!(decision.applied()[1].window, Duration::from_secs(60));
}

#[test]
fn no_matched_limit_means_no_decision() {
    let clock = ManualClock::new();
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let decision = block(limiter.check(&[d(&[("path", "/")])], 1)).unwrap();
    assert!(decision.is_admitted());
    assert_eq!(decision.decision(), None);
    assert!(decision.applied().is_empty());
    assert!(limiter.store().is_empty());
}

#[test]
fn a_cost_above_a_limit_is_denied_for_good() {
    let clock = ManualClock::new();
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let decision = block(limiter.check(&login_request("10.0.0.1"), 3)).unwrap();
    assert!(matches!(
        decision.decision(),
        Some(Err(Denied::Insufficient(i))) if i.capacity() == 2
    ));
    assert_eq!(decision.applied()[decision.decisive()].name, "login");
}

#[test]
fn fixed_windows_are_aligned_to_the_unix_epoch() {
    let clock = ManualClock::new();
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let login = [d(&[("path", "/login")])];
    // 50 s into a minute of Unix time: the window ends 10 s later, not 60 s later.
    let at = MINUTE_EDGE + Duration::from_secs(50);
    assert!(
        block(limiter.check_at(&login, 2, at))
            .unwrap()
            .is_admitted()
    );
    let denied = block(limiter.check_at(&login, 1, at)).unwrap();
    assert_eq!(
        denied.decision().unwrap().unwrap_err().retry_after(),
        Some(Duration::from_secs(10))
    );
    let edge = MINUTE_EDGE + Duration::from_secs(60);
    let just_before = edge - Duration::from_millis(1);
    assert!(
        !block(limiter.check_at(&login, 1, just_before))
            .unwrap()
            .is_admitted()
    );
    assert!(
        block(limiter.check_at(&login, 2, edge))
            .unwrap()
            .is_admitted()
    );
}

#[test]
fn the_store_clock_drives_the_windows() {
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let limiter = ConfigLimiter::new(rules(LOGIN), memory(&clock)).unwrap();
    let client = [d(&[("remote_address", "10.0.0.1")])];
    assert!(block(limiter.check(&client, 10)).unwrap().is_admitted());
    assert!(!block(limiter.check(&client, 1)).unwrap().is_admitted());
    clock.advance(Duration::from_secs(1));
    assert!(block(limiter.check(&client, 10)).unwrap().is_admitted());
}

#[test]
fn gcra_limits_refill_smoothly() {
    let yaml = "domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 2}
";
    let clock = ManualClock::new();
    let limiter = ConfigLimiter::new(rules(yaml), memory(&clock)).unwrap();
    let user = [d(&[("user", "ann")])];
    assert!(block(limiter.check(&user, 2)).unwrap().is_admitted());
    let denied = block(limiter.check(&user, 1)).unwrap();
    assert_eq!(
        denied.decision().unwrap().unwrap_err().retry_after(),
        Some(Duration::from_millis(100))
    );
    clock.advance(Duration::from_millis(100));
    assert!(block(limiter.check(&user, 1)).unwrap().is_admitted());
}

const SHADOW: &str = "domain: d
descriptors:
  - key: user
    rate_limit: {name: enforced, unit: minute, requests_per_unit: 3}
  - key: path
    value: /export
    shadow_mode: true
    rate_limit: {name: watched, unit: minute, requests_per_unit: 1}
";

#[test]
fn shadow_limits_count_and_report_but_never_deny() {
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let limiter = ConfigLimiter::new(rules(SHADOW), memory(&clock)).unwrap();
    let request = [d(&[("user", "ann")]), d(&[("path", "/export")])];
    let first = block(limiter.check(&request, 1)).unwrap();
    assert!(first.is_admitted());
    assert_eq!(first.shadow_denial(), None);
    let names: Vec<_> = first.applied().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["enforced"],
        "shadow limits are not reported as applied"
    );

    let second = block(limiter.check(&request, 1)).unwrap();
    assert!(second.is_admitted(), "a shadow denial does not block");
    let shadow = second.shadow_denial().unwrap();
    assert_eq!(shadow.limit.name, "watched");
    assert!(shadow.denied.is_limited());
    assert_eq!(second.decision().unwrap().unwrap().remaining(), 1);

    // Only shadow limits: no decision, and the denial still reported.
    let only_shadow = block(limiter.check(&request[1..], 1)).unwrap();
    assert_eq!(only_shadow.decision(), None);
    assert!(only_shadow.shadow_denial().is_some());
}

#[test]
fn shadow_limits_are_not_asked_when_enforced_ones_deny() {
    let clock = ManualClock::new();
    clock.advance(MINUTE_EDGE);
    let store = Recording {
        inner: memory(&clock),
        seen: Mutex::new(Vec::new()),
    };
    let limiter = ConfigLimiter::new(rules(SHADOW), store).unwrap();
    let request = [d(&[("user", "ann")]), d(&[("path", "/export")])];
    let denied = block(limiter.check(&request, 4)).unwrap();
    assert!(!denied.is_admitted());
    assert_eq!(denied.shadow_denial(), None);
    assert_eq!(limiter.store().seen.lock().unwrap().len(), 1);
}

/// Refuses sliding logs, as a store with no script for them would.
struct NoSlidingLogs(MemoryStore<ManualClock>);

#[async_trait]
impl Store for NoSlidingLogs {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        self.0.execute(request).await
    }

    fn check_rule(&self, rule: &Rule) -> Result<(), StoreError> {
        if rule.kind() == RuleKind::SlidingLog {
            return Err(ConfigError::OutOfRange {
                parameter: "rule",
                expected: "not a sliding log",
            }
            .into());
        }
        Ok(())
    }
}

#[test]
fn rules_the_store_cannot_run_are_refused_with_their_line() {
    let yaml = "domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 1
      algorithm: sliding_log
";
    let e =
        ConfigLimiter::new(rules(yaml), NoSlidingLogs(memory(&ManualClock::new()))).unwrap_err();
    assert!(matches!(e.kind(), ConfigFileErrorKind::Store(_)));
    assert_eq!(e.line(), Some(7));
}

// ---------------------------------------------------------------- the server layer's `Limits`

#[cfg(feature = "http")]
mod http_limits {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::HeaderName;
    use http::request::Parts;
    use tollgate::config::{ConfigLimits, RequestDescriptor, RequestEntry};
    use tollgate::http::{CheckError, ClientIp, KeyError, Limits, Policy};

    use super::*;

    fn peer() -> ClientIp {
        ClientIp::new()
    }

    fn parts(method: &str, uri: &str, ip: Option<[u8; 4]>) -> Parts {
        let (mut parts, ()) = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("x-api-key", "k-1")
            .body(())
            .unwrap()
            .into_parts();
        if let Some(ip) = ip {
            parts.extensions.insert(SocketAddr::from((ip, 40_000)));
        }
        parts
    }

    fn example_limits(clock: &ManualClock) -> ConfigLimits<MemoryStore<ManualClock>> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rules.yaml");
        let limiter = ConfigLimiter::new(RuleSet::from_file(path).unwrap(), memory(clock)).unwrap();
        ConfigLimits::by_client_and_path(limiter, peer())
    }

    #[test]
    fn the_default_descriptors_are_client_path_and_both() {
        let limits = example_limits(&ManualClock::new());
        let got = limits
            .descriptors_of(&parts("GET", "/login?next=/", Some([10, 0, 0, 1])))
            .unwrap();
        assert_eq!(
            got,
            [
                d(&[("remote_address", "10.0.0.1")]),
                d(&[("path", "/login")]),
                d(&[("remote_address", "10.0.0.1"), ("path", "/login")]),
            ]
        );
    }

    #[test]
    fn entries_read_headers_methods_constants_and_closures() {
        let limiter = ConfigLimiter::new(rules(LOGIN), memory(&ManualClock::new())).unwrap();
        let limits = ConfigLimits::new(
            limiter,
            [
                RequestDescriptor::new([RequestEntry::generic_key("all"), RequestEntry::method()]),
                RequestDescriptor::new([RequestEntry::header(
                    HeaderName::from_static("x-api-key"),
                    "api_key",
                )]),
                RequestDescriptor::new([RequestEntry::header(
                    HeaderName::from_static("x-tenant"),
                    "tenant",
                )]),
                RequestDescriptor::new([RequestEntry::optional("query", |p: &Parts| {
                    p.uri.query().map(str::to_owned)
                })]),
                RequestDescriptor::new([RequestEntry::extract("host", |_: &Parts| {
                    Ok("example.org".to_owned())
                })]),
            ],
        );
        let got = limits
            .descriptors_of(&parts("DELETE", "/orders/7", None))
            .unwrap();
        // No `x-tenant` header and no query: those descriptors are left out.
        assert_eq!(
            got,
            [
                d(&[("generic_key", "all"), ("method", "DELETE")]),
                d(&[("api_key", "k-1")]),
                d(&[("host", "example.org")]),
            ]
        );
    }

    #[test]
    fn a_request_without_a_peer_address_is_a_key_error() {
        let limits = example_limits(&ManualClock::new());
        let err = block(limits.check(&parts("GET", "/", None))).unwrap_err();
        assert!(matches!(err, CheckError::Key(KeyError::NoPeerAddress)));
    }

    #[test]
    fn unmatched_requests_pass_unlimited() {
        let limits = example_limits(&ManualClock::new());
        // `remote_address` alone always matches `per_client`; `generic_key` matches
        // nothing in the example.
        let only_path = ConfigLimits::new(
            ConfigLimiter::new(
                RuleSet::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rules.yaml"))
                    .unwrap(),
                memory(&ManualClock::new()),
            )
            .unwrap(),
            [RequestDescriptor::new([RequestEntry::path()])],
        );
        let verdict = block(only_path.check(&parts("GET", "/health", None))).unwrap();
        assert_eq!(verdict.decision, None);
        assert!(verdict.is_admitted());
        assert!(verdict.policies.is_empty());
        let verdict = block(limits.check(&parts("GET", "/", Some([10, 0, 0, 1])))).unwrap();
        assert_eq!(verdict.policies[0].name, "per_client");
    }

    /// The bug: the example's health check was said to be unlimited, but its
    /// `[remote_address]` descriptor still counted against `per_client`.
    #[test]
    fn the_example_health_check_counts_against_no_limit() {
        let limits = example_limits(&ManualClock::new());
        for _ in 0..20 {
            let verdict =
                block(limits.check(&parts("GET", "/health", Some([10, 0, 0, 1])))).unwrap();
            assert_eq!(verdict.decision, None);
            assert!(verdict.policies.is_empty());
        }
        let home = block(limits.check(&parts("GET", "/", Some([10, 0, 0, 1])))).unwrap();
        assert_eq!(home.decision.unwrap().unwrap().remaining(), 9);
    }

    #[test]
    fn verdicts_report_the_policies_and_the_decisive_one() {
        let clock = ManualClock::new();
        clock.advance(MINUTE_EDGE);
        let limits = example_limits(&clock);
        let login = parts("POST", "/login", Some([10, 0, 0, 1]));
        for left in (0..5).rev() {
            let verdict = block(limits.check(&login)).unwrap();
            assert!(verdict.is_admitted());
            let names: Vec<_> = verdict.policies.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names, ["per_client", "login"]);
            assert_eq!(verdict.policies[verdict.decisive].name, "login");
            assert_eq!(verdict.decision.unwrap().unwrap().remaining(), left);
        }
        let verdict = block(limits.check(&login)).unwrap();
        assert!(!verdict.is_admitted());
        assert_eq!(verdict.policies[verdict.decisive].name, "login");
        assert_eq!(
            verdict.decision.unwrap().unwrap_err().retry_after(),
            Some(Duration::from_secs(12))
        );
        // Another client logs in: its own bucket.
        let other = block(limits.check(&parts("POST", "/login", Some([10, 0, 0, 2])))).unwrap();
        assert!(other.is_admitted());
        // The denied login took nothing from per_client: 5 of 10 used.
        let home = block(limits.check(&parts("GET", "/", Some([10, 0, 0, 1])))).unwrap();
        assert_eq!(home.decision.unwrap().unwrap().remaining(), 4);
    }

    #[test]
    fn policies_list_the_enforced_limits() {
        let limits = example_limits(&ManualClock::new());
        assert_eq!(
            limits.policies(),
            [
                Policy {
                    name: "per_client".into(),
                    quota: 10,
                    window: Duration::from_secs(1)
                },
                Policy {
                    name: "login".into(),
                    quota: 5,
                    window: Duration::from_secs(60)
                },
                Policy {
                    name: "search".into(),
                    quota: 30,
                    window: Duration::from_secs(60)
                },
            ]
        );
    }

    /// The bug: a bucket with a `burst` reported `q` = `requests_per_unit` while its
    /// decisions counted `r` (and `X-RateLimit-Limit`) out of the burst, so `r` could
    /// exceed `q`.
    #[test]
    fn a_bucket_with_a_burst_reports_the_burst_over_its_fill_time() {
        let yaml = "domain: d
descriptors:
  - key: path
    rate_limit: {name: bucket, unit: second, requests_per_unit: 10, algorithm: gcra, burst: 20}
  - key: method
    rate_limit: {name: leaky, unit: minute, requests_per_unit: 6, algorithm: leaky_bucket, burst: 3}
";
        let limiter = ConfigLimiter::new(rules(yaml), memory(&ManualClock::new())).unwrap();
        let limits = ConfigLimits::new(
            limiter,
            [
                RequestDescriptor::new([RequestEntry::path()]),
                RequestDescriptor::new([RequestEntry::method()]),
            ],
        );
        let expected = [
            Policy::new("bucket", 20, Duration::from_secs(2)),
            Policy::new("leaky", 3, Duration::from_secs(30)),
        ];
        assert_eq!(limits.policies(), expected);
        let verdict = block(limits.check(&parts("GET", "/", None))).unwrap();
        assert_eq!(&verdict.policies[..], expected);
        let admitted = verdict.decision.unwrap().unwrap();
        let decisive = &verdict.policies[verdict.decisive];
        assert_eq!(admitted.limit(), decisive.quota);
        assert!(admitted.remaining() <= decisive.quota);
    }

    #[test]
    fn shadow_denials_reach_the_hook_and_never_block() {
        let clock = ManualClock::new();
        let denials = Arc::new(AtomicUsize::new(0));
        let seen = denials.clone();
        let limiter = ConfigLimiter::new(rules(SHADOW), memory(&clock)).unwrap();
        let limits = ConfigLimits::new(limiter, [RequestDescriptor::new([RequestEntry::path()])])
            .on_shadow_denial(move |denial| {
                assert_eq!(denial.limit.name, "watched");
                seen.fetch_add(1, Ordering::SeqCst);
            });
        for _ in 0..3 {
            let verdict = block(limits.check(&parts("GET", "/export", None))).unwrap();
            assert!(verdict.is_admitted());
            assert_eq!(verdict.decision, None);
        }
        assert_eq!(denials.load(Ordering::SeqCst), 2);
    }
}

// ---------------------------------------------------------------- envoy's service

/// Regression: the longest `prefix*` won; envoy tries patterns in file order, with a
/// `*` anywhere, and the first match wins.
#[test]
fn patterns_are_tried_in_file_order_with_stars_anywhere() {
    let rules = rules(
        "domain: d
descriptors:
  - {key: path, value: '/api/*/export', rate_limit: {name: export, unit: second, requests_per_unit: 1}}
  - {key: path, value: '/api/*', rate_limit: {name: api, unit: second, requests_per_unit: 2}}
  - {key: path, value: '/api/v1/*', rate_limit: {name: never, unit: second, requests_per_unit: 3}}
  - {key: path, value: '*.png', rate_limit: {name: png, unit: second, requests_per_unit: 4}}
",
    );
    let of = |path: &str| names(&rules, &[d(&[("path", path)])]);
    assert_eq!(of("/api/v2/export"), ["export"]);
    assert_eq!(
        of("/api/v1/users"),
        ["api"],
        "the first pattern of the file wins"
    );
    assert_eq!(of("/img/a.png"), ["png"]);
    // A value written as the pattern is an exact match, before any pattern.
    assert_eq!(of("/api/v1/*"), ["never"]);
}

#[test]
fn a_star_in_a_key_is_refused() {
    let (e, line) = error("domain: d\ndescriptors:\n  - key: a\n  - key: 'pa*th'\n    value: x\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::WildcardInKey(k) if k == "pa*th"));
    assert_eq!((line, e.location().unwrap().column()), (4, 10));
}

/// One answer per descriptor: envoy's service resolves each descriptor to at most one
/// limit, and drops every limit whose name another's `replaces` lists.
#[test]
fn descriptors_get_one_answer_each() {
    let rules = rules(
        "domain: d
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: second, requests_per_unit: 5}
  - key: user
    value: admin
    rate_limit: {name: admin, unit: second, requests_per_unit: 50, replaces: [{name: per_user}]}
  - key: path
    rate_limit: {name: per_path, unit: second, requests_per_unit: 5}
  - key: path
    value: /health
    rate_limit: {unlimited: true, replaces: [{name: per_path}]}
  - key: org
    descriptors:
      - {key: team}
",
    );
    let request = [
        d(&[("user", "ann")]),
        d(&[("user", "admin")]),
        d(&[("path", "/health")]),
        d(&[("org", "x"), ("team", "y")]),
        d(&[("path", "/a")]),
        d(&[("user", "ann")]),
    ];
    let matched = rules.limits_for(&request);
    let answers: Vec<String> = matched
        .descriptors()
        .iter()
        .map(|a| match a {
            DescriptorMatch::None => "none".to_owned(),
            DescriptorMatch::Unlimited => "unlimited".to_owned(),
            DescriptorMatch::Limit(m) => format!("limit {}", m.limit().name()),
            DescriptorMatch::Replaced(m) => format!("replaced {}", m.limit().name()),
        })
        .collect();
    assert_eq!(
        answers,
        [
            "replaced per_user",
            "limit admin",
            "unlimited",
            "none",
            "replaced per_path",
            "replaced per_user"
        ]
    );
    assert_eq!(names(&rules, &request), ["admin"]);
    assert!(matched.has_unlimited());
}

/// Go writes the pattern in place of the value in the cache key: every value the
/// pattern matches shares one counter, through the limiter too.
#[test]
fn share_threshold_values_share_one_counter() {
    let clock = ManualClock::new();
    let rules = rules(
        "domain: d
descriptors:
  - {key: file, value: 'docs/*', share_threshold: true, rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: img, value: 'img/*', rate_limit: {unit: minute, requests_per_unit: 2}}
",
    );
    let limiter = ConfigLimiter::new(rules, memory(&clock)).unwrap();
    let check = |entries: &[(&str, &str)]| {
        block(limiter.check_at(&[d(entries)], 1, MINUTE_EDGE))
            .unwrap()
            .is_admitted()
    };
    assert!(check(&[("file", "docs/a")]));
    assert!(check(&[("file", "docs/b")]));
    assert!(
        !check(&[("file", "docs/c")]),
        "the third value shares the counter"
    );
    // Without share_threshold each value counts apart.
    for value in ["img/a", "img/b", "img/c"] {
        assert!(check(&[("img", value)]));
    }
}

#[test]
fn merged_files_keep_their_order_lines_and_paths() {
    let dir = std::env::temp_dir().join(format!("tollgate-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (first, second) = (dir.join("first.yaml"), dir.join("second.yaml"));
    std::fs::write(
        &first,
        "domain: d\ndescriptors:\n  - {key: path, value: '/a*', rate_limit: {name: a, unit: second, requests_per_unit: 1}}\n",
    )
    .unwrap();
    std::fs::write(
        &second,
        "domain: d
descriptors:
  - {key: path, value: '/ab*', rate_limit: {name: ab, unit: second, requests_per_unit: 1}}
  - {key: path, value: '*', rate_limit: {name: any, unit: second, requests_per_unit: 1}}
  - {key: path, value: '/a*', rate_limit: {unit: second, requests_per_unit: 1}}
",
    )
    .unwrap();
    let mut merged = RuleSet::from_file(&first).unwrap();
    let e = merged
        .merge(RuleSet::from_file(&second).unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:5:5: duplicate descriptor composite key 'd.path_/a*'",
            second.display()
        )
    );
    std::fs::write(
        &second,
        "domain: d
descriptors:
  - {key: path, value: '/ab*', rate_limit: {name: ab, unit: second, requests_per_unit: 1}}
  - {key: path, value: '*', rate_limit: {name: any, unit: second, requests_per_unit: 1}}
",
    )
    .unwrap();
    merged.merge(RuleSet::from_file(&second).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // The first file's patterns are tried first.
    assert_eq!(names(&merged, &[d(&[("path", "/abc")])]), ["a"]);
    assert_eq!(names(&merged, &[d(&[("path", "/x")])]), ["any"]);
    let any = merged.limit("any").unwrap();
    assert_eq!(merged.location_of(any).unwrap().line(), 4);
}
