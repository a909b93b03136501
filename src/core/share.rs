//! The terms every shared kind and the peer schedule agree on: node
//! indices, the permits each member owns of a slot, the view of the peers
//! a locker decides with, and the cumulative `Count` peers trade.
//!
//! This is the bottom of peering: the kinds use these terms, and
//! `core::peering` (the node table, the schedule, the merge) builds on the
//! kinds. Nothing here imports a kind, the locker or the peer schedule.
//!
//! Conserved permits (fixed windows): each slot's `max_requests` permits
//! start split between the group's members by a rule every locker computes
//! alike (`Share::owns`), and afterwards move only by a giver subtracting
//! them from its own before it publishes the gift. A locker grants only
//! permits it owns, so the grants of a slot never add up to more than
//! `max_requests`, whatever messages are late, lost or repeated. The
//! ledger is kept per key by `core::kinds::fixed::tally`.
//!
//! Rolling windows conserve rights the same way (`Share::rolling_rights`): each
//! member holds a fixed share of `max_requests` rights, a right is free
//! again when the grant made with it leaves the window, and rights move by
//! gifts numbered by window (see `core::kinds::rolling::rights`). No
//! clock, no counts kept, no sockets.

use crate::core::limit::{LimitId, Quota};
use crate::core::time::{Nanos, NANOS_PER_MS};

/// An index naming one peer node (one process of one locker) in the node
/// table; see `peering::nodes`.
pub type NodeIx = u32;

/// The index this locker's own process has in every node table.
pub const ME: NodeIx = 0;

/// How long a grant is assumed to take to reach every peer: the publish
/// batching bound plus transit and the receiver's loop turn. Grants younger
/// than this are "in flight": peers may still be granting without knowing
/// of them.
pub const PROPAGATION_ALLOWANCE: Nanos = 2 * NANOS_PER_MS;

/// The widest the in-flight window grows while peer messages come late
/// (see `Share::late_by`): beyond this a peer is better counted out than
/// waited for, and a sorry that only waits for grants in flight stays
/// short enough to be held (see `service::hold`).
pub const WIDEST_IN_FLIGHT: Nanos = 20 * NANOS_PER_MS;

/// How many windows a rolling window's rights given by an earlier run of
/// this locker may still be in use after this run joins (see
/// `Share::rolling_rights`): the gift's own window, the next (a receiver renewed
/// into it), and the window in which grants made with it leave.
pub const EARLIER_GIFTS_WINDOWS: u64 = 3;

/// What a grant needs to know about the peers besides the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Lockers currently live, this one included; 1 when alone.
    pub live: u32,
    /// How long a message may be on its way to the peers: the base
    /// window, widened by how late peer messages have lately been arriving
    /// (see `late_by`). A locker short of permits asks again after twice
    /// this (see `charged_for`), a round trip.
    pub in_flight_window: Nanos,
    /// The in-flight window before widening: the propagation allowance,
    /// or an eighth of a short slot.
    pub base_window: Nanos,
    /// The lockers of the group, this one and every configured peer, live
    /// or not: a fixed window's permits are split between them. 1 alone.
    pub members: u32,
    /// This locker's place among the members by id, once every member's
    /// id is known: it decides who owns a slot's remainder (`owns`).
    pub member: Option<u32>,
    /// This run owns initial permits only of the slots that begin at or
    /// after this instant: 0, or when it finished joining if a peer knew of
    /// an earlier run of this locker (or not every peer answered). That run
    /// may have granted in the slot this one joined in, and nothing tells
    /// how much (its last counts may be lost), so this run owns none of
    /// that slot; gifts it may use.
    pub owns_from: Nanos,
}

impl Share {
    /// A locker on its own: the share rule never applies.
    pub const ALONE: Share = Share {
        live: 1,
        in_flight_window: PROPAGATION_ALLOWANCE,
        base_window: PROPAGATION_ALLOWANCE,
        members: 1,
        member: Some(0),
        owns_from: 0,
    };

    /// The terms for `live` lockers and a slot of `slot_ns`.
    pub fn new(live: u32, slot_ns: Nanos) -> Share {
        let window = Share::window_for(slot_ns);
        Share { live, in_flight_window: window, base_window: window, ..Share::ALONE }
    }

    /// The permits of `slot` this locker owns before any gift: `max /
    /// members` each, and one more for the members whose place plus the
    /// slot number, modulo the members, is below the remainder, so that
    /// the remainder rotates. The members' shares add up to `max` exactly
    /// for every slot. A locker that does not know its place yet (some
    /// member's id is still unknown) owns no remainder: the member whose
    /// place it would be may be granting it. None of a slot that began
    /// before this run joined (`owns_from`).
    #[inline]
    pub fn owns(&self, quota: Quota, slot: u64) -> u32 {
        let (max, members) = (quota.max_requests(), self.members.max(1));
        if quota.slot_end(slot).saturating_sub(quota.slot_ns()) < self.owns_from {
            return 0;
        }
        let extra = self.member.is_some_and(|m| (u64::from(m) + slot) % u64::from(members) < u64::from(max % members));
        max / members + u32::from(extra)
    }

    /// The rights of a rolling window of `quota` this locker holds in
    /// window number `window` (`Quota::slot_of`) before any gift: `max /
    /// members` each, and one more for the members whose place is below
    /// the remainder. Unlike a fixed window's, the remainder does not
    /// rotate: a right is reused when its grant leaves the window, so a
    /// member's rights may never shrink from one window to the next while
    /// its grants still count. The members' shares add up to `max`. No
    /// place known, no remainder (as `owns`). None for the window this run
    /// joined in and the next `EARLIER_GIFTS_WINDOWS - 1` (`owns_from`):
    /// an earlier run's grants and gifts may count until then.
    #[inline]
    pub fn rolling_rights(&self, quota: Quota, window: u64) -> u32 {
        let (max, members) = (quota.max_requests(), self.members.max(1));
        if self.owns_from > 0 && window < quota.slot_of(self.owns_from).saturating_add(EARLIER_GIFTS_WINDOWS) {
            return 0;
        }
        let extra = self.member.is_some_and(|m| m < max % members);
        max / members + u32::from(extra)
    }

    /// Whether permits are conserved between members (peered) rather than
    /// counted by one locker alone.
    #[inline]
    pub fn conserved(&self) -> bool {
        self.members > 1
    }

    /// These terms when peer messages have lately arrived up to `late`
    /// later than the least delayed of them (a busy host's scheduling, a
    /// congested link): the in-flight window grows by as much, up to an
    /// eighth of the slot, since a count can take that much longer to
    /// reach the peers (at most `WIDEST_IN_FLIGHT`).
    #[inline]
    pub fn late_by(self, late: Nanos, slot_ns: Nanos) -> Share {
        let widest = (slot_ns / 8).min(WIDEST_IN_FLIGHT).max(self.base_window);
        Share { in_flight_window: self.base_window.saturating_add(late).min(widest), ..self }
    }

    /// How long a locker short of permits waits before it decides again:
    /// a round trip, for its want to reach the peers and their gifts to
    /// come back (`retry_after`, and the hold of such a sorry).
    #[inline]
    pub fn charged_for(&self) -> Nanos {
        self.in_flight_window.saturating_mul(2)
    }

    /// The in-flight window for a slot of `slot_ns`: the propagation
    /// allowance, but never more than an eighth of the slot, so that very
    /// short slots still fill.
    #[inline]
    pub fn window_for(slot_ns: Nanos) -> Nanos {
        PROPAGATION_ALLOWANCE.min(slot_ns / 8).max(1)
    }
}

/// What the peers mean for the next asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerView {
    /// Lockers live, this one included.
    pub live: u32,
    /// This locker's place among the live lockers by id, 0 to live - 1.
    pub rank: u32,
    /// While `now` is before this, every ask of a shared limit is sorry: the
    /// counts of the current slot are still being learned from peers.
    pub hold_until: Option<Nanos>,
    /// How much later than the least delayed of them the live peers'
    /// recent messages arrived (see `Share::late_by`).
    pub late: Nanos,
    /// The lockers of the group, live or not (see `Share::members`).
    pub members: u32,
    /// This locker's place among them by id, once every id is known.
    pub member: Option<u32>,
    /// When this run first finished joining (see `Share::owns_from`).
    pub owns_from: Nanos,
}

impl PeerView {
    /// No peers: decide alone.
    pub const ALONE: PeerView =
        PeerView { live: 1, rank: 0, hold_until: None, late: 0, members: 1, member: Some(0), owns_from: 0 };
}

/// A cumulative count of one node for one (limit, key, slot): what peers
/// publish to each other. The slot is the limit's own numbering: a fixed
/// window's slot, a token bucket's period, a rolling window's sub-slot for
/// grants and its window number for wants and gifts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    pub limit: LimitId,
    pub key: Option<Box<str>>,
    pub slot: u64,
    pub node: NodeIx,
    pub count: u32,
    /// What is counted: permits granted, or (fixed and rolling windows)
    /// wanted or given.
    pub what: Counted,
}

/// What a `Count` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Counted {
    /// Permits the node granted: the shared count.
    #[default]
    Granted,
    /// Permits the node asked its peers for, having too few of its own
    /// (fixed windows: in a slot; rolling windows: in a window, numbered
    /// as `Quota::slot_of`): a peer with spare ones gives.
    Wanted,
    /// Permits the node gave to the node named here (fixed windows: of a
    /// slot; rolling windows: rights for a window): the giver owns that
    /// many fewer, the receiver that many more.
    Gave(NodeIx),
}

impl Count {
    /// A count of permits granted.
    pub fn granted(limit: LimitId, key: Option<&str>, slot: u64, node: NodeIx, count: u32) -> Count {
        Count { limit, key: key.map(Into::into), slot, node, count, what: Counted::Granted }
    }

    /// A count of `what`.
    pub fn of(what: Counted, limit: LimitId, key: Option<&str>, slot: u64, node: NodeIx, count: u32) -> Count {
        Count { what, ..Count::granted(limit, key, slot, node, count) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::NANOS_PER_SEC;

    #[test]
    fn the_members_own_exactly_max_between_them_in_every_slot() {
        let quota = |max| Quota::new(max, 0.8).unwrap();
        for (max, members) in [(5u32, 3u32), (1, 2), (7, 5), (2, 4), (100, 3)] {
            for slot in 0..12u64 {
                let each =
                    (0..members).map(|m| Share { members, member: Some(m), ..Share::ALONE }.owns(quota(max), slot));
                assert_eq!(each.sum::<u32>(), max, "{max} over {members} in slot {slot}");
            }
        }
        let trio = |m| Share { members: 3, member: Some(m), ..Share::ALONE };
        let slots: Vec<u32> = (0..3).map(|k| trio(0).owns(quota(5), k)).collect();
        assert_eq!(slots, [2, 2, 1], "the remainder rotates");
        assert_eq!(
            Share { members: 3, member: None, ..Share::ALONE }.owns(quota(5), 0),
            1,
            "no remainder without a place"
        );
        assert_eq!(Share::ALONE.owns(quota(5), 9), 5);
        let slot_ns = quota(5).slot_ns();
        let late = Share { owns_from: 3 * slot_ns + 1, ..trio(0) };
        assert_eq!((late.owns(quota(5), 3), late.owns(quota(5), 4)), (0, 2), "none of the slot it joined in");
    }

    #[test]
    fn late_messages_widen_the_in_flight_window_up_to_an_eighth_of_the_slot() {
        let slot = 800 * NANOS_PER_MS;
        let s = Share::new(3, slot);
        let late = s.late_by(3 * NANOS_PER_MS, slot);
        assert_eq!((late.in_flight_window, late.base_window), (5 * NANOS_PER_MS, 2 * NANOS_PER_MS));
        assert_eq!(late.charged_for(), 10 * NANOS_PER_MS, "a round trip");
        assert_eq!(s.late_by(0, slot), s, "on time: nothing changes");
        assert_eq!(s.late_by(NANOS_PER_SEC, slot).in_flight_window, WIDEST_IN_FLIGHT, "at most 20 ms");
        let short = 40 * NANOS_PER_MS;
        assert_eq!(Share::new(3, short).late_by(NANOS_PER_SEC, short).in_flight_window, 5 * NANOS_PER_MS, "an eighth");
    }

    #[test]
    fn a_rolling_windows_members_hold_exactly_max_rights_in_every_window() {
        let quota = |max| Quota::new(max, 0.8).unwrap();
        for (max, members) in [(5u32, 3u32), (1, 2), (7, 5), (2, 4), (100, 3)] {
            for window in 0..6u64 {
                let each = (0..members)
                    .map(|m| Share { members, member: Some(m), ..Share::ALONE }.rolling_rights(quota(max), window));
                assert_eq!(each.sum::<u32>(), max, "{max} over {members} in window {window}");
            }
        }
        let trio = |m| Share { members: 3, member: Some(m), ..Share::ALONE };
        let windows: Vec<u32> = (0..3).map(|k| trio(2).rolling_rights(quota(5), k)).collect();
        assert_eq!(windows, [1, 1, 1], "the remainder stays with the first places");
        assert_eq!(Share { member: None, ..trio(0) }.rolling_rights(quota(5), 0), 1, "no remainder without a place");
        assert_eq!(Share::ALONE.rolling_rights(quota(5), 9), 5);
        let joined = 3 * quota(5).slot_ns() + 1;
        let late = Share { owns_from: joined, ..trio(0) };
        let held: Vec<u32> = (3..7).map(|k| late.rolling_rights(quota(5), k)).collect();
        assert_eq!(held, [0, 0, 0, 2], "none while an earlier run's gifts may count");
    }
}
