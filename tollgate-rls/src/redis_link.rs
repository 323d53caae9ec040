//! The backend's Redis connection, shared with what is not a store call: the quota
//! service's leases ([`crate::quota::lease`]) ride on the store's own connection
//! (one server, a Cluster, or the master behind Sentinel), with the backend's key
//! prefix, failure mode and deadline.

use std::fmt;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tollgate::store::SentinelConnection;

use crate::backend::FailureMode;

/// A connection of any of the backend's Redis kinds.
#[derive(Clone)]
#[non_exhaustive]
pub enum RedisConnection {
    /// One server (reconnecting).
    Single(ConnectionManager),
    /// A Redis Cluster: each call goes to its key's slot.
    Cluster(ClusterConnection),
    /// The master that Sentinels name, followed across failovers.
    Sentinel(SentinelConnection),
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedisConnection::Single(_) => "RedisConnection::Single",
            RedisConnection::Cluster(_) => "RedisConnection::Cluster",
            RedisConnection::Sentinel(_) => "RedisConnection::Sentinel",
        })
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(c) => c.req_packed_command(cmd),
            RedisConnection::Cluster(c) => c.req_packed_command(cmd),
            RedisConnection::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
            RedisConnection::Sentinel(c) => c.get_db(),
        }
    }
}

/// The main store's Redis connection, and how the backend uses it.
///
/// Made by [`Backend::connect`](crate::backend::Backend::connect) for a Redis kind
/// ([`Backend::redis`](crate::backend::Backend::redis)); clones share the
/// connection.
#[derive(Clone, Debug)]
pub struct RedisLink {
    connection: RedisConnection,
    prefix: String,
    failure_mode: FailureMode,
    deadline: Duration,
}

impl RedisLink {
    /// `connection`, with the backend's key prefix, failure mode and deadline.
    pub fn new(
        connection: RedisConnection,
        prefix: impl Into<String>,
        failure_mode: FailureMode,
        deadline: Duration,
    ) -> RedisLink {
        RedisLink {
            connection,
            prefix: prefix.into(),
            failure_mode,
            deadline,
        }
    }

    /// A clone of the connection, to call on.
    pub fn connection(&self) -> RedisConnection {
        self.connection.clone()
    }

    /// The backend's key prefix (`CACHE_KEY_PREFIX`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// What a failing call does (`--store-failure`).
    pub fn failure_mode(&self) -> FailureMode {
        self.failure_mode
    }

    /// The bound on one call (`REDIS_TIMEOUT`).
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}
