//! One shard of a keyed table: its entries, the bookkeeping that bounds and sweeps
//! them, and what a full shard does with a new key. Everything here runs under the
//! shard's lock; time and hashes come from the caller.

use std::hash::RandomState;

use hashbrown::HashTable;

use super::config::WhenFull;
use crate::sync::{Arc, AtomicU64, Ordering};
use crate::time::Nanos;

/// Below this many keys a shard never sweeps on its own: too small to be worth it.
const MIN_SWEEP_LEN: usize = 16;

/// How many entries [`WhenFull::EvictNearestIdle`] compares to pick the one to evict.
pub(crate) const SAMPLE: usize = 8;

/// What a table holds per key, and the facts about an entry that the shard's
/// bookkeeping needs. The value is the shard's own context (for a keyed limiter, its
/// copy of the algorithm), shared by every entry of the shard.
pub(crate) trait Entries {
    /// One key and its state.
    type Entry;

    /// From when forgetting `entry` changes no decision: the shard sweeps it then.
    fn idle_at(&self, entry: &Self::Entry) -> Nanos;

    /// Until when `entry`, idle at `idle_at`, holds capacity booked for later use (a
    /// reservation a waiting caller counts on); at or before the present when it
    /// holds none. Such an entry is never evicted before this time, whatever the
    /// policy.
    fn booked_until(&self, entry: &Self::Entry, idle_at: Nanos) -> Nanos;

    /// What forgetting `entry`, idle at `idle_at`, gives back at `now`, in units of the
    /// context's choosing that grow with it: [`WhenFull::EvictNearestIdle`] evicts the
    /// entry that gives back the least. The default is the time left until it is idle.
    fn gives_back(&self, _entry: &Self::Entry, idle_at: Nanos, now: Nanos) -> u64 {
        idle_at.as_u64().saturating_sub(now.as_u64())
    }

    /// When `entry`, idle at `idle_at`, was last used, or any time that orders entries
    /// as that does: among entries that give back as much, the one used last is
    /// evicted. The default is the idle time, which orders the states of one
    /// configuration so.
    #[inline]
    fn used_at(&self, _entry: &Self::Entry, idle_at: Nanos) -> Nanos {
        idle_at
    }
}

/// Whether an entry idle at `idle_at` is idle at `now`. An idle time at the clock's
/// end stands for any time past it, which no clock reaches: such an entry is never
/// idle.
#[inline]
pub(crate) fn is_idle(idle_at: Nanos, now: Nanos) -> bool {
    idle_at <= now && idle_at < Nanos::MAX
}

/// Entries that can be hashed again, as a shard needs to add or drop any.
pub(crate) trait Rehash: Entries {
    /// The entry's hash, for moving it when the table grows or shrinks.
    fn hash(&self, hasher: &RandomState, entry: &Self::Entry) -> u64;
}

/// Whether a new key fits in a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Yes: insert it.
    Free,
    /// No: deny it; there may be room from this time on (a key idle, or a booking
    /// used).
    Full(Nanos),
    /// No: decide it through the table's overflow limit; there may be room from this
    /// time on.
    Overflow(Nanos),
}

/// The bound on the keys of every shard together, for a table whose keys are not
/// spread over its shards by their own hashes: the memory store keeps all the keys
/// of one hash tag in one shard (a request's keys are decided under one lock), so a
/// shard's share of the bound would cap one tag at a fraction of it. Each shard of
/// such a table may hold up to the whole bound, and this count keeps them all under
/// it.
#[derive(Debug)]
pub(crate) struct SharedBound {
    len: AtomicU64,
    max: u64,
}

impl SharedBound {
    pub(crate) fn new(max: usize) -> SharedBound {
        SharedBound {
            len: AtomicU64::new(0),
            max: max as u64,
        }
    }

    /// Keys over the bound if `new_keys` more were added.
    fn missing(&self, new_keys: usize) -> usize {
        let len = self.len.load(Ordering::Relaxed);
        usize::try_from(len.saturating_add(new_keys as u64).saturating_sub(self.max))
            .unwrap_or(usize::MAX)
    }

    fn added(&self, n: usize) {
        self.len.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn removed(&self, n: usize) {
        self.len.fetch_sub(n as u64, Ordering::Relaxed);
    }
}

pub(crate) struct Shard<X: Entries> {
    /// The shard's context: what [`Entries`] needs to tell about an entry.
    pub(crate) entries: X,
    table: HashTable<X::Entry>,
    /// The most keys this shard may hold.
    capacity: usize,
    when_full: WhenFull,
    /// Never later than the earliest [`Entries::idle_at`] of the keys held (exact
    /// right after a sweep): before it, a sweep would evict nothing.
    sweep_at: Nanos,
    /// The length from which the shard sweeps below its capacity: twice what the last
    /// sweep kept, so sweeping costs O(1) per insertion, amortised.
    sweep_len: usize,
    /// The latest time at which an entry was evicted. A thread whose clock reading is
    /// older must not start that key afresh at its older time: an evicted state may
    /// only be forgotten from this time on.
    evicted_at: Nanos,
    /// The bound shared with the table's other shards, if the table has one.
    shared: Option<Arc<SharedBound>>,
}

impl<X: Entries> Shard<X> {
    pub(crate) fn new(entries: X, capacity: usize, when_full: WhenFull) -> Shard<X> {
        Shard {
            entries,
            table: HashTable::new(),
            capacity,
            when_full,
            sweep_at: Nanos::MAX,
            sweep_len: MIN_SWEEP_LEN,
            evicted_at: Nanos::ZERO,
            shared: None,
        }
    }

    /// A shard that may hold up to `capacity` keys, as long as `shared` (counting
    /// every shard of its table) allows.
    pub(crate) fn sharing(
        entries: X,
        capacity: usize,
        when_full: WhenFull,
        shared: Arc<SharedBound>,
    ) -> Shard<X> {
        Shard {
            shared: Some(shared),
            ..Shard::new(entries, capacity, when_full)
        }
    }

    /// Keys over this shard's capacity, or over the shared bound, if `new_keys` more
    /// were added.
    fn missing(&self, new_keys: usize) -> usize {
        let own = self
            .table
            .len()
            .saturating_add(new_keys)
            .saturating_sub(self.capacity);
        let shared = self.shared.as_ref().map_or(0, |s| s.missing(new_keys));
        own.max(shared)
    }

    fn counted_out(&self, n: usize) {
        if let Some(shared) = &self.shared {
            shared.removed(n);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The entry `eq` picks among those of hash `hash`.
    #[inline]
    pub(crate) fn find(&self, hash: u64, eq: impl FnMut(&X::Entry) -> bool) -> Option<&X::Entry> {
        self.table.find(hash, eq)
    }

    /// The shard's context and the entry `eq` picks. Whoever changes the entry's state
    /// must then [`note`](Shard::note) its idle time, or the shard may sweep it later
    /// than it could; never earlier, as a sweep reads every idle time afresh.
    #[inline]
    pub(crate) fn find_mut(
        &mut self,
        hash: u64,
        eq: impl FnMut(&X::Entry) -> bool,
    ) -> Option<(&X, &mut X::Entry)> {
        let entry = self.table.find_mut(hash, eq)?;
        Some((&self.entries, entry))
    }

    /// Keeps the sweep bound below `idle_at`, an entry's new idle time.
    #[inline]
    pub(crate) fn note(&mut self, idle_at: Nanos) {
        self.sweep_at = self.sweep_at.min(idle_at);
    }

    /// Removes the entry `eq` picks, if any.
    pub(crate) fn remove(&mut self, hash: u64, eq: impl FnMut(&X::Entry) -> bool) {
        if let Ok(found) = self.table.find_entry(hash, eq) {
            found.remove();
            self.counted_out(1);
        }
    }

    /// The time from which a new key starts: `now`, or the latest eviction if this
    /// thread's clock reading is older.
    #[inline]
    pub(crate) fn start(&self, now: Nanos) -> Nanos {
        now.max(self.evicted_at)
    }

    /// Installs a new context (a new configuration), keeping every entry.
    pub(crate) fn set_entries(&mut self, entries: X) {
        self.entries = entries;
        let entries = &self.entries;
        self.sweep_at = self
            .table
            .iter()
            .map(|entry| entries.idle_at(entry))
            .min()
            .unwrap_or(Nanos::MAX);
    }

    /// The bytes the shard's hash table has allocated.
    #[cfg(test)]
    fn allocated(&self) -> usize {
        self.table.allocation_size()
    }
}

impl<X: Rehash> Shard<X> {
    /// Makes room for `new_keys` more keys, as the shard's policy says: sweeping idle
    /// keys if the shard is full or has grown, then evicting under
    /// [`WhenFull::EvictNearestIdle`] any live entry but those `spare` picks (the
    /// caller's own). `hint` (the new key's hash) picks where to sample. With `evict`
    /// false nothing live is evicted and the answer is what it would be: a peek's.
    pub(crate) fn make_room(
        &mut self,
        hasher: &RandomState,
        now: Nanos,
        new_keys: usize,
        hint: u64,
        evict: bool,
        spare: impl Fn(&X::Entry) -> bool,
    ) -> Room {
        let len = self.table.len();
        let over = self.missing(new_keys) > 0;
        if is_idle(self.sweep_at, now) && (over || len >= self.sweep_len) {
            self.sweep(hasher, now);
        }
        // Under a shared bound, the keys missing may be held by other shards: only
        // this shard's own can be evicted here, and beyond them the key finds no room.
        let missing = self.missing(new_keys);
        if missing == 0 {
            return Room::Free;
        }
        // Full of live keys: after the sweep above (or with none due) `sweep_at` is
        // later than now (or the clock's end). It is the earliest a key can become
        // idle; a key used since may stay live longer, so this is a lower bound.
        let idle = self.sweep_at;
        match self.when_full {
            WhenFull::Deny => Room::Full(idle),
            WhenFull::Overflow(_) => Room::Overflow(idle),
            WhenFull::EvictNearestIdle if missing > self.table.len() => Room::Full(idle),
            WhenFull::EvictNearestIdle if !evict => {
                for i in 0..missing as u64 {
                    if let Err(booked_until) = self.nearest_idle(now, hint.wrapping_add(i), &spare)
                    {
                        return Room::Full(idle.min(booked_until));
                    }
                }
                Room::Free
            }
            WhenFull::EvictNearestIdle => {
                for i in 0..missing as u64 {
                    match self.nearest_idle(now, hint.wrapping_add(i), &spare) {
                        Ok(index) => {
                            if let Ok(victim) = self.table.get_bucket_entry(index) {
                                victim.remove();
                                self.counted_out(1);
                            }
                            self.evicted_at = self.evicted_at.max(now);
                        }
                        Err(booked_until) => return Room::Full(idle.min(booked_until)),
                    }
                }
                Room::Free
            }
        }
    }

    /// The bucket of the entry to evict among [`SAMPLE`] entries found from a spot
    /// that `hint` picks, leaving out entries booked ahead past `now` and those
    /// `spare` picks: the one whose forgetting gives back the least
    /// ([`Entries::gives_back`]), and of those the one used last
    /// ([`Entries::used_at`]), so that keys each holding as much as a key spent earlier go before it.
    /// `Err` when the sample leaves none: when the first of its bookings ends
    /// ([`Nanos::MAX`] if none will).
    fn nearest_idle(
        &self,
        now: Nanos,
        hint: u64,
        spare: impl Fn(&X::Entry) -> bool,
    ) -> Result<usize, Nanos> {
        // A power of two (or zero, for a table never allocated).
        let buckets = self.table.num_buckets();
        let mask = buckets.wrapping_sub(1);
        // Some bits of a hash pick the shard and others the home bucket: mix them all,
        // so that every bucket can start a sample.
        let start = (hint.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize;
        let mut nearest: Option<(usize, u64, Nanos)> = None;
        let mut booked = Nanos::MAX;
        let mut sampled = 0;
        for offset in 0..buckets {
            let index = start.wrapping_add(offset) & mask;
            let Some(entry) = self.table.get_bucket(index) else {
                continue;
            };
            let idle_at = self.entries.idle_at(entry);
            let booked_until = self.entries.booked_until(entry, idle_at);
            if booked_until > now {
                booked = booked.min(booked_until);
            } else if !spare(entry) {
                let gives = self.entries.gives_back(entry, idle_at, now);
                let used_at = self.entries.used_at(entry, idle_at);
                let better = nearest.is_none_or(|(_, least, latest)| {
                    gives < least || (gives == least && used_at > latest)
                });
                if better {
                    nearest = Some((index, gives, used_at));
                }
            }
            sampled += 1;
            if sampled == SAMPLE {
                break;
            }
        }
        nearest.map(|(index, _, _)| index).ok_or(booked)
    }

    /// Inserts an entry for a key not held, after [`make_room`](Shard::make_room)
    /// found room for it.
    pub(crate) fn insert(&mut self, hasher: &RandomState, hash: u64, entry: X::Entry) {
        debug_assert!(
            self.table.len() < self.capacity,
            "inserted into a full shard"
        );
        self.sweep_at = self.sweep_at.min(self.entries.idle_at(&entry));
        let entries = &self.entries;
        self.table
            .insert_unique(hash, entry, |e| entries.hash(hasher, e));
        if let Some(shared) = &self.shared {
            shared.added(1);
        }
    }

    /// No key of the shard is idle before this time (a lower bound).
    pub(crate) fn next_idle(&self) -> Nanos {
        self.sweep_at
    }

    /// [`sweep`](Shard::sweep)s if a key may be idle at `now`; returns how many went.
    pub(crate) fn sweep_if_due(&mut self, hasher: &RandomState, now: Nanos) -> usize {
        if is_idle(self.sweep_at, now) {
            self.sweep(hasher, now)
        } else {
            0
        }
    }

    /// Evicts every key idle at `now`; returns how many.
    pub(crate) fn sweep(&mut self, hasher: &RandomState, now: Nanos) -> usize {
        let before = self.table.len();
        let entries = &self.entries;
        let mut earliest = Nanos::MAX;
        self.table.retain(|entry| {
            let idle_at = entries.idle_at(entry);
            let live = !is_idle(idle_at, now);
            if live {
                earliest = earliest.min(idle_at);
            }
            live
        });
        let kept = self.table.len();
        if kept < before {
            self.evicted_at = self.evicted_at.max(now);
            self.counted_out(before - kept);
        }
        self.sweep_at = earliest;
        self.sweep_len = kept.saturating_mul(2).max(MIN_SWEEP_LEN);
        // Give memory back once a flood of keys has gone.
        if self.table.capacity() > kept.max(MIN_SWEEP_LEN).saturating_mul(4) {
            self.table
                .shrink_to(kept.saturating_mul(2), |e| entries.hash(hasher, e));
        }
        before - kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::Quota;
    use std::hash::BuildHasher;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    /// Entries that carry their own times: `(key, idle_at, booked_until)`.
    struct Timed;

    impl Entries for Timed {
        type Entry = (u32, Nanos, Nanos);

        fn idle_at(&self, entry: &Self::Entry) -> Nanos {
            entry.1
        }

        fn booked_until(&self, entry: &Self::Entry, _: Nanos) -> Nanos {
            entry.2
        }
    }

    impl Rehash for Timed {
        fn hash(&self, hasher: &RandomState, entry: &Self::Entry) -> u64 {
            hasher.hash_one(entry.0)
        }
    }

    fn shard(capacity: usize, when_full: WhenFull) -> (Shard<Timed>, RandomState) {
        (Shard::new(Timed, capacity, when_full), RandomState::new())
    }

    /// Inserts `key`, idle at `idle_ms`, if there is room at `now_ms`.
    fn put(
        s: &mut Shard<Timed>,
        h: &RandomState,
        key: u32,
        now_ms: u64,
        idle_ms: u64,
        booked_ms: u64,
    ) -> Room {
        let hash = h.hash_one(key);
        let room = s.make_room(h, at(now_ms), 1, hash, true, |_| false);
        if room == Room::Free {
            s.insert(h, hash, (key, at(idle_ms), at(booked_ms)));
        }
        room
    }

    fn held(s: &Shard<Timed>, h: &RandomState, key: u32) -> bool {
        s.find(h.hash_one(key), |e| e.0 == key).is_some()
    }

    #[test]
    fn sweep_at_is_the_earliest_idle_time() {
        let (mut s, h) = shard(10, WhenFull::Deny);
        assert_eq!(s.sweep_at, Nanos::MAX);
        put(&mut s, &h, 1, 50, 150, 0);
        put(&mut s, &h, 2, 20, 120, 0);
        assert_eq!(s.sweep_at, at(120));
        assert_eq!(s.sweep(&h, at(120)), 1);
        assert_eq!(s.sweep_at, at(150), "exact after a sweep");
        assert_eq!(s.sweep(&h, at(150)), 1);
        assert_eq!(s.sweep_at, Nanos::MAX);
    }

    #[test]
    fn a_full_denying_shard_waits_for_the_first_idle_key() {
        let (mut s, h) = shard(2, WhenFull::Deny);
        put(&mut s, &h, 1, 0, 100, 0);
        put(&mut s, &h, 2, 30, 130, 0);
        assert_eq!(put(&mut s, &h, 3, 40, 140, 0), Room::Full(at(100)));
        assert_eq!(put(&mut s, &h, 3, 100, 200, 0), Room::Free);
        assert!(!held(&s, &h, 1), "key 1 was idle and swept");
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn an_overflowing_shard_reports_the_wait_for_room() {
        let quota = Quota::per_second(1).unwrap();
        let (mut s, h) = shard(1, WhenFull::Overflow(quota));
        put(&mut s, &h, 1, 0, 100, 0);
        assert_eq!(put(&mut s, &h, 2, 10, 110, 0), Room::Overflow(at(100)));
        assert!(held(&s, &h, 1));
    }

    #[test]
    fn a_full_evicting_shard_evicts_the_entry_nearest_to_idle() {
        let (mut s, h) = shard(3, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 300, 0);
        put(&mut s, &h, 2, 0, 100, 0);
        put(&mut s, &h, 3, 0, 200, 0);
        assert_eq!(put(&mut s, &h, 4, 10, 110, 0), Room::Free);
        assert!(!held(&s, &h, 2), "the nearest to idle went");
        assert!(held(&s, &h, 1) && held(&s, &h, 3) && held(&s, &h, 4));
        assert_eq!(s.evicted_at, at(10));
        assert_eq!(s.start(at(5)), at(10), "no key restarts before an eviction");
    }

    #[test]
    fn an_idle_time_at_the_clocks_end_is_never_idle() {
        assert!(is_idle(at(10), at(10)));
        assert!(!is_idle(at(11), at(10)));
        assert!(!is_idle(Nanos::MAX, Nanos::MAX));
        let (mut s, h) = shard(2, WhenFull::Deny);
        put(&mut s, &h, 1, 0, 100, 0);
        s.insert(&h, h.hash_one(2u32), (2, Nanos::MAX, Nanos::ZERO));
        assert_eq!(s.sweep(&h, Nanos::MAX), 1, "only key 1 was idle");
        assert!(held(&s, &h, 2));
    }

    #[test]
    fn entries_booked_ahead_are_never_evicted_early() {
        let (mut s, h) = shard(2, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 100, 50);
        put(&mut s, &h, 2, 0, 500, 400);
        let denied = put(&mut s, &h, 3, 10, 110, 0);
        assert_eq!(denied, Room::Full(at(50)), "until key 1's booking ends");
        assert_eq!(s.len(), 2);
        assert_eq!(put(&mut s, &h, 3, 50, 150, 0), Room::Free);
        assert!(!held(&s, &h, 1), "key 1's booking was used at 50 ms");
        assert!(held(&s, &h, 2));
    }

    #[test]
    fn a_peek_evicts_nothing_but_answers_as_an_insertion_would() {
        let (mut s, h) = shard(1, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 100, 0);
        assert_eq!(s.make_room(&h, at(10), 1, 7, false, |_| false), Room::Free);
        assert!(held(&s, &h, 1));
        let (mut s, h) = shard(1, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 100, 60);
        assert_eq!(
            s.make_room(&h, at(10), 1, 7, false, |_| false),
            Room::Full(at(60))
        );
    }

    #[test]
    fn more_new_keys_than_the_shard_holds_never_fit() {
        let (mut s, h) = shard(2, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 100, 0);
        assert!(matches!(
            s.make_room(&h, at(0), 3, 0, true, |_| false),
            Room::Full(_)
        ));
        assert_eq!(s.make_room(&h, at(0), 2, 0, true, |_| false), Room::Free);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn spared_entries_are_not_evicted() {
        let (mut s, h) = shard(2, WhenFull::EvictNearestIdle);
        put(&mut s, &h, 1, 0, 100, 0);
        put(&mut s, &h, 2, 0, 200, 0);
        let room = s.make_room(&h, at(0), 1, 0, true, |e| e.0 == 1);
        assert_eq!(room, Room::Free);
        assert!(held(&s, &h, 1) && !held(&s, &h, 2));
        let room = s.make_room(&h, at(0), 2, 0, true, |e| e.0 == 1);
        assert!(matches!(room, Room::Full(_)));
    }

    /// The bug: a sample started where bits of the new key's hash said, but some of
    /// those bits were the ones that had picked the shard, the same for every key of
    /// it: samples covered an eighth of the shard. Keys elsewhere were never evicted,
    /// and a client's key landing in that eighth was evicted among the newest.
    #[test]
    fn samples_reach_every_entry_of_the_shard() {
        let (mut s, h) = shard(1_000, WhenFull::EvictNearestIdle);
        for key in 0..20_000u32 {
            // As in a table, the bits from 32 up are the same for every key of a shard.
            let hash = h.hash_one(key) & !(0xffff << 32) | (0x2a << 32);
            let room = s.make_room(&h, at(u64::from(key)), 1, hash, true, |_| false);
            assert_eq!(room, Room::Free);
            s.insert(&h, hash, (key, at(u64::from(key) + 100_000), Nanos::ZERO));
        }
        let oldest = s.table.iter().map(|e| e.0).min();
        // Usually about 5,000 insertions old; never ten times the shard's size.
        assert!(oldest >= Some(10_000), "key {oldest:?} outlived the flood");
    }

    #[test]
    fn grown_shard_sweeps_below_capacity() {
        let (mut s, h) = shard(1_000, WhenFull::Deny);
        for key in 0..100 {
            put(&mut s, &h, key, 0, 100, 0);
        }
        assert_eq!(s.len(), 100, "nothing idle yet: no sweep");
        put(&mut s, &h, 1_000, 100, 200, 0);
        assert_eq!(
            s.len(),
            1,
            "the hundred idle keys left on the next insertion"
        );
        assert_eq!(s.sweep_len, MIN_SWEEP_LEN);
    }

    #[test]
    fn small_shard_does_not_sweep_below_the_threshold() {
        let (mut s, h) = shard(1_000, WhenFull::Deny);
        for key in 0..5 {
            put(&mut s, &h, key, 0, 100, 0);
        }
        put(&mut s, &h, 99, 500, 600, 0);
        assert_eq!(s.len(), 6);
    }

    #[test]
    fn sweeping_after_a_flood_gives_memory_back() {
        let (mut s, h) = shard(100_000, WhenFull::Deny);
        for key in 0..10_000 {
            put(&mut s, &h, key, 0, 100, 0);
        }
        let grown = s.allocated();
        assert_eq!(s.sweep(&h, at(100)), 10_000);
        assert!(s.allocated() < grown / 8, "{}", s.allocated());
    }

    #[test]
    fn updates_keep_the_sweep_bound_below_every_idle_time() {
        let (mut s, h) = shard(10, WhenFull::Deny);
        put(&mut s, &h, 1, 0, 100, 0);
        let hash = h.hash_one(1u32);
        if let Some((_, entry)) = s.find_mut(hash, |e| e.0 == 1) {
            entry.1 = at(40);
        }
        s.note(at(40));
        assert_eq!(s.sweep_at, at(40));
        assert!(s.find_mut(h.hash_one(2u32), |e| e.0 == 2).is_none());
        s.set_entries(Timed);
        assert_eq!(s.sweep_at, at(40));
    }
}
