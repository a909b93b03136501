//! The key table of a fixed window: one tally per key, for the current slot.
//!
//! A locker in front of many callers holds up to millions of live keys, and
//! each decision must find its key among them. A general-purpose map keeps
//! its keys in separate allocations and its control bytes apart from its
//! entries, so one lookup in a large map costs two or three cache misses.
//! This table stores keys of up to `INLINE` bytes inside the slot, next to
//! their count, in 32-byte slots (two to a cache line) with open addressing
//! (linear probing, at most half full): a lookup usually costs one cache
//! line, and a million keys fill 64 MiB rather than the 128 MiB that whole
//! tallies inline would. What only a peered locker needs of a tally (the
//! peers' counts and demand figures) is kept aside, in a list parallel to
//! the slots that a locker on its own never allocates. Longer keys, which
//! are rare, go to an ordinary map.
//!
//! Every key of a window expires at the same instant, so the table never
//! removes one key; it only forgets them all. Each slot carries the
//! generation it was written in, and `clear` starts a new generation in O(1)
//! time instead of touching memory the size of the table. (A tally of a
//! peered locker may own a small allocation aside; an old slot's is reused
//! by the next key written there that needs one, and freed when the table
//! is.)
//!
//! Keys come from clients, so the hash is seeded, with a random seed per
//! table: colliding keys cannot be chosen in advance. It is foldhash rather
//! than std's SipHash because the hash sits on the path of every decision
//! and halves its cost with a million live keys (see `benches/decide.rs`);
//! foldhash resists precomputed collisions but, unlike SipHash, does not
//! claim to resist an attacker who measures timings to recover the seed.
//! Such an attacker could at worst lengthen probes for their own keys'
//! neighbours within one slot; the table is emptied at every slot change.
//! This module stores; it knows nothing of limits or time.

use std::collections::HashMap;
use std::hash::BuildHasher;

use super::tally::{Aside, InlineCount, Peered, Tally, TallyMut, TallyRef};
use crate::core::inline_keys::{new_slots, prefetch_line, probe};

/// The longest key stored inline.
pub const INLINE: usize = 23;

/// The smallest table allocated, in slots.
const MIN_SLOTS: usize = 16;

/// Generations a count's stamp can tell apart (see `InlineCount::stamped`).
const GENERATIONS: u32 = 1 << (32 - InlineCount::STAMP_SHIFT);

/// One key and its count. 32 bytes, aligned, so two share a cache line and
/// none straddles two.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct CountSlot {
    /// The own count, and stamped in it the generation this slot was
    /// written in: the slot is empty unless that equals the table's
    /// current generation.
    count: InlineCount,
    /// The key's length, then its bytes, then zeros: two keys are equal
    /// exactly when their names are, which compares in three words.
    name: InlineName,
}

impl CountSlot {
    #[inline]
    fn is_live(&self, generation: u32) -> bool {
        self.count.stamp() == generation
    }
}

type InlineName = [u8; INLINE + 1];

/// The padded name of an inline key.
fn name_of(key: &str) -> InlineName {
    let mut name = [0; INLINE + 1];
    name[0] = key.len() as u8;
    name[1..=key.len()].copy_from_slice(key.as_bytes());
    name
}

/// Tallies per key, cleared all at once.
#[derive(Debug)]
pub struct KeyTable {
    /// A power of two in length, or empty before the first key.
    slots: Vec<CountSlot>,
    /// The peers' parts of the slots' tallies, by slot index: empty until
    /// a tally first needs one, then as long as `slots`.
    aside: Vec<Option<Box<Peered>>>,
    /// The live generation, below `GENERATIONS`; never 0, which marks a
    /// slot never written.
    generation: u32,
    /// Inline keys of the live generation.
    inline: usize,
    /// Keys longer than `INLINE` bytes.
    long: HashMap<Box<str>, Tally>,
    /// Inline and long keys live when the last slot ended: what the slot
    /// before the current one needed.
    last: (usize, usize),
    /// Seeded afresh for every table.
    hasher: foldhash::quality::RandomState,
}

impl Default for KeyTable {
    fn default() -> Self {
        KeyTable::new()
    }
}

impl KeyTable {
    /// An empty table; it allocates with its first key.
    pub fn new() -> KeyTable {
        KeyTable {
            slots: Vec::new(),
            aside: Vec::new(),
            generation: 1,
            inline: 0,
            long: HashMap::new(),
            last: (0, 0),
            hasher: Default::default(),
        }
    }

    /// Live keys.
    #[inline]
    pub fn len(&self) -> usize {
        self.inline + self.long.len()
    }

    /// Whether there are no live keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every key, and gives back memory no longer needed.
    ///
    /// The table and the long keys' map are kept for the next slot only
    /// when both the slot that ended and the one before it filled at least
    /// an eighth of them: a steady load never reallocates, while a burst of
    /// new keys (a flood) returns its memory at the first slot change after
    /// it, and a flood that lasted several slots at the change after the
    /// first slot without it.
    pub fn clear(&mut self) {
        let (inline, long) = (self.inline.min(self.last.0), self.long.len().min(self.last.1));
        self.last = (self.inline, self.long.len());
        if self.slots.len() > MIN_SLOTS && inline * 8 < self.slots.len() {
            self.slots = Vec::new();
            self.aside = Vec::new();
        }
        if self.long.capacity() > MIN_SLOTS && long * 8 < self.long.capacity() {
            self.long = HashMap::new();
        }
        self.inline = 0;
        self.long.clear();
        self.generation += 1;
        if self.generation == GENERATIONS {
            // After 2^30 clears, generation numbers come round again: wipe
            // the slots once so that no old slot looks live.
            self.slots.fill(CountSlot::default());
            self.aside = Vec::new();
            self.generation = 1;
        }
    }

    /// The tally of `key`, if it is live.
    pub fn get(&self, key: &str) -> Option<TallyRef<'_>> {
        if key.len() > INLINE {
            return self.long.get(key).map(Tally::get);
        }
        self.find(key).ok().map(|i| self.read(i))
    }

    /// The tally of `key`, if it is live, to change.
    pub fn get_mut(&mut self, key: &str) -> Option<TallyMut<'_>> {
        if key.len() > INLINE {
            return self.long.get_mut(key).map(Tally::get_mut);
        }
        match self.find(key) {
            Ok(i) => Some(self.change(i)),
            Err(_) => None,
        }
    }

    /// The tally in slot `i`, to read.
    #[inline]
    fn read(&self, i: usize) -> TallyRef<'_> {
        TallyRef::from_parts(self.slots[i].count, self.aside.get(i).and_then(|p| p.as_deref()))
    }

    /// The tally in slot `i`, to change.
    #[inline]
    fn change(&mut self, i: usize) -> TallyMut<'_> {
        let len = self.slots.len();
        TallyMut::from_parts(&mut self.slots[i].count, Aside::Table { list: &mut self.aside, at: i, len })
    }

    /// Whether `key` is live.
    #[inline]
    pub fn contains_key(&self, key: &str) -> bool {
        if key.len() > INLINE {
            return self.long.contains_key(key);
        }
        self.find(key).is_ok()
    }

    /// The tally of `key`, added empty if it is not live.
    #[inline]
    pub fn get_or_insert(&mut self, key: &str) -> TallyMut<'_> {
        if key.len() > INLINE {
            return self.long.entry(key.into()).or_default().get_mut();
        }
        if (self.inline + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.slots[i] = CountSlot { count: InlineCount::stamped(self.generation), name: name_of(key) };
                self.inline += 1;
                i
            }
        };
        self.change(i)
    }

    /// Starts loading the slot where `key`'s search begins into the cache,
    /// without waiting for it. A lookup in a large table misses the cache;
    /// when many keys are known at once (a batch of asks), prefetching all
    /// their slots first lets those misses overlap instead of each lookup
    /// waiting for its own in turn. A hint only: it changes nothing.
    #[inline]
    pub fn prefetch(&self, key: &str) {
        if key.len() > INLINE || self.slots.is_empty() {
            return;
        }
        let i = self.hasher.hash_one(key) as usize & (self.slots.len() - 1);
        prefetch_line(&self.slots[i]);
    }

    /// Sets the tally of `key`, adding the key if it is not live.
    pub fn insert(&mut self, key: &str, tally: Tally) {
        self.get_or_insert(key).set(tally);
    }

    /// Every live key with its tally, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, TallyRef<'_>)> {
        let generation = self.generation;
        let live = self.slots.iter().enumerate().filter(move |(_, s)| s.is_live(generation));
        let inline = live.map(|(i, s)| (key_of(&s.name), self.read(i)));
        inline.chain(self.long.iter().map(|(k, t)| (&**k, t.get())))
    }

    /// Calls `f` with every live key and its tally, to change, in no
    /// particular order. (A closure rather than an iterator: the tallies
    /// in the slots share the one list of their peers' parts.)
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&str, TallyMut<'_>)) {
        let (generation, len) = (self.generation, self.slots.len());
        for (i, slot) in self.slots.iter_mut().enumerate().filter(|(_, s)| s.is_live(generation)) {
            let aside = Aside::Table { list: &mut self.aside, at: i, len };
            f(key_of(&slot.name), TallyMut::from_parts(&mut slot.count, aside));
        }
        for (k, t) in self.long.iter_mut() {
            f(k, t.get_mut());
        }
    }

    /// Where `key` is (`Ok`), or the empty slot where it would go (`Err`).
    #[inline]
    fn find(&self, key: &str) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(0);
        }
        let name = name_of(key);
        let home = self.hasher.hash_one(key) as usize & (self.slots.len() - 1);
        probe(self.slots.len(), home, |i| {
            let slot = &self.slots[i];
            slot.is_live(self.generation).then(|| slot.name == name)
        })
    }

    /// Doubles the table, moving the live keys over, with their peers'
    /// parts if any.
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, new_slots(size));
        let mut old_aside = std::mem::take(&mut self.aside);
        if !old_aside.is_empty() {
            self.aside.resize_with(size, || None);
        }
        for (j, slot) in old.into_iter().enumerate().filter(|(_, s)| s.is_live(self.generation)) {
            let Err(i) = self.find(key_of(&slot.name)) else { unreachable!("keys are unique") };
            self.slots[i] = slot;
            if slot.count.has_aside() {
                self.aside[i] = old_aside[j].take();
            }
        }
    }

    /// Bytes held by the table itself and its list of peers' parts (not
    /// counting the long keys' map, nor the parts themselves).
    pub fn slot_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<CountSlot>()
            + self.aside.capacity() * std::mem::size_of::<Option<Box<Peered>>>()
    }

    /// Bytes held on the heap: the table, the long keys' map and their
    /// names (not the small allocations of peered tallies). Walks the long
    /// keys: for stats, not for the request path.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Box<str>, Tally)>() + 1;
        self.slot_bytes() + self.long.capacity() * entry + self.long.keys().map(|k| k.len()).sum::<usize>()
    }

    /// Whether a slot change would give nothing back: no live keys and no
    /// more than the smallest table.
    pub fn is_idle(&self) -> bool {
        self.is_empty() && self.slots.len() <= MIN_SLOTS && self.long.capacity() <= MIN_SLOTS
    }
}

/// The key an inline name holds.
fn key_of(name: &InlineName) -> &str {
    std::str::from_utf8(&name[1..=usize::from(name[0])]).expect("stored from a str")
}

#[cfg(test)]
mod tests;
