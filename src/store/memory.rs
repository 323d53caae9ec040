//! A store in this process's memory: the reference the Redis store is tested against,
//! the local fallback when Redis is down, and a way to run store-based code without
//! Redis.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

use async_trait::async_trait;

use super::request::{Outcome, Request};
use super::rule::{RuleState, Verdict};
use super::{storage_key, validate_prefix, Store, StoreError, DEFAULT_MAX_KEY_LEN};
use crate::clock::{Clock, MonotonicClock, Nanos};
use crate::decision::{Denied, Limited};
use crate::keyed::config::shard_capacity;
use crate::units::duration_to_nanos;
use crate::KeyedConfig;

/// A [`Store`] in this process's memory: the same decisions as the Redis store, for
/// one process.
///
/// Keys are forgotten once their state is idle (a fresh state would decide the same),
/// as Redis forgets them by their TTL. At most `max_keys` keys are held: once a shard
/// is full of keys that are not idle, a request for a new key is denied, with a
/// `retry_after` until the first of them may go.
///
/// Time is Unix time read from the clock (`unix_origin + now`), or the request's
/// explicit time.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::Gcra;
/// use tollgate::store::{Check, MemoryStore, Op, Request, Rule, Store};
/// use tollgate::{KeyedConfig, Quota};
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new(KeyedConfig::new(10_000), "api")?;
/// let rule = Rule::from(Gcra::new(Quota::per_second(2)?));
/// let checks = [Check::new("", &rule)];
/// let request = Request::new("user-42", &checks, Op::Acquire(2));
/// assert!(store.execute(&request).await?.is_admitted());
/// assert!(!store.execute(&request).await?.is_admitted());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct MemoryStore<C = MonotonicClock> {
    clock: C,
    prefix: String,
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    max_key_len: usize,
}

struct Shard {
    entries: HashMap<String, Entry>,
    capacity: usize,
    /// Sweep idle entries when the table reaches this length.
    sweep_at: usize,
}

struct Entry {
    state: RuleState,
    expires_at: Nanos,
}

impl<C> fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("prefix", &self.prefix)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl MemoryStore<MonotonicClock> {
    /// A store holding at most `config.max_keys` keys under `prefix`, on the monotonic
    /// clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a bound of zero or a prefix with a brace in it (a
    /// brace would change the Cluster hash tag; the memory store refuses what Redis
    /// would).
    pub fn new(config: KeyedConfig, prefix: &str) -> Result<Self, StoreError> {
        MemoryStore::with_clock(config, prefix, MonotonicClock::new())
    }
}

impl<C: Clock> MemoryStore<C> {
    /// [`new`](MemoryStore::new) on `clock`.
    ///
    /// # Errors
    ///
    /// As [`new`](MemoryStore::new).
    pub fn with_clock(config: KeyedConfig, prefix: &str, clock: C) -> Result<Self, StoreError> {
        validate_prefix(prefix)?;
        let shards = config.shard_count()?;
        let shards = (0..shards)
            .map(|i| {
                let capacity = shard_capacity(config.max_keys, shards, i);
                Mutex::new(Shard {
                    entries: HashMap::new(),
                    capacity,
                    sweep_at: 64,
                })
            })
            .collect();
        Ok(MemoryStore {
            clock,
            prefix: prefix.to_owned(),
            shards,
            hasher: RandomState::new(),
            max_key_len: DEFAULT_MAX_KEY_LEN,
        })
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Keys held now, idle ones not yet swept included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).entries.len())
            .sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn now(&self, request: &Request<'_>) -> Nanos {
        match request.at {
            Some(at) => Nanos::new(duration_to_nanos(at)),
            None => Nanos::new(
                duration_to_nanos(self.clock.unix_origin())
                    .saturating_add(self.clock.now().as_u64()),
            ),
        }
    }

    /// Decides `request` synchronously: the whole work of
    /// [`execute`](Store::execute), which never waits.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute).
    pub fn execute_now(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        let keys = request
            .checks
            .iter()
            .map(|c| {
                let key = storage_key(&self.prefix, request.tag, c.key);
                if key.len() > self.max_key_len {
                    Err(StoreError::KeyTooLong {
                        len: key.len(),
                        max: self.max_key_len,
                    })
                } else {
                    Ok(key)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let now = self.now(request);
        let step = request.op.step(request.checks.len());
        let index = (self.hasher.hash_one(request.tag) as usize) % self.shards.len();
        let mut shard = self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let shard = &mut *shard;

        let mut states = Vec::with_capacity(keys.len());
        let mut expired = Vec::new();
        let mut verdicts = Vec::with_capacity(keys.len());
        for (check, key) in request.checks.iter().zip(&keys) {
            let entry = shard.entries.get(key);
            // Forgotten, as Redis forgets a key by its TTL: removed on the next commit.
            if entry.is_some_and(|e| e.expires_at <= now) {
                expired.push(key.clone());
            }
            let stored = entry
                .filter(|e| e.expires_at > now)
                .map(|e| e.state.clone());
            // A fresh key that nothing changes is not written: it is created by the
            // first request that changes it, at that request's time.
            let before = stored.unwrap_or_else(|| check.rule.initial_state(now));
            let mut state = before.clone();
            let verdict = check
                .rule
                .apply(&mut state, now, step)
                .ok_or_else(|| StoreError::KeyConflict { key: key.clone() })?;
            verdicts.push(verdict);
            states.push((before, state));
        }
        // One rule writes what it decided (a denial that counts, as a sliding log may);
        // several write only if all admit.
        let commit = !matches!(step, super::rule::Step::Peek(_))
            && (keys.len() == 1 || verdicts.iter().all(Verdict::admits));
        if commit {
            for key in &expired {
                shard.entries.remove(key);
            }
            let writes: Vec<(String, RuleState, Nanos)> = request
                .checks
                .iter()
                .zip(keys)
                .zip(states)
                .filter(|(_, (before, state))| before != state)
                .map(|((check, key), (_, state))| {
                    let expires_at = check.rule.expires_at(&state);
                    (key, state, expires_at)
                })
                .collect();
            let new_keys = writes
                .iter()
                .filter(|(key, _, expires_at)| {
                    *expires_at > now && !shard.entries.contains_key(key)
                })
                .count();
            if new_keys > 0 && shard.entries.len() + new_keys > shard.capacity {
                shard.sweep(now);
                if shard.entries.len() + new_keys > shard.capacity {
                    return Ok(shard.full(request, now));
                }
            }
            for (key, state, expires_at) in writes {
                if expires_at > now {
                    shard.entries.insert(key, Entry { state, expires_at });
                } else {
                    shard.entries.remove(&key);
                }
            }
            if shard.entries.len() >= shard.sweep_at {
                shard.sweep(now);
                shard.sweep_at = (shard.entries.len() * 2).max(64);
            }
        }
        request.combine(verdicts)
    }
}

impl Shard {
    fn sweep(&mut self, now: Nanos) {
        self.entries.retain(|_, e| e.expires_at > now);
    }

    /// The denial for a request that needs a new key in a full shard.
    fn full(&self, request: &Request<'_>, now: Nanos) -> Outcome {
        let first_free = self
            .entries
            .values()
            .map(|e| e.expires_at)
            .min()
            .unwrap_or(now);
        let capacity = request
            .checks
            .iter()
            .map(|c| c.rule.capacity())
            .min()
            .unwrap_or(0);
        let wait = first_free.saturating_since(now);
        let denied = Denied::from(Limited::new(wait, capacity, 0, wait));
        match request.op {
            super::Op::Reserve { .. } => Outcome::Reservation(Err(denied)),
            _ => Outcome::Decision(Err(denied)),
        }
    }
}

#[async_trait]
impl<C: Clock> Store for MemoryStore<C> {
    async fn execute(&self, request: &Request<'_>) -> Result<Outcome, StoreError> {
        self.execute_now(request)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Outcome, StoreError>> {
        Some(self.execute_now(request))
    }
}
