//! Where each setting of a TOML file is written: the line of every
//! top-level key and of every key of each `[[limits]]` table, so that an
//! error about a value names the file, the line and the key, not only the
//! file.
//!
//! This module only reads spans out of text the caller already holds; it
//! checks no value and reads no file.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::{Spanned, Value};

/// The byte span of each key's value, top level and per `[[limits]]` table.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Places {
    /// The offset of each newline, to turn a span into a line.
    lines: Vec<usize>,
    top: BTreeMap<String, Range<usize>>,
    limits: Vec<BTreeMap<String, Range<usize>>>,
}

/// Every `[[limits]]` table, each key with its value's span.
#[derive(Deserialize)]
struct LimitSpans {
    #[serde(default)]
    limits: Vec<BTreeMap<String, Spanned<Value>>>,
}

impl Places {
    /// The places of the keys of `text`; none when it is not valid TOML.
    pub fn of(text: &str) -> Places {
        let spans = |map: BTreeMap<String, Spanned<Value>>| map.into_iter().map(|(k, v)| (k, v.span())).collect();
        let top = toml::from_str::<BTreeMap<String, Spanned<Value>>>(text).map(spans).unwrap_or_default();
        let limits = toml::from_str::<LimitSpans>(text).map(|l| l.limits.into_iter().map(spans).collect());
        let lines = text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect();
        Places { lines, top, limits: limits.unwrap_or_default() }
    }

    /// The 1-based line of byte `offset`.
    fn line(&self, offset: usize) -> usize {
        self.lines.partition_point(|&newline| newline < offset) + 1
    }

    /// The line of top-level `key`'s value, when the file sets it.
    pub fn top(&self, key: &str) -> Option<usize> {
        self.top.get(key).map(|span| self.line(span.start))
    }

    /// The line of `key`'s value in the `index`th `[[limits]]` table.
    pub fn limit(&self, index: usize, key: &str) -> Option<usize> {
        self.limits.get(index)?.get(key).map(|span| self.line(span.start))
    }

    /// The key whose value holds byte `offset`, at the top level or in a
    /// `[[limits]]` table.
    pub fn key_at(&self, offset: usize) -> Option<&str> {
        let tables = std::iter::once(&self.top).chain(&self.limits);
        let mut keys = tables.flat_map(|t| t.iter()).filter(|(k, span)| *k != "limits" && span.contains(&offset));
        keys.next().map(|(k, _)| k.as_str())
    }

    /// Forgets where top-level `key` is: a flag gave it instead.
    pub fn forget(&mut self, key: &str) {
        self.top.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_the_line_of_its_value() {
        let text = "max_keys = 5\n\n# a comment\npeer_grace = 2.0\n[[limits]]\nname = 'a'\n\nmax_requests = 0\n\
                    [[limits]]\nname = 'b'\nhold_ms = 3\n";
        let p = Places::of(text);
        assert_eq!((p.top("max_keys"), p.top("peer_grace"), p.top("store")), (Some(1), Some(4), None));
        assert_eq!((p.limit(0, "name"), p.limit(0, "max_requests")), (Some(6), Some(8)));
        assert_eq!((p.limit(1, "hold_ms"), p.limit(1, "name"), p.limit(2, "name")), (Some(11), Some(10), None));
        let offset = text.find("= 0").unwrap() + 2;
        assert_eq!(p.key_at(offset), Some("max_requests"));
        assert_eq!(p.key_at(0), None, "a key itself is not its value");
    }

    #[test]
    fn text_that_is_not_toml_has_no_places() {
        let p = Places::of("max_keys = = 1\n");
        assert_eq!(p.top("max_keys"), None);
    }
}
