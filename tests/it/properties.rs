//! The core's properties, in one home: each checked with generated
//! sequences of asks (and, when peered, of messages lost, repeated,
//! delayed and reordered) at literal instants, on the core itself.

/// A token bucket shared by peers: the stated overshoot bound.
mod bucket_peers;
/// Conserved permits on the simulated group: never more than max in a
/// slot whatever the messages do, and full slots when they are timely.
mod conserved;
/// The fixed-timeslot counter alone: never more than max per slot.
mod fixed;
/// A rolling window shared by peers: within max while counts arrive in time.
mod rolling_peers;
/// Lockers wired by hand: the delayed, reordered counts the peered properties share.
mod wired;
