//! The keys a [`LeaseLimiter`](super::LeaseLimiter) holds in this process, sharded
//! under short locks, bounded by `max_keys`.

use std::hash::{BuildHasher, RandomState};

use super::{SHARDS, Slot};
use crate::sync::{Arc, Ordering, RwLock};

/// The keys this node holds, sharded under reader-writer locks: decisions only read.
pub(super) struct Slices {
    shards: Box<[Shard]>,
    hasher: RandomState,
    /// This table among every table of the process, for the threads' recent slots.
    #[cfg_attr(loom, allow(dead_code))]
    id: u64,
}

/// Keys and slots by the table's hash of the key, computed once per lookup.
type Map = hashbrown::HashTable<Arc<Slot>>;

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
            id: recent::table_id(),
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

    /// Runs `f` on `tag`'s slot, if held: the one this thread found last for `tag`
    /// if the table still holds it, else under its shard's lock. `f` must not look a
    /// key up in any table (the thread's recent slots are borrowed meanwhile).
    #[inline]
    pub(super) fn with<R>(&self, tag: &str, f: impl FnOnce(Option<&Arc<Slot>>) -> R) -> R {
        let (shard, hash) = self.shard(tag);
        #[cfg(not(loom))]
        let f = match recent::with(self.id, hash, tag, f) {
            Ok(decided) => return decided,
            Err(f) => f,
        };
        let map = shard.map.read();
        let slot = map.find(hash, |slot| *slot.tag == *tag);
        #[cfg(not(loom))]
        if let Some(slot) = slot {
            recent::keep(self.id, hash, slot);
        }
        f(slot)
    }

    /// `tag`'s slot, made by `make` if new; `None` if its shard is full of keys whose
    /// leases have not ended.
    ///
    /// Keys forgotten to make room whose leases are still to be settled are added to
    /// `owed`, with those leases: the caller gives them back.
    pub(super) fn slot(
        &self,
        tag: &str,
        now: u64,
        make: impl FnOnce() -> Slot,
        owed: &mut Vec<Owed>,
    ) -> Option<Arc<Slot>> {
        let (shard, hash) = self.shard(tag);
        if let Some(slot) = shard.map.read().find(hash, |slot| *slot.tag == *tag) {
            return Some(Arc::clone(slot));
        }
        let mut map = shard.map.write();
        if let Some(slot) = map.find(hash, |slot| *slot.tag == *tag) {
            return Some(Arc::clone(slot));
        }
        if map.len() >= shard.capacity {
            map.retain(|slot| !slot.forget(now, owed));
            if map.len() >= shard.capacity {
                return None;
            }
        }
        let slot = Arc::new(make());
        map.insert_unique(hash, Arc::clone(&slot), |slot| {
            self.hasher.hash_one(&*slot.tag)
        });
        Some(slot)
    }

    /// Every slot held.
    pub(super) fn all(&self) -> Vec<Arc<Slot>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(shard.map.read().iter().map(Arc::clone));
        }
        all
    }

    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.map.read().len()).sum()
    }
}

/// A forgotten key's leases to give back: `(id, unused)` pairs.
pub(super) type Owed = (Arc<Slot>, Vec<(u64, u64)>);

impl Slot {
    /// Whether the table may forget this slot at `now`, retiring it: its lease ended,
    /// no denial holds, and no task holds it. Its leases to settle go to `owed`.
    fn forget(self: &Arc<Self>, now: u64, owed: &mut Vec<Owed>) -> bool {
        if self.slice.until() > now || self.recheck_at.load(Ordering::Acquire) > now {
            return false;
        }
        let Ok(mut lease) = self.lease.try_lock() else {
            return false;
        };
        self.retired.store(true, Ordering::Release);
        lease.close(self.slice.drain(), now);
        let settles = std::mem::take(&mut lease.pending);
        if !settles.is_empty() {
            owed.push((Arc::clone(self), settles));
        }
        true
    }
}

/// Each thread's slots found last, so that a decision on a hot key reads no lock:
/// a shared lock's word, written by every reader, would move between CPUs at each
/// decision. An entry is used only while its slot is not retired, which the table
/// marks before it forgets a key; entries are small and few per thread, and a
/// retired or dropped table's slots leave as others take their places.
///
/// Not under loom, whose threads share one thread's locals.
#[cfg(not(loom))]
mod recent {
    use std::cell::RefCell;

    use super::Slot;
    use crate::sync::unmodeled::{AtomicU64, Ordering as StdOrdering};
    use crate::sync::{Arc, Ordering};

    /// Sets of entries per thread, chosen by the key's hash: two entries each, so
    /// that a few hot keys of a few tables seldom push each other out.
    const SETS: usize = 64;
    const WAYS: usize = 2;

    struct Entry {
        table: u64,
        hash: u64,
        slot: Arc<Slot>,
    }

    thread_local! {
        static RECENT: RefCell<[Option<Entry>; SETS * WAYS]> =
            const { RefCell::new([const { None }; SETS * WAYS]) };
    }

    /// The first entry of the set of a key of `hash`.
    fn set(hash: u64) -> usize {
        (hash as usize % SETS) * WAYS
    }

    pub(super) fn table_id() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, StdOrdering::Relaxed)
    }

    /// Runs `f` on this thread's recent slot for `tag` of `table`, or hands `f` back.
    #[inline]
    pub(super) fn with<R, F: FnOnce(Option<&Arc<Slot>>) -> R>(
        table: u64,
        hash: u64,
        tag: &str,
        f: F,
    ) -> Result<R, F> {
        let mut f = Some(f);
        let decided = RECENT
            .try_with(|recent| {
                let recent = recent.try_borrow().ok()?;
                let first = set(hash);
                let entry = recent[first..first + WAYS].iter().flatten().find(|entry| {
                    entry.table == table && entry.hash == hash && *entry.slot.tag == *tag
                })?;
                let fresh = !entry.slot.retired.load(Ordering::Acquire);
                // Under the borrow: cloning the `Arc` would write its count, shared
                // with the other threads deciding on the key.
                fresh.then(|| f.take().map(|f| f(Some(&entry.slot))))?
            })
            .ok()
            .flatten();
        match (decided, f) {
            (Some(decided), _) => Ok(decided),
            (None, Some(f)) => Err(f),
            (None, None) => unreachable!("`f` runs only when it decides"),
        }
    }

    /// Remembers `slot`, found for a key of `hash` in `table`.
    #[inline]
    pub(super) fn keep(table: u64, hash: u64, slot: &Arc<Slot>) {
        let _ = RECENT.try_with(|recent| {
            if let Ok(mut recent) = recent.try_borrow_mut() {
                let ways = &mut recent[set(hash)..set(hash) + WAYS];
                // The newest first; the one it replaces, unless of the same key,
                // moves to the second way.
                let same_key = ways[0]
                    .as_ref()
                    .is_some_and(|entry| entry.table == table && entry.hash == hash);
                if !same_key {
                    ways.rotate_right(1);
                }
                ways[0] = Some(Entry {
                    table,
                    hash,
                    slot: Arc::clone(slot),
                });
            }
        });
    }
}

#[cfg(loom)]
mod recent {
    pub(super) fn table_id() -> u64 {
        0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::super::slice::Slice;
    use super::super::Lease;
    use super::*;
    use crate::sync::{AtomicBool, AtomicU64};

    fn slot(tag: &str) -> Slot {
        Slot {
            slice: Slice::new(),
            global: AtomicU64::new(0),
            reset_at: AtomicU64::new(0),
            low: AtomicU64::new(0),
            denied_need: AtomicU64::new(0),
            recheck_at: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            retry_at: AtomicU64::new(0),
            tag: tag.into(),
            key: tag.into(),
            leases_key: tag.into(),
            lease: tokio::sync::Mutex::new(Lease::default()),
        }
    }

    fn found(slices: &Slices, tag: &str) -> Option<usize> {
        slices.with(tag, |slot| slot.map(address))
    }

    fn address(slot: &Arc<Slot>) -> usize {
        Arc::as_ptr(slot) as usize
    }

    #[test]
    fn a_thread_never_decides_on_a_slot_the_table_forgot() {
        let slices = Slices::new(1);
        let a = slices.slot("a", 0, || slot("a"), &mut Vec::new()).unwrap();
        // Found twice: the second time from this thread's recent slots.
        assert_eq!(found(&slices, "a"), Some(address(&a)));
        assert_eq!(found(&slices, "a"), Some(address(&a)));
        assert_eq!(found(&slices, "b"), None);
        // No room for "b" but by forgetting "a", whose lease has ended.
        let b = slices.slot("b", 1, || slot("b"), &mut Vec::new()).unwrap();
        assert!(a.retired.load(Ordering::Acquire));
        assert_eq!(found(&slices, "a"), None);
        assert_eq!(found(&slices, "b"), Some(address(&b)));
        // "a" again is a new slot, not the one remembered.
        let a2 = slices.slot("a", 2, || slot("a"), &mut Vec::new()).unwrap();
        assert_eq!(found(&slices, "a"), Some(address(&a2)));
        assert_ne!(address(&a2), address(&a));
    }

    #[test]
    fn tables_do_not_share_their_keys_through_a_thread() {
        let (one, two) = (Slices::new(4), Slices::new(4));
        let a = one.slot("a", 0, || slot("a"), &mut Vec::new()).unwrap();
        assert_eq!(found(&one, "a"), Some(address(&a)));
        assert_eq!(found(&two, "a"), None);
        // Other threads find it under the lock.
        let other = std::thread::scope(|s| s.spawn(|| found(&one, "a")).join().unwrap());
        assert_eq!(other, Some(address(&a)));
    }
}
