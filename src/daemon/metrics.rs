//! Metrics and health over plain HTTP, on a thread of their own.
//!
//! The serving loop keeps every decision on its one thread; this module only
//! ever sees a [`Snapshot`]: a small copy of the counters per limit and per
//! peer that the loop hands over every [`Feed::EVERY`] through a [`Mailbox`].
//! Handing over is a `try_lock` and a pointer swap, so the loop never waits
//! on a scrape: when the metrics thread happens to hold the lock, the loop
//! keeps its snapshot for the next turn.
//!
//! A snapshot holds one entry per limit and per peer, never per key, so a
//! scrape of a locker with a million live keys stays a few kilobytes.
//!
//! This module must not touch the core or the ZeroMQ sockets: the loop
//! builds snapshots, [`exposition`] turns one into text, [`http`] answers
//! `GET /metrics` and `GET /health`.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::core::{LimitStats, Nanos};

pub mod exposition;
pub mod gather;
pub mod http;

/// What `/health` says: 200 only while serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Health {
    /// Bound, but waiting for peers' counts before answering with them.
    #[default]
    Joining,
    /// Answering requests.
    Serving,
    /// Answering, but refusing every grant: the state file cannot grow
    /// (a full disk), so no grant could be recorded before its reply.
    Refusing,
    /// Answering, but the store the counts live in cannot be reached: a
    /// limit that fails closed answers sorry, one that fails open decides
    /// alone (docs/store.md).
    StoreDown,
    /// Answering, but granting nothing from shares: a peer names another
    /// member set (docs/peering.md, "One member set").
    MemberSetMismatch,
    /// Answering, but granting nothing from shares while a change of the
    /// member set settles: this locker's or a peer's set changed, and not
    /// every member has stated the new one yet (docs/peering.md, "Adding
    /// or removing a member").
    MemberSetSettling,
    /// Answering, but granting nothing from shares: with three members or
    /// more, no majority echoed this locker within a lease. A run that has
    /// just joined, before its peers' first echoes, or one cut off from
    /// most of the group (docs/peering.md, "Leases").
    Unleased,
    /// Asked to stop; the loop is finishing.
    Stopping,
}

impl Health {
    /// The word `/health` answers with, and `locker_health`'s label.
    pub fn name(self) -> &'static str {
        match self {
            Health::Joining => "joining",
            Health::Serving => "serving",
            Health::Refusing => "refusing",
            Health::StoreDown => "store-down",
            Health::MemberSetMismatch => "member-set-mismatch",
            Health::MemberSetSettling => "member-set-settling",
            Health::Unleased => "unleased",
            Health::Stopping => "stopping",
        }
    }
}

/// One limit's counters, as `stats` reports them, plus what it holds now.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitSnapshot {
    pub name: String,
    pub algorithm: &'static str,
    /// Its counters since start, as `stats` reports them.
    pub counts: LimitStats,
    pub live_keys: u64,
    pub leases_held: u64,
    pub leases_waiting: u64,
}

/// What this locker knows of one peer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerSnapshot {
    pub node: String,
    pub live: bool,
    pub last_heard_seconds: f64,
    pub clock_offset_seconds: f64,
    pub flagged: bool,
    /// Whether it names another member set than this locker.
    pub set_mismatch: bool,
}

/// Everything a scrape shows, taken by the loop at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub health: Health,
    pub limits: Vec<LimitSnapshot>,
    /// Errors no limit could be blamed for (an unknown limit, bad bytes).
    pub unattributed_errors: u64,
    /// Client connections that could not be accepted (out of open files).
    pub accept_failures: u64,
    /// The most live keys allowed across all limits.
    pub max_keys: u64,
    /// Limits created from terms sent with asks now, and the most there
    /// may be (`--runtime-limits`): `limits` holds at most the configured
    /// ones and these.
    pub runtime_limits: u64,
    pub runtime_limits_max: u64,
    /// This locker's name among its peers; `None` when not peered.
    pub node: Option<String>,
    pub peers: Vec<PeerSnapshot>,
    /// Why this locker grants from no share over the member set, while it
    /// does: a peer names another one, or a change of it settles.
    pub member_set_why: Option<String>,
    /// How far this locker moved its clock to the middle of its peers'.
    pub clock_correction_seconds: f64,
    /// Asks held now, held since start, and held then answered go.
    pub parked: u64,
    pub held: u64,
    pub held_go: u64,
    /// Replies that could not be delivered, and how many of them were go.
    pub undelivered: u64,
    pub undelivered_go: u64,
    /// The store's claims, when the counts live in one.
    pub store: Option<StoreSnapshot>,
    /// Envoy's rate-limit service's calls per domain, when it serves.
    pub rls: Vec<(String, crate::rls::counts::DomainCalls)>,
}

/// The store's side, as the loop sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSnapshot {
    /// Whether every node claims went to answers (see `core::claims`).
    pub up: bool,
    /// The failing nodes and why, while any is.
    pub down: Option<String>,
    /// Each node claims went to, and whether it answers.
    pub nodes: Vec<(String, bool)>,
    /// Claims sent, permits they brought, claims that failed.
    pub claims: u64,
    pub claimed: u64,
    pub failed: u64,
}

/// The one place a snapshot passes from the loop to the metrics thread.
#[derive(Debug, Clone, Default)]
pub struct Mailbox(Arc<Mutex<Arc<Snapshot>>>);

impl Mailbox {
    /// Puts `snapshot` in the mailbox unless the reader holds it right now;
    /// returns whether it did. Never blocks.
    pub fn offer(&self, snapshot: Snapshot) -> bool {
        match self.0.try_lock() {
            Ok(mut slot) => {
                *slot = Arc::new(snapshot);
                true
            }
            Err(_) => false,
        }
    }

    /// The latest snapshot. The lock is held only to clone a pointer.
    pub fn latest(&self) -> Arc<Snapshot> {
        match self.0.lock() {
            Ok(slot) => Arc::clone(&slot),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

/// The loop's side: when the next snapshot is due, and where it goes.
#[derive(Debug)]
pub struct Feed {
    mailbox: Mailbox,
    next_at: Nanos,
    /// Envoy's rate-limit service's calls, read into each snapshot.
    rls: Option<crate::rls::counts::Counts>,
}

impl Feed {
    /// How often the loop hands over a snapshot: often enough for a 1 s
    /// scrape interval, rare enough to cost nothing on the request path.
    pub const EVERY: Nanos = 250_000_000;

    /// A feed whose first snapshot is due at once.
    pub fn new(mailbox: Mailbox) -> Feed {
        Feed { mailbox, next_at: 0, rls: None }
    }

    /// Reads `counts` (the rate-limit service's calls) into each snapshot.
    pub fn with_rls(self, counts: crate::rls::counts::Counts) -> Feed {
        Feed { rls: Some(counts), ..self }
    }

    /// When the next snapshot is due, for the loop's wait.
    pub fn next_deadline(&self) -> Nanos {
        self.next_at
    }

    /// Whether a snapshot is due at `now`.
    pub fn is_due(&self, now: Nanos) -> bool {
        now >= self.next_at
    }

    /// Hands `snapshot` over; when the reader is busy, the next turn tries
    /// again instead of waiting for it.
    pub fn offer(&mut self, now: Nanos, snapshot: Snapshot) {
        if self.mailbox.offer(snapshot) {
            self.next_at = now.saturating_add(Feed::EVERY);
        }
    }
}

/// A bound metrics listener, before its thread starts.
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`; a host name is resolved, port 0 picks a
    /// free one) so the real address is known before anything is served.
    pub fn bind(addr: &str) -> std::io::Result<MetricsServer> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let listener = TcpListener::bind(&addrs[..])?;
        let addr = listener.local_addr()?;
        Ok(MetricsServer { listener, addr })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves scrapes of `mailbox` on a thread of its own, until the
    /// process exits. `started` is when the daemon started, for uptime.
    pub fn spawn(self, mailbox: Mailbox, started: Instant) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("locker-metrics".into())
            .spawn(move || http::serve(&self.listener, &mailbox, started))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_offered_is_the_latest() {
        let mailbox = Mailbox::default();
        assert_eq!(mailbox.latest().health, Health::Joining);
        let snap = Snapshot { health: Health::Serving, max_keys: 7, ..Snapshot::default() };
        assert!(mailbox.offer(snap.clone()));
        assert_eq!(*mailbox.latest(), snap);
    }

    #[test]
    fn offering_never_waits_for_a_reader_holding_the_lock() {
        let mailbox = Mailbox::default();
        let held = mailbox.0.lock().unwrap();
        assert!(!mailbox.offer(Snapshot { max_keys: 1, ..Snapshot::default() }));
        drop(held);
        assert_eq!(mailbox.latest().max_keys, 0);
    }

    #[test]
    fn a_feed_is_due_at_once_then_every_period() {
        let mut feed = Feed::new(Mailbox::default());
        assert!(feed.is_due(0));
        feed.offer(1_000, Snapshot::default());
        assert_eq!(feed.next_deadline(), 1_000 + Feed::EVERY);
        assert!(!feed.is_due(1_000 + Feed::EVERY - 1));
        assert!(feed.is_due(1_000 + Feed::EVERY));
    }

    #[test]
    fn a_feed_refused_by_a_busy_reader_stays_due() {
        let mailbox = Mailbox::default();
        let mut feed = Feed::new(mailbox.clone());
        let held = mailbox.0.lock().unwrap();
        feed.offer(5, Snapshot::default());
        drop(held);
        assert!(feed.is_due(6));
    }

    #[test]
    fn binding_port_zero_reports_the_real_port() {
        let server = MetricsServer::bind("127.0.0.1:0").unwrap();
        assert_ne!(server.local_addr().port(), 0);
        assert!(MetricsServer::bind("localhost:0").is_ok());
        assert!(MetricsServer::bind("127.0.0.1:70000").is_err());
    }
}
