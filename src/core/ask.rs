//! What a caller wants from a rate limit, and the verdict it gets back.
//!
//! Shared by every counting kind (`window`, `bucket`) so that the locker can
//! dispatch without translating. Plain data: no rules live here.

use super::time::Nanos;

/// One checked ask: `cost` permits (0 peeks), all or nothing unless
/// `up_to`, and how long the caller is willing to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// Permits asked for, at most the limit's capacity; 0 peeks without taking.
    pub cost: u32,
    /// Take as many of `cost` as are available (at least one) instead of all or nothing.
    pub up_to: bool,
    /// The longest the caller will wait for a reservation; 0 for go-or-sorry now.
    pub max_wait: Nanos,
}

impl Want {
    /// `cost` permits, now or never.
    pub fn now(cost: u32) -> Want {
        Want { cost, up_to: false, max_wait: 0 }
    }

    /// The fewest permits that make a go: 1 for `up_to`, `cost` otherwise.
    #[inline]
    pub fn need(&self) -> u32 {
        if self.up_to {
            self.cost.min(1)
        } else {
            self.cost
        }
    }

    /// How many permits to grant when `room` are free and at least `need` fit.
    #[inline]
    pub fn grant(&self, room: u32) -> u32 {
        if self.up_to {
            self.cost.min(room)
        } else {
            self.cost
        }
    }
}

/// The answer to one ask: go or sorry, and the numbers a caller needs to
/// plan its next ask. "Sorry" is a value, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the caller may go (after `wait`).
    pub go: bool,
    /// The limit's capacity: max_requests, or a token bucket's burst.
    pub limit: u32,
    /// Permits a new ask could take now, after this one.
    pub remaining: u32,
    /// When not go: nanoseconds until the ask would fit. Zero on go.
    pub retry_after: Nanos,
    /// Nanoseconds until the count is whole again: the current slot's end,
    /// or until a token bucket is full.
    pub reset_after: Nanos,
    /// Permits taken: `cost`, fewer with `up_to`, 0 on sorry or a peek.
    pub granted: u32,
    /// On go: nanoseconds the caller must wait before going (a reservation).
    pub wait: Nanos,
}
