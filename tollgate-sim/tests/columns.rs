//! The series' columns beyond admitted and denied: each where it means something,
//! empty elsewhere, and holding its invariants.

use std::time::Duration;

use tollgate::adaptive::WhenLimited;
use tollgate::time::ManualClock;
use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
use tollgate_sim::replay::{CSV_HEADER, Series, Step};
use tollgate_sim::scenarios::run;
use tollgate_sim::service::{Gate, KNEE_SERVICE, Setup, adaptive_algorithm, simulate};

fn ordered(p50: Option<u64>, p90: Option<u64>, p99: Option<u64>) -> bool {
    match (p50, p90, p99) {
        (Some(a), Some(b), Some(c)) => a <= b && b <= c,
        (None, None, None) => true,
        _ => false,
    }
}

fn percentiles_ordered(s: &Step) -> bool {
    ordered(s.wait_p50_us, s.wait_p90_us, s.wait_p99_us)
        && ordered(s.latency_p50_us, s.latency_p90_us, s.latency_p99_us)
}

fn totals(s: &Series) -> (u64, u64, u64) {
    s.steps.iter().fold((0, 0, 0), |(o, a, d), s| {
        (o + s.offered, a + s.admitted, d + s.denied)
    })
}

#[test]
fn adaptive_limits_report_their_limit_in_flight_and_latencies() {
    let outcome = run("adaptive", 1).unwrap();
    for s in &outcome.series {
        let (offered, admitted, denied) = totals(s);
        assert_eq!(offered, admitted + denied, "{}", s.name);
        for step in &s.steps {
            let (limit, in_flight) = (step.limit.unwrap(), step.in_flight.unwrap());
            // The limiter admits only below its limit, which never passes 200 here.
            // (At a step's end more can be in flight than the limit: after a cut,
            // requests admitted under the higher limit are still finishing, and the
            // limit can rise and fall within a step. `surge` holds the strict form.)
            assert!((1..=200).contains(&limit), "{}: {step:?}", s.name);
            assert!(in_flight <= 200, "{}: {step:?}", s.name);
            assert!(percentiles_ordered(step), "{}: {step:?}", s.name);
            // Failing fast: nothing waits, so no queue and no wait.
            assert_eq!((step.queued, step.wait_p50_us), (None, None));
        }
        // The service answers in 10 ms at best.
        let late = &s.steps[5..25];
        assert!(
            late.iter().all(|s| s.latency_p50_us.unwrap() >= 10_000),
            "{}",
            s.name
        );
    }
}

#[test]
fn an_adaptive_limiter_that_waits_reports_its_queue_and_waits() {
    let traffic = Traffic {
        pattern: Pattern::Poisson { rate: 2_000.0 },
        keys: Keys::One,
        cost: 1,
        duration: Duration::from_secs(10),
    };
    let arrivals = traffic.arrivals(3).unwrap();
    let clock = ManualClock::new();
    let algorithm = adaptive_algorithm("gradient2", &KNEE_SERVICE, &clock, 3).unwrap();
    let timeout = Duration::from_millis(50);
    let gate = Gate::adaptive(algorithm, WhenLimited::fifo(timeout).unwrap(), &clock).unwrap();
    let setup = Setup {
        service: KNEE_SERVICE,
        step: Duration::from_millis(500),
        tick: Duration::from_millis(10),
        seed: 3,
    };
    let served = simulate("fifo", &setup, &arrivals, &[], &gate, &clock).unwrap();
    let s = &served.total;
    let (offered, admitted, denied) = totals(s);
    assert_eq!(offered, arrivals.len() as u64);
    assert_eq!(offered, admitted + denied);
    assert!(
        denied > 0,
        "offered twice the service's capacity, some time out"
    );
    assert!(s.steps.iter().any(|s| s.queued.unwrap() > 0));
    for step in &s.steps {
        assert!(percentiles_ordered(step), "{step:?}");
        // Nobody waits longer than the timeout.
        assert!(step.wait_p99_us.is_none_or(|w| w <= 50_000), "{step:?}");
    }
    assert_eq!(
        s.steps.last().unwrap().queued,
        Some(0),
        "every waiter resolved"
    );
}

#[test]
fn the_leaky_queue_reports_its_queue_and_waits_only() {
    let outcome = run("leaky", 1).unwrap();
    let s = &outcome.series[0];
    for step in &s.steps {
        let queued = step.queued.unwrap();
        // Room for 50.
        assert!(queued <= 50, "{step:?}");
        assert!(percentiles_ordered(step), "{step:?}");
        // 50 waiting at 10 a second: no wait above 5 s.
        assert!(step.wait_p99_us.is_none_or(|w| w <= 5_000_000), "{step:?}");
        // No service model, no concurrency limit.
        assert_eq!(
            (step.in_flight, step.limit, step.latency_p50_us),
            (None, None, None)
        );
    }
    assert!(s.steps.iter().any(|s| s.queued.unwrap() > 20));
    assert_eq!(s.steps.last().unwrap().queued, Some(0));
}

#[test]
fn the_fleet_shedder_keeps_each_class_under_its_limit() {
    let outcome = run("surge", 1).unwrap();
    let (sheddable, critical) = (&outcome.series[0], &outcome.series[1]);
    for (s, limit) in [(sheddable, 80), (critical, 100)] {
        for step in &s.steps {
            assert_eq!(step.limit, Some(limit), "{}", s.name);
            assert!(step.in_flight.unwrap() <= limit, "{}: {step:?}", s.name);
            assert!(percentiles_ordered(step), "{}: {step:?}", s.name);
            // 50 ms a request, whatever the load.
            if let Some(p) = step.latency_p99_us {
                assert_eq!((step.latency_p50_us, p), (Some(50_000), 50_000));
            }
            assert_eq!(step.queued, None, "a shedder never queues");
        }
    }
    let busiest = sheddable.steps[21..40].iter().map(|s| s.in_flight.unwrap());
    assert!(
        busiest.max().unwrap() >= 70,
        "the surge fills the shared slots"
    );
}

#[test]
fn rate_limits_leave_the_service_columns_empty() {
    for name in ["boundary", "blocked", "warmup"] {
        let outcome = run(name, 1).unwrap();
        for s in &outcome.series {
            for step in &s.steps {
                assert_eq!(
                    Step {
                        t_ms: step.t_ms,
                        offered: step.offered,
                        admitted: step.admitted,
                        denied: step.denied,
                        ..Step::default()
                    },
                    *step,
                    "{name}: {}",
                    s.name
                );
            }
        }
    }
}

#[test]
fn csv_and_json_name_every_column_and_leave_the_meaningless_empty() {
    let outcome = run("leaky", 1).unwrap();
    let s = &outcome.series[0];
    let csv = s.to_csv();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(CSV_HEADER));
    assert_eq!(CSV_HEADER.split(',').count(), 13);
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), 13, "{line}");
        // queued is set; in_flight, limit and the latencies are empty.
        assert!(!cells[4].is_empty(), "{line}");
        assert_eq!(
            [cells[5], cells[6], cells[10], cells[11], cells[12]],
            [""; 5],
            "{line}"
        );
    }
    let json: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    let step = &json["steps"][0];
    for column in CSV_HEADER.split(',') {
        assert!(step.get(column).is_some(), "{column} in {step}");
    }
    assert!(step["in_flight"].is_null() && step["queued"].is_u64());
}
