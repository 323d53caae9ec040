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
//!
//! # What the rest of the crate knows of an algorithm
//!
//! Besides [`Algorithm`], each algorithm a store runs states its facts in its own
//! file, as an implementation of the crate's `Facts` trait (defined here): its name
//! (in rules files, in the Redis script, in the keys it writes), its window, the quota
//! it reports in headers, whether its denials last until their retry time, one node's
//! share of it, how a rules file builds it, and its Redis twin (the Lua source and the
//! parameters sent to it). The registry (`src/algorithm/registry.rs`) lists the
//! algorithms, one line each, and turns that list into [`Rule`], its `From`s, the
//! [`RuleKind`] table of names and scripts, and every `match` that describes a rule.
//! The store reads the same list for the state it keeps per key under a rule; the
//! Redis store assembles its script from the table.
//!
//! Adding an algorithm touches exactly:
//!
//! 1. its file here (`src/algorithm/<name>.rs`, or a folder): the [`Algorithm`] and
//!    `Facts` implementations, declared in this module (`mod` and `pub use`);
//! 2. its Lua twin, `src/store/redis/scripts/<name>.lua`, which registers
//!    `ALGORITHMS.<name>` and which its `Facts::SCRIPT` names;
//! 3. one line of the registry's `algorithms!` list in `src/algorithm/registry.rs`
//!    (its tests then ask, by an exhaustive `match`, for a sample rule of the new
//!    kind).
//!
//! The store, the Redis script, the fallback's shares, the HTTP headers, the denied
//! cache and the rules file read these facts through [`Rule`] and [`RuleKind`]; none
//! needs a line of its own for a new algorithm.
//!
//! # State, and what runs an algorithm
//!
//! | algorithm | type | state | behaves like |
//! |---|---|---|---|
//! | token bucket, GCRA form | [`Gcra`] | one `u64`, lock-free | governor, redis-cell `CL.THROTTLE` |
//! | leaky bucket (meter + departure schedule) | [`LeakyBucket`] | one `u64`, lock-free | nginx `limit_req` |
//! | fixed window | [`FixedWindow`] (aligned), `FixedWindow<FirstHit>` | one `u64`, lock-free (aligned); start + count (first hit) | envoy; Redis `INCR`+`EXPIRE` |
//! | sliding window log | [`SlidingLog`] | at most 2 × `limit` timestamps | ClassDojo rolling-rate-limiter |
//! | sliding window counter | [`SlidingCounter`] | two counters | Cloudflare |
//! | smooth bursty / warming up | [`SmoothBursty`], [`SmoothWarmingUp`] | stored permits + next free time | Guava `RateLimiter` |
//! | refresh period | [`RefreshPeriod`] | cycle + permits | Resilience4j `AtomicRateLimiter` |
//! | concurrency permits | [`Concurrency`], [`Semaphore`](crate::Semaphore) | permits in use, lock-free | tokio `Semaphore` |
//! | all-or-nothing rules | [`AllOf`] | one state per rule | multi-level limits |
//!
//! Each is checked against its reference: redis-cell's `CL.THROTTLE` replies, Guava's
//! `RateLimiter` microseconds, Resilience4j's refresh cycles. Where the state fits one
//! atomic word it is lock-free, and a denial writes nothing.
//!
//! Each algorithm lives in `src/algorithm/`, one file each (the two Guava shapes share
//! `smooth/`). [`Limiter`](crate::Limiter) runs any of them in process;
//! [`KeyedLimiter`](crate::KeyedLimiter) runs one per key;
//! [`LeakyQueue`](crate::LeakyQueue) turns the leaky bucket into a bounded queue that
//! waiters leave at a constant rate.

use std::fmt;
use std::time::Duration;

use crate::decision::{Decision, Denied, Reservation};
use crate::error::ConfigError;
use crate::time::Nanos;

mod all_of;
mod concurrency;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod leased;
mod packing;
mod refresh_period;
mod registry;
pub(crate) mod script;
mod share;
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
pub use packing::{CONFIG_WORDS, Packing};
pub use refresh_period::{RefreshPeriod, RefreshPeriodState};
pub(crate) use registry::algorithms;
#[cfg(test)]
pub(crate) use registry::tests::sample_rule;
pub use registry::{Rule, RuleKind};
pub(crate) use script::Arg;
pub(crate) use share::Share;
pub use sliding_counter::{SlidingCounter, SlidingCounterState};
pub use sliding_log::{SlidingLog, SlidingLogState};
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

    /// Whether permits are held: taken for work while it lasts and given back by
    /// their holder ([`refund`](Algorithm::refund)) when it ends, rather than freed by
    /// time, as a concurrency limit's. A grant of a keyed source over such an
    /// algorithm ([`KeyedLimiter`](crate::KeyedLimiter),
    /// `SharedLimiter`) then gives its permits back
    /// when dropped, so that an integration holding it while the work lasts (the
    /// HTTP server layer, to the end of the response body) releases them. The default
    /// is no: time frees them.
    const HELD: bool = false;

    /// The word form of this algorithm, when its state is one `u64` and its
    /// configuration fits [`CONFIG_WORDS`] words: an in-process
    /// [`Limiter`](crate::Limiter) then decides with one compare-and-swap and no lock.
    /// `None` (the default): decisions run under a short lock.
    const PACKING: Option<Packing<Self>> = None;

    /// The state of a limiter created at `now`, before any request.
    fn initial_state(&self, now: Nanos) -> Self::State;

    /// Whether a denial lasts until its retry time, whatever this process does
    /// meanwhile, so that it may be answered again without deciding (an in-process
    /// limiter repeats it without its lock; a store's denied cache, without a round
    /// trip): not if something other than time ends it (a release), nor if every
    /// attempt must reach the state to count. The default is yes.
    fn denial_lasts(&self) -> bool {
        true
    }

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
    /// from then on. [`Nanos::MAX`] stands for any time past the clock's end (a
    /// saturated time): a keyed limiter never forgets such a state as idle.
    fn idle_at(&self, state: &Self::State) -> Nanos;

    /// What replacing `state` by a fresh [`initial_state`](Algorithm::initial_state)
    /// at `now` would give back at once: how much more the fresh state grants. Zero
    /// when the fresh state grants nothing more. A keyed limiter whose table is full
    /// evicts, among the keys it compares, the one whose forgetting gives back the
    /// least ([`WhenFull::EvictNearestIdle`](crate::WhenFull::EvictNearestIdle)).
    ///
    /// The unit is the algorithm's own (permits, or nanoseconds of debt for a token
    /// bucket); values are only compared between states of one configuration. The
    /// default counts permits: what a fresh state's `remaining` exceeds this one's.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::{Algorithm, SlidingLog};
    /// use tollgate::time::Nanos;
    ///
    /// let log = SlidingLog::new(10, Duration::from_secs(1))?;
    /// let mut spent = log.initial_state(Nanos::ZERO);
    /// log.acquire(&mut spent, Nanos::ZERO, 10)?;
    /// let mut once = log.initial_state(Nanos::ZERO);
    /// log.acquire(&mut once, Nanos::ZERO, 1)?;
    /// let now = Nanos::new(1_000_000);
    /// assert_eq!(log.forgetting_gives_back(&spent, now), 10);
    /// assert_eq!(log.forgetting_gives_back(&once, now), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn forgetting_gives_back(&self, state: &Self::State, now: Nanos) -> u64 {
        let remaining = |state: &Self::State| self.peek(state, now, 0).map_or(0, |a| a.remaining());
        remaining(&self.initial_state(now)).saturating_sub(remaining(state))
    }
}

/// What the rest of the crate knows of an algorithm that a store runs: each
/// algorithm implements it in its own file, and the registry
/// (`src/algorithm/registry.rs`) lists the implementations. See the module docs for what
/// adding an algorithm touches.
///
/// Every fact is plain data (names, numbers, Lua source text, parameters), so that
/// this layer imports nothing above it: the store turns them into Redis calls, the
/// HTTP layer into headers, the rules file into rules.
pub(crate) trait Facts: Algorithm {
    /// The algorithm's one name: the `algorithm` of a rules file, the kind the Redis
    /// script dispatches on, and the start of every value it writes
    /// (`"<name>:<state>"`). Snake case.
    const NAME: &'static str;

    /// The Lua source that registers `ALGORITHMS.<NAME>` in the Redis script: the
    /// algorithm's twin, after any file that twin is built on. Algorithms with the same
    /// source (a file that registers several) share one definition in the script.
    const SCRIPT: &'static str;

    /// How a rules file's `rate_limit` builds the algorithm, if it can.
    const CONFIG: Option<FromConfig<Self>> = None;

    /// The time an emptied limiter takes to become full again with no request
    /// meanwhile: the `w` its `RateLimit-Policy` reports.
    fn window(&self) -> Duration;

    /// The quota its `RateLimit-Policy` reports (`q`): the limit its decisions
    /// report, [`capacity`](Algorithm::capacity) unless that counts something else.
    fn quota(&self) -> u64 {
        self.capacity()
    }

    /// One node's part of the algorithm when `share`'s nodes each decide alone, so
    /// that together they admit no more than the whole: counts and rates divided,
    /// never rounded up; windows, leases and other settings kept.
    ///
    /// # Errors
    ///
    /// As `Rule::per_node`.
    fn per_node(&self, share: Share) -> Result<Self, ConfigError>;

    /// The parameters its Lua twin reads, in the twin's order.
    ///
    /// # Errors
    ///
    /// A configuration the script cannot run exactly: a time not a whole number of
    /// microseconds ([`ConfigError::OutOfRange`]), or past what the script's doubles
    /// hold ([`ConfigError::TooLong`], [`ConfigError::Overflow`]).
    fn script_args(&self) -> Result<Vec<Arg>, ConfigError>;
}

/// How a rules file's `rate_limit` (`requests_per_unit` per `unit`, and a `burst`
/// where one applies) builds an algorithm.
pub(crate) struct FromConfig<A> {
    /// Whether a `burst` applies.
    pub(crate) takes_burst: bool,
    /// The algorithm for `requests_per_unit` per `unit`, with the `burst` if given.
    pub(crate) build: fn(u64, Duration, Option<u64>) -> Result<A, ConfigError>,
}

/// `interval × n`, or [`Duration::MAX`] past it: the time `n` permits take to refill.
pub(crate) fn times(interval: Duration, n: u64) -> Duration {
    u64::try_from(interval.as_nanos().saturating_mul(u128::from(n)))
        .map_or(Duration::MAX, Duration::from_nanos)
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
