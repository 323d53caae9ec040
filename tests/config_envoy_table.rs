//! envoy's ratelimit service's config tests (test/config/config_test.go), ported: one
//! test per Go test function whose behaviour belongs to the rules file and its
//! matcher, each naming the Go test, with the YAML of envoy's test files written out
//! here. The Go tests read a statistics name (`rl.Stats.Key`); ours is
//! [`MatchedLimit::stats_key`]. Where tollgate answers otherwise by design, the test
//! says so.
#![cfg(feature = "config")]

use tollgate::config::{
    ConfigFileError, ConfigFileErrorKind, Descriptor, DescriptorMatch, MatchedLimit, RuleSet, Unit,
};

fn rules(yaml: &str) -> RuleSet {
    RuleSet::from_yaml(yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn error(yaml: &str) -> ConfigFileError {
    let e = RuleSet::from_yaml(yaml).expect_err("the file should be refused");
    assert!(e.location().is_some(), "no line in {e}");
    e
}

/// A descriptor's entries, as the tables write them.
type Entries<'a> = &'a [(&'a str, &'a str)];

fn descriptor(entries: &[(&str, &str)]) -> Descriptor {
    entries.iter().copied().collect()
}

/// What envoy's `GetLimit` answers for one descriptor.
fn get<'a>(rules: &'a RuleSet, entries: &[(&str, &str)]) -> DescriptorMatch<'a> {
    rules.limits_for(&[descriptor(entries)]).descriptors()[0].clone()
}

fn limit<'a>(rules: &'a RuleSet, entries: &[(&str, &str)]) -> Option<MatchedLimit<'a>> {
    get(rules, entries).limit().cloned()
}

fn stats(rules: &RuleSet, entries: &[(&str, &str)]) -> String {
    limit(rules, entries)
        .unwrap_or_else(|| panic!("no limit for {entries:?}"))
        .stats_key()
        .to_owned()
}

const BASIC_CONFIG: &str = "
# Basic configuration for testing.
domain: test-domain
descriptors:
  # Top level key/value with no default rate limit.
  - key: key1
    value: value1
    descriptors:
      # 2nd level key only with default rate limit.
      - key: subkey1
        rate_limit:
          unit: second
          requests_per_unit: 5

      # 2nd level key/value with limit. Specific override at 2nd level.
      - key: subkey1
        value: subvalue1
        rate_limit:
          unit: second
          requests_per_unit: 10

  # Top level key only with default rate limit.
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20

  # Top level key/value with limit. Specific override at 1st level.
  - key: key2
    value: value2
    rate_limit:
      unit: minute
      requests_per_unit: 30

  # First level override with no limit. This effectively whitelists the value.
  - key: key2
    value: value3

  - key: key3
    rate_limit:
      unit: hour
      requests_per_unit: 1

  - key: key4
    rate_limit:
      name: key4_rate_limit
      unit: day
      requests_per_unit: 1

  - key: key5
    value: value5
    rate_limit:
      unit: day
      requests_per_unit: 15
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit:
          unit: day
          requests_per_unit: 25

  - key: key6
    rate_limit:
      unlimited: true

  - key: key7
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 70
";

/// TestBasicConfig. (envoy's unknown-domain case has no counterpart: a `RuleSet` is
/// one domain, and the service picks it.)
#[test]
fn basic_config() {
    let rules = rules(BASIC_CONFIG);
    assert_eq!(rules.domain(), "test-domain");
    assert!(matches!(get(&rules, &[]), DescriptorMatch::None));
    for entries in [
        &[("key1", "something")][..],
        &[("key1", "value1")],
        &[("key2", "value2"), ("subkey", "subvalue")],
        &[("key5", "value5"), ("subkey5", "subvalue")],
        &[("key2", "value3")],
    ] {
        assert!(
            matches!(get(&rules, entries), DescriptorMatch::None),
            "{entries:?}"
        );
    }
    let cases: [(Entries<'_>, u64, Unit, &str); 6] = [
        (
            &[("key1", "value1"), ("subkey1", "something")],
            5,
            Unit::Second,
            "test-domain.key1_value1.subkey1",
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            10,
            Unit::Second,
            "test-domain.key1_value1.subkey1_subvalue1",
        ),
        (
            &[("key2", "something")],
            20,
            Unit::Minute,
            "test-domain.key2",
        ),
        (
            &[("key2", "value2")],
            30,
            Unit::Minute,
            "test-domain.key2_value2",
        ),
        (&[("key3", "foo")], 1, Unit::Hour, "test-domain.key3"),
        (&[("key4", "foo")], 1, Unit::Day, "test-domain.key4"),
    ];
    for (entries, count, unit, key) in cases {
        let m = limit(&rules, entries).unwrap();
        assert_eq!(m.limit().requests_per_unit(), count, "{entries:?}");
        assert_eq!(m.limit().unit(), unit, "{entries:?}");
        assert_eq!(m.stats_key(), key);
    }
    // "No name provided in config" / "Name provided in config".
    assert!(
        !limit(&rules, &[("key3", "foo")])
            .unwrap()
            .limit()
            .is_named()
    );
    let key4 = limit(&rules, &[("key4", "foo")]).unwrap();
    assert_eq!(key4.limit().name(), "key4_rate_limit");
    assert!(key4.limit().is_named());

    assert!(matches!(
        get(&rules, &[("key6", "foo")]),
        DescriptorMatch::Unlimited
    ));

    // detailed_metric: the request's value is in the name.
    let key7 = limit(&rules, &[("key7", "unspecified_value")]).unwrap();
    assert_eq!(key7.limit().requests_per_unit(), 70);
    assert_eq!(key7.stats_key(), "test-domain.key7_unspecified_value");
    assert_eq!(
        stats(&rules, &[("key7", "another_value")]),
        "test-domain.key7_another_value"
    );
}

const MERGE_DOMAIN_KEY1: &str = "
# Basic configuration which will be merged with `merge_domain2.yaml`
domain: test-domain
descriptors:
  # Top level key/value which is not specified in `merge_domain2.yaml`
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 10
";

const MERGE_DOMAIN_KEY2: &str = "
# Basic configuration which will be merged with `merge_domain.yaml`
domain: test-domain
descriptors:
  # Top level key/value which is not specified in `merge_domain.yaml`
  - key: key2
    value: value2
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

/// TestDomainMerge.
#[test]
fn domain_merge() {
    let mut merged = rules(MERGE_DOMAIN_KEY1);
    merged.merge(rules(MERGE_DOMAIN_KEY2)).unwrap();
    assert!(matches!(get(&merged, &[]), DescriptorMatch::None));
    let key1 = limit(&merged, &[("key1", "value1")]).unwrap();
    assert_eq!(key1.limit().requests_per_unit(), 10);
    let key2 = limit(&merged, &[("key2", "value2")]).unwrap();
    assert_eq!(key2.limit().requests_per_unit(), 20);
    assert_eq!(key2.stats_key(), "test-domain.key2_value2");
    // Each limit keeps the line of its own file (its `rate_limit` block's first).
    assert_eq!(merged.location_of(key2.limit()).unwrap().line(), 9);
}

/// TestDuplicateKeyDomainMerge: the second file's descriptor is named, with its file.
#[test]
fn duplicate_key_domain_merge() {
    let dir = std::env::temp_dir().join(format!("tollgate-envoy-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("merge_domain_key1.yaml");
    std::fs::write(&path, MERGE_DOMAIN_KEY1.trim_start()).unwrap();
    let mut merged = RuleSet::from_file(&path).unwrap();
    let again = RuleSet::from_file(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = merged.merge(again).unwrap_err();
    assert!(matches!(
        e.kind(),
        ConfigFileErrorKind::DuplicateDescriptor { .. }
    ));
    assert_eq!(
        e.to_string(),
        format!(
            "{}:5:5: duplicate descriptor composite key 'test-domain.key1_value1'",
            path.display()
        )
    );
    // The rules merged into are unchanged.
    assert_eq!(merged.limits().len(), 1);

    // Another domain is not merged.
    let e = merged
        .merge(rules("domain: other\ndescriptors: []\n"))
        .unwrap_err();
    assert!(matches!(e.kind(), ConfigFileErrorKind::MergeDomain { .. }));
}

// TestConfigLimitOverride: a descriptor's own limit (envoy's `RateLimitOverride`) is
// the service's, not the file's: `Descriptor` carries none, so nothing here.
//
// TestDuplicateDomain: two files of one domain without MERGE_DOMAIN_CONFIG is the
// service's choice between `RuleSet::merge` and an error; one `RuleSet` has one domain.

/// TestEmptyDomain (empty_domain.yaml has no `domain`; an empty one is refused too).
#[test]
fn empty_domain() {
    let e = RuleSet::from_yaml("descriptors:\n").unwrap_err();
    assert!(e.to_string().contains("missing field `domain`"), "{e}");
    let e = error("domain: ''\ndescriptors:\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Domain(_)));
}

/// TestEmptyKey.
#[test]
fn empty_key() {
    let e = error("domain: test-domain\ndescriptors:\n  - key: ''\n    value: value1\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Empty("key")));
    assert_eq!(e.to_string(), "line 3 column 10: descriptor has empty key");
    // envoy's empty_key.yaml leaves `key` out: a missing field, with its line.
    let e = error("domain: test-domain\ndescriptors:\n  - value: value1\n");
    assert!(e.to_string().contains("missing field `key`"), "{e}");
}

/// TestDuplicateKey.
#[test]
fn duplicate_key() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1

  - key: key1
    value: value1
",
    );
    assert_eq!(
        e.to_string(),
        "line 6 column 5: duplicate descriptor composite key 'test-domain.key1_value1'"
    );
}

/// TestBadLimitUnit.
#[test]
fn bad_limit_unit() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: foo
      requests_per_unit: 5
",
    );
    assert_eq!(e.line(), Some(6));
    assert!(
        e.to_string().contains("invalid rate limit unit 'foo'"),
        "{e}"
    );
    // Units in any case, as envoy upper-cases them.
    for unit in ["SECOND", "second", "Second", "WEEK", "month", "Year"] {
        rules(&format!(
            "domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{unit: {unit}, requests_per_unit: 1}}}}\n"
        ));
    }
}

/// TestReplacesSelf.
#[test]
fn replaces_self() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          name: self
          replaces:
            - name: self
          unit: second
          requests_per_unit: 5
",
    );
    assert!(matches!(e.kind(), ConfigFileErrorKind::ReplacesItself(n) if n == "self"));
    assert_eq!(e.line(), Some(10));
    assert!(
        e.to_string()
            .contains("replaces should not contain name of same descriptor"),
        "{e}"
    );
}

/// TestReplacesEmpty.
#[test]
fn replaces_empty() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          name: self
          replaces:
            - name:
          unit: second
          requests_per_unit: 5
",
    );
    assert_eq!(
        e.to_string(),
        "line 10 column 15: should not have an empty replaces entry"
    );
}

/// TestBadYaml.
#[test]
fn bad_yaml() {
    let e = error("'''\n");
    assert!(matches!(e.kind(), ConfigFileErrorKind::Format(_)));
}

/// TestMisspelledKey (both files).
#[test]
fn misspelled_key() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1
    ratelimit:
      unit: day
      requests_per_unit: 5
",
    );
    assert_eq!(e.line(), Some(5));
    assert!(e.to_string().contains("unknown field `ratelimit`"), "{e}");

    let e = error(
        "domain: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: day
      requestsperunit: 5
",
    );
    assert_eq!(e.line(), Some(7));
    assert!(
        e.to_string().contains("unknown field `requestsperunit`"),
        "{e}"
    );
}

/// TestNonStringKey.
#[test]
fn non_string_key() {
    let e = error(
        "0.25: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: day
      requests_per_unit: 5
",
    );
    assert_eq!(e.line(), Some(1));
}

/// TestNonMapList.
#[test]
fn non_map_list() {
    let e = error("domain: test-domain\ndescriptors:\n  - a\n  - b\n  - c\n");
    assert_eq!(e.line(), Some(3));
    assert!(
        e.to_string()
            .contains("yaml file contains list of type other than map: a"),
        "{e}"
    );
}

/// TestUnlimitedWithRateLimitUnit.
#[test]
fn unlimited_with_rate_limit_unit() {
    let e = error(
        "domain: test-domain
descriptors:
  - key: foo
    rate_limit:
      unlimited: true
      unit: day
      requests_per_unit: 25
",
    );
    assert_eq!(
        e.to_string(),
        "line 6 column 13: should not specify rate limit unit when unlimited"
    );
}

/// TestShadowModeConfig.
#[test]
fn shadow_mode_config() {
    let rules = rules(
        "
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          unit: second
          requests_per_unit: 5
      - key: subkey1
        value: subvalue1
        rate_limit:
          unit: second
          requests_per_unit: 10
        shadow_mode: true
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
    shadow_mode: true
  - key: key2
    value: value2
    rate_limit:
      unit: minute
      requests_per_unit: 30
",
    );
    let cases: [(Entries<'_>, bool, u64, &str); 4] = [
        (
            &[("key1", "value1"), ("subkey1", "something")],
            false,
            5,
            "test-domain.key1_value1.subkey1",
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            true,
            10,
            "test-domain.key1_value1.subkey1_subvalue1",
        ),
        (&[("key2", "something")], true, 20, "test-domain.key2"),
        (&[("key2", "value2")], false, 30, "test-domain.key2_value2"),
    ];
    for (entries, shadow, count, key) in cases {
        let m = limit(&rules, entries).unwrap();
        assert_eq!(m.limit().is_shadow(), shadow, "{entries:?}");
        assert_eq!(m.limit().requests_per_unit(), count);
        assert_eq!(m.stats_key(), key);
    }
}

const WILDCARD: &str = "
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: noWild
    value: foo
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: noVal
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: midWild
    value: bar*b
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: multiWild
    value: foo*bar*baz
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit:
          unit: minute
          requests_per_unit: 20
";

/// TestWildcardConfig.
#[test]
fn wildcard_config() {
    let rules = rules(WILDCARD);
    // A bare key: every value the same limit and statistics, each value its counter.
    let foo1 = limit(&rules, &[("noVal", "foo1")]).unwrap();
    let foo2 = limit(&rules, &[("noVal", "foo2")]).unwrap();
    assert!(std::ptr::eq(foo1.limit(), foo2.limit()));
    assert_eq!(foo1.stats_key(), "test-domain.noVal");
    assert_eq!(foo2.stats_key(), "test-domain.noVal");
    assert_ne!(foo1.key(), foo2.key());

    for (entries, key) in [
        (&[("wild", "foo1")][..], "test-domain.wild_foo*"),
        (&[("wild", "foo2")], "test-domain.wild_foo*"),
        (
            &[("nestedWild", "val1"), ("wild", "goo2")],
            "test-domain.nestedWild_val1.wild_goo*",
        ),
        (&[("midWild", "barab")], "test-domain.midWild_bar*b"),
        (&[("midWild", "bar123b")], "test-domain.midWild_bar*b"),
        // A star matches the empty string.
        (&[("midWild", "barb")], "test-domain.midWild_bar*b"),
        (
            &[("multiWild", "foo123bar456baz")],
            "test-domain.multiWild_foo*bar*baz",
        ),
        (
            &[("multiWild", "foobarbaz")],
            "test-domain.multiWild_foo*bar*baz",
        ),
    ] {
        assert_eq!(stats(&rules, entries), key, "{entries:?}");
    }
    for entries in [
        &[("wild", "bar")][..],
        // Non-wildcard values don't eager match.
        &[("noWild", "foo1")],
        &[("midWild", "bara")],
        &[("midWild", "xbarb")],
        &[("multiWild", "foo123baz")],
        &[("multiWild", "bar456baz")],
    ] {
        assert!(limit(&rules, entries).is_none(), "{entries:?}");
    }
}

const REALISTIC: &str = "
domain: nested
descriptors:
  - key: key_1
    detailed_metric: true
    rate_limit: {requests_per_unit: 500, unit: minute}
  - key: key_1
    value: some-value-for-key-1
    rate_limit: {requests_per_unit: 500, unit: minute}
  - key: key_2
    detailed_metric: true
    rate_limit: {requests_per_unit: 5000, unit: minute}
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: {requests_per_unit: 5, unit: minute}
  - key: key_2
    value: specific-id
    detailed_metric: true
    rate_limit: {requests_per_unit: 50000, unit: minute}
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: {requests_per_unit: 100, unit: minute}
";

/// The nested file of TestDetailedMetric's first cases, `detailed_metric` on the
/// outer and inner node as given.
fn nested(outer: bool, inner: bool) -> String {
    format!(
        "
domain: nested
descriptors:
  - key: key-1
    detailed_metric: {outer}
    rate_limit: {{requests_per_unit: 100, unit: minute}}
    descriptors:
      - key: key-2
        detailed_metric: {inner}
        rate_limit: {{requests_per_unit: 5, unit: minute}}
"
    )
}

/// TestDetailedMetric (its table, case by case).
#[test]
fn detailed_metric() {
    let one = [("key-1", "value-1")];
    let two = [("key-1", "value-1"), ("key-2", "value-2")];
    // "nested with no values but request only top-level key"
    assert_eq!(
        stats(&rules(&nested(true, false)), &one),
        "nested.key-1_value-1"
    );
    // "... with no detailed metric"
    assert_eq!(stats(&rules(&nested(false, false)), &one), "nested.key-1");
    // "nested with no values and request fully nested descriptors"
    assert_eq!(
        stats(&rules(&nested(true, true)), &two),
        "nested.key-1_value-1.key-2_value-2"
    );
    // "... with no detailed metric"
    assert_eq!(
        stats(&rules(&nested(false, false)), &two),
        "nested.key-1.key-2"
    );

    let realistic = rules(REALISTIC);
    // "test nested descriptors with simple request"
    assert_eq!(
        stats(&realistic, &[("key_1", "value-for-key-1")]),
        "nested.key_1_value-for-key-1"
    );
    // "test nested only second descriptor request not nested"
    assert_eq!(
        stats(&realistic, &[("key_2", "key-2-value")]),
        "nested.key_2_key-2-value"
    );
    // "test nested descriptors with nested request"
    assert_eq!(
        stats(
            &realistic,
            &[("key_2", "key-2-value"), ("key_3", "requested-key3-value")]
        ),
        "nested.key_2_key-2-value.key_3_requested-key3-value"
    );
}

const ROUTE_METHOD_SUBJECT: &str = "
domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 60, unit: minute}
";

/// TestValueToMetric_UsesRuntimeValuesInStats.
#[test]
fn value_to_metric_uses_runtime_values_in_stats() {
    let rules = rules(ROUTE_METHOD_SUBJECT);
    assert_eq!(
        stats(
            &rules,
            &[
                ("route", "draw"),
                ("http_method", "GET"),
                ("subject_id", "123")
            ]
        ),
        "domain.route_draw.http_method_GET.subject_id"
    );
}

/// TestValueToMetric_DefaultKeyIncludesValueAtThatLevel.
#[test]
fn value_to_metric_default_key_includes_value_at_that_level() {
    let rules = rules(
        "
domain: d
descriptors:
  - key: k1
    value_to_metric: true
    descriptors:
      - key: k2
        rate_limit: {requests_per_unit: 1, unit: second}
",
    );
    assert_eq!(stats(&rules, &[("k1", "A"), ("k2", "foo")]), "d.k1_A.k2");
}

/// TestValueToMetric_MidLevelOnly.
#[test]
fn value_to_metric_mid_level_only() {
    let rules = rules(
        "
domain: d
descriptors:
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {requests_per_unit: 1, unit: second}
",
    );
    assert_eq!(
        stats(&rules, &[("k1", "X"), ("k2", "Y"), ("k3", "Z")]),
        "d.k1.k2_Y.k3"
    );
}

/// TestValueToMetric_NoFlag_Unchanged.
#[test]
fn value_to_metric_no_flag_unchanged() {
    let rules = rules(
        "
domain: d
descriptors:
  - key: k1
    descriptors:
      - key: k2
        rate_limit: {requests_per_unit: 1, unit: second}
",
    );
    assert_eq!(stats(&rules, &[("k1", "X"), ("k2", "Y")]), "d.k1.k2");
}

/// TestValueToMetric_DoesNotOverrideDetailedMetric.
#[test]
fn value_to_metric_does_not_override_detailed_metric() {
    let rules = rules(
        "
domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            detailed_metric: true
            rate_limit: {requests_per_unit: 60, unit: minute}
",
    );
    assert_eq!(
        stats(
            &rules,
            &[
                ("route", "draw"),
                ("http_method", "GET"),
                ("subject_id", "123")
            ]
        ),
        "domain.route_draw.http_method_GET.subject_id_123"
    );
}

/// TestValueToMetric_WithConfiguredValues.
#[test]
fn value_to_metric_with_configured_values() {
    let rules = rules(
        "
domain: test-domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 60, unit: minute}
      - key: http_method
        value: POST
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 30, unit: minute}
",
    );
    let get = limit(
        &rules,
        &[
            ("route", "api"),
            ("http_method", "GET"),
            ("subject_id", "user123"),
        ],
    )
    .unwrap();
    assert_eq!(get.limit().requests_per_unit(), 60);
    assert_eq!(
        get.stats_key(),
        "test-domain.route_api.http_method_GET.subject_id"
    );
    let post = limit(
        &rules,
        &[
            ("route", "api"),
            ("http_method", "POST"),
            ("subject_id", "user456"),
        ],
    )
    .unwrap();
    assert_eq!(post.limit().requests_per_unit(), 30);
    assert_eq!(
        post.stats_key(),
        "test-domain.route_api.http_method_POST.subject_id"
    );
}

/// TestValueToMetric_WithWildcard.
#[test]
fn value_to_metric_with_wildcard() {
    let rules = rules(
        "
domain: domain
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {requests_per_unit: 100, unit: minute}
",
    );
    let alice = [
        ("user", "alice"),
        ("action", "readfile"),
        ("resource", "documents"),
    ];
    assert_eq!(
        limit(&rules, &alice).unwrap().limit().requests_per_unit(),
        100
    );
    assert_eq!(
        stats(&rules, &alice),
        "domain.user_alice.action_readfile.resource"
    );
    assert_eq!(
        stats(
            &rules,
            &[
                ("user", "bob"),
                ("action", "readdata"),
                ("resource", "database")
            ]
        ),
        "domain.user_bob.action_readdata.resource"
    );
}

/// TestValueToMetric_WithEmptyValue.
#[test]
fn value_to_metric_with_empty_value() {
    let rules = rules(ROUTE_METHOD_SUBJECT);
    for (route, method, key) in [
        ("", "GET", "domain.route.http_method_GET.subject_id"),
        ("draw", "", "domain.route_draw.http_method.subject_id"),
        ("", "", "domain.route.http_method.subject_id"),
    ] {
        assert_eq!(
            stats(
                &rules,
                &[
                    ("route", route),
                    ("http_method", method),
                    ("subject_id", "123")
                ]
            ),
            key
        );
    }
}

/// TestValueToMetric_FullKeyMatchesStatsKey: envoy keeps two names that must agree;
/// tollgate has one, so the test checks the names of its three files.
#[test]
fn value_to_metric_full_key_matches_stats_key() {
    let request = [
        ("route", "api"),
        ("http_method", "GET"),
        ("subject_id", "user123"),
    ];
    let with_flags = rules(&ROUTE_METHOD_SUBJECT.replace("domain: domain", "domain: test-domain"));
    assert_eq!(
        stats(&with_flags, &request),
        "test-domain.route_api.http_method_GET.subject_id"
    );
    let plain = "
domain: test-domain-2
descriptors:
  - key: route
    descriptors:
      - key: http_method
        descriptors:
          - key: subject_id
            rate_limit: {requests_per_unit: 60, unit: minute}
";
    assert_eq!(
        stats(&rules(plain), &request),
        "test-domain-2.route.http_method.subject_id"
    );
    let detailed = plain.replace("test-domain-2", "test-domain-3").replace(
        "- key: subject_id",
        "- key: subject_id\n            detailed_metric: true",
    );
    assert_eq!(
        stats(&rules(&detailed), &request),
        "test-domain-3.route_api.http_method_GET.subject_id_user123"
    );
}

const SHARE_THRESHOLD: &str = "
domain: test-domain
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: nested
    value: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 200}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 300}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - key: action
            rate_limit: {unit: minute, requests_per_unit: 150}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: midpath
    value: /api*v1
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: multiroute
    value: svc*ep*rpc
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: midroute
    value: /api*v2
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 80}
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - key: resource
        value: res*v2
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 60}
";

/// Every request in `requests` matches one limit, under `stats` and one shared
/// counter, whose key is `counter`.
fn shares(rules: &RuleSet, requests: &[&[(&str, &str)]], count: u64, stats: &str, counter: &str) {
    for entries in requests {
        let m = limit(rules, entries).unwrap_or_else(|| panic!("no limit for {entries:?}"));
        assert_eq!(m.limit().requests_per_unit(), count, "{entries:?}");
        assert_eq!(m.stats_key(), stats, "{entries:?}");
        assert_eq!(m.key(), counter, "{entries:?}");
    }
}

/// TestShareThreshold, its eight cases. envoy checks the cache key apart
/// (base_limiter_test.go); here [`MatchedLimit::key`] is checked to be shared.
#[test]
fn share_threshold() {
    let rules = rules(SHARE_THRESHOLD);
    // Case 1: basic.
    shares(
        &rules,
        &[
            &[("files", "files/a.pdf")],
            &[("files", "files/b.csv")],
            &[("files", "files/c.txt")],
        ],
        100,
        "test-domain.files_files/*",
        "fixed_window:60|files=files/*",
    );
    // Case 2: share_threshold wins over value_to_metric and over detailed_metric.
    assert_eq!(
        stats(&rules, &[("route", "api/v1"), ("method", "GET")]),
        "test-domain.route_api/*.method"
    );
    let detailed = limit(&rules, &[("service", "svc/user"), ("endpoint", "get")]).unwrap();
    assert!(detailed.is_detailed_metric());
    assert_eq!(
        detailed.stats_key(),
        "test-domain.service_svc/*.endpoint_get"
    );
    assert_eq!(detailed.key(), "fixed_window:60|service=svc/*|endpoint=get");
    // Case 3: nested.
    shares(
        &rules,
        &[&[("nested", "parent"), ("files", "nested/file1.txt")]],
        200,
        "test-domain.nested_parent.files_nested/*",
        "fixed_window:60|nested=parent|files=nested/*",
    );
    shares(
        &rules,
        &[
            &[("files", "top/file1.txt"), ("files", "nested/file1.txt")],
            &[("files", "top/2"), ("files", "nested/3")],
        ],
        300,
        "test-domain.files_top/*.files_nested/*",
        "fixed_window:60|files=top/*|files=nested/*",
    );
    // A pattern without share_threshold keeps its pattern in the name, its value in
    // the counter.
    let mixed = limit(
        &rules,
        &[("path", "path/foo"), ("file", "file/doc1"), ("type", "pdf")],
    )
    .unwrap();
    assert_eq!(
        mixed.stats_key(),
        "test-domain.path_path/*.file_file/*.type"
    );
    assert_eq!(
        mixed.key(),
        "fixed_window:60|path=path/*|file=file/doc1|type=pdf"
    );
    assert_eq!(
        stats(
            &rules,
            &[
                ("user", "user/alice"),
                ("resource", "res/file1"),
                ("action", "read")
            ]
        ),
        "test-domain.user_user/*.resource_res/*.action"
    );
    // Case 4: an exact value wins over a pattern, and counts apart.
    shares(
        &rules,
        &[&[("file", "test1")]],
        50,
        "test-domain.file_test1",
        "fixed_window:60|file=test1",
    );
    shares(
        &rules,
        &[
            &[("file", "test2")],
            &[("file", "test23")],
            &[("file", "test123")],
        ],
        100,
        "test-domain.file_test*",
        "fixed_window:60|file=test*",
    );
    // Case 5: a star in the middle.
    shares(
        &rules,
        &[
            &[("midpath", "/api/v1")],
            &[("midpath", "/api-beta-v1")],
            &[("midpath", "/apiXYZv1")],
        ],
        100,
        "test-domain.midpath_/api*v1",
        "fixed_window:60|midpath=/api*v1",
    );
    assert!(limit(&rules, &[("midpath", "/api/v2")]).is_none());
    // Case 6: several stars.
    shares(
        &rules,
        &[
            &[("multiroute", "svcAepBrpc")],
            &[("multiroute", "svcXXXepYYYrpc")],
            &[("multiroute", "svceprpc")],
        ],
        50,
        "test-domain.multiroute_svc*ep*rpc",
        "fixed_window:60|multiroute=svc*ep*rpc",
    );
    assert!(limit(&rules, &[("multiroute", "svcABCrpc")]).is_none());
    // Case 7: over value_to_metric, with a star in the middle.
    shares(
        &rules,
        &[&[("midroute", "/api/v2")], &[("midroute", "/api-beta-v2")]],
        80,
        "test-domain.midroute_/api*v2",
        "fixed_window:60|midroute=/api*v2",
    );
    // Case 8: nested, stars in the middle.
    shares(
        &rules,
        &[
            &[("tenant", "t1prod"), ("resource", "resAv2")],
            &[("tenant", "t99prod"), ("resource", "resBBBv2")],
        ],
        60,
        "test-domain.tenant_t*prod.resource_res*v2",
        "fixed_window:60|tenant=t*prod|resource=res*v2",
    );

    // share_threshold needs a pattern.
    let e = error("domain: d\ndescriptors:\n  - {key: a, value: b, share_threshold: true}\n");
    assert_eq!(
        e.to_string(),
        "line 3 column 41: share_threshold can only be used with wildcard values \
         (containing '*'), but found key 'a_b'"
    );
}

/// One rule with `value: foo*bar*`-style `pattern` on key `wild`, and `flags`.
fn wild(pattern: &str, flags: &str) -> RuleSet {
    rules(&format!(
        "domain: test-domain\ndescriptors:\n  - {{key: wild, value: '{pattern}', {flags} rate_limit: {{unit: minute, requests_per_unit: 20}}}}\n"
    ))
}

/// TestWildcardStatsBehavior: a star at the end or in the middle, each flag.
#[test]
fn wildcard_stats_behavior() {
    let foo = [("wild", "foo1")];
    assert_eq!(stats(&wild("foo*", ""), &foo), "test-domain.wild_foo*");
    assert_eq!(
        stats(&wild("foo*", "value_to_metric: true,"), &foo),
        "test-domain.wild_foo1"
    );
    assert_eq!(
        stats(&wild("foo*", "share_threshold: true,"), &foo),
        "test-domain.wild_foo*"
    );
    assert_eq!(
        stats(
            &wild("foo*", "share_threshold: true, value_to_metric: true,"),
            &foo
        ),
        "test-domain.wild_foo*"
    );
    // "value_to_metric in other descriptor - wildcard pattern preserved"
    let other = rules(
        "
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    descriptors:
      - key: other
        value_to_metric: true
        descriptors:
          - key: limit
            rate_limit: {requests_per_unit: 20, unit: minute}
",
    );
    assert_eq!(
        stats(
            &other,
            &[("wild", "foo1"), ("other", "bar"), ("limit", "X")]
        ),
        "test-domain.wild_foo*.other_bar.limit"
    );
    let middle = wild("foo*bar*", "");
    assert_eq!(
        stats(&middle, &[("wild", "foo123bar456")]),
        "test-domain.wild_foo*bar*"
    );
    assert_eq!(
        stats(&middle, &[("wild", "fooXbarY")]),
        "test-domain.wild_foo*bar*"
    );
    assert_eq!(
        stats(
            &wild("foo*bar*", "value_to_metric: true,"),
            &[("wild", "foo123bar456")]
        ),
        "test-domain.wild_foo123bar456"
    );
}

/// TestMetadata.
#[test]
fn metadata() {
    let rules = rules(
        "
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          unit: second
          requests_per_unit: 5
        metadata:
          name: service_1
      - key: subkey1
        value: subvalue1
        rate_limit:
          unit: second
          requests_per_unit: 10
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
    metadata:
      service_with_quota:
        name: service_2
",
    );
    let sub = limit(&rules, &[("key1", "value1"), ("subkey1", "something")]).unwrap();
    assert_eq!(sub.limit().requests_per_unit(), 5);
    assert_eq!(sub.stats_key(), "test-domain.key1_value1.subkey1");
    assert_eq!(sub.metadata().unwrap()["name"], "service_1");
    let key2 = limit(&rules, &[("key2", "something")]).unwrap();
    assert_eq!(key2.stats_key(), "test-domain.key2");
    assert_eq!(
        key2.metadata().unwrap()["service_with_quota"]["name"],
        "service_2"
    );
    assert!(
        limit(&rules, &[("key1", "value1"), ("subkey1", "subvalue1")])
            .unwrap()
            .metadata()
            .is_none()
    );
}
