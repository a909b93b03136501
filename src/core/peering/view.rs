//! What the peers mean for this locker's next asks: how many lockers are
//! live, and whether to hold off while the counts are still being learned.
//!
//! A plain value the schedule computes (`Peering::view`) and the locker
//! follows (`Locker::set_view`); it holds no counts and no node table.

use crate::core::time::Nanos;

/// What the peers mean for the next asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerView {
    /// Lockers live, this one included.
    pub live: u32,
    /// While `now` is before this, every ask of a shared limit is sorry: the
    /// counts of the current slot are still being learned from peers.
    pub hold_until: Option<Nanos>,
}

impl PeerView {
    /// No peers: decide alone.
    pub const ALONE: PeerView = PeerView { live: 1, hold_until: None };
}
