//! The state file's side of the service: the calls that can grant take a
//! `Keep` (see `state::journal`) and hand it their records before they
//! return (on start, an earlier run's records are put back by
//! `step::restore`).
//!
//! Like the rest of the service this reads no clock and touches no file:
//! the daemon brings `now` and its keeper; the records' bytes, what is
//! live and how a record goes back are `state`'s.

use super::Service;
use crate::core::Nanos;
use crate::state::Keep;

impl Service {
    /// Runs `call` as one call whose records go to `keep`: changes are
    /// noted while it decides, and kept before this returns, so before
    /// any reply it wrote can leave. Grants are refused from then on if
    /// `keep` has no room for the next call's records.
    #[inline]
    pub(super) fn journaled<T>(&mut self, now: Nanos, keep: &mut impl Keep, call: impl FnOnce(&mut Self) -> T) -> T {
        self.journal.open(keep);
        let answer = call(self);
        self.status.refusing = self.journal.close(&self.locker, now, keep).err();
        answer
    }
}
