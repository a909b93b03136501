//! What a token bucket keeps across a restart: a key's TAT, and this
//! run's own grants in the current period, read after a grant for the
//! state log and put back on start.
//!
//! The TAT alone restores a locker on its own exactly. The own count goes
//! back as the earlier run's node in the key's ledger, without moving the
//! TAT again, so that a peer's snapshot of that run (which carries the same
//! count) merges with it by maximum instead of being counted twice. No
//! clock, no file: the caller brings both.

use super::Bucket;
use crate::core::kinds::Kept;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::NodeIx;
use crate::core::share::ME;
use crate::core::time::Nanos;

impl Bucket {
    /// Whether a key kept with `tat` and own grants in `period`, of a
    /// bucket for `quota`, still says something at `now`: the bucket is not
    /// yet full again, or the count is of the current or previous period
    /// (which peers still compare).
    pub fn kept_counts(quota: Quota, tat: Nanos, period: u64, now: Nanos) -> bool {
        tat > now || period.saturating_add(1) >= quota.slot_of(now)
    }

    /// What `key` keeps at `now`: its TAT, and the period `now` falls in
    /// with this locker's own grants in it (0 unless peered: only peers
    /// keep that ledger).
    pub fn kept(&self, now: Nanos, key: Option<&str>) -> Kept {
        let period = self.period(now);
        let own = self.ledger(key).and_then(|l| l.counts().find(|&(node, p, _)| node == ME && p == period));
        Kept::Bucket { tat: self.tat(key), period, count: own.map_or(0, |(_, _, n)| n) }
    }

    /// Puts back `key`'s TAT (keeping a later one) and, when `count` is
    /// not 0, `node`'s grants in `period` if that period is still kept.
    /// Returns whether the key is held.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        tat: Nanos,
        node: NodeIx,
        period: u64,
        count: u32,
        room: KeyRoom,
    ) -> Result<bool, NoRoom> {
        let oldest = self.oldest_period(now);
        let keep_count = count > 0 && period >= oldest && period <= self.period(now);
        if tat <= now && !keep_count {
            return Ok(false);
        }
        if let (Some(k), KeyRoom::Full) = (key, room) {
            if !self.tats.contains_key(k) {
                return Err(NoRoom);
            }
        }
        if keep_count {
            let k = self.key_mut(key);
            *k.tat = (*k.tat).max(tat);
            k.ledger.merge(node, period, count);
        } else {
            let held = match key {
                None => &mut self.unkeyed.tat,
                Some(k) => self.tats.get_or_insert(k),
            };
            *held = (*held).max(tat);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use crate::core::ask::Want;
    use crate::core::kinds::bucket::Bucket;
    use crate::core::kinds::Kept;
    use crate::core::limit::Quota;
    use crate::core::room::KeyRoom;
    use crate::core::share::Count;
    use crate::core::LimitId;

    const MS: u64 = 1_000_000;

    fn bucket() -> Bucket {
        Bucket::new(Quota::new(10, 1.0).unwrap(), NonZeroU32::new(3).unwrap())
    }

    #[test]
    fn a_restored_tat_holds_back_what_was_granted() {
        let mut b = bucket();
        for _ in 0..3 {
            assert!(b.take(0, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go);
        }
        let Kept::Bucket { tat, period, count: own } = b.kept(0, Some("k")) else { unreachable!() };
        assert_eq!((tat, period, own), (300 * MS, 0, 0));

        let mut back = bucket();
        assert_eq!(back.restore(50 * MS, Some("k"), tat, 5, period, 0, KeyRoom::Free), Ok(true));
        assert!(!back.take(50 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "still empty");
        assert!(back.take(100 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "refilled one");
        assert_eq!(back.restore(500 * MS, Some("old"), 400 * MS, 5, 0, 0, KeyRoom::Free), Ok(false), "full again");
    }

    #[test]
    fn a_restored_count_is_merged_by_maximum_and_does_not_move_the_tat() {
        let mut b = bucket();
        assert_eq!(b.restore(0, None, 200 * MS, 5, 0, 2, KeyRoom::Free), Ok(true));
        // A peer's snapshot of the same run carries the same count: nothing grows.
        let echo = Count::granted(LimitId(0), None, 0, 5, 2);
        assert_eq!(b.merge(0, &echo, KeyRoom::Free), Ok(false));
        let Kept::Bucket { tat, .. } = b.kept(0, None) else { unreachable!() };
        assert_eq!(tat, 200 * MS);
    }
}
