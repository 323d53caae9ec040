//! [`Rule`]: the algorithms a store can run, as one closed set, since every one of
//! them needs its twin script in Redis; and the registry that lists them.
//!
//! The `rules!` line of an algorithm is all the store, the Redis script, the HTTP
//! headers and the rules file need of it: the macro makes its [`Rule`] variant, its
//! `From`, its [`RuleKind`] (name, script, rules-file builder), and every `match`
//! over rules, from the algorithm's own facts (`crate::algorithm::Facts`, which its
//! file implements).

use std::fmt;
use std::time::Duration;

use crate::algorithm::{
    Algorithm, Aligned, Arg, Facts, FirstHit, FixedWindow, Gcra, LeakyBucket, Leased,
    RefreshPeriod, Share, SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use crate::error::ConfigError;
use crate::time::Nanos;

macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident($ty:ty),)*) => {
        /// One algorithm with its configuration, as a store runs it.
        ///
        /// Every in-process algorithm has a variant (a concurrency limit needs a
        /// [`Leased`] one, as a process may die holding permits), and
        /// `From` turns each into a rule.
        ///
        /// In a store, time is Unix time: windows of [`FixedWindow`] and
        /// [`SlidingCounter`] start at multiples of their length since the Unix epoch
        /// (plus any offset).
        ///
        /// # Examples
        ///
        /// ```
        /// use tollgate::algorithm::Gcra;
        /// use tollgate::store::Rule;
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
        /// rules file (feature `config`).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        /// use tollgate::algorithm::SlidingCounter;
        /// use tollgate::store::{Rule, RuleKind};
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

        /// The state of one key under a [`Rule`].
        #[derive(Clone, Debug, PartialEq)]
        pub(crate) enum RuleState {
            $($variant(<$ty as Algorithm>::State),)*
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
            /// use tollgate::store::RuleKind;
            ///
            /// assert!(RuleKind::ALL.contains(&RuleKind::Gcra));
            /// ```
            pub const ALL: &'static [RuleKind] = &[$(RuleKind::$variant,)*];

            /// The algorithm's name: `"gcra"`, `"leaky_bucket"`, `"sliding_counter"`, …
            ///
            /// # Examples
            ///
            /// ```
            /// assert_eq!(tollgate::store::RuleKind::LeakyBucket.name(), "leaky_bucket");
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
            /// use tollgate::store::RuleKind;
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
            /// use tollgate::algorithm::Gcra;
            /// use tollgate::store::{Rule, RuleKind};
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
            /// use tollgate::algorithm::{FixedWindow, Gcra};
            /// use tollgate::store::Rule;
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
            /// use tollgate::algorithm::{Gcra, RefreshPeriod};
            /// use tollgate::store::Rule;
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
            /// see [`Algorithm::HELD`]. A [`SharedLimiter`](crate::store::SharedLimiter)'s
            /// grant then gives back this rule's permits when dropped.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::time::Duration;
            /// use tollgate::algorithm::{Concurrency, Gcra, Leased};
            /// use tollgate::store::Rule;
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
            /// use tollgate::algorithm::{Concurrency, Leased, SlidingLog};
            /// use tollgate::store::Rule;
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

            pub(crate) fn initial_state(&self, now: Nanos) -> RuleState {
                match self {
                    $(Rule::$variant(a) => RuleState::$variant(a.initial_state(now)),)*
                }
            }

            /// Applies `op` to `state`. `None` if the state is of another kind.
            pub(crate) fn apply(
                &self,
                state: &mut RuleState,
                now: Nanos,
                op: Step,
            ) -> Option<RuleOutcome> {
                Some(match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => step(a, s, now, op),)*
                    _ => return None,
                })
            }

            /// Applies `op` to `state`, and tells from when the state may be
            /// forgotten if `op` changed it (`None` if it did not): one dispatch,
            /// and the change seen on the algorithm's own state, not the enum of them
            /// all. `None` if the state is of another kind.
            #[inline]
            pub(crate) fn apply_changed(
                &self,
                state: &mut RuleState,
                now: Nanos,
                op: Step,
            ) -> Option<(RuleOutcome, Option<Nanos>)> {
                Some(match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => step_changed(a, s, now, op),)*
                    _ => return None,
                })
            }

            /// What forgetting `state` would give back at `now`, in the algorithm's
            /// own unit ([`Algorithm::forgetting_gives_back`]).
            fn forgetting_gives_back(&self, state: &RuleState, now: Nanos) -> u64 {
                match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => a.forgetting_gives_back(s, now),)*
                    _ => 0,
                }
            }

            /// From when `state` may be forgotten: a store drops the key then.
            pub(crate) fn expires_at(&self, state: &RuleState) -> Nanos {
                match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => a.idle_at(s),)*
                    _ => Nanos::ZERO,
                }
            }
        }
    };
}

/// What forgetting a key's state gives back, as a store records it when it writes the
/// state: in permits whatever the rule, so that keys of different rules in one store
/// compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GivesBack(u64);

impl GivesBack {
    /// Set for a token bucket, whose debt runs out with time: the rest is its
    /// emission interval, and the debt is read from the key's idle time.
    const DEBT: u64 = 1 << 63;

    pub(crate) const NOTHING: GivesBack = GivesBack(0);

    /// At `now`, for a key idle at `idle_at`, in 2⁻³² permits: a token bucket's debt
    /// to the fraction, so that its keys go in the order of their idle times.
    #[inline]
    pub(crate) fn at(self, idle_at: Nanos, now: Nanos) -> u64 {
        if self.0 & Self::DEBT == 0 {
            return self.0.saturating_mul(1 << 32);
        }
        let interval = (self.0 & !Self::DEBT) as f64;
        let debt = idle_at.as_u64().saturating_sub(now.as_u64()) as f64;
        // A float division, not a `u128` one (a call of 40 instructions, for each of
        // the 8 keys sampled); the cast saturates.
        (debt / interval * 4_294_967_296.0) as u64
    }
}

impl Rule {
    /// What forgetting `state` gives back from `now` on: for a token bucket its
    /// emission interval, as its debt then shrinks with time; for the rest what it
    /// gives back at `now`, which time only lessens.
    #[inline]
    pub(crate) fn gives_back(&self, state: &RuleState, now: Nanos) -> GivesBack {
        let interval = match self {
            Rule::Gcra(a) => a.words()[0],
            Rule::LeakyBucket(a) => a.words()[0],
            _ => {
                let permits = self.forgetting_gives_back(state, now);
                return GivesBack(permits.min(GivesBack::DEBT - 1));
            }
        };
        match interval {
            0 => GivesBack(0),
            _ => GivesBack(GivesBack::DEBT | interval.min(GivesBack::DEBT - 1)),
        }
    }
}

/// One step, and from when the state may be forgotten if the step changed it.
#[inline]
fn step_changed<A: Algorithm<State: PartialEq>>(
    algorithm: &A,
    state: &mut A::State,
    now: Nanos,
    op: Step,
) -> (RuleOutcome, Option<Nanos>) {
    if std::mem::needs_drop::<A::State>() {
        // A state that owns memory (a sliding log's entries) is not cloned on every
        // call to be compared: it changes unless a denial that lasts left it as it
        // was, which is what `denial_lasts` promises.
        let verdict = step(algorithm, state, now, op);
        let unchanged = !verdict.is_admitted() && algorithm.denial_lasts();
        return (verdict, (!unchanged).then(|| algorithm.idle_at(state)));
    }
    let before = state.clone();
    let verdict = step(algorithm, state, now, op);
    let expires_at = (*state != before).then(|| algorithm.idle_at(state));
    (verdict, expires_at)
}

/// One step of one algorithm on its own state.
#[inline]
fn step<A: Algorithm>(algorithm: &A, state: &mut A::State, now: Nanos, op: Step) -> RuleOutcome {
    match op {
        Step::Acquire(n) => RuleOutcome::Decision(algorithm.acquire(state, now, n)),
        Step::Peek(n) => RuleOutcome::Decision(algorithm.peek(state, now, n)),
        Step::Reserve(n, max_wait) => {
            RuleOutcome::Reservation(algorithm.reserve(state, now, n, max_wait))
        }
        Step::Refund(n) => {
            algorithm.refund(state, now, n);
            RuleOutcome::Refunded
        }
    }
}

// The registry: one line per algorithm a store runs. See `crate::algorithm` for what
// else adding one touches (its file and its Lua script).
rules! {
    /// [`Gcra`]: token bucket in GCRA form.
    Gcra(Gcra),
    /// [`LeakyBucket`] as a meter.
    LeakyBucket(LeakyBucket),
    /// [`FixedWindow`], windows aligned to the Unix epoch.
    FixedWindow(FixedWindow<Aligned>),
    /// [`FixedWindow`], each window starting at the key's first request.
    FixedWindowFirstHit(FixedWindow<FirstHit>),
    /// [`SlidingLog`]: exact rolling window.
    SlidingLog(SlidingLog),
    /// [`SlidingCounter`]: current plus weighted previous window.
    SlidingCounter(SlidingCounter),
    /// [`SmoothBursty`]: Guava's rate limiter.
    SmoothBursty(SmoothBursty),
    /// [`SmoothWarmingUp`]: Guava's rate limiter with warm-up.
    SmoothWarmingUp(SmoothWarmingUp),
    /// [`RefreshPeriod`]: Resilience4j's limiter.
    RefreshPeriod(RefreshPeriod),
    /// [`Leased`]: a concurrency limit whose permits expire.
    Concurrency(Leased),
}

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

/// What one check is asked to do; see [`Op`](crate::store::Op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Acquire(u64),
    Peek(u64),
    Reserve(u64, Duration),
    Refund(u64),
}

/// One check's answer, before the answers of a request's checks are combined: of
/// the same type as the request's answer, so that a request of one check hands it on
/// as it is, with no copy into another enum.
pub(crate) use super::request::Reply as RuleOutcome;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Quota;
    use crate::algorithm::{Concurrency, Leased};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A rule of `kind` admitting about `limit` permits per second (or held at once),
    /// one for every kind: the match is exhaustive, so a new registry line needs one.
    pub(crate) fn sample(kind: RuleKind, limit: u64) -> Rule {
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
            let rule = sample(kind, 10);
            assert_eq!(rule.kind(), kind);
            let share = rule.per_node(2).unwrap();
            assert_eq!(share.kind(), kind, "a share keeps its kind");
            assert_eq!(rule.per_node(1).unwrap(), rule, "one node keeps the whole");
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
            let rule = sample(kind, 12);
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
            let rule = sample(kind, 10);
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
