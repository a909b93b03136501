//! One key's count in one slot, as a peered locker keeps it: its own grants,
//! the cumulative count each peer node reported, and the rule that decides
//! whether one more grant fits.
//!
//! Peers publish cumulative counts over PUB/SUB, which drops, repeats and
//! reorders messages. Taking the maximum per node makes a repeated or late
//! message harmless and lets any later message repair a lost one; summing
//! over nodes gives the count all lockers granted together. This module is
//! pure arithmetic: it never reads a clock, and it knows nothing of sockets,
//! names or slots.

use super::peering::{NodeIx, Share};
use super::time::Nanos;

/// Own count at two checkpoints, at least `window` apart, so that
/// `own - prev` covers every grant of the last `window` (and possibly a
/// little more, which errs on the safe side).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Recent {
    prev: u32,
    cur: u32,
    since: Nanos,
}

impl Recent {
    #[inline]
    fn in_flight(&mut self, now: Nanos, own: u32, window: Nanos) -> u32 {
        let age = now.saturating_sub(self.since);
        if age >= window.saturating_mul(2) {
            *self = Recent { prev: own, cur: own, since: now };
        } else if age >= window {
            *self = Recent { prev: self.cur, cur: own, since: now };
        }
        own - self.prev
    }
}

/// The outcome of a take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// The permits were taken.
    Go,
    /// The slot's count is spent.
    Spent,
    /// Permits are left, but this locker's share of them is in flight; it
    /// may grant again once its recent grants have reached the peers.
    OverShare,
}

impl Take {
    /// Whether the permits were taken.
    pub fn is_go(self) -> bool {
        self == Take::Go
    }
}

/// One key's counts in the current slot.
///
/// Every live key of a fixed window holds one, in the window's key table, so
/// it is kept small: what only peering needs (each node's count, the recent
/// grants) lives behind a box that a locker on its own never allocates.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    own: u32,
    heard: u32,
    /// Granted since the last repair publish (see `Locker::drain_touched`).
    pub(crate) touched: bool,
    peered: Option<Box<Peered>>,
}

/// The part of a tally that only peered lockers use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Peered {
    peers: Vec<(NodeIx, u32)>,
    recent: Recent,
}

impl Tally {
    /// A tally that starts its slot with `own` permits this locker reserved
    /// earlier, marked for publishing so the peers learn of them.
    pub fn reserved(own: u32) -> Tally {
        Tally { own, touched: own > 0, ..Tally::default() }
    }

    /// This locker's own grants.
    pub fn own(&self) -> u32 {
        self.own
    }

    /// The sum of the peers' reported counts.
    pub fn heard(&self) -> u32 {
        self.heard
    }

    /// Own grants plus every peer's, saturating.
    #[inline]
    pub fn total(&self) -> u32 {
        self.own.saturating_add(self.heard)
    }

    /// Each peer node's reported count.
    pub fn peers(&self) -> impl Iterator<Item = (NodeIx, u32)> + '_ {
        self.peered.iter().flat_map(|s| s.peers.iter().copied())
    }

    fn peered(&mut self) -> &mut Peered {
        self.peered.get_or_insert_with(Box::default)
    }

    /// Records that `node` has granted `count` in all (cumulative). Keeps the
    /// larger of this and what was heard before, so repeats and reordering
    /// change nothing. Returns whether the count grew.
    pub fn merge(&mut self, node: NodeIx, count: u32) -> bool {
        let peers = &mut self.peered().peers;
        let grown = match peers.iter_mut().find(|(n, _)| *n == node) {
            Some((_, c)) if *c >= count => return false,
            Some((_, c)) => count - std::mem::replace(c, count),
            None => {
                peers.push((node, count));
                count
            }
        };
        self.heard = self.heard.saturating_add(grown);
        true
    }

    /// Records that this very node had granted `count`, as a peer echoed it
    /// back: raises the own count if the echo is larger.
    pub fn merge_own(&mut self, count: u32) -> bool {
        let grew = count > self.own;
        self.own = self.own.max(count);
        grew
    }

    /// Takes `cost` permits out of `max` if they fit.
    ///
    /// They fit when the total stays within `max` and, with peers live, when
    /// this locker's grants still in flight stay within its share of what is
    /// left, `ceil(left / live)`. Every live locker holds itself to the same
    /// share of the same remainder, so grants made at once on stale views
    /// cannot add up to much more than what was left. The first grant in a
    /// window is always allowed when it fits, so no cost can starve.
    #[inline]
    pub fn take(&mut self, now: Nanos, max: u32, cost: u32, share: Share) -> Take {
        let left = max.saturating_sub(self.total());
        if cost > left {
            return Take::Spent;
        }
        if share.live > 1 {
            let own = self.own;
            let in_flight = self.peered().recent.in_flight(now, own, share.in_flight_window);
            if in_flight > 0 && in_flight + cost > left.div_ceil(share.live) {
                return Take::OverShare;
            }
        }
        self.own += cost;
        self.touched = true;
        Take::Go
    }

    /// Permits left out of `max`.
    pub fn remaining(&self, max: u32) -> u32 {
        max.saturating_sub(self.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::time::NANOS_PER_MS;

    const MS: Nanos = NANOS_PER_MS;
    const TRIO: Share = Share { live: 3, in_flight_window: 2 * MS };

    #[test]
    fn a_tally_is_small_and_allocates_nothing_alone() {
        assert!(std::mem::size_of::<Tally>() <= 24, "{}", std::mem::size_of::<Tally>());
        let mut t = Tally::default();
        assert!(t.take(0, 10, 1, Share::ALONE).is_go());
        assert!(t.peered.is_none());
    }

    #[test]
    fn merge_keeps_the_maximum_per_node_and_sums_over_nodes() {
        let mut t = Tally::default();
        assert!(t.merge(1, 5));
        assert!(t.merge(2, 3));
        assert!(!t.merge(1, 5), "a duplicate changes nothing");
        assert!(!t.merge(1, 4), "an older count arriving late changes nothing");
        assert!(t.merge(1, 9), "a later count replaces a lost one in between");
        assert_eq!(t.heard(), 12);
        assert_eq!(t.total(), 12);
    }

    #[test]
    fn an_echo_of_the_own_count_only_ever_raises_it() {
        let mut t = Tally::default();
        assert!(t.merge_own(7));
        assert!(!t.merge_own(3));
        assert_eq!(t.own(), 7);
        assert_eq!(t.heard(), 0);
    }

    #[test]
    fn alone_a_tally_fills_to_max_exactly() {
        let mut t = Tally::default();
        let granted = (0..20).filter(|&i| t.take(i, 10, 1, Share::ALONE).is_go()).count();
        assert_eq!(granted, 10);
        assert_eq!(t.remaining(10), 0);
    }

    #[test]
    fn with_peers_in_flight_grants_stay_within_a_share_of_what_is_left() {
        let mut t = Tally::default();
        t.merge(1, 970); // 30 left: a third of it is 10
        let granted = (0..30).filter(|_| t.take(100 * MS, 1000, 1, TRIO).is_go()).count();
        // The first grant is free; then in-flight + 1 must fit ceil(left / 3).
        assert!((7..=10).contains(&granted), "granted {granted}");
        // Once the window has passed, the grants are no longer in flight.
        assert_eq!(t.take(100 * MS, 1000, 1, TRIO), Take::OverShare);
        assert!(t.take(105 * MS, 1000, 1, TRIO).is_go());
    }

    #[test]
    fn three_stale_views_together_stay_near_max() {
        // Three lockers start from the same view with 30 left and grant as
        // fast as they can before hearing from each other.
        let mut total = 0;
        for _ in 0..3 {
            let mut t = Tally::default();
            t.merge(1, 970);
            total += (0..100).filter(|_| t.take(MS, 1000, 1, TRIO).is_go()).count();
        }
        assert!(total <= 30, "granted {total} of 30 left");
    }

    #[test]
    fn a_large_cost_is_never_starved_by_the_share_rule() {
        let mut t = Tally::default();
        assert!(t.take(0, 5, 5, TRIO).is_go());
    }

    #[test]
    fn a_lone_busy_locker_still_drains_the_slot() {
        // All load on one of three live lockers: in-flight is capped per
        // window, but the count still fills within a few dozen windows.
        let mut t = Tally::default();
        let mut now = 0;
        while t.remaining(1000) > 0 && now < 200 * MS {
            for _ in 0..50 {
                t.take(now, 1000, 1, TRIO);
            }
            now += 100_000; // 0.1 ms between bursts
        }
        assert_eq!(t.remaining(1000), 0, "filled by {} ms", now / MS);
        assert!(now < 100 * MS, "took {} ms", now / MS);
    }
}
