//! Peer counts for the slot after the current one, heard before this
//! locker reached it: a peer whose clock runs a little ahead has begun the
//! next slot and granted there. They are kept here, by maximum like every
//! count, and join the slot's tallies when the window moves into it, so
//! that this locker never grants into a slot without what its peers already
//! granted there, and never moves to a slot before its own clock says so
//! (which would let the group follow its fastest clock).
//!
//! Bounded: a peer can make it hold at most `MAX_EARLY` counts, and only
//! for the next slot. No clock, no names of nodes, no sockets.

use std::collections::HashMap;

use crate::core::share::{Counted, NodeIx};

/// The most early counts kept for one limit: room for every key of a busy
/// slot's first moments, and a bound on what a peer can make it hold.
pub const MAX_EARLY: usize = 65_536;

/// Which count: the key (`None` for the unkeyed count), the node, and
/// what it counts.
type Which = (Option<Box<str>>, NodeIx, Counted);

/// The counts heard for `slot`, the one after the window's current slot.
#[derive(Debug, Default)]
pub(super) struct EarlyCounts {
    slot: u64,
    counts: HashMap<Which, u32>,
    /// Whether a grant is among them: only a grant says a peer has begun
    /// the slot (a gift or a want may be sent for it a moment early).
    granted: bool,
}

impl EarlyCounts {
    /// Keeps `count` for `slot`, dropping what was kept for another slot;
    /// returns whether anything changed.
    pub(super) fn keep(&mut self, slot: u64, key: Option<&str>, node: NodeIx, count: u32, what: Counted) -> bool {
        if slot != self.slot {
            self.counts.clear();
            self.slot = slot;
            self.granted = false;
        }
        self.granted |= what == Counted::Granted;
        let full = self.counts.len() >= MAX_EARLY;
        match self.counts.get_mut(&(key.map(Into::into), node, what)) {
            Some(c) if *c >= count => false,
            Some(c) => {
                *c = count;
                true
            }
            None if full => false,
            None => {
                self.counts.insert((key.map(Into::into), node, what), count);
                true
            }
        }
    }

    /// The counts kept for `slot`, taken; everything else is dropped.
    pub(super) fn take(&mut self, slot: u64) -> impl Iterator<Item = (Which, u32)> {
        let due = self.slot == slot;
        self.granted = false;
        std::mem::take(&mut self.counts).into_iter().filter(move |_| due)
    }

    /// Whether a peer has begun `slot`: a count for it is kept.
    #[inline]
    pub(super) fn begun(&self, slot: u64) -> bool {
        self.slot == slot && self.granted
    }

    /// Whether nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}
