//! Limits shared by many processes through a store (feature `redis`).
//!
//! [`RedisGcra`] runs the [`Gcra`](crate::algorithm::Gcra) state machine as a Lua script
//! inside Redis, atomically, on the server's clock.

mod redis;

pub use self::redis::{RedisGcra, StoreError};
