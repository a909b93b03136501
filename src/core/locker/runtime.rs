//! Limits sent with the ask (`--runtime-limits`): a go naming a limit the
//! config does not define, with the limit's terms, creates it on first use
//! while fewer than the bound exist; the same name with other terms takes
//! them as a reload would (counts kept within the kind and slot length);
//! an idle one is dropped, which frees its place under the bound.
//!
//! Configured limits are the operator's: terms naming one must be its own
//! terms, or the ask is refused naming it; they never change it. A runtime
//! limit is idle when no ask has named it for `IDLE` or ten of its slots,
//! whichever is longer, and it holds no live key: dropping it then forgets
//! no count, so it can never give capacity back early.
//!
//! Peered, a runtime limit's terms travel to the peers with its digest: a
//! peer that has no limit of that name learns it (`learn`) under its own
//! bound, and passes on only the terms of limits its own callers ask, so
//! that a limit no caller asks any more falls idle everywhere rather than
//! being taught back and forth.
//!
//! Table work only, like the rest of `locker`: no clock, no socket. The
//! service keeps its own references to limit ids in step after a drop.

use super::{Figures, LimitEntry, Locker};
use crate::core::ask::TableError;
use crate::core::kinds::Rule;
use crate::core::limit::{Limit, LimitId};
use crate::core::time::{Nanos, NANOS_PER_SEC};

/// The least time without an ask after which a runtime limit is idle.
pub const IDLE: Nanos = 600 * NANOS_PER_SEC;

/// Slots without an ask after which a runtime limit is idle, if longer than `IDLE`.
pub const IDLE_SLOTS: u64 = 10;

/// What finding a limit with terms did to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// The limit was there with these terms.
    Found,
    /// A runtime limit was created: it has the next id.
    Created,
    /// A runtime limit took new terms, keeping its counts.
    Retuned,
    /// A runtime limit took new terms of another kind or slot length: its
    /// counts start empty.
    Reset,
}

impl Locker {
    /// Creates up to `bound` limits from the terms asks send (see
    /// `Runtime::find_with_terms`); 0, the default, creates none.
    pub fn with_runtime_limits(mut self, bound: usize) -> Locker {
        self.runtime_bound = bound;
        self
    }

    /// The table's runtime limits, to find, create, learn and drop.
    pub fn runtime(&mut self) -> Runtime<'_> {
        Runtime { locker: self }
    }

    /// When the next runtime limit without live keys falls idle. One with
    /// keys waits for its rule's own deadline to drop them first.
    pub(super) fn next_idle(&self) -> Option<Nanos> {
        self.entries.iter().filter(|e| e.runtime && e.rule.live_keys() == 0).map(idle_at).min()
    }
}

/// The table's runtime limits, on a borrow of it: found or created from
/// an ask's terms, learned from a peer's, kept from idling, and dropped
/// when idle.
#[derive(Debug)]
pub struct Runtime<'a> {
    locker: &'a mut Locker,
}

impl Runtime<'_> {
    /// Notes an ask of limit `id` at `now` that the table does not decide
    /// (a store's claims decide it): it keeps a runtime limit from idling.
    #[inline]
    pub fn touch(self, now: Nanos, id: LimitId) {
        let entry = &mut self.locker.entries[id.0];
        entry.last_ask = now;
        entry.learned = false;
    }

    /// The limit `terms` names (the default when it is called so), made
    /// to count as `terms` say: a configured limit only if its terms are
    /// these; a runtime limit takes them (as a reload does); an unknown
    /// name is created while fewer than the bound runtime limits exist.
    pub fn find_with_terms(&mut self, now: Nanos, terms: Limit) -> Result<(LimitId, Made), TableError> {
        let name = terms.name();
        let Some(&id) = self.locker.by_name.get(name) else { return self.create(now, terms) };
        let entry = &mut self.locker.entries[id.0];
        if !entry.runtime && !entry.limit.counts_as(&terms) {
            return Err(TableError::TermsDiffer(name.to_owned()));
        }
        entry.last_ask = now;
        entry.learned = false;
        if entry.limit.counts_as(&terms) {
            return Ok((id, Made::Found));
        }
        let made = if entry.rule.retune(&terms) {
            Made::Retuned
        } else {
            entry.rule = Rule::new(&terms);
            Made::Reset
        };
        entry.limit = terms;
        self.locker.generation += 1;
        self.locker.live_keys = self.locker.entries.iter().map(|e| e.rule.live_keys()).sum();
        Ok((id, made))
    }

    /// The limit named as `terms` are, learned from a peer at `now`: one
    /// of that name as it is (a peer that defines it otherwise is told
    /// apart by its digest, as for a configured limit), else created while
    /// fewer than the bound runtime limits exist. A learned limit idles as
    /// any runtime limit does, and its terms are not passed on until an ask
    /// here names it.
    pub fn learn(&mut self, now: Nanos, terms: Limit) -> Result<(LimitId, Made), TableError> {
        if let Some(&id) = self.locker.by_name.get(terms.name()) {
            return Ok((id, Made::Found));
        }
        let made = self.create(now, terms)?;
        self.locker.entries[made.0 .0].learned = true;
        Ok(made)
    }

    fn create(&mut self, now: Nanos, terms: Limit) -> Result<(LimitId, Made), TableError> {
        let (live, bound) = self.locker.figures().runtime_limits();
        if bound == 0 {
            return Err(TableError::NoRuntimeLimits(terms.name().to_owned()));
        }
        if live >= bound {
            return Err(TableError::RuntimeLimitsFull { name: terms.name().to_owned(), bound });
        }
        let id = LimitId(self.locker.entries.len());
        self.locker.generation += 1;
        self.locker.by_name.insert(terms.name().to_owned(), id);
        self.locker.entries.push(LimitEntry { runtime: true, last_ask: now, ..LimitEntry::new(terms) });
        Ok((id, Made::Created))
    }

    /// Drops every runtime limit idle at `now` (see the module header),
    /// returning their names. The ids of the limits after them move down,
    /// as after a reload.
    pub fn drop_idle(&mut self, now: Nanos) -> Vec<String> {
        let idle = |e: &mut LimitEntry| {
            e.runtime && idle_at(e) <= now && {
                e.rule.advance(now);
                e.rule.live_keys() == 0
            }
        };
        if !self.locker.entries.iter_mut().any(idle) {
            return Vec::new();
        }
        let mut dropped = Vec::new();
        let entries = std::mem::take(&mut self.locker.entries).into_iter().filter_map(|mut e| {
            if idle(&mut e) {
                dropped.push(e.limit.name().to_owned());
                return None;
            }
            Some(e)
        });
        let kept: Vec<LimitEntry> = entries.collect();
        self.locker.index(kept.into_iter());
        self.locker.live_keys = self.locker.entries.iter().map(|e| e.rule.live_keys()).sum();
        // Unpublished wants and gifts name limits by position, which has
        // moved; the next repair sends them again.
        self.locker.exchanged.clear();
        dropped
    }
}

impl<'a> Figures<'a> {
    /// How many runtime limits there are, and the most there may be.
    pub fn runtime_limits(self) -> (usize, usize) {
        (self.locker.entries.iter().filter(|e| e.runtime).count(), self.locker.runtime_bound)
    }

    /// Whether limit `id` was created from terms sent with an ask.
    pub fn is_runtime(self, id: LimitId) -> bool {
        self.locker.entries[id.0].runtime
    }

    /// The runtime limits whose terms peers are told: those an ask here
    /// named (not only learned from a peer) and that peers share.
    pub fn taught_terms(self) -> impl Iterator<Item = &'a Limit> + 'a {
        let taught = |e: &&'a LimitEntry| e.runtime && !e.learned && e.rule.is_shared();
        self.locker.entries.iter().filter(taught).map(|e| &e.limit)
    }
}

/// When `entry`, last asked at `last_ask`, falls idle.
fn idle_at(entry: &LimitEntry) -> Nanos {
    let slots = entry.limit.quota().slot_ns().saturating_mul(IDLE_SLOTS);
    entry.last_ask.saturating_add(IDLE.max(slots))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{AskError, PermitAsk, Quota, DEFAULT_LIMIT};

    const NOW: Nanos = 1_000 * NANOS_PER_SEC;

    fn window(name: &str, max: u32, secs: f64) -> Limit {
        Limit::new(name, Quota::new(max, secs).unwrap()).unwrap()
    }

    fn terms(name: &str, alg: &str, max: u64, secs: f64) -> Limit {
        Limit::from_terms(name, alg, max, secs, None).unwrap()
    }

    fn locker(bound: usize) -> Locker {
        Locker::new(window(DEFAULT_LIMIT, 1, 1.0), vec![window("api", 5, 0.8)], 100).with_runtime_limits(bound)
    }

    /// Asks `id` once for key "k" at `now`: whether it went.
    fn go(l: &mut Locker, now: Nanos, id: LimitId) -> bool {
        l.ask(now, &PermitAsk::new(id).key("k")).unwrap().go
    }

    #[test]
    fn a_limit_sent_with_terms_is_created_on_first_use_and_counts_as_a_configured_twin() {
        let mut l = locker(4);
        let (id, made) = l.runtime().find_with_terms(NOW, terms("tenant", "fixed-window", 5, 0.8)).unwrap();
        assert_eq!(made, Made::Created);
        assert!(l.figures().is_runtime(id) && !l.figures().is_runtime(l.find(Some("api")).unwrap()));
        assert_eq!(
            l.runtime().find_with_terms(NOW, terms("tenant", "fixed-window", 5, 0.8)).unwrap(),
            (id, Made::Found)
        );
        let api = l.find(Some("api")).unwrap();
        // Over two slots, the same go/sorry sequence as the configured twin.
        for at in [NOW, NOW + 300_000_000, NOW + 800_000_000, NOW + 900_000_000] {
            for _ in 0..7 {
                assert_eq!(go(&mut l, at, id), go(&mut l, at, api), "at {at}");
            }
        }
        assert_eq!(l.figures().runtime_limits(), (1, 4));
    }

    #[test]
    fn without_the_bound_or_past_it_a_limit_is_not_created() {
        let mut l = locker(0);
        let e = l.runtime().find_with_terms(NOW, terms("t", "fixed-window", 1, 1.0)).unwrap_err();
        assert_eq!(e, TableError::NoRuntimeLimits("t".into()));
        assert!(e.to_string().contains("--runtime-limits"), "{e}");
        let mut l = locker(2);
        l.runtime().find_with_terms(NOW, terms("a", "fixed-window", 1, 1.0)).unwrap();
        l.runtime().find_with_terms(NOW, terms("b", "token-bucket", 1, 1.0)).unwrap();
        let e = l.runtime().find_with_terms(NOW, terms("c", "fixed-window", 1, 1.0)).unwrap_err();
        assert_eq!(e, TableError::RuntimeLimitsFull { name: "c".into(), bound: 2 });
        assert!(l.find(Some("c")).is_err());
    }

    #[test]
    fn a_configured_limit_keeps_its_terms() {
        let mut l = locker(4);
        let api = l.find(Some("api")).unwrap();
        assert_eq!(l.runtime().find_with_terms(NOW, terms("api", "fixed-window", 5, 0.8)).unwrap(), (api, Made::Found));
        let e = l.runtime().find_with_terms(NOW, terms("api", "fixed-window", 50, 0.8)).unwrap_err();
        assert_eq!(e, TableError::TermsDiffer("api".into()));
        assert!(l.runtime().find_with_terms(NOW, terms(DEFAULT_LIMIT, "rolling-window", 1, 1.0)).is_err());
        assert_eq!(l.limit(api).quota().max_requests(), 5, "unchanged");
        assert_eq!(l.figures().runtime_limits().0, 0);
    }

    #[test]
    fn new_terms_for_a_runtime_limit_keep_its_counts_as_a_reload_does() {
        let mut l = locker(4);
        let (id, _) = l.runtime().find_with_terms(NOW, terms("t", "fixed-window", 2, 60.0)).unwrap();
        assert!(go(&mut l, NOW, id) && go(&mut l, NOW, id) && !go(&mut l, NOW, id));
        assert_eq!(l.runtime().find_with_terms(NOW, terms("t", "fixed-window", 3, 60.0)).unwrap(), (id, Made::Retuned));
        assert!(go(&mut l, NOW, id), "its 2 are kept and 3 allowed");
        assert!(!go(&mut l, NOW, id));
        // Another slot length: counts of other slots mean nothing.
        assert_eq!(l.runtime().find_with_terms(NOW, terms("t", "fixed-window", 3, 30.0)).unwrap(), (id, Made::Reset));
        assert!(go(&mut l, NOW, id));
        assert_eq!(l.limit(id).quota().slot_ns(), 30 * NANOS_PER_SEC);
    }

    #[test]
    fn an_idle_runtime_limit_is_dropped_and_frees_its_place() {
        let mut l = locker(1);
        let (id, _) = l.runtime().find_with_terms(NOW, terms("t", "fixed-window", 1, 1.0)).unwrap();
        assert!(go(&mut l, NOW + 5 * NANOS_PER_SEC, id));
        let last = NOW + 5 * NANOS_PER_SEC;
        assert!(
            l.runtime().find_with_terms(last, terms("u", "fixed-window", 1, 1.0)).is_err(),
            "the one place is taken"
        );
        assert_eq!(l.next_deadline().filter(|&d| d > last + NANOS_PER_SEC), None, "its key's slot ends first");
        l.expire(last + NANOS_PER_SEC);
        assert_eq!(l.next_deadline(), Some(last + IDLE), "ten minutes after its last ask");
        assert!(l.runtime().drop_idle(last + IDLE - 1).is_empty());
        assert_eq!(l.runtime().drop_idle(last + IDLE), ["t"]);
        assert!(l.find(Some("t")).is_err() && l.find(Some("api")).is_ok());
        assert_eq!(l.next_deadline(), None);
        assert_eq!(
            l.runtime().find_with_terms(last + IDLE, terms("u", "fixed-window", 1, 1.0)).unwrap().1,
            Made::Created
        );
    }

    #[test]
    fn a_long_slot_idles_for_ten_slots_and_live_keys_keep_a_limit() {
        let mut l = locker(2);
        let (id, _) = l.runtime().find_with_terms(NOW, terms("hour", "fixed-window", 1, 3600.0)).unwrap();
        let slot = 3600 * NANOS_PER_SEC;
        assert!(go(&mut l, NOW, id));
        assert!(l.runtime().drop_idle(NOW + IDLE).is_empty(), "its key still counts");
        assert!(l.runtime().drop_idle(NOW + 10 * slot - 1).is_empty());
        assert_eq!(l.runtime().drop_idle(NOW + 10 * slot), ["hour"]);
        // A bucket is kept while a key's bucket is not full again.
        let (b, _) = l
            .runtime()
            .find_with_terms(NOW, Limit::from_terms("b", "token-bucket", 1, 1.0, Some(1000)).unwrap())
            .unwrap();
        assert!(l.ask(NOW, &PermitAsk::new(b).key("k").cost(1000)).unwrap().go);
        assert!(l.runtime().drop_idle(NOW + IDLE).is_empty(), "its bucket refills over 1000 s");
        assert_eq!(l.runtime().drop_idle(NOW + 1000 * NANOS_PER_SEC + IDLE), ["b"]);
    }

    #[test]
    fn a_reload_keeps_runtime_limits_unless_the_config_names_them() {
        let mut l = locker(3);
        let (a, _) = l.runtime().find_with_terms(NOW, terms("a", "fixed-window", 1, 1.0)).unwrap();
        l.runtime().find_with_terms(NOW + IDLE, terms("b", "fixed-window", 4, 1.0)).unwrap();
        let done = l.reload(window(DEFAULT_LIMIT, 1, 1.0), vec![window("api", 6, 0.8), window("a", 9, 1.0)], 100);
        assert!(done.removed.is_empty(), "{done:?}");
        let a2 = l.find(Some("a")).unwrap();
        assert!(!l.figures().is_runtime(a2) && l.limit(a2).quota().max_requests() == 9, "the config now defines it");
        let b = l.find(Some("b")).unwrap();
        assert!(l.figures().is_runtime(b) && go(&mut l, NOW + IDLE, b));
        assert_eq!(l.figures().runtime_limits().0, 1);
        let e = l.ask(NOW, &PermitAsk::new(a).key("k").cost(10));
        assert!(matches!(e, Err(AskError::CostAboveMax { max: 9, .. })), "{e:?}");
    }
}
