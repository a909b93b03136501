//! locker: a rate-limit daemon reached over ZeroMQ.
//!
//! Callers ask "may I go?" before each request to a limited resource and get
//! go or sorry. Each limit is one of four kinds: a fixed-timeslot counter
//! (slots aligned to the Unix epoch, freed when the slot ends), a rolling
//! window (no interval of the window's length holds more), a token bucket,
//! or a semaphore taken by leases that expire.
//!
//! The layout follows the request path:
//! - [`core`]: the pure rules (limits, slots, buckets, leases, the decision table); takes `now`, does no I/O;
//! - [`wire`]: the one definition of every message and its bytes;
//! - [`service`]: request bytes to reply bytes, the seam protocol tests drive;
//! - [`daemon`]: the loop that owns the sockets and the clock;
//! - [`state`]: everything kept across restarts: records, the file, the
//!   journal each grant is recorded from, liveness and restore;
//! - [`client`]: the client library, with failover between lockers, leases
//!   and a permit pool that hands out a batch of permits locally;
//! - [`config`] and [`cli`]: settings and the command line;
//! - [`curve`]: CURVE key files and allowlists (encryption and client authentication);
//! - [`rls`]: Envoy's rate-limit service over gRPC, and envoyproxy/ratelimit's config;
//! - [`bench`](mod@bench): `locker bench`, the load generator;
//! - [`sim`]: groups of peered services on a simulated clock, for tests.
//!
//! The daemon, rls, config, cli and bench modules (and the `locker` binary) are
//! behind the default `cli` feature. Without it the crate is the core, the
//! wire format, the service and the client, on zmq, serde and rmp-serde.

#[cfg(feature = "cli")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
#[cfg(feature = "cli")]
pub mod config;
pub mod core;
pub mod curve;
#[cfg(feature = "cli")]
pub mod daemon;
#[cfg(feature = "cli")]
pub mod rls;
pub mod service;
pub mod sim;
pub mod state;
pub mod wire;

pub use client::{Client, ClientError, Lease, PermitPool};
pub use wire::{Ask, GoReply, LeaseAsk, LeaseReply, StatsReply, Terms};
