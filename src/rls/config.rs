//! envoyproxy/ratelimit's YAML config, read unchanged, and the matching of
//! a descriptor against it.
//!
//! A file holds one `domain` and a tree of `descriptors`; each node has a
//! `key`, an optional `value` (with `*` wildcards), an optional
//! `rate_limit` and nested `descriptors`. A descriptor (a list of entries)
//! matches as envoyproxy/ratelimit matches it: level by level, at each one
//! `key_value` first, then a wildcard value, then the bare `key`; a limit
//! applies only on the node of the descriptor's last entry. Each rate
//! limit becomes one locker limit (a fixed window of one `unit` unless the
//! extension fields say otherwise), named after the domain and the path to
//! it, and the entries' values make the key within it.
//!
//! This module reads files and answers lookups; it never touches a socket
//! or counts anything.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::proto::Unit;
use crate::core::{Algorithm, Limit, LimitError, Quota};

/// Why an RLS config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RlsConfigError {
    /// What is wrong in a file: where the YAML reader stopped, or which
    /// descriptor breaks a rule.
    #[error("{file}: {message}")]
    In { file: String, message: String },
    /// A folder without a config in it.
    #[error("{0}: no .yaml file in this folder")]
    Empty(String),
    /// A file or folder that could not be read.
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// The `rate_limit` block, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    requests_per_unit: u32,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    replaces: Vec<RawReplace>,
    /// Extensions the original ignores: the kind of limit, the window in
    /// seconds (any length, instead of one unit) and a token bucket's burst.
    #[serde(default)]
    algorithm: Option<String>,
    #[serde(default)]
    in_seconds: Option<f64>,
    #[serde(default)]
    burst: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReplace {
    #[serde(default)]
    name: String,
}

/// One node of the descriptor tree, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDescriptor {
    #[serde(default)]
    key: String,
    #[serde(default, deserialize_with = "scalar")]
    value: String,
    #[serde(default)]
    rate_limit: Option<RawRateLimit>,
    #[serde(default)]
    descriptors: Vec<RawDescriptor>,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    share_threshold: bool,
    /// Read and not used: they shape envoyproxy/ratelimit's metrics names.
    #[serde(default)]
    #[allow(dead_code)]
    detailed_metric: bool,
    #[serde(default)]
    #[allow(dead_code)]
    value_to_metric: bool,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<serde_norway::Value>,
}

/// A value written as a number or a boolean (`value: 500`) is its text.
fn scalar<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde_norway::Value;
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok(String::new()),
        _ => Err(serde::de::Error::custom("a value is a string")),
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<RawDescriptor>,
    /// An extension: a request's descriptors go, or none is charged.
    #[serde(default)]
    all_or_nothing: bool,
    /// An extension: a refused descriptor's hits are charged too, past the
    /// limit, as envoyproxy/ratelimit counts them.
    #[serde(default)]
    charge_refused: bool,
}

/// One configured rate limit: what the reply reports and the locker limit
/// that counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptorRule {
    /// The locker limit; `None` for an unlimited rule and for one of 0
    /// requests per unit (always over).
    pub limit: Option<Limit>,
    /// `rate_limit.name`, which `replaces` refers to.
    pub name: String,
    /// The locker limit's name (or the one it would have, for a rule
    /// that counts nothing): the rule's name in headers when it has no
    /// `name`.
    pub label: String,
    pub replaces: Vec<String>,
    pub unit: Unit,
    pub requests_per_unit: u32,
    pub unlimited: bool,
    pub shadow_mode: bool,
}

impl DescriptorRule {
    /// The window it counts in, in seconds.
    pub fn window_s(&self) -> f64 {
        self.limit.as_ref().map_or(unit_seconds(self.unit), Limit::in_seconds)
    }

    /// The name it goes by in headers: its `name`, else its label.
    pub fn shown_name(&self) -> &str {
        if self.name.is_empty() {
            &self.label
        } else {
            &self.name
        }
    }

    /// The most one ask may take: the limit's capacity.
    pub fn capacity(&self) -> u64 {
        match self.limit.as_ref().map(Limit::algorithm) {
            Some(Algorithm::TokenBucket { burst }) => u64::from(burst.get()),
            _ => u64::from(self.requests_per_unit),
        }
    }
}

/// A node of the loaded tree.
#[derive(Debug, Default, PartialEq)]
struct DescriptorNode {
    /// Children by `key` or `key_value` (the value may hold wildcards).
    children: HashMap<String, DescriptorNode>,
    /// The children whose value holds a `*`, in file order, with their
    /// `key_value` split at the stars.
    wildcards: Vec<(String, Vec<String>)>,
    rule: Option<usize>,
    share_threshold: bool,
}

/// Every loaded domain.
#[derive(Debug, Default, PartialEq)]
pub struct Table {
    domains: HashMap<String, DescriptorNode>,
    rules: Vec<DescriptorRule>,
    /// The domains whose descriptors go together or not at all.
    all_or_nothing: Vec<String>,
    /// The domains whose refused descriptors are charged their hits.
    charge_refused: Vec<String>,
}

/// What a descriptor matched: its rule and its key within the rule's limit.
#[derive(Debug, PartialEq)]
pub struct Found<'a> {
    pub rule: &'a DescriptorRule,
    pub key: String,
}

impl Table {
    /// Reads `path`: one YAML file, or every `.yaml` file of a folder (in
    /// name order, dot files left out), as envoyproxy/ratelimit loads them.
    pub fn load(path: &Path) -> Result<Table, RlsConfigError> {
        let shown = path.display().to_string();
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| RlsConfigError::Read { path: p.display().to_string(), source })
        };
        let mut table = Table::default();
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|source| RlsConfigError::Read { path: shown.clone(), source })?;
            let mut files: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(RlsConfigError::Empty(shown));
            }
            for file in files {
                table.add(&file.display().to_string(), &read(&file)?)?;
            }
        } else {
            table.add(&shown, &read(path)?)?;
        }
        Ok(table)
    }

    /// Adds the domain of one file's `text`; `path` names it in errors.
    pub fn add(&mut self, path: &str, text: &str) -> Result<(), RlsConfigError> {
        let file: RawFile = serde_norway::from_str(text).map_err(|e| {
            // The reader's words end with where it stopped; say that first.
            let text = e.to_string();
            let what = text.split(" at line ").next().unwrap_or(&text);
            let at = e.location().map(|l| format!("line {}, column {}: ", l.line(), l.column())).unwrap_or_default();
            RlsConfigError::In { file: path.to_owned(), message: format!("{at}{what}") }
        })?;
        let invalid = |message: String| RlsConfigError::In { file: path.to_owned(), message };
        if file.domain.is_empty() {
            return Err(invalid("the domain is empty or missing".to_owned()));
        }
        if self.domains.contains_key(&file.domain) {
            return Err(invalid(format!("domain {:?} is defined twice", file.domain)));
        }
        let mut root = DescriptorNode::default();
        let first_rule = self.rules.len();
        self.load_level(&mut root, &file.domain, &file.descriptors).map_err(invalid)?;
        if file.all_or_nothing {
            // A shadow rule's refusal would refuse the whole, then answer OK
            // with nothing charged: the two do not mix.
            if self.rules[first_rule..].iter().any(|r| r.shadow_mode) {
                let why = "a domain that is all_or_nothing has no shadow_mode descriptor: its refusal would refuse \
                           the whole request";
                return Err(invalid(why.to_owned()));
            }
            self.all_or_nothing.push(file.domain.clone());
        }
        if file.charge_refused {
            if file.all_or_nothing {
                let why = "a domain is all_or_nothing (a refused request charges nothing) or charge_refused (it \
                           charges every descriptor's hits), not both";
                return Err(invalid(why.to_owned()));
            }
            self.charge_refused.push(file.domain.clone());
        }
        self.domains.insert(file.domain, root);
        Ok(())
    }

    fn load_level(
        &mut self,
        node: &mut DescriptorNode,
        parent: &str,
        descriptors: &[RawDescriptor],
    ) -> Result<(), String> {
        for d in descriptors {
            if d.key.is_empty() {
                return Err(format!("{parent}: a descriptor has an empty key"));
            }
            let final_key = if d.value.is_empty() { d.key.clone() } else { format!("{}_{}", d.key, d.value) };
            let path = format!("{parent}.{final_key}");
            if node.children.contains_key(&final_key) {
                return Err(format!("descriptor {path:?} is defined twice"));
            }
            if d.quota_mode {
                return Err(format!("{path}: quota_mode is not supported"));
            }
            if d.share_threshold && !final_key.contains('*') {
                return Err(format!("{path}: share_threshold is only for a value with a wildcard (*)"));
            }
            let mut child = DescriptorNode { share_threshold: d.share_threshold, ..DescriptorNode::default() };
            if let Some(r) = &d.rate_limit {
                let rule = rule(&path, r, d.shadow_mode)?;
                child.rule = Some(self.rules.len());
                self.rules.push(rule);
            }
            self.load_level(&mut child, &path, &d.descriptors)?;
            if final_key.contains('*') {
                node.wildcards.push((final_key.clone(), final_key.split('*').map(str::to_owned).collect()));
            }
            node.children.insert(final_key, child);
        }
        Ok(())
    }

    /// The locker limits the rules count with, one per limited rule.
    pub fn limits(&self) -> impl Iterator<Item = &Limit> {
        self.rules.iter().filter_map(|r| r.limit.as_ref())
    }

    /// Whether `domain`'s descriptors go together or not at all
    /// (`all_or_nothing: true` in its file).
    pub fn all_or_nothing(&self, domain: &str) -> bool {
        self.all_or_nothing.iter().any(|d| d == domain)
    }

    /// Whether `domain`'s refused descriptors are charged their hits all
    /// the same (`charge_refused: true` in its file).
    pub fn charge_refused(&self, domain: &str) -> bool {
        self.charge_refused.iter().any(|d| d == domain)
    }

    /// Whether `domain` is configured.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The rule a descriptor of `entries` (key, value) in `domain` matches,
    /// and its key; `None` when it matches none.
    pub fn find<'a, 'e>(
        &'a self,
        domain: &str,
        entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>,
    ) -> Option<Found<'a>> {
        let mut node = self.domains.get(domain)?;
        let last = entries.len().checked_sub(1)?;
        let mut key = String::new();
        let mut found = None;
        for (i, (k, v)) in entries.enumerate() {
            let with_value = format!("{k}_{v}");
            let (next, shared) = match node.children.get(&with_value) {
                Some(n) => (n, None),
                None => match node.wildcards.iter().find(|(_, parts)| wildcard_match(parts, &with_value)) {
                    Some((pattern, _)) => {
                        let n = &node.children[pattern];
                        (n, n.share_threshold.then(|| &pattern[k.len() + 1..]))
                    }
                    None => match node.children.get(k) {
                        Some(n) => (n, None),
                        None => break,
                    },
                },
            };
            if i > 0 {
                key.push('|');
            }
            push_escaped(&mut key, shared.unwrap_or(v));
            if i == last {
                found = next.rule;
            }
            if next.children.is_empty() {
                break;
            }
            node = next;
        }
        found.map(|i| Found { rule: &self.rules[i], key })
    }
}

/// `value` into a key, with `|` (which separates the entries' values) and
/// `\` escaped, so that two descriptors share a key only when their values do.
pub(super) fn push_escaped(key: &mut String, value: &str) {
    for c in value.chars() {
        if c == '|' || c == '\\' {
            key.push('\\');
        }
        key.push(c);
    }
}

/// Whether `value` matches a pattern split at its stars: each star stands
/// for any run of characters, zero or more, the literal parts in order.
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (first, rest) = parts.split_first().expect("a pattern has one part at least");
    let Some((last, middle)) = rest.split_last() else { return first == value };
    if value.len() < parts.iter().map(String::len).sum() {
        return false;
    }
    let Some(inner) = value.strip_prefix(first.as_str()).and_then(|v| v.strip_suffix(last.as_str())) else {
        return false;
    };
    let mut remaining = inner;
    for part in middle {
        match remaining.find(part.as_str()) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The rule a `rate_limit` block at `path` sets up.
fn rule(path: &str, r: &RawRateLimit, shadow_mode: bool) -> Result<DescriptorRule, String> {
    let unit = match r.unit.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => None,
        Some("second") => Some(Unit::Second),
        Some("minute") => Some(Unit::Minute),
        Some("hour") => Some(Unit::Hour),
        Some("day") => Some(Unit::Day),
        Some("week") => Some(Unit::Week),
        Some("month") => Some(Unit::Month),
        Some("year") => Some(Unit::Year),
        Some(other) => return Err(format!("{path}: invalid rate limit unit {other:?}")),
    };
    for replaced in &r.replaces {
        if replaced.name.is_empty() {
            return Err(format!("{path}: a replaces entry has an empty name"));
        }
        if Some(&replaced.name) == r.name.as_ref() {
            return Err(format!("{path}: replaces names its own rate limit"));
        }
    }
    let rule = |limit, unit| DescriptorRule {
        limit,
        name: r.name.clone().unwrap_or_default(),
        label: limit_name(path),
        replaces: r.replaces.iter().map(|x| x.name.clone()).collect(),
        unit,
        requests_per_unit: r.requests_per_unit,
        unlimited: r.unlimited,
        shadow_mode,
    };
    if r.unlimited {
        if unit.is_some() {
            return Err(format!("{path}: an unlimited rate limit has no unit"));
        }
        return Ok(rule(None, Unit::Unknown));
    }
    let Some(unit) = unit else { return Err(format!("{path}: a rate limit needs a unit")) };
    if r.requests_per_unit == 0 {
        return Ok(rule(None, unit));
    }
    let limit = locker_limit(path, r, unit).map_err(|e| format!("{path}: {e}"))?;
    Ok(rule(Some(limit), unit))
}

/// The locker limit of a rate limit of `unit`: a fixed window of one unit
/// by default.
fn locker_limit(path: &str, r: &RawRateLimit, unit: Unit) -> Result<Limit, String> {
    let text = |e: LimitError| e.to_string();
    let seconds = r.in_seconds.unwrap_or(unit_seconds(unit));
    // A fixed window of a week, a month or a year counts as
    // envoyproxy/ratelimit's does: one window of that many seconds,
    // aligned to the epoch. Other kinds keep a day at most.
    let fixed = matches!(r.algorithm.as_deref(), None | Some("fixed-window"));
    let quota = match r.in_seconds {
        None if fixed => Quota::long(r.requests_per_unit, seconds),
        _ => Quota::new(r.requests_per_unit, seconds),
    };
    let quota = quota.map_err(|e| match e {
        LimitError::SlotOutOfRange(_) if r.in_seconds.is_none() => too_long(unit),
        e => text(e),
    })?;
    let algorithm = match (r.algorithm.as_deref(), r.burst) {
        (Some("token-bucket"), burst) => Algorithm::token_bucket(burst.unwrap_or(r.requests_per_unit)).map_err(text)?,
        (None | Some("fixed-window"), None) => Algorithm::FixedWindow,
        (Some("rolling-window"), None) => Algorithm::RollingWindow,
        (None | Some("fixed-window" | "rolling-window"), Some(_)) => {
            return Err("burst is only for algorithm token-bucket".to_owned())
        }
        (Some(other), _) => {
            return Err(format!("unknown algorithm {other:?} (fixed-window, token-bucket or rolling-window)"))
        }
    };
    Limit::with_algorithm(&limit_name(path), quota, algorithm).map_err(text)
}

/// Why a rate limit of one `unit` (a week, a month, a year) of a token
/// bucket or a rolling window is refused: envoyproxy/ratelimit counts it
/// as one fixed window of that many seconds, longer than such a kind's
/// longest, and any shorter window would be another limit; the error
/// names what counts exactly instead.
fn too_long(unit: Unit) -> String {
    let seconds = unit_seconds(unit) as u64;
    format!(
        "unit {unit}: envoyproxy/ratelimit counts it as one fixed window of {seconds} s (aligned to the epoch), \
         longer than a token bucket's or a rolling window's longest, a day; count it in a fixed window \
         (no algorithm), or write in_seconds (at most 86400) for another window",
        unit = format!("{unit:?}").to_lowercase()
    )
}

/// Seconds in `unit`, as envoyproxy/ratelimit counts them (a month is 30
/// days, a year 365).
pub fn unit_seconds(unit: Unit) -> f64 {
    match unit {
        Unit::Unknown | Unit::Second => 1.0,
        Unit::Minute => 60.0,
        Unit::Hour => 3_600.0,
        Unit::Day => 86_400.0,
        Unit::Week => 7.0 * 86_400.0,
        Unit::Month => 30.0 * 86_400.0,
        Unit::Year => 365.0 * 86_400.0,
    }
}

/// The locker limit's name for the rule at `path` (`domain.key_value.key`):
/// the path itself when it is a usable name, else as much of it as fits,
/// made printable, and a checksum of the whole that keeps it apart.
pub fn limit_name(path: &str) -> String {
    const MAX: usize = 64;
    let usable = path.chars().all(|c| c.is_ascii_graphic() || (!c.is_ascii() && !c.is_whitespace()));
    if usable && path.len() <= MAX {
        return path.to_owned();
    }
    let sum = format!("~{:08x}", crc32fast::hash(path.as_bytes()));
    let mut name = String::new();
    for c in path.chars().map(|c| if c.is_whitespace() || c.is_control() { '_' } else { c }) {
        if name.len() + c.len_utf8() + sum.len() > MAX {
            break;
        }
        name.push(c);
    }
    name + &sum
}

#[cfg(test)]
mod tests;
