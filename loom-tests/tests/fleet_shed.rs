//! The fleet shedder's count: racing requests never take more than their class's
//! limit, and slots dropped on other threads all come back.
#![cfg(loom)]

use loom::thread;
use tollgate::shed::{Classes, FleetShedder, Shedder};

/// Two non-critical requests race for the last shared slot while a critical one
/// takes from the reserve: exactly one of the two wins, the critical one always does.
#[test]
fn racing_requests_take_no_more_than_their_limits() {
    loom::model(|| {
        let classes = Classes::google();
        // 3 slots, 1 reserved: 2 shared, of which one is taken.
        let fleet = FleetShedder::new(classes.clone(), 3, 0.34).unwrap();
        let held = fleet.decide(&classes.lowest()).into_slot().unwrap();
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let fleet = fleet.clone();
                let low = classes.lowest();
                thread::spawn(move || fleet.decide(&low).into_slot().ok())
            })
            .collect();
        let critical = fleet.decide(&classes.highest()).into_slot();
        let won: Vec<_> = racers
            .into_iter()
            .filter_map(|racer| racer.join().unwrap())
            .collect();
        assert!(critical.is_ok());
        assert_eq!(won.len(), 1);
        assert_eq!(fleet.in_flight(), 3);
        drop((held, won, critical));
        assert_eq!(fleet.in_flight(), 0);
    });
}
