//! The stats reply: each limit's counters and terms, the table's figures,
//! what the service reports of itself (`Status`) and, when peered, the
//! peering's state and each peer's, put together for a `stats` request.
//!
//! It only reads: it decides nothing, counts nothing, and like the rest of
//! the service reads no clock and touches no socket.

use super::Status;
use crate::core::time::NANOS_PER_MS;
use crate::core::{Algorithm, Locker, Nanos, Peering};
use crate::wire::{self, LimitStatsReply, PeerStatsReply, StatsReply};

/// The reply to a stats request at `now`, from `locker`, `peering` when
/// peered, and the service's `status`.
pub(super) fn reply(locker: &Locker, peering: Option<&Peering>, status: Status, now: Nanos) -> StatsReply {
    let limits = locker
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
            charged: s.charged,
            shadow_sorry: s.shadow_sorry,
        })
        .collect();
    let mut reply = StatsReply {
        limits,
        errors: locker.figures().unattributed_errors(),
        live_keys: locker.figures().live_keys() as u64,
        key_bytes: locker.figures().key_bytes() as u64,
        refused_connections: status.refused_connections,
        refusing: status.refusing.map(str::to_owned),
        accept_failures: status.accept_failures,
        undelivered: status.undelivered,
        undelivered_go: status.undelivered_go,
        parked: status.parked as u64,
        held: status.held,
        held_go: status.held_go,
        store: status.store.map(|s| wire::StoreStatsReply {
            claims: s.claims,
            claimed: s.claimed,
            failed: s.failed,
            in_flight: s.in_flight as u64,
            down: s.down,
        }),
        ..StatsReply::default()
    };
    if let Some(p) = peering {
        reply.clock_correction_ms = p.clock().correction() as f64 / NANOS_PER_MS as f64;
        reply.node = Some(p.nodes().me().id.to_string());
        reply.joining = p.is_joining();
        reply.peer_runs = Some(p.nodes().runs() as u64);
        reply.peer_rejected = p.peers().map(|(_, s)| s.rejected).sum();
        let tenure = p.tenure();
        reply.leased = tenure.applies().then(|| tenure.holding(now, p.nodes()).leased);
        reply.members = Some(1 + p.nodes().configured() as u32);
        reply.member_set_mismatch = p.members().differs();
        reply.member_set_settling = p.members().refuses() && !p.members().differs();
        reply.declared_dead = tenure.declared().map(|(id, _)| String::from(id)).collect();
        reply.holds = tenure.held().map(String::from).collect();
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
                    mismatched_limits: p.mismatched(ix).map(|id| locker.limit(id).name().to_owned()).collect(),
                    members: p.members().stated(ix).map(|s| s.members),
                    member_set_mismatch: p.members().peer_differs(ix),
                })
            })
            .collect();
    }
    reply
}
