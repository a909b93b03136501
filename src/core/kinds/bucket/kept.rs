//! What a token bucket keeps across a restart: a key's TAT (for a peered
//! bucket, its share's fill on the same scale) and, when peered, this
//! run's own grants in the current period, read after a grant for the
//! state log and put back on start.
//!
//! The TAT alone restores a locker on its own exactly. A peered share's
//! TAT is measured against the room held when it was written, and a gift
//! changes the room without a grant, so a peered key also keeps its share
//! as each gift given or received left it (`kept_exchange`: the period, the
//! own room before gifts, the room held and its fill), written before the
//! gift leaves.
//!
//! A run restarted with its state file that resumes its earlier runs'
//! share (`Share::resumes`) holds, for each key they left records for in
//! the current or the previous period, the newest of them (`Earlier`): a
//! fill as written, or a grant's TAT on the room of the last fill before
//! it. Only gifts received grow a room between two fills, so that room is
//! never larger than the one the grant was measured against, and the
//! share resumed never holds more tokens than the earlier run did. It is
//! then brought to `now` as any share is (`Ledger::settle`: gifts end with
//! their period). A key with no such record, or a run that does not
//! resume, holds no room in the period it joins in when peers knew the
//! earlier run and fills its room from empty after (see `peer`), so what
//! it put back only ever makes a share emptier; the own count is kept for
//! the record, not put back. No clock, no file: the caller brings both.

use super::{Bucket, Ledger};
use crate::core::kinds::Kept;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::share::exchange::KeptExchange;
use crate::core::time::Nanos;

/// A peered key's share as an earlier run's fill record kept it: written
/// at `at`, in `period`, with `base` own room before gifts and `room`
/// held, full again at `tat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EarlierFill {
    at: Nanos,
    period: u64,
    base: u32,
    room: u32,
    tat: Nanos,
}

/// What earlier runs' records said of one peered key: the newest fill,
/// and the newest grant's `(at, period, tat)`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Earlier {
    fill: Option<EarlierFill>,
    grant: Option<(Nanos, u64, Nanos)>,
}

impl Earlier {
    /// The latest period a record was written in.
    pub(super) fn period(&self) -> u64 {
        self.fill.map_or(0, |f| f.period).max(self.grant.map_or(0, |g| g.1))
    }

    /// The share the newest record says, or none when the records are
    /// older than the period before `period` (see the module's header).
    /// `own` is this run's own room before gifts, for a grant with no fill
    /// before it.
    pub(super) fn share(&self, depth: Nanos, period: u64, own: u32) -> Option<Ledger> {
        if self.period().saturating_add(1) < period {
            return None;
        }
        let (fill, grant) = (self.fill, self.grant);
        if let Some(f) = fill.filter(|f| grant.is_none_or(|(at, _, _)| at <= f.at)) {
            return Some(Ledger::resumed(f.at, depth, f.tat, f.period, f.base, f.room));
        }
        let (at, period, tat) = grant?;
        // Gifts end with their period: in a later one, the room is the own
        // room again.
        let (base, room) = match fill {
            Some(f) if f.period == period => (f.base, f.room),
            Some(f) => (f.base, f.base),
            None => (own, own),
        };
        Some(Ledger::resumed(at, depth, tat, period, base, room))
    }
}

impl Bucket {
    /// Calls `f` with a peered key's share at `now`, as the state file
    /// keeps it; nothing unless `key` is peered.
    pub fn kept_exchange(&self, now: Nanos, key: Option<&str>, mut f: impl FnMut(KeptExchange)) {
        let k = match key {
            None => self.unkeyed_peered.as_deref(),
            Some(k) => self.ledgers.get(k),
        };
        if let Some(k) = k {
            let ((base, room), (gave, got)) = (k.rooms(), k.traded());
            f(KeptExchange { period: k.period(), gave, got, base, room, tat: k.tat(now) });
        }
    }

    /// Notes an earlier run's fill of `key` written at `at` (`kept`), if
    /// its period is current at `now` or the one before, keeping the
    /// newest; returns whether it did.
    pub fn carry_fill(&mut self, now: Nanos, key: Option<&str>, at: Nanos, kept: KeptExchange, room: KeyRoom) -> bool {
        let KeptExchange { period, base, room: held, tat, .. } = kept;
        let fill = EarlierFill { at, period, base, room: held, tat };
        self.earlier_mut(now, key, fill.period, room).is_some_and(|e| {
            if e.fill.is_none_or(|f| f.at <= fill.at) {
                e.fill = Some(fill);
            }
            true
        })
    }

    /// Notes an earlier run's grant of `key` written at `at` in `period`,
    /// leaving its share full again at `tat`, keeping the newest.
    pub fn carry_grant(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        at: Nanos,
        (period, tat): (u64, Nanos),
        room: KeyRoom,
    ) {
        if let Some(e) = self.earlier_mut(now, key, period, room) {
            if e.grant.is_none_or(|g| g.0 <= at) {
                e.grant = Some((at, period, tat));
            }
        }
    }

    fn earlier_mut(&mut self, now: Nanos, key: Option<&str>, period: u64, room: KeyRoom) -> Option<&mut Earlier> {
        let k = key.map(Box::<str>::from);
        if period.saturating_add(1) < self.period(now) || (room == KeyRoom::Full && !self.earlier.contains_key(&k)) {
            return None;
        }
        Some(self.earlier.entry(k).or_default())
    }

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
