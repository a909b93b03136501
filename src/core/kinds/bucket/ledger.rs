//! One key of a token bucket shared by peers, as one locker holds it: its
//! room (the tokens it may hold), how full that room is, and the period's
//! wants and gifts that moved room and tokens between the lockers.
//!
//! The room's fill is kept as the tokens it lacks, times the whole
//! bucket's `depth` (`burst x interval`), at an instant: the room refills
//! at `room / depth` tokens per nanosecond, the bucket's rate times room
//! over burst, so the lack falls by `room` per nanosecond, and every step
//! is exact integer arithmetic. As a TAT (for the state log) the room is
//! full `lack / room` nanoseconds from now, as a lone bucket's is. Every
//! change of room says what becomes of the tokens (`reroom`): a gift moves
//! as many tokens as room, and room that comes back at a period's end
//! comes back empty.
//!
//! Wants and gifts are the period's exchange (`core::share::exchange`,
//! which holds the argument): what *spare* means here is the tokens held,
//! and a gift moves as much room as tokens, out of the giver's room and
//! into the receiver's. Pure arithmetic: no clock, no names, no wire
//! format; `super::peer` decides when each step applies.

use crate::core::limit::Quota;
use crate::core::share::exchange::{Exchange, Giving};
use crate::core::share::{Counted, NodeIx, ME};
use crate::core::time::Nanos;

/// One key's share of a peered token bucket in its latest period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledger {
    /// Tokens the room lacks, times the depth, at `at` (see the header).
    lack: u128,
    at: Nanos,
    /// The period the figures below are of.
    period: u64,
    /// This locker's own room in `period` before gifts (`Share::holds`).
    base: u32,
    /// The room held: `base`, plus what peers gave, less what was given.
    room: u32,
    /// Tokens this locker granted in `period`.
    spent: u32,
    /// Room an earlier run of this locker had got less given in `period`
    /// (see `resumed`).
    carried: i64,
    /// The period's wants and gifts (tokens, with as much room).
    exchange: Exchange,
    /// Wanted or gave since the last repair publish.
    touched: bool,
}

impl Ledger {
    /// A key first held at `now` in `period` with `base` room, which a
    /// lone bucket whose TAT is `tat` would fill as much (0: full).
    pub fn new(now: Nanos, depth: Nanos, tat: Nanos, period: u64, base: u32) -> Ledger {
        Ledger {
            lack: u128::from(base) * u128::from(tat.saturating_sub(now).min(depth)),
            at: now,
            period,
            base,
            room: base,
            spent: 0,
            carried: 0,
            exchange: Exchange::default(),
            touched: false,
        }
    }

    /// A key an earlier run held in `period` with `base` room before gifts
    /// and `room` held, full again at `tat` by its reckoning at `at`: the
    /// same fill of the same room (see `bucket::kept`).
    pub fn resumed(at: Nanos, depth: Nanos, tat: Nanos, period: u64, base: u32, room: u32) -> Ledger {
        let lack = u128::from(room) * u128::from(tat.saturating_sub(at).min(depth));
        let carried = i64::from(room) - i64::from(base);
        Ledger { lack, room, carried, ..Ledger::new(at, depth, 0, period, base) }
    }

    /// This resumed share, with the gifts that the share `joining` (made
    /// while this run joined, before it knew it resumes) received: they
    /// were given to this run, so their tokens and room are its. Nothing
    /// else of it counts: it held no room of its own, so it gave nothing.
    pub fn over(mut self, joining: Option<&Ledger>, now: Nanos, depth: Nanos) -> Ledger {
        for t in joining.iter().flat_map(|j| j.exchange.trades()).filter(|t| t.got > 0) {
            self.merge(now, depth, t.node, Counted::Gave(ME), t.got);
        }
        self
    }

    /// This locker's own room before gifts, and the room it holds.
    pub fn rooms(&self) -> (u32, u32) {
        (self.base, self.room)
    }

    /// The room's fill at `now` as a TAT: when it is full again.
    pub fn tat(&self, now: Nanos) -> Nanos {
        now.saturating_add(self.full_in(now))
    }

    /// What this locker gave its peers in the period, and got, in all.
    pub fn traded(&self) -> (u32, u32) {
        (self.exchange.gave_in(self.period), self.exchange.got_in(self.period))
    }

    /// The period the figures are of.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Tokens granted in the period.
    pub fn spent(&self) -> u32 {
        self.spent
    }

    /// Tokens lacked at `now`, times the depth.
    fn lack_at(&self, now: Nanos) -> u128 {
        self.lack.saturating_sub(u128::from(self.room) * u128::from(now.saturating_sub(self.at)))
    }

    /// Tokens held at `now`, times `depth`: exact, no rounding.
    fn scaled_level(&self, now: Nanos, depth: Nanos) -> u128 {
        (u128::from(self.room) * u128::from(depth)).saturating_sub(self.lack_at(now))
    }

    /// Whole tokens held at `now`.
    pub fn available(&self, now: Nanos, depth: Nanos) -> u32 {
        (self.scaled_level(now, depth) / u128::from(depth.max(1))) as u32
    }

    /// Nanoseconds from `now` until `n` tokens are held, at this room;
    /// `None` if the room cannot hold them.
    pub fn wait_for(&self, now: Nanos, depth: Nanos, n: u32) -> Option<Nanos> {
        if n > self.room || self.room == 0 {
            return None;
        }
        let allowed = u128::from(self.room - n) * u128::from(depth);
        let over = self.lack_at(now).saturating_sub(allowed);
        Some(over.div_ceil(u128::from(self.room)) as Nanos)
    }

    /// Nanoseconds from `now` until the room is full.
    pub fn full_in(&self, now: Nanos) -> Nanos {
        self.lack_at(now).div_ceil(u128::from(self.room.max(1))) as Nanos
    }

    /// Nanoseconds from `now` until this share is full with tokens to
    /// grant, the period ending in `period_end`: `full_in`, but a share
    /// that gave all its room away holds none until the period ends, when
    /// its room comes back empty and fills in `depth`.
    pub fn full_with_tokens_in(&self, now: Nanos, depth: Nanos, period_end: Nanos) -> Nanos {
        match self.room {
            0 => period_end.saturating_add(depth),
            _ => self.full_in(now),
        }
    }

    /// Makes the room `room` at `at`, with `tokens` more (fewer when
    /// negative) than were held: the tokens held become at most the room.
    /// A gift moves tokens and room alike; room taken back or handed on
    /// with no tokens leaves the tokens held as they were, and room that
    /// grows comes empty. Callers never take more tokens than are held.
    /// A debt (tokens below zero, after a charge) stays a debt: the
    /// tokens a gift brings pay it first, and room that moves never
    /// forgives it.
    fn reroom(&mut self, at: Nanos, depth: Nanos, room: u32, tokens: i64) {
        let d = u128::from(depth);
        let moved = u128::from(tokens.unsigned_abs()) * d;
        let lack = self.lack_at(at);
        let owed = lack.saturating_sub(u128::from(self.room) * d);
        let held = self.scaled_level(at, depth);
        let (held, owed) = match tokens < 0 {
            true => (held.saturating_sub(moved), owed),
            false => ((held + moved).saturating_sub(owed), owed.saturating_sub(held + moved)),
        };
        let held = held.min(u128::from(room) * d);
        (self.lack, self.at, self.room) = (u128::from(room) * d - held + owed, at.max(self.at), room);
    }

    /// Brings the figures to `now`, where this locker's own room is `base`.
    /// When a period has ended since, its gifts end with it: the room
    /// becomes the old base at the period's end, a receiver keeping at
    /// most that many tokens and a giver getting its room back empty; then
    /// the room becomes the new base (empty) from the current period's
    /// start. A base that changes within a period (a place learnt) changes
    /// the room from `now`, empty.
    pub fn settle(&mut self, now: Nanos, quota: Quota, depth: Nanos, base: u32) {
        let period = quota.slot_of(now);
        if self.period < period {
            if self.room != self.base {
                self.reroom(quota.slot_end(self.period), depth, self.base, 0);
            }
            let (lack, at) = (self.lack, self.at);
            *self = Ledger { lack, at, ..Ledger::new(at, depth, 0, period, self.base) };
            if base != self.base {
                self.reroom(quota.slot_end(period - 1), depth, base, 0);
            }
        } else if base != self.base {
            // The room is the base and what gifts moved, even after a base
            // of less than was given.
            let (gave, got) = self.traded();
            let moved = i64::from(got) - i64::from(gave) + self.carried;
            let room = (i64::from(base) + moved).max(0) as u32;
            self.reroom(now, depth, room, 0);
        }
        self.base = base;
    }

    /// Tokens owed beyond an empty room at `now`, rounded up: a charge's
    /// debt, which this share's own refill pays (see `bucket::charge`).
    pub fn debt(&self, now: Nanos, depth: Nanos) -> u32 {
        let owed = self.lack_at(now).saturating_sub(u128::from(self.room) * u128::from(depth));
        u32::try_from(owed.div_ceil(u128::from(depth.max(1)))).unwrap_or(u32::MAX)
    }

    /// Takes `n` tokens at `now`; the caller checked they are held, or
    /// charges them (`bucket::charge`), which may leave a debt.
    pub fn take(&mut self, now: Nanos, depth: Nanos, n: u32) {
        (self.lack, self.at) = (self.lack_at(now) + u128::from(n) * u128::from(depth), now.max(self.at));
        self.spent = self.spent.saturating_add(n);
    }

    /// Gives back up to `n` of the tokens granted in the period that the
    /// room lacks at `now`; returns how many.
    pub fn give_back(&mut self, now: Nanos, depth: Nanos, n: u32) -> u32 {
        let (lack, d) = (self.lack_at(now), u128::from(depth.max(1)));
        let back = u32::try_from(lack / d).unwrap_or(u32::MAX).min(n).min(self.spent);
        (self.lack, self.at) = (lack - u128::from(back) * d, now.max(self.at));
        self.spent -= back;
        back
    }

    /// Asks the peers for `need` more tokens at `now`, unless an earlier
    /// ask is still unanswered and younger than `patience`: what was asked
    /// is cumulative, so an ask decided again does not ask twice, and a
    /// peer that had nothing spare is asked again once its room may have
    /// refilled. For as long, this locker keeps its own tokens rather than
    /// give them (see `Exchange::give`). Returns whether the ask grew.
    pub fn want(&mut self, now: Nanos, need: u32, patience: Nanos) -> bool {
        let (wanted, got) = (self.exchange.wanted_in(self.period), self.exchange.got_in(self.period));
        let unanswered = wanted > got;
        // Until then it also keeps its own (see `Exchange::give`).
        if unanswered && self.exchange.keeps_own(self.period, now) {
            return false;
        }
        let from = if unanswered { wanted } else { got };
        if !self.exchange.want(self.period, from.saturating_add(need), now.saturating_add(patience)) {
            return false;
        }
        self.touched = true;
        true
    }

    /// What this locker asked for, if that grew since the last call.
    pub fn take_wanted_new(&mut self) -> Option<u32> {
        self.exchange.take_wanted_new().map(|(_, n)| n)
    }

    /// Merges a peer's want or gift of the period (see `Exchange::merge`)
    /// at `now`: what a gift to this locker grew by arrives with as much
    /// room. Returns whether anything grew.
    pub fn merge(&mut self, now: Nanos, depth: Nanos, node: NodeIx, what: Counted, count: u32) -> bool {
        let grew = self.exchange.merge(self.period, node, what, count);
        if what == Counted::Gave(ME) && grew > 0 {
            self.reroom(now, depth, self.room.saturating_add(grew), i64::from(grew));
        }
        grew > 0
    }

    /// Gives peers what they asked for and this locker can spare at `now`
    /// out of the tokens it holds (see `Exchange::give`, `others` the
    /// other members): each gift's tokens and as much room leave this
    /// locker before `f` hears of it with the receiver's cumulative
    /// total, which is what is published.
    ///
    /// A share that granted nothing in the period is idle: it gives the
    /// whole want, not its part of it. An idle share is full, so its
    /// refill is lost; given away with its room, the refill goes where the
    /// tokens are spent, and a want over many peers is met in one round
    /// trip instead of one per doubling. Should demand come here later in
    /// the period, this locker asks back like any other.
    pub fn give(&mut self, now: Nanos, depth: Nanos, others: u32, mut f: impl FnMut(NodeIx, u32)) {
        let mut exchange = std::mem::take(&mut self.exchange);
        let parts = if self.spent == 0 { 1 } else { others };
        exchange.give(self.period, self.available(now, depth), parts, now, |_, step| {
            if let Giving::Gave { node, n, total } = step {
                self.reroom(now, depth, self.room - n, -i64::from(n));
                self.touched = true;
                f(node, total);
            }
        });
        self.exchange = exchange;
    }

    /// Whether this ledger says nothing a fresh one would not at `now`:
    /// no wants or gifts, the base room, full, and neither taken from nor
    /// changed in the last `depth`. The last: a fresh share's own room is
    /// full (`Bucket::peered_mut`), and its room may by then be larger than
    /// this one's (a lease regained, a base that grew), so it is dropped
    /// only once even a room emptied by its last grant would have refilled.
    pub fn is_idle(&self, now: Nanos, depth: Nanos) -> bool {
        self.exchange.is_empty() && self.carried == 0 && self.lack_at(now) == 0 && now >= self.at.saturating_add(depth)
    }

    /// The period's wants and gifts.
    pub fn exchange(&self) -> &Exchange {
        &self.exchange
    }

    /// Clears the mark of a repair publish; returns whether it was set.
    pub fn take_touched(&mut self) -> bool {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;
    /// A bucket of 10 refilled at 10 per second: 1 s deep.
    const DEPTH: Nanos = 1000 * MS;

    fn quota() -> Quota {
        Quota::new(10, 1.0).unwrap()
    }

    #[test]
    fn a_room_refills_at_its_part_of_the_rate() {
        // 4 of the 10 tokens' room, empty at 0: 4 per second.
        let l = Ledger::new(0, DEPTH, DEPTH, 0, 4);
        assert_eq!(l.available(0, DEPTH), 0);
        assert_eq!(l.available(250 * MS, DEPTH), 1);
        assert_eq!(l.wait_for(0, DEPTH, 2), Some(500 * MS));
        assert_eq!(l.available(5 * DEPTH, DEPTH), 4, "never more than the room");
        assert_eq!(l.wait_for(0, DEPTH, 5), None);
    }

    #[test]
    fn a_gift_moves_tokens_and_room_and_the_giver_keeps_the_rest() {
        let mut giver = Ledger::new(0, DEPTH, 0, 0, 4);
        giver.merge(0, DEPTH, 7, Counted::Wanted, 3);
        let mut sent = Vec::new();
        giver.give(0, DEPTH, 1, |to, n| sent.push((to, n)));
        assert_eq!(sent, [(7, 3)]);
        assert_eq!((giver.room, giver.available(0, DEPTH)), (1, 1), "a full room of 1 left");
        giver.give(0, DEPTH, 1, |_, _| panic!("the want is answered"));
        let mut taker = Ledger::new(0, DEPTH, DEPTH, 0, 2);
        assert!(taker.merge(0, DEPTH, 3, Counted::Gave(ME), 3));
        assert!(!taker.merge(0, DEPTH, 3, Counted::Gave(ME), 3), "a repeat");
        assert_eq!((taker.room, taker.available(0, DEPTH)), (5, 3));
        // 5 of 10 tokens' room: refills at 5 per second.
        assert_eq!(taker.available(200 * MS, DEPTH), 4);
    }

    #[test]
    fn a_charges_debt_is_paid_by_the_refill_or_a_gift_never_forgiven() {
        // A full room of 4 charged 7: 3 owed, paid at 4 per second.
        let mut l = Ledger::new(0, DEPTH, 0, 0, 4);
        l.take(0, DEPTH, 7);
        assert_eq!((l.available(0, DEPTH), l.debt(0, DEPTH)), (0, 3));
        assert_eq!(l.wait_for(0, DEPTH, 1), Some(1000 * MS), "3 owed and 1 more, at 4 per second");
        // A gift of 2 tokens with their room pays 2 of the debt.
        assert!(l.merge(0, DEPTH, 3, Counted::Gave(ME), 2));
        assert_eq!((l.room, l.available(0, DEPTH), l.debt(0, DEPTH)), (6, 0, 1));
        // The period's end takes the room back: the debt stays.
        l.settle(1000 * MS, quota(), DEPTH, 4);
        assert_eq!(l.debt(1000 * MS, DEPTH), 0, "6 per second paid it within the period");
        let mut m = Ledger::new(0, DEPTH, 0, 0, 4);
        m.take(0, DEPTH, 12);
        m.settle(1000 * MS, quota(), DEPTH, 4);
        assert_eq!(m.debt(1000 * MS, DEPTH), 4, "8 owed, 4 paid in the first second");
    }

    #[test]
    fn gifts_end_with_their_period_and_the_room_comes_back_empty() {
        let mut giver = Ledger::new(0, DEPTH, 0, 0, 4);
        giver.merge(0, DEPTH, 7, Counted::Wanted, 4);
        giver.give(500 * MS, DEPTH, 1, |_, _| {});
        assert_eq!(giver.room, 0);
        giver.settle(1100 * MS, quota(), DEPTH, 4);
        assert_eq!((giver.room, giver.period), (4, 1));
        assert_eq!(giver.available(1100 * MS, DEPTH), 0, "empty at the period's start, 100 ms of 4 per second");
        assert_eq!(giver.available(1250 * MS, DEPTH), 1);
        let mut taker = Ledger::new(0, DEPTH, 0, 0, 2);
        taker.merge(500 * MS, DEPTH, 3, Counted::Gave(ME), 4);
        taker.settle(1000 * MS, quota(), DEPTH, 2);
        assert_eq!((taker.room, taker.available(1000 * MS, DEPTH)), (2, 2), "at most its own room kept");
    }

    #[test]
    fn a_base_that_falls_below_what_was_given_and_comes_back_keeps_the_gift_off() {
        let mut giver = Ledger::new(0, DEPTH, 0, 0, 4);
        giver.merge(0, DEPTH, 7, Counted::Wanted, 3);
        giver.give(0, DEPTH, 1, |_, _| {});
        assert_eq!(giver.room, 1);
        giver.settle(10 * MS, quota(), DEPTH, 0);
        assert_eq!(giver.room, 0, "no lease: no room of its own");
        giver.settle(20 * MS, quota(), DEPTH, 4);
        assert_eq!(giver.room, 1, "3 of its 4 are still the receiver's");
        let mut resumed = Ledger::resumed(0, DEPTH, 0, 0, 4, 1);
        resumed.settle(10 * MS, quota(), DEPTH, 0);
        resumed.settle(20 * MS, quota(), DEPTH, 4);
        assert_eq!(resumed.room, 1, "an earlier run's gifts too");
    }

    #[test]
    fn an_unanswered_want_is_repeated_only_after_patience() {
        let mut l = Ledger::new(0, DEPTH, DEPTH, 0, 2);
        assert!(l.want(0, 2, 10 * MS));
        assert_eq!(l.take_wanted_new(), Some(2));
        assert!(!l.want(5 * MS, 2, 10 * MS), "still on its way");
        assert!(l.want(10 * MS, 1, 10 * MS));
        assert_eq!(l.take_wanted_new(), Some(3), "grows so the peers answer again");
        l.merge(11 * MS, DEPTH, 1, Counted::Gave(ME), 3);
        assert!(l.want(11 * MS, 1, 10 * MS), "answered: asks at once");
        assert_eq!(l.exchange.wanted_in(0), 4);
        let mut asked = Ledger::new(0, DEPTH, 0, 0, 2);
        asked.want(0, 1, MS);
        asked.merge(0, DEPTH, 5, Counted::Wanted, 2);
        asked.give(0, DEPTH, 1, |_, _| panic!("a locker that asked lately keeps its own"));
        let mut sent = Vec::new();
        asked.give(MS, DEPTH, 1, |to, n| sent.push((to, n)));
        assert_eq!(sent, [(5, 2)], "its own asks over, it gives what it holds");
    }
}
