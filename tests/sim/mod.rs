//! A discrete-event simulation of a service with a concurrency knee, driven on a
//! `ManualClock`, for the adaptive limiter's simulation tests.
//!
//! Modelled on Vector's adaptive-concurrency scenarios
//! (`src/sinks/util/adaptive_concurrency/tests.rs` and
//! `tests/data/adaptive-concurrency/*.yaml`): a request's latency is fixed when it
//! arrives, from the service's level of in-flight requests, as
//! `base × (1 + growth × (in_flight − knee)⁺ + jitter × Exp(1))`; past `max_inflight`
//! the service drops the request (Vector's `action: drop`), which the client sees
//! only when its own timeout fires. Vector's scenarios are judged with ranges
//! because their jitter comes from a random generator; here the jitter comes from a
//! seeded xorshift, so each run is reproducible and the ranges only have to absorb
//! a change of seed or of the algorithms' tuning.
//!
//! Requests go through a real `AdaptiveLimiter` (fail fast, a FIFO wait with a
//! timeout, or a bounded LIFO backlog), a real `PartitionedLimiter` (each arrival
//! drawn into a partition by a fixed mix), or straight to the service for the
//! unlimited contrast. The clock moves from event to event: arrivals, completions,
//! the limiter's ticks, and the alarms that waits have set on the clock.

#![allow(dead_code)] // each test binary uses part of it

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tollgate::adaptive::{
    AdaptiveAcquire, AdaptiveLimiter, AdaptivePermit, LimitAlgorithm, PartitionedLimiter,
    PartitionedPermit, WhenLimited,
};
use tollgate::time::{Clock, ManualClock, Nanos};

/// xorshift64*: enough randomness for jitter and arrivals, with no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Spread nearby seeds apart; a zero state would stay zero.
        Rng(seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x6A09_E667_F3BC_C909)
            .max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with mean 1.
    pub fn exp(&mut self) -> f64 {
        -(1.0 - self.unit()).ln()
    }
}

/// The simulated service: flat latency up to the knee, growing past it, drops past
/// its own limit.
#[derive(Clone, Copy, Debug)]
pub struct Service {
    /// Latency at or below the knee (Vector's `delay`).
    pub base: Duration,
    /// In-flight requests the service serves at `base` (N).
    pub knee: u64,
    /// Extra latency per request in flight past the knee, as a fraction of `base`.
    /// Above `1 / knee` the service's throughput falls past the knee.
    pub growth: f64,
    /// In-flight requests past which the service drops new ones (M).
    pub max_inflight: u64,
    /// Vector's `jitter`: mean extra latency as a fraction of `base`, exponentially
    /// distributed.
    pub jitter: f64,
    /// What the service does with a request past `max_inflight`.
    pub overload: Overload,
}

/// How the service drops a request past its limit (Vector's `action`).
#[derive(Clone, Copy, Debug)]
pub enum Overload {
    /// Answers an error (a 503) after `base`, as Vector's `defer`.
    Reject,
    /// Never answers: the client gives up after this timeout, as Vector's `drop`.
    Hang(Duration),
}

impl Service {
    /// Requests per second at the knee: the most the service answers at `base`.
    pub fn capacity(&self) -> f64 {
        self.knee as f64 / self.base.as_secs_f64()
    }

    /// The latency of a request arriving as the `level`-th in flight, or `None` when
    /// the service drops it.
    fn latency(&self, level: u64, rng: &mut Rng) -> Option<Duration> {
        if level > self.max_inflight {
            return None;
        }
        let over = level.saturating_sub(self.knee) as f64;
        let jitter = if self.jitter > 0.0 {
            self.jitter * rng.exp()
        } else {
            0.0
        };
        Some(self.base.mul_f64(1.0 + self.growth * over + jitter))
    }

    /// The latency at `level` in flight, without jitter.
    pub fn latency_at(&self, level: u64) -> Duration {
        let over = level.saturating_sub(self.knee) as f64;
        self.base.mul_f64(1.0 + self.growth * over)
    }
}

/// Requests per second offered over a run.
#[derive(Clone, Copy, Debug)]
pub enum Load {
    Constant(f64),
    /// From the first rate to the second, linearly over the run.
    Ramp(f64, f64),
}

impl Load {
    fn rate_at(&self, t: f64, length: f64) -> f64 {
        match *self {
            Load::Constant(rate) => rate,
            Load::Ramp(from, to) => from + (to - from) * (t / length).min(1.0),
        }
    }
}

/// One run: how long, how much load, and what the summary ignores at the start.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub length: Duration,
    pub load: Load,
    /// Statistics (limit, latency, in flight) count only after this.
    pub warm_up: Duration,
    /// How often the limiter ticks and the limit is sampled.
    pub tick: Duration,
    pub seed: u64,
}

/// What the simulation measured after warm-up (and a few figures over the whole
/// run).
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub offered: u64,
    pub admitted: u64,
    /// Refused by the limiter (fail fast, or timed out waiting).
    pub rejected: u64,
    /// Dropped by the service.
    pub dropped: u64,
    /// Dropped by the service after warm-up.
    pub dropped_late: u64,
    /// Answered after warm-up.
    pub answered_late: u64,
    /// The limit sampled at every tick after warm-up: least, greatest, mean, and the
    /// last one before the load stopped.
    pub limit_min: u64,
    pub limit_max: u64,
    pub limit_mean: f64,
    pub limit_end: u64,
    /// The most requests the client had outstanding at the service after warm-up.
    pub inflight_max: u64,
    /// The most requests the client had outstanding over the whole run.
    pub inflight_max_all: u64,
    /// The most in flight above the limit enforced at that moment, over the whole
    /// run: after the limit is lowered, until enough requests end (the limiter
    /// never admits past its limit, so only a shrink makes this non-zero).
    pub over_limit_max: u64,
    /// The most requests the service worked on at once after warm-up (its level,
    /// drops excluded).
    pub working_max: u64,
    /// Client-seen latency (wait + service, or the timeout for a drop) of requests
    /// ending after warm-up.
    pub p50: Duration,
    pub p99: Duration,
    /// Per simulated second: the limit at its end, requests admitted and the p99 of
    /// those that ended in it.
    pub seconds: Vec<(u64, u64, Duration)>,
    /// The most requests waiting for a permit at once (queued in the limiter, once
    /// polled), over the whole run.
    pub waiting_max: u64,
    /// Per partition of a partitioned limiter, in the order of its mix.
    pub partitions: Vec<PartitionReport>,
}

/// What one partition of a partitioned limiter was offered and given.
#[derive(Clone, Debug, Default)]
pub struct PartitionReport {
    pub name: &'static str,
    pub offered: u64,
    pub admitted: u64,
    pub rejected: u64,
}

impl PartitionReport {
    /// The share of its offered requests refused.
    pub fn rejected_share(&self) -> f64 {
        self.rejected as f64 / self.offered.max(1) as f64
    }
}

type Limiter = Arc<AdaptiveLimiter<Box<dyn LimitAlgorithm>, ManualClock>>;
pub type Partitioned = PartitionedLimiter<Box<dyn LimitAlgorithm>, ManualClock>;
type Waiting = Pin<Box<AdaptiveAcquire<Box<dyn LimitAlgorithm>, ManualClock>>>;

/// What requests go through.
enum Gate {
    Adaptive(Limiter),
    /// A partitioned limiter, and the share of arrivals each partition gets.
    Partitioned(Arc<Partitioned>, Vec<(&'static str, f64)>),
}

impl Gate {
    fn clock(&self) -> &ManualClock {
        match self {
            Gate::Adaptive(l) => l.clock(),
            Gate::Partitioned(l, _) => l.clock(),
        }
    }

    fn limit(&self) -> u64 {
        match self {
            Gate::Adaptive(l) => l.limit(),
            Gate::Partitioned(l, _) => l.limit(),
        }
    }

    fn tick(&self) -> u64 {
        match self {
            Gate::Adaptive(l) => l.tick(),
            Gate::Partitioned(l, _) => l.tick(),
        }
    }
}

/// The guard of one admitted request, from either limiter.
enum Permit {
    Adaptive(AdaptivePermit<Box<dyn LimitAlgorithm>, ManualClock>),
    Partitioned(PartitionedPermit<Box<dyn LimitAlgorithm>, ManualClock>),
}

impl Permit {
    fn end(self, dropped: bool) {
        match (self, dropped) {
            (Permit::Adaptive(p), false) => p.success(),
            (Permit::Adaptive(p), true) => p.dropped(),
            (Permit::Partitioned(p), false) => p.success(),
            (Permit::Partitioned(p), true) => p.dropped(),
        }
    }
}

enum Event {
    Arrival,
    Tick,
    End {
        arrived: Nanos,
        dropped: bool,
        permit: Option<Permit>,
        /// Whether the service counted it in flight (drops are not).
        working: bool,
    },
}

/// A limiter over `algorithm` in `mode`, on `clock`.
pub fn limiter(
    algorithm: Box<dyn LimitAlgorithm>,
    mode: WhenLimited,
    clock: &ManualClock,
) -> Limiter {
    Arc::new(AdaptiveLimiter::with_clock(algorithm, mode, clock.clone()).expect("a valid mode"))
}

/// Runs `run` against `service`, through `limiter` if any, on its clock (or a new
/// one), and reports.
pub fn simulate(service: Service, run: Run, limiter: Option<Limiter>) -> Report {
    Sim::new(service, run, limiter.map(Gate::Adaptive)).run()
}

/// Runs `run` against `service` through a partitioned `limiter` (fail fast), each
/// arrival going to a partition drawn from `mix` (names and weights), and reports,
/// per partition too.
pub fn simulate_partitioned(
    service: Service,
    run: Run,
    limiter: Partitioned,
    mix: &[(&'static str, f64)],
) -> Report {
    let mut sim = Sim::new(
        service,
        run,
        Some(Gate::Partitioned(Arc::new(limiter), mix.to_vec())),
    );
    sim.report.partitions = mix
        .iter()
        .map(|&(name, _)| PartitionReport {
            name,
            ..PartitionReport::default()
        })
        .collect();
    sim.run()
}

struct Sim {
    service: Service,
    run: Run,
    limiter: Option<Gate>,
    clock: ManualClock,
    rng: Rng,
    events: BinaryHeap<Reverse<(Nanos, u64)>>,
    payloads: HashMap<u64, Event>,
    seq: u64,
    waiting: Vec<(Nanos, Waiting)>,
    /// Requests the service is working on (its level).
    working: u64,
    /// Requests sent and not yet answered or timed out, as the client sees them.
    outstanding: u64,
    report: Report,
    limits: Vec<u64>,
    latencies: Vec<Duration>,
    second: Vec<Duration>,
    second_admitted: u64,
    second_end: Nanos,
}

impl Sim {
    fn new(service: Service, run: Run, limiter: Option<Gate>) -> Sim {
        let clock = limiter
            .as_ref()
            .map_or_else(ManualClock::new, |l| l.clock().clone());
        let start = clock.now();
        Sim {
            service,
            run,
            limiter,
            clock,
            rng: Rng::new(run.seed),
            events: BinaryHeap::new(),
            payloads: HashMap::new(),
            seq: 0,
            waiting: Vec::new(),
            working: 0,
            outstanding: 0,
            report: Report::default(),
            limits: Vec::new(),
            latencies: Vec::new(),
            second: Vec::new(),
            second_admitted: 0,
            second_end: start + Duration::from_secs(1),
        }
    }

    fn at(&mut self, at: Nanos, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq)));
        self.payloads.insert(self.seq, event);
    }

    fn run(mut self) -> Report {
        let start = self.clock.now();
        let end = start + self.run.length;
        let warm = start + self.run.warm_up;
        self.at(start, Event::Arrival);
        self.at(start, Event::Tick);
        loop {
            let next = self.events.peek().map(|Reverse((at, _))| *at);
            let alarm = self.clock.next_alarm();
            let Some(now) = next.into_iter().chain(alarm).min() else {
                break;
            };
            if now > end && self.outstanding == 0 && self.waiting.is_empty() {
                break;
            }
            self.clock.set(now);
            while now >= self.second_end {
                self.close_second();
            }
            if next == Some(now) {
                let Reverse((_, seq)) = self.events.pop().expect("peeked");
                let event = self.payloads.remove(&seq).expect("scheduled");
                self.handle(event, now, end, warm);
            }
            if let Some(limiter) = &self.limiter {
                let over = self.outstanding.saturating_sub(limiter.limit());
                self.report.over_limit_max = self.report.over_limit_max.max(over);
            }
            self.poll_waiting(now, warm);
        }
        self.finish()
    }

    fn handle(&mut self, event: Event, now: Nanos, end: Nanos, warm: Nanos) {
        match event {
            Event::Arrival => {
                if now >= end {
                    return;
                }
                self.report.offered += 1;
                self.arrive(now, warm);
                let t = now.saturating_since(end - self.run.length).as_secs_f64();
                let rate = self.run.load.rate_at(t, self.run.length.as_secs_f64());
                let gap = Duration::from_secs_f64(self.rng.exp() / rate);
                self.at(now + gap, Event::Arrival);
            }
            Event::Tick => {
                if now > end {
                    return;
                }
                let limit = self.limiter.as_ref().map_or(0, |l| l.tick());
                if now >= warm {
                    self.limits.push(limit);
                }
                self.at(now + self.run.tick, Event::Tick);
            }
            Event::End {
                arrived,
                dropped,
                permit,
                working,
            } => {
                if working {
                    self.working -= 1;
                }
                self.outstanding -= 1;
                if let Some(permit) = permit {
                    permit.end(dropped);
                }
                let latency = now.saturating_since(arrived);
                if now >= warm {
                    self.latencies.push(latency);
                    self.report.answered_late += 1;
                    self.report.dropped_late += u64::from(dropped);
                }
                self.second.push(latency);
            }
        }
    }

    /// A request arrives: through the limiter if any, else straight to the service.
    fn arrive(&mut self, now: Nanos, warm: Nanos) {
        let limiter = match &self.limiter {
            None => {
                self.send(now, now, None, warm);
                return;
            }
            Some(Gate::Partitioned(limiter, mix)) => {
                let (limiter, mix) = (Arc::clone(limiter), mix.clone());
                self.arrive_partitioned(&limiter, &mix, now, warm);
                return;
            }
            Some(Gate::Adaptive(limiter)) => Arc::clone(limiter),
        };
        match limiter.mode() {
            WhenLimited::FailFast => match limiter.try_acquire_owned() {
                Ok(permit) => self.send(now, now, Some(Permit::Adaptive(permit)), warm),
                Err(_) => self.report.rejected += 1,
            },
            _ => {
                let waiting = Box::pin(limiter.acquire());
                self.waiting.push((now, waiting));
            }
        }
    }

    /// A request of a partition drawn from `mix`, decided at once.
    fn arrive_partitioned(
        &mut self,
        limiter: &Partitioned,
        mix: &[(&'static str, f64)],
        now: Nanos,
        warm: Nanos,
    ) {
        let total: f64 = mix.iter().map(|(_, w)| w).sum();
        let mut draw = self.rng.unit() * total;
        let index = mix
            .iter()
            .position(|(_, w)| {
                draw -= w;
                draw < 0.0
            })
            .unwrap_or(mix.len() - 1);
        self.report.partitions[index].offered += 1;
        match limiter.try_acquire(mix[index].0) {
            Ok(permit) => {
                self.report.partitions[index].admitted += 1;
                self.send(now, now, Some(Permit::Partitioned(permit)), warm);
            }
            Err(_) => {
                self.report.partitions[index].rejected += 1;
                self.report.rejected += 1;
            }
        }
    }

    /// Polls the waiters in arrival order: admitted ones go to the service.
    fn poll_waiting(&mut self, now: Nanos, warm: Nanos) {
        if self.waiting.is_empty() {
            return;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let waiting = std::mem::take(&mut self.waiting);
        for (arrived, mut future) in waiting {
            match future.as_mut().poll(&mut cx) {
                Poll::Pending => self.waiting.push((arrived, future)),
                Poll::Ready(Ok(permit)) => {
                    self.send(arrived, now, Some(Permit::Adaptive(permit)), warm)
                }
                Poll::Ready(Err(_)) => self.report.rejected += 1,
            }
        }
        let waiters = self.waiting.len() as u64;
        self.report.waiting_max = self.report.waiting_max.max(waiters);
    }

    fn send(&mut self, arrived: Nanos, now: Nanos, permit: Option<Permit>, warm: Nanos) {
        self.report.admitted += 1;
        self.second_admitted += 1;
        self.outstanding += 1;
        self.note_inflight(now, warm);
        let level = self.working + 1;
        let (after, dropped, working) = match self.service.latency(level, &mut self.rng) {
            Some(latency) => (latency, false, true),
            None => match self.service.overload {
                Overload::Reject => (self.service.base, true, false),
                Overload::Hang(timeout) => (timeout, true, false),
            },
        };
        self.working += u64::from(working);
        if now >= warm {
            self.report.working_max = self.report.working_max.max(self.working);
        }
        self.report.dropped += u64::from(dropped);
        self.at(
            now + after,
            Event::End {
                arrived,
                dropped,
                permit,
                working,
            },
        );
    }

    fn note_inflight(&mut self, now: Nanos, warm: Nanos) {
        let r = &mut self.report;
        r.inflight_max_all = r.inflight_max_all.max(self.outstanding);
        if now >= warm {
            r.inflight_max = r.inflight_max.max(self.outstanding);
        }
    }

    fn close_second(&mut self) {
        let limit = self.limiter.as_ref().map_or(0, |l| l.limit());
        let p99 = percentile(&mut self.second, 0.99);
        self.report.seconds.push((limit, self.second_admitted, p99));
        self.second.clear();
        self.second_admitted = 0;
        self.second_end = self.second_end + Duration::from_secs(1);
    }

    fn finish(mut self) -> Report {
        if !self.second.is_empty() || self.second_admitted > 0 {
            self.close_second();
        }
        let r = &mut self.report;
        r.limit_min = self.limits.iter().copied().min().unwrap_or(0);
        r.limit_max = self.limits.iter().copied().max().unwrap_or(0);
        r.limit_mean = self.limits.iter().sum::<u64>() as f64 / self.limits.len().max(1) as f64;
        r.limit_end = self.limits.last().copied().unwrap_or(0);
        r.p50 = percentile(&mut self.latencies, 0.5);
        r.p99 = percentile(&mut self.latencies, 0.99);
        self.report
    }
}

/// The `q` quantile (nearest rank) of `values`, or zero for none.
pub fn percentile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "limit {}..{} (mean {:.1}, end {}), in flight max {} (all {}, over limit {}, service {}), \
             p50 {:?} p99 {:?}, offered {} admitted {} rejected {} dropped {} (late {}/{})",
            self.limit_min,
            self.limit_max,
            self.limit_mean,
            self.limit_end,
            self.inflight_max,
            self.inflight_max_all,
            self.over_limit_max,
            self.working_max,
            self.p50,
            self.p99,
            self.offered,
            self.admitted,
            self.rejected,
            self.dropped,
            self.dropped_late,
            self.answered_late,
        )
    }
}
