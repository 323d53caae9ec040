//! The keyed limiter's table: one algorithm state per key, under one configuration
//! that every shard copies so that the hot path reads it under the lock it holds.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash, RandomState};
use std::marker::PhantomData;

use super::shard::is_idle;
use super::{Entries, KeyedConfig, Rehash, Room, Table};
use crate::algorithm::Algorithm;
use crate::decision::{Decision, Denied, Limited};
use crate::error::ConfigError;
use crate::time::Nanos;

/// A shard's context in a table of `(key, state)` entries: its copy of the algorithm.
pub(crate) struct PerKey<K, A> {
    pub(crate) algorithm: A,
    /// How far past the present a state's idle time can reach by acquiring alone: a
    /// state idle later than that has booked capacity ahead.
    horizon: u64,
    key: PhantomData<fn() -> K>,
}

impl<K, A: Algorithm> PerKey<K, A> {
    pub(crate) fn new(algorithm: A) -> PerKey<K, A> {
        let horizon = horizon(&algorithm);
        PerKey {
            algorithm,
            horizon,
            key: PhantomData,
        }
    }
}

impl<K, A: Clone> Clone for PerKey<K, A> {
    fn clone(&self) -> PerKey<K, A> {
        PerKey {
            algorithm: self.algorithm.clone(),
            horizon: self.horizon,
            key: PhantomData,
        }
    }
}

/// How far after `start` a fresh state taking all it can at once is idle: the most
/// an acquisition reaches. Measured from the origin and again from that first idle
/// time, which for windows aligned to the clock is the start of a window.
fn horizon<A: Algorithm>(algorithm: &A) -> u64 {
    if !A::BOOKS_AHEAD {
        // Nothing is ever booked ahead.
        return u64::MAX;
    }
    let reach = |start: Nanos| {
        let mut state = algorithm.initial_state(start);
        // The capacity may count permits only a wait can get (a refresh period's):
        // an acquisition then takes at most what its denial names.
        let most = match algorithm.peek(&state, start, algorithm.capacity()) {
            Err(Denied::Insufficient(most)) => most.capacity(),
            _ => algorithm.capacity(),
        };
        // A denial leaves the fresh state, whose reach is then nothing.
        let _ = algorithm.acquire(&mut state, start, most);
        algorithm
            .idle_at(&state)
            .as_u64()
            .saturating_sub(start.as_u64())
    };
    let first = reach(Nanos::ZERO);
    first.max(reach(Nanos::new(first)))
}

impl<K, A: Algorithm> Entries for PerKey<K, A> {
    type Entry = (K, A::State);

    #[inline]
    fn idle_at(&self, entry: &Self::Entry) -> Nanos {
        self.algorithm.idle_at(&entry.1)
    }

    fn booked_until(&self, _: &Self::Entry, idle_at: Nanos) -> Nanos {
        Nanos::new(idle_at.as_u64().saturating_sub(self.horizon))
    }

    #[inline]
    fn gives_back(&self, entry: &Self::Entry, _: Nanos, now: Nanos) -> u64 {
        self.algorithm.forgetting_gives_back(&entry.1, now)
    }
}

impl<K: Hash, A: Algorithm> Rehash for PerKey<K, A> {
    fn hash(&self, hasher: &RandomState, entry: &Self::Entry) -> u64 {
        hasher.hash_one(&entry.0)
    }
}

/// The denial at `now` for a new key that found no room, which there may be from
/// `until` on.
fn no_room(now: Nanos, until: Nanos, capacity: u64) -> Denied {
    let wait = until.as_u64().saturating_sub(now.as_u64());
    Limited::deferred(wait, capacity, 0, 1, wait).into()
}

impl<K, A> Table<PerKey<K, A>>
where
    K: Hash + Eq,
    A: Algorithm,
{
    /// A table of states under `algorithm`.
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`].
    pub(crate) fn with_algorithm(
        algorithm: A,
        config: &KeyedConfig,
    ) -> Result<Table<PerKey<K, A>>, ConfigError> {
        let per_key = PerKey::new(algorithm);
        Table::new(config, || per_key.clone())
    }

    /// Runs `f` on `key`'s state atomically (under its shard's lock), with the
    /// algorithm and the time to decide at; a key not held gets a fresh state.
    ///
    /// `f` takes `n` permits. The fresh state of a new key is stored only if `f`
    /// returns `Ok`, `n` is not zero and the state is not idle; if the shard has no
    /// room, the result is the full shard's denial instead, or the overflow limit's
    /// decision on `n` ([`WhenFull`](super::WhenFull)). A stored state whose idle time
    /// lies ahead (capacity booked for later included) is never swept before it.
    #[inline]
    pub(crate) fn with_state<Q, T>(
        &self,
        key: &Q,
        now: Nanos,
        n: u64,
        f: impl FnOnce(&A, &mut A::State, Nanos) -> Result<T, Denied>,
    ) -> Result<T, Denied>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let hasher = self.hasher();
        let hash = hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        if let Some((per_key, (_, state))) = shard.find_mut(hash, |(k, _)| k.borrow() == key) {
            let result = f(&per_key.algorithm, state, now);
            // Keeps the sweep bound below the key's idle time, should `f` have moved it
            // earlier (a refund, a rebooking); otherwise this is one comparison.
            let idle_at = per_key.algorithm.idle_at(state);
            shard.note(idle_at);
            return result;
        }
        let now = shard.start(now);
        let algorithm = &shard.entries.algorithm;
        let mut state = algorithm.initial_state(now);
        let result = f(algorithm, &mut state, now)?;
        if n == 0 || is_idle(algorithm.idle_at(&state), now) {
            // Nothing a fresh key would not give again: no need to remember it.
            return Ok(result);
        }
        let capacity = algorithm.capacity();
        match shard.make_room(hasher, now, 1, hash, true, |_| false) {
            Room::Free => {
                shard.insert(hasher, hash, (key.to_owned(), state));
                Ok(result)
            }
            Room::Full(until) => Err(no_room(now, until, capacity)),
            Room::Overflow(until) => match self.overflow(now, n, until, true) {
                Ok(()) => Ok(result),
                Err(until) => Err(no_room(now, until, capacity)),
            },
        }
    }

    /// Decides `n` permits for a stored `key` at `now` as [`peek`](Self::peek) does, or
    /// `None` if it is not stored. It sweeps nothing, so `now` may be any time, even
    /// the clock's end.
    pub(crate) fn peek_stored<Q>(&self, key: &Q, now: Nanos, n: u64) -> Option<Decision>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hasher().hash_one(key);
        let shard = self.shard(hash).lock();
        let (_, state) = shard.find(hash, |(k, _)| k.borrow() == key)?;
        Some(shard.entries.algorithm.peek(state, now, n))
    }

    /// Decides `n` permits for `key` as an acquisition would, changing no state. It
    /// may sweep, as the acquisition would before storing a new key; that changes no
    /// decision. It evicts nothing.
    pub(crate) fn peek<Q>(&self, key: &Q, now: Nanos, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hasher = self.hasher();
        let hash = hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let shard = &mut *shard;
        if let Some((_, state)) = shard.find(hash, |(k, _)| k.borrow() == key) {
            return shard.entries.algorithm.peek(state, now, n);
        }
        let now = shard.start(now);
        let algorithm = &shard.entries.algorithm;
        let mut fresh = algorithm.initial_state(now);
        let admitted = algorithm.acquire(&mut fresh, now, n)?;
        if n == 0 || is_idle(algorithm.idle_at(&fresh), now) {
            return Ok(admitted);
        }
        let capacity = algorithm.capacity();
        match shard.make_room(hasher, now, 1, hash, false, |_| false) {
            Room::Free => Ok(admitted),
            Room::Full(until) => Err(no_room(now, until, capacity)),
            Room::Overflow(until) => match self.overflow(now, n, until, false) {
                Ok(()) => Ok(admitted),
                Err(until) => Err(no_room(now, until, capacity)),
            },
        }
    }

    /// Gives back `n` permits to `key`. A key not held is as good as fresh, and
    /// nothing can be refunded above that.
    pub(crate) fn refund<Q>(&self, key: &Q, now: Nanos, n: u64)
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hasher().hash_one(key);
        let mut shard = self.shard(hash).lock();
        if let Some((per_key, (_, state))) = shard.find_mut(hash, |(k, _)| k.borrow() == key) {
            per_key.algorithm.refund(state, now, n);
            let idle_at = per_key.algorithm.idle_at(state);
            shard.note(idle_at);
        }
    }

    /// Installs a new configuration in every shard, keeping every key's state.
    pub(crate) fn set_algorithm(&self, algorithm: A) {
        let per_key = PerKey::new(algorithm);
        self.each_shard(|shard| shard.set_entries(per_key.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::algorithm::{FixedWindow, Gcra, RefreshPeriod, SlidingLog};
    use crate::quota::Quota;
    use crate::table::WhenFull;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Nanos {
        Nanos::new(ms * MS)
    }

    /// 10 per second, burst 1: a key acquired at `t` is idle from `t + 100 ms`.
    fn gcra() -> Gcra {
        Gcra::new(Quota::per_second(10).unwrap().burst(1).unwrap())
    }

    /// One shard of `max_keys`.
    fn table(max_keys: usize, when_full: WhenFull) -> Table<PerKey<u32, Gcra>> {
        let config = KeyedConfig::new(max_keys).shards(1).when_full(when_full);
        Table::with_algorithm(gcra(), &config).unwrap()
    }

    fn acquire(t: &Table<PerKey<u32, Gcra>>, key: u32, now: Nanos) -> Decision {
        t.with_state(&key, now, 1, |alg, state, now| alg.acquire(state, now, 1))
    }

    #[test]
    fn full_shard_denies_a_new_key_until_a_key_is_idle() {
        let t = table(2, WhenFull::Deny);
        acquire(&t, 1, at(0)).unwrap();
        acquire(&t, 2, at(30)).unwrap();
        let denied = acquire(&t, 3, at(40)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(60)));
        assert!(acquire(&t, 1, at(100)).is_ok(), "present keys still work");
        // Key 1 is live again (until 200 ms); key 2 is idle from 130 ms.
        let denied = acquire(&t, 3, at(110)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(20)));
        assert!(acquire(&t, 3, at(130)).is_ok());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn full_shard_after_a_fruitless_sweep_reports_the_exact_wait() {
        let t = table(1, WhenFull::Deny);
        acquire(&t, 1, at(0)).unwrap();
        // A refund lowers the bound; the key is then reacquired, so the bound is stale.
        t.refund(&1, at(0), 1);
        acquire(&t, 1, at(10)).unwrap();
        let denied = acquire(&t, 2, at(20)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(90)));
    }

    #[test]
    fn full_evicting_shard_serves_a_new_key() {
        let t = table(2, WhenFull::EvictNearestIdle);
        let heavy = Gcra::new(Quota::per_second(10).unwrap().burst(5).unwrap());
        t.set_algorithm(heavy);
        t.with_state(&1, at(0), 5, |alg, s, now| alg.acquire(s, now, 5))
            .unwrap();
        acquire(&t, 2, at(0)).unwrap();
        assert!(acquire(&t, 3, at(10)).is_ok());
        assert_eq!(t.len(), 2);
        assert!(acquire(&t, 1, at(10)).is_err(), "key 1 kept its state");
    }

    #[test]
    fn a_state_booked_ahead_is_never_evicted_early() {
        let t = table(1, WhenFull::EvictNearestIdle);
        acquire(&t, 1, at(0)).unwrap();
        let booked = t.with_state(&1, at(0), 1, |alg, s, now| {
            alg.reserve(s, now, 1, Duration::from_secs(1))
        });
        assert_eq!(booked.unwrap().wait(), Duration::from_millis(100));
        let denied = acquire(&t, 2, at(50)).unwrap_err();
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_millis(50)),
            "until the reservation is used"
        );
        assert!(acquire(&t, 2, at(100)).is_ok(), "used at 100 ms: evictable");
        assert!(t.peek(&1, at(100), 1).is_ok(), "key 1 restarted fresh");
    }

    #[test]
    fn eviction_takes_the_key_that_gives_back_least_then_the_latest_used() {
        let log = SlidingLog::new(10, Duration::from_secs(1)).unwrap();
        let config = KeyedConfig::new(3).shards(1);
        let t: Table<PerKey<u32, SlidingLog>> = Table::with_algorithm(log, &config).unwrap();
        let take = |key: u32, ms: u64, n: u64| {
            t.with_state(&key, at(ms), n, |alg, s, now| alg.acquire(s, now, n))
        };
        take(1, 0, 10).unwrap();
        take(2, 10, 1).unwrap();
        take(3, 20, 1).unwrap();
        // Key 1 is idle first but gives back 10; keys 2 and 3 give back 1 each.
        take(4, 30, 1).unwrap();
        let held = |key: u32| t.peek(&key, at(30), 1).is_ok_and(|a| a.remaining() < 9);
        assert!(t.peek(&1, at(30), 1).is_err(), "the spent key stays");
        assert!(held(2), "key 2 stays");
        assert!(!held(3), "key 3, used last, went");
        assert!(held(4));
    }

    #[test]
    fn a_refresh_periods_reach_is_one_period() {
        let hour = Duration::from_secs(3_600);
        let refresh = RefreshPeriod::new(10, hour, Duration::ZERO).unwrap();
        assert_eq!(horizon(&refresh), 3_600_000 * MS);
    }

    #[test]
    fn the_horizon_is_what_acquiring_alone_reaches() {
        assert_eq!(horizon(&gcra()), 100 * MS);
        let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
        assert_eq!(horizon(&window), 1_000 * MS);
        let offset = window.aligned_to_unix_epoch(Duration::from_millis(300));
        assert_eq!(horizon(&offset), 1_000 * MS, "from a window's start");
    }

    #[test]
    fn peeks_and_denials_store_nothing() {
        let t = table(10, WhenFull::Deny);
        assert!(
            t.with_state(&7, at(0), 0, |a, s, now| a.acquire(s, now, 0))
                .is_ok()
        );
        assert!(t.peek(&7, at(0), 1).is_ok());
        assert!(
            t.with_state(&7, at(0), 2, |a, s, now| a.acquire(s, now, 2))
                .unwrap_err()
                .is_never()
        );
        t.refund(&7, at(0), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn peek_at_a_full_shard_answers_as_acquire_would() {
        let t = table(1, WhenFull::Deny);
        acquire(&t, 1, at(0)).unwrap();
        let denied = t.peek(&2, at(40), 1).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(60)));
        assert!(t.peek(&2, at(40), 0).is_ok());
        assert!(t.peek(&2, at(100), 1).is_ok());
        assert_eq!(t.len(), 0, "the peek swept key 1 but stored nothing");
    }

    #[test]
    fn peek_at_a_full_overflowing_shard_takes_nothing() {
        let t = table(1, WhenFull::Overflow(Quota::per_hour(1).unwrap()));
        acquire(&t, 1, at(0)).unwrap();
        assert!(t.peek(&2, at(0), 1).is_ok());
        assert!(acquire(&t, 2, at(0)).is_ok(), "the peek left the overflow");
        assert!(t.peek(&3, at(0), 1).is_err());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn new_configuration_recomputes_sweep_at() {
        let t = table(1, WhenFull::Deny);
        acquire(&t, 1, at(0)).unwrap();
        t.set_algorithm(Gcra::new(Quota::per_second(1).unwrap()));
        let denied = acquire(&t, 2, at(50)).unwrap_err();
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_millis(50)),
            "the stored TAT is kept"
        );
    }
}
