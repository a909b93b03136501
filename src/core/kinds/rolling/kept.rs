//! What a rolling window keeps across a restart: a key's own cumulative
//! count per peers' sub-slot (the figure peers are sent), read after a
//! grant and put back on start.
//!
//! An earlier run's count is put back as one own grant of the whole count,
//! at the latest instant its grants may have gone: so it stops counting no
//! earlier than any of them did. Like the rest of the window: no clock, no
//! names, no file.
//!
//! Peered, a key also keeps its conserved rights' figures per window (what
//! this run lent and got, `kept_exchange`), written before a gift leaves. An
//! earlier run's figures and grants are carried into the key's log
//! (`carry_rights`, `carry_grants`), so that a run restarted with its state
//! file that resumes its share owns what that run still owned, no more.

use super::log::{Log, Span};
use super::span::SUB_SLOTS;
use super::EarlierRights;
use super::RollingWindow;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::exchange::KeptExchange;
use crate::core::share::NodeIx;
use crate::core::time::Nanos;

impl RollingWindow {
    /// The own count of `key` in sub-slot `sub`, as `note_own` publishes it.
    pub fn own_in(&self, key: Option<&str>, sub: u64) -> u32 {
        self.log(key).map_or(0, |log| log.own_in(self.span, sub))
    }

    /// The length of a rolling window's sub-slots for `quota`, the unit its
    /// kept counts are numbered in.
    pub fn sub_slot_ns(quota: Quota) -> Nanos {
        (quota.slot_ns() / SUB_SLOTS).max(1)
    }

    /// Whether grants going in sub-slot `sub` of a rolling window for
    /// `quota` still count at `now`: its last instant + the window is later.
    pub fn sub_counts(quota: Quota, sub: u64, now: Nanos) -> bool {
        let span = Span::of(quota);
        span.sub_bounds(sub).1.saturating_add(span.window) > now
    }

    /// Adds `count`, an earlier run's own count for `key` in sub-slot
    /// `sub`, written at `written`, to this run's own. Returns the own count
    /// in `sub` after, or `None` when nothing was added (a sub-slot that no
    /// longer counts, or a key beyond the room).
    pub fn restore_own(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        sub: u64,
        written: Nanos,
        count: u32,
        room: KeyRoom,
    ) -> Result<Option<u32>, NoRoom> {
        let span = self.span;
        let (first, last) = span.sub_bounds(sub);
        if count == 0 || last.saturating_add(span.window) <= now {
            return Ok(None);
        }
        // Written before its sub-slot began, the count is reservations only:
        // they go by its end at the latest, and later asks queue behind
        // them as they did. Written within it, its grants went by now,
        // except a reservation still ahead within the same sub-slot, which
        // then stops counting up to a sub-slot early: putting the count at
        // the sub-slot's end instead would queue every ask behind it.
        let at = if written < first { last } else { last.min(now) };
        let log = self.log_entry(key, room)?;
        log.restore(at, count, span);
        Ok(Some(log.own_in(span, sub)))
    }
}

impl RollingWindow {
    /// Calls `f` with this run's figures of `key`'s conserved rights that
    /// bear on the window `now` falls in, one per window: what it counts as
    /// lent then, and got (see `Rights::own_figures`).
    pub fn kept_exchange(&self, now: Nanos, key: Option<&str>, mut f: impl FnMut(KeptExchange)) {
        if let Some(s) = self.log(key).and_then(|log| log.shared.as_ref()) {
            s.rights.own_figures(self.span.window_of(now), |period, gave, got| {
                f(KeptExchange { period, gave, got, ..KeptExchange::default() });
            });
        }
    }

    /// Carries what earlier run `run` lent and got for a window (`kept`)
    /// into `key`'s rights, if the window still bears on `now`; returns
    /// whether it did.
    pub fn carry_rights(&mut self, now: Nanos, key: Option<&str>, run: u32, kept: KeptExchange, room: KeyRoom) -> bool {
        if kept.period.saturating_add(1) < self.span.window_of(now) {
            return false;
        }
        let earlier = EarlierRights { run, window: kept.period, lent: kept.gave, got: kept.got };
        let Ok(log) = self.log_entry(key, room) else { return false };
        log.shared_mut().rights.carry(earlier);
        true
    }

    /// Notes that `node`, an earlier run of this locker, granted `count`
    /// for `key` in sub-slot `sub` (already merged as its count): a run
    /// that resumes its share charges them as its own.
    pub fn carry_grants(&mut self, key: Option<&str>, node: NodeIx, sub: u64, count: u32) {
        if let Some(log) = self.log_mut(key) {
            log.shared_mut().carry(node, sub, count);
        }
    }
}

impl Log {
    /// Records `n` permits going at `at`, among grants already counted
    /// (stamps stay in order), as a restore does.
    fn restore(&mut self, at: Nanos, n: u32, span: Span) {
        self.own.insert(span.stamp(at), n);
        self.last = self.last.max(at);
    }
}
