//! [`ThrottleLayer`]: the configuration, shared by every clone.

use std::time::Duration;

use tower_layer::Layer;

use super::Throttle;
use super::pause::{Backoff, Shared};
use crate::error::ConfigError;
#[cfg(feature = "outbound")]
use crate::outbound::{Feedback, FeedbackHandle};
use crate::sync::Arc;
use crate::time::{Clock, MonotonicClock, Nanos};

/// The pause after a 429 that names no time.
const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// The longest pause a server can impose by default.
const DEFAULT_MAX_PAUSE: Duration = Duration::from_secs(3600);
/// The longest `max_pause` accepted: no wait in the crate is longer.
const LONGEST_PAUSE: Duration = Duration::from_secs(3600);

/// A tower [`Layer`] that makes a client wait for permits before each call, and pause
/// every call when the server says it is over its limit.
///
/// Every clone of the layer, and every [`Throttle`] it makes, shares one permit source
/// and one pause. The settings (`cost`, `timeout`, back-off) belong to each value:
/// `layer.clone().timeout(d)` waits on the same limiter with another timeout.
///
/// See [the module](super) for what the layer does precisely.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::client::ThrottleLayer;
/// use tollgate::{algorithm::Gcra, Limiter, Quota};
///
/// let layer = ThrottleLayer::new(Limiter::new(Gcra::new(Quota::per_second(10)?)))
///     .timeout(Duration::from_secs(5))
///     .max_pause(Duration::from_secs(60))?;
/// # drop(layer);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct ThrottleLayer<P, C = MonotonicClock> {
    pub(super) shared: Arc<Shared<P, C>>,
    pub(super) settings: Settings,
    #[cfg(feature = "outbound")]
    pub(super) feedback: Option<FeedbackHandle>,
}

/// What each call through a layer costs, how long it may wait, how it backs off.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settings {
    pub(super) cost: u64,
    pub(super) timeout: Option<Duration>,
    pub(super) backoff: Backoff,
}

impl<P> ThrottleLayer<P> {
    /// A layer taking one permit per call from `permits`, any
    /// [`PermitSource`](crate::PermitSource) (a [`Limiter`](crate::Limiter), a
    /// [`SharedLimiter`](crate::store::SharedLimiter) on one key, an `Arc<Semaphore>`),
    /// waiting as long as it takes, pausing 1 s after a 429 that names no time, and
    /// never pausing more than an hour. Pauses are measured on the default monotonic
    /// clock; [`with_clock`](ThrottleLayer::with_clock) takes another.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// assert_eq!(layer.paused_until(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn new(permits: P) -> ThrottleLayer<P> {
        ThrottleLayer::with_clock(permits, MonotonicClock::new())
    }
}

impl<P, C: Clock> ThrottleLayer<P, C> {
    /// As [`new`](ThrottleLayer::new), measuring and sleeping through pauses on
    /// `clock` (a [`ManualClock`](crate::time::ManualClock) in tests; give the
    /// limiter the same one).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock);
    /// # drop(layer);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_clock(permits: P, clock: C) -> ThrottleLayer<P, C> {
        ThrottleLayer {
            shared: Arc::new(Shared::new(permits, clock)),
            settings: Settings {
                cost: 1,
                timeout: None,
                backoff: Backoff {
                    default: DEFAULT_BACKOFF,
                    max: DEFAULT_MAX_PAUSE,
                },
            },
            #[cfg(feature = "outbound")]
            feedback: None,
        }
    }

    /// Each call takes `n` permits, unless the request carries a [`Cost`](super::Cost).
    /// Zero lets calls through without permits (pauses still apply).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// // Every call takes 2 permits: 5 calls a second.
    /// let layer = layer.cost(2);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn cost(mut self, n: u64) -> ThrottleLayer<P, C> {
        self.settings.cost = n;
        self
    }

    /// A call fails with [`ThrottleError::TimedOut`](super::ThrottleError::TimedOut)
    /// when its permit (and the end of any pause) cannot be had within `timeout`: at
    /// once when that is already known. The inner service's own time is not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// let layer = layer.timeout(Duration::from_millis(500));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> ThrottleLayer<P, C> {
        self.settings.timeout = Some(timeout);
        self
    }

    /// The pause after a 429 whose headers name no time (1 s by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// let layer = layer.default_backoff(Duration::from_secs(5));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn default_backoff(mut self, pause: Duration) -> ThrottleLayer<P, C> {
        self.settings.backoff.default = pause;
        self
    }

    /// The longest pause a server's answer can impose (an hour by default, and at most
    /// an hour): a bounded wait however large a `Retry-After` the server sends.
    ///
    /// # Errors
    ///
    /// [`ConfigError::TooLong`] beyond an hour, the longest wait anywhere in the crate:
    /// `Duration::MAX` would let one answer hold every call for centuries.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// let layer = layer.max_pause(Duration::from_secs(60))?;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn max_pause(mut self, max: Duration) -> Result<ThrottleLayer<P, C>, ConfigError> {
        if max > LONGEST_PAUSE {
            return Err(ConfigError::TooLong {
                parameter: "max_pause",
                max: LONGEST_PAUSE,
                within: "a pause a server's answer imposes, an hour",
            });
        }
        self.settings.backoff.max = max;
        Ok(self)
    }

    /// Reports the answer to every call to `feedback`, read from the response by
    /// [`Answer::from_response`](crate::outbound::Answer::from_response):
    /// for a source that learns from answers, such as a
    /// [`LearnedRate`](crate::outbound::LearnedRate) or an
    /// [`SreThrottle`](crate::outbound::SreThrottle) (give it a clone of
    /// the source). A call that fails without a response reports nothing. Replaces
    /// any feedback set before, for this value and the services it makes.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    /// let layer = ThrottleLayer::with_clock(rate.clone(), clock).feedback(rate);
    /// # drop(layer);
    /// ```
    #[cfg(feature = "outbound")]
    pub fn feedback(mut self, feedback: impl Feedback) -> ThrottleLayer<P, C> {
        self.feedback = Some(FeedbackHandle::new(feedback));
        self
    }

    /// The permit source.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// assert_eq!(tollgate::PermitSource::capacity(layer.permits()), 10);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn permits(&self) -> &P {
        &self.shared.permits
    }

    /// The end of the current pause on the layer's clock, if one is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// layer.pause_for(Duration::from_secs(3));
    /// assert_eq!(layer.paused_until(), Some(tollgate::time::Nanos::new(3_000_000_000)));
    /// clock.advance(Duration::from_secs(3));
    /// assert_eq!(layer.paused_until(), None);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn paused_until(&self) -> Option<Nanos> {
        self.shared.paused_until()
    }

    /// Holds every call off for `d` from now, unless a longer pause is on, as if a
    /// server had asked: for signals the layer does not read itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::client::ThrottleLayer;
    /// use tollgate::{algorithm::Gcra, time::ManualClock, Limiter, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(Gcra::new(Quota::per_second(10)?), clock.clone());
    /// let layer = ThrottleLayer::with_clock(limiter, clock.clone());
    /// layer.pause_for(Duration::from_secs(10));
    /// layer.pause_for(Duration::from_secs(1)); // does not cut the longer pause short
    /// assert_eq!(layer.paused_until(), Some(tollgate::time::Nanos::new(10_000_000_000)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn pause_for(&self, d: Duration) {
        self.shared.pause_for(d)
    }
}

impl<P, C> Clone for ThrottleLayer<P, C> {
    fn clone(&self) -> Self {
        ThrottleLayer {
            shared: Arc::clone(&self.shared),
            settings: self.settings,
            #[cfg(feature = "outbound")]
            feedback: self.feedback.clone(),
        }
    }
}

impl<S, P, C> Layer<S> for ThrottleLayer<P, C> {
    type Service = Throttle<S, P, C>;

    fn layer(&self, inner: S) -> Throttle<S, P, C> {
        Throttle {
            inner,
            shared: Arc::clone(&self.shared),
            settings: self.settings,
            #[cfg(feature = "outbound")]
            feedback: self.feedback.clone(),
        }
    }
}
