//! The crate's modules form a ladder: no module imports one that imports it.
//!
//! Vocabulary (limits, small shared types) sits at the bottom, the store (`db/`) at the
//! top, and every `use` points down. An import circle means two modules can only be
//! understood together; this test reads the crate's own sources and fails on the first
//! circle, naming its arrows, so the next one is caught the day it is written.
//!
//! What counts as an arrow: a `crate::a::…` path in module `b`'s code (comments and the
//! `#[cfg(test)] mod tests` at a file's end left out), drawn between top-level modules;
//! inside a folder of separate concepts (`sstable/`, `fs/`) also between its files
//! (`super::x` or `crate::sstable::x`). Both drawings must be free of circles. A folder's `mod.rs` is its face, and the files
//! of `db/` are one type cut by path, so arrows among those are not drawn.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Folders whose files are separate concepts, checked file against file.
const FINE_FOLDERS: &[&str] = &["sstable", "fs"];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// `src/sstable/block.rs` -> `["sstable", "block"]`; `src/db/mod.rs` -> `["db"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    parts
}

/// The unit a module is drawn as: its top-level module, or `folder::file` in a fine folder.
fn unit(path: &[String]) -> Option<String> {
    let top = path.first()?;
    if top == "lib" {
        return None;
    }
    match path.get(1) {
        Some(file) if FINE_FOLDERS.contains(&top.as_str()) => Some(format!("{top}::{file}")),
        _ => Some(top.clone()),
    }
}

/// A file's code without comments and without its trailing test module.
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path written after `prefix` (`crate::`, `super::`), expanding one level of
/// `{a, b::c}` groups: `crate::{x::A, y}` gives `x::A` and `y`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // `super::super::`, or part of a longer name
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(split_path(item.trim()));
            }
        } else {
            out.push(split_path(rest));
        }
    }
    out
}

fn split_path(s: &str) -> Vec<String> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(s.len());
    s[..end]
        .split("::")
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The longest prefix of `path` that names a module of the crate.
fn resolve(modules: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|p| modules.contains(p))
}

/// Draws the graph of a crate given as `(module path, source text)` pairs.
fn graph(files: &[(Vec<String>, String)]) -> Graph {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = Graph::new();
    for (module, text) in files {
        let Some(from) = unit(module) else { continue };
        let code = code_of(text);
        let parent = &module[..module.len().saturating_sub(1)];
        let targets = paths_after(&code, "crate::").into_iter().chain(
            paths_after(&code, "super::").into_iter().map(|p| {
                let mut full = parent.to_vec();
                full.extend(p);
                full
            }),
        );
        for target in targets {
            let Some(resolved) = resolve(&modules, &target) else {
                continue;
            };
            let Some(to) = unit(&resolved) else { continue };
            if to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// One circle of the graph as its arrows, or `None` if the graph has none.
fn find_circle(edges: &Graph) -> Option<Vec<(String, String)>> {
    // Depth-first search keeping the path; a back edge closes a circle.
    fn visit<'a>(
        node: &'a str,
        edges: &'a Graph,
        state: &mut BTreeMap<&'a str, bool>, // false: on the path; true: done
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<(String, String)>> {
        state.insert(node, false);
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(false) => {
                    let start = path.iter().position(|n| *n == next)?;
                    let mut ring: Vec<&str> = path[start..].to_vec();
                    ring.push(next);
                    return Some(
                        ring.windows(2)
                            .map(|w| (w[0].to_owned(), w[1].to_owned()))
                            .collect(),
                    );
                }
                Some(true) => {}
                None => {
                    if let Some(circle) = visit(next, edges, state, path) {
                        return Some(circle);
                    }
                }
            }
        }
        path.pop();
        state.insert(node, true);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node.as_str()) {
            if let Some(circle) = visit(node, edges, &mut state, &mut Vec::new()) {
                return Some(circle);
            }
        }
    }
    None
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(Vec<String>, String)> = paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("source file");
            (module_path(&src, p), text)
        })
        .collect();
    let edges = graph(&files);
    // The graph must be real, or an empty one would pass: the store reaches the tables.
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 20,
        "too few arrows found: {edges:?}"
    );
    for (granularity, edges) in [("file", edges.clone()), ("module", coarse(&edges))] {
        if let Some(circle) = find_circle(&edges) {
            let arrows: Vec<String> = circle.iter().map(|(a, b)| format!("{a} -> {b}")).collect();
            panic!(
                "import circle between {granularity}s: {}",
                arrows.join(", ")
            );
        }
    }
}

/// The same graph drawn between top-level modules only: `sstable::reader -> memtable`
/// and `memtable -> sstable` close a circle here though no two files import each other.
fn coarse(edges: &Graph) -> Graph {
    let top = |unit: &str| unit.split("::").next().unwrap_or(unit).to_owned();
    let mut out = Graph::new();
    for (from, tos) in edges {
        for to in tos {
            if top(from) != top(to) {
                out.entry(top(from)).or_default().insert(top(to));
            }
        }
    }
    out
}

#[test]
fn a_circle_through_a_group_import_is_found() {
    let file = |m: &[&str], text: &str| {
        (
            m.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            text.to_owned(),
        )
    };
    let files = vec![
        file(&["options"], "use crate::{types::MAX, filter_plan::Plan};"),
        file(&["filter_plan"], "use crate::options::Options;"),
        file(
            &["types"],
            "// use crate::options::Options; (a comment draws nothing)",
        ),
        file(&["sstable"], "pub use block::Block;"),
        file(&["sstable", "block"], "use super::format::LIMIT;"),
        file(
            &["sstable", "format"],
            "#[cfg(test)]\nmod tests { use super::super::block; }",
        ),
    ];
    let edges = graph(&files);
    let circle = find_circle(&edges).expect("options <-> filter_plan is a circle");
    let nodes: BTreeSet<&str> = circle.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(nodes, BTreeSet::from(["options", "filter_plan"]));
    assert!(edges["sstable::block"].contains("sstable::format"));
    assert!(!edges.contains_key("types"), "comments draw no arrow");
    assert!(
        !edges.contains_key("sstable::format"),
        "test modules draw no arrow"
    );

    let acyclic = vec![files[0].clone(), files[2].clone()];
    assert_eq!(find_circle(&graph(&acyclic)), None);

    // No two files import each other, but the modules do.
    let files = vec![
        file(&["memtable"], "use crate::sstable::Hit;"),
        file(&["sstable"], "pub use reader::Hit;"),
        file(&["sstable", "reader"], "use crate::memtable::READ_LATEST;"),
    ];
    let edges = graph(&files);
    assert_eq!(find_circle(&edges), None);
    assert!(find_circle(&coarse(&edges)).is_some());
}
