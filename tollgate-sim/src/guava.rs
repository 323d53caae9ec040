//! Guava's documented warm-up shape, computed from its formulas: the reference the
//! `warmup` scenario draws the simulated `SmoothWarmingUp` against.
//!
//! From the documentation of Guava's `SmoothRateLimiter.SmoothWarmingUp`: a permit
//! costs the area under the interval function between the stored permits before and
//! after it is taken. The function is the stable interval up to
//! `thresholdPermits = 0.5 × warmupPeriod / stableInterval`, then rises linearly to
//! `coldInterval = coldFactor × stableInterval` at
//! `maxPermits = thresholdPermits + 2 × warmupPeriod / (stableInterval + coldInterval)`,
//! so that going from `maxPermits` to `thresholdPermits` takes exactly the warm-up
//! period. A cold limiter holds `maxPermits`; a caller that takes each permit as
//! soon as it is due (Guava's `acquire()`) lets none be stored again.

use std::time::Duration;

/// The warm-up of `rate` permits a second over `warmup`, with `cold_factor`, as
/// Guava documents it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmingUpShape {
    /// Seconds per permit once warm.
    pub stable_interval: f64,
    /// Seconds per permit when cold: `cold_factor × stable_interval`.
    pub cold_interval: f64,
    /// The stored permits below which a permit costs the stable interval.
    pub threshold_permits: f64,
    /// The stored permits of a cold limiter.
    pub max_permits: f64,
}

impl WarmingUpShape {
    /// The shape of `SmoothWarmingUp` at `rate` a second, warming up over `warmup`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_sim::guava::WarmingUpShape;
    ///
    /// let shape = WarmingUpShape::new(10.0, Duration::from_secs(10), 3.0);
    /// assert!((shape.threshold_permits - 50.0).abs() < 1e-9);
    /// assert!((shape.max_permits - 100.0).abs() < 1e-9);
    /// ```
    pub fn new(rate: f64, warmup: Duration, cold_factor: f64) -> WarmingUpShape {
        let stable_interval = 1.0 / rate;
        let cold_interval = stable_interval * cold_factor;
        let warmup = warmup.as_secs_f64();
        let threshold_permits = 0.5 * warmup / stable_interval;
        WarmingUpShape {
            stable_interval,
            cold_interval,
            threshold_permits,
            max_permits: threshold_permits + 2.0 * warmup / (stable_interval + cold_interval),
        }
    }

    /// The interval function at `stored` permits: flat, then the trapezoid's slope.
    pub fn interval_at(&self, stored: f64) -> f64 {
        let slope = (self.cold_interval - self.stable_interval)
            / (self.max_permits - self.threshold_permits);
        self.stable_interval + slope * (stored - self.threshold_permits).max(0.0)
    }

    /// Seconds a permit costs when `stored` permits are stored: the area under the
    /// interval function from `stored − 1` to `stored` (the stable interval below 0).
    pub fn cost(&self, stored: f64) -> f64 {
        let slope = (self.cold_interval - self.stable_interval)
            / (self.max_permits - self.threshold_permits);
        let above = |s: f64| (s - self.threshold_permits).max(0.0);
        let (hi, lo) = (above(stored), above(stored - 1.0));
        self.stable_interval + slope * (hi * hi - lo * lo) / 2.0
    }

    /// The intervals between the first `n + 1` permits of a cold limiter, taken by a
    /// caller that takes each as soon as it is due: what Guava's tests print as
    /// `R1.38, R1.13, …` (the wait before each `acquire()` after the first).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_sim::guava::WarmingUpShape;
    ///
    /// // Guava's `testWarmUp`: 2 a second, 4 s of warm-up, cold factor 3.
    /// let shape = WarmingUpShape::new(2.0, Duration::from_secs(4), 3.0);
    /// let waits = shape.intervals(5);
    /// assert_eq!(waits, [1.375, 1.125, 0.875, 0.625, 0.5]);
    /// ```
    pub fn intervals(&self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|k| self.cost((self.max_permits - k as f64).max(0.0)))
            .collect()
    }

    /// The times of a cold limiter's permits, from 0, for such a caller, up to
    /// `until`.
    pub fn grant_times(&self, until: Duration) -> Vec<Duration> {
        let until = until.as_secs_f64();
        let mut times = Vec::new();
        let (mut t, mut stored) = (0.0, self.max_permits);
        while t < until {
            times.push(Duration::from_secs_f64(t));
            t += self.cost(stored);
            stored = (stored - 1.0).max(0.0);
        }
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guava's published sleeps (`RateLimiterTest`, reproduced in the library's
    /// `tests/smooth.rs`), printed to 10 ms: the shape reproduces each to within
    /// half of that last digit.
    #[test]
    fn the_shape_gives_guavas_published_warm_up_waits() {
        let cases: [(f64, u64, f64, [f64; 7]); 2] = [
            // testWarmUp: "R0.00, R1.38, R1.13, R0.88, R0.63, R0.50, R0.50, R0.50"
            (2.0, 4000, 3.0, [1.38, 1.13, 0.88, 0.63, 0.50, 0.50, 0.50]),
            // testWarmUpWithColdFactor: "R0.00, R1.75, R1.26, R0.76, R0.30, R0.20, …"
            (5.0, 4000, 10.0, [1.75, 1.26, 0.76, 0.30, 0.20, 0.20, 0.20]),
        ];
        for (rate, warmup_ms, cold, published) in cases {
            let shape = WarmingUpShape::new(rate, Duration::from_millis(warmup_ms), cold);
            let waits = shape.intervals(published.len());
            for (k, (w, p)) in waits.iter().zip(published).enumerate() {
                assert!(
                    (w - p).abs() <= 0.005 + 1e-9,
                    "{rate}/s, permit {k}: {w} vs {p}"
                );
            }
        }
    }

    #[test]
    fn going_from_cold_to_warm_takes_the_warm_up_period() {
        let shape = WarmingUpShape::new(10.0, Duration::from_secs(10), 3.0);
        let warm: f64 = shape.intervals(50).iter().sum();
        assert!((warm - 10.0).abs() < 1e-9, "{warm}");
        assert!((shape.interval_at(shape.max_permits) - 0.3).abs() < 1e-12);
        assert!((shape.interval_at(shape.threshold_permits) - 0.1).abs() < 1e-12);
    }
}
