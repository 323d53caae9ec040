//! One shard of a keyed limiter: the states of the keys hashed to it, its own copy of
//! the algorithm, and the bookkeeping that bounds and sweeps it. Everything here runs
//! under the shard's lock; time and hashes come from the caller.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use hashbrown::HashTable;

use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Limited, Reservation};
use crate::time::Nanos;

/// Below this many keys a shard never sweeps on its own: too small to be worth it.
const MIN_SWEEP_LEN: usize = 16;

pub(crate) struct Shard<K, A: Algorithm> {
    /// A copy of the limiter's configuration, so that the hot path reads it under the
    /// lock it already holds.
    algorithm: A,
    table: HashTable<(K, A::State)>,
    /// The most keys this shard may hold.
    capacity: usize,
    /// Never later than the earliest [`Algorithm::idle_at`] of the keys held (exact
    /// right after a sweep): before it, a sweep would evict nothing.
    sweep_at: Nanos,
    /// The length from which the shard sweeps below its capacity: twice what the last
    /// sweep kept, so sweeping costs O(1) per insertion, amortised.
    sweep_len: usize,
    /// The latest time at which a sweep evicted a key. A thread whose clock reading is
    /// older must not start that key afresh at its older time: the evicted state was
    /// idle only from this time on.
    evicted_at: Nanos,
}

impl<K, A> Shard<K, A>
where
    K: Hash + Eq,
    A: Algorithm,
{
    pub(crate) fn new(algorithm: A, capacity: usize) -> Shard<K, A> {
        Shard {
            algorithm,
            table: HashTable::new(),
            capacity,
            sweep_at: Nanos::MAX,
            sweep_len: MIN_SWEEP_LEN,
            evicted_at: Nanos::ZERO,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn acquire<Q, S>(
        &mut self,
        hasher: &S,
        hash: u64,
        key: &Q,
        now: Nanos,
        n: u64,
    ) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = K>,
        S: BuildHasher,
    {
        self.update(hasher, hash, key, now, n, |alg, state, now| {
            alg.acquire(state, now, n)
        })
    }

    pub(crate) fn reserve<Q, S>(
        &mut self,
        hasher: &S,
        hash: u64,
        key: &Q,
        now: Nanos,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Denied>
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = K>,
        S: BuildHasher,
    {
        self.update(hasher, hash, key, now, n, |alg, state, now| {
            alg.reserve(state, now, n, max_wait)
        })
    }

    /// Decides as [`Shard::acquire`] would, changing no key's state. It may sweep, as
    /// the acquisition would before inserting a new key; that changes no decision.
    pub(crate) fn peek<Q, S>(
        &mut self,
        hasher: &S,
        hash: u64,
        key: &Q,
        now: Nanos,
        n: u64,
    ) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq,
        S: BuildHasher,
    {
        if let Some((_, state)) = self.table.find(hash, |(k, _)| k.borrow() == key) {
            return self.algorithm.peek(state, now, n);
        }
        let now = now.max(self.evicted_at);
        let mut fresh = self.algorithm.initial_state(now);
        let admitted = self.algorithm.acquire(&mut fresh, now, n)?;
        if n > 0 && self.algorithm.idle_at(&fresh) > now {
            self.make_room(hasher, now)?;
        }
        Ok(admitted)
    }

    pub(crate) fn refund<Q>(&mut self, hash: u64, key: &Q, now: Nanos, n: u64)
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        // A key not held is as good as fresh, and nothing can be refunded above that.
        if let Some((_, state)) = self.table.find_mut(hash, |(k, _)| k.borrow() == key) {
            self.algorithm.refund(state, now, n);
            self.sweep_at = self.sweep_at.min(self.algorithm.idle_at(state));
        }
    }

    /// Runs `decide` on the key's state, or on a fresh state for a new key, which is
    /// stored only if it was admitted, is not idle, and the shard has room for it.
    #[inline]
    fn update<Q, S, T>(
        &mut self,
        hasher: &S,
        hash: u64,
        key: &Q,
        now: Nanos,
        n: u64,
        decide: impl FnOnce(&A, &mut A::State, Nanos) -> Result<T, Denied>,
    ) -> Result<T, Denied>
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq + ToOwned<Owned = K>,
        S: BuildHasher,
    {
        let Shard {
            algorithm,
            table,
            sweep_at,
            ..
        } = self;
        if let Some((_, state)) = table.find_mut(hash, |(k, _)| k.borrow() == key) {
            let result = decide(algorithm, state, now);
            // Keeps `sweep_at` a lower bound for algorithms whose idle time can move
            // earlier; for the others this is one comparison.
            *sweep_at = (*sweep_at).min(algorithm.idle_at(state));
            return result;
        }
        let now = now.max(self.evicted_at);
        let mut state = self.algorithm.initial_state(now);
        let result = decide(&self.algorithm, &mut state, now)?;
        let idle_at = self.algorithm.idle_at(&state);
        if n == 0 || idle_at <= now {
            // Nothing a fresh key would not give again: no need to remember it.
            return Ok(result);
        }
        self.make_room(hasher, now)?;
        self.table
            .insert_unique(hash, (key.to_owned(), state), |(k, _)| hasher.hash_one(k));
        self.sweep_at = self.sweep_at.min(idle_at);
        Ok(result)
    }

    /// Makes sure one more key fits, sweeping if the shard is full or large and a key
    /// has become idle; otherwise denies until a key becomes idle.
    fn make_room<S: BuildHasher>(&mut self, hasher: &S, now: Nanos) -> Result<(), Denied> {
        let len = self.table.len();
        if now >= self.sweep_at && (len >= self.capacity || len >= self.sweep_len) {
            self.sweep(hasher, now);
        }
        if self.table.len() < self.capacity {
            return Ok(());
        }
        // Full of live keys: after the sweep above (or with none due) `sweep_at` is
        // later than now. It is the earliest a key can become idle; a key used since
        // may stay live longer, so this `retry_after` is a lower bound.
        let retry_after = self.sweep_at.saturating_since(now);
        Err(Limited::new(retry_after, self.algorithm.capacity(), 0, retry_after).into())
    }

    /// Evicts every key idle at `now`; returns how many.
    pub(crate) fn sweep<S: BuildHasher>(&mut self, hasher: &S, now: Nanos) -> usize {
        let before = self.table.len();
        let algorithm = &self.algorithm;
        let mut earliest = Nanos::MAX;
        self.table.retain(|(_, state)| {
            let idle_at = algorithm.idle_at(state);
            let live = idle_at > now;
            if live {
                earliest = earliest.min(idle_at);
            }
            live
        });
        let kept = self.table.len();
        if kept < before {
            self.evicted_at = self.evicted_at.max(now);
        }
        self.sweep_at = earliest;
        self.sweep_len = kept.saturating_mul(2).max(MIN_SWEEP_LEN);
        // Give memory back once a flood of keys has gone.
        if self.table.capacity() > kept.max(MIN_SWEEP_LEN).saturating_mul(4) {
            self.table
                .shrink_to(kept.saturating_mul(2), |(k, _)| hasher.hash_one(k));
        }
        before - kept
    }

    /// Installs a new configuration, keeping every key's state.
    pub(crate) fn set_algorithm(&mut self, algorithm: A) {
        self.algorithm = algorithm;
        let algorithm = &self.algorithm;
        self.sweep_at = self
            .table
            .iter()
            .map(|(_, state)| algorithm.idle_at(state))
            .min()
            .unwrap_or(Nanos::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Gcra;
    use crate::quota::Quota;
    use std::hash::RandomState;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    /// 10 per second, burst 1: a key acquired at `t` is idle from `t + 100 ms`.
    fn shard(capacity: usize) -> (Shard<u32, Gcra>, RandomState) {
        let gcra = Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap());
        (Shard::new(gcra, capacity), RandomState::new())
    }

    fn acquire(
        shard: &mut Shard<u32, Gcra>,
        hasher: &RandomState,
        key: u32,
        now: Nanos,
    ) -> Decision {
        shard.acquire(hasher, hasher.hash_one(key), &key, now, 1)
    }

    #[test]
    fn sweep_at_is_the_earliest_idle_time() {
        let (mut s, h) = shard(10);
        assert_eq!(s.sweep_at, Nanos::MAX);
        acquire(&mut s, &h, 1, at(50)).unwrap();
        acquire(&mut s, &h, 2, at(20)).unwrap();
        assert_eq!(s.sweep_at, at(120));
        assert_eq!(s.sweep(&h, at(120)), 1);
        assert_eq!(s.sweep_at, at(150), "exact after a sweep");
        assert_eq!(s.sweep(&h, at(150)), 1);
        assert_eq!(s.sweep_at, Nanos::MAX);
    }

    #[test]
    fn full_shard_denies_a_new_key_until_a_key_is_idle() {
        let (mut s, h) = shard(2);
        acquire(&mut s, &h, 1, at(0)).unwrap();
        acquire(&mut s, &h, 2, at(30)).unwrap();
        let denied = acquire(&mut s, &h, 3, at(40)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(60)));
        assert!(
            acquire(&mut s, &h, 1, at(100)).is_ok(),
            "present keys still work"
        );
        // Key 1 is live again (until 200 ms); key 2 is idle from 130 ms.
        let denied = acquire(&mut s, &h, 3, at(110)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(20)));
        assert!(acquire(&mut s, &h, 3, at(130)).is_ok());
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn full_shard_after_a_fruitless_sweep_reports_the_exact_wait() {
        let (mut s, h) = shard(1);
        acquire(&mut s, &h, 1, at(0)).unwrap();
        // A refund lowers the bound; the key is then reacquired, so the bound is stale.
        s.refund(h.hash_one(1), &1, at(0), 1);
        assert_eq!(s.sweep_at, at(0));
        acquire(&mut s, &h, 1, at(10)).unwrap();
        let denied = acquire(&mut s, &h, 2, at(20)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(90)));
        assert_eq!(s.sweep_at, at(110));
    }

    #[test]
    fn grown_shard_sweeps_below_capacity() {
        let (mut s, h) = shard(1_000);
        for key in 0..100 {
            acquire(&mut s, &h, key, at(0)).unwrap();
        }
        assert_eq!(s.len(), 100, "nothing idle yet: no sweep");
        acquire(&mut s, &h, 1_000, at(100)).unwrap();
        assert_eq!(
            s.len(),
            1,
            "the hundred idle keys left on the next insertion"
        );
        assert_eq!(s.sweep_len, MIN_SWEEP_LEN);
    }

    #[test]
    fn small_shard_does_not_sweep_below_the_threshold() {
        let (mut s, h) = shard(1_000);
        for key in 0..5 {
            acquire(&mut s, &h, key, at(0)).unwrap();
        }
        acquire(&mut s, &h, 99, at(500)).unwrap();
        assert_eq!(s.len(), 6);
    }

    #[test]
    fn sweeping_after_a_flood_gives_memory_back() {
        let (mut s, h) = shard(100_000);
        for key in 0..10_000 {
            acquire(&mut s, &h, key, at(0)).unwrap();
        }
        let grown = s.table.capacity();
        assert_eq!(s.sweep(&h, at(100)), 10_000);
        assert!(s.table.capacity() < grown / 8, "{}", s.table.capacity());
    }

    #[test]
    fn peeks_and_denials_store_nothing() {
        let (mut s, h) = shard(10);
        let hash = h.hash_one(7u32);
        assert!(s.acquire(&h, hash, &7, at(0), 0).is_ok());
        assert!(s.peek(&h, hash, &7, at(0), 1).is_ok());
        assert!(s.acquire(&h, hash, &7, at(0), 2).unwrap_err().is_never());
        assert!(s.reserve(&h, hash, &7, at(0), 0, Duration::ZERO).is_ok());
        s.refund(hash, &7, at(0), 1);
        assert_eq!(s.len(), 0);
        assert_eq!(s.sweep_at, Nanos::MAX);
    }

    #[test]
    fn peek_at_a_full_shard_answers_as_acquire_would() {
        let (mut s, h) = shard(1);
        acquire(&mut s, &h, 1, at(0)).unwrap();
        let hash = h.hash_one(2u32);
        let denied = s.peek(&h, hash, &2, at(40), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(60)));
        assert!(s.peek(&h, hash, &2, at(40), 0).is_ok());
        assert!(s.peek(&h, hash, &2, at(100), 1).is_ok());
        assert_eq!(s.len(), 0, "the peek swept key 1 but stored nothing");
    }

    #[test]
    fn new_configuration_recomputes_sweep_at() {
        let (mut s, h) = shard(10);
        acquire(&mut s, &h, 1, at(0)).unwrap();
        s.refund(h.hash_one(1), &1, at(0), 1);
        s.sweep_at = Nanos::ZERO;
        acquire(&mut s, &h, 1, at(0)).unwrap();
        s.set_algorithm(Gcra::new(Quota::per_second(1).unwrap()));
        assert_eq!(s.sweep_at, at(100), "the stored TAT is kept");
    }
}
