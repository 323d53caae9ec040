//! Partitioned admission: acquisitions from several partitions at once never push
//! in-flight past what the mode allows (upstream's check-then-act does,
//! concurrency-limits#234), and releases restore the counts exactly.
#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tollgate::adaptive::partition::{OwnedPartitionPermit, PartitionMode, Partitions};

fn partitions(mode: PartitionMode, limit: u64, shares: &[(&str, f64)]) -> Arc<Partitions> {
    let builder = shares.iter().fold(
        Partitions::builder(limit).mode(mode),
        |builder, &(name, share)| builder.partition(name, share),
    );
    Arc::new(builder.build().unwrap())
}

/// Each name tried once on a thread of its own; the permits admitted.
fn race(partitions: &Arc<Partitions>, names: &[&'static str]) -> Vec<OwnedPartitionPermit> {
    let threads: Vec<_> = names
        .iter()
        .map(|&name| {
            let partitions = Arc::clone(partitions);
            thread::spawn(move || partitions.try_acquire_owned(name).ok())
        })
        .collect();
    threads
        .into_iter()
        .filter_map(|thread| thread.join().unwrap())
        .collect()
}

/// Strict: three threads, a partition bursting and the unknown partition, against a
/// limit of 2: never more than 2 in flight, at any admission or after.
#[test]
fn strict_concurrent_acquires_never_pass_the_limit() {
    loom::model(|| {
        let partitions = partitions(PartitionMode::Strict, 2, &[("a", 0.5)]);
        let admitted = race(&partitions, &["a", "a", "unknown"]);
        assert_eq!(admitted.len(), 2);
        assert!(admitted.iter().all(|permit| permit.in_flight() <= 2));
        assert_eq!(partitions.in_flight(), 2);
    });
}

/// Strict: two unknown requests race a partition for its guaranteed share; they
/// cannot burst into it, so the partition is admitted whatever the order.
#[test]
fn strict_bursts_never_take_a_guaranteed_share() {
    loom::model(|| {
        let partitions = partitions(PartitionMode::Strict, 2, &[("a", 0.5)]);
        let admitted = race(&partitions, &["unknown", "unknown", "a"]);
        assert_eq!(admitted.len(), 2);
        assert_eq!(partitions.partition_in_flight("a"), 1);
        assert_eq!(partitions.partition_in_flight("unknown"), 1);
    });
}

/// NetflixCompatible: with the limit of 2 already full, partitions a and b (1 each)
/// race for their shares: each gets exactly its own, 4 in flight, which is the
/// documented bound.
#[test]
fn netflix_excess_stays_within_the_shares() {
    loom::model(|| {
        let partitions = partitions(
            PartitionMode::NetflixCompatible,
            2,
            &[("a", 0.5), ("b", 0.5)],
        );
        let _full = (
            partitions.try_acquire_owned("unknown").unwrap(),
            partitions.try_acquire_owned("unknown").unwrap(),
        );
        let admitted = race(&partitions, &["a", "b", "a"]);
        let bound = partitions.in_flight_bound();
        assert_eq!(bound, 4);
        assert!(admitted.iter().all(|permit| permit.in_flight() <= bound));
        assert_eq!(partitions.in_flight(), 4);
        assert_eq!(partitions.partition_in_flight("a"), 1);
        assert_eq!(partitions.partition_in_flight("b"), 1);
    });
}

/// Releases on two threads race an acquisition on a third: once every permit is
/// dropped, every count is back to zero.
#[test]
fn releases_racing_an_acquire_restore_the_counts() {
    loom::model(|| {
        let partitions = partitions(
            PartitionMode::NetflixCompatible,
            2,
            &[("a", 0.5), ("b", 0.5)],
        );
        let first = partitions.try_acquire_owned("a").unwrap();
        let second = partitions.try_acquire_owned("unknown").unwrap();
        let droppers = [
            thread::spawn(move || drop(first)),
            thread::spawn(move || second.release()),
        ];
        let taker = {
            let partitions = Arc::clone(&partitions);
            thread::spawn(move || partitions.try_acquire_owned("b").ok())
        };
        for dropper in droppers {
            dropper.join().unwrap();
        }
        // b is within its share: admitted whatever the global count was.
        let taken = taker.join().unwrap().expect("b admitted");
        assert_eq!(partitions.in_flight(), 1);
        drop(taken);
        assert_eq!(partitions.in_flight(), 0);
        for name in ["a", "b", "unknown"] {
            assert_eq!(partitions.partition_in_flight(name), 0);
        }
    });
}
