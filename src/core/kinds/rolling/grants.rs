//! One key's own grants, oldest first, as (stamp, permits): the first one
//! inline, more in a list of their own.
//!
//! Most keys of a large table hold one entry at a time (a light caller, or
//! any caller of a window counted in sub-slots within one sub-slot), so
//! that entry sits in the key's own slot and a decision reads one cache
//! line. A busier key's entries move to a list, and back inline when the
//! list is down to one. Stamps strictly rise. This module stores; `log`
//! counts.

use std::collections::VecDeque;

use crate::core::time::Nanos;

/// A key's grants: 24 bytes, so that a key, its log and these fit one
/// 64-byte slot.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// The one grant while there is no list: its stamp and permits.
    stamp: Nanos,
    permits: u32,
    /// Whether `stamp` and `permits` hold a grant.
    inline: bool,
    /// Every grant, when there are more than one. Boxed so that a key
    /// without a list pays one word for it, not a list's four.
    #[allow(clippy::box_collection)]
    many: Option<Box<VecDeque<(Nanos, u32)>>>,
}

impl Grants {
    pub fn is_empty(&self) -> bool {
        self.many.as_ref().map_or(!self.inline, |m| m.is_empty())
    }

    /// The oldest grant.
    pub fn front(&self) -> Option<(Nanos, u32)> {
        match &self.many {
            Some(m) => m.front().copied(),
            None => self.one(),
        }
    }

    /// The newest grant.
    pub fn back(&self) -> Option<(Nanos, u32)> {
        match &self.many {
            Some(m) => m.back().copied(),
            None => self.one(),
        }
    }

    fn one(&self) -> Option<(Nanos, u32)> {
        self.inline.then_some((self.stamp, self.permits))
    }

    /// Every grant, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (Nanos, u32)> + '_ {
        let many = self.many.iter().flat_map(|m| m.iter().copied());
        self.one().filter(|_| self.many.is_none()).into_iter().chain(many)
    }

    /// The permits of the newest grants whose stamps `counts` holds for,
    /// walking back from the newest until one does not.
    #[inline]
    pub fn newest_while(&self, counts: impl Fn(Nanos) -> bool) -> u64 {
        match &self.many {
            None if self.inline && counts(self.stamp) => u64::from(self.permits),
            None => 0,
            Some(m) => m.iter().rev().take_while(|&&(s, _)| counts(s)).map(|&(_, n)| u64::from(n)).sum(),
        }
    }

    /// Drops the oldest grant.
    pub fn pop_front(&mut self) {
        match &mut self.many {
            Some(m) => {
                m.pop_front();
                if m.len() <= 1 {
                    let last = m.pop_front();
                    self.many = None;
                    self.set_one(last);
                }
            }
            None => self.inline = false,
        }
    }

    /// Takes back up to `n` permits from the newest grants; returns how
    /// many it took back. A grant left with no permits is dropped.
    pub fn take_back(&mut self, n: u32) -> u32 {
        let mut back = 0;
        while back < n {
            let Some((_, permits)) = self.back() else { break };
            let part = permits.min(n - back);
            back += part;
            match &mut self.many {
                Some(m) if part == permits => {
                    m.pop_back();
                    if m.len() <= 1 {
                        let last = m.pop_front();
                        self.many = None;
                        self.set_one(last);
                    }
                }
                Some(m) => m.back_mut().expect("a newest grant").1 -= part,
                None if part == permits => self.inline = false,
                None => self.permits -= part,
            }
        }
        back
    }

    /// Adds `permits` at `stamp`, no earlier than the newest grant: to it
    /// when the stamps are equal, else as a new newest grant.
    pub fn push(&mut self, stamp: Nanos, permits: u32) {
        self.insert(stamp, permits);
    }

    /// Adds `permits` at `stamp` wherever it falls among the grants (as a
    /// restore does): to the grant with that stamp, else as a new one.
    pub fn insert(&mut self, stamp: Nanos, permits: u32) {
        if let Some(m) = &mut self.many {
            let i = m.partition_point(|&(s, _)| s < stamp);
            match m.get_mut(i) {
                Some((s, count)) if *s == stamp => *count += permits,
                _ => m.insert(i, (stamp, permits)),
            }
            return;
        }
        match self.one() {
            None => self.set_one(Some((stamp, permits))),
            Some((s, _)) if s == stamp => self.permits += permits,
            Some(one) => {
                let both = if one.0 < stamp { [one, (stamp, permits)] } else { [(stamp, permits), one] };
                self.many = Some(Box::new(VecDeque::from(both)));
                self.inline = false;
            }
        }
    }

    fn set_one(&mut self, grant: Option<(Nanos, u32)>) {
        self.inline = grant.is_some();
        if let Some((stamp, permits)) = grant {
            (self.stamp, self.permits) = (stamp, permits);
        }
    }

    /// Grants the list has room for on the heap (0 inline).
    pub fn capacity(&self) -> usize {
        self.many.as_ref().map_or(0, |m| m.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_move_to_a_list_and_back_and_keep_their_order() {
        let mut g = Grants::default();
        assert!(g.is_empty() && g.front().is_none());
        g.push(10, 1);
        g.push(10, 2);
        assert_eq!((g.iter().collect::<Vec<_>>(), g.capacity()), (vec![(10, 3)], 0), "one grant stays inline");
        g.push(20, 1);
        g.insert(15, 4);
        g.insert(20, 1);
        assert_eq!(g.iter().collect::<Vec<_>>(), [(10, 3), (15, 4), (20, 2)]);
        assert_eq!(g.iter().next_back(), Some((20, 2)));
        assert_eq!(g.newest_while(|s| s >= 15), 6, "the newest two");
        assert_eq!((g.front(), g.back()), (Some((10, 3)), Some((20, 2))));
        g.pop_front();
        g.pop_front();
        assert_eq!((g.iter().collect::<Vec<_>>(), g.capacity()), (vec![(20, 2)], 0), "back inline at one");
        g.insert(5, 1);
        assert_eq!(g.iter().collect::<Vec<_>>(), [(5, 1), (20, 2)], "an older one goes first");
        g.pop_front();
        g.pop_front();
        assert!(g.is_empty() && g.iter().next().is_none());
        assert_eq!(std::mem::size_of::<Grants>(), 24);
        let log = std::mem::size_of::<super::super::log::Log>();
        assert_eq!(log, 40, "a key's name (24 bytes) and its log fill one 64-byte slot");
    }
}
