//! [`SendRate`]: the smoothed rate at which answers arrive, measured in half-second
//! buckets, as botocore's `RateClocker` and smithy-rs's `measured_tx_rate`.

use crate::time::Nanos;

use super::cubic::seconds;

/// How much a new bucket's rate weighs against the past.
pub(crate) const DEFAULT_SMOOTHING: f64 = 0.8;

/// The smoothed rate of calls, counted per bucket of `1 / buckets_per_second`
/// seconds: when a call lands in a later bucket, the calls counted since the last
/// one, over the time between the two, are blended in with weight `smoothing`.
///
/// A call in the same bucket as the last changes nothing but the count: the rate is
/// the previous bucket's until the next begins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SendRate {
    smoothing: f64,
    buckets_per_second: f64,
    measured: f64,
    /// The start of the last bucket, in seconds.
    last_bucket: f64,
    count: u64,
}

impl SendRate {
    /// A measure starting at `now` (its first bucket begins at the whole second, as
    /// botocore's), having seen nothing.
    pub(crate) fn new(smoothing: f64, buckets_per_second: f64, now: Nanos) -> SendRate {
        SendRate {
            smoothing,
            buckets_per_second,
            measured: 0.0,
            last_bucket: seconds(now).floor(),
            count: 0,
        }
    }

    /// Counts one call at `t` seconds; the measured rate after it.
    pub(crate) fn record_at(&mut self, t: f64) -> f64 {
        let bucket = (t * self.buckets_per_second).floor() / self.buckets_per_second;
        self.count = self.count.saturating_add(1);
        if bucket > self.last_bucket {
            let current = self.count as f64 / (bucket - self.last_bucket);
            self.measured = current * self.smoothing + self.measured * (1.0 - self.smoothing);
            self.count = 0;
            self.last_bucket = bucket;
        }
        self.measured
    }

    /// The rate measured so far, in calls per second.
    pub(crate) fn measured(&self) -> f64 {
        self.measured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // botocore tests/unit/retries/test_adaptive.py, TestRateClocker: the fake clock
    // read 0 at creation.

    fn clocker() -> SendRate {
        SendRate::new(DEFAULT_SMOOTHING, 2.0, Nanos::ZERO)
    }

    #[test]
    fn initial_rate_is_0() {
        assert_eq!(clocker().measured(), 0.0);
    }

    #[test]
    fn time_updates_if_after_bucket_range() {
        assert_eq!(clocker().record_at(1.0), 0.8);
    }

    #[test]
    fn can_measure_constant_rate() {
        let mut rate = clocker();
        for t in 1..=20 {
            rate.record_at(t as f64);
        }
        assert!((rate.measured() - 1.0).abs() < 1e-7);
    }

    #[test]
    fn uses_smoothing_to_favor_recent_weights() {
        let mut rate = clocker();
        for t in [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0] {
            rate.record_at(t);
        }
        assert!(rate.measured() >= 1.99 && rate.measured() <= 2.0);
        rate.record_at(14.0);
        assert!(rate.measured() >= 0.1 && rate.measured() <= 2.0);
    }

    #[test]
    fn noop_when_delta_t_is_0() {
        let mut rate = clocker();
        for t in [1.0, 1.0, 1.0, 2.0, 3.0] {
            rate.record_at(t);
        }
        assert!(rate.measured() >= 1.0);
    }

    #[test]
    fn times_are_grouped_per_time_bucket() {
        let mut rate = clocker();
        for t in [0.1, 0.2, 0.3, 0.4, 0.49] {
            rate.record_at(t);
        }
        assert_eq!(rate.measured(), 0.0);
        // Six calls in the bucket [0, 0.5): 12 a second.
        rate.record_at(0.5);
        assert_eq!(rate.measured(), 12.0 * 0.8);
    }

    #[test]
    fn reads_the_clock_in_nanoseconds() {
        let mut rate = clocker();
        assert_eq!(rate.record_at(seconds(Nanos::new(1_000_000_000))), 0.8);
        assert!(rate.record_at(seconds(Nanos::MAX)).is_finite());
    }
}
