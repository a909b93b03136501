//! Lease requests on the protocol seam: acquire, heartbeat and release,
//! decoded by `wire`, decided by `core`, answered with a `LeaseReply`.

use super::{error_reply, Service};
use crate::core::kinds::semaphore::{LeaseState, LeaseVerdict};
use crate::core::{time::ceil_ms, AcquireAsk, HeartbeatAsk, LeaseError, LimitId, Nanos};
use crate::wire::{self, Heartbeat, LeaseAsk, LeaseReply, Release};

/// A lease left pending by a request: its semaphore and id.
pub(super) type Pending = Option<(LimitId, Box<str>)>;

impl Service {
    /// Answers an acquire into `out`; the new lease when it is pending.
    pub(super) fn acquire(&mut self, now: Nanos, ask: &LeaseAsk, out: &mut Vec<u8>) -> Pending {
        let answer = self.names.find(&mut self.locker, ask.limit).map_err(LeaseError::from).and_then(|limit| {
            let (lease, v) = self.locker.semaphores().acquire(now, &acquire_ask(limit, ask))?;
            self.journal.note_lease(limit, &lease);
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
    pub(super) fn heartbeat(&mut self, now: Nanos, beat: &Heartbeat, out: &mut Vec<u8>) -> Pending {
        let answer = self.names.find(&mut self.locker, beat.limit).map_err(LeaseError::from).and_then(|limit| {
            let renew = HeartbeatAsk { limit, lease: beat.lease, ttl_ms: beat.ttl_ms, count: beat.count };
            let v = self.locker.semaphores().heartbeat(now, &renew)?;
            self.journal.note_lease(limit, beat.lease);
            Ok((limit, v))
        });
        let pending = match &answer {
            Ok((limit, v)) if is_pending(v) => Some((*limit, beat.lease.into())),
            _ => None,
        };
        encode(answer.map(|(_, v)| lease_reply(now, &v, beat.lease.to_owned())), out);
        pending
    }

    pub(super) fn release(&mut self, now: Nanos, release: &Release, out: &mut Vec<u8>) {
        let answer = self.names.find(&mut self.locker, release.limit).map_err(LeaseError::from).and_then(|id| {
            let v = self.locker.semaphores().release(now, id, release.lease)?;
            self.journal.note_lease(id, release.lease);
            Ok(v)
        });
        encode(answer.map(|v| lease_reply(now, &v, release.lease.to_owned())), out);
    }
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
