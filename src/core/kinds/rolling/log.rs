//! One key's counted grants in a rolling window, and the arithmetic of
//! "when does an ask for n permits fit".
//!
//! A grant is counted in every interval `(u - T, u]` that holds the instant
//! its caller goes. Each grant is kept with a *stamp*, the latest instant it
//! may have gone at: the instant itself when the window is exact, or the
//! last nanosecond of its sub-slot when it is coarse. A grant therefore
//! stops counting at `stamp + T`, never before its true instant + T, so the
//! count this module computes is never below the true one. Peers' counts
//! arrive per sub-slot and are kept as the span `[first, last]` of instants
//! they may have gone at (see `shared`).
//!
//! Asks are served in arrival order: a new grant never goes before the
//! latest one (`Log::last`, which is in the future while a reservation is
//! queued). So every own grant is at or before a new one, and the only
//! interval that can overflow is the one ending at the new grant, unless a
//! peer's reservation lies ahead; the general check (`peak`) looks at every
//! interval that holds the new grant. Pure arithmetic: no clock, no names.

use super::grants::Grants;
use super::peer_log::PeerLog;
use super::rights::{OwnGrants, Rights};
pub use super::span::Span;
use crate::core::time::Nanos;

/// Where an ask fits: the instant it may go and the permits free then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// The earliest instant, at or after `now`, at which `need` permits fit.
    pub at: Nanos,
    /// Permits free at `at`, at least `need`.
    pub room: u32,
    /// Permits a new ask could take at `now`: 0 while a reservation is queued.
    pub room_now: u32,
}

/// One key's grants: own ones by stamp, peers' ones by sub-slot.
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// When the latest grant's caller goes; no later ask goes before it.
    pub last: Nanos,
    /// Own grants, oldest first, as (stamp, permits); stamps strictly rise.
    pub own: Grants,
    /// What only peering needs; `None` for a locker on its own.
    pub shared: Option<Box<PeerLog>>,
}

impl Log {
    /// Forgets grants that no longer count at `now` or after.
    pub fn prune(&mut self, now: Nanos, span: Span) {
        while self.own.front().is_some_and(|(stamp, _)| !span.counts_at(stamp, now)) {
            self.own.pop_front();
        }
        if let Some(s) = &mut self.shared {
            s.prune(now, span);
        }
    }

    /// Whether nothing is counted or queued at `now`, so the key may be dropped.
    pub fn is_idle(&self, now: Nanos) -> bool {
        self.own.is_empty() && self.last <= now && self.shared.as_ref().is_none_or(|s| s.is_idle())
    }

    /// Records `n` permits going at `at` (never before `last`).
    pub fn add(&mut self, at: Nanos, n: u32, span: Span) {
        self.own.push(self.stamp(at, span), n);
        self.last = self.last.max(at);
    }

    /// `add`, and for a peered locker (`peered`) the mark that the next
    /// repair tells the peers of the grants from `at` on (see
    /// `RollingWindow::drain_touched`): a grant itself is not published.
    pub fn add_own(&mut self, at: Nanos, n: u32, span: Span, peered: bool) {
        self.add(at, n, span);
        if peered {
            let shared = self.shared_mut();
            shared.touched_from = Some(shared.touched_from.map_or(at, |t| t.min(at)));
        }
    }

    /// The permits this locker may grant at `now` holding `initial` rights
    /// before gifts (see `rights`), and its own grants that count now.
    /// A run that `resumed` its earlier runs' share counts their figures
    /// too (see `Rights::free_resumed`).
    pub fn free(&self, now: Nanos, span: Span, initial: u32, resumed: bool) -> (u32, u32) {
        let (window, held) = (span.window_of(now), self.held(now, span));
        let free = match &self.shared {
            Some(s) if resumed => s.rights.free_resumed(window, initial, held, s.earlier_held(now, span)),
            Some(s) => s.rights.free(window, initial, held),
            None => Rights::default().free(window, initial, held),
        };
        (free, held.current + held.previous)
    }

    /// The own grants that count at `now` beyond the rights this locker
    /// holds (`initial` before gifts, see `free`): a charge's debt when
    /// peered.
    pub fn owed(&self, now: Nanos, span: Span, initial: u32, resumed: bool) -> u32 {
        let (window, held) = (span.window_of(now), self.held(now, span));
        match &self.shared {
            Some(s) if resumed => s.rights.owed(window, initial, held, Some(s.earlier_held(now, span))),
            Some(s) => s.rights.owed(window, initial, held, None),
            None => Rights::default().owed(window, initial, held, None),
        }
    }

    /// Own grants that still count at `now`, by the window of their stamps
    /// against `now`'s (see `rights`): grants stamped in an earlier window
    /// than the previous one no longer count.
    fn held(&self, now: Nanos, span: Span) -> OwnGrants {
        let window = span.window_of(now);
        let mut held = OwnGrants::default();
        for (stamp, n) in self.own.iter().rev().take_while(|&(stamp, _)| span.counts_at(stamp, now)) {
            if span.window_of(stamp) >= window {
                held.current += n;
            } else {
                held.previous += n;
            }
        }
        held
    }

    /// Where a grant at `at` (never before the newest) is stamped: the
    /// newest grant's stamp when `at` falls in its grain, which spares the
    /// division on the path of every grant in a sub-slot already used.
    #[inline]
    pub fn stamp(&self, at: Nanos, span: Span) -> Nanos {
        match self.own.back() {
            Some((s, _)) if at <= s && at > s - span.grain => s,
            _ => span.stamp(at),
        }
    }

    /// When every grant known now has stopped counting (0 with none).
    pub fn empty_at(&self, span: Span) -> Nanos {
        let own = self.own.back().map_or(0, |(stamp, _)| stamp.saturating_add(span.window));
        let heard = self.peer_spans(span).map(|(_, last, _)| last.saturating_add(span.window)).max();
        own.max(heard.unwrap_or(0))
    }

    /// The earliest instant at or after `now` (and after `last`) at which
    /// `need` permits fit in every interval of length T that holds it.
    pub fn fit(&self, now: Nanos, span: Span, need: u32) -> Fit {
        let start = now.max(self.last);
        let free = |x| span.max.saturating_sub(clamp(self.peak(x, span)));
        let room = free(start);
        let room_now = if start == now { room } else { 0 };
        if room >= need {
            return Fit { at: start, room, room_now };
        }
        if self.peer_spans(span).next().is_none() {
            return self.fit_alone(start, span, need, room_now);
        }
        // Room only grows when a grant stops counting: try those instants in turn.
        let mut leaves: Vec<Nanos> = self.own.iter().map(|(stamp, _)| stamp).collect();
        leaves.extend(self.peer_spans(span).map(|(_, last, _)| last));
        let mut leaves: Vec<Nanos> =
            leaves.into_iter().map(|s| s.saturating_add(span.window)).filter(|&x| x > start).collect();
        leaves.sort_unstable();
        leaves.dedup();
        for &at in &leaves {
            let room = free(at);
            if room >= need {
                return Fit { at, room, room_now };
            }
        }
        // Unreachable while need <= max: nothing counts after the last leave.
        Fit { at: leaves.last().copied().unwrap_or(start), room: span.max, room_now }
    }

    /// `fit` without peers' counts: own grants leave oldest first, so walk
    /// them from the front until enough have left.
    fn fit_alone(&self, start: Nanos, span: Span, need: u32, room_now: u32) -> Fit {
        let mut counted = self.count_at(start, span);
        for (stamp, n) in self.own.iter().filter(|&(stamp, _)| span.counts_at(stamp, start)) {
            counted -= u64::from(n);
            let room = span.max.saturating_sub(clamp(counted));
            if room >= need {
                return Fit { at: stamp + span.window, room, room_now };
            }
        }
        Fit { at: start, room: span.max, room_now }
    }

    /// The largest count of any interval of length T that holds `x`: the
    /// one ending at `x`, or one ending where a peer's count ahead of `x` begins.
    pub fn peak(&self, x: Nanos, span: Span) -> u64 {
        let ahead =
            self.peer_spans(span).map(|(first, _, _)| first).filter(|&f| f > x && f < x.saturating_add(span.window));
        ahead.fold(self.count_at(x, span), |peak, u| peak.max(self.count_at(u, span)))
    }

    /// Permits counted in the interval `(u - T, u]`, own grants all at or
    /// before `u` and each peer count wherever in its sub-slot it went.
    fn count_at(&self, u: Nanos, span: Span) -> u64 {
        // Own stamps rise: walk back from the newest while they still count.
        let own = self.own.newest_while(|stamp| span.counts_at(stamp, u));
        if self.shared.is_none() {
            return own;
        }
        let heard: u64 = self
            .peer_spans(span)
            .filter(|&(first, last, _)| first <= u && span.counts_at(last, u))
            .map(|(_, _, n)| u64::from(n))
            .sum();
        own + heard
    }

    /// Every peer count as (first instant, last instant, permits).
    fn peer_spans(&self, span: Span) -> impl Iterator<Item = (Nanos, Nanos, u32)> + '_ {
        self.shared.iter().flat_map(move |s| s.spans(span))
    }
}

/// A count as a u32, saturating.
fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Log {
    /// The peering part of the log, added when first needed.
    pub fn shared_mut(&mut self) -> &mut PeerLog {
        self.shared.get_or_insert_with(Box::default)
    }

    /// Own permits going in the peers' sub-slot `sub`.
    pub(super) fn own_in(&self, span: Span, sub: u64) -> u32 {
        let in_sub = self.own.iter().rev().skip_while(|&(stamp, _)| span.sub(stamp) > sub);
        in_sub.take_while(|&(stamp, _)| span.sub(stamp) == sub).map(|(_, n)| n).sum()
    }

    /// Calls `f` with the own count of each sub-slot from `from` on.
    pub(super) fn own_subs(&self, span: Span, from: u64, mut f: impl FnMut(u64, u32)) {
        let mut run: Option<(u64, u32)> = None;
        for (stamp, n) in self.own.iter().filter(|&(stamp, _)| span.sub(stamp) >= from) {
            let sub = span.sub(stamp);
            run = match run {
                Some((s, count)) if s == sub => Some((s, count + n)),
                Some((s, count)) => {
                    f(s, count);
                    Some((sub, n))
                }
                None => Some((sub, n)),
            };
        }
        if let Some((s, count)) = run {
            f(s, count);
        }
    }
}
