//! Holding a lease request until its lease is granted, instead of
//! answering pending: the held acquire (issue 41).
//!
//! An acquire that would queue (`max_wait_ms`), or a heartbeat of a lease
//! still queued, that carries `hold_ms` is parked (`parking`, bounded by
//! `--max-parked` with the held asks) and its lease is *watched* by its
//! semaphore. The semaphore notes a watched lease when it is granted (a
//! release, an expiry at its exact deadline, a raised capacity) or dropped
//! (its wait ended); the service reads those notes after every request
//! and every loop turn, and answers the parked request then: held, or not
//! held. A request whose hold runs out first is answered pending, with its
//! lease id, so the caller asks again. The queue itself, and so the order
//! in which waiters are granted, is the semaphore's (first come, first
//! served); this module only ties a lease id to the caller waiting on it.
//!
//! Without room to park, or on a socket that answers every request at
//! once, such a request is answered pending as before, and the caller
//! polls with heartbeats. It reads no clock and touches no socket.

use std::collections::{HashMap, VecDeque};

use super::lease::lease_reply;
use super::parking::{asked_hold, Parked, QueueKey, Token};
use super::{Answer, HeldAsks, Service};
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::time::ceil_ms;
use crate::core::{LimitId, Locker, Nanos};
use crate::state::Journal;
use crate::wire::{self, Request};

/// A parked lease request: where it is parked, its semaphore's name (ids
/// may move at a reload) and when it was parked.
#[derive(Debug)]
struct ParkedLease {
    queue: QueueKey,
    limit: Box<str>,
    since: Nanos,
}

/// The lease requests parked, by lease id, and the leases to look at.
#[derive(Debug, Default)]
pub(super) struct LeaseWaits {
    waits: HashMap<Box<str>, ParkedLease>,
    /// Watched leases granted or dropped, to answer in this order.
    changed: VecDeque<Box<str>>,
    /// Every waiter is looked at on the next turn (after a reload).
    recheck: bool,
}

impl LeaseWaits {
    /// Whether no lease request is parked.
    pub(super) fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// At once when every waiter is to be looked at.
    pub(super) fn next_wake(&self) -> Option<Nanos> {
        self.recheck.then_some(0)
    }

    /// Looks at every waiter on the next turn: a reload may have raised a
    /// semaphore's capacity, or removed it.
    pub(super) fn recheck(&mut self) {
        self.recheck = !self.waits.is_empty();
    }
}

/// Why a parked lease request is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Its lease was granted or dropped, or may have been.
    Changed,
    /// Its hold ran out.
    Hold,
    /// The locker is stopping: a lease still queued is dropped.
    Stop,
}

impl Service {
    /// Parks a lease request with `hold_ms` whose lease is left pending,
    /// under `token`, and answers `Held`; `Some(Now)` when it was answered
    /// into `out` (held, refused, or no room to wait); `None` for any other
    /// request, which the caller decides as usual.
    pub(super) fn hold_lease(
        &mut self,
        now: Nanos,
        token: Token,
        body: &[u8],
        request: &Request,
        out: &mut Vec<u8>,
    ) -> Option<Answer> {
        let hold = match request {
            Request::Acquire(a) if a.max_wait_ms.is_some_and(|w| w > 0) => a.hold_ms?,
            Request::Heartbeat(b) => b.hold_ms?,
            _ => return None,
        };
        if hold == 0 || self.status.refusing.is_some() || !self.holding.parking.has_room(body.len()) {
            return None;
        }
        out.clear();
        let at = self.enter(now);
        let Some(pending) = self.lease(at, request, out) else { return Some(Answer::Now) };
        let until = now.saturating_add(asked_hold(hold));
        Some(self.holding.watch(&mut self.locker, pending, (token, body), (now, until)))
    }
}

impl HeldAsks {
    /// Parks the request `parked` (its token and body), whose lease
    /// `pending` of `locker` is left pending at `now`, until `until`, its
    /// lease watched: `Held`; `Now` when the lease is already watched or
    /// cannot be.
    fn watch(
        &mut self,
        locker: &mut Locker,
        (limit, lease): (LimitId, Box<str>),
        (token, body): (Token, &[u8]),
        (now, until): (Nanos, Nanos),
    ) -> Answer {
        if self.leases.waits.contains_key(&lease) || !locker.semaphores().watch_lease(limit, &lease, true) {
            return Answer::Now;
        }
        let queue = (limit, Some(lease.clone()));
        self.parking.park_lease(queue.clone(), token, body, until);
        let name = locker.limit(limit).name().into();
        self.leases.waits.insert(lease, ParkedLease { queue, limit: name, since: now });
        Answer::Held
    }

    /// Answers the next parked lease request whose lease in `locker` was
    /// granted or dropped at `now` (the loop's clock; `at`, the time to
    /// decide by, see `Service::enter`), noting a grant in `journal`: its
    /// reply in `out`, its token returned; `None` when there is none.
    pub(super) fn lease_ready(
        &mut self,
        (locker, journal): (&mut Locker, &mut Journal),
        (now, at): (Nanos, Nanos),
        out: &mut Vec<u8>,
    ) -> Option<Token> {
        let leases = &mut self.leases;
        if leases.waits.is_empty() {
            return None;
        }
        if std::mem::take(&mut leases.recheck) {
            leases.changed.extend(leases.waits.keys().cloned());
            locker.semaphores().wake_waiters(at);
        }
        locker.semaphores().take_changed_leases(&mut self.leases.changed);
        while let Some(lease) = self.leases.changed.pop_front() {
            let Some(wait) = self.leases.waits.get(&lease) else { continue };
            let (limit, v) = lease_now(locker, &wait.limit, &lease);
            if matches!(v.state, LeaseState::Pending { .. }) {
                continue; // still queued (a recheck): it waits on
            }
            let queue = wait.queue.clone();
            let Some(parked) = self.parking.take(&queue) else { continue };
            let wait = self.leases.waits.remove(&lease);
            self.answer_lease((locker, journal), (now, at), (&lease, wait), (limit, v), Ending::Changed, out);
            return Some(parked.token);
        }
        None
    }

    /// Answers a parked lease request taken out of the parking (`queue`,
    /// `parked`), for `ending`, as `lease_ready` does: its reply in `out`,
    /// its token returned.
    pub(super) fn lease_over(
        &mut self,
        (locker, journal): (&mut Locker, &mut Journal),
        (now, at): (Nanos, Nanos),
        (queue, parked): (&QueueKey, Parked),
        ending: Ending,
        out: &mut Vec<u8>,
    ) -> Token {
        let lease = queue.1.clone().unwrap_or_default();
        let wait = self.leases.waits.remove(&lease);
        let name = wait.as_ref().map_or("", |w| &w.limit);
        let found = lease_now(locker, name, &lease);
        let token = parked.token;
        self.answer_lease((locker, journal), (now, at), (&lease, wait), found, ending, out);
        token
    }

    /// Writes the reply to the parked request of `lease` (its wait, now
    /// forgotten) into `out`: held, or pending when its hold ran out (the
    /// lease queues on, unwatched), or not held; a lease still queued at a
    /// stop is dropped. Returns the parked request's token.
    fn answer_lease(
        &mut self,
        (locker, journal): (&mut Locker, &mut Journal),
        (now, at): (Nanos, Nanos),
        (lease, wait): (&str, Option<ParkedLease>),
        (limit, mut v): (Option<LimitId>, LeaseVerdict),
        ending: Ending,
        out: &mut Vec<u8>,
    ) {
        let since = wait.map_or(now, |w| w.since);
        match (v.state, limit) {
            (LeaseState::Held { .. }, Some(id)) => {
                journal.note_lease(id, lease);
                self.parking.held_go += 1;
            }
            (LeaseState::Pending { .. }, Some(id)) if ending == Ending::Stop => {
                locker.semaphores().drop_waiter(at, id, lease);
                v = locker.semaphores().lease_state(id, lease).unwrap_or(v);
            }
            (LeaseState::Pending { .. }, Some(id)) => {
                locker.semaphores().watch_lease(id, lease, false);
            }
            _ => {}
        }
        let mut reply = lease_reply(at, &v, lease.to_owned());
        reply.waited_ms = Some(ceil_ms(now.saturating_sub(since)));
        out.clear();
        wire::encode(&reply, out);
    }
}

/// What lease `lease` of the semaphore named `name` is now in `locker`,
/// and the semaphore's id; `Unknown` when either is gone.
fn lease_now(locker: &mut Locker, name: &str, lease: &str) -> (Option<LimitId>, LeaseVerdict) {
    let limit = locker.find(Some(name)).ok();
    let v = limit.and_then(|id| locker.semaphores().lease_state(id, lease).ok());
    (limit, v.unwrap_or(LeaseVerdict { state: LeaseState::Unknown, capacity: 0, free: 0 }))
}
