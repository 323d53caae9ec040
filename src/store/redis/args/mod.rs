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

/// An explicit decision time, µs since the Unix epoch: at most 2^52 µs (the year
/// 2112), so that it and a rule's spans sum exactly in the script's doubles.
pub(crate) fn script_time(at: Duration) -> Result<u64, ConfigError> {
    u64::try_from(at.as_micros())
        .ok()
        .filter(|&us| us <= MAX_SCRIPT_MICROS)
        .ok_or(too_long("at", MAX_SCRIPT_MICROS))
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

/// The one script: the prelude, GCRA, every other algorithm file wrapped in a function
/// that defines it, and the driver.
///
/// Redis runs the whole script on every `EVALSHA`, so a file at the top level is
/// defined again on every call, whatever the call decides: defining all of them cost
/// more than a GCRA decision itself (`benches/README.md`, Redis throughput). A wrapped
/// file is defined only when a call looks up one of its kinds (`ALGORITHMS`'
/// `__index`), and once per call at most. GCRA stays at the top level: the leaky
/// bucket is built from its functions. The files are the same; what a call decides
/// is the same.
pub(crate) const SCRIPT: &str = concat!(
    include_str!("../lua/prelude.lua"),
    include_str!("../lua/gcra.lua"),
    "\n-- Every other algorithm is defined on first use, by the call that needs it.\n",
    "local DEFINE = {}\n",
    "DEFINE.leaky_bucket = function()\n",
    include_str!("../lua/leaky_bucket.lua"),
    "end\n",
    "DEFINE.fixed_window = function()\n",
    include_str!("../lua/fixed_window.lua"),
    "end\n",
    "DEFINE.fixed_window_first_hit = DEFINE.fixed_window\n",
    "DEFINE.sliding_log = function()\n",
    include_str!("../lua/sliding_log.lua"),
    "end\n",
    "DEFINE.sliding_counter = function()\n",
    include_str!("../lua/sliding_counter.lua"),
    "end\n",
    "DEFINE.smooth_bursty = function()\n",
    include_str!("../lua/smooth.lua"),
    "end\n",
    "DEFINE.smooth_warming_up = DEFINE.smooth_bursty\n",
    "DEFINE.refresh_period = function()\n",
    include_str!("../lua/refresh_period.lua"),
    "end\n",
    "DEFINE.concurrency = function()\n",
    include_str!("../lua/concurrency.lua"),
    "end\n",
    "setmetatable(ALGORITHMS, {__index = function(algorithms, kind)\n",
    "  local define = DEFINE[kind]\n",
    "  if define == nil then\n",
    "    return nil\n",
    "  end\n",
    "  define()\n",
    "  return rawget(algorithms, kind)\n",
    "end})\n\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of `SCRIPT` that defines `kind`: GCRA's file at the top level, or the
    /// body of the function that `DEFINE.<kind>` names (following an alias).
    fn definition_of(kind: &str) -> &'static str {
        if kind == rule_kind::Gcra {
            let start = SCRIPT.find("ALGORITHMS.gcra =").expect("gcra");
            let end = SCRIPT.find("local DEFINE = {}").expect("DEFINE");
            return &SCRIPT[start..end];
        }
        let entry = format!("\nDEFINE.{kind} = ");
        let at = SCRIPT
            .find(&entry)
            .unwrap_or_else(|| panic!("no DEFINE.{kind}"))
            + entry.len();
        let rest = &SCRIPT[at..];
        if let Some(alias) = rest.strip_prefix("DEFINE.") {
            let other = &alias[..alias.find('\n').expect("a line")];
            return definition_of(other);
        }
        let body = rest.strip_prefix("function()\n").expect("a function");
        let end = ["\nDEFINE.", "\nsetmetatable(ALGORITHMS"]
            .iter()
            .filter_map(|marker| body.find(marker))
            .min()
            .expect("the end of the function");
        &body[..end]
    }

    #[test]
    fn every_kind_is_defined_at_the_top_or_on_first_use() {
        for kind in _KINDS {
            let registers = format!("ALGORITHMS.{kind} =");
            assert!(
                definition_of(kind).contains(&registers),
                "{kind} is not registered where DEFINE says"
            );
        }
        let wrapped = SCRIPT.matches("= function()\n").count();
        assert_eq!(wrapped, 7, "one function per file but GCRA's");
    }

    #[test]
    fn every_algorithm_file_is_in_the_script() {
        for file in [
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
        ] {
            assert!(SCRIPT.contains(file));
        }
    }
}
