//! Built-in scenarios: the same traffic against several limits, side by side.

use std::time::Duration;

use tollgate::adaptive::WhenLimited;
use tollgate::algorithm::{SlidingLog, SmoothBursty, SmoothWarmingUp};
use tollgate::shed::Classes;
use tollgate::time::{Clock, ManualClock, Nanos};
use tollgate::{LeakyQueue, Quota};

use crate::arrivals::{Arrival, Keys, Pattern, Traffic};
use crate::error::SimError;
use crate::guava::WarmingUpShape;
use crate::plot::Measure;
use crate::replay::{AlgorithmLimiter, Decide, RulesLimiter, Series, Step, replay};
use crate::service::{Gate, KNEE_SERVICE, Overload, Service, Setup, adaptive_algorithm, simulate};

/// A scenario: what it shows, and how to run it.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it shows, in a sentence.
    pub shows: &'static str,
}

/// Every built-in scenario.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "boundary",
        shows: "a fixed window of 100 a minute admits 2x its limit across a window boundary \
                (100 requests in the last second of a minute, 100 in the first of the \
                next, at three boundaries); the sliding log, the sliding counter and GCRA do not",
    },
    Scenario {
        name: "blocked",
        shows: "a sliding log of 10 a minute that counts blocked attempts keeps a client \
                sending 20 a minute blocked after its first 10; the plain log admits 10 \
                every minute",
    },
    Scenario {
        name: "adaptive",
        shows: "AIMD, Vegas, Gradient2 and Envoy's gradient controller, each alone in front \
                of the same service (10 ms up to 10 requests in flight, slower past them, \
                dropping past 40), offered twice what it can serve: where each limit settles \
                against the knee",
    },
    Scenario {
        name: "leaky",
        shows: "a leaky queue draining 10 a second (room for 50) turns bursts of 40 \
                requests in a second, every 10 s, into departures evenly spaced at 10 a \
                second; what finds the queue full is refused",
    },
    Scenario {
        name: "surge",
        shows: "a fleet shedder of 100 in flight keeping 20 for critical work, in front of \
                a service taking 50 ms a request: sheddable work surges 12x for 20 s \
                (grey, offered); critical work is all served, sheddable work gets what \
                the other 80 allow",
    },
    Scenario {
        name: "warmup",
        shows: "Guava's SmoothWarmingUp at 10 a second with 10 s of warm-up, cold at the \
                start: a caller that waits for each permit (Guava's acquire) gets them \
                on Guava's documented shape (dashed: from 3x the stable interval down \
                to it over the warm-up), to the microsecond; a caller asking 20 a second \
                that never waits warms it more slowly; SmoothBursty grants the full rate \
                at once",
    },
];

/// What one scenario run gives: a series per limit, and the span its figure reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The scenario's name.
    pub name: &'static str,
    /// A series per limit, in the scenario's order.
    pub series: Vec<Series>,
    /// The span over which [`Series::most_admitted_in`] is the scenario's figure.
    pub span: Duration,
    /// How its plot counts.
    pub measure: Measure,
    /// A curve computed rather than simulated, drawn dashed over the series: Guava's
    /// documented warm-up in `warmup`.
    pub reference: Option<Series>,
}

/// Runs the scenario `name` from `seed`.
///
/// # Errors
///
/// [`SimError::UnknownScenario`] for a name not in [`SCENARIOS`]; a limiter's error.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate_sim::scenarios::run;
///
/// let outcome = run("boundary", 1)?;
/// let fixed = &outcome.series[0];
/// assert_eq!(fixed.name, "fixed_window");
/// assert_eq!(fixed.most_admitted_in(Duration::from_secs(60)), 200);
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn run(name: &str, seed: u64) -> Result<Outcome, SimError> {
    match name {
        "boundary" => boundary(seed),
        "blocked" => blocked(seed),
        "warmup" => warmup(seed),
        "adaptive" => adaptive(seed),
        "leaky" => leaky(seed),
        "surge" => surge(seed),
        other => Err(SimError::UnknownScenario(other.to_owned())),
    }
}

fn rules(algorithm: &str, per_minute: u64) -> String {
    format!(
        "domain: sim\ndescriptors:\n  - key: client\n    rate_limit: {{ unit: minute, requests_per_unit: {per_minute}, algorithm: {algorithm} }}\n"
    )
}

fn boundary(_seed: u64) -> Result<Outcome, SimError> {
    // Evenly spaced, so the same for every seed: 100 requests in the last second of
    // a minute and 100 in the first second of the next, at three boundaries two
    // minutes apart (so that each burst meets fresh windows).
    let burst = |from_ms: u64| {
        (0..100u64).map(move |i| Arrival {
            at: Duration::from_millis(from_ms + i * 10),
            key: 0,
            cost: 1,
        })
    };
    let arrivals: Vec<Arrival> = [1u64, 3, 5]
        .into_iter()
        .flat_map(|minute| burst(minute * 60_000 - 1_000).chain(burst(minute * 60_000)))
        .chain(std::iter::once(Arrival {
            // A last request draws the lines to the end of the sixth minute.
            at: Duration::from_secs(360),
            key: 0,
            cost: 1,
        }))
        .collect();
    let mut series = Vec::new();
    for algorithm in ["fixed_window", "sliding_log", "sliding_counter", "gcra"] {
        let mut limiter = RulesLimiter::new(&rules(algorithm, 100), "client")?;
        series.push(replay(
            algorithm,
            &arrivals,
            &|_| "client-1".to_owned(),
            &mut limiter,
            Duration::from_secs(1),
        )?);
    }
    Ok(Outcome {
        name: "boundary",
        series,
        span: Duration::from_secs(60),
        measure: Measure::Rolling(Duration::from_secs(60)),
        reference: None,
    })
}

/// Each limiter of `limiters` against the same `arrivals` of one key.
fn side_by_side(
    arrivals: &[Arrival],
    limiters: Vec<(&str, Box<dyn Decide>)>,
    step: Duration,
) -> Result<Vec<Series>, SimError> {
    limiters
        .into_iter()
        .map(|(name, mut limiter)| {
            replay(
                name,
                arrivals,
                &|_| "client-1".to_owned(),
                limiter.as_mut(),
                step,
            )
        })
        .collect()
}

fn blocked(seed: u64) -> Result<Outcome, SimError> {
    // A request every 3 s for five minutes: 20 a minute against 10.
    let arrivals = Traffic {
        pattern: Pattern::Constant { rate: 1.0 / 3.0 },
        keys: Keys::One,
        cost: 1,
        duration: Duration::from_secs(300),
    }
    .arrivals(seed)?;
    let minute = Duration::from_secs(60);
    let log = SlidingLog::new(10, minute).map_err(|e| SimError::Rules(e.to_string()))?;
    let series = side_by_side(
        &arrivals,
        vec![
            ("sliding_log", Box::new(AlgorithmLimiter::new(log))),
            (
                "sliding_log, counting blocked",
                Box::new(AlgorithmLimiter::new(log.count_blocked(true))),
            ),
        ],
        Duration::from_secs(1),
    )?;
    Ok(Outcome {
        name: "blocked",
        series,
        span: minute,
        measure: Measure::Rolling(minute),
        reference: None,
    })
}

fn warmup(seed: u64) -> Result<Outcome, SimError> {
    // 20 a second, evenly, for 30 s, against 10 a second: the limiter starts cold.
    let length = Duration::from_secs(30);
    let arrivals = Traffic {
        pattern: Pattern::Constant { rate: 20.0 },
        keys: Keys::One,
        cost: 1,
        duration: length,
    }
    .arrivals(seed)?;
    let rules = |e: tollgate::ConfigError| SimError::Rules(e.to_string());
    let (rate, period) = (10.0, Duration::from_secs(10));
    let warming = SmoothWarmingUp::new(rate, period).map_err(rules)?;
    let bursty = SmoothBursty::new(10.0).map_err(rules)?;
    let step = Duration::from_secs(1);
    let mut series = side_by_side(
        &arrivals,
        vec![
            ("SmoothWarmingUp", Box::new(AlgorithmLimiter::new(warming))),
            ("SmoothBursty", Box::new(AlgorithmLimiter::new(bursty))),
        ],
        step,
    )?;
    // Guava's `acquire()`: each permit taken as soon as it is due.
    let waited = waiting_caller(warming, length)?;
    series.insert(
        1,
        counted("SmoothWarmingUp, a caller that waits", &waited, step),
    );
    let shape = WarmingUpShape::new(rate, period, 3.0);
    let reference = counted("Guava's documented shape", &shape.grant_times(length), step);
    Ok(Outcome {
        name: "warmup",
        series,
        span: Duration::from_secs(1),
        measure: Measure::PerStep,
        reference: Some(reference),
    })
}

/// The times a caller that always waits for its next permit (each `try_acquire`
/// denied is tried again after its `retry_after`, on virtual time) gets permits
/// from `algorithm`, from cold, until `until`.
///
/// # Errors
///
/// [`SimError::Rules`] if a denial names no time to retry at.
pub fn waiting_caller<A: tollgate::algorithm::Algorithm>(
    algorithm: A,
    until: Duration,
) -> Result<Vec<Duration>, SimError> {
    let clock = ManualClock::new();
    let limiter = tollgate::Limiter::with_clock(algorithm, clock.clone());
    let mut times = Vec::new();
    loop {
        let now = Duration::from_nanos(clock.now().as_u64());
        if now >= until {
            return Ok(times);
        }
        match limiter.try_acquire(1) {
            Ok(_) => times.push(now),
            Err(denied) => match denied.retry_after() {
                Some(wait) if !wait.is_zero() => clock.advance(wait),
                _ => {
                    return Err(SimError::Rules(format!(
                        "a denial with no time to retry at: {denied:?}"
                    )));
                }
            },
        }
    }
}

/// A series of `times` (in order) as admissions, per `step`, nothing denied.
fn counted(name: &str, times: &[Duration], step: Duration) -> Series {
    let step_us = step.as_micros().max(1);
    let len = times
        .last()
        .map_or(0, |t| (t.as_micros() / step_us) as usize + 1);
    let mut steps: Vec<Step> = (0..len)
        .map(|i| Step::at((i as u128 * step_us / 1_000) as u64))
        .collect();
    for t in times {
        let s = &mut steps[(t.as_micros() / step_us) as usize];
        s.offered += 1;
        s.admitted += 1;
    }
    Series {
        name: name.to_owned(),
        step_ms: (step_us / 1_000) as u64,
        steps,
        admitted_at_us: times.iter().map(|t| t.as_micros() as u64).collect(),
    }
}

fn leaky(seed: u64) -> Result<Outcome, SimError> {
    let arrivals = Traffic {
        pattern: Pattern::OnOff {
            rate: 40.0,
            on: Duration::from_secs(1),
            off: Duration::from_secs(9),
        },
        keys: Keys::One,
        cost: 1,
        duration: Duration::from_secs(60),
    }
    .arrivals(seed)?;
    let bad = |e: &dyn std::fmt::Display| SimError::Rules(e.to_string());
    let clock = ManualClock::new();
    let drain = Quota::per_second(10).map_err(|e| bad(&e))?;
    let queue = LeakyQueue::with_clock(50, drain, clock.clone()).map_err(|e| bad(&e))?;
    let at = |d: Duration| Nanos::new(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut departures: Vec<Duration> = Vec::new();
    // Each departure's wait in the queue, in the order of departures.
    let mut waits: Vec<Duration> = Vec::new();
    let mut refused: Vec<Duration> = Vec::new();
    let mut waiting = Vec::new();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut next = 0;
    // Event by event: the next arrival, or the next alarm a waiting request set.
    loop {
        let arrival = arrivals.get(next).map(|a| at(a.at));
        let Some(now) = arrival.into_iter().chain(clock.next_alarm()).min() else {
            break;
        };
        clock.set(now);
        if arrival == Some(now) {
            waiting.push((arrivals[next].at, Box::pin(queue.enqueue(1))));
            next += 1;
        }
        let time = Duration::from_nanos(now.as_u64());
        waiting.retain_mut(|(arrived, request)| match request.as_mut().poll(&mut cx) {
            std::task::Poll::Pending => true,
            std::task::Poll::Ready(Ok(_)) => {
                departures.push(time);
                waits.push(time - *arrived);
                false
            }
            std::task::Poll::Ready(Err(_)) => {
                refused.push(*arrived);
                false
            }
        });
    }
    drop(waiting);
    let step = Duration::from_millis(500);
    let steps = |times: &[Duration], len: usize| {
        let mut counts = vec![0u64; len];
        for t in times {
            let i = (t.as_millis() / step.as_millis()) as usize;
            if let Some(c) = counts.get_mut(i) {
                *c += 1;
            }
        }
        counts
    };
    let end = departures
        .iter()
        .chain(arrivals.iter().map(|a| &a.at))
        .max()
        .copied();
    let len = end.map_or(0, |e| (e.as_millis() / step.as_millis()) as usize + 1);
    let arrived: Vec<Duration> = arrivals.iter().map(|a| a.at).collect();
    let offered = steps(&arrived, len);
    let left = steps(&departures, len);
    let denied = steps(&refused, len);
    let mut by_step: Vec<Vec<Duration>> = vec![Vec::new(); len];
    for (t, w) in departures.iter().zip(&waits) {
        by_step[(t.as_millis() / step.as_millis()) as usize].push(*w);
    }
    // In the queue at a step's end: arrived before it, neither gone nor refused.
    let before = |times: &[Duration], end: Duration| times.partition_point(|t| *t < end) as u64;
    let series = Series {
        name: "leaky queue, departures".to_owned(),
        step_ms: step.as_millis() as u64,
        steps: (0..len)
            .map(|i| {
                let end = step * (i as u32 + 1);
                let mut s = Step {
                    offered: offered[i],
                    admitted: left[i],
                    denied: denied[i],
                    queued: Some(
                        before(&arrived, end) - before(&departures, end) - before(&refused, end),
                    ),
                    ..Step::at(i as u64 * step.as_millis() as u64)
                };
                s.set_waits(&mut by_step[i]);
                s
            })
            .collect(),
        admitted_at_us: departures.iter().map(|d| d.as_micros() as u64).collect(),
    };
    Ok(Outcome {
        name: "leaky",
        series: vec![series],
        span: Duration::from_secs(1),
        measure: Measure::PerStep,
        reference: None,
    })
}

fn surge(seed: u64) -> Result<Outcome, SimError> {
    // Sheddable: 400 a second, 4,800 (12x) from 20 s to 40 s; critical: 100 a second.
    let poisson = |rate: f64, from: u64, to: u64, seed: u64| -> Result<Vec<Duration>, SimError> {
        Ok(Traffic {
            pattern: Pattern::Poisson { rate },
            keys: Keys::One,
            cost: 1,
            duration: Duration::from_secs(to - from),
        }
        .arrivals(seed)?
        .into_iter()
        .map(|a| a.at + Duration::from_secs(from))
        .collect())
    };
    let mut sheddable = poisson(400.0, 0, 20, seed)?;
    sheddable.extend(poisson(4_800.0, 20, 40, seed.wrapping_add(1))?);
    sheddable.extend(poisson(400.0, 40, 60, seed.wrapping_add(2))?);
    let critical = poisson(100.0, 0, 60, seed.wrapping_add(3))?;
    let mut requests: Vec<(Duration, bool)> = sheddable
        .iter()
        .map(|&t| (t, false))
        .chain(critical.iter().map(|&t| (t, true)))
        .collect();
    requests.sort();
    let google = Classes::google();
    let (critical_class, sheddable_class) = (google.parse("critical"), google.parse("sheddable"));
    let arrivals: Vec<Arrival> = requests
        .iter()
        .map(|&(at, _)| Arrival {
            at,
            key: 0,
            cost: 1,
        })
        .collect();
    let classes: Vec<_> = requests
        .iter()
        .map(|&(_, is_critical)| {
            if is_critical {
                critical_class.clone()
            } else {
                sheddable_class.clone()
            }
        })
        .collect();
    let clock = ManualClock::new();
    let gate = Gate::shedder("fleet", 100, 0.2, &clock)?;
    let setup = Setup {
        service: FLAT_50MS,
        step: Duration::from_secs(1),
        tick: Duration::from_millis(10),
        seed,
    };
    let served = simulate("surge", &setup, &arrivals, &classes, &gate, &clock)?;
    // Most critical first: sheddable first, as drawn.
    let series = served.by_class.into_iter().rev().collect();
    Ok(Outcome {
        name: "surge",
        series,
        span: Duration::from_secs(1),
        measure: Measure::PerStep,
        reference: None,
    })
}

/// The service of the surge scenario: 50 ms a request, whatever its load.
const FLAT_50MS: Service = Service {
    base: Duration::from_millis(50),
    knee: u64::MAX,
    growth: 0.0,
    max_inflight: u64::MAX,
    jitter: 0.0,
    overload: Overload::Reject,
};

/// The adaptive scenario's algorithms: the names `run --adaptive` takes, and as drawn.
const ADAPTIVE_NAMES: [(&str, &str); 4] = [
    ("aimd", "AIMD"),
    ("vegas", "Vegas"),
    ("gradient2", "Gradient2"),
    ("envoy-gradient", "Envoy gradient"),
];

fn adaptive(seed: u64) -> Result<Outcome, SimError> {
    // Twice what the service serves at its knee, for 30 s.
    let arrivals = Traffic {
        pattern: Pattern::Poisson {
            rate: 2.0 * KNEE_SERVICE.capacity(),
        },
        keys: Keys::One,
        cost: 1,
        duration: Duration::from_secs(30),
    }
    .arrivals(seed)?;
    let setup = Setup {
        service: KNEE_SERVICE,
        step: Duration::from_secs(1),
        tick: Duration::from_millis(10),
        seed,
    };
    let mut series = Vec::new();
    for (name, shown) in ADAPTIVE_NAMES {
        let clock = ManualClock::new();
        let algorithm = adaptive_algorithm(name, &KNEE_SERVICE, &clock, seed)?;
        let gate = Gate::adaptive(algorithm, WhenLimited::FailFast, &clock)?;
        series.push(simulate(shown, &setup, &arrivals, &[], &gate, &clock)?.total);
    }
    Ok(Outcome {
        name: "adaptive",
        series,
        span: Duration::from_secs(1),
        measure: Measure::Limit {
            knee: KNEE_SERVICE.knee,
        },
        reference: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fixed_window_doubles_across_the_boundary() {
        let outcome = run("boundary", 0).unwrap();
        let most: Vec<(String, u64)> = outcome
            .series
            .iter()
            .map(|s| (s.name.clone(), s.most_admitted_in(outcome.span)))
            .collect();
        assert_eq!(most[0], ("fixed_window".into(), 200));
        // The sliding log is exact: at most 100 in any minute.
        assert_eq!(most[1], ("sliding_log".into(), 100));
        // The others admit the limit and what refills in those two seconds.
        for (name, n) in &most[2..] {
            assert!((100..=104).contains(n), "{name}: {n}");
        }
    }

    #[test]
    fn counting_blocked_attempts_keeps_a_persistent_client_out() {
        let outcome = run("blocked", 0).unwrap();
        let (plain, counting) = (&outcome.series[0], &outcome.series[1]);
        // The plain log admits 10 in every minute: 50 over five.
        assert_eq!(plain.admitted(), 50);
        assert_eq!(plain.most_admitted_in(outcome.span), 10);
        // Counting blocked attempts, the first 10 only: every later attempt comes
        // within a minute of a logged one.
        assert_eq!(counting.admitted(), 10);
    }

    #[test]
    fn warming_up_starts_at_a_third_and_reaches_the_rate() {
        let outcome = run("warmup", 0).unwrap();
        let (warming, bursty) = (&outcome.series[0], &outcome.series[2]);
        let per_second: Vec<u64> = warming.steps.iter().map(|s| s.admitted).collect();
        // Cold: about a third of 10 a second in the first second (Guava's cold
        // factor 3), rising to 10 a second once warm.
        assert!((3..=5).contains(&per_second[0]), "{per_second:?}");
        assert!(
            per_second[..16].windows(2).all(|w| w[0] <= w[1] + 1),
            "{per_second:?}"
        );
        // Warm after about 16 s: the 10 s of warm-up are counted in permits taken at
        // the stable rate, and a caller that never waits takes fewer while cold.
        assert!(per_second[16..].iter().all(|&n| n == 10), "{per_second:?}");
        // SmoothBursty: the stable rate from the start.
        assert!(bursty.steps[1..].iter().all(|s| s.admitted == 10));
    }

    /// The simulated `SmoothWarmingUp`, taken by a caller that waits for each permit
    /// (Guava's `acquire()`), gives its permits at the times Guava's documented
    /// shape gives, to the microsecond over 30 s (the shape's own figures match
    /// Guava's published ones to their 10 ms: `guava::tests`).
    #[test]
    fn a_waiting_caller_warms_up_along_guavas_documented_shape() {
        let outcome = run("warmup", 0).unwrap();
        let (simulated, reference) = (&outcome.series[1], outcome.reference.as_ref().unwrap());
        assert_eq!(
            simulated.admitted_at_us.len(),
            reference.admitted_at_us.len()
        );
        assert!(simulated.admitted_at_us.len() > 200);
        for (k, (s, r)) in simulated
            .admitted_at_us
            .iter()
            .zip(&reference.admitted_at_us)
            .enumerate()
        {
            assert!(
                s.abs_diff(*r) <= 1,
                "permit {k}: {s} µs simulated, {r} µs analytic"
            );
        }
        // Cold: the second permit 298 ms after the first (3 × 100 ms, less the slope
        // over half a permit); warm after the 10 s warm-up: 100 ms apart.
        let gaps: Vec<u64> = simulated
            .admitted_at_us
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        assert!(gaps[0].abs_diff(298_000) <= 1, "{}", gaps[0]);
        assert!(
            gaps[50..].iter().all(|&g| g.abs_diff(100_000) <= 1),
            "{gaps:?}"
        );
    }

    #[test]
    fn every_adaptive_limit_settles_near_the_knee() {
        let outcome = run("adaptive", 1).unwrap();
        for s in &outcome.series {
            let limits: Vec<u64> = s.steps.iter().map(|s| s.limit.unwrap()).collect();
            let late = &limits[limits.len() / 2..];
            let mean = late.iter().sum::<u64>() as f64 / late.len() as f64;
            // The knee is 10, and 40 is where the service refuses.
            assert!(
                (4.0..=30.0).contains(&mean),
                "{}: {mean} ({limits:?})",
                s.name
            );
        }
    }

    #[test]
    fn the_leaky_queue_spaces_departures_evenly() {
        let outcome = run("leaky", 1).unwrap();
        let s = &outcome.series[0];
        // Never more than 10 a second leave, in any second.
        assert!(s.most_admitted_in(Duration::from_secs(1)) <= 11);
        let gaps: Vec<u64> = s
            .admitted_at_us
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|&g| g < 1_000_000)
            .collect();
        // Within a burst, one every 100 ms, to the microsecond.
        assert!(
            gaps.iter().all(|&g| (99_000..=101_000).contains(&g)),
            "{gaps:?}"
        );
        let offered: u64 = s.steps.iter().map(|s| s.offered).sum();
        let refused: u64 = s.steps.iter().map(|s| s.denied).sum();
        assert_eq!(s.admitted() + refused, offered);
    }

    #[test]
    fn in_a_surge_critical_work_is_served_and_sheddable_work_shed() {
        let outcome = run("surge", 1).unwrap();
        let (sheddable, critical) = (&outcome.series[0], &outcome.series[1]);
        let denied = |s: &Series| s.steps.iter().map(|s| s.denied).sum::<u64>();
        assert_eq!(denied(critical), 0, "every critical request served");
        // Before the surge nothing is shed; during it, most sheddable work is.
        assert!(sheddable.steps[..20].iter().all(|s| s.denied == 0));
        let during: Vec<&Step> = sheddable.steps[21..40].iter().collect();
        assert!(during.iter().all(|s| s.denied > s.admitted), "{during:?}");
        // The 80 shared slots at 50 ms: at most 1,600 a second of sheddable work.
        assert!(during.iter().all(|s| s.admitted <= 1_600));
    }

    #[test]
    fn an_unknown_scenario_is_named() {
        let err = run("nope", 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no scenario \"nope\" (`tollgate-sim list` names them)"
        );
    }
}
