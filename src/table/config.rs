//! How many keys a keyed table may hold, in how many shards, and what it does when a
//! shard is full.

use crate::error::ConfigError;
use crate::quota::Quota;

/// The most shards a keyed table uses: enough for any machine, small enough that the
/// shard array (one cache line each) stays under a few megabytes.
pub const MAX_SHARDS: usize = 1 << 14;

/// The default shard count keeps at most this many keys per shard when it can, so that
/// sweeping one shard stays short.
const MAX_KEYS_PER_SHARD: usize = 1024;

/// The default shard count gives every shard at least this many keys when it can:
/// with tiny shards, one unlucky shard fills up long before `max_keys` is reached.
const MIN_KEYS_PER_SHARD: usize = 32;

/// The memory bound of a keyed table ([`KeyedLimiter`](crate::KeyedLimiter),
/// `MemoryStore`): at most `max_keys` keys, spread over
/// `shards` independently locked shards, and what to do with a new key when its shard
/// is full.
///
/// Built with [`KeyedConfig::new`], [`KeyedConfig::shards`] and
/// [`KeyedConfig::when_full`], checked when the table is built (or earlier with
/// [`KeyedConfig::validate`]).
///
/// # The bound is hard
///
/// Keys are hashed to shards, and each shard holds at most its share of `max_keys`
/// (the shares add up to exactly `max_keys`), so a shard may fill up slightly before
/// the whole table does. A shard forgets keys that are idle, that is back to the
/// state of a fresh key: that changes no decision. When a new key arrives at a shard
/// full of keys that are not idle, [`when_full`](KeyedConfig::when_full) decides: by
/// default the key whose forgetting gives back the least among a few makes room
/// ([`WhenFull::EvictNearestIdle`]); see [`WhenFull`] for what each policy lets a
/// flood of unique keys do.
///
/// In bytes, each shard's hash table holds a key, its state and a control byte per
/// bucket, with 8/7 to 32/7 buckets per key of its share: a table that keeps evicting
/// and inserting at its bound is doubled once, when it runs out of free buckets while
/// more than half full. Each shard also takes a cache line of its own.
///
/// # Examples
///
/// ```
/// use tollgate::{KeyedConfig, KeyedLimiter, Quota, WhenFull};
/// use tollgate::algorithm::Gcra;
///
/// let config = KeyedConfig::new(100_000).shards(64).when_full(WhenFull::Deny);
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
    /// What a shard full of keys that are not idle does with a new key.
    pub when_full: WhenFull,
}

/// What a keyed table does with a new key whose shard is full of keys that are not
/// idle, as under a flood of unique keys (random source addresses, made-up user
/// names). Idle keys are always forgotten first, since that changes no decision.
///
/// A table cannot at once hold memory to a bound, keep every key's exact state, and
/// serve every newcomer: a flood of more live keys than the bound forces one of the
/// three to give. Each policy picks which:
///
/// | policy | a newcomer while full | keys already held | who can reset a key's limit |
/// |---|---|---|---|
/// | [`EvictNearestIdle`](WhenFull::EvictNearestIdle) (default) | served | the one whose forgetting gives back the least restarts fresh | only by outweighing it, see below |
/// | [`Deny`](WhenFull::Deny) | denied until a key is idle | exact | no one |
/// | [`Overflow`](WhenFull::Overflow) | shares one overflow limit | exact | no one |
///
/// Whatever the policy, memory never exceeds the bound, and a key that holds a
/// reservation for later use (a wait booked ahead, as a waiting caller books) is
/// never evicted before the time it was booked for.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::{KeyedConfig, KeyedLimiter, Quota, WhenFull};
/// use tollgate::algorithm::Gcra;
/// use tollgate::time::ManualClock;
///
/// let clock = ManualClock::new();
/// let gcra = Gcra::new(Quota::per_hour(10)?);
/// let build = |when_full| {
///     KeyedLimiter::<u32, Gcra, ManualClock>::with_clock(
///         gcra,
///         KeyedConfig::new(2).shards(1).when_full(when_full),
///         clock.clone(),
///     )
/// };
///
/// let evicting = build(WhenFull::EvictNearestIdle)?;
/// evicting.try_acquire(&1, 10)?; // at its limit: far from idle
/// evicting.try_acquire(&2, 1)?; // one permit used: near idle
/// assert!(evicting.try_acquire(&3, 1).is_ok(), "key 2 made room");
/// assert!(evicting.try_acquire(&1, 1).is_err(), "key 1 kept its state");
///
/// let denying = build(WhenFull::Deny)?;
/// denying.try_acquire(&1, 10)?;
/// denying.try_acquire(&2, 1)?;
/// let denied = denying.try_acquire(&3, 1).unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(360)), "until key 2 is idle");
///
/// let overflowing = build(WhenFull::Overflow(Quota::per_hour(1)?))?;
/// overflowing.try_acquire(&1, 10)?;
/// overflowing.try_acquire(&2, 1)?;
/// assert!(overflowing.try_acquire(&3, 1).is_ok(), "through the overflow limit");
/// assert!(overflowing.try_acquire(&4, 1).is_err(), "which is spent");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenFull {
    /// Evict, among 8 keys of the shard sampled from a spot the new key's hash picks
    /// (the hasher is randomly seeded, so a flooder cannot aim it), the one nearest to
    /// idle in what it holds: the one whose forgetting gives back the least
    /// ([`Algorithm::forgetting_gives_back`](crate::algorithm::Algorithm::forgetting_gives_back)).
    /// For a window (sliding log, fixed window, sliding counter, refresh period) that
    /// is the permits it has used in its current window; for a token bucket
    /// ([`Gcra`](crate::algorithm::Gcra), [`LeakyBucket`](crate::algorithm::LeakyBucket))
    /// the time until its bucket is full again, so the earliest
    /// [`idle_at`](crate::algorithm::Algorithm::idle_at); for Guava's limiters the
    /// permits it still owes for a request granted ahead, in whole stable intervals.
    /// Among keys that give back as much, the one used last goes first.
    ///
    /// - **Newcomers are served**: a request for a new key is never denied for lack of
    ///   room (unless all 8 sampled keys hold reservations for later use, which are
    ///   never evicted early; the request is then denied as under
    ///   [`Deny`](WhenFull::Deny)). A well-behaved newcomer gets its whole quota
    ///   however large the flood, and its exact limit once it has used more than a
    ///   flood key; before that it may be evicted between two requests and restart
    ///   fresh, which gives it more than its quota, never less. (`tests/flood.rs`: 10⁷
    ///   unique keys against a bound of 10⁶, and 100 clients each get their whole
    ///   quota and are denied the request after it.)
    /// - **What an eviction gives away**: the evicted key restarts fresh, so it gets
    ///   back at once what forgetting it gives back, which is never more than
    ///   forgetting any other key of its sample would have given back. For a token
    ///   bucket, a key evicted at `t` whose bucket is full again at `idle_at` regains
    ///   `(idle_at - t) / emission interval` permits early.
    /// - **The bound**: against flood keys that each hold at most `m` permits (`m` per
    ///   request, one request each), every eviction hands the evicted key back at most
    ///   `m` permits, and a key holding more (the flooder's own key spent to its limit,
    ///   a client's key after a few requests) is never evicted by them. So in any
    ///   window of a sliding log or a fixed window, a key is admitted at most
    ///   `limit + m × e` permits, where `e` is the number of times it was evicted in
    ///   that window, each time by a new key holding `m` permits
    ///   (`tests/keyed.rs`: `an_eviction_hands_a_key_back_no_more_than_a_flood_key_holds`).
    ///   A shard of one key compares it with nothing: that key makes room for any
    ///   newcomer.
    /// - **What a flooder can gain**: to get its own key evicted, a flooder must first
    ///   make every key sampled with it hold at least as much as its own key has
    ///   outstanding, that is spend on each of those keys at least what its own key
    ///   would regain; each such eviction then gives its key back no more than it
    ///   spent on each of them, never more than one full limit. A key used to its
    ///   limit holds as much as a key can without booking ahead, so only flood keys
    ///   each used to their own full limit can outweigh it.
    /// - **In a `MemoryStore`**, whose keys may run
    ///   different rules, what forgetting a key gives back counts in permits: a token
    ///   bucket's debt to the fraction of a permit, as it stands at the eviction; for
    ///   other rules as of the key's last write (never less than now, as a state only
    ///   recovers with time). Among equals the key written last goes first.
    #[default]
    EvictNearestIdle,
    /// Deny the new key until a key of its shard is idle, with
    /// [`Denied::Limited`](crate::Denied::Limited) whose `retry_after` is the earliest
    /// time one can be (a key used meanwhile stays live longer, so the retry may be
    /// denied again), and `remaining` 0. Keys already held keep working.
    ///
    /// Every limit stays exact and no one can reset any key's limit. The price:
    /// **newcomers get nothing while the table is full**, and a flooder fills it with
    /// one request per slot, then keeps it full for as long as its keys stay live:
    /// one emission interval after a single request (hours with per-day quotas).
    /// Size `max_keys` for the live keys you expect.
    Deny,
    /// Send new keys that find no room through one [`Gcra`](crate::algorithm::Gcra)
    /// limit of this quota, shared by the whole table. Such a key is not stored: its
    /// request is decided on a fresh state, then admitted only if the overflow limit
    /// admits its permits too (nothing is taken from the overflow limit if the key's
    /// own state denies).
    ///
    /// No key held is ever evicted before it is idle, so every stored limit stays
    /// exact and no one can reset one. Newcomers share the overflow quota with the
    /// flood: while the table is full, well-behaved newcomers get the overflow quota
    /// times their share of the requests that overflow, so a flood larger than the
    /// overflow quota starves them. An overflowing key is limited only as part of the
    /// group: between its requests it has no state of its own.
    Overflow(Quota),
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
            when_full: WhenFull::EvictNearestIdle,
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

    /// The same bound, with `when_full` deciding what a full shard does with a new key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{KeyedConfig, WhenFull};
    ///
    /// assert_eq!(KeyedConfig::new(10).when_full, WhenFull::EvictNearestIdle);
    /// let config = KeyedConfig::new(10).when_full(WhenFull::Deny);
    /// assert_eq!(config.when_full, WhenFull::Deny);
    /// ```
    pub const fn when_full(self, when_full: WhenFull) -> KeyedConfig {
        KeyedConfig { when_full, ..self }
    }

    /// Checks the configuration as building a table would.
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

    /// The number of shards a table built from this configuration uses.
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
                });
            }
            Some(shards) if !shards.is_power_of_two() || shards > MAX_SHARDS => {
                return Err(ConfigError::OutOfRange {
                    parameter: "shards",
                    expected: "a power of two, at most 16384",
                });
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
