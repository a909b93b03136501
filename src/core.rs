//! The pure core: limits and the four kinds that count against them (fixed
//! windows, rolling windows, token buckets, semaphore leases), the table of
//! limits a locker decides with, and peering.
//!
//! Nothing under `core` reads a clock, logs, or touches a socket. Every
//! decision takes `now` (nanoseconds since the Unix epoch) as an argument,
//! which makes the rules deterministic under test and embeddable without a
//! daemon.
//!
//! The core is layered, each layer importing only the ones below it (a
//! test over the `use` graph holds it to that):
//! 1. `time`, `limit` (a limit's terms and `LimitId`), `lease_id`;
//! 2. `ask` (what a caller wants, the verdict), `room` (room for new keys),
//!    `inline_keys` (the key table the kinds keep their keys in),
//!    `share` (the terms peers agree on: node indices, the demand split,
//!    the in-flight rule, the `Count` they trade);
//! 3. `claims` (permits claimed from a shared store, for lockers whose
//!    counts live there), `store_lease` (semaphore leases kept in that
//!    store), `kinds`: one folder per kind (`fixed`, `rolling`, `bucket`,
//!    `semaphore`), each with its rule, its peer sharing, its kept form and
//!    its tests, and `kinds::Rule`, the one dispatch on the kind;
//! 4. `locker`: the table of limits by name and the dispatch to their
//!    rules: asks, leases, counters, reloads, restores, and the merge of
//!    the counts peers report (`locker::peers`);
//! 5. `peering`: the peer node table, the group's clock, and when to talk
//!    to peers.

pub mod ask;
pub mod claims;
pub mod inline_keys;
pub mod kinds;
pub mod lease_id;
pub mod limit;
pub mod locker;
pub mod peering;
pub mod room;
pub mod share;
pub mod store_lease;
pub mod time;

pub use ask::{AcquireAsk, Charged, HeartbeatAsk, PermitAsk, Verdict, Want, MAX_CHARGE_CAPACITIES};
pub use lease_id::{Entropy, LeaseMinter, LeaseSecret};
pub use limit::LimitId;
pub use limit::{Algorithm, Limit, LimitError, Quota, TermsError, DEFAULT_LIMIT};
pub use locker::{
    AskError, BeatTerms, Holdings, LeaseError, LimitStats, Locker, Made, PartError, Reloaded, TableError, IDLE,
    MAX_PARTS,
};
pub use peering::{NodeKey, Nodes, Outgoing, PeerEvent, PeerIx, PeerState, Peering, PeeringSettings};
pub use share::{Count, Counted, NodeIx, PeerView, Share};
pub use time::Nanos;
