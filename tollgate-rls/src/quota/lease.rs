//! This replica's leases in Redis: per bucket, a share of the limit that the
//! replicas of the service hand out together never past the limit.
//!
//! Each bucket this replica's Envoys report has one lease in the bucket's ledger, a
//! Redis hash (`{prefix}:rlqs:{bucket}`, one key, so one slot of a Cluster): the
//! lease's id ([`tollgate::store::lease_id`]), what the replica's Envoys want, what it
//! was granted and when its record goes. One call of `lease.lua` drops expired
//! records, records this replica's want, and grants its max-min fair share cut to
//! what the other live leases hold ([`fleet`](super::fleet) is the Rust reference).
//!
//! **When it calls.** On a report of the bucket, when the lease is new, when the
//! replica's want or the limit changed, when it was granted less than its fair share
//! (it waits for others to give theirs up), or when its last call is
//! [`QuotaOptions::sync_interval`] old; otherwise the report is answered from the
//! grant held. Each call renews the record for [`QuotaOptions::assignment_ttl`] plus
//! the sync interval: every assignment answered from the grant (within the interval
//! after the call) runs out before the record does, so a dead replica's share stays
//! counted while its Envoys may still spend it, and is forgotten after.
//!
//! **Giving back.** When the last of this replica's Envoys leaves a bucket (its
//! stream ends, or it abandons the bucket) the record is deleted;
//! [`Leases::close`] deletes them all when the service drains.
//!
//! **When Redis fails** (an error, or no answer within `REDIS_TIMEOUT`), as the
//! backend's `--store-failure` says:
//! - `error`: the call fails ([`LeaseError::Store`]); the quota service ends the
//!   reporting stream with `UNAVAILABLE`, and its Envoy keeps its assignments until
//!   their time to live, then follows its `expired_assignment_behavior`.
//! - `allow`: the grant held is kept while its record surely lives in Redis (its
//!   time to live counted from when the call that granted it began), as a
//!   [`Share::Kept`] whose assignments live only what remains of the record's life
//!   (whole seconds), so that none outlives it and the limit still holds; after
//!   that, and for a bucket never granted, the share is [`Share::AllowAll`]. Each
//!   failure is logged as a warning.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use redis::{RedisError, Script};
use tollgate::store::{StoreError, lease_id};
use tollgate::time::{Clock, MonotonicClock, Nanos};

use super::QuotaOptions;
use super::buckets::{BucketKey, Share};
use super::fleet::{MAX_TOKENS, Want};
use crate::backend::FailureMode;
use crate::redis_link::RedisLink;

/// Ids drawn for one take before giving up: more than one draw meeting a live
/// lease's id in a row means something else is wrong.
const TAKE_ATTEMPTS: usize = 3;

/// Why a lease gave no share.
#[derive(Debug)]
#[non_exhaustive]
pub enum LeaseError {
    /// Redis failed, and the backend fails calls on errors.
    Store(StoreError),
    /// The leases were given back ([`Leases::close`]): the service is draining.
    Closed,
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Store(e) => write!(f, "the quota lease in Redis failed: {e}"),
            LeaseError::Closed => f.write_str("the quota service is draining"),
        }
    }
}

impl std::error::Error for LeaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LeaseError::Store(e) => Some(e),
            LeaseError::Closed => None,
        }
    }
}

/// One bucket's lease, as this replica last saw it.
#[derive(Debug, Default)]
struct Held {
    id: Option<u64>,
    granted: u64,
    /// Granted less than its target: call again on the next report.
    owed: bool,
    want: Option<Want>,
    limit: u64,
    /// When the call that granted `granted` began.
    synced_at: Option<Nanos>,
}

type Cell = Arc<tokio::sync::Mutex<Held>>;

/// This replica's leases, one per bucket its Envoys report.
///
/// # Examples
///
/// ```no_run
/// use tollgate_rls::backend::{Backend, BackendOptions};
/// use tollgate_rls::quota::QuotaOptions;
/// use tollgate_rls::quota::buckets::Share;
/// use tollgate_rls::quota::fleet::Want;
/// use tollgate_rls::quota::lease::Leases;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = Backend::connect(&BackendOptions::redis("redis://127.0.0.1:6379/")).await?;
/// let leases = Leases::new(backend.redis().unwrap().clone(), &QuotaOptions::default());
/// let bucket = ("shop".to_owned(), vec![("user".to_owned(), "ann".to_owned())]);
/// // Alone, with Envoys not yet measured: the whole limit.
/// let (_, share) = leases.share(&bucket, 100, Want::Unbounded).await?;
/// assert_eq!(share, Share::Tokens(100));
/// leases.give_back(&bucket, || true).await?;
/// # Ok(())
/// # }
/// ```
pub struct Leases {
    link: RedisLink,
    /// An assignment's time to live.
    assignment_ttl: Duration,
    /// A record's: the assignment's plus the sync interval.
    ttl: Duration,
    sync_interval: Duration,
    now: Arc<dyn Fn() -> Nanos + Send + Sync>,
    held: Mutex<HashMap<BucketKey, Cell>>,
    seq: AtomicU64,
    closed: AtomicBool,
}

impl fmt::Debug for Leases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases")
            .field("link", &self.link)
            .field("assignment_ttl", &self.assignment_ttl)
            .field("ttl", &self.ttl)
            .field("sync_interval", &self.sync_interval)
            .field("buckets", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl Leases {
    /// Leases on `link`'s Redis, with `options`' record time to live (the
    /// assignment's) and sync interval, on the monotonic clock.
    pub fn new(link: RedisLink, options: &QuotaOptions) -> Leases {
        Leases {
            link,
            assignment_ttl: options.assignment_ttl,
            ttl: options
                .assignment_ttl
                .saturating_add(options.sync_interval)
                .max(Duration::from_millis(1)),
            sync_interval: options.sync_interval,
            now: clock_fn(MonotonicClock::new()),
            held: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// The same leases deciding when to call on `clock` (a
    /// [`ManualClock`](tollgate::time::ManualClock) in tests). Records still expire
    /// on Redis's clock.
    pub fn with_clock<C: Clock>(self, clock: C) -> Leases {
        Leases {
            now: clock_fn(clock),
            ..self
        }
    }

    /// The Redis key of `key`'s ledger ([`ledger_key`] under the backend's prefix).
    pub fn ledger_key(&self, key: &BucketKey) -> String {
        ledger_key(self.link.prefix(), key)
    }

    /// The share of `key` this replica hands out, `limit` tokens per unit being
    /// shared by every replica and its Envoys wanting `want`; with a sequence number
    /// that orders the shares of one bucket. Calls Redis when due (see the module
    /// docs), else answers from the grant held.
    ///
    /// # Errors
    ///
    /// - [`LeaseError::Store`] when Redis fails and the backend fails calls on errors
    ///   (under `--store-failure allow` a failure is a share: the grant held while it
    ///   lives, else [`Share::AllowAll`]);
    /// - [`LeaseError::Closed`] after [`close`](Leases::close).
    ///
    /// # Cancel safety
    ///
    /// Cancelling during the call to Redis leaves the lease as Redis recorded it or
    /// as it was; the next call renews it either way. A take cancelled after Redis
    /// ran it leaves a record this replica does not know of: it counts against the
    /// others until its time to live (less admitted, never more).
    pub async fn share(
        &self,
        key: &BucketKey,
        limit: u64,
        want: Want,
    ) -> Result<(u64, Share), LeaseError> {
        let cell = self.cell(key);
        let mut held = cell.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err(LeaseError::Closed);
        }
        let now = (self.now)();
        let limit = limit.min(MAX_TOKENS);
        let due = held.id.is_none()
            || held.owed
            || held.want.is_none_or(|held| wants_differ(held, want))
            || held.limit != limit
            || held
                .synced_at
                .is_none_or(|at| now.saturating_since(at) >= self.sync_interval);
        if !due {
            return Ok((self.next_seq(), Share::Tokens(held.granted)));
        }
        match self.sync(&mut held, key, limit, want, now).await {
            Ok(()) => Ok((self.next_seq(), Share::Tokens(held.granted))),
            Err(e) => match self.link.failure_mode() {
                FailureMode::Allow => {
                    // Whole seconds of the record's life left, as Envoy reads a
                    // time to live.
                    let left = held.synced_at.map_or(0, |at| {
                        self.ttl
                            .saturating_sub(now.saturating_since(at))
                            .min(self.assignment_ttl)
                            .as_secs()
                    });
                    let share = match left {
                        0 => Share::AllowAll,
                        left => Share::Kept {
                            tokens: held.granted,
                            ttl: Duration::from_secs(left),
                        },
                    };
                    tracing::warn!(
                        bucket = %self.ledger_key(key),
                        "quota lease not renewed ({e}); --store-failure allow: {}",
                        match share {
                            Share::Kept { tokens, ttl } =>
                                format!("keeping the {tokens} tokens granted for {ttl:?}"),
                            _ => "every request passes".to_owned(),
                        }
                    );
                    Ok((self.next_seq(), share))
                }
                _ => Err(LeaseError::Store(e)),
            },
        }
    }

    /// Gives back the lease of `key`, if `unused()` is still true once no call on it
    /// is under way (`unused` is the caller's check that no Envoy of this replica
    /// reports the bucket any more): whether a live record was deleted.
    ///
    /// # Errors
    ///
    /// [`LeaseError::Store`] when Redis fails: the record then goes after its time
    /// to live.
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave the record in Redis until its time to live; this
    /// replica forgets the lease either way.
    pub async fn give_back(
        &self,
        key: &BucketKey,
        unused: impl Fn() -> bool,
    ) -> Result<bool, LeaseError> {
        let Some(cell) = self.lock().get(key).cloned() else {
            return Ok(false);
        };
        let mut held = cell.lock().await;
        if !unused() {
            return Ok(false);
        }
        let id = held.id;
        *held = Held::default();
        self.forget(key, &cell);
        drop(held);
        match id {
            Some(id) => self.give_back_id(key, id).await.map_err(LeaseError::Store),
            None => Ok(false),
        }
    }

    /// Gives back every lease and refuses shares from now on: the service is
    /// draining. The number of live records deleted; a failure is logged (those
    /// records go after their time to live).
    ///
    /// # Cancel safety
    ///
    /// Cancelling leaves the leases not yet given back until their time to live.
    pub async fn close(&self) -> usize {
        self.closed.store(true, Ordering::Release);
        let cells: Vec<(BucketKey, Cell)> = self
            .lock()
            .iter()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        let mut given = 0;
        for (key, cell) in cells {
            let mut held = cell.lock().await;
            let Some(id) = held.id.take() else { continue };
            *held = Held::default();
            match self.give_back_id(&key, id).await {
                Ok(true) => given += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    bucket = %self.ledger_key(&key),
                    "quota lease not given back ({e}); it goes after its time to live"
                ),
            }
        }
        given
    }

    /// Buckets this replica holds a lease of, or is taking one for.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The script's source (`lease.lua`), for tests that hold it to
    /// [`fleet`](super::fleet).
    pub fn script_source() -> &'static str {
        include_str!("lease.lua")
    }

    async fn sync(
        &self,
        held: &mut Held,
        key: &BucketKey,
        limit: u64,
        want: Want,
        now: Nanos,
    ) -> Result<(), StoreError> {
        let ledger = self.ledger_key(key);
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let (limit_arg, want_arg, ttl_arg) = (limit.to_string(), want.to_arg(), ttl.to_string());
        for _ in 0..TAKE_ATTEMPTS {
            let (id, op) = match held.id {
                Some(id) => (id, "renew"),
                None => (lease_id(), "take"),
            };
            let field = lease_field(id);
            let reply: Vec<i64> = self
                .call(&ledger, &[op, &field, &limit_arg, &want_arg, &ttl_arg])
                .await?;
            match reply[..] {
                [1, granted, target, _] if granted >= 0 && target >= granted => {
                    *held = Held {
                        id: Some(id),
                        granted: granted as u64,
                        owed: granted < target,
                        want: Some(want),
                        limit,
                        synced_at: Some(now),
                    };
                    return Ok(());
                }
                [-1, ..] if op == "take" => continue,
                _ => {
                    return Err(StoreError::Protocol(format!(
                        "the quota lease script answered {reply:?}"
                    )));
                }
            }
        }
        Err(StoreError::Protocol(format!(
            "{TAKE_ATTEMPTS} quota lease ids in a row were live leases' ids"
        )))
    }

    async fn give_back_id(&self, key: &BucketKey, id: u64) -> Result<bool, StoreError> {
        let reply: i64 = self
            .call(&self.ledger_key(key), &["give_back", &lease_field(id)])
            .await?;
        Ok(reply == 1)
    }

    async fn call<T: redis::FromRedisValue>(
        &self,
        ledger: &str,
        args: &[&str],
    ) -> Result<T, StoreError> {
        let mut invocation = script().key(ledger);
        for arg in args {
            invocation.arg(*arg);
        }
        let mut connection = self.link.connection();
        // `invoke_async` loads the script again after NOSCRIPT (a restart, a failover).
        let call = invocation.invoke_async(&mut connection);
        let deadline = self.link.deadline();
        let reply = if deadline.is_zero() {
            call.await
        } else {
            tokio::time::timeout(deadline, call)
                .await
                .map_err(|_| StoreError::Timeout(deadline))?
        };
        reply.map_err(store_error)
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<BucketKey, Cell>> {
        // Each step on the map is one insert or remove: a panic leaves it consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cell(&self, key: &BucketKey) -> Cell {
        self.lock().entry(key.clone()).or_default().clone()
    }

    /// Drops `key`'s cell if nobody else holds it (callers clone it under the map's
    /// lock, so nobody can between the count and the removal).
    fn forget(&self, key: &BucketKey, cell: &Cell) {
        let mut map = self.lock();
        if map.get(key).is_some_and(|c| Arc::ptr_eq(c, cell)) && Arc::strong_count(cell) == 2 {
            map.remove(key);
        }
    }
}

/// The Redis key of `key`'s ledger under `prefix`: `rlqs`, then the domain and the
/// pairs, each string preceded by its length, so that no two buckets share one.
///
/// # Examples
///
/// ```
/// use tollgate_rls::quota::lease::ledger_key;
///
/// let bucket = ("shop".to_owned(), vec![("user".to_owned(), "ann".to_owned())]);
/// assert_eq!(ledger_key("ratelimit", &bucket), "ratelimit:rlqs:4:shop|4:user=3:ann");
/// ```
pub fn ledger_key(prefix: &str, key: &BucketKey) -> String {
    let mut out = format!("{prefix}:rlqs:{}:{}", key.0.len(), key.0);
    for (k, v) in &key.1 {
        out.push_str(&format!("|{}:{k}={}:{v}", k.len(), v.len()));
    }
    out
}

/// Whether a want moved enough to call before the sync interval: between bounded
/// and unbounded (an Envoy joined), or by more than a quarter.
fn wants_differ(a: Want, b: Want) -> bool {
    match (a, b) {
        (Want::Unbounded, Want::Unbounded) => false,
        (Want::Tokens(x), Want::Tokens(y)) => x.abs_diff(y).saturating_mul(4) > x.max(y),
        _ => true,
    }
}

/// A lease id as the ledger's field: 16 hex digits, so that the script's string
/// order is the ids' order.
fn lease_field(id: u64) -> String {
    format!("{id:016x}")
}

fn clock_fn<C: Clock>(clock: C) -> Arc<dyn Fn() -> Nanos + Send + Sync> {
    Arc::new(move || clock.now())
}

fn script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(Leases::script_source()))
}

/// A redis-rs error as a [`StoreError`]: the connection's, or the server's.
fn store_error(error: RedisError) -> StoreError {
    if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
    {
        StoreError::Connection(Box::new(error))
    } else {
        StoreError::Server(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_keys_cannot_be_confused() {
        let key = |d: &str, pairs: &[(&str, &str)]| -> BucketKey {
            (
                d.to_owned(),
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        };
        assert_eq!(
            ledger_key("rl", &key("shop", &[("user", "ann"), ("path", "/")])),
            "rl:rlqs:4:shop|4:user=3:ann|4:path=1:/"
        );
        // Separators inside strings are counted, not parsed.
        assert_ne!(
            ledger_key("rl", &key("a", &[("b=1:c", "d")])),
            ledger_key("rl", &key("a", &[("b", "1:c=d")]))
        );
        assert_eq!(lease_field(1), "0000000000000001");
        assert!(lease_field(u64::MAX) > lease_field(u64::MAX - 1));
    }

    #[test]
    fn a_want_moving_by_more_than_a_quarter_calls_before_the_interval() {
        assert!(!wants_differ(Want::Tokens(100), Want::Tokens(125)));
        assert!(wants_differ(Want::Tokens(100), Want::Tokens(140)));
        assert!(wants_differ(Want::Tokens(140), Want::Tokens(100)));
        assert!(wants_differ(Want::Tokens(0), Want::Tokens(1)));
        assert!(wants_differ(Want::Tokens(5), Want::Unbounded));
        assert!(!wants_differ(Want::Unbounded, Want::Unbounded));
    }
}
