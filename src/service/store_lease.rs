//! Lease requests for a semaphore whose leases live in the store: checked
//! here, carried to the store as a `LeaseCall`, and answered when the
//! store's answer comes back.
//!
//! A lease request needs the store itself, not a hand of permits, so it is
//! parked under its token until the store thread answers (`Service::on_store`);
//! the reply is then ready for `next_ready`. A request the locker's own
//! checks refuse (a bad count or ttl, a forged restore) is answered at
//! once and never reaches the store. When the store cannot be asked, a
//! lease request is answered with the error whatever the limit's failure
//! policy: a lease granted without the store would be invisible to the
//! other lockers. This module reads no clock and touches no socket.

use std::collections::{HashMap, VecDeque};

use super::hold::Answer;
use super::lease::{acquire_ask, encode, lease_reply};
use super::parking::Token;
use super::{error_reply, Service};
use crate::core::store_lease::{CallId, LeaseAnswer, LeaseCall, LeaseOp};
use crate::core::{BeatTerms, HeartbeatAsk, LeaseError, LimitId, Nanos};
use crate::wire::{self, Heartbeat, LeaseAsk, Request};

/// What a reply to a lease call needs besides the store's answer.
#[derive(Debug)]
enum Follow {
    Acquire,
    Heartbeat(BeatTerms),
    Release,
}

/// What a lease call carries: its lease id, what it does, and what its
/// reply will need.
type Call = (Box<str>, LeaseOp, Follow);

/// A lease request waiting for the store.
#[derive(Debug)]
struct LeaseWait {
    token: Token,
    limit: LimitId,
    lease: Box<str>,
    follow: Follow,
}

/// Lease calls on their way to the store and replies to those answered.
#[derive(Debug, Default)]
pub(super) struct LeaseCalls {
    next: CallId,
    pub(super) outbox: Vec<LeaseCall>,
    waits: HashMap<CallId, LeaseWait>,
    /// Replies ready to send, in the order the store answered.
    answered: VecDeque<(Token, Vec<u8>)>,
}

impl LeaseCalls {
    /// Lease requests not yet answered.
    pub(super) fn len(&self) -> usize {
        self.waits.len() + self.answered.len()
    }
}

impl Service {
    /// With a store, sends a lease request on a semaphore to it, parked
    /// under `token` (`Some(Held)`), or answers it into `out` when the
    /// locker's checks refuse it (`Some(Now)`); `None` for any other
    /// request, or without a store.
    pub(super) fn lease_to_store(&mut self, token: Token, request: &Request, out: &mut Vec<u8>) -> Option<Answer> {
        self.store.as_ref()?;
        let (limit, call) = match request {
            Request::Acquire(ask) => {
                let limit = self.semaphore(ask.limit)?;
                (limit, self.acquire_call(limit, ask))
            }
            Request::Heartbeat(beat) => {
                let limit = self.semaphore(beat.limit)?;
                (limit, self.beat_call(limit, beat))
            }
            Request::Release(release) => {
                let limit = self.semaphore(release.limit)?;
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
        let calls = &mut self.store.as_mut()?.lease_calls;
        let id = calls.next;
        calls.next += 1;
        let l = self.locker.limit(limit);
        calls.outbox.push(LeaseCall { id, name: l.name().into(), capacity: l.capacity(), lease: lease.clone(), op });
        calls.waits.insert(id, LeaseWait { token, limit, lease, follow });
        Some(Answer::Held)
    }

    /// The semaphore `name` names; `None` (the request is answered as
    /// without a store, which says why) when it names none.
    fn semaphore(&mut self, name: Option<&str>) -> Option<LimitId> {
        let limit = self.find(name).ok()?;
        self.locker.leases(limit).ok().map(|_| limit)
    }

    /// An acquire's call, checked and its lease id minted; a refusal is counted.
    fn acquire_call(&mut self, limit: LimitId, ask: &LeaseAsk) -> Result<Call, LeaseError> {
        let call = self.locker.leases(limit).and_then(|l| l.lease_for(&acquire_ask(limit, ask)));
        if call.is_err() {
            self.locker.counters().note_acquire::<String, _>(limit, &Err(()));
        }
        call.map(|(lease, hold)| (lease.into(), LeaseOp::Acquire(hold), Follow::Acquire))
    }

    /// A heartbeat's call, checked; a refusal is counted.
    fn beat_call(&mut self, limit: LimitId, beat: &Heartbeat) -> Result<Call, LeaseError> {
        let ask = HeartbeatAsk { limit, lease: beat.lease, ttl_ms: beat.ttl_ms, count: beat.count };
        let terms = self.locker.leases(limit).and_then(|l| l.beat_terms(&ask));
        if terms.is_err() {
            self.locker.counters().note_follow_up::<(), _>(limit, &Err(()));
        }
        let op = |t: &BeatTerms| LeaseOp::Heartbeat { ttl: t.ttl, restore: t.restore };
        terms.map(|t| (beat.lease.into(), op(&t), Follow::Heartbeat(t)))
    }

    /// Takes the store's answers to lease calls in at `now`: their replies
    /// are sent by `next_ready`.
    pub(super) fn on_leases(&mut self, now: Nanos, answers: Vec<LeaseAnswer>) {
        for answer in answers {
            let Some(wait) = self.lease_calls().and_then(|c| c.waits.remove(&answer.id)) else { continue };
            let mut out = Vec::new();
            self.lease_answer(now, &wait, answer, &mut out);
            if let Some(calls) = self.lease_calls() {
                calls.answered.push_back((wait.token, out));
            }
        }
    }

    fn lease_calls(&mut self) -> Option<&mut LeaseCalls> {
        self.store.as_mut().map(|s| &mut s.lease_calls)
    }

    /// The reply to `wait` from the store's `answer`, counted.
    fn lease_answer(&mut self, now: Nanos, wait: &LeaseWait, answer: LeaseAnswer, out: &mut Vec<u8>) {
        let store = match answer.result {
            Ok(s) => s,
            Err(why) => {
                match wait.follow {
                    Follow::Acquire => self.locker.counters().note_acquire::<String, _>(wait.limit, &Err(())),
                    _ => self.locker.counters().note_follow_up::<(), _>(wait.limit, &Err(())),
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
                self.locker.counters().note_acquire(wait.limit, &result);
                encode(result.map(|(lease, v)| lease_reply(now, &v, lease)), out);
            }
            Follow::Heartbeat(terms) => {
                let result = terms.outcome(&lease, store.verdict(now), None);
                self.locker.counters().note_follow_up(wait.limit, &result);
                encode(result.map(|v| lease_reply(now, &v, lease)), out);
            }
            Follow::Release => {
                let result = store.verdict(now).map_err(|_| LeaseError::UnknownLease(lease.clone()));
                self.locker.counters().note_follow_up(wait.limit, &result);
                encode(result.map(|v| lease_reply(now, &v, lease)), out);
            }
        }
    }

    /// The next reply to a lease call the store answered: written into
    /// `out`, its token returned.
    pub(super) fn next_lease_reply(&mut self, out: &mut Vec<u8>) -> Option<Token> {
        let (token, reply) = self.lease_calls()?.answered.pop_front()?;
        out.clear();
        out.extend_from_slice(&reply);
        Some(token)
    }

    /// At shutdown: the next lease request still waiting, answered with
    /// what the store said, or with an error when it has not answered.
    pub(super) fn next_final_lease(&mut self, out: &mut Vec<u8>) -> Option<Token> {
        if let Some(token) = self.next_lease_reply(out) {
            return Some(token);
        }
        let calls = self.lease_calls()?;
        let id = *calls.waits.keys().min()?;
        let wait = calls.waits.remove(&id).expect("just found");
        out.clear();
        let why = "the locker stopped before the store answered this lease request; a lease it took ends with its ttl";
        self.lease_answer(0, &wait, LeaseAnswer { id, result: Err(why.into()) }, out);
        Some(wait.token)
    }
}
