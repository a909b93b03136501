//! The rolling window: for every key, at most max_requests permits go in
//! ANY interval of length T = in_seconds, not only in epoch-aligned slots.
//!
//! Per key it keeps the grants that still count (see `log`): each with the
//! instant its caller goes, and the permits. An ask fits at the earliest
//! instant at which every interval of length T holding it stays within
//! max_requests; that is now (go), later within `max_wait` (a reservation,
//! served in arrival order: no ask goes before an earlier one of the same
//! key), or too late (sorry, with `retry_after` the exact time until the
//! oldest grants in the way stop counting).
//!
//! Two representations, picked per limit:
//! - **exact** for max_requests up to 64 (`EXACT_UP_TO`): every grant is
//!   kept with its own instant, so a key holds at most max_requests entries
//!   per window and nothing is given up: a saturated caller gets exactly
//!   max_requests per T;
//! - **sub-slots** above that: grants are summed per sub-slot of T / 64
//!   (`SUB_SLOTS`, epoch-aligned) and each sub-slot is counted until its
//!   last nanosecond + T, in full: never over, and a permit comes back at
//!   most one sub-slot late, so a saturated caller gets at least
//!   max_requests x 64 / 65 (98.5 %) per T. A key holds at most 66
//!   entries per window (100,000 per hour costs the same as 100 per second).
//!
//! Either way an entry is 16 bytes. A key's log (its last instant and its
//! first entry) sits beside the key in one 64-byte slot of an
//! `InlineKeys` table, so a light key costs one cache line and about 134
//! bytes at 1M keys; a busier key's entries move to a list of their own
//! (see `grants`), at most about 1 KiB. Reservations queued ahead add at
//! most 66 entries per T they reach into (max_wait is at most an hour).
//! Keys are dropped by a sweep, at most once per second or per half window,
//! once nothing of theirs counts; while there are keys, the sweep is also a
//! deadline for the serving loop, so a flood's memory comes back without a
//! request. This module knows nothing of names beyond
//! keys, sockets or clocks: it takes `now`.
//!
//! Peers share the count per sub-slot (see `peer_log`) and conserve
//! rights to grant (see `rights`): a peered window grants only with rights
//! it holds, so no interval of length T holds more than `max_requests`
//! across the group, whatever the messages between them do. A peered
//! window makes no reservations.

use crate::core::ask::{Verdict, Want};
use crate::core::inline_keys::InlineKeys;
use crate::core::limit::Quota;
use crate::core::room::{KeyRoom, Leeway, NoRoom};
use crate::core::share::{Share, EARLIER_GIFTS_WINDOWS};
use crate::core::time::{Nanos, NANOS_PER_SEC};

mod back;
mod charge;
mod grants;
mod kept;
mod log;
mod peer;
mod peer_log;
mod rights;
mod span;

use log::{Fit, Log, Span};

pub use rights::EarlierRights;
pub use span::{EXACT_UP_TO, SUB_SLOTS};

/// Rolling-window counts for every key of one limit.
#[derive(Debug, Clone)]
pub struct RollingWindow {
    quota: Quota,
    span: Span,
    unkeyed: Log,
    /// Each key's log, inline in its slot (see `grants`).
    keys: InlineKeys<Log>,
    next_sweep: Nanos,
    /// Bytes the keys' grants held at the last sweep (see `heap_bytes`).
    swept_bytes: usize,
}

impl RollingWindow {
    /// An empty window for `quota`: max_requests in any in_seconds.
    pub fn new(quota: Quota) -> RollingWindow {
        RollingWindow {
            quota,
            span: Span::of(quota),
            unkeyed: Log::default(),
            keys: InlineKeys::new(),
            next_sweep: 0,
            swept_bytes: 0,
        }
    }

    /// The quota this window enforces.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// How long peers remember a run after they last heard of it (see
    /// `Rule::memory`): `EARLIER_GIFTS_WINDOWS` windows and one more. A
    /// run's rights come back only when the grants made with them leave
    /// the window: it renews what it lent into the next window, whose
    /// receiver's grants count through the window after, so what it did in
    /// window k bears on windows up to k + 2, which end within three
    /// windows of its last message (its own grants, within one). One
    /// window more covers a run whose clock was a little ahead, as the
    /// fixed window's second slot does. Forgotten sooner, a later run of
    /// the same locker would hold its rights at once while the earlier
    /// run's still count.
    pub fn memory(&self) -> Nanos {
        self.span.window.saturating_mul(EARLIER_GIFTS_WINDOWS + 1)
    }

    /// Takes a new quota, keeping the counts when the window length and the
    /// way grants are stamped stay the same (a new `max_requests` applies
    /// from the next ask); returns false, changing nothing, otherwise.
    pub fn retune(&mut self, quota: Quota) -> bool {
        let fresh = RollingWindow::new(quota);
        let same = fresh.span.window == self.span.window && fresh.span.grain == self.span.grain;
        if same {
            (self.quota, self.span) = (quota, fresh.span);
        }
        same
    }

    /// Whether every grant is kept with its own instant (no utilisation given up).
    pub fn is_exact(&self) -> bool {
        self.span.grain == 1
    }

    /// Keys with grants that still count, a reservation, or peers' counts.
    pub fn live_keys(&self) -> usize {
        self.keys.len()
    }

    /// Drops keys of which nothing counts any more, at most once per
    /// second or half window; returns how many were dropped.
    pub fn advance(&mut self, now: Nanos) -> usize {
        if now < self.next_sweep {
            return 0;
        }
        self.next_sweep = now.saturating_add((self.span.window / 2).max(NANOS_PER_SEC));
        let span = self.span;
        self.unkeyed.prune(now, span);
        let before = self.keys.len();
        self.keys.retain(|_, log| {
            log.prune(now, span);
            !log.is_idle(now)
        });
        let grants: usize = self.keys.iter().map(|(_, log)| log.own.capacity()).sum();
        self.swept_bytes = grants * std::mem::size_of::<(Nanos, u32)>();
        before - self.keys.len()
    }

    /// The next sweep, while there are keys for it to drop: the loop wakes
    /// then even without a request, so a flood's memory comes back.
    pub fn next_deadline(&self) -> Option<Nanos> {
        (!self.keys.is_empty()).then_some(self.next_sweep)
    }

    /// Bytes the keys hold on the heap, roughly: the map, and the keys'
    /// grants as the last sweep counted them (walking every key's grants at
    /// each scrape would cost what a million keys cost); not the keys' names
    /// or peers' counts.
    pub fn heap_bytes(&self) -> usize {
        self.keys.heap_bytes() + if self.keys.is_empty() { 0 } else { self.swept_bytes }
    }

    /// Starts loading `key`'s slot into the cache (see
    /// `InlineKeys::prefetch`); the unkeyed log needs nothing.
    #[inline]
    pub fn prefetch(&self, key: Option<&str>) {
        if let Some(k) = key {
            self.keys.prefetch(k);
        }
    }

    /// Takes permits for `key` as `want` says, for a locker on its own.
    /// See `take_shared`.
    pub fn take(&mut self, now: Nanos, key: Option<&str>, want: Want, room: KeyRoom) -> Result<Verdict, NoRoom> {
        self.take_shared(now, key, want, Leeway { room, share: Share::ALONE })
    }

    /// Takes permits for `key` (or the limit's unkeyed count) as `want`
    /// says: now, or with `max_wait` as a reservation at the earliest
    /// instant they fit; otherwise takes nothing and answers sorry.
    /// `want.cost` must be at most max_requests; the caller checks. A new
    /// key needs room in `terms`. Peered, the grant must also fit the
    /// rights this locker holds (see `rights`); a locker short of them asks
    /// its peers (the sorry's `retry_after` is then a round trip, which the
    /// service holds), and it makes no reservations.
    pub fn take_shared(&mut self, now: Nanos, key: Option<&str>, want: Want, terms: Leeway) -> Result<Verdict, NoRoom> {
        let (span, Leeway { room, share }) = (self.span, terms);
        let rights = share.conserved().then(|| share.rolling_rights(self.quota, span.window_of(now)));
        let want = if rights.is_some() { Want { max_wait: 0, ..want } } else { want };
        if let Some(log) = self.log_mut(key) {
            log.prune(now, span);
            let (v, at) = decide(log, now, span, want, rights, share);
            if let Some(at) = at {
                log.add_own(at, v.granted, span, share.conserved());
            }
            return Ok(v);
        }
        // A key not seen yet is added only when it is granted permits (or
        // asks its peers for rights).
        let mut fresh = Log::default();
        let (v, at) = decide(&mut fresh, now, span, want, rights, share);
        if at.is_some() || fresh.shared.is_some() {
            let log = match self.log_entry(key, room) {
                Ok(log) => log,
                // A want with no room to keep it is not made.
                Err(_) if at.is_none() => return Ok(v),
                Err(e) => return Err(e),
            };
            log.shared = fresh.shared;
            if let Some(at) = at {
                log.add_own(at, v.granted, span, share.conserved());
            }
        }
        Ok(v)
    }

    /// Answers sorry without taking, for a locker that may not grant yet;
    /// `retry_after` is when it may.
    pub fn refuse(&self, now: Nanos, key: Option<&str>, retry_after: Nanos) -> Verdict {
        let empty = Log::default();
        let log = self.log(key).unwrap_or(&empty);
        let fit = log.fit(now, self.span, 1);
        Verdict::sorry(self.span.max, fit.room_now, retry_after, log.empty_at(self.span).saturating_sub(now))
    }

    fn log(&self, key: Option<&str>) -> Option<&Log> {
        match key {
            None => Some(&self.unkeyed),
            Some(k) => self.keys.get(k),
        }
    }

    fn log_mut(&mut self, key: Option<&str>) -> Option<&mut Log> {
        match key {
            None => Some(&mut self.unkeyed),
            Some(k) => self.keys.get_mut(k),
        }
    }

    /// The log of `key`, added if there is room.
    fn log_entry(&mut self, key: Option<&str>, room: KeyRoom) -> Result<&mut Log, NoRoom> {
        match key {
            None => Ok(&mut self.unkeyed),
            Some(k) if matches!(room, KeyRoom::Full) && !self.keys.contains_key(k) => Err(NoRoom),
            Some(k) => Ok(self.keys.get_or_insert(k)),
        }
    }
}

/// The verdict on `want` for a key whose grants are `log`, and the instant
/// the permits go at if they are granted. `rights` is what this locker
/// holds before gifts when peered (see `Share::rolling_rights`).
fn decide(
    log: &mut Log,
    now: Nanos,
    span: Span,
    want: Want,
    rights: Option<u32>,
    share: Share,
) -> (Verdict, Option<Nanos>) {
    // A peek asks whether one permit would go.
    let Fit { at, room, room_now } = log.fit(now, span, want.need().max(1));
    let wait = at - now;
    let reset_after = log.empty_at(span).saturating_sub(now);
    let mut v = Verdict::sorry(span.max, room_now, wait, reset_after);
    if want.cost == 0 {
        v.go = wait == 0;
        return (v, None);
    }
    let (at, room) = match rights {
        // Peered, what this locker may grant is what its rights leave (see
        // `rights`); the counts heard only say whether asking its peers may
        // help. Short of rights, it asks them and may decide again a round
        // trip later.
        Some(initial) if log.last <= now => {
            let (free, held) = log.free(now, span, initial, share.resumes);
            if free < want.need() {
                if wait == 0 {
                    // As many as it holds granted, at least what the ask
                    // lacks, so that a busy locker's rights double with
                    // each round trip.
                    let need = (want.need() - free).max(held).min(span.max);
                    log.shared_mut().rights.want(span.window_of(now), need, now.saturating_add(share.keeps_own_for()));
                    v.retry_after = share.charged_for();
                }
                return (v, None);
            }
            (now, free)
        }
        _ if wait > want.max_wait => return (v, None),
        _ => (at, room),
    };
    let granted = want.grant(room);
    v.go = true;
    v.retry_after = 0;
    v.granted = granted;
    v.wait = at - now;
    v.remaining = if at == now { room_now.saturating_sub(granted) } else { 0 };
    v.reset_after = v.reset_after.max(log.stamp(at, span).saturating_add(span.window) - now);
    (v, Some(at))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod peer_tests;
