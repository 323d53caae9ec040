//! The one keyed table, under [`KeyedLimiter`](crate::KeyedLimiter) and
//! `MemoryStore`: sharded, bounded by
//! [`KeyedConfig::max_keys`], forgetting keys once they are idle, with one sweep
//! policy and one policy for a full shard ([`WhenFull`]).
//!
//! A [`Table`] owns the shards, the hasher and the overflow limit; a [`Shard`] holds
//! entries of whatever type its [`Entries`] context says, so that the keyed limiter
//! stores `(key, algorithm state)` pairs while the memory store stores its names
//! inline with a state per rule. [`states`] is the keyed limiter's table.

mod config;
mod shard;
mod states;

use std::hash::RandomState;

use crate::algorithm::{Algorithm, Gcra};
use crate::error::ConfigError;
use crate::sync::Mutex;
use crate::time::Nanos;

pub use config::{KeyedConfig, MAX_SHARDS, WhenFull};
pub(crate) use shard::{Entries, Rehash, Room, Shard, SharedBound, is_idle};
pub(crate) use states::PerKey;

/// Shards of entries under their own locks, bounded together by `max_keys`.
pub(crate) struct Table<X: Entries> {
    shards: Box<[Padded<X>]>,
    hasher: RandomState,
    max_keys: usize,
    /// [`WhenFull::Overflow`]'s shared limit.
    overflow: Option<Overflow>,
    /// Whether the shards share one bound ([`Table::with_shared_bound`]).
    shared_bound: bool,
}

/// A shard under its lock, on cache lines of its own so that threads working on
/// neighbouring shards do not slow each other down.
#[repr(align(128))]
struct Padded<X: Entries>(Mutex<Shard<X>>);

/// One GCRA limit shared by every new key that finds no room.
struct Overflow {
    gcra: Gcra,
    state: Mutex<<Gcra as Algorithm>::State>,
}

impl<X: Entries> Table<X> {
    /// A table as `config` says, each shard with the context `entries` makes.
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`].
    pub(crate) fn new(
        config: &KeyedConfig,
        mut entries: impl FnMut() -> X,
    ) -> Result<Table<X>, ConfigError> {
        let count = config.shard_count()?;
        let shards = (0..count)
            .map(|index| {
                let capacity = config::shard_capacity(config.max_keys, count, index);
                Padded(Mutex::new(Shard::new(
                    entries(),
                    capacity,
                    config.when_full,
                )))
            })
            .collect();
        Ok(Table {
            shards,
            hasher: RandomState::new(),
            max_keys: config.max_keys,
            overflow: Table::<X>::overflow_of(config),
            shared_bound: false,
        })
    }

    /// A table as `config` says whose keys the caller places in shards by hashes of
    /// its own choosing, not by each key's: each shard may hold up to `max_keys`, and
    /// one count keeps all the shards together under it (the memory store, which
    /// keeps a hash tag's keys in one shard).
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`].
    pub(crate) fn with_shared_bound(
        config: &KeyedConfig,
        mut entries: impl FnMut() -> X,
    ) -> Result<Table<X>, ConfigError> {
        let count = config.shard_count()?;
        let shared = crate::sync::Arc::new(SharedBound::new(config.max_keys));
        let shards = (0..count)
            .map(|_| {
                Padded(Mutex::new(Shard::sharing(
                    entries(),
                    config.max_keys,
                    config.when_full,
                    shared.clone(),
                )))
            })
            .collect();
        Ok(Table {
            shards,
            overflow: Table::<X>::overflow_of(config),
            hasher: RandomState::new(),
            max_keys: config.max_keys,
            shared_bound: true,
        })
    }

    fn overflow_of(config: &KeyedConfig) -> Option<Overflow> {
        match config.when_full {
            WhenFull::Overflow(quota) => {
                let gcra = Gcra::new(quota);
                Some(Overflow {
                    gcra,
                    state: Mutex::new(gcra.initial_state(Nanos::ZERO)),
                })
            }
            WhenFull::EvictNearestIdle | WhenFull::Deny => None,
        }
    }

    /// The hasher every hash given to the table comes from.
    #[inline]
    pub(crate) fn hasher(&self) -> &RandomState {
        &self.hasher
    }

    /// The shard of a key of hash `hash`.
    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> &Mutex<Shard<X>> {
        // hashbrown indexes buckets with the low bits and tags them with the top seven,
        // so the shard comes from bits in between (the count is a power of two).
        let index = (hash >> 32) as usize & (self.shards.len() - 1);
        &self.shards[index].0
    }

    /// Decides `n` permits for a new key that found no room until `room`
    /// ([`Room::Overflow`]), taking them from the overflow limit if `take`. `Err`
    /// holds when to retry: when the overflow limit would admit them, or `room` if
    /// sooner.
    pub(crate) fn overflow(
        &self,
        now: Nanos,
        n: u64,
        room: Nanos,
        take: bool,
    ) -> Result<(), Nanos> {
        let Some(overflow) = &self.overflow else {
            return Err(room);
        };
        let mut state = overflow.state.lock();
        let decision = if take {
            overflow.gcra.acquire(&mut state, now, n)
        } else {
            overflow.gcra.peek(&state, now, n)
        };
        match decision {
            Ok(_) => Ok(()),
            // More than the overflow limit ever grants: only room can admit it.
            Err(denied) => Err(denied
                .retry_after()
                .map_or(room, |wait| room.min(now + wait))),
        }
    }

    /// Runs `f` on every shard in turn, under its lock.
    pub(crate) fn each_shard(&self, mut f: impl FnMut(&mut Shard<X>)) {
        for shard in self.shards.iter() {
            f(&mut shard.0.lock());
        }
    }

    /// Keys held, idle ones not yet swept included; counted shard by shard.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.0.lock().len()).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| shard.0.lock().len() == 0)
    }

    pub(crate) fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// How many shards there are.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }
}

impl<X: Rehash> Table<X> {
    /// Under a shared bound, the idle keys of every shard not locked right now: room
    /// that a full shard cannot make from its own keys may be held by others. Never
    /// waits for a lock, so a caller holding its own shard's (which it skips) cannot
    /// deadlock; a shard with nothing idle costs a lock and a comparison. Returns how
    /// many keys went (0 without a shared bound).
    pub(crate) fn sweep_others(&self, now: Nanos) -> usize {
        if !self.shared_bound {
            return 0;
        }
        self.shards
            .iter()
            .filter_map(|shard| shard.0.try_lock())
            .map(|mut shard| shard.sweep_if_due(&self.hasher, now))
            .sum()
    }

    /// Under a shared bound, the earliest time a key of a shard not locked right now
    /// may be idle (a lower bound): when a key that found no room may find some.
    /// [`Nanos::MAX`] without a shared bound.
    pub(crate) fn next_idle_of_others(&self) -> Nanos {
        if !self.shared_bound {
            return Nanos::MAX;
        }
        self.shards
            .iter()
            .filter_map(|shard| shard.0.try_lock().map(|shard| shard.next_idle()))
            .min()
            .unwrap_or(Nanos::MAX)
    }

    /// Evicts every idle key, one shard at a time; returns how many.
    pub(crate) fn sweep(&self, now: Nanos) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.0.lock().sweep(&self.hasher, now))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::Quota;

    const MS: u64 = 1_000_000;
    const SECOND: Nanos = Nanos::new(1_000 * MS);

    fn table(when_full: WhenFull) -> Table<PerKey<u32, Gcra>> {
        let gcra = Gcra::new(Quota::per_second(1).unwrap());
        Table::new(&KeyedConfig::new(4).when_full(when_full), || {
            PerKey::new(gcra)
        })
        .unwrap()
    }

    #[test]
    fn the_overflow_limit_is_shared_and_waits_no_longer_than_room() {
        let t = table(WhenFull::Overflow(Quota::per_second(2).unwrap()));
        let now = Nanos::new(MS);
        assert_eq!(t.overflow(now, 1, SECOND, false), Ok(()));
        assert_eq!(t.overflow(now, 2, SECOND, true), Ok(()));
        assert_eq!(t.overflow(now, 1, SECOND, true), Err(Nanos::new(501 * MS)));
        let soon = Nanos::new(100 * MS);
        assert_eq!(
            t.overflow(now, 1, soon, true),
            Err(soon),
            "room comes sooner"
        );
        assert_eq!(
            t.overflow(now, 3, SECOND, true),
            Err(SECOND),
            "only room admits 3"
        );
    }

    #[test]
    fn without_an_overflow_limit_only_room_admits() {
        let t = table(WhenFull::Deny);
        assert_eq!(t.overflow(Nanos::ZERO, 1, SECOND, true), Err(SECOND));
    }

    #[test]
    fn shares_of_max_keys_add_up() {
        let t = table(WhenFull::Deny);
        assert_eq!(t.max_keys(), 4);
        assert!(t.shards() <= 4);
        assert!(t.is_empty());
    }
}
