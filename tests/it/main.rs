//! Real-process tests: each module starts the `locker` binary on a wildcard
//! loopback port and talks to it over ZeroMQ.

#[allow(dead_code)] // each test module uses a different part of the harness
mod support;

/// The daemon's lifecycle: the endpoint line, and a clean stop on signals.
mod lifecycle;

/// Peered lockers: a shared count, the overshoot bound, restarts, lone survivors, stats.
mod peering;

/// Client failover when a locker is killed with SIGKILL.
mod failover;
