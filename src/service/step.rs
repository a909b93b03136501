//! The seam: the only way into a serving locker, for the daemon
//! (`daemon::server`), the simulated group (`sim`) and the tests. Each
//! function is one thing a loop does (a turn, a request, a peer message,
//! a flush, a stop, the store's answers, a reload) and fixes the order in
//! which the work of it is done, as quinn-proto's drivers only pump its
//! state machine.
//!
//! The order is the contract: parked asks that are due are answered before
//! any new request is served, so a new ask never overtakes them, and a
//! lease request held for its lease is answered in the same step as the
//! request that granted it (`hold_lease`); a turn first does what fell due
//! (leases that expired, the peers' view), then answers what is due, then
//! flushes, then looks after the state file and the heap; a flush gives
//! back what undelivered go replies took before it publishes, so the counts
//! given back travel at once; peer messages and the store's calls leave
//! after every small batch of requests (`flush`), so counts travel within
//! one turn.
//!
//! What leaves goes through an `Io`: the daemon's sockets, or the
//! simulation's queues. Nothing here reads a clock or touches a socket:
//! every function takes the loop's clock reading, and the loop keeps only
//! its sockets and its clock.

use super::{Answer, Note, Service, Token};
use crate::core::claims::{ClaimAsk, Claimed};
use crate::core::store_lease::{LeaseAnswer, LeaseCall};
use crate::core::{Limit, LimitId, Nanos, PeerEvent, PeerIx, Peering, Reloaded, TableError};
use crate::state::{self, Keep, Record, Restored};

/// Where what a step produces goes, and what the loop saw of it.
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

    /// Whether a request may be held, its reply sent later under its
    /// token: not when every request must be answered before the next is
    /// read (a caller that waits for its answer).
    #[inline]
    fn may_hold(&self) -> bool {
        true
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

    /// The replies that could not be delivered since the last call (the
    /// caller went away, or would not take them), taken out.
    fn undelivered(&mut self) -> Undelivered {
        Undelivered::default()
    }

    /// Hands the heap's free memory back to the system, after a flood of
    /// keys has gone (see `trim`).
    fn release_free_heap(&mut self) {}
}

/// A caller that waits for its answer, and nowhere else to send: every
/// request is answered at once, its reply left in the step's `out`; what
/// else a step would send (replies to parked asks, peer messages, the
/// store's calls) is dropped. For a request served on its own, as a test
/// or a stats snapshot serves one.
impl Io for () {
    fn reply(&mut self, _: Token, _: &[u8]) {}

    fn may_hold(&self) -> bool {
        false
    }
}

/// Replies a loop could not deliver (see `Io::undelivered`).
#[derive(Debug, Default)]
pub struct Undelivered {
    /// How many, and how many of them were go.
    pub replies: u64,
    pub go: u64,
    /// Each go among them that took permits, with the request it
    /// answered: what it took is given back, since nobody goes with it.
    pub lost_go: Vec<(Box<[u8]>, Vec<u8>)>,
}

/// A state file kept on the loop's timer: synced and compacted when due,
/// and asked again for room while it has none.
pub trait Upkeep: Keep {
    /// When the file next needs a turn, if ever.
    fn next_upkeep(&self) -> Option<Nanos> {
        None
    }

    /// Does what is due at `now`; says whether grants must be refused
    /// (`Some(Some(why))`) or may be made again (`Some(None)`) when that
    /// changed.
    fn upkeep(&mut self, now: Nanos) -> Option<Option<&'static str>> {
        let _ = now;
        None
    }
}

/// No state file: nothing to look after.
impl Upkeep for () {}

/// A loop turn at `now` with nothing read yet: the work that fell due,
/// the parked asks that are due, what is to be sent (`flush`), then the
/// state file's upkeep and the heap's trim. `out` is the loop's reply
/// buffer, reused.
pub fn turn(service: &mut Service, now: Nanos, keep: &mut impl Upkeep, io: &mut impl Io, out: &mut Vec<u8>) {
    // The work that fell due: expired leases freed and their count granted
    // to waiters, the peers followed, idle runtime limits dropped, the
    // store's hands whose time is up let go.
    if let Some(s) = &mut service.store {
        s.lease_calls.recheck(now);
    }
    let at = service.enter(now);
    service.locker.expire(at);
    // Not while claims are on their way: their answers name limits by id,
    // which a drop would move under them.
    if !service.store.as_ref().is_some_and(|s| s.claiming()) && !service.locker.runtime().drop_idle(at).is_empty() {
        service.limits_moved();
    }
    if let Some(s) = &mut service.store {
        s.sweep(at);
    }
    answer_due(service, now, keep, io, out);
    flush(service, now, keep, io);
    if let Some(refusing) = keep.upkeep(now) {
        note(service, Note::Refusing(refusing));
    }
    if service.trim.note(now, service.locker.figures().live_keys()) {
        io.release_free_heap();
    }
}

/// When the loop must turn next, if ever: it caps its wait on the sockets
/// by this instant. The next lease expiry or end of a queued acquire's
/// wait needs a wake-up, and so do peering's heartbeats, snapshots and the
/// end of joining; so does the end of a slot that holds keys, so that
/// their memory comes back without waiting for the next ask of that limit;
/// so does the next parked ask to decide again or to answer at the end of
/// its hold; and so does the state file's upkeep (`Upkeep::next_upkeep`).
pub fn next_deadline(service: &Service, keep: &impl Upkeep) -> Option<Nanos> {
    let peering = service.peering.as_ref().map(Peering::next_deadline);
    let due = [service.locker.next_deadline(), peering].into_iter().flatten().min();
    // Due by the group's clock; the loop waits by its own, as parked
    // asks are.
    let due = match &service.peering {
        Some(p) => due.map(|d| p.clock().raw_at(d)),
        None => due,
    };
    let recheck = service.store.as_ref().and_then(|s| s.lease_calls.next_recheck());
    [due, service.holding.next_wake(), recheck, keep.next_upkeep()].into_iter().flatten().min()
}

/// Serves one request received at `now` under `token`: the parked asks
/// that are due first, then this one, answered through `io` at once or
/// held (`Answer::Held`: the loop keeps the caller's envelope under
/// `token` until `io` is asked to reply to it). A loop that may not hold
/// (`Io::may_hold`) gets every answer at once.
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
    let answer = service.serve_for(now, token, body, out, keep, io);
    if answer == Answer::Now {
        io.answer(token, body, out);
    }
    // A release may have granted a held acquire its lease: it leaves now.
    if !service.holding.leases.is_empty() {
        answer_due(service, now, keep, io, out);
    }
    answer
}

/// Answers the request received under `token` with an error saying
/// `why`, without serving it: one the loop refuses before it is read (a
/// message of several parts). It counts as an error.
pub fn refuse(service: &mut Service, token: Token, why: impl std::fmt::Display, io: &mut impl Io, out: &mut Vec<u8>) {
    super::reject(&mut service.locker, why, out);
    io.reply(token, out);
}

/// Takes in one message from peer `peer` at `now`; whether it was
/// understood. What it changes leaves with the next `flush`.
pub fn peer(service: &mut Service, now: Nanos, peer: PeerIx, body: &[u8]) -> bool {
    let Some(p) = &mut service.peering else { return false };
    let refusing = service.status.refusing.is_some();
    let heard = super::peer::on_peer(&mut service.locker, p, refusing, now, peer, body);
    if heard.created {
        service.names.forget_plain();
    }
    heard.understood
}

/// Takes the store's answers in at `now`; the requests they free are
/// answered by the next turn.
pub fn store_answers(service: &mut Service, now: Nanos, claims: Vec<Claimed>, leases: Vec<LeaseAnswer>) {
    if let Some(s) = &mut service.store {
        s.on_answers((&mut service.locker, &mut service.holding), now, claims, leases);
    }
}

/// What the loop tells of itself (see `Note`).
pub fn note(service: &mut Service, note: Note) {
    let status = &mut service.status;
    match note {
        Note::Refusing(reason) => status.refusing = reason,
        Note::RefusedConnections(n) => status.refused_connections = n,
        Note::AcceptFailures(n) => status.accept_failures = n,
        Note::Undelivered { replies, go } => {
            status.undelivered += replies;
            status.undelivered_go += go;
        }
        Note::Paused { now, paused } => {
            if let Some(p) = &mut service.peering {
                super::peer::on_pause(&mut service.locker, p, now, paused);
            }
        }
    }
}

/// Gives back what the go replies the loop could not deliver took, at
/// `now`, then sends what is to be sent: peer messages (the gifts among
/// them recorded in `keep` before they leave), the events worth logging,
/// and the store's calls.
pub fn flush(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io) {
    let lost = io.undelivered();
    if lost.replies > 0 {
        note(service, Note::Undelivered { replies: lost.replies, go: lost.go });
    }
    for (request, reply) in &lost.lost_go {
        service.give_back_undelivered(now, request, reply, keep);
    }
    if let Some(p) = &mut service.peering {
        if let Some(full) = super::peer::publish(&mut service.locker, p, now, keep, |bytes| io.publish(bytes)) {
            service.status.refusing = Some(full);
        }
        while let Some(event) = p.poll_event() {
            io.event(event);
        }
    }
    if let Some(s) = &mut service.store {
        let (claims, leases) = s.take_calls();
        if !claims.is_empty() || !leases.is_empty() {
            io.store(claims, leases);
        }
    }
}

/// At a stop: answers every parked ask once (go if its limit allows it
/// now, else sorry), in arrival order; how many.
pub fn stop(service: &mut Service, now: Nanos, keep: &mut impl Keep, io: &mut impl Io, out: &mut Vec<u8>) -> usize {
    let mut answered = 0;
    while let Some(token) = service.journaled(now, keep, |s| s.next_final(now, out)) {
        io.reply(token, out);
        answered += 1;
    }
    answered
}

/// Puts back the records of earlier runs at `now`, before serving (see
/// `state::restore`); returns what was put back and the records the new
/// state file starts with, of run `run`.
pub fn restore<'a>(
    service: &mut Service,
    now: Nanos,
    run: u32,
    records: impl Iterator<Item = Record<'a>>,
) -> (Restored, Vec<Record<'a>>) {
    let nodes = service.peering.as_mut().map(|p| p.nodes_mut());
    state::restore(&mut service.locker, nodes, now, run, records)
}

/// Takes what `restore` put back for possibly incomplete: the file was
/// written on another boot, so its unsynced tail may be lost. When peered,
/// this run owns none of the periods under way (see
/// `Peering::distrust_earlier_runs`). Alone, nothing changes: what the
/// file kept still counts, and a lost tail costs no more than a restart
/// without the file, which owns the whole limit.
pub fn distrust_restored(service: &mut Service) {
    if let Some(p) = &mut service.peering {
        p.distrust_earlier_runs();
    }
}

/// Creates a runtime limit a state file kept, as an ask with its terms
/// would, at `now`, before its counts are put back.
pub fn restore_limit(service: &mut Service, now: Nanos, limit: Limit) -> Result<LimitId, TableError> {
    service.take_terms(now, limit)
}

/// Serves `default` and `limits` from `now` on, keeping what unchanged
/// limits hold (see `Locker::reload`); the state file follows them.
pub fn reload(
    service: &mut Service,
    now: Nanos,
    (default, limits, max_keys): (Limit, Vec<Limit>, usize),
    keep: &mut impl Keep,
) -> Reloaded {
    // Peering keeps the shortest slot it started with for its schedule.
    let done = service.locker.reload(default, limits, max_keys);
    service.limits_moved();
    keep.follow_limits(service.locker(), now);
    done
}

/// Takes `peers` as the configured peers from `now` on (a reload that
/// changed them; the loop has subscribed to match): the shares follow the
/// new member set as `Peering::set_peers` says.
pub fn repeer(service: &mut Service, now: Nanos, peers: Vec<Box<str>>) {
    service.repeer(now, peers);
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
    while let Some(token) = service.journaled(now, keep, |s| s.next_ready(now, out)) {
        io.reply(token, out);
    }
}
