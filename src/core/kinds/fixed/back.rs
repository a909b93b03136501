//! Permits given back to a fixed window: a refund lowers a key's own
//! count in the current slot (or a reservation's count in the slot ahead
//! it landed in), and a reset clears the key's own counts. What peers
//! reported is never touched: only this locker's own grants are its to
//! give back, and a peer that still counts them only over-counts. Pure
//! arithmetic, like the rest of the window.

use super::FixedWindow;
use crate::core::time::Nanos;

impl FixedWindow {
    /// Gives back up to `n` of `key`'s own permits in the slot a caller
    /// going after `wait` from `now` goes in (the current one for a
    /// refund); returns how many. Call `advance` first.
    pub fn give_back(&mut self, now: Nanos, key: Option<&str>, n: u32, wait: Nanos) -> u32 {
        let slot = self.quota.slot_of(now.saturating_add(wait));
        match slot.checked_sub(self.slot) {
            Some(0) => {
                let tally = match key {
                    None => Some(self.unkeyed.get_mut()),
                    Some(k) => self.keys.get_mut(k),
                };
                tally.map_or(0, |mut t| t.give_back(n))
            }
            Some(index) => {
                let ahead = match key {
                    None => Some(&mut self.unkeyed_ahead),
                    Some(k) => self.ahead.get_mut(k),
                };
                let Some(count) = ahead.and_then(|a| a.get_mut(index as usize - 1)) else { return 0 };
                let back = n.min(*count);
                *count -= back;
                back
            }
            None => 0,
        }
    }

    /// Clears `key`'s own counts, in the current slot and ahead; returns
    /// whether it had any.
    pub fn clear(&mut self, key: Option<&str>) -> bool {
        let ahead = match key {
            None => std::mem::take(&mut self.unkeyed_ahead).iter().any(|&n| n > 0),
            Some(k) => self.ahead.remove(k).is_some_and(|a| a.iter().any(|&n| n > 0)),
        };
        let tally = match key {
            None => Some(self.unkeyed.get_mut()),
            Some(k) => self.keys.get_mut(k),
        };
        let now = tally.map_or(0, |mut t| t.give_back(u32::MAX));
        ahead || now > 0
    }
}
