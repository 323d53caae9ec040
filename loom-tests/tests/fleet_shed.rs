//! The fleet shedder's count: racing requests never take more than their class's
//! limit, and slots dropped on other threads all come back.
#![cfg(loom)]

use loom::thread;
use tollgate::shed::{Classes, FleetShedder, Shedder};

/// Two non-critical requests race for the last shared slot while a critical one
/// comes in: the critical one always gets a slot, and at most one of the two
/// non-critical ones does (none if the critical one took the shared slot first).
#[test]
fn racing_requests_take_no_more_than_their_limits() {
    loom::model(|| {
        let classes = Classes::google();
        // 4 slots, 1 reserved: 3 shared, of which two are taken.
        let fleet = FleetShedder::new(classes.clone(), 4, 0.25).unwrap();
        let held: Vec<_> = (0..2)
            .map(|_| fleet.decide(&classes.lowest()).into_slot().unwrap())
            .collect();
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
        assert!(won.len() <= 1);
        assert_eq!(fleet.in_flight(), 3 + won.len() as u64);
        drop((held, won, critical));
        assert_eq!(fleet.in_flight(), 0);
    });
}
