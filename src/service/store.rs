//! Asks decided from a store's claims (`core::claims`), and the requests
//! parked while a claim is on its way.
//!
//! With a store, a request first goes through `wait_for_claims`: each of its
//! asks is checked against the hand of its limit and key, which emits the
//! claims the hands lack. A request that needs none is answered at once
//! (from the hands, so it never waits on the store); one that needs some
//! is parked under its token until every one of them is answered, then
//! decided (`next_resumed`). This is the seam any answer from outside the
//! loop uses: the daemon hands the answers in with `step::store_answers` and never
//! blocks the serving thread on them.
//!
//! Waiting requests count against `--max-parked` with held ones; they may
//! be as long as any request (a batch), since the wait is short and
//! bounded by the store's timeout.
//!
//! `StoreSide` is chosen at construction (`Service::with_store`): a locker
//! without a store never enters this module.
//!
//! When the store cannot be reached, a limit that fails closed answers
//! sorry; one that fails open is decided by this locker's own table, as if
//! it were alone. This module reads no clock and touches no socket.

use std::collections::{HashMap, VecDeque};

use super::hold::HoldEnd;
use super::parents::levels;
use super::parking::Token;
use super::store_lease::LeaseCalls;
use super::{HeldAsks, Service, StoreStatus};
use crate::core::claims::{ClaimAsk, ClaimId, Claimed, Claims, Need};
use crate::core::store_lease::{LeaseAnswer, LeaseCall};
use crate::core::{Algorithm, AskError, Charged, LimitId, Locker, Nanos, PermitAsk, Verdict};
use crate::wire::{Ask, BatchEntry, Decoded, Request};

/// Why a charge on a store-backed limit was not taken.
const STORE_LACKS_CHARGE: &str =
    "the store did not take this charge (its node failed or did not answer in time): nothing was charged; send it again";

/// How many times a request goes back to waiting for claims (another ask
/// spent what its claim brought) before it is answered from what is on
/// hand.
const MAX_ROUNDS: u8 = 3;

/// A request whose claims came back: its token, body, next round and hold.
pub(super) type Resumed = (Token, Box<[u8]>, u8, HoldEnd);

/// A request waiting for claims.
#[derive(Debug)]
struct Waiter {
    token: Token,
    body: Box<[u8]>,
    /// Claims still to be answered.
    claims: usize,
    round: u8,
    /// The hold it was parked under before it waited, if any.
    hold: HoldEnd,
}

/// Requests waiting for claims, by the claims they wait for.
#[derive(Debug, Default)]
struct Waiting {
    waiters: HashMap<Token, Waiter>,
    by_claim: HashMap<ClaimId, Vec<Token>>,
    /// Requests whose claims are all answered, in the order they became so.
    ready: VecDeque<Token>,
}

impl Waiting {
    fn park(&mut self, token: Token, body: &[u8], claims: &[ClaimId], round: u8, hold: HoldEnd) {
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

    /// Every waiter, at a stop, in arrival order.
    fn take_all(&mut self) -> Vec<(Token, Box<[u8]>)> {
        self.by_claim.clear();
        self.ready.clear();
        let mut all: Vec<_> = self.waiters.drain().map(|(t, w)| (t, w.body)).collect();
        all.sort_by_key(|(t, _)| *t);
        all
    }
}

/// The store's side of the service: the claims taken from it, the requests
/// waiting for claims, and the lease requests sent to it.
#[derive(Debug)]
pub(super) struct StoreSide {
    claims: Claims,
    waiting: Waiting,
    /// Requests that waited for claims, still to be answered at shutdown.
    final_waiters: Vec<(Token, Box<[u8]>)>,
    /// Lease requests sent to the store (see `store_lease`).
    pub(super) lease_calls: LeaseCalls,
}

impl StoreSide {
    /// The store's side for `limits` limits.
    pub(super) fn new(limits: usize) -> StoreSide {
        StoreSide {
            claims: Claims::new(limits),
            waiting: Waiting::default(),
            final_waiters: Vec::new(),
            lease_calls: LeaseCalls::default(),
        }
    }

    /// Requests waiting for the store.
    pub(super) fn len(&self) -> usize {
        self.waiting.waiters.len() + self.lease_calls.len()
    }

    /// The store's claims, for stats.
    pub(super) fn status(&self) -> StoreStatus {
        let c = &self.claims;
        StoreStatus {
            claims: c.asked,
            claimed: c.claimed,
            failed: c.failed,
            in_flight: c.in_flight(),
            down: c.down().map(str::to_owned),
            nodes: c.nodes().map(|(node, why)| (node.to_owned(), why.is_none())).collect(),
        }
    }

    /// After a reload of `limits` limits: the hands start again.
    pub(super) fn reset(&mut self, limits: usize) {
        self.claims.reset(limits);
    }

    /// Hands for a limit added after the others, theirs kept.
    pub(super) fn grow(&mut self, limits: usize) {
        self.claims.grow(limits);
    }

    /// Whether claims are on their way: their answers name limits by id.
    pub(super) fn claiming(&self) -> bool {
        self.claims.in_flight() > 0
    }

    /// Lets the hands whose time is up go, at `now`.
    pub(super) fn sweep(&mut self, now: Nanos) {
        self.claims.sweep(now);
    }

    /// Decides `ask` at `now` from the claims on hand; from `locker`'s own
    /// table for a semaphore, or for a limit that fails open while the
    /// store is down.
    #[inline]
    pub(super) fn count(&mut self, locker: &mut Locker, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        if self.decides_alone(locker, ask) {
            return locker.ask(now, ask);
        }
        let (limit, claims) = (locker.limit(ask.limit), &mut self.claims);
        let verdict = locker.want(ask).map(|want| claims.take(now, ask.limit, limit, ask.key, want.cost, want.up_to));
        locker.counters().record_ask(ask, &verdict);
        verdict
    }
}

impl StoreSide {
    /// Whether `ask` is decided by `locker`'s own table rather than from
    /// claims: a semaphore, or a limit that fails open whose key's node
    /// fails (the other nodes' keys are still counted in the store).
    pub(super) fn decides_alone(&self, locker: &Locker, ask: &PermitAsk) -> bool {
        let limit = locker.limit(ask.limit);
        limit.algorithm() == Algorithm::Semaphore || (limit.fails_open() && self.claims.failing(ask.limit, ask.key))
    }

    /// Takes charge `ask` at `now` from the claims on hand (see
    /// `Claims::charge`), counted by `locker`; an error, and nothing
    /// taken, when they lack it (its claim failed or never came back).
    pub(super) fn charge(&mut self, locker: &mut Locker, now: Nanos, ask: &PermitAsk) -> Result<Charged, String> {
        let cost = locker.check_charge(ask).map_err(|e| e.to_string())?;
        let charged = self.claims.charge(now, ask.limit, locker.limit(ask.limit), ask.key, cost);
        let charged = charged.ok_or_else(|| STORE_LACKS_CHARGE.to_owned())?;
        locker.counters().record_charge(ask, &charged.verdict);
        Ok(charged)
    }

    /// Whether charge `ask` can be taken at `now` from the claims on hand;
    /// the error `charge` would give when not.
    pub(super) fn covers(&self, locker: &Locker, now: Nanos, ask: &PermitAsk) -> Result<(), String> {
        let cost = locker.check_charge(ask).map_err(|e| e.to_string())?;
        let covers = self.claims.covers(now, ask.limit, ask.key, cost);
        covers.then_some(()).ok_or_else(|| STORE_LACKS_CHARGE.to_owned())
    }

    /// Gives back up to `ask.cost` permits to the claim in hand (see
    /// `Claims::give_back`).
    pub(super) fn give_back(&mut self, locker: &Locker, now: Nanos, ask: &PermitAsk) -> Verdict {
        let n = u32::try_from(ask.cost).unwrap_or(u32::MAX);
        self.claims.give_back(now, ask.limit, locker.limit(ask.limit), ask.key, n)
    }
}

impl StoreSide {
    /// The claims and lease calls to send to the store, taken out. A loop
    /// takes them through `step::flush`.
    pub(super) fn take_calls(&mut self) -> (Vec<ClaimAsk>, Vec<LeaseCall>) {
        (self.claims.take_outbox(), std::mem::take(&mut self.lease_calls.outbox))
    }

    /// Takes the store's answers in at `now`: the requests that waited for
    /// them are decided, and the replies to lease calls sent, by
    /// `Service::next_ready`; `locker` counts the lease answers, `holding`
    /// the held ones.
    pub(super) fn on_answers(
        &mut self,
        (locker, holding): (&mut Locker, &mut HeldAsks),
        now: Nanos,
        claims: Vec<Claimed>,
        leases: Vec<LeaseAnswer>,
    ) {
        if !claims.is_empty() {
            let settled = self.claims.settle(now, claims);
            self.waiting.settle(&settled);
        }
        self.lease_calls.on_answers(locker, holding, now, leases);
    }

    /// Parks request `body` (its token, next round and hold in `parked`)
    /// when `asks` (each a limit of `locker`, a key, a cost and whether it
    /// is a charge) need claims; whether it did. The claims are made even when there is no
    /// room beside `holding` to wait for them: the ask is then answered
    /// from what is on hand, and the next one finds the claim's permits.
    pub(super) fn wait_for_claims(
        &mut self,
        (locker, holding): (&Locker, &HeldAsks),
        now: Nanos,
        (token, body, round, hold): (Token, &[u8], u8, HoldEnd),
        asks: &[(LimitId, Option<&str>, u64, bool)],
    ) -> bool {
        let mut needed = Vec::new();
        for &(id, key, cost, charge) in asks {
            let limit = locker.limit(id);
            let Ok(cost) = u32::try_from(cost) else { continue };
            if limit.algorithm() == Algorithm::Semaphore || cost == 0 {
                continue;
            }
            let need = match charge {
                // Refused when decided, whatever the store says.
                true if locker
                    .check_charge(&PermitAsk { key, cost: u64::from(cost), ..PermitAsk::new(id) })
                    .is_err() =>
                {
                    continue
                }
                true => self.claims.need_charge(now, id, limit, key, cost),
                false if cost > limit.capacity() => continue,
                false => self.claims.need(now, id, limit, key, cost),
            };
            if let Need::Claim(c) = need {
                if !needed.contains(&c) {
                    needed.push(c);
                }
            }
        }
        if needed.is_empty() || !holding.has_room_beside(self.waiting.waiters.len()) {
            return false;
        }
        self.waiting.park(token, body, &needed, round, hold);
        true
    }

    /// The next request whose claims are all answered: its token, body,
    /// next round and hold.
    pub(super) fn next_resumed(&mut self) -> Option<Resumed> {
        let waiting = &mut self.waiting;
        while let Some(token) = waiting.ready.pop_front() {
            if let Some(w) = waiting.waiters.remove(&token) {
                return Some((w.token, w.body, w.round + 1, w.hold));
            }
        }
        None
    }

    /// At shutdown: the next request waiting for the store, in order: a
    /// lease request answered into `out` (no body, counted by `locker`),
    /// or a request that waited for claims, to decide once more (its body).
    pub(super) fn next_final(&mut self, locker: &mut Locker, out: &mut Vec<u8>) -> Option<(Token, Option<Box<[u8]>>)> {
        if let Some(token) = self.lease_calls.next_final(locker, out) {
            return Some((token, None));
        }
        if self.final_waiters.is_empty() && !self.waiting.waiters.is_empty() {
            self.final_waiters = self.waiting.take_all();
            self.final_waiters.reverse();
        }
        self.final_waiters.pop().map(|(token, body)| (token, Some(body)))
    }
}

impl Service {
    /// Parks `body` (decoded: `decoded`) under `token` when its asks need
    /// claims (see `StoreSide::wait_for_claims`); whether it did. `hold` is
    /// the hold it is already under, if any. The limits are found here, as
    /// an ask with terms may create one.
    pub(super) fn wait_for_claims(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        decoded: &Decoded,
        round: u8,
        hold: HoldEnd,
    ) -> bool {
        if self.store.is_none() || round >= MAX_ROUNDS {
            return false;
        }
        let mut asks = Vec::new();
        match &decoded.request {
            Ok(Request::Plain(b)) => asks.push((self.names.plain(&self.locker, b), None, 1, false)),
            Ok(Request::Charge(c)) => {
                if let Ok(id) = self.names.find(&mut self.locker, c.limit) {
                    let charge = PermitAsk { key: c.key, cost: c.cost, ..PermitAsk::new(id) };
                    let _ = levels(&self.locker, charge, c.parents, |level| {
                        asks.push((level.limit, level.key, level.cost, true));
                        Ok(())
                    });
                }
            }
            _ => {}
        }
        for go in gos_of(decoded) {
            if let Ok(id) = self.lookup_go(now, go) {
                // The limits above its own are claimed for too; an ask
                // whose levels are not all found is refused when decided.
                let ask = PermitAsk { key: go.key, cost: go.cost, ..PermitAsk::new(id) };
                let _ = levels(&self.locker, ask, go.parents, |level| {
                    asks.push((level.limit, level.key, level.cost, false));
                    Ok(())
                });
            }
        }
        let Some(s) = &mut self.store else { return false };
        s.wait_for_claims((&self.locker, &self.holding), now, (token, body, round, hold), &asks)
    }
}

/// The structured asks of `decoded` that may need claims: a go, each part
/// of an `all`, each entry of a batch (an `all` entry's parts).
fn gos_of<'d, 'a>(decoded: &'d Decoded<'a>) -> Vec<&'d Ask<'a>> {
    let Ok(request) = &decoded.request else { return Vec::new() };
    match request {
        Request::Go(go) => vec![go],
        Request::All(_) => decoded.parts().iter().flatten().collect(),
        Request::Batch(_) => {
            let mut gos = Vec::new();
            for (entry, parts) in decoded.entries_with_parts() {
                match entry {
                    Ok(BatchEntry::Go(go)) => gos.push(go),
                    Ok(BatchEntry::All(_)) => gos.extend(parts.iter().flatten()),
                    Err(_) => {}
                }
            }
            gos
        }
        _ => Vec::new(),
    }
}
