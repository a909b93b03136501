//! The locker's decision table: every configured limit, its counts, its
//! statistics, and the cap on live keys across all limits.
//!
//! This is the pure core the daemon wraps. It takes `now` on every call,
//! never reads a clock, never logs and never touches a socket, so the same
//! code can be embedded in a program without a daemon (see
//! `examples/embedded.rs`) and tested with literal instants.

use std::collections::HashMap;

use super::limit::{Limit, DEFAULT_LIMIT};
use super::time::Nanos;
use super::window::{FixedWindow, KeyRoom, NoRoom, Verdict};

/// An index into the locker's limits, found once per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitId(usize);

/// Why an ask got neither go nor sorry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("unknown limit {0:?}")]
    UnknownLimit(String),
    #[error("cost must be at least 1")]
    ZeroCost,
    #[error("cost {cost} is above the limit's max_requests {max}")]
    CostAboveMax { cost: u64, max: u32 },
    #[error("too many live keys: the locker holds at most {0} (see --max-keys)")]
    TooManyKeys(usize),
}

/// Counters for one limit since start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitStats {
    pub requests: u64,
    pub go: u64,
    pub sorry: u64,
    pub errors: u64,
}

/// One limit's rules, counts and counters.
#[derive(Debug)]
struct Entry {
    limit: Limit,
    window: FixedWindow,
    stats: LimitStats,
}

/// The decision table.
#[derive(Debug)]
pub struct Locker {
    entries: Vec<Entry>,
    by_name: HashMap<String, LimitId>,
    default: LimitId,
    max_keys: usize,
    live_keys: usize,
    unattributed_errors: u64,
}

impl Locker {
    /// A locker with `default` for requests that name no limit, the named
    /// `limits`, and at most `max_keys` live keys in all. A named limit
    /// called "default" replaces the default one.
    pub fn new(default: Limit, limits: Vec<Limit>, max_keys: usize) -> Locker {
        let mut locker = Locker {
            entries: Vec::new(),
            by_name: HashMap::new(),
            default: LimitId(0),
            max_keys,
            live_keys: 0,
            unattributed_errors: 0,
        };
        for limit in std::iter::once(default).chain(limits) {
            locker.insert(limit);
        }
        locker.default = locker.by_name[DEFAULT_LIMIT];
        locker
    }

    fn insert(&mut self, limit: Limit) {
        let entry = Entry { window: FixedWindow::new(limit.quota()), limit, stats: LimitStats::default() };
        match self.by_name.get(entry.limit.name()) {
            Some(&LimitId(i)) => self.entries[i] = entry,
            None => {
                self.by_name.insert(entry.limit.name().to_owned(), LimitId(self.entries.len()));
                self.entries.push(entry);
            }
        }
    }

    /// The limit named `name`, or the default limit when `name` is `None`.
    pub fn find(&self, name: Option<&str>) -> Result<LimitId, AskError> {
        match name {
            None => Ok(self.default),
            Some(n) => self.by_name.get(n).copied().ok_or_else(|| AskError::UnknownLimit(n.to_owned())),
        }
    }

    /// The seed's plain form: the limit whose name equals the request bytes,
    /// or the default limit for anything else (such as b"let me go").
    pub fn find_plain(&self, body: &[u8]) -> LimitId {
        std::str::from_utf8(body).ok().and_then(|n| self.by_name.get(n).copied()).unwrap_or(self.default)
    }

    /// The limit behind `id`.
    pub fn limit(&self, id: LimitId) -> &Limit {
        &self.entries[id.0].limit
    }

    /// Asks for `cost` permits of limit `id` for `key` at `now`.
    pub fn go(&mut self, now: Nanos, id: LimitId, key: Option<&str>, cost: u64) -> Result<Verdict, AskError> {
        let verdict = self.decide(now, id, key, cost);
        let stats = &mut self.entries[id.0].stats;
        stats.requests += 1;
        match &verdict {
            Ok(v) if v.go => stats.go += 1,
            Ok(_) => stats.sorry += 1,
            Err(_) => stats.errors += 1,
        }
        verdict
    }

    fn decide(&mut self, now: Nanos, id: LimitId, key: Option<&str>, cost: u64) -> Result<Verdict, AskError> {
        let entry = &mut self.entries[id.0];
        let max = entry.limit.quota().max_requests();
        let cost = match cost {
            0 => return Err(AskError::ZeroCost),
            c if c > u64::from(max) => return Err(AskError::CostAboveMax { cost: c, max }),
            c => c as u32,
        };
        self.live_keys -= entry.window.advance(now);
        let room = if self.live_keys < self.max_keys { KeyRoom::Free } else { KeyRoom::Full };
        // Counting the window's keys before and after costs less than a
        // second lookup of the key to learn whether the take added it.
        let before = entry.window.live_keys();
        match entry.window.take(now, key, cost, room) {
            Ok(v) => {
                self.live_keys += entry.window.live_keys() - before;
                Ok(v)
            }
            Err(NoRoom) => Err(AskError::TooManyKeys(self.max_keys)),
        }
    }

    /// Counts a request that failed before it reached a limit (it could not
    /// be decoded, or named no known limit), or one that failed on limit `id`.
    pub fn record_error(&mut self, id: Option<LimitId>) {
        match id {
            Some(LimitId(i)) => {
                self.entries[i].stats.requests += 1;
                self.entries[i].stats.errors += 1;
            }
            None => self.unattributed_errors += 1,
        }
    }

    /// Each limit with its counters, the default limit first.
    pub fn stats(&self) -> impl Iterator<Item = (&Limit, LimitStats)> {
        self.entries.iter().map(|e| (&e.limit, e.stats))
    }

    /// Errors that could not be attributed to a limit.
    pub fn unattributed_errors(&self) -> u64 {
        self.unattributed_errors
    }

    /// Keys with a count in their limit's current slot. Keys of a slot that
    /// has ended are dropped the next time their limit is asked.
    pub fn live_keys(&self) -> usize {
        self.live_keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::Quota;

    fn limit(name: &str, max: u32, secs: f64) -> Limit {
        Limit::new(name, Quota::new(max, secs).unwrap()).unwrap()
    }

    fn locker(max_keys: usize) -> Locker {
        Locker::new(limit(DEFAULT_LIMIT, 2, 1.0), vec![limit("api", 5, 0.8)], max_keys)
    }

    #[test]
    fn requests_without_a_limit_use_the_default() {
        let mut l = locker(10);
        let d = l.find(None).unwrap();
        assert_eq!(l.limit(d).name(), DEFAULT_LIMIT);
        assert!(l.go(0, d, None, 1).unwrap().go);
        assert!(l.go(0, d, None, 1).unwrap().go);
        assert!(!l.go(0, d, None, 1).unwrap().go);
    }

    #[test]
    fn plain_bodies_pick_a_limit_by_name_or_fall_back_to_the_default() {
        let l = locker(10);
        assert_eq!(l.limit(l.find_plain(b"api")).name(), "api");
        assert_eq!(l.limit(l.find_plain(b"let me go")).name(), DEFAULT_LIMIT);
        assert_eq!(l.limit(l.find_plain(b"")).name(), DEFAULT_LIMIT);
        assert_eq!(l.limit(l.find_plain(&[0xff, 0xfe])).name(), DEFAULT_LIMIT);
    }

    #[test]
    fn bad_asks_are_errors_and_are_counted() {
        let mut l = locker(10);
        let api = l.find(Some("api")).unwrap();
        assert_eq!(l.find(Some("nope")), Err(AskError::UnknownLimit("nope".into())));
        assert_eq!(l.go(0, api, None, 0), Err(AskError::ZeroCost));
        assert_eq!(l.go(0, api, None, 6), Err(AskError::CostAboveMax { cost: 6, max: 5 }));
        let stats: Vec<_> = l.stats().map(|(lim, s)| (lim.name().to_owned(), s)).collect();
        assert_eq!(stats[1].1, LimitStats { requests: 2, go: 0, sorry: 0, errors: 2 });
    }

    #[test]
    fn max_keys_caps_live_keys_and_frees_them_with_the_slot() {
        let mut l = locker(2);
        let api = l.find(Some("api")).unwrap();
        assert!(l.go(0, api, Some("a"), 1).is_ok());
        assert!(l.go(0, api, Some("b"), 1).is_ok());
        assert_eq!(l.go(0, api, Some("c"), 1), Err(AskError::TooManyKeys(2)));
        assert!(l.go(0, api, Some("a"), 1).is_ok(), "existing keys still count");
        assert_eq!(l.live_keys(), 2);
        assert!(l.go(800_000_000, api, Some("c"), 1).unwrap().go, "a new slot frees the table");
        assert_eq!(l.live_keys(), 1);
    }

    #[test]
    fn a_named_default_replaces_the_flag_default() {
        let l = Locker::new(limit(DEFAULT_LIMIT, 2, 1.0), vec![limit(DEFAULT_LIMIT, 9, 1.0)], 10);
        assert_eq!(l.limit(l.find(None).unwrap()).quota().max_requests(), 9);
        assert_eq!(l.stats().count(), 1);
    }
}
