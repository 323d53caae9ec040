//! [`ResilientBuilder`]: the settings of a [`Resilient`] store, checked when it is
//! built.

use std::time::Duration;

use super::Resilient;
use super::breaker::Breaker;
use super::policy::{FailurePolicy, Policy};
use super::stats::Counters;
use crate::error::ConfigError;
use crate::store::{MemoryStore, Store, StoreError};
use crate::table::KeyedConfig;
use crate::time::{Clock, MonotonicClock};

/// How long one call to the inner store may take by default.
pub(super) const DEFAULT_DEADLINE: Duration = Duration::from_millis(5);
/// Consecutive failures that open the breaker by default.
const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// How long an open breaker stays open by default before it lets a probe through.
const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(1);
/// How many keys the local fallback holds by default.
const DEFAULT_FALLBACK_KEYS: usize = 100_000;
/// The prefix of the local fallback's keys; they never leave the process.
const FALLBACK_PREFIX: &str = "fallback";

/// The settings of a [`Resilient`] store; [`build`](ResilientBuilder::build) checks
/// them.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::store::{FailurePolicy, MemoryStore, Resilient};
/// use tollgate::{ConfigError, KeyedConfig};
///
/// let inner = MemoryStore::new(KeyedConfig::new(100), "api")?;
/// let error = Resilient::builder(inner, FailurePolicy::Open)
///     .deadline(Duration::ZERO)
///     .build()
///     .unwrap_err();
/// assert_eq!(error, ConfigError::Zero { parameter: "deadline" });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ResilientBuilder<S, C = MonotonicClock> {
    inner: S,
    policy: FailurePolicy,
    clock: C,
    deadline: Duration,
    failure_threshold: u32,
    cool_down: Duration,
    fallback_keys: KeyedConfig,
}

impl<S> ResilientBuilder<S, MonotonicClock> {
    /// The defaults of [`Resilient::new`].
    pub(super) fn new(inner: S, policy: FailurePolicy) -> Self {
        ResilientBuilder {
            inner,
            policy,
            clock: MonotonicClock::new(),
            deadline: DEFAULT_DEADLINE,
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            cool_down: DEFAULT_COOL_DOWN,
            fallback_keys: KeyedConfig::new(DEFAULT_FALLBACK_KEYS),
        }
    }
}

impl<S, C> ResilientBuilder<S, C> {
    /// How long one call to the inner store may take (default 5 ms).
    pub fn deadline(self, deadline: Duration) -> Self {
        ResilientBuilder { deadline, ..self }
    }

    /// How many consecutive failures open the breaker (default 5).
    pub fn failure_threshold(self, failures: u32) -> Self {
        ResilientBuilder {
            failure_threshold: failures,
            ..self
        }
    }

    /// How long the breaker stays open before it lets a probe through (default 1 s).
    pub fn cool_down(self, cool_down: Duration) -> Self {
        ResilientBuilder { cool_down, ..self }
    }

    /// The memory bound of the local store of [`FailurePolicy::Fallback`] (default
    /// 100,000 keys).
    pub fn fallback_keys(self, config: KeyedConfig) -> Self {
        ResilientBuilder {
            fallback_keys: config,
            ..self
        }
    }

    /// The clock of the deadline, the breaker and the local fallback (a
    /// [`ManualClock`](crate::time::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> ResilientBuilder<S, C2> {
        ResilientBuilder {
            inner: self.inner,
            policy: self.policy,
            clock,
            deadline: self.deadline,
            failure_threshold: self.failure_threshold,
            cool_down: self.cool_down,
            fallback_keys: self.fallback_keys,
        }
    }
}

impl<S: Store, C: Clock> ResilientBuilder<S, C> {
    /// The store.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero deadline, failure threshold, cool-down, or
    /// number of fallback nodes; the errors of [`KeyedConfig::validate`] for the
    /// fallback's bound (checked only under [`FailurePolicy::Fallback`]).
    pub fn build(self) -> Result<Resilient<S, C>, ConfigError> {
        if self.deadline.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "deadline",
            });
        }
        if self.failure_threshold == 0 {
            return Err(ConfigError::Zero {
                parameter: "failure_threshold",
            });
        }
        if self.cool_down.is_zero() {
            return Err(ConfigError::Zero {
                parameter: "cool_down",
            });
        }
        let policy = match self.policy {
            FailurePolicy::Fallback { nodes: 0 } => {
                return Err(ConfigError::Zero { parameter: "nodes" });
            }
            FailurePolicy::Fallback { nodes } => {
                self.fallback_keys.validate()?;
                let local = MemoryStore::with_clock(
                    self.fallback_keys,
                    FALLBACK_PREFIX,
                    self.clock.clone(),
                )
                .map_err(|e| match e {
                    StoreError::Config(e) => e,
                    _ => ConfigError::OutOfRange {
                        parameter: "fallback_keys",
                        expected: "a bound a memory store accepts",
                    },
                })?;
                Policy::Local { nodes, local }
            }
            FailurePolicy::Open => Policy::Open,
            FailurePolicy::Closed => Policy::Closed,
        };
        Ok(Resilient {
            inner: self.inner,
            clock: self.clock,
            deadline: self.deadline,
            policy,
            breaker: Breaker::new(self.failure_threshold, self.cool_down),
            counters: Counters::default(),
        })
    }
}
