//! Real-process tests: each module starts the `locker` binary on a wildcard
//! loopback port and talks to it over ZeroMQ.

#[allow(dead_code)] // each test module uses a different part of the harness
mod support;

/// `locker ask` and `locker stats` from the command line: output and exit codes.
mod ask;
/// `locker bench` against a real locker: its counts add up.
mod bench;
/// `locker::Client` and `locker ask` failing over between lockers, dead or silent.
mod failover;
/// Hostile input: malformed, empty, multi-part, oversized and random messages.
mod hostile;
/// The kinds of limits: a token-bucket and fixed-window reservation, a lease
/// that expires on time, a lease restored after a restart, the lease guard.
mod kinds;
/// The daemon's lifecycle: the endpoint line, and a clean stop on signals.
mod lifecycle;
/// Peered lockers: a shared count, the overshoot bound, restarts, lone survivors, stats.
mod peering;
/// Peered lockers sharing a token bucket under saturation: the stated bound.
mod peering_bucket;
/// `PermitPool`: batches of permits taken with `up_to`, within the limit.
mod pool;
/// The seed's own Python client, unchanged.
mod seed;
/// `--state`: counts, reservations and leases survive kill -9; damaged files; compaction.
mod state;
/// Structured requests, named limits from a file, and the client library.
mod structured;
