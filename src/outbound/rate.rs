//! [`LearnedRate`]: a limiter at the rate the partner accepts, learned from its
//! answers as the AWS SDKs' adaptive retry mode learns it.

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use crate::decision::Decision;
use crate::error::AcquireError;
use crate::limiter::Limiter;
use crate::observe::{EventKind, Events};
use crate::permits::{Decided, PermitFuture, PermitSource};
use crate::sync::{Arc, Mutex};
use crate::time::{Clock, MonotonicClock, Nanos};

use super::answer::{Answer, Feedback};
use super::bucket::LearnedBucket;
use super::config::LearningConfig;
use super::cubic::Cubic;
use super::learner::Learner;

/// A client's limiter that learns the rate its partner accepts: the AWS SDKs'
/// adaptive retry mode (botocore's and smithy-rs's `ClientRateLimiter`, to the
/// number), plus the limits the partner announces.
///
/// - Until the first throttle it lets every call go, measuring the rate of answers.
/// - A throttled answer cuts the rate to `beta` (0.7) of the rate sent at, then
///   [`Cubic`] grows it back after each accepted answer: slowly near the rate that
///   drew the throttle, faster beyond it. It never exceeds twice the measured rate
///   nor falls below 0.5 a second. Calls wait in a token bucket at that rate.
/// - A partner's quota (`RateLimit-Policy`'s `q` per `w`) and remaining calls
///   (`RateLimit`'s `r` for `t` seconds) cap the rate, so that the caller slows
///   down before being refused; they turn limiting on by themselves. They never
///   take the rate below the floor ([`min_rate`](LearningConfig::min_rate)), and
///   they lapse: the quota `w` after it was last announced (at most an hour), the
///   remaining calls after `t` (at most [`max_pause`](LearningConfig::max_pause)).
/// - `Retry-After`, or a `RateLimit` item with nothing remaining, pauses every call
///   until then (at most [`max_pause`](LearningConfig::max_pause)).
///
/// Time comes from the [`Clock`]; clones share one limiter. It is a
/// [`PermitSource`] for the client layer (`ThrottleLayer`, with
/// [`Feedback`] so that it hears the answers), and a plain limiter:
/// [`try_acquire`](LearnedRate::try_acquire) or [`acquire`](LearnedRate::acquire)
/// before a call, [`record`](LearnedRate::record) its answer.
///
/// # Examples
///
/// ```
/// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
/// assert!(rate.try_acquire(1).is_ok());
/// assert_eq!(rate.rate(), None); // not limiting yet
///
/// rate.record(&Answer::throttled());
/// assert_eq!(rate.rate(), Some(0.5)); // nothing measured yet: the floor
/// assert!(rate.try_acquire(1).is_err()); // the bucket starts empty
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct LearnedRate<C: Clock = MonotonicClock> {
    inner: Arc<Inner<C>>,
}

struct Inner<C: Clock> {
    limiter: Limiter<LearnedBucket, C>,
    learner: Mutex<Learner>,
}

impl LearnedRate {
    /// A limiter learning as `config` says, on the default monotonic clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    ///
    /// let rate = LearnedRate::new(LearningConfig::new());
    /// assert!(rate.try_acquire(1).is_ok());
    /// ```
    pub fn new(config: LearningConfig) -> LearnedRate {
        LearnedRate::with_clock(config, MonotonicClock::new())
    }
}

impl<C: Clock> LearnedRate<C> {
    /// A limiter learning as `config` says, reading `clock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    /// use tollgate::time::ManualClock;
    ///
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
    /// assert_eq!(rate.measured_rate(), 0.0);
    /// ```
    pub fn with_clock(config: LearningConfig, clock: C) -> LearnedRate<C> {
        let now = clock.now();
        LearnedRate {
            inner: Arc::new(Inner {
                limiter: Limiter::with_clock(LearnedBucket::off(), clock),
                learner: Mutex::new(Learner::new(config, now)),
            }),
        }
    }

    /// Decides on `n` permits now, without waiting.
    ///
    /// # Errors
    ///
    /// [`Denied::Limited`](crate::Denied::Limited) with the wait until the bucket
    /// holds them, or until the pause the partner asked for ends. While others
    /// wait in [`acquire`](LearnedRate::acquire), a call does not overtake them.
    ///
    /// [`Denied::Insufficient`](crate::Denied::Insufficient), taking nothing, while
    /// limiting, for more than a full bucket and an hour of refill at the current
    /// rate: a call larger than the bucket goes into debt once the bucket is full,
    /// and that debt would hold every later call (for 584 years at `u64::MAX`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
    /// use tollgate::time::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    /// rate.record(&Answer::accepted().with_retry_after(Duration::from_secs(2)));
    /// let denied = rate.try_acquire(1).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn try_acquire(&self, n: u64) -> Decision {
        self.inner.limiter.try_acquire(n)
    }

    /// Waits in FIFO order until `n` permits are granted, or for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`AcquireError::TimedOut`] when the permits do not come within `timeout`;
    /// [`AcquireError::Insufficient`] for more than
    /// [`try_acquire`](LearnedRate::try_acquire) can ever grant at the current
    /// rate; [`AcquireError::Closed`] never happens (this limiter is not closed).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the queue; the next waiter moves up.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
    /// use tollgate::time::ManualClock;
    ///
    /// # futures::executor::block_on(async {
    /// let clock = ManualClock::new();
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
    /// rate.record(&Answer::accepted().with_retry_after(Duration::from_secs(1)));
    /// let mut call = Box::pin(rate.acquire(1, None));
    /// assert!(futures::poll!(call.as_mut()).is_pending());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(call.await.is_ok());
    /// # });
    /// ```
    pub async fn acquire(&self, n: u64, timeout: Option<Duration>) -> Result<(), AcquireError> {
        PermitSource::wait(&self.inner.limiter, &(), n, timeout).await
    }

    /// Learns from the partner's answer to one call: its rate, its announced limits
    /// and pauses. Waiters the new rate lets through go at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
    /// use tollgate::time::ManualClock;
    ///
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
    /// rate.record(&Answer::accepted().with_quota(10, Duration::from_secs(1)));
    /// assert_eq!(rate.rate(), Some(10.0));
    /// ```
    pub fn record(&self, answer: &Answer) {
        let inner = &*self.inner;
        let mut learner = inner.learner.lock();
        let previous = interval(self.rate());
        let setting = learner.on_answer(inner.limiter.now(), answer);
        // Under the learner's lock: settings reach the bucket in the order learned.
        let _ = inner.limiter.reconfigure(|bucket, tokens, now| {
            bucket.set_rate(tokens, now, setting.fill_rate, setting.size);
            bucket.enabled = setting.enabled;
            bucket.paused_until = setting.paused_until;
            Ok::<(), Infallible>(())
        });
        let now = interval(self.rate());
        drop(learner);
        // Listeners run with no lock held.
        if previous != now {
            if let Some(events) = inner.limiter.events() {
                events.emit(
                    0,
                    EventKind::RateChanged {
                        previous,
                        interval: now,
                    },
                );
            }
        }
    }

    /// Reports to `events`: every decision on a call (admitted at once, after a
    /// wait, or refused locally, as a [`Limiter`]'s are), and every change of the
    /// learned rate ([`EventKind::RateChanged`], the rate as the time between calls).
    /// Subscribe a `MetricsRecorder` (feature `metrics`) for
    /// metrics: the rate is the gauge `tollgate_outbound_rate`, local refusals
    /// count in `tollgate_denied_total`.
    ///
    /// Clones share the limiter and its events; as for a [`Limiter`], it reports to
    /// one hub, and on one that has one already this changes nothing. Under the
    /// client layer (`ThrottleLayer`, feature `http`) the layer's waits and the
    /// answers it reports through [`Feedback`] are reported the same way.
    ///
    /// Clones share the hub, and the first hub attached stays: where one is attached
    /// already (here or on a clone), this changes nothing. Subscribe more listeners
    /// to the hub instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
    /// use tollgate::observe::{DenyReason, Event, EventKind, Events};
    /// use tollgate::time::ManualClock;
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let events = Events::new("partner");
    /// let _subscription = events.subscribe({
    ///     let seen = Arc::clone(&seen);
    ///     move |event: &Event<'_>| seen.lock().unwrap().push(event.kind)
    /// });
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new())
    ///     .with_events(events);
    /// rate.try_acquire(1)?;
    /// rate.record(&Answer::throttled()); // the floor: 0.5 calls a second
    /// rate.try_acquire(1).unwrap_err(); // refused locally: the bucket starts empty
    ///
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen[0], EventKind::Admitted);
    /// assert_eq!(
    ///     seen[1],
    ///     EventKind::RateChanged { previous: None, interval: Some(Duration::from_secs(2)) },
    /// );
    /// assert!(matches!(seen[2], EventKind::Denied { reason: DenyReason::Limited, .. }));
    /// # Ok::<(), tollgate::Denied>(())
    /// ```
    pub fn with_events(self, events: Events) -> LearnedRate<C> {
        let _ = self.inner.limiter.clone().with_events(events);
        self
    }

    /// The hub this limiter reports to, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    /// use tollgate::observe::Events;
    ///
    /// let rate = LearnedRate::new(LearningConfig::new()).with_events(Events::new("partner"));
    /// assert_eq!(rate.events().map(|e| e.name()), Some("partner"));
    /// ```
    pub fn events(&self) -> Option<&Events> {
        self.inner.limiter.events()
    }

    /// The rate calls are held to, in calls a second; `None` while every call goes
    /// (before the first throttle or announced limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    ///
    /// assert_eq!(LearnedRate::new(LearningConfig::new()).rate(), None);
    /// ```
    pub fn rate(&self) -> Option<f64> {
        let bucket = self.inner.limiter.algorithm();
        bucket.enabled.then_some(bucket.fill_rate)
    }

    /// The smoothed rate of answers recorded, in calls a second.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    ///
    /// assert_eq!(LearnedRate::new(LearningConfig::new()).measured_rate(), 0.0);
    /// ```
    pub fn measured_rate(&self) -> f64 {
        self.inner.learner.lock().measured()
    }

    /// CUBIC's state: the rate of the last throttle and when it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    ///
    /// assert_eq!(LearnedRate::new(LearningConfig::new()).cubic().w_max(), 0.0);
    /// ```
    pub fn cubic(&self) -> Cubic {
        self.inner.learner.lock().cubic()
    }

    /// The end of the pause the partner asked for, if one is on.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::outbound::{Answer, LearnedRate, LearningConfig};
    /// use tollgate::time::{ManualClock, Nanos};
    ///
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
    /// rate.record(&Answer::throttled().with_retry_after(Duration::from_secs(3)));
    /// assert_eq!(rate.paused_until(), Some(Nanos::new(3_000_000_000)));
    /// ```
    pub fn paused_until(&self) -> Option<Nanos> {
        let until = self.inner.learner.lock().paused_until();
        (until > self.inner.limiter.now()).then_some(until)
    }

    /// The clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::outbound::{LearnedRate, LearningConfig};
    /// use tollgate::time::{Clock, ManualClock, Nanos};
    ///
    /// let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
    /// assert_eq!(rate.clock().now(), Nanos::ZERO);
    /// ```
    pub fn clock(&self) -> &C {
        self.inner.limiter.clock()
    }
}

/// A rate in calls a second as the time between calls, to the nanosecond (at
/// least 1 ns; a rate of zero saturates), as [`EventKind::RateChanged`] reports it.
fn interval(rate: Option<f64>) -> Option<Duration> {
    // `as` saturates: infinity (a rate of zero) is u64::MAX nanoseconds.
    rate.map(|r| Duration::from_nanos((1e9 / r).round().max(1.0) as u64))
}

impl<C: Clock> Clone for LearnedRate<C> {
    fn clone(&self) -> Self {
        LearnedRate {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: Clock> fmt::Debug for LearnedRate<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LearnedRate")
            .field("limiter", &self.inner.limiter)
            .field("learner", &*self.inner.learner.lock())
            .finish()
    }
}

/// The answers teach the rate.
impl<C: Clock> Feedback for LearnedRate<C> {
    fn on_answer(&self, answer: &Answer) {
        self.record(answer)
    }
}

/// In process: decided at once, never failing; a grant holds nothing. A call larger
/// than the bucket waits for a full bucket, then leaves it in debt; while limiting,
/// one larger than a full bucket and an hour of refill is refused as never
/// ([`AcquireError::Insufficient`]), so that no debt holds later calls more than an
/// hour.
impl<C: Clock> PermitSource for LearnedRate<C> {
    type Permit = ();
    type Error = Infallible;

    fn capacity(&self) -> u64 {
        u64::MAX
    }

    /// At most what a full bucket holds (at least 1).
    fn chunk(&self, max: u64) -> u64 {
        let size = self.inner.limiter.algorithm().max_capacity;
        // `as` saturates; the bucket holds at least one.
        max.min((size as u64).max(1))
    }

    fn decide_now(&self, key: &(), n: u64) -> Option<Result<Decided<()>, Infallible>> {
        self.inner.limiter.decide_now(key, n)
    }

    fn decide(&self, key: &(), n: u64) -> PermitFuture<Result<Decided<()>, Infallible>> {
        self.inner.limiter.decide(key, n)
    }

    fn wait(
        &self,
        key: &(),
        n: u64,
        timeout: Option<Duration>,
    ) -> PermitFuture<Result<(), AcquireError>> {
        PermitSource::wait(&self.inner.limiter, key, n, timeout)
    }

    fn refund(&self, key: &(), n: u64) {
        PermitSource::refund(&self.inner.limiter, key, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::cubic::tests::assert_relative_eq;
    use crate::time::ManualClock;

    /// smithy-rs `test_client_sending_rates` through the limiter and its clock.
    #[test]
    fn learns_the_sending_rates_table_through_the_clock() {
        let clock = ManualClock::new();
        let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
        let table = [
            (false, 0.500000),
            (false, 0.500000),
            (false, 0.500000),
            (false, 0.500000),
            (false, 0.500000),
            (false, 0.691200),
            (false, 1.0975999999999997),
            (false, 1.6384000000000005),
            (false, 2.332800),
            (true, 3.0284799999999996),
            (false, 3.48663917347026),
            (false, 3.821874416040255),
            (false, 4.053385727709987),
            (false, 4.200373108479454),
            (false, 4.282036558348658),
            (true, 2.99742559084406),
            (false, 3.4522263943863463),
        ];
        for (i, (throttled, fill_rate)) in table.into_iter().enumerate() {
            clock.advance(Duration::from_millis(200));
            rate.record(&if throttled {
                Answer::throttled()
            } else {
                Answer::accepted()
            });
            assert_relative_eq(fill_rate, rate.inner.limiter.algorithm().fill_rate);
            assert_eq!(rate.rate().is_some(), i >= 9);
        }
    }

    /// smithy-rs `test_when_throttling_is_enabled_requests_can_still_be_sent`, with
    /// pseudo-random steps of up to a second instead of `fastrand`.
    #[test]
    fn when_throttling_is_enabled_requests_can_still_be_sent() {
        let clock = ManualClock::new();
        let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
        rate.record(&Answer::throttled());
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            clock.advance(Duration::from_nanos(x % 1_000_000_001));
            if let Err(denied) = rate.try_acquire(1) {
                clock.advance(denied.retry_after().unwrap());
                assert!(rate.try_acquire(1).is_ok());
            }
            rate.record(&Answer::accepted());
        }
        assert!(rate.rate().is_some());
        assert_eq!(rate.inner.limiter.state().last, clock.now());
    }

    /// smithy-rs `test_multi_task_recovery_after_throttle_blip`: fifty tasks
    /// throttled at once recover.
    #[test]
    fn multi_task_recovery_after_throttle_blip() {
        let clock = ManualClock::new();
        let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
        for _ in 0..50 {
            clock.advance(Duration::from_millis(1));
            rate.record(&Answer::throttled());
        }
        assert!((rate.rate().unwrap() - 0.5).abs() < 0.01);
        let mut total = 0;
        for _ in 0..200 {
            clock.advance(Duration::from_millis(100));
            let mut acquired = 0;
            for _ in 0..50 {
                clock.advance(Duration::from_micros(100));
                if rate.try_acquire(1).is_ok() {
                    acquired += 1;
                }
            }
            for _ in 0..acquired {
                clock.advance(Duration::from_millis(1));
                rate.record(&Answer::accepted());
            }
            total += acquired;
        }
        assert!(total > 100, "only {total} acquired");
        assert!(rate.inner.limiter.state().capacity >= 0.0);
    }

    #[test]
    fn a_pause_delays_waiters_and_ends() {
        let clock = ManualClock::new();
        let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
        rate.record(&Answer::accepted().with_remaining(0, Duration::from_secs(5)));
        assert_eq!(rate.paused_until(), Some(Nanos::new(5_000_000_000)));
        assert!(rate.try_acquire(1).is_err());
        clock.advance(Duration::from_secs(5));
        assert_eq!(rate.paused_until(), None);
        assert!(rate.try_acquire(1).is_ok());
    }

    #[test]
    fn chunks_are_what_a_full_bucket_holds() {
        let rate = LearnedRate::with_clock(LearningConfig::new(), ManualClock::new());
        rate.record(&Answer::accepted().with_quota(10, Duration::from_secs(1)));
        assert_eq!(rate.chunk(100), 10);
        assert_eq!(rate.chunk(3), 3);
        assert_eq!(rate.chunk(0), 0);
        assert_eq!(rate.capacity(), u64::MAX);
    }

    #[test]
    fn extremes_never_panic() {
        let clock = ManualClock::starting_at(Nanos::new(u64::MAX - 1));
        let rate = LearnedRate::with_clock(LearningConfig::new(), clock.clone());
        rate.record(
            &Answer::throttled()
                .with_retry_after(Duration::MAX)
                .with_quota(u64::MAX, Duration::from_nanos(1)),
        );
        assert!(rate.try_acquire(u64::MAX).is_err());
        clock.advance(Duration::MAX);
        let _ = rate.try_acquire(u64::MAX);
        rate.record(&Answer::accepted());
        let _ = format!("{rate:?}");
    }
}
