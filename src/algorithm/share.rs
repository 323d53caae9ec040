//! [`Share`]: how counts and rates divide among nodes that each decide alone, for
//! each algorithm's [`Facts::per_node`](super::Facts::per_node).

use std::time::Duration;

use crate::error::ConfigError;
use crate::quota::Quota;

/// A number of nodes, at least 1, and one node's part of a count, an interval, a gap
/// or a rate: never rounded up, so that the parts never add up to more than the whole.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Share(u64);

impl Share {
    /// The share of one node of `nodes`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `nodes == 0`.
    pub(crate) fn new(nodes: u32) -> Result<Share, ConfigError> {
        match nodes {
            0 => Err(ConfigError::Zero { parameter: "nodes" }),
            nodes => Ok(Share(u64::from(nodes))),
        }
    }

    /// A count's share, rounded down: zero is an error.
    pub(crate) fn count(self, whole: u64) -> Result<u64, ConfigError> {
        match whole / self.0 {
            0 => Err(ConfigError::OutOfRange {
                parameter: "nodes",
                expected: "at most the rule's limit, so that each node's share holds a permit",
            }),
            share => Ok(share),
        }
    }

    /// One permit every `nodes` intervals.
    pub(crate) fn interval(self, whole: Duration) -> Result<Quota, ConfigError> {
        let nanos = u64::try_from(whole.as_nanos())
            .ok()
            .and_then(|n| n.checked_mul(self.0))
            .ok_or(ConfigError::Overflow { parameter: "nodes" })?;
        Quota::with_period(Duration::from_nanos(nanos))
            .map_err(|_| ConfigError::Overflow { parameter: "nodes" })
    }

    /// A minimum gap `nodes` times as long; no gap stays none.
    pub(crate) fn gap(self, whole: Duration) -> Result<Duration, ConfigError> {
        whole
            .checked_mul(u32::try_from(self.0).unwrap_or(u32::MAX))
            .filter(|gap| u64::try_from(gap.as_nanos()).is_ok())
            .ok_or(ConfigError::Overflow { parameter: "nodes" })
    }

    /// A rate divided by `nodes`, never rounded up.
    pub(crate) fn rate(self, whole: f64) -> f64 {
        let nodes = self.0 as f64;
        let share = whole / nodes;
        if share * nodes > whole && share > 0.0 {
            // The next smaller double: the share times the nodes stays within the whole.
            f64::from_bits(share.to_bits() - 1)
        } else {
            share
        }
    }
}

/// A shared rate below what the algorithm accepts is a share too small, said of the
/// nodes rather than of the rate the caller never gave.
pub(crate) fn too_slow(error: ConfigError) -> ConfigError {
    match error {
        ConfigError::OutOfRange { .. } => ConfigError::OutOfRange {
            parameter: "nodes",
            expected: "few enough that each node's share of the rate is one the algorithm \
                       accepts",
        },
        ConfigError::Overflow { .. } => ConfigError::Overflow { parameter: "nodes" },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_nodes_is_an_error() {
        assert!(matches!(
            Share::new(0),
            Err(ConfigError::Zero { parameter: "nodes" })
        ));
    }

    #[test]
    fn a_rate_share_is_rounded_down() {
        let share = Share::new(3).unwrap();
        for whole in [0.1, 1.0, 7.0, 10.0, 1e6, 0.7, 123.456] {
            let part = share.rate(whole);
            assert!(part * 3.0 <= whole, "{whole}: {part}");
            assert!(part > 0.0);
        }
    }
}
