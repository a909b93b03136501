//! The table's side of peering: its wants and gifts queued for publishing, the
//! counts peers report merged into the limit they name, and the snapshot
//! and repair lists, all through `Sharing` (`Locker::sharing`); and the facts
//! peers are set up from, read only through `Figures` (`Locker::figures`):
//! the shared limits' digests and the span of the slots.
//!
//! Fixed windows, token buckets and rolling windows are shared; semaphores
//! are not, and their counts are never published or merged. What each kind
//! trades with its peers, and how it keeps their counts, is the kind's
//! (`core::kinds`, one folder each); this module only walks the limits and
//! keeps the live-key count in step. It must not match on the kind, nor
//! encode anything: the bytes are `wire`'s.

use super::{Figures, Locker};
use crate::core::ask::PermitAsk;
use crate::core::kinds::Rule;
use crate::core::limit::LimitId;
use crate::core::room::KeyBudget;
use crate::core::share::repair::RepairWalk;
use crate::core::share::PeerView;
use crate::core::share::{Count, Counted, ME};
use crate::core::time::Nanos;

/// The table as its peers see it: the view the caller sets, own counts to
/// publish, and peers' counts to merge.
#[derive(Debug)]
pub struct Sharing<'a> {
    locker: &'a mut Locker,
}

impl Locker {
    /// The table's side of peering, to publish own counts and merge peers'.
    pub fn sharing(&mut self) -> Sharing<'_> {
        Sharing { locker: self }
    }
}

impl Sharing<'_> {
    /// Queues what an ask that came short asked its peers for (see
    /// `Rule::note_wanted`).
    pub(super) fn note_short(&mut self, ask: &PermitAsk) {
        let exchanged = &mut self.locker.exchanged;
        self.locker.entries[ask.limit.0].rule.note_wanted(ask.limit, ask.key, |c| exchanged.push(c));
    }

    /// Sets what the peers mean for the next asks, and starts keeping own
    /// counts for publishing.
    pub fn set_view(&mut self, view: PeerView) {
        self.locker.view = view;
        self.locker.publishing = true;
    }

    /// The wants and gifts queued since the last call, oldest first: what
    /// changes who owns permits, published at once.
    pub fn take_exchanged(&mut self) -> std::vec::Drain<'_, Count> {
        self.locker.exchanged.drain(..)
    }

    /// Merges a count a peer reported, received at `now`. `ME` as the node
    /// is an echo of this locker's own count. Returns whether anything
    /// changed: a count for an ended slot (for a bucket, any period but
    /// the current one), a slot too far ahead, a semaphore, a smaller
    /// count than known, or a new key beyond `max_keys` changes nothing.
    /// A fixed or rolling window or a token bucket answers a peer's want
    /// with a gift (a rolling window also renews a busy peer's lend),
    /// queued for publishing with the own counts.
    pub fn merge(&mut self, now: Nanos, c: &Count) -> bool {
        let share = self.locker.share(c.limit);
        let (exchanged, publishing) = (&mut self.locker.exchanged, self.locker.publishing);
        let rule = &mut self.locker.entries[c.limit.0].rule;
        let others = self.locker.live_keys - rule.live_keys();
        let budget = KeyBudget { others, max_keys: self.locker.max_keys };
        let mut gave = false;
        let changed = rule.merge(now, c, budget, share, |gift| {
            gave = true;
            if publishing {
                exchanged.push(gift);
            }
        });
        self.locker.live_keys = others + rule.live_keys();
        if gave || (changed && c.what == Counted::Gave(ME)) {
            self.locker.ledgers.push((c.limit, c.key.clone()));
        }
        changed
    }

    /// The keys whose ledger of conserved permits changed since the last
    /// call (see `Keeping::kept_exchange`), to record before the gifts
    /// queued with the own counts leave.
    pub fn take_ledgers(&mut self) -> std::vec::Drain<'_, (LimitId, Option<Box<str>>)> {
        self.locker.ledgers.drain(..)
    }

    /// Calls `f` with every count this locker knows at `now`, its own and
    /// each peer node's (see `Rule::counts`).
    pub fn snapshot(&mut self, now: Nanos, mut f: impl FnMut(Count)) {
        self.each_shared(now, |id, rule| rule.counts(now, id, &mut f));
    }

    /// Calls `f` with the own counts of keys granted, short or giving since
    /// they were last republished, for a repair of at most `budget` counts
    /// (give or take one key's): from where the last repair stopped, limit
    /// by limit and key by key, round to the start after the last (see
    /// `core::share::repair`). Returns how many it gave `f`.
    pub fn drain_touched(&mut self, now: Nanos, budget: usize, mut f: impl FnMut(Count)) -> usize {
        let (from_limit, from_key) = self.locker.repair_at;
        let mut next = None;
        let mut left = budget;
        let mut sent = 0;
        self.each_shared(now, |id, rule| {
            if id.0 < from_limit || next.is_some() {
                return;
            }
            let walk = RepairWalk::new(if id.0 == from_limit { from_key } else { 0 }, left);
            rule.drain_own(now, id, &walk, |c| {
                sent += 1;
                f(c);
            });
            left = walk.left();
            next = walk.resume_at().map(|key| (id.0, key));
        });
        self.locker.repair_at = next.unwrap_or((0, 0));
        sent
    }

    /// Brings every shared limit up to `now` and calls `f` with each.
    fn each_shared(&mut self, now: Nanos, mut f: impl FnMut(LimitId, &mut Rule)) {
        for (i, entry) in self.locker.entries.iter_mut().enumerate() {
            if entry.rule.is_shared() {
                entry.rule.advance(now);
                f(LimitId(i), &mut entry.rule);
            }
        }
        self.locker.live_keys = self.locker.entries.iter().map(|e| e.rule.live_keys()).sum();
    }
}

/// The peering facts, read only: read through `Figures` because their
/// callers (the peering's settings, its heartbeats, the state keeper) hold
/// the table shared.
impl<'a> Figures<'a> {
    /// The shortest slot of any limit.
    pub fn shortest_slot(self) -> Nanos {
        self.locker.entries.iter().map(|e| e.limit.quota().slot_ns()).min().unwrap_or(Nanos::MAX)
    }

    /// The longest slot of any limit.
    pub fn longest_slot(self) -> Nanos {
        self.locker.entries.iter().map(|e| e.limit.quota().slot_ns()).max().unwrap_or(0)
    }

    /// The longest memory of any limit: how long peers keep a run they no
    /// longer hear (see `Rule::memory`).
    pub fn longest_memory(self) -> Nanos {
        self.locker.entries.iter().map(|e| e.rule.memory()).max().unwrap_or(0)
    }

    /// The name and definition digest of every limit shared with peers
    /// (fixed windows and token buckets), for the peers to compare.
    pub fn shared_digests(self) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        self.locker.entries.iter().filter(|e| e.rule.is_shared()).map(|e| (e.limit.name(), e.limit.digest()))
    }
}
