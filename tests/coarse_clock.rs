//! `CoarseClock`: its bad resolutions, its readings (monotone, advancing, on its
//! source's timeline, never ahead of it) and an AIMD limiter timed on it.
//!
//! The readings come from a real thread, so nothing here asserts how long anything
//! takes: a test that waits for the clock to move polls with a generous deadline.

use std::time::{Duration, Instant};

use tollgate::ConfigError;
#[cfg(feature = "adaptive")]
use tollgate::adaptive::limit::AimdLimit;
#[cfg(feature = "adaptive")]
use tollgate::adaptive::{AdaptiveLimiter, WhenLimited};
use tollgate::time::{Clock, CoarseClock, MonotonicClock, Nanos};

/// Past this, a clock that should have moved is broken, not slow.
const PATIENCE: Duration = Duration::from_secs(60);

/// Reads `clock` until it passes `after`, or gives up at `PATIENCE`.
fn reading_after(clock: &CoarseClock, after: Nanos) -> Option<Nanos> {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        let now = clock.now();
        if now > after {
            return Some(now);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

#[test]
fn bad_resolutions_are_typed_errors() {
    assert_eq!(
        CoarseClock::new(Duration::ZERO).unwrap_err(),
        ConfigError::Zero {
            parameter: "resolution"
        }
    );
    for bad in [
        Duration::from_nanos(1),
        Duration::from_nanos(999),
        Duration::from_secs(2),
        Duration::MAX,
    ] {
        let error = CoarseClock::new(bad).unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::OutOfRange {
                    parameter: "resolution",
                    ..
                }
            ),
            "{bad:?}: {error:?}"
        );
        assert!(CoarseClock::with_source(MonotonicClock::new(), bad).is_err());
    }
    for good in [
        Duration::from_micros(1),
        Duration::from_millis(1),
        Duration::from_secs(1),
    ] {
        assert_eq!(CoarseClock::new(good).unwrap().resolution(), good);
    }
}

#[test]
fn readings_never_go_backwards() {
    let clock = CoarseClock::new(Duration::from_micros(50)).unwrap();
    let mut last = clock.now();
    let start = Instant::now();
    // Long enough to span many refreshes.
    while start.elapsed() < Duration::from_millis(20) {
        let now = clock.now();
        assert!(now >= last, "{now:?} after {last:?}");
        last = now;
    }
}

#[test]
fn readings_are_monotone_on_every_thread() {
    let clock = CoarseClock::new(Duration::from_micros(50)).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let clock = clock.clone();
            std::thread::spawn(move || {
                let mut last = clock.now();
                for _ in 0..200_000 {
                    let now = clock.now();
                    assert!(now >= last);
                    last = now;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn the_reading_advances() {
    let clock = CoarseClock::new(Duration::from_millis(1)).unwrap();
    let first = clock.now();
    let second = reading_after(&clock, first).expect("the reading moved");
    reading_after(&clock, second).expect("and moved again");
}

#[test]
fn it_reads_its_sources_timeline_never_ahead_of_it() {
    let source = MonotonicClock::new();
    let clock = CoarseClock::with_source(source.clone(), Duration::from_millis(1)).unwrap();
    assert_eq!(clock.unix_origin(), source.unix_origin());
    for _ in 0..1_000 {
        let coarse = clock.now();
        assert!(coarse <= source.now());
    }
    // And it catches up with a reading of the source taken now.
    let exact = source.now();
    reading_after(&clock, exact).expect("caught up with the source");
}

#[test]
fn clones_share_one_reading() {
    let clock = CoarseClock::new(Duration::from_millis(1)).unwrap();
    let clone = clock.clone();
    let seen = clone.now();
    // The clone's reading is the clock's: whatever one saw, the other has seen too.
    assert!(clock.now() >= seen);
    drop(clock);
    reading_after(&clone, seen).expect("the clone alone keeps the thread going");
}

/// Upstream AIMD (its default 5 s timeout, so every request is timed) on a 1 ms
/// coarse clock: requests are admitted, timed and released, and a success never
/// counts as a timeout.
#[cfg(feature = "adaptive")]
#[test]
fn aimd_runs_on_a_coarse_clock() {
    // Held at 4, so that fail-fast is seen at the same count every round.
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(4)
        .max_limit(4)
        .build()
        .unwrap();
    let clock = CoarseClock::new(Duration::from_millis(1)).unwrap();
    let limiter = AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock).unwrap();
    for _ in 0..1_000 {
        let permits: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();
        assert!(limiter.try_acquire().is_err(), "fail-fast at the limit");
        for permit in permits {
            permit.success();
        }
    }
    assert_eq!(limiter.inflight(), 0);
    assert_eq!(limiter.limit(), 4, "successes never shrink AIMD's limit");
    let owned = std::sync::Arc::new(limiter);
    let permit = owned.try_acquire_owned().unwrap();
    std::thread::spawn(move || permit.success()).join().unwrap();
    assert_eq!(owned.inflight(), 0);
}

/// The coarse clock does time requests: a success that the clock saw take longer
/// than AIMD's timeout counts as a drop and shrinks the limit.
#[cfg(feature = "adaptive")]
#[test]
fn aimd_on_a_coarse_clock_sees_a_slow_request() {
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(20)
        .timeout(Duration::from_millis(5))
        .build()
        .unwrap();
    let clock = CoarseClock::new(Duration::from_millis(1)).unwrap();
    let limiter = AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap();
    let permit = limiter.try_acquire().unwrap();
    // Read after the limiter's own reading, so never before it (one thread).
    let started = clock.now();
    // Held until the clock has seen 10 ms go by since the request started.
    reading_after(&clock, started + Duration::from_millis(10)).expect("10 ms went by");
    permit.success();
    assert!(limiter.limit() < 20, "timed out: {}", limiter.limit());
}
