//! The daemon's one clock: monotonic, anchored to the wall clock once.
//!
//! Slots are numbered from the Unix epoch so that lockers on different hosts
//! agree on boundaries, which needs wall-clock time. Reading the wall clock on
//! every request would let a clock step (NTP, an operator) move time back and
//! open a slot twice, so the wall clock is read once at start-up and the
//! monotonic clock measures everything after it.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::core::Nanos;

/// Wall-clock time that never steps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_wall: Nanos,
    anchor: Instant,
}

impl Clock {
    /// Anchors a new clock to the wall clock now.
    pub fn start() -> Clock {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Clock { anchor_wall: wall.as_nanos() as Nanos, anchor: Instant::now() }
    }

    /// Anchors a new clock to the wall clock now, or to `floor` if the wall
    /// clock is behind it (it was stepped back since `floor` was read).
    /// Returns the clock and how far it was behind.
    pub fn start_not_before(floor: Nanos) -> (Clock, Nanos) {
        let clock = Clock::start();
        let behind = floor.saturating_sub(clock.anchor_wall);
        (Clock { anchor_wall: clock.anchor_wall + behind, ..clock }, behind)
    }

    /// Nanoseconds since the Unix epoch, by the anchored monotonic clock.
    pub fn now(&self) -> Nanos {
        self.anchor_wall + self.anchor.elapsed().as_nanos() as Nanos
    }
}
