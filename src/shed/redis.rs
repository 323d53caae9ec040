//! [`RedisUsage`]: the requests in flight across a fleet, as leases in Redis that a
//! crashed process cannot leak; and the asynchronous [`FleetShedder`] over it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::Script;
use redis::aio::{ConnectionLike, ConnectionManager};

use super::asynchronous::{AsyncShedder, OnFailure};
use super::class::{Class, Classes};
use super::decision::ShedDecision;
use super::fleet::FleetShedder;
use crate::algorithm::script::whole_micros;
use crate::error::ConfigError;
use crate::store::lease_id::{TAKE_ATTEMPTS, lease_id};
use crate::store::{RedisStore, StoreError};
use crate::sync::Arc;
use crate::sync::unmodeled::OnceLock;

/// The in-flight count of a fleet, in Redis: each slot is a lease that runs out unless
/// renewed, so the slots of a process that dies come back after one lease.
///
/// The leases of one counter are the members of one sorted set, each scored by the
/// instant it runs out; a Lua script takes, renews and gives them back, dropping the
/// run-out ones first. Taking checks the count and adds the lease in that one call,
/// so processes never admit on a count another changed meanwhile.
///
/// Why not the [`Leased`](crate::algorithm::Leased) rule of the stores: it renews all
/// its permits together on every acquire or release, so under steady traffic from
/// the rest of the fleet, a dead process's permits would never run out. Here each
/// lease runs out on its own.
///
/// **Time.** Leases run on the Redis server's clock (`TIME`), not on a
/// [`Clock`](crate::time::Clock) of this process: they must run out while this
/// process is dead. Choose a lease longer than any request, or keep long requests
/// alive with [`RedisSlot::renew`] (a heartbeat) at a fraction of the lease.
///
/// **Keys.** One key under the store's prefix, with `name` as its Redis Cluster hash
/// tag: `{prefix}:{name}`, the set (it expires with its last lease).
///
/// **Lease ids.** Each lease is named by a 64-bit id drawn in this process: distinct
/// for every lease the process takes, and random across processes, so that a lease
/// from before a Redis restart without persistence (which empties the set) never
/// names, gives back or renews one taken after it. Two live leases never share an id:
/// should a draw meet a live lease's, another is drawn.
///
/// Unlike [`LocalUsage`](super::LocalUsage) this is not a
/// [`UsageCounter`](super::UsageCounter): every call is a round trip, so it is
/// asynchronous, and a shedder over it decides with
/// [`decide_async`](FleetShedder::decide_async), or as an
/// [`AsyncShedder`] behind a `ShedLayer` (`ShedLayer::new_async`).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::shed::RedisUsage;
/// use tollgate::store::RedisStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
/// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
/// if let Some(lease) = usage.try_take(100).await? {
///     // ... the request runs ...
///     usage.give_back(lease).await?;
/// }
/// println!("{} in flight across the fleet", usage.in_use().await?);
/// # Ok(())
/// # }
/// ```
pub struct RedisUsage<C = ConnectionManager> {
    connection: C,
    set: String,
    lease: Duration,
    lease_micros: u64,
}

/// One slot taken from a [`RedisUsage`], to renew or give back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RedisLease {
    id: u64,
}

impl RedisLease {
    /// The lease's member in the sorted set: distinct for every lease this process
    /// takes, random across processes, and never shared by two live leases of one
    /// counter.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl<C> RedisUsage<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A counter named `name` on `store`'s connection and under its prefix, whose
    /// slots run out after `lease` unless renewed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Config`] with
    /// - [`ConfigError::Zero`] for a zero `lease`;
    /// - [`ConfigError::TooLong`] for a lease beyond 2^52 µs (about 142 years), which
    ///   the script's doubles could not add to the time exactly;
    /// - [`ConfigError::OutOfRange`] for a lease that is not a whole number of
    ///   microseconds, or a `name` that is empty or holds a brace (it is the Cluster
    ///   hash tag).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::ConfigError;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::{RedisStore, StoreError};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// assert!(matches!(
    ///     RedisUsage::new(&store, "fleet", Duration::ZERO),
    ///     Err(StoreError::Config(ConfigError::Zero { parameter: "lease" }))
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(
        store: &RedisStore<C>,
        name: &str,
        lease: Duration,
    ) -> Result<RedisUsage<C>, StoreError> {
        let lease_micros = lease_micros(lease)?;
        if name.is_empty() || name.contains(['{', '}']) {
            return Err(ConfigError::OutOfRange {
                parameter: "name",
                expected: "not empty, no '{' or '}' (it is the Cluster hash tag)",
            }
            .into());
        }
        Ok(RedisUsage {
            connection: store.connection().clone(),
            set: store.redis_key(name, ""),
            lease,
            lease_micros,
        })
    }

    /// How long a slot stays taken without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The Redis key of the sorted set of leases.
    pub fn key(&self) -> &str {
        &self.set
    }

    /// Takes one slot if fewer than `limit` are in use across the fleet.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer; whether a slot was taken is then
    /// unknown (if it was, its lease runs out).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave a slot taken in Redis; its lease runs out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// match usage.try_take(100).await? {
    ///     Some(lease) => {
    ///         // ... the request runs ...
    ///         usage.give_back(lease).await?;
    ///     }
    ///     None => println!("100 in flight across the fleet: shed"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_take(&self, limit: u64) -> Result<Option<RedisLease>, StoreError> {
        let (lease, _) = self.take_within(limit, false).await?;
        Ok(lease)
    }

    /// Takes one slot whatever the count: for requests that run anyway (shadow mode,
    /// shedding off) and still load the fleet.
    ///
    /// # Errors
    ///
    /// As [`try_take`](RedisUsage::try_take).
    ///
    /// # Cancel safety
    ///
    /// As [`try_take`](RedisUsage::try_take).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// // Shadow mode: the request runs whatever the count, and is counted.
    /// let lease = usage.take().await?;
    /// assert!(usage.in_use().await? >= 1);
    /// usage.give_back(lease).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take(&self) -> Result<RedisLease, StoreError> {
        match self.take_within(0, true).await? {
            (Some(lease), _) => Ok(lease),
            (None, _) => Err(StoreError::Protocol("no lease taken past the limit".into())),
        }
    }

    /// Renews `lease` for another [lease](RedisUsage::lease) from now, on the
    /// server's clock: `false` if it had already run out (its slot was counted free
    /// and may be someone else's).
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the lease renewed or not.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let lease = usage.take().await?;
    /// // A long request: renew well within the lease, as a heartbeat.
    /// if !usage.renew(lease).await? {
    ///     println!("the lease ran out: the fleet may have counted the slot free");
    /// }
    /// usage.give_back(lease).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn renew(&self, lease: RedisLease) -> Result<bool, StoreError> {
        let reply: i64 = self
            .call(&[
                "renew",
                &lease.id.to_string(),
                &self.lease_micros.to_string(),
            ])
            .await?;
        Ok(reply == 1)
    }

    /// Gives `lease` back: `false` if it had already run out.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer; the lease then runs out.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the lease given back or running out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let lease = usage.take().await?;
    /// assert!(usage.give_back(lease).await?);
    /// assert!(!usage.give_back(lease).await?); // already given back
    /// # Ok(())
    /// # }
    /// ```
    pub async fn give_back(&self, lease: RedisLease) -> Result<bool, StoreError> {
        let reply: i64 = self.call(&["give_back", &lease.id.to_string()]).await?;
        Ok(reply == 1)
    }

    /// The slots in use across the fleet: leases not run out.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer.
    ///
    /// # Cancel safety
    ///
    /// Reads only: cancel at will.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::RedisUsage;
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// println!("{} slots in use across the fleet", usage.in_use().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn in_use(&self) -> Result<u64, StoreError> {
        let reply: u64 = self.call(&["count"]).await?;
        Ok(reply)
    }

    /// One slot if fewer than `limit` are in use, or past it if `anyway`; and whether
    /// it was within the limit.
    async fn take_within(
        &self,
        limit: u64,
        anyway: bool,
    ) -> Result<(Option<RedisLease>, bool), StoreError> {
        // Counts never reach 2^52, so a larger limit is the same as none, and the
        // script's doubles hold the rest exactly.
        let limit = limit.min(1 << 52).to_string();
        let anyway = if anyway { "1" } else { "0" };
        let lease = self.lease_micros.to_string();
        // A draw meets a live lease's id with odds of about 2^-64 per lease in use;
        // more than one such draw in a row means something else is wrong.
        for _ in 0..TAKE_ATTEMPTS {
            let id = lease_id();
            let reply: Vec<i64> = self
                .call(&["take", &limit, anyway, &lease, &id.to_string()])
                .await?;
            match reply[..] {
                [0, _, 0] => return Ok((None, false)),
                [1, _, within @ (0 | 1)] => return Ok((Some(RedisLease { id }), within == 1)),
                [-1, _, 0] => continue,
                _ => return Err(StoreError::Protocol(format!("take answered {reply:?}"))),
            }
        }
        Err(StoreError::Protocol(format!(
            "{TAKE_ATTEMPTS} lease ids in a row were live leases' ids"
        )))
    }

    async fn call<T: redis::FromRedisValue>(&self, args: &[&str]) -> Result<T, StoreError> {
        let mut invocation = script().key(&self.set);
        for arg in args {
            invocation.arg(*arg);
        }
        let mut connection = self.connection.clone();
        // `invoke_async` loads the script again after NOSCRIPT (a restart, a failover).
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(crate::store::from_redis)
    }
}

impl<C> fmt::Debug for RedisUsage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisUsage")
            .field("key", &self.set)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

/// The lease in whole microseconds, as the script adds it to the time.
fn lease_micros(lease: Duration) -> Result<u64, ConfigError> {
    if lease.is_zero() {
        return Err(ConfigError::Zero { parameter: "lease" });
    }
    whole_micros(lease, "lease")
}

fn script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(|| Script::new(include_str!("fleet_usage.lua")))
}

/// # Across a fleet, through Redis
impl<C> FleetShedder<RedisUsage<C>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Admits `class` if fewer than its limit are in flight across the fleet (the
    /// whole capacity for a critical class, the shared limit for others): one call
    /// of one script, which counts and takes together. A class of another set is
    /// read by its name ([`Classes::resolve`]).
    ///
    /// In shadow mode or with shedding off, the slot is taken past the limit in the
    /// same call.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer. Whether to admit then (fail
    /// open) or refuse (fail closed) is the caller's choice; the [`AsyncShedder`]
    /// implementation decides by [`on_failure`](FleetShedder::on_failure).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave a slot taken in Redis, which its lease returns.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::with_counter(classes.clone(), 1_000, 0.2, usage)?;
    /// match fleet.decide_async(&classes.parse("sheddable")).await?.into_slot() {
    ///     Ok(slot) => {
    ///         // ... the request runs; for a long one, `slot.renew().await?` now and then ...
    ///         slot.release().await?;
    ///     }
    ///     Err(shed) => println!("503: {shed}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn decide_async(
        &self,
        class: &Class,
    ) -> Result<ShedDecision<RedisSlot<C>>, StoreError> {
        let resolved;
        let class = if self.class_set().made(class) {
            class
        } else {
            resolved = self.class_set().resolve(class);
            &resolved
        };
        let plan = self.plan(class);
        let (lease, within) = self
            .counter()
            .take_within(plan.limit, plan.takes_anyway())
            .await?;
        let slot = lease.map(|lease| RedisSlot {
            usage: self.shared_counter(),
            lease,
            held: true,
        });
        Ok(self.settle(class, plan, slot, within))
    }
}

/// # Across a fleet, behind a layer
impl<C> FleetShedder<RedisUsage<C>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The same shedder, answering by `policy` when Redis fails, in
    /// [`AsyncShedder::decision`] (and so behind a `ShedLayer`). The default is
    /// [`OnFailure::Open`], for the reasons [`OnFailure`] gives.
    /// [`decide_async`](FleetShedder::decide_async) returns the error instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, OnFailure, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let fleet = FleetShedder::with_counter(Classes::google(), 1_000, 0.2, usage)?
    ///     .on_failure(OnFailure::Closed);
    /// assert_eq!(fleet.failure(), OnFailure::Closed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_failure(self, policy: OnFailure) -> FleetShedder<RedisUsage<C>> {
        self.set_failure_policy(policy)
    }

    /// What the shedder answers when Redis fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, OnFailure, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let fleet = FleetShedder::with_counter(Classes::google(), 1_000, 0.2, usage)?;
    /// assert_eq!(fleet.failure(), OnFailure::Open);
    /// # Ok(())
    /// # }
    /// ```
    pub fn failure(&self) -> OnFailure {
        self.failure_policy()
    }

    /// [`decide_async`](FleetShedder::decide_async), with a Redis error answered by
    /// the [failure policy](FleetShedder::on_failure): no slot is then held.
    async fn decide_or_fail(&self, class: &Class) -> ShedDecision<Option<RedisSlot<C>>> {
        match self.decide_async(class).await {
            Ok(decision) => decision.map_slot(Some),
            Err(_) => self.unavailable(class),
        }
    }
}

/// The fleet-usage shedder through Redis behind a
/// `http::shed::ShedLayer` (`ShedLayer::new_async`, feature `http`): each
/// decision is one script call, and a Redis failure is answered by the
/// [failure policy](FleetShedder::on_failure) (admit by default). The slot is
/// `None` when the request was admitted without Redis.
///
/// # Cancel safety
///
/// Dropping the decision may leave a slot taken in Redis, which its lease returns.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::shed::{AsyncShedder, Classes, FleetShedder, RedisUsage};
/// use tollgate::store::RedisStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
/// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
/// let classes = Classes::google();
/// let fleet = FleetShedder::with_counter(classes.clone(), 1_000, 0.2, usage)?;
/// // Never an error: Redis down, the request is admitted (holding no slot).
/// let decision = fleet.decision(&classes.parse("sheddable")).await;
/// println!("admitted: {}", decision.is_admitted());
/// # Ok(())
/// # }
/// ```
impl<C> AsyncShedder for FleetShedder<RedisUsage<C>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    type Slot = Option<RedisSlot<C>>;
    type Decision = Pin<Box<dyn Future<Output = ShedDecision<Option<RedisSlot<C>>>> + Send>>;

    fn decision(&self, class: &Class) -> Self::Decision {
        // The future owns its shedder (a few `Arc`s) and class: it outlives the call.
        let fleet = self.clone();
        let class = class.clone();
        Box::pin(async move { fleet.decide_or_fail(&class).await })
    }

    fn classes(&self) -> &Classes {
        self.class_set()
    }
}

/// A request's slot in a fleet counted by a [`RedisUsage`].
///
/// [`release`](RedisSlot::release) gives it back and says whether that worked.
/// Dropped without it, the slot is given back by a task spawned on the current tokio
/// runtime, best effort: with no runtime, or if Redis does not answer, its lease runs
/// out instead, and the slot is back after at most one lease.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate::shed::{Classes, FleetShedder, RedisUsage};
/// use tollgate::store::RedisStore;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
/// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
/// let classes = Classes::google();
/// let fleet = FleetShedder::with_counter(classes.clone(), 100, 0.2, usage)?;
/// if let Ok(slot) = fleet.decide_async(&classes.highest()).await?.into_slot() {
///     println!("holding lease {}", slot.lease().id());
///     drop(slot); // given back by a spawned task
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct RedisSlot<C = ConnectionManager>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    usage: Arc<RedisUsage<C>>,
    lease: RedisLease,
    /// Until given back: a drop gives back a slot still held.
    held: bool,
}

impl<C> RedisSlot<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The lease this slot holds.
    pub fn lease(&self) -> RedisLease {
        self.lease
    }

    /// Renews the slot's lease (a heartbeat, for a request that may outlast it):
    /// `false` if it had already run out, so that the fleet may have counted it free.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the lease renewed or not.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::with_counter(classes.clone(), 100, 0.2, usage)?;
    /// let slot = fleet.decide_async(&classes.highest()).await?.into_slot()?;
    /// // A long request renews its slot at a fraction of the lease.
    /// let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    /// for _ in 0..3 {
    ///     heartbeat.tick().await;
    ///     slot.renew().await?;
    /// }
    /// slot.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn renew(&self) -> Result<bool, StoreError> {
        self.usage.renew(self.lease()).await
    }

    /// Gives the slot back now: `false` if its lease had already run out.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when Redis could not answer; the lease then runs out.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future gives the slot back as dropping the slot does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tollgate::shed::{Classes, FleetShedder, RedisUsage};
    /// use tollgate::store::RedisStore;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisStore::connect("redis://127.0.0.1/", "api").await?;
    /// let usage = RedisUsage::new(&store, "fleet", Duration::from_secs(30))?;
    /// let classes = Classes::google();
    /// let fleet = FleetShedder::with_counter(classes.clone(), 100, 0.2, usage)?;
    /// let slot = fleet.decide_async(&classes.highest()).await?.into_slot()?;
    /// // ... the request runs ...
    /// assert!(slot.release().await?, "given back before its lease ran out");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(mut self) -> Result<bool, StoreError> {
        let given_back = self.usage.give_back(self.lease).await;
        // Failing, the lease runs out: no second try.
        self.held = false;
        given_back
    }
}

impl<C> Drop for RedisSlot<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let lease = self.lease;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let usage = Arc::clone(&self.usage);
            runtime.spawn(async move {
                // Failing, the lease runs out instead.
                let _ = usage.give_back(lease).await;
            });
        }
    }
}

impl<C> fmt::Debug for RedisSlot<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSlot")
            .field("key", &self.usage.set)
            .field("lease", &self.lease)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::script::MAX_SCRIPT_MICROS;

    #[test]
    fn leases_the_script_cannot_add_exactly_are_errors() {
        assert_eq!(
            lease_micros(Duration::ZERO),
            Err(ConfigError::Zero { parameter: "lease" })
        );
        assert_eq!(
            lease_micros(Duration::MAX),
            Err(crate::algorithm::script::too_long(
                "lease",
                MAX_SCRIPT_MICROS
            ))
        );
        assert_eq!(
            lease_micros(Duration::from_micros(MAX_SCRIPT_MICROS + 1)),
            Err(crate::algorithm::script::too_long(
                "lease",
                MAX_SCRIPT_MICROS
            ))
        );
        assert!(matches!(
            lease_micros(Duration::from_nanos(1_500)),
            Err(ConfigError::OutOfRange {
                parameter: "lease",
                ..
            })
        ));
        assert_eq!(lease_micros(Duration::from_millis(1_500)), Ok(1_500_000));
        assert_eq!(
            lease_micros(Duration::from_micros(MAX_SCRIPT_MICROS)),
            Ok(MAX_SCRIPT_MICROS)
        );
    }
}
