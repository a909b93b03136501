//! The integration tests, in one binary. Most modules start the `locker`
//! binary on a wildcard loopback port and talk to it over ZeroMQ; the
//! golden, protocol and property modules drive the library in-process at
//! literal instants and never spawn a process.

#[allow(dead_code)] // each test module uses a different part of the harness
mod support;

/// `locker ask` and `locker stats` from the command line: output and exit codes.
mod ask;
/// Batched asks: each entry as the same ask alone, on the seam and against the real locker.
mod batch;
/// `locker bench` against a real locker: its counts add up.
mod bench;
/// Generated asks on a token bucket shared by peers: the stated overshoot bound.
mod bucket_peer_properties;
/// Wall clocks stepped across a restart, under libfaketime.
mod clocks;
/// Generated asks on the fixed-timeslot counter: never more than max per slot.
mod core_properties;
/// CURVE: allowlisted clients get answers, unknown keys and plain clients none; keygen; config;
/// peers with their own keys, and no counts for an unlisted subscriber.
mod curve;
/// Rough edges a new user hits: lease waits, config and flag errors, binds, CLI errors, peer logs, dead endpoints.
mod edges;
/// Extreme numbers: a limit is refused when built, or every kind holds its bound.
mod extremes;
/// `locker::Client` and `locker ask` failing over between lockers, dead or silent.
mod failover;
/// Faults on a real process: a full disk under the state file.
mod faults;
/// Golden bytes of every message: both request forms, the replies, the peer messages.
mod golden;
/// Peered lockers on a simulated clock: the seed's scenario (through a kill and restart), skewed clocks, late and lost counts.
mod group;
/// Holding an ask for a go instead of sorry: seam and sim; real processes for the seed client, SIGTERM and the state file.
mod hold;
/// Hostile input: malformed, empty, multi-part, oversized and random messages.
mod hostile;
/// What the state log keeps, on the seam: each kind's records replayed into a restarted service.
mod kept;
/// The kinds of limits on the seam: a token-bucket and fixed-window reservation, a lease
/// that expires on its deadline, a lease restored after a restart; the client's sleep and lease guard.
mod kinds;
/// The crate's floor plan: no module imports a module that imports it back.
mod layout;
/// The daemon's lifecycle: the endpoint line, and a clean stop on signals.
mod lifecycle;
/// Operating it: Prometheus scrapes (alone and peered), health, reload on SIGHUP, check-config, JSON logs.
mod operations;
/// The peer link under attack on real processes: a node-id flood, a frozen peer.
mod peer_attacks;
/// Peering on the seam: services wired by hand through a network the test controls.
mod peer_protocol;
/// Splitting slots by demand on the seam: shares exact on views that differ
/// by a lost, repeated or reordered message, and learned by a joining locker.
mod peer_split_protocol;
/// Peered lockers on a simulated clock: a shared count, exactly max per slot, restarts, lone survivors, stats.
mod peering;
/// Peered lockers sharing a token bucket on a simulated clock: the stated bound under saturation, a whole burst on one locker.
mod peering_bucket;
/// Peered lockers splitting each slot by demand, on a simulated clock: a bursty
/// or fast caller on one locker gets its whole quota, and load that moves adapts within a slot.
mod peering_split;
/// `PermitPool`: batches of permits taken with `up_to`, within the limit.
mod pool;
/// The scrape as promtool and a real Prometheus server read it.
mod prometheus;
/// The request path on the seam (`Service::respond`), bytes in and out, for each kind.
mod protocol;
/// The README's command table and quick start, run as written.
mod readme;
/// Rolling windows on the seam and a simulated clock, alone and peered: never more than max in any interval of length T.
mod rolling;
/// The seed's own Python client, unchanged.
mod seed;
/// The seed's limit as a rolling window with a margin on three real lockers: the resource refuses nothing.
mod seed_scenario;
/// Generated asks on peered fixed windows split by demand: shares whole, overshoot only from the pool.
mod split_properties;
/// `--state` on a real disk: a kill -9 mid-slot, damaged files, compaction, SIGTERM, peers, reload.
mod state;
/// Counts in a real Redis and Redis Cluster.
mod store;
/// A locker on a store, on the service seam: claims, the failure policy, lease calls.
mod store_seam;
/// Structured requests and named limits from a config file's text, on the seam: keys, errors, counters.
mod structured;
/// Attacks by clients: guessed lease ids, made-up restores (seam), key floods.
mod trust;
