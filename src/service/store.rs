//! Asks decided from a store's claims (`core::claims`), and the requests
//! parked while a claim is on its way.
//!
//! With a store, a request first goes through `claims_needed`: each of its
//! asks is checked against the hand of its limit and key, which emits the
//! claims the hands lack. A request that needs none is answered at once
//! (from the hands, so it never waits on the store); one that needs some
//! is parked under its token until every one of them is answered, then
//! decided (`next_resumed`). This is the seam any answer from outside the
//! loop uses: the daemon hands the answers in with `on_claims` and never
//! blocks the serving thread on them.
//!
//! Waiting requests count against `--max-parked` with held ones; they may
//! be as long as any request (a batch), since the wait is short and
//! bounded by the store's timeout.
//!
//! When the store cannot be reached, a limit that fails closed answers
//! sorry; one that fails open is decided by this locker's own table, as if
//! it were alone. This module reads no clock and touches no socket.

use std::collections::{HashMap, VecDeque};

use super::parking::Token;
use super::Service;
use crate::core::claims::{ClaimAsk, ClaimId, Claimed, Claims, Need};
use crate::core::{Algorithm, AskError, LimitId, Nanos, PermitAsk, Verdict};
use crate::wire::{self, Request};

/// How many times a request goes back to waiting for claims (another ask
/// spent what its claim brought) before it is answered from what is on
/// hand.
const MAX_ROUNDS: u8 = 3;

/// The hold a request was under: its end, and whether it was only the
/// peers' in-flight wait.
pub(super) type Held = Option<(Nanos, bool)>;

/// A request whose claims came back: its token, body, next round and hold.
pub(super) type Resumed = (Token, Box<[u8]>, u8, Held);

/// A request waiting for claims.
#[derive(Debug)]
struct Waiter {
    token: Token,
    body: Box<[u8]>,
    /// Claims still to be answered.
    claims: usize,
    round: u8,
    /// The hold it was parked under before it waited, if any: its end,
    /// and whether it was only the peers' in-flight wait.
    hold: Option<(Nanos, bool)>,
}

/// Requests waiting for claims, by the claims they wait for.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    waiters: HashMap<Token, Waiter>,
    by_claim: HashMap<ClaimId, Vec<Token>>,
    /// Requests whose claims are all answered, in the order they became so.
    ready: VecDeque<Token>,
}

impl Waiting {
    pub(super) fn len(&self) -> usize {
        self.waiters.len()
    }

    fn park(&mut self, token: Token, body: &[u8], claims: &[ClaimId], round: u8, hold: Option<(Nanos, bool)>) {
        for &c in claims {
            self.by_claim.entry(c).or_default().push(token);
        }
        self.waiters.insert(token, Waiter { token, body: body.into(), claims: claims.len(), round, hold });
    }

    fn settle(&mut self, claims: &[ClaimId]) {
        for c in claims {
            for token in self.by_claim.remove(c).unwrap_or_default() {
                if let Some(w) = self.waiters.get_mut(&token) {
                    w.claims -= 1;
                    if w.claims == 0 {
                        self.ready.push_back(token);
                    }
                }
            }
        }
    }

    /// Every waiter, at a stop.
    pub(super) fn take_all(&mut self) -> Vec<(Token, Box<[u8]>)> {
        self.by_claim.clear();
        self.ready.clear();
        let mut all: Vec<_> = self.waiters.drain().map(|(t, w)| (t, w.body)).collect();
        all.sort_by_key(|(t, _)| *t);
        all
    }
}

impl Service {
    /// Keeps every counting limit's counts in a store from now on: asks
    /// are decided from claims (see `core::claims`), which the daemon
    /// carries to the store (`take_claims`) and back (`on_claims`); and
    /// semaphore leases in it, served by `serve` (`take_lease_calls`,
    /// `on_leases`; `respond` still answers them from this locker).
    pub fn with_store(mut self) -> Service {
        self.claims = Some(Claims::new(self.locker.figures().stats().count()));
        self
    }

    /// The claims to send to the store, taken out.
    pub fn take_claims(&mut self) -> Vec<ClaimAsk> {
        self.claims.as_mut().map(Claims::take_outbox).unwrap_or_default()
    }

    /// The store's claims, for stats: asked, permits claimed, failed,
    /// on their way; and why the store fails, when it does.
    pub fn store_state(&self) -> Option<(u64, u64, u64, usize, Option<&str>)> {
        self.claims.as_ref().map(|c| (c.asked, c.claimed, c.failed, c.in_flight(), c.down()))
    }

    /// Takes the store's answers in at `now`: the requests that waited for
    /// them are decided by `next_ready`.
    pub fn on_claims(&mut self, now: Nanos, answers: Vec<Claimed>) {
        let Some(claims) = &mut self.claims else { return };
        let settled = claims.settle(now, answers);
        self.waiting.settle(&settled);
    }

    /// Parks `body` under `token` when its asks need claims; whether it did.
    /// `hold` is the hold it is already under, if any.
    pub(super) fn wait_for_claims(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        round: u8,
        hold: Option<(Nanos, bool)>,
    ) -> bool {
        if self.claims.is_none() || round >= MAX_ROUNDS {
            return false;
        }
        // The claims are made even when there is no room to wait for them:
        // the ask is then answered from what is on hand, and the next one
        // finds the claim's permits.
        let needed = self.claims_needed(now, body);
        if needed.is_empty() || !self.parking.has_room_beside(self.waiting.len()) {
            return false;
        }
        self.waiting.park(token, body, &needed, round, hold);
        true
    }

    /// The next request whose claims are all answered: its token, body,
    /// next round and hold.
    pub(super) fn next_resumed(&mut self) -> Option<Resumed> {
        while let Some(token) = self.waiting.ready.pop_front() {
            if let Some(w) = self.waiting.waiters.remove(&token) {
                return Some((w.token, w.body, w.round + 1, w.hold));
            }
        }
        None
    }

    /// The claims the asks of `body` wait for (none when every one can be
    /// answered now).
    fn claims_needed(&mut self, now: Nanos, body: &[u8]) -> Vec<ClaimId> {
        let mut needed = Vec::new();
        match wire::decode_request(body) {
            Ok(Request::Plain(b)) => {
                let id = self.plain_limit(b);
                self.need(now, id, None, 1, &mut needed);
            }
            Ok(Request::Go(go)) => {
                if let Ok(id) = self.lookup(go.limit) {
                    self.need(now, id, go.key, go.cost, &mut needed);
                }
            }
            Ok(Request::Batch(batch)) => {
                for go in batch.iter().flatten() {
                    if let Ok(id) = self.lookup(go.limit) {
                        self.need(now, id, go.key, go.cost, &mut needed);
                    }
                }
            }
            _ => {}
        }
        needed
    }

    fn need(&mut self, now: Nanos, id: LimitId, key: Option<&str>, cost: u64, needed: &mut Vec<ClaimId>) {
        let limit = self.locker.limit(id);
        let (Some(claims), Ok(cost)) = (&mut self.claims, u32::try_from(cost)) else { return };
        if limit.algorithm() == Algorithm::Semaphore || cost == 0 || cost > limit.capacity() {
            return;
        }
        if let Need::Claim(c) = claims.need(now, id, limit, key, cost) {
            if !needed.contains(&c) {
                needed.push(c);
            }
        }
    }

    /// Decides `ask` at `now`: from the store's claims when the counts are
    /// there, else (no store, a semaphore, or a limit that fails open while
    /// the store is down) from the table.
    #[inline]
    pub(super) fn count(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        let Some(claims) = &mut self.claims else { return self.locker.ask(now, ask) };
        let limit = self.locker.limit(ask.limit);
        let local = limit.algorithm() == Algorithm::Semaphore || (limit.fails_open() && claims.down().is_some());
        if local {
            return self.locker.ask(now, ask);
        }
        let verdict =
            self.locker.want(ask).map(|want| claims.take(now, ask.limit, limit, ask.key, want.cost, want.up_to));
        self.locker.counters().record_ask(ask, &verdict);
        verdict
    }
}
