//! Holding an ask for a go instead of answering sorry: when the service
//! parks an ask (see `parking`) and when it decides a parked one again.
//!
//! A single ask (plain, or structured with a cost) that would get sorry is
//! held when it could go within its hold: the ask's `hold_ms`, else its
//! limit's; when peered, at least the short wait for grants in flight. The
//! decision itself is `Service::decide`, the same as for any request; this
//! module only chooses between answering now, parking, and parking again.
//! It reads no clock and touches no socket: the daemon passes its clock
//! reading and keeps the callers' envelopes under the tokens.

use super::parking::{Parking, QueueKey, Token};
use super::Service;
use crate::core::time::NANOS_PER_MS;
use crate::core::{LimitId, Nanos};
use crate::state::Keep;
use crate::wire::{self, ReplyKind, Request};

/// Such a sorry is held when peered even without a hold, for at most this
/// long in all: the grants in flight arrive, or the turn comes round,
/// within it.
const IN_FLIGHT_HOLD: Nanos = 50 * NANOS_PER_MS;

/// Whether a request was answered or held (see `Service::serve`).
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

impl Service {
    /// Answers one request as `respond` does, or, when it is a single ask
    /// that would get sorry but could go within its hold (the ask's
    /// `hold_ms`, else its limit's; when peered, at least the wait for
    /// grants in flight), parks it under `token` and answers `Held`: its
    /// reply comes later from `next_ready`. An ask whose limit and key
    /// already have asks parked waits behind them, so that they are
    /// answered in arrival order. `now` is the loop's clock reading; what
    /// an answer left behind goes to `keep` before this returns.
    pub fn serve(&mut self, now: Nanos, token: Token, body: &[u8], out: &mut Vec<u8>, keep: &mut impl Keep) -> Answer {
        self.keeping(now, keep, |s| s.serve_now(now, token, body, out))
    }

    fn serve_now(&mut self, now: Nanos, token: Token, body: &[u8], out: &mut Vec<u8>) -> Answer {
        if !self.parking.is_empty() && self.parking.has_room(body.len()) {
            if let Some((queue, hold, transient)) = self.queue_of(body) {
                if self.parking.is_waiting(&queue) && hold > 0 {
                    self.parking.park(queue, token, body, (now, now.saturating_add(hold)), transient);
                    return Answer::Held;
                }
            }
        }
        if let Some(answer) = self.lease_to_store(token, body, out) {
            return answer;
        }
        if self.wait_for_claims(now, token, body, 0, None) {
            return Answer::Held;
        }
        self.answer_or_hold(now, token, body, None, out)
    }

    /// Decides `body`; parks it under `token` when the answer is a sorry
    /// its hold covers (`held`: the hold it was already under, whose end
    /// stands, else a hold of its own).
    fn answer_or_hold(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        held: Option<(Nanos, bool)>,
        out: &mut Vec<u8>,
    ) -> Answer {
        let Some(sorry) = self.decide(now, body, out) else { return Answer::Now };
        if !self.parking.has_room(body.len()) {
            return Answer::Now;
        }
        let hold = match held {
            Some((until, transient)) => self.hold_of(&sorry, now).map(|(u, t)| (u.min(until), t && transient)),
            None => self.hold_of(&sorry, now),
        };
        let Some((until, transient)) = hold else { return Answer::Now };
        let wake = now.saturating_add(sorry.retry_after);
        if wake > until {
            return Answer::Now;
        }
        let Some((queue, _, _)) = self.queue_of(body) else { return Answer::Now };
        self.locker.counters().unrecord_sorry(sorry.limit);
        self.parking.park(queue, token, body, (wake, until), transient);
        // An ask held before it waited for claims was counted then.
        self.parking.held -= u64::from(held.is_some());
        Answer::Held
    }

    /// Decides the parked asks that are due at `now` (the loop's clock)
    /// until one is answered: writes its reply into `out` and returns its
    /// token; `None` when none is due. Call it until `None` before serving
    /// new requests; what the answer left behind goes to `keep` first.
    pub fn next_ready(&mut self, now: Nanos, out: &mut Vec<u8>, keep: &mut impl Keep) -> Option<Token> {
        self.keeping(now, keep, |s| s.ready_now(now, out))
    }

    fn ready_now(&mut self, now: Nanos, out: &mut Vec<u8>) -> Option<Token> {
        // Requests the store answered go first: they arrived earlier.
        if let Some(token) = self.next_lease_reply(out) {
            return Some(token);
        }
        while let Some((token, body, round, held)) = self.next_resumed() {
            if self.wait_for_claims(now, token, &body, round, held) {
                continue;
            }
            if self.answer_or_hold(now, token, &body, held, out) == Answer::Now {
                let go = held.is_some() && wire::classify_reply(out) == ReplyKind::Go;
                self.parking.held_go += u64::from(go);
                return Some(token);
            }
        }
        while let Some((queue, parked)) = self.parking.due(now) {
            if self.wait_for_claims(now, parked.token, &parked.body, 0, Some((parked.until, parked.transient))) {
                continue;
            }
            let Some(sorry) = self.decide(now, &parked.body, out) else {
                self.parking.held_go += u64::from(wire::classify_reply(out) == ReplyKind::Go);
                return Some(parked.token);
            };
            let wake = now.saturating_add(sorry.retry_after);
            let in_flight = !parked.transient || self.waits_for_flight(&sorry);
            if wake <= parked.until && in_flight && sorry.limit == queue.0 {
                self.locker.counters().unrecord_sorry(sorry.limit);
                self.parking.repark(queue, parked, wake);
                continue;
            }
            return Some(parked.token);
        }
        None
    }

    /// At shutdown: decides every parked ask once more, in arrival order,
    /// one per call (go if the limit allows it now, else sorry), writing
    /// its reply into `out` and returning its token; `None` when all are
    /// answered. Nothing is held from the first call on. What the answer
    /// left behind goes to `keep` first.
    pub fn next_final(&mut self, now: Nanos, out: &mut Vec<u8>, keep: &mut impl Keep) -> Option<Token> {
        self.keeping(now, keep, |s| s.final_now(now, out))
    }

    fn final_now(&mut self, now: Nanos, out: &mut Vec<u8>) -> Option<Token> {
        if let Some(token) = self.next_final_lease(out) {
            return Some(token);
        }
        if self.final_waiters.is_empty() && self.waiting.len() > 0 {
            self.final_waiters = self.waiting.take_all();
            self.final_waiters.reverse();
        }
        if let Some((token, body)) = self.final_waiters.pop() {
            let _ = self.decide(now, &body, out);
            return Some(token);
        }
        if self.finals.is_empty() && !self.parking.is_empty() {
            self.finals = self.parking.take_all();
            self.finals.reverse();
            self.parking = Parking::new(0);
        }
        let (_, parked) = self.finals.pop()?;
        let _ = self.decide(now, &parked.body, out);
        Some(parked.token)
    }

    /// Asks parked now.
    pub fn parked(&self) -> usize {
        self.parking.len()
    }

    /// Asks held since start, and those of them answered go.
    pub fn held(&self) -> (u64, u64) {
        (self.parking.held, self.parking.held_go)
    }

    /// How long `sorry`, answered at `now`, may be held, and whether only
    /// for the peers' in-flight wait: until when, or `None` to answer it.
    fn hold_of(&self, sorry: &Sorry, now: Nanos) -> Option<(Nanos, bool)> {
        let hold = sorry.asked_hold.unwrap_or_else(|| self.locker.limit(sorry.limit).hold());
        if hold > 0 && sorry.retry_after <= hold {
            return Some((now.saturating_add(hold), false));
        }
        let in_flight = self.peering.is_some() && self.waits_for_flight(sorry);
        in_flight.then(|| (now.saturating_add(IN_FLIGHT_HOLD), true))
    }

    /// Whether `sorry` only waits for grants in flight: the peers' in-flight
    /// rule answers with a `retry_after` of at most twice its limit's
    /// in-flight window (4 ms, more while peer messages come late).
    fn waits_for_flight(&self, sorry: &Sorry) -> bool {
        sorry.retry_after <= self.locker.share(sorry.limit).charged_for()
    }

    /// The queue a single ask would wait in, its hold, and whether that is
    /// only the peers' in-flight wait; `None` for any other request. Only
    /// on the path of asks that may be held.
    fn queue_of(&mut self, body: &[u8]) -> Option<(QueueKey, Nanos, bool)> {
        let (id, key, asked) = match wire::decode_request(body).ok()? {
            Request::Plain(b) => (self.plain_limit(b), None, None),
            Request::Go(go) if go.cost > 0 => {
                (self.lookup(go.limit).ok()?, go.key.map(Box::from), go.hold_ms.map(asked_hold))
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

/// An ask's own `hold_ms`, at most a limit's longest hold.
pub(super) fn asked_hold(ms: u64) -> Nanos {
    ms.min(crate::core::limit::MAX_HOLD_MS as u64).saturating_mul(NANOS_PER_MS)
}
