//! Load shedding.

pub mod system;
