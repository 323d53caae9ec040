//! [`PartitionDenied`]: a refused admission, with the counts it was decided on.

use std::fmt;

use super::mode::Refusal;
use super::state::Rejection;

/// A request a [`Partitions`](super::Partitions) did not admit, not now: it may be
/// admitted once requests finish or the limit rises.
///
/// Carries the counts the decision read, all from the same instant.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::partition::Partitions;
///
/// let partitions = Partitions::builder(2).partition("live", 1.0).build()?;
/// let _held = (partitions.try_acquire("live")?, partitions.try_acquire("live")?);
/// let denied = partitions.try_acquire("live").unwrap_err();
/// assert_eq!((denied.in_flight(), denied.limit()), (2, 2));
/// assert!(!denied.is_reserved());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionDenied {
    reserved: bool,
    limit: u64,
    in_flight: u64,
    partition_limit: u64,
    partition_in_flight: u64,
}

impl PartitionDenied {
    pub(super) fn new(rejection: Rejection) -> PartitionDenied {
        PartitionDenied {
            reserved: rejection.refusal == Refusal::Reserved,
            limit: rejection.limit,
            in_flight: rejection.in_flight,
            partition_limit: rejection.share_limit,
            partition_in_flight: rejection.busy,
        }
    }

    /// Whether room was left under the global limit but reserved for other
    /// partitions' guaranteed shares ([`Strict`](super::PartitionMode::Strict) mode
    /// only). Otherwise the limit was reached.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// // A limit of 10: live's 7 are reserved while batch, at its 3, asks for more.
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// let _batch: Vec<_> = (0..3).map(|_| partitions.try_acquire("batch")).collect::<Result<_, _>>()?;
    /// let denied = partitions.try_acquire("batch").unwrap_err();
    /// assert!(denied.is_reserved());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_reserved(&self) -> bool {
        self.reserved
    }

    /// The global limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// // A limit of 10: live's 7 are reserved while batch, at its 3, asks for more.
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// let _batch: Vec<_> = (0..3).map(|_| partitions.try_acquire("batch")).collect::<Result<_, _>>()?;
    /// let denied = partitions.try_acquire("batch").unwrap_err();
    /// assert_eq!(denied.limit(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How many requests were in flight, all partitions together.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// // A limit of 10: live's 7 are reserved while batch, at its 3, asks for more.
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// let _batch: Vec<_> = (0..3).map(|_| partitions.try_acquire("batch")).collect::<Result<_, _>>()?;
    /// let denied = partitions.try_acquire("batch").unwrap_err();
    /// assert_eq!(denied.in_flight(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The partition's own limit (0 for the unknown partition).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// // A limit of 10: live's 7 are reserved while batch, at its 3, asks for more.
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// let _batch: Vec<_> = (0..3).map(|_| partitions.try_acquire("batch")).collect::<Result<_, _>>()?;
    /// let denied = partitions.try_acquire("batch").unwrap_err();
    /// assert_eq!(denied.partition_limit(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_limit(&self) -> u64 {
        self.partition_limit
    }

    /// How many of the partition's requests were in flight.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// // A limit of 10: live's 7 are reserved while batch, at its 3, asks for more.
    /// let partitions = Partitions::builder(10)
    ///     .partition("batch", 0.3)
    ///     .partition("live", 0.7)
    ///     .build()?;
    /// let _batch: Vec<_> = (0..3).map(|_| partitions.try_acquire("batch")).collect::<Result<_, _>>()?;
    /// let denied = partitions.try_acquire("batch").unwrap_err();
    /// assert_eq!(denied.partition_in_flight(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition_in_flight(&self) -> u64 {
        self.partition_in_flight
    }
}

impl fmt::Display for PartitionDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = if self.reserved {
            "the room left is reserved for other partitions"
        } else {
            "the limit is reached"
        };
        write!(
            f,
            "partition denied: {why} ({} of {} in flight; the partition {} of {})",
            self.in_flight, self.limit, self.partition_in_flight, self.partition_limit
        )
    }
}

impl std::error::Error for PartitionDenied {}
