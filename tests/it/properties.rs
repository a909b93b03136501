//! The core's properties across its public seam: each checked with
//! generated sequences of asks (and, when peered, of messages lost,
//! repeated, delayed and reordered) at literal instants, on the core
//! itself. Properties of one kind's private parts (its tallies, its key
//! table, its log of grants, the fast codec) stay beside that code, in the
//! unit tests of `src/core/kinds/*` and `src/core/inline_keys`, since they
//! reach what the public seam does not show.

/// Conserved permits on the simulated group: never more than max in a
/// slot whatever the messages do, and full slots when they are timely.
mod conserved;
/// Conserved tokens on the simulated group: never more than burst + rate
/// x T in any span T whatever the messages do, and a full bucket when
/// they are timely.
pub(crate) mod conserved_bucket;
/// Conserved rights of a rolling window on the simulated group: never more
/// than max in any interval, and full windows when messages are timely.
pub(crate) mod conserved_rolling;
/// The fixed-timeslot counter alone: never more than max per slot.
mod fixed;
/// Limits checked together and refunds: a refused `all` charges no part,
/// and refunds never let a slot grant more than its limit.
mod together;
