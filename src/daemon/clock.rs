//! The daemon's one clock: monotonic, anchored to the wall clock once.
//!
//! Slots are numbered from the Unix epoch so that lockers on different hosts
//! agree on boundaries, which needs wall-clock time. Reading the wall clock on
//! every request would let a clock step (NTP, an operator) move time back and
//! open a slot twice, so the wall clock is read once at start-up and the
//! monotonic clock measures everything after it.
//!
//! Across restarts on one boot, the boot-time clock (which counts through
//! suspend and never steps) tells how much time really passed: `BootStamp` is
//! what the wall clock read at boot by this run's reckoning, and a later
//! run that reckons differently knows the wall clock was stepped between
//! them, and by how much.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::core::Nanos;

/// Wall-clock time that never steps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_wall: Nanos,
    /// The monotonic clock's reading at `anchor_wall`.
    anchor: Nanos,
}

impl Clock {
    /// Anchors a new clock to the wall clock now.
    pub fn start() -> Clock {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Clock { anchor_wall: wall.as_nanos() as Nanos, anchor: monotonic() }
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
    #[inline]
    pub fn now(&self) -> Nanos {
        self.anchor_wall + monotonic().saturating_sub(self.anchor)
    }
}

/// This boot, and what the wall clock read at it by this run's reckoning
/// (the wall clock now less the boot-time clock now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootStamp {
    /// The kernel's id of this boot.
    pub id: u128,
    /// The wall clock at boot, in nanoseconds since the Unix epoch.
    pub wall_at_boot: Nanos,
}

impl BootStamp {
    /// This boot, read now; `None` where the kernel does not say (not
    /// Linux, no /proc).
    pub fn now() -> Option<BootStamp> {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let id = u128::from_str_radix(&text.trim().replace('-', ""), 16).ok()?;
        Some(BootStamp { id, wall_at_boot: wall_at_boot()? })
    }

    /// How far the wall clock was stepped between `earlier`'s run and this
    /// one, in nanoseconds (ahead when positive): `None` on another boot,
    /// where nothing tells.
    pub fn step_since(&self, earlier: &BootStamp) -> Option<i64> {
        (self.id == earlier.id).then(|| (i128::from(self.wall_at_boot) - i128::from(earlier.wall_at_boot)) as i64)
    }
}

/// The wall clock less the boot-time clock, read so that the two readings
/// are as close as they can be: the boot-time clock between two readings
/// of the wall clock, the pair least far apart of a few tries (a thread
/// preempted between two readings would otherwise look like a step).
fn wall_at_boot() -> Option<Nanos> {
    let mut best: Option<(Nanos, Nanos)> = None;
    for _ in 0..8 {
        let before = wall()?;
        let since_boot = boot_time()?;
        let gap = wall()?.saturating_sub(before);
        if best.is_none_or(|(g, _)| gap < g) {
            best = Some((gap, (before + gap / 2).saturating_sub(since_boot)));
        }
        if gap < 20_000 {
            break;
        }
    }
    best.map(|(_, at)| at)
}

/// The monotonic clock (the one `Instant` reads), in nanoseconds. Read
/// directly: the loop reads it once per request, and `Instant::elapsed`'s
/// checked subtraction and `Duration` arithmetic cost as much again as the
/// reading itself.
#[inline]
fn monotonic() -> Nanos {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call, and
    // CLOCK_MONOTONIC exists on every Linux: the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as Nanos * 1_000_000_000 + ts.tv_nsec as Nanos
}

/// The boot-time clock: nanoseconds since boot, suspend included.
pub(super) fn boot_time() -> Option<Nanos> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as Nanos * 1_000_000_000 + ts.tv_nsec as Nanos)
}

/// The wall clock now, in nanoseconds since the Unix epoch; `None` before
/// it (a clock set wrong).
pub(super) fn wall() -> Option<Nanos> {
    SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_nanos() as Nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_told_only_on_the_same_boot() {
        let earlier = BootStamp { id: 7, wall_at_boot: 1_000 };
        assert_eq!(BootStamp { id: 7, wall_at_boot: 4_000 }.step_since(&earlier), Some(3_000), "stepped ahead");
        assert_eq!(BootStamp { id: 7, wall_at_boot: 400 }.step_since(&earlier), Some(-600), "stepped back");
        assert_eq!(BootStamp { id: 8, wall_at_boot: 4_000 }.step_since(&earlier), None, "another boot");
    }

    #[test]
    fn this_boot_reads_the_same_twice_within_a_millisecond() {
        // Within the floor below which the keeper takes a step for the
        // error of measuring it.
        let (Some(a), Some(b)) = (BootStamp::now(), BootStamp::now()) else { return };
        assert_eq!(a.id, b.id);
        assert!(b.step_since(&a).unwrap().abs() < 1_000_000, "{a:?} {b:?}");
    }
}
