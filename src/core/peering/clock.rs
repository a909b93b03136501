//! The group's clock: this locker's clock moved to the median of its live
//! peers' clocks, so that peered lockers agree on where slots begin even
//! when one host's clock is off, and the group never follows its fastest
//! (or slowest) clock.
//!
//! Each heartbeat says what the sender's group clock read when it left;
//! the node table keeps, per peer, the largest offset of its last few
//! heartbeats (a delay only ever makes a peer look behind, so the largest
//! is the least delayed). When the lower median of those offsets and this
//! locker's own (0) is more than `FOLLOW_BEYOND` away, this locker moves
//! its clock by it. With three or more lockers and one wrong clock, the
//! median is a right one: the wrong one follows the others, the others
//! stay. With two, the lower median is the slower of the two clocks.
//!
//! The group time never runs backwards: a move back holds it still until
//! the reading catches up. This module only does the arithmetic; it reads
//! no clock.

use crate::core::time::{Nanos, NANOS_PER_MS};

/// Offsets within this are left alone: transit time and jitter, below
/// what a slot boundary or a turn can notice (the in-flight window is
/// 2 ms).
pub const FOLLOW_BEYOND: Nanos = NANOS_PER_MS;

/// This locker's clock, moved to the group's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupClock {
    /// Added to a reading of this locker's clock.
    correction: i64,
    /// The latest group time handed out.
    last: Nanos,
}

impl GroupClock {
    /// The group time for `raw`, a reading of this locker's clock: never
    /// earlier than one handed out before.
    #[inline]
    pub fn now(&mut self, raw: Nanos) -> Nanos {
        self.last = self.last.max(self.reading(raw));
        self.last
    }

    /// `raw` moved to the group's clock, without holding still after a
    /// move back: what offsets to peers are measured against.
    #[inline]
    pub fn reading(&self, raw: Nanos) -> Nanos {
        raw.saturating_add_signed(self.correction)
    }

    /// The reading of this locker's clock at which the group time is `t`.
    pub fn raw_at(&self, t: Nanos) -> Nanos {
        t.saturating_add_signed(self.correction.saturating_neg())
    }

    /// The latest group time handed out: where it holds still after a
    /// move back.
    pub fn latest(&self) -> Nanos {
        self.last
    }

    /// How far this locker's clock has been moved, in nanoseconds.
    pub fn correction(&self) -> i64 {
        self.correction
    }

    /// Moves the clock by `by` nanoseconds.
    pub fn follow(&mut self, by: i64) {
        self.correction = self.correction.saturating_add(by);
    }
}

/// The lower median of `offsets` and this locker's own 0: the move that
/// puts this locker's clock in the middle of the group's.
pub fn median_offset(offsets: impl Iterator<Item = i64>) -> i64 {
    let mut all: Vec<i64> = std::iter::once(0).chain(offsets).collect();
    all.sort_unstable();
    all[(all.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wrong_clock_of_three_follows_the_other_two_and_they_stay() {
        let ms = NANOS_PER_MS as i64;
        // Seen from a right clock: the other right one at 0, a fast one at +50.
        assert_eq!(median_offset([0, 50 * ms].into_iter()), 0);
        // Seen from the fast one: both others 50 ms behind.
        assert_eq!(median_offset([-50 * ms, -50 * ms].into_iter()), -50 * ms);
        // Two: the slower clock of the two.
        assert_eq!(median_offset([300 * ms].into_iter()), 0);
        assert_eq!(median_offset([-300 * ms].into_iter()), -300 * ms);
        assert_eq!(median_offset(std::iter::empty()), 0);
    }

    #[test]
    fn the_group_time_never_runs_backwards() {
        let mut c = GroupClock::default();
        assert_eq!(c.now(1_000), 1_000);
        c.follow(-500);
        assert_eq!(c.now(1_100), 1_000, "held still until the reading catches up");
        assert_eq!(c.reading(1_100), 600);
        assert_eq!(c.now(1_600), 1_100);
        assert_eq!(c.raw_at(1_100), 1_600);
        c.follow(800);
        assert_eq!(c.now(1_600), 1_900);
    }
}
