//! The fixed window's unit tests, beside it so that they reach its private parts.
use super::*;
use crate::algorithm::script::{MAX_SCRIPT_MICROS, too_long};
use crate::algorithm::testing::{MS, S, at, ms};

fn aligned(limit: u64, window_ms: u64) -> FixedWindow {
    FixedWindow::new(limit, ms(window_ms)).unwrap()
}

fn first_hit(limit: u64, window_ms: u64) -> FixedWindow<FirstHit> {
    FixedWindow::from_first_hit(limit, ms(window_ms)).unwrap()
}

#[test]
fn aligned_admits_limit_per_window_and_resets_at_the_edge() {
    let fw = aligned(3, 1000);
    let mut s = fw.initial_state(at(0));
    let first = fw.acquire(&mut s, at(250), 1).unwrap();
    assert_eq!(first.remaining(), 2);
    assert_eq!(first.reset_after(), ms(750));
    assert_eq!(fw.acquire(&mut s, at(500), 2).unwrap().remaining(), 0);
    let denied = fw.acquire(&mut s, at(999), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(MS)));
    assert!(fw.acquire(&mut s, at(1000), 3).is_ok());
}

#[test]
fn aligned_retry_points_to_the_window_where_the_request_fits() {
    let fw = aligned(2, 1000);
    let mut s = fw.initial_state(at(0));
    // Two windows' worth booked: the current one and the next.
    fw.reserve(&mut s, at(100), 2, Duration::ZERO).unwrap();
    let r = fw.reserve(&mut s, at(100), 2, ms(900)).unwrap();
    assert_eq!(r.wait(), ms(900));
    let denied = fw.acquire(&mut s, at(100), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(1900)));
    if let Denied::Limited(l) = denied {
        assert_eq!(l.remaining(), 0);
        assert_eq!(l.reset_after(), ms(1900));
    }
}

#[test]
fn more_than_the_limit_is_never() {
    let fw = aligned(3, 1000);
    let mut s = fw.initial_state(at(0));
    assert!(fw.acquire(&mut s, at(0), 4).unwrap_err().is_never());
    assert!(
        fw.reserve(&mut s, at(0), 4, Duration::MAX)
            .unwrap_err()
            .is_never()
    );
    assert_eq!(s, 0);
    let fh = first_hit(3, 1000);
    let mut s = fh.initial_state(at(0));
    assert!(fh.acquire(&mut s, at(0), 4).unwrap_err().is_never());
}

#[test]
fn denial_changes_nothing() {
    let fw = aligned(1, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 1).unwrap();
    let before = s;
    assert!(fw.acquire(&mut s, at(10), 1).is_err());
    assert!(fw.reserve(&mut s, at(10), 1, ms(10)).is_err());
    assert_eq!(s, before);
}

#[test]
fn zero_is_a_peek_that_always_succeeds() {
    let fw = aligned(1, 1000);
    let mut s = fw.initial_state(at(0));
    fw.reserve(&mut s, at(0), 1, Duration::ZERO).unwrap();
    fw.reserve(&mut s, at(0), 1, ms(5000)).unwrap();
    let before = s;
    let peek = fw.acquire(&mut s, at(0), 0).unwrap();
    assert_eq!(peek.remaining(), 0);
    assert!(fw.reserve(&mut s, at(0), 0, Duration::ZERO).is_ok());
    assert_eq!(s, before);
}

#[test]
fn reservation_skips_to_the_window_with_room_and_never_is_overtaken() {
    let fw = aligned(10, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 8).unwrap();
    let r = fw.reserve(&mut s, at(0), 5, ms(1000)).unwrap();
    assert_eq!(r.wait(), ms(1000));
    // The 2 left in the first window stay unused: nothing overtakes the booking.
    assert!(fw.acquire(&mut s, at(1), 1).is_err());
    // The second window has 5 left.
    assert!(fw.acquire(&mut s, at(1000), 5).is_ok());
    assert!(fw.acquire(&mut s, at(1000), 1).is_err());
}

#[test]
fn reservation_too_far_is_denied_with_how_much_sooner() {
    let fw = aligned(1, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(200), 1).unwrap();
    let denied = fw.reserve(&mut s, at(200), 1, ms(300)).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(500)));
}

#[test]
fn reservations_at_the_largest_limit_book_ahead() {
    // One second: 29 count bits, all taken by the limit; the count field holds one
    // window's count, so bookings ahead need no room in it.
    let fw = FixedWindow::new((1 << 29) - 1, Duration::from_secs(1)).unwrap();
    let mut s = fw.initial_state(Nanos::ZERO);
    fw.acquire(&mut s, Nanos::ZERO, 1).unwrap();
    for k in 1..4 {
        let r = fw
            .reserve(&mut s, Nanos::ZERO, fw.limit(), Duration::MAX)
            .unwrap();
        assert_eq!(r.wait(), Duration::from_secs(k));
    }
    assert_eq!(fw.idle_at(&s), Nanos::new(4 * S));
}

#[test]
fn bookings_stop_at_the_clocks_last_window() {
    let fw = FixedWindow::new(1, Duration::from_nanos(u64::MAX / 2)).unwrap();
    let mut s = fw.initial_state(Nanos::ZERO);
    for wait in [0, u64::MAX / 2, u64::MAX / 2 * 2] {
        let r = fw.reserve(&mut s, Nanos::ZERO, 1, Duration::MAX).unwrap();
        assert_eq!(r.wait(), Duration::from_nanos(wait));
    }
    // The third window runs to the end of the clock; none follows.
    assert_eq!(fw.idle_at(&s), Nanos::MAX);
    let before = s;
    let denied = fw
        .reserve(&mut s, Nanos::ZERO, 1, Duration::MAX)
        .unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(u64::MAX)));
    assert_eq!(s, before);
}

#[test]
fn refund_gives_back_the_newest_bookings_window_by_window() {
    let fw = aligned(3, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 2).unwrap();
    // Skips the 1 left in window 0 and fills window 1, then books 1 in window 2.
    fw.reserve(&mut s, at(0), 3, ms(1000)).unwrap();
    fw.reserve(&mut s, at(0), 1, ms(2000)).unwrap();
    assert_eq!(fw.idle_at(&s), at(3000));
    fw.refund(&mut s, at(0), 2);
    // Window 2 is empty again, and window 1 holds 2.
    assert_eq!(fw.idle_at(&s), at(2000));
    assert!(fw.acquire(&mut s, at(1000), 1).is_ok());
    assert!(fw.acquire(&mut s, at(1000), 1).is_err());
    // Back past window 1: window 0 counts as full, so 2 of its 3 are given back.
    fw.refund(&mut s, at(0), 5);
    assert_eq!(fw.acquire(&mut s, at(0), 0).unwrap().remaining(), 2);
}

#[test]
fn refund_lowers_the_count_never_below_zero() {
    let fw = aligned(5, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 5).unwrap();
    fw.refund(&mut s, at(10), 2);
    assert_eq!(fw.acquire(&mut s, at(10), 0).unwrap().remaining(), 2);
    fw.refund(&mut s, at(10), 100);
    assert_eq!(s, 0);
    assert_eq!(fw.idle_at(&s), Nanos::ZERO);
}

#[test]
fn idle_at_is_the_end_of_the_last_booked_window() {
    let fw = aligned(2, 1000);
    let mut s = fw.initial_state(at(0));
    assert_eq!(fw.idle_at(&s), Nanos::ZERO);
    fw.acquire(&mut s, at(1500), 1).unwrap();
    assert_eq!(fw.idle_at(&s), at(2000));
    fw.reserve(&mut s, at(1500), 2, ms(600)).unwrap();
    assert_eq!(fw.idle_at(&s), at(3000));
}

#[test]
fn unix_alignment_moves_the_edges() {
    // The clock started 300 ms into a Unix second.
    let fw = aligned(1, 1000).aligned_to_unix_epoch(Duration::from_millis(1_700_000_000_300));
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 1).unwrap();
    assert_eq!(fw.idle_at(&s), at(700));
    let denied = fw.acquire(&mut s, at(699), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(1)));
    assert!(fw.acquire(&mut s, at(700), 1).is_ok());
}

#[test]
fn a_state_from_a_later_window_is_kept() {
    // A thread that read the clock earlier commits after one in the next window.
    let fw = aligned(2, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(1000), 2).unwrap();
    let denied = fw.acquire(&mut s, at(999), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(1001)));
}

#[test]
fn set_limit_keeps_the_count() {
    let mut fw = aligned(2, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 2).unwrap();
    fw.set_limit(3).unwrap();
    assert!(fw.acquire(&mut s, at(0), 1).is_ok());
    assert!(fw.acquire(&mut s, at(0), 1).is_err());
    assert_eq!(
        fw.set_limit(0),
        Err(ConfigError::Zero { parameter: "limit" })
    );
    assert_eq!(fw.limit(), 3);
}

/// Regression: the booked count was decoded as `count - windows passed × limit`,
/// so raising the limit moved bookings back into the current window and lowering
/// it pushed them on; a window could then admit more than the new limit.
#[test]
fn set_limit_applies_exactly_to_windows_booked_ahead() {
    fn check<A: Algorithm>(mut fw: A, set_limit: fn(&mut A, u64)) {
        let mut s = fw.initial_state(at(0));
        // Window 0 holds 10, window 1 holds 10, window 2 holds 5.
        fw.acquire(&mut s, at(0), 10).unwrap();
        fw.reserve(&mut s, at(0), 10, ms(1000)).unwrap();
        fw.reserve(&mut s, at(0), 5, ms(2000)).unwrap();
        set_limit(&mut fw, 20);
        assert!(fw.acquire(&mut s, at(0), 1).is_err());
        assert!(
            fw.acquire(&mut s, at(1000), 1).is_err(),
            "window 1 stays closed"
        );
        assert!(
            fw.acquire(&mut s, at(2000), 16).is_err(),
            "window 2 holds 5 of 20"
        );
        assert!(fw.acquire(&mut s, at(2000), 15).is_ok());
        set_limit(&mut fw, 3);
        assert!(
            fw.acquire(&mut s, at(2500), 1).is_err(),
            "20 taken, over the new 3"
        );
        assert!(fw.acquire(&mut s, at(3000), 3).is_ok());
    }
    check(aligned(10, 1000), |fw, limit| fw.set_limit(limit).unwrap());
    check(first_hit(10, 1000), |fw, limit| {
        fw.set_limit(limit).unwrap()
    });
}

#[test]
fn window_bounds_run_to_the_end_of_the_clock_without_dividing() {
    for window in [2, 3, 1_000, u64::MAX / 2, u64::MAX] {
        let fw = FixedWindow::new(1, Duration::from_nanos(window))
            .unwrap()
            .aligned_to_unix_epoch(Duration::from_nanos(window / 3));
        let last = fw.last_index();
        for index in [0, 1, last.saturating_sub(1), last, u64::MAX] {
            let (start, end) = fw.bounds(index);
            let expected_end = if index >= last {
                u64::MAX
            } else {
                ((index + 1) * window).saturating_sub(fw.alignment.offset)
            };
            assert_eq!(end, expected_end, "window {window}, index {index}");
            if index <= last {
                let expected_start = (index * window).saturating_sub(fw.alignment.offset);
                assert_eq!(start, expected_start, "window {window}, index {index}");
            }
        }
    }
}

#[test]
fn words_round_trip() {
    let fw = aligned(7, 1234).aligned_to_unix_epoch(Duration::from_secs(5));
    assert_eq!(FixedWindow::from_words(fw.words()), fw);
}

#[test]
fn rejects_bad_parameters() {
    assert_eq!(
        FixedWindow::new(0, ms(1)),
        Err(ConfigError::Zero { parameter: "limit" })
    );
    assert_eq!(
        FixedWindow::new(1, Duration::ZERO),
        Err(ConfigError::Zero {
            parameter: "window"
        })
    );
    assert_eq!(
        FixedWindow::new(1, Duration::MAX),
        Err(crate::units::too_long("window"))
    );
    assert!(matches!(
        FixedWindow::new(1 << 32, Duration::from_secs(10)),
        Err(ConfigError::OutOfRange {
            parameter: "limit",
            ..
        })
    ));
    assert!(FixedWindow::new(u32::MAX as u64, Duration::from_secs(10)).is_ok());
    assert!(matches!(
        FixedWindow::new(1 << 29, Duration::from_secs(1)),
        Err(ConfigError::OutOfRange { .. })
    ));
    // One nanosecond leaves no bits for a count.
    assert!(FixedWindow::new(1, Duration::from_nanos(1)).is_err());
    assert!(FixedWindow::new(1, Duration::from_nanos(2)).is_ok());
    assert_eq!(
        FixedWindow::from_first_hit(0, ms(1)),
        Err(ConfigError::Zero { parameter: "limit" })
    );
    assert_eq!(
        FixedWindow::from_first_hit(1, Duration::ZERO),
        Err(ConfigError::Zero {
            parameter: "window"
        })
    );
    assert_eq!(
        FixedWindow::from_first_hit(1, Duration::MAX),
        Err(crate::units::too_long("window"))
    );
    assert!(FixedWindow::from_first_hit(u64::MAX, Duration::from_nanos(1)).is_ok());
    let mut fh = first_hit(1, 1);
    assert_eq!(
        fh.set_limit(0),
        Err(ConfigError::Zero { parameter: "limit" })
    );
}

#[test]
fn max_limit_of_degenerate_windows() {
    assert_eq!(FixedWindow::max_limit(Duration::ZERO), 0);
    assert_eq!(FixedWindow::max_limit(Duration::from_nanos(1)), 0);
    assert_eq!(FixedWindow::max_limit(Duration::from_nanos(2)), 1);
    assert_eq!(FixedWindow::max_limit(Duration::MAX), 0);
    assert_eq!(
        FixedWindow::max_limit(Duration::from_nanos(u64::MAX)),
        u32::MAX as u64
    );
}

#[test]
fn first_hit_opens_a_window_at_the_first_request() {
    let fw = first_hit(2, 1000);
    let mut s = fw.initial_state(at(0));
    let first = fw.acquire(&mut s, at(300), 1).unwrap();
    assert_eq!(first.reset_after(), ms(1000));
    fw.acquire(&mut s, at(900), 1).unwrap();
    let denied = fw.acquire(&mut s, at(1200), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(100)));
    // The window ended at 1300; the next opens at 1750, not 1300.
    let next = fw.acquire(&mut s, at(1750), 2).unwrap();
    assert_eq!(next.reset_after(), ms(1000));
    assert_eq!(s.start(), at(1750));
    assert_eq!(s.count(), 2);
    assert_eq!(fw.idle_at(&s), at(2750));
}

#[test]
fn first_hit_reservation_chains_windows_back_to_back() {
    let fw = first_hit(2, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(100), 2).unwrap();
    let r = fw.reserve(&mut s, at(500), 2, ms(1000)).unwrap();
    assert_eq!(r.wait(), ms(600));
    assert_eq!(fw.idle_at(&s), at(2100));
    // The booked window runs 1100..2100.
    assert!(fw.acquire(&mut s, at(2000), 1).is_err());
    let fresh = fw.acquire(&mut s, at(2100), 1).unwrap();
    assert_eq!(fresh.reset_after(), ms(1000));
    fw.refund(&mut s, at(2100), 5);
    assert_eq!(fw.idle_at(&s), Nanos::ZERO);
}

#[test]
fn first_hit_from_a_later_start_is_kept() {
    let fw = first_hit(1, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(500), 1).unwrap();
    let denied = fw.acquire(&mut s, at(400), 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(1100)));
}

/// Regression: a first-hit window that would end past the clock's end saturated
/// its end at the last instant, where every request then opened a fresh window.
#[test]
fn first_hit_windows_never_reopen_at_the_clocks_end() {
    let fw = first_hit(10, 1000);
    let start = u64::MAX - 500 * MS;
    let mut s = fw.initial_state(Nanos::new(start));
    let admitted: u64 = [start, start + 100 * MS, u64::MAX - 1, u64::MAX]
        .iter()
        .flat_map(|&now| (0..100).map(move |_| now))
        .filter(|&now| fw.acquire(&mut s, Nanos::new(now), 1).is_ok())
        .count() as u64;
    assert_eq!(admitted, 10);
    let denied = fw.acquire(&mut s, Nanos::MAX, 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::ZERO));
    assert!(fw.reserve(&mut s, Nanos::MAX, 1, Duration::MAX).is_err());
}

#[test]
fn aligned_windows_near_the_clocks_end_admit_the_limit_once() {
    let fw = aligned(10, 1000).aligned_to_unix_epoch(Duration::from_millis(300));
    let start = u64::MAX - 500 * MS;
    let mut s = fw.initial_state(Nanos::new(start));
    let admitted = [start, u64::MAX - 1, u64::MAX]
        .iter()
        .flat_map(|&now| (0..100).map(move |_| now))
        .filter(|&now| fw.acquire(&mut s, Nanos::new(now), 1).is_ok())
        .count();
    assert_eq!(admitted, 10);
}

#[test]
fn huge_values_saturate_without_panic() {
    let fw = FixedWindow::new(3, Duration::from_nanos(7)).unwrap();
    let mut s = u64::MAX;
    for now in [0, 1, u64::MAX - 1, u64::MAX] {
        let _ = fw.acquire(&mut s, Nanos::new(now), 3);
        let _ = fw.reserve(&mut s, Nanos::new(now), 3, Duration::MAX);
        fw.refund(&mut s, Nanos::new(now), u64::MAX);
        let _ = fw.idle_at(&s);
    }
    let fh = FixedWindow::from_first_hit(u64::MAX, Duration::from_nanos(u64::MAX)).unwrap();
    let mut s = FirstHitState {
        start: Nanos::MAX,
        count: u64::MAX,
    };
    for now in [0, u64::MAX] {
        let _ = fh.acquire(&mut s, Nanos::new(now), u64::MAX);
        let _ = fh.reserve(&mut s, Nanos::new(now), u64::MAX, Duration::MAX);
        let _ = fh.idle_at(&s);
        fh.refund(&mut s, Nanos::new(now), 1);
    }
    let fh = first_hit(1, 1);
    let mut s = FirstHitState {
        start: Nanos::ZERO,
        count: u64::MAX,
    };
    let _ = fh.reserve(&mut s, Nanos::new(u64::MAX), 1, Duration::MAX);
    let _ = fh.idle_at(&s);
}

#[test]
fn aligned_windows_send_their_offset_to_the_script() {
    let fw = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    assert_eq!(
        fw.script_args(),
        Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(0)])
    );
    let shifted = fw.aligned_to_unix_epoch(Duration::from_millis(1_700_000_000_300));
    assert_eq!(
        shifted.script_args(),
        Ok(vec![Arg::Int(10), Arg::Int(1_000_000), Arg::Int(300_000)])
    );
}

#[test]
fn first_hit_windows_send_limit_and_window_to_the_script() {
    let fw = FixedWindow::from_first_hit(3, Duration::from_millis(250)).unwrap();
    assert_eq!(fw.script_args(), Ok(vec![Arg::Int(3), Arg::Int(250_000)]));
}

#[test]
fn a_sub_microsecond_window_or_offset_has_no_script_args() {
    let window = Duration::from_nanos(1_500);
    let aligned = FixedWindow::new(1, window).unwrap();
    assert!(matches!(
        aligned.script_args(),
        Err(ConfigError::OutOfRange {
            parameter: "window",
            ..
        })
    ));
    let first_hit = FixedWindow::from_first_hit(1, window).unwrap();
    assert!(matches!(
        first_hit.script_args(),
        Err(ConfigError::OutOfRange {
            parameter: "window",
            ..
        })
    ));
    let shifted = FixedWindow::new(1, Duration::from_secs(1))
        .unwrap()
        .aligned_to_unix_epoch(Duration::from_nanos(1_700_000_000_000_000_500));
    assert!(matches!(
        shifted.script_args(),
        Err(ConfigError::OutOfRange {
            parameter: "offset",
            ..
        })
    ));
}

#[test]
fn windows_beyond_two_to_the_52_micros_have_no_script_args() {
    let fits = Duration::from_secs(1 << 32);
    assert!(FixedWindow::new(1, fits).unwrap().script_args().is_ok());
    let huge = Duration::from_secs(1 << 33);
    let overflow = Err(too_long("window", MAX_SCRIPT_MICROS));
    assert_eq!(FixedWindow::new(1, huge).unwrap().script_args(), overflow);
    assert_eq!(
        FixedWindow::from_first_hit(1, huge).unwrap().script_args(),
        overflow
    );
}

#[test]
fn a_first_hit_limit_beyond_two_to_the_52_has_no_script_args() {
    let second = Duration::from_secs(1);
    let largest = FixedWindow::from_first_hit(1 << 52, second).unwrap();
    assert!(largest.script_args().is_ok());
    let huge = FixedWindow::from_first_hit((1 << 52) + 1, second).unwrap();
    assert_eq!(
        huge.script_args(),
        Err(ConfigError::Overflow { parameter: "limit" })
    );
}

fn counting(limit: u64, window_ms: u64) -> FixedWindow {
    aligned(limit, window_ms).counting_denied().unwrap()
}

#[test]
fn a_counting_window_pushed_over_denies_every_acquire_to_its_end() {
    // The Go service's counter: 8 of 10, then 5 more asked: INCRBY makes 13.
    let fw = counting(10, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(100), 8).unwrap();
    let denied = fw.acquire(&mut s, at(200), 5).unwrap_err();
    assert_eq!(denied.retry_after(), Some(ms(800)));
    let Denied::Limited(limited) = denied else {
        panic!("{denied:?}")
    };
    // The denial tells what was left before it (Go's count before its INCRBY).
    assert_eq!(limited.remaining(), 2, "2 were left before the denied 5");
    assert_eq!(limited.reset_after(), ms(800));
    let Err(Denied::Limited(over)) = fw.acquire(&mut s, at(250), 1) else {
        panic!("admitted past the limit")
    };
    assert_eq!(over.remaining(), 0, "over: nothing remains");
    // What would have fit before is denied now, and so is a check of nothing.
    assert!(fw.acquire(&mut s, at(300), 2).is_err());
    let check = fw.acquire(&mut s, at(300), 0).unwrap_err();
    assert_eq!(check.retry_after(), Some(ms(700)));
    assert!(fw.peek(&s, at(300), 0).is_err());
    // The next window starts afresh.
    assert_eq!(fw.acquire(&mut s, at(1000), 0).unwrap().remaining(), 10);
    assert_eq!(fw.acquire(&mut s, at(1000), 10).unwrap().remaining(), 0);
}

#[test]
fn a_window_that_does_not_count_keeps_what_fits_after_a_denial() {
    let fw = aligned(10, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(100), 8).unwrap();
    let before = s;
    let Err(Denied::Limited(limited)) = fw.acquire(&mut s, at(200), 5) else {
        panic!("admitted")
    };
    assert_eq!(limited.remaining(), 2);
    assert_eq!(s, before);
    assert!(fw.acquire(&mut s, at(300), 2).is_ok());
    assert_eq!(fw.acquire(&mut s, at(300), 0).unwrap().remaining(), 0);
}

#[test]
fn counting_leaves_peeks_reservations_refunds_and_never_alone() {
    let fw = counting(3, 1000);
    let mut s = fw.initial_state(at(0));
    fw.acquire(&mut s, at(0), 2).unwrap();
    let before = s;
    assert!(fw.peek(&s, at(0), 2).is_err());
    assert!(fw.acquire(&mut s, at(0), 4).unwrap_err().is_never());
    assert!(fw.reserve(&mut s, at(0), 2, ms(10)).is_err());
    assert_eq!(s, before, "nothing counted");
    // Over, then a refund of 2 brings the window back to 2 of 3.
    assert!(fw.acquire(&mut s, at(0), 2).is_err());
    fw.refund(&mut s, at(0), 2);
    assert_eq!(fw.acquire(&mut s, at(0), 0).unwrap().remaining(), 1);
    // A window closed by a reservation booked ahead does not count.
    let mut ahead = fw.initial_state(at(0));
    fw.acquire(&mut ahead, at(0), 3).unwrap();
    fw.reserve(&mut ahead, at(0), 1, ms(1000)).unwrap();
    let booked = ahead;
    assert!(fw.acquire(&mut ahead, at(10), 1).is_err());
    assert_eq!(ahead, booked);
    assert_eq!(fw.acquire(&mut ahead, at(10), 0).unwrap().remaining(), 0);
}

#[test]
fn a_first_hit_counting_window_opens_at_the_denied_request_too() {
    let fh = first_hit(2, 1000).counting_denied().unwrap();
    assert!(fh.counts_denied());
    let mut s = fh.initial_state(at(0));
    fh.acquire(&mut s, at(500), 2).unwrap();
    assert!(fh.acquire(&mut s, at(900), 1).is_err());
    assert_eq!(s.count(), 3);
    assert_eq!(fh.idle_at(&s), at(1500));
    let check = fh.acquire(&mut s, at(1000), 0).unwrap_err();
    assert_eq!(check.retry_after(), Some(ms(500)));
    assert!(fh.acquire(&mut s, at(1500), 2).is_ok());
}

#[test]
fn counting_needs_room_for_a_count_past_the_limit() {
    let second = Duration::from_secs(1);
    let max = FixedWindow::max_limit(second);
    let at_max = FixedWindow::new(max, second).unwrap();
    assert!(matches!(
        at_max.counting_denied(),
        Err(ConfigError::OutOfRange {
            parameter: "limit",
            ..
        })
    ));
    let mut below = FixedWindow::new(max - 1, second)
        .unwrap()
        .counting_denied()
        .unwrap();
    assert!(below.set_limit(max).is_err());
    assert_eq!(below.limit(), max - 1);
    // Past the limit is stored exactly at the largest limit that counts.
    let mut s = below.initial_state(Nanos::ZERO);
    below.acquire(&mut s, Nanos::ZERO, max - 1).unwrap();
    assert!(below.acquire(&mut s, Nanos::ZERO, 1).is_err());
    assert!(below.acquire(&mut s, Nanos::ZERO, 0).is_err());
    assert!(!below.denial_lasts());
    assert!(aligned(1, 1000).denial_lasts());
}

#[test]
fn counting_survives_packing_and_reaches_the_script() {
    let fw = counting(7, 1000).aligned_to_unix_epoch(ms(1_700_000_000_300));
    let packing = FixedWindow::<Aligned>::PACKING.unwrap();
    assert_eq!((packing.unpack)((packing.pack)(&fw)), fw);
    let plain = aligned(7, 1000);
    assert_eq!((packing.unpack)((packing.pack)(&plain)), plain);
    assert_ne!(fw, plain.aligned_to_unix_epoch(ms(1_700_000_000_300)));
    assert_eq!(
        fw.script_args().unwrap(),
        [
            Arg::Int(7),
            Arg::Int(1_000_000),
            Arg::Int(300_000),
            Arg::Int(1)
        ]
    );
    assert_eq!(plain.script_args().unwrap().len(), 3);
    let fh = first_hit(7, 1000).counting_denied().unwrap();
    assert_eq!(fh.script_args().unwrap().len(), 3);
    assert!(fh.per_node(Share::new(2).unwrap()).unwrap().counts_denied());
}
