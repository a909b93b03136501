//! One turn of a locker's loop, without the loop: the order in which the
//! work of a turn is done, shared by the daemon (`daemon::server`) and the
//! simulated group (`sim`), as quinn-proto's drivers only pump its state
//! machine.
//!
//! The order is the contract: parked asks that are due are answered before
//! any new request is served, so a new ask never overtakes them, and a
//! lease request held for its lease is answered in the same step as the
//! request that granted it (`hold_lease`); a turn
//! first does what fell due (leases that expired, the peers' view), then
//! answers what is due, then publishes; peer messages and the store's
//! calls leave after every small batch of requests (`flush`), so counts
//! travel within one turn.
//!
//! What leaves goes through an `Io`: the daemon's sockets, or the
//! simulation's queues. Nothing here reads a clock or touches a socket:
//! every function takes the loop's clock reading.

use super::{Answer, Service, Token};
use crate::core::claims::ClaimAsk;
use crate::core::store_lease::LeaseCall;
use crate::core::{Nanos, PeerEvent, PeerIx};
use crate::state::Keep;

/// Where what a turn produces goes.
pub trait Io {
    /// Sends `body` as the reply to the request served under `token`.
    fn reply(&mut self, token: Token, body: &[u8]);

    /// Sends `body` as the reply to `request`, just served under `token`.
    /// A loop that cannot deliver it gives back what a go in it took, and
    /// needs the request to know what that was.
    #[inline]
    fn answer(&mut self, token: Token, request: &[u8], body: &[u8]) {
        let _ = request;
        self.reply(token, body);
    }

    /// Sends one peer message to every peer.
    fn publish(&mut self, bytes: &[u8]) {
        let _ = bytes;
    }

    /// A peering event worth logging.
    fn event(&mut self, event: PeerEvent) {
        let _ = event;
    }

    /// Why the caller of the request served under `token` may not reset
    /// `key` in `limit`, if it may not. A loop that tells callers apart
    /// decides it here, and logs each reset asked.
    fn refuses_reset(&mut self, token: Token, limit: &str, key: &str) -> Option<&'static str> {
        let _ = (token, limit, key);
        None
    }

    /// Hands claims and lease calls to the store.
    fn store(&mut self, claims: Vec<ClaimAsk>, leases: Vec<LeaseCall>) {
        let _ = (claims, leases);
    }
}

/// A loop turn at `now` with nothing read yet: the work that fell due,
/// the parked asks that are due, then what is to be sent. `out` is the
/// loop's reply buffer, reused.
pub fn turn(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io, out: &mut Vec<u8>) {
    service.on_timeout(now);
    answer_due(service, now, keep, io, out);
    flush_keeping(service, now, keep, io);
}

/// Serves one request received at `now` under `token`: the parked asks
/// that are due first, then this one, answered through `io` at once or
/// held (`Answer::Held`: the loop keeps the caller's envelope under
/// `token` until `io` is asked to reply to it).
#[inline]
pub fn request(
    service: &mut Service,
    now: Nanos,
    token: Token,
    body: &[u8],
    keep: &mut impl Keep,
    io: &mut impl Io,
    out: &mut Vec<u8>,
) -> Answer {
    answer_due(service, now, keep, io, out);
    let answer = service.serve_for(now, token, body, out, keep, &mut |limit, key| io.refuses_reset(token, limit, key));
    if answer == Answer::Now {
        io.answer(token, body, out);
    }
    // A release may have granted a held acquire its lease: it leaves now.
    if !service.holding.leases.is_empty() {
        answer_due(service, now, keep, io, out);
    }
    answer
}

/// Takes in one message from peer `peer` at `now`; whether it was
/// understood. What it changes leaves with the next `flush`.
pub fn peer(service: &mut Service, now: Nanos, peer: PeerIx, body: &[u8]) -> bool {
    service.on_peer(now, peer, body)
}

/// Sends what is to be sent at `now`: peer messages, the events worth
/// logging, and the store's calls. Keeps nothing (see `flush_keeping`).
pub fn flush(service: &mut Service, now: Nanos, io: &mut impl Io) {
    flush_keeping(service, now, &mut (), io);
}

/// `flush`, with the gifts among the peer messages recorded in `keep`
/// before they leave.
pub fn flush_keeping(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io) {
    if service.peering.is_some() {
        service.publish_keeping(now, keep, |bytes| io.publish(bytes));
        while let Some(event) = service.poll_event() {
            io.event(event);
        }
    }
    if service.store.is_some() {
        let (claims, leases) = service.take_store_calls();
        if !claims.is_empty() || !leases.is_empty() {
            io.store(claims, leases);
        }
    }
}

/// At a stop: answers every parked ask once (go if its limit allows it
/// now, else sorry), in arrival order; how many.
pub fn stop(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io, out: &mut Vec<u8>) -> usize {
    let mut answered = 0;
    while let Some(token) = service.next_final(now, out, keep) {
        io.reply(token, out);
        answered += 1;
    }
    answered
}

/// Answers the parked asks that are due at `now`, each recorded before its
/// reply leaves, as any reply is.
#[inline]
fn answer_due(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io, out: &mut Vec<u8>) {
    // The plain path: nothing parked and no store to wait on.
    if service.holding.len() == 0 && service.store.is_none() {
        return;
    }
    answer_ready(service, now, keep, io, out);
}

/// `answer_due` past its plain-path check, out of that path's line.
fn answer_ready(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io, out: &mut Vec<u8>) {
    while let Some(token) = service.next_ready(now, out, keep) {
        io.reply(token, out);
    }
}
