//! Netflix's `AbstractPartitionedLimiterTest`, same inputs and expected numbers, in
//! `NetflixCompatible` mode; each followed by its `Strict` counterpart. (Upstream's
//! `testConcurrentPartitions` is `tests/partition_stress.rs`; `testBypassSimpleLimiter`
//! tests the unpartitioned limiter.)

use super::*;

const BATCH_LIVE: &[(&str, f64)] = &[("batch", 0.3), ("live", 0.7)];

fn build(mode: PartitionMode, limit: u64, partitions: &[(&str, f64)]) -> Partitions {
    partitions
        .iter()
        .fold(
            Partitions::builder(limit).mode(mode),
            |builder, &(name, share)| builder.partition(name, share),
        )
        .build()
        .unwrap()
}

fn netflix(limit: u64, partitions: &[(&str, f64)]) -> Partitions {
    build(PartitionMode::NetflixCompatible, limit, partitions)
}

fn strict(limit: u64, partitions: &[(&str, f64)]) -> Partitions {
    build(PartitionMode::Strict, limit, partitions)
}

/// Acquires `n` permits of `partition`, asserting each is admitted and the
/// partition's count after it.
fn take<'a>(partitions: &'a Partitions, partition: &str, n: u64) -> Vec<PartitionPermit<'a>> {
    let before = partitions.partition_in_flight(partition);
    (1..=n)
        .map(|i| {
            let permit = partitions.try_acquire(partition).unwrap();
            assert_eq!(partitions.partition_in_flight(partition), before + i);
            permit
        })
        .collect()
}

#[test]
fn limit_allocated_to_bins() {
    for mode in [PartitionMode::NetflixCompatible, PartitionMode::Strict] {
        let partitions = build(mode, 10, BATCH_LIVE);
        assert_eq!(partitions.partition_limit("batch"), 3);
        assert_eq!(partitions.partition_limit("live"), 7);
    }
}

#[test]
fn use_excess_capacity_until_total_limit() {
    let partitions = netflix(10, BATCH_LIVE);
    let _batch = take(&partitions, "batch", 10);
    assert!(partitions.try_acquire("batch").is_err());
}

#[test]
fn strict_bursts_only_into_capacity_no_partition_reserved() {
    // Live's 7 are reserved while it is idle: batch stops at its own 3.
    let partitions = strict(10, BATCH_LIVE);
    let _batch = take(&partitions, "batch", 3);
    assert!(partitions.try_acquire("batch").unwrap_err().is_reserved());

    // With 2 of the 10 unshared, batch bursts into those 2, and live keeps its 5.
    let partitions = strict(10, &[("batch", 0.3), ("live", 0.5)]);
    let _batch = take(&partitions, "batch", 5);
    assert!(partitions.try_acquire("batch").unwrap_err().is_reserved());
    let _live = take(&partitions, "live", 5);
    assert_eq!(partitions.in_flight(), 10);
    for name in ["batch", "live"] {
        assert!(!partitions.try_acquire(name).unwrap_err().is_reserved());
    }
}

#[test]
fn exceed_total_limit_for_unused_bin() {
    let partitions = netflix(10, BATCH_LIVE);
    let _batch = take(&partitions, "batch", 10);
    assert!(partitions.try_acquire("batch").is_err());
    let _live = take(&partitions, "live", 7);
    assert!(partitions.try_acquire("live").is_err());
    assert_eq!(partitions.in_flight(), 17);
}

#[test]
fn strict_honours_an_unused_bin_without_exceeding_the_limit() {
    let partitions = strict(10, BATCH_LIVE);
    let _batch = take(&partitions, "batch", 3);
    assert!(partitions.try_acquire("batch").is_err());
    let _live = take(&partitions, "live", 7);
    assert!(partitions.try_acquire("live").is_err());
    assert_eq!(partitions.in_flight(), 10);
}

#[test]
fn reject_once_all_limits_reached() {
    for mode in [PartitionMode::NetflixCompatible, PartitionMode::Strict] {
        let partitions = build(mode, 10, BATCH_LIVE);
        let mut held = Vec::new();
        for i in 0..3 {
            held.push(partitions.try_acquire("batch").unwrap());
            assert_eq!(partitions.partition_in_flight("batch"), i + 1);
            assert_eq!(partitions.in_flight(), i + 1);
        }
        for i in 0..7 {
            held.push(partitions.try_acquire("live").unwrap());
            assert_eq!(partitions.partition_in_flight("live"), i + 1);
            assert_eq!(partitions.in_flight(), i + 4);
        }
        for name in ["batch", "live"] {
            let denied = partitions.try_acquire(name).unwrap_err();
            assert!(!denied.is_reserved(), "{mode:?}");
            assert_eq!((denied.in_flight(), denied.limit()), (10, 10));
        }
    }
}

#[test]
fn release_limit() {
    let partitions = netflix(10, BATCH_LIVE);
    let completion = partitions.try_acquire("batch").unwrap();
    let _batch = take(&partitions, "batch", 9);
    assert_eq!(partitions.partition_in_flight("batch"), 10);
    assert_eq!(partitions.in_flight(), 10);
    assert!(partitions.try_acquire("batch").is_err());

    completion.release();
    assert_eq!(partitions.partition_in_flight("batch"), 9);
    assert_eq!(partitions.in_flight(), 9);

    let _again = partitions.try_acquire("batch").unwrap();
    assert_eq!(partitions.partition_in_flight("batch"), 10);
    assert_eq!(partitions.in_flight(), 10);
}

#[test]
fn strict_release_limit() {
    let partitions = strict(10, BATCH_LIVE);
    let completion = partitions.try_acquire("batch").unwrap();
    let _batch = take(&partitions, "batch", 2);
    assert!(partitions.try_acquire("batch").is_err());

    completion.release();
    assert_eq!(partitions.partition_in_flight("batch"), 2);
    assert_eq!(partitions.in_flight(), 2);

    let _again = partitions.try_acquire("batch").unwrap();
    assert_eq!(partitions.partition_in_flight("batch"), 3);
    assert_eq!(partitions.in_flight(), 3);
}

#[test]
fn set_limit_reserves_busy() {
    for mode in [PartitionMode::NetflixCompatible, PartitionMode::Strict] {
        let partitions = build(mode, 10, BATCH_LIVE);
        partitions.set_limit(10).unwrap();
        assert_eq!(partitions.partition_limit("batch"), 3);
        let _batch = partitions.try_acquire("batch").unwrap();
        assert_eq!(partitions.partition_in_flight("batch"), 1);
        assert_eq!(partitions.in_flight(), 1);

        partitions.set_limit(20).unwrap();
        assert_eq!(partitions.partition_limit("batch"), 6);
        assert_eq!(partitions.partition_in_flight("batch"), 1);
        assert_eq!(partitions.in_flight(), 1);
    }
}

/// Upstream's `ShouldBypassPredicate` in front of the core, as the wrapping limiter
/// would put it.
fn acquire_or_bypass<'a>(
    partitions: &'a Partitions,
    context: &str,
) -> Result<PartitionPermit<'a>, PartitionDenied> {
    if context.contains("admin") {
        Ok(partitions.bypass())
    } else {
        partitions.try_acquire(context)
    }
}

#[test]
fn bypass_partitioned_limiter() {
    for mode in [PartitionMode::NetflixCompatible, PartitionMode::Strict] {
        let partitions = build(mode, 10, &[("batch", 0.1), ("live", 0.9)]);
        let mut held = vec![acquire_or_bypass(&partitions, "batch").unwrap()];
        assert_eq!(partitions.partition_in_flight("batch"), 1);
        held.push(acquire_or_bypass(&partitions, "admin").unwrap());

        for i in 0..9 {
            held.push(acquire_or_bypass(&partitions, "live").unwrap());
            assert_eq!(partitions.partition_in_flight("live"), i + 1);
            held.push(acquire_or_bypass(&partitions, "admin").unwrap());
        }

        // Bypassed requests proceed even when the limiter is full.
        assert!(acquire_or_bypass(&partitions, "batch").is_err());
        assert_eq!(partitions.partition_in_flight("batch"), 1);
        assert!(acquire_or_bypass(&partitions, "live").is_err());
        assert_eq!(partitions.partition_in_flight("live"), 9);
        assert_eq!(partitions.in_flight(), 10);
        assert!(acquire_or_bypass(&partitions, "admin").unwrap().is_bypass());

        drop(held);
        assert_eq!(partitions.in_flight(), 0);
    }
}

#[test]
fn netflix_excess_reaches_exactly_the_documented_bound() {
    // Unknown requests fill the limit; each partition then takes its own limit.
    let partitions = netflix(10, BATCH_LIVE);
    assert_eq!(partitions.in_flight_bound(), 20);
    let _unknown = take(&partitions, "unknown", 10);
    assert!(partitions.try_acquire("unknown").is_err());
    let _batch = take(&partitions, "batch", 3);
    let _live = take(&partitions, "live", 7);
    assert_eq!(partitions.in_flight(), 20);
    for name in ["batch", "live", "other"] {
        assert!(partitions.try_acquire(name).is_err());
    }
}

#[test]
fn unknown_partitions_only_burst() {
    let partitions = netflix(10, BATCH_LIVE);
    assert_eq!(partitions.partition_limit("nope"), 0);
    let _live = take(&partitions, "live", 7);
    let _unknown = take(&partitions, "nope", 3);
    assert!(partitions.try_acquire("nope").is_err());

    // Strict: only unreserved room, so none here, and 2 with 80% shared.
    let partitions = strict(10, BATCH_LIVE);
    assert!(partitions.try_acquire("nope").unwrap_err().is_reserved());
    let partitions = strict(10, &[("batch", 0.3), ("live", 0.5)]);
    let _unknown = take(&partitions, "nope", 2);
    assert!(partitions.try_acquire("nope").unwrap_err().is_reserved());
    // Both partitions still get their whole shares.
    let _batch = take(&partitions, "batch", 3);
    let _live = take(&partitions, "live", 5);
    assert_eq!(partitions.in_flight(), 10);
}

#[test]
fn strict_rounded_up_shares_overlap_first_come() {
    // Three thirds of 10 round up to 4 each: 12 reserved for 10 places.
    let partitions = strict(10, &[("a", 1.0 / 3.0), ("b", 1.0 / 3.0), ("c", 1.0 / 3.0)]);
    let _a = take(&partitions, "a", 4);
    let _b = take(&partitions, "b", 4);
    let _c = take(&partitions, "c", 2);
    let denied = partitions.try_acquire("c").unwrap_err();
    assert!(!denied.is_reserved());
    assert_eq!(
        (denied.partition_in_flight(), denied.partition_limit()),
        (2, 4)
    );
}

#[test]
fn lowering_the_limit_revokes_nothing() {
    for mode in [PartitionMode::NetflixCompatible, PartitionMode::Strict] {
        let partitions = build(mode, 10, BATCH_LIVE);
        let mut live = take(&partitions, "live", 7);
        partitions.set_limit(4).unwrap();
        assert_eq!(partitions.partition_limit("live"), 3);
        assert_eq!(partitions.in_flight(), 7);
        assert!(partitions.try_acquire("live").is_err());
        // Batch is within its share (2 of 4 × 0.3 rounded up), but the limit is full.
        let batch = partitions.try_acquire("batch");
        assert_eq!(batch.is_ok(), mode == PartitionMode::NetflixCompatible);
        drop(batch);
        live.truncate(2);
        assert!(partitions.try_acquire("live").is_ok());
    }
}

#[test]
fn permits_report_in_flight_at_admission_and_release_once() {
    let partitions = Arc::new(netflix(10, BATCH_LIVE));
    let first = partitions.try_acquire_owned("live").unwrap();
    let second = partitions.try_acquire("batch").unwrap();
    assert_eq!((first.in_flight(), second.in_flight()), (1, 2));
    assert!(Arc::ptr_eq(first.partitions(), &partitions));
    assert_eq!(partitions.bypass_owned().in_flight(), 0);
    first.release();
    drop(second);
    assert_eq!(partitions.in_flight(), 0);
    assert_eq!(partitions.partition_in_flight("live"), 0);
    assert_eq!(partitions.partition_in_flight("batch"), 0);
}

#[test]
fn denials_say_why_in_lowercase() {
    let partitions = strict(10, BATCH_LIVE);
    let _batch = take(&partitions, "batch", 3);
    let denied = partitions.try_acquire("batch").unwrap_err();
    assert_eq!(
        denied.to_string(),
        "partition denied: the room left is reserved for other partitions \
         (3 of 10 in flight; the partition 3 of 3)"
    );
}
