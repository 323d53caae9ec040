//! The samples of one window of a [`WindowedLimit`](super::WindowedLimit), and the
//! one RTT they are summed up as: Netflix's `ImmutableAverageSampleWindow` and
//! `ImmutablePercentileSampleWindow`.

use std::time::Duration;

use super::checks;
use super::windowed::Aggregation;
use crate::error::ConfigError;
use crate::units::duration_from_nanos;

/// The samples of one window summed up as one RTT, the least RTT, the most
/// requests in flight and whether any was dropped: what a
/// [`WindowedLimit`](super::WindowedLimit) feeds its algorithm, public for limits
/// of your own. Netflix's `ImmutableAverageSampleWindow` and
/// `ImmutablePercentileSampleWindow`, kept in place rather than copied on each
/// sample.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
///
/// let p50 = Aggregation::Percentile { percentile: 0.5, capacity: 100 };
/// let mut window = SampleWindow::new(p50)?;
/// for (ms, inflight) in [(5, 3), (50, 9), (7, 4)] {
///     window.add(Duration::from_millis(ms), inflight, false);
/// }
/// assert_eq!(window.tracked_rtt(), Duration::from_millis(7));
/// assert_eq!(window.candidate_rtt(), Some(Duration::from_millis(5)));
/// assert_eq!((window.count(), window.max_inflight(), window.dropped()), (3, 9, false));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SampleWindow {
    min_rtt: Option<Duration>,
    max_inflight: u64,
    count: u64,
    dropped: bool,
    rtts: Rtts,
}

/// What the window keeps of the RTTs, per [`Aggregation`].
#[derive(Clone, Debug)]
enum Rtts {
    /// Their sum in nanoseconds, for the mean.
    Sum(u128),
    /// The first `capacity` of them, for a percentile.
    Kept {
        percentile: f64,
        capacity: usize,
        values: Vec<Duration>,
    },
}

impl SampleWindow {
    /// An empty window aggregating by `aggregation`.
    ///
    /// # Errors
    ///
    /// For [`Aggregation::Percentile`]: [`ConfigError::OutOfRange`] for a
    /// percentile outside `(0, 1]`, [`ConfigError::NotANumber`] /
    /// [`ConfigError::Infinite`] for such a percentile, [`ConfigError::Zero`] for a
    /// zero capacity (no RTT would be kept to take a percentile of).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// assert!(SampleWindow::new(Aggregation::Average).is_ok());
    /// let none = Aggregation::Percentile { percentile: 0.9, capacity: 0 };
    /// assert_eq!(SampleWindow::new(none).unwrap_err().parameter(), "capacity");
    /// ```
    pub fn new(aggregation: Aggregation) -> Result<SampleWindow, ConfigError> {
        check(aggregation)?;
        Ok(SampleWindow::unchecked(aggregation))
    }

    /// A window of an aggregation [`check`] accepted.
    pub(crate) fn unchecked(aggregation: Aggregation) -> SampleWindow {
        let rtts = match aggregation {
            Aggregation::Average => Rtts::Sum(0),
            Aggregation::Percentile {
                percentile,
                capacity,
            } => Rtts::Kept {
                percentile,
                capacity,
                values: Vec::new(),
            },
        };
        SampleWindow {
            min_rtt: None,
            max_inflight: 0,
            count: 0,
            dropped: false,
            rtts,
        }
    }

    /// Adds one sample: its RTT, the requests in flight when it started, and
    /// whether it was dropped. A percentile window keeps the first `capacity` RTTs;
    /// later samples still count, for their drops and requests in flight.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// window.add(Duration::from_millis(10), 1, true);
    /// assert!(window.dropped());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn add(&mut self, rtt: Duration, inflight: u64, dropped: bool) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        self.max_inflight = self.max_inflight.max(inflight);
        self.count = self.count.saturating_add(1);
        self.dropped |= dropped;
        match &mut self.rtts {
            Rtts::Sum(sum) => *sum = sum.saturating_add(rtt.as_nanos()),
            Rtts::Kept {
                capacity, values, ..
            } => {
                if values.len() < *capacity {
                    values.push(rtt);
                }
            }
        }
    }

    /// The least RTT, `None` while empty: what the next window's length follows
    /// (upstream's `getCandidateRttNanos`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// assert_eq!(window.candidate_rtt(), None);
    /// window.add(Duration::from_millis(10), 1, false);
    /// window.add(Duration::from_millis(4), 1, false);
    /// assert_eq!(window.candidate_rtt(), Some(Duration::from_millis(4)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn candidate_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The RTT the window stands for (upstream's `getTrackedRttNanos`): the mean,
    /// truncated to whole nanoseconds, or the percentile of the kept RTTs (the one
    /// at rank `round(n × percentile)`, at least the first; sorting them in place);
    /// zero while empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// assert_eq!(window.tracked_rtt(), Duration::ZERO);
    /// window.add(Duration::from_nanos(10), 1, false);
    /// window.add(Duration::from_nanos(5), 1, false);
    /// assert_eq!(window.tracked_rtt(), Duration::from_nanos(7));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn tracked_rtt(&mut self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        match &mut self.rtts {
            // Truncating, as upstream's integer division.
            Rtts::Sum(sum) => {
                let mean = *sum / u128::from(self.count);
                duration_from_nanos(i128::try_from(mean).unwrap_or(i128::MAX))
            }
            Rtts::Kept {
                percentile, values, ..
            } => {
                values.sort_unstable();
                let rank = (values.len() as f64 * *percentile).round() as usize;
                // Upstream indexes rank − 1 and throws at rank 0 (a low percentile of
                // few samples): take the least RTT there.
                values[rank.clamp(1, values.len()) - 1]
            }
        }
    }

    /// The most requests in flight any sample saw.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// window.add(Duration::from_millis(1), 7, false);
    /// window.add(Duration::from_millis(1), 3, false);
    /// assert_eq!(window.max_inflight(), 7);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_inflight(&self) -> u64 {
        self.max_inflight
    }

    /// How many samples the window holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// window.add(Duration::from_millis(1), 1, false);
    /// assert_eq!(window.count(), 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether any sample was dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// assert!(!SampleWindow::new(Aggregation::Average)?.dropped());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn dropped(&self) -> bool {
        self.dropped
    }

    /// Empties the window, keeping its memory: the next window starts here.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{Aggregation, SampleWindow};
    ///
    /// let mut window = SampleWindow::new(Aggregation::Average)?;
    /// window.add(Duration::from_millis(1), 1, true);
    /// window.clear();
    /// assert_eq!((window.count(), window.dropped()), (0, false));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn clear(&mut self) {
        self.min_rtt = None;
        self.max_inflight = 0;
        self.count = 0;
        self.dropped = false;
        match &mut self.rtts {
            Rtts::Sum(sum) => *sum = 0,
            Rtts::Kept { values, .. } => values.clear(),
        }
    }
}

/// Checks a percentile aggregation: a percentile in `(0, 1]`, a capacity of at
/// least 1.
pub(crate) fn check(aggregation: Aggregation) -> Result<(), ConfigError> {
    if let Aggregation::Percentile {
        percentile,
        capacity,
    } = aggregation
    {
        checks::ratio(
            "percentile",
            percentile,
            |p| p > 0.0 && p <= 1.0,
            "in (0, 1]",
        )?;
        if capacity == 0 {
            return Err(ConfigError::Zero {
                parameter: "capacity",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: Duration = Duration::from_nanos(5000);
    const MODERATE: Duration = Duration::from_nanos(500);
    const LOW: Duration = Duration::from_nanos(10);

    fn average() -> SampleWindow {
        SampleWindow::new(Aggregation::Average).unwrap()
    }

    fn percentile(percentile: f64, capacity: usize) -> SampleWindow {
        SampleWindow::new(Aggregation::Percentile {
            percentile,
            capacity,
        })
        .unwrap()
    }

    /// ImmutableAverageSampleWindowTest.calculateAverage.
    #[test]
    fn calculate_average() {
        let mut window = average();
        window.add(BIG, 1, false);
        window.add(MODERATE, 1, false);
        window.add(LOW, 1, false);
        assert_eq!(window.tracked_rtt(), (BIG + MODERATE + LOW) / 3);
    }

    /// ImmutableAverageSampleWindowTest.droppedSampleShouldChangeTrackedAverage.
    #[test]
    fn dropped_sample_should_change_tracked_average() {
        let mut window = average();
        window.add(BIG, 1, false);
        window.add(MODERATE, 1, false);
        window.add(LOW, 1, false);
        window.add(BIG, 1, true);
        assert_eq!(window.tracked_rtt(), (BIG + MODERATE + LOW + BIG) / 4);
    }

    /// ImmutablePercentileSampleWindowTest.calculateP50.
    #[test]
    fn calculate_p50() {
        let mut window = percentile(0.5, 10);
        window.add(BIG, 0, false);
        window.add(MODERATE, 0, false);
        window.add(LOW, 0, false);
        assert_eq!(window.tracked_rtt(), MODERATE);
    }

    /// ImmutablePercentileSampleWindowTest.droppedSampleShouldChangeTrackedRtt.
    #[test]
    fn dropped_sample_should_change_tracked_rtt() {
        let mut window = percentile(0.5, 10);
        window.add(LOW, 1, false);
        window.add(BIG, 1, true);
        window.add(BIG, 1, true);
        assert_eq!(window.tracked_rtt(), BIG);
    }

    /// ImmutablePercentileSampleWindowTest.p999ReturnsSlowestObservedRtt.
    #[test]
    fn p999_returns_slowest_observed_rtt() {
        let mut window = percentile(0.999, 10);
        window.add(BIG, 1, false);
        window.add(MODERATE, 1, false);
        window.add(LOW, 1, false);
        assert_eq!(window.tracked_rtt(), BIG);
    }

    /// ImmutablePercentileSampleWindowTest.rttObservationOrderDoesntAffectResultValue.
    #[test]
    fn rtt_observation_order_doesnt_affect_result_value() {
        let mut window = percentile(0.999, 10);
        window.add(MODERATE, 1, false);
        window.add(LOW, 1, false);
        window.add(BIG, 1, false);
        window.add(LOW, 1, false);
        assert_eq!(window.tracked_rtt(), BIG);
    }

    #[test]
    fn low_percentile_of_few_samples_is_the_least() {
        // round(3 × 0.1) = 0: upstream would index −1.
        let mut window = percentile(0.1, 10);
        window.add(BIG, 1, false);
        window.add(LOW, 1, false);
        window.add(MODERATE, 1, false);
        assert_eq!(window.tracked_rtt(), LOW);
        let mut top = percentile(1.0, 10);
        top.add(LOW, 1, false);
        top.add(BIG, 1, false);
        assert_eq!(top.tracked_rtt(), BIG);
    }

    #[test]
    fn samples_past_capacity_still_count_drops_and_inflight() {
        let mut window = percentile(0.5, 2);
        window.add(LOW, 1, false);
        window.add(LOW, 2, false);
        window.add(BIG, 9, true);
        assert_eq!(window.count(), 3);
        assert!(window.dropped());
        assert_eq!(window.max_inflight(), 9);
        assert_eq!(window.tracked_rtt(), LOW);
        window.clear();
        assert_eq!(window.count(), 0);
        assert_eq!(window.candidate_rtt(), None);
        assert_eq!(window.tracked_rtt(), Duration::ZERO);
    }

    #[test]
    fn huge_rtts_do_not_overflow() {
        let mut window = average();
        window.add(Duration::MAX, u64::MAX, false);
        window.add(Duration::MAX, 0, false);
        assert_eq!(window.tracked_rtt(), Duration::MAX);
        assert_eq!(window.max_inflight(), u64::MAX);
    }
}
