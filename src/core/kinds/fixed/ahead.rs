//! Reservations of a fixed window: asks that may wait, counted against the
//! first slot after the current one they fit in, and brought into the
//! current slot's tallies when their slot begins. Only keys holding one
//! live in the window's `ahead` map, so the common ask never reaches this
//! module. No clock: the caller brings `now`.

use std::collections::VecDeque;

use super::FixedWindow;
use crate::core::ask::{Verdict, Want};
use crate::core::kinds::fixed::tally::{Tally, TallyRef};
use crate::core::room::{KeyRoom, NoRoom};
use crate::core::time::Nanos;

/// Where an ask lands: `index` slots after the current one, `granted` permits.
#[derive(Clone, Copy)]
pub(super) struct Landing {
    pub(super) index: usize,
    pub(super) granted: u32,
}

impl FixedWindow {
    /// A peek, or an ask that can only go in a later slot: the key holds
    /// reservations, or the ask does not fit now and may wait. Reserves
    /// and never grants in the current slot: an ask that fits now, with
    /// nothing queued before it, is `take_now`'s.
    pub(super) fn take_later(
        &mut self,
        now: Nanos,
        key: Option<&str>,
        want: Want,
        room: KeyRoom,
    ) -> Result<Verdict, NoRoom> {
        let max = self.quota.max_requests();
        let (current, ahead) = self.current_and_ahead(key);
        let queued = ahead.map_or(0, VecDeque::len);
        let free_now = if queued == 0 { max - current.min(max) } else { 0 };
        let reset_after = self.slot_end.saturating_sub(now);
        let sorry = Verdict::sorry(max, free_now, 0, reset_after);
        if want.cost == 0 {
            // A peek: would one permit go now, and if not, when?
            let one = plan(current, ahead, max, Want::now(1));
            return Ok(Verdict { go: one.index == 0, retry_after: self.wait_for(now, one.index), ..sorry });
        }
        let plan = plan(current, ahead, max, want);
        let wait = self.wait_for(now, plan.index);
        if wait > want.max_wait {
            return Ok(Verdict { retry_after: wait, ..sorry });
        }
        // With nothing queued, an ask lands in the current slot only if it
        // fits there, and then `take_now` has served it; with something
        // queued, it lands at or after the last reservation.
        debug_assert!(plan.index > 0, "a grant in the current slot is take_now's");
        self.reserve(key, &plan, room)?;
        Ok(Verdict { go: true, granted: plan.granted, wait, remaining: 0, ..sorry })
    }

    /// Whether `key` holds reservations in the slots after the current one.
    #[inline]
    pub(super) fn has_reservations(&self, key: Option<&str>) -> bool {
        match key {
            None => !self.unkeyed_ahead.is_empty(),
            Some(k) => !self.ahead.is_empty() && self.ahead.contains_key(k),
        }
    }

    /// Brings reserved counts forward by `steps` slots into the current one.
    pub(super) fn roll_reservations(&mut self, steps: u64) {
        for (key, mut counts) in std::mem::take(&mut self.ahead) {
            let current = roll(&mut counts, steps);
            if current > 0 || !counts.is_empty() {
                self.keys.insert(&key, Tally::reserved(current));
            }
            if !counts.is_empty() {
                self.ahead.insert(key, counts);
            }
        }
    }

    /// Nanoseconds from `now` until the slot `index` after the current one starts.
    pub(super) fn wait_for(&self, now: Nanos, index: usize) -> Nanos {
        match index {
            0 => 0,
            i => self.quota.slot_end(self.slot + i as u64 - 1).saturating_sub(now),
        }
    }

    /// The key's count in the current slot, all lockers together, and its
    /// own reservations in the slots after it.
    pub(super) fn current_and_ahead(&self, key: Option<&str>) -> (u32, Option<&VecDeque<u32>>) {
        match key {
            None => (self.unkeyed.get().total(), Some(&self.unkeyed_ahead).filter(|a| !a.is_empty())),
            // The second lookup only happens while some key holds a reservation.
            Some(k) => (
                self.keys.get(k).map_or(0, TallyRef::total),
                if self.ahead.is_empty() { None } else { self.ahead.get(k) },
            ),
        }
    }

    /// Reserves `plan.granted` permits `plan.index` (at least 1) slots after
    /// the current one.
    pub(super) fn reserve(&mut self, key: Option<&str>, plan: &Landing, room: KeyRoom) -> Result<(), NoRoom> {
        let Landing { index, granted: n } = *plan;
        // The key stays live while it holds a reservation.
        self.tally_mut(key, room)?;
        let ahead = match key {
            None => &mut self.unkeyed_ahead,
            Some(k) => self.ahead.entry(k.into()).or_default(),
        };
        if ahead.len() < index {
            ahead.resize(index, 0);
        }
        ahead[index - 1] += n;
        Ok(())
    }
}

/// Where `want` lands for a key with `current` permits taken and `ahead`
/// reserved: in the last slot holding a reservation if it fits there, else in
/// the slot after it, which is empty (cost never exceeds max).
pub(super) fn plan(current: u32, ahead: Option<&VecDeque<u32>>, max: u32, want: Want) -> Landing {
    let last = ahead.map_or(0, VecDeque::len);
    let taken = match ahead.and_then(VecDeque::back) {
        Some(&n) => n,
        None => current,
    };
    // Peers' counts can push a total past max; nothing is left then.
    let room = max.saturating_sub(taken);
    if room >= want.need() {
        Landing { index: last, granted: want.grant(room) }
    } else {
        Landing { index: last + 1, granted: want.grant(max) }
    }
}

/// Moves `counts` (of the slots after the current one) forward by `steps`
/// slots and returns the count of the new current slot.
pub(super) fn roll(counts: &mut VecDeque<u32>, steps: u64) -> u32 {
    let steps = usize::try_from(steps).unwrap_or(usize::MAX);
    if steps > counts.len() {
        counts.clear();
        return 0;
    }
    counts.drain(..steps - 1);
    counts.pop_front().unwrap_or(0)
}
