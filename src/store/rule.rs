//! [`Rule`]: the algorithms a store can run, as one closed set, since every one of
//! them needs its twin script in Redis.

use std::time::Duration;

use crate::algorithm::{
    Algorithm, Aligned, FirstHit, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod,
    SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use crate::decision::{Decision, Denied, Reservation};
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

        impl Rule {
            /// The most permits one request can be granted.
            pub fn capacity(&self) -> u64 {
                match self {
                    $(Rule::$variant(a) => a.capacity(),)*
                }
            }

            /// The kind of algorithm, as its script knows it: `"gcra"`, `"leaky_bucket"`, …
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Rule::$variant(_) => rule_kind::$variant,)*
                }
            }

            /// Whether a reservation on this rule alone books future capacity, so that a
            /// waiter can book once and sleep, rather than poll.
            pub fn books_ahead(&self) -> bool {
                match self {
                    $(Rule::$variant(_) => <$ty as Algorithm>::BOOKS_AHEAD,)*
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
            ) -> Option<Verdict> {
                Some(match (self, state) {
                    $((Rule::$variant(a), RuleState::$variant(s)) => match op {
                        Step::Acquire(n) => Verdict::Decision(a.acquire(s, now, n)),
                        Step::Peek(n) => Verdict::Decision(a.peek(s, now, n)),
                        Step::Reserve(n, max_wait) => {
                            Verdict::Reservation(a.reserve(s, now, n, max_wait))
                        }
                        Step::Refund(n) => {
                            a.refund(s, now, n);
                            Verdict::Refunded
                        }
                    },)*
                    _ => return None,
                })
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

impl Rule {
    /// The time an emptied rule takes to become full again, with no request meanwhile:
    /// the `w` its `RateLimit-Policy` reports.
    ///
    /// - GCRA and the leaky bucket: the capacity times the emission (drain) interval;
    /// - fixed windows, the sliding log and the sliding counter: the window (a sliding
    ///   counter emptied early in its window can take up to two to forget it all);
    /// - Guava's bursty limiter: `max_burst_seconds`; the warming-up one: the warm-up
    ///   (from hot back to fully cold); each at least one stable interval, the time
    ///   of one permit, which is what a limiter without burst or warm-up refills;
    /// - Resilience4j's limiter: the refresh period;
    /// - a concurrency limit: the lease, after which permits held by a holder that
    ///   never released them are back.
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
        let times = |interval: Duration, n: u64| {
            u64::try_from(interval.as_nanos().saturating_mul(u128::from(n)))
                .map_or(Duration::MAX, Duration::from_nanos)
        };
        match self {
            Rule::Gcra(g) => times(g.emission_interval(), g.capacity()),
            Rule::LeakyBucket(b) => times(b.drain_interval(), b.capacity()),
            Rule::FixedWindow(w) => w.window(),
            Rule::FixedWindowFirstHit(w) => w.window(),
            Rule::SlidingLog(l) => l.window(),
            Rule::SlidingCounter(c) => c.window(),
            Rule::SmoothBursty(b) => Duration::try_from_secs_f64(b.max_burst_seconds())
                .unwrap_or(Duration::MAX)
                .max(b.stable_interval()),
            Rule::SmoothWarmingUp(w) => w.warmup().max(w.stable_interval()),
            Rule::RefreshPeriod(r) => r.refresh_period(),
            Rule::Concurrency(l) => l.lease(),
        }
    }
}

/// The script names of the rules, shared by the Redis store.
#[allow(non_upper_case_globals)]
pub(crate) mod rule_kind {
    pub(crate) const Gcra: &str = "gcra";
    pub(crate) const LeakyBucket: &str = "leaky_bucket";
    pub(crate) const FixedWindow: &str = "fixed_window";
    pub(crate) const FixedWindowFirstHit: &str = "fixed_window_first_hit";
    pub(crate) const SlidingLog: &str = "sliding_log";
    pub(crate) const SlidingCounter: &str = "sliding_counter";
    pub(crate) const SmoothBursty: &str = "smooth_bursty";
    pub(crate) const SmoothWarmingUp: &str = "smooth_warming_up";
    pub(crate) const RefreshPeriod: &str = "refresh_period";
    pub(crate) const Concurrency: &str = "concurrency";
}

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

/// What one check is asked to do; see [`Op`](crate::store::Op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Acquire(u64),
    Peek(u64),
    Reserve(u64, Duration),
    Refund(u64),
}

/// One check's answer, before the answers of a request's checks are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Decision(Decision),
    Reservation(Result<Reservation, Denied>),
    Refunded,
}

impl Verdict {
    /// Whether the check lets the request go on.
    pub(crate) fn admits(&self) -> bool {
        match self {
            Verdict::Decision(d) => d.is_ok(),
            Verdict::Reservation(r) => r.is_ok(),
            Verdict::Refunded => true,
        }
    }
}
