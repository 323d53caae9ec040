//! A store in this process's memory: the reference the Redis store is tested against,
//! the local fallback when Redis is down, and a way to run store-based code without
//! Redis.

use std::fmt;
use std::hash::{BuildHasher, DefaultHasher, Hash, Hasher, RandomState};

use async_trait::async_trait;

use super::request::{Answers, Check, Reply, Request};
use super::rule::{GivesBack, RuleOutcome, RuleState, Step};
use super::{DEFAULT_MAX_KEY_LEN, Store, StoreError, storage_key, validate_prefix};
use crate::algorithm::Rule;
use crate::decision::{Denied, Limited};
use crate::sync::Mutex;
use crate::table::{Entries, KeyedConfig, Rehash, Room, Shard, Table, is_idle};
use crate::time::{Clock, MonotonicClock, Nanos};
use crate::units::duration_to_nanos;

/// A [`Store`] in this process's memory: the same decisions as the Redis store, for
/// one process.
///
/// Keys are forgotten once their state is idle (a fresh state would decide the same),
/// as Redis forgets them by their TTL. At most `max_keys` keys are held, in the same
/// table as [`KeyedLimiter`](crate::KeyedLimiter)'s. A request's keys share its hash
/// tag, and all the keys of one tag live in one shard (decided under one lock, as Redis
/// Cluster decides a slot's keys on one node); so the shards share the bound rather
/// than split it, and one tag may hold all `max_keys` keys. (Threads inserting into
/// different shards at the same instant may each add their key: the table then holds
/// at most one key more per such thread.) Once the bound is full of keys that are not
/// idle, in this shard or any other, [`KeyedConfig::when_full`] decides what happens to
/// a request for a new key (by default the key of its shard whose forgetting gives back
/// the fewest permits makes room; see
/// [`WhenFull::EvictNearestIdle`](crate::WhenFull::EvictNearestIdle)).
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
    table: Table<Stored>,
    max_key_len: usize,
}

/// The memory store's entries carry their own idle time and what forgetting them
/// gives back, since each was written by the rule of its request.
struct Stored;

impl Entries for Stored {
    type Entry = Entry;

    #[inline]
    fn idle_at(&self, entry: &Entry) -> Nanos {
        entry.expires_at
    }

    fn booked_until(&self, entry: &Entry, _: Nanos) -> Nanos {
        entry.booked_until
    }

    /// A token bucket's debt now; for other rules, as of the entry's last write: a
    /// state only recovers with time, so this is never less than what forgetting it
    /// gives back now, and keys spent no more than others cannot outweigh it.
    #[inline]
    fn gives_back(&self, entry: &Entry, idle_at: Nanos, now: Nanos) -> u64 {
        entry.gives_back.at(idle_at, now)
    }

    /// The time of the last write: idle times of different rules do not order uses.
    #[inline]
    fn used_at(&self, entry: &Entry, _: Nanos) -> Nanos {
        entry.written_at
    }
}

impl Rehash for Stored {
    fn hash(&self, _: &RandomState, entry: &Entry) -> u64 {
        entry.hash
    }
}

struct Entry {
    /// The storage key less the store's prefix and `:{`: `tag}` or `tag}:key`. The
    /// prefix is the same for every key of the store.
    name: Spelled,
    /// [`Name::hash`] of `name`, kept so that the table grows without hashing again.
    hash: u64,
    state: RuleState,
    expires_at: Nanos,
    /// When the latest reservation that waits is used: until then the entry holds
    /// capacity booked ahead.
    booked_until: Nanos,
    /// What forgetting the state gives back ([`Rule::gives_back`]), recorded when it
    /// was written: a full shard evicts the key that gives back the least.
    gives_back: GivesBack,
    /// When the state was last written.
    written_at: Nanos,
}

impl Entry {
    /// Records what `rule`'s `verdict` at `now` left in the entry: capacity it may
    /// have booked ahead, and what forgetting the state now gives back.
    #[inline]
    fn written(&mut self, rule: &Rule, verdict: &RuleOutcome, now: Nanos) {
        if let RuleOutcome::Reservation(Ok(reservation)) = verdict {
            self.booked_until = self.booked_until.max(now + reservation.wait());
        }
        self.gives_back = rule.gives_back(&self.state, now);
        self.written_at = now;
    }
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
            .field("max_keys", &self.table.max_keys())
            .field("shards", &self.table.shards())
            .finish_non_exhaustive()
    }
}

impl MemoryStore<MonotonicClock> {
    /// A store holding at most `config.max_keys` keys under `prefix`, on the monotonic
    /// clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] for a configuration [`KeyedConfig::validate`] rejects,
    /// or a prefix with a brace in it (a brace would change the Cluster hash tag; the
    /// memory store refuses what Redis would).
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
        Ok(MemoryStore {
            clock,
            prefix: prefix.to_owned(),
            table: Table::with_shared_bound(&config, || Stored)?,
            max_key_len: DEFAULT_MAX_KEY_LEN,
        })
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Keys held now, idle ones not yet swept included. Shards are counted one after
    /// another, so under concurrent use this is approximate; it never exceeds
    /// [`max_keys`](MemoryStore::max_keys).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The most keys held at once, as configured.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::store::MemoryStore;
    /// use tollgate::KeyedConfig;
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(500), "api")?;
    /// assert_eq!(store.max_keys(), 500);
    /// # Ok::<(), tollgate::store::StoreError>(())
    /// ```
    pub fn max_keys(&self) -> usize {
        self.table.max_keys()
    }

    /// Forgets every idle key now, and returns how many. Shards also sweep by
    /// themselves as keys arrive; this returns memory sooner.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::store::{Check, MemoryStore, Op, Request, Rule};
    /// use tollgate::time::ManualClock;
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let store = MemoryStore::with_clock(KeyedConfig::new(100), "api", clock.clone())?;
    /// let rule = Rule::from(Gcra::new(Quota::per_second(1)?));
    /// let checks = [Check::new("", &rule)];
    /// store.execute_now(&Request::new("user-1", &checks, Op::Acquire(1)))?;
    /// assert_eq!(store.len(), 1);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(store.sweep(), 1, "back to a fresh state");
    /// assert!(store.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep(&self) -> usize {
        self.table.sweep(self.unix_now())
    }

    fn now(&self, request: &Request<'_>) -> Nanos {
        match request.at {
            Some(at) => Nanos::new(duration_to_nanos(at)),
            None => self.unix_now(),
        }
    }

    /// Unix time on the store's clock.
    fn unix_now(&self) -> Nanos {
        Nanos::new(
            duration_to_nanos(self.clock.unix_origin()).saturating_add(self.clock.now().as_u64()),
        )
    }

    /// Decides `request` synchronously: the whole work of
    /// [`execute`](Store::execute), which never waits.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute).
    pub fn execute_now(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        if let Some(known) = request.precheck()? {
            return Ok(known);
        }
        self.check_key_lengths(request)?;
        let now = self.now(request);
        let step = request.op.step(request.checks.len());
        match request.checks {
            [check] => self.execute_one(request, check, now, check.step(step)),
            _ => self.execute_combined(request, now, step),
        }
    }

    /// A request of several checks, combined: out of line, so that the common
    /// request of one check is as small as before there were answers per check.
    #[inline(never)]
    fn execute_combined(
        &self,
        request: &Request<'_>,
        now: Nanos,
        step: Step,
    ) -> Result<Reply, StoreError> {
        match self.execute_many(request, now, step)? {
            Many::Decided(verdicts) => request.combine(verdicts),
            Many::Full(denied) => Ok(denied),
        }
    }

    /// Decides `request` synchronously, as [`execute_now`](Self::execute_now) does,
    /// and tells each check's own answer: the whole work of
    /// [`execute_each`](Store::execute_each), which never waits. See [`Answers`] for
    /// what each check's answer means.
    ///
    /// # Errors
    ///
    /// As [`execute`](Store::execute).
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::algorithm::Gcra;
    /// use tollgate::store::{Check, MemoryStore, Op, Request, Rule};
    /// use tollgate::{KeyedConfig, Quota};
    ///
    /// let store = MemoryStore::new(KeyedConfig::new(100), "api")?;
    /// let (tight, loose) = (
    ///     Rule::from(Gcra::new(Quota::per_second(1)?)),
    ///     Rule::from(Gcra::new(Quota::per_second(5)?)),
    /// );
    /// let checks = [Check::new("tight", &tight), Check::new("loose", &loose)];
    /// let request = Request::new("user-1", &checks, Op::Acquire(1));
    /// assert!(store.execute_each_now(&request)?.reply().is_admitted());
    /// let answers = store.execute_each_now(&request)?;
    /// assert!(!answers.reply().is_admitted(), "tight is spent");
    /// let each = answers.checks().unwrap();
    /// assert!(!each[0].is_admitted());
    /// assert_eq!(each[1].into_decision()?.unwrap().remaining(), 3, "as if taken");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn execute_each_now(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        let checks = request.checks.len();
        if let Some(known) = request.precheck()? {
            if checks == 1 {
                return Ok(Answers::with_checks(known, vec![known]));
            }
            // Each check's answer from a peek, which writes nothing.
            let peek = request.as_peek();
            self.check_key_lengths(&peek)?;
            let now = self.now(&peek);
            return match self.execute_many(&peek, now, peek.op.step(checks))? {
                Many::Decided(verdicts) => request.answers_after_precheck(known, verdicts),
                Many::Full(denied) => Ok(Answers::with_checks(known, vec![denied; checks])),
            };
        }
        self.check_key_lengths(request)?;
        let now = self.now(request);
        let step = request.op.step(checks);
        match request.checks {
            [check] => {
                let reply = self.execute_one(request, check, now, check.step(step))?;
                Ok(Answers::with_checks(reply, vec![reply]))
            }
            _ => match self.execute_many(request, now, step)? {
                Many::Decided(verdicts) => request.answers(verdicts),
                Many::Full(denied) => Ok(Answers::with_checks(denied, vec![denied; checks])),
            },
        }
    }

    /// Refuses a check whose storage key is too long.
    #[inline]
    fn check_key_lengths(&self, request: &Request<'_>) -> Result<(), StoreError> {
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
        Ok(())
    }

    /// The hash of `head`, the hash tag of every key of a request, the hasher that
    /// computed it (to hash the keys on from there), and the shard the tag picks.
    #[inline]
    fn shard(&self, head: &str) -> (Hashed, &Mutex<Shard<Stored>>) {
        let mut hasher = self.table.hasher().build_hasher();
        head.hash(&mut hasher);
        let hash = hasher.clone().finish();
        (Hashed { hasher, hash }, self.table.shard(hash))
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
    ) -> Result<Reply, StoreError> {
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
        if let Some((_, entry)) = shard.find_mut(hash, |e| name.matches(&e.name)) {
            let peek = matches!(step, Step::Peek(_));
            if is_idle(entry.expires_at, now) {
                if peek {
                    // A peek at a forgotten key reads a fresh state and writes nothing:
                    // a request with an earlier clock reading still finds the entry.
                    let mut fresh = rule.initial_state(now);
                    let verdict = rule
                        .apply(&mut fresh, now, step)
                        .ok_or_else(|| self.conflict(request, check))?;
                    return request.answer(verdict);
                }
                // Forgotten, as Redis forgets a key by its TTL: afresh, in place.
                entry.state = rule.initial_state(now);
            }
            let applied = if peek {
                // A peek changes no state.
                rule.apply(&mut entry.state, now, step)
                    .map(|verdict| (verdict, None))
            } else {
                rule.apply_changed(&mut entry.state, now, step)
            };
            // Taken apart where it lands rather than through a closure: each copy of
            // the verdict is read back with wider loads than it was written with.
            let Some((verdict, changed_expiry)) = applied else {
                return Err(self.conflict(request, check));
            };
            // An unchanged state is not written: it keeps its expiry.
            if let Some(expires_at) = changed_expiry {
                entry.expires_at = expires_at;
                entry.written(rule, &verdict, now);
            }
            let expires_at = entry.expires_at;
            shard.note(expires_at);
            if !peek && is_idle(expires_at, now) {
                shard.remove(hash, |e| name.matches(&e.name));
            }
            return request.answer(verdict);
        }
        let now = shard.start(now);
        let mut state = rule.initial_state(now);
        let (verdict, expires_at) = rule
            .apply_changed(&mut state, now, step)
            .ok_or_else(|| self.conflict(request, check))?;
        // A fresh key that nothing changes is not written: it is created by the first
        // request that changes it, at that request's time.
        let expires_at = match expires_at {
            Some(expires_at) if !matches!(step, Step::Peek(_)) && !is_idle(expires_at, now) => {
                expires_at
            }
            _ => return request.answer(verdict),
        };
        let hasher = self.table.hasher();
        let mut room = shard.make_room(hasher, now, 1, hash, true, |_| false);
        // The bound is shared: idle keys held by other shards may make the room.
        if room != Room::Free && self.table.sweep_others(now) > 0 {
            room = shard.make_room(hasher, now, 1, hash, true, |_| false);
        }
        match room {
            Room::Free => {
                let mut entry = Entry {
                    name: name.spell(),
                    hash,
                    state,
                    expires_at,
                    booked_until: Nanos::ZERO,
                    gives_back: GivesBack::NOTHING,
                    written_at: now,
                };
                entry.written(rule, &verdict, now);
                shard.insert(hasher, hash, entry);
            }
            Room::Full(until) => return Ok(self.full(request, now, until)),
            Room::Overflow(until) => {
                let permits = request.permits_of(check);
                if let Err(until) = self.table.overflow(now, permits, until, true) {
                    return Ok(self.full(request, now, until));
                }
            }
        }
        request.answer(verdict)
    }

    /// A request of several checks, each on its own key in one shard: all-or-nothing.
    /// Each check's verdict, or the denial of a request that found no room.
    fn execute_many(
        &self,
        request: &Request<'_>,
        now: Nanos,
        step: Step,
    ) -> Result<Many, StoreError> {
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
        // One instant for every check, never before a key of the shard was evicted.
        let now = shard.start(now);
        let find = |shard: &Shard<Stored>, i: usize| {
            let name = names[i];
            shard.find(hashes[i], |e| name.matches(&e.name)).is_some()
        };

        let mut states = Vec::with_capacity(names.len());
        let mut expired = Vec::new();
        let mut verdicts = Vec::with_capacity(names.len());
        for (i, check) in request.checks.iter().enumerate() {
            let name = names[i];
            let entry = shard.find(hashes[i], |e| name.matches(&e.name));
            // Forgotten, as Redis forgets a key by its TTL: removed on the next commit.
            if entry.is_some_and(|e| is_idle(e.expires_at, now)) {
                expired.push(i);
            }
            let stored = entry
                .filter(|e| !is_idle(e.expires_at, now))
                .map(|e| e.state.clone());
            // A fresh key that nothing changes is not written: it is created by the
            // first request that changes it, at that request's time.
            let before = stored.unwrap_or_else(|| check.rule.initial_state(now));
            let mut state = before.clone();
            let verdict = check
                .rule
                .apply(&mut state, now, check.step(step))
                .ok_or_else(|| self.conflict(request, check))?;
            verdicts.push(verdict);
            states.push((before, state));
        }
        // Several rules write only if all admit.
        let commit =
            !matches!(step, Step::Peek(_)) && verdicts.iter().all(RuleOutcome::is_admitted);
        if commit {
            for &i in &expired {
                let name = names[i];
                shard.remove(hashes[i], |e| name.matches(&e.name));
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
                .filter(|&&(i, _, expires_at)| !is_idle(expires_at, now) && !find(shard, i))
                .count();
            // Under an overflow limit, new keys that find no room are not stored.
            let mut store_new = true;
            if new_keys > 0 {
                let hasher = self.table.hasher();
                let own = |e: &Entry| names.iter().any(|n| n.matches(&e.name));
                let mut room = shard.make_room(hasher, now, new_keys, hashes[0], true, own);
                // The bound is shared: idle keys held by other shards may make room.
                if room != Room::Free && self.table.sweep_others(now) > 0 {
                    room = shard.make_room(hasher, now, new_keys, hashes[0], true, own);
                }
                match room {
                    Room::Free => {}
                    Room::Full(until) => return Ok(Many::Full(self.full(request, now, until))),
                    Room::Overflow(until) => {
                        match self
                            .table
                            .overflow(now, request.most_permits(), until, true)
                        {
                            Ok(()) => store_new = false,
                            Err(until) => return Ok(Many::Full(self.full(request, now, until))),
                        }
                    }
                }
            }
            for (i, state, expires_at) in writes {
                let (name, hash, verdict) = (names[i], hashes[i], &verdicts[i]);
                let rule = request.checks[i].rule;
                if let Some((_, entry)) = shard.find_mut(hash, |e| name.matches(&e.name)) {
                    entry.state = state;
                    entry.expires_at = expires_at;
                    entry.written(rule, verdict, now);
                    shard.note(expires_at);
                    if is_idle(expires_at, now) {
                        shard.remove(hash, |e| name.matches(&e.name));
                    }
                } else if !is_idle(expires_at, now) && store_new {
                    let mut entry = Entry {
                        name: name.spell(),
                        hash,
                        state,
                        expires_at,
                        booked_until: Nanos::ZERO,
                        gives_back: GivesBack::NOTHING,
                        written_at: now,
                    };
                    entry.written(rule, verdict, now);
                    shard.insert(self.table.hasher(), hash, entry);
                }
            }
        }
        Ok(Many::Decided(verdicts))
    }

    /// The denial at `now` for a request that needs a new key in a full shard: there
    /// may be room from `until` on.
    fn full(&self, request: &Request<'_>, now: Nanos, until: Nanos) -> Reply {
        // Room may come from another shard's idle keys first (the bound is shared).
        let until = until.min(self.table.next_idle_of_others());
        let capacity = request
            .checks
            .iter()
            .map(|c| c.rule.capacity())
            .min()
            .unwrap_or(0);
        let wait = until.saturating_since(now);
        let denied = Denied::from(Limited::new(wait, capacity, 0, wait));
        match request.op {
            super::Op::Reserve { .. } => Reply::Reservation(Err(denied)),
            _ => Reply::Decision(Err(denied)),
        }
    }
}

/// What [`MemoryStore::execute_many`] decided.
enum Many {
    /// Each check's verdict, in order.
    Decided(Vec<RuleOutcome>),
    /// The request needs a new key that finds no room: this denial.
    Full(Reply),
}

#[async_trait]
impl<C: Clock> Store for MemoryStore<C> {
    async fn execute(&self, request: &Request<'_>) -> Result<Reply, StoreError> {
        self.execute_now(request)
    }

    async fn execute_each(&self, request: &Request<'_>) -> Result<Answers, StoreError> {
        self.execute_each_now(request)
    }

    fn try_execute_now(&self, request: &Request<'_>) -> Option<Result<Reply, StoreError>> {
        Some(self.execute_now(request))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Rule;
    use super::*;
    use crate::algorithm::{FixedWindow, Gcra};
    use crate::quota::Quota;
    use crate::store::Op;
    use crate::table::WhenFull;
    use crate::time::ManualClock;

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

    /// A request's keys share its tag, and a tag's keys share a shard (one lock per
    /// request): the bound is the whole table's, not a shard's share of it, or a tag
    /// of many keys lost live counts (found by tollgate-sim: a key over its limit
    /// admitted again within its window).
    #[test]
    fn one_tag_may_hold_the_whole_bound_and_no_count_is_lost() {
        let config = KeyedConfig::new(4_096).shards(64);
        let store = MemoryStore::with_clock(config, "p", ManualClock::new()).unwrap();
        let rule = Rule::from(FixedWindow::new(1, Duration::from_secs(60)).unwrap());
        let keys: Vec<String> = (0..4_096).map(|k| format!("user{k}")).collect();
        for round in 0..2 {
            for key in &keys {
                let admitted = acquire(&store, "domain", &[Check::new(key, &rule)], 0);
                assert_eq!(admitted, round == 0, "{key}, round {round}");
            }
        }
        assert_eq!(store.len(), 4_096);
    }

    /// Shards that may each hold the whole bound still hold no more than it together.
    #[test]
    fn the_bound_holds_across_tags() {
        let config = KeyedConfig::new(64).shards(8).when_full(WhenFull::Deny);
        let store = MemoryStore::with_clock(config, "p", ManualClock::new()).unwrap();
        let rule = Rule::from(FixedWindow::new(1, Duration::from_secs(60)).unwrap());
        for k in 0..64 {
            let tag = format!("tag{k}");
            assert!(acquire(&store, &tag, &[Check::new("", &rule)], 0), "{tag}");
        }
        assert_eq!(store.len(), 64);
        for k in 64..200 {
            let tag = format!("tag{k}");
            assert!(
                !acquire(&store, &tag, &[Check::new("", &rule)], 0),
                "{tag}: full"
            );
        }
        assert_eq!(store.len(), 64);
        // A minute on, every key is idle: whichever shard a new key lands in, the
        // idle keys of the others make room for it.
        for k in 1_000..1_064 {
            let tag = format!("tag{k}");
            assert!(acquire(&store, &tag, &[Check::new("", &rule)], 60), "{tag}");
        }
        assert_eq!(store.len(), 64);
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
    fn a_full_denying_shard_denies_a_new_key_and_keeps_the_others() {
        let config = KeyedConfig::new(1).when_full(WhenFull::Deny);
        let store = MemoryStore::with_clock(config, "p", ManualClock::new()).unwrap();
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        assert!(acquire(&store, "a", &one, 0));
        let request = Request::new("b", &one, Op::Acquire(1)).at(Duration::ZERO);
        let Reply::Decision(Err(denied)) = store.execute_now(&request).unwrap() else {
            panic!("admitted into a full store");
        };
        assert_eq!(denied.retry_after(), Some(SECOND));
        assert!(acquire(&store, "b", &one, 1), "a is idle after a second");
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_full_shard_evicts_the_key_nearest_to_idle_by_default() {
        let store = store(2);
        let rule = gcra(1, 10);
        let heavy = [Check::new("", &rule)];
        let request = Request::new("heavy", &heavy, Op::Acquire(10)).at(Duration::ZERO);
        assert!(store.execute_now(&request).unwrap().is_admitted());
        assert!(acquire(&store, "light", &heavy, 0));
        assert!(acquire(&store, "new", &heavy, 0), "light made room");
        assert_eq!(store.len(), 2);
        assert!(!acquire(&store, "heavy", &heavy, 0), "heavy kept its limit");
    }

    #[test]
    fn several_checks_never_evict_their_own_keys() {
        let store = MemoryStore::with_clock(KeyedConfig::new(2).shards(1), "p", ManualClock::new())
            .unwrap();
        let rule = gcra(1, 10);
        assert!(acquire(&store, "t", &[Check::new("a", &rule)], 0));
        let x = [Check::new("x", &rule)];
        let request = Request::new("t", &x, Op::Acquire(5)).at(Duration::ZERO);
        assert!(store.execute_now(&request).unwrap().is_admitted());
        let two = [Check::new("a", &rule), Check::new("b", &rule)];
        assert!(
            acquire(&store, "t", &two, 0),
            "x made room for b, though a was nearer to idle"
        );
        assert_eq!(store.len(), 2);
        let three = [
            Check::new("a", &rule),
            Check::new("b", &rule),
            Check::new("c", &rule),
        ];
        let request = Request::new("t", &three, Op::Acquire(1)).at(Duration::ZERO);
        assert!(
            !store.execute_now(&request).unwrap().is_admitted(),
            "three keys never fit in two"
        );
        let a = [Check::new("a", &rule)];
        let peek = Request::new("t", &a, Op::Peek(10)).at(Duration::ZERO);
        let Reply::Decision(Err(denied)) = store.execute_now(&peek).unwrap() else {
            panic!("a lost its state");
        };
        assert_eq!(denied.retry_after(), Some(SECOND * 2), "a took 2 of 10");
    }

    #[test]
    fn a_key_holding_a_reservation_is_not_evicted_before_it_is_used() {
        let store = store(1);
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        let reserve = |tag| {
            let op = Op::Reserve {
                n: 1,
                max_wait: SECOND * 10,
            };
            let request = Request::new(tag, &one, op).at(Duration::ZERO);
            match store.execute_now(&request).unwrap() {
                Reply::Reservation(r) => r,
                outcome => panic!("{outcome:?}"),
            }
        };
        assert!(reserve("a").unwrap().is_immediate());
        assert_eq!(reserve("a").unwrap().wait(), SECOND);
        let denied = reserve("b").unwrap_err();
        assert_eq!(denied.retry_after(), Some(SECOND), "until a's wait is over");
        assert!(acquire(&store, "b", &one, 1));
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_full_overflowing_shard_shares_one_limit_among_new_keys() {
        let quota = Quota::per_second(1).unwrap();
        let config = KeyedConfig::new(1).when_full(WhenFull::Overflow(quota));
        let store = MemoryStore::with_clock(config, "p", ManualClock::new()).unwrap();
        let rule = gcra(1, 1);
        let one = [Check::new("", &rule)];
        assert!(acquire(&store, "a", &one, 0));
        assert!(acquire(&store, "b", &one, 0), "through the overflow limit");
        assert!(!acquire(&store, "c", &one, 0), "spent");
        assert_eq!(store.len(), 1);
        assert!(!acquire(&store, "a", &one, 0), "a kept its state");
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

    fn window(limit: u64) -> Rule {
        Rule::from(FixedWindow::new(limit, SECOND).unwrap())
    }

    fn counting(limit: u64) -> Rule {
        Rule::from(
            FixedWindow::new(limit, SECOND)
                .unwrap()
                .counting_denied()
                .unwrap(),
        )
    }

    fn remaining(reply: Reply) -> Result<u64, Denied> {
        reply.into_decision().unwrap().map(|a| a.remaining())
    }

    #[test]
    fn each_check_takes_its_own_permits_and_zero_only_looks() {
        let store = store(100);
        let (a, b) = (window(10), window(10));
        let checks = [
            Check::new("a", &a).with_permits(3),
            Check::new("b", &b).with_permits(0),
        ];
        let request = Request::new("t", &checks, Op::Acquire(1)).at(Duration::ZERO);
        let answers = store.execute_each_now(&request).unwrap();
        assert_eq!(answers.reply(), reply_on_a_fresh_store(&request));
        let each = answers.checks().unwrap();
        assert_eq!(remaining(each[0]), Ok(7));
        assert_eq!(remaining(each[1]), Ok(10));
        let peek = |key: &'static str, rule| {
            let one = [Check::new(key, rule)];
            let request = Request::new("t", &one, Op::Peek(0)).at(Duration::ZERO);
            remaining(store.execute_now(&request).unwrap())
        };
        assert_eq!(peek("a", &a), Ok(7));
        assert_eq!(peek("b", &b), Ok(10), "a check of 0 takes nothing");
        // Refunded as acquired: each check gives back its own count.
        let refund = Request::new("t", &checks, Op::Refund(1)).at(Duration::ZERO);
        let answers = store.execute_each_now(&refund).unwrap();
        assert_eq!(
            answers.checks(),
            Some(&[Reply::Refunded, Reply::Refunded][..])
        );
        assert_eq!(peek("a", &a), Ok(10));
    }

    /// What `execute` answers `request` on a store that holds nothing.
    fn reply_on_a_fresh_store(request: &Request<'_>) -> Reply {
        store(100).execute_now(request).unwrap()
    }

    #[test]
    fn a_denied_request_answers_each_check_as_if_alone_and_takes_nothing() {
        let store = store(100);
        let (small, large) = (window(2), window(10));
        let checks = [
            Check::new("small", &small).with_permits(3),
            Check::new("large", &large).with_permits(4),
        ];
        let request = Request::new("t", &checks, Op::Acquire(1)).at(Duration::ZERO);
        let answers = store.execute_each_now(&request).unwrap();
        assert_eq!(answers.reply(), store.execute_now(&request).unwrap());
        assert!(
            answers
                .reply()
                .into_decision()
                .unwrap()
                .unwrap_err()
                .is_never()
        );
        let each = answers.checks().unwrap();
        assert!(each[0].into_decision().unwrap().unwrap_err().is_never());
        assert_eq!(remaining(each[1]), Ok(6));
        assert!(store.is_empty(), "the precheck's denial writes nothing");
        // Denied by a rule that is spent rather than too small.
        let spend = [Check::new("small", &small).with_permits(2)];
        let spend = Request::new("t", &spend, Op::Acquire(1)).at(Duration::ZERO);
        assert!(store.execute_now(&spend).unwrap().is_admitted());
        let checks = [Check::new("small", &small), Check::new("large", &large)];
        let request = Request::new("t", &checks, Op::Acquire(1)).at(Duration::ZERO);
        let answers = store.execute_each_now(&request).unwrap();
        assert_eq!(answers.reply(), store.execute_now(&request).unwrap());
        let each = answers.checks().unwrap();
        assert!(!each[0].is_admitted());
        assert_eq!(remaining(each[1]), Ok(9), "as if taken");
        assert_eq!(store.len(), 1, "large was never written");
    }

    #[test]
    fn a_reservation_takes_the_same_permits_on_every_rule() {
        let store = store(100);
        let rule = gcra(1, 5);
        let op = Op::Reserve {
            n: 2,
            max_wait: SECOND,
        };
        let same = [
            Check::new("a", &rule).with_permits(2),
            Check::new("b", &rule),
        ];
        let request = Request::new("t", &same, op).at(Duration::ZERO);
        let answers = store.execute_each_now(&request).unwrap();
        for answer in answers.checks().unwrap() {
            let Reply::Reservation(Ok(r)) = answer else {
                panic!("{answer:?}")
            };
            assert_eq!((r.permits(), r.wait()), (2, Duration::ZERO));
        }
        let other = [
            Check::new("a", &rule).with_permits(1),
            Check::new("b", &rule),
        ];
        let request = Request::new("t", &other, op).at(Duration::ZERO);
        for error in [
            store.execute_now(&request).unwrap_err(),
            store.execute_each_now(&request).unwrap_err(),
        ] {
            assert!(
                matches!(&error, StoreError::Config(e) if e.parameter() == "permits"),
                "{error:?}"
            );
        }
    }

    #[test]
    fn a_counting_window_alone_counts_its_denial_with_others_counts_nothing() {
        let store = store(100);
        let (limit, other) = (counting(10), window(100));
        let take = |checks: &[Check<'_>]| {
            let request = Request::new("t", checks, Op::Acquire(1)).at(Duration::ZERO);
            store.execute_each_now(&request).unwrap()
        };
        assert!(
            take(&[Check::new("c", &limit).with_permits(8)])
                .reply()
                .is_admitted()
        );
        // With another check: denied, and nothing written, the denial included.
        let both = [
            Check::new("c", &limit).with_permits(5),
            Check::new("o", &other).with_permits(1),
        ];
        let answers = take(&both);
        assert!(!answers.reply().is_admitted());
        let each = answers.checks().unwrap();
        let denied = each[0].into_decision().unwrap().unwrap_err();
        assert_eq!(denied.retry_after(), Some(SECOND));
        assert_eq!(remaining(each[1]), Ok(99));
        let check_only = [Check::new("c", &limit).with_permits(0)];
        assert_eq!(remaining(take(&check_only).reply()), Ok(2), "not counted");
        // Alone: the denial counts, and the window is over to its end.
        assert!(
            !take(&[Check::new("c", &limit).with_permits(5)])
                .reply()
                .is_admitted()
        );
        let over = take(&check_only)
            .reply()
            .into_decision()
            .unwrap()
            .unwrap_err();
        assert_eq!(over.retry_after(), Some(SECOND));
        let Denied::Limited(over) = over else {
            panic!("{over:?}")
        };
        assert_eq!(over.remaining(), 0);
    }
}
