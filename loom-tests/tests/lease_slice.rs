//! A lease's slice: two threads admitting from it while its holder empties it never
//! admit more than it held, and the holder gets back exactly what they did not take.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::store::LoomSlice;

/// A slice of 3 permits: two threads each take 2 while the holder drains it. At most
/// one take succeeds, and the permits taken plus those drained are the 3 installed.
#[test]
fn takers_and_the_drain_share_the_slice_exactly() {
    loom::model(|| {
        let slice = Arc::new(LoomSlice::new());
        assert_eq!(slice.install(3, u64::MAX), 0);
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let slice = Arc::clone(&slice);
                thread::spawn(move || slice.take(2, 0).map_or(0, |_| 2))
            })
            .collect();
        let drained = slice.drain();
        let taken: u64 = takers.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(taken <= 2, "two takes of 2 from a slice of 3");
        assert_eq!(taken + drained, 3);
    });
}
