//! The share rule's terms: how many lockers are live, and how long a grant
//! counts as in flight, which together bound what one locker may grant of
//! what is left of a shared count.
//!
//! Plain values and the one constant they derive from; the rule itself is
//! applied per key by `core::tally`. No clock, no counts, no sockets.

use crate::core::time::{Nanos, NANOS_PER_MS};

/// An index naming one peer node (one process of one locker) in the node
/// table; see `peering::nodes`.
pub type NodeIx = u32;

/// How long a grant is assumed to take to reach every peer: the publish
/// batching bound plus transit and the receiver's loop turn. Grants younger
/// than this are "in flight": peers may still be granting without knowing
/// of them.
pub const PROPAGATION_ALLOWANCE: Nanos = 2 * NANOS_PER_MS;

/// What a grant needs to know about the peers besides the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Lockers currently live, this one included; 1 when alone.
    pub live: u32,
    /// Grants younger than this are counted as in flight.
    pub in_flight_window: Nanos,
}

impl Share {
    /// A locker on its own: the share rule never applies.
    pub const ALONE: Share = Share { live: 1, in_flight_window: PROPAGATION_ALLOWANCE };

    /// The in-flight window for a slot of `slot_ns`: the propagation
    /// allowance, but never more than an eighth of the slot, so that very
    /// short slots still fill.
    #[inline]
    pub fn window_for(slot_ns: Nanos) -> Nanos {
        PROPAGATION_ALLOWANCE.min(slot_ns / 8).max(1)
    }
}
