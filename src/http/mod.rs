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
//! [`shed`] (feature `shed`) is load shedding by criticality class: a server layer
//! answering 503 with `Retry-After` to the classes a [`Shedder`] sheds, and a client
//! layer passing a request's class on to the calls it makes. [`adaptive`] (feature
//! `adaptive`) holds server and client layers to an adaptive concurrency limit.
//!
#![cfg_attr(feature = "shed", doc = "[`Shedder`]: crate::shed::Shedder")]
// Without their features, the names go to the list of features.
#![cfg_attr(
    not(feature = "shed"),
    doc = "[`shed`]: crate#features",
    doc = "[`Shedder`]: crate#features"
)]
#![cfg_attr(not(feature = "adaptive"), doc = "[`adaptive`]: crate#features")]

#[cfg(feature = "adaptive")]
pub mod adaptive;
mod body;
pub mod client;
mod key;
mod limits;
pub mod server;
#[cfg(feature = "shed")]
pub mod shed;
pub mod wire;

pub use key::{
    ClientIp, ForwardedHeader, Global, HeaderKey, InvalidNetwork, Key, KeyError, KeyExtractor,
};
pub use limits::{
    CheckError, CheckFuture, DescribeLimits, KeyedLimits, Limits, Policies, Policy, Verdict,
};
