//! The rolling window's side of peering: noting own grants for the peers,
//! merging peers' cumulative sub-slot counts, and listing every count that
//! still counts for snapshots and repairs. The counts themselves are kept
//! per key in `shared`; this module reads and writes them through the
//! window's logs. No clock, no names, no wire format.

use super::log::Log;
use super::RollingWindow;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::NodeIx;
use crate::core::share::ME;
use crate::core::time::{Nanos, NANOS_PER_SEC};

/// How far ahead of `now` a peer's count may lie and still be merged: a
/// reservation waits at most an hour (`MAX_WAIT_MS`), plus clock skew.
const MOST_AHEAD: Nanos = 3_600 * NANOS_PER_SEC;

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
        if node == ME || !self.fits(now, sub) {
            // Own counts are known here better than any echo of them.
            return Ok(false);
        }
        let span = self.span;
        let log = self.log_entry(key, room)?;
        log.prune(now, span);
        Ok(log.shared_mut().merge(node, sub, count))
    }

    /// Calls `f` with every count that still counts at `now`: own (as
    /// `ME`) and each peer node's, per key (`None` for the unkeyed
    /// count) and sub-slot.
    pub fn counts(&self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32)) {
        let span = self.span;
        for (key, log) in self.logs() {
            let from = span.sub(now.saturating_sub(span.window));
            log.own_subs(span, from, |sub, n| f(key, sub, ME, n));
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
        let mut drain = |key: Option<&str>, log: &mut Log| {
            let Some(from) = log.shared.as_mut().and_then(|s| s.touched_from.take()) else { return };
            log.own_subs(span, span.sub(from), |sub, n| f(key, sub, n));
        };
        drain(None, &mut self.unkeyed);
        self.keys.for_each_mut(|k, log| drain(Some(k), log));
    }

    fn logs(&self) -> impl Iterator<Item = (Option<&str>, &Log)> {
        std::iter::once((None, &self.unkeyed)).chain(self.keys.iter().map(|(k, l)| (Some(k), l)))
    }
}
