//! The one Lua script of the Redis store, assembled from the registry: the prelude,
//! each kind's source as its algorithm names it ([`RuleKind::script`]), and the
//! driver.

use std::fmt::Write;
use std::time::Duration;

use super::super::rule::RuleKind;
use crate::algorithm::script::{too_long, MAX_SCRIPT_MICROS};
use crate::error::ConfigError;
use crate::sync::unmodeled::OnceLock;

const PRELUDE: &str = include_str!("scripts/prelude.lua");
const DRIVER: &str = include_str!("scripts/driver.lua");

/// The script's source, assembled once.
///
/// Redis runs the whole script on every `EVALSHA`, so a file at the top level is
/// defined again on every call, whatever the call decides: defining all of them cost
/// more than a GCRA decision itself (`benches/README.md`, Redis throughput). So each
/// kind's source is wrapped in a function that defines it, run only when a call
/// looks up that kind (`ALGORITHMS`' `__index`), once per call at most. Kinds whose
/// algorithms name the same source (a file that registers several) share one
/// function.
pub(crate) fn source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(assemble)
}

fn assemble() -> String {
    let mut script = String::with_capacity(64 * 1024);
    script.push_str(PRELUDE);
    script.push_str("\n-- Every algorithm is defined on first use, by the call that needs it.\n");
    script.push_str("local DEFINE = {}\n");
    let mut defined: Vec<RuleKind> = Vec::new();
    for &kind in RuleKind::ALL {
        let name = kind.name();
        match defined.iter().find(|first| first.script() == kind.script()) {
            Some(first) => {
                let _ = writeln!(script, "DEFINE.{name} = DEFINE.{}", first.name());
            }
            None => {
                let _ = writeln!(script, "DEFINE.{name} = function()");
                script.push_str(kind.script());
                script.push_str("end\n");
                defined.push(kind);
            }
        }
    }
    script.push_str(concat!(
        "setmetatable(ALGORITHMS, {__index = function(algorithms, kind)\n",
        "  local define = DEFINE[kind]\n",
        "  if define == nil then\n",
        "    return nil\n",
        "  end\n",
        "  define()\n",
        "  return rawget(algorithms, kind)\n",
        "end})\n\n",
    ));
    script.push_str(DRIVER);
    script
}

/// An explicit decision time, µs since the Unix epoch: at most 2^52 µs (the year
/// 2112), so that it and a rule's spans sum exactly in the script's doubles.
pub(crate) fn script_time(at: Duration) -> Result<u64, ConfigError> {
    u64::try_from(at.as_micros())
        .ok()
        .filter(|&us| us <= MAX_SCRIPT_MICROS)
        .ok_or(too_long("at", MAX_SCRIPT_MICROS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of the function that `DEFINE.<kind>` names in the script (following
    /// an alias).
    fn definition_of(kind: &str) -> &'static str {
        let script = source();
        let entry = format!("\nDEFINE.{kind} = ");
        let at = script
            .find(&entry)
            .unwrap_or_else(|| panic!("no DEFINE.{kind}"))
            + entry.len();
        let rest = &script[at..];
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
    fn every_kind_is_defined_on_first_use_by_its_own_source() {
        for &kind in RuleKind::ALL {
            let definition = definition_of(kind.name());
            assert!(
                definition.contains(&format!("ALGORITHMS.{} =", kind.name())),
                "{kind} is not registered where DEFINE says"
            );
            assert!(definition.starts_with(kind.script()), "{kind}");
        }
    }

    #[test]
    fn kinds_sharing_a_source_share_one_definition() {
        let wrapped = source().matches("= function()\n").count();
        let mut sources: Vec<&str> = RuleKind::ALL.iter().map(|k| k.script()).collect();
        sources.sort_unstable();
        sources.dedup();
        assert_eq!(wrapped, sources.len(), "one function per distinct source");
        assert_eq!(
            definition_of("fixed_window_first_hit"),
            definition_of("fixed_window")
        );
        assert_eq!(
            definition_of("smooth_warming_up"),
            definition_of("smooth_bursty")
        );
    }

    #[test]
    fn the_script_is_prelude_definitions_then_driver() {
        let script = source();
        assert!(script.starts_with(PRELUDE));
        assert!(script.ends_with(DRIVER));
        for &kind in RuleKind::ALL {
            assert!(script.contains(kind.script()), "{kind}");
        }
    }
}
