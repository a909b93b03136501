//! Lease requests for a semaphore whose leases live in the store: checked
//! here, carried to the store as a `LeaseCall`, and answered when the
//! store's answer comes back.
//!
//! A lease request needs the store itself, not a hand of permits, so it is
//! parked under its token until the store thread answers (`step::store_answers`);
//! the reply is then ready for `next_ready`. A request the locker's own
//! checks refuse (a bad count or ttl, a forged restore) is answered at
//! once and never reaches the store. When the store cannot be asked, a
//! lease request is answered with the error whatever the limit's failure
//! policy: a lease granted without the store would be invisible to the
//! other lockers.
//!
//! A held acquire (`hold_ms`, see `hold_lease`) that the store queues is
//! not answered pending: the store thread is asked again every `RECHECK`
//! with a heartbeat of the lease (which leaves a queued lease queued), and
//! the request is answered when the store says it is held, or gone (not
//! held), or when its hold ends (pending). The serving thread never waits:
//! a recheck is one more call the store thread makes. A lease freed on
//! another locker thus reaches a waiter here within a recheck and a round
//! trip to the store. This module reads no clock and touches no socket.

use std::collections::{HashMap, VecDeque};

use super::lease::{acquire_ask, encode, lease_reply};
use super::names::Names;
use super::parking::{asked_hold, Token};

use super::{error_reply, Answer, HeldAsks, StoreSide};
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::store_lease::{CallId, LeaseAnswer, LeaseCall, LeaseOp, StoreLeaseState};
use crate::core::time::{ceil_ms, NANOS_PER_MS};
use crate::core::{BeatTerms, HeartbeatAsk, LeaseError, LimitId, Locker, Nanos};
use crate::wire::{self, Heartbeat, LeaseAsk, Request};

/// How often the store is asked again whether a held acquire's queued
/// lease is granted.
const RECHECK: Nanos = 2 * NANOS_PER_MS;

/// What a reply to a lease call needs besides the store's answer.
#[derive(Debug)]
enum Follow {
    Acquire,
    Heartbeat(BeatTerms),
    Release,
    /// A held request asked again (see the header).
    Waiting,
}

/// What a lease call carries: its lease id, what it does, and what its
/// reply will need.
type LeaseCallParts = (Box<str>, LeaseOp, Follow);

/// A lease request waiting for the store.
#[derive(Debug)]
struct LeaseWait {
    token: Token,
    limit: LimitId,
    lease: Box<str>,
    follow: Follow,
    /// A held request's hold: asked again while queued (see the header).
    held: Option<HeldLeaseAsk>,
}

/// What a held lease request needs to be asked again and answered.
#[derive(Debug, Clone)]
struct HeldLeaseAsk {
    /// When it was received, and when its hold ends (the loop's clock).
    since: Nanos,
    until: Nanos,
    /// The ttl its lease is kept with while asked again.
    ttl: Nanos,
    /// The store's first, pending, reply: sent if the locker stops first.
    pending_reply: Vec<u8>,
    /// The semaphore's name and capacity, as the store is asked.
    name: Box<str>,
    capacity: u32,
}

/// Lease calls on their way to the store and replies to those answered.
#[derive(Debug, Default)]
pub(super) struct LeaseCalls {
    next: CallId,
    pub(super) outbox: Vec<LeaseCall>,
    waits: HashMap<CallId, LeaseWait>,
    /// Replies ready to send, in the order the store answered.
    answered: VecDeque<(Token, Vec<u8>)>,
    /// Held requests whose lease is queued, each to ask again when due,
    /// in that order.
    rechecks: VecDeque<(Nanos, LeaseWait)>,
}

impl LeaseCalls {
    /// Lease requests not yet answered.
    pub(super) fn len(&self) -> usize {
        self.waits.len() + self.answered.len() + self.rechecks.len()
    }

    /// When the next held request is to be asked again.
    pub(super) fn next_recheck(&self) -> Option<Nanos> {
        self.rechecks.front().map(|(due, _)| *due)
    }

    /// Sends the calls that ask again, at `now`, about the held requests
    /// that are due.
    pub(super) fn recheck(&mut self, now: Nanos) {
        while self.rechecks.front().is_some_and(|(due, _)| *due <= now) {
            let (_, wait) = self.rechecks.pop_front().expect("checked above");
            let Some(held) = &wait.held else { continue };
            let op = LeaseOp::Heartbeat { ttl: held.ttl, restore: None };
            let (name, capacity) = (held.name.clone(), held.capacity);
            let id = self.next;
            self.next += 1;
            self.outbox.push(LeaseCall { id, name, capacity, lease: wait.lease.clone(), op });
            self.waits.insert(id, wait);
        }
    }
}

impl StoreSide {
    /// Sends a lease request on a semaphore of `locker` (found through
    /// `names`) to the store, parked under `token` (`Some(HeldLeaseAsk)`), or
    /// answers it into `out` when the locker's checks refuse it
    /// (`Some(Now)`); `None` for any other request. A held one waits only
    /// when there is room beside `holding`.
    pub(super) fn lease_to_store(
        &mut self,
        (locker, names, holding): (&mut Locker, &mut Names, &HeldAsks),
        (now, token): (Nanos, Token),
        request: &Request,
        out: &mut Vec<u8>,
    ) -> Option<Answer> {
        let (limit, call) = match request {
            Request::Acquire(ask) => {
                let limit = semaphore(locker, names, ask.limit)?;
                (limit, acquire_call(locker, limit, ask))
            }
            Request::Heartbeat(beat) => {
                let limit = semaphore(locker, names, beat.limit)?;
                (limit, beat_call(locker, limit, beat))
            }
            Request::Release(release) => {
                let limit = semaphore(locker, names, release.limit)?;
                (limit, Ok((release.lease.into(), LeaseOp::Release, Follow::Release)))
            }
            _ => return None,
        };
        let (lease, op, follow) = match call {
            Ok(call) => call,
            Err(e) => {
                out.clear();
                wire::encode(&error_reply(&e), out);
                return Some(Answer::Now);
            }
        };
        let l = locker.limit(limit);
        let (name, capacity) = (Box::<str>::from(l.name()), l.capacity());
        let room = holding.has_room_beside(self.len());
        let held = store_hold(now, request, &op).filter(|_| room).map(|(until, ttl)| HeldLeaseAsk {
            since: now,
            until,
            ttl,
            pending_reply: Vec::new(),
            name: name.clone(),
            capacity,
        });
        let calls = &mut self.lease_calls;
        let id = calls.next;
        calls.next += 1;
        calls.outbox.push(LeaseCall { id, name, capacity, lease: lease.clone(), op });
        calls.waits.insert(id, LeaseWait { token, limit, lease, follow, held });
        Some(Answer::Held)
    }
}

/// The end of the hold and the ttl of a held lease request to the store
/// (`hold_ms` on an acquire that may queue, or on a heartbeat); `None` to
/// answer it as the store does.
fn store_hold(now: Nanos, request: &Request, op: &LeaseOp) -> Option<(Nanos, Nanos)> {
    let (hold, ttl) = match (request, op) {
        (Request::Acquire(a), LeaseOp::Acquire(h)) if h.max_wait > 0 => (a.hold_ms?, h.ttl),
        (Request::Heartbeat(b), LeaseOp::Heartbeat { ttl, restore: None }) => (b.hold_ms?, *ttl),
        _ => return None,
    };
    (hold > 0).then(|| (now.saturating_add(asked_hold(hold)), ttl))
}

/// The semaphore `name` names; `None` (the request is answered as without
/// a store, which says why) when it names none.
fn semaphore(locker: &mut Locker, names: &mut Names, name: Option<&str>) -> Option<LimitId> {
    let limit = names.find(locker, name).ok()?;
    locker.semaphores().leases(limit).ok().map(|_| limit)
}

/// An acquire's call, checked and its lease id minted; a refusal is counted.
fn acquire_call(locker: &mut Locker, limit: LimitId, ask: &LeaseAsk) -> Result<LeaseCallParts, LeaseError> {
    let call = locker.semaphores().leases(limit).and_then(|l| l.lease_for(&acquire_ask(limit, ask)));
    if call.is_err() {
        locker.counters().note_acquire::<String, _>(limit, &Err(()));
    }
    call.map(|(lease, hold)| (lease.into(), LeaseOp::Acquire(hold), Follow::Acquire))
}

/// A heartbeat's call, checked; a refusal is counted.
fn beat_call(locker: &mut Locker, limit: LimitId, beat: &Heartbeat) -> Result<LeaseCallParts, LeaseError> {
    let ask = HeartbeatAsk { limit, lease: beat.lease, ttl_ms: beat.ttl_ms, count: beat.count };
    let terms = locker.semaphores().leases(limit).and_then(|l| l.beat_terms(&ask));
    if terms.is_err() {
        locker.counters().note_follow_up::<(), _>(limit, &Err(()));
    }
    let op = |t: &BeatTerms| LeaseOp::Heartbeat { ttl: t.ttl, restore: t.restore };
    terms.map(|t| (beat.lease.into(), op(&t), Follow::Heartbeat(t)))
}

impl LeaseCalls {
    /// Takes the store's answers to lease calls in at `now`, counted by
    /// `locker` (held ones by `holding`): their replies are sent by
    /// `next_reply`.
    pub(super) fn on_answers(
        &mut self,
        locker: &mut Locker,
        holding: &mut HeldAsks,
        now: Nanos,
        answers: Vec<LeaseAnswer>,
    ) {
        for answer in answers {
            let Some(mut wait) = self.waits.remove(&answer.id) else { continue };
            let mut out = Vec::new();
            if let Some(held) = wait.held.clone() {
                let queued = answer.result.as_ref().is_ok_and(|s| s.state == StoreLeaseState::Pending);
                if !matches!(wait.follow, Follow::Waiting) {
                    // Counted once, as the request it is; asked again uncounted.
                    lease_answer(locker, now, &wait, answer, &mut out);
                    if queued && now < held.until {
                        holding.parking.held += 1;
                        wait.follow = Follow::Waiting;
                        wait.held = Some(HeldLeaseAsk { pending_reply: out, ..held });
                        self.rechecks.push_back((now.saturating_add(RECHECK), wait));
                        continue;
                    }
                } else if queued && now < held.until {
                    self.rechecks.push_back((now.saturating_add(RECHECK), wait));
                    continue;
                } else if held_answer(now, &wait, &held, answer, &mut out) {
                    holding.parking.held_go += 1;
                }
            } else {
                lease_answer(locker, now, &wait, answer, &mut out);
            }
            self.answered.push_back((wait.token, out));
        }
    }

    /// The next reply to a lease call the store answered: written into
    /// `out`, its token returned.
    pub(super) fn next_reply(&mut self, out: &mut Vec<u8>) -> Option<Token> {
        let (token, reply) = self.answered.pop_front()?;
        out.clear();
        out.extend_from_slice(&reply);
        Some(token)
    }

    /// At shutdown: the next lease request still waiting, answered with
    /// what the store said, or with an error (counted by `locker`) when it
    /// has not answered.
    pub(super) fn next_final(&mut self, locker: &mut Locker, out: &mut Vec<u8>) -> Option<Token> {
        if let Some(token) = self.next_reply(out) {
            return Some(token);
        }
        // A held request still queued in the store: pending, as the store
        // first answered, so that its caller can ask another locker.
        if let Some((_, wait)) = self.rechecks.pop_front() {
            out.clear();
            out.extend_from_slice(wait.held.as_ref().map_or(&[][..], |h| &h.pending_reply));
            return Some(wait.token);
        }
        let id = *self.waits.keys().min()?;
        let wait = self.waits.remove(&id).expect("just found");
        out.clear();
        let why = "the locker stopped before the store answered this lease request; a lease it took ends with its ttl";
        lease_answer(locker, 0, &wait, LeaseAnswer { id, result: Err(why.into()) }, out);
        Some(wait.token)
    }
}

/// The reply to `wait` from the store's `answer`, counted by `locker`.
fn lease_answer(locker: &mut Locker, now: Nanos, wait: &LeaseWait, answer: LeaseAnswer, out: &mut Vec<u8>) {
    let store = match answer.result {
        Ok(s) => s,
        Err(why) => {
            match wait.follow {
                Follow::Acquire => locker.counters().note_acquire::<String, _>(wait.limit, &Err(())),
                _ => locker.counters().note_follow_up::<(), _>(wait.limit, &Err(())),
            }
            wire::encode(&error_reply(&why), out);
            return;
        }
    };
    let lease = wait.lease.to_string();
    match &wait.follow {
        Follow::Acquire => {
            // An acquire's answer is never short of capacity: only a restore is.
            let v = store.verdict(now).map_err(|_| LeaseError::UnknownLease(lease.clone()));
            let result = v.map(|v| (lease.clone(), v));
            locker.counters().note_acquire(wait.limit, &result);
            encode(result.map(|(lease, v)| lease_reply(now, &v, lease)), out);
        }
        Follow::Heartbeat(terms) => {
            let result = terms.outcome(&lease, store.verdict(now), None);
            locker.counters().note_follow_up(wait.limit, &result);
            encode(result.map(|v| lease_reply(now, &v, lease)), out);
        }
        Follow::Release => {
            let result = store.verdict(now).map_err(|_| LeaseError::UnknownLease(lease.clone()));
            locker.counters().note_follow_up(wait.limit, &result);
            encode(result.map(|v| lease_reply(now, &v, lease)), out);
        }
        // A held request asked again is answered by `held_answer`.
        Follow::Waiting => {}
    }
}

/// The reply to held request `wait` from the store's `answer`: held,
/// pending (its hold ended first), not held (the store no longer queues
/// it), or the store's error; carrying how long it was held. Whether it
/// was held.
fn held_answer(now: Nanos, wait: &LeaseWait, held: &HeldLeaseAsk, answer: LeaseAnswer, out: &mut Vec<u8>) -> bool {
    out.clear();
    let verdict = match answer.result {
        Ok(store) => store.verdict(now).unwrap_or(LeaseVerdict {
            state: LeaseState::Unknown,
            capacity: store.capacity,
            free: store.free,
        }),
        Err(why) => {
            wire::encode(&error_reply(&why), out);
            return false;
        }
    };
    let mut reply = lease_reply(now, &verdict, wait.lease.to_string());
    reply.waited_ms = Some(ceil_ms(now.saturating_sub(held.since)));
    wire::encode(&reply, out);
    matches!(verdict.state, LeaseState::Held { .. })
}
