//! The terms every shared kind and the peer schedule agree on: node
//! indices, the permits each member owns of a slot, the view of the peers
//! a locker decides with, and the cumulative `Count` peers trade.
//!
//! This is the bottom of peering: the kinds use these terms, and
//! `core::peering` (the node table, the schedule, the merge) builds on the
//! kinds. Nothing here imports a kind, the locker or the peer schedule.
//!
//! The permits of a shared kind start split between the members by the
//! rules here (`Share::owns`, `Share::rolling_rights`, `Share::holds`) and
//! move by the exchange (`exchange`, which says why they are conserved).
//! No clock, no counts kept, no sockets.

pub mod exchange;
pub mod repair;

use crate::core::limit::{LimitId, Quota};
use crate::core::time::{Nanos, NANOS_PER_MS};

/// An index naming one peer node (one process of one locker) in the node
/// table; see `peering::nodes`.
pub type NodeIx = u32;

/// The index this locker's own process has in every node table.
pub const ME: NodeIx = 0;

/// Hears each gift a peer merge makes, as `(key, slot, receiver, total
/// given)`: the slot is a fixed window's slot, a rolling window's window or
/// a bucket's period.
pub trait Gifts: FnMut(Option<&str>, u64, NodeIx, u32) {}

impl<F: FnMut(Option<&str>, u64, NodeIx, u32)> Gifts for F {}

/// Raises `known` to `heard`, a later figure of the same cumulative count
/// (counts only grow, so a smaller one is late or repeated): the one
/// merge by maximum of every count peers trade. Returns by how much it
/// grew.
pub fn raise(known: &mut u32, heard: u32) -> u32 {
    let grew = heard.saturating_sub(*known);
    *known += grew;
    grew
}

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
    /// This run's state file kept every grant and gift of its earlier runs
    /// (and no peer knew of another run): it owns its share of a fixed
    /// window's slot it joined in too, less what they spent of it (see
    /// `kinds::fixed::kept`).
    pub resumes: bool,
    /// Whose shares this locker may grant from now: its own while leased,
    /// and those it inherited (see `core::peering::tenure`).
    pub holding: Holding,
}

/// Whose shares of a slot a locker may grant from now (see
/// `core::peering::tenure`, which decides it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    /// Its own share: a majority of the group echoed it lately (always,
    /// under three members).
    pub leased: bool,
    /// The places (by id among the members) of the shares it inherited
    /// from members a majority declared dead, and may grant from now, as
    /// bits.
    pub held: u64,
    /// ...for the slots that begin from this instant on.
    pub held_from: Nanos,
}

impl Holding {
    /// One's own share and no one else's.
    pub const OWN: Holding = Holding { leased: true, held: 0, held_from: Nanos::MAX };

    /// No share at all: only what peers give (see `core::peering::members`).
    pub const NONE: Holding = Holding { leased: false, held: 0, held_from: Nanos::MAX };
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
        resumes: false,
        holding: Holding::OWN,
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
    ///
    /// Its own only while leased, and besides, the shares of the members it
    /// inherited, of the slots that begin once it may (see
    /// `core::peering::tenure`).
    #[inline]
    pub fn owns(&self, quota: Quota, slot: u64) -> u32 {
        let (own, inherited) = self.parts(quota, quota.max_requests(), slot, slot, self.resumes);
        own + inherited
    }

    /// The room of a token bucket of `burst` (the tokens it may hold) this
    /// locker holds in `period` of `quota` before any gift, as its own part
    /// and the parts it inherited: `burst / members` each, and one more for
    /// the members whose place is below the remainder. The remainder does
    /// not rotate: a bucket's room stays put from one period to the next,
    /// so that no member loses the tokens in a unit of room it would hand
    /// on. The members' rooms add up to `burst`, and each refills its room
    /// at the bucket's rate times room over burst (see
    /// `core::kinds::bucket::peer`), so their refills add up to the rate.
    /// Its own part and inherited parts as for `owns`: no remainder without
    /// a place, none of a period that began before this run joined
    /// (`owns_from`) unless it `resumes` its earlier runs' (see
    /// `core::kinds::bucket::kept`), its own only while leased.
    #[inline]
    pub fn holds(&self, quota: Quota, burst: u32, period: u64) -> (u32, u32) {
        self.parts(quota, burst, period, 0, self.resumes)
    }

    /// When a bucket's own room this run holds began filling from empty,
    /// for a key this run has not touched: 0 (full from the start) unless
    /// it joined late (`owns_from`), then the start of the first period it
    /// holds room in; `Nanos::MAX` while it has not joined. (Inherited
    /// room starts empty when it is first held.)
    pub fn fills_from(&self, quota: Quota) -> Nanos {
        if self.owns_from == 0 {
            return 0;
        }
        let slot = quota.slot_of(self.owns_from);
        if quota.slot_start(slot) >= self.owns_from {
            self.owns_from
        } else {
            quota.slot_end(slot)
        }
    }

    /// This locker's own part of `total` in `slot` of `quota`, and the
    /// parts it inherited, with the remainder going to the places that
    /// `turn` rotates it to; of the slot it joined in too if it `resumed`
    /// its earlier runs'.
    fn parts(&self, quota: Quota, total: u32, slot: u64, turn: u64, resumed: bool) -> (u32, u32) {
        let members = self.members.max(1);
        let start = quota.slot_start(slot);
        let share_of = |place: Option<u32>| {
            let extra = place.is_some_and(|m| (u64::from(m) + turn) % u64::from(members) < u64::from(total % members));
            total / members + u32::from(extra)
        };
        let joined = start >= self.owns_from || (resumed && self.owns_from != Nanos::MAX);
        let own = if self.holding.leased && joined { share_of(self.member) } else { 0 };
        let Holding { held, held_from, .. } = self.holding;
        if held == 0 || start < held_from {
            return (own, 0);
        }
        (own, (0..members.min(64)).filter(|p| held >> p & 1 == 1).map(|p| share_of(Some(p))).sum::<u32>())
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
    /// an earlier run's grants and gifts may count until then; unless this
    /// run `resumes` its earlier runs' (their grants and figures are then
    /// charged, see `core::kinds::rolling::rights`).
    ///
    /// Its own only while leased, and besides, the rights of the members it
    /// inherited, from the `EARLIER_GIFTS_WINDOWS`-th window after the one
    /// it may hold them from (`held_from`, when the silent member had
    /// surely stopped granting): by then the member's last grants have left
    /// the window and the last rights it lent have come back.
    #[inline]
    pub fn rolling_rights(&self, quota: Quota, window: u64) -> u32 {
        let (max, members) = (quota.max_requests(), self.members.max(1));
        let share_of = |place: Option<u32>| max / members + u32::from(place.is_some_and(|m| m < max % members));
        let joined = self.owns_from == 0
            || (self.resumes && self.owns_from != Nanos::MAX)
            || window >= quota.slot_of(self.owns_from).saturating_add(EARLIER_GIFTS_WINDOWS);
        let own = if joined && self.holding.leased { share_of(self.member) } else { 0 };
        let Holding { held, held_from, .. } = self.holding;
        if held == 0 || window < quota.slot_of(held_from).saturating_add(EARLIER_GIFTS_WINDOWS) {
            return own;
        }
        own + (0..members.min(64)).filter(|p| held >> p & 1 == 1).map(|p| share_of(Some(p))).sum::<u32>()
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

    /// How long a locker that asked its peers for permits keeps what it
    /// owns rather than give it to a peer that asks: two round trips, in
    /// which its own callers' next asks come with the gifts (see
    /// `exchange::Exchange::give`).
    #[inline]
    pub fn keeps_own_for(&self) -> Nanos {
        self.charged_for().saturating_mul(2)
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
    /// Whether it resumed its earlier runs' ledgers (see `Share::resumes`).
    pub resumes: bool,
    /// Whose shares it may grant from (see `Share::holding`).
    pub holding: Holding,
}

impl PeerView {
    /// No peers: decide alone.
    pub const ALONE: PeerView = PeerView {
        live: 1,
        hold_until: None,
        late: 0,
        members: 1,
        member: Some(0),
        owns_from: 0,
        resumes: false,
        holding: Holding::OWN,
    };
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
    /// What is counted: permits granted, or (fixed and rolling windows,
    /// token buckets) wanted or given.
    pub what: Counted,
}

/// What a `Count` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Counted {
    /// Permits the node granted: the shared count.
    #[default]
    Granted,
    /// Permits (or tokens) the node asked its peers for, having too few
    /// of its own (fixed windows: in a slot; rolling windows: in a window,
    /// numbered as `Quota::slot_of`; token buckets: in a period): a peer
    /// with spare ones gives.
    Wanted,
    /// Permits (or tokens, with as much room) the node gave to the node
    /// named here (fixed windows: of a slot; rolling windows: rights for a
    /// window; token buckets: of a period): the giver owns that many fewer,
    /// the receiver that many more.
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
    fn the_members_hold_exactly_the_burst_between_them_in_every_period() {
        let quota = Quota::new(5, 0.8).unwrap();
        for (burst, members) in [(5u32, 3u32), (1, 2), (7, 5), (2, 4), (100, 3)] {
            for period in 0..4u64 {
                let each = (0..members)
                    .map(|m| Share { members, member: Some(m), ..Share::ALONE }.holds(quota, burst, period).0);
                assert_eq!(each.sum::<u32>(), burst, "{burst} over {members} in period {period}");
            }
        }
        let trio = |m| Share { members: 3, member: Some(m), ..Share::ALONE };
        let periods: Vec<u32> = (0..3).map(|k| trio(2).holds(quota, 5, k).0).collect();
        assert_eq!(periods, [1, 1, 1], "the room stays put");
        let slot_ns = quota.slot_ns();
        let late = Share { owns_from: 3 * slot_ns + 1, ..trio(0) };
        assert_eq!(
            (late.holds(quota, 5, 3), late.holds(quota, 5, 4)),
            ((0, 0), (2, 0)),
            "none of the period it joined in"
        );
        let heir = Share { holding: Holding { leased: true, held: 0b100, held_from: 4 * slot_ns }, ..trio(0) };
        assert_eq!((heir.holds(quota, 5, 3), heir.holds(quota, 5, 4)), ((2, 0), (2, 1)), "a dead member's room");
        assert_eq!((late.fills_from(quota), trio(0).fills_from(quota)), (4 * slot_ns, 0));
        assert_eq!(Share { owns_from: 2 * slot_ns, ..trio(0) }.fills_from(quota), 2 * slot_ns);
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
        let cut_off = Share { holding: Holding { leased: false, ..Holding::OWN }, ..trio(0) };
        assert_eq!(cut_off.rolling_rights(quota(5), 9), 0, "none of its own without its lease");
        let heir = Share { holding: Holding { leased: true, held: 1 << 2, held_from: joined }, ..trio(1) };
        let held: Vec<u32> = (3..7).map(|k| heir.rolling_rights(quota(5), k)).collect();
        assert_eq!(held, [2, 2, 2, 3], "its own, then the dead member's once its last grants and gifts are gone");
    }
}
