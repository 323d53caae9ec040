//! The Lua of the Redis store, assembled from the registry: the prelude, the sources
//! of some kinds ([`RuleKind::script`]), and the driver. As scripts, for `EVALSHA`: a
//! request runs the script of the kinds its rules use, and nothing else. As the
//! library of Redis Functions, for `FCALL`: every kind, defined once when it is
//! loaded.

use std::time::Duration;

use redis::Script;

use crate::algorithm::RuleKind;
use crate::algorithm::script::{MAX_SCRIPT_MICROS, too_long};
use crate::error::ConfigError;
use crate::sync::unmodeled::OnceLock;

const PRELUDE: &str = include_str!("scripts/prelude.lua");
const DRIVER: &str = include_str!("scripts/driver.lua");
const GCRA_FAST: &str = include_str!("scripts/gcra_fast.lua");

/// A set of kinds, one bit per [`RuleKind::ALL`] index.
pub(crate) type Kinds = u32;

const KIND_COUNT: usize = RuleKind::ALL.len();

/// Every kind.
pub(crate) const ALL_KINDS: Kinds = (1 << KIND_COUNT) - 1;

/// The bit of `kind`.
pub(crate) fn bit(kind: RuleKind) -> Kinds {
    let index = RuleKind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("every kind is in ALL");
    1 << index
}

/// The kinds in `kinds`.
pub(crate) fn kinds_of(kinds: &[RuleKind]) -> Kinds {
    kinds.iter().fold(0, |set, &kind| set | bit(kind))
}

/// The script that decides requests whose rules are all of `kinds`, assembled on first
/// use.
///
/// Redis runs the whole script on every `EVALSHA`, so every function a script defines
/// is made again on every call, whatever the call decides: defining every algorithm
/// cost more than a GCRA decision itself (`benches/README.md`, Redis throughput). So a
/// request's script defines only the algorithms its rules use, and one script per set
/// of kinds is loaded (by `NOSCRIPT` reload) as requests first use it. A set of one or
/// two kinds is what nearly every store meets. A script with GCRA first decides a
/// one-key GCRA acquire inline (`gcra_fast.lua`), before anything is defined.
pub(crate) fn for_kinds(kinds: Kinds) -> &'static Script {
    &assembled(kinds).1
}

/// The source of [`for_kinds`]'s script.
pub(crate) fn source_for(kinds: Kinds) -> &'static str {
    &assembled(kinds).0
}

fn assembled(kinds: Kinds) -> &'static (String, Script) {
    static SCRIPTS: [OnceLock<(String, Script)>; 1 << KIND_COUNT] =
        [const { OnceLock::new() }; 1 << KIND_COUNT];
    let kinds = kinds & ALL_KINDS;
    SCRIPTS[kinds as usize].get_or_init(|| {
        let source = assemble(kinds);
        let script = Script::new(&source);
        (source, script)
    })
}

/// The script of every kind, which decides any request.
pub(crate) fn source() -> &'static str {
    source_for(ALL_KINDS)
}

/// With GCRA, its inline acquire first; then the definitions of `kinds` and the call
/// of the driver.
fn assemble(kinds: Kinds) -> String {
    let mut script = String::with_capacity(64 * 1024);
    if kinds & bit(RuleKind::Gcra) != 0 {
        script.push_str(GCRA_FAST);
    }
    define(kinds, &mut script);
    script.push_str(RUN);
    script
}

/// How a script calls the driver, which a library registers instead.
const RUN: &str = "return run(KEYS, ARGV)\n";

/// The library of Redis Functions: every kind's algorithms and the driver, defined
/// when it is loaded (`FUNCTION LOAD`), and one function, named as the library, that
/// takes the keys and arguments a script takes and decides any request.
pub(crate) struct Library {
    pub(crate) name: String,
    pub(crate) source: String,
}

/// The library, assembled on first use.
pub(crate) fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let mut code = String::with_capacity(96 * 1024);
        // The inline GCRA acquire as a function (the verdict, or nothing to fall
        // through), after the locals it reads, run once.
        let (locals, block) = inline_acquire();
        code.push_str(locals);
        code.push_str("local function gcra_fast(KEYS, ARGV)\n");
        code.push_str(block);
        code.push_str("end\n");
        define(ALL_KINDS, &mut code);
        // Named after its code (a SHA1, as `EVALSHA` names a script): tollgate
        // versions sharing a server load libraries of their own side by side, where
        // one name for all would have each `FUNCTION LOAD REPLACE` swap the others'
        // code; processes of one version share one.
        let name = format!("tollgate_{}", Script::new(&code).get_hash());
        let source = format!(
            "#!lua name={name}\n{code}\nredis.register_function('{name}', function(keys, args)\n  \
             return gcra_fast(keys, args) or run(keys, args)\nend)\n"
        );
        Library { name, source }
    })
}

/// `gcra_fast.lua` cut before its block: its comments and line of locals, then the
/// block.
fn inline_acquire() -> (&'static str, &'static str) {
    let at = GCRA_FAST.find("\ndo\n").expect("gcra_fast.lua's block") + 1;
    GCRA_FAST.split_at(at)
}

/// The prelude, each distinct source of `kinds` in a block of its own (its locals stay
/// in it: sources that share one, as a leaky bucket's includes GCRA's, each have
/// theirs), then the driver's definitions.
fn define(kinds: Kinds, script: &mut String) {
    script.push_str(PRELUDE);
    script.push_str("\n-- The algorithms of this script's kinds.\n");
    let mut sources: Vec<&str> = Vec::new();
    for &kind in RuleKind::ALL {
        if kinds & bit(kind) != 0 && !sources.contains(&kind.script()) {
            sources.push(kind.script());
        }
    }
    for source in sources {
        script.push_str("do\n");
        script.push_str(source);
        script.push_str("end\n");
    }
    script.push('\n');
    script.push_str(DRIVER);
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

    #[test]
    fn a_script_defines_the_algorithms_of_its_kinds_and_no_other() {
        for &kind in RuleKind::ALL {
            let code = source_for(bit(kind));
            let rest = code.strip_prefix(GCRA_FAST).unwrap_or(code);
            assert_eq!(rest.len() < code.len(), kind == RuleKind::Gcra, "{kind}");
            assert!(rest.starts_with(PRELUDE), "{kind}");
            assert!(code.ends_with(&format!("{DRIVER}{RUN}")), "{kind}");
            assert!(code.contains(kind.script()), "{kind}");
            for &other in RuleKind::ALL {
                let registers = format!("ALGORITHMS.{} =", other.name());
                let shares =
                    other.script() == kind.script() || kind.script().contains(other.script());
                assert_eq!(
                    code.contains(&registers),
                    other == kind || shares,
                    "{kind} {other}"
                );
            }
        }
    }

    #[test]
    fn the_script_of_every_kind_holds_each_source_once() {
        let code = source();
        assert_eq!(code, source_for(ALL_KINDS));
        let mut sources: Vec<&str> = RuleKind::ALL.iter().map(|k| k.script()).collect();
        sources.sort_unstable();
        sources.dedup();
        // The inline GCRA acquire first, then one block per source.
        let rest = code
            .strip_prefix(GCRA_FAST)
            .expect("the inline GCRA acquire");
        assert_eq!(rest.matches("\ndo\n").count(), sources.len());
        for &kind in RuleKind::ALL {
            assert!(code.contains(kind.script()), "{kind}");
        }
    }

    /// `source` without its comments.
    fn code_of(source: &str) -> String {
        source
            .lines()
            .map(|line| line.split("--").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_library_defines_every_kind_and_registers_one_function_named_as_itself() {
        let library = library();
        let hash = library.name.strip_prefix("tollgate_").unwrap();
        assert_eq!(hash.len(), 40);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{hash}");
        let (first, code) = library.source.split_once('\n').unwrap();
        assert_eq!(first, format!("#!lua name={}", library.name));
        assert!(code.contains(PRELUDE) && code.contains(DRIVER));
        // The inline acquire's locals once, before its function; its block in it.
        let (locals, block) = inline_acquire();
        assert!(locals.trim_end().ends_with("redis_pcall") && block.starts_with("do\n"));
        assert!(code.starts_with(&format!(
            "{locals}local function gcra_fast(KEYS, ARGV)\n{block}end\n"
        )));
        for &kind in RuleKind::ALL {
            assert!(code.contains(kind.script()), "{kind}");
        }
        assert_eq!(code.matches("redis.register_function(").count(), 1);
        assert!(code.contains(&format!("redis.register_function('{}',", library.name)));
        assert!(std::ptr::eq(library, super::library()));
    }

    #[test]
    fn only_the_inline_acquire_reads_keys_and_argv_which_a_function_is_passed() {
        // A Redis Function has no KEYS or ARGV globals (reading one is an error): the
        // library passes them to the inline acquire as parameters of those names, and
        // to the driver's `run`.
        let mut sources = vec![PRELUDE, DRIVER];
        sources.extend(RuleKind::ALL.iter().map(|kind| kind.script()));
        for source in sources {
            let code = code_of(source);
            assert!(!code.contains("KEYS") && !code.contains("ARGV"), "{code}");
        }
    }

    #[test]
    fn the_library_is_named_after_its_code() {
        let library = library();
        let code = library
            .source
            .split_once('\n')
            .unwrap()
            .1
            .rsplit_once("\nredis.register_function(")
            .unwrap()
            .0;
        assert_eq!(
            library.name,
            format!("tollgate_{}", Script::new(code).get_hash())
        );
    }

    // The inline GCRA acquire (gcra_fast.lua) computes the tolerance as interval ×
    // burst instead of reading it: what GCRA's arguments must hold for it to decide
    // as the general code, which reads it.
    #[test]
    fn gcras_tolerance_argument_is_its_interval_times_its_burst() {
        use crate::Quota;
        use crate::algorithm::Gcra;
        use crate::algorithm::script::Arg;
        use crate::store::Rule;
        let quotas = [
            Quota::per_second(1_000).unwrap().burst(1_000).unwrap(),
            Quota::per_second(3).unwrap(),
            Quota::with_period(Duration::from_millis(7)).unwrap(),
            Quota::with_period(Duration::from_secs(86_400))
                .unwrap()
                .burst(9)
                .unwrap(),
            Quota::with_period(Duration::from_micros(1))
                .unwrap()
                .burst(1 << 40)
                .unwrap(),
        ];
        let mut checked = 0;
        for quota in quotas {
            // Quotas the script cannot count are refused before any call.
            let Ok(args) = Rule::from(Gcra::new(quota)).script_args() else {
                continue;
            };
            match args[..] {
                [Arg::Int(interval), Arg::Int(tolerance), Arg::Int(burst)] => {
                    assert_eq!(Some(tolerance), interval.checked_mul(burst), "{quota:?}");
                    assert!(tolerance <= 1 << 52, "{quota:?}");
                }
                _ => panic!("{quota:?}: {args:?}"),
            }
            checked += 1;
        }
        assert!(checked >= 4, "{checked}");
    }

    #[test]
    fn sets_of_kinds_have_scripts_of_their_own() {
        let gcra = for_kinds(bit(RuleKind::Gcra));
        let both = for_kinds(kinds_of(&[RuleKind::Gcra, RuleKind::SlidingLog]));
        assert_ne!(gcra.get_hash(), both.get_hash());
        assert!(std::ptr::eq(gcra, for_kinds(bit(RuleKind::Gcra))));
        let sliding_log = RuleKind::SlidingLog.script();
        assert!(
            source_for(kinds_of(&[RuleKind::Gcra, RuleKind::SlidingLog])).contains(sliding_log)
        );
        assert!(!source_for(bit(RuleKind::Gcra)).contains(sliding_log));
    }
}
