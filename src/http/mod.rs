//! tower middleware for HTTP (feature `http`): a server layer that answers 429 with
//! rate-limit headers, and a client layer that waits for permits and backs off when
//! the server says so.
//!
//! The server layer asks a [`Limits`] about each request: [`KeyedLimits`] (any
//! [`PermitSource`](crate::PermitSource) keyed by `str`: a
//! [`KeyedLimiter`](crate::KeyedLimiter) in process, a
//! [`SharedLimiter`](crate::store::SharedLimiter) over the memory store or Redis) or
//! the rules of a config file (feature `config`). Keys come from a
//! [`KeyExtractor`]: [`ClientIp`] (behind trusted proxies only), [`HeaderKey`],
//! [`Global`], or a closure. [`wire`] reads and writes the rate-limit fields.
//!
//! [`shed`] is load shedding by criticality class: a server layer answering 503 with
//! `Retry-After` to the classes a [`Shedder`](crate::shed::Shedder) sheds, and a
//! client layer passing a request's class on to the calls it makes.
//! [`adaptive`] holds server and client layers to an adaptive concurrency limit.

pub mod adaptive;
mod body;
pub mod client;
mod key;
mod limits;
pub mod server;
pub mod shed;
pub mod wire;

pub use key::{
    ClientIp, ForwardedHeader, Global, HeaderKey, InvalidNetwork, Key, KeyError, KeyExtractor,
};
pub use limits::{
    CheckError, CheckFuture, DescribeLimits, KeyedLimits, Limits, Policies, Policy, Verdict,
};
