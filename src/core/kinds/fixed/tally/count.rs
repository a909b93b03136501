//! The part of a tally a key table keeps inline: the own count and a mark
//! word. Only bit-packing lives here; the rules are the tally's.

/// One key's count in the current slot, as it sits inline in a key
/// table's slot: this locker's own grants and a mark word. Eight bytes, so
/// that with a 24-byte name a key table slot is 32 bytes, two to a cache
/// line. Everything else a tally needs (what the peers reported) is kept
/// aside, and a locker on its own never has any.
///
/// The mark holds two flags in its low bits and, above them, a value of
/// the key table's own (the generation the slot was written in), which
/// nothing here reads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct InlineCount {
    pub(super) mark: u32,
    pub(super) own: u32,
}

impl InlineCount {
    /// Granted since the last repair publish (see `Sharing::drain_touched` in `core::locker`).
    pub(super) const TOUCHED: u32 = 1;
    /// The peers' part of this tally is kept aside and is this slot's.
    pub(super) const ASIDE: u32 = 2;
    /// The bits of the mark left to the key table.
    pub const STAMP_SHIFT: u32 = 2;

    /// A count of nothing, carrying the key table's `stamp`.
    pub fn stamped(stamp: u32) -> InlineCount {
        InlineCount { mark: stamp << InlineCount::STAMP_SHIFT, own: 0 }
    }

    /// The key table's value, as `stamped` set it.
    #[inline]
    pub fn stamp(self) -> u32 {
        self.mark >> InlineCount::STAMP_SHIFT
    }

    pub(super) fn has(self, flag: u32) -> bool {
        self.mark & flag != 0
    }

    pub(super) fn set(&mut self, flag: u32, on: bool) {
        self.mark = if on { self.mark | flag } else { self.mark & !flag };
    }

    /// Whether the peers' part kept aside belongs to this count.
    pub fn has_aside(self) -> bool {
        self.has(InlineCount::ASIDE)
    }
}
