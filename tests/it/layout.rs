//! The crate's floor plan: no module imports a module that imports it back.
//!
//! Reads every file under `src/`, resolves its `use crate::…`, `use
//! super::…` and `use self::…` paths, and the `crate::…` and `super::…`
//! paths written in line in its code (`crate::cli::parse_duration(s)`), to
//! the module files they name, and fails on any cycle, naming it. A module may use what its own ancestors
//! define (the parent it is declared in is its context); every other
//! import must point one way, so that each layer can be read without the
//! ones above it. Test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// The module a file under `src/` defines: `src/core/limit.rs` is
/// `core::limit`, `src/wire.rs` is `wire`.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Every `.rs` file under `dir`.
pub(crate) fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The paths one `use` item names, braces expanded (`a::{b, c::d}`).
fn paths(item: &str) -> Vec<String> {
    let item: String = item.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = item.find('{') else { return vec![item.split(" as ").next().unwrap().to_owned()] };
    let prefix = item[..open].trim_end_matches("::").to_owned();
    let inner = &item[open + 1..item.rfind('}').unwrap_or(item.len())];
    let (mut out, mut depth, mut start) = (vec![prefix.clone()], 0, 0);
    for (i, c) in inner.char_indices().chain(std::iter::once((inner.len(), ','))) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let part = inner[start..i].trim();
                if !part.is_empty() && part != "self" {
                    out.extend(paths(&format!("{prefix}::{part}")));
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The longest known module a path names, from module `from`.
fn resolve(known: &BTreeSet<Module>, from: &Module, path: &str) -> Option<Module> {
    let mut segs = path.split("::").map(str::trim).peekable();
    let mut base: Module = match segs.peek().copied() {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("super") => {
            let mut b = from.clone();
            while segs.peek() == Some(&"super") {
                segs.next();
                b.pop();
            }
            b
        }
        Some("self") => {
            segs.next();
            from.clone()
        }
        _ => return None,
    };
    let mut best = known.contains(&base).then(|| base.clone());
    for seg in segs {
        base.push(seg.to_owned());
        if !known.contains(&base) {
            break;
        }
        best = Some(base.clone());
    }
    best
}

/// Whether a line starts a `use` statement (its paths are read by
/// `use_statements`, so the in-line reading skips it).
fn is_use_line(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("use ") || line.starts_with("pub use ") || (line.starts_with("pub(") && line.contains(") use "))
}

/// The item of every `use` statement in `text` (`pub` and `pub(…)` ones
/// too): what stands between `use` and `;`, from lines that start one.
fn use_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if current.is_none() {
            let rest = line
                .strip_prefix("pub ")
                .or_else(|| line.split_once(") ").filter(|(p, _)| p.starts_with("pub(")).map(|(_, r)| r));
            current = rest.unwrap_or(line).strip_prefix("use ").map(str::to_owned);
        } else if let Some(c) = current.as_mut() {
            c.push(' ');
            c.push_str(line);
        }
        if let Some(c) = current.take() {
            match c.split_once(';') {
                Some((item, _)) => out.push(item.to_owned()),
                None => current = Some(c),
            }
        }
    }
    out
}

/// The `crate::…` and `super::…` paths written in line in `text`, outside
/// `use` statements and comments: an import all the same.
fn inline_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        let code = line.split(" //").next().unwrap_or(line);
        for root in ["crate::", "super::"] {
            for (at, _) in code.match_indices(root) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let len = code[at..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(code.len() - at);
                out.push(code[at..at + len].trim_end_matches(':').to_owned());
            }
        }
    }
    out
}

/// Every module's imports of other modules, ancestors left out.
fn imports(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut all = Vec::new();
    files(root, &mut all);
    let known: BTreeSet<Module> = all.iter().map(|f| module_of(root, f)).collect();
    let mut graph = BTreeMap::new();
    for file in &all {
        let from = module_of(root, file);
        let text = std::fs::read_to_string(file).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let edges: &mut BTreeSet<Module> = graph.entry(from.clone()).or_default();
        let used = use_statements(text).iter().flat_map(|stmt| paths(stmt)).collect::<Vec<_>>();
        let not_use: String = text.lines().filter(|l| !is_use_line(l)).collect::<Vec<_>>().join("\n");
        for path in used.into_iter().chain(inline_paths(&not_use)) {
            let Some(to) = resolve(&known, &from, &path) else { continue };
            if to != from && !from.starts_with(&to) {
                edges.insert(to);
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &BTreeMap<Module, BTreeSet<Module>>, start: &Module) -> Option<Vec<Module>> {
    let mut stack = vec![(start.clone(), vec![start.clone()])];
    let mut seen = BTreeSet::new();
    while let Some((at, trail)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                return Some(trail.clone());
            }
            if seen.insert(next.clone()) {
                let mut t = trail.clone();
                t.push(next.clone());
                stack.push((next.clone(), t));
            }
        }
    }
    None
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&root);
    assert!(graph.len() > 50, "read the crate's modules: {}", graph.len());
    assert!(graph.values().map(BTreeSet::len).sum::<usize>() > 100, "found the crate's imports");
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            let names: Vec<String> = cycle.iter().chain(std::iter::once(module)).map(|m| m.join("::")).collect();
            panic!("a cycle of imports: {}", names.join(" -> "));
        }
    }
}

/// The check finds a cycle where there is one, and reads braces and `super`.
#[test]
fn the_check_sees_a_cycle_and_reads_nested_paths() {
    let mut graph = BTreeMap::new();
    let m = |s: &str| s.split("::").map(str::to_owned).collect::<Module>();
    graph.insert(m("core::a"), BTreeSet::from([m("core::b")]));
    graph.insert(m("core::b"), BTreeSet::from([m("core::a")]));
    assert!(cycle_from(&graph, &m("core::a")).is_some());
    assert_eq!(
        paths("super::{a::{B, C}, d as e, self}"),
        ["super", "super::a", "super::a::B", "super::a::C", "super::d"]
    );
    let text = "//! use of words\npub use a::{b,\n    c};\npub(crate) use super::d;\nfn f() {}\n";
    assert_eq!(use_statements(text), ["a::{b, c}", "super::d"]);
    let known = BTreeSet::from([m("core"), m("core::a"), m("core::b")]);
    assert_eq!(resolve(&known, &m("core::a"), "super::b::Thing"), Some(m("core::b")));
    let code = "    x(crate::cli::parse_duration(s)); // crate::wire::Ask\n/// crate::daemon\nlet y = super::b::f() + my_crate::z;\n";
    assert_eq!(inline_paths(code), ["crate::cli::parse_duration", "super::b::f"]);
}

/// The core's layers, bottom first: a module may import its own layer and
/// the ones below it, never one above. Time and the limit's terms at the
/// bottom; asks, key room and the peer terms; the kinds; the table of
/// limits; the peer node table, schedule and merge on top.
const CORE_LAYERS: &[&[&str]] = &[
    &["time", "limit", "lease_id"],
    &["ask", "room", "share", "inline_keys"],
    &["kinds", "claims", "store_lease"],
    &["locker"],
    &["peering"],
];

fn core_layer(module: &Module) -> Option<usize> {
    let room = module.get(1).filter(|_| module[0] == "core")?;
    CORE_LAYERS.iter().position(|layer| layer.contains(&room.as_str()))
}

#[test]
fn the_core_imports_only_downwards_and_no_kind_imports_another() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&root);
    let mut checked = 0;
    for (from, tos) in &graph {
        let Some(lf) = core_layer(from) else {
            assert!(from.len() < 2 || from[0] != "core", "{} is in no layer of the core", from.join("::"));
            continue;
        };
        for to in tos.iter().filter(|to| to.first().is_some_and(|t| t == "core") && to.len() > 1) {
            let lt = core_layer(to).unwrap_or_else(|| panic!("{} is in no layer of the core", to.join("::")));
            assert!(lt <= lf, "{} imports {}, a layer above it", from.join("::"), to.join("::"));
            if from.get(1).is_some_and(|r| r == "kinds") && to.get(1).is_some_and(|r| r == "kinds") {
                assert!(
                    to.len() < 3 || from.len() < 3 || from[2] == to[2],
                    "the kind {} imports another kind, {}",
                    from.join("::"),
                    to.join("::")
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "read the core's imports: {checked}");
}

/// Folders as units: collapsed to its top two levels (`core::kinds`,
/// `wire`, `daemon`), no folder imports one that imports it back.
#[test]
fn no_folder_imports_a_folder_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut folders: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let top = |m: &Module| m.iter().take(if m.first().is_some_and(|r| r == "core") { 2 } else { 1 }).cloned().collect();
    for (from, tos) in imports(&root) {
        let f: Module = top(&from);
        let edges = folders.entry(f.clone()).or_default();
        edges.extend(tos.iter().map(top).filter(|t: &Module| *t != f && !f.starts_with(t)));
    }
    assert!(folders.len() > 10, "read the crate's folders: {}", folders.len());
    for folder in folders.keys() {
        if let Some(cycle) = cycle_from(&folders, folder) {
            let names: Vec<String> = cycle.iter().chain(std::iter::once(folder)).map(|m| m.join("::")).collect();
            panic!("a cycle of imports between folders: {}", names.join(" -> "));
        }
    }
}

/// One convention for a module with children: `name.rs` beside `name/`,
/// never `name/mod.rs`, so that a file's name is its module's.
#[test]
fn a_module_with_children_is_a_file_beside_its_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&root, &mut all);
    let mod_rs: Vec<_> = all.iter().filter(|f| f.file_name().is_some_and(|n| n == "mod.rs")).collect();
    assert!(mod_rs.is_empty(), "move these to name.rs beside their folder: {mod_rs:?}");
    let mut folders = vec![root.clone()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                assert!(
                    path.with_extension("rs").is_file(),
                    "{} has no {}.rs beside it",
                    path.display(),
                    path.display()
                );
                folders.push(path);
            }
        }
    }
}
