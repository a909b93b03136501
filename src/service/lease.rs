//! Lease requests on the protocol seam: acquire, heartbeat and release,
//! decoded by `wire`, decided by `core`, answered with a `LeaseReply`.

use super::names::Names;
use super::{error_reply, Service};
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::{time::ceil_ms, AcquireAsk, HeartbeatAsk, LeaseError, LimitId, Locker, Nanos};
use crate::state::Journal;
use crate::wire::{self, Heartbeat, LeaseAsk, LeaseReply, Release, Request};

/// A lease left pending by a request: its semaphore and id.
pub(super) type Pending = Option<(LimitId, Box<str>)>;

impl Service {
    /// Answers a lease request (an acquire, a heartbeat or a release) into
    /// `out`; the lease when it is left pending. Any other request is not
    /// a lease request: nothing is written.
    pub(super) fn lease(&mut self, now: Nanos, request: &Request, out: &mut Vec<u8>) -> Pending {
        let parts = (&mut self.names, &mut self.locker, &mut self.journal);
        match request {
            Request::Acquire(ask) => acquire(parts, now, ask, out),
            Request::Heartbeat(beat) => heartbeat(parts, now, beat, out),
            Request::Release(r) => {
                release(parts, now, r, out);
                None
            }
            _ => None,
        }
    }
}

/// The parts a lease request uses: the names to find its semaphore by,
/// the table, and the journal that notes the lease for the state file.
type LeaseParts<'a> = (&'a mut Names, &'a mut Locker, &'a mut Journal);

/// Answers an acquire into `out`; the new lease when it is pending.
fn acquire((names, locker, journal): LeaseParts, now: Nanos, ask: &LeaseAsk, out: &mut Vec<u8>) -> Pending {
    let answer = names.find(locker, ask.limit).map_err(LeaseError::from).and_then(|limit| {
        let (lease, v) = locker.semaphores().acquire(now, &acquire_ask(limit, ask))?;
        journal.note_lease(limit, &lease);
        Ok((limit, lease, v))
    });
    let pending = match &answer {
        Ok((limit, lease, v)) if is_pending(v) => Some((*limit, lease.as_str().into())),
        _ => None,
    };
    encode(answer.map(|(_, lease, v)| lease_reply(now, &v, lease)), out);
    pending
}

/// Answers a heartbeat into `out`; the lease when it is pending.
fn heartbeat((names, locker, journal): LeaseParts, now: Nanos, beat: &Heartbeat, out: &mut Vec<u8>) -> Pending {
    let answer = names.find(locker, beat.limit).map_err(LeaseError::from).and_then(|limit| {
        let renew = HeartbeatAsk { limit, lease: beat.lease, ttl_ms: beat.ttl_ms, count: beat.count };
        let v = locker.semaphores().heartbeat(now, &renew)?;
        journal.note_lease(limit, beat.lease);
        Ok((limit, v))
    });
    let pending = match &answer {
        Ok((limit, v)) if is_pending(v) => Some((*limit, beat.lease.into())),
        _ => None,
    };
    encode(answer.map(|(_, v)| lease_reply(now, &v, beat.lease.to_owned())), out);
    pending
}

/// Answers a release into `out`.
fn release((names, locker, journal): LeaseParts, now: Nanos, release: &Release, out: &mut Vec<u8>) {
    let answer = names.find(locker, release.limit).map_err(LeaseError::from).and_then(|id| {
        let v = locker.semaphores().release(now, id, release.lease)?;
        journal.note_lease(id, release.lease);
        Ok(v)
    });
    encode(answer.map(|v| lease_reply(now, &v, release.lease.to_owned())), out);
}

fn is_pending(v: &LeaseVerdict) -> bool {
    matches!(v.state, LeaseState::Pending { .. })
}

/// The core's acquire for `ask` on limit `limit`.
pub(super) fn acquire_ask<'a>(limit: LimitId, ask: &LeaseAsk<'a>) -> AcquireAsk<'a> {
    AcquireAsk { limit, key: ask.key, count: ask.count, ttl_ms: ask.ttl_ms, max_wait_ms: ask.max_wait_ms.unwrap_or(0) }
}

pub(super) fn encode(answer: Result<LeaseReply, LeaseError>, out: &mut Vec<u8>) {
    match answer {
        Ok(reply) => wire::encode(&reply, out),
        Err(e) => wire::encode(&error_reply(&e), out),
    }
}

/// The reply for `v`; the lease id is shown only while the lease exists.
pub(super) fn lease_reply(now: Nanos, v: &LeaseVerdict, lease: String) -> LeaseReply {
    let (ok, pending, until) = match v.state {
        LeaseState::Held { until } => (true, false, Some(until)),
        LeaseState::Pending { until } => (false, true, Some(until)),
        LeaseState::Released => (true, false, None),
        LeaseState::Refused | LeaseState::Unknown => (false, false, None),
    };
    LeaseReply {
        ok,
        lease: until.map(|_| lease),
        pending,
        limit: v.capacity,
        remaining: v.free,
        expires_in_ms: until.map_or(0, |u| ceil_ms(u.saturating_sub(now))),
        waited_ms: None,
    }
}
