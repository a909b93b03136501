//! What a token bucket keeps across a restart: a key's TAT (for a peered
//! bucket, its share's fill on the same scale) and, when peered, this
//! run's own grants in the current period, read after a grant for the
//! state log and put back on start.
//!
//! The TAT alone restores a locker on its own exactly. A peered run
//! restarted holds no room in the period it joins in and fills its room
//! from empty after (see `peer`), so what it put back only ever makes a
//! share emptier; the own count is kept for the record, not put back. No
//! clock, no file: the caller brings both.

use super::Bucket;
use crate::core::kinds::Kept;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::time::Nanos;

impl Bucket {
    /// Whether a key kept with `tat` and own grants in `period`, of a
    /// bucket for `quota`, still says something at `now`: the bucket is not
    /// yet full again, or the count is of the current or previous period.
    pub fn kept_counts(quota: Quota, tat: Nanos, period: u64, now: Nanos) -> bool {
        tat > now || period.saturating_add(1) >= quota.slot_of(now)
    }

    /// What `key` keeps at `now`: its TAT, and the period `now` falls in
    /// with this locker's own grants in it (0 unless peered).
    pub fn kept(&self, now: Nanos, key: Option<&str>) -> Kept {
        let period = self.period(now);
        let peered = match key {
            None => self.unkeyed_peered.as_deref(),
            Some(k) => self.ledgers.get(k),
        };
        match peered {
            Some(k) => {
                Kept::Bucket { tat: k.tat(now), period, count: if k.period() == period { k.spent() } else { 0 } }
            }
            None => Kept::Bucket { tat: self.tat(key), period, count: 0 },
        }
    }

    /// Puts back `key`'s TAT, keeping a later one. Returns whether the key
    /// is held.
    pub fn restore(&mut self, now: Nanos, key: Option<&str>, tat: Nanos, room: KeyRoom) -> Result<bool, NoRoom> {
        if tat <= now {
            return Ok(false);
        }
        if let (Some(k), KeyRoom::Full) = (key, room) {
            if !self.tats.contains_key(k) {
                return Err(NoRoom);
            }
        }
        let held = match key {
            None => &mut self.unkeyed,
            Some(k) => self.tats.get_or_insert(k),
        };
        *held = (*held).max(tat);
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
    use crate::core::room::{KeyRoom, Leeway};
    use crate::core::share::Share;

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
        assert_eq!(back.restore(50 * MS, Some("k"), tat, KeyRoom::Free), Ok(true));
        assert!(!back.take(50 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "still empty");
        assert!(back.take(100 * MS, Some("k"), Want::now(1), KeyRoom::Free).unwrap().go, "refilled one");
        assert_eq!(back.restore(500 * MS, Some("old"), 400 * MS, KeyRoom::Free), Ok(false), "full again");
    }

    #[test]
    fn a_peered_share_keeps_its_fill_and_own_grants_and_a_restored_one_is_never_fuller() {
        // Two members: this one holds 2 of the 3 tokens' room.
        let terms = Leeway { room: KeyRoom::Free, share: Share { members: 2, ..Share::ALONE } };
        let mut b = bucket();
        assert!(b.take_shared(0, None, Want::now(2), terms).unwrap().go);
        let Kept::Bucket { tat, period, count } = b.kept(0, None) else { unreachable!() };
        assert_eq!((period, count), (0, 2));
        let mut back = bucket();
        assert_eq!(back.restore(0, None, tat, KeyRoom::Free), Ok(true));
        assert!(!back.take_shared(0, None, Want::now(1), terms).unwrap().go, "still empty");
    }
}
