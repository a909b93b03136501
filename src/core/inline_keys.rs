//! A map from keys to one small value each, laid out for millions of live
//! keys: the key inline beside its value in 32-byte slots, found by open
//! addressing. The token bucket keeps its keys here; the fixed window's
//! table (`kinds::fixed::keys`) is the same layout with a generation stamp
//! instead of removal, and shares the cache and page helpers below.
//!
//! A general-purpose map keeps each key in its own allocation and its
//! control bytes apart from its entries, so one lookup in a large map costs
//! two or three cache misses. Here a key of up to `INLINE` bytes sits in
//! the slot with its value (two slots to a cache line, linear probing, at
//! most half full): a lookup usually costs one cache line, and a batch can
//! prefetch its keys' lines before it looks them up. Longer keys, which are
//! rare, go to an ordinary map.
//!
//! Keys are removed by `retain`, which closes each gap by shifting the
//! probe run behind it back (no tombstones, so lookups never slow down
//! with age), and gives memory back when a flood has left the table far
//! too large. The hash is seeded per table (see `kinds::fixed::keys` for
//! why foldhash). This module stores; it knows nothing of limits or time.

use std::collections::HashMap;
use std::hash::BuildHasher;

/// The longest key stored inline.
pub const INLINE: usize = 23;

/// The smallest table allocated, in slots.
const MIN_SLOTS: usize = 16;

/// The key's length plus one, then its bytes, then zeros; all zeros is an
/// empty slot. Two keys are equal exactly when their names are.
type Name = [u8; INLINE + 1];

/// One key and its value; 32 bytes for an 8-byte value, 64 for a value of
/// up to 40 bytes, aligned so that no slot straddles two cache lines.
#[derive(Debug, Clone, Default)]
#[repr(C, align(32))]
struct Slot<V> {
    name: Name,
    value: V,
}

impl<V> Slot<V> {
    #[inline]
    fn is_empty(&self) -> bool {
        self.name[0] == 0
    }
}

fn name_of(key: &str) -> Name {
    let mut name = [0; INLINE + 1];
    name[0] = key.len() as u8 + 1;
    name[1..=key.len()].copy_from_slice(key.as_bytes());
    name
}

fn key_of(name: &Name) -> &str {
    std::str::from_utf8(&name[1..usize::from(name[0])]).expect("stored from a str")
}

/// Values by key, inline where the key is short.
#[derive(Debug, Clone)]
pub struct InlineKeys<V> {
    /// A power of two in length, or empty before the first key.
    slots: Vec<Slot<V>>,
    /// Keys in `slots`.
    inline: usize,
    /// Keys longer than `INLINE` bytes.
    long: HashMap<Box<str>, V>,
    /// Seeded afresh for every table.
    hasher: foldhash::quality::RandomState,
}

impl<V: Default> Default for InlineKeys<V> {
    fn default() -> Self {
        InlineKeys::new()
    }
}

impl<V: Default> InlineKeys<V> {
    /// An empty map; it allocates with its first key.
    pub fn new() -> InlineKeys<V> {
        InlineKeys { slots: Vec::new(), inline: 0, long: HashMap::new(), hasher: Default::default() }
    }

    /// Keys held.
    #[inline]
    pub fn len(&self) -> usize {
        self.inline + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `key`'s value, if it is held.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&V> {
        if key.len() > INLINE {
            return self.long.get(key);
        }
        self.find(key).ok().map(|i| &self.slots[i].value)
    }

    /// `key`'s value, if it is held, to change.
    #[inline]
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        if key.len() > INLINE {
            return self.long.get_mut(key);
        }
        self.find(key).ok().map(|i| &mut self.slots[i].value)
    }

    /// Whether `key` is held.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// `key`'s value, added as the default if it is not held.
    #[inline]
    pub fn get_or_insert(&mut self, key: &str) -> &mut V {
        if key.len() > INLINE {
            return self.long.entry(key.into()).or_default();
        }
        if (self.inline + 1) * 2 > self.slots.len() {
            self.resize((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.slots[i] = Slot { name: name_of(key), value: V::default() };
                self.inline += 1;
                i
            }
        };
        &mut self.slots[i].value
    }

    /// Sets `key`'s value, adding the key if it is not held.
    pub fn insert(&mut self, key: &str, value: V) {
        *self.get_or_insert(key) = value;
    }

    /// Starts loading the line where `key`'s search begins into the cache,
    /// without waiting for it (see `prefetch_line`). A hint: it changes
    /// nothing.
    #[inline]
    pub fn prefetch(&self, key: &str) {
        if key.len() > INLINE || self.slots.is_empty() {
            return;
        }
        prefetch_line(&self.slots[self.home(key)]);
    }

    /// Every key with its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        let inline = self.slots.iter().filter(|s| !s.is_empty()).map(|s| (key_of(&s.name), &s.value));
        inline.chain(self.long.iter().map(|(k, v)| (&**k, v)))
    }

    /// Calls `f` with every key and its value, to change, in no particular
    /// order.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&str, &mut V)) {
        for slot in self.slots.iter_mut().filter(|s| !s.is_empty()) {
            f(key_of(&slot.name), &mut slot.value);
        }
        for (k, v) in self.long.iter_mut() {
            f(k, v);
        }
    }

    /// Keeps only the keys for which `keep` is true. `keep` sees every key
    /// at least once and may see a key it keeps twice (one moved back into
    /// a gap already passed), so it must give the same answer again. Gives
    /// memory back when the keys left fill an eighth of the table or less.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut V) -> bool) {
        self.long.retain(|k, v| keep(k, v));
        if self.long.capacity() > 64 && self.long.len() * 8 < self.long.capacity() {
            self.long.shrink_to(self.long.len() * 2);
        }
        let mut i = 0;
        while i < self.slots.len() {
            let slot = &mut self.slots[i];
            if slot.is_empty() || keep(key_of(&slot.name), &mut slot.value) {
                i += 1;
            } else {
                // The gap is filled from behind: look at `i` again.
                self.remove_at(i);
            }
        }
        if self.inline == 0 {
            self.slots = Vec::new();
        } else if self.slots.len() > MIN_SLOTS && self.inline * 8 <= self.slots.len() {
            self.resize((self.inline * 4).next_power_of_two().max(MIN_SLOTS));
        }
    }

    /// Bytes held on the heap: the slots, the long keys' map and their
    /// names. Walks the long keys: for stats, not for the request path.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Box<str>, V)>() + 1;
        self.slots.capacity() * std::mem::size_of::<Slot<V>>()
            + self.long.capacity() * entry
            + self.long.keys().map(|k| k.len()).sum::<usize>()
    }

    /// The slot where `key`'s search begins.
    #[inline]
    fn home(&self, key: &str) -> usize {
        self.hasher.hash_one(key) as usize & (self.slots.len() - 1)
    }

    /// Where `key` is (`Ok`), or the empty slot where it would go (`Err`).
    #[inline]
    fn find(&self, key: &str) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(0);
        }
        let name = name_of(key);
        probe(self.slots.len(), self.home(key), |i| {
            let slot = &self.slots[i];
            (!slot.is_empty()).then(|| slot.name == name)
        })
    }

    /// Empties slot `hole` and moves back every key of the probe run
    /// behind it whose search begins at or before the gap, so that every
    /// key stays reachable from its home without a tombstone.
    fn remove_at(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            if self.slots[j].is_empty() {
                break;
            }
            let home = self.home(key_of(&self.slots[j].name));
            // Slot j stays when its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = std::mem::take(&mut self.slots[j]);
                hole = j;
            }
        }
        self.slots[hole] = Slot::default();
        self.inline -= 1;
    }

    /// Moves every key into a table of `size` slots.
    fn resize(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.slots, new_slots(size));
        for slot in old.into_iter().filter(|s| !s.is_empty()) {
            let Err(i) = self.find(key_of(&slot.name)) else { unreachable!("keys are unique") };
            self.slots[i] = slot;
        }
    }
}

/// Walks the probe run of a table of `len` slots (a power of two, at most
/// half full, so the walk ends) from slot `home`: `look(i)` says whether
/// slot `i` is empty (`None`) or holds the key sought (`Some(true)`).
/// Returns where the key is (`Ok`) or the empty slot where it would go
/// (`Err`).
#[inline]
pub fn probe(len: usize, home: usize, look: impl Fn(usize) -> Option<bool>) -> Result<usize, usize> {
    let mask = len - 1;
    let mut i = home;
    loop {
        match look(i) {
            None => return Err(i),
            Some(true) => return Ok(i),
            Some(false) => i = (i + 1) & mask,
        }
    }
}

/// Asks the CPU to bring the cache line holding `place` in, where it can.
/// A lookup in a large table misses the cache; when many keys are known
/// at once (a batch of asks), prefetching all their lines first lets those
/// misses overlap instead of each lookup waiting for its own in turn.
#[inline]
pub fn prefetch_line<T>(place: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint to the cache: it never faults and never
    // reads or writes memory on the program's behalf, and `place` is a live
    // reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((place as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = place;
}

/// `size` default slots. A large table is read at random, one line per
/// lookup, so with 4 KiB pages nearly every lookup also misses the TLB; on
/// Linux the kernel is asked to back it with huge pages where it can.
pub fn new_slots<T: Default>(size: usize) -> Vec<T> {
    let mut slots = Vec::with_capacity(size);
    #[cfg(target_os = "linux")]
    hint_huge_pages(&slots);
    slots.resize_with(size, T::default);
    slots
}

/// Advises the kernel (madvise MADV_HUGEPAGE) to use huge pages for the
/// whole 2 MiB pages inside `slots`' allocation, before it is touched. A
/// hint only: the kernel may ignore it, and nothing else changes.
#[cfg(target_os = "linux")]
fn hint_huge_pages<T>(slots: &Vec<T>) {
    const HUGE: usize = 2 << 20;
    let bytes = slots.capacity() * std::mem::size_of::<T>();
    if bytes < 2 * HUGE {
        return;
    }
    let start = slots.as_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE);
    let len = (start + bytes - aligned) / HUGE * HUGE;
    // SAFETY: the range lies within the vector's own allocation, and
    // MADV_HUGEPAGE changes how the memory is backed, never its contents.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(test)]
mod tests;
