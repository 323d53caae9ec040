//! A store in this process's memory: the reference the Redis store is tested against,
//! the local fallback when Redis is down, and a way to run store-based code without
//! Redis.

use std::fmt;
use std::hash::{BuildHasher, DefaultHasher, Hash, Hasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use hashbrown::HashTable;

use super::request::{Check, Outcome, Request};
use super::rule::{RuleState, Step, Verdict};
use super::{storage_key, validate_prefix, Store, StoreError, DEFAULT_MAX_KEY_LEN};
use crate::decision::{Denied, Limited};
use crate::keyed::config::shard_capacity;
use crate::time::{Clock, MonotonicClock, Nanos};
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
    shards: Box<[PaddedShard]>,
    hasher: RandomState,
    max_key_len: usize,
}

/// A shard under its lock, on cache lines of its own so that threads working on
/// neighbouring shards do not slow each other down.
#[repr(align(128))]
struct PaddedShard(Mutex<Shard>);

impl PaddedShard {
    #[inline]
    fn lock(&self) -> MutexGuard<'_, Shard> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Shard {
    entries: HashTable<Entry>,
    capacity: usize,
    /// Sweep idle entries when the table reaches this length.
    sweep_at: usize,
}

struct Entry {
    /// The storage key less the store's prefix and `:{`: `tag}` or `tag}:key`. The
    /// prefix is the same for every key of the store.
    name: Spelled,
    /// [`Name::hash`] of `name`, kept so that the table grows without hashing again.
    hash: u64,
    state: RuleState,
    expires_at: Nanos,
}

/// The longest name held in its entry rather than on the heap: an IPv6 address as
/// a tag does not fit, an IPv4 address with a short key does.
const INLINE: usize = 30;

/// An entry's name: in the entry itself when short, so that a new key allocates
/// nothing and a lookup follows no pointer.
enum Spelled {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Spelled {
    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Spelled::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Spelled::Heap(bytes) => bytes,
        }
    }
}

/// A check's storage key less the store's prefix and `:{`, in pieces that the text
/// alone decides, so that equal storage keys are equal names whatever tag and key
/// made them: `head` (the hash tag, up to the first `}`), `}`, then `:` if `colon`,
/// then `rest`. For a tag without `}`, the head is the tag and the rest is the key.
#[derive(Clone, Copy)]
struct Name<'a> {
    head: &'a str,
    colon: bool,
    rest: &'a str,
}

impl<'a> Name<'a> {
    /// The name of `key` under `tag`, for a tag without `}`.
    #[inline]
    fn new(tag: &'a str, key: &'a str) -> Name<'a> {
        Name {
            head: tag,
            colon: !key.is_empty(),
            rest: key,
        }
    }

    /// The name of a storage key less its prefix and `:{`, whatever its tag holds.
    fn parse(name: &'a str) -> Name<'a> {
        let Some((head, after)) = name.split_once('}') else {
            return Name::new(name, "");
        };
        match after.strip_prefix(':') {
            Some(rest) => Name {
                head,
                colon: true,
                rest,
            },
            None => Name {
                head,
                colon: false,
                rest: after,
            },
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.head.len() + 1 + usize::from(self.colon) + self.rest.len()
    }

    /// Whether `name` (an [`Entry::name`]) spells this name.
    #[inline]
    fn matches(&self, name: &Spelled) -> bool {
        let name = name.as_bytes();
        if name.len() != self.len() {
            return false;
        }
        let (head, after) = name.split_at(self.head.len());
        let (brace, rest) = after.split_at(1 + usize::from(self.colon));
        same(head, self.head.as_bytes())
            && brace[0] == b'}'
            && (!self.colon || brace[1] == b':')
            && same(rest, self.rest.as_bytes())
    }

    /// The hash of the name, from its head's: a name that is its head alone (a
    /// check whose key is empty, the common case) has the head's hash.
    #[inline]
    fn hash(&self, head: &Hashed) -> u64 {
        if !self.colon && self.rest.is_empty() {
            return head.hash;
        }
        let mut hasher = head.hasher.clone();
        hasher.write_u8(u8::from(self.colon));
        self.rest.hash(&mut hasher);
        hasher.finish()
    }

    fn spell(self) -> Spelled {
        let pieces = [
            self.head.as_bytes(),
            if self.colon { b"}:" } else { b"}" },
            self.rest.as_bytes(),
        ];
        let len = self.len();
        match u8::try_from(len) {
            Ok(short) if len <= INLINE => {
                let mut bytes = [0; INLINE];
                let mut at = 0;
                for piece in pieces {
                    bytes[at..at + piece.len()].copy_from_slice(piece);
                    at += piece.len();
                }
                Spelled::Inline { len: short, bytes }
            }
            _ => Spelled::Heap(pieces.concat().into_boxed_slice()),
        }
    }
}

/// A hash tag hashed: the hash, and the hasher that computed it.
struct Hashed {
    hasher: DefaultHasher,
    hash: u64,
}

/// `a == b` for slices of equal length, without calling `memcmp` for empty ones: an
/// empty key's pointer may be dangling, and glibc's AVX-512 `memcmp` then takes a
/// masked load from an unmapped page, whose fault suppression costs about 60 ns.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.is_empty() || a == b
}

/// `tag}` or `tag}:key`: the storage key less the prefix and `:{`, built only for a
/// tag holding a `}`.
fn spelled(tag: &str, key: &str) -> String {
    let mut name = String::with_capacity(tag.len() + key.len() + 2);
    name.push_str(tag);
    name.push('}');
    if !key.is_empty() {
        name.push(':');
        name.push_str(key);
    }
    name
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
                PaddedShard(Mutex::new(Shard {
                    entries: HashTable::new(),
                    capacity,
                    sweep_at: 64,
                }))
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
        self.shards.iter().map(|s| s.lock().entries.len()).sum()
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
        for check in request.checks {
            // The length of `storage_key(prefix, tag, key)`, without building it.
            let len = self.prefix.len() + 2 + Name::new(request.tag, check.key).len();
            if len > self.max_key_len {
                return Err(StoreError::KeyTooLong {
                    len,
                    max: self.max_key_len,
                });
            }
        }
        let now = self.now(request);
        let step = request.op.step(request.checks.len());
        match request.checks {
            [check] => self.execute_one(request, check, now, step),
            _ => self.execute_many(request, now, step),
        }
    }

    /// The hash of `head`, the hash tag of every key of a request, the hasher that
    /// computed it (to hash the keys on from there), and the shard the tag picks.
    #[inline]
    fn shard(&self, head: &str) -> (Hashed, &PaddedShard) {
        let mut hasher = self.hasher.build_hasher();
        head.hash(&mut hasher);
        let hash = hasher.clone().finish();
        // hashbrown indexes buckets with the low bits and tags them with the top seven,
        // so the shard comes from bits in between (the count is a power of two).
        let index = (hash >> 32) as usize & (self.shards.len() - 1);
        (Hashed { hasher, hash }, &self.shards[index])
    }

    fn conflict(&self, request: &Request<'_>, check: &Check<'_>) -> StoreError {
        StoreError::KeyConflict {
            key: storage_key(&self.prefix, request.tag, check.key),
        }
    }

    /// A request of one check: the common case, without the collections of
    /// [`execute_many`](Self::execute_many), and with one lookup in the table.
    #[inline]
    fn execute_one(
        &self,
        request: &Request<'_>,
        check: &Check<'_>,
        now: Nanos,
        step: Step,
    ) -> Result<Outcome, StoreError> {
        let spelled_out;
        let name = if request.tag.contains('}') {
            spelled_out = spelled(request.tag, check.key);
            Name::parse(&spelled_out)
        } else {
            Name::new(request.tag, check.key)
        };
        let (head, shard) = self.shard(name.head);
        let hash = name.hash(&head);
        let mut shard = shard.lock();
        let shard = &mut *shard;
        let rule = check.rule;
        let verdict = match shard.entries.find_entry(hash, |e| name.matches(&e.name)) {
            Ok(mut found) if found.get().expires_at > now => {
                let entry = found.get_mut();
                if let Step::Peek(_) = step {
                    // A peek changes no state.
                    let verdict = rule.apply(&mut entry.state, now, step);
                    let verdict = verdict.ok_or_else(|| self.conflict(request, check))?;
                    return request.combine([verdict]);
                }
                let before = entry.state.clone();
                let verdict = rule.apply(&mut entry.state, now, step);
                let verdict = verdict.ok_or_else(|| self.conflict(request, check))?;
                // An unchanged state is not written: it keeps its expiry.
                if entry.state != before {
                    let expires_at = rule.expires_at(&entry.state);
                    if expires_at > now {
                        entry.expires_at = expires_at;
                    } else {
                        found.remove();
                    }
                }
                verdict
            }
            found => {
                // Absent, or forgotten as Redis forgets a key by its TTL.
                let before = rule.initial_state(now);
                let mut state = before.clone();
                let verdict = rule.apply(&mut state, now, step);
                let verdict = verdict.ok_or_else(|| self.conflict(request, check))?;
                if let Step::Peek(_) = step {
                    return request.combine([verdict]);
                }
                // A fresh key that nothing changes is not written: it is created by the
                // first request that changes it, at that request's time.
                let expires_at = if state == before {
                    Nanos::ZERO
                } else {
                    rule.expires_at(&state)
                };
                match found {
                    Ok(mut forgotten) if expires_at > now => {
                        let entry = forgotten.get_mut();
                        entry.state = state;
                        entry.expires_at = expires_at;
                    }
                    Ok(forgotten) => {
                        forgotten.remove();
                    }
                    Err(_) if expires_at > now => {
                        if !shard.make_room(1, now) {
                            return Ok(shard.full(request, now));
                        }
                        let entry = Entry {
                            name: name.spell(),
                            hash,
                            state,
                            expires_at,
                        };
                        shard.entries.insert_unique(hash, entry, |e| e.hash);
                    }
                    Err(_) => {}
                }
                verdict
            }
        };
        shard.committed(now);
        request.combine([verdict])
    }

    /// A request of several checks, each on its own key in one shard: all-or-nothing.
    fn execute_many(
        &self,
        request: &Request<'_>,
        now: Nanos,
        step: Step,
    ) -> Result<Outcome, StoreError> {
        let tag = request.tag;
        let spelled_out: Vec<String> = if tag.contains('}') {
            request.checks.iter().map(|c| spelled(tag, c.key)).collect()
        } else {
            Vec::new()
        };
        let names: Vec<Name<'_>> = if spelled_out.is_empty() {
            request
                .checks
                .iter()
                .map(|c| Name::new(tag, c.key))
                .collect()
        } else {
            spelled_out.iter().map(|n| Name::parse(n)).collect()
        };
        // Every name has the same head: the tag up to its first `}`.
        let head = names.first().map_or(tag, |n| n.head);
        let (head, shard) = self.shard(head);
        let hashes: Vec<u64> = names.iter().map(|n| n.hash(&head)).collect();
        let mut shard = shard.lock();
        let shard = &mut *shard;

        let mut states = Vec::with_capacity(names.len());
        let mut expired = Vec::new();
        let mut verdicts = Vec::with_capacity(names.len());
        for (i, check) in request.checks.iter().enumerate() {
            let entry = shard.find(names[i], hashes[i]);
            // Forgotten, as Redis forgets a key by its TTL: removed on the next commit.
            if entry.is_some_and(|e| e.expires_at <= now) {
                expired.push(i);
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
                .ok_or_else(|| self.conflict(request, check))?;
            verdicts.push(verdict);
            states.push((before, state));
        }
        // Several rules write only if all admit.
        let commit = !matches!(step, Step::Peek(_)) && verdicts.iter().all(Verdict::admits);
        if commit {
            for &i in &expired {
                if let Ok(entry) = shard
                    .entries
                    .find_entry(hashes[i], |e| names[i].matches(&e.name))
                {
                    entry.remove();
                }
            }
            let writes: Vec<(usize, RuleState, Nanos)> = states
                .into_iter()
                .enumerate()
                .filter(|(_, (before, state))| before != state)
                .map(|(i, (_, state))| {
                    let expires_at = request.checks[i].rule.expires_at(&state);
                    (i, state, expires_at)
                })
                .collect();
            let new_keys = writes
                .iter()
                .filter(|&&(i, _, expires_at)| {
                    expires_at > now && shard.find(names[i], hashes[i]).is_none()
                })
                .count();
            if new_keys > 0 && !shard.make_room(new_keys, now) {
                return Ok(shard.full(request, now));
            }
            for (i, state, expires_at) in writes {
                let (name, hash) = (names[i], hashes[i]);
                match shard.entries.find_entry(hash, |e| name.matches(&e.name)) {
                    Ok(mut held) if expires_at > now => {
                        let entry = held.get_mut();
                        entry.state = state;
                        entry.expires_at = expires_at;
                    }
                    Ok(held) => {
                        held.remove();
                    }
                    Err(_) if expires_at > now => {
                        let entry = Entry {
                            name: name.spell(),
                            hash,
                            state,
                            expires_at,
                        };
                        shard.entries.insert_unique(hash, entry, |e| e.hash);
                    }
                    Err(_) => {}
                }
            }
            shard.committed(now);
        }
        request.combine(verdicts)
    }
}

impl Shard {
    fn find(&self, name: Name<'_>, hash: u64) -> Option<&Entry> {
        self.entries.find(hash, |e| name.matches(&e.name))
    }

    /// Whether `new_keys` more keys fit, sweeping idle ones if they do not.
    fn make_room(&mut self, new_keys: usize, now: Nanos) -> bool {
        if self.entries.len() + new_keys > self.capacity {
            self.sweep(now);
        }
        self.entries.len() + new_keys <= self.capacity
    }

    /// Sweeps after a commit once the table has doubled since the last sweep.
    fn committed(&mut self, now: Nanos) {
        if self.entries.len() >= self.sweep_at {
            self.sweep(now);
            self.sweep_at = (self.entries.len() * 2).max(64);
        }
    }

    fn sweep(&mut self, now: Nanos) {
        self.entries.retain(|e| e.expires_at > now);
    }

    /// The denial for a request that needs a new key in a full shard.
    fn full(&self, request: &Request<'_>, now: Nanos) -> Outcome {
        let first_free = self
            .entries
            .iter()
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Rule;
    use super::*;
    use crate::algorithm::{FixedWindow, Gcra};
    use crate::store::Op;
    use crate::time::ManualClock;
    use crate::Quota;

    const SECOND: Duration = Duration::from_secs(1);

    fn store(max_keys: usize) -> MemoryStore<ManualClock> {
        MemoryStore::with_clock(KeyedConfig::new(max_keys), "p", ManualClock::new()).unwrap()
    }

    fn gcra(per_second: u64, burst: u64) -> Rule {
        Rule::from(Gcra::new(
            Quota::per_second(per_second).unwrap().burst(burst).unwrap(),
        ))
    }

    fn acquire(store: &MemoryStore<ManualClock>, tag: &str, checks: &[Check<'_>], at: u64) -> bool {
        let request = Request::new(tag, checks, Op::Acquire(1)).at(SECOND * at as u32);
        store.execute_now(&request).unwrap().is_admitted()
    }

    #[test]
    fn names_spell_the_storage_key() {
        for (tag, key) in [
            ("t", ""),
            ("t", "k"),
            ("", ""),
            ("x}:y", ""),
            ("x", "y}"),
            ("a}b", "c"),
        ] {
            let spelled_out = spelled(tag, key);
            let full = storage_key("p", tag, key);
            assert_eq!(format!("p:{{{spelled_out}"), full);
            let name = Name::parse(&spelled_out);
            assert_eq!(name.len(), spelled_out.len());
            assert!(name.matches(&name.spell()));
            assert_eq!(name.spell().as_bytes(), spelled_out.as_bytes());
            if !tag.contains('}') {
                let fast = Name::new(tag, key);
                assert!(fast.matches(&name.spell()));
                assert_eq!(
                    (fast.head, fast.colon, fast.rest),
                    (name.head, name.colon, name.rest)
                );
            }
        }
        let spelled_as = |name: &str| Name::parse(name).spell();
        assert!(!Name::new("t", "k").matches(&spelled_as("t}k:")));
        assert!(!Name::new("t", "").matches(&spelled_as("t}:")));
        assert!(!Name::new("t", "k").matches(&spelled_as("t}:j")));
    }

    #[test]
    fn equal_storage_keys_share_one_state_whatever_splits_them() {
        // `p:{x}:y}` is both tag `x}:y` with no key and tag `x` with key `y}`, as in
        // Redis.
        let store = store(100);
        let rule = gcra(1, 1);
        assert!(acquire(&store, "x}:y", &[Check::new("", &rule)], 0));
        assert!(!acquire(&store, "x", &[Check::new("y}", &rule)], 0));
        let two = [Check::new("y}", &rule), Check::new("z", &rule)];
        assert!(!acquire(&store, "x", &two, 0));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn too_long_is_the_storage_key_length() {
        let store = store(100);
        let rule = gcra(1, 1);
        let max = DEFAULT_MAX_KEY_LEN;
        // `p:{` + tag + `}:` + key
        let tag = "t".repeat(max - 6);
        let fits = [Check::new("k", &rule)];
        assert!(acquire(&store, &tag, &fits, 0));
        let long = [Check::new("kk", &rule)];
        let request = Request::new(&tag, &long, Op::Acquire(1));
        let error = store.execute_now(&request).unwrap_err();
        let len = storage_key("p", &tag, "kk").len();
        assert!(matches!(error, StoreError::KeyTooLong { len: l, max: m } if l == len && m == max));
    }

    #[test]
    fn forgotten_keys_start_afresh_in_place() {
        let store = store(100);
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        for at in 0..200 {
            assert!(acquire(&store, &format!("t{}", at % 10), &one, at));
        }
        assert!(store.len() <= 10);
        assert!(!acquire(&store, "t9", &one, 199));
    }

    #[test]
    fn a_full_shard_denies_a_new_key_and_keeps_the_others() {
        let store = store(1);
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        assert!(acquire(&store, "a", &one, 0));
        let request = Request::new("b", &one, Op::Acquire(1)).at(Duration::ZERO);
        let Outcome::Decision(Err(denied)) = store.execute_now(&request).unwrap() else {
            panic!("admitted into a full store");
        };
        assert_eq!(denied.retry_after(), Some(SECOND));
        assert!(acquire(&store, "b", &one, 1), "a is idle after a second");
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn peeks_and_untouched_keys_store_nothing() {
        let store = store(100);
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        let peek = Request::new("t", &one, Op::Peek(1)).at(Duration::ZERO);
        assert!(store.execute_now(&peek).unwrap().is_admitted());
        let zero = Request::new("t", &one, Op::Acquire(0)).at(Duration::ZERO);
        assert!(store.execute_now(&zero).unwrap().is_admitted());
        assert!(store.is_empty());
    }

    #[test]
    fn a_key_holding_another_kind_of_rule_is_a_conflict() {
        let store = store(100);
        let bucket = gcra(1, 1);
        let window = Rule::from(FixedWindow::new(1, SECOND).unwrap());
        assert!(acquire(&store, "t", &[Check::new("", &bucket)], 0));
        let checks = [Check::new("", &window)];
        let request = Request::new("t", &checks, Op::Acquire(1)).at(Duration::ZERO);
        let error = store.execute_now(&request).unwrap_err();
        assert!(matches!(error, StoreError::KeyConflict { key } if key == "p:{t}"));
    }
}
