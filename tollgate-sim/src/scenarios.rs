//! Built-in scenarios: the same traffic against several limits, side by side.

use std::time::Duration;

use crate::arrivals::Arrival;
use crate::error::SimError;
use crate::replay::{RulesLimiter, Series, replay};

/// A scenario: what it shows, and how to run it.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it shows, in a sentence.
    pub shows: &'static str,
}

/// Every built-in scenario.
pub const SCENARIOS: &[Scenario] = &[Scenario {
    name: "boundary",
    shows: "a fixed window of 100 a minute admits 2x its limit across a window boundary \
            (100 requests in the last second of a minute, 100 in the first of the \
            next, at three boundaries); the sliding log, the sliding counter and GCRA do not",
}];

/// What one scenario run gives: a series per limit, and the span its figure reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The scenario's name.
    pub name: &'static str,
    /// A series per limit, in the scenario's order.
    pub series: Vec<Series>,
    /// The span over which [`Series::most_admitted_in`] is the scenario's figure.
    pub span: Duration,
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
    fn an_unknown_scenario_is_named() {
        let err = run("nope", 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no scenario \"nope\" (`tollgate-sim list` names them)"
        );
    }
}
