//! [`PartitionMode`]: the admission rule, as a pure function of one consistent view of
//! the counts.

/// How a [`Partitions`](super::Partitions) decides whether a request may start.
///
/// Both rules are applied to one consistent view of the counts, taken and updated
/// under one lock, so no race lets more requests in than the rule allows.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::partition::{PartitionMode, Partitions};
///
/// let partitions = Partitions::builder(10)
///     .partition("live", 0.7)
///     .mode(PartitionMode::NetflixCompatible)
///     .build()?;
/// assert_eq!(partitions.mode(), PartitionMode::NetflixCompatible);
/// assert_eq!(PartitionMode::default(), PartitionMode::Strict);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PartitionMode {
    /// Never more in flight than the global limit. A partition below its guaranteed
    /// share is admitted whenever the global limit has room; a partition at or above
    /// its share (and a request for an unknown partition) may burst only into room
    /// that no other partition has reserved:
    ///
    /// `in_flight + 1 + unused reservations of the other partitions <= limit`,
    ///
    /// where a partition's unused reservation is `max(0, its limit - its in-flight)`.
    /// So a partition's guaranteed share is free for it whenever it asks, unless the
    /// rounded-up shares add up to more than the limit, or the limit was lowered below
    /// what is already in flight (see [`Partitions`](super::Partitions)).
    #[default]
    Strict,
    /// Netflix's rule (`AbstractPartitionedLimiter`): below the global limit every
    /// request is admitted; at or above it, a request is admitted only if its
    /// partition is below its own limit. A partition's share is thus honoured even
    /// after others have filled the global limit by bursting (batch 10 + live 7
    /// against a limit of 10), so in-flight can pass the limit, but never past
    /// `limit + the sum of the partitions' limits`
    /// ([`Partitions::in_flight_bound`](super::Partitions::in_flight_bound)).
    NetflixCompatible,
}

/// The counts one decision reads, all from the same instant.
#[derive(Clone, Copy, Debug)]
pub(super) struct View {
    /// The global limit.
    pub(super) limit: u64,
    /// Admitted and not yet released, all partitions together.
    pub(super) in_flight: u64,
    /// The requested partition's own limit (0 for the unknown partition).
    pub(super) share_limit: u64,
    /// The requested partition's in-flight count.
    pub(super) busy: u64,
    /// The other partitions' unused reservations, summed.
    pub(super) unused_elsewhere: u128,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The global limit is reached (and, in Netflix's rule, the partition is at its
    /// own limit too).
    Full,
    /// Room is left, but it is reserved for other partitions' guaranteed shares.
    Reserved,
}

impl PartitionMode {
    /// Whether one more request of the viewed partition may start.
    pub(super) fn admits(self, view: View) -> Result<(), Refusal> {
        let within_share = view.busy < view.share_limit;
        match self {
            PartitionMode::Strict => {
                // Past its share, a partition must leave the others' reservations
                // untouched.
                let bursting_fits = || {
                    u128::from(view.in_flight) + 1 + view.unused_elsewhere <= u128::from(view.limit)
                };
                if view.in_flight >= view.limit {
                    Err(Refusal::Full)
                } else if within_share || bursting_fits() {
                    Ok(())
                } else {
                    Err(Refusal::Reserved)
                }
            }
            PartitionMode::NetflixCompatible => {
                if view.in_flight < view.limit || within_share {
                    Ok(())
                } else {
                    Err(Refusal::Full)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(limit: u64, in_flight: u64, share_limit: u64, busy: u64, unused: u128) -> View {
        View {
            limit,
            in_flight,
            share_limit,
            busy,
            unused_elsewhere: unused,
        }
    }

    #[test]
    fn strict_never_admits_at_the_limit_even_within_a_share() {
        assert_eq!(
            PartitionMode::Strict.admits(view(10, 10, 7, 0, 0)),
            Err(Refusal::Full)
        );
    }

    #[test]
    fn strict_bursts_only_into_unreserved_room() {
        // Batch (limit 3) holds 3; live (limit 5) holds none: 5 reserved, 2 spare.
        assert_eq!(PartitionMode::Strict.admits(view(10, 3, 3, 3, 5)), Ok(()));
        assert_eq!(PartitionMode::Strict.admits(view(10, 4, 3, 4, 5)), Ok(()));
        assert_eq!(
            PartitionMode::Strict.admits(view(10, 5, 3, 5, 5)),
            Err(Refusal::Reserved)
        );
    }

    #[test]
    fn netflix_admits_within_the_share_past_the_limit() {
        let mode = PartitionMode::NetflixCompatible;
        assert_eq!(mode.admits(view(10, 10, 7, 0, 0)), Ok(()));
        assert_eq!(mode.admits(view(10, 16, 7, 6, 0)), Ok(()));
        assert_eq!(mode.admits(view(10, 17, 7, 7, 0)), Err(Refusal::Full));
        assert_eq!(mode.admits(view(10, 9, 7, 9, 0)), Ok(()));
    }

    #[test]
    fn extreme_counts_do_not_overflow() {
        let max = u64::MAX;
        let unused = u128::from(max) * 3;
        assert_eq!(
            PartitionMode::Strict.admits(view(max, max - 1, max, max, unused)),
            Err(Refusal::Reserved)
        );
        assert_eq!(
            PartitionMode::Strict.admits(view(max, max - 1, max, max, 0)),
            Ok(())
        );
        assert_eq!(
            PartitionMode::NetflixCompatible.admits(view(max, max, max, max, 0)),
            Err(Refusal::Full)
        );
    }
}
