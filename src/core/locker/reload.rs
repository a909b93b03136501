//! A new set of limits for a running table, keeping what unchanged limits
//! hold.
//!
//! A limit is matched by name. One whose settings are the same keeps its
//! counts, reservations, leases and counters as they are. One changed within
//! its kind keeps them too and applies the new numbers from the next ask,
//! unless its slot length (or a bucket's refill period) changed: counts of
//! other slots mean nothing, so it starts empty. One whose kind changed
//! starts empty. Counters (requests, go, sorry, ...) always carry over, so
//! they never run backwards for a limit that keeps its name.

use std::collections::HashMap;

use super::{LimitEntry, Locker};
use crate::core::kinds::Rule;
use crate::core::limit::Limit;

/// What a reload did, by limit name, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Changed, with their counts kept.
    pub retuned: Vec<String>,
    /// Changed in kind or slot length: their counts start empty.
    pub reset: Vec<String>,
}

impl Reloaded {
    /// Whether the reload changed nothing.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.retuned.is_empty() && self.reset.is_empty()
    }
}

impl Locker {
    /// Serves `default` and `limits` from now on, with at most `max_keys`
    /// live keys, keeping what each limit of the same name holds where its
    /// meaning is unchanged (see the module header).
    pub fn reload(&mut self, default: Limit, limits: Vec<Limit>, max_keys: usize) -> Reloaded {
        let limits: Vec<Limit> = std::iter::once(default).chain(limits).collect();
        // Runtime limits are the callers', not the config's: they stay,
        // after the configured ones, unless the config now names one.
        let (runtime, old): (Vec<LimitEntry>, Vec<LimitEntry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|e| e.runtime && !limits.iter().any(|l| l.name() == e.limit.name()));
        let (mut entries, done) = carry_over(old, limits.into_iter());
        for entry in &mut entries {
            entry.runtime = false;
        }
        self.index(entries.into_iter().chain(runtime));
        self.max_keys = max_keys;
        self.live_keys = self.entries.iter().map(|e| e.rule.live_keys()).sum();
        // Wants and gifts not yet published name limits by position, which
        // has just changed; peers get them again with the next repair.
        self.exchanged.clear();
        done
    }
}

/// The entries for `limits`, in order, each carrying over what the entry
/// of its name in `old` holds where its meaning is unchanged (see the
/// module header), and what that did, each list sorted.
fn carry_over(old: Vec<LimitEntry>, limits: impl Iterator<Item = Limit>) -> (Vec<LimitEntry>, Reloaded) {
    let mut old: HashMap<String, LimitEntry> = old.into_iter().map(|e| (e.limit.name().to_owned(), e)).collect();
    let mut done = Reloaded::default();
    let entries = limits
        .map(|limit| {
            let name = limit.name().to_owned();
            match old.remove(&name) {
                None => {
                    done.added.push(name);
                    LimitEntry::new(limit)
                }
                Some(entry) if entry.limit == limit => entry,
                Some(mut entry) => {
                    if entry.rule.retune(&limit) {
                        done.retuned.push(name);
                    } else {
                        entry.rule = Rule::new(&limit);
                        done.reset.push(name);
                    }
                    entry.limit = limit;
                    entry
                }
            }
        })
        .collect();
    done.removed = old.into_keys().collect();
    for list in [&mut done.added, &mut done.removed, &mut done.retuned, &mut done.reset] {
        list.sort();
    }
    (entries, done)
}

#[cfg(test)]
mod tests {
    use crate::core::{AcquireAsk, Algorithm, Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};

    const NOW: u64 = 1_000_000_000_000;

    fn window(name: &str, max: u32, secs: f64) -> Limit {
        Limit::new(name, Quota::new(max, secs).unwrap()).unwrap()
    }

    fn semaphore(name: &str, capacity: u32) -> Limit {
        Limit::with_algorithm(name, Quota::new(capacity, 10.0).unwrap(), Algorithm::Semaphore).unwrap()
    }

    fn ask(l: &mut Locker, name: &str) -> bool {
        let id = l.find(Some(name)).unwrap();
        l.ask(NOW, &PermitAsk::new(id).key("k")).unwrap().go
    }

    fn locker(limits: Vec<Limit>) -> Locker {
        Locker::new(window(DEFAULT_LIMIT, 1, 1.0), limits, 100)
    }

    #[test]
    fn an_unchanged_limit_keeps_its_count_and_a_changed_one_its_new_number() {
        let mut l = locker(vec![window("a", 2, 60.0), window("b", 1, 60.0)]);
        assert!(ask(&mut l, "a") && ask(&mut l, "a") && !ask(&mut l, "a"));
        assert!(ask(&mut l, "b") && !ask(&mut l, "b"));
        let done = l.reload(window(DEFAULT_LIMIT, 1, 1.0), vec![window("a", 2, 60.0), window("b", 3, 60.0)], 100);
        assert_eq!(done.retuned, ["b"]);
        assert!(done.added.is_empty() && done.removed.is_empty() && done.reset.is_empty());
        assert!(!ask(&mut l, "a"), "a's count is kept");
        assert!(ask(&mut l, "b") && ask(&mut l, "b") && !ask(&mut l, "b"), "b keeps its 1 and allows 3");
        let a = l.figures().stats().find(|(limit, _)| limit.name() == "a").unwrap().1;
        assert_eq!((a.requests, a.go, a.sorry), (4, 2, 2), "counters carry over");
    }

    #[test]
    fn limits_are_added_removed_and_reset() {
        let mut l = locker(vec![window("a", 1, 60.0), window("gone", 1, 60.0)]);
        assert!(ask(&mut l, "a"));
        let done = l.reload(window(DEFAULT_LIMIT, 1, 1.0), vec![window("a", 1, 30.0), window("new", 1, 60.0)], 100);
        assert_eq!(
            (done.added, done.removed, done.reset),
            (vec!["new".to_owned()], vec!["gone".to_owned()], vec!["a".to_owned()])
        );
        assert!(ask(&mut l, "a"), "a new slot length starts a's counts afresh");
        assert!(ask(&mut l, "new"));
        assert!(l.find(Some("gone")).is_err());
        assert_eq!(l.figures().live_keys(), 2);
    }

    #[test]
    fn a_semaphore_keeps_its_leases_under_a_new_capacity() {
        let mut l = locker(vec![semaphore("db", 2)]);
        let id = l.find(Some("db")).unwrap();
        let take = |l: &mut Locker| l.semaphores().acquire(NOW, &AcquireAsk::new(id, 1)).unwrap().1.state;
        assert!(matches!(take(&mut l), crate::core::kinds::semaphore::LeaseState::Held { .. }));
        assert!(matches!(take(&mut l), crate::core::kinds::semaphore::LeaseState::Held { .. }));
        l.reload(window(DEFAULT_LIMIT, 1, 1.0), vec![semaphore("db", 1)], 100);
        let held = l.figures().holdings().find(|(limit, _)| limit.name() == "db").unwrap().1;
        assert_eq!((held.leases_held, held.leases_waiting, held.live_keys), (2, 0, 2));
        assert!(matches!(take(&mut l), crate::core::kinds::semaphore::LeaseState::Refused), "over the new capacity");
    }

    #[test]
    fn a_kind_change_starts_empty_and_max_keys_applies() {
        let mut l = locker(vec![window("x", 1, 60.0)]);
        assert!(ask(&mut l, "x"));
        let done = l.reload(window(DEFAULT_LIMIT, 1, 1.0), vec![semaphore("x", 1)], 7);
        assert_eq!(done.reset, ["x"]);
        assert_eq!((l.figures().live_keys(), l.figures().max_keys()), (0, 7));
    }
}
