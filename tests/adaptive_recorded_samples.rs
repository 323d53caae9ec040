//! `AdaptiveLimiter::record_sample`: requests the service timed itself, fed to the
//! algorithm as Envoy's `recordLatencySample(send_time)` feeds its controller, on a
//! `ManualClock`; requests sent before a minRTT epoch are discarded as Envoy does.
#![cfg(feature = "adaptive")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::adaptive::limit::{AimdLimit, EnvoyGradient, EnvoyGradientConfig, LimitAlgorithm};
use tollgate::adaptive::{AdaptiveLimiter, Sample, SampleError, WhenLimited};
use tollgate::time::{Clock, ManualClock, Nanos};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The controller behind the limiter, shared so that the test can look at it.
#[derive(Clone)]
struct Shared(Arc<Mutex<EnvoyGradient>>);

impl LimitAlgorithm for Shared {
    fn limit(&self) -> u64 {
        self.0.lock().unwrap().limit()
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        self.0.lock().unwrap().on_sample(sample)
    }

    fn on_time(&mut self, now: Nanos) -> u64 {
        self.0.lock().unwrap().on_time(now)
    }
}

/// Envoy's `GradientControllerTest.MinRTTEpoch`, through the limiter, where the
/// only time the controller hears of is the end of each recorded request: a
/// request sent before the minRTT window opened is discarded, and one sent after
/// it opened counts, although both are recorded well after the window's deadline
/// (which is when it opens, not when the limiter next hears of the time).
#[test]
fn min_rtt_epoch_through_recorded_samples() {
    let clock = ManualClock::new();
    let config = EnvoyGradientConfig::builder()
        .sample_aggregate_percentile(50.0)
        .concurrency_update_interval(ms(100))
        .jitter_percent(0.0)
        .min_rtt_calc_interval(Duration::from_secs(1))
        .min_rtt_request_count(5)
        .build()
        .unwrap();
    let controller = Shared(Arc::new(Mutex::new(EnvoyGradient::with_seed(
        config,
        clock.now(),
        1,
    ))));
    let limiter =
        AdaptiveLimiter::with_clock(controller.clone(), WhenLimited::FailFast, clock.clone())
            .unwrap();
    let in_window = || controller.0.lock().unwrap().in_min_rtt_window();
    let min_rtt = || controller.0.lock().unwrap().min_rtt();

    // The first minRTT: five requests of 5 ms, ending at 5 ms. The next minRTT
    // window opens 1 s later, at 1 005 ms.
    clock.advance(ms(5));
    for _ in 0..5 {
        limiter
            .record_sample(Sample::new(Nanos::ZERO, ms(5), 1, false))
            .unwrap();
    }
    assert!(!in_window());
    assert_eq!(min_rtt(), Some(Duration::from_micros(5_050)));

    // Nothing reports the time until 1 500 ms.
    clock.advance(ms(1_495));
    let at = |t: u64| Nanos::ZERO + ms(t);
    // Sent at 1 000 ms, before the epoch: discarded, the window stays open.
    let before = Sample::new(at(1_000), ms(500), 1, false);
    limiter.record_sample(before).unwrap();
    assert!(in_window());
    // Sent at 1 100 ms, after the epoch: five of them close the window.
    for _ in 0..5 {
        let after = Sample::new(at(1_100), ms(400), 1, false);
        limiter.record_sample(after).unwrap();
    }
    assert!(!in_window());
    assert_eq!(min_rtt(), Some(Duration::from_micros(405_000)));
}

/// A recorded sample is what a permit ending then would have fed: Netflix's
/// `AbstractLimiter` listener calls `onSample(startTime, rtt, inflight, didDrop)`
/// for both.
#[test]
fn a_recorded_sample_feeds_the_algorithm_as_a_permit_would() {
    let aimd = || {
        AimdLimit::builder()
            .min_limit(1)
            .initial_limit(10)
            .build()
            .unwrap()
    };
    let clock = ManualClock::new();
    let by_permit =
        AdaptiveLimiter::with_clock(aimd(), WhenLimited::FailFast, clock.clone()).unwrap();
    let by_record =
        AdaptiveLimiter::with_clock(aimd(), WhenLimited::FailFast, clock.clone()).unwrap();
    let held: Vec<_> = (0..6).map(|_| by_permit.try_acquire().unwrap()).collect();
    clock.advance(ms(20));
    for (i, permit) in held.into_iter().enumerate() {
        let dropped = i % 3 == 2;
        let inflight = permit.inflight();
        let start = permit.start().unwrap();
        if dropped {
            permit.dropped();
        } else {
            permit.success();
        }
        let sample = Sample::new(start, ms(20), inflight, dropped);
        assert_eq!(by_record.record_sample(sample), Ok(by_permit.limit()));
    }
    assert_eq!(by_record.inflight(), 0);
    assert_eq!(by_record.available_permits(), by_record.limit());
}

/// A sample ending after the limiter's clock was timed on another clock: refused,
/// and the algorithm hears nothing.
#[test]
fn a_sample_ending_in_the_future_is_refused() {
    let clock = ManualClock::new();
    let aimd = AimdLimit::builder()
        .min_limit(1)
        .initial_limit(10)
        .build()
        .unwrap();
    let limiter = AdaptiveLimiter::with_clock(aimd, WhenLimited::FailFast, clock.clone()).unwrap();
    clock.advance(ms(10));
    let late = Sample::new(Nanos::ZERO + ms(5), ms(6), 1, true);
    assert_eq!(
        limiter.record_sample(late),
        Err(SampleError::EndsInTheFuture {
            end: Nanos::ZERO + ms(11),
            now: Nanos::ZERO + ms(10),
        })
    );
    assert_eq!(limiter.limit(), 10);
    // Ending exactly now is fine.
    let now = Sample::new(Nanos::ZERO + ms(4), ms(6), 1, true);
    assert_eq!(limiter.record_sample(now), Ok(9));
}
