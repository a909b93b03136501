//! Lease messages: acquire, heartbeat and release on a semaphore limit, and
//! the one reply shape they share.
//!
//! Like the rest of `wire`, this only translates; the rules live in
//! `core::kinds::semaphore`.

use serde::{Deserialize, Serialize};

use super::{RequestMap, WireError};

/// Take `count` of a semaphore under a new lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseAsk<'a> {
    /// A configured semaphore's name; the default limit when `None`.
    pub limit: Option<&'a str>,
    /// Semaphores have no keys; a key here is refused.
    pub key: Option<&'a str>,
    /// How much of the capacity to hold; 1 when absent.
    pub count: u64,
    /// How long the lease lives without a heartbeat; the limit's in_seconds when `None`.
    pub ttl_ms: Option<u64>,
    /// Queue for up to this long when the count is not free now.
    pub max_wait_ms: Option<u64>,
    /// When queued, hold the reply up to this long (and no longer than the
    /// wait) until the count is granted or the wait ends.
    pub hold_ms: Option<u64>,
}

impl Default for LeaseAsk<'_> {
    fn default() -> Self {
        LeaseAsk { limit: None, key: None, count: 1, ttl_ms: None, max_wait_ms: None, hold_ms: None }
    }
}

impl<'a> LeaseAsk<'a> {
    /// A lease on semaphore `limit` for `count`.
    pub fn new(limit: &'a str, count: u64) -> LeaseAsk<'a> {
        LeaseAsk { limit: Some(limit), count, ..LeaseAsk::default() }
    }

    /// The lease lives `ms` milliseconds without a heartbeat.
    pub fn ttl_ms(self, ms: u64) -> LeaseAsk<'a> {
        LeaseAsk { ttl_ms: Some(ms), ..self }
    }

    /// Queue for up to `ms` milliseconds when the count is not free now.
    pub fn max_wait_ms(self, ms: u64) -> LeaseAsk<'a> {
        LeaseAsk { max_wait_ms: Some(ms), ..self }
    }

    /// When queued, hold the reply up to `ms` milliseconds until the count
    /// is granted or the wait ends, rather than answer pending at once.
    pub fn hold_ms(self, ms: u64) -> LeaseAsk<'a> {
        LeaseAsk { hold_ms: Some(ms), ..self }
    }

    pub(super) fn from_map(map: &RequestMap<'a>) -> LeaseAsk<'a> {
        LeaseAsk {
            limit: map.limit,
            key: map.key,
            count: map.count.unwrap_or(1),
            ttl_ms: map.ttl_ms,
            max_wait_ms: map.max_wait_ms,
            hold_ms: map.hold_ms,
        }
    }

    /// The request map that carries this acquire.
    pub fn to_map(&self) -> RequestMap<'a> {
        RequestMap {
            op: Some("acquire"),
            limit: self.limit,
            key: self.key,
            count: Some(self.count),
            ttl_ms: self.ttl_ms,
            max_wait_ms: self.max_wait_ms,
            hold_ms: self.hold_ms,
            ..RequestMap::default()
        }
    }
}

/// Keep a lease alive for `ttl_ms` more; with `count`, restore it if the
/// locker does not know it (after a restart). A heartbeat of a pending
/// lease with `hold_ms` is held like an acquire (see `LeaseAsk::hold_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    pub limit: Option<&'a str>,
    pub lease: &'a str,
    pub ttl_ms: Option<u64>,
    pub count: Option<u64>,
    pub hold_ms: Option<u64>,
}

impl<'a> Heartbeat<'a> {
    /// A heartbeat of lease `lease` of semaphore `limit`, with the ttl it was taken with.
    pub fn new(limit: Option<&'a str>, lease: &'a str) -> Heartbeat<'a> {
        Heartbeat { limit, lease, ttl_ms: None, count: None, hold_ms: None }
    }

    pub(super) fn from_map(map: &RequestMap<'a>) -> Result<Heartbeat<'a>, WireError> {
        let lease = map.lease.ok_or(WireError::NoLease("heartbeat"))?;
        Ok(Heartbeat { limit: map.limit, lease, ttl_ms: map.ttl_ms, count: map.count, hold_ms: map.hold_ms })
    }

    /// The request map that carries this heartbeat.
    pub fn to_map(&self) -> RequestMap<'a> {
        let Heartbeat { limit, lease, ttl_ms, count, hold_ms } = *self;
        RequestMap { ttl_ms, count, hold_ms, ..lease_map("heartbeat", limit, lease) }
    }
}

/// Free a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release<'a> {
    pub limit: Option<&'a str>,
    pub lease: &'a str,
}

impl<'a> Release<'a> {
    pub(super) fn from_map(map: &RequestMap<'a>) -> Result<Release<'a>, WireError> {
        let lease = map.lease.ok_or(WireError::NoLease("release"))?;
        Ok(Release { limit: map.limit, lease })
    }

    /// The request map that carries this release.
    pub fn to_map(&self) -> RequestMap<'a> {
        lease_map("release", self.limit, self.lease)
    }
}

/// The request map of `op` on lease `lease` of semaphore `limit`.
fn lease_map<'a>(op: &'static str, limit: Option<&'a str>, lease: &'a str) -> RequestMap<'a> {
    RequestMap { op: Some(op), limit, lease: Some(lease), ..RequestMap::default() }
}

/// The reply to acquire, heartbeat and release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReply {
    /// Acquire and heartbeat: the lease is held. Release: a lease was freed.
    pub ok: bool,
    /// The lease's id, when it is held or pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// The lease is queued; send heartbeats to learn when it is held.
    #[serde(default)]
    pub pending: bool,
    /// The semaphore's capacity.
    pub limit: u32,
    /// Capacity neither held nor promised to a waiter.
    pub remaining: u32,
    /// Held: milliseconds until the lease expires without a heartbeat.
    /// Pending: until the wait ends. Otherwise 0.
    pub expires_in_ms: u64,
    /// Present when the locker held this reply (the request's `hold_ms`):
    /// how long, in milliseconds rounded up. Pending with it, the hold ran
    /// out before the wait: ask again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
}
