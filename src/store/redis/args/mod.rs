//! Each rule's parameters as its script reads them: numbers, in microseconds where
//! they are times, checked to be exact as Lua's doubles.

use std::time::Duration;

use super::super::rule::{rule_kind, Rule};
use crate::error::ConfigError;

mod concurrency;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod refresh_period;
mod sliding_counter;
mod sliding_log;
mod smooth;

/// One parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Arg {
    Int(u64),
    Float(f64),
}

impl Arg {
    /// The text Lua's `tonumber` reads back as the same number.
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

/// `d` in whole microseconds, or why the script cannot hold it.
pub(crate) fn whole_micros(d: Duration, parameter: &'static str) -> Result<u64, ConfigError> {
    if d.subsec_nanos() % 1_000 != 0 {
        return Err(ConfigError::OutOfRange {
            parameter,
            expected: "a whole number of microseconds (the Redis scripts count in µs)",
        });
    }
    u64::try_from(d.as_micros())
        .ok()
        .filter(|&us| us <= MAX_SCRIPT_MICROS)
        .ok_or(ConfigError::Overflow { parameter })
}

/// A count the script holds exactly.
pub(crate) fn exact_count(v: u64, parameter: &'static str) -> Result<u64, ConfigError> {
    if v <= MAX_SCRIPT_MICROS {
        Ok(v)
    } else {
        Err(ConfigError::Overflow { parameter })
    }
}

/// The kind and parameters of `rule`.
pub(crate) fn rule_args(rule: &Rule) -> Result<(&'static str, Vec<Arg>), ConfigError> {
    let args = match rule {
        Rule::Gcra(a) => gcra::args(a)?,
        Rule::LeakyBucket(a) => leaky_bucket::args(a)?,
        Rule::FixedWindow(a) => fixed_window::args_aligned(a)?,
        Rule::FixedWindowFirstHit(a) => fixed_window::args_first_hit(a)?,
        Rule::SlidingLog(a) => sliding_log::args(a)?,
        Rule::SlidingCounter(a) => sliding_counter::args(a)?,
        Rule::SmoothBursty(a) => smooth::args_bursty(a)?,
        Rule::SmoothWarmingUp(a) => smooth::args_warming_up(a)?,
        Rule::RefreshPeriod(a) => refresh_period::args(a)?,
        Rule::Concurrency(a) => concurrency::args(a)?,
    };
    Ok((rule.kind(), args))
}

/// Every algorithm's script, in the order they are concatenated.
pub(crate) const SCRIPT: &str = concat!(
    include_str!("../lua/prelude.lua"),
    include_str!("../lua/gcra.lua"),
    include_str!("../lua/leaky_bucket.lua"),
    include_str!("../lua/fixed_window.lua"),
    include_str!("../lua/sliding_log.lua"),
    include_str!("../lua/sliding_counter.lua"),
    include_str!("../lua/smooth.lua"),
    include_str!("../lua/refresh_period.lua"),
    include_str!("../lua/concurrency.lua"),
    include_str!("../lua/driver.lua"),
);

#[allow(dead_code)]
const _KINDS: [&str; 10] = [
    rule_kind::Gcra,
    rule_kind::LeakyBucket,
    rule_kind::FixedWindow,
    rule_kind::FixedWindowFirstHit,
    rule_kind::SlidingLog,
    rule_kind::SlidingCounter,
    rule_kind::SmoothBursty,
    rule_kind::SmoothWarmingUp,
    rule_kind::RefreshPeriod,
    rule_kind::Concurrency,
];
