//! Partitioned admission: one concurrency limit shared by named partitions, each
//! guaranteed a share of it, bursting into spare capacity.
//!
//! Two layers, one set of rules:
//!
//! - [`PartitionedLimiter`](super::PartitionedLimiter), exported from
//!   [`adaptive`](super), is what most users want: it feeds each finished request to
//!   a [`LimitAlgorithm`](super::LimitAlgorithm) and moves the limit with its
//!   answers.
//! - [`Partitions`], this module's, is the admission core the limiter is built on:
//!   a limit you set yourself (a fixed one, or one driven by your own algorithm),
//!   the shares and the in-flight counts; no algorithm, no clock.
//!
//! Both admit by [`PartitionMode`] and refuse with [`PartitionDenied`].
//!
//! [`Partitions`] follows Netflix's `AbstractPartitionedLimiter` (concurrency-limits):
//! the global limit, settable at any time ([`Partitions::set_limit`], what an
//! adaptive limit drives), the partitions with their shares, and the in-flight
//! counts. Each decision reads and updates the counts
//! under one short lock, so no race lets in more than the rule allows. Upstream checks
//! `inflight < limit` and only then increments (concurrency-limits#234), so
//! concurrent acquires can all pass the check: its own concurrency test allows the
//! limit plus the number of threads.
//!
//! # The rules
//!
//! A partition's own limit is upstream's rounding of its share:
//! `max(1, ceil(limit × share))`, recomputed on every limit change. The rounding up can
//! make the partitions' limits add up to more than the global limit (three shares of
//! 1/3 of 10 are 4 each).
//!
//! - [`PartitionMode::Strict`] (the default): never more in flight than the limit. A
//!   partition below its own limit is admitted while the global limit has room; above
//!   it, a partition bursts only into room no other partition has reserved (a
//!   partition's reservation is what it does not use of its own limit). With shares
//!   adding up to 1 nothing is left to burst into while the others are idle: leave
//!   part of the limit unshared (shares adding up to less than 1) for a common burst
//!   pool. Where rounding makes the partitions' limits add up to more than the limit,
//!   the overlap goes to whoever asks first.
//! - [`PartitionMode::NetflixCompatible`]: upstream's decisions. Below the global
//!   limit everything is admitted; at or above it, only a partition below its own
//!   limit. So after batch has burst to the limit of 10, live still gets its 7: 17 in
//!   flight. The excess is bounded: in-flight never passes `limit + the sum of the
//!   partitions' limits` while the limit stays put (about `2 × limit + partitions` at
//!   most, the shares adding up to at most 1), and [`Partitions::in_flight_bound`]
//!   says how much that is. The bound is reached
//!   when unknown requests fill the limit and every partition then takes its own.
//!
//! In both modes, lowering the limit revokes nothing: requests in flight stay, and
//! admissions wait for the counts to come down.
//!
//! # The unknown partition
//!
//! A name that is none of the partitions goes to the unknown partition, as upstream's
//! resolver does: it has no share (its limit stays 0), so it only bursts. In
//! `NetflixCompatible` mode it is admitted while the global limit has room; in
//! `Strict` mode while the room is not reserved.
//!
//! # Bypassing
//!
//! Upstream's bypass predicate lets a request through without counting it anywhere
//! (its in-flight, its limit algorithm and its partitions never see it). The predicate
//! belongs to the limiter wrapping this core; the core gives it
//! [`Partitions::bypass`], a permit that counts nothing.
//!
//! # Driving it from an adaptive limit
//!
//! A limiter calls [`Partitions::set_limit`] with each new limit of its
//! [`LimitAlgorithm`](super::LimitAlgorithm), keeps the
//! [`OwnedPartitionPermit`] in the guard it hands out, and takes the sample's
//! in-flight count from [`OwnedPartitionPermit::in_flight`].

use crate::error::ConfigError;
use crate::sync::{Arc, Mutex};

mod config;
mod denied;
/// The limiter on this core; `adaptive` exports its types.
pub(super) mod limiter;
mod mode;
mod permit;
mod state;
#[cfg(test)]
mod tests;

pub use config::PartitionsBuilder;
pub use denied::PartitionDenied;
pub use mode::PartitionMode;
pub use permit::{OwnedPartitionPermit, PartitionPermit};

use permit::Held;
use state::State;

/// A concurrency limit shared by named partitions: the core of a partitioned limiter.
///
/// See the [module documentation](self) for the admission rules.
///
/// # Examples
///
/// Netflix's example, a limit of 10 split 30/70 between batch and live:
///
/// ```
/// use tollgate::adaptive::partition::{PartitionMode, Partitions};
///
/// let build = |mode| {
///     Partitions::builder(10)
///         .partition("batch", 0.3)
///         .partition("live", 0.7)
///         .mode(mode)
///         .build()
/// };
///
/// // Netflix's rule: batch bursts to the whole limit, and live still gets its 7.
/// let netflix = build(PartitionMode::NetflixCompatible)?;
/// let batch: Vec<_> = (0..10).map(|_| netflix.try_acquire("batch")).collect::<Result<_, _>>()?;
/// let live: Vec<_> = (0..7).map(|_| netflix.try_acquire("live")).collect::<Result<_, _>>()?;
/// assert_eq!(netflix.in_flight(), 17);
/// assert!(netflix.try_acquire("live").is_err());
///
/// // Strict: live's 7 stay reserved while it is idle, so batch stops at its 3.
/// let strict = build(PartitionMode::Strict)?;
/// let batch: Vec<_> = (0..3).map(|_| strict.try_acquire("batch")).collect::<Result<_, _>>()?;
/// assert!(strict.try_acquire("batch").unwrap_err().is_reserved());
/// let live: Vec<_> = (0..7).map(|_| strict.try_acquire("live")).collect::<Result<_, _>>()?;
/// assert_eq!(strict.in_flight(), 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Partitions {
    /// The partitions' names, by slot; the unknown partition is the slot after them.
    names: Vec<String>,
    state: Mutex<State>,
}

/// # Building and configuring
impl Partitions {
    /// Starts a builder for partitions of the global `limit`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10).partition("live", 0.7).build()?;
    /// assert_eq!(partitions.limit(), 10);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn builder(limit: u64) -> PartitionsBuilder {
        PartitionsBuilder::new(limit)
    }

    /// The admission rule.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::{PartitionMode, Partitions};
    ///
    /// let partitions = Partitions::builder(10).partition("live", 0.7).build()?;
    /// assert_eq!(partitions.mode(), PartitionMode::Strict);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn mode(&self) -> PartitionMode {
        self.state.lock().mode()
    }

    /// The global limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10).partition("live", 0.7).build()?;
    /// partitions.set_limit(20)?;
    /// assert_eq!(partitions.limit(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn limit(&self) -> u64 {
        self.state.lock().limit()
    }

    /// Changes the global limit, and every partition's limit with it. Requests in
    /// flight stay admitted: if more are in flight than the new limit allows,
    /// admissions are refused until enough are released.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] if `limit` is zero (nothing could be admitted, or in
    /// Netflix's rounding one per partition); nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10).partition("batch", 0.3).build()?;
    /// let _held = partitions.try_acquire("batch")?;
    /// partitions.set_limit(20)?;
    /// assert_eq!(partitions.partition_limit("batch"), 6);
    /// assert_eq!(partitions.partition_in_flight("batch"), 1);
    /// assert!(partitions.set_limit(0).is_err());
    /// assert_eq!(partitions.limit(), 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_limit(&self, limit: u64) -> Result<(), ConfigError> {
        if limit == 0 {
            return Err(ConfigError::Zero { parameter: "limit" });
        }
        self.state.lock().set_limit(limit);
        Ok(())
    }
}

/// # Admitting
impl Partitions {
    /// Admits one request of the partition named `partition` if the mode's rule
    /// allows it. A name that is none of the partitions goes to the unknown partition
    /// (see the [module documentation](self#the-unknown-partition)).
    ///
    /// # Errors
    ///
    /// [`PartitionDenied`] when the rule refuses the request now.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(2).partition("live", 0.5).build()?;
    /// let live = partitions.try_acquire("live")?;
    /// let other = partitions.try_acquire("no such partition")?; // the spare half
    /// assert!(partitions.try_acquire("no such partition").is_err());
    /// drop((live, other));
    /// assert_eq!(partitions.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, partition: &str) -> Result<PartitionPermit<'_>, PartitionDenied> {
        let held = self.admit(partition)?;
        Ok(PartitionPermit::new(self, held))
    }

    /// [`try_acquire`](Self::try_acquire) for a permit that holds the `Arc`, to keep
    /// in a guard, a task or another thread.
    ///
    /// # Errors
    ///
    /// [`PartitionDenied`] when the rule refuses the request now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(1).partition("live", 1.0).build()?);
    /// let permit = partitions.try_acquire_owned("live")?;
    /// assert!(partitions.try_acquire_owned("live").is_err());
    /// drop(permit);
    /// assert!(partitions.try_acquire_owned("live").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(
        self: &Arc<Self>,
        partition: &str,
    ) -> Result<OwnedPartitionPermit, PartitionDenied> {
        let held = self.admit(partition)?;
        Ok(OwnedPartitionPermit::new(Arc::clone(self), held))
    }

    /// A permit for a request the wrapping limiter's bypass predicate lets through:
    /// counted nowhere, limited by nothing, as upstream's bypass.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(1).partition("live", 1.0).build()?;
    /// let _live = partitions.try_acquire("live")?;
    /// let admin = partitions.bypass();
    /// assert!(admin.is_bypass());
    /// assert_eq!(partitions.in_flight(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bypass(&self) -> PartitionPermit<'_> {
        PartitionPermit::new(self, Held::bypass())
    }

    /// [`bypass`](Self::bypass) for a permit that holds the `Arc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(1).partition("live", 1.0).build()?);
    /// assert!(partitions.bypass_owned().is_bypass());
    /// assert_eq!(partitions.in_flight(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn bypass_owned(self: &Arc<Self>) -> OwnedPartitionPermit {
        OwnedPartitionPermit::new(Arc::clone(self), Held::bypass())
    }

    fn admit(&self, partition: &str) -> Result<Held, PartitionDenied> {
        let slot = self.slot(partition);
        let admission = self
            .state
            .lock()
            .try_admit(slot)
            .map_err(PartitionDenied::new)?;
        Ok(Held::slot(slot, admission.in_flight))
    }

    pub(super) fn release(&self, slot: usize) {
        self.state.lock().release(slot);
    }

    /// The slot of the partition named `name`, or the unknown partition's.
    fn slot(&self, name: &str) -> usize {
        self.names
            .iter()
            .position(|known| known == name)
            .unwrap_or(self.names.len())
    }
}

/// # Counts
impl Partitions {
    /// How many requests are in flight, all partitions together (bypasses excluded).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10).partition("live", 0.7).build()?;
    /// let _held = (partitions.try_acquire("live")?, partitions.try_acquire("other")?);
    /// assert_eq!(partitions.in_flight(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.state.lock().in_flight()
    }

    /// How many requests of the partition named `partition` are in flight; for a name
    /// that is none of the partitions, those of the unknown partition.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10).partition("live", 0.7).build()?;
    /// let _held = partitions.try_acquire("a")?;
    /// assert_eq!(partitions.partition_in_flight("b"), 1); // both unknown
    /// assert_eq!(partitions.partition_in_flight("live"), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_in_flight(&self, partition: &str) -> u64 {
        let slot = self.slot(partition);
        self.state.lock().busy(slot)
    }

    /// The own limit of the partition named `partition`, `max(1, ceil(limit ×
    /// share))`; 0 for a name that is none of the partitions.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// assert_eq!(partitions.partition_limit("batch"), 3);
    /// assert_eq!(partitions.partition_limit("live"), 7);
    /// assert_eq!(partitions.partition_limit("other"), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn partition_limit(&self, partition: &str) -> u64 {
        let slot = self.slot(partition);
        self.state.lock().share_limit(slot)
    }

    /// The most requests admissions can bring in flight while the limit stays as it
    /// is: the limit in [`Strict`](PartitionMode::Strict) mode, the limit plus the sum
    /// of the partitions' limits in
    /// [`NetflixCompatible`](PartitionMode::NetflixCompatible) mode (saturating).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::{PartitionMode, Partitions};
    ///
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .mode(PartitionMode::NetflixCompatible)
    ///     .build()?;
    /// assert_eq!(partitions.in_flight_bound(), 20);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn in_flight_bound(&self) -> u64 {
        self.state.lock().in_flight_bound()
    }
}
