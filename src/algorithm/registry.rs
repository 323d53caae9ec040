//! The algorithm registry: which algorithms the rest of the crate can name, and how
//! each is described.
//!
//! `algorithms!` is the one list, a line per algorithm. A reader hands it a macro of
//! its own, which turns the list into what that reader needs:
//!
//! - `rules!`, here: the [`Rule`] enum (an algorithm with its configuration), its
//!   `From`s, [`RuleKind`] (name, Lua source, rules-file builder) and every `match`
//!   that describes a rule, from the algorithm's own facts (`Facts`, which its file
//!   implements). The HTTP layer's headers and the rules file read these.
//! - the store's, in `src/store/rule.rs`: the state a store keeps per key under a
//!   rule, and how a request steps it.
//!
//! Nothing here knows of a store, the HTTP layer or a keyed limiter: they read the
//! registry, and adding an algorithm changes none of them.

use std::fmt;
use std::time::Duration;

use super::{Algorithm, Arg, Facts, Share};
use crate::error::ConfigError;

/// The registry: one line per algorithm, its [`Rule`] variant and its type, handed to
/// `$reader`, a macro that turns the list into code. Types are spelled in full, so
/// that a reader needs none of them in scope. Adding an algorithm adds a line here
/// (see the module docs of `crate::algorithm` for the rest).
macro_rules! algorithms {
    ($reader:ident) => {
        $reader! {
            /// [`Gcra`](crate::algorithm::Gcra): token bucket in GCRA form.
            Gcra($crate::algorithm::Gcra),
            /// [`LeakyBucket`](crate::algorithm::LeakyBucket) as a meter.
            LeakyBucket($crate::algorithm::LeakyBucket),
            /// [`FixedWindow`](crate::algorithm::FixedWindow), windows aligned to the
            /// Unix epoch.
            FixedWindow($crate::algorithm::FixedWindow<$crate::algorithm::Aligned>),
            /// [`FixedWindow`](crate::algorithm::FixedWindow), each window starting at
            /// the key's first request.
            FixedWindowFirstHit($crate::algorithm::FixedWindow<$crate::algorithm::FirstHit>),
            /// [`SlidingLog`](crate::algorithm::SlidingLog): exact rolling window.
            SlidingLog($crate::algorithm::SlidingLog),
            /// [`SlidingCounter`](crate::algorithm::SlidingCounter): current plus
            /// weighted previous window.
            SlidingCounter($crate::algorithm::SlidingCounter),
            /// [`SmoothBursty`](crate::algorithm::SmoothBursty): Guava's rate limiter.
            SmoothBursty($crate::algorithm::SmoothBursty),
            /// [`SmoothWarmingUp`](crate::algorithm::SmoothWarmingUp): Guava's rate
            /// limiter with warm-up.
            SmoothWarmingUp($crate::algorithm::SmoothWarmingUp),
            /// [`RefreshPeriod`](crate::algorithm::RefreshPeriod): Resilience4j's
            /// limiter.
            RefreshPeriod($crate::algorithm::RefreshPeriod),
            /// [`Leased`](crate::algorithm::Leased): a concurrency limit whose permits
            /// expire.
            Concurrency($crate::algorithm::Leased),
        }
    };
}

pub(crate) use algorithms;

// The registry's reader here: the rule types and what describes them.
macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident($ty:ty),)*) => {
        /// One algorithm with its configuration: what a store runs,
        /// what the HTTP layer reports of a limiter's limits, and what a rules file
        /// builds. The store re-exports it as `store::Rule`.
        ///
        /// Every in-process algorithm has a variant (a concurrency limit needs a
        /// [`Leased`](crate::algorithm::Leased) one, as a process may die holding
        /// permits), and
        /// `From` turns each into a rule.
        ///
        /// In a store, time is Unix time: windows of
        /// [`FixedWindow`](crate::algorithm::FixedWindow) and
        /// [`SlidingCounter`](crate::algorithm::SlidingCounter) start at multiples of
        /// their length since the Unix epoch (plus any offset).
        ///
        /// # Examples
        ///
        /// ```
        /// use tollgate::algorithm::{Gcra, Rule};
        /// use tollgate::Quota;
        ///
        /// let rule = Rule::from(Gcra::new(Quota::per_second(10)?));
        /// assert_eq!(rule.capacity(), 10);
        /// # Ok::<(), tollgate::ConfigError>(())
        /// ```
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum Rule {
            $($(#[$doc])* $variant($ty),)*
        }

        /// The kind of a [`Rule`]: its algorithm, without the configuration. Its
        /// [`name`](RuleKind::name) is the one name of the algorithm, in the Redis
        /// script, in the keys and values stores write, and as the `algorithm` of a
        /// rules file (feature `config`). The store re-exports it as
        /// `store::RuleKind`.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        /// use tollgate::algorithm::{Rule, RuleKind, SlidingCounter};
        ///
        /// let rule = Rule::from(SlidingCounter::new(10, Duration::from_secs(1))?);
        /// assert_eq!(rule.kind(), RuleKind::SlidingCounter);
        /// assert_eq!(rule.kind().name(), "sliding_counter");
        /// assert_eq!(RuleKind::from_name("sliding_counter"), Some(RuleKind::SlidingCounter));
        /// # Ok::<(), tollgate::ConfigError>(())
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum RuleKind {
            $(
                #[doc = concat!("[`Rule::", stringify!($variant), "`].")]
                $variant,
            )*
        }

        $(impl From<$ty> for Rule {
            fn from(rule: $ty) -> Rule {
                Rule::$variant(rule)
            }
        })*

        impl RuleKind {
            /// Every kind, in the registry's order.
            ///
            /// # Examples
            ///
            /// ```
            /// use tollgate::algorithm::RuleKind;
            ///
            /// assert!(RuleKind::ALL.contains(&RuleKind::Gcra));
            /// ```
            pub const ALL: &'static [RuleKind] = &[$(RuleKind::$variant,)*];

            /// The algorithm's name: `"gcra"`, `"leaky_bucket"`, `"sliding_counter"`, …
            ///
            /// # Examples
            ///
            /// ```
            /// assert_eq!(tollgate::algorithm::RuleKind::LeakyBucket.name(), "leaky_bucket");
            /// ```
            pub const fn name(self) -> &'static str {
                match self {
                    $(RuleKind::$variant => <$ty as Facts>::NAME,)*
                }
            }

            /// The kind named `name` (exactly, as [`name`](RuleKind::name) spells it).
            ///
            /// # Examples
            ///
            /// ```
            /// use tollgate::algorithm::RuleKind;
            ///
            /// assert_eq!(RuleKind::from_name("gcra"), Some(RuleKind::Gcra));
            /// assert_eq!(RuleKind::from_name("token_bucket"), None);
            /// ```
            pub fn from_name(name: &str) -> Option<RuleKind> {
                RuleKind::ALL.iter().copied().find(|kind| kind.name() == name)
            }

            /// The Lua source that registers this kind in the Redis script.
            #[cfg_attr(not(any(feature = "redis", test)), allow(dead_code))]
            pub(crate) fn script(self) -> &'static str {
                match self {
                    $(RuleKind::$variant => <$ty as Facts>::SCRIPT,)*
                }
            }

            /// Whether a rules file can name this kind as its `algorithm`.
            #[cfg_attr(not(any(feature = "config", test)), allow(dead_code))]
            pub(crate) fn in_rules_files(self) -> bool {
                match self {
                    $(RuleKind::$variant => <$ty as Facts>::CONFIG.is_some(),)*
                }
            }

            /// Whether a rules file may give this kind a `burst`.
            #[cfg_attr(not(any(feature = "config", test)), allow(dead_code))]
            pub(crate) fn takes_burst(self) -> bool {
                match self {
                    $(RuleKind::$variant => {
                        <$ty as Facts>::CONFIG.as_ref().is_some_and(|config| config.takes_burst)
                    })*
                }
            }

            /// The rule a rules file means by `requests_per_unit` per `unit` (and a
            /// `burst`, for kinds that take one).
            ///
            /// # Errors
            ///
            /// The algorithm's own constructor's; [`ConfigError::OutOfRange`]
            /// (parameter `"algorithm"`) for a kind a rules file cannot name.
            #[cfg_attr(not(any(feature = "config", test)), allow(dead_code))]
            pub(crate) fn build_rule(
                self,
                requests_per_unit: u64,
                unit: Duration,
                burst: Option<u64>,
            ) -> Result<Rule, ConfigError> {
                match self {
                    $(RuleKind::$variant => match &<$ty as Facts>::CONFIG {
                        Some(config) => {
                            (config.build)(requests_per_unit, unit, burst).map(Rule::$variant)
                        }
                        None => Err(NOT_IN_RULES_FILES),
                    },)*
                }
            }
        }

        impl Rule {
            /// The most permits one request can be granted.
            pub fn capacity(&self) -> u64 {
                match self {
                    $(Rule::$variant(a) => a.capacity(),)*
                }
            }

            /// The kind of algorithm.
            ///
            /// # Examples
            ///
            /// ```
            /// use tollgate::algorithm::{Gcra, Rule, RuleKind};
            /// use tollgate::Quota;
            ///
            /// let rule = Rule::from(Gcra::new(Quota::per_second(10)?));
            /// assert_eq!(rule.kind(), RuleKind::Gcra);
            /// # Ok::<(), tollgate::ConfigError>(())
            /// ```
            pub fn kind(&self) -> RuleKind {
                match self {
                    $(Rule::$variant(_) => RuleKind::$variant,)*
                }
            }

            /// Whether a reservation on this rule alone books future capacity, so that a
            /// waiter can book once and sleep, rather than poll.
            pub fn books_ahead(&self) -> bool {
                match self {
                    $(Rule::$variant(_) => <$ty as Algorithm>::BOOKS_AHEAD,)*
                }
            }

            /// The time an emptied rule takes to become full again, with no request
            /// meanwhile: the `w` its `RateLimit-Policy` reports. Each algorithm
            /// states its own:
            ///
            /// - GCRA and the leaky bucket: the capacity times the emission (drain)
            ///   interval;
            /// - fixed windows, the sliding log and the sliding counter: the window;
            /// - Guava's limiters: the time to store the most permits (at least one
            ///   stable interval); Resilience4j's: the refresh period;
            /// - a concurrency limit: the lease, after which permits held by a holder
            ///   that never released them are back.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            /// use tollgate::algorithm::{FixedWindow, Gcra, Rule};
            /// use tollgate::Quota;
            ///
            /// let bucket = Rule::from(Gcra::new(Quota::per_second(10)?.burst(20)?));
            /// assert_eq!(bucket.window(), Duration::from_secs(2));
            /// let window = Rule::from(FixedWindow::new(100, Duration::from_secs(60))?);
            /// assert_eq!(window.window(), Duration::from_secs(60));
            /// # Ok::<(), tollgate::ConfigError>(())
            /// ```
            pub fn window(&self) -> Duration {
                match self {
                    $(Rule::$variant(a) => Facts::window(a),)*
                }
            }

            /// The quota its `RateLimit-Policy` reports (`q`), the limit its decisions
            /// report: the [`capacity`](Rule::capacity), but for Guava's limiters the
            /// most permits they store (at least 1) and Resilience4j's the permits of
            /// one period (its capacity counts the periods a reservation may book
            /// ahead).
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            /// use tollgate::algorithm::{Gcra, RefreshPeriod, Rule};
            /// use tollgate::Quota;
            ///
            /// let bucket = Rule::from(Gcra::new(Quota::per_second(10)?.burst(20)?));
            /// assert_eq!(bucket.quota(), 20);
            /// let second = Duration::from_secs(1);
            /// let r4j = Rule::from(RefreshPeriod::new(5, second, second)?);
            /// assert_eq!(r4j.quota(), 5);
            /// # Ok::<(), tollgate::ConfigError>(())
            /// ```
            pub fn quota(&self) -> u64 {
                match self {
                    $(Rule::$variant(a) => Facts::quota(a),)*
                }
            }

            /// Whether this rule's permits are held while work lasts and given back
            /// by their holder, as a concurrency limit's, rather than freed by time:
            /// see [`Algorithm::HELD`]. A `SharedLimiter`'s
            /// grant then gives back this rule's permits when dropped.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            /// use tollgate::algorithm::{Concurrency, Gcra, Leased, Rule};
            /// use tollgate::Quota;
            ///
            /// let held = Leased::new(Concurrency::new(2)?, Duration::from_secs(30))?;
            /// assert!(Rule::from(held).is_held());
            /// assert!(!Rule::from(Gcra::new(Quota::per_second(10)?)).is_held());
            /// # Ok::<(), tollgate::ConfigError>(())
            /// ```
            pub fn is_held(&self) -> bool {
                match self {
                    $(Rule::$variant(_) => <$ty as Algorithm>::HELD,)*
                }
            }

            /// Whether a denial of this rule lasts until its retry time, whatever the
            /// process that was denied does meanwhile, so that it may be answered
            /// without asking the store again until then. Not for a concurrency
            /// limit, whose denials end when a holder releases, nor for a sliding log
            /// that counts blocked attempts, each of which must reach the store.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            /// use tollgate::algorithm::{Concurrency, Leased, Rule, SlidingLog};
            ///
            /// let log = SlidingLog::new(10, Duration::from_secs(1))?;
            /// assert!(Rule::from(log).denial_lasts());
            /// assert!(!Rule::from(log.count_blocked(true)).denial_lasts());
            /// let held = Leased::new(Concurrency::new(2)?, Duration::from_secs(30))?;
            /// assert!(!Rule::from(held).denial_lasts());
            /// # Ok::<(), tollgate::ConfigError>(())
            /// ```
            pub fn denial_lasts(&self) -> bool {
                match self {
                    $(Rule::$variant(a) => Algorithm::denial_lasts(a),)*
                }
            }

            /// One node's part of this rule: see [`per_node`](Rule::per_node).
            pub(crate) fn share(&self, share: Share) -> Result<Rule, ConfigError> {
                Ok(match self {
                    $(Rule::$variant(a) => Rule::$variant(Facts::per_node(a, share)?),)*
                })
            }

            /// The parameters the rule's Lua twin reads.
            #[cfg_attr(not(any(feature = "redis", test)), allow(dead_code))]
            pub(crate) fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
                match self {
                    $(Rule::$variant(a) => a.script_args(),)*
                }
            }
        }
    };
}

algorithms!(rules);

/// The error of building, from a rules file, a kind it cannot name.
#[cfg_attr(not(any(feature = "config", test)), allow(dead_code))]
const NOT_IN_RULES_FILES: ConfigError = ConfigError::OutOfRange {
    parameter: "algorithm",
    expected: "an algorithm a rules file can name",
};

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::algorithm::{
        Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod, SlidingCounter,
        SlidingLog, SmoothBursty, SmoothWarmingUp,
    };
    use crate::quota::Quota;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A rule of `kind` admitting about `limit` permits per second (or held at once),
    /// one for every kind: the match is exhaustive, so a new registry line needs one.
    pub(crate) fn sample_rule(kind: RuleKind, limit: u64) -> Rule {
        match kind {
            RuleKind::Gcra => Gcra::new(Quota::per_second(limit).unwrap()).into(),
            RuleKind::LeakyBucket => LeakyBucket::new(limit, Quota::per_second(limit).unwrap())
                .unwrap()
                .into(),
            RuleKind::FixedWindow => FixedWindow::new(limit, secs(1)).unwrap().into(),
            RuleKind::FixedWindowFirstHit => {
                FixedWindow::from_first_hit(limit, secs(1)).unwrap().into()
            }
            RuleKind::SlidingLog => SlidingLog::new(limit, secs(1)).unwrap().into(),
            RuleKind::SlidingCounter => SlidingCounter::new(limit, secs(1)).unwrap().into(),
            RuleKind::SmoothBursty => SmoothBursty::new(limit as f64).unwrap().into(),
            RuleKind::SmoothWarmingUp => {
                SmoothWarmingUp::new(limit as f64, secs(2)).unwrap().into()
            }
            RuleKind::RefreshPeriod => RefreshPeriod::new(limit, secs(1), Duration::ZERO)
                .unwrap()
                .into(),
            RuleKind::Concurrency => Leased::new(Concurrency::new(limit).unwrap(), secs(30))
                .unwrap()
                .into(),
        }
    }

    #[test]
    fn the_registry_gives_every_kind_a_name_a_script_and_a_share() {
        let mut names: Vec<&str> = RuleKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RuleKind::ALL.len(), "names are unique");
        for &kind in RuleKind::ALL {
            let name = kind.name();
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{name} is snake case"
            );
            assert_eq!(RuleKind::from_name(name), Some(kind));
            assert_eq!(kind.to_string(), name);
            assert!(
                kind.script().contains(&format!("ALGORITHMS.{name} =")),
                "the script of {name} registers it"
            );
            let rule = sample_rule(kind, 10);
            assert_eq!(rule.kind(), kind);
            let share = rule.share(Share::new(2).unwrap()).unwrap();
            assert_eq!(share.kind(), kind, "a share keeps its kind");
            let whole = rule.share(Share::new(1).unwrap()).unwrap();
            assert_eq!(whole, rule, "one node keeps the whole");
            assert!(rule.script_args().is_ok(), "{name}: {rule:?}");
            assert!(rule.window() > Duration::ZERO, "{name}");
            assert!(rule.quota() > 0, "{name}");
            if !kind.in_rules_files() {
                assert!(!kind.takes_burst(), "{name}");
                assert_eq!(kind.build_rule(10, secs(1), None), Err(NOT_IN_RULES_FILES));
            }
        }
    }

    #[test]
    fn rules_files_name_the_algorithms_they_always_have() {
        let in_files: Vec<&str> = RuleKind::ALL
            .iter()
            .filter(|k| k.in_rules_files())
            .map(|k| k.name())
            .collect();
        assert_eq!(
            in_files,
            [
                "gcra",
                "leaky_bucket",
                "fixed_window",
                "sliding_log",
                "sliding_counter"
            ]
        );
        let bursty: Vec<&str> = RuleKind::ALL
            .iter()
            .filter(|k| k.takes_burst())
            .map(|k| k.name())
            .collect();
        assert_eq!(bursty, ["gcra", "leaky_bucket"]);
    }

    /// The quota of each kind, as the HTTP layer's `RateLimit-Policy` reported it
    /// before the algorithms stated it themselves.
    #[test]
    fn the_quota_is_the_capacity_but_for_guava_and_resilience4j() {
        for &kind in RuleKind::ALL {
            let rule = sample_rule(kind, 12);
            let expected = match &rule {
                Rule::SmoothBursty(r) => (r.max_permits() as u64).max(1),
                Rule::SmoothWarmingUp(r) => (r.max_permits() as u64).max(1),
                Rule::RefreshPeriod(r) => r.limit_for_period(),
                other => other.capacity(),
            };
            assert_eq!(rule.quota(), expected, "{kind}");
        }
        let tiny = Rule::from(SmoothBursty::with_max_burst_seconds(0.5, 1.0).unwrap());
        assert_eq!(tiny.quota(), 1, "at least one");
    }

    /// The denials the denied cache kept before the algorithms stated it themselves:
    /// all but a concurrency limit's and a sliding log's that counts blocked attempts.
    #[test]
    fn denials_last_but_for_releases_and_counted_attempts() {
        for &kind in RuleKind::ALL {
            let rule = sample_rule(kind, 10);
            let expected = match &rule {
                Rule::Concurrency(_) => false,
                Rule::SlidingLog(log) => !log.counts_blocked(),
                _ => true,
            };
            assert_eq!(rule.denial_lasts(), expected, "{kind}");
        }
        let counting = SlidingLog::new(10, secs(1)).unwrap().count_blocked(true);
        assert!(!Rule::from(counting).denial_lasts());
    }

    #[test]
    fn windows_are_each_algorithms_refill_time() {
        let cases: [(Rule, Duration); 6] = [
            (
                Gcra::new(Quota::per_second(10).unwrap().burst(20).unwrap()).into(),
                secs(2),
            ),
            (
                LeakyBucket::new(5, Quota::per_second(1).unwrap())
                    .unwrap()
                    .into(),
                secs(5),
            ),
            (SlidingCounter::new(3, secs(7)).unwrap().into(), secs(7)),
            (
                SmoothBursty::with_max_burst_seconds(2.0, 3.0)
                    .unwrap()
                    .into(),
                secs(3),
            ),
            (
                RefreshPeriod::new(5, secs(4), Duration::ZERO)
                    .unwrap()
                    .into(),
                secs(4),
            ),
            (
                Leased::new(Concurrency::new(2).unwrap(), secs(30))
                    .unwrap()
                    .into(),
                secs(30),
            ),
        ];
        for (rule, window) in cases {
            assert_eq!(rule.window(), window, "{rule:?}");
        }
        // Without burst, one stable interval.
        let none = Rule::from(SmoothBursty::with_max_burst_seconds(4.0, 0.0).unwrap());
        assert_eq!(none.window(), Duration::from_millis(250));
        let cold = Rule::from(SmoothWarmingUp::new(4.0, Duration::ZERO).unwrap());
        assert_eq!(cold.window(), Duration::from_millis(250));
    }
}
