//! Peering as a whole: who the peers are (`nodes`), the group's clock
//! (`clock`), whether they all name the same members (`members`), when to
//! talk to them and what they mean for the next asks (`schedule`), and
//! whose share of a slot each grants from (`tenure`).
//! The terms the kinds share by (`core::share`) sit below the kinds, and how the counts peers report join the table's is
//! the table's (`core::locker::peers`).
//!
//! Like the rest of the core this takes `now`, never reads a clock, and
//! never touches a socket: the wire format is `wire`'s, the sockets the
//! daemon's. How each kind keeps a peer's count stays with the kind
//! (`Tally` for fixed windows, `bucket::ledger` for token buckets), since
//! it works on their private state; the table only dispatches to them.

pub mod clock;
pub mod members;
pub mod nodes;
pub mod schedule;
pub mod tenure;

pub use nodes::{Beat, NodeKey, Nodes, PeerEvent, PeerIx, PeerState, MAX_RUNS_PER_PEER};
pub use schedule::{Outgoing, Peering, PeeringSettings};
