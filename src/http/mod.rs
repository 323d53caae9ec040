//! tower middleware for HTTP (feature `http`): a server layer that answers 429 with
//! rate-limit headers, and a client layer that waits for permits and backs off when
//! the server says so.
//!
//! The server layer asks a [`Limits`] about each request: [`KeyedLimits`] (a
//! [`SharedLimiter`](crate::store::SharedLimiter) per key, over the memory store or
//! Redis) or the rules of a config file (feature `config`). Keys come from a
//! [`KeyExtractor`]: [`ClientIp`] (behind trusted proxies only), [`HeaderKey`],
//! [`Global`], or a closure. [`wire`] reads and writes the rate-limit fields.

pub mod client;
mod key;
mod limits;
pub mod server;
pub mod wire;

/// The old name of [`wire`], kept while `limits.rs`, `server/layer.rs` and
/// `benches/http.rs` still use it.
#[doc(hidden)]
pub use wire as headers;

pub use key::{
    ClientIp, ForwardedHeader, Global, HeaderKey, InvalidNetwork, Key, KeyError, KeyExtractor,
};
pub use limits::{CheckError, CheckFuture, KeyedLimits, Limits, Policies, Policy, Verdict};
