//! The pure core: limits and the four kinds that count against them (fixed
//! windows, rolling windows, token buckets, semaphore leases), the decision
//! table and the peer ledger.
//!
//! Nothing under `core` reads a clock, logs, or touches a socket. Every
//! decision takes `now` (nanoseconds since the Unix epoch) as an argument,
//! which makes the rules deterministic under test and embeddable without a
//! daemon.

pub mod ask;
pub mod bucket;
pub mod keys;
pub mod lease_id;
pub mod limit;
pub mod locker;
pub mod peering;
pub mod rolling;
pub mod room;
pub mod rule;
pub mod semaphore;
pub mod tally;
pub mod time;
pub mod window;

pub use ask::{AcquireAsk, HeartbeatAsk, PermitAsk, Verdict, Want};
pub use lease_id::{Entropy, LeaseMinter, LeaseSecret};
pub use limit::{Algorithm, Limit, LimitError, Quota, DEFAULT_LIMIT};
pub use locker::{AskError, Holdings, LeaseError, LimitId, LimitStats, Locker, Reloaded, TableError};
pub use peering::{
    Count, Counted, NodeIx, NodeKey, Nodes, Outgoing, PeerEvent, PeerIx, PeerState, PeerView, Peering, PeeringSettings,
    Share,
};
pub use time::Nanos;
