//! Waiting for permits: the FIFO waiter queue and the futures that wait in it.

pub(crate) mod future;
pub(crate) mod gate;
pub(crate) mod per_key;
pub(crate) mod queue;
pub(crate) mod round_trip;
mod slot;

pub use queue::Fairness;
