//! Holding an ask for a go instead of answering sorry: when the service
//! parks an ask (see `parking`) and when it decides a parked one again.
//!
//! A single ask (plain, or structured with a cost) that would get sorry is
//! held when it could go within its hold: the ask's `hold_ms`, else its
//! limit's; when peered, at least the short wait for grants in flight. The
//! decision itself is `Service::decide`, the same as for any request; this
//! module only chooses between answering now, parking, and parking again.
//! An ask's hold is its own: parked behind others of its limit and key, it
//! is answered when its hold ends even if they still wait, and at once when
//! the queue's next decision comes after that end.
//!
//! A parked ask keeps its body, which is decoded once again when it is
//! decided. It reads no clock and touches no socket: the daemon passes its
//! clock reading and keeps the callers' envelopes under the tokens.

use super::hold_lease::{Ending, LeaseWaits};
use super::parking::{asked_hold, Parked, Parking, QueueKey, Token};
use super::{Io, Service};
use crate::core::ask::hold_within;
use crate::core::time::NANOS_PER_MS;
use crate::core::{LimitId, Locker, Nanos, DEFAULT_LIMIT};
use crate::state::Keep;
use crate::wire::{self, Decoded, ReplyKind, Request};

/// Such a sorry is held when peered even without a hold, for at most this
/// long in all: the grants in flight arrive, or the turn comes round,
/// within it.
const IN_FLIGHT_HOLD: Nanos = 50 * NANOS_PER_MS;

/// Whether a request was answered or held (see `step::request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Answer {
    /// The reply is in `out`: send it.
    Now,
    /// The ask is parked under its token: send nothing yet.
    Held,
}

/// A single ask answered sorry, with what holding it needs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sorry {
    pub(super) limit: LimitId,
    pub(super) retry_after: Nanos,
    /// The ask's own hold (`hold_ms`), if it named one.
    pub(super) asked_hold: Option<Nanos>,
}

/// The hold a request was under: its end, and whether it was only the
/// peers' in-flight wait.
pub(super) type HoldEnd = Option<(Nanos, bool)>;

/// The asks held for a go, and what is left of them at a stop.
#[derive(Debug)]
pub(super) struct HeldAsks {
    pub(super) parking: Parking,
    /// The lease requests among the parked, by lease id (`hold_lease`).
    pub(super) leases: LeaseWaits,
    /// Parked asks still to be answered at shutdown (see `next_final`).
    finals: Vec<(QueueKey, Parked)>,
}

impl HeldAsks {
    pub(super) fn new(max: usize) -> HeldAsks {
        HeldAsks { parking: Parking::new(max), leases: LeaseWaits::default(), finals: Vec::new() }
    }

    /// Asks parked now.
    pub(super) fn len(&self) -> usize {
        self.parking.len()
    }

    /// When the next parked ask is to be decided or answered.
    pub(super) fn next_wake(&self) -> Option<Nanos> {
        [self.parking.next_wake(), self.leases.next_wake()].into_iter().flatten().min()
    }

    /// Asks held since start, and those of them answered go.
    pub(super) fn counts(&self) -> (u64, u64) {
        (self.parking.held, self.parking.held_go)
    }

    /// Whether `others` more asks, parked elsewhere, leave room for one.
    pub(super) fn has_room_beside(&self, others: usize) -> bool {
        self.parking.has_room_beside(others)
    }
}

impl Service {
    /// Answers one request, or, when it is a single ask that would get
    /// sorry but could go within its hold (the ask's `hold_ms`, else its
    /// limit's; when peered, at least the wait for grants in flight) and
    /// `io` may hold, parks it under `token` and answers `Held`: its reply
    /// comes later from `next_ready`. An ask whose limit and key already
    /// have asks parked waits behind them, so that they are answered in
    /// arrival order. A reset is made only if `io` gives no reason to refuse
    /// its caller (`Io::refuses_reset`). `now` is the loop's clock reading;
    /// what an answer left behind goes to `keep` before this returns.
    #[inline]
    pub(super) fn serve_for(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        out: &mut Vec<u8>,
        keep: &mut impl Keep,
        io: &mut impl Io,
    ) -> Answer {
        // The plain path: the seed's `let me go` with nothing parked to wait
        // behind and no store to wait on goes straight to its decision; it
        // needs no decoding (a body that is no map is the plain form).
        if !wire::is_structured(body) && self.holding.parking.is_empty() && self.store.is_none() {
            let may_hold = io.may_hold();
            return self
                .journaled(now, keep, |s| {
                    let sorry = s.decide_plain(now, body, out)?;
                    // Only a sorry that may be held needs the request's value.
                    may_hold.then(|| {
                        let decoded = s.decoder.decode(body);
                        let answer = s.hold_sorry(now, token, body, &decoded, sorry, None);
                        s.decoder.recycle(decoded);
                        answer
                    })
                })
                .unwrap_or(Answer::Now);
        }
        let decoded = self.decoder.decode(body);
        let refused = match &decoded.request {
            Ok(Request::Reset(r)) => io.refuses_reset(token, r.limit.unwrap_or(DEFAULT_LIMIT), r.key.unwrap_or("")),
            _ => None,
        };
        let answer = match refused {
            Some(why) => {
                super::reject(&mut self.locker, why, out);
                Answer::Now
            }
            None if io.may_hold() => self.serve_now(now, token, body, &decoded, out, keep),
            None => {
                // Answered at once, from what is on hand: nothing parks.
                let _ = self.journaled(now, keep, |s| s.decide(now, &decoded, out));
                Answer::Now
            }
        };
        self.decoder.recycle(decoded);
        answer
    }

    /// Serves a request past the plain path, from its value, with what
    /// it changes kept in `keep` before the answer leaves.
    fn serve_now(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        decoded: &Decoded,
        out: &mut Vec<u8>,
        keep: &mut impl Keep,
    ) -> Answer {
        self.journaled(now, keep, |s| {
            if let Ok(r) = &decoded.request {
                if s.park_behind(now, token, body, decoded) {
                    return Answer::Held;
                }
                if let Some(store) = &mut s.store {
                    let parts = (&mut s.locker, &mut s.names, &s.holding);
                    if let Some(answer) = store.lease_to_store(parts, (now, token), r, out) {
                        return answer;
                    }
                    if s.wait_for_claims(now, token, body, decoded, 0, None) {
                        return Answer::Held;
                    }
                } else if let Some(answer) = s.hold_lease(now, token, body, r, out) {
                    return answer;
                }
            }
            s.answer_or_hold(now, token, body, decoded, None, out)
        })
    }

    /// Parks a single ask behind the asks of its limit and key already
    /// parked, if any, so that it is not answered before them; whether it
    /// did. It is not parked, and is decided now, when it has no hold or
    /// when the queue is next decided after its hold ends.
    fn park_behind(&mut self, now: Nanos, token: Token, body: &[u8], decoded: &Decoded) -> bool {
        if self.holding.parking.is_empty() || !self.holding.parking.has_room(body.len()) {
            return false;
        }
        let Some((queue, hold, transient)) = self.queue_of(decoded) else { return false };
        let until = now.saturating_add(hold);
        match self.holding.parking.head_wake(&queue) {
            Some(wake) if hold > 0 && wake <= until => {
                self.holding.parking.park(queue, token, body, (now, until), transient);
                true
            }
            _ => false,
        }
    }

    /// Decides `request`; parks it under `token` when the answer is a sorry
    /// its hold covers (`held`: the hold it was already under, whose end
    /// stands, else a hold of its own).
    fn answer_or_hold(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        decoded: &Decoded,
        held: HoldEnd,
        out: &mut Vec<u8>,
    ) -> Answer {
        let Some(sorry) = self.decide(now, decoded, out) else { return Answer::Now };
        self.hold_sorry(now, token, body, decoded, sorry, held)
    }

    /// Parks a request (`decoded`), just answered `sorry`, under `token` when its hold
    /// covers the wait (`held`: the hold it was already under, whose end
    /// stands, else a hold of its own); else its sorry goes now.
    fn hold_sorry(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        decoded: &Decoded,
        sorry: Sorry,
        held: HoldEnd,
    ) -> Answer {
        if !self.holding.parking.has_room(body.len()) {
            return Answer::Now;
        }
        let hold = match held {
            Some((until, transient)) => {
                sorry.hold(&self.locker, self.peering.is_some(), now).map(|(u, t)| (u.min(until), t && transient))
            }
            None => sorry.hold(&self.locker, self.peering.is_some(), now),
        };
        let Some((until, transient)) = hold else { return Answer::Now };
        let wake = now.saturating_add(sorry.retry_after);
        if wake > until {
            return Answer::Now;
        }
        let Some((queue, _, _)) = self.queue_of(decoded) else { return Answer::Now };
        self.locker.counters().unrecord_sorry(sorry.limit);
        self.holding.parking.park(queue, token, body, (wake, until), transient);
        // An ask held before it waited for claims was counted then.
        self.holding.parking.held -= u64::from(held.is_some());
        Answer::Held
    }

    /// Decides the parked asks that are due at `now` (the loop's clock)
    /// until one is answered: writes its reply into `out` and returns its
    /// token; `None` when none is due. Call it until `None` before serving
    /// new requests, each call inside `journaled`, so that what the answer
    /// left behind is kept before its reply leaves (as `step` does).
    pub(super) fn next_ready(&mut self, now: Nanos, out: &mut Vec<u8>) -> Option<Token> {
        if self.store.is_some() {
            if let Some(token) = self.ready_from_store(now, out) {
                return Some(token);
            }
        }
        if !self.holding.leases.is_empty() {
            let at = self.enter(now);
            if let Some(token) = self.holding.lease_ready((&mut self.locker, &mut self.journal), (now, at), out) {
                return Some(token);
            }
        }
        while let Some((queue, parked)) = self.holding.parking.due(now) {
            if parked.lease {
                let at = self.enter(now);
                let parts = (&mut self.locker, &mut self.journal);
                return Some(self.holding.lease_over(parts, (now, at), (&queue, parked), Ending::Hold, out));
            }
            let decoded = self.decoder.decode(&parked.body);
            let held = Some((parked.until, parked.transient));
            if self.store.is_some() && self.wait_for_claims(now, parked.token, &parked.body, &decoded, 0, held) {
                self.decoder.recycle(decoded);
                continue;
            }
            let sorry = self.decide(now, &decoded, out);
            self.decoder.recycle(decoded);
            let Some(sorry) = sorry else {
                self.holding.parking.held_go += u64::from(wire::classify_reply(out) == ReplyKind::Go);
                return Some(parked.token);
            };
            let wake = now.saturating_add(sorry.retry_after);
            let in_flight = !parked.transient || sorry.waits_for_flight(&self.locker);
            if wake <= parked.until && in_flight && sorry.limit == queue.0 {
                self.locker.counters().unrecord_sorry(sorry.limit);
                self.holding.parking.repark(queue, parked, wake);
                continue;
            }
            return Some(parked.token);
        }
        // An ask whose own hold ended behind others: answered now, most
        // likely sorry (the asks before it could not go either).
        let (_, parked) = self.holding.parking.expired(now)?;
        if self.decide_body(now, &parked.body, out).is_none() {
            self.holding.parking.held_go += u64::from(wire::classify_reply(out) == ReplyKind::Go);
        }
        Some(parked.token)
    }

    /// Decides a request that had waited for claims and whose claims are
    /// all back: answered (its reply in `out`, its token returned), or held
    /// or sent back to wait; the store's replies to lease calls first.
    fn ready_from_store(&mut self, now: Nanos, out: &mut Vec<u8>) -> Option<Token> {
        let store = self.store.as_mut()?;
        if let Some(token) = store.lease_calls.next_reply(out) {
            return Some(token);
        }
        while let Some((token, body, round, held)) = self.store.as_mut().and_then(|s| s.next_resumed()) {
            let decoded = self.decoder.decode(&body);
            if self.wait_for_claims(now, token, &body, &decoded, round, held) {
                self.decoder.recycle(decoded);
                continue;
            }
            let answer = self.answer_or_hold(now, token, &body, &decoded, held, out);
            self.decoder.recycle(decoded);
            if answer == Answer::Now {
                let go = held.is_some() && wire::classify_reply(out) == ReplyKind::Go;
                self.holding.parking.held_go += u64::from(go);
                return Some(token);
            }
        }
        None
    }

    /// At shutdown: decides every parked ask once more, in arrival order,
    /// one per call (go if the limit allows it now, else sorry), writing
    /// its reply into `out` and returning its token; `None` when all are
    /// answered. Nothing is held from the first call on. Each call runs
    /// inside `journaled`, as `next_ready`'s do (`step::stop`).
    pub(super) fn next_final(&mut self, now: Nanos, out: &mut Vec<u8>) -> Option<Token> {
        if let Some(store) = &mut self.store {
            if let Some((token, body)) = store.next_final(&mut self.locker, out) {
                let Some(body) = body else { return Some(token) };
                let _ = self.decide_body(now, &body, out);
                return Some(token);
            }
        }
        let holding = &mut self.holding;
        if holding.finals.is_empty() && !holding.parking.is_empty() {
            holding.finals = holding.parking.take_all();
            holding.finals.reverse();
            holding.parking = Parking::new(0);
        }
        let (queue, parked) = holding.finals.pop()?;
        if parked.lease {
            let at = self.enter(now);
            let parts = (&mut self.locker, &mut self.journal);
            return Some(self.holding.lease_over(parts, (now, at), (&queue, parked), Ending::Stop, out));
        }
        let _ = self.decide_body(now, &parked.body, out);
        Some(parked.token)
    }

    /// The queue a single ask would wait in, its hold, and whether that is
    /// only the peers' in-flight wait; `None` for any other request. Only
    /// on the path of asks that may be held.
    fn queue_of(&mut self, decoded: &Decoded) -> Option<(QueueKey, Nanos, bool)> {
        let (id, key, asked) = match decoded.request.as_ref().ok()? {
            Request::Plain(b) => (self.names.plain(&self.locker, b), None, None),
            // An ask whose own hold is longer than any may be is refused
            // when decided: it is never parked, behind others or alone.
            Request::Go(go) if go.cost > 0 && go.hold_ms.is_none_or(|ms| hold_within(ms).is_ok()) => {
                (self.names.lookup(&self.locker, go.limit).ok()?, go.key.map(Box::from), go.hold_ms.map(asked_hold))
            }
            // Limits checked together wait in the queue of their first part.
            Request::All(all) if all.hold_ms.is_none_or(|ms| hold_within(ms).is_ok()) => {
                let first = decoded.parts().first()?.as_ref().ok()?;
                (
                    self.names.lookup(&self.locker, first.limit).ok()?,
                    first.key.map(Box::from),
                    all.hold_ms.map(asked_hold),
                )
            }
            _ => return None,
        };
        let hold = asked.unwrap_or_else(|| self.locker.limit(id).hold());
        // Without a hold of its own, a peered ask waits only for grants in flight.
        let transient = hold == 0 && self.peering.is_some();
        let hold = if transient { IN_FLIGHT_HOLD } else { hold };
        Some(((id, key), hold, transient))
    }
}

impl Sorry {
    /// How long this sorry, answered at `now` by `locker` (`peered` or
    /// not), may be held, and whether only for the peers' in-flight wait:
    /// until when, or `None` to answer it.
    fn hold(&self, locker: &Locker, peered: bool, now: Nanos) -> Option<(Nanos, bool)> {
        let hold = self.asked_hold.unwrap_or_else(|| locker.limit(self.limit).hold());
        if hold > 0 && self.retry_after <= hold {
            return Some((now.saturating_add(hold), false));
        }
        let in_flight = peered && self.waits_for_flight(locker);
        in_flight.then(|| (now.saturating_add(IN_FLIGHT_HOLD), true))
    }

    /// Whether this sorry only waits for grants in flight: the peers'
    /// in-flight rule answers with a `retry_after` of at most twice its
    /// limit's in-flight window (4 ms, more while peer messages come late).
    fn waits_for_flight(&self, locker: &Locker) -> bool {
        self.retry_after <= locker.share(self.limit).charged_for()
    }
}
