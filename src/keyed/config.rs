//! How many keys a keyed limiter may hold, and in how many shards.

use crate::error::ConfigError;

/// The most shards a keyed limiter uses: enough for any machine, small enough that the
/// shard array (one cache line each) stays under a few megabytes.
pub const MAX_SHARDS: usize = 1 << 14;

/// The default shard count keeps at most this many keys per shard when it can, so that
/// sweeping one shard stays short.
const MAX_KEYS_PER_SHARD: usize = 1024;

/// The default shard count gives every shard at least this many keys when it can:
/// with tiny shards, one unlucky shard fills up long before `max_keys` is reached.
const MIN_KEYS_PER_SHARD: usize = 32;

/// The memory bound of a [`KeyedLimiter`](super::KeyedLimiter): at most `max_keys`
/// keys, spread over `shards` independently locked shards.
///
/// Built with [`KeyedConfig::new`] and [`KeyedConfig::shards`], checked when the
/// limiter is built (or earlier with [`KeyedConfig::validate`]).
///
/// # The bound is hard
///
/// Keys are hashed to shards, and each shard holds at most its share of `max_keys`
/// (the shares add up to exactly `max_keys`). A shard evicts keys that are idle, that
/// is back to the state of a fresh key, but **never evicts a live key**: when a key
/// arrives at a shard that is full of live keys, that request is denied with
/// [`Denied::Limited`](crate::Denied::Limited), its `retry_after` being the earliest
/// time one of the shard's keys can become idle (a key used meanwhile stays live
/// longer, so the retry may be denied again). Keys already present keep being served.
///
/// Evicting a live key instead would reset its limit: anyone able to send requests
/// under many fresh keys (random source IPs, made-up user names) could then flush the
/// keys of the clients being limited and lift their limits. Denying the newcomer keeps
/// every limit exact and memory bounded, at the price of turning new keys away while
/// the table is full; size `max_keys` for the live keys you expect (a key stays live
/// for about one refill period of its bucket after its last request).
///
/// # Examples
///
/// ```
/// use tollgate::{KeyedConfig, KeyedLimiter, Quota};
/// use tollgate::algorithm::Gcra;
///
/// let config = KeyedConfig::new(100_000).shards(64);
/// let limiter: KeyedLimiter<String, Gcra> =
///     KeyedLimiter::new(Gcra::new(Quota::per_second(10)?), config)?;
/// assert_eq!(limiter.max_keys(), 100_000);
/// assert_eq!(limiter.shards(), 64);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyedConfig {
    /// The most keys held at once, over all shards. At least 1.
    pub max_keys: usize,
    /// How many shards to use: a power of two from 1 to 16384, or `None` to pick one
    /// from the number of CPUs and `max_keys`. Never more than `max_keys` shards are
    /// used, so that every shard can hold at least one key.
    ///
    /// A sweep scans one whole shard under its lock, and under a flood of new keys a
    /// full shard sweeps each time one of its keys becomes idle; the default keeps
    /// shards to about a thousand keys for that reason. Fewer, larger shards make
    /// those sweeps longer.
    pub shards: Option<usize>,
}

impl KeyedConfig {
    /// At most `max_keys` keys, with the shard count chosen for this machine.
    ///
    /// The default shard count is the power of two at or above four per CPU, raised
    /// to keep shards at about a thousand keys at most (a sweep scans one shard), and
    /// lowered to give each shard at least 32 keys where `max_keys` is small.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::KeyedConfig;
    ///
    /// let config = KeyedConfig::new(10_000);
    /// assert_eq!(config.max_keys, 10_000);
    /// assert_eq!(config.shards, None);
    /// ```
    pub const fn new(max_keys: usize) -> KeyedConfig {
        KeyedConfig {
            max_keys,
            shards: None,
        }
    }

    /// The same bound, over exactly `shards` shards (fewer if `max_keys` is smaller).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::KeyedConfig;
    ///
    /// let config = KeyedConfig::new(10_000).shards(16);
    /// assert_eq!(config.shards, Some(16));
    /// ```
    pub const fn shards(self, shards: usize) -> KeyedConfig {
        KeyedConfig {
            shards: Some(shards),
            ..self
        }
    }

    /// Checks the configuration as building a limiter would.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for `max_keys` or `shards` of zero;
    /// [`ConfigError::OutOfRange`] for `shards` that is not a power of two or exceeds
    /// 16384.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{ConfigError, KeyedConfig};
    ///
    /// assert!(KeyedConfig::new(1).validate().is_ok());
    /// assert_eq!(
    ///     KeyedConfig::new(0).validate(),
    ///     Err(ConfigError::Zero { parameter: "max_keys" })
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.shard_count().map(|_| ())
    }

    /// The number of shards a limiter built from this configuration uses.
    pub(crate) fn shard_count(&self) -> Result<usize, ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::Zero {
                parameter: "max_keys",
            });
        }
        let wanted = match self.shards {
            None => default_shards(self.max_keys, available_parallelism()),
            Some(0) => {
                return Err(ConfigError::Zero {
                    parameter: "shards",
                })
            }
            Some(shards) if !shards.is_power_of_two() || shards > MAX_SHARDS => {
                return Err(ConfigError::OutOfRange {
                    parameter: "shards",
                    expected: "a power of two, at most 16384",
                })
            }
            Some(shards) => shards,
        };
        Ok(wanted.min(power_of_two_at_most(self.max_keys)))
    }
}

/// How many keys shard `index` of `shards` may hold: `max_keys` split as evenly as
/// possible, the shares adding up to exactly `max_keys`.
pub(crate) fn shard_capacity(max_keys: usize, shards: usize, index: usize) -> usize {
    max_keys / shards + usize::from(index < max_keys % shards)
}

fn available_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn default_shards(max_keys: usize, threads: usize) -> usize {
    let for_threads = threads
        .saturating_mul(4)
        .checked_next_power_of_two()
        .unwrap_or(MAX_SHARDS);
    let for_short_sweeps = (max_keys / MAX_KEYS_PER_SHARD)
        .checked_next_power_of_two()
        .unwrap_or(MAX_SHARDS);
    let for_even_filling = power_of_two_at_most((max_keys / MIN_KEYS_PER_SHARD).max(1));
    for_threads
        .max(for_short_sweeps)
        .min(MAX_SHARDS)
        .min(for_even_filling)
}

/// The largest power of two not above `x`, for `x >= 1`.
fn power_of_two_at_most(x: usize) -> usize {
    1 << (usize::BITS - 1 - x.max(1).leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_shards_are_four_per_thread_rounded_up() {
        assert_eq!(
            default_shards(1_000_000, 1),
            1024,
            "raised for short sweeps"
        );
        assert_eq!(default_shards(100_000, 3), 128);
        assert_eq!(default_shards(4_000, 3), 16);
        assert_eq!(default_shards(4_000, 2), 8);
    }

    #[test]
    fn default_shards_keep_small_bounds_in_few_shards() {
        assert_eq!(default_shards(1, 64), 1);
        assert_eq!(default_shards(100, 64), 2);
        assert_eq!(default_shards(1_000, 64), 16);
    }

    #[test]
    fn default_shards_never_exceed_the_maximum() {
        assert_eq!(default_shards(usize::MAX, usize::MAX), MAX_SHARDS);
    }

    #[test]
    fn explicit_shards_shrink_to_max_keys() {
        assert_eq!(KeyedConfig::new(5).shards(64).shard_count(), Ok(4));
        assert_eq!(KeyedConfig::new(1).shards(64).shard_count(), Ok(1));
        assert_eq!(KeyedConfig::new(64).shards(64).shard_count(), Ok(64));
    }

    #[test]
    fn capacities_add_up_to_max_keys() {
        for (max_keys, shards) in [(1, 1), (10, 4), (1000, 8), (1001, 8), (7, 4)] {
            let total: usize = (0..shards)
                .map(|i| shard_capacity(max_keys, shards, i))
                .sum();
            assert_eq!(total, max_keys);
            assert!((0..shards).all(|i| shard_capacity(max_keys, shards, i) >= 1));
        }
    }

    #[test]
    fn power_of_two_at_most_rounds_down() {
        assert_eq!(power_of_two_at_most(1), 1);
        assert_eq!(power_of_two_at_most(7), 4);
        assert_eq!(power_of_two_at_most(8), 8);
        assert_eq!(power_of_two_at_most(usize::MAX), 1 << (usize::BITS - 1));
    }
}
