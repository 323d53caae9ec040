//! The algorithms, each a pure state machine: `(config, state, now, n) -> Decision`.
//!
//! An algorithm value holds only configuration; its mutable part is a separate
//! [`Algorithm::State`]. Nothing here reads a clock, takes a lock or does I/O, so every
//! algorithm can be tested under virtual time, run lock-free or under a short lock in
//! process, stored per key, and mirrored by a Redis script.
//!
//! | type | behaviour | anchor |
//! |---|---|---|
//! | [`Gcra`] | token bucket in GCRA form: burst + continuous refill, one `u64` of state | governor, redis-cell |
//! | [`LeakyBucket`] | meter: constant outflow, overflow rejected; departure schedule | nginx `limit_req` |
//! | [`FixedWindow`] | N per window, epoch- or first-hit-aligned | Redis `INCR`+`EXPIRE`, envoy |
//! | [`SlidingLog`] | exact rolling window, optional minimum gap, optional counting of blocked attempts | ClassDojo |
//! | [`SlidingCounter`] | current + weighted previous window | Cloudflare |
//! | [`SmoothBursty`], [`SmoothWarmingUp`] | Guava: reservations prepay, warm-up | Guava `RateLimiter` |
//! | [`RefreshPeriod`] | `limit_for_period` per `refresh_period` with a timeout | Resilience4j |
//! | [`Concurrency`] | permits held and given back | tokio `Semaphore` |
//! | [`Leased`] | permits held, taken back after a lease without renewal | Redis semaphores |
//! | [`AllOf`] | several rules, all-or-nothing | multi-level limits |

use std::fmt;
use std::time::Duration;

use crate::decision::{Decision, Denied, Reservation};
use crate::time::Nanos;

mod all_of;
mod concurrency;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod leased;
mod packing;
mod refresh_period;
mod sliding_counter;
mod sliding_log;
mod smooth;
#[cfg(test)]
mod testing;

pub use all_of::AllOf;
pub(crate) use all_of::{later_denial, tighter};
pub use concurrency::Concurrency;
pub use fixed_window::{Aligned, FirstHit, FirstHitState, FixedWindow};
pub use gcra::{CellReply, Gcra};
pub use leaky_bucket::{Departure, LeakyBucket};
pub use leased::{Leased, LeasedState};
pub use packing::{Packing, CONFIG_WORDS};
pub use refresh_period::{RefreshPeriod, RefreshPeriodState};
pub use sliding_counter::{SlidingCounter, SlidingCounterState};
pub use sliding_log::SlidingLog;
pub use smooth::{
    Bursty, Smooth, SmoothBursty, SmoothShape, SmoothState, SmoothWarmingUp, WarmingUp,
};

/// A rate-limiting algorithm: immutable configuration (`self`) over a mutable
/// [`State`](Algorithm::State).
///
/// Every method is a pure function of its arguments. A method that is denied changes
/// nothing.
///
/// # Examples
///
/// Driving an algorithm by hand, with time as a plain number:
///
/// ```
/// use tollgate::algorithm::{Algorithm, Gcra};
/// use tollgate::time::Nanos;
/// use tollgate::Quota;
///
/// let gcra = Gcra::new(Quota::per_second(2)?);
/// let mut state = gcra.initial_state(Nanos::ZERO);
/// assert!(gcra.acquire(&mut state, Nanos::ZERO, 2).is_ok());
/// assert!(gcra.acquire(&mut state, Nanos::ZERO, 1).is_err());
/// assert!(gcra.acquire(&mut state, Nanos::new(500_000_000), 1).is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub trait Algorithm: Clone + Send + Sync + fmt::Debug + 'static {
    /// The mutable part: what a limiter stores, once per key for a keyed limiter.
    type State: Clone + Send + Sync + fmt::Debug + 'static;

    /// Whether [`reserve`](Algorithm::reserve) books future capacity, so that a
    /// denial under a `max_wait` means the wait is longer than `max_wait`. A waiting
    /// limiter then fails a timed wait at once instead of at its deadline.
    const BOOKS_AHEAD: bool = false;

    /// The word form of this algorithm, when its state is one `u64` and its
    /// configuration fits [`CONFIG_WORDS`] words: an in-process
    /// [`Limiter`](crate::Limiter) then decides with one compare-and-swap and no lock.
    /// `None` (the default): decisions run under a short lock.
    const PACKING: Option<Packing<Self>> = None;

    /// The state of a limiter created at `now`, before any request.
    fn initial_state(&self, now: Nanos) -> Self::State;

    /// Decides on `n` permits at `now`, consuming them if admitted.
    ///
    /// `n == 0` is a peek that always succeeds and changes nothing, whatever was
    /// taken and however the configuration changed since.
    fn acquire(&self, state: &mut Self::State, now: Nanos, n: u64) -> Decision;

    /// Decides on `n` permits at `now` without consuming anything.
    fn peek(&self, state: &Self::State, now: Nanos, n: u64) -> Decision {
        self.acquire(&mut state.clone(), now, n)
    }

    /// Commits `n` permits now, to be used after the returned wait, provided that wait
    /// is at most `max_wait`. Denied, nothing changes. `n == 0` is always granted at
    /// once and changes nothing.
    ///
    /// Algorithms that can book future capacity (GCRA, leaky bucket, Guava,
    /// Resilience4j, fixed window, sliding log) grant waits up to `max_wait`; the
    /// others grant only immediate reservations and deny with `retry_after`.
    fn reserve(
        &self,
        state: &mut Self::State,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied>;

    /// Gives back `n` permits acquired or reserved earlier and not used. Refunds never
    /// raise the limiter above its untouched state.
    fn refund(&self, state: &mut Self::State, now: Nanos, n: u64);

    /// The most permits one request can be granted; asking for more is
    /// [`Denied::Insufficient`].
    fn capacity(&self) -> u64;

    /// Units booked and not yet gone, which a bounded queue over this algorithm
    /// counts as already queued. Zero unless the algorithm is itself a queue.
    fn backlog(&self, _state: &Self::State, _now: Nanos) -> u64 {
        0
    }

    /// The earliest time from which replacing `state` by a fresh
    /// [`initial_state`](Algorithm::initial_state) would admit nothing more than
    /// keeping it, if no request comes meanwhile. A keyed limiter may evict the key
    /// from then on.
    fn idle_at(&self, state: &Self::State) -> Nanos;
}

/// Checks the never-grantable case shared by every algorithm.
#[inline]
pub(crate) fn check_capacity(n: u64, capacity: u64) -> Result<(), Denied> {
    if n > capacity {
        Err(crate::decision::InsufficientCapacity::new(n, capacity).into())
    } else {
        Ok(())
    }
}
