//! The protocol seam: request bytes in, reply bytes out, given `now`; and,
//! when peered, peer messages in and out.
//!
//! A loop enters a service only through `step` (the daemon, the simulated
//! group and the tests alike): every request gets exactly one reply, now
//! or, when held, later, which is what a socket needs. The service joins
//! the wire format (`wire`) to the decision table (`core`), and is where
//! protocol tests drive the whole request path without a socket. An ask
//! may be held for a go instead of answered sorry (`hold`) when the loop
//! can wait (`Io::may_hold`); peer messages come in and go out the same
//! way, so two services can be wired together by hand in a test.
//!
//! Each request is decoded once, here, and the decoded value is handed to
//! every part that needs it. The parts are owned: holding (`hold`), the
//! store's side (`store`, only when the counts live in a store, chosen at
//! construction, so a locker without one never enters its code), leases
//! (`lease`), peers (`peer`), the state file (`kept`), the limits last
//! named (`names`), the levels of a limit under parents (`parents`) and
//! when to trim the heap (`trim`). Each part carries its own behaviour,
//! handed the locker and what else it needs; the reply to a stats request
//! only reads them (`stats`).
//!
//! It must not read a clock or touch a socket: the daemon loop does both.

use crate::core::{time::ceil_ms, AskError, LimitId, Locker, Nanos, Peering, PermitAsk, Verdict};
use crate::state::Journal;
use crate::wire::{self, BatchEntry, Decoded, Decoder, ErrorReply, GoReply, Request};

mod charge;
mod hold;
mod hold_lease;
mod kept;
mod lease;
mod names;
mod parents;
mod parking;
mod peer;
mod runtime;
mod stats;
pub mod step;
mod store;
mod store_lease;
mod together;
mod trim;

pub use hold::Answer;
use hold::{HeldAsks, Sorry};
use names::Names;
pub use parking::{Token, DEFAULT_MAX_PARKED};
pub use step::{Io, Undelivered, Upkeep};
use store::StoreSide;

/// How many asks of a batch are looked up together before they are
/// decided: enough misses in flight to keep the memory busy, few enough
/// that their cache lines are still there when the decisions need them.
const BATCH_CHUNK: usize = 32;

/// The locker behind the wire.
#[derive(Debug)]
pub struct Service {
    locker: Locker,
    peering: Option<Peering>,
    /// The limits last named, remembered (see `names`).
    names: Names,
    /// What the call being answered changed, for the state file (see `journaled`).
    journal: Journal,
    /// What the daemon tells the service of itself, for stats.
    status: Status,
    /// Asks held for a go (see `serve`).
    holding: HeldAsks,
    /// The store's side, when the counts live in a store.
    store: Option<Box<StoreSide>>,
    /// Decodes each request once, a batch's entries and every `all`'s
    /// parts with it, into buffers kept from one request to the next.
    decoder: Decoder,
    /// The verdicts of an `all`'s parts, kept from one `all` to the next.
    verdicts: Vec<Verdict>,
    /// When to hand the heap's free memory back (see `trim`).
    trim: trim::Trim,
}

/// What the service reports of itself besides its limits' counts, for
/// stats, metrics and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Why every grant is refused for now, if it is: the state file cannot
    /// grow, and a grant is never answered before it is recorded.
    pub refusing: Option<&'static str>,
    /// CURVE handshakes refused so far, as the daemon's ZAP handler counts
    /// them.
    pub refused_connections: u64,
    /// Client connections the daemon could not accept (out of open files).
    pub accept_failures: u64,
    /// Replies the daemon could not deliver (the client went away, or
    /// would not take its replies), and how many of them were go.
    pub undelivered: u64,
    pub undelivered_go: u64,
    /// Asks parked now (held, or waiting for the store).
    pub parked: usize,
    /// Asks held since start, and those of them answered go.
    pub held: u64,
    pub held_go: u64,
    /// The store's claims: asked, permits claimed, failed, on their way.
    pub store: Option<StoreStatus>,
}

/// The store's side of `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStatus {
    pub claims: u64,
    pub claimed: u64,
    pub failed: u64,
    pub in_flight: usize,
    /// Why the store fails, when it does.
    pub down: Option<String>,
    /// The store's nodes, each with whether it answers.
    pub nodes: Vec<(String, bool)>,
}

/// What the daemon tells the service of itself (see `Service::note`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// Grants are refused with this reason from now on, or granted again
    /// with `None`: the state file cannot grow (a grant must be recorded
    /// before its reply). Heartbeats, releases and stats are still answered.
    Refusing(Option<&'static str>),
    /// CURVE handshakes the allowlist refused so far.
    RefusedConnections(u64),
    /// Client connections that could not be accepted so far.
    AcceptFailures(u64),
    /// Replies that could not be delivered, and how many of them were go.
    Undelivered { replies: u64, go: u64 },
    /// The loop did not run for `paused` until `now`: a pause longer than
    /// the peer-dead time makes a peered locker learn the counts again
    /// before it grants (see `Peering::on_pause`).
    Paused { now: Nanos, paused: Nanos },
}

impl Service {
    /// Serves requests from `locker`, alone.
    pub fn new(locker: Locker) -> Service {
        Service {
            names: Names::new(&locker),
            locker,
            peering: None,
            journal: Journal::default(),
            status: Status::default(),
            holding: HeldAsks::new(DEFAULT_MAX_PARKED),
            store: None,
            decoder: Decoder::default(),
            verdicts: Vec::new(),
            trim: trim::Trim::default(),
        }
    }

    /// Holds at most `max` asks at once (see `serve`).
    pub fn with_max_parked(mut self, max: usize) -> Service {
        self.holding = HeldAsks::new(max);
        self
    }

    /// Serves requests from `locker`, sharing its counts with peers.
    pub fn peered(mut locker: Locker, mut peering: Peering, now: Nanos) -> Service {
        peering.fit_to(&locker);
        locker.sharing().set_view(peering.view(now));
        Service { peering: Some(peering), ..Service::new(locker) }
    }

    /// Keeps every counting limit's counts in a store from now on: asks
    /// are decided from claims (see `core::claims`), which the daemon
    /// carries to the store (`step::flush`) and back (`on_store`); and
    /// semaphore leases in it (answered from this locker when the loop
    /// may not hold, see `Io::may_hold`).
    pub fn with_store(mut self) -> Service {
        self.store = Some(Box::new(StoreSide::new(self.locker.figures().stats().count())));
        self
    }

    /// The decision table, for inspection.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// The peering state, when peered, for inspection.
    pub fn peering(&self) -> Option<&Peering> {
        self.peering.as_ref()
    }

    /// What the service reports of itself besides its limits' counts.
    pub fn status(&self) -> Status {
        let mut status = self.status.clone();
        status.parked = self.holding.len() + self.store.as_ref().map_or(0, |s| s.len());
        (status.held, status.held_go) = self.holding.counts();
        status.store = self.store.as_ref().map(|s| s.status());
        status
    }

    /// Keeps what refers to limits by id in step with a table whose ids
    /// may have moved (a reload, or idle runtime limits dropped).
    fn limits_moved(&mut self) {
        self.holding.leases.recheck();
        if let Some(p) = &mut self.peering {
            p.fit_to(&self.locker);
        }
        if let Some(s) = &mut self.store {
            s.reset(self.locker.figures().stats().count());
        }
        self.names.reset(&self.locker);
    }

    /// Takes `peers` as the configured peers from `raw`, a reading of the
    /// loop's clock, on (see `Peering::set_peers`); nothing unless peered.
    fn repeer(&mut self, raw: Nanos, peers: Vec<Box<str>>) {
        let Some(p) = &mut self.peering else { return };
        let now = p.group_now(raw);
        if p.set_peers(now, peers) {
            self.locker.sharing().set_view(p.view(now));
        }
    }

    /// Enters the instant `raw`, a reading of the loop's clock, and returns
    /// the time to decide by: the group's time when peered (this locker's
    /// clock moved to the middle of its peers', see `core::peering::clock`),
    /// with the table following the peers' view of that instant; `raw`
    /// itself alone. Every entry point that decides calls this first.
    #[inline]
    fn enter(&mut self, raw: Nanos) -> Nanos {
        let Some(p) = &mut self.peering else { return raw };
        let now = p.group_now(raw);
        self.locker.sharing().set_view(p.view(now));
        now
    }

    /// Answers a decoded request at `now` (the loop's clock), into `out`
    /// (cleared first); tells whether the answer was a single ask's sorry,
    /// which holding may hold.
    fn decide(&mut self, now: Nanos, decoded: &Decoded, out: &mut Vec<u8>) -> Option<Sorry> {
        if let Ok(Request::Plain(body)) = &decoded.request {
            return self.decide_plain(now, body, out);
        }
        out.clear();
        let now = self.enter(now);
        let request = match &decoded.request {
            Ok(r) => r,
            Err(e) => {
                self.locker.counters().record_error(None);
                wire::encode(&error_reply(e), out);
                return None;
            }
        };
        if let Some(reason) = self.status.refusing.filter(|_| may_grant(request)) {
            refuse_grant(&mut self.locker, request, reason, out);
            return None;
        }
        match request {
            // Decided by `decide_plain` above; the arm keeps the match whole.
            Request::Plain(body) => return self.plain(now, body, out),
            Request::Go(go) => return self.go(now, go, out),
            Request::Batch(_) => self.batch(now, decoded, out),
            Request::All(all) => return self.all(now, all, decoded.parts(), out),
            Request::Refund(refund) => self.refund(now, refund, out),
            Request::Charge(charge) => self.charge(now, charge, out),
            Request::Reset(reset) => self.reset(now, reset, out),
            Request::Acquire(_) | Request::Heartbeat(_) | Request::Release(_) => {
                self.lease(now, request, out);
            }
            Request::Stats => {
                let reply = stats::reply(&self.locker, self.peering.as_ref(), self.status(), now);
                wire::encode(&reply, out);
            }
        }
        None
    }

    /// Decodes `body` and decides it, as `decide` does.
    fn decide_body(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        let decoded = self.decoder.decode(body);
        let sorry = self.decide(now, &decoded, out);
        self.decoder.recycle(decoded);
        sorry
    }

    /// `decide` for a plain request (`body`, the seed's form), which the
    /// plain path of `serve` calls straight.
    #[inline]
    fn decide_plain(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        out.clear();
        let now = self.enter(now);
        if let Some(reason) = self.status.refusing {
            refuse_grant(&mut self.locker, &Request::Plain(body), reason, out);
            return None;
        }
        self.plain(now, body, out)
    }

    #[inline]
    fn plain(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        let id = self.names.plain(&self.locker, body);
        // A plain request names no key and costs 1, which every counting
        // limit allows; a semaphore cannot be taken without a lease, and a
        // limit with a parent without the keys of the limits above it, so
        // each answers sorry (and counts an error).
        if self.locker.parent(id).is_some() {
            self.locker.counters().record_error(Some(id));
            out.extend_from_slice(wire::SORRY);
            return None;
        }
        let ask = PermitAsk::new(id);
        match self.count(now, &ask) {
            Ok(v) if v.go => {
                self.journal.note_go(id, None, &v);
                out.extend_from_slice(wire::GO);
                None
            }
            // A limit in shadow answers its sorry go, having taken nothing.
            Ok(_) if self.locker.shadow(id) => {
                self.locker.counters().record_shadow_sorry(id);
                out.extend_from_slice(wire::GO);
                None
            }
            Ok(v) => {
                out.extend_from_slice(wire::SORRY);
                Some(Sorry { limit: id, retry_after: v.retry_after, asked_hold: None })
            }
            Err(_) => {
                out.extend_from_slice(wire::SORRY);
                None
            }
        }
    }

    fn go(&mut self, now: Nanos, go: &wire::Ask, out: &mut Vec<u8>) -> Option<Sorry> {
        let verdict = match self.find_go(now, go) {
            Ok(limit) if self.has_levels(limit, go.parents) => return self.go_with_levels(now, limit, go, out),
            Ok(limit) => {
                let ask = self.unreserved_in_shadow(permit_ask(limit, go), go);
                self.count(now, &ask).map(|v| (limit, v))
            }
            Err(e) => Err(e),
        };
        match verdict {
            // Never held: the sorry is answered go at once.
            Ok((id, v)) if !v.go && self.in_shadow(id, go) => {
                if go.cost > 0 {
                    self.locker.counters().record_shadow_sorry(id);
                }
                wire::encode_go_reply(&GoReply { ok: true, shadow_sorry: true, ..go_reply(&v, go) }, out);
                None
            }
            Ok((id, v)) => {
                self.journal.note_go(id, go.key, &v);
                wire::encode_go_reply(&go_reply(&v, go), out);
                let asked_hold = go.hold_ms.map(parking::asked_hold);
                (!v.go && go.cost > 0).then_some(Sorry { limit: id, retry_after: v.retry_after, asked_hold })
            }
            Err(e) => {
                wire::encode(&error_reply(&e), out);
                None
            }
        }
    }

    /// Whether `go`, an ask of `limit`, is in shadow: it says so, or its
    /// limit is. Asked only of a sorry (and of an ask that would wait):
    /// a go never pays for it.
    #[inline]
    fn in_shadow(&self, limit: LimitId, go: &wire::Ask) -> bool {
        go.shadow || self.locker.shadow(limit)
    }

    /// `ask`, the core's form of `go`, without its wait when it is in
    /// shadow: a reservation would hide the sorry a shadow ask is for.
    #[inline]
    fn unreserved_in_shadow<'k>(&self, ask: PermitAsk<'k>, go: &wire::Ask) -> PermitAsk<'k> {
        match ask.max_wait_ms {
            0 => ask,
            _ if self.in_shadow(ask.limit, go) => PermitAsk { max_wait_ms: 0, ..ask },
            _ => ask,
        }
    }

    /// Decides `ask` at `now`: from the table, or from the store's claims
    /// when the counts live in a store (see `store`).
    #[inline]
    fn count(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        match &mut self.store {
            None => self.locker.ask(now, ask),
            Some(store) => {
                // The table does not see a store's asks: they keep a
                // runtime limit from falling idle here.
                self.locker.runtime().touch(now, ask.limit);
                store.count(&mut self.locker, now, ask)
            }
        }
    }

    /// Answers every entry of a batch in order, each exactly as if it had
    /// come on its own: the same decision, the same counters, the same
    /// grants for the peers, and an error for that entry alone when it has
    /// one. An `all` entry is decided in its turn as an `all` alone is,
    /// and never held, as no entry is.
    fn batch(&mut self, now: Nanos, decoded: &Decoded, out: &mut Vec<u8>) {
        let entries = decoded.entries();
        wire::begin_batch_reply(entries.len(), out);
        let mut parts = decoded.entry_parts();
        for chunk in entries.chunks(BATCH_CHUNK) {
            // With many live keys each ask's key misses the cache. Asked one
            // at a time, every miss is waited for in turn; looked up all at
            // once first, the misses overlap, and the decisions below find
            // their keys in the cache.
            for entry in chunk.iter().flatten() {
                if let BatchEntry::Go(go) = entry {
                    if let Ok(limit) = self.names.lookup(&self.locker, go.limit) {
                        self.locker.prefetch(&permit_ask(limit, go));
                    }
                }
            }
            for entry in chunk {
                match entry {
                    Ok(BatchEntry::Go(go)) => {
                        let _ = self.go(now, go, out);
                    }
                    Ok(BatchEntry::All(all)) => {
                        let _ = self.all(now, all, parts.of(all), out);
                    }
                    Err(e) => {
                        self.locker.counters().record_error(None);
                        wire::encode(&error_reply(&e), out);
                    }
                }
            }
        }
    }
}

/// Whether answering `request` may grant permits or a lease.
fn may_grant(request: &Request) -> bool {
    matches!(request, Request::Plain(_) | Request::Go(_) | Request::Batch(_) | Request::All(_) | Request::Acquire(_))
}

/// The core's ask for a go of `limit`, from the wire's.
#[inline]
fn permit_ask<'k>(limit: LimitId, go: &wire::Ask<'k>) -> PermitAsk<'k> {
    let (max_wait_ms, hold_ms) = (go.max_wait_ms.unwrap_or(0), go.hold_ms.unwrap_or(0));
    PermitAsk { limit, key: go.key, cost: go.cost, up_to: go.up_to, max_wait_ms, hold_ms }
}

/// The reply to a go; `granted` and `wait_ms` appear only when the ask used
/// `up_to` and `max_wait_ms`, so replies to older clients keep their bytes.
fn go_reply(v: &Verdict, ask: &wire::Ask) -> GoReply {
    GoReply {
        ok: v.go,
        limit: v.limit,
        remaining: v.remaining,
        retry_after_ms: ceil_ms(v.retry_after),
        reset_after_ms: ceil_ms(v.reset_after),
        granted: ask.up_to.then_some(v.granted),
        wait_ms: ask.max_wait_ms.map(|_| ceil_ms(v.wait)),
        shadow_sorry: false,
    }
}

/// Answers a request that may grant while grants are refused: sorry in
/// the plain form, which has no room for a reason, and an error naming
/// the reason in the structured form. Each counts as an error in `locker`.
#[cold]
fn refuse_grant(locker: &mut Locker, request: &Request, reason: &str, out: &mut Vec<u8>) {
    locker.counters().record_error(None);
    match request {
        Request::Plain(_) => out.extend_from_slice(wire::SORRY),
        _ => wire::encode(&ErrorReply { error: reason.to_owned() }, out),
    }
}

/// Answers a request the loop refuses before it is served (a multi-part
/// message, a reset its sender may not make, see `daemon::admins`),
/// writing an error map saying `why` into `out` (cleared first), counting
/// an error in `locker`.
fn reject(locker: &mut Locker, why: impl std::fmt::Display, out: &mut Vec<u8>) {
    out.clear();
    locker.counters().record_error(None);
    wire::encode(&ErrorReply { error: why.to_string() }, out);
}

fn error_reply(e: &impl std::fmt::Display) -> ErrorReply {
    ErrorReply { error: e.to_string() }
}

#[cfg(test)]
mod tests;
