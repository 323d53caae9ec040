//! The words of a `rate_limit` block: its unit of time and its algorithm.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::algorithm::RuleKind;

/// The time `requests_per_unit` applies to.
///
/// Windows are aligned to the Unix epoch, as envoy's are: a `minute` window starts at
/// every whole minute of Unix time. Units longer than a day are fixed lengths, not
/// calendar periods: a `week` is 7 days (windows start on Thursdays at 00:00 UTC, the
/// weekday of the epoch), a `month` 30 days and a `year` 365 days, as in envoy's
/// ratelimit service.
///
/// The file may spell them in any case (`minute`, `MINUTE`, `Minute`), as envoy's
/// ratelimit service reads them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::config::Unit;
///
/// assert_eq!(Unit::Minute.duration(), Duration::from_secs(60));
/// assert_eq!(Unit::Month.duration(), Duration::from_secs(30 * 86_400));
/// assert_eq!(Unit::from_name("Minute"), Some(Unit::Minute));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

/// Every unit, in the order an error lists them.
const UNITS: [Unit; 7] = [
    Unit::Second,
    Unit::Minute,
    Unit::Hour,
    Unit::Day,
    Unit::Week,
    Unit::Month,
    Unit::Year,
];

impl Unit {
    /// The unit's length.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Unit::Week.duration().as_secs(), 604_800);
    /// ```
    pub const fn duration(self) -> Duration {
        Duration::from_secs(self.seconds())
    }

    const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    /// The unit named `name`, in any case (`"minute"`, `"MINUTE"`, `"Minute"`), as
    /// envoy reads a unit; `None` for any other name.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Unit;
    ///
    /// assert_eq!(Unit::from_name("SECOND"), Some(Unit::Second));
    /// assert_eq!(Unit::from_name("fortnight"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Unit> {
        UNITS
            .into_iter()
            .find(|unit| unit.as_str().eq_ignore_ascii_case(name))
    }

    /// The unit as the file spells it: `"second"`, `"minute"`, …
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Unit::Hour.as_str(), "hour");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unit, D::Error> {
        deserializer.deserialize_str(UnitVisitor)
    }
}

/// Reads a unit's name in any case.
struct UnitVisitor;

impl Visitor<'_> for UnitVisitor {
    type Value = Unit;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a unit of time")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Unit, E> {
        // envoy's words, then the names it would have taken.
        Unit::from_name(name).ok_or_else(|| {
            E::custom(format_args!(
                "invalid rate limit unit '{name}', expected one of second, minute, hour, \
                 day, week, month, year (in any case)"
            ))
        })
    }
}

/// Reads the `algorithm` of a `rate_limit`: the name of a [`RuleKind`] a rules file
/// can build (see the [table](crate::config#algorithms)), or an alias of one.
pub(crate) fn algorithm<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<RuleKind>, D::Error> {
    deserializer.deserialize_str(AlgorithmVisitor).map(Some)
}

/// The algorithm a `rate_limit` without one counts with, as envoy's.
pub(crate) const DEFAULT_ALGORITHM: RuleKind = RuleKind::FixedWindow;

/// Names the store knows by another name: `(alias, name)`.
const ALIASES: &[(&str, &str)] = &[("sliding_window", "sliding_counter")];

/// The kind a rules file names `name`, if a rules file can build it.
pub(crate) fn algorithm_named(name: &str) -> Option<RuleKind> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical);
    RuleKind::from_name(name).filter(|kind| kind.in_rules_files())
}

/// Reads an algorithm's name.
struct AlgorithmVisitor;

impl Visitor<'_> for AlgorithmVisitor {
    type Value = RuleKind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an algorithm")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<RuleKind, E> {
        algorithm_named(name).ok_or_else(|| {
            // serde's words for an unknown variant, over the kinds a file can build.
            let names: Vec<String> = RuleKind::ALL
                .iter()
                .filter(|kind| kind.in_rules_files())
                .map(|kind| format!("`{kind}`"))
                .collect();
            E::custom(format_args!(
                "unknown variant `{name}`, expected one of {}",
                names.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: only `minute` and `MINUTE` were read; envoy reads unit names in any
    /// case, so `Minute` or `sEcOnD` in an envoy file was an error.
    #[test]
    fn unit_names_are_read_in_any_case() {
        for unit in UNITS {
            let lower = unit.as_str();
            let upper = lower.to_ascii_uppercase();
            let title = format!("{}{}", lower[..1].to_ascii_uppercase(), &lower[1..]);
            let mixed: String = lower
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 1 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for name in [lower.to_owned(), upper, title, mixed] {
                assert_eq!(Unit::from_name(&name), Some(unit), "{name}");
                let read: Unit = serde_yaml_ng::from_str(&name).unwrap();
                assert_eq!(read, unit, "{name}");
            }
        }
    }

    #[test]
    fn an_unknown_unit_lists_the_names() {
        assert_eq!(Unit::from_name("seconds"), None);
        let e = serde_yaml_ng::from_str::<Unit>("Fortnight").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "invalid rate limit unit 'Fortnight', expected one of second, minute, hour"
            ),
            "{e}"
        );
    }

    /// The store's name and, for what was `sliding_window` in the config alone, the
    /// old name: both read as the same kind.
    #[test]
    fn sliding_window_is_read_as_sliding_counter() {
        for name in ["sliding_counter", "sliding_window"] {
            assert_eq!(
                algorithm_named(name),
                Some(RuleKind::SlidingCounter),
                "{name}"
            );
        }
        assert_eq!(RuleKind::SlidingCounter.name(), "sliding_counter");
    }

    #[test]
    fn an_unknown_algorithm_lists_the_names_a_file_can_use() {
        #[derive(Debug, Deserialize)]
        struct Block {
            #[serde(default, deserialize_with = "algorithm")]
            #[allow(dead_code)]
            algorithm: Option<RuleKind>,
        }
        let e = serde_yaml_ng::from_str::<Block>("algorithm: token_bucket").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "algorithm: unknown variant `token_bucket`, expected one of `gcra`, \
                 `leaky_bucket`, `fixed_window`, `sliding_log`, `sliding_counter`"
            ),
            "{e}"
        );
        // A kind a store runs but a file cannot build is unknown to the file.
        let e = serde_yaml_ng::from_str::<Block>("algorithm: concurrency").unwrap_err();
        assert!(
            e.to_string().contains("unknown variant `concurrency`"),
            "{e}"
        );
    }

    #[test]
    fn every_name_a_file_can_use_builds_its_kind() {
        let minute = Unit::Minute.duration();
        for &kind in RuleKind::ALL {
            match algorithm_named(kind.name()) {
                Some(named) => {
                    assert_eq!(named, kind);
                    let rule = kind.build_rule(10, minute, None).unwrap();
                    assert_eq!(rule.kind(), kind);
                }
                None => assert!(kind.build_rule(10, minute, None).is_err(), "{kind}"),
            }
        }
    }
}
