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
    pub const fn new(start: Nanos, rtt: Duration, inflight: u64, dropped: bool) -> Sample {
        Sample {
            start,
            rtt,
            inflight,
            dropped,
        }
    }

    /// When the request finished: `start + rtt`, saturating.
    pub fn end(&self) -> Nanos {
        self.start + self.rtt
    }
}
