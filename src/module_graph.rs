//! A test of the architecture: the modules of `src/` (a directory counts as one module, but the
//! folders of concerns, `GROUPS`, only hold modules) use each other without a cycle, so that each
//! can be read, changed and tested knowing only what it uses. Dependencies are read from
//! `crate::` paths in the source, tests excluded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The folders that group modules by concern (src/lib.rs names their modules at the crate's
/// root too).
const GROUPS: [&str; 4] = ["coordination", "durability", "postgres", "surface"];

/// Module -> the modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let rel = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let mut parts = rel.split('/');
        let mut module = parts.next().unwrap().trim_end_matches(".rs");
        if GROUPS.contains(&module) {
            module = parts.next().unwrap().trim_end_matches(".rs");
        }
        let module = module.to_string();
        if !rel.ends_with(".rs") || ["lib", "module_graph", "mod"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let uses = graph.entry(module.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let mut rest = &code[at + "crate::".len()..];
            if let Some(group) = GROUPS.iter().find(|g| rest.starts_with(&format!("{g}::"))) {
                rest = &rest[group.len() + 2..];
            }
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(list) => list[..list.find('}').unwrap()].split(',').collect(),
                None => vec![rest],
            };
            for name in names {
                let name: String = name
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module && name != "pg_tests" {
                    uses.insert(name);
                }
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for next in graph.get(path.last().unwrap()).into_iter().flatten() {
        if next == start {
            return Some(path.clone());
        }
        if !path.contains(next) {
            path.push(next.clone());
            if let Some(cycle) = cycle_from(graph, start, path) {
                return Some(cycle);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn modules_use_each_other_without_cycles() {
    let graph = graph();
    assert!(graph.len() > 10, "the source was not found: {graph:?}");
    for start in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, start, &mut vec![start.clone()]) {
            panic!("import cycle: {} -> {start}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_core_crate_needs_no_postgresql() {
    // core/ (layouts, the clock rule, marks, pacing, the state file) is what `make check` tests
    // in seconds: the compiler keeps PostgreSQL out of it as long as its manifest names no pgrx,
    // and nothing that builds against a server.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("core/Cargo.toml");
    let manifest = std::fs::read_to_string(path).unwrap();
    let section = manifest.split("[dependencies]").nth(1).unwrap_or_default();
    let section = section.split("\n[").next().unwrap_or_default();
    for line in section.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name = line.split('=').next().unwrap_or_default().trim();
        assert_eq!(name, "libc", "core/ depends on {name}: it must build without PostgreSQL");
    }
}
