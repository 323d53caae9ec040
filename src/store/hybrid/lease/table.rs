//! The keys a [`LeaseLimiter`](super::LeaseLimiter) holds in this process, sharded
//! under short locks, bounded by `max_keys`.

use std::hash::{BuildHasher, RandomState};

use super::{SHARDS, Slot};
use crate::sync::{Arc, Ordering, RwLock};

/// The keys this node holds, sharded under reader-writer locks: decisions only read.
pub(super) struct Slices {
    shards: Box<[Shard]>,
    hasher: RandomState,
}

/// Keys and slots by the table's hash of the key, computed once per lookup.
type Map = hashbrown::HashTable<(Box<str>, Arc<Slot>)>;

/// A shard on cache lines of its own, and how many keys it holds at most.
#[repr(align(128))]
struct Shard {
    map: RwLock<Map>,
    capacity: usize,
}

impl Slices {
    /// Room for `max_keys` (at least 1) in all: up to [`SHARDS`] shards, each holding
    /// its part.
    pub(super) fn new(max_keys: usize) -> Slices {
        let hasher = RandomState::new();
        let max_keys = max_keys.max(1);
        // A power of two, at most the keys: no shard without room.
        let count = 1 << max_keys.min(SHARDS).ilog2();
        Slices {
            shards: (0..count)
                .map(|i| Shard {
                    map: RwLock::new(Map::new()),
                    capacity: max_keys / count + usize::from(i < max_keys % count),
                })
                .collect(),
            hasher,
        }
    }

    /// `tag`'s shard and hash.
    #[inline]
    fn shard(&self, tag: &str) -> (&Shard, u64) {
        let hash = self.hasher.hash_one(tag);
        // hashbrown indexes with the low bits and tags with the top seven: the shard
        // comes from bits in between.
        let shard = &self.shards[(hash >> 32) as usize & (self.shards.len() - 1)];
        (shard, hash)
    }

    /// Runs `f` on `tag`'s slot, if held, under its shard's lock.
    #[inline]
    pub(super) fn with<R>(&self, tag: &str, f: impl FnOnce(Option<&Arc<Slot>>) -> R) -> R {
        let (shard, hash) = self.shard(tag);
        let map = shard.map.read();
        f(map
            .find(hash, |(key, _)| **key == *tag)
            .map(|(_, slot)| slot))
    }

    /// `tag`'s slot, made by `make` if new; `None` if its shard is full of keys whose
    /// leases have not ended.
    pub(super) fn slot(
        &self,
        tag: &str,
        now: u64,
        make: impl FnOnce() -> Slot,
    ) -> Option<Arc<Slot>> {
        let (shard, hash) = self.shard(tag);
        if let Some((_, slot)) = shard.map.read().find(hash, |(key, _)| **key == *tag) {
            return Some(Arc::clone(slot));
        }
        let mut map = shard.map.write();
        if let Some((_, slot)) = map.find(hash, |(key, _)| **key == *tag) {
            return Some(Arc::clone(slot));
        }
        if map.len() >= shard.capacity {
            map.retain(|(_, slot)| !slot.forgettable(now));
            if map.len() >= shard.capacity {
                return None;
            }
        }
        let slot = Arc::new(make());
        map.insert_unique(hash, (tag.into(), Arc::clone(&slot)), |(key, _)| {
            self.hasher.hash_one(&**key)
        });
        Some(slot)
    }

    /// Every slot held.
    pub(super) fn all(&self) -> Vec<Arc<Slot>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(shard.map.read().iter().map(|(_, slot)| Arc::clone(slot)));
        }
        all
    }

    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.map.read().len()).sum()
    }
}

impl Slot {
    /// Whether the table may forget this slot at `now`, retiring it: its lease ended,
    /// no denial holds, and no task holds it.
    fn forgettable(&self, now: u64) -> bool {
        if self.slice.until() > now || self.recheck_at.load(Ordering::Acquire) > now {
            return false;
        }
        let Ok(_lease) = self.lease.try_lock() else {
            return false;
        };
        self.retired.store(true, Ordering::Release);
        true
    }
}
