//! The shape of one rolling window: its length, its count, and the grains
//! its instants are rounded to, for own grants and for peers' sub-slots.
//! Pure arithmetic on instants: no counts, no clock.

use crate::core::limit::Quota;
use crate::core::time::Nanos;

/// Quotas up to this many permits per window are counted exactly.
pub const EXACT_UP_TO: u32 = 64;

/// Sub-slots per window, for large quotas and for the counts peers exchange.
pub const SUB_SLOTS: u64 = 64;

/// The shape of one rolling window: how long grants count, how many may,
/// and how their instants are rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// T: a grant counts for this long after it goes.
    pub window: Nanos,
    /// The most permits that may go in any interval of length T.
    pub max: u32,
    /// Own grants are stamped at the end of their grain: 1 ns (exact) or a sub-slot.
    pub grain: Nanos,
    /// The sub-slot of the counts exchanged with peers.
    pub peer_grain: Nanos,
}

impl Span {
    /// The span of a rolling window enforcing `quota`.
    pub fn of(quota: Quota) -> Span {
        let window = quota.slot_ns();
        let peer_grain = (window / SUB_SLOTS).max(1);
        let grain = if quota.max_requests() <= EXACT_UP_TO { 1 } else { peer_grain };
        Span { window, max: quota.max_requests(), grain, peer_grain }
    }

    /// The latest instant of the grain holding `at`: where a grant at `at` is stamped.
    #[inline]
    pub fn stamp(&self, at: Nanos) -> Nanos {
        if self.grain == 1 {
            return at;
        }
        at - at % self.grain + (self.grain - 1)
    }

    /// The number of the peers' sub-slot holding `at`.
    #[inline]
    pub fn sub(&self, at: Nanos) -> u64 {
        at / self.peer_grain
    }

    /// The first and the last instant of the peers' sub-slot `sub`.
    #[inline]
    pub fn sub_bounds(&self, sub: u64) -> (Nanos, Nanos) {
        let first = sub.saturating_mul(self.peer_grain);
        (first, first.saturating_add(self.peer_grain - 1))
    }

    /// The number of the window holding `at`: windows of length T aligned
    /// to the epoch, as a fixed window numbers its slots; conserved rights
    /// are numbered by them.
    #[inline]
    pub fn window_of(&self, at: Nanos) -> u64 {
        at / self.window
    }

    /// Whether a grant stamped `stamp` still counts in the interval ending at `u`.
    #[inline]
    pub(super) fn counts_at(&self, stamp: Nanos, u: Nanos) -> bool {
        stamp.saturating_add(self.window) > u
    }
}
