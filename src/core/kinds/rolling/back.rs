//! Permits given back to a rolling window: a refund takes back a key's
//! newest own grants that still count (reservations queued ahead first),
//! and a reset forgets them all. What peers reported is never touched:
//! only this locker's own grants are its to give back. Pure arithmetic.

use super::RollingWindow;
use crate::core::time::Nanos;

impl RollingWindow {
    /// Gives back up to `n` of `key`'s own permits that still count at
    /// `now`, newest first; returns how many. Call `advance` first.
    pub fn give_back(&mut self, now: Nanos, key: Option<&str>, n: u32) -> u32 {
        let span = self.span;
        let Some(log) = self.log_mut(key) else { return 0 };
        log.prune(now, span);
        let back = log.own.take_back(n);
        // No later ask may go before a grant that is left: the newest left
        // goes at its stamp at the latest, so waiting for it is never less
        // than waiting for the grant itself.
        let newest = log.own.back().map_or(0, |(stamp, _)| stamp);
        log.last = log.last.min(newest.max(now));
        back
    }

    /// Forgets every own grant of `key`; returns whether it had any.
    pub fn clear(&mut self, now: Nanos, key: Option<&str>) -> bool {
        let Some(log) = self.log_mut(key) else { return false };
        let had = !log.own.is_empty();
        log.own = Default::default();
        log.last = log.last.min(now);
        had
    }
}
