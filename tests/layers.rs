//! The crate's layers import one way: integration → façade → wait → engine →
//! algorithm → time. This test reads `src/`, finds every module's imports of other
//! top-level modules (`crate::x` in code, and `use crate::{x, ..}`), and fails on an
//! import that goes up a layer or on any cycle between top-level modules.
//!
//! `cargo test --test layers -- --nocapture` prints the graph it checked.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Top to bottom; a module may import its own layer (without cycles) and those below.
const LAYERS: &[(&str, &[&str])] = &[
    ("integration", &["http", "config", "shape"]),
    (
        "façade",
        &[
            "limiter",
            "keyed",
            "semaphore",
            "leaky_queue",
            "store",
            "permits",
            "adaptive",
            "outbound",
            "shed",
        ],
    ),
    ("wait", &["wait"]),
    ("engine", &["engine", "table"]),
    // Below the engine: its `Core` reports to a limiter's events, and observe imports
    // only the vocabulary below it.
    ("observe", &["observe"]),
    ("algorithm", &["algorithm"]),
    (
        "time and vocabulary",
        &["time", "decision", "error", "quota", "units", "sync"],
    ),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The file's code without comments, string contents or `#[cfg(test)]` inline modules
/// (`mod tests { .. }`, wherever they stand). A `#[cfg(test)] mod tests;` declaration
/// stays, and so does the code after it: its file is scanned on its own.
fn code_of(text: &str) -> String {
    without_test_modules(&code_without_comments(text))
}

/// `code` without the inline modules gated by `#[cfg(test)]`. `code` has no comments
/// or string contents, so the braces counted are the code's own.
fn without_test_modules(code: &str) -> String {
    const GATE: &str = "#[cfg(test)]";
    let mut kept = String::new();
    let mut rest = code;
    while let Some(i) = rest.find(GATE) {
        let after = &rest[i + GATE.len()..];
        let Some(body) = inline_module_body(after) else {
            // Another gated item, or a `mod tests;` declaration: kept.
            kept.push_str(&rest[..i + GATE.len()]);
            rest = after;
            continue;
        };
        kept.push_str(&rest[..i]);
        let mut depth = 0;
        let end = body
            .char_indices()
            .find_map(|(j, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(j + 1)
            })
            .unwrap_or(body.len());
        rest = &body[end..];
    }
    kept.push_str(rest);
    kept
}

/// The text from the opening brace of `#[..] pub(..) mod name {` (attributes and
/// visibility optional) at the start of `item`, or `None` if `item` is not an inline
/// module.
fn inline_module_body(item: &str) -> Option<&str> {
    let mut item = item.trim_start();
    while let Some(attribute) = item.strip_prefix("#[") {
        item = attribute.split_once(']')?.1.trim_start();
    }
    if let Some(public) = item.strip_prefix("pub") {
        item = public.trim_start();
        if let Some(scope) = item.strip_prefix('(') {
            item = scope.split_once(')')?.1.trim_start();
        }
    }
    let named = item.strip_prefix("mod")?;
    if !named.starts_with(char::is_whitespace) {
        return None;
    }
    let named = named.trim_start();
    let name_end = named
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(named.len());
    let body = named[name_end..].trim_start();
    (name_end > 0 && body.starts_with('{')).then_some(body)
}

/// Top-level modules named after `crate::` in `code`, including those listed in
/// `use crate::{a::X, b}` groups.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // One level of braces: the names at depth 0 of the group.
            let mut depth = 0;
            let mut name = String::new();
            let mut at_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        // A name standing alone (`crate::{Quota, time}`) ends here.
                        if !name.is_empty() {
                            found.insert(std::mem::take(&mut name));
                        }
                        at_start = true;
                    }
                    c if depth == 0 && at_start && (c.is_alphanumeric() || c == '_') => {
                        name.push(c)
                    }
                    _ if !name.is_empty() => {
                        found.insert(std::mem::take(&mut name));
                        at_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The crate root's re-exports: `name -> module` for every `pub use module::name`.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for statement in code_of(lib).split(';') {
        let Some(path) = statement.split("pub use ").nth(1) else {
            continue;
        };
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let rest = rest.trim_start_matches('{').trim_end_matches('}');
        for name in rest.split(',') {
            let name = name.trim().rsplit("::").next().unwrap_or("");
            if !name.is_empty() {
                names.insert(name.to_string(), module.to_string());
            }
        }
    }
    names
}

/// `module -> modules it imports`, over the crate's top-level modules.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let roots = root_names(&fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.iter().next().unwrap().to_str().unwrap();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue; // The root declares and re-exports; it is not a layer.
        }
        let code = code_of(&fs::read_to_string(&file).unwrap());
        let entry = graph.entry(module.clone()).or_default();
        for imported in imports(&code) {
            // `crate::Limiter` is `crate::limiter::Limiter`.
            let imported = roots.get(&imported).cloned().unwrap_or(imported);
            if imported != module {
                entry.insert(imported);
            }
        }
    }
    graph
}

#[test]
fn every_module_has_a_layer() {
    let unknown: Vec<String> = graph()
        .keys()
        .filter(|m| layer_of(m).is_none())
        .cloned()
        .collect();
    assert!(unknown.is_empty(), "modules with no layer: {unknown:?}");
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let graph = graph();
    let mut upward = Vec::new();
    for (module, imported) in &graph {
        println!("{module} -> {imported:?}");
        let Some(own) = layer_of(module) else {
            continue;
        };
        for other in imported {
            if let Some(theirs) = layer_of(other) {
                if theirs < own {
                    upward.push(format!(
                        "{module} ({}) imports {other} ({})",
                        LAYERS[own].0, LAYERS[theirs].0
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that go up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = graph();
    // Depth-first search, reporting the first cycle found.
    fn walk(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = walk(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(cycle) = walk(module, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_scanner_reads_groups_and_paths() {
    let code = "use crate::{decision::{A, B}, time::Nanos};\nlet x = crate::sync::Arc::new(1);";
    let found: Vec<String> = imports(code).into_iter().collect();
    assert_eq!(found, ["decision", "sync", "time"]);
    let found: Vec<String> = imports("use crate::{KeyedConfig, Quota,\n    time};")
        .into_iter()
        .collect();
    assert_eq!(found, ["KeyedConfig", "Quota", "time"]);
}

#[test]
fn the_scanner_reads_past_a_test_module_declaration_and_skips_inline_test_modules() {
    let file = "use crate::time::Nanos;\n\
                #[cfg(test)]\nmod tests;\n\
                use crate::decision::Decision;\n\
                #[cfg(test)]\npub(crate) mod tests {\n    use crate::limiter::Limiter;\n    \
                fn brace() -> char { '}' }\n}\n\
                use crate::sync::Arc;\n";
    let found: Vec<String> = imports(&code_of(file)).into_iter().collect();
    assert_eq!(found, ["decision", "sync", "time"]);
}

#[test]
fn the_scanner_skips_block_comments_but_not_strings_that_look_like_one() {
    let file = "/* use crate::http::A; /* nested */ crate::keyed::B; */\n\
                let glob = \"/api/*\"; let quote = '\"';\n\
                use crate::time::Nanos;\n\
                let raw = r#\"*/ crate::shed \"#;\n\
                /** crate::wait */ use crate::sync::Arc;";
    let found: Vec<String> = imports(&code_of(file)).into_iter().collect();
    assert_eq!(found, ["sync", "time"]);
}

/// The file's code without comments (`//` and nested `/* */`, doc comments and their
/// examples included) and without the contents of string and character literals, so
/// that neither a comment nor a `"/*"` or `'{'` is read as code; tests kept.
fn code_without_comments(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        match chars[i] {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while i < chars.len() {
                    match (chars[i], chars.get(i + 1).copied()) {
                        ('/', Some('*')) => {
                            depth += 1;
                            i += 2;
                        }
                        ('*', Some('/')) => {
                            depth -= 1;
                            i += 2;
                            if depth == 0 {
                                break;
                            }
                        }
                        (c, _) => {
                            if c == '\n' {
                                code.push('\n');
                            }
                            i += 1;
                        }
                    }
                }
                code.push(' ');
            }
            '"' => {
                i = end_of_string(&chars, i + 1, None);
                code.push_str("\"\"");
            }
            '\'' if next == Some('\\') || chars.get(i + 2) == Some(&'\'') => {
                // A character literal (past `'\\x` if escaped, `'x` if not);
                // otherwise a lifetime or a label, kept.
                i += if next == Some('\\') { 3 } else { 2 };
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                code.push_str("' '");
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
                let raw = matches!(word.as_str(), "r" | "br" | "cr")
                    && chars.get(i + hashes) == Some(&'"');
                if raw {
                    i = end_of_string(&chars, i + hashes + 1, Some(hashes));
                    code.push_str("\"\"");
                } else {
                    code.push_str(&word);
                }
            }
            c => {
                code.push(c);
                i += 1;
            }
        }
    }
    code
}

/// Where the string literal whose contents start at `start` ends, past its closing
/// quote: `raw` gives a raw string's count of hashes (it has no escapes).
fn end_of_string(chars: &[char], start: usize, raw: Option<usize>) -> usize {
    let hashes = raw.unwrap_or(0);
    let closes = |i: usize| chars[i + 1..].iter().take_while(|&&c| c == '#').count() >= hashes;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' if raw.is_none() => i += 2,
            '"' if closes(i) => return i + 1 + hashes,
            _ => i += 1,
        }
    }
    chars.len()
}

/// Whether `code` names `std::sync`, as a path or in a `use std::{.., sync, ..}` group.
fn names_std_sync(code: &str) -> bool {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.contains("std::sync") {
        return true;
    }
    code.match_indices("std::{").any(|(i, _)| {
        let group = &code[i + "std::{".len()..];
        let mut depth = 0;
        let mut at_start = true;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => return false,
                '}' => depth -= 1,
                ',' if depth == 0 => at_start = true,
                _ if depth == 0 && at_start => {
                    if group[j..].starts_with("sync") {
                        let after = group[j + 4..].chars().next();
                        if !after.is_some_and(|a| a.is_alphanumeric() || a == '_') {
                            return true;
                        }
                    }
                    at_start = false;
                }
                _ => {}
            }
        }
        false
    })
}

/// Crate code takes its atomics, locks and `Arc` from `src/sync.rs`, so that loom can
/// swap them in one place: no other file names `std::sync` (outside comments).
#[test]
fn only_sync_rs_imports_std_sync() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut offenders: Vec<String> = files
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(&src).unwrap();
            let name = relative.to_str().unwrap().replace('\\', "/");
            (name, file)
        })
        .filter(|(name, _)| name != "sync.rs")
        .filter(|(_, file)| {
            names_std_sync(&code_without_comments(&fs::read_to_string(file).unwrap()))
        })
        .map(|(name, _)| format!("src/{name}"))
        .collect();
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "files importing std::sync instead of crate::sync:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_std_sync_scanner_reads_paths_and_groups_but_not_comments() {
    assert!(names_std_sync("use std::sync::Arc;"));
    assert!(names_std_sync("let m = std :: sync::Mutex::new(1);"));
    assert!(names_std_sync("use std::{fmt, sync::{Arc, Mutex}};"));
    assert!(names_std_sync("use std::{sync, fmt};"));
    assert!(!names_std_sync("use std::{fmt, synchronise};"));
    assert!(!names_std_sync(
        "use crate::sync::Arc; use tokio::sync::oneshot;"
    ));
    assert!(!names_std_sync(&code_without_comments(
        "/// use std::sync::Arc;\n//! std::sync\nlet x = 1; // std::sync"
    )));
}
