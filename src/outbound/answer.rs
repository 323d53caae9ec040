//! [`Answer`]: what the partner said of one call, in plain values, and the
//! [`Feedback`] trait through which limiters hear it.

use std::fmt;
use std::time::Duration;

use crate::sync::Arc;

/// What the partner said of one call: whether it throttled it, and any limits it
/// announced. Built by hand, or read from an HTTP response with
/// `Answer::from_response` / `Answer::from_headers` (feature `http`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::outbound::Answer;
///
/// // A 429 with `Retry-After: 2`.
/// let refused = Answer::throttled().with_retry_after(Duration::from_secs(2));
/// assert!(refused.is_throttled());
/// // A success announcing 5 calls left for the next 10 s, of 100 per minute.
/// let ok = Answer::accepted()
///     .with_remaining(5, Duration::from_secs(10))
///     .with_quota(100, Duration::from_secs(60));
/// assert_eq!(ok.remaining(), Some((5, Duration::from_secs(10))));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    throttled: bool,
    retry_after: Option<Duration>,
    remaining: Option<(u64, Duration)>,
    quota: Option<(u64, Duration)>,
}

impl Answer {
    /// The partner took the call.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert!(!Answer::accepted().is_throttled());
    /// ```
    pub fn accepted() -> Answer {
        Answer::default()
    }

    /// The partner refused the call for being over its limit (a 429, a
    /// `ThrottlingException`, `RESOURCE_EXHAUSTED`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert!(Answer::throttled().is_throttled());
    /// ```
    pub fn throttled() -> Answer {
        Answer {
            throttled: true,
            ..Answer::default()
        }
    }

    /// The partner asks to hold off every call for `d` (`Retry-After`, or a
    /// `RateLimit` item with nothing remaining).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::Answer;
    ///
    /// let a = Answer::throttled().with_retry_after(Duration::from_secs(2));
    /// assert_eq!(a.retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn with_retry_after(mut self, d: Duration) -> Answer {
        self.retry_after = Some(d);
        self
    }

    /// The partner has `remaining` calls left until `reset` from now (a `RateLimit`
    /// item's `r` and `t`): a limiter spreads them over that time. Zero remaining
    /// is a request to hold off until `reset`. A [`LearnedRate`](super::LearnedRate)
    /// holds either for at most its [`max_pause`](super::LearningConfig::max_pause),
    /// and paces no slower than its [`min_rate`](super::LearningConfig::min_rate).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::Answer;
    ///
    /// let a = Answer::accepted().with_remaining(3, Duration::from_secs(6));
    /// assert_eq!(a.remaining(), Some((3, Duration::from_secs(6))));
    /// ```
    pub fn with_remaining(mut self, remaining: u64, reset: Duration) -> Answer {
        self.remaining = Some((remaining, reset));
        self
    }

    /// The partner's quota: `quota` calls per `window` (a `RateLimit-Policy` item's
    /// `q` and `w`): a limiter never goes faster. A
    /// [`LearnedRate`](super::LearnedRate) holds it for `window` (at most an hour)
    /// after the last answer announcing it, and never goes slower than its
    /// [`min_rate`](super::LearningConfig::min_rate), even for a quota of 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::Answer;
    ///
    /// let a = Answer::accepted().with_quota(100, Duration::from_secs(60));
    /// assert_eq!(a.quota(), Some((100, Duration::from_secs(60))));
    /// ```
    pub fn with_quota(mut self, quota: u64, window: Duration) -> Answer {
        self.quota = Some((quota, window));
        self
    }

    /// Whether the partner refused the call for being over its limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert!(Answer::throttled().is_throttled());
    /// ```
    pub fn is_throttled(&self) -> bool {
        self.throttled
    }

    /// How long the partner asked every call to hold off.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert_eq!(Answer::accepted().retry_after(), None);
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Calls left, and the time until more.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert_eq!(Answer::accepted().remaining(), None);
    /// ```
    pub fn remaining(&self) -> Option<(u64, Duration)> {
        self.remaining
    }

    /// Calls per window.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::Answer;
    ///
    /// assert_eq!(Answer::accepted().quota(), None);
    /// ```
    pub fn quota(&self) -> Option<(u64, Duration)> {
        self.quota
    }
}

/// Hears the partner's answer to each call: what the client layer calls after every
/// response, and what a caller without it calls by hand.
///
/// [`LearnedRate`](super::LearnedRate) learns its rate from it;
/// [`SreThrottle`](super::SreThrottle) counts the accepted calls. A pair hears
/// both; an `Arc` hears as what it points to.
///
/// # Examples
///
/// ```
/// use tollgate::outbound::{Answer, Feedback, LearnedRate, LearningConfig};
/// use tollgate::time::ManualClock;
///
/// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
/// rate.on_answer(&Answer::throttled());
/// assert_eq!(rate.rate(), Some(0.5)); // no rate measured yet: the floor
/// ```
pub trait Feedback: Send + Sync + 'static {
    /// The partner answered one call.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{Answer, Feedback, SreConfig, SreThrottle};
    ///
    /// let sre = SreThrottle::new(SreConfig::new());
    /// sre.on_answer(&Answer::accepted());
    /// assert_eq!(sre.counts(), (0, 1));
    /// ```
    fn on_answer(&self, answer: &Answer);
}

impl<F: Feedback + ?Sized> Feedback for Arc<F> {
    fn on_answer(&self, answer: &Answer) {
        (**self).on_answer(answer)
    }
}

impl<A: Feedback, B: Feedback> Feedback for (A, B) {
    fn on_answer(&self, answer: &Answer) {
        self.0.on_answer(answer);
        self.1.on_answer(answer);
    }
}

/// A [`Feedback`] behind an `Arc`, with a `Debug` that says only that it is there:
/// what the client layer holds.
///
/// # Examples
///
/// One handle telling both learners of each answer:
///
/// ```
/// use tollgate::outbound::{
///     Answer, FeedbackHandle, LearnedRate, LearningConfig, SreConfig, SreThrottle,
/// };
///
/// let rate = LearnedRate::new(LearningConfig::new());
/// let sre = SreThrottle::new(SreConfig::new());
/// let handle = FeedbackHandle::new((rate.clone(), sre.clone()));
/// handle.on_answer(&Answer::throttled());
/// assert_eq!(rate.rate(), Some(0.5));
/// assert_eq!(sre.counts(), (0, 0)); // a throttle is no accept
/// ```
#[derive(Clone)]
pub struct FeedbackHandle(Arc<dyn Feedback>);

impl FeedbackHandle {
    /// `feedback`, shared.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{Answer, FeedbackHandle, LearnedRate, LearningConfig};
    ///
    /// let rate = LearnedRate::new(LearningConfig::new());
    /// let handle = FeedbackHandle::new(rate.clone());
    /// handle.on_answer(&Answer::accepted());
    /// ```
    pub fn new(feedback: impl Feedback) -> FeedbackHandle {
        FeedbackHandle(Arc::new(feedback))
    }

    /// Passes `answer` on.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{Answer, FeedbackHandle, SreConfig, SreThrottle};
    ///
    /// let sre = SreThrottle::new(SreConfig::new());
    /// FeedbackHandle::new(sre.clone()).on_answer(&Answer::accepted());
    /// assert_eq!(sre.counts(), (0, 1));
    /// ```
    pub fn on_answer(&self, answer: &Answer) {
        self.0.on_answer(answer)
    }
}

impl fmt::Debug for FeedbackHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedbackHandle").finish_non_exhaustive()
    }
}
