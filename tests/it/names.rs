//! Names that explain themselves: no two types in the crate share a name.
//!
//! Reads every file under `src/` and lists the structs, enums, unions,
//! traits and type aliases it defines (associated types of an `impl` are
//! not definitions). Test modules are left out: a file declared with
//! `#[cfg(test)] mod …;` and an inline `#[cfg(test)] mod … { … }`, whose
//! helpers may reuse a name the crate uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::layout::files;

/// The files (and folders) of the test modules `file` declares as
/// `#[cfg(test)] mod name;`.
fn test_modules(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = match file.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "main" | "mod") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let declared = lines.windows(2).filter(|w| w[0].starts_with("#[cfg(test)]"));
    let names = declared.filter_map(|w| w[1].strip_prefix("mod ")?.strip_suffix(';'));
    names.flat_map(|name| [dir.join(format!("{name}.rs")), dir.join(name)]).collect()
}

/// The type name a line defines, if it defines one: `struct`, `enum`,
/// `union`, `trait` or `type`, with or without `pub(…)`. An indented
/// `type` without `pub` is an associated type, not a definition.
fn defined(line: &str) -> Option<&str> {
    let code = line.trim_start();
    let public = code.starts_with("pub");
    let rest = if public { code.split_once(' ').map_or(code, |(_, r)| r) } else { code };
    let (word, rest) = rest.split_once(' ')?;
    let associated = word == "type" && !public && line.starts_with(char::is_whitespace);
    if !matches!(word, "struct" | "enum" | "union" | "trait" | "type") || associated {
        return None;
    }
    let name = rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
    name.starts_with(char::is_uppercase).then_some(name)
}

/// The types `text` defines outside its inline `#[cfg(test)]` modules.
fn types_in(text: &str) -> Vec<&str> {
    let (mut depth, mut skip_below, mut under_cfg_test) = (0i64, None, false);
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or(line);
        if line.trim_start().starts_with("#[cfg(test)]") {
            under_cfg_test = true;
        } else if skip_below.is_none() {
            if under_cfg_test && code.contains('{') {
                skip_below = Some(depth);
            } else if !under_cfg_test {
                out.extend(defined(line));
            } else if !code.trim().is_empty() && !code.trim_start().starts_with("#[") {
                under_cfg_test = false; // an item under cfg(test) on one line
            }
        }
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if skip_below.is_some_and(|d| depth <= d) {
            (skip_below, under_cfg_test) = (None, false);
        }
    }
    out
}

/// Every type name defined more than once under `root`, with where.
fn collisions(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut all = Vec::new();
    files(root, &mut all);
    let texts: Vec<(PathBuf, String)> =
        all.into_iter().map(|f| (f.clone(), std::fs::read_to_string(f).unwrap())).collect();
    let tests: BTreeSet<PathBuf> = texts.iter().flat_map(|(f, t)| test_modules(f, t)).collect();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, text) in &texts {
        if tests.iter().any(|t| file.starts_with(t)) {
            continue;
        }
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        for name in types_in(text) {
            seen.entry(name.to_owned()).or_default().push(shown.clone());
        }
    }
    seen.retain(|_, places| places.len() > 1);
    seen
}

#[test]
fn no_two_types_in_the_crate_share_a_name() {
    let found = collisions(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let listed: Vec<String> = found.iter().map(|(name, places)| format!("{name}: {}", places.join(", "))).collect();
    assert!(found.is_empty(), "type names defined more than once:\n{}", listed.join("\n"));
}

#[test]
fn the_check_sees_a_second_definition_and_skips_tests_and_associated_types() {
    let text = "pub struct Held;\nimpl Iterator for X {\n    type Item = u8;\n}\n\
                #[cfg(test)]\nmod tests {\n    struct Held;\n}\npub(super) enum Outcome { A }\n";
    assert_eq!(types_in(text), ["Held", "Outcome"]);
    let dir = std::env::temp_dir().join(format!("locker-names-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("a.rs"), "#[cfg(test)]\nmod tests;\ntype Held = u8;\n").unwrap();
    std::fs::write(dir.join("a/tests.rs"), "struct Held;\n").unwrap();
    std::fs::write(dir.join("b.rs"), text).unwrap();
    let found = collisions(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.keys().collect::<Vec<_>>(), ["Held"], "a.rs and b.rs, not a/tests.rs");
    assert_eq!(found["Held"].len(), 2);
}
