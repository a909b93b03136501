//! Real-process tests: each module starts the `locker` binary on a wildcard
//! loopback port and talks to it over ZeroMQ.

#[allow(dead_code)] // each test module uses a different part of the harness
mod support;

/// The daemon's lifecycle: the endpoint line, and a clean stop on signals.
mod lifecycle;

/// `locker bench` against a real daemon: counts add up, prefill makes keys live.
mod bench;
