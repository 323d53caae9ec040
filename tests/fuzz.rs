//! Every algorithm under random calls at any time and of any size: nothing panics,
//! a denial changes nothing, `n == 0` is an admitted peek, and a denied request
//! succeeds after its `retry_after`.
//!
//! Then every algorithm on a clock that only moves forward, starting near its origin
//! or within a few windows of its end (`Nanos::MAX`, where the clock stops), with
//! parameters up to the largest each accepts: no algorithm ever admits more than its
//! limit within its window, counted at the times the permits are used.

mod common;

use std::time::Duration;

use common::{drive, op};
use proptest::prelude::*;
use tollgate::Quota;
use tollgate::algorithm::{
    Algorithm, AllOf, Concurrency, FixedWindow, Gcra, LeakyBucket, Leased, RefreshPeriod,
    SlidingCounter, SlidingLog, SmoothBursty, SmoothWarmingUp,
};
use tollgate::time::Nanos;

/// One call on a clock that only moves forward: first it moves on by `dt` thousandths
/// of the algorithm's window (stopping at the clock's end), then it asks.
#[derive(Debug, Clone)]
struct Step {
    dt_permille: u64,
    ask: Ask,
    n: Size,
}

#[derive(Debug, Clone, Copy)]
enum Ask {
    Acquire,
    /// Reserve, waiting up to this many thousandths of the window.
    Reserve(u64),
    Peek,
    /// Give back permits (only the holder-released limits are driven with it).
    Release,
}

/// How many permits: a few, or the most one request may take, or one more.
#[derive(Debug, Clone, Copy)]
enum Size {
    Few(u64),
    Capacity,
    OverCapacity,
}

impl Size {
    fn of<A: Algorithm>(self, a: &A) -> u64 {
        match self {
            Size::Few(n) => n,
            Size::Capacity => a.capacity(),
            Size::OverCapacity => a.capacity().saturating_add(1),
        }
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![4 => Just(0u64), 8 => 0u64..300, 1 => 0u64..5_000];
    let ask = prop_oneof![
        6 => Just(Ask::Acquire),
        3 => (0u64..3_000).prop_map(Ask::Reserve),
        1 => Just(Ask::Peek),
        2 => Just(Ask::Release),
    ];
    let n = prop_oneof![8 => (0u64..6).prop_map(Size::Few), 1 => Just(Size::Capacity), 1 => Just(Size::OverCapacity)];
    prop::collection::vec(
        (dt, ask, n).prop_map(|(dt_permille, ask, n)| Step {
            dt_permille,
            ask,
            n,
        }),
        1..40,
    )
}

/// Where the clock starts: at its origin, just after, or at most a few windows (of
/// `window` nanoseconds) before its end, the end itself included.
fn start(window: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0),
        0u64..1_000,
        (0u64..5_000).prop_map(move |permille| u64::MAX - scaled(window, permille)),
        Just(u64::MAX),
    ]
}

/// `permille` thousandths of `window` nanoseconds, saturating.
fn scaled(window: u64, permille: u64) -> u64 {
    u64::try_from(u128::from(window) * u128::from(permille) / 1_000).unwrap_or(u64::MAX)
}

/// Runs `steps` from `start`, moving the clock by thousandths of `window`, and returns
/// the permits granted: `(time of use, permits)`, the time of use being the decision's
/// time, or after a reservation's wait (past the clock's end if the wait reaches
/// there). Releases are skipped: these algorithms give permits back with time.
fn uses<A: Algorithm>(a: &A, window: u64, start: u64, steps: &[Step]) -> Vec<(u128, u64)> {
    let mut state = a.initial_state(Nanos::new(start));
    let mut now = start;
    let mut out = Vec::new();
    for step in steps {
        now = now.saturating_add(scaled(window, step.dt_permille));
        let n = step.n.of(a);
        match step.ask {
            Ask::Acquire => {
                if a.acquire(&mut state, Nanos::new(now), n).is_ok() && n > 0 {
                    out.push((u128::from(now), n));
                }
            }
            Ask::Reserve(permille) => {
                let max_wait = Duration::from_nanos(scaled(window, permille));
                if let Ok(r) = a.reserve(&mut state, Nanos::new(now), n, max_wait) {
                    if n > 0 {
                        out.push((u128::from(now) + r.wait().as_nanos(), n));
                    }
                }
            }
            Ask::Peek => {
                let _ = a.peek(&state, Nanos::new(now), n);
            }
            Ask::Release => {}
        }
    }
    out
}

/// Permits used in `[from, to]`.
fn used_in(uses: &[(u128, u64)], from: u128, to: u128) -> u128 {
    uses.iter()
        .filter(|&&(t, _)| from <= t && t <= to)
        .map(|&(_, n)| u128::from(n))
        .sum()
}

/// Checks, for every pair of uses `s <= e`, that the permits used in `[s, e]` are at
/// most `most(s, e)` (`None`: no bound for that span).
fn check_spans(
    uses: &[(u128, u64)],
    most: impl Fn(u128, u128) -> Option<u128>,
) -> Result<(), TestCaseError> {
    for &(s, _) in uses {
        for &(e, _) in uses.iter().filter(|&&(e, _)| e >= s) {
            if let Some(most) = most(s, e) {
                let used = used_in(uses, s, e);
                prop_assert!(
                    used <= most,
                    "{} used in [{}, {}] (at most {}): {:?}",
                    used,
                    s,
                    e,
                    most,
                    uses
                );
            }
        }
    }
    Ok(())
}

/// At most `limit` in any span shorter than `window`.
fn within_window(limit: u64, window: u64) -> impl Fn(u128, u128) -> Option<u128> {
    move |s, e| (e - s < u128::from(window)).then_some(u128::from(limit))
}

/// At most `limit` in each window aligned at multiples of `window` from the origin.
fn per_aligned_window(limit: u64, window: u64) -> impl Fn(u128, u128) -> Option<u128> {
    let w = u128::from(window);
    move |s, e| (s / w == e / w).then_some(u128::from(limit))
}

/// At most `burst` at once, and one more per `interval`.
fn burst_and_rate(burst: u64, interval: u64) -> impl Fn(u128, u128) -> Option<u128> {
    move |s, e| Some(u128::from(burst) + (e - s) / u128::from(interval))
}

fn ops(max_n: u64) -> impl Strategy<Value = Vec<common::Op>> {
    prop::collection::vec(op(max_n), 1..30)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gcra(count in 1u64..100, ms in 1u64..5000, burst in 1u64..100, ops in ops(120)) {
        let quota = Quota::new(count, Duration::from_millis(ms)).unwrap();
        drive(&Gcra::new(quota.burst(burst).unwrap()), &ops);
    }

    #[test]
    fn cell_throttle(
        max_burst in 0u64..50,
        count in 1u64..100,
        ms in 1u64..5000,
        ops in prop::collection::vec((0u64..5_000_000_000, 0u64..60), 1..30),
    ) {
        let g = Gcra::from_cell(max_burst, count, Duration::from_millis(ms)).unwrap();
        let mut s = 0u64;
        for (t, quantity) in ops {
            let _ = g.cell_throttle(&mut s, Nanos::new(t), quantity).to_array();
        }
    }

    #[test]
    fn leaky_bucket(capacity in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        let drain = Quota::new(1, Duration::from_millis(ms)).unwrap();
        drive(&LeakyBucket::new(capacity, drain).unwrap(), &ops);
    }

    #[test]
    fn fixed_window(limit in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        let window = Duration::from_millis(ms);
        drive(&FixedWindow::new(limit, window).unwrap(), &ops);
        drive(&FixedWindow::from_first_hit(limit, window).unwrap(), &ops);
    }

    #[test]
    fn fixed_window_tiny(limit in 1u64..4, ns in 2u64..20, ops in ops(5)) {
        let window = Duration::from_nanos(ns);
        if let Ok(fw) = FixedWindow::new(limit, window) {
            drive(&fw, &ops);
        }
        drive(&FixedWindow::from_first_hit(limit, window).unwrap(), &ops);
    }

    #[test]
    fn sliding_log(limit in 1u64..20, ms in 1u64..5000, gap in 0u64..2000, ops in ops(25)) {
        let log = SlidingLog::new(limit, Duration::from_millis(ms))
            .unwrap()
            .min_gap(Duration::from_millis(gap))
            .unwrap();
        drive(&log, &ops);
    }

    #[test]
    fn sliding_counter(limit in 1u64..100, ms in 1u64..5000, ops in ops(120)) {
        drive(&SlidingCounter::new(limit, Duration::from_millis(ms)).unwrap(), &ops);
    }

    #[test]
    fn smooth_bursty(rate in 0.001f64..1000.0, seconds in 0.0f64..10.0, ops in ops(2000)) {
        drive(&SmoothBursty::with_max_burst_seconds(rate, seconds).unwrap(), &ops);
    }

    #[test]
    fn smooth_warming_up(
        rate in 0.001f64..1000.0,
        warmup_ms in 0u64..10_000,
        cold_factor in 1.0f64..20.0,
        ops in ops(2000),
    ) {
        let warmup = Duration::from_millis(warmup_ms);
        drive(&SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap(), &ops);
    }

    #[test]
    fn refresh_period(
        limit in 1u64..100,
        period in 1u64..5_000_000_000,
        timeout in 0u64..5_000_000_000,
        ops in ops(400),
    ) {
        let (period, timeout) = (Duration::from_nanos(period), Duration::from_nanos(timeout));
        drive(&RefreshPeriod::new(limit, period, timeout).unwrap(), &ops);
    }

    #[test]
    fn all_of(count in 1u64..100, ms in 1u64..5000, limit in 1u64..100, ops in ops(120)) {
        let rules = vec![
            Gcra::new(Quota::new(count, Duration::from_millis(ms)).unwrap()),
            Gcra::new(Quota::new(limit, Duration::from_millis(ms / 3 + 1)).unwrap()),
        ];
        drive(&AllOf::new(rules).unwrap(), &ops);
    }
}

/// A period or window: mostly within a few seconds, sometimes up to the longest one
/// accepted (`u64::MAX` nanoseconds).
fn span() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 1u64..5_000_000_000,
        1 => (1u64 << 40)..u64::MAX,
        1 => Just(u64::MAX),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn gcra_at_the_ends_of_the_clock_admits_at_most_burst_plus_rate(
        (count, period, burst, start, steps) in (1u64..50, span(), 1u64..50).prop_flat_map(
            |(count, period, burst)| (Just(count), Just(period.max(count)), Just(burst), start(period), steps())
        ),
    ) {
        let Ok(quota) = Quota::new(count, Duration::from_nanos(period)).and_then(|q| q.burst(burst)) else {
            return Ok(());
        };
        let gcra = Gcra::new(quota);
        let interval = quota.emission_interval().as_nanos() as u64;
        let u = uses(&gcra, period, start, &steps);
        check_spans(&u, burst_and_rate(burst, interval))?;
        // The meter of a leaky bucket is the same bucket.
        let bucket = LeakyBucket::new(burst, Quota::new(1, Duration::from_nanos(interval)).unwrap()).unwrap();
        let u = uses(&bucket, period, start, &steps);
        check_spans(&u, burst_and_rate(burst, interval))?;
    }

    #[test]
    fn gcra_at_the_largest_burst_admits_at_most_burst_plus_rate(
        interval in 1u64..1_000,
        start in start(1_000_000),
        steps in steps(),
    ) {
        // The largest burst a 1-per-interval quota takes: its tolerance fills the clock.
        let burst = u64::MAX / interval;
        let quota = Quota::new(1, Duration::from_nanos(interval)).unwrap().burst(burst).unwrap();
        let u = uses(&Gcra::new(quota), 1_000_000, start, &steps);
        check_spans(&u, burst_and_rate(burst, interval))?;
    }

    #[test]
    fn fixed_window_at_the_ends_of_the_clock_admits_at_most_the_limit_per_window(
        (window, limit_permille, start, steps) in span().prop_flat_map(
            |window| (Just(window.max(2)), 0u64..=1_000, start(window), steps())
        ),
    ) {
        let max = FixedWindow::max_limit(Duration::from_nanos(window));
        let limit = (max * limit_permille / 1_000).max(1);
        let fw = FixedWindow::new(limit, Duration::from_nanos(window)).unwrap();
        let u = uses(&fw, window, start, &steps);
        check_spans(&u, per_aligned_window(limit, window))?;
        let first_hit = FixedWindow::from_first_hit(limit, Duration::from_nanos(window)).unwrap();
        let u = uses(&first_hit, window, start, &steps);
        check_spans(&u, |s, e| (e - s < u128::from(window)).then_some(2 * u128::from(limit)))?;
    }

    #[test]
    fn sliding_log_at_the_ends_of_the_clock_admits_at_most_the_limit_in_any_window(
        (window, limit, gap_permille, start, steps) in (span(), prop_oneof![1u64..8, Just(SlidingLog::MAX_LIMIT)]).prop_flat_map(
            |(window, limit)| (Just(window), Just(limit), prop_oneof![Just(0u64), 0u64..2_000], start(window), steps())
        ),
    ) {
        let gap = scaled(window, gap_permille);
        let log = SlidingLog::new(limit, Duration::from_nanos(window))
            .unwrap()
            .min_gap(Duration::from_nanos(gap))
            .unwrap();
        let u = uses(&log, window, start, &steps);
        check_spans(&u, within_window(limit, window))?;
        // Two requests are at least the gap apart.
        let mut times: Vec<u128> = u.iter().map(|&(t, _)| t).collect();
        times.sort_unstable();
        times.dedup();
        for pair in times.windows(2) {
            prop_assert!(pair[1] - pair[0] >= u128::from(gap), "{:?}", u);
        }
    }

    #[test]
    fn sliding_counter_at_the_ends_of_the_clock_admits_at_most_the_limit_per_window(
        (window, limit, start, steps) in (span(), prop_oneof![1u64..50, Just(u64::MAX)]).prop_flat_map(
            |(window, limit)| (Just(window), Just(limit), start(window), steps())
        ),
    ) {
        let counter = SlidingCounter::new(limit, Duration::from_nanos(window)).unwrap();
        let u = uses(&counter, window, start, &steps);
        check_spans(&u, per_aligned_window(limit, window))?;
    }

    #[test]
    fn refresh_period_at_the_ends_of_the_clock_admits_at_most_the_limit_per_cycle(
        (period, limit, timeout_permille, start, steps) in (span(), prop_oneof![1u64..50, Just(i64::MAX as u64)]).prop_flat_map(
            |(period, limit)| (Just(period), Just(limit), 0u64..3_000, start(period), steps())
        ),
    ) {
        let timeout = Duration::from_nanos(scaled(period, timeout_permille));
        let r4j = RefreshPeriod::new(limit, Duration::from_nanos(period), timeout).unwrap();
        let u = uses(&r4j, period, start, &steps);
        // Cycles count from the start. A reservation may draw on earlier cycles'
        // permits, so the first use of a span brings at most its own size in; the uses
        // after it have at most one limit per cycle.
        let (p, start) = (u128::from(period), u128::from(start));
        check_spans(&u, |s, e| {
            let cycles = (e - start) / p - (s - start) / p + 1;
            let largest = u.iter().filter(|&&(t, _)| s <= t && t <= e).map(|&(_, n)| n).max();
            Some(u128::from(limit) * cycles + u128::from(largest.unwrap_or(0)))
        })?;
    }

    #[test]
    fn smooth_limiters_at_the_ends_of_the_clock_admit_at_most_stored_plus_rate(
        rate in prop_oneof![4 => 0.01f64..1e6, 1 => Just(1e6), 1 => Just(1e6 / 9_007_199_254_740_992.0)],
        seconds in prop_oneof![Just(0.0f64), 0.0f64..10.0],
        warmup_us in prop_oneof![Just(0u64), 0u64..10_000_000, Just(1u64 << 53)],
        start in prop_oneof![Just(0u64), 0u64..1_000, (0u64..1u64 << 40).prop_map(|d| u64::MAX - d), Just(u64::MAX)],
        steps in steps(),
    ) {
        let bursty = SmoothBursty::with_max_burst_seconds(rate, seconds).unwrap();
        let warm = SmoothWarmingUp::new(rate, Duration::from_micros(warmup_us)).unwrap();
        let interval = bursty.stable_interval().as_nanos().max(1);
        // Time moves by thousandths of ten stable intervals, within the clock's range.
        let window = u64::try_from(interval * 10).unwrap_or(u64::MAX);
        for (u, stored, max_n) in [
            (uses(&bursty, window, start, &steps), bursty.max_permits(), bursty.capacity()),
            (uses(&warm, window, start, &steps), 0.0, warm.capacity()),
        ] {
            let largest = u.iter().map(|&(_, n)| u128::from(n)).max().unwrap_or(0);
            prop_assert!(largest <= u128::from(max_n));
            // Stored permits (free only when bursty), the last request's prepay, one
            // more per stable interval, and the microseconds Guava's arithmetic
            // truncates: under 2 µs per request.
            check_spans(&u, |s, e| {
                let requests = u.iter().filter(|&&(t, _)| s <= t && t <= e).count() as u128;
                let time = e - s + 2_000 * requests;
                Some(stored.ceil() as u128 + largest + time / interval + requests)
            })?;
        }
    }

    #[test]
    fn concurrency_and_leases_at_the_ends_of_the_clock_hold_at_most_the_max(
        max in prop_oneof![1u64..8, Just(u64::MAX)],
        lease in span(),
        start in start(1_000_000_000),
        steps in steps(),
    ) {
        let limit = Concurrency::new(max).unwrap();
        let leased = Leased::new(limit, Duration::from_nanos(lease)).unwrap();
        // What holders hold: released by them, or for a lease, taken back once the
        // lease has run (the end of a lease past the clock's end never comes).
        let (mut state, mut leased_state) = (limit.initial_state(Nanos::ZERO), leased.initial_state(Nanos::ZERO));
        let (mut held, mut leased_held, mut renewed) = (0u128, 0u128, 0u128);
        let mut now = start;
        for step in &steps {
            now = now.saturating_add(scaled(lease, step.dt_permille));
            let t = Nanos::new(now);
            if leased_held > 0 && u128::from(now) >= renewed + u128::from(lease) {
                leased_held = 0;
            }
            let n = step.n.of(&limit);
            match step.ask {
                Ask::Acquire | Ask::Reserve(_) => {
                    let far = Duration::from_nanos(scaled(lease, 3_000));
                    let (plain, by_lease) = if matches!(step.ask, Ask::Acquire) {
                        (limit.acquire(&mut state, t, n).is_ok(), leased.acquire(&mut leased_state, t, n).is_ok())
                    } else {
                        (limit.reserve(&mut state, t, n, far).is_ok(), leased.reserve(&mut leased_state, t, n, far).is_ok())
                    };
                    if plain {
                        held += u128::from(n);
                    } else if n > 0 && n <= max {
                        let denied = limit.acquire(&mut state, t, n).unwrap_err();
                        prop_assert_eq!(denied.retry(), Some(tollgate::Retry::OnRelease));
                    }
                    if by_lease && n > 0 {
                        leased_held += u128::from(n);
                        renewed = u128::from(now);
                    }
                }
                Ask::Release => {
                    let n = n.min(3);
                    limit.refund(&mut state, t, n);
                    held = held.saturating_sub(u128::from(n));
                    leased.refund(&mut leased_state, t, n);
                    leased_held = leased_held.saturating_sub(u128::from(n));
                    renewed = u128::from(now);
                }
                Ask::Peek => {
                    let _ = leased.peek(&leased_state, t, n);
                }
            }
            prop_assert!(held <= u128::from(max), "{} held of {}", held, max);
            prop_assert!(leased_held <= u128::from(max), "{} leased of {} at {}", leased_held, max, now);
        }
    }

    #[test]
    fn all_of_at_the_ends_of_the_clock_holds_every_rule(
        (period, count, burst, start, steps) in (span(), 1u64..20, 1u64..20).prop_flat_map(
            |(period, count, burst)| (Just(period.max(count)), Just(count), Just(burst), start(period), steps())
        ),
    ) {
        let quotas = Quota::new(count, Duration::from_nanos(period)).and_then(|slow| {
            let fast = Quota::new(count, Duration::from_nanos((period / 3).max(count)))?;
            Ok((slow, fast.burst(burst)?))
        });
        // A burst whose tolerance passes the clock's range is refused.
        let Ok((slow, fast)) = quotas else {
            return Ok(());
        };
        let rules = AllOf::new(vec![Gcra::new(slow), Gcra::new(fast)]).unwrap();
        let u = uses(&rules, period, start, &steps);
        for quota in [slow, fast] {
            let interval = quota.emission_interval().as_nanos() as u64;
            check_spans(&u, burst_and_rate(quota.burst_size(), interval))?;
        }
    }
}
