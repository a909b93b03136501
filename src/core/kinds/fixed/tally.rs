//! One key's count in one slot, as a peered locker keeps it: its own grants,
//! the cumulative count each peer node reported, and the rule that decides
//! whether one more grant fits.
//!
//! Peers publish cumulative counts over PUB/SUB, which drops, repeats and
//! reorders messages. Taking the maximum per node makes a repeated or late
//! message harmless and lets any later message repair a lost one; summing
//! over nodes gives the count all lockers granted together. This module is
//! pure arithmetic: it never reads a clock, and it knows nothing of sockets,
//! names or slots.
//!
//! A peered tally also keeps the slot's exchange of conserved permits
//! (`core::share::exchange`, which holds the argument): what *spare* means
//! here is the permits it owns, its initial ones (`Share::owns`) plus
//! gifts, less what it gave and granted; a gift that arrives is simply
//! owned.
//!
//! A key table keeps a million tallies, so a tally is stored in two parts:
//! the [`InlineCount`] (own grants and two marks, eight bytes) inline in the
//! table's slot, and the [`Peered`] part aside, which a locker on its own
//! never allocates. The rules read a tally through [`TallyRef`] and change
//! it through [`TallyMut`], wherever its parts are; [`Tally`] holds both
//! parts whole, for the unkeyed count and keys too long for the table.

use crate::core::limit::Quota;
use crate::core::share::exchange::{Exchange, Giving};
use crate::core::share::{raise, Counted, NodeIx, Share};
use crate::core::time::Nanos;

mod count;
pub use count::InlineCount;

/// The outcome of a take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// The permits were taken.
    Go,
    /// The slot's count is spent.
    Spent,
    /// This locker owns too few, but peers may own spare permits: it has
    /// asked them for the rest (`Counted::Wanted`), which a peer with
    /// spare ones gives within a round trip.
    Short,
}

impl Take {
    /// Whether the permits were taken.
    pub fn is_go(self) -> bool {
        self == Take::Go
    }
}

/// One key's counts in the current slot, held whole: the unkeyed count of a
/// window, and keys too long for a key table's slots.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    count: InlineCount,
    peered: Option<Box<Peered>>,
}

/// A tally to read, wherever it is stored.
#[derive(Debug, Clone, Copy)]
pub struct TallyRef<'a> {
    count: InlineCount,
    peered: Option<&'a Peered>,
}

/// A tally to change, wherever it is stored: its count, and where its
/// peers' part is or would go.
#[derive(Debug)]
pub struct TallyMut<'a> {
    count: &'a mut InlineCount,
    aside: Aside<'a>,
}

/// Where a tally's peers' part lives.
#[derive(Debug)]
pub enum Aside<'a> {
    /// A whole tally's own.
    Own(&'a mut Option<Box<Peered>>),
    /// A key table's list, parallel to its slots and empty until a tally
    /// first needs it (`len` long then); `at` is this tally's place, whose
    /// content is this slot's only while the count's `ASIDE` flag is set.
    Table { list: &'a mut Vec<Option<Box<Peered>>>, at: usize, len: usize },
}

/// The part of a tally that only peered lockers use: the peers' counts
/// and the slot's ledger of conserved permits.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Peered {
    /// The sum of the peers' reported counts.
    heard: u32,
    peers: Vec<(NodeIx, u32)>,
    /// The slot's wants and gifts, all of period `SLOT`.
    exchange: Exchange,
    /// What earlier runs of this locker spent of the slot (granted, or
    /// gave away) and were given, as their state file kept it: a run
    /// restarted with the file owns that much less (and more).
    earlier_spent: u32,
    earlier_got: u32,
}

impl Peered {
    /// Empty again, keeping the lists' memory for the next key in a slot.
    fn reset(&mut self) {
        self.peers.clear();
        self.exchange.clear();
        (self.heard, self.earlier_spent, self.earlier_got) = (0, 0, 0);
    }
}

/// The period a tally's exchange trades in: a tally holds one slot.
const SLOT: u64 = 0;

/// Raises `node`'s figure in `list` to `count`, keeping `sum` the sum of
/// the figures; returns whether it grew.
fn raise_summed(list: &mut Vec<(NodeIx, u32)>, sum: &mut u32, node: NodeIx, count: u32) -> bool {
    let grew = match list.iter_mut().find(|(n, _)| *n == node) {
        Some((_, c)) => raise(c, count),
        None => {
            list.push((node, count));
            count
        }
    };
    *sum = sum.saturating_add(grew);
    grew > 0
}

impl Tally {
    /// A tally that starts its slot with `own` permits this locker reserved
    /// earlier, marked for publishing so the peers learn of them.
    pub fn reserved(own: u32) -> Tally {
        let mut count = InlineCount { mark: 0, own };
        count.set(InlineCount::TOUCHED, own > 0);
        Tally { count, peered: None }
    }

    /// To read.
    pub fn get(&self) -> TallyRef<'_> {
        TallyRef { count: self.count, peered: self.peered.as_deref() }
    }

    /// To change.
    pub fn get_mut(&mut self) -> TallyMut<'_> {
        TallyMut { count: &mut self.count, aside: Aside::Own(&mut self.peered) }
    }
}

impl<'a> TallyRef<'a> {
    /// A tally read from its parts; `peered` is ignored unless the count
    /// says it is its own.
    pub fn from_parts(count: InlineCount, peered: Option<&'a Peered>) -> TallyRef<'a> {
        TallyRef { count, peered: peered.filter(|_| count.has_aside()) }
    }

    /// This locker's own grants.
    #[inline]
    pub fn own(self) -> u32 {
        self.count.own
    }

    /// The sum of the peers' reported counts.
    #[inline]
    pub fn heard(self) -> u32 {
        self.peered.map_or(0, |p| p.heard)
    }

    /// Own grants plus every peer's, saturating.
    #[inline]
    pub fn total(self) -> u32 {
        self.own().saturating_add(self.heard())
    }

    /// Permits left out of `max`.
    #[inline]
    pub fn remaining(self, max: u32) -> u32 {
        max.saturating_sub(self.total())
    }

    /// Whether it was granted or asked since the last repair publish.
    pub fn touched(self) -> bool {
        self.count.has(InlineCount::TOUCHED)
    }

    /// Each peer node's reported count.
    pub fn peer_counts(self) -> impl Iterator<Item = (NodeIx, u32)> + 'a {
        self.peered.into_iter().flat_map(|s| s.peers.iter().copied())
    }

    /// What this locker may grant now of `slot` of `quota`: everything
    /// left when alone, the permits it owns when peered (`owned`).
    #[inline]
    pub fn free(self, quota: Quota, slot: u64, share: Share) -> u32 {
        if share.conserved() {
            self.owned(quota, slot, share)
        } else {
            self.remaining(quota.max_requests())
        }
    }

    /// The permits of `slot` this locker owns and has not granted: its
    /// initial ones plus gifts, less what it gave and granted; never more
    /// than is left of `max_requests` by every count heard.
    pub fn owned(self, quota: Quota, slot: u64, share: Share) -> u32 {
        let initial = share.owns(quota, slot);
        let Some(p) = self.peered else { return initial.saturating_sub(self.own()) };
        let owned = u64::from(initial) + u64::from(p.exchange.got_in(SLOT)) + u64::from(p.earlier_got);
        let spent = u64::from(p.exchange.gave_in(SLOT)) + u64::from(self.own()) + u64::from(p.earlier_spent);
        (owned.saturating_sub(spent) as u32).min(self.remaining(quota.max_requests()))
    }

    /// The permits this locker gave its peers in all, and those they gave
    /// it: the slot's ledger, as the state file keeps it.
    pub fn ledger(self) -> (u32, u32) {
        self.peered.map_or((0, 0), |p| (p.exchange.gave_in(SLOT), p.exchange.got_in(SLOT)))
    }

    /// What this locker asked its peers for in this slot.
    pub fn wanted(self) -> u32 {
        self.peered.map_or(0, |p| p.exchange.wanted_in(SLOT))
    }

    /// The slot's wants and gifts (all of one period).
    pub fn exchange(self) -> Option<&'a Exchange> {
        self.peered.map(|p| &p.exchange)
    }
}

impl<'a> TallyMut<'a> {
    /// A tally to change, from a key table's parts (see `Aside::Table`).
    pub fn from_parts(count: &'a mut InlineCount, aside: Aside<'a>) -> TallyMut<'a> {
        TallyMut { count, aside }
    }

    /// To read.
    #[inline]
    pub fn get(&self) -> TallyRef<'_> {
        let peered = match &self.aside {
            Aside::Own(p) => p.as_deref(),
            Aside::Table { list, at, .. } if self.count.has_aside() => list[*at].as_deref(),
            Aside::Table { .. } => None,
        };
        TallyRef { count: *self.count, peered }
    }

    /// The peers' part, made empty the first time a slot needs it.
    fn peered(&mut self) -> &mut Peered {
        match &mut self.aside {
            Aside::Own(p) => p.get_or_insert_with(Box::default),
            Aside::Table { list, at, len } => {
                if list.is_empty() {
                    list.resize_with(*len, || None);
                }
                let p = list[*at].get_or_insert_with(Box::default);
                if !self.count.has_aside() {
                    // A key of an earlier slot left it here.
                    p.reset();
                    self.count.set(InlineCount::ASIDE, true);
                }
                p
            }
        }
    }

    /// Sets this tally to `tally`, as if it had been built here.
    pub fn set(&mut self, tally: Tally) {
        let mark = self.count.mark & !(InlineCount::TOUCHED | InlineCount::ASIDE);
        *self.count = InlineCount { mark: mark | (tally.count.mark & InlineCount::TOUCHED), own: tally.count.own };
        match tally.peered {
            Some(p) => *self.peered() = *p,
            None => {
                if let Aside::Own(p) = &mut self.aside {
                    **p = None;
                }
            }
        }
    }

    /// Clears the mark of a repair publish; returns whether it was set.
    pub fn take_touched(&mut self) -> bool {
        let touched = self.count.has(InlineCount::TOUCHED);
        self.count.set(InlineCount::TOUCHED, false);
        touched
    }

    /// Records that `node` has granted `count` in all (cumulative). Keeps the
    /// larger of this and what was heard before, so repeats and reordering
    /// change nothing. Returns whether the count grew.
    pub fn merge(&mut self, node: NodeIx, count: u32) -> bool {
        let p = self.peered();
        raise_summed(&mut p.peers, &mut p.heard, node, count)
    }

    /// Records that this very node had granted `count`, as a peer echoed it
    /// back: raises the own count if the echo is larger.
    pub fn merge_own(&mut self, count: u32) -> bool {
        let grew = count > self.count.own;
        self.count.own = self.count.own.max(count);
        grew
    }

    /// Takes `cost` permits of `slot` of `quota` if they fit: within what
    /// is left alone; within the permits this locker owns when peered
    /// (`TallyRef::owned`). A peered locker that owns too few while permits
    /// may be left elsewhere asks its peers for the rest (`Take::Short`).
    #[inline]
    pub fn take(&mut self, quota: Quota, slot: u64, cost: u32, share: Share, now: Nanos) -> Take {
        if cost > self.get().remaining(quota.max_requests()) {
            return Take::Spent;
        }
        if share.conserved() {
            let owned = self.get().owned(quota, slot, share);
            if cost > owned {
                let need = (cost - owned).max(self.count.own).min(quota.max_requests());
                self.want(need, now.saturating_add(share.keeps_own_for()));
                return Take::Short;
            }
        }
        self.take_alone(cost);
        Take::Go
    }

    /// Counts `cost` more of this locker's own grants, which the caller
    /// has checked fit: the whole of `take` for a locker alone, which
    /// conserves nothing.
    #[inline]
    pub fn take_alone(&mut self, cost: u32) {
        self.count.own += cost;
        self.count.set(InlineCount::TOUCHED, true);
    }

    /// Gives back up to `n` of this locker's own grants; returns how many.
    /// Marked for publishing, though peers that merge by maximum keep
    /// the higher count they heard: they only over-count.
    pub fn give_back(&mut self, n: u32) -> u32 {
        let back = n.min(self.count.own);
        self.count.own -= back;
        self.count.set(InlineCount::TOUCHED, back > 0 || self.count.has(InlineCount::TOUCHED));
        back
    }

    /// Asks the peers for `need` more permits, unless that many are asked
    /// already and not yet given: what was asked is cumulative, so a held
    /// ask decided again does not ask twice. The caller asks for as many
    /// as it granted so far (at least what the ask lacks), so that a busy
    /// locker's permits double with each round trip rather than come one
    /// by one. It keeps what it owns until `keep_until` (see
    /// `Exchange::give`).
    fn want(&mut self, need: u32, keep_until: Nanos) {
        let exchange = &mut self.peered().exchange;
        exchange.want(SLOT, exchange.got_in(SLOT).saturating_add(need), keep_until);
        // Still short: the next repair says so again, in case the want or
        // the gift was lost.
        self.count.set(InlineCount::TOUCHED, true);
    }

    /// Whether what this locker asked for grew since the last call.
    pub fn take_wanted_new(&mut self) -> bool {
        self.get().peered.is_some() && self.peered().exchange.take_wanted_new().is_some()
    }

    /// Adds what an earlier run of this locker spent of the slot (`spent`:
    /// granted, or gave away) and was given (`got`), as its state file
    /// kept it: this run owns that much less, and more.
    pub fn carry(&mut self, spent: u32, got: u32) {
        let p = self.peered();
        p.earlier_spent = p.earlier_spent.saturating_add(spent);
        p.earlier_got = p.earlier_got.saturating_add(got);
    }

    /// Merges a peer's cumulative want or gift, or an echo of this
    /// locker's own gift (see `Exchange::merge`); returns whether it grew.
    pub fn merge_exchange(&mut self, node: NodeIx, what: Counted, count: u32) -> bool {
        self.peered().exchange.merge(SLOT, node, what, count) > 0
    }

    /// Gives peers what they asked for and this locker can spare of the
    /// permits it owns of `slot` at `now` (see `Exchange::give`); `f` hears each
    /// gift as the receiver's cumulative total, already taken off this
    /// locker's own.
    pub fn give(&mut self, quota: Quota, slot: u64, share: Share, now: Nanos, mut f: impl FnMut(NodeIx, u32)) {
        let Some(p) = self.get().peered else { return };
        if !p.exchange.unanswered(SLOT) || p.exchange.keeps_own(SLOT, now) {
            return;
        }
        let spare = self.get().owned(quota, slot, share);
        self.peered().exchange.give(SLOT, spare, share.members.saturating_sub(1), now, |_, step| {
            if let Giving::Gave { node, total, .. } = step {
                f(node, total);
            }
        });
        self.count.set(InlineCount::TOUCHED, true);
    }
}

#[cfg(test)]
mod tests;
