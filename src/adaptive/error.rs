//! [`SampleError`]: why a sample measured elsewhere was not recorded.

use std::error::Error;
use std::fmt;

use crate::time::Nanos;

/// Why [`AdaptiveLimiter::record_sample`](super::AdaptiveLimiter::record_sample)
/// refused a sample.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::adaptive::limit::AimdLimit;
/// use tollgate::adaptive::{AdaptiveLimiter, Sample, SampleError, WhenLimited};
/// use tollgate::time::{ManualClock, Nanos};
///
/// let limiter = AdaptiveLimiter::with_clock(AimdLimit::new(), WhenLimited::FailFast, ManualClock::new())?;
/// let later = Sample::new(Nanos::ZERO, Duration::from_secs(1), 1, false);
/// let error = limiter.record_sample(later).unwrap_err();
/// assert!(matches!(error, SampleError::EndsInTheFuture { .. }));
/// assert_eq!(error.to_string(), "the sample ends at 1000000000 ns, after the limiter's clock reads 0 ns");
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SampleError {
    /// The sample ends (`start + rtt`) after the limiter's clock reads now: it was
    /// timed on another clock. Recorded, it would run the algorithm's timers ahead
    /// of the limiter's time.
    EndsInTheFuture {
        /// When the sample ends.
        end: Nanos,
        /// What the limiter's clock read.
        now: Nanos,
    },
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::EndsInTheFuture { end, now } => write!(
                f,
                "the sample ends at {} ns, after the limiter's clock reads {} ns",
                end.as_u64(),
                now.as_u64()
            ),
        }
    }
}

impl Error for SampleError {}
