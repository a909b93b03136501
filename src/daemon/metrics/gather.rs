//! The loop's side of metrics: a [`Snapshot`] of the service at `now`.
//!
//! It copies one entry per limit and per peer, never per key, so it costs
//! the same with a million live keys as with none; the loop calls it every
//! [`Feed::EVERY`](super::Feed::EVERY) at most. It only reads the service.

use super::{Feed, Health, LimitSnapshot, PeerSnapshot, Snapshot, StoreSnapshot};
use crate::core::{Nanos, Peering};
use crate::service::Service;

const NANOS_PER_SECOND: f64 = 1e9;

impl Feed {
    /// Hands a snapshot of `service` over when one is due at `now`, or at
    /// once when `stopping`. Costs a comparison when none is due.
    pub fn tick(&mut self, service: &Service, now: Nanos, stopping: bool) {
        if stopping || self.is_due(now) {
            let mut snap = snapshot(service, now, stopping);
            snap.rls = self.rls.as_ref().map_or_else(Vec::new, |c| c.read());
            self.offer(now, snap);
        }
    }
}

/// What `service` holds at `now`. `stopping` wins over every other state;
/// otherwise a peered locker still learning its peers' counts is joining.
pub fn snapshot(service: &Service, now: Nanos, stopping: bool) -> Snapshot {
    let locker = service.locker();
    let limits = locker
        .figures()
        .stats()
        .zip(locker.figures().holdings())
        .map(|((limit, s), (_, h))| LimitSnapshot {
            name: limit.name().to_owned(),
            algorithm: limit.algorithm().name(),
            counts: s,
            live_keys: h.live_keys as u64,
            leases_held: h.leases_held as u64,
            leases_waiting: h.leases_waiting as u64,
        })
        .collect();
    let peering = service.peering();
    let status = service.status();
    let store = status.store.as_ref().map(|s| StoreSnapshot {
        up: s.down.is_none(),
        down: s.down.clone(),
        nodes: s.nodes.clone(),
        claims: s.claims,
        claimed: s.claimed,
        failed: s.failed,
    });
    let store_down = store.as_ref().is_some_and(|s| !s.up);
    let set_mismatch = peering.and_then(set_mismatch);
    let settling = peering.and_then(settling);
    let unleased = peering.is_some_and(|p| unleased(p, now));
    let health = match (stopping, peering.is_some_and(|p| p.is_joining()), status.refusing.is_some()) {
        (true, _, _) => Health::Stopping,
        (false, _, true) => Health::Refusing,
        _ if store_down => Health::StoreDown,
        _ if set_mismatch.is_some() => Health::MemberSetMismatch,
        _ if settling.is_some() => Health::MemberSetSettling,
        (false, true, false) => Health::Joining,
        _ if unleased => Health::Unleased,
        (false, false, false) => Health::Serving,
    };
    let mut snapshot = Snapshot {
        health,
        limits,
        unattributed_errors: locker.figures().unattributed_errors(),
        accept_failures: status.accept_failures,
        undelivered: status.undelivered,
        undelivered_go: status.undelivered_go,
        max_keys: locker.figures().max_keys() as u64,
        runtime_limits: locker.figures().runtime_limits().0 as u64,
        runtime_limits_max: locker.figures().runtime_limits().1 as u64,
        parked: status.parked as u64,
        held: status.held,
        held_go: status.held_go,
        store,
        member_set_why: set_mismatch.or(settling),
        ..Snapshot::default()
    };
    if let Some(p) = peering {
        let timeout = p.settings().live_timeout;
        snapshot.node = Some(p.nodes().me().id.to_string());
        snapshot.clock_correction_seconds = p.clock().correction() as f64 / NANOS_PER_SECOND;
        snapshot.peers = p
            .peers()
            .filter_map(|(ix, s)| s.run.as_ref().map(|run| (ix, run, s)))
            .map(|(ix, run, s)| {
                let age = now.saturating_sub(s.last_heard);
                PeerSnapshot {
                    node: run.id.to_string(),
                    live: age <= timeout,
                    last_heard_seconds: age as f64 / NANOS_PER_SECOND,
                    clock_offset_seconds: s.skew() as f64 / NANOS_PER_SECOND,
                    flagged: s.flagged,
                    set_mismatch: p.members().peer_differs(ix),
                }
            })
            .collect();
    }
    snapshot
}

/// Whether leases apply to `p` (three members or more) and no majority
/// echoed it within one at `now`, a reading of the loop's clock.
fn unleased(p: &Peering, now: Nanos) -> bool {
    let now = p.clock().reading(now).max(p.clock().latest());
    p.tenure().applies() && !p.tenure().holding(now, p.nodes()).leased
}

/// Which peers name another member set than this locker's, and how many
/// members each counts, while any does.
fn set_mismatch(p: &Peering) -> Option<String> {
    let members = p.members();
    if !members.differs() {
        return None;
    }
    let ours = members.mine().map_or(0, |m| m.members);
    let differ = p.peers().filter(|&(ix, _)| members.peer_differs(ix));
    let each: Vec<String> =
        differ.map(|(ix, s)| format!("{} counts {}", s.name, members.stated(ix).map_or(0, |m| m.members))).collect();
    Some(format!("peers name another member set than this locker ({ours} members): {}", each.join(", ")))
}

/// Why this locker grants from no share while a change of the member set
/// settles, while it does (see `MemberAgreement::settling`).
fn settling(p: &Peering) -> Option<String> {
    let members = p.members();
    if !members.refuses() || members.differs() {
        return None;
    }
    Some(if members.settling() {
        "this locker's member set changed: it grants from no share until every peer has stated the new one".into()
    } else {
        "a peer's member set changed: this locker grants from no share until that peer has heard every member state it"
            .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Algorithm, Limit, Locker, Quota, DEFAULT_LIMIT};

    fn service() -> Service {
        let default = Limit::new(DEFAULT_LIMIT, Quota::new(1, 60.0).unwrap()).unwrap();
        let db = Limit::with_algorithm("db", Quota::new(2, 10.0).unwrap(), Algorithm::Semaphore).unwrap();
        Service::new(Locker::new(default, vec![db], 50))
    }

    #[test]
    fn a_snapshot_counts_per_limit() {
        let mut s = service();
        let mut out = Vec::new();
        let now = 1_000_000_000_000;
        for _ in 0..3 {
            let _ = crate::service::step::request(&mut s, now, 0, b"", &mut (), &mut (), &mut out);
        }
        let snap = snapshot(&s, now, false);
        assert_eq!(snap.health, Health::Serving);
        assert_eq!(snap.max_keys, 50);
        let default = &snap.limits[0];
        assert_eq!(
            (default.name.as_str(), default.counts.requests, default.counts.go, default.counts.sorry),
            ("default", 3, 1, 2)
        );
        assert_eq!((snap.limits[1].name.as_str(), snap.limits[1].algorithm), ("db", "semaphore"));
        assert!(snap.node.is_none() && snap.peers.is_empty());
        assert_eq!(snapshot(&s, now, true).health, Health::Stopping);
    }

    #[test]
    fn a_limit_sent_with_terms_is_one_more_limit_within_the_bound() {
        let default = Limit::new(DEFAULT_LIMIT, Quota::new(1, 60.0).unwrap()).unwrap();
        let mut s = Service::new(Locker::new(default, vec![], 50).with_runtime_limits(3));
        let now = 1_000_000_000_000;
        let ask = crate::wire::Ask::new().limit("tenant").terms(crate::wire::Terms::new("rolling-window", 2, 1.0));
        let (mut body, mut out) = (Vec::new(), Vec::new());
        crate::wire::encode(&ask.to_map(), &mut body);
        let _ = crate::service::step::request(&mut s, now, 0, &body, &mut (), &mut (), &mut out);
        let snap = snapshot(&s, now, false);
        assert_eq!((snap.runtime_limits, snap.runtime_limits_max), (1, 3));
        let tenant = &snap.limits[1];
        assert_eq!((tenant.name.as_str(), tenant.algorithm, tenant.counts.go), ("tenant", "rolling-window", 1));
    }
}
