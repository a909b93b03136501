//! The rolling window's side of peering: noting own grants and wants for
//! the peers, merging peers' cumulative sub-slot counts, wants and gifts
//! (answering a want with a gift, renewing what a busy peer was lent), and
//! listing every figure that still counts for snapshots and repairs. The
//! figures themselves are kept per key in `peer_log` and `rights`; this
//! module reads and writes them through the window's logs. No clock, no
//! names, no wire format.

use super::log::Log;
use super::RollingWindow;
use crate::core::room::{KeyRoom, Leeway, NoRoom};
use crate::core::share::repair::RepairWalk;
use crate::core::share::{Count, Counted, Gifts, NodeIx, ME};
use crate::core::time::{Nanos, NANOS_PER_SEC};

/// A figure noted for the peers, if any: its slot (a sub-slot or a
/// window) and the cumulative count.
pub type Noted = Option<(u64, u32)>;

/// How far ahead of `now` a peer's count may lie and still be merged: a
/// reservation waits at most an hour (`MAX_WAIT_MS`), plus clock skew.
const MOST_AHEAD: Nanos = 3_600 * NANOS_PER_SEC;

impl RollingWindow {
    /// The number of the sub-slot that peers' counts carry, for a grant going at `at`.
    pub fn sub_slot(&self, at: Nanos) -> u64 {
        self.span.sub(at)
    }

    /// What an ask for `key` that came short asked the peers for, if that
    /// grew: the window and what it asked for in all. Grants are not
    /// published one by one: the next repair tells of them (see
    /// `Log::add_own`).
    pub fn note_wanted(&mut self, key: Option<&str>) -> Noted {
        self.log_mut(key)?.shared.as_mut()?.rights.take_wanted_new()
    }

    /// Whether a peer's count for sub-slot `sub`, received at `now`, is
    /// merged: it still counts, and it lies no further ahead than a
    /// reservation may.
    fn fits(&self, now: Nanos, sub: u64) -> bool {
        let (first, last) = self.span.sub_bounds(sub);
        last.saturating_add(self.span.window) > now && first <= now.saturating_add(MOST_AHEAD + self.span.window / 4)
    }

    /// Merges a peer's count `c`, received at `now`: grants by sub-slot
    /// (see `merge`), wants and gifts by window. Peered (`share`), a want
    /// for the current window is answered with what this locker can spare,
    /// and a peer heard granting or asking in it gets what it was lent
    /// renewed, into this window and the next (see `rights`): `give` hears
    /// each gift as `(key, window, receiver, total given)`, already counted
    /// as given.
    /// Returns whether anything changed.
    pub fn merge_count(&mut self, now: Nanos, c: &Count, terms: Leeway, mut give: impl Gifts) -> Result<bool, NoRoom> {
        let (key, span, quota) = (c.key.as_deref(), self.span, self.quota);
        let Leeway { room, share } = terms;
        let window = span.window_of(now);
        let (changed, node) = match c.what {
            Counted::Granted => {
                let changed = self.merge(now, key, c.slot, c.node, c.count, room)?;
                // Granting in this window: it still uses what it was lent.
                let now_granting = changed && span.window_of(span.sub_bounds(c.slot).0) == window;
                (changed, now_granting.then_some(c.node))
            }
            what => {
                // Figures of the window before (covers), this one, or the
                // next (a peer whose clock runs a little ahead).
                if c.slot.saturating_add(1) < window || c.slot > window + 1 {
                    return Ok(false);
                }
                let log = self.log_entry(key, room)?;
                log.prune(now, span);
                let changed = log.shared_mut().rights.merge(c.slot, c.node, what, c.count);
                (changed, (what == Counted::Wanted && c.slot == window && c.node != ME).then_some(c.node))
            }
        };
        let Some(node) = node.filter(|_| share.conserved()) else { return Ok(changed) };
        let Some(log) = self.log_mut(key) else { return Ok(changed) };
        let initial = share.rolling_rights(quota, window);
        let (spare, _) = log.free(now, span, initial, share.resumes);
        let rights = &mut log.shared_mut().rights;
        let mut f = |w, to, n| give(key, w, to, n);
        if c.what == Counted::Wanted {
            rights.give((window, now), spare, initial, share.members.saturating_sub(1), &mut f);
        } else {
            rights.renew(window, node, initial, &mut f);
        }
        Ok(changed)
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

    /// Calls `f` with every figure that still counts at `now`, as `(key,
    /// slot, node, count, what)`: grants, own (as `ME`) and each peer
    /// node's, per key (`None` for the unkeyed count) and sub-slot; and
    /// wants and gifts per window, own and to this locker, so that a
    /// locker that rejoins after a pause hears its own back.
    pub fn counts(&self, now: Nanos, mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted)) {
        let span = self.span;
        for (key, log) in self.logs() {
            let from = span.sub(now.saturating_sub(span.window));
            log.own_subs(span, from, |sub, n| f(key, sub, ME, n, Counted::Granted));
            let Some(s) = &log.shared else { continue };
            for h in &s.heard {
                if span.sub_bounds(h.sub).1.saturating_add(span.window) > now {
                    f(key, h.sub, h.node, h.count, Counted::Granted);
                }
            }
            s.rights.exchange().counts(|w, node, n, what| f(key, w, node, n, what));
        }
    }

    /// Calls `f` with the own figures, as `(key, slot, node, count,
    /// what)`, of the keys granted, short or giving since they were last
    /// republished that `walk` takes: the grants of each sub-slot granted
    /// in, what it asked for, and its gifts, so that one lost on the way is
    /// repaired by the next.
    pub fn drain_touched(
        &mut self,
        now: Nanos,
        walk: &RepairWalk,
        mut f: impl FnMut(Option<&str>, u64, NodeIx, u32, Counted),
    ) {
        let span = self.span;
        let window = span.window_of(now);
        let mut drain = |key: Option<&str>, log: &mut Log| {
            if !walk.take() {
                return;
            }
            let Some(s) = log.shared.as_mut() else { return };
            if std::mem::take(&mut s.rights.touched) {
                let wanted = s.rights.exchange().wanted_in(window);
                if wanted > 0 {
                    f(key, window, ME, wanted, Counted::Wanted);
                }
                s.rights.exchange().counts(|w, node, n, what| {
                    if node == ME && w >= window.saturating_sub(1) {
                        f(key, w, node, n, what);
                    }
                });
            }
            let Some(from) = s.touched_from.take() else { return };
            log.own_subs(span, span.sub(from), |sub, n| f(key, sub, ME, n, Counted::Granted));
        };
        drain(None, &mut self.unkeyed);
        self.keys.for_each_mut(|k, log| drain(Some(k), log));
    }

    fn logs(&self) -> impl Iterator<Item = (Option<&str>, &Log)> {
        std::iter::once((None, &self.unkeyed)).chain(self.keys.iter().map(|(k, l)| (Some(k), l)))
    }
}
