//! Room for new keys: whether a take may add a key to a full key table,
//! and the refusal when it may not.
//!
//! Shared by every kind that holds keys (`fixed`, `bucket`, `semaphore`
//! through the locker) and by the peer merge, so none of them depends on a
//! sibling kind for it. It counts nothing itself: the locker decides the
//! room from its live keys and `--max-keys`.

use crate::core::share::Share;

/// What a take needs from the caller when it must add a new key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRoom {
    /// A new key may be added.
    Free,
    /// The key table is full; only existing keys may be counted.
    Full,
}

/// A new key was needed but the key table is full.
#[derive(Debug, PartialEq, Eq)]
pub struct NoRoom;

/// The key room one limit has: keys live in every other limit, and the
/// cap on live keys in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyBudget {
    pub others: usize,
    pub max_keys: usize,
}

impl KeyBudget {
    /// Whether one more key fits when the limit itself holds `own`.
    #[inline]
    pub fn room(self, own: usize) -> KeyRoom {
        if self.others + own < self.max_keys {
            KeyRoom::Free
        } else {
            KeyRoom::Full
        }
    }
}

/// What the locker allows one take besides the count: room for a new key,
/// and this locker's share of what is left when peers are live (see
/// `core::share`; only fixed windows apply it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leeway {
    pub room: KeyRoom,
    pub share: Share,
}

impl Leeway {
    /// A locker on its own with room for new keys.
    pub const ALONE: Leeway = Leeway { room: KeyRoom::Free, share: Share::ALONE };
}

/// Gives back most of a map of keys that a flood left far too large (an
/// eighth full or less), keeping room to double, so that a steady load
/// never reallocates. For the maps a sweep empties, key by key.
pub fn give_back_spare<K: Eq + std::hash::Hash, V>(map: &mut std::collections::HashMap<K, V>) {
    if map.capacity() > 64 && map.len() * 8 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}
