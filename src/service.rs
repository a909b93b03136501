//! The protocol seam: request bytes in, reply bytes out, given `now`; and,
//! when peered, peer messages in and out.
//!
//! `Service::respond` always produces exactly one reply, whatever the input,
//! which is what a REP socket needs. It joins the wire format (`wire`) to
//! the decision table (`core`), and it is where protocol tests drive the
//! whole request path without a socket. `on_peer` and `publish` do the same
//! for the PUB/SUB side, so two services can be wired together by hand in a
//! test. It must not read a clock or touch a socket: the daemon loop does
//! both. Lease requests are in `service::lease`, the peer side in
//! `service::peer`, the state file's side in `service::kept`.

use crate::core::claims::Claims;
use crate::core::time::NANOS_PER_MS;
use crate::core::{
    time::ceil_ms, Algorithm, Limit, LimitId, Locker, Nanos, PeerEvent, Peering, PermitAsk, Reloaded, TableError,
    Verdict,
};
use crate::state::{Journal, Keep};
use crate::wire::{
    self, AskBatch, ErrorReply, GoReply, LimitStatsReply, PeerStatsReply, Request, StatsReply, WireError,
};

mod hold;
mod kept;
mod lease;
mod parking;
mod peer;
mod store;
mod store_lease;

pub use hold::Answer;
use hold::{asked_hold, Sorry};
use parking::{Parked, Parking, QueueKey};
pub use parking::{Token, DEFAULT_MAX_PARKED};

/// The longest plain body whose limit is remembered: longer than any limit
/// name, so every body that names a limit fits.
const PLAIN_MEMO_BYTES: usize = 64;

/// How many asks of a batch are looked up together before they are
/// decided: enough misses in flight to keep the memory busy, few enough
/// that their cache lines are still there when the decisions need them.
const BATCH_CHUNK: usize = 32;

/// The locker behind the wire.
#[derive(Debug)]
pub struct Service {
    locker: Locker,
    peering: Option<Peering>,
    /// The last plain body and the limit it selects. A caller sends the same
    /// body over and over, and comparing a few bytes costs less than hashing
    /// them again; limits never change while serving, so this stays true.
    plain_memo: (Vec<u8>, LimitId),
    /// The limit the last structured ask named: asks in a row, and the asks
    /// of a batch, usually name the same one, and comparing its name costs
    /// less than hashing it.
    last_named: Option<LimitId>,
    /// What the call being answered changed, for the state file (see `keeping`).
    journal: Journal,
    /// CURVE handshakes refused so far, as the daemon's ZAP handler counts
    /// them; only reported in stats.
    refused_connections: u64,
    /// Client connections the daemon could not accept (out of open files),
    /// as its socket monitor counts them; only reported.
    accept_failures: u64,
    /// Why every grant is refused for now, if it is: the state file cannot
    /// grow, and a grant is never answered before it is recorded.
    refusing: Option<&'static str>,
    /// Asks held for a go (see `serve`).
    parking: Parking,
    /// Parked asks still to be answered at shutdown (see `next_final`).
    finals: Vec<(QueueKey, Parked)>,
    /// The claims taken from the store, when the counts live in one.
    claims: Option<Claims>,
    /// Requests waiting for claims (see `store`).
    waiting: store::Waiting,
    /// Requests that waited for claims, still to be answered at shutdown.
    final_waiters: Vec<(Token, Box<[u8]>)>,
    /// Lease requests sent to the store (see `store_lease`).
    lease_calls: store_lease::LeaseCalls,
}

impl Service {
    /// Serves requests from `locker`, alone.
    pub fn new(locker: Locker) -> Service {
        let default = locker.find_plain(b"");
        let plain_memo = (Vec::with_capacity(PLAIN_MEMO_BYTES), default);
        Service {
            locker,
            peering: None,
            plain_memo,
            last_named: None,
            journal: Journal::default(),
            refused_connections: 0,
            accept_failures: 0,
            refusing: None,
            parking: Parking::new(DEFAULT_MAX_PARKED),
            finals: Vec::new(),
            claims: None,
            waiting: store::Waiting::default(),
            final_waiters: Vec::new(),
            lease_calls: store_lease::LeaseCalls::default(),
        }
    }

    /// Holds at most `max` asks at once (see `serve`).
    pub fn with_max_parked(mut self, max: usize) -> Service {
        self.parking = Parking::new(max);
        self
    }

    /// Serves requests from `locker`, sharing its counts with peers.
    pub fn peered(mut locker: Locker, mut peering: Peering, now: Nanos) -> Service {
        peering.fit_to(&locker);
        locker.peers().set_view(peering.view(now));
        Service { peering: Some(peering), ..Service::new(locker) }
    }

    /// The decision table, for inspection.
    pub fn locker(&self) -> &Locker {
        &self.locker
    }

    /// The peering state, when peered, for inspection.
    pub fn peering(&self) -> Option<&Peering> {
        self.peering.as_ref()
    }

    /// Serves `default` and `limits` from now on, keeping what unchanged
    /// limits hold (see `Locker::reload`). Peering keeps the shortest slot
    /// it started with for its schedule.
    pub fn reload(&mut self, default: Limit, limits: Vec<Limit>, max_keys: usize) -> Reloaded {
        let done = self.locker.reload(default, limits, max_keys);
        if let Some(c) = &mut self.claims {
            c.reset(self.locker.figures().stats().count());
        }
        // Limit ids may have moved: forget the remembered plain body.
        let default = self.locker.find_plain(b"");
        self.plain_memo.0.clear();
        self.plain_memo.1 = default;
        done
    }

    /// When the service next needs `on_timeout` and `publish`, if ever: the
    /// loop caps its wait on the sockets by this instant. The next lease
    /// expiry or end of a queued acquire's wait needs a wake-up, and so do
    /// peering's heartbeats, snapshots and the end of joining; so does the
    /// end of a slot that holds keys, so that their memory comes back
    /// without waiting for the next ask of that limit.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let peering = self.peering.as_ref().map(Peering::next_deadline);
        let due = [self.locker.next_deadline(), peering].into_iter().flatten().min();
        // Due by the group's clock; the loop waits by its own, as parked
        // asks are.
        let due = match &self.peering {
            Some(p) => due.map(|d| p.clock().raw_at(d)),
            None => due,
        };
        [due, self.parking.next_wake()].into_iter().flatten().min()
    }

    /// The time for `raw`, a reading of the loop's clock: the group's time
    /// when peered (this locker's clock moved to the middle of its peers',
    /// see `core::peering::clock`), `raw` itself alone. Every entry point
    /// takes the loop's reading and decides by this.
    #[inline]
    fn now(&mut self, raw: Nanos) -> Nanos {
        match &mut self.peering {
            Some(p) => p.group_now(raw),
            None => raw,
        }
    }

    /// Does the work that falls due at `now` (see `next_deadline`): frees
    /// expired leases, grants their count to waiters, and follows the peers.
    pub fn on_timeout(&mut self, now: Nanos) {
        let now = self.now(now);
        self.locker.expire(now);
        if let Some(c) = &mut self.claims {
            c.sweep(now);
        }
        if let Some(p) = &mut self.peering {
            self.locker.peers().set_view(p.view(now));
        }
    }

    /// The next peering event worth logging, if any.
    pub fn poll_event(&mut self) -> Option<PeerEvent> {
        self.peering.as_mut().and_then(Peering::poll_event)
    }

    /// Answers one single-part request received at `now`, writing the reply
    /// into `out` (cleared first). A batch of asks gets one reply holding
    /// each ask's reply in order. What the request left behind goes to
    /// `keep` before this returns (`&mut ()` keeps nothing).
    pub fn respond(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>, keep: &mut impl Keep) {
        self.keeping(now, keep, |s| s.decide(now, body, out));
    }

    /// `respond`, telling whether the answer was a single ask's sorry.
    fn decide(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        out.clear();
        if let Some(p) = &mut self.peering {
            let now = p.group_now(now);
            self.locker.peers().set_view(p.view(now));
            return self.respond_at(now, body, out);
        }
        self.respond_at(now, body, out)
    }

    #[inline]
    fn respond_at(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        let request = wire::decode_request(body);
        if let (Some(reason), Ok(r)) = (self.refusing, &request) {
            if may_grant(r) {
                self.refuse_grant(r, reason, out);
                return None;
            }
        }
        match request {
            Ok(Request::Plain(body)) => return self.plain(now, body, out),
            Ok(Request::Go(go)) => return self.go(now, go, out),
            Ok(Request::Batch(batch)) => self.batch(now, &batch, out),
            Ok(Request::Acquire(ask)) => self.acquire(now, ask, out),
            Ok(Request::Heartbeat(beat)) => self.heartbeat(now, beat, out),
            Ok(Request::Release(release)) => self.release(now, release, out),
            Ok(Request::Stats) => wire::encode(&self.stats(now), out),
            Err(e) => self.reject(e, out),
        }
        None
    }

    /// Refuses every grant from now on with `reason`, or grants again with
    /// `None`. Grants are refused while the state file cannot grow (a
    /// grant must be recorded before its reply, and a full disk could not
    /// record it): each call's `Keep` says so after its records, and the
    /// daemon's keeper, trying again on its timer, says when it can.
    /// Heartbeats, releases and stats are still answered.
    pub fn set_refusing(&mut self, reason: Option<&'static str>) {
        self.refusing = reason;
    }

    /// Why grants are refused for now, if they are (see `set_refusing`).
    pub fn refusing(&self) -> Option<&'static str> {
        self.refusing
    }

    /// Answers a request that may grant while grants are refused: sorry in
    /// the plain form, which has no room for a reason, and an error naming
    /// the reason in the structured form. Each counts as an error.
    #[cold]
    fn refuse_grant(&mut self, request: &Request, reason: &str, out: &mut Vec<u8>) {
        self.locker.counters().record_error(None);
        match request {
            Request::Plain(_) => out.extend_from_slice(wire::SORRY),
            _ => wire::encode(&ErrorReply { error: reason.to_owned() }, out),
        }
    }

    /// Answers a request that could not be decoded (for instance a
    /// multi-part message), writing an error map into `out` (cleared first).
    pub fn reject(&mut self, error: WireError, out: &mut Vec<u8>) {
        out.clear();
        self.locker.counters().record_error(None);
        wire::encode(&ErrorReply { error: error.to_string() }, out);
    }

    fn plain(&mut self, now: Nanos, body: &[u8], out: &mut Vec<u8>) -> Option<Sorry> {
        let id = self.plain_limit(body);
        // A plain request names no key and costs 1, which every counting
        // limit allows; a semaphore cannot be taken without a lease, so it
        // answers sorry (and counts an error).
        let ask = PermitAsk::new(id);
        match self.count(now, &ask) {
            Ok(v) if v.go => {
                self.journal.note_go(id, None, &v);
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

    fn plain_limit(&mut self, body: &[u8]) -> LimitId {
        if body.len() > PLAIN_MEMO_BYTES {
            return self.locker.find_plain(body);
        }
        let (last, id) = &mut self.plain_memo;
        if body != &last[..] {
            *id = self.locker.find_plain(body);
            // Within the capacity reserved at start, so this never allocates.
            last.clear();
            last.extend_from_slice(body);
        }
        *id
    }

    fn go(&mut self, now: Nanos, go: wire::Ask, out: &mut Vec<u8>) -> Option<Sorry> {
        let verdict = match self.find(go.limit) {
            Ok(limit) => self.count(now, &permit_ask(limit, &go)).map(|v| (limit, v)),
            Err(e) => Err(e.into()),
        };
        match verdict {
            Ok((id, v)) => {
                self.journal.note_go(id, go.key, &v);
                wire::encode_go_reply(&go_reply(&v, &go), out);
                let asked_hold = go.hold_ms.map(asked_hold);
                (!v.go && go.cost > 0).then_some(Sorry { limit: id, retry_after: v.retry_after, asked_hold })
            }
            Err(e) => {
                wire::encode(&error_reply(&e), out);
                None
            }
        }
    }

    /// Answers every ask of a batch in order, each exactly as if it had come
    /// on its own: the same decision, the same counters, the same grants
    /// for the peers, and an error for that entry alone when it has one.
    fn batch(&mut self, now: Nanos, batch: &AskBatch, out: &mut Vec<u8>) {
        wire::begin_batch_reply(batch.len(), out);
        let mut entries = batch.iter();
        loop {
            // Read a chunk of entries, on the stack: no allocation per batch.
            let mut chunk: [Option<Result<wire::Ask, WireError>>; BATCH_CHUNK] = Default::default();
            let n = chunk.iter_mut().zip(&mut entries).map(|(slot, entry)| *slot = Some(entry)).count();
            if n == 0 {
                return;
            }
            // With many live keys each ask's key misses the cache. Asked one
            // at a time, every miss is waited for in turn; looked up all at
            // once first, the misses overlap, and the decisions below find
            // their keys in the cache.
            for go in chunk[..n].iter().flatten().flatten() {
                if let Ok(limit) = self.lookup(go.limit) {
                    self.locker.prefetch(&permit_ask(limit, go));
                }
            }
            for entry in chunk[..n].iter_mut().filter_map(Option::take) {
                match entry {
                    Ok(go) => {
                        let _ = self.go(now, go, out);
                    }
                    Err(e) => {
                        self.locker.counters().record_error(None);
                        wire::encode(&error_reply(&e), out);
                    }
                }
            }
        }
    }

    /// The limit a request names, counting an error when there is none.
    fn find(&mut self, name: Option<&str>) -> Result<LimitId, TableError> {
        let found = self.lookup(name);
        if found.is_err() {
            self.locker.counters().record_error(None);
        }
        found
    }

    /// The limit a request names, remembering the last named one found.
    #[inline]
    fn lookup(&mut self, name: Option<&str>) -> Result<LimitId, TableError> {
        let Some(name) = name else { return self.locker.find(None) };
        if let Some(last) = self.last_named.filter(|&id| self.locker.limit(id).name() == name) {
            return Ok(last);
        }
        let found = self.locker.find(Some(name));
        self.last_named = found.as_ref().ok().copied().or(self.last_named);
        found
    }

    /// Takes the count of CURVE handshakes the allowlist refused, for stats.
    pub fn note_refused_connections(&mut self, refused: u64) {
        self.refused_connections = refused;
    }

    /// Takes the count of client connections that could not be accepted.
    pub fn note_accept_failures(&mut self, failed: u64) {
        self.accept_failures = failed;
    }

    /// Client connections that could not be accepted since start.
    pub fn accept_failures(&self) -> u64 {
        self.accept_failures
    }

    fn stats(&self, now: Nanos) -> StatsReply {
        let limits = self
            .locker
            .figures()
            .stats()
            .map(|(limit, s)| LimitStatsReply {
                name: limit.name().to_owned(),
                max_requests: limit.quota().max_requests(),
                in_seconds: limit.in_seconds(),
                requests: s.requests,
                go: s.go,
                sorry: s.sorry,
                errors: s.errors,
                algorithm: limit.algorithm().name().to_owned(),
                burst: match limit.algorithm() {
                    Algorithm::TokenBucket { burst } => Some(burst.get()),
                    _ => None,
                },
                margin_ms: (limit.margin() > 0).then(|| limit.margin() as f64 / 1e6),
                waited: s.waited,
                peeks: s.peeks,
            })
            .collect();
        let mut reply = StatsReply {
            limits,
            errors: self.locker.figures().unattributed_errors(),
            live_keys: self.locker.figures().live_keys() as u64,
            key_bytes: self.locker.figures().key_bytes() as u64,
            refused_connections: self.refused_connections,
            refusing: self.refusing.map(str::to_owned),
            accept_failures: self.accept_failures,
            parked: (self.parking.len() + self.waiting.len() + self.lease_calls.len()) as u64,
            held: self.parking.held,
            held_go: self.parking.held_go,
            store: self.store_state().map(|(claims, claimed, failed, in_flight, down)| wire::StoreStatsReply {
                claims,
                claimed,
                failed,
                in_flight: in_flight as u64,
                down: down.map(str::to_owned),
            }),
            ..StatsReply::default()
        };
        if let Some(p) = &self.peering {
            reply.clock_correction_ms = p.clock().correction() as f64 / NANOS_PER_MS as f64;
            reply.node = Some(p.nodes().me().id.to_string());
            reply.joining = p.is_joining();
            reply.peer_runs = Some(p.nodes().runs() as u64);
            reply.peer_rejected = p.peers().map(|(_, s)| s.rejected).sum();
            let timeout = p.settings().live_timeout;
            reply.peers = p
                .peers()
                .filter_map(|(ix, s)| {
                    let run = s.run.as_ref()?;
                    Some(PeerStatsReply {
                        node: run.id.to_string(),
                        last_heard_ms: now.saturating_sub(s.last_heard) / 1_000_000,
                        clock_offset_ms: s.skew() as f64 / 1e6,
                        flagged: s.flagged,
                        live: now.saturating_sub(s.last_heard) <= timeout,
                        endpoint: s.name.to_string(),
                        rejected: s.rejected,
                        mismatched_limits: p.mismatched(ix).map(|id| self.locker.limit(id).name().to_owned()).collect(),
                    })
                })
                .collect();
        }
        reply
    }
}

/// Whether answering `request` may grant permits or a lease.
fn may_grant(request: &Request) -> bool {
    matches!(request, Request::Plain(_) | Request::Go(_) | Request::Batch(_) | Request::Acquire(_))
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
    }
}

fn error_reply(e: &impl std::fmt::Display) -> ErrorReply {
    ErrorReply { error: e.to_string() }
}
