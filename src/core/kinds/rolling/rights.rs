//! One key's conserved rights in a rolling window shared by peers: the
//! rights this locker and each peer node lent each other, per window, what
//! the peers asked for, and the rule that says how many permits this
//! locker may still grant.
//!
//! Each member holds a fixed share of `max_requests` rights
//! (`Share::rolling_rights`), and rights move by the window's exchange
//! (`core::share::exchange`, which holds the argument that they are
//! conserved). A locker grants only while its own grants that still count
//! are fewer than its rights.
//!
//! Rights move by gifts, numbered by window (`k`, aligned to the epoch like
//! a fixed window's slots, each T long). A gift of window `k` lets its
//! receiver grant with it during window `k`; the grants it makes then still
//! count during window `k + 1`, so there the gift only *covers* them, and it
//! is free of them by the end of `k + 1`. The giver therefore counts what it
//! gave a node as given for two windows: in window `k` it holds
//!
//! ```text
//! holds + Σ got[k] - Σ_node max(gave[k][node], gave[k-1][node])
//! ```
//!
//! rights, and its receivers' covers are `max(0, got[k-1] - got[k])` per
//! giver. It may grant while its grants stamped in window `k`, plus those
//! of window `k - 1` beyond their cover, are fewer. A gift to the same node
//! in the next window *renews* the last one up to its size at no cost to the
//! giver (the max above), so rights stay where they are used: a giver
//! renews what it lent a node, into the current window and ahead into the
//! next, whenever it hears that node grant or ask in the current window.
//! A right moved stays moved while its receiver keeps granting or asking;
//! it comes back to its giver two windows after the last window in which
//! its receiver did (idle, cut off or dead since). A locker that needs rights
//! asks like any other, and any locker with spare rights of its own share
//! gives to a peer that asks, unless it asked for rights itself lately
//! (see `Exchange::give`).
//!
//! Pure arithmetic: no clock, no names, no wire format.
//!
//! A run restarted with its state file also holds what its earlier runs
//! lent and got per window, as the file kept them (`carry`): what they
//! lent counts as lent here too, and a run that resumed their share counts
//! what they got as its own (`free_resumed`).

use crate::core::share::exchange::{Exchange, Giving};
use crate::core::share::{Counted, NodeIx};
use crate::core::time::Nanos;

/// Own grants that still count, by the window of their stamps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnGrants {
    /// Stamped in the current window (or later, for a coarse stamp).
    pub current: u32,
    /// Stamped in the window before.
    pub previous: u32,
}

/// What an earlier run of this locker lent and got for one window, in
/// all, as its state file kept them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlierRights {
    /// The run, as the state file numbers them.
    pub run: u32,
    pub window: u64,
    /// What it counted as lent for the window (see `own_figures`).
    pub lent: u32,
    pub got: u32,
}

/// One key's ledger of conserved rights: the exchange, by window, of the
/// current and the previous window (and the next, merged early from a
/// peer a little ahead; wants of the current one only).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rights {
    exchange: Exchange,
    /// Changed since it was last republished.
    pub(super) touched: bool,
    /// Earlier runs' figures (see the module's header).
    earlier: Vec<EarlierRights>,
}

impl Rights {
    /// Forgets what no longer bears on window `window` or later.
    pub fn prune(&mut self, window: u64) {
        self.exchange.prune(window.saturating_sub(1), window);
        self.earlier.retain(|e| e.window.saturating_add(1) >= window);
    }

    /// Whether nothing is kept.
    pub fn is_idle(&self) -> bool {
        self.exchange.is_empty() && self.earlier.is_empty()
    }

    /// The window's wants and gifts.
    pub fn exchange(&self) -> &Exchange {
        &self.exchange
    }

    /// Carries what an earlier run lent and got for a window into this
    /// run's figures; the larger figures of a run's window are kept.
    pub fn carry(&mut self, e: EarlierRights) {
        match self.earlier.iter_mut().find(|o| o.run == e.run && o.window == e.window) {
            Some(o) => (o.lent, o.got) = (o.lent.max(e.lent), o.got.max(e.got)),
            None => self.earlier.push(e),
        }
    }

    /// This run's own figures for the windows that still bear on `window`
    /// (the one before, it, and the next), as `(window, lent, got)`: what a
    /// state file keeps so that a restart resumes them (see `carry`).
    pub fn own_figures(&self, window: u64, mut f: impl FnMut(u64, u32, u32)) {
        for w in window.saturating_sub(1)..=window + 1 {
            let (lent, got) = (lent_here(&self.exchange, w), self.exchange.got_in(w));
            if lent > 0 || got > 0 {
                f(w, u32::try_from(lent).unwrap_or(u32::MAX), got);
            }
        }
    }

    /// The permits this locker may grant in window `window`, holding
    /// `initial` rights before gifts, with `held` own grants still
    /// counting (see the module's rule).
    pub fn free(&self, window: u64, initial: u32, held: OwnGrants) -> u32 {
        self.free_from(window, i64::from(initial), held)
    }

    /// `free` for a run that resumed its earlier runs' share: what they
    /// got is its own too, what they lent is not, and their grants that
    /// still count (`earlier_held`) are charged with its own, uncovered.
    pub fn free_resumed(&self, window: u64, initial: u32, held: OwnGrants, earlier_held: u32) -> u32 {
        let (lent, got) = earlier_in(&self.earlier, window);
        self.free_from(window, i64::from(initial) + got - lent - i64::from(earlier_held), held)
    }

    fn free_from(&self, window: u64, initial: i64, held: OwnGrants) -> u32 {
        self.balance(window, initial, held).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// What `free` and `free_resumed` say when the own grants that count
    /// are more than the rights held (a charge, see `rolling::charge`):
    /// how many more, 0 when none.
    pub fn owed(&self, window: u64, initial: u32, held: OwnGrants, earlier: Option<u32>) -> u32 {
        let initial = match earlier {
            Some(earlier_held) => {
                let (lent, got) = earlier_in(&self.earlier, window);
                i64::from(initial) + got - lent - i64::from(earlier_held)
            }
            None => i64::from(initial),
        };
        (-self.balance(window, initial, held)).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// The rights held less the own grants they are charged with: below
    /// zero only after a charge.
    fn balance(&self, window: u64, initial: i64, held: OwnGrants) -> i64 {
        let (mut rights, mut cover) = (initial, 0i64);
        let ex = &self.exchange;
        for l in ex.trades() {
            if l.period == window {
                // Lent in either window, a right is still the receiver's.
                let prev = window.checked_sub(1).map_or_else(Default::default, |p| ex.trade(p, l.node));
                rights += i64::from(l.got) - i64::from(prev.gave.max(l.gave));
                cover += (i64::from(prev.got) - i64::from(l.got)).max(0);
            } else if l.period + 1 == window && ex.trades().all(|c| c.period != window || c.node != l.node) {
                rights -= i64::from(l.gave);
                cover += i64::from(l.got);
            }
        }
        let charged = i64::from(held.current) + (i64::from(held.previous) - cover).max(0);
        rights - charged
    }

    /// Asks the peers for `need` rights more than they gave for `window`,
    /// unless that many are asked already: what was asked is cumulative,
    /// so an ask decided again does not ask twice. It keeps its own until
    /// `keep_until` (see `Exchange::give`).
    pub fn want(&mut self, window: u64, need: u32, keep_until: Nanos) {
        self.exchange.want(window, self.exchange.got_in(window).saturating_add(need), keep_until);
        // Still short: the next repair says so again, in case the want or
        // the gift was lost.
        self.touched = true;
    }

    /// What this locker asked for, if that grew since the last call.
    pub fn take_wanted_new(&mut self) -> Option<(u64, u32)> {
        self.exchange.take_wanted_new()
    }

    /// Merges a peer's want or gift for `window`, or an echo of this
    /// locker's own gift (see `Exchange::merge`); returns whether it grew.
    pub fn merge(&mut self, window: u64, node: NodeIx, what: Counted, count: u32) -> bool {
        self.exchange.merge(window, node, what, count) > 0
    }

    /// Renews for `window` what this locker lent `node` in the window
    /// before, up to its size, and for the next window what it lent in
    /// this one: neither costs the giver anything (see the module's rule),
    /// and a right the receiver still uses stays there rather than sit idle
    /// on its way back, or at a window's start while the renewal travels.
    /// Only while what it lent is within its own rights now (`initial`): a
    /// locker that lost its lease, or whose share a majority passed on,
    /// renews nothing, so that what it lent comes back within two windows
    /// and the heir of its share never holds a right a receiver still uses.
    /// `f` hears each new total given, as `(window, node, total)`, already
    /// counted.
    pub fn renew(&mut self, window: u64, node: NodeIx, initial: u32, mut f: impl FnMut(u64, NodeIx, u32)) {
        self.touched |= renew(&mut self.exchange, &self.earlier, (window, node, initial), &mut f);
    }

    /// Answers what peers asked for in `window` (`Exchange::give`): renews
    /// what this locker lent each of them before, then gives what it can
    /// spare (`spare`, what it may grant now, and no more of its own share
    /// `initial` than it has not lent; a right is lent only by the member
    /// whose share it is, so that it is in one place at a time: a receiver
    /// that passed on what it was lent could renew it after its own lender
    /// stopped), at `now`. `f` hears each new total given, as for `renew`.
    pub fn give(
        &mut self,
        (window, now): (u64, Nanos),
        spare: u32,
        initial: u32,
        others: u32,
        mut f: impl FnMut(u64, NodeIx, u32),
    ) {
        let lendable = u64::from(initial).saturating_sub(lent(&self.exchange, &self.earlier, window)) as u32;
        let (earlier, touched) = (&self.earlier, &mut self.touched);
        self.exchange.give(window, spare.min(lendable), others, now, |ex, step| match step {
            Giving::Answering(node) => *touched |= renew(ex, earlier, (window, node, initial), &mut f),
            Giving::Gave { node, total, .. } => {
                *touched = true;
                f(window, node, total);
            }
        });
        // What it gave now goes on into the next window too.
        let asked: Vec<NodeIx> =
            self.exchange.trades().filter(|t| t.period == window && t.wanted > 0).map(|t| t.node).collect();
        for node in asked {
            self.renew(window, node, initial, &mut f);
        }
    }
}

/// `Rights::renew` on its parts, for `(window, node, initial)`; returns
/// whether it renewed anything.
fn renew(
    ex: &mut Exchange,
    earlier: &[EarlierRights],
    (window, node, initial): (u64, NodeIx, u32),
    f: &mut impl FnMut(u64, NodeIx, u32),
) -> bool {
    let mut renewed = false;
    for w in [window, window + 1] {
        let Some(before) = w.checked_sub(1).map(|p| ex.trade(p, node).gave) else { continue };
        if lent(ex, earlier, w) > u64::from(initial) {
            continue;
        }
        let l = ex.trade_mut(w, node);
        if l.gave < before {
            l.gave = before;
            renewed = true;
            f(w, node, before);
        }
    }
    renewed
}

/// What earlier runs lent that still counts in `window`, and what they
/// got for it: a right lent in one window counts in the next too.
fn earlier_in(earlier: &[EarlierRights], window: u64) -> (i64, i64) {
    let (mut lent, mut got) = (0i64, 0i64);
    for e in earlier.iter().filter(|e| e.window == window || e.window + 1 == window) {
        let before = |w| earlier.iter().find(|o| o.run == e.run && o.window == w).map_or(0, |o| o.lent);
        if e.window == window {
            got += i64::from(e.got);
            lent += i64::from(e.lent.max(window.checked_sub(1).map_or(0, before)));
        } else if !earlier.iter().any(|o| o.run == e.run && o.window == window) {
            lent += i64::from(e.lent);
        }
    }
    (lent, got)
}

/// Rights this locker counts as lent for `window`, its earlier runs'
/// included (see `lent_here`).
fn lent(ex: &Exchange, earlier: &[EarlierRights], window: u64) -> u64 {
    lent_here(ex, window) + earlier_in(earlier, window).0 as u64
}

/// Rights this run counts as lent for `window`: to each node, the larger
/// of what it gave for this window and for the one before.
fn lent_here(ex: &Exchange, window: u64) -> u64 {
    let mut lent = 0u64;
    for l in ex.trades() {
        if l.period == window {
            let prev = window.checked_sub(1).map_or(0, |p| ex.trade(p, l.node).gave);
            lent += u64::from(prev.max(l.gave));
        } else if l.period + 1 == window && ex.trades().all(|c| c.period != window || c.node != l.node) {
            lent += u64::from(l.gave);
        }
    }
    lent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::share::ME;

    const A: NodeIx = 1;
    const B: NodeIx = 2;

    #[test]
    fn a_gift_is_given_before_it_is_published_and_lent_for_two_windows() {
        let (mut giver, mut taker) = (Rights::default(), Rights::default());
        taker.want(7, 3, 0);
        assert_eq!(taker.take_wanted_new(), Some((7, 3)));
        assert!(giver.merge(7, B, Counted::Wanted, 3));
        let mut sent = Vec::new();
        giver.give((7, 0), 2, 2, 2, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent, [(7, B, 2), (8, B, 2)], "half of 3 each, of 2 other members, rounded up; on into window 8");
        assert_eq!(giver.free(7, 2, OwnGrants::default()), 0, "taken off before it left");
        assert!(taker.merge(7, A, Counted::Gave(ME), 2));
        assert!(!taker.merge(7, A, Counted::Gave(ME), 2), "a repeat changes nothing");
        assert_eq!(taker.free(7, 1, OwnGrants::default()), 3);
        // Window 8: the taker's grants of window 7 are covered, but it may
        // not grant with the gift; the giver has not got it back yet.
        let held = OwnGrants { current: 0, previous: 3 };
        assert_eq!(taker.free(8, 1, held), 0, "1 of its own under the cover of 2");
        assert_eq!(taker.free(8, 1, OwnGrants { current: 0, previous: 2 }), 1);
        assert_eq!(giver.free(8, 2, OwnGrants::default()), 0, "still lent");
        assert!(taker.merge(8, A, Counted::Gave(ME), 2), "the renewal");
        assert_eq!(taker.free(8, 1, OwnGrants { current: 0, previous: 3 }), 0, "no cover for renewed rights");
        assert_eq!(taker.free(8, 1, OwnGrants { current: 0, previous: 1 }), 2);
        taker.prune(10);
        giver.prune(10);
        assert_eq!((giver.free(10, 2, OwnGrants::default()), taker.free(10, 1, OwnGrants::default())), (2, 1), "back");
    }

    #[test]
    fn a_resumed_run_holds_what_its_earlier_run_did_not_lend_or_use() {
        let mut earlier = Rights::default();
        earlier.merge(7, B, Counted::Wanted, 4);
        earlier.give((7, 0), 3, 3, 2, |_, _, _| {});
        earlier.merge(7, A, Counted::Gave(ME), 1);
        let mut kept = Vec::new();
        earlier.own_figures(7, |w, lent, got| kept.push((w, lent, got)));
        assert_eq!(kept, [(7, 2, 1), (8, 2, 0)], "lent for two windows, got for one");
        let mut resumed = Rights::default();
        kept.iter().for_each(|&(window, lent, got)| resumed.carry(EarlierRights { run: 0, window, lent, got }));
        let held = OwnGrants::default();
        assert_eq!(resumed.free_resumed(7, 3, held, 1), 1, "3 of its own and 1 got, less 2 lent and 1 granted");
        assert_eq!(resumed.free(7, 3, held), 3, "a run that did not resume counts none of it");
        assert_eq!(resumed.free_resumed(8, 3, held, 0), 1, "still lent");
        let mut sent = Vec::new();
        resumed.merge(7, B, Counted::Wanted, 9);
        resumed.give((7, 0), 5, 3, 1, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent[0], (7, B, 1), "it lends only what its earlier run did not");
        resumed.prune(9);
        assert_eq!(resumed.free_resumed(9, 3, held, 0), 0, "what both runs lent for window 8 counts in 9");
        resumed.prune(10);
        assert_eq!(resumed.free_resumed(10, 3, held, 0), 3, "all back");
    }

    #[test]
    fn a_renewal_keeps_the_rights_where_they_are_used_at_no_cost() {
        let mut giver = Rights::default();
        giver.merge(7, ME, Counted::Gave(B), 2);
        let mut sent = Vec::new();
        giver.renew(8, B, 0, |w, to, n| sent.push((w, to, n)));
        assert!(sent.is_empty(), "nothing without rights of its own: what it lent comes back");
        giver.renew(8, B, 2, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent, [(8, B, 2), (9, B, 2)], "into this window and the next");
        assert_eq!(giver.free(8, 2, OwnGrants::default()), 0, "no more than lent once");
        assert_eq!(giver.free(9, 2, OwnGrants::default()), 0);
        giver.renew(8, B, 2, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent.len(), 2, "once");
        let mut short = Rights::default();
        short.merge(7, ME, Counted::Gave(B), 2);
        short.want(8, 1, 10);
        short.merge(8, B, Counted::Wanted, 3);
        let mut sent = Vec::new();
        short.give((8, 0), 5, 5, 1, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent, [(8, B, 2), (9, B, 2)], "a locker that asked lately renews, and gives no more");
        sent.clear();
        short.give((8, 10), 5, 5, 1, |w, to, n| sent.push((w, to, n)));
        assert_eq!(
            sent,
            [(8, B, 5), (9, B, 5)],
            "its own asks over, it gives the 3 it can spare on top of the 2 renewed"
        );
        let mut taker = Rights::default();
        taker.merge(8, A, Counted::Gave(ME), 3);
        taker.merge(8, B, Counted::Wanted, 3);
        let mut sent = Vec::new();
        taker.give((8, 0), 4, 1, 1, |w, to, n| sent.push((w, to, n)));
        assert_eq!(sent, [(8, B, 1), (9, B, 1)], "its own one right, not what it was lent");
    }
}
