//! System adaptive protection through its public API, on a `ManualClock` with
//! injected readings: each Sentinel threshold trips and un-trips alone, together,
//! the BBR check on real window statistics, shadow mode and the kill switch, exempt
//! classes, and the protection as a `Shedder` behind the HTTP `ShedLayer`.
#![cfg(feature = "shed")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::observe::{DenyReason, Event, EventKind, Events};
use tollgate::shed::system::{
    LoadCheck, ManualReadings, ReadingError, SystemPermit, SystemProtection, SystemRule, Threshold,
};
use tollgate::shed::{Classes, Mode, Shed, ShedDecision, ShedReason, Shedder};
use tollgate::time::{Clock, ManualClock, Nanos};

type Protection = SystemProtection<ManualReadings, ManualClock>;
type Permit = SystemPermit<ManualReadings, ManualClock>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn protection(rule: SystemRule) -> (Protection, ManualReadings, ManualClock) {
    let readings = ManualReadings::new();
    let clock = ManualClock::new();
    let protection =
        SystemProtection::with_clock(Classes::google(), rule, readings.clone(), clock.clone());
    (protection, readings, clock)
}

/// A request of the least critical class.
fn decide(protection: &Protection) -> ShedDecision<Permit> {
    protection.decide(&Classes::google().lowest())
}

fn enter(protection: &Protection) -> Result<Permit, Shed> {
    decide(protection).into_slot()
}

fn shed_by(protection: &Protection) -> Option<Threshold> {
    enter(protection)
        .err()
        .and_then(|shed| shed.reason().threshold())
}

/// The threshold a shadow-mode decision names; `None` if admitted outright.
fn would_shed(decision: &ShedDecision<Permit>) -> Option<Threshold> {
    assert!(decision.is_admitted(), "{decision:?}");
    decision.shed().and_then(|shed| shed.reason().threshold())
}

#[test]
fn qps_trips_and_untrips() {
    let rule = SystemRule::builder().qps(3.0).build().unwrap();
    let (protection, _, clock) = protection(rule);
    for _ in 0..3 {
        enter(&protection).unwrap().exit();
    }
    // 3 passed + this one > 3.
    assert_eq!(shed_by(&protection), Some(Threshold::Qps));
    assert_eq!(protection.status().pass_qps, 3.0);
    // A shed request is not a pass: the window still holds 3.
    clock.advance(ms(999));
    assert_eq!(shed_by(&protection), Some(Threshold::Qps));
    clock.advance(ms(1));
    assert!(enter(&protection).is_ok());
}

#[test]
fn in_flight_trips_and_untrips() {
    let rule = SystemRule::builder().max_in_flight(2).build().unwrap();
    let (protection, _, _) = protection(rule);
    // Sentinel's `currentThread > maxThread` counts those already in: 3 run at once.
    let held: Vec<Permit> = (0..3).map(|_| enter(&protection).unwrap()).collect();
    assert_eq!(shed_by(&protection), Some(Threshold::InFlight));
    assert_eq!(protection.status().in_flight, 3);
    drop(held);
    assert_eq!(protection.status().in_flight, 0);
    assert!(enter(&protection).is_ok());
}

#[test]
fn rt_trips_and_untrips() {
    let rule = SystemRule::builder().avg_rt(ms(10)).build().unwrap();
    let (protection, _, clock) = protection(rule);
    let slow = enter(&protection).unwrap();
    clock.advance(ms(50));
    slow.exit();
    assert_eq!(protection.status().avg_rt, ms(50));
    assert_eq!(shed_by(&protection), Some(Threshold::Rt));
    // The slow completion leaves the 1 s window (its bucket began at 0).
    clock.advance(ms(950));
    assert_eq!(protection.status().avg_rt, Duration::ZERO);
    assert!(enter(&protection).is_ok());
}

#[test]
fn cpu_trips_and_untrips_on_the_next_reading() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.8)
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_cpu_usage(0.9);
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    // The reading is cached for a second: the drop is seen at the next one.
    readings.set_cpu_usage(0.3);
    clock.advance(ms(999));
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    clock.advance(ms(1));
    assert!(enter(&protection).is_ok());
    assert_eq!(protection.status().cpu_usage, Some(0.3));
    assert_eq!(readings.reads(), 2);
}

#[test]
fn load_alone_trips_and_untrips() {
    let rule = SystemRule::builder()
        .highest_system_load(2.0)
        .load_check(LoadCheck::Alone)
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_load_average(2.5);
    assert_eq!(shed_by(&protection), Some(Threshold::Load));
    readings.set_load_average(1.5);
    clock.advance(Duration::from_secs(1));
    assert!(enter(&protection).is_ok());
}

/// BBR on window statistics built by real requests: 4 completions of 10 ms in one
/// 500 ms bucket make max success QPS 4 × 2 / 1 s = 8 and min RT 10 ms, so the
/// capacity is 0.08; Sentinel still admits while at most one request is in flight.
#[test]
fn bbr_sheds_beyond_what_the_window_shows_it_can_finish() {
    let rule = SystemRule::builder()
        .highest_system_load(3.0)
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_load_average(1.0);
    let batch: Vec<Permit> = (0..4).map(|_| enter(&protection).unwrap()).collect();
    clock.advance(ms(10));
    drop(batch);
    let status = protection.status();
    assert_eq!(status.max_success_qps, 8.0);
    assert_eq!(status.min_rt, ms(10));

    // Not loaded: nothing is shed however many are in flight.
    let calm: Vec<Permit> = (0..5).map(|_| enter(&protection).unwrap()).collect();
    drop(calm);

    readings.set_load_average(4.0);
    clock.advance(Duration::from_secs(1) - ms(10)); // the next reading
    // The window slid: its completions are gone, so capacity is 2 × 5 s = 10.
    let held: Vec<Permit> = (0..11).map(|_| enter(&protection).unwrap()).collect();
    assert_eq!(shed_by(&protection), Some(Threshold::Bbr));
    drop(held);
    clock.advance(Duration::from_secs(1)); // their zero RTs leave the window

    // Fill the window again with fast completions: capacity 8 × 10 ms = 0.08.
    let batch: Vec<Permit> = (0..4).map(|_| enter(&protection).unwrap()).collect();
    clock.advance(ms(10));
    drop(batch);
    let first = enter(&protection).unwrap(); // 0 in flight
    let second = enter(&protection).unwrap(); // 1 in flight: never refused
    assert_eq!(shed_by(&protection), Some(Threshold::Bbr)); // 2 > 0.08
    assert_eq!(protection.status().shed, 2);

    // The load falls: BBR no longer applies.
    readings.set_load_average(2.0);
    clock.advance(Duration::from_secs(1));
    assert!(enter(&protection).is_ok());
    drop((first, second));
}

/// Sentinel's SystemGuardDemo rule, with several thresholds exceeded at once: the
/// refusal names the first in checkSystem's order (QPS, in-flight, RT, load, CPU),
/// and clearing it uncovers the next.
#[test]
fn combined_thresholds_name_the_first_in_sentinels_order() {
    let rule = SystemRule::builder()
        .highest_system_load(3.0)
        .highest_cpu_usage(0.6)
        .avg_rt(ms(10))
        .qps(20.0)
        .max_in_flight(10)
        .sample_every(ms(100))
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_cpu_usage(0.1);
    readings.set_load_average(1.0);

    // 11 run at once; the 12th sees 11 in flight.
    let held: Vec<Permit> = (0..11).map(|_| enter(&protection).unwrap()).collect();
    assert_eq!(shed_by(&protection), Some(Threshold::InFlight));

    // They finish slowly while the CPU heats up: RT is named before CPU.
    clock.advance(ms(40));
    drop(held);
    readings.set_cpu_usage(0.9);
    clock.advance(ms(60)); // the next reading is due, taken by the next request
    assert_eq!(shed_by(&protection), Some(Threshold::Rt));
    let status = protection.status();
    assert_eq!((status.avg_rt, status.cpu_usage), (ms(40), Some(0.9)));

    // In shadow mode the window fills to 20 passes; then QPS comes first of all.
    protection.mode().set(Mode::Shadow);
    let shadowed: Vec<ShedDecision<Permit>> = (0..9).map(|_| decide(&protection)).collect();
    assert!(
        shadowed
            .iter()
            .all(|d| would_shed(d) == Some(Threshold::Rt))
    );
    assert_eq!(would_shed(&decide(&protection)), Some(Threshold::Qps));
    drop(shadowed);
    protection.mode().set(Mode::Enforce);
    assert_eq!(shed_by(&protection), Some(Threshold::Qps));

    // A second later the window is empty: CPU alone remains.
    clock.advance(ms(900));
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    readings.set_cpu_usage(0.1);
    clock.advance(ms(100));
    assert!(enter(&protection).is_ok());
}

#[test]
fn shadow_mode_reports_and_sheds_nothing() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let (protection, readings, _) = protection(rule);
    readings.set_cpu_usage(0.9);
    protection.mode().set(Mode::Shadow);
    for _ in 0..3 {
        match decide(&protection) {
            ShedDecision::WouldShed { shed, .. } => {
                assert_eq!(shed.reason(), ShedReason::System(Threshold::Cpu));
                assert_eq!(shed.class(), &Classes::google().lowest());
            }
            other => panic!("{other:?}"),
        }
    }
    let status = protection.status();
    assert_eq!((status.shed, status.would_shed), (0, 3));
    assert_eq!(status.pass_qps, 3.0);
    protection.mode().set(Mode::Enforce);
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    assert_eq!(protection.status().shed, 1);
}

#[test]
fn kill_switch_admits_everything_and_reads_nothing() {
    let rule = SystemRule::builder().max_in_flight(0).build().unwrap();
    let (protection, readings, _) = protection(rule);
    let clone = protection.clone();
    let _held = enter(&protection).unwrap();
    assert_eq!(shed_by(&protection), Some(Threshold::InFlight));
    let reads = readings.reads();

    clone.mode().set(Mode::Off); // switched on a clone, seen by all
    assert_eq!(protection.mode().get(), Mode::Off);
    let admitted: Vec<ShedDecision<Permit>> = (0..100).map(|_| decide(&protection)).collect();
    assert!(admitted.iter().all(|d| matches!(d, ShedDecision::Admit(_))));
    assert_eq!(readings.reads(), reads);
    // Statistics were still kept.
    assert_eq!(protection.status().in_flight, 101);

    protection.mode().set(Mode::Enforce);
    assert_eq!(shed_by(&protection), Some(Threshold::InFlight));
}

#[test]
fn readings_are_taken_at_most_once_per_interval() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.9)
        .sample_every(ms(250))
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    for _ in 0..1000 {
        enter(&protection).unwrap().exit();
    }
    assert_eq!(readings.reads(), 1);
    clock.advance(ms(249));
    enter(&protection).unwrap().exit();
    assert_eq!(readings.reads(), 1);
    clock.advance(ms(1));
    enter(&protection).unwrap().exit();
    enter(&protection).unwrap().exit();
    assert_eq!(readings.reads(), 2);
}

#[test]
fn a_failed_reading_keeps_the_last_good_one() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_cpu_usage(0.9);
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    readings.fail(ReadingError::Unsupported);
    clock.advance(Duration::from_secs(1));
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    assert_eq!(protection.status().read_errors, 1);
    assert_eq!(
        protection.last_read_error(),
        Some(ReadingError::Unsupported)
    );
}

#[test]
fn a_nan_infinite_or_negative_reading_keeps_the_last_good_one() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .highest_system_load(2.0)
        .load_check(LoadCheck::Alone)
        .build()
        .unwrap();
    let (protection, readings, clock) = protection(rule);
    readings.set_cpu_usage(0.9);
    readings.set_load_average(1.0);
    assert_eq!(shed_by(&protection), Some(Threshold::Cpu));
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5] {
        readings.set_cpu_usage(bad);
        readings.set_load_average(bad);
        clock.advance(Duration::from_secs(1));
        // Still shed by CPU: the check stays on with the last good reading.
        assert_eq!(shed_by(&protection), Some(Threshold::Cpu), "{bad}");
        let status = protection.status();
        assert_eq!(status.cpu_usage, Some(0.9), "{bad}");
        assert_eq!(status.load_average, Some(1.0), "{bad}");
    }
    assert_eq!(protection.status().read_errors, 0);
    // A good reading again replaces it.
    readings.set_cpu_usage(0.1);
    clock.advance(Duration::from_secs(1));
    assert!(enter(&protection).is_ok());
    assert_eq!(protection.status().cpu_usage, Some(0.1));
}

#[test]
fn without_any_reading_cpu_and_load_do_not_trip() {
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.0)
        .highest_system_load(0.0)
        .load_check(LoadCheck::Alone)
        .build()
        .unwrap();
    let (protection, readings, _) = protection(rule);
    readings.fail(ReadingError::Unsupported);
    assert!(enter(&protection).is_ok());
    assert_eq!(protection.status().cpu_usage, None);
}

#[test]
fn events_are_keyed_by_class_as_for_every_shedder() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let events = Events::new("system");
    let _subscription = events.subscribe({
        let log = Arc::clone(&log);
        move |event: &Event<'_>| {
            log.lock()
                .unwrap()
                .push((event.kind, event.key.map(str::to_owned)))
        }
    });
    let rule = SystemRule::builder().max_in_flight(0).build().unwrap();
    let (protection, _, _) = protection(rule);
    let protection = protection.with_events(events);
    let _held = enter(&protection).unwrap();
    assert!(enter(&protection).is_err());
    protection.mode().set(Mode::Shadow);
    let _shadowed = enter(&protection).unwrap();
    let key = Some("sheddable".to_owned());
    assert_eq!(
        *log.lock().unwrap(),
        [
            (EventKind::Admitted, key.clone()),
            (
                EventKind::Denied {
                    reason: DenyReason::Shed,
                    retry_after: None
                },
                key.clone()
            ),
            (EventKind::WouldShed, key),
        ]
    );
}

#[test]
fn every_class_is_shed_by_default_and_exempt_ones_never() {
    let classes = Classes::google();
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let (protection, readings, _) = protection(rule);
    readings.set_cpu_usage(0.9);
    for class in classes.iter() {
        let shed = protection.decide(&class).into_slot().unwrap_err();
        assert_eq!(shed.class(), &class);
        assert_eq!(shed.reason(), ShedReason::System(Threshold::Cpu));
        assert_eq!(shed.reason().as_str(), "system_cpu");
    }

    let exempt = protection
        .clone()
        .with_exempt(["CRITICAL_PLUS", "critical"])
        .unwrap();
    let admitted = exempt.decide(&classes.parse("critical_plus"));
    assert!(matches!(admitted, ShedDecision::Admit(_)));
    let critical = exempt.decide(&classes.parse("critical"));
    assert!(critical.is_admitted());
    assert!(
        !exempt
            .decide(&classes.parse("sheddable_plus"))
            .is_admitted()
    );
    // Exempt requests load the process too: they count in the statistics.
    assert_eq!(exempt.status().in_flight, 2);
    assert_eq!(protection.status().in_flight, 2);

    // An empty list exempts none again; an unknown name is a typed error.
    let none = exempt.with_exempt(Vec::<&str>::new()).unwrap();
    assert!(!none.decide(&classes.highest()).is_admitted());
    assert!(protection.clone().with_exempt(["gold"]).is_err());
    // A class from another set is not exempt.
    let other = Classes::new(["a", "b", "c", "d", "e"]).unwrap();
    assert!(!none.is_exempt(&other.lowest()));
    drop((admitted, critical));
}

#[test]
fn the_retry_after_hint_is_configurable() {
    let rule = SystemRule::builder().max_in_flight(0).build().unwrap();
    let (protection, _, _) = protection(rule);
    let _held = enter(&protection).unwrap();
    assert_eq!(enter(&protection).unwrap_err().retry_after(), None);
    let protection = protection.with_retry_after(Some(Duration::from_secs(3)));
    assert_eq!(
        enter(&protection).unwrap_err().retry_after(),
        Some(Duration::from_secs(3))
    );
}

#[test]
fn at_the_clocks_end() {
    let rule = SystemRule::builder()
        .avg_rt(ms(10))
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let readings = ManualReadings::new();
    let clock = ManualClock::starting_at(Nanos::MAX - Duration::from_millis(5));
    let protection =
        SystemProtection::with_clock(Classes::google(), rule, readings.clone(), clock.clone());
    let permit = enter(&protection).unwrap();
    clock.advance(Duration::from_secs(3600)); // saturates at the end
    assert_eq!(clock.now(), Nanos::MAX);
    drop(permit);
    assert_eq!(protection.status().avg_rt, ms(5));
    assert_eq!(shed_by(&protection), None); // 5 ms is under 10 ms
    // Time no longer moves: no reading is ever due again.
    readings.set_cpu_usage(0.9);
    let reads = readings.reads();
    for _ in 0..10 {
        drop(enter(&protection));
    }
    assert_eq!(readings.reads(), reads);
}

#[test]
fn protection_and_permit_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Protection>();
    check::<Permit>();
    fn shedder<S: Shedder<Slot = Permit>>() {}
    shedder::<Protection>();
}

// The bug: a window or sampling interval of up to 292 years was accepted; the
// statistics then never rolled (QPS stays near 0) or the first reading stayed in
// charge, and the rule silently stopped shedding.
#[test]
fn windows_and_sampling_beyond_an_hour_are_refused() {
    use tollgate::ConfigError;
    use tollgate::shed::system::MAX_PERIOD;

    let base = || SystemRule::builder().qps(10.0);
    assert_eq!(MAX_PERIOD, Duration::from_secs(3600));
    let over = MAX_PERIOD + Duration::from_secs(2);
    assert_eq!(
        base().window(over, 2).build().unwrap_err(),
        ConfigError::TooLong {
            parameter: "window",
            max: MAX_PERIOD,
            within: "the system rule's statistics"
        }
    );
    assert_eq!(
        base().sample_every(over).build().unwrap_err(),
        ConfigError::TooLong {
            parameter: "sample_every",
            max: MAX_PERIOD,
            within: "the system rule's statistics"
        }
    );
    assert!(base().window(MAX_PERIOD, 2).build().is_ok());
    assert!(base().sample_every(MAX_PERIOD).build().is_ok());
}

// The bug: a class of another set at an exempt class's index was exempt, whatever
// its name.
#[test]
fn a_class_of_another_set_is_exempt_by_its_name_only() {
    let rule = SystemRule::builder().max_in_flight(0).build().unwrap();
    let (protection, _readings, _clock) = protection(rule);
    let protection = protection.with_exempt(["critical_plus"]).unwrap();
    let _held = enter(&protection).unwrap();
    let other = Classes::new(["bulk", "critical_plus"]).unwrap();
    // `bulk` is at the exempt index 0, and no name of Google's: the default class.
    assert!(!protection.is_exempt(&other.highest()));
    assert!(!protection.decide(&other.highest()).is_admitted());
    // `critical_plus` is exempt by its name, at index 1 of its own set.
    assert!(protection.is_exempt(&other.lowest()));
    assert!(protection.decide(&other.lowest()).is_admitted());
}
