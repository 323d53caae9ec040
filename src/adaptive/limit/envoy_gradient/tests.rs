//! Ports of Envoy's
//! `test/extensions/filters/http/adaptive_concurrency/controller/gradient_controller_test.cc`
//! with the same parameters and latencies. Envoy's fixture maps as follows:
//! `makeController` creates the controller and lets 42 simulated hours pass;
//! `sampleLatency(l)` records a request sent `l` before now; `advanceTimeAndRun(d)`
//! lets time pass and fires due timers (here [`LimitAlgorithm::on_time`]);
//! `tryForward` admits while fewer requests are outstanding than the limit, as
//! Envoy's `forwardingDecision` does; the stats gauges become getters
//! (`min_rtt_msecs` is `min_rtt()` in whole ms, `min_rtt_calculation_active` is
//! `in_min_rtt_window()`). Envoy's `NiceMock` random generator returns 0.

use std::time::Duration;

use super::{EnvoyGradient, EnvoyGradientConfig, EnvoyGradientConfigBuilder};
use crate::adaptive::{LimitAlgorithm, Sample};
use crate::error::ConfigError;
use crate::time::Nanos;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// The YAML every controller test starts from: p50, a 100 ms update interval,
/// no jitter, a 30 s minRTT interval and Envoy's other defaults.
fn yaml() -> EnvoyGradientConfigBuilder {
    EnvoyGradientConfig::builder()
        .sample_aggregate_percentile(50.0)
        .concurrency_update_interval(ms(100))
        .jitter_percent(0.0)
        .min_rtt_calc_interval(Duration::from_secs(30))
}

/// Envoy's `GradientControllerTest` fixture.
struct Fixture {
    controller: EnvoyGradient,
    now: Nanos,
    outstanding: u64,
}

impl Fixture {
    /// `makeController`: created at time zero, then 42 hours pass.
    fn new(config: EnvoyGradientConfig) -> Fixture {
        Fixture::with_random(config, || 0)
    }

    fn with_random(
        config: EnvoyGradientConfig,
        random: impl FnMut() -> u64 + Send + 'static,
    ) -> Fixture {
        let mut fixture = Fixture {
            controller: EnvoyGradient::with_random(config, Nanos::ZERO, random),
            now: Nanos::ZERO,
            outstanding: 0,
        };
        fixture.advance(Duration::from_secs(42 * 3600));
        fixture
    }

    fn limit(&self) -> u64 {
        self.controller.limit()
    }

    /// `tryForward(controller, expect_forward_response)`.
    fn try_forward(&mut self, expect_forward: bool) {
        let forward = self.outstanding < self.limit();
        assert_eq!(forward, expect_forward, "outstanding {}", self.outstanding);
        if forward {
            self.outstanding += 1;
        }
    }

    /// `sampleLatency(controller, latency)`.
    fn sample_latency(&mut self, latency: Duration) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.controller
            .on_sample(Sample::new(self.now - latency, latency, 1, false));
    }

    /// `cancelLatencySample()`.
    fn cancel(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.controller
            .on_sample(Sample::new(self.now, Duration::ZERO, 1, true));
    }

    /// `advanceTimeAndRun(d)`.
    fn advance(&mut self, d: Duration) {
        self.now = self.now + d;
        self.controller.on_time(self.now);
    }

    /// `advancePastMinRTTStage`: `request_count + 1` forwarded and sampled.
    fn advance_past_min_rtt_stage(&mut self, latency: Duration) {
        for _ in 0..=self.controller.config().min_rtt_request_count() {
            self.try_forward(true);
            self.sample_latency(latency);
        }
    }

    /// `driveSampleRTTWindows`: 5 samples, then 101 ms, `windows` times.
    fn drive_sample_rtt_windows(&mut self, latency: Duration, windows: usize) {
        for _ in 0..windows {
            for _ in 0..5 {
                self.try_forward(true);
                self.sample_latency(latency);
            }
            self.advance(ms(101));
        }
    }

    /// `verifyMinRTTValue`: the `min_rtt_msecs` gauge.
    fn min_rtt_msecs(&self) -> u128 {
        self.controller.min_rtt().map_or(0, |d| d.as_millis())
    }

    fn min_rtt_active(&self) -> bool {
        self.controller.in_min_rtt_window()
    }
}

// GradientControllerConfigTest.BasicTest
#[test]
fn config_basic() {
    let config = EnvoyGradientConfig::builder()
        .sample_aggregate_percentile(42.5)
        .max_concurrency_limit(1337)
        .concurrency_update_interval(ms(123))
        .min_concurrency_limit(6)
        .jitter_percent(13.2)
        .min_rtt_calc_interval(Duration::from_secs(31))
        .min_rtt_request_count(52)
        .min_concurrency(8)
        .fixed_min_rtt(Duration::from_secs(42))
        .build()
        .unwrap();
    assert_eq!(
        config.min_rtt_calc_interval(),
        Some(Duration::from_secs(31))
    );
    assert_eq!(config.concurrency_update_interval(), ms(123));
    assert_eq!(config.max_concurrency_limit(), 1337);
    assert_eq!(config.min_rtt_request_count(), 52);
    assert_eq!(config.sample_quantile(), 0.425);
    assert_eq!(config.jitter_fraction(), 0.132);
    assert_eq!(config.min_concurrency(), 8);
    assert_eq!(config.min_concurrency_limit(), 6);
    assert_eq!(config.fixed_min_rtt(), Some(Duration::from_secs(42)));
}

// GradientControllerConfigTest.MissingMinRTTValues: neither an interval nor a
// fixed value.
#[test]
fn config_missing_min_rtt_values() {
    let error = EnvoyGradientConfig::builder()
        .sample_aggregate_percentile(42.5)
        .max_concurrency_limit(1337)
        .concurrency_update_interval(ms(123))
        .jitter_percent(13.2)
        .min_rtt_request_count(52)
        .min_concurrency(8)
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        ConfigError::Zero {
            parameter: "min_rtt_calc_interval"
        }
    );
}

// GradientControllerConfigTest.Clamping: Envoy clamps runtime overrides of the
// percentages into [0, 100]; its proto validation refuses them in the
// configuration, which is what a builder is. The same values are refused here.
#[test]
fn config_percentages_outside_0_to_100_are_refused() {
    let base = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(123))
        .min_rtt_calc_interval(Duration::from_secs(31));
    assert!(matches!(
        base.clone().sample_aggregate_percentile(150.0).build(),
        Err(ConfigError::OutOfRange {
            parameter: "sample_aggregate_percentile",
            ..
        })
    ));
    assert_eq!(
        base.clone().sample_aggregate_percentile(-50.5).build(),
        Err(ConfigError::Negative {
            parameter: "sample_aggregate_percentile",
            value: -50.5
        })
    );
    assert!(matches!(
        base.clone().jitter_percent(150.0).build(),
        Err(ConfigError::OutOfRange {
            parameter: "jitter_percent",
            ..
        })
    ));
    assert_eq!(
        base.clone().jitter_percent(-50.5).build(),
        Err(ConfigError::Negative {
            parameter: "jitter_percent",
            value: -50.5
        })
    );
    // The ends of the range are accepted, and read back as Envoy clamps them.
    let ends = base
        .sample_aggregate_percentile(100.0)
        .jitter_percent(0.0)
        .build()
        .unwrap();
    assert_eq!(ends.sample_quantile(), 1.0);
    assert_eq!(ends.jitter_fraction(), 0.0);
}

// GradientControllerConfigTest.DefaultValuesTest
#[test]
fn config_default_values() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(123))
        .min_rtt_calc_interval(Duration::from_secs(31))
        .build()
        .unwrap();
    assert_eq!(
        config.min_rtt_calc_interval(),
        Some(Duration::from_secs(31))
    );
    assert_eq!(config.concurrency_update_interval(), ms(123));
    assert_eq!(config.max_concurrency_limit(), 1000);
    assert_eq!(config.min_rtt_request_count(), 50);
    assert_eq!(config.sample_quantile(), 0.5);
    assert_eq!(config.jitter_fraction(), 0.15);
    assert_eq!(config.min_concurrency(), 3);
    assert_eq!(config.min_concurrency_limit(), 3);
    assert_eq!(config.min_rtt_buffer_fraction(), 0.25);
    assert_eq!(config.fixed_min_rtt(), None);
}

// GradientControllerConfigTest.MinConcurrencyLimitFallsBackToMinRTTCalcConcurrency
// (without the runtime override).
#[test]
fn config_min_concurrency_limit_falls_back_to_min_concurrency() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(123))
        .min_rtt_calc_interval(Duration::from_secs(31))
        .min_concurrency(8)
        .build()
        .unwrap();
    assert_eq!(config.min_concurrency_limit(), 8);
    assert!(config.probe_pins_limit());
}

// GradientControllerConfigTest.MinConcurrencyLimitCanBeOverriddenSeparately
// (without the runtime override).
#[test]
fn config_min_concurrency_limit_set_separately() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(123))
        .min_concurrency_limit(4)
        .min_rtt_calc_interval(Duration::from_secs(31))
        .min_concurrency(8)
        .build()
        .unwrap();
    assert_eq!(config.min_concurrency_limit(), 4);
    assert_eq!(config.min_concurrency(), 8);
    assert!(!config.probe_pins_limit());
}

// GradientControllerTest.MinRTTEpoch: requests started in the previous minRTT
// window are not sampled in the next.
#[test]
fn min_rtt_epoch() {
    let min_concurrency = 2;
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(25)
            .min_concurrency(min_concurrency)
            .min_rtt_buffer_percent(0.0)
            .build()
            .unwrap(),
    );
    let min_rtt = ms(1350);
    c.advance(min_rtt);

    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), u64::from(min_concurrency));
    c.advance_past_min_rtt_stage(ms(1350));
    assert!(!c.min_rtt_active());
    assert_eq!(c.min_rtt_msecs(), 1350);
    // 25 × 1 350 000 µs: the 13th of 25 in [1.3e6, 1.4e6).
    assert_eq!(c.controller.min_rtt(), Some(ms(1350)));

    // Advance time to just before the end of the epoch and inflate the limit.
    let mut last_limit = c.limit();
    for _ in 0..29 {
        c.try_forward(true);
        c.advance(Duration::from_secs(1));
        c.sample_latency(min_rtt);
        c.advance(Duration::ZERO);
        assert!(c.limit() > last_limit);
        last_limit = c.limit();
    }

    // Requests sent now are sampled only in the next minRTT window.
    let mut active = 0;
    while c.outstanding < c.limit() {
        c.try_forward(true);
        active += 1;
    }

    // Into the next minRTT window while they are outstanding.
    c.advance(Duration::from_secs(5));
    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), u64::from(min_concurrency));

    // More than enough to end the window (> 25), but all from the older epoch.
    assert!(active > 25, "{active}");
    for _ in 0..active {
        c.sample_latency(Duration::from_secs(5 * 60));
    }
    assert!(c.min_rtt_active());
}

// GradientControllerTest.MinRTTLogicTest
#[test]
fn min_rtt_logic() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(50)
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    let min_rtt = ms(13);

    // Measuring minRTT from creation, at the minimum concurrency.
    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), 7);
    for _ in 0..7 {
        c.try_forward(true);
    }
    c.try_forward(false);
    c.try_forward(false);
    c.advance(min_rtt);
    for _ in 0..7 {
        c.sample_latency(min_rtt);
    }

    // 43 more requests complete the minRTT calculation.
    for _ in 0..43 {
        assert_eq!(c.limit(), 7);
        c.try_forward(true);
        c.sample_latency(min_rtt);
    }

    assert!(!c.min_rtt_active());
    assert_eq!(c.min_rtt_msecs(), 13);
    // 13 000 + 25/51 × 1 000, truncated to whole µs.
    assert_eq!(c.controller.min_rtt(), Some(us(13_490)));
}

// GradientControllerTest.ExplicitMinConcurrencyLimitDisablesMinRTTProbeClamp
#[test]
fn explicit_min_concurrency_limit_disables_min_rtt_probe_clamp() {
    let mut c = Fixture::new(
        yaml()
            .max_concurrency_limit(100)
            .min_concurrency_limit(2)
            .min_rtt_request_count(5)
            .min_concurrency(7)
            .build()
            .unwrap(),
    );

    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), 2);
    c.advance_past_min_rtt_stage(ms(13));
    assert!(!c.min_rtt_active());

    c.drive_sample_rtt_windows(ms(5), 3);
    let limit_before_probe = c.limit();
    assert!(limit_before_probe > 2);
    // Gradient 2.0 each time: 2 → 6 → 15 → 35.
    assert_eq!(limit_before_probe, 35);

    c.advance(Duration::from_secs(31));
    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), limit_before_probe);

    c.advance(Duration::from_secs(1));
    c.advance_past_min_rtt_stage(ms(13));
    assert!(!c.min_rtt_active());
    assert_eq!(c.limit(), limit_before_probe);
}

// GradientControllerTest.MinRTTProbePinsConcurrencyWhenMinimumLimitUsesLegacyFallback
#[test]
fn min_rtt_probe_pins_concurrency_when_minimum_limit_uses_legacy_fallback() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(5)
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    c.advance_past_min_rtt_stage(ms(5));

    c.drive_sample_rtt_windows(ms(2), 3);
    assert!(c.limit() > 7);

    c.advance(Duration::from_secs(31));
    assert!(c.min_rtt_active());
    assert_eq!(c.limit(), 7);
}

// GradientControllerTest.FixedMinRTT
#[test]
fn fixed_min_rtt() {
    let mut c = Fixture::new(
        EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(50.0)
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(ms(50))
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    let min_rtt = ms(50);

    assert!(!c.min_rtt_active());
    // No latency sampled yet: the limit is the minimum concurrency.
    assert_eq!(c.limit(), 7);
    for _ in 0..7 {
        c.try_forward(true);
    }
    c.try_forward(false);
    c.try_forward(false);
    c.advance(min_rtt);
    for _ in 0..7 {
        assert_eq!(c.limit(), 7);
        c.sample_latency(min_rtt);
    }

    // minRTT has not changed.
    c.advance(ms(101) - min_rtt);
    assert!(!c.min_rtt_active());
    assert_eq!(c.min_rtt_msecs(), 50);
    // sampleRTT 50 500 µs against 62.5 ms buffered: 7 × 1.2376 + √8.663 = 11.6.
    assert_eq!(c.controller.sample_rtt(), Some(us(50_500)));
    assert_eq!(c.limit(), 11);
}

// GradientControllerTest.FixedMinRTTChangeConcurrency
#[test]
fn fixed_min_rtt_change_concurrency() {
    let mut c = Fixture::new(
        EnvoyGradientConfig::builder()
            .sample_aggregate_percentile(50.0)
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(ms(50))
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    let min_rtt = ms(50);
    let mut current = 7;

    // Lower latency: the limit rises.
    assert!(!c.min_rtt_active());
    for _ in 0..current {
        c.try_forward(true);
    }
    c.advance(min_rtt);
    for _ in 0..current {
        c.sample_latency(min_rtt - ms(10));
    }
    c.advance(ms(101) - min_rtt);
    assert!(c.limit() > current);
    assert_eq!(c.limit(), 14, "7 × 62.5/40.5 + √10.8");
    current = c.limit();
    assert!(!c.min_rtt_active());
    assert_eq!(c.min_rtt_msecs(), 50);

    // Higher latency: the limit falls.
    for _ in 0..current {
        c.try_forward(true);
    }
    c.advance(min_rtt);
    for _ in 0..current {
        c.sample_latency(min_rtt + ms(50));
    }
    c.advance(ms(101) - min_rtt);
    assert!(c.limit() < current);
    assert_eq!(c.limit(), 11, "14 × 62.5/104.666 + √8.36");
    assert!(!c.min_rtt_active());
    assert_eq!(c.min_rtt_msecs(), 50);
}

// GradientControllerTest.CancelLatencySample
#[test]
fn cancel_latency_sample() {
    let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
    for i in 1..=5 {
        c.try_forward(true);
        c.sample_latency(ms(i));
    }
    assert_eq!(c.min_rtt_msecs(), 3);
    assert_eq!(c.controller.min_rtt(), Some(us(3_050)));
}

// GradientControllerTest.SamplePercentileProcessTest: a cancelled (dropped)
// request frees its place and teaches nothing.
#[test]
fn sample_percentile_process() {
    let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
    c.try_forward(true);
    c.try_forward(true);
    c.try_forward(true);
    c.try_forward(false);
    c.cancel();
    c.try_forward(true);
    c.try_forward(false);
    assert!(c.min_rtt_active(), "a dropped request is no latency sample");
    assert_eq!(c.controller.samples.count(), 0);
}

// GradientControllerTest.MinRTTBufferTest
#[test]
fn min_rtt_buffer() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(5)
            .min_rtt_buffer_percent(50.0)
            .build()
            .unwrap(),
    );
    assert_eq!(c.limit(), 3);

    // A minRTT of 5 ms.
    c.advance_past_min_rtt_stage(ms(5));
    assert_eq!(c.min_rtt_msecs(), 5);

    // 6 ms is above minRTT, but within the 50% buffer: the limit keeps rising.
    let mut limits = Vec::new();
    for _ in 0..10 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(6));
        }
        c.advance(ms(101));
        assert!(c.limit() > last);
        limits.push(c.limit());
    }
    assert_eq!(limits, [5, 8, 13, 20, 30, 43, 61, 85, 116, 157]);
}

// GradientControllerTest.ConcurrencyLimitBehaviorTestBasic
#[test]
fn concurrency_limit_behavior_basic() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(5)
            .min_rtt_buffer_percent(10.0)
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    assert_eq!(c.limit(), 7);

    c.advance_past_min_rtt_stage(ms(5));
    assert_eq!(c.min_rtt_msecs(), 5);

    // The headroom alone raises the limit, by at most the gradient's 2.
    c.advance(ms(101));
    assert!(c.limit() >= 7);
    assert!(c.limit() as f64 / 7.0 <= 2.0);
    assert_eq!(c.limit(), 10, "7 × 1.1 + √7.7");

    // Latency below minRTT: the limit grows.
    let mut limits = Vec::new();
    for _ in 0..10 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(4));
        }
        c.advance(ms(101));
        assert!(last <= c.limit());
        assert!(last as f64 / c.limit() as f64 >= 0.5);
        limits.push(c.limit());
    }
    assert_eq!(limits, [17, 28, 44, 68, 102, 151, 221, 320, 459, 654]);

    // Latency above minRTT and its buffer: the limit shrinks.
    limits.clear();
    for _ in 0..10 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(6));
        }
        c.advance(ms(101));
        assert!(c.limit() < last);
        assert!(c.limit() >= 7);
        limits.push(c.limit());
    }
    assert_eq!(limits, [624, 596, 570, 546, 523, 502, 482, 463, 445, 428]);
}

// GradientControllerTest.MinRTTReturnToPreviousLimit
#[test]
fn min_rtt_return_to_previous_limit() {
    let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
    assert_eq!(c.limit(), 3);

    c.advance_past_min_rtt_stage(ms(5));
    c.advance(Duration::from_secs(1));

    for _ in 0..5 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(4));
        }
        c.advance(ms(101));
        assert!(c.limit() > last);
    }
    let limit = c.limit();

    // The next minRTT window pins the limit...
    c.advance(Duration::from_secs(31));
    assert_eq!(c.limit(), 3);
    c.advance(Duration::from_secs(1));
    for _ in 0..5 {
        assert_eq!(c.limit(), 3);
        c.try_forward(true);
        c.sample_latency(ms(13));
    }
    // ...and its end restores it.
    assert_eq!(c.limit(), limit);
}

// GradientControllerTest.MinRTTRescheduleTest
#[test]
fn min_rtt_reschedule() {
    let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
    assert_eq!(c.limit(), 3);

    c.advance_past_min_rtt_stage(ms(5));
    c.advance(Duration::from_secs(1));

    for _ in 0..5 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(4));
        }
        c.advance(ms(101));
        assert!(c.limit() > last);
    }

    c.advance(Duration::from_secs(31));
    assert_eq!(c.limit(), 3);

    // No sample window closes during the minRTT window.
    c.advance(ms(101));
    assert_eq!(c.limit(), 3);
    assert_eq!(c.controller.window_deadline(), None);
}

// GradientControllerTest.NoSamplesTest
#[test]
fn no_samples() {
    let mut c = Fixture::new(yaml().min_rtt_request_count(5).build().unwrap());
    assert_eq!(c.limit(), 3);

    c.advance_past_min_rtt_stage(ms(5));

    for _ in 0..5 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(4));
        }
        c.advance(ms(101));
        assert!(c.limit() > last);
    }

    // Without samples the limit stays.
    for _ in 0..5 {
        let old = c.limit();
        c.advance(ms(101));
        assert_eq!(c.limit(), old);
    }
}

/// The two Envoy timer tests use a mock dispatcher whose timers never fire; here
/// the deadlines are read instead, and time advances in 5 ms steps, well short of
/// either.
fn check_timers(jitter_percent: f64, interval: Duration, random: u64, expected: Duration) {
    let config = EnvoyGradientConfig::builder()
        .sample_aggregate_percentile(50.0)
        .concurrency_update_interval(ms(123))
        .jitter_percent(jitter_percent)
        .min_rtt_calc_interval(interval)
        .min_rtt_request_count(5)
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_random(config, Nanos::ZERO, move || random);
    // The sample timer starts at creation.
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(123)));
    assert_eq!(controller.min_rtt_deadline(), None);

    let mut now = Nanos::ZERO;
    for i in 1..=6u64 {
        now = now + ms(5);
        controller.on_sample(Sample::new(now - ms(5), ms(5), 1, false));
        if i == 5 {
            // minRTT set: the next measurement is scheduled, and the sample
            // timer restarts.
            assert_eq!(controller.min_rtt_deadline(), Some(now + expected));
            assert_eq!(controller.window_deadline(), Some(now + ms(123)));
        }
    }
    assert_eq!(
        controller.min_rtt_deadline(),
        Some(Nanos::ZERO + ms(25) + expected)
    );
}

// GradientControllerTest.TimerAccuracyTest: a random value past 10% of the
// interval wraps within it: 15 000 mod 10 000.
#[test]
fn timer_accuracy() {
    check_timers(10.0, Duration::from_secs(100), 15_000, ms(105_000));
}

// GradientControllerTest.TimerAccuracyTestNoJitter
#[test]
fn timer_accuracy_no_jitter() {
    check_timers(0.0, Duration::from_secs(45), 15_000, ms(45_000));
}

// GradientControllerTest.ConsecutiveMinConcurrencyReset: 5 windows in a row at
// the minimum trigger a minRTT measurement.
#[test]
fn consecutive_min_concurrency_reset() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_calc_interval(Duration::from_secs(3600))
            .min_rtt_request_count(5)
            .min_rtt_buffer_percent(0.0)
            .min_concurrency(7)
            .build()
            .unwrap(),
    );
    assert_eq!(c.limit(), 7);

    c.advance_past_min_rtt_stage(ms(5));
    assert_eq!(c.min_rtt_msecs(), 5);

    c.advance(ms(101));
    assert!(c.limit() >= 7);
    assert!(c.limit() as f64 / 7.0 <= 2.0);

    // Latency twice minRTT: the limit falls to the minimum and stays there.
    let elevated = ms(10);
    for _ in 0..5 {
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(elevated);
        }
        c.advance(ms(101));
    }
    assert_eq!(c.limit(), 7);
    assert!(!c.min_rtt_active(), "4 windows at the minimum so far");

    // The 5th starts a minRTT measurement at once; with the new minRTT the limit
    // grows again.
    let mut limits = Vec::new();
    for round in 0..10 {
        let last = c.limit();
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(elevated);
        }
        c.advance(ms(101));
        if round == 0 {
            assert!(c.min_rtt_active());
        }
        assert!(c.limit() >= last);
        limits.push(c.limit());
    }
    assert_eq!(c.min_rtt_msecs(), 10);
    assert_eq!(limits, [7, 7, 7, 9, 12, 15, 18, 22, 26, 31]);
}

// GradientControllerTest.MultiThreadSampleInteractions, without the threads
// (the state machine is `&mut self`; the enforcer serialises): the 5th sample
// ends the minRTT window, and a 6th does not start another.
#[test]
fn sample_after_the_min_rtt_update() {
    let mut c = Fixture::new(
        yaml()
            .min_rtt_calc_interval(Duration::from_secs(3600))
            .min_rtt_request_count(5)
            .min_rtt_buffer_percent(0.0)
            .min_concurrency(100)
            .build()
            .unwrap(),
    );
    for _ in 0..4 {
        c.try_forward(true);
        c.sample_latency(us(1337));
    }
    assert!(c.min_rtt_active());
    c.try_forward(true);
    c.sample_latency(us(1337));
    assert!(!c.min_rtt_active());
    c.try_forward(true);
    c.sample_latency(us(1337));
    assert!(!c.min_rtt_active());
    assert_eq!(c.controller.min_rtt(), Some(us(1_350)), "1 300 + 3/6 × 100");
}

// Beyond Envoy's tests: the builder's checks.

#[test]
fn intervals_are_checked() {
    let fixed = || EnvoyGradientConfig::builder().fixed_min_rtt(ms(5));
    let zero = |parameter| Err(ConfigError::Zero { parameter });
    assert_eq!(fixed().build(), zero("concurrency_update_interval"));
    assert_eq!(
        fixed().concurrency_update_interval(Duration::ZERO).build(),
        zero("concurrency_update_interval")
    );
    assert!(matches!(
        fixed().concurrency_update_interval(Duration::MAX).build(),
        Err(ConfigError::TooLong {
            parameter: "concurrency_update_interval",
            ..
        })
    ));
    let measured = |interval| {
        EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .min_rtt_calc_interval(interval)
            .build()
    };
    assert_eq!(measured(Duration::ZERO), zero("min_rtt_calc_interval"));
    assert_eq!(
        measured(us(999)),
        Err(ConfigError::OutOfRange {
            parameter: "min_rtt_calc_interval",
            expected: "at least 1 ms"
        })
    );
    assert!(measured(ms(1)).is_ok());
    assert!(matches!(
        measured(Duration::MAX),
        Err(ConfigError::TooLong {
            parameter: "min_rtt_calc_interval",
            ..
        })
    ));
    let with_fixed = |value| {
        EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .fixed_min_rtt(value)
            .build()
    };
    assert_eq!(with_fixed(Duration::ZERO), zero("fixed_min_rtt"));
    assert!(matches!(
        with_fixed(Duration::MAX),
        Err(ConfigError::TooLong {
            parameter: "fixed_min_rtt",
            ..
        })
    ));
    // An interval given beside a fixed minRTT is unused, but still checked.
    assert_eq!(
        fixed()
            .concurrency_update_interval(ms(100))
            .min_rtt_calc_interval(Duration::ZERO)
            .build(),
        zero("min_rtt_calc_interval")
    );
}

#[test]
fn counts_are_checked() {
    let base = || {
        EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .min_rtt_calc_interval(Duration::from_secs(30))
    };
    let zero = |parameter| Err(ConfigError::Zero { parameter });
    assert_eq!(
        base().max_concurrency_limit(0).build(),
        zero("max_concurrency_limit")
    );
    assert_eq!(base().min_concurrency(0).build(), zero("min_concurrency"));
    assert_eq!(
        base().min_concurrency_limit(0).build(),
        zero("min_concurrency_limit")
    );
    assert_eq!(
        base().min_rtt_request_count(0).build(),
        zero("min_rtt_request_count")
    );
    let above = |parameter| {
        Err(ConfigError::OutOfRange {
            parameter,
            expected: "at most max_concurrency_limit",
        })
    };
    assert_eq!(
        base().max_concurrency_limit(2).build(),
        above("min_concurrency"),
        "the default min_concurrency is 3"
    );
    assert_eq!(
        base()
            .max_concurrency_limit(10)
            .min_concurrency_limit(11)
            .build(),
        above("min_concurrency_limit")
    );
    let equal = base()
        .max_concurrency_limit(3)
        .min_concurrency_limit(3)
        .build();
    assert!(equal.is_ok());
    let widest = base()
        .max_concurrency_limit(u32::MAX)
        .min_concurrency(u32::MAX)
        .min_rtt_request_count(u32::MAX)
        .build();
    assert!(widest.is_ok());
}

#[test]
fn percentages_are_checked() {
    let base = || {
        EnvoyGradientConfig::builder()
            .concurrency_update_interval(ms(100))
            .min_rtt_calc_interval(Duration::from_secs(30))
    };
    for (parameter, set) in [
        (
            "min_rtt_buffer_percent",
            EnvoyGradientConfigBuilder::min_rtt_buffer_percent
                as fn(EnvoyGradientConfigBuilder, f64) -> EnvoyGradientConfigBuilder,
        ),
        ("jitter_percent", EnvoyGradientConfigBuilder::jitter_percent),
        (
            "sample_aggregate_percentile",
            EnvoyGradientConfigBuilder::sample_aggregate_percentile,
        ),
    ] {
        assert_eq!(
            set(base(), f64::NAN).build(),
            Err(ConfigError::NotANumber { parameter })
        );
        assert_eq!(
            set(base(), f64::INFINITY).build(),
            Err(ConfigError::Infinite { parameter })
        );
        assert_eq!(
            set(base(), f64::NEG_INFINITY).build(),
            Err(ConfigError::Negative {
                parameter,
                value: f64::NEG_INFINITY
            })
        );
        assert!(matches!(
            set(base(), 100.000_001).build(),
            Err(ConfigError::OutOfRange { parameter: p, .. }) if p == parameter
        ));
        assert!(set(base(), 0.0).build().is_ok(), "{parameter} 0");
        assert!(set(base(), 100.0).build().is_ok(), "{parameter} 100");
    }
}

// Beyond Envoy's tests: timing and extremes.

#[test]
fn jitter_stays_within_its_percentage() {
    let config = yaml()
        .min_rtt_calc_interval(Duration::from_secs(10))
        .jitter_percent(15.0)
        .min_rtt_request_count(1)
        .build()
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let mut controller = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, seed);
        controller.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
        let delay = controller
            .min_rtt_deadline()
            .unwrap()
            .saturating_since(Nanos::ZERO + ms(5));
        // "If the interval is 10s and the jitter is 15%, the next window will
        // begin somewhere in the range (10s - 11.5s)."
        assert!(delay >= Duration::from_secs(10), "{delay:?}");
        assert!(delay < ms(11_500), "{delay:?}");
        assert_eq!(delay.subsec_nanos() % 1_000_000, 0, "whole milliseconds");
        seen.insert(delay);
    }
    assert!(
        seen.len() > 100,
        "the seeds spread the windows: {}",
        seen.len()
    );
    // The same seed, the same schedule.
    let draw = |seed| {
        let mut c = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, seed);
        c.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
        c.min_rtt_deadline()
    };
    assert_eq!(draw(9), draw(9));
}

#[test]
fn sample_ends_drive_the_timers() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(100))
        .fixed_min_rtt(ms(10))
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    controller.on_sample(Sample::new(Nanos::ZERO, ms(8), 1, false));
    // This request ends after the window closed: the window closes first, with
    // the first latency only, then this one counts in the next window.
    controller.on_sample(Sample::new(Nanos::ZERO + ms(50), ms(80), 1, false));
    assert_eq!(controller.sample_rtt(), Some(us(8_050)));
    // The window closed at its deadline, 100 ms, and the next runs from there.
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(200)));
    controller.on_time(Nanos::ZERO + ms(200));
    assert_eq!(controller.sample_rtt(), Some(us(80_500)));
}

/// Regression: a minRTT timer reported late opened its window, and so its epoch,
/// at the time it was told, so that a request started between the deadline and
/// that report was discarded, though Envoy (whose timer fires at its deadline)
/// keeps it; the sample window was rearmed from the report too.
#[test]
fn a_late_min_rtt_timer_opens_its_epoch_at_its_deadline() {
    let config = yaml()
        .min_rtt_calc_interval(Duration::from_secs(1))
        .jitter_percent(0.0)
        .min_rtt_request_count(1)
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    controller.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
    assert!(!controller.in_min_rtt_window());
    let due = Nanos::ZERO + ms(5) + Duration::from_secs(1);
    assert_eq!(controller.min_rtt_deadline(), Some(due));
    // Nothing reports the time until this request ends, 50 ms past the deadline;
    // it started 10 ms after it, inside the minRTT window, and counts there.
    controller.on_sample(Sample::new(due + ms(10), ms(40), 1, false));
    assert!(!controller.in_min_rtt_window());
    assert_eq!(controller.min_rtt(), Some(us(40_500)));
    // The next measurement is scheduled from the sample that closed the window.
    assert_eq!(
        controller.min_rtt_deadline(),
        Some(due + ms(50) + Duration::from_secs(1))
    );
}

/// Regression: sample windows caught up on late were each closed at the time
/// reported and rearmed from it; each is closed at its own deadline, in order
/// with the minRTT timer.
#[test]
fn overdue_windows_fire_in_order_at_their_deadlines() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(100))
        .min_rtt_calc_interval(Duration::from_secs(1))
        .jitter_percent(0.0)
        .min_rtt_request_count(1)
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    // minRTT measured at 1 ms: the next measurement at 1 001 ms, windows every
    // 100 ms from 1 ms.
    controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, false));
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(101)));
    controller.on_sample(Sample::new(Nanos::ZERO + ms(2), ms(1), 1, false));
    // Reported 10 s late: the window with the latency closes at 101 ms, the empty
    // ones after it change nothing, and the minRTT window opens at 1 001 ms, its
    // epoch there; the sample window lapses in it.
    controller.on_time(Nanos::ZERO + Duration::from_secs(10));
    assert_eq!(controller.sample_rtt(), Some(us(1_050)));
    assert!(controller.in_min_rtt_window());
    assert_eq!(controller.window_deadline(), None);
    // A request started at 1 002 ms, after the epoch, is kept.
    controller.on_sample(Sample::new(Nanos::ZERO + ms(1_002), ms(3), 1, false));
    assert!(!controller.in_min_rtt_window());
    assert_eq!(controller.min_rtt(), Some(us(3_050)));
}

/// Catching up on a long idle spell takes a few steps, not one per window.
#[test]
fn a_long_idle_spell_is_caught_up_at_once() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(Duration::from_nanos(1))
        .fixed_min_rtt(ms(10))
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    assert_eq!(controller.on_time(Nanos::new(u64::MAX - 1)), 3);
    assert_eq!(controller.window_deadline(), Some(Nanos::MAX));
    assert_eq!(controller.on_time(Nanos::MAX), 3);
}

#[test]
fn time_never_runs_backwards() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(100))
        .fixed_min_rtt(ms(10))
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO + ms(500), 1);
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(600)));
    controller.on_time(Nanos::ZERO);
    controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, false));
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(600)));
    // 1 ms against 12.5 ms buffered: gradient 2, 3 × 2 + √6.
    assert_eq!(controller.on_time(Nanos::ZERO + ms(600)), 8);
    assert_eq!(controller.window_deadline(), Some(Nanos::ZERO + ms(700)));
}

/// Drives a controller with the minimum limit at 4 to a second minRTT
/// measurement, then through one more window at the minimum; answers whether
/// that window started a third measurement.
fn remeasures_after_one_more_window_at_the_minimum(config: EnvoyGradientConfig) -> bool {
    let mut c = Fixture::new(config);
    c.advance_past_min_rtt_stage(ms(5));
    // Eight times minRTT: gradient 0.5, the limit at its minimum, 5 times.
    for _ in 0..5 {
        for _ in 0..5 {
            c.try_forward(true);
            c.sample_latency(ms(40));
        }
        c.advance(ms(101));
        assert_eq!(c.limit(), 4);
    }
    assert!(c.min_rtt_active());
    // minRTT measured at 5 ms again.
    c.advance(ms(10));
    for _ in 0..5 {
        c.try_forward(true);
        c.sample_latency(ms(5));
    }
    assert!(!c.min_rtt_active());
    // Late enough that these requests started after the measurement began.
    c.advance(ms(50));
    for _ in 0..5 {
        c.try_forward(true);
        c.sample_latency(ms(40));
    }
    c.advance(ms(101));
    assert_eq!(c.controller.sample_rtt(), Some(us(40_500)));
    assert_eq!(c.limit(), 4);
    c.min_rtt_active()
}

#[test]
fn separate_minimum_keeps_counting_windows_at_the_minimum() {
    let config = yaml()
        .min_rtt_calc_interval(Duration::from_secs(3600))
        .min_rtt_request_count(5)
        .min_rtt_buffer_percent(0.0);
    // Pinning for a measurement sets the limit, which restarts Envoy's count of
    // windows at the minimum: one more window is not enough.
    let pinning = config.clone().min_concurrency(4).build().unwrap();
    assert!(!remeasures_after_one_more_window_at_the_minimum(pinning));
    // With min_concurrency_limit set, a measurement leaves the limit, and the
    // count, alone (Envoy calls updateConcurrencyLimit only to pin): the count
    // is past 5 already, so the very next window at the minimum measures again.
    let separate = config.min_concurrency_limit(4).build().unwrap();
    assert!(remeasures_after_one_more_window_at_the_minimum(separate));
}

#[test]
fn longest_latencies_and_last_instants_do_not_panic() {
    let config = yaml().min_rtt_request_count(2).build().unwrap();
    let mut controller = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 3);
    controller.on_sample(Sample::new(Nanos::ZERO, Duration::MAX, u64::MAX, false));
    controller.on_sample(Sample::new(Nanos::MAX, Duration::MAX, 0, false));
    // minRTT saturates at u64::MAX nanoseconds.
    assert_eq!(controller.min_rtt(), Some(Duration::from_nanos(u64::MAX)));
    assert!(!controller.in_min_rtt_window());
    for _ in 0..3 {
        controller.on_sample(Sample::new(Nanos::MAX, Duration::MAX, 1, false));
        controller.on_sample(Sample::new(Nanos::MAX, Duration::ZERO, 1, true));
        let limit = controller.on_time(Nanos::MAX);
        assert!((3..=1000).contains(&limit), "{limit}");
    }
    // Deadlines saturate at the last instant, and fire there once per call.
    for deadline in [controller.window_deadline(), controller.min_rtt_deadline()] {
        assert!(deadline.is_none_or(|at| at == Nanos::MAX), "{deadline:?}");
    }

    // The same from a controller created at the last instant.
    let mut late = EnvoyGradient::with_seed(config, Nanos::MAX, 4);
    assert_eq!(late.window_deadline(), Some(Nanos::MAX));
    for _ in 0..3 {
        late.on_sample(Sample::new(Nanos::MAX, us(1), 1, false));
        late.on_time(Nanos::MAX);
    }
    assert!(late.limit() >= 3);
}

#[test]
fn zero_latencies_clamp_the_gradient_to_two() {
    // A zero sampleRTT divides to +inf, and 0/0 to NaN: Envoy's std::min and
    // std::max turn both into 2.0.
    let mut c = Fixture::new(
        yaml()
            .min_rtt_request_count(3)
            .max_concurrency_limit(u32::MAX)
            .build()
            .unwrap(),
    );
    for _ in 0..3 {
        c.try_forward(true);
        c.sample_latency(Duration::ZERO);
    }
    assert_eq!(c.controller.min_rtt(), Some(Duration::ZERO));
    let mut last = c.limit();
    for _ in 0..40 {
        c.try_forward(true);
        c.sample_latency(us(0));
        c.advance(ms(101));
        assert_eq!(c.controller.gradient(), Some(2.0));
        assert!(c.limit() >= last);
        last = c.limit();
    }
    // Doubling (plus headroom) for 40 windows: capped at max_concurrency_limit.
    assert_eq!(c.limit(), u64::from(u32::MAX));
}

#[test]
fn windows_without_samples_change_nothing() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(100))
        .fixed_min_rtt(ms(10))
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_seed(config, Nanos::ZERO, 5);
    for i in 1..=50 {
        assert_eq!(controller.on_time(Nanos::ZERO + ms(100 * i)), 3);
    }
    // Dropped requests are no samples either.
    controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, true));
    assert_eq!(controller.on_time(Nanos::ZERO + ms(10_000)), 3);
    assert_eq!(controller.sample_rtt(), None);
    assert_eq!(controller.gradient(), None);
    // No minRTT window in fixed mode, however long the limit sits at the minimum.
    assert_eq!(controller.min_rtt_deadline(), None);
}

#[test]
fn longest_jitter_range_does_not_overflow() {
    let config = EnvoyGradientConfig::builder()
        .concurrency_update_interval(ms(100))
        .min_rtt_calc_interval(Duration::from_nanos(u64::MAX))
        .jitter_percent(100.0)
        .min_rtt_request_count(1)
        .build()
        .unwrap();
    let mut controller = EnvoyGradient::with_random(config, Nanos::ZERO, || u64::MAX);
    controller.on_sample(Sample::new(Nanos::ZERO, ms(1), 1, false));
    assert_eq!(controller.min_rtt_deadline(), Some(Nanos::MAX));
}
