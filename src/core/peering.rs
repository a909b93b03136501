//! Peering, all in one place: who the peers are (`nodes`), when to talk to
//! them (`schedule`), what they mean for the next asks (`view`), how a
//! slot is split by demand and how much of the rest this locker may grant
//! (`share`), and how the counts they report join the locker's own
//! (`merge`).
//!
//! Like the rest of the core this takes `now`, never reads a clock, and
//! never touches a socket: the wire format is `wire`'s, the sockets the
//! daemon's. How each kind keeps a peer's count stays with the kind
//! (`Tally` for fixed windows, `bucket::ledger` for token buckets), since
//! it works on their private state; `merge` only dispatches to them.

pub mod clock;
pub mod merge;
pub mod nodes;
pub mod schedule;

pub use nodes::{Beat, NodeKey, Nodes, PeerEvent, PeerIx, PeerState, MAX_RUNS_PER_PEER};
pub use schedule::{Outgoing, Peering, PeeringSettings};
