//! [`WindowedLimit`]: feeds another limit algorithm one sample per window (Netflix's
//! `WindowedLimit`).
//!
//! Samples are gathered into windows of twice the least RTT seen, kept within
//! `[min_window, max_window]`. When a sample ends past the window, the window closes
//! and, if it holds at least `window_size` samples, the wrapped algorithm gets one
//! sample summing it up: the mean RTT (or a percentile), the most requests in flight,
//! and whether any was dropped. RTTs below a threshold (cache hits, health checks)
//! are left out.

use std::time::Duration;

use super::LimitAlgorithm;
use super::checks;
use super::window::{self, SampleWindow};
use crate::adaptive::Sample;
use crate::error::ConfigError;
use crate::time::Nanos;

/// Upstream's defaults.
const DEFAULT_MIN_WINDOW: Duration = Duration::from_secs(1);
const DEFAULT_MAX_WINDOW: Duration = Duration::from_secs(1);
const DEFAULT_WINDOW_SIZE: u64 = 10;
const DEFAULT_MIN_RTT_THRESHOLD: Duration = Duration::from_micros(100);
/// Upstream's floor on either window length.
const SHORTEST_WINDOW: Duration = Duration::from_millis(100);
/// Upstream's floor on the samples a window needs.
const LEAST_WINDOW_SIZE: u64 = 10;

/// How a window's RTTs become the one RTT the wrapped algorithm sees.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::limit::{Aggregation, AimdLimit, WindowedBuilder};
///
/// let p90 = Aggregation::Percentile { percentile: 0.9, capacity: 1000 };
/// let windowed = WindowedBuilder::new().aggregation(p90).build(AimdLimit::new())?;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Aggregation {
    /// The mean RTT (upstream's `AverageSampleWindowFactory`, the default).
    #[default]
    Average,
    /// A percentile of the window's first `capacity` RTTs (upstream's
    /// `PercentileSampleWindowFactory.of(percentile, capacity)`): the RTT of rank
    /// `round(n × percentile)` among them, at least the least.
    Percentile {
        /// In `(0, 1]`; 1 is the slowest RTT.
        percentile: f64,
        /// How many RTTs a window keeps, at least 1. Samples past it still count
        /// towards the window's size, its drops and its requests in flight
        /// (upstream ignores them whole).
        capacity: usize,
    },
}

/// Another limit algorithm fed one sample per window: Netflix's `WindowedLimit`.
///
/// Time comes from the samples' `start + rtt` (and from
/// [`on_time`](LimitAlgorithm::on_time), which closes a window that is due, at its
/// deadline: upstream waits for the next sample to close it, and counts that sample
/// in). A sample whose
/// `start + rtt` saturates at [`Nanos::MAX`] is counted but closes no window.
///
/// With [`Aggregation::Percentile`] three things differ from upstream: samples past
/// the capacity still count towards the window's size, drops and requests in flight
/// (upstream ignores them whole, so a drop among them goes unheard); a percentile of
/// 1 is accepted (the slowest RTT; upstream requires `< 1`); and a rank that rounds
/// to 0 takes the least RTT (upstream indexes −1 and throws).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm, WindowedLimit};
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let ms = Duration::from_millis;
/// let mut windowed = WindowedLimit::new(AimdLimit::builder().min_limit(1).build()?);
/// // The first sample ends after the first deadline, 0: it closes a window of one
/// // sample, too few to pass on. The next window lasts 1 s.
/// windowed.on_sample(Sample::new(Nanos::ZERO, ms(1), 15, false));
/// for i in 0..10 {
///     windowed.on_sample(Sample::new(Nanos::from_duration(ms(10 * i)), ms(1), 15, false));
/// }
/// assert_eq!(windowed.limit(), 20);
/// // This one ends past the window and closes it: 11 samples, one dropped.
/// windowed.on_sample(Sample::new(Nanos::from_duration(ms(1000)), ms(5), 15, true));
/// assert_eq!(windowed.limit(), 18);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct WindowedLimit<L> {
    delegate: L,
    window: SampleWindow,
    /// The window closes with the first sample ending after this.
    next_update: Nanos,
    /// The start of the latest sample: what the delegate's sample starts at.
    last_start: Nanos,
    min_window: Duration,
    max_window: Duration,
    window_size: u64,
    min_rtt_threshold: Duration,
}

/// The settings of a [`WindowedLimit`], checked by [`build`](WindowedBuilder::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{Gradient2Limit, WindowedBuilder};
///
/// let windowed = WindowedBuilder::new()
///     .min_window(Duration::from_millis(200))
///     .max_window(Duration::from_secs(2))
///     .window_size(20)
///     .build(Gradient2Limit::new())?;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct WindowedBuilder {
    min_window: Duration,
    max_window: Duration,
    window_size: u64,
    min_rtt_threshold: Duration,
    aggregation: Aggregation,
}

impl<L: LimitAlgorithm> WindowedLimit<L> {
    /// `delegate` windowed with upstream's defaults: windows of 1 s, at least 10
    /// samples each, RTTs under 100 µs left out, the mean RTT.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{LimitAlgorithm, VegasLimit, WindowedLimit};
    ///
    /// let windowed = WindowedLimit::new(VegasLimit::new());
    /// assert_eq!(windowed.limit(), 20);
    /// ```
    pub fn new(delegate: L) -> WindowedLimit<L> {
        WindowedBuilder::new().into_limit(delegate)
    }

    /// The wrapped algorithm.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Gradient2Limit, WindowedLimit};
    ///
    /// let windowed = WindowedLimit::new(Gradient2Limit::new());
    /// assert_eq!(windowed.delegate().long_rtt_nanos(), 0.0);
    /// ```
    pub fn delegate(&self) -> &L {
        &self.delegate
    }

    /// The wrapped algorithm, unwrapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm, WindowedLimit};
    ///
    /// let aimd = WindowedLimit::new(AimdLimit::new()).into_inner();
    /// assert_eq!(aimd.limit(), 20);
    /// ```
    pub fn into_inner(self) -> L {
        self.delegate
    }

    /// The instant after which the current window closes: by the first sample ending
    /// later, or by [`on_time`](LimitAlgorithm::on_time) at a later instant.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, LimitAlgorithm, WindowedLimit};
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let mut windowed = WindowedLimit::new(AimdLimit::new());
    /// assert_eq!(windowed.window_end(), Nanos::ZERO);
    /// windowed.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(1), 1, false));
    /// // Twice the least RTT, raised to the 1 s minimum window.
    /// assert_eq!(windowed.window_end(), Nanos::from_duration(Duration::from_millis(1001)));
    /// ```
    pub fn window_end(&self) -> Nanos {
        self.next_update
    }

    /// Closes the window at `at`: the next one ends twice its least RTT later, and
    /// the delegate hears of it if it holds enough samples.
    fn close(&mut self, at: Nanos) {
        let Some(candidate) = self.window.candidate_rtt() else {
            return;
        };
        let length = candidate
            .saturating_mul(2)
            .clamp(self.min_window, self.max_window);
        self.next_update = at + length;
        if self.window.count() >= self.window_size {
            let summary = Sample::new(
                self.last_start,
                self.window.tracked_rtt(),
                self.window.max_inflight(),
                self.window.dropped(),
            );
            self.delegate.on_sample(summary);
        }
        // A window short of samples is dropped whole: for a quiet service it could
        // hold only a misleadingly fast health check.
        self.window.clear();
    }
}

impl WindowedBuilder {
    /// Upstream's defaults: windows of 1 s (both bounds), at least 10 samples each,
    /// RTTs under 100 µs left out, [`Aggregation::Average`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, WindowedBuilder};
    ///
    /// let windowed = WindowedBuilder::new().build(AimdLimit::new())?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new() -> WindowedBuilder {
        WindowedBuilder {
            min_window: DEFAULT_MIN_WINDOW,
            max_window: DEFAULT_MAX_WINDOW,
            window_size: DEFAULT_WINDOW_SIZE,
            min_rtt_threshold: DEFAULT_MIN_RTT_THRESHOLD,
            aggregation: Aggregation::Average,
        }
    }

    /// The shortest window, at least 100 ms (default 1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, WindowedBuilder};
    ///
    /// let short = WindowedBuilder::new().min_window(Duration::from_millis(99));
    /// assert!(short.build(AimdLimit::new()).is_err());
    /// ```
    pub fn min_window(self, min_window: Duration) -> WindowedBuilder {
        WindowedBuilder { min_window, ..self }
    }

    /// The longest window, at least 100 ms and the shortest (default 1 s).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, WindowedBuilder};
    ///
    /// let windowed = WindowedBuilder::new().max_window(Duration::from_secs(5));
    /// assert!(windowed.build(AimdLimit::new()).is_ok());
    /// ```
    pub fn max_window(self, max_window: Duration) -> WindowedBuilder {
        WindowedBuilder { max_window, ..self }
    }

    /// The samples a window needs to be passed on, at least 10 (default 10).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{AimdLimit, WindowedBuilder};
    ///
    /// assert!(WindowedBuilder::new().window_size(9).build(AimdLimit::new()).is_err());
    /// ```
    pub fn window_size(self, window_size: u64) -> WindowedBuilder {
        WindowedBuilder {
            window_size,
            ..self
        }
    }

    /// Samples with a shorter RTT are left out (default 100 µs; zero keeps all).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{AimdLimit, WindowedBuilder};
    ///
    /// let all = WindowedBuilder::new().min_rtt_threshold(Duration::ZERO);
    /// assert!(all.build(AimdLimit::new()).is_ok());
    /// ```
    pub fn min_rtt_threshold(self, min_rtt_threshold: Duration) -> WindowedBuilder {
        WindowedBuilder {
            min_rtt_threshold,
            ..self
        }
    }

    /// How a window's RTTs are summed up (default [`Aggregation::Average`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::limit::{Aggregation, AimdLimit, WindowedBuilder};
    ///
    /// let p100 = Aggregation::Percentile { percentile: 1.0, capacity: 100 };
    /// assert!(WindowedBuilder::new().aggregation(p100).build(AimdLimit::new()).is_ok());
    /// ```
    pub fn aggregation(self, aggregation: Aggregation) -> WindowedBuilder {
        WindowedBuilder {
            aggregation,
            ..self
        }
    }

    /// Checks the settings and wraps `delegate`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero window length, `window_size` or percentile
    /// `capacity`; [`ConfigError::OutOfRange`] for a window length under 100 ms,
    /// `min_window > max_window`, a `window_size` under 10 or a percentile outside
    /// `(0, 1]`; [`ConfigError::NotANumber`] / [`ConfigError::Infinite`] for such a
    /// percentile.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::adaptive::limit::{Aggregation, AimdLimit, WindowedBuilder};
    ///
    /// let p0 = Aggregation::Percentile { percentile: 0.0, capacity: 100 };
    /// assert_eq!(
    ///     WindowedBuilder::new().aggregation(p0).build(AimdLimit::new()).unwrap_err(),
    ///     ConfigError::OutOfRange { parameter: "percentile", expected: "in (0, 1]" }
    /// );
    /// ```
    pub fn build<L: LimitAlgorithm>(self, delegate: L) -> Result<WindowedLimit<L>, ConfigError> {
        const FLOOR: &str = "at least 100 ms";
        checks::at_least("min_window", self.min_window, SHORTEST_WINDOW, FLOOR)?;
        checks::at_least("max_window", self.max_window, SHORTEST_WINDOW, FLOOR)?;
        if self.min_window > self.max_window {
            return Err(ConfigError::OutOfRange {
                parameter: "min_window",
                expected: "at most max_window",
            });
        }
        if self.window_size == 0 {
            return Err(ConfigError::Zero {
                parameter: "window_size",
            });
        }
        if self.window_size < LEAST_WINDOW_SIZE {
            return Err(ConfigError::OutOfRange {
                parameter: "window_size",
                expected: "at least 10",
            });
        }
        window::check(self.aggregation)?;
        Ok(self.into_limit(delegate))
    }

    fn into_limit<L>(self, delegate: L) -> WindowedLimit<L> {
        WindowedLimit {
            delegate,
            window: SampleWindow::unchecked(self.aggregation),
            next_update: Nanos::ZERO,
            last_start: Nanos::ZERO,
            min_window: self.min_window,
            max_window: self.max_window,
            window_size: self.window_size,
            min_rtt_threshold: self.min_rtt_threshold,
        }
    }
}

impl Default for WindowedBuilder {
    /// [`WindowedBuilder::new`].
    fn default() -> WindowedBuilder {
        WindowedBuilder::new()
    }
}

impl<L: LimitAlgorithm> LimitAlgorithm for WindowedLimit<L> {
    fn limit(&self) -> u64 {
        self.delegate.limit()
    }

    fn on_sample(&mut self, sample: Sample) -> u64 {
        if sample.rtt < self.min_rtt_threshold {
            return self.delegate.limit();
        }
        self.window.add(sample.rtt, sample.inflight, sample.dropped);
        self.last_start = sample.start;
        let end = sample.end();
        // An end at the clock's last instant is no instant at all (a saturated
        // `start + rtt`): counted, but it would push every later window past reach.
        if end > self.next_update && end < Nanos::MAX {
            self.close(end);
        }
        self.delegate.limit()
    }

    /// Closes a window that is due at its deadline, not at `now`: the next window
    /// runs from there, as it would have had a timer closed it on time.
    fn on_time(&mut self, now: Nanos) -> u64 {
        if self.window.count() > 0 && now > self.next_update {
            self.close(self.next_update);
        }
        self.delegate.on_time(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adaptive::limit::{AimdLimit, Gradient2Limit, VegasLimit};

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * 1_000_000)
    }

    /// Counts what reaches the delegate.
    #[derive(Debug, Default)]
    struct Count(Vec<Sample>);

    impl LimitAlgorithm for Count {
        fn limit(&self) -> u64 {
            self.0.len() as u64
        }

        fn on_sample(&mut self, sample: Sample) -> u64 {
            self.0.push(sample);
            self.limit()
        }
    }

    #[test]
    fn on_time_closes_a_due_window() {
        let mut windowed = WindowedBuilder::new()
            .min_window(ms(100))
            .build(Count::default())
            .unwrap();
        windowed.on_sample(Sample::new(at(0), ms(1), 1, false));
        assert_eq!(windowed.window_end(), at(101));
        for i in 0..10 {
            windowed.on_sample(Sample::new(at(10 + i), ms(2), 5 + i, i == 3));
        }
        // Not due yet.
        assert_eq!(windowed.on_time(at(101)), 0);
        assert_eq!(windowed.on_time(at(102)), 1);
        let fed = windowed.delegate().0[0];
        assert_eq!(fed, Sample::new(at(19), ms(2), 14, true));
        // The next window: twice the least RTT, raised to 100 ms, from the
        // deadline the last one closed at (101), not from the tick (102).
        assert_eq!(windowed.window_end(), at(201));
        // An empty window is not closed.
        assert_eq!(windowed.on_time(at(1000)), 1);
        assert_eq!(windowed.window_end(), at(201));
    }

    #[test]
    fn short_rtts_are_left_out_and_short_windows_dropped() {
        let mut windowed = WindowedBuilder::new().build(Count::default()).unwrap();
        windowed.on_sample(Sample::new(at(0), Duration::from_micros(99), 1, true));
        assert_eq!(windowed.window_end(), Nanos::ZERO);
        windowed.on_sample(Sample::new(at(0), ms(1), 1, false));
        assert_eq!(windowed.window_end(), at(1001));
        for i in 0..8 {
            windowed.on_sample(Sample::new(at(i), ms(1), 1, false));
        }
        // Nine samples: closed without a word to the delegate.
        windowed.on_sample(Sample::new(at(1001), ms(1), 1, false));
        assert_eq!(windowed.limit(), 0);
        assert_eq!(windowed.window_end(), at(2002));
    }

    #[test]
    fn window_length_follows_twice_the_least_rtt_within_bounds() {
        let mut windowed = WindowedBuilder::new()
            .min_window(ms(100))
            .max_window(ms(500))
            .build(Count::default())
            .unwrap();
        windowed.on_sample(Sample::new(at(0), ms(120), 1, false));
        assert_eq!(windowed.window_end(), at(120 + 240));
        windowed.on_sample(Sample::new(at(300), ms(400), 1, false));
        assert_eq!(windowed.window_end(), at(700 + 500));
    }

    #[test]
    fn wraps_boxed_algorithms() {
        let boxed: Box<dyn LimitAlgorithm> = Box::new(VegasLimit::new());
        let windowed = WindowedLimit::new(boxed);
        assert_eq!(windowed.limit(), 20);
    }

    #[test]
    fn builder_rejects_bad_settings() {
        let build = |b: WindowedBuilder| b.build(AimdLimit::new()).unwrap_err();
        let w = WindowedBuilder::new;
        assert_eq!(
            build(w().min_window(Duration::ZERO)),
            ConfigError::Zero {
                parameter: "min_window"
            }
        );
        assert_eq!(build(w().max_window(ms(99))).parameter(), "max_window");
        assert_eq!(
            build(w().min_window(ms(600)).max_window(ms(500))),
            ConfigError::OutOfRange {
                parameter: "min_window",
                expected: "at most max_window"
            }
        );
        assert_eq!(
            build(w().window_size(0)),
            ConfigError::Zero {
                parameter: "window_size"
            }
        );
        assert_eq!(build(w().window_size(9)).parameter(), "window_size");
        let p = |percentile, capacity| {
            w().aggregation(Aggregation::Percentile {
                percentile,
                capacity,
            })
        };
        assert_eq!(
            build(p(f64::NAN, 10)),
            ConfigError::NotANumber {
                parameter: "percentile"
            }
        );
        assert_eq!(build(p(1.01, 10)).parameter(), "percentile");
        assert_eq!(build(p(-0.5, 10)).parameter(), "percentile");
        assert_eq!(
            build(p(f64::INFINITY, 10)),
            ConfigError::Infinite {
                parameter: "percentile"
            }
        );
        assert_eq!(
            build(p(0.5, 0)),
            ConfigError::Zero {
                parameter: "capacity"
            }
        );
        assert!(p(1.0, 1).build(AimdLimit::new()).is_ok());
        assert!(
            w().max_window(Duration::MAX)
                .build(AimdLimit::new())
                .is_ok()
        );
    }

    #[test]
    fn extremes_stay_within_bounds() {
        let inputs = [
            (Nanos::ZERO, Duration::ZERO, u64::MAX, false),
            (Nanos::ZERO, Duration::MAX, u64::MAX, true),
            (Nanos::MAX, Duration::MAX, 0, false),
            (Nanos::MAX, Duration::ZERO, u64::MAX, true),
            (Nanos::new(5), Duration::from_nanos(1), u64::MAX, false),
        ];
        let p50 = Aggregation::Percentile {
            percentile: 0.5,
            capacity: 3,
        };
        for aggregation in [Aggregation::Average, p50] {
            let delegate = Gradient2Limit::builder()
                .min_limit(2)
                .initial_limit(2)
                .max_limit(9)
                .build()
                .unwrap();
            let mut windowed = WindowedBuilder::new()
                .min_rtt_threshold(Duration::ZERO)
                .max_window(Duration::MAX)
                .aggregation(aggregation)
                .build(delegate)
                .unwrap();
            for (i, &(start, rtt, inflight, dropped)) in inputs.iter().cycle().take(200).enumerate()
            {
                let l = windowed.on_sample(Sample::new(start, rtt, inflight, dropped));
                assert!((2..=9).contains(&l), "{l}");
                let l = windowed.on_time(Nanos::new(i as u64));
                assert!((2..=9).contains(&l), "{l}");
            }
            assert!((2..=9).contains(&windowed.on_time(Nanos::MAX)));
        }
    }

    #[test]
    fn a_saturated_end_does_not_stop_the_windows() {
        let mut windowed = WindowedBuilder::new().build(Count::default()).unwrap();
        windowed.on_sample(Sample::new(at(0), Duration::MAX, 1, false));
        assert_eq!(windowed.window_end(), Nanos::ZERO);
        windowed.on_sample(Sample::new(at(0), ms(1), 1, false));
        assert_eq!(windowed.window_end(), at(1001));
    }
}
