//! Handing freed heap memory back to the OS after a flood of keys.
//!
//! The core frees a flood's key tables at a slot change, but glibc's
//! allocator keeps small freed chunks (the long keys' names, the maps'
//! smaller tables) in its arenas, so the process's resident size would not
//! come down. When the live keys fall to an eighth of their peak, the loop
//! asks glibc to return what it holds free (`malloc_trim`). That walks the
//! heap, so it runs only after such a fall, never per request. Elsewhere
//! (other allocators, other systems) this does nothing.

use crate::core::{time::NANOS_PER_SEC, Nanos};

/// Below this many live keys a fall is not worth a trim.
const MIN_PEAK: usize = 4096;

/// The least time between two trims: short slots full of keys fall to none
/// at every slot change, and a trim per slot would cost more than it gives.
const MIN_INTERVAL: Nanos = NANOS_PER_SEC;

/// The peak of live keys since the last trim, and when that was.
#[derive(Debug, Default)]
pub struct Trim {
    peak: usize,
    last: Option<Nanos>,
}

impl Trim {
    /// Notes the live keys at `now`, trimming the heap after a large fall.
    /// A fall within `MIN_INTERVAL` of the last trim waits for a later turn.
    pub fn note(&mut self, now: Nanos, live_keys: usize) {
        if live_keys > self.peak {
            self.peak = live_keys;
            return;
        }
        let due = self.last.is_none_or(|last| now.saturating_sub(last) >= MIN_INTERVAL);
        if self.peak >= MIN_PEAK && live_keys * 8 < self.peak && due {
            self.peak = live_keys;
            self.last = Some(now);
            release_free_heap();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_heap() {
    // SAFETY: malloc_trim only returns free memory to the OS; it changes no
    // allocation that is in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap() {}
