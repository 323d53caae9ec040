//! [`EnvoyGradient`]: the controller's state and its two timers.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use super::circllhist::Histogram;
use super::config::{EnvoyGradientConfig, MinRttSource};
use crate::adaptive::{LimitAlgorithm, Sample};
use crate::time::Nanos;
use crate::units::saturating_u64;

/// After this many sample windows in a row set the limit to its minimum, minRTT is
/// measured again (Envoy's `consecutive_min_concurrency_set_ >= 5`).
const MIN_LIMIT_WINDOWS_BEFORE_REMEASURE: u32 = 5;

/// Where the jitter's random numbers come from.
enum Random {
    /// SplitMix64 from this state.
    Seeded(u64),
    /// The caller's source.
    Source(Box<dyn FnMut() -> u64 + Send>),
}

impl Random {
    fn next(&mut self) -> u64 {
        match self {
            Random::Seeded(state) => split_mix_64(state),
            Random::Source(source) => source(),
        }
    }
}

impl fmt::Debug for Random {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Random::Seeded(_) => f.write_str("Seeded"),
            Random::Source(_) => f.write_str("Source"),
        }
    }
}

/// Steele, Lea and Flood's SplitMix64: one step of the state, one output.
fn split_mix_64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `std::min<double>(a, b)`: `b` only if it is less, so a NaN `b` gives `a`.
fn cpp_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// `std::max<double>(a, b)`: `b` only if `a` is less, so a NaN `b` gives `a`.
fn cpp_max(a: f64, b: f64) -> f64 {
    if a < b { b } else { a }
}

/// Envoy's adaptive-concurrency gradient controller (see the [module](super) docs).
///
/// Created at a time on the enforcing limiter's clock, in a minRTT window unless minRTT
/// is fixed. Its two timers (the sample window's end and the next minRTT measurement)
/// fire, each at its own deadline, when [`on_time`](LimitAlgorithm::on_time) or a sample's end reaches them;
/// [`next_deadline`](Self::next_deadline) says when that is.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
/// use tollgate::adaptive::{LimitAlgorithm, Sample};
/// use tollgate::time::Nanos;
///
/// let config = EnvoyGradientConfig::builder()
///     .concurrency_update_interval(Duration::from_millis(100))
///     .min_rtt_calc_interval(Duration::from_secs(30))
///     .min_rtt_request_count(5)
///     .build()?;
/// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 7);
///
/// // minRTT is measured first, at the minimum concurrency.
/// assert!(gradient.in_min_rtt_window());
/// assert_eq!(gradient.limit(), 3);
/// let ms = |n: u64| Duration::from_millis(n);
/// for _ in 0..5 {
///     gradient.on_sample(Sample::new(Nanos::ZERO, ms(5), 1, false));
/// }
/// // The median of five 5 ms latencies, as libcircllhist estimates it.
/// assert_eq!(gradient.min_rtt(), Some(Duration::from_micros(5_050)));
///
/// // Latencies near minRTT: the gradient is 1.25 (the buffer), the limit grows.
/// gradient.on_sample(Sample::new(Nanos::ZERO + ms(10), ms(5), 1, false));
/// assert_eq!(gradient.on_time(Nanos::ZERO + ms(200)), 5); // ⌊3 × 1.25 + √3.75⌋
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct EnvoyGradient {
    config: EnvoyGradientConfig,
    random: Random,
    limit: u32,
    /// The limit to return to after the minRTT window; `Some` exactly while one is open.
    deferred_limit: Option<u32>,
    /// Nanoseconds, as Envoy keeps it.
    min_rtt: Option<u64>,
    sample_rtt: Option<u64>,
    gradient: Option<f64>,
    pub(super) samples: Histogram,
    consecutive_min_limit: u32,
    /// Latencies of requests that started before this are discarded.
    epoch: Nanos,
    now: Nanos,
    min_rtt_timer: Option<Nanos>,
    window_timer: Option<Nanos>,
}

impl EnvoyGradient {
    /// A controller created at `now`, jittering with random numbers seeded from the
    /// process's hash keys (so that controllers do not measure minRTT in step).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::adaptive::LimitAlgorithm;
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let gradient = EnvoyGradient::new(config, Nanos::ZERO);
    /// assert_eq!(gradient.limit(), 3);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(config: EnvoyGradientConfig, now: Nanos) -> EnvoyGradient {
        let seed = RandomState::new().hash_one(now);
        EnvoyGradient::with_seed(config, now, seed)
    }

    /// A controller created at `now` whose jitter is reproducible: SplitMix64 from
    /// `seed`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let a = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 42);
    /// let b = EnvoyGradient::with_seed(config, Nanos::ZERO, 42);
    /// assert_eq!(a.next_deadline(), b.next_deadline());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_seed(config: EnvoyGradientConfig, now: Nanos, seed: u64) -> EnvoyGradient {
        EnvoyGradient::start(config, now, Random::Seeded(seed))
    }

    /// A controller created at `now` that draws its jitter from `random`, as Envoy's
    /// `Random::RandomGenerator::random()`: the next minRTT window opens
    /// `interval + (random() mod ⌈interval_ms × jitter⌉)` ms after the last one closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// use tollgate::time::Nanos;
    ///
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(123))
    ///     .min_rtt_calc_interval(Duration::from_secs(100))
    ///     .jitter_percent(10.0)
    ///     .min_rtt_request_count(1)
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_random(config, Nanos::ZERO, || 15_000);
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(5), 1, false));
    /// // 15 000 mod 10 000 = 5 000 ms of jitter.
    /// assert_eq!(
    ///     gradient.min_rtt_deadline(),
    ///     Some(Nanos::from_duration(Duration::from_millis(5 + 105_000)))
    /// );
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_random(
        config: EnvoyGradientConfig,
        now: Nanos,
        random: impl FnMut() -> u64 + Send + 'static,
    ) -> EnvoyGradient {
        EnvoyGradient::start(config, now, Random::Source(Box::new(random)))
    }

    /// Envoy's constructor: into a minRTT window, or straight to the fixed minRTT;
    /// then the first sample window.
    fn start(config: EnvoyGradientConfig, now: Nanos, random: Random) -> EnvoyGradient {
        let floor = config.min_concurrency_limit();
        let fixed = config.fixed_min_rtt();
        let window = config.concurrency_update_interval();
        let mut gradient = EnvoyGradient {
            config,
            random,
            limit: floor,
            deferred_limit: None,
            min_rtt: None,
            sample_rtt: None,
            gradient: None,
            samples: Histogram::default(),
            consecutive_min_limit: 0,
            epoch: Nanos::ZERO,
            now,
            min_rtt_timer: None,
            window_timer: None,
        };
        match fixed {
            None => gradient.enter_min_rtt_window(),
            Some(min_rtt) => {
                gradient.min_rtt = Some(saturating_u64(min_rtt.as_nanos()));
                gradient.set_limit(floor);
            }
        }
        gradient.window_timer = Some(now + window);
        gradient
    }

    /// The configuration.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(30))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config.clone(), Nanos::ZERO, 1);
    /// assert_eq!(gradient.config(), &config);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn config(&self) -> &EnvoyGradientConfig {
        &self.config
    }

    /// Whether a minRTT window is open (the limit is then pinned to
    /// `min_concurrency`, unless `min_concurrency_limit` is set).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let builder = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100));
    /// let measured = builder.clone().min_rtt_calc_interval(Duration::from_secs(30)).build()?;
    /// let fixed = builder.fixed_min_rtt(Duration::from_millis(50)).build()?;
    /// assert!(EnvoyGradient::with_seed(measured, Nanos::ZERO, 1).in_min_rtt_window());
    /// assert!(!EnvoyGradient::with_seed(fixed, Nanos::ZERO, 1).in_min_rtt_window());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn in_min_rtt_window(&self) -> bool {
        self.deferred_limit.is_some()
    }

    /// The ideal latency: the last measured minRTT (whole microseconds, as Envoy
    /// aggregates), or the fixed one; `None` before the first measurement.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.min_rtt(), Some(Duration::from_millis(50)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(Duration::from_nanos)
    }

    /// The last sample window's aggregated latency, sampleRTT; `None` before one
    /// closed with latencies in it.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(40), 1, false));
    /// assert_eq!(gradient.sample_rtt(), None);
    /// gradient.on_time(Nanos::from_duration(Duration::from_millis(100)));
    /// assert_eq!(gradient.sample_rtt(), Some(Duration::from_micros(40_500)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn sample_rtt(&self) -> Option<Duration> {
        self.sample_rtt.map(Duration::from_nanos)
    }

    /// The last gradient, in `[0.5, 2]`; `None` before the first recalculation.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::adaptive::{LimitAlgorithm, Sample};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(50))
    ///     .build()?;
    /// let mut gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// // Ten times minRTT: the gradient bottoms out at 0.5.
    /// gradient.on_sample(Sample::new(Nanos::ZERO, Duration::from_millis(500), 1, false));
    /// gradient.on_time(Nanos::from_duration(Duration::from_secs(1)));
    /// assert_eq!(gradient.gradient(), Some(0.5));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn gradient(&self) -> Option<f64> {
        self.gradient
    }

    /// When the current sample window closes, if one is open (none during a minRTT
    /// window).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(123))
    ///     .min_rtt_calc_interval(Duration::from_secs(45))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.window_deadline(), Some(Nanos::new(123_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn window_deadline(&self) -> Option<Nanos> {
        self.window_timer
    }

    /// When the next minRTT window opens, if one is scheduled.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .min_rtt_calc_interval(Duration::from_secs(45))
    ///     .build()?;
    /// // In the first minRTT window, the next one is not scheduled yet.
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.min_rtt_deadline(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn min_rtt_deadline(&self) -> Option<Nanos> {
        self.min_rtt_timer
    }

    /// The earlier of the two deadlines: when [`on_time`](LimitAlgorithm::on_time)
    /// next has something to do.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tollgate::adaptive::limit::{EnvoyGradient, EnvoyGradientConfig};
    /// # use tollgate::time::Nanos;
    /// let config = EnvoyGradientConfig::builder()
    ///     .concurrency_update_interval(Duration::from_millis(100))
    ///     .fixed_min_rtt(Duration::from_millis(5))
    ///     .build()?;
    /// let gradient = EnvoyGradient::with_seed(config, Nanos::ZERO, 1);
    /// assert_eq!(gradient.next_deadline(), Some(Nanos::new(100_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn next_deadline(&self) -> Option<Nanos> {
        match (self.window_timer, self.min_rtt_timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lets time reach `now` (never backwards) and fires the timers due by then in
    /// the order of their deadlines (the sample window first on a tie), each at its
    /// own deadline, as Envoy's dispatcher runs them: a timer rearmed while catching
    /// up is rearmed from the instant it fired, not from `now`. A timer rearmed for
    /// the very instant it fired (a saturated deadline) waits for the next call
    /// instead of looping.
    fn advance(&mut self, now: Nanos) {
        let target = self.now.max(now);
        let mut window_stuck = false;
        loop {
            let window = self
                .window_timer
                .filter(|&at| !window_stuck && at <= target);
            let probe = self.min_rtt_timer.filter(|&at| at <= target);
            match (window, probe) {
                (None, None) => break,
                (Some(w), Some(p)) if p < w => self.fire_min_rtt_timer(p),
                (Some(w), probe) => {
                    let at = self.skip_empty_windows(w, probe.unwrap_or(target));
                    self.now = self.now.max(at);
                    self.window_timer_fired();
                    window_stuck = self.window_timer.is_some_and(|next| next <= at);
                }
                (None, Some(p)) => self.fire_min_rtt_timer(p),
            }
        }
        self.now = target;
    }

    /// Fires the minRTT timer at its deadline `at`.
    fn fire_min_rtt_timer(&mut self, at: Nanos) {
        self.now = self.now.max(at);
        self.min_rtt_timer_fired();
    }

    /// The last deadline, from `due` on in steps of the update interval and no later
    /// than `until`, at which the sample window fires: the windows before it hold no
    /// latency and change nothing, so they are skipped in one step rather than one
    /// at a time (after a long idle spell there may be millions).
    fn skip_empty_windows(&self, due: Nanos, until: Nanos) -> Nanos {
        if self.samples.count() > 0 || self.in_min_rtt_window() || until <= due {
            return due;
        }
        let step = saturating_u64(self.config.concurrency_update_interval().as_nanos());
        if step == 0 {
            return due;
        }
        let skipped = (until.as_u64() - due.as_u64()) / step;
        Nanos::new(due.as_u64() + skipped * step)
    }

    /// Envoy's `min_rtt_calc_timer_` callback.
    fn min_rtt_timer_fired(&mut self) {
        self.min_rtt_timer = None;
        self.enter_min_rtt_window();
    }

    /// Envoy's `sample_reset_timer_` callback: during a minRTT window it lapses, to be
    /// rearmed when the window closes.
    fn window_timer_fired(&mut self) {
        if self.in_min_rtt_window() {
            self.window_timer = None;
            return;
        }
        self.reset_sample_window();
        self.window_timer = Some(self.now + self.config.concurrency_update_interval());
    }

    /// Envoy's `enterMinRTTSamplingWindow`.
    fn enter_min_rtt_window(&mut self) {
        if self.in_min_rtt_window() {
            return;
        }
        self.deferred_limit = Some(self.limit);
        if self.config.probe_pins_limit() {
            self.set_limit(self.config.min_concurrency());
        }
        // Latencies from before the window may not represent minRTT.
        self.samples.clear();
        self.epoch = self.now;
    }

    /// Envoy's `updateMinRTT`: closes the minRTT window once it has enough latencies.
    fn update_min_rtt(&mut self) {
        if !self.config.measures_min_rtt() {
            return;
        }
        let Some(deferred) = self.deferred_limit else {
            return;
        };
        if self.samples.count() < u64::from(self.config.min_rtt_request_count()) {
            return;
        }
        self.min_rtt = Some(self.aggregate_and_clear());
        if self.config.probe_pins_limit() {
            self.set_limit(deferred);
        }
        self.deferred_limit = None;
        if let MinRttSource::Measured(interval) = self.config.min_rtt {
            let delay = self.jittered(interval);
            self.min_rtt_timer = Some(self.now + delay);
        }
        self.window_timer = Some(self.now + self.config.concurrency_update_interval());
    }

    /// Envoy's `applyJitter`, in whole milliseconds as Envoy draws it.
    fn jittered(&mut self, interval: Duration) -> Duration {
        let jitter = self.config.jitter_fraction();
        if jitter == 0.0 {
            return interval;
        }
        let range_ms = (interval.as_millis() as f64 * jitter).ceil() as u64;
        if range_ms == 0 {
            return interval;
        }
        interval.saturating_add(Duration::from_millis(self.random.next() % range_ms))
    }

    /// Envoy's `resetSampleWindow`.
    fn reset_sample_window(&mut self) {
        if self.samples.count() == 0 {
            return;
        }
        self.sample_rtt = Some(self.aggregate_and_clear());
        let limit = self.new_limit();
        self.set_limit(limit);
    }

    /// Envoy's `processLatencySamplesAndClear`: the percentile in whole microseconds,
    /// returned in nanoseconds.
    fn aggregate_and_clear(&mut self) -> u64 {
        let micros = self.samples.quantile(self.config.sample_quantile()) as u64;
        self.samples.clear();
        micros.saturating_mul(1_000)
    }

    /// Envoy's `calculateNewLimit`.
    fn new_limit(&mut self) -> u32 {
        let min_rtt = self.min_rtt.unwrap_or(0) as f64;
        let sample_rtt = self.sample_rtt.unwrap_or(0) as f64;
        let buffered = min_rtt + min_rtt * self.config.min_rtt_buffer_fraction();
        // A zero sampleRTT gives +inf, or NaN over a zero minRTT: both clamp to 2.0.
        let gradient = cpp_max(0.5, cpp_min(2.0, buffered / sample_rtt));
        self.gradient = Some(gradient);
        let limit = f64::from(self.limit) * gradient;
        let headroom = limit.sqrt();
        let new_limit = (limit + headroom) as u64;
        let max = u64::from(self.config.max_concurrency_limit());
        // At most max_concurrency_limit, a u32.
        let capped = new_limit.min(max) as u32;
        capped.max(self.config.min_concurrency_limit())
    }

    /// Envoy's `updateConcurrencyLimit`, with its count of windows at the minimum.
    fn set_limit(&mut self, limit: u32) {
        let old = self.limit;
        self.limit = limit;
        let floor = self.config.min_concurrency_limit();
        if !self.in_min_rtt_window() && old == floor && limit == floor {
            self.consecutive_min_limit = self.consecutive_min_limit.saturating_add(1);
        } else {
            self.consecutive_min_limit = 0;
        }
        // Stuck at the minimum: minRTT is probably stale, measure it now.
        if self.consecutive_min_limit >= MIN_LIMIT_WINDOWS_BEFORE_REMEASURE
            && self.config.measures_min_rtt()
        {
            self.min_rtt_timer = Some(self.now);
        }
    }

    /// Envoy's `recordLatencySample` for a request that completed.
    fn record(&mut self, sample: &Sample) {
        if sample.start < self.epoch {
            // Started before this minRTT window: discarded.
            return;
        }
        let micros = saturating_u64(sample.rtt.as_micros());
        self.samples.insert(micros);
        self.update_min_rtt();
    }
}

impl LimitAlgorithm for EnvoyGradient {
    fn limit(&self) -> u64 {
        u64::from(self.limit)
    }

    /// Fires the timers due by the sample's end, then records its latency, unless it
    /// was dropped (Envoy's `cancelLatencySample`: no latency to learn from).
    fn on_sample(&mut self, sample: Sample) -> u64 {
        self.advance(sample.end());
        if !sample.dropped {
            self.record(&sample);
        }
        self.limit()
    }

    fn on_time(&mut self, now: Nanos) -> u64 {
        self.advance(now);
        self.limit()
    }
}
