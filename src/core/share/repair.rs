//! A repair's walk over one limit's keys: which keys it republishes now,
//! and where the next repair goes on. A repair carries at most a budget of
//! counts (`core::peering::schedule::REPAIR_BUDGET`), so that neither the
//! locker that sends it nor the peers that merge it spend a long turn on
//! it however many keys were touched; the next heartbeat's repair resumes
//! after the last key this one took, and wraps round at the end, so every
//! touched key is republished within a cycle, in table order.
//!
//! A kind walks its keys in a stable order (its table's), calling `take`
//! for each before it looks at the key's touched mark; the caller counts
//! what it republishes (`sent`), so a kind only asks. A key the walk
//! passes over keeps its mark.
//! A table that grew or rehashed between two repairs may put a key behind
//! the walk; it keeps its mark and is republished in the next cycle. No
//! clock, no counts: positions only.

use std::cell::Cell;

/// One limit's part of a repair: from which position of its keys, within
/// how many counts. Shared (cells) between the kind that walks its keys
/// and the caller that counts what it republishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairWalk {
    /// The first position taken.
    from: usize,
    /// The next position to be offered.
    at: Cell<usize>,
    /// Counts this repair may still carry.
    left: Cell<usize>,
    /// The first position passed over once the budget was spent.
    stopped_at: Cell<Option<usize>>,
}

impl RepairWalk {
    /// A walk over a limit's keys from position `from`, carrying at most
    /// `budget` counts.
    pub fn new(from: usize, budget: usize) -> RepairWalk {
        RepairWalk { from, at: Cell::new(0), left: Cell::new(budget), stopped_at: Cell::new(None) }
    }

    /// Whether the key at the next position is to be republished now if
    /// touched: it lies at or after the start, and the budget is not spent.
    #[inline]
    pub fn take(&self) -> bool {
        let at = self.at.get();
        self.at.set(at + 1);
        if at < self.from {
            return false;
        }
        if self.left.get() == 0 {
            if self.stopped_at.get().is_none() {
                self.stopped_at.set(Some(at));
            }
            return false;
        }
        true
    }

    /// Counts one count republished for the key last taken (a key's
    /// counts are never split: the budget may be overrun by one key's).
    #[inline]
    pub fn sent(&self) {
        self.left.set(self.left.get().saturating_sub(1));
    }

    /// Counts this repair may still carry, for the next limit.
    pub fn left(&self) -> usize {
        self.left.get()
    }

    /// Where the next repair resumes in this limit's keys: `None` when this
    /// walk reached the end of them.
    pub fn resume_at(&self) -> Option<usize> {
        self.stopped_at.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks `keys` positions, each touched one sending `per_key` counts;
    /// returns the positions republished and where the next resumes.
    fn walk(from: usize, budget: usize, keys: usize, per_key: usize) -> (Vec<usize>, Option<usize>) {
        let w = RepairWalk::new(from, budget);
        let mut sent = Vec::new();
        for p in 0..keys {
            if w.take() {
                sent.push(p);
                (0..per_key).for_each(|_| w.sent());
            }
        }
        (sent, w.resume_at())
    }

    #[test]
    fn a_walk_takes_keys_from_its_start_until_its_budget_is_spent() {
        assert_eq!(walk(0, 10, 4, 2), (vec![0, 1, 2, 3], None), "all fit: the next starts over");
        assert_eq!(walk(0, 5, 10, 2), (vec![0, 1, 2], Some(3)), "a key's counts are not split");
        assert_eq!(walk(3, 5, 10, 2), (vec![3, 4, 5], Some(6)), "resumed where the last stopped");
        assert_eq!(walk(8, 5, 10, 2), (vec![8, 9], None), "to the end, then over again");
        assert_eq!(walk(0, 0, 3, 1), (vec![], Some(0)), "no budget: nothing, and resume at the start");
    }
}
