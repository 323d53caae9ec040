//! Requests sent to a service with a concurrency knee through an adaptive limiter or
//! a shedder, event by event on virtual time: per step what was admitted, queued and
//! in flight, the limit, and the waits and latencies.
//!
//! The service is the model of the crate's adaptive-limit tests (after Vector's
//! adaptive-concurrency scenarios): `base × (1 + growth × (in_flight − knee)⁺ +
//! jitter × Exp(1))`, and past `max_in_flight` a refusal (or a hang until the
//! client's timeout). The limiter or shedder is the crate's own, on a manual clock.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use tollgate::adaptive::limit::{
    AimdLimit, EnvoyGradient, EnvoyGradientConfig, Gradient2Limit, LimitAlgorithm, VegasLimit,
};
use tollgate::adaptive::{AdaptiveAcquire, AdaptiveLimiter, AdaptivePermit, WhenLimited};
use tollgate::shed::{
    Class, Classes, FleetShedder, FleetSlot, Measure, Shedder as _, UtilisationShedder,
    UtilisationSlot,
};
use tollgate::time::{Clock as _, ManualClock, Nanos};

use crate::arrivals::Arrival;
use crate::error::SimError;
use crate::replay::{MAX_STEPS, Series, Step};
use crate::service_model::Rng;
pub use crate::service_model::{Overload, Service};

/// The adaptive algorithms by name, as `run --adaptive` takes them.
pub const ADAPTIVE: &[&str] = &["aimd", "vegas", "gradient2", "envoy-gradient"];

/// The shedders by name, as `run --shed` takes them.
pub const SHEDDERS: &[&str] = &["fleet", "utilisation"];

/// The service of the `adaptive` scenario, and `run --service`'s default: 10 ms up to
/// a knee of 10 in flight, 20 % slower per request past it, refusing past 40.
pub const KNEE_SERVICE: Service = Service {
    base: Duration::from_millis(10),
    knee: 10,
    growth: 0.2,
    max_inflight: 40,
    jitter: 0.1,
    overload: Overload::Reject,
};

/// The adaptive algorithm `name` (one of [`ADAPTIVE`]), tuned for `service` as the
/// `adaptive` scenario tunes it: limits from 1 to 200 starting at 10; AIMD counts a
/// request slower than twice the service's base latency as a loss (Netflix's
/// `timeout`), since it sees nothing else; Envoy's controller recomputes every
/// 100 ms and measures its minimum latency every 2 s.
///
/// # Errors
///
/// [`SimError::UnknownAlgorithm`] for a name not in [`ADAPTIVE`]; [`SimError::Limiter`]
/// when the algorithm refuses the tuning.
///
/// # Examples
///
/// ```
/// use tollgate::time::ManualClock;
/// use tollgate_sim::service::{KNEE_SERVICE, adaptive_algorithm};
///
/// let clock = ManualClock::new();
/// assert!(adaptive_algorithm("gradient2", &KNEE_SERVICE, &clock, 1).is_ok());
/// let Err(err) = adaptive_algorithm("bbr", &KNEE_SERVICE, &clock, 1) else {
///     panic!("bbr is not one of them");
/// };
/// assert!(err.to_string().starts_with("no adaptive algorithm \"bbr\""));
/// ```
pub fn adaptive_algorithm(
    name: &str,
    service: &Service,
    clock: &ManualClock,
    seed: u64,
) -> Result<Box<dyn LimitAlgorithm>, SimError> {
    let bad = |e: tollgate::ConfigError| SimError::Limiter(e.to_string());
    Ok(match name {
        "aimd" => Box::new(
            AimdLimit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .timeout(service.base.saturating_mul(2))
                .build()
                .map_err(bad)?,
        ),
        "vegas" => Box::new(
            VegasLimit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .seed(seed)
                .build()
                .map_err(bad)?,
        ),
        "gradient2" => Box::new(
            Gradient2Limit::builder()
                .min_limit(1)
                .initial_limit(10)
                .max_limit(200)
                .build()
                .map_err(bad)?,
        ),
        "envoy-gradient" => {
            let config = EnvoyGradientConfig::builder()
                .concurrency_update_interval(Duration::from_millis(100))
                .min_rtt_calc_interval(Duration::from_secs(2))
                .max_concurrency_limit(200)
                .build()
                .map_err(bad)?;
            Box::new(EnvoyGradient::with_seed(config, clock.now(), seed))
        }
        other => {
            return Err(SimError::UnknownAlgorithm {
                kind: "adaptive algorithm",
                name: other.to_owned(),
                known: ADAPTIVE,
            });
        }
    })
}

/// What requests go through on their way to the service.
pub enum Gate {
    /// Nothing: every request goes to the service, the unprotected contrast.
    Unlimited,
    /// An adaptive concurrency limit, failing fast or waiting as its mode says.
    Adaptive(Arc<AdaptiveLimiter<Box<dyn LimitAlgorithm>, ManualClock>>),
    /// Stripe's fleet shedder, in process.
    Fleet(FleetShedder),
    /// Stripe's utilisation shedder, reading its own requests in flight.
    Utilisation(UtilisationShedder<ManualClock>),
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Gate::Unlimited => "Gate::Unlimited",
            Gate::Adaptive(_) => "Gate::Adaptive",
            Gate::Fleet(_) => "Gate::Fleet",
            Gate::Utilisation(_) => "Gate::Utilisation",
        })
    }
}

impl Gate {
    /// An adaptive limiter of `algorithm` in `mode` on `clock`.
    ///
    /// # Errors
    ///
    /// [`SimError::Limiter`] for a mode the limiter refuses.
    pub fn adaptive(
        algorithm: Box<dyn LimitAlgorithm>,
        mode: WhenLimited,
        clock: &ManualClock,
    ) -> Result<Gate, SimError> {
        let limiter = AdaptiveLimiter::with_clock(algorithm, mode, clock.clone())
            .map_err(|e| SimError::Limiter(e.to_string()))?;
        Ok(Gate::Adaptive(Arc::new(limiter)))
    }

    /// The shedder `name` (one of [`SHEDDERS`]) over Google's classes, for a service
    /// of `capacity` requests in flight: the fleet shedder keeps `reserve` of it for
    /// the critical classes; the utilisation shedder reads its own requests in
    /// flight over `capacity`, with its default thresholds (0.9 up, 0.7 down) and
    /// holds (1 s up, 10 s down), on `clock`.
    ///
    /// # Errors
    ///
    /// [`SimError::UnknownAlgorithm`] for a name not in [`SHEDDERS`];
    /// [`SimError::Limiter`] for a capacity of 0 or a reserve outside [0, 1].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::time::ManualClock;
    /// use tollgate_sim::service::Gate;
    ///
    /// assert!(Gate::shedder("fleet", 100, 0.2, &ManualClock::new()).is_ok());
    /// let err = Gate::shedder("fleet", 0, 0.2, &ManualClock::new()).unwrap_err();
    /// assert!(err.to_string().starts_with("limiter:"), "{err}");
    /// ```
    pub fn shedder(
        name: &str,
        capacity: u64,
        reserve: f64,
        clock: &ManualClock,
    ) -> Result<Gate, SimError> {
        let bad = |e: tollgate::ConfigError| SimError::Limiter(e.to_string());
        match name {
            "fleet" => Ok(Gate::Fleet(
                FleetShedder::new(Classes::google(), capacity, reserve).map_err(bad)?,
            )),
            "utilisation" => {
                if capacity == 0 {
                    return Err(SimError::Limiter("capacity must be at least 1".into()));
                }
                let shedder =
                    UtilisationShedder::builder(Classes::google(), Measure::InFlight { capacity })
                        .build_with_clock(clock.clone())
                        .map_err(bad)?;
                Ok(Gate::Utilisation(shedder))
            }
            other => Err(SimError::UnknownAlgorithm {
                kind: "shedder",
                name: other.to_owned(),
                known: SHEDDERS,
            }),
        }
    }

    /// Whether requests wait for a permit (an adaptive limiter not failing fast).
    fn waits(&self) -> bool {
        matches!(self, Gate::Adaptive(l) if l.mode() != WhenLimited::FailFast)
    }

    /// The limit a class's requests in flight are held to (`None`: the total), if any.
    fn limit(&self, class: Option<&Class>) -> Option<u64> {
        match self {
            Gate::Adaptive(l) => Some(l.limit()),
            Gate::Fleet(f) => Some(match class {
                Some(c) if !f.is_critical(c) => f.shared_limit(),
                _ => f.capacity(),
            }),
            Gate::Unlimited | Gate::Utilisation(_) => None,
        }
    }
}

/// How a run steps and draws its randomness.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// The service requests go to.
    pub service: Service,
    /// The length of a step of the series.
    pub step: Duration,
    /// How often an adaptive limiter's timer ticks (its limit is recomputed on time
    /// as well as on samples).
    pub tick: Duration,
    /// The seed of the service's jitter.
    pub seed: u64,
}

/// What a run gives: the series of every request, and one per class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Every request.
    pub total: Series,
    /// Per class, most critical first, for the classes the traffic has (none when
    /// it has none).
    pub by_class: Vec<Series>,
}

/// A slot held by a request at the service.
enum Slot {
    None,
    Adaptive(AdaptivePermit<Box<dyn LimitAlgorithm>, ManualClock>),
    Fleet(FleetSlot),
    Utilisation(UtilisationSlot),
}

struct End {
    arrived: Nanos,
    class: Option<usize>,
    dropped: bool,
    working: bool,
    slot: Slot,
}

type Waiting = Pin<Box<AdaptiveAcquire<Box<dyn LimitAlgorithm>, ManualClock>>>;

/// One series being counted: its steps, and the current step's samples.
struct Track {
    series: Series,
    current: Step,
    waits: Vec<Duration>,
    latencies: Vec<Duration>,
    in_flight: u64,
    queued: u64,
    class: Option<Class>,
}

impl Track {
    fn new(name: String, step_ms: u64, class: Option<Class>) -> Track {
        Track {
            series: Series {
                name,
                step_ms,
                steps: Vec::new(),
                admitted_at_us: Vec::new(),
            },
            current: Step::at(0),
            waits: Vec::new(),
            latencies: Vec::new(),
            in_flight: 0,
            queued: 0,
            class,
        }
    }

    /// Ends the current step with the state now, and starts the one at `next_ms`.
    fn close(&mut self, gate: &Gate, next_ms: u64) {
        let mut step = std::mem::replace(&mut self.current, Step::at(next_ms));
        step.in_flight = Some(self.in_flight);
        step.limit = gate.limit(self.class.as_ref());
        if gate.waits() {
            step.queued = Some(self.queued);
            step.set_waits(&mut self.waits);
        }
        step.set_latencies(&mut self.latencies);
        self.waits.clear();
        self.latencies.clear();
        self.series.steps.push(step);
    }
}

/// Sends `arrivals` (in time order; `classes` one per arrival, or empty) to
/// `setup.service` through `gate`, on `clock`, and counts per step. A request is one
/// in flight: its cost is not read.
///
/// A request's `offered` counts in the step it arrives, its `admitted` or `denied`
/// in the step it is decided (a waiting request's, when it gets a permit or times
/// out), its latency in the step it ends. The run lasts until the last request ends.
///
/// # Errors
///
/// [`SimError::Traffic`] for a step or a tick of 0, a step too short for
/// [`MAX_STEPS`], or classes not one per arrival.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::WhenLimited;
/// use tollgate::time::ManualClock;
/// use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
/// use tollgate_sim::service::{Gate, KNEE_SERVICE, Setup, adaptive_algorithm, simulate};
///
/// let traffic = Traffic {
///     pattern: Pattern::Poisson { rate: 2_000.0 },
///     keys: Keys::One,
///     cost: 1,
///     duration: Duration::from_secs(5),
/// };
/// let clock = ManualClock::new();
/// let algorithm = adaptive_algorithm("gradient2", &KNEE_SERVICE, &clock, 1)?;
/// let gate = Gate::adaptive(algorithm, WhenLimited::FailFast, &clock)?;
/// let setup = Setup {
///     service: KNEE_SERVICE,
///     step: Duration::from_secs(1),
///     tick: Duration::from_millis(10),
///     seed: 1,
/// };
/// let served = simulate("gradient2", &setup, &traffic.arrivals(1)?, &[], &gate, &clock)?;
/// let last = served.total.steps.last().unwrap();
/// assert!(last.limit.is_some() && last.in_flight.is_some());
/// assert_eq!(last.queued, None); // failing fast, nothing waits
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn simulate(
    name: &str,
    setup: &Setup,
    arrivals: &[Arrival],
    classes: &[Class],
    gate: &Gate,
    clock: &ManualClock,
) -> Result<Served, SimError> {
    let step_us = u64::try_from(setup.step.as_micros()).unwrap_or(u64::MAX);
    if step_us == 0 {
        return Err(SimError::Traffic {
            parameter: "step",
            expected: "at least a microsecond",
        });
    }
    if setup.tick.is_zero() {
        return Err(SimError::Traffic {
            parameter: "tick",
            expected: "longer than 0",
        });
    }
    if !classes.is_empty() && classes.len() != arrivals.len() {
        return Err(SimError::Traffic {
            parameter: "classes",
            expected: "one per request, or none",
        });
    }
    let step_ms = step_us / 1_000;
    let mut sim = Sim {
        service: setup.service,
        gate,
        clock,
        rng: Rng::new(setup.seed),
        start: clock.now(),
        step: Duration::from_micros(step_us),
        index: 0,
        total: Track::new(name.to_owned(), step_ms, None),
        by_class: BTreeMap::new(),
        ends: BinaryHeap::new(),
        payloads: HashMap::new(),
        seq: 0,
        waiting: Vec::new(),
        working: 0,
        default_class: Classes::google().default_class(),
    };
    for class in classes {
        sim.by_class
            .entry(class.index())
            .or_insert_with(|| Track::new(class.name().to_owned(), step_ms, Some(class.clone())));
    }
    sim.run(arrivals, classes, setup.tick)?;
    let Sim {
        total, by_class, ..
    } = sim;
    Ok(Served {
        total: total.series,
        by_class: by_class.into_values().map(|t| t.series).collect(),
    })
}

struct Sim<'a> {
    service: Service,
    gate: &'a Gate,
    clock: &'a ManualClock,
    rng: Rng,
    start: Nanos,
    step: Duration,
    /// The current step.
    index: u64,
    total: Track,
    by_class: BTreeMap<usize, Track>,
    ends: BinaryHeap<Reverse<(Nanos, u64)>>,
    payloads: HashMap<u64, End>,
    seq: u64,
    waiting: Vec<(Nanos, Option<usize>, Waiting)>,
    /// Requests the service is working on (its level; refusals are not).
    working: u64,
    /// The class of a request without one: the shedders' default.
    default_class: Class,
}

impl Sim<'_> {
    fn run(
        &mut self,
        arrivals: &[Arrival],
        classes: &[Class],
        tick: Duration,
    ) -> Result<(), SimError> {
        let ticking = matches!(self.gate, Gate::Adaptive(_));
        let mut next_tick = ticking.then_some(self.start);
        let mut next = 0;
        loop {
            let busy =
                next < arrivals.len() || !self.payloads.is_empty() || !self.waiting.is_empty();
            if !busy {
                break;
            }
            let arrival = arrivals.get(next).map(|a| self.start + a.at);
            let end = self.ends.peek().map(|Reverse((at, _))| *at);
            let Some(now) = [arrival, end, next_tick, self.clock.next_alarm()]
                .into_iter()
                .flatten()
                .min()
            else {
                break;
            };
            self.close_steps_before(now)?;
            self.clock.set(now);
            // Ends first: a permit freed at an arrival's instant is free for it.
            while self.ends.peek().is_some_and(|Reverse((at, _))| *at == now) {
                let seq = self.ends.pop().map(|Reverse((_, seq))| seq);
                if let Some(end) = seq.and_then(|seq| self.payloads.remove(&seq)) {
                    self.end(end, now);
                }
            }
            if next_tick == Some(now) {
                if let Gate::Adaptive(limiter) = self.gate {
                    limiter.tick();
                }
                next_tick = Some(now + tick);
            }
            while next < arrivals.len() && self.start + arrivals[next].at == now {
                self.arrive(now, classes.get(next));
                next += 1;
            }
            self.poll_waiting(now);
        }
        // The last step, with the state at the end.
        let next_ms = self.t_ms(self.index + 1);
        self.total.close(self.gate, next_ms);
        for track in self.by_class.values_mut() {
            track.close(self.gate, next_ms);
        }
        Ok(())
    }

    /// The start of step `index`, in milliseconds.
    fn t_ms(&self, index: u64) -> u64 {
        u64::try_from(self.step.as_micros() * u128::from(index) / 1_000).unwrap_or(u64::MAX)
    }

    /// Closes every step that ends at or before `now`.
    fn close_steps_before(&mut self, now: Nanos) -> Result<(), SimError> {
        let since = now.saturating_since(self.start);
        let step_ns = self.step.as_nanos().max(1);
        let index = u64::try_from(since.as_nanos() / step_ns).unwrap_or(u64::MAX);
        if index >= MAX_STEPS as u64 {
            return Err(SimError::Traffic {
                parameter: "step",
                expected: "long enough for at most 1,000,000 steps over the run",
            });
        }
        while self.index < index {
            self.index += 1;
            let next_ms = self.t_ms(self.index);
            self.total.close(self.gate, next_ms);
            for track in self.by_class.values_mut() {
                track.close(self.gate, next_ms);
            }
        }
        Ok(())
    }

    /// The tracks a request of `class` counts in: the total, and its class's.
    fn tracks(&mut self, class: Option<usize>, mut f: impl FnMut(&mut Track)) {
        f(&mut self.total);
        if let Some(track) = class.and_then(|c| self.by_class.get_mut(&c)) {
            f(track);
        }
    }

    fn arrive(&mut self, now: Nanos, class: Option<&Class>) {
        let index = class.map(Class::index);
        self.tracks(index, |t| t.current.offered += 1);
        let gate = self.gate;
        let class_or_default = class.unwrap_or(&self.default_class).clone();
        let slot = match gate {
            Gate::Unlimited => Some(Slot::None),
            Gate::Adaptive(limiter) => {
                if limiter.mode() == WhenLimited::FailFast {
                    limiter.try_acquire_owned().ok().map(Slot::Adaptive)
                } else {
                    let waiting = Box::pin(limiter.acquire());
                    self.waiting.push((now, index, waiting));
                    self.tracks(index, |t| t.queued += 1);
                    return;
                }
            }
            Gate::Fleet(fleet) => fleet
                .decide(&class_or_default)
                .into_slot()
                .ok()
                .map(Slot::Fleet),
            Gate::Utilisation(shedder) => shedder
                .decide(&class_or_default)
                .into_slot()
                .ok()
                .map(Slot::Utilisation),
        };
        match slot {
            Some(slot) => self.send(now, now, index, slot),
            None => self.tracks(index, |t| t.current.denied += 1),
        }
    }

    /// Polls the waiters in arrival order: admitted ones go to the service.
    fn poll_waiting(&mut self, now: Nanos) {
        if self.waiting.is_empty() {
            return;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for (arrived, class, mut future) in std::mem::take(&mut self.waiting) {
            match future.as_mut().poll(&mut cx) {
                Poll::Pending => self.waiting.push((arrived, class, future)),
                Poll::Ready(result) => {
                    self.tracks(class, |t| t.queued -= 1);
                    match result {
                        Ok(permit) => self.send(arrived, now, class, Slot::Adaptive(permit)),
                        Err(_) => self.tracks(class, |t| t.current.denied += 1),
                    }
                }
            }
        }
    }

    fn send(&mut self, arrived: Nanos, now: Nanos, class: Option<usize>, slot: Slot) {
        let waited = now.saturating_since(arrived);
        let waits = self.gate.waits();
        self.tracks(class, |t| {
            t.current.admitted += 1;
            t.in_flight += 1;
            if waits {
                t.waits.push(waited);
            }
        });
        let level = self.working + 1;
        let (after, dropped, working) = if level > self.service.max_inflight {
            match self.service.overload {
                Overload::Reject => (self.service.base, true, false),
                Overload::Hang(timeout) => (timeout, true, false),
            }
        } else {
            // The model's latency (its `latency` is private to it): the level's,
            // plus an exponential jitter drawn only when there is one.
            let jitter = if self.service.jitter > 0.0 {
                self.service
                    .base
                    .mul_f64(self.service.jitter * self.rng.exp())
            } else {
                Duration::ZERO
            };
            (self.service.latency_at(level) + jitter, false, true)
        };
        self.working += u64::from(working);
        self.seq += 1;
        self.ends.push(Reverse((now + after, self.seq)));
        self.payloads.insert(
            self.seq,
            End {
                arrived,
                class,
                dropped,
                working,
                slot,
            },
        );
    }

    fn end(&mut self, end: End, now: Nanos) {
        self.working -= u64::from(end.working);
        let latency = now.saturating_since(end.arrived);
        self.tracks(end.class, |t| {
            t.in_flight -= 1;
            t.latencies.push(latency);
        });
        match (end.slot, end.dropped) {
            (Slot::Adaptive(permit), false) => permit.success(),
            (Slot::Adaptive(permit), true) => permit.dropped(),
            // A shedder's slot is given back when dropped.
            (Slot::Fleet(slot), _) => drop(slot),
            (Slot::Utilisation(slot), _) => drop(slot),
            (Slot::None, _) => {}
        }
    }
}

/// Parses a service: `base_ms=10,knee=10,growth=0.2,max_in_flight=40,jitter=0.1`,
/// any of them (the others from [`KNEE_SERVICE`]), and `hang_ms=N` for a service
/// that never answers past `max_in_flight` (the client gives up after N ms) rather
/// than refusing.
///
/// # Errors
///
/// [`SimError::Service`] naming the field: an unknown one, a base latency not in
/// (0, 1 h], a knee of 0, `max_in_flight` below the knee, a growth or jitter that is
/// not a finite, non-negative number, a hang not in (0, 1 h].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate_sim::service::parse_service;
///
/// let service = parse_service("knee=20,max_in_flight=80")?;
/// assert_eq!((service.knee, service.max_inflight), (20, 80));
/// assert_eq!(service.base, Duration::from_millis(10));
/// let err = parse_service("knee=0").unwrap_err();
/// assert_eq!(err.to_string(), "service: knee must be at least 1");
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn parse_service(spec: &str) -> Result<Service, SimError> {
    let mut service = KNEE_SERVICE;
    let hour = 3_600_000.0;
    for field in spec.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let (name, value) = field.split_once('=').unwrap_or((field, ""));
        let (name, value) = (name.trim(), value.trim());
        let number = |parameter: &'static str, expected: &'static str| {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or(SimError::Service {
                    parameter,
                    expected,
                })
        };
        let whole = |parameter: &'static str, expected: &'static str| {
            value
                .parse::<u64>()
                .ok()
                .filter(|&v| v >= 1)
                .ok_or(SimError::Service {
                    parameter,
                    expected,
                })
        };
        match name {
            "base_ms" => {
                let expected = "a number of milliseconds above 0, at most an hour";
                let ms = number("base_ms", expected)?;
                if ms <= 0.0 || ms > hour {
                    return Err(SimError::Service {
                        parameter: "base_ms",
                        expected,
                    });
                }
                service.base = Duration::from_secs_f64(ms / 1_000.0);
            }
            "knee" => service.knee = whole("knee", "at least 1")?,
            "max_in_flight" => {
                service.max_inflight = whole("max_in_flight", "at least the knee")?;
            }
            "growth" => service.growth = number("growth", "a finite, non-negative number")?,
            "jitter" => service.jitter = number("jitter", "a finite, non-negative number")?,
            "hang_ms" => {
                let expected = "a number of milliseconds above 0, at most an hour";
                let ms = number("hang_ms", expected)?;
                if ms <= 0.0 || ms > hour {
                    return Err(SimError::Service {
                        parameter: "hang_ms",
                        expected,
                    });
                }
                service.overload = Overload::Hang(Duration::from_secs_f64(ms / 1_000.0));
            }
            _ => {
                return Err(SimError::Service {
                    parameter: "field",
                    expected: "one of base_ms, knee, max_in_flight, growth, jitter, hang_ms (NAME=VALUE, comma-separated)",
                });
            }
        }
    }
    if service.max_inflight < service.knee {
        return Err(SimError::Service {
            parameter: "max_in_flight",
            expected: "at least the knee",
        });
    }
    Ok(service)
}

/// Parses a mix of classes, `critical=1,sheddable=4`: Google's class names with
/// positive weights.
///
/// # Errors
///
/// [`SimError::Traffic`] (parameter `mix`) for a class Google's set does not have, a
/// weight that is not a positive finite number, or no class.
///
/// # Examples
///
/// ```
/// use tollgate_sim::service::parse_mix;
///
/// let mix = parse_mix("critical=1,sheddable=4")?;
/// assert_eq!(mix.len(), 2);
/// assert!(parse_mix("urgent=1").is_err());
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn parse_mix(spec: &str) -> Result<Vec<(Class, f64)>, SimError> {
    let classes = Classes::google();
    let bad = SimError::Traffic {
        parameter: "mix",
        expected: "CLASS=WEIGHT pairs, comma-separated, of critical_plus, critical, \
                   sheddable_plus and sheddable, with positive weights",
    };
    let mut mix = Vec::new();
    for field in spec.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let (name, weight) = field.split_once('=').ok_or_else(|| bad.clone())?;
        let class = classes.get(name.trim()).ok_or_else(|| bad.clone())?;
        let weight: f64 = weight
            .trim()
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w > 0.0)
            .ok_or_else(|| bad.clone())?;
        mix.push((class, weight));
    }
    if mix.is_empty() {
        return Err(bad);
    }
    Ok(mix)
}

/// A class for each of `n` requests, drawn from `mix` with `seed`.
pub fn draw_classes(n: usize, mix: &[(Class, f64)], seed: u64) -> Vec<Class> {
    let total: f64 = mix.iter().map(|(_, w)| w).sum();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .filter_map(|_| {
            let mut draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            mix.iter()
                .find(|(_, w)| {
                    draw -= w;
                    draw < 0.0
                })
                .or(mix.last())
                .map(|(c, _)| c.clone())
        })
        .collect()
}
