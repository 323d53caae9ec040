//! The words of a `rate_limit` block: its unit of time and its algorithm.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

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
        const NAMES: &[&str] = &["second", "minute", "hour", "day", "week", "month", "year"];
        Unit::from_name(name).ok_or_else(|| E::unknown_variant(name, NAMES))
    }
}

/// How a limit counts (a tollgate extension to envoy's format; envoy counts fixed
/// windows only).
///
/// | `algorithm`      | rule                                                   |
/// |------------------|--------------------------------------------------------|
/// | `fixed_window`   | [`FixedWindow`](crate::algorithm::FixedWindow), windows aligned to the Unix epoch (the default, as envoy) |
/// | `gcra`           | [`Gcra`](crate::algorithm::Gcra): a token bucket; `burst` permits at once (default `requests_per_unit`) |
/// | `sliding_window` | [`SlidingCounter`](crate::algorithm::SlidingCounter): the current and the weighted previous window |
/// | `sliding_log`    | [`SlidingLog`](crate::algorithm::SlidingLog): exact rolling window, one entry per permit |
/// | `leaky_bucket`   | [`LeakyBucket`](crate::algorithm::LeakyBucket): capacity `burst` (default `requests_per_unit`), draining `requests_per_unit` per unit |
///
/// # Examples
///
/// ```
/// use tollgate::config::Algorithm;
///
/// assert_eq!(Algorithm::default(), Algorithm::FixedWindow);
/// assert_eq!(Algorithm::Gcra.as_str(), "gcra");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Algorithm {
    /// Fixed windows aligned to the Unix epoch.
    #[default]
    FixedWindow,
    /// GCRA token bucket.
    Gcra,
    /// Sliding window counter.
    SlidingWindow,
    /// Sliding log.
    SlidingLog,
    /// Leaky bucket as a meter.
    LeakyBucket,
}

impl Algorithm {
    /// The algorithm as the file spells it: `"fixed_window"`, `"gcra"`, …
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tollgate::config::Algorithm::SlidingLog.as_str(), "sliding_log");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::Gcra => "gcra",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::LeakyBucket => "leaky_bucket",
        }
    }

    /// Whether a `burst` applies: only to the buckets.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::config::Algorithm;
    ///
    /// assert!(Algorithm::Gcra.takes_burst());
    /// assert!(!Algorithm::FixedWindow.takes_burst());
    /// ```
    pub const fn takes_burst(self) -> bool {
        matches!(self, Algorithm::Gcra | Algorithm::LeakyBucket)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
                "unknown variant `Fortnight`, expected one of `second`, `minute`, `hour`"
            ),
            "{e}"
        );
    }
}
