//! [`Sample`]: what one finished request tells a limit algorithm.

use std::time::Duration;

use crate::time::Nanos;

/// One finished request, as a [`LimitAlgorithm`](super::LimitAlgorithm) sees it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::Sample;
/// use tollgate::time::Nanos;
///
/// let sample = Sample::new(Nanos::new(1_000), Duration::from_millis(10), 4, false);
/// assert_eq!(sample.end(), Nanos::new(10_001_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When the request started, on the enforcing limiter's clock.
    pub start: Nanos,
    /// How long the request took, start to finish.
    pub rtt: Duration,
    /// How many requests were in flight when this one started, itself included.
    pub inflight: u64,
    /// Whether the request was dropped: timed out, refused or overloaded downstream.
    pub dropped: bool,
}

impl Sample {
    /// A sample of a request that started at `start` and took `rtt`.
    ///
    /// The RTT is a [`Duration`]: neither negative nor NaN, so the "NaN or negative
    /// RTT" that a floating-point API must refuse cannot be expressed, and a
    /// sample needs no check. A limiter measures it on its clock, as the time
    /// between two readings, saturating at zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let sample = Sample::new(Nanos::ZERO, Duration::from_millis(25), 3, true);
    /// assert_eq!(sample.rtt, Duration::from_millis(25));
    /// assert_eq!(sample.inflight, 3);
    /// assert!(sample.dropped);
    /// ```
    pub const fn new(start: Nanos, rtt: Duration, inflight: u64, dropped: bool) -> Sample {
        Sample {
            start,
            rtt,
            inflight,
            dropped,
        }
    }

    /// When the request finished: `start + rtt`, saturating.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::adaptive::Sample;
    /// use tollgate::time::Nanos;
    ///
    /// let late = Sample::new(Nanos::MAX, Duration::from_secs(1), 1, false);
    /// assert_eq!(late.end(), Nanos::MAX);
    /// ```
    pub fn end(&self) -> Nanos {
        self.start + self.rtt
    }
}
