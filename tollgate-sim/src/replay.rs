//! Requests replayed against a limiter on virtual time, and what it admitted.

use std::time::Duration;

use futures_util::FutureExt as _;
use serde::Serialize;
use tollgate::algorithm::Algorithm;
use tollgate::config::{ConfigLimiter, Descriptor, RuleSet};
use tollgate::store::MemoryStore;
use tollgate::time::{ManualClock, Nanos};
use tollgate::{KeyedConfig, Limiter};

use crate::arrivals::Arrival;
use crate::domains::Entry;
use crate::error::SimError;

/// The simulation's time zero, as Unix time: 2023-11-14 00:00 UTC, a whole day, so
/// that windows of a second, a minute, an hour and a day all start with the run.
pub const EPOCH: Duration = Duration::from_secs(19_675 * 86_400);

/// A limiter under simulation: decides one request at a virtual time.
pub trait Decide {
    /// Whether the request for `key` costing `cost`, at `at` from the start, is
    /// admitted.
    ///
    /// # Errors
    ///
    /// [`SimError::Rules`] when the limiter cannot decide.
    fn decide(&mut self, at: Duration, key: &str, cost: u64) -> Result<bool, SimError>;
}

/// A rules file (every algorithm tollgate's rules take: the rate limit service's
/// domain file) over a memory store: [`ConfigLimiter`] with the request's time
/// given, as in production with a store. Each request carries the same descriptors,
/// an entry without a value taking the request's key.
pub struct RulesLimiter {
    limiter: ConfigLimiter<MemoryStore<ManualClock>>,
    /// The store's clock, set to each request's time: the store's housekeeping (which
    /// keys are idle, what a full table forgets) then runs on virtual time too, so a
    /// seed replays exactly.
    clock: ManualClock,
    descriptors: Vec<Vec<Entry>>,
    /// Requests whose descriptors matched no limit (admitted, as the service
    /// admits them).
    unmatched: u64,
}

impl RulesLimiter {
    /// The limiter of `yaml` (a domain file), keying requests by `descriptor_key`.
    ///
    /// # Errors
    ///
    /// [`SimError::Rules`] for a file that does not load.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_sim::replay::{Decide, RulesLimiter};
    ///
    /// let mut limiter = RulesLimiter::new(
    ///     "domain: sim\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 1 }\n",
    ///     "user",
    /// )?;
    /// assert!(limiter.decide(Duration::ZERO, "alice", 1)?);
    /// assert!(!limiter.decide(Duration::from_millis(500), "alice", 1)?);
    /// assert!(limiter.decide(Duration::from_secs(1), "alice", 1)?);
    /// # Ok::<(), tollgate_sim::SimError>(())
    /// ```
    pub fn new(yaml: &str, descriptor_key: &str) -> Result<RulesLimiter, SimError> {
        let rules = RuleSet::from_yaml(yaml).map_err(|e| SimError::Rules(e.to_string()))?;
        RulesLimiter::with_rules(rules, vec![vec![(descriptor_key.to_owned(), None)]])
    }

    /// The limiter of `rules`, each request carrying `descriptors` (an entry without
    /// a value takes the request's key).
    ///
    /// # Errors
    ///
    /// [`SimError::Rules`] for rules the limiter refuses, or no descriptor.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::config::RuleSet;
    /// use tollgate_sim::domains::parse_descriptor;
    /// use tollgate_sim::replay::{Decide, RulesLimiter};
    ///
    /// let rules = RuleSet::from_yaml(
    ///     "domain: sim\ndescriptors:\n  - key: api\n    value: v1\n    descriptors:\n      - key: user\n        rate_limit: { unit: second, requests_per_unit: 1 }\n",
    /// )?;
    /// let mut limiter = RulesLimiter::with_rules(rules, vec![parse_descriptor("api=v1,user")?])?;
    /// assert!(limiter.decide(Duration::ZERO, "alice", 1)?);
    /// assert!(!limiter.decide(Duration::ZERO, "alice", 1)?);
    /// assert!(limiter.decide(Duration::ZERO, "bob", 1)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_rules(
        rules: RuleSet,
        descriptors: Vec<Vec<Entry>>,
    ) -> Result<RulesLimiter, SimError> {
        if descriptors.is_empty() {
            return Err(SimError::Rules("a request needs a descriptor".into()));
        }
        let clock = ManualClock::new();
        clock.set(Nanos::new(duration_to_nanos(EPOCH)));
        let store = MemoryStore::with_clock(KeyedConfig::new(1_000_000), "sim", clock.clone())
            .map_err(|e| SimError::Rules(e.to_string()))?;
        let limiter =
            ConfigLimiter::new(rules, store).map_err(|e| SimError::Rules(e.to_string()))?;
        Ok(RulesLimiter {
            limiter,
            clock,
            descriptors,
            unmatched: 0,
        })
    }
}

impl RulesLimiter {
    /// How many requests so far matched no limit of the rules: admitted, as the
    /// service admits them, which is most likely a descriptor the rules do not name.
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }
}

impl Decide for RulesLimiter {
    fn decide(&mut self, at: Duration, key: &str, cost: u64) -> Result<bool, SimError> {
        let now = EPOCH + at;
        // Times only go forward in a replay; an earlier one leaves the clock where it is.
        self.clock.set(Nanos::new(duration_to_nanos(now)));
        let descriptor = |entries: &[Entry]| -> Descriptor {
            entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref().unwrap_or(key)))
                .collect()
        };
        // One descriptor (the usual case) on the stack: a million requests a second.
        let decision = match self.descriptors.as_slice() {
            [one] => self
                .limiter
                .check_at(&[descriptor(one)], cost, now)
                .now_or_never(),
            many => {
                let all: Vec<Descriptor> = many.iter().map(|d| descriptor(d)).collect();
                self.limiter.check_at(&all, cost, now).now_or_never()
            }
        };
        let decided = decision
            .ok_or_else(|| SimError::Rules("the memory store did not answer at once".into()))?
            .map_err(|e| SimError::Rules(e.to_string()))?;
        self.unmatched += u64::from(decided.applied().is_empty());
        Ok(decided.is_admitted())
    }
}

/// One limiter of any algorithm for every request (the key is not read), on a manual
/// clock set to each request's time: `Limiter::try_acquire`, as a caller that never
/// waits uses it. For algorithms and options a rules file does not name (a sliding log
/// counting blocked attempts, Guava's smooth limiters).
pub struct AlgorithmLimiter<A: Algorithm> {
    limiter: Limiter<A, ManualClock>,
    clock: ManualClock,
}

impl<A: Algorithm> AlgorithmLimiter<A> {
    /// `algorithm` on a clock starting at the run's start.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SlidingLog;
    /// use tollgate_sim::replay::{AlgorithmLimiter, Decide};
    ///
    /// let log = SlidingLog::new(1, Duration::from_secs(60)).unwrap().count_blocked(true);
    /// let mut limiter = AlgorithmLimiter::new(log);
    /// assert!(limiter.decide(Duration::ZERO, "", 1)?);
    /// assert!(!limiter.decide(Duration::from_secs(59), "", 1)?);
    /// // The blocked attempt was logged too: a minute after the first is not enough.
    /// assert!(!limiter.decide(Duration::from_secs(61), "", 1)?);
    /// # Ok::<(), tollgate_sim::SimError>(())
    /// ```
    pub fn new(algorithm: A) -> AlgorithmLimiter<A> {
        let clock = ManualClock::new();
        AlgorithmLimiter {
            limiter: Limiter::with_clock(algorithm, clock.clone()),
            clock,
        }
    }
}

impl<A: Algorithm> Decide for AlgorithmLimiter<A> {
    fn decide(&mut self, at: Duration, _key: &str, cost: u64) -> Result<bool, SimError> {
        self.clock.set(Nanos::new(duration_to_nanos(at)));
        Ok(self.limiter.try_acquire(cost).is_ok())
    }
}

/// One step of a series: what happened from `t` for one step.
///
/// The first four columns every limiter has. The others only where they mean
/// something, and `None` (an empty CSV cell, a JSON `null`) elsewhere, never a made-up
/// 0: `queued` where requests wait (the leaky queue, an adaptive limiter that waits);
/// `in_flight` and the latencies where requests go to the service model (adaptive
/// limiters, shedders, `run --service`); `limit` where a concurrency limit holds
/// (adaptive limiters, the fleet shedder); the waits where requests wait. A
/// percentile is also `None` in a step where no request ended (latency) or was
/// admitted after waiting (wait).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The step's start, in milliseconds from the run's start.
    pub t_ms: u64,
    /// Requests offered.
    pub offered: u64,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests denied.
    pub denied: u64,
    /// Requests waiting at the step's end.
    pub queued: Option<u64>,
    /// Requests at the service (sent, not yet answered) at the step's end.
    pub in_flight: Option<u64>,
    /// The concurrency limit in force at the step's end.
    pub limit: Option<u64>,
    /// Wait from arrival to admission of the requests admitted in the step, in
    /// microseconds: median, 90th and 99th percentiles (nearest rank).
    pub wait_p50_us: Option<u64>,
    /// See [`wait_p50_us`](Step::wait_p50_us).
    pub wait_p90_us: Option<u64>,
    /// See [`wait_p50_us`](Step::wait_p50_us).
    pub wait_p99_us: Option<u64>,
    /// Latency as the client sees it (wait and service, or the service's refusal) of
    /// the requests that ended in the step, in microseconds.
    pub latency_p50_us: Option<u64>,
    /// See [`latency_p50_us`](Step::latency_p50_us).
    pub latency_p90_us: Option<u64>,
    /// See [`latency_p50_us`](Step::latency_p50_us).
    pub latency_p99_us: Option<u64>,
}

impl Step {
    /// An empty step starting at `t_ms`.
    pub fn at(t_ms: u64) -> Step {
        Step {
            t_ms,
            ..Step::default()
        }
    }

    /// Sets the wait percentiles from `waits` (those of the step's admissions).
    pub fn set_waits(&mut self, waits: &mut [Duration]) {
        [self.wait_p50_us, self.wait_p90_us, self.wait_p99_us] = percentiles(waits);
    }

    /// Sets the latency percentiles from `latencies` (those of the step's ends).
    pub fn set_latencies(&mut self, latencies: &mut [Duration]) {
        [
            self.latency_p50_us,
            self.latency_p90_us,
            self.latency_p99_us,
        ] = percentiles(latencies);
    }
}

/// The CSV columns of a [`Step`], in order.
pub const CSV_HEADER: &str = "t_ms,offered,admitted,denied,queued,in_flight,limit,\
wait_p50_us,wait_p90_us,wait_p99_us,latency_p50_us,latency_p90_us,latency_p99_us";

/// The 50th, 90th and 99th percentiles of `values` (nearest rank) in microseconds,
/// `None` for none.
fn percentiles(values: &mut [Duration]) -> [Option<u64>; 3] {
    if values.is_empty() {
        return [None; 3];
    }
    values.sort_unstable();
    [0.5, 0.9, 0.99].map(|q| {
        let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
        Some(u64::try_from(values[rank - 1].as_micros()).unwrap_or(u64::MAX))
    })
}

/// What a limiter did with a traffic: per step, and each admission's time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Series {
    /// The limiter's name.
    pub name: String,
    /// The step's length, in milliseconds.
    pub step_ms: u64,
    /// The steps, from the start.
    pub steps: Vec<Step>,
    /// The time of every admission, in microseconds from the start.
    #[serde(skip)]
    pub admitted_at_us: Vec<u64>,
}

impl Series {
    /// The most requests admitted in any span of `span` (the windows' length, for an
    /// exact algorithm's invariant; across a boundary, for a fixed window's burst).
    pub fn most_admitted_in(&self, span: Duration) -> u64 {
        let span = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        let times = &self.admitted_at_us;
        let (mut best, mut start) = (0, 0);
        for end in 0..times.len() {
            while times[end] - times[start] >= span {
                start += 1;
            }
            best = best.max(end - start + 1);
        }
        best as u64
    }

    /// At the end of each step, the requests admitted in the `span` before it: the
    /// figure an exact limit of so many per `span` keeps under its limit.
    pub fn rolling(&self, span: Duration) -> Vec<u64> {
        let span = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        let step = self.step_ms.saturating_mul(1_000).max(1);
        let times = &self.admitted_at_us;
        let (mut start, mut end) = (0, 0);
        (1..=self.steps.len() as u64)
            .map(|i| {
                let t = i * step;
                while end < times.len() && times[end] < t {
                    end += 1;
                }
                while start < end && times[start] + span <= t {
                    start += 1;
                }
                (end - start) as u64
            })
            .collect()
    }

    /// [`most_admitted_in`](Series::most_admitted_in) as a table shows it: `-` for a
    /// series that keeps no admission times (a limit's values, or counts per step).
    pub fn most_admitted_text(&self, span: Duration) -> String {
        if self.admitted_at_us.is_empty() {
            "-".to_owned()
        } else {
            self.most_admitted_in(span).to_string()
        }
    }

    /// Requests admitted in all.
    pub fn admitted(&self) -> u64 {
        self.steps.iter().map(|s| s.admitted).sum()
    }

    /// The steps as CSV, with the columns of [`CSV_HEADER`]; a column without
    /// meaning for this limiter (see [`Step`]) is an empty cell.
    pub fn to_csv(&self) -> String {
        let cell = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let mut out = format!("{CSV_HEADER}\n");
        for s in &self.steps {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                s.t_ms,
                s.offered,
                s.admitted,
                s.denied,
                cell(s.queued),
                cell(s.in_flight),
                cell(s.limit),
                cell(s.wait_p50_us),
                cell(s.wait_p90_us),
                cell(s.wait_p99_us),
                cell(s.latency_p50_us),
                cell(s.latency_p90_us),
                cell(s.latency_p99_us),
            ));
        }
        out
    }

    /// The series as JSON: its name, step and steps, each with every column of
    /// [`Step`] (`null` where it has no meaning).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The most steps a series holds: a bound on memory, about 150 MB.
pub const MAX_STEPS: usize = 1_000_000;

/// Replays `arrivals` (in time order; `key_name` names their keys) against
/// `limiter`, counting per `step`.
///
/// # Errors
///
/// [`SimError::Traffic`] for a step of 0, or one so short that the run would take
/// more than [`MAX_STEPS`]; the limiter's [`SimError`].
pub fn replay(
    name: &str,
    arrivals: &[Arrival],
    key_name: &dyn Fn(u32) -> String,
    limiter: &mut dyn Decide,
    step: Duration,
) -> Result<Series, SimError> {
    let step_us = u64::try_from(step.as_micros()).unwrap_or(u64::MAX);
    if step_us == 0 {
        return Err(SimError::Traffic {
            parameter: "step",
            expected: "at least a microsecond",
        });
    }
    let mut names: Vec<Option<String>> = Vec::new();
    let mut series = Series {
        name: name.to_owned(),
        step_ms: step_us / 1_000,
        steps: Vec::new(),
        admitted_at_us: Vec::new(),
    };
    for arrival in arrivals {
        let k = arrival.key as usize;
        if names.len() <= k {
            names.resize(k + 1, None);
        }
        let key = names[k].get_or_insert_with(|| key_name(arrival.key));
        let admitted = limiter.decide(arrival.at, key, arrival.cost)?;
        let at_us = u64::try_from(arrival.at.as_micros()).unwrap_or(u64::MAX);
        let index = usize::try_from(at_us / step_us).unwrap_or(usize::MAX);
        if index >= MAX_STEPS {
            return Err(SimError::Traffic {
                parameter: "step",
                expected: "long enough for at most 1,000,000 steps over the run",
            });
        }
        if series.steps.len() <= index {
            let from = series.steps.len();
            series
                .steps
                .extend((from..=index).map(|i| Step::at(i as u64 * step_us / 1_000)));
        }
        let s = &mut series.steps[index];
        s.offered += 1;
        if admitted {
            s.admitted += 1;
            series.admitted_at_us.push(at_us);
        } else {
            s.denied += 1;
        }
    }
    Ok(series)
}

/// A duration in nanoseconds, saturating (a replay's times are far below 584 years).
fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
