//! The running measurements of RTT the gradient algorithms keep: Netflix's
//! `ExpAvgMeasurement` and `MinimumMeasurement`.

use crate::error::ConfigError;

/// An exponential moving average over about `window` samples, whose first `warmup`
/// samples are averaged plainly: Netflix's `ExpAvgMeasurement`, the long-term RTT
/// [`Gradient2Limit`](super::Gradient2Limit) compares each sample with (its
/// `long_window`, after 10 plain samples). Public for limits of your own.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::ExpAvg;
///
/// let mut long_rtt = ExpAvg::new(100, 2)?;
/// assert_eq!(long_rtt.add(10.0), 10.0);
/// assert_eq!(long_rtt.add(20.0), 15.0); // warm-up: the plain mean
/// // Then each sample weighs 2 / (100 + 1).
/// assert!((long_rtt.add(116.0) - 17.0).abs() < 1e-9);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ExpAvg {
    value: f64,
    sum: f64,
    /// The weight of a new sample after warm-up: `2 / (window + 1)`.
    factor: f64,
    warmup: u32,
    count: u32,
}

impl ExpAvg {
    /// An average over about `window` samples after `warmup` plain ones.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero `window`: a new sample would weigh 2, and
    /// the average would swing past it and below zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::ExpAvg;
    ///
    /// assert!(ExpAvg::new(600, 10).is_ok());
    /// assert_eq!(ExpAvg::new(0, 10).unwrap_err().parameter(), "window");
    /// ```
    pub fn new(window: u64, warmup: u32) -> Result<ExpAvg, ConfigError> {
        if window == 0 {
            return Err(ConfigError::Zero {
                parameter: "window",
            });
        }
        Ok(ExpAvg::unchecked(window, warmup))
    }

    /// [`new`](Self::new) of a window already checked to be at least 1.
    pub(crate) fn unchecked(window: u64, warmup: u32) -> ExpAvg {
        ExpAvg {
            value: 0.0,
            sum: 0.0,
            factor: 2.0 / (window as f64 + 1.0),
            warmup,
            count: 0,
        }
    }

    /// Adds a sample and answers the average.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::ExpAvg;
    ///
    /// let mut avg = ExpAvg::new(10, 0)?;
    /// assert!((avg.add(11.0) - 2.0).abs() < 1e-9); // from 0, a weight of 2/11
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }

    /// The average; 0 before any sample.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::ExpAvg;
    ///
    /// assert_eq!(ExpAvg::new(600, 10)?.get(), 0.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn get(&self) -> f64 {
        self.value
    }

    /// Multiplies the average by `k` (upstream's `update(v -> v * k)`): how
    /// Gradient2 pulls a long-term RTT that lags far above the current one down by
    /// 5% a sample.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::ExpAvg;
    ///
    /// let mut avg = ExpAvg::new(600, 10)?;
    /// avg.add(100.0);
    /// avg.scale(0.95);
    /// assert_eq!(avg.get(), 95.0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn scale(&mut self, k: f64) {
        self.value *= k;
    }
}

/// The least sample since the last reset; 0 means none, as upstream
/// (`MinimumMeasurement`), so a zero sample is replaced by the next one.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Minimum {
    value: f64,
}

impl Minimum {
    /// Adds a sample and answers the minimum.
    pub(crate) fn add(&mut self, sample: f64) -> f64 {
        if self.value == 0.0 || sample < self.value {
            self.value = sample;
        }
        self.value
    }

    /// The minimum, 0 if none.
    pub(crate) fn get(&self) -> f64 {
        self.value
    }

    /// Forgets every sample.
    pub(crate) fn reset(&mut self) {
        self.value = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ExpAvgMeasurementTest.testWarmup.
    #[test]
    fn warmup_then_exponential() {
        let mut avg = ExpAvg::new(100, 10).unwrap();
        let expected = [10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5, 14.0, 14.5];
        for (i, want) in expected.iter().enumerate() {
            avg.add(i as f64 + 10.0);
            assert!((avg.get() - want).abs() <= 0.01, "{i}: {}", avg.get());
        }
        avg.add(100.0);
        assert!((avg.get() - 16.2).abs() <= 0.1, "{}", avg.get());
    }

    #[test]
    fn minimum_treats_zero_as_none() {
        let mut min = Minimum::default();
        assert_eq!(min.add(0.0), 0.0);
        assert_eq!(min.add(5.0), 5.0);
        assert_eq!(min.add(7.0), 5.0);
        assert_eq!(min.add(3.0), 3.0);
        min.reset();
        assert_eq!(min.get(), 0.0);
        assert_eq!(min.add(9.0), 9.0);
    }
}
