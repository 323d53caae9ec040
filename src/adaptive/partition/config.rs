//! [`PartitionsBuilder`]: the global limit, the partitions and their shares, the mode;
//! checked when built.

use crate::error::ConfigError;
use crate::sync::Mutex;

use super::Partitions;
use super::mode::PartitionMode;
use super::state::State;

/// Builds a [`Partitions`]: start with [`Partitions::builder`].
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::partition::{PartitionMode, Partitions};
///
/// let partitions = Partitions::builder(10)
///     .partition("batch", 0.3)
///     .partition("live", 0.7)
///     .mode(PartitionMode::Strict)
///     .build()?;
/// assert_eq!(partitions.partition_limit("batch"), 3);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until built"]
pub struct PartitionsBuilder {
    limit: u64,
    mode: PartitionMode,
    partitions: Vec<(String, f64)>,
}

impl PartitionsBuilder {
    pub(super) fn new(limit: u64) -> PartitionsBuilder {
        PartitionsBuilder {
            limit,
            mode: PartitionMode::default(),
            partitions: Vec::new(),
        }
    }

    /// Adds a partition guaranteed `share` of the global limit: its own limit is
    /// `max(1, ceil(limit × share))`, recomputed whenever the limit changes.
    ///
    /// Checked by [`build`](Self::build), in the order given.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(20).partition("batch", 0.3).build()?;
    /// assert_eq!(partitions.partition_limit("batch"), 6);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn partition(mut self, name: impl Into<String>, share: f64) -> PartitionsBuilder {
        self.partitions.push((name.into(), share));
        self
    }

    /// Chooses the admission rule; [`PartitionMode::Strict`] unless set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::{PartitionMode, Partitions};
    ///
    /// let partitions = Partitions::builder(10)
    ///     .partition("live", 1.0)
    ///     .mode(PartitionMode::NetflixCompatible)
    ///     .build()?;
    /// assert_eq!(partitions.mode(), PartitionMode::NetflixCompatible);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn mode(mut self, mode: PartitionMode) -> PartitionsBuilder {
        self.mode = mode;
        self
    }

    /// Checks the configuration and builds the partitions, all idle.
    ///
    /// # Errors
    ///
    /// - [`ConfigError::Zero`] for a zero `limit` (it would admit nothing, or in
    ///   Netflix's rounding one per partition) or no partitions (`partition count`).
    /// - [`ConfigError::NotANumber`], [`ConfigError::Zero`] or
    ///   [`ConfigError::Negative`] for a share that is NaN, zero or negative, and
    ///   [`ConfigError::OutOfRange`] for one above 1 (infinity included). Upstream
    ///   accepts a zero share (its partition still gets a limit of 1); here the
    ///   unknown partition is what takes no share.
    /// - [`ConfigError::OutOfRange`] (`sum of shares`) when the shares, added in the
    ///   order given in `f64` as upstream adds them, exceed 1.
    /// - [`ConfigError::OutOfRange`] (`partition name`) for a name given twice
    ///   (upstream lets the second share replace the first).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    /// use tollgate::ConfigError;
    ///
    /// let error = Partitions::builder(10)
    ///     .partition("batch", 0.5)
    ///     .partition("live", 0.6)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(error.parameter(), "sum of shares");
    /// assert_eq!(
    ///     Partitions::builder(0).partition("live", 1.0).build().unwrap_err(),
    ///     ConfigError::Zero { parameter: "limit" }
    /// );
    /// ```
    pub fn build(self) -> Result<Partitions, ConfigError> {
        if self.limit == 0 {
            return Err(ConfigError::Zero { parameter: "limit" });
        }
        if self.partitions.is_empty() {
            return Err(ConfigError::Zero {
                parameter: "partition count",
            });
        }
        let mut sum = 0.0_f64;
        for (i, (name, share)) in self.partitions.iter().enumerate() {
            check_share(*share)?;
            if self.partitions[..i].iter().any(|(other, _)| other == name) {
                return Err(ConfigError::OutOfRange {
                    parameter: "partition name",
                    expected: "unique: each name given once",
                });
            }
            sum += share;
        }
        if sum > 1.0 {
            return Err(ConfigError::OutOfRange {
                parameter: "sum of shares",
                expected: "at most 1",
            });
        }
        let shares: Vec<f64> = self.partitions.iter().map(|(_, share)| *share).collect();
        let names = self.partitions.into_iter().map(|(name, _)| name).collect();
        Ok(Partitions {
            names,
            state: Mutex::new(State::new(self.mode, self.limit, &shares)),
        })
    }
}

/// A share must be a number in (0, 1].
fn check_share(share: f64) -> Result<(), ConfigError> {
    const PARAMETER: &str = "share";
    if share.is_nan() {
        Err(ConfigError::NotANumber {
            parameter: PARAMETER,
        })
    } else if share == 0.0 {
        Err(ConfigError::Zero {
            parameter: PARAMETER,
        })
    } else if share < 0.0 {
        Err(ConfigError::Negative {
            parameter: PARAMETER,
            value: share,
        })
    } else if share > 1.0 {
        Err(ConfigError::OutOfRange {
            parameter: PARAMETER,
            expected: "at most 1",
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(share: f64) -> Result<Partitions, ConfigError> {
        Partitions::builder(10).partition("p", share).build()
    }

    #[test]
    fn bad_shares_are_typed_errors() {
        assert_eq!(
            one(f64::NAN).unwrap_err(),
            ConfigError::NotANumber { parameter: "share" }
        );
        assert_eq!(
            one(0.0).unwrap_err(),
            ConfigError::Zero { parameter: "share" }
        );
        assert_eq!(
            one(-0.0).unwrap_err(),
            ConfigError::Zero { parameter: "share" }
        );
        assert_eq!(
            one(-0.5).unwrap_err(),
            ConfigError::Negative {
                parameter: "share",
                value: -0.5
            }
        );
        for share in [1.000_001, f64::INFINITY] {
            assert_eq!(one(share).unwrap_err().parameter(), "share");
        }
        assert_eq!(
            one(f64::NEG_INFINITY).unwrap_err(),
            ConfigError::Negative {
                parameter: "share",
                value: f64::NEG_INFINITY
            }
        );
        assert!(one(1.0).is_ok());
        assert!(one(f64::MIN_POSITIVE).is_ok());
    }

    #[test]
    fn shares_summing_past_one_are_refused_as_upstream_adds_them() {
        let sum = |shares: &[f64]| {
            shares
                .iter()
                .enumerate()
                .fold(Partitions::builder(10), |builder, (i, &share)| {
                    builder.partition(i.to_string(), share)
                })
                .build()
                .map(|_| ())
                .map_err(|error| error.parameter())
        };
        assert_eq!(sum(&[0.5, 0.3, 0.2]), Ok(()));
        assert_eq!(sum(&[0.1, 0.2, 0.7]), Ok(()));
        assert_eq!(sum(&[1.0 / 3.0; 3]), Ok(()));
        assert_eq!(sum(&[0.5, 0.5, 0.001]), Err("sum of shares"));
    }

    #[test]
    fn no_partitions_duplicate_names_and_zero_limits_are_refused() {
        assert_eq!(
            Partitions::builder(10).build().unwrap_err(),
            ConfigError::Zero {
                parameter: "partition count"
            }
        );
        let duplicate = Partitions::builder(10)
            .partition("live", 0.2)
            .partition("live", 0.2)
            .build()
            .unwrap_err();
        assert_eq!(duplicate.parameter(), "partition name");
        assert_eq!(
            Partitions::builder(0)
                .partition("live", 1.0)
                .build()
                .unwrap_err(),
            ConfigError::Zero { parameter: "limit" }
        );
    }

    #[test]
    fn u64_max_limits_build() {
        let partitions = Partitions::builder(u64::MAX)
            .partition("a", 0.5)
            .partition("b", 0.5)
            .build()
            .unwrap();
        assert_eq!(partitions.partition_limit("a"), 1 << 63);
        assert!(partitions.try_acquire("a").is_ok());
    }
}
