//! Guava's `SmoothWarmingUp`: after idle time, permits cost more, down to the stable
//! interval over the warm-up period.

use std::time::Duration;

use super::super::script::{Arg, whole_micros};
use super::super::share::too_slow;
use super::super::{Algorithm, Facts, Share};
use super::{MAX_COST_US, Rate, Smooth, script_refill, sealed};
use crate::error::ConfigError;

/// Guava's `SmoothWarmingUp`: after idle time the limiter is *cold* and grants
/// slowly, speeding up to the stable rate over the warm-up period.
///
/// Stored permits measure coldness: a new limiter is fully cold. Taking the stored
/// permits above the threshold costs from `cold_factor` stable intervals down to one;
/// the time to go from cold to the threshold is the warm-up. Requests are granted by
/// prepay, and the [`Algorithm`](crate::algorithm::Algorithm) methods behave as for
/// [`SmoothBursty`](super::SmoothBursty) (see [`Smooth`]).
///
/// A zero warm-up means no warm-up: nothing is stored and each permit costs the
/// stable interval. (Guava divides 0 by 0 there, and its `NaN` stops all limiting.)
///
/// The decision's `remaining` reports whole stored permits, so for this limiter it
/// counts coldness; `reset_after` is the time until fully cold again.
///
/// # Examples
///
/// Guava's `testWarmUp`: 2 per second, 4 s of warm-up.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::{Algorithm, SmoothWarmingUp};
/// use tollgate::time::Nanos;
///
/// let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
/// let mut state = warm.initial_state(Nanos::ZERO);
/// let mut now = Nanos::ZERO;
/// let mut waits = Vec::new();
/// for _ in 0..8 {
///     let wait = warm.acquire_wait(&mut state, now, 1)?;
///     waits.push(wait.as_micros());
///     now = now + wait;
/// }
/// assert_eq!(waits, [0, 1_375_000, 1_125_000, 875_000, 625_000, 500_000, 500_000, 500_000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type SmoothWarmingUp = Smooth<WarmingUp>;

/// The shape of [`SmoothWarmingUp`]: the warm-up period and how cold it starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmingUp {
    /// Guava's `warmupPeriodMicros`.
    warmup_us: u64,
    cold_factor: f64,
    threshold_permits: f64,
    max_permits: f64,
    slope: f64,
    cool_down_us: f64,
}

impl WarmingUp {
    /// Guava's `doSetRate` formulas, in its operation order.
    fn new(stable_us: f64, warmup_us: u64, cold_factor: f64) -> Result<WarmingUp, ConfigError> {
        let warmup = warmup_us as f64;
        let (threshold_permits, max_permits, slope, cool_down_us) = if warmup_us == 0 {
            // No warm-up: nothing is ever stored (Guava would divide 0 by 0 here).
            (0.0, 0.0, 0.0, f64::INFINITY)
        } else {
            let cold_interval = stable_us * cold_factor;
            let threshold = 0.5 * warmup / stable_us;
            let max = threshold + 2.0 * warmup / (stable_us + cold_interval);
            let slope = (cold_interval - stable_us) / (max - threshold);
            if !slope.is_finite() {
                return Err(ConfigError::OutOfRange {
                    parameter: "cold_factor",
                    expected: "small enough for a finite warm-up slope",
                });
            }
            (threshold, max, slope, warmup / max)
        };
        Ok(WarmingUp {
            warmup_us,
            cold_factor,
            threshold_permits,
            max_permits,
            slope,
            cool_down_us,
        })
    }

    /// Guava's `permitsToTime`: the interval at `permits` above the threshold.
    fn time_at(&self, stable_us: f64, permits: f64) -> f64 {
        stable_us + permits * self.slope
    }
}

impl sealed::Shape for WarmingUp {
    fn with_rate(
        &self,
        _permits_per_second: f64,
        stable_us: f64,
    ) -> Result<WarmingUp, ConfigError> {
        WarmingUp::new(stable_us, self.warmup_us, self.cold_factor)
    }

    fn max_permits(&self) -> f64 {
        self.max_permits
    }

    fn cool_down_us(&self, _stable_us: f64) -> f64 {
        self.cool_down_us
    }

    fn stored_to_wait(&self, stable_us: f64, stored: f64, take: f64) -> i64 {
        let above = stored - self.threshold_permits;
        let mut take = take;
        let mut micros: i64 = 0;
        if above > 0.0 {
            let taken_above = above.min(take);
            let length =
                self.time_at(stable_us, above) + self.time_at(stable_us, above - taken_above);
            micros = (taken_above * length / 2.0) as i64;
            take -= taken_above;
        }
        micros.saturating_add((stable_us * take) as i64)
    }

    /// Fully cold.
    fn initial_stored(&self) -> f64 {
        self.max_permits
    }
}

/// # Warming up
impl SmoothWarmingUp {
    /// Guava's `RateLimiter.create(permits_per_second, warmup)`: cold factor 3.
    ///
    /// # Errors
    ///
    /// As [`SmoothWarmingUp::with_cold_factor`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SmoothWarmingUp;
    ///
    /// let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4))?;
    /// assert_eq!(warm.max_permits(), 8.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits_per_second: f64, warmup: Duration) -> Result<SmoothWarmingUp, ConfigError> {
        SmoothWarmingUp::with_cold_factor(permits_per_second, warmup, 3.0)
    }

    /// A warming-up limiter whose coldest permit costs `cold_factor` stable
    /// intervals. The warm-up is truncated to whole microseconds, as Guava does; a
    /// zero warm-up means none: each permit costs the stable interval.
    ///
    /// # Errors
    ///
    /// As [`SmoothBursty::new`](super::SmoothBursty::new) for the rate;
    /// [`ConfigError::TooLong`] for a warm-up over 2⁵³ µs (285 years); for
    /// `cold_factor`, [`ConfigError::NotANumber`], [`ConfigError::Infinite`], and
    /// [`ConfigError::OutOfRange`] below 1 or so large that the warm-up's slope is
    /// not finite.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::SmoothWarmingUp;
    ///
    /// let warm = SmoothWarmingUp::with_cold_factor(5.0, Duration::from_secs(4), 10.0)?;
    /// assert_eq!(warm.cold_factor(), 10.0);
    /// assert!(SmoothWarmingUp::with_cold_factor(5.0, Duration::from_secs(4), 0.5).is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_cold_factor(
        permits_per_second: f64,
        warmup: Duration,
        cold_factor: f64,
    ) -> Result<SmoothWarmingUp, ConfigError> {
        let rate = Rate::new(permits_per_second)?;
        let warmup_us = u64::try_from(warmup.as_micros())
            .ok()
            .filter(|&us| us <= MAX_COST_US as u64)
            .ok_or(ConfigError::TooLong {
                parameter: "warmup",
                max: Duration::from_micros(MAX_COST_US as u64),
                within: "the Guava limiters' arithmetic (whole microseconds, exact in a double)",
            })?;
        if cold_factor.is_nan() {
            return Err(ConfigError::NotANumber {
                parameter: "cold_factor",
            });
        }
        if cold_factor.is_infinite() && cold_factor > 0.0 {
            return Err(ConfigError::Infinite {
                parameter: "cold_factor",
            });
        }
        if cold_factor < 1.0 {
            return Err(ConfigError::OutOfRange {
                parameter: "cold_factor",
                expected: "at least 1",
            });
        }
        let shape = WarmingUp::new(rate.interval_us, warmup_us, cold_factor)?;
        Ok(Smooth::with_shape(rate, shape))
    }

    /// The time from fully cold to the threshold under saturated demand.
    pub fn warmup(&self) -> Duration {
        Duration::from_micros(self.shape.warmup_us)
    }

    /// How many stable intervals the coldest permit costs.
    pub fn cold_factor(&self) -> f64 {
        self.shape.cold_factor
    }
}

/// The facts of Guava's warming-up limiter. Its Redis twin reads the bursty one's
/// `{stable interval µs, max permits, capacity}`, then `{threshold permits, slope,
/// cool-down µs}`: the very doubles of this limiter's shape.
impl Facts for SmoothWarmingUp {
    const NAME: &'static str = "smooth_warming_up";
    const SCRIPT: &'static str = include_str!("../../store/redis/scripts/smooth.lua");

    /// The warm-up (from hot back to fully cold), at least one stable interval: the
    /// time of one permit, which is what a limiter without warm-up refills.
    fn window(&self) -> Duration {
        self.warmup().max(self.stable_interval())
    }

    /// The most permits it stores, at least 1.
    fn quota(&self) -> u64 {
        (self.max_permits() as u64).max(1)
    }

    /// The rate divided, rounded down to the next smaller double if the division
    /// rounded up; the warm-up and the cold factor kept.
    fn per_node(&self, share: Share) -> Result<SmoothWarmingUp, ConfigError> {
        SmoothWarmingUp::with_cold_factor(
            share.rate(self.rate()),
            self.warmup(),
            self.cold_factor(),
        )
        .map_err(too_slow)
    }

    fn script_args(&self) -> Result<Vec<Arg>, ConfigError> {
        whole_micros(self.warmup(), "warmup")?;
        let shape = &self.shape;
        // Infinite without warm-up, where nothing is ever stored: the script never
        // uses it, and is sent 0.
        let cool_down_us = if shape.warmup_us == 0 {
            0.0
        } else {
            shape.cool_down_us
        };
        script_refill(shape.max_permits * cool_down_us, "warmup")?;
        Ok(vec![
            Arg::Float(self.rate.interval_us),
            Arg::Float(shape.max_permits),
            Arg::Int(self.capacity()),
            Arg::Float(shape.threshold_permits),
            Arg::Float(shape.slope),
            Arg::Float(cool_down_us),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::{MAX_SCRIPT_MICROS, too_long};
    use crate::algorithm::testing::{at, floats, ms};
    use crate::time::Nanos;

    #[test]
    fn rejects_bad_warmup_and_cold_factor() {
        let longest = Duration::from_micros(1 << 53);
        assert!(matches!(
            SmoothWarmingUp::new(1.0, Duration::MAX),
            Err(ConfigError::TooLong { parameter: "warmup", max, .. }) if max == longest
        ));
        assert!(SmoothWarmingUp::new(1.0, longest).is_ok());
        assert!(SmoothWarmingUp::new(1.0, longest + Duration::from_micros(1)).is_err());
        let cold = |factor| SmoothWarmingUp::with_cold_factor(1.0, ms(1000), factor);
        assert_eq!(
            cold(f64::NAN),
            Err(ConfigError::NotANumber {
                parameter: "cold_factor"
            })
        );
        assert_eq!(
            cold(f64::INFINITY),
            Err(ConfigError::Infinite {
                parameter: "cold_factor"
            })
        );
        for bad in [0.5, 0.0, -2.0, f64::NEG_INFINITY, 1e300, f64::MAX] {
            assert!(
                matches!(cold(bad), Err(ConfigError::OutOfRange { .. })),
                "cold factor {bad}"
            );
        }
        assert!(cold(1.0).is_ok());
    }

    #[test]
    fn zero_warmup_limits_at_the_stable_rate_instead_of_admitting_everything() {
        // Guava: 0 / 0 makes the stored permits NaN, and every wait becomes 0.
        let warm = SmoothWarmingUp::new(5.0, Duration::ZERO).unwrap();
        let mut s = warm.initial_state(Nanos::ZERO);
        assert_eq!(s.stored_permits(), 0.0);
        let waits: Vec<_> = (0..3)
            .map(|_| warm.acquire_wait(&mut s, Nanos::ZERO, 1).unwrap())
            .collect();
        assert_eq!(waits, [ms(0), ms(200), ms(400)]);
        // Idle time stores nothing: still one at a time.
        let later = at(60_000);
        let admitted = warm.acquire(&mut s, later, 1).unwrap();
        assert_eq!((admitted.limit(), admitted.remaining()), (1, 0));
        assert_eq!(s.stored_permits(), 0.0);
        let denied = warm.acquire(&mut s, later, 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(ms(200)));
        // Under a microsecond of warm-up truncates to none, as in Guava.
        let sub = SmoothWarmingUp::new(5.0, Duration::from_nanos(999)).unwrap();
        assert_eq!(sub.max_permits(), 0.0);
    }

    #[test]
    fn script_args_are_guavas_shape() {
        // Guava's testWarmUp: 2 per second, 4 s, cold factor 3.
        let warm = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
        assert_eq!(
            warm.script_args(),
            Ok(vec![
                Arg::Float(500_000.0),
                Arg::Float(8.0),
                Arg::Int(warm.capacity()),
                Arg::Float(4.0),
                Arg::Float(250_000.0),
                Arg::Float(500_000.0),
            ])
        );
    }

    #[test]
    fn the_scripts_maximum_is_the_limiters_to_the_bit() {
        for rate in [
            0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 33.0, 1000.0, 1e6,
        ] {
            for warmup_ms in [1, 7, 250, 1000, 4000, 12_345, 86_400_000] {
                for cold_factor in [1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 1e6] {
                    let warmup = Duration::from_millis(warmup_ms);
                    let warm =
                        SmoothWarmingUp::with_cold_factor(rate, warmup, cold_factor).unwrap();
                    let sent = floats(&warm.script_args().unwrap());
                    assert_eq!(
                        sent[1].to_bits(),
                        warm.max_permits().to_bits(),
                        "{rate}/s, {warmup_ms} ms, cold factor {cold_factor}"
                    );
                    assert!(sent.iter().all(|v| v.is_finite()));
                }
            }
        }
    }

    #[test]
    fn no_warm_up_sends_a_shape_that_stores_nothing() {
        let warm = SmoothWarmingUp::new(5.0, Duration::ZERO).unwrap();
        assert_eq!(
            floats(&warm.script_args().unwrap()),
            [200_000.0, 0.0, warm.capacity() as f64, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn a_warm_up_the_script_cannot_refill_exactly_has_no_script_args() {
        let years = 150.0 * 365.0 * 86_400.0;
        let warm = SmoothWarmingUp::new(1.0, Duration::from_secs_f64(years)).unwrap();
        assert_eq!(
            warm.script_args(),
            Err(too_long("warmup", MAX_SCRIPT_MICROS))
        );
        let warm = SmoothWarmingUp::new(1.0, Duration::from_secs_f64(years / 2.0)).unwrap();
        assert!(warm.script_args().is_ok());
    }
}
