//! When to hand freed heap memory back to the system after a flood of keys.
//!
//! The core frees a flood's key tables at a slot change, but glibc's
//! allocator keeps small freed chunks (the long keys' names, the maps'
//! smaller tables) in its arenas, so the process's resident size would not
//! come down. When the live keys fall to an eighth of their peak, the loop
//! is asked to return what the heap holds free (`Io::release_free_heap`,
//! `malloc_trim` in the daemon). That walks the heap, so it is asked only
//! after such a fall, never per request. This decides when; it reads no
//! clock and calls nothing.

use crate::core::{time::NANOS_PER_SEC, Nanos};

/// Below this many live keys a fall is not worth a trim.
const MIN_PEAK: usize = 4096;

/// The least time between two trims: short slots full of keys fall to none
/// at every slot change, and a trim per slot would cost more than it gives.
const MIN_INTERVAL: Nanos = NANOS_PER_SEC;

/// The peak of live keys since the last trim, and when that was.
#[derive(Debug, Default)]
pub(super) struct Trim {
    peak: usize,
    last: Option<Nanos>,
}

impl Trim {
    /// Notes the live keys at `now`; whether the heap is to be trimmed now,
    /// after a large fall. A fall within `MIN_INTERVAL` of the last trim
    /// waits for a later turn.
    pub(super) fn note(&mut self, now: Nanos, live_keys: usize) -> bool {
        if live_keys > self.peak {
            self.peak = live_keys;
            return false;
        }
        let due = self.last.is_none_or(|last| now.saturating_sub(last) >= MIN_INTERVAL);
        if self.peak >= MIN_PEAK && live_keys * 8 < self.peak && due {
            self.peak = live_keys;
            self.last = Some(now);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fall_to_an_eighth_of_a_large_peak_trims_once_a_second_at_most() {
        let mut t = Trim::default();
        assert!(!t.note(0, MIN_PEAK));
        assert!(!t.note(1, MIN_PEAK / 8), "an eighth is not below an eighth");
        assert!(t.note(2, MIN_PEAK / 8 - 1));
        assert!(!t.note(3, 8 * MIN_PEAK));
        assert!(!t.note(4, 0), "within a second of the last trim");
        assert!(t.note(2 + MIN_INTERVAL, 0));
        let mut small = Trim::default();
        assert!(!small.note(0, MIN_PEAK - 1) && !small.note(1, 0), "a small peak is not worth a trim");
    }
}
