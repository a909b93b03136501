//! The loop's watch on its own clock: how long the loop was away.
//!
//! A loop that reads the clock at least every tick and finds much more
//! time gone was not running (SIGSTOP, a frozen VM), and the service hears
//! of it (`Note::Paused`) before the reading is used for anything, so no
//! request is decided on the view from before the pause. That comparison
//! reads only the monotonic clock, once per request.
//!
//! The monotonic clock does not see every pause: a suspended host, or a
//! paused or migrated VM whose kvmclock stopped, resumes with it where it
//! stopped. So once per loop turn and per inner batch of requests (not per
//! request: the plain path reads one clock), the watch also compares it
//! with the boot-time clock (which counts through suspend) and the wall
//! clock (which the host sets right after a VM's pause: chrony, the guest
//! agent). Real time that passed unseen, past `PAUSE_NS`, is handled as
//! SIGSTOP is: the loop's clock moves ahead by as much, as if it had seen
//! it (so a lease held before the pause has run out by it, as it has by
//! the heir's clock), and the service hears of the pause. A wall clock
//! stepped back adds nothing. One stepped ahead past `PAUSE_NS` cannot be
//! told from a paused VM set right: a peered locker counts it as a pause,
//! the safe side (it learns the counts again and follows the group's
//! clock); a lone locker, which holds no lease, follows only what the
//! boot-time clock saw, so a step never cuts its slot short (see
//! `Watch::checked`). A thread
//! preempted between two readings cannot look like a pause: the readings
//! are bracketed by the monotonic clock, so what is measured is only ever
//! less than what passed unseen.
//!
//! What stays unseen: requests decided after a pause and before the next
//! cross-check (at most one inner batch, `INNER_BATCH` requests and a
//! batch of peer messages), and a pause that stopped the wall clock too,
//! until the host sets it right (nothing inside such a VM can tell sooner).
//! No message leaves before the cross-check that follows its batch.

use tracing::{info, warn};

use super::clock::Clock;
use crate::core::time::NANOS_PER_MS;
use crate::core::Nanos;
use crate::service::{step, Note, Service};

/// What the loop's clock reads: the daemon's `Clock`, or a test's.
pub trait LoopClock: Send {
    /// The time now, in nanoseconds since the Unix epoch; never goes back.
    fn now(&self) -> Nanos;

    /// The boot-time clock and the wall clock now, in nanoseconds, to
    /// check `now` against (see `Unseen`): `None` for a clock that has no
    /// other to be checked against.
    fn others(&self) -> Option<Others> {
        None
    }
}

/// The clocks `LoopClock::now` is checked against, read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Others {
    /// Nanoseconds since boot, suspend included.
    pub boot: Nanos,
    /// Nanoseconds since the Unix epoch, as the host's clock says now.
    pub wall: Nanos,
}

impl LoopClock for Clock {
    #[inline]
    fn now(&self) -> Nanos {
        Clock::now(self)
    }

    fn others(&self) -> Option<Others> {
        Some(Others { boot: super::clock::boot_time()?, wall: super::clock::wall()? })
    }
}

impl LoopClock for Box<dyn LoopClock> {
    fn now(&self) -> Nanos {
        (**self).now()
    }

    fn others(&self) -> Option<Others> {
        (**self).others()
    }
}

/// Below this, real time measured unseen is not confirmed by a second
/// reading of the loop's clock: it is the few nanoseconds between two
/// readings, not a pause. Far below any pause that matters.
const CONFIRM_ABOVE: Nanos = NANOS_PER_MS;

/// Real time that passed unseen by the loop's clock between two
/// cross-checks (see the module header).
#[derive(Debug, Default)]
pub struct Unseen {
    /// The last cross-check: the loop's clock read before the others, and
    /// the others.
    last: Option<(Nanos, Others)>,
}

impl Unseen {
    /// Real time since the last call that the loop's clock did not see,
    /// given the loop's clock at `before` read just before `others`, and
    /// `again` to read it once more after them. A lower bound: the boot
    /// and wall clocks gained at most what really passed between the two
    /// readings of `others` (a wall clock stepped back gains less, or
    /// nothing), and the loop's clock between `before` of the last call
    /// and a reading after `others` now saw at least what it saw of that.
    /// `again` is read only when the bound without it is worth confirming.
    pub fn since_last(&mut self, before: Nanos, others: Others, again: impl FnOnce() -> Nanos) -> Gap {
        let Some((last, was)) = self.last.replace((before, others)) else { return Gap::default() };
        let boot = others.boot.saturating_sub(was.boot);
        let any = boot.max(others.wall.saturating_sub(was.wall));
        let unseen = |gained: Nanos, now: Nanos| gained.saturating_sub(now.saturating_sub(last));
        if unseen(any, before) <= CONFIRM_ABOVE {
            return Gap::default();
        }
        let now = again().max(before);
        Gap { boot: unseen(boot, now), any: unseen(any, now) }
    }
}

/// Real time the loop's clock did not see, by the clocks that saw it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// By the boot-time clock, which never steps: time that really passed
    /// (a suspended host).
    pub boot: Nanos,
    /// By the boot-time clock or the wall clock, whichever gained more: a
    /// paused VM whose host set its wall clock right, or a wall clock
    /// stepped ahead, which no reading can tell apart.
    pub any: Nanos,
}

/// A loop turn longer than this is reported to the service as a pause; the
/// service decides whether it was long enough to matter.
pub const PAUSE_NS: u64 = 200 * NANOS_PER_MS;

/// The clock as the loop reads it. Each reading also says how long it has
/// been since the previous one (see the module header).
pub struct Watch {
    clock: Box<dyn LoopClock>,
    last: Nanos,
    unseen: Unseen,
    /// Whether the clock follows what only the wall clock saw (see
    /// `checked`).
    follow_wall: bool,
    /// Real time the clock did not see, past `PAUSE_NS` each time: added
    /// to every reading.
    ahead: Nanos,
}

impl Watch {
    /// Watches `clock` from now; `peered` says whether a jump only the wall
    /// clock saw moves it (see `checked`).
    pub fn new(clock: Box<dyn LoopClock>, peered: bool) -> Watch {
        Watch { last: clock.now(), clock, unseen: Unseen::default(), follow_wall: peered, ahead: 0 }
    }

    /// Whether this watch was made for a peered locker.
    pub fn peered(&self) -> bool {
        self.follow_wall
    }

    /// The time now, telling no one of a pause: for what only waits or
    /// reports (the loop's wait, metrics, the stop's linger).
    #[inline]
    pub fn peek(&self) -> Nanos {
        self.clock.now().saturating_add(self.ahead)
    }

    /// The time now, telling `service` first of a pause the monotonic
    /// clock saw: once per request.
    #[inline]
    pub fn now(&mut self, service: &mut Service) -> Nanos {
        self.read(service)
    }

    /// `now`, checked against the boot-time and wall clocks, telling
    /// `service` first of a pause either saw: once per loop turn and per
    /// inner batch.
    ///
    /// Time the boot-time clock saw pass unseen really passed (a suspended
    /// host): the clock always moves ahead by it. A jump only the wall
    /// clock saw is either a paused VM set right by its host or a wall
    /// clock stepped ahead, and nothing tells which. A peered locker takes
    /// it for a pause, the safe side: its lease must not outlive one its
    /// heir saw run out, and the group's clock, the middle of the members',
    /// keeps one member's step from moving the group. A lone locker holds
    /// no lease and no one else grants its limit, so it keeps its own
    /// reckoning: moving ahead would end its current slot early, and the
    /// slot after it could then put more than `max_requests` in one real
    /// slot length.
    pub fn checked(&mut self, service: &mut Service) -> Nanos {
        let before = self.clock.now();
        let gap = match self.clock.others() {
            Some(others) => self.unseen.since_last(before, others, || self.clock.now()),
            None => Gap::default(),
        };
        let unseen = if self.follow_wall { gap.any } else { gap.boot };
        let unseen = if unseen > PAUSE_NS { unseen } else { 0 };
        if unseen > 0 {
            warn!(
                unseen_ms = unseen / NANOS_PER_MS,
                "real time passed that the monotonic clock did not see (a suspended host or VM, or the wall clock \
                 stepped ahead): taken as a pause, the locker's clock moved ahead by as much"
            );
        } else if gap.any > PAUSE_NS {
            warn!(
                wall_ahead_ms = gap.any / NANOS_PER_MS,
                "the wall clock moved ahead of the monotonic and boot-time clocks (a step, or a paused VM set right): \
                 a lone locker keeps its own reckoning, so no slot is cut short"
            );
        }
        self.ahead = self.ahead.saturating_add(unseen);
        self.read(service)
    }

    fn read(&mut self, service: &mut Service) -> Nanos {
        let now = self.peek();
        let away = now.saturating_sub(self.last);
        self.last = now;
        if away > PAUSE_NS {
            info!(away_ms = away / NANOS_PER_MS, "the loop did not run for a while: paused");
            step::note(service, Note::Paused { now, paused: away });
        }
        now
    }
}

#[cfg(test)]
mod tests;
