//! A token bucket shared by peers, with conserved tokens: asks taken from
//! this locker's own share, wants noted for the peers, peers' wants
//! answered with gifts and their gifts received, and the period's figures
//! listed for snapshots and repairs.
//!
//! **Shares.** Each member holds a room of the bucket (`Share::holds`:
//! `burst / members`, the remainder by place), the rooms adding up to
//! `burst`, and refills it at `rate x room / burst` (see `ledger`), the
//! refills adding up to the rate. A locker grants only tokens it holds.
//!
//! **Gifts.** A short locker publishes a cumulative want for the period; a
//! peer that did not ask itself gives its part out of the tokens it holds,
//! taking the tokens and as much room off its own before the gift is
//! published. The receiver adds both when the gift arrives in the same
//! period; a gift of an ended period is never used. At a period's end
//! every gift ends: a receiver's room shrinks back (keeping at most that
//! many tokens) and a giver's grows back empty.
//!
//! **Why the group never grants more than `burst + rate x T` in any span
//! `T`:** see `core::share::exchange`. A restarted run takes its earlier
//! run's room: with a state file that kept every grant and gift it holds
//! that run's share as its newest record says, never fuller (`kept`);
//! without, it cannot know what that run held, so it holds no room in the
//! period it joins in (when peers knew that run), and its room starts
//! empty after (`fills_from`).
//!
//! No clock, no names, no wire format: like every kind, it takes `now`.

use super::{Bucket, Ledger};
use crate::core::ask::{Verdict, Want};
use crate::core::room::{KeyRoom, Leeway, NoRoom};
use crate::core::share::repair::RepairWalk;
use crate::core::share::{Count, Counted, NodeIx, Share, ME};
use crate::core::time::Nanos;

impl Bucket {
    /// The period `now` falls in: the number wants and gifts carry.
    pub fn period(&self, now: Nanos) -> u64 {
        self.quota.slot_of(now)
    }

    /// Takes tokens for `key` as `want` says: alone, from the whole bucket
    /// (`take`); peered, from this locker's share only, now or never. A
    /// peered locker short of tokens asks its peers for more (unless none
    /// is live) and answers sorry with a `retry_after` of at most the
    /// peers' round-trip wait (`Share::charged_for`), so that the ask may
    /// be held while a gift comes.
    pub fn take_shared(&mut self, now: Nanos, key: Option<&str>, want: Want, terms: Leeway) -> Result<Verdict, NoRoom> {
        let share = terms.share;
        if !share.conserved() {
            return self.take(now, key, want, terms.room);
        }
        let (burst, depth) = (self.burst, self.depth);
        let period_end = self.quota.slot_end(self.period(now)).saturating_sub(now);
        let k = self.peered_mut(now, key, terms.room, share)?;
        let held = k.available(now, depth);
        let own_wait = |k: &Ledger, n| k.wait_for(now, depth, n).unwrap_or(period_end);
        if want.cost == 0 {
            let retry_after = if held > 0 { 0 } else { own_wait(k, 1) };
            let reset = k.full_with_tokens_in(now, depth, period_end);
            return Ok(Verdict { go: held > 0, ..Verdict::sorry(burst, held, retry_after, reset) });
        }
        if held >= want.need() {
            let granted = want.grant(held);
            k.take(now, depth, granted);
            return Ok(Verdict::go(burst, held - granted, k.full_in(now), granted));
        }
        let mut retry_after = own_wait(k, want.need());
        if share.live > 1 {
            // Ask for as many as were granted, at least what is lacking, so
            // that a busy locker's share doubles with each round trip.
            let need = (want.need() - held).max(k.spent()).min(burst);
            k.want(now, need, share.keeps_own_for());
            retry_after = retry_after.min(share.charged_for());
        }
        Ok(Verdict::sorry(burst, held, retry_after, k.full_with_tokens_in(now, depth, period_end)))
    }

    /// What `key` asked its peers for, if that grew with the last ask:
    /// `(period, wanted)`, for the peers.
    pub fn note_wanted(&mut self, key: Option<&str>) -> Option<(u64, u32)> {
        let k = match key {
            None => self.unkeyed_peered.as_deref_mut(),
            Some(k) => self.ledgers.get_mut(k),
        }?;
        Some((k.period(), k.take_wanted_new()?))
    }

    /// Merges a peer's want or gift for `key`, received at `now`, if it is
    /// of the current period, on `terms` (room for a new key, the share):
    /// a want is answered with what this locker can spare (`give` hears
    /// each gift as `(key, period, receiver, total given)`, already taken
    /// off its own); a gift to this locker adds its tokens and room.
    /// Grants are not merged: each locker spends only its own. Returns
    /// whether anything changed.
    pub fn merge_want_or_gift(
        &mut self,
        now: Nanos,
        c: &Count,
        terms: Leeway,
        mut give: impl FnMut(Option<&str>, u64, NodeIx, u32),
    ) -> bool {
        let (key, period, depth, share) = (c.key.as_deref(), self.period(now), self.depth, terms.share);
        let relevant = match c.what {
            Counted::Wanted | Counted::Gave(ME) => c.node != ME,
            Counted::Granted | Counted::Gave(_) => false,
        };
        if !relevant || c.slot != period || !share.conserved() {
            return false;
        }
        let others = share.members - 1;
        let Ok(k) = self.peered_mut(now, key, terms.room, share) else { return false };
        let changed = k.merge(now, depth, c.node, c.what, c.count);
        if c.what == Counted::Wanted {
            // A repeated want is answered too if it never was.
            k.give(now, depth, others, |to, n| give(key, period, to, n));
        }
        changed
    }

    /// Calls `f` with every figure of the current period, as `(key,
    /// period, node, count, what)`: this locker's wants and gifts, and
    /// those of peers it heard, so that a locker that rejoins learns them.
    pub fn counts(&self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted)) {
        let period = self.period(now);
        for (key, k) in self.peered().filter(|(_, k)| k.period() == period) {
            let wanted = k.exchange().wanted_in(period);
            if wanted > 0 {
                f(key, period, ME, wanted, Counted::Wanted);
            }
            k.exchange().counts(|_, node, n, what| f(key, period, node, n, what));
        }
    }

    /// Calls `f` with this locker's own wants and gifts, as `(key, period,
    /// count, what)`, of the keys that asked or gave since they were last
    /// republished that `walk` takes, so that one lost on the way is
    /// repaired.
    pub fn drain_own(&mut self, walk: &RepairWalk, mut f: impl FnMut(Option<&str>, u64, u32, Counted)) {
        let mut each = |key: Option<&str>, k: &mut Ledger| {
            if walk.take() && k.take_touched() {
                let (period, wanted) = (k.period(), k.exchange().wanted_in(k.period()));
                if wanted > 0 {
                    f(key, period, wanted, Counted::Wanted);
                }
                k.exchange().counts(|_, node, n, what| {
                    if node == ME {
                        f(key, period, n, what)
                    }
                });
            }
        };
        if let Some(k) = self.unkeyed_peered.as_deref_mut() {
            each(None, k);
        }
        self.ledgers.iter_mut().for_each(|(key, k)| each(Some(key), k));
    }

    /// `key`'s share, brought to `now`: added when new (with `room` for a
    /// new key), as an earlier run left it when this run resumes their
    /// share (see `kept`), else from a TAT this locker kept alone
    /// (restored) if it is emptier than a fresh share.
    pub(super) fn peered_mut(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        room: KeyRoom,
        share: Share,
    ) -> Result<&mut Ledger, NoRoom> {
        let (quota, depth, period) = (self.quota, self.depth, self.period(now));
        let (own, inherited) = share.holds(quota, self.burst, period);
        let base = own + inherited;
        self.base = base;
        // A share never touched: its own room full, or filling from the
        // start of the first period this run holds room in; room inherited
        // from a dead member comes empty (`settle` adds it).
        let fresh = match share.fills_from(quota) {
            0 => 0,
            from => from.min(now).saturating_add(depth),
        };
        // An earlier run's share, resumed (see `kept`): only once this run
        // has joined, when it knows whether it resumes; a share made while
        // it joined (a peer's want came first) gives way to it then.
        let held = |b: &mut Bucket| {
            if b.earlier.is_empty() || share.owns_from == Nanos::MAX {
                return None;
            }
            let earlier = b.earlier.remove(&key.map(Box::<str>::from))?;
            share.resumes.then(|| earlier.share(depth, period, own)).flatten()
        };
        let k = match key {
            None => match (held(self), self.unkeyed_peered.take()) {
                (Some(resumed), joining) => {
                    self.unkeyed_peered.insert(Box::new(resumed.over(joining.as_deref(), now, depth)))
                }
                (None, Some(k)) => self.unkeyed_peered.insert(k),
                (None, None) => {
                    let k = Ledger::new(now, depth, fresh.max(self.unkeyed), period, own);
                    self.unkeyed_peered.insert(Box::new(k))
                }
            },
            Some(k) => {
                let resumed = held(self);
                if self.ledgers.contains_key(k) {
                    let ledger = self.ledgers.get_mut(k).expect("checked");
                    if let Some(resumed) = resumed {
                        *ledger = resumed.over(Some(ledger), now, depth);
                    }
                    ledger
                } else {
                    // A TAT kept alone moves here; the sweep drops it there.
                    let kept = self.tats.get_mut(k).map(std::mem::take);
                    if kept.is_none() && resumed.is_none() && room == KeyRoom::Full {
                        return Err(NoRoom);
                    }
                    let new = || Ledger::new(now, depth, fresh.max(kept.unwrap_or(0)), period, base);
                    self.ledgers.entry(k.into()).or_insert(resumed.unwrap_or_else(new))
                }
            }
        };
        k.settle(now, quota, depth, base);
        Ok(k)
    }

    /// Every peered share, the unkeyed one first (as `None`).
    pub(super) fn peered(&self) -> impl Iterator<Item = (Option<&str>, &Ledger)> {
        let unkeyed = self.unkeyed_peered.as_deref().map(|k| (None, k));
        unkeyed.into_iter().chain(self.ledgers.iter().map(|(k, l)| (Some(&**k), l)))
    }

    /// Ends the gifts of ended periods, and drops the shares that say no
    /// more than a fresh one would (`Ledger::is_idle`): full, and untouched
    /// for the bucket's depth, so that a fresh share made later, full of
    /// whatever room this locker then holds, is never fuller than one
    /// kept all along.
    pub(super) fn sweep_peered(&mut self, now: Nanos) {
        let (quota, depth, base) = (self.quota, self.depth, self.base);
        let period = quota.slot_of(now);
        self.earlier.retain(|_, e| e.period().saturating_add(1) >= period);
        self.ledgers.retain(|_, k| {
            k.settle(now, quota, depth, base);
            !k.is_idle(now, depth)
        });
    }
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;
