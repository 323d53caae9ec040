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
            "shed",
        ],
    ),
    ("wait", &["wait"]),
    ("observe", &["observe"]),
    ("engine", &["engine", "table"]),
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

/// The file's code without comments and without a trailing `#[cfg(test)]` module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
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
                    ',' if depth == 0 => at_start = true,
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
}

/// The file's code without comments (doc examples included); tests kept.
fn code_without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
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
