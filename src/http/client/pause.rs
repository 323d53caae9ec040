//! The shared state behind every clone of a layer: the permit source, and the instant
//! until which the server asked everyone to hold off.

use std::time::Duration;

use http::{Response, StatusCode};

use super::ThrottleError;
use crate::decision::InsufficientCapacity;
use crate::error::AcquireError;
use crate::http::wire::backoff;
use crate::permits::PermitSource;
use crate::store::StoreError;
use crate::sync::{AtomicU64, Ordering};
use crate::time::{Clock, Nanos, Sleep};

/// The permit source, the clock and the pause, shared by every clone of a layer and
/// its services.
#[derive(Debug)]
pub(super) struct Shared<P, C> {
    pub(super) permits: P,
    pub(super) clock: C,
    /// Nanos on the clock before which no call goes; only grows.
    paused_until: AtomicU64,
}

/// How the layer reads the server's answers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Backoff {
    /// The pause after a 429 that says nothing of when to come back.
    pub(super) default: Duration,
    /// The longest pause any answer can impose.
    pub(super) max: Duration,
}

impl<P, C: Clock> Shared<P, C> {
    pub(super) fn new(permits: P, clock: C) -> Shared<P, C> {
        Shared {
            permits,
            clock,
            paused_until: AtomicU64::new(0),
        }
    }

    fn clock(&self) -> &C {
        &self.clock
    }

    /// The end of the pause, if one is on.
    pub(super) fn paused_until(&self) -> Option<Nanos> {
        let until = Nanos::new(self.paused_until.load(Ordering::Acquire));
        (until > self.clock().now()).then_some(until)
    }

    /// Holds every caller off for `d` from now, unless a longer pause is on.
    pub(super) fn pause_for(&self, d: Duration) {
        let until = self.clock().now() + d;
        self.paused_until
            .fetch_max(until.as_u64(), Ordering::AcqRel);
    }

    /// The current Unix time, on the clock.
    pub(super) fn now_since_epoch(&self) -> Duration {
        let clock = self.clock();
        clock.unix_origin() + clock.now().as_duration()
    }

    /// Pauses as `response` asks: for the longest of its `Retry-After`, exhausted
    /// `RateLimit` items and legacy reset, or for the default back-off after a 429 that
    /// names none; never longer than the maximum.
    pub(super) fn observe<B>(&self, response: &Response<B>, backoff_config: Backoff) {
        let asked = match backoff(response.headers(), self.now_since_epoch()) {
            Some(asked) => asked,
            None if response.status() == StatusCode::TOO_MANY_REQUESTS => backoff_config.default,
            None => return,
        };
        self.pause_for(asked.min(backoff_config.max));
    }

    /// Waits for the end of any pause and for `n` permits, within `timeout`; the
    /// permit is held while the call lasts.
    ///
    /// A permit granted while a pause began is given back, and the caller waits out
    /// the pause and queues again: holding it would send every such caller at once
    /// when the pause ends.
    ///
    /// Cancel safety: the source's wait gives back what it booked; the sleep holds
    /// nothing; a refund goes in the background.
    pub(super) async fn admit(
        &self,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<P::Permit, ThrottleError>
    where
        P: PermitSource,
        P::Error: Into<StoreError>,
    {
        let capacity = self.permits.capacity();
        if n > capacity {
            return Err(ThrottleError::Insufficient(InsufficientCapacity::new(
                n, capacity,
            )));
        }
        let clock = self.clock();
        let deadline = timeout.map(|t| clock.now() + t);
        loop {
            self.wait_out_pause(deadline).await?;
            let left = deadline.map(|d| d.saturating_since(clock.now()));
            let permit = self.permits.wait(&(), n, left).await.map_err(|e| match e {
                AcquireError::Closed => ThrottleError::Closed,
                AcquireError::Insufficient(i) => ThrottleError::Insufficient(i),
                AcquireError::Source(e) => ThrottleError::Store(e.into()),
                // A full queue, like a timeout: no permit came in time.
                _ => ThrottleError::TimedOut,
            })?;
            if self.paused_until().is_none() {
                return Ok(permit);
            }
            drop(permit);
            self.permits.refund(&(), n);
        }
    }

    async fn wait_out_pause(&self, deadline: Option<Nanos>) -> Result<(), ThrottleError> {
        // A pause may grow while we sleep: check again after each.
        while let Some(until) = self.paused_until() {
            if deadline.is_some_and(|d| until > d) {
                return Err(ThrottleError::TimedOut);
            }
            Sleep::until(self.clock().clone(), until).await;
        }
        Ok(())
    }
}
