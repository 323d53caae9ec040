//! Load shedding: the fleet shedder's reserve at exact counts, the utilisation
//! shedder's escalation and de-escalation at exact times on a manual clock, shadow
//! mode and the kill switch, events per class, and a 12× surge of the least critical
//! class against a service of fixed capacity, simulated tick by tick.
#![cfg(feature = "shed")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::ConfigError;
use tollgate::observe::{DenyReason, Event, EventKind, Events};
use tollgate::shed::system::{ManualReadings, SystemProtection, SystemRule};
use tollgate::shed::{
    Class, Classes, FleetShedder, Measure, Mode, ModeSwitch, ShedDecision, ShedReason, Shedder,
    UtilisationBuilder, UtilisationShedder,
};
use tollgate::time::{ManualClock, Nanos};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Decides for `class` until refused; answers the slots taken.
fn fill<S: Shedder>(shedder: &S, class: &Class, slots: &mut Vec<S::Slot>) -> usize {
    let before = slots.len();
    while let Ok(slot) = shedder.decide(class).into_slot() {
        slots.push(slot);
        assert!(slots.len() <= 1_000, "never refused");
    }
    slots.len() - before
}

// ---- Fleet-usage shedder -------------------------------------------------------

#[test]
fn fleet_refuses_non_critical_at_80_and_admits_critical_up_to_100() {
    let classes = Classes::google();
    let fleet = FleetShedder::new(classes.clone(), 100, 0.2).unwrap();
    let mut slots = Vec::new();

    assert_eq!(fill(&fleet, &classes.parse("sheddable"), &mut slots), 80);
    assert_eq!(fleet.in_flight(), 80);
    for name in ["sheddable", "sheddable_plus"] {
        let shed = fleet.decide(&classes.parse(name)).into_slot().unwrap_err();
        assert_eq!(shed.reason(), ShedReason::Reserved);
        assert_eq!(shed.class().name(), name);
    }
    // The reserve: critical classes take the last 20.
    assert_eq!(fill(&fleet, &classes.parse("critical"), &mut slots), 20);
    assert_eq!(fleet.in_flight(), 100);
    let shed = fleet
        .decide(&classes.parse("critical_plus"))
        .into_slot()
        .unwrap_err();
    assert_eq!(shed.reason(), ShedReason::Full);

    // One non-critical request ends: still 99 in flight, above 80, so non-critical
    // stays refused while critical gets the freed slot.
    slots.truncate(99);
    assert!(!fleet.decide(&classes.lowest()).is_admitted());
    assert_eq!(fill(&fleet, &classes.parse("critical_plus"), &mut slots), 1);

    // Back under 80: non-critical is admitted again, up to 80.
    slots.truncate(70);
    assert_eq!(fill(&fleet, &classes.lowest(), &mut slots), 10);
}

#[test]
fn fleet_lets_critical_use_all_100_when_otherwise_idle() {
    let classes = Classes::google();
    let fleet = FleetShedder::new(classes.clone(), 100, 0.2).unwrap();
    let mut slots = Vec::new();
    assert_eq!(fill(&fleet, &classes.parse("critical"), &mut slots), 100);
    assert!(!fleet.decide(&classes.lowest()).is_admitted());
    drop(slots);
    assert_eq!(fleet.in_flight(), 0);
    let mut slots = Vec::new();
    assert_eq!(
        fill(&fleet, &classes.parse("critical_plus"), &mut slots),
        100
    );
}

#[test]
fn fleet_critical_classes_are_configurable() {
    let classes = Classes::google();
    let fleet = FleetShedder::new(classes.clone(), 10, 0.5)
        .unwrap()
        .with_critical(["CRITICAL_PLUS"])
        .unwrap();
    let mut slots = Vec::new();
    assert_eq!(fill(&fleet, &classes.parse("critical"), &mut slots), 5);
    assert_eq!(fill(&fleet, &classes.parse("critical_plus"), &mut slots), 5);
}

#[test]
fn fleet_clones_share_one_count_across_threads() {
    let classes = Classes::google();
    let fleet = FleetShedder::new(classes.clone(), 100, 0.2).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let fleet = fleet.clone();
            let low = classes.lowest();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..200 {
                    if let Ok(slot) = fleet.decide(&low).into_slot() {
                        held.push(slot);
                    }
                }
                held
            })
        })
        .collect();
    let held: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(
        held.len(),
        80,
        "no check-then-act: exactly the shared limit"
    );
    drop(held);
    assert_eq!(fleet.in_flight(), 0);
}

// ---- Worker-utilisation shedder ------------------------------------------------

/// Which classes `shedder` sheds now, most critical first (probing with slots that
/// are dropped at once).
fn shed_now<S: Shedder>(shedder: &S) -> Vec<bool> {
    let classes = shedder.classes().clone();
    classes
        .iter()
        .map(|class| !shedder.decide(&class).is_admitted())
        .collect()
}

#[test]
fn utilisation_escalates_then_de_escalates_at_exact_times() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .shed_above(0.9)
        .recover_below(0.5)
        .escalate_after(ms(100))
        .deescalate_after(ms(1_000))
        .build_with_clock(clock.clone())
        .unwrap();
    let at = |t: u64| {
        clock.set(Nanos::new(t * 1_000_000));
    };
    // (time in ms, busy out of 100, expected level after the report)
    let timeline: &[(u64, u64, usize)] = &[
        (0, 95, 0),
        (99, 95, 0),
        (100, 95, 1),
        (150, 95, 1),
        (199, 99, 1),
        (200, 90, 2),
        (300, 100, 3),
        (400, 100, 3), // the most critical class is never shed
        (450, 70, 3),  // between the thresholds: hold
        (500, 50, 3),  // at the low threshold: the slow hold starts
        (1_499, 10, 3),
        (1_500, 10, 2),
        (1_600, 60, 2), // a bump between the thresholds restarts the hold
        (1_700, 10, 2),
        (2_699, 10, 2),
        (2_700, 10, 1),
        (3_000, 95, 1), // high again: escalation starts over
        (3_100, 95, 2),
        (3_200, 40, 2),
        (4_200, 40, 1),
        (5_200, 40, 0),
        (9_000, 0, 0),
    ];
    for &(t, busy, level) in timeline {
        at(t);
        shedder.report(busy, 100).unwrap();
        assert_eq!(shedder.level(), level, "at {t} ms, {busy}% busy");
        let shed = shed_now(&shedder);
        let expected: Vec<bool> = (0..4).map(|i| i >= 4 - level).collect();
        assert_eq!(shed, expected, "at {t} ms");
    }
}

#[test]
fn utilisation_measured_in_flight_sheds_from_the_lowest_class() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::InFlight { capacity: 10 })
        .shed_above(0.8)
        .recover_below(0.3)
        .escalate_after(ms(10))
        .deescalate_after(ms(100))
        .build_with_clock(clock.clone())
        .unwrap();
    let critical = classes.parse("critical");
    let mut slots = Vec::new();
    for _ in 0..8 {
        slots.push(shedder.decide(&critical).into_slot().unwrap());
    }
    assert_eq!(shedder.utilisation(), 0.8);
    // Each decision reads utilisation; the hold started with the 9th request.
    assert!(shedder.decide(&classes.lowest()).is_admitted());
    clock.advance(ms(10));
    let shed = shedder.decide(&classes.lowest()).into_slot().unwrap_err();
    assert_eq!(shed.reason(), ShedReason::Utilisation);
    assert_eq!(shed.retry_after(), Some(ms(100)));
    assert!(
        shedder
            .decide(&classes.parse("sheddable_plus"))
            .is_admitted()
    );
    clock.advance(ms(10));
    assert_eq!(shed_now(&shedder), [false, false, true, true]);

    // Requests finish: 2 of 10 in flight, below 0.3.
    slots.truncate(2);
    assert_eq!(shed_now(&shedder), [false, false, true, true]);
    clock.advance(ms(100));
    assert_eq!(shed_now(&shedder), [false, false, false, true]);
    clock.advance(ms(100));
    assert_eq!(shed_now(&shedder), [false, false, false, false]);
}

#[test]
fn utilisation_never_sheds_a_class_before_every_lower_one() {
    let classes = Classes::new(["a", "b", "c", "d", "e", "f"]).unwrap();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .shed_above(0.8)
        .recover_below(0.4)
        .escalate_after(ms(3))
        .deescalate_after(ms(7))
        .build_with_clock(clock.clone())
        .unwrap();
    // A deterministic wandering load: shed classes are always a suffix of the set.
    let mut x: u64 = 12345;
    for _ in 0..5_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        clock.advance(ms(x >> 62));
        shedder.report((x >> 33) % 101, 100).unwrap();
        let shed = shed_now(&shedder);
        let first = shed.iter().position(|&s| s).unwrap_or(shed.len());
        assert!(shed[first..].iter().all(|&s| s), "{shed:?}");
        assert!(!shed[0], "the most critical class is never shed");
    }
}

#[test]
fn utilisation_bad_input_and_extremes() {
    let classes = Classes::google();
    let b = || UtilisationShedder::builder(classes.clone(), Measure::Reported);
    let clock = ManualClock::new();
    assert_eq!(
        b().escalate_after(Duration::ZERO)
            .build_with_clock(clock.clone())
            .unwrap_err(),
        ConfigError::Zero {
            parameter: "escalate_after"
        }
    );
    assert_eq!(
        b().shed_above(f64::NAN)
            .build_with_clock(clock.clone())
            .unwrap_err(),
        ConfigError::NotANumber {
            parameter: "shed_above"
        }
    );
    assert_eq!(
        b().shed_above(0.6)
            .recover_below(0.6)
            .build_with_clock(clock.clone())
            .unwrap_err(),
        ConfigError::OutOfRange {
            parameter: "recover_below",
            expected: "below shed_above"
        }
    );
    // Recovery is never quicker than escalation; as quick is allowed.
    assert_eq!(
        b().escalate_after(ms(500))
            .deescalate_after(ms(499))
            .build_with_clock(clock.clone())
            .unwrap_err(),
        ConfigError::OutOfRange {
            parameter: "deescalate_after",
            expected: "at least escalate_after"
        }
    );
    assert_eq!(
        b().escalate_after(Duration::from_secs(11))
            .build_with_clock(clock.clone())
            .unwrap_err()
            .parameter(),
        "deescalate_after",
        "the default de-escalation hold is 10 s"
    );
    assert!(
        b().escalate_after(ms(500))
            .deescalate_after(ms(500))
            .build_with_clock(clock.clone())
            .is_ok()
    );
    // Extremes of a report: a huge busy count and capacity, and the clock's end.
    let longest = b()
        .escalate_after(UtilisationBuilder::MAX_HOLD)
        .deescalate_after(UtilisationBuilder::MAX_HOLD)
        .build_with_clock(clock.clone())
        .unwrap();
    longest.report(u64::MAX, u64::MAX).unwrap();
    clock.advance(Duration::MAX);
    longest.report(u64::MAX, 1).unwrap();
    assert_eq!(longest.level(), 1);
    assert!(!longest.decide(&classes.lowest()).is_admitted());
}

// The bug: `escalate_after(Duration::MAX)` and `shed_above(f64::MAX)` were accepted,
// and the shedder then never shed.
#[test]
fn settings_that_would_never_shed_are_refused() {
    let classes = Classes::google();
    let b = || UtilisationShedder::builder(classes.clone(), Measure::Reported);
    let hour = UtilisationBuilder::MAX_HOLD;
    assert_eq!(hour, Duration::from_secs(3600));
    for too_long in [hour + Duration::from_nanos(1), Duration::MAX] {
        assert_eq!(
            b().escalate_after(too_long)
                .deescalate_after(too_long)
                .build()
                .unwrap_err(),
            ConfigError::TooLong {
                parameter: "escalate_after",
                max: hour,
                within: "a shedder's hold"
            }
        );
        assert_eq!(
            b().deescalate_after(too_long).build().unwrap_err(),
            ConfigError::TooLong {
                parameter: "deescalate_after",
                max: hour,
                within: "a shedder's hold"
            }
        );
    }
    for never in [1.0 + f64::EPSILON, 2.0, f64::MAX] {
        assert_eq!(
            b().shed_above(never).build().unwrap_err(),
            ConfigError::OutOfRange {
                parameter: "shed_above",
                expected: "within (0, 1]"
            },
            "{never}"
        );
    }
    for always in [0.0, -0.0, -1.0, f64::MIN] {
        assert_eq!(
            b().shed_above(always).build().unwrap_err().parameter(),
            "shed_above",
            "{always}"
        );
    }
    assert_eq!(
        b().shed_above(f64::NEG_INFINITY).build().unwrap_err(),
        ConfigError::Infinite {
            parameter: "shed_above"
        }
    );
    assert_eq!(
        b().recover_below(f64::INFINITY).build().unwrap_err(),
        ConfigError::Infinite {
            parameter: "recover_below"
        }
    );
}

// The longest settings accepted still shed: fully busy for an hour, the least
// critical class goes.
#[test]
fn the_longest_hold_and_highest_threshold_still_shed() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::InFlight { capacity: 2 })
        .shed_above(1.0)
        .recover_below(0.5)
        .escalate_after(UtilisationBuilder::MAX_HOLD)
        .deescalate_after(UtilisationBuilder::MAX_HOLD)
        .build_with_clock(clock.clone())
        .unwrap();
    let _held = [
        shedder.decide(&classes.highest()),
        shedder.decide(&classes.highest()),
    ];
    assert!(shedder.decide(&classes.lowest()).is_admitted());
    clock.advance(UtilisationBuilder::MAX_HOLD);
    assert!(!shedder.decide(&classes.lowest()).is_admitted());
    assert_eq!(shedder.level(), 1);
}

#[test]
fn fleet_bad_input_is_typed() {
    let classes = Classes::google();
    assert_eq!(
        FleetShedder::new(classes.clone(), 100, f64::NAN).unwrap_err(),
        ConfigError::NotANumber {
            parameter: "reserved"
        }
    );
    for bad in [-0.01, 1.01, f64::INFINITY] {
        assert_eq!(
            FleetShedder::new(classes.clone(), 100, bad)
                .unwrap_err()
                .parameter(),
            "reserved"
        );
    }
    assert!(Classes::new(Vec::<String>::new()).is_err());
    assert!(Classes::new(["critical", "Critical"]).is_err());
    // The extremes decide.
    let huge = FleetShedder::new(classes.clone(), u64::MAX, 1.0).unwrap();
    assert_eq!(huge.shared_limit(), 0);
    assert!(!huge.decide(&classes.lowest()).is_admitted());
    assert!(huge.decide(&classes.highest()).is_admitted());
}

// ---- Modes and events ----------------------------------------------------------

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(String, EventKind)>>>);

impl Log {
    fn attach(&self, events: &Events) -> tollgate::observe::Subscription {
        let log = self.clone();
        events.subscribe(move |event: &Event<'_>| {
            log.0
                .lock()
                .unwrap()
                .push((event.key.unwrap_or("").to_owned(), event.kind));
        })
    }

    fn take(&self) -> Vec<(String, EventKind)> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

#[test]
fn shadow_mode_sheds_nothing_and_reports_what_it_would_have() {
    let classes = Classes::google();
    let switch = ModeSwitch::new(Mode::Shadow);
    let events = Events::new("fleet");
    let log = Log::default();
    let _subscription = log.attach(&events);
    // 3 in flight at most, 2 of them reserved.
    let fleet = FleetShedder::new(classes.clone(), 3, 0.5)
        .unwrap()
        .with_mode(switch.clone())
        .with_events(events);
    let low = classes.lowest();

    let a = fleet.decide(&low);
    let b = fleet.decide(&low);
    let c = fleet.decide(&classes.highest());
    assert!(matches!(a, ShedDecision::Admit(_)));
    assert!(matches!(b, ShedDecision::WouldShed { .. }));
    assert!(matches!(c, ShedDecision::Admit(_)));
    let d = fleet.decide(&classes.highest());
    assert!(d.is_admitted() && d.would_shed());
    assert_eq!(d.shed().map(|s| s.reason()), Some(ShedReason::Full));
    assert_eq!(fleet.in_flight(), 4, "shadow-admitted requests still count");
    assert_eq!(
        log.take(),
        [
            ("sheddable".to_owned(), EventKind::Admitted),
            ("sheddable".to_owned(), EventKind::WouldShed),
            ("critical_plus".to_owned(), EventKind::Admitted),
            ("critical_plus".to_owned(), EventKind::WouldShed),
        ]
    );

    // Enforcing: refused, with a `Denied { Shed }` event.
    switch.set(Mode::Enforce);
    assert!(!fleet.decide(&low).is_admitted());
    // The kill switch: everything admitted, nothing reported as shed.
    switch.set(Mode::Off);
    let e = fleet.decide(&low);
    assert!(matches!(e, ShedDecision::Admit(_)));
    assert_eq!(
        log.take(),
        [
            (
                "sheddable".to_owned(),
                EventKind::Denied {
                    reason: DenyReason::Shed,
                    retry_after: None
                }
            ),
            ("sheddable".to_owned(), EventKind::Admitted),
        ]
    );
    drop((a, b, c, d, e));
    assert_eq!(fleet.in_flight(), 0);
}

#[test]
fn one_switch_turns_every_shedder_off() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let switch = ModeSwitch::default();
    let events = Events::new("utilisation");
    let log = Log::default();
    let _subscription = log.attach(&events);
    let utilisation = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .escalate_after(ms(1))
        .build_with_clock(clock.clone())
        .unwrap()
        .with_mode(switch.clone())
        .with_events(events);
    let fleet = FleetShedder::new(classes.clone(), 1, 1.0)
        .unwrap()
        .with_mode(switch.clone());
    let readings = ManualReadings::new();
    readings.set_cpu_usage(1.0);
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let system = SystemProtection::with_clock(classes.clone(), rule, readings, clock.clone())
        .with_mode(switch.clone());
    utilisation.report(100, 100).unwrap();
    clock.advance(ms(1));
    utilisation.report(100, 100).unwrap();
    let low = classes.lowest();
    assert!(!utilisation.decide(&low).is_admitted());
    assert!(!fleet.decide(&low).is_admitted());
    assert!(!system.decide(&low).is_admitted());

    switch.set(Mode::Shadow);
    let would = utilisation.decide(&low);
    assert!(would.is_admitted() && would.would_shed());
    drop(would);

    switch.set(Mode::Off);
    assert!(matches!(utilisation.decide(&low), ShedDecision::Admit(_)));
    assert!(matches!(fleet.decide(&low), ShedDecision::Admit(_)));
    assert!(matches!(system.decide(&low), ShedDecision::Admit(_)));
    assert_eq!(
        utilisation.level(),
        1,
        "the level is still tracked while off"
    );

    let retry_after = Some(Duration::from_secs(10)); // the default de-escalation hold
    assert_eq!(
        log.take(),
        [
            (
                "sheddable".to_owned(),
                EventKind::Denied {
                    reason: DenyReason::Shed,
                    retry_after
                }
            ),
            ("sheddable".to_owned(), EventKind::WouldShed),
            ("sheddable".to_owned(), EventKind::Admitted),
        ]
    );
}

// ---- A 12× surge of the least critical class -----------------------------------

/// Per-class counts from a simulated run.
#[derive(Debug, Default)]
struct Counts {
    arrived: u64,
    served: u64,
    shed: u64,
    /// Admitted by the shedder but refused by the saturated service.
    failed: u64,
}

impl Counts {
    fn availability(&self) -> f64 {
        self.served as f64 / self.arrived as f64
    }
}

/// A service running at most `CAPACITY` requests at once, each for `SERVICE` ms; a
/// request that finds it full fails. Per millisecond, `CRITICAL_RATE` critical requests
/// arrive and `SHEDDABLE_RATE` sheddable ones (12 times as many during `SURGE`), spread
/// evenly over the millisecond; the clock is moved to each arrival.
const CAPACITY: usize = 100;
const SERVICE: u64 = 10;
const CRITICAL_RATE: u64 = 1;
const SHEDDABLE_RATE: u64 = 5;
const TICKS: u64 = 12_000;
const SURGE: std::ops::Range<u64> = 1_000..11_000;

fn simulate<S: Shedder>(shedder: &S, clock: &ManualClock) -> (Counts, Counts) {
    const US: u64 = 1_000;
    let classes = shedder.classes().clone();
    let critical = classes.parse("critical");
    let sheddable = classes.parse("sheddable");
    let (mut crit, mut shed) = (Counts::default(), Counts::default());
    let mut running: VecDeque<(Nanos, S::Slot)> = VecDeque::new();
    for tick in 0..TICKS {
        let rate = if SURGE.contains(&tick) {
            12 * SHEDDABLE_RATE
        } else {
            SHEDDABLE_RATE
        };
        // (offset in µs within the millisecond, class), in time order.
        let mut arrivals: Vec<(u64, &Class)> = (0..rate)
            .map(|i| (i * 1_000 / rate, &sheddable))
            .chain((0..CRITICAL_RATE).map(|i| (i * 1_000 / CRITICAL_RATE + 500, &critical)))
            .collect();
        arrivals.sort_by_key(|(offset, _)| *offset);
        for (offset, class) in arrivals {
            let now = Nanos::new((tick * 1_000 + offset) * US);
            clock.set(now);
            while running.front().is_some_and(|(end, _)| *end <= now) {
                running.pop_front();
            }
            let counts = if *class == critical {
                &mut crit
            } else {
                &mut shed
            };
            counts.arrived += 1;
            match shedder.decide(class).into_slot() {
                Err(_) => counts.shed += 1,
                Ok(_) if running.len() >= CAPACITY => counts.failed += 1,
                Ok(slot) => {
                    counts.served += 1;
                    running.push_back((now + ms(SERVICE), slot));
                }
            }
        }
    }
    (crit, shed)
}

#[test]
fn without_shedding_the_surge_starves_critical_work() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let off = FleetShedder::new(classes, CAPACITY as u64, 0.2)
        .unwrap()
        .with_mode(ModeSwitch::new(Mode::Off));
    let (critical, _) = simulate(&off, &clock);
    println!("no shedding: critical {critical:?}");
    assert!(critical.availability() < 0.5, "{critical:?}");
}

#[test]
fn a_12x_surge_keeps_critical_available_with_the_fleet_shedder() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let fleet = FleetShedder::new(classes, CAPACITY as u64, 0.2).unwrap();
    let (critical, sheddable) = simulate(&fleet, &clock);
    println!("fleet: critical {critical:?}, sheddable {sheddable:?}");
    assert!(critical.availability() >= 0.994, "{critical:?}");
    assert_eq!(critical.arrived, TICKS * CRITICAL_RATE);
    assert!(sheddable.shed > 0);
}

#[test]
fn a_12x_surge_keeps_critical_available_with_the_utilisation_shedder() {
    let classes = Classes::google();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(
        classes,
        Measure::InFlight {
            capacity: CAPACITY as u64,
        },
    )
    .shed_above(0.8)
    .recover_below(0.5)
    .escalate_after(ms(SERVICE))
    .deescalate_after(Duration::from_secs(5))
    .build_with_clock(clock.clone())
    .unwrap();
    let (critical, sheddable) = simulate(&shedder, &clock);
    println!("utilisation: critical {critical:?}, sheddable {sheddable:?}");
    assert!(critical.availability() >= 0.994, "{critical:?}");
    assert_eq!(
        critical.shed, 0,
        "critical is shed only after both lower classes"
    );
    assert!(sheddable.shed > 0);
}

// ---- Why, in events and metrics ----------------------------------------------------

/// Every shedder's refusals carry their reason as the event's detail: reserved,
/// full, utilisation and a system threshold are told apart, and shadow mode's
/// would-be refusals too.
#[test]
fn events_carry_the_shed_reason_as_their_detail() {
    type Log = Vec<(EventKind, Option<&'static str>)>;
    let log: Arc<Mutex<Log>> = Arc::default();
    let events = Events::new("shed");
    let sink = Arc::clone(&log);
    let _subscription = events.subscribe(move |event: &Event<'_>| {
        sink.lock().unwrap().push((event.kind, event.detail));
    });
    let classes = Classes::google();
    let (low, high) = (classes.lowest(), classes.highest());

    let fleet = FleetShedder::new(classes.clone(), 1, 0.0)
        .unwrap()
        .with_events(events.clone());
    let held = fleet.decide(&low);
    let _ = fleet.decide(&low); // full
    drop(held);
    let reserved = FleetShedder::new(classes.clone(), 1, 1.0)
        .unwrap()
        .with_events(events.clone());
    let _ = reserved.decide(&low);
    let shadow = FleetShedder::new(classes.clone(), 1, 1.0)
        .unwrap()
        .with_mode(ModeSwitch::new(Mode::Shadow))
        .with_events(events.clone());
    let _ = shadow.decide(&low);

    let clock = ManualClock::new();
    let utilisation = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .escalate_after(ms(10))
        .build_with_clock(clock.clone())
        .unwrap()
        .with_events(events.clone());
    utilisation.report(95, 100).unwrap();
    clock.advance(ms(10));
    utilisation.report(95, 100).unwrap();
    let _ = utilisation.decide(&low);

    let readings = ManualReadings::new();
    readings.set_cpu_usage(0.9);
    let rule = SystemRule::builder()
        .highest_cpu_usage(0.5)
        .build()
        .unwrap();
    let system = SystemProtection::with_clock(classes.clone(), rule, readings, clock.clone())
        .with_events(events.clone());
    let _ = system.decide(&high);

    let shed = EventKind::Denied {
        reason: DenyReason::Shed,
        retry_after: None,
    };
    let seen = log.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (EventKind::Admitted, None),
            (shed, Some("full")),
            (shed, Some("reserved")),
            (EventKind::WouldShed, Some("reserved")),
            (
                EventKind::Denied {
                    reason: DenyReason::Shed,
                    retry_after: Some(ms(10_000)),
                },
                Some("utilisation")
            ),
            (shed, Some("system_cpu")),
        ]
    );
}

#[cfg(feature = "metrics")]
#[test]
fn metrics_count_refusals_by_shed_reason_per_class() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use tollgate::observe::MetricsRecorder;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let classes = Classes::google();
    let events = Events::new("shed");
    let _metrics = metrics::with_local_recorder(&recorder, || {
        events.subscribe(MetricsRecorder::with_keys("shed", classes.names()))
    });
    let (low, high) = (classes.lowest(), classes.highest());
    let fleet = FleetShedder::new(classes.clone(), 2, 0.5)
        .unwrap()
        .with_events(events.clone());
    let _held = (fleet.decide(&low), fleet.decide(&high));
    let _ = fleet.decide(&low); // reserved
    let _ = fleet.decide(&low); // reserved
    let _ = fleet.decide(&high); // full
    let shadow = FleetShedder::new(classes.clone(), 1, 1.0)
        .unwrap()
        .with_mode(ModeSwitch::new(Mode::Shadow))
        .with_events(events.clone());
    let _would = shadow.decide(&low);

    type Labels = Vec<(String, String)>;
    let counters: Vec<(String, Labels, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let DebugValue::Counter(n) = value else {
                return None;
            };
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            Some((key.name().to_owned(), labels, n))
        })
        .collect();
    let count = |name: &str, class: &str, reason: &str| -> Option<u64> {
        let want = [
            ("key".to_owned(), class.to_owned()),
            ("limiter".to_owned(), "shed".to_owned()),
            ("reason".to_owned(), reason.to_owned()),
        ];
        counters
            .iter()
            .find(|(n, labels, _)| n == name && labels[..] == want[..])
            .map(|(_, _, value)| *value)
    };
    assert_eq!(
        count("tollgate_shed_total", "sheddable", "reserved"),
        Some(2)
    );
    assert_eq!(count("tollgate_shed_total", "sheddable", "full"), Some(0));
    assert_eq!(
        count("tollgate_shed_total", "critical_plus", "full"),
        Some(1)
    );
    assert_eq!(
        count(
            "tollgate_would_shed_by_reason_total",
            "sheddable",
            "reserved"
        ),
        Some(1)
    );
    assert_eq!(count("tollgate_denied_total", "sheddable", "shed"), Some(2));
    // One series per known reason: the label stays bounded.
    let reasons = counters
        .iter()
        .filter(|(n, labels, _)| {
            n == "tollgate_shed_total" && labels.iter().all(|(k, _)| k != "key")
        })
        .count();
    assert_eq!(reasons, ShedReason::ALL.len());
}

// ---- Fed by an adaptive limiter ------------------------------------------------------

/// The utilisation shedder fed an adaptive limiter's in-flight count over its limit:
/// as the limit fills, it sheds the least critical class after the hold, and as
/// permits come back, it recovers after the longer one.
#[cfg(feature = "adaptive")]
#[test]
fn utilisation_fed_by_an_adaptive_limiter_sheds_as_its_limit_fills() {
    use tollgate::adaptive::limit::AimdLimit;
    use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};

    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(20)
        .max_limit(20)
        .build()
        .unwrap();
    let limiter =
        Arc::new(AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap());
    let classes = Classes::google();
    let shedder = UtilisationShedder::builder(classes.clone(), Measure::Reported)
        .shed_above(0.9)
        .recover_below(0.5)
        .escalate_after(ms(100))
        .deescalate_after(ms(1_000))
        .build_with_clock(clock.clone())
        .unwrap();
    let low = classes.lowest();

    let mut permits: Vec<_> = (0..17).map(|_| limiter.try_acquire().unwrap()).collect();
    shedder.report_adaptive(&limiter).unwrap();
    assert_eq!(shedder.utilisation(), 17.0 / 20.0);
    assert!(shedder.decide(&low).is_admitted(), "below 0.9");

    permits.extend((0..2).map(|_| limiter.try_acquire().unwrap()));
    shedder.report_adaptive(&limiter).unwrap(); // 19 of 20: the hold starts
    clock.advance(ms(100));
    shedder.report_adaptive(&limiter).unwrap();
    assert_eq!(shedder.level(), 1);
    assert!(!shedder.decide(&low).is_admitted());
    assert!(
        shedder
            .decide(&classes.parse("sheddable_plus"))
            .is_admitted()
    );

    // Permits back: at or below half the limit, one class back after the slow hold.
    for permit in permits.drain(..10) {
        permit.ignore();
    }
    assert_eq!(limiter.inflight(), 9);
    shedder.report_adaptive(&limiter).unwrap();
    clock.advance(ms(999));
    shedder.report_adaptive(&limiter).unwrap();
    assert_eq!(shedder.level(), 1);
    clock.advance(ms(1));
    shedder.report_adaptive(&limiter).unwrap();
    assert_eq!(shedder.level(), 0);
    assert!(shedder.decide(&low).is_admitted());

    // A shedder counting in flight for itself takes no reports.
    let counting = UtilisationShedder::builder(classes, Measure::InFlight { capacity: 10 })
        .build()
        .unwrap();
    assert_eq!(
        counting.report_adaptive(&limiter).unwrap_err().parameter(),
        "measure"
    );
}

// ---- A class of another set -----------------------------------------------------

// The bug: a class was known by its index alone, so Google's `critical` (index 1)
// given to a fleet over ["critical", "sheddable"] was that set's `sheddable`, and was
// refused the reserve.
#[test]
fn a_fleet_reads_a_class_of_another_set_by_its_name() {
    let google = Classes::google();
    let mine = Classes::new(["critical", "sheddable"]).unwrap();
    let fleet = FleetShedder::new(mine.clone(), 2, 0.5).unwrap();
    let _shared = fleet.decide(&mine.parse("sheddable")).into_slot().unwrap();
    assert!(fleet.is_critical(&google.parse("critical")));
    let critical = fleet.decide(&google.parse("critical"));
    assert!(critical.is_admitted(), "{critical:?}");
    drop(critical);
    // `sheddable_plus` is no name of the fleet's set: its default class, `sheddable`,
    // which the reserve is not for.
    let refused = fleet.decide(&google.parse("sheddable_plus"));
    let shed = refused.shed().expect("the shared slot is taken");
    assert_eq!(shed.reason(), ShedReason::Reserved);
    assert_eq!(shed.class(), &mine.parse("sheddable"));
}

// The bug: Google's `sheddable` (index 3) given to a utilisation shedder over two
// classes was past the end of its set, and shed even at level 0.
#[test]
fn a_utilisation_shedder_reads_a_class_of_another_set_by_its_name() {
    let google = Classes::google();
    let mine = Classes::new(["interactive", "batch"]).unwrap();
    let clock = ManualClock::new();
    let shedder = UtilisationShedder::builder(mine.clone(), Measure::Reported)
        .escalate_after(ms(10))
        .deescalate_after(ms(10))
        .build_with_clock(clock.clone())
        .unwrap();
    assert_eq!(shedder.level(), 0);
    let decision = shedder.decide(&google.lowest());
    assert!(!decision.would_shed(), "{decision:?}");
    // At level 1, the foreign class is the set's default class, `batch`, and shed
    // as it; a name the set has keeps its rank.
    shedder.report(1, 1).unwrap();
    clock.advance(ms(10));
    shedder.report(1, 1).unwrap();
    assert_eq!(shedder.level(), 1);
    let shed = shedder.decide(&google.highest()).into_slot().unwrap_err();
    assert_eq!(shed.class(), &mine.parse("batch"));
    let by_name = Classes::new(["batch", "interactive"]).unwrap().lowest();
    assert!(shedder.decide(&by_name).is_admitted());
}

// The bug: two classes of different sets were equal when their indexes were.
#[test]
fn classes_are_equal_only_within_one_set() {
    let google = Classes::google();
    let other = Classes::new(["a", "b", "c", "d"]).unwrap();
    assert_ne!(google.highest(), other.highest());
    assert_ne!(
        google.highest().cmp(&other.highest()),
        std::cmp::Ordering::Equal
    );
    assert!(google.highest() > other.lowest());
    // One set: clones, another default, and another call of `google`.
    let same = Classes::google().with_default("sheddable").unwrap();
    assert_eq!(google.highest(), same.highest());
    assert!(google.contains(&same.lowest()));
    assert!(!google.contains(&other.lowest()));
    assert_eq!(google.resolve(&other.lowest()), google.default_class());
}
