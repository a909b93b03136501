//! A rolling window shared across peers: per key, the cumulative grants
//! each peer node made in each sub-slot, the own grants still in flight,
//! and what this locker publishes.
//!
//! Peers exchange the same cumulative counts as fixed windows do, numbered
//! by sub-slot (`Span::peer_grain`, a 64th of the window, aligned to the
//! epoch) instead of by slot: a node's count for a (limit, key, sub-slot) is
//! every permit it granted to callers going in that sub-slot, reservations
//! included (published at once, so peers count them ahead). A receiver
//! keeps the largest count heard per (node, sub-slot), so repeats and
//! reordering change nothing and a later count repairs a lost one, and
//! counts it wherever in its sub-slot it may have gone (see `log`): a
//! peer's grant stops counting at the end of its sub-slot + T.
//!
//! Grants made on several lockers at once, each on a view that lacks the
//! others' latest grants, could add up past `max`; so each locker holds the
//! own grants of the last in-flight window (`Share`) to its share of what
//! is left, the remainder going by turns (see `over_share`). This module
//! keeps the counts only: no clock, no names, no wire format.

use super::log::{Log, Span};
use super::RollingWindow;
use crate::core::peering::{NodeIx, Nodes};
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::time::{Nanos, NANOS_PER_SEC};

/// How far ahead of `now` a peer's count may lie and still be merged: a
/// reservation waits at most an hour (`MAX_WAIT_MS`), plus clock skew.
const MOST_AHEAD: Nanos = 3_600 * NANOS_PER_SEC;

/// One node's cumulative grants for one sub-slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Heard {
    node: NodeIx,
    sub: u64,
    count: u32,
}

/// Own grant count at two checkpoints, at least `window` apart, so that
/// `own - prev` covers every grant of the last `window` (and possibly a
/// little more, which errs on the safe side). As `tally::Recent`, over a
/// running total instead of a slot's count.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Recent {
    prev: u64,
    cur: u64,
    since: Nanos,
}

impl Recent {
    fn in_flight(&mut self, now: Nanos, own: u64, window: Nanos) -> u64 {
        let age = now.saturating_sub(self.since);
        if age >= window.saturating_mul(2) {
            *self = Recent { prev: own, cur: own, since: now };
        } else if age >= window {
            *self = Recent { prev: self.cur, cur: own, since: now };
        }
        own - self.prev
    }
}

/// The part of a key's log that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Shared {
    heard: Vec<Heard>,
    /// Own permits granted since sharing began, for the in-flight rule.
    total: u64,
    recent: Recent,
    /// The earliest go instant among own grants not republished since the
    /// last repair.
    touched_from: Option<Nanos>,
}

impl Shared {
    /// A record that counts own grants as in flight from `now` on.
    pub fn since(now: Nanos) -> Shared {
        Shared { recent: Recent { prev: 0, cur: 0, since: now }, ..Shared::default() }
    }

    /// Forgets peer counts that no longer count at `now` or after.
    pub fn prune(&mut self, now: Nanos, span: Span) {
        self.heard.retain(|h| span.sub_bounds(h.sub).1.saturating_add(span.window) > now);
    }

    /// Whether no peer count is held.
    pub fn is_idle(&self) -> bool {
        self.heard.is_empty()
    }

    /// Every peer count as (first instant, last instant, permits).
    pub fn spans(&self, span: Span) -> impl Iterator<Item = (Nanos, Nanos, u32)> + '_ {
        self.heard.iter().map(move |h| {
            let (first, last) = span.sub_bounds(h.sub);
            (first, last, h.count)
        })
    }

    /// Counts `n` own permits going at `at`.
    pub fn add_own(&mut self, _at: Nanos, n: u32) {
        self.total += u64::from(n);
    }

    /// Own permits granted within the last `window` before `now` (or a little more).
    pub fn in_flight(&mut self, now: Nanos, window: Nanos) -> u64 {
        self.recent.in_flight(now, self.total, window)
    }

    /// Keeps the larger of `count` and what `node` said before for `sub`;
    /// returns whether it grew.
    fn merge(&mut self, node: NodeIx, sub: u64, count: u32) -> bool {
        match self.heard.iter_mut().find(|h| h.node == node && h.sub == sub) {
            Some(h) if h.count >= count => false,
            Some(h) => {
                h.count = count;
                true
            }
            None => {
                self.heard.push(Heard { node, sub, count });
                true
            }
        }
    }
}

impl Log {
    /// The peering part of the log, added when first needed.
    pub fn shared_mut(&mut self) -> &mut Shared {
        self.shared.get_or_insert_with(Box::default)
    }

    /// Own permits going in the peers' sub-slot `sub`.
    pub(super) fn own_in(&self, span: Span, sub: u64) -> u32 {
        let in_sub = self.own.iter().rev().skip_while(|&&(stamp, _)| span.sub(stamp) > sub);
        in_sub.take_while(|&&(stamp, _)| span.sub(stamp) == sub).map(|&(_, n)| n).sum()
    }

    /// Calls `f` with the own count of each sub-slot from `from` on.
    fn own_subs(&self, span: Span, from: u64, mut f: impl FnMut(u64, u32)) {
        let mut run: Option<(u64, u32)> = None;
        for &(stamp, n) in self.own.iter().filter(|&&(stamp, _)| span.sub(stamp) >= from) {
            let sub = span.sub(stamp);
            run = match run {
                Some((s, count)) if s == sub => Some((s, count + n)),
                Some((s, count)) => {
                    f(s, count);
                    Some((sub, n))
                }
                None => Some((sub, n)),
            };
        }
        if let Some((s, count)) = run {
            f(s, count);
        }
    }
}

impl RollingWindow {
    /// The number of the sub-slot that peers' counts carry, for a grant going at `at`.
    pub fn sub_slot(&self, at: Nanos) -> u64 {
        self.span.sub(at)
    }

    /// Records for the peers that `key` granted permits going at `at` (the
    /// ask's instant plus its wait); returns the sub-slot and the own count
    /// in it to publish.
    pub fn note_own(&mut self, key: Option<&str>, at: Nanos) -> (u64, u32) {
        let span = self.span;
        let Some(log) = self.log_mut(key) else { return (span.sub(at), 0) };
        let shared = log.shared_mut();
        shared.touched_from = Some(shared.touched_from.map_or(at, |t| t.min(at)));
        (span.sub(at), log.own_in(span, span.sub(at)))
    }

    /// Whether a peer's count for sub-slot `sub`, received at `now`, is
    /// merged: it still counts, and it lies no further ahead than a
    /// reservation may.
    fn fits(&self, now: Nanos, sub: u64) -> bool {
        let (first, last) = self.span.sub_bounds(sub);
        last.saturating_add(self.span.window) > now && first <= now.saturating_add(MOST_AHEAD + self.span.window / 4)
    }

    /// Merges `count`, the cumulative grants of peer `node` for `key` in
    /// sub-slot `sub`, received at `now`. Returns whether anything changed:
    /// a count that no longer counts, lies too far ahead, or is no larger
    /// than known changes nothing, and a new key beyond the room is refused.
    pub fn merge(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        sub: u64,
        node: NodeIx,
        count: u32,
        room: KeyRoom,
    ) -> Result<bool, NoRoom> {
        if node == Nodes::ME || !self.fits(now, sub) {
            // Own counts are known here better than any echo of them.
            return Ok(false);
        }
        let span = self.span;
        let log = self.log_entry(key, room)?;
        log.prune(now, span);
        Ok(log.shared_mut().merge(node, sub, count))
    }

    /// Calls `f` with every count that still counts at `now`: own (as
    /// `Nodes::ME`) and each peer node's, per key (`None` for the unkeyed
    /// count) and sub-slot.
    pub fn counts(&self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32)) {
        let span = self.span;
        for (key, log) in self.logs() {
            let from = span.sub(now.saturating_sub(span.window));
            log.own_subs(span, from, |sub, n| f(key, sub, Nodes::ME, n));
            for h in log.shared.iter().flat_map(|s| s.heard.iter()) {
                if span.sub_bounds(h.sub).1.saturating_add(span.window) > now {
                    f(key, h.sub, h.node, h.count);
                }
            }
        }
    }

    /// Calls `f` with the own count of every (key, sub-slot) granted since
    /// the last call, for republishing: a count lost on the way is
    /// repaired by the next one.
    pub fn drain_touched(&mut self, mut f: impl FnMut(Option<&str>, u64, u32)) {
        let span = self.span;
        let keys = std::iter::once((None, &mut self.unkeyed)).chain(self.keys.iter_mut().map(|(k, l)| (Some(&**k), l)));
        for (key, log) in keys {
            let Some(from) = log.shared.as_mut().and_then(|s| s.touched_from.take()) else { continue };
            log.own_subs(span, span.sub(from), |sub, n| f(key, sub, n));
        }
    }

    fn logs(&self) -> impl Iterator<Item = (Option<&str>, &Log)> {
        std::iter::once((None, &self.unkeyed)).chain(self.keys.iter().map(|(k, l)| (Some(&**k), l)))
    }
}
