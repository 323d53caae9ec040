//! What an algorithm's Redis twin is sent: its parameters as numbers, in microseconds
//! where they are times, checked to be exact as Lua's doubles. Each algorithm encodes
//! its own in its [`Facts::script_args`](super::Facts::script_args).

use std::time::Duration;

use crate::error::ConfigError;

/// One parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Arg {
    Int(u64),
    Float(f64),
}

impl Arg {
    /// The text Lua's `tonumber` reads back as the same number.
    #[cfg_attr(not(any(feature = "redis", test)), allow(dead_code))]
    pub(crate) fn to_text(self) -> String {
        match self {
            Arg::Int(v) => v.to_string(),
            // `{:?}` prints the shortest text that reads back as the same double.
            Arg::Float(v) => format!("{v:?}"),
        }
    }
}

/// The largest integer a Lua script computes with exactly, with a margin: times are
/// sums of `now` (µs since the epoch, below 2^51 until 2041… and 2^52 until 2112) and
/// a rule's spans, so spans are held to 2^52 µs (about 142 years).
pub(crate) const MAX_SCRIPT_MICROS: u64 = 1 << 52;

/// What bounds the times the scripts hold, in a [`ConfigError::TooLong`]'s words.
pub(crate) const SCRIPT_ARITHMETIC: &str =
    "the Redis scripts' arithmetic (whole microseconds, exact in a double)";

/// The error of a time longer than `max_micros` for the scripts.
pub(crate) fn too_long(parameter: &'static str, max_micros: u64) -> ConfigError {
    ConfigError::TooLong {
        parameter,
        max: Duration::from_micros(max_micros),
        within: SCRIPT_ARITHMETIC,
    }
}

/// `d` in whole microseconds, or why the script cannot hold it: first whether it is
/// too long (a duration past 2^52 µs has no whole-µs form worth asking for), then
/// whether it is whole.
pub(crate) fn whole_micros(d: Duration, parameter: &'static str) -> Result<u64, ConfigError> {
    let us = u64::try_from(d.as_micros())
        .ok()
        .filter(|&us| us <= MAX_SCRIPT_MICROS)
        .ok_or(too_long(parameter, MAX_SCRIPT_MICROS))?;
    if d.subsec_nanos() % 1_000 != 0 {
        return Err(ConfigError::OutOfRange {
            parameter,
            expected: "a whole number of microseconds (the Redis scripts count in µs)",
        });
    }
    Ok(us)
}

/// A count the script holds exactly.
pub(crate) fn exact_count(v: u64, parameter: &'static str) -> Result<u64, ConfigError> {
    if v <= MAX_SCRIPT_MICROS {
        Ok(v)
    } else {
        Err(ConfigError::Overflow { parameter })
    }
}
