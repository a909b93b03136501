//! Envoy's rate-limit service: `--rls-bind HOST:PORT` serves
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` over gRPC
//! on the locker's own decisions, with limits from envoyproxy/ratelimit's
//! YAML config (`--rls-config`), unchanged.
//!
//! - `proto`: Envoy's messages, by hand, with Envoy's field numbers;
//! - `config`: the YAML files, the descriptor tree and its matching;
//! - `counts`: calls per domain and outcome, for metrics;
//! - `decide`: one call from request to reply, around a batch of asks;
//! - `headers`: the response headers of `--rls-headers`;
//! - `bridge`: the batch to the loop through a queue it drains, and the
//!   reply back, with no thread per call;
//! - `sockets`: the listener and connections, whose readiness the loop
//!   polls beside its own sockets;
//! - `grpc`: tonic and the health service.
//!
//! The gRPC side runs on the loop's own thread: a tokio runtime the loop
//! drives between its turns (`Running::drive`), on sockets the loop polls.
//! It reaches the loop only through the bridge, whose requests the loop
//! serves as it serves a ZeroMQ client's, so every guarantee of the ZeroMQ
//! side (peering, the store, the state file, held asks, metrics) holds for
//! these asks too, and no thread is woken on a call's way. This module
//! reads no clock and decides nothing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use tracing::{error, info, warn};

pub mod bridge;
pub mod config;
pub mod counts;
pub mod decide;
pub mod grpc;
pub mod headers;
pub mod proto;
pub mod sockets;

pub use config::{RlsConfigError, Table};
pub use grpc::GrpcHealth;
pub use headers::HeaderStyle;

/// How long a call waits for the loop's reply, in milliseconds, at least:
/// a batch is never held, so only a store that is slow to answer comes
/// near it, and the wait is longer than twice the store's own timeout.
const ASK_TIMEOUT_MS: u64 = 5_000;

/// How long a call waits for the loop when a store call may take up to
/// `store_timeout`: long enough that the store's own answer or failure,
/// not this wait, decides.
pub fn ask_timeout_ms(store_timeout: Option<std::time::Duration>) -> u64 {
    let store = store_timeout.map_or(0, |t| t.as_millis() as u64);
    ASK_TIMEOUT_MS.max(2 * store + 1_000)
}

/// The RLS settings, checked: where to listen and the loaded config.
#[derive(Debug, Clone)]
pub struct RlsConfig {
    /// HOST:PORT for gRPC.
    pub bind: String,
    /// The YAML file or folder the table came from.
    pub path: PathBuf,
    pub table: Arc<Table>,
    /// Whether the locker creates limits from asks' terms
    /// (`--runtime-limits`): a descriptor's `limit` override needs it.
    pub runtime_limits: bool,
    /// The response headers a reply carries (`--rls-headers`).
    pub headers: Option<HeaderStyle>,
    /// TLS on the gRPC port, when set; plain HTTP/2 (h2c) otherwise.
    pub tls: Option<Tls>,
}

/// The gRPC port's TLS: a certificate chain and its key, and the CA that
/// clients' certificates must chain to when clients must show one.
#[derive(Clone, PartialEq, Eq)]
pub struct Tls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Option<Vec<u8>>,
}

/// Never the key's bytes in a log.
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("client_certificates", &self.client_ca_pem.is_some()).finish_non_exhaustive()
    }
}

impl PartialEq for RlsConfig {
    fn eq(&self, other: &RlsConfig) -> bool {
        self.bind == other.bind
            && self.path == other.path
            && *self.table == *other.table
            && self.runtime_limits == other.runtime_limits
            && self.headers == other.headers
            && self.tls == other.tls
    }
}

/// Why the RLS could not start.
#[derive(Debug, thiserror::Error)]
#[error("rls on {addr}: {why}")]
pub struct RlsError {
    addr: String,
    why: String,
}

impl RlsError {
    pub fn new(addr: &str, why: String) -> RlsError {
        RlsError { addr: addr.to_owned(), why }
    }
}

/// How many scheduler ticks one drive may run before it looks at timers:
/// more than the tasks a turn readies (a connection's, and one per call in
/// flight), so that one drive runs every task a turn readied.
const TASKS_PER_DRIVE: u32 = 4_096;

/// How long a stop drives the gRPC side for its connections to close.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_millis(1_500);

/// The running gRPC side: a runtime of no thread of its own, driven by
/// the loop.
pub struct Running {
    addr: SocketAddr,
    health: GrpcHealth,
    table: Arc<RwLock<Arc<Table>>>,
    stop: tokio::sync::watch::Sender<bool>,
    bridge: bridge::Bridge,
    counts: counts::Counts,
    ready: sockets::Ready,
    runtime: Option<Arc<tokio::runtime::Runtime>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

/// Runs the loop's replies to calls on the gRPC side's scheduler (see
/// `Within::run`).
#[derive(Clone)]
pub struct Within(Arc<tokio::runtime::Runtime>);

impl Within {
    /// Sends from `runtime`'s scheduler.
    pub fn new(runtime: Arc<tokio::runtime::Runtime>) -> Within {
        Within(runtime)
    }

    /// Runs `f` (which sends replies) as the scheduler's own: each call a
    /// reply readies is then queued in order, and a connection its call
    /// readies after them all, so the next drive writes each connection's
    /// replies together. Sent from outside, every reply's call would run
    /// ahead of the others and its connection write for it alone.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.block_on(async { f() })
    }
}

impl Running {
    /// Binds `config.bind` and makes the gRPC side ready to serve, asking
    /// the loop through `bridge` (whose inbox the loop drains); a batch is
    /// at most `max_message_size` bytes. Nothing runs until the loop
    /// drives it.
    pub fn start(bridge: bridge::Bridge, config: &RlsConfig, max_message_size: usize) -> Result<Running, RlsError> {
        let err = |why: String| RlsError { addr: config.bind.clone(), why };
        let (listener, addr) = grpc::bind(&config.bind).map_err(|e| err(e.to_string()))?;
        let ready = sockets::Ready::default();
        let incoming = sockets::Incoming::new(listener, ready.clone()).map_err(|e| err(e.to_string()))?;
        let table = Arc::new(RwLock::new(config.table.clone()));
        let answering =
            decide::Answering { max_message_size, runtime_limits: config.runtime_limits, headers: config.headers };
        let counts = counts::Counts::default();
        let shared = grpc::Shared {
            table: table.clone(),
            bridge: bridge.clone(),
            answering,
            counts: counts.clone(),
            unanswered: grpc::MissedCalls::default(),
        };
        // Timers only: the sockets are the loop's to poll (`sockets`).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .event_interval(TASKS_PER_DRIVE)
            .build()
            .map_err(|e| err(e.to_string()))?;
        let health = GrpcHealth::default();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let server = grpc::RateLimitServer(Arc::new(shared));
        let follow = health.clone();
        let tls = config.tls.clone();
        let served = runtime.spawn(async move {
            if let Err(e) = grpc::serve(incoming, server, follow, stopped, tls).await {
                error!(error = %e, "envoy's rate-limit service stopped");
            }
        });
        info!(address = %addr, tls = config.tls.is_some(), "envoy's rate-limit service over grpc");
        let runtime = Some(Arc::new(runtime));
        Ok(Running { addr, health, table, stop, bridge, counts, ready, runtime, served: Some(served) })
    }

    /// Where the loop's replies to calls are sent from.
    pub fn within(&self) -> Option<Within> {
        self.runtime.clone().map(Within)
    }

    /// Adds a poll item for each gRPC socket a task waits on; returns how
    /// many (see `sockets::Ready`).
    pub fn poll_items(&self, into: &mut Vec<zmq::PollItem<'_>>) -> usize {
        self.ready.poll_items(into)
    }

    /// Readies the tasks whose sockets `items` (what `poll_items` added,
    /// polled) found ready, and drives.
    pub fn wake_and_drive(&self, items: &[zmq::PollItem<'_>]) {
        self.ready.wake(items);
        self.drive();
    }

    /// Runs every task that is ready (connections with bytes to read or
    /// write, calls replied to), and timers that are due, then returns:
    /// never waits.
    pub fn drive(&self) {
        if let Some(runtime) = &self.runtime {
            runtime.block_on(tokio::task::yield_now());
        }
    }

    /// The address gRPC listens on, with the real port.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the health service reports.
    pub fn health(&self) -> &GrpcHealth {
        &self.health
    }

    /// The calls per domain and outcome, as they go on.
    pub fn counts(&self) -> counts::Counts {
        self.counts.clone()
    }

    /// Serves `table` from the next call on (a reload).
    pub fn swap(&self, table: Arc<Table>) {
        *self.table.write().unwrap_or_else(|e| e.into_inner()) = table;
    }

    /// Stops serving: calls waiting for the loop end at once (the locker
    /// is stopping), then the connections are driven until they close, for
    /// at most `STOP_WAIT`.
    pub fn stop(&mut self) {
        self.health.set(false);
        self.bridge.close();
        // Fails only when the server has already ended: nothing to tell.
        let _ = self.stop.send(true);
        let deadline = std::time::Instant::now() + STOP_WAIT;
        while self.served.as_ref().is_some_and(|s| !s.is_finished()) && std::time::Instant::now() < deadline {
            let mut items = Vec::new();
            self.poll_items(&mut items);
            match zmq::poll(&mut items, 10) {
                Ok(_) | Err(zmq::Error::EINTR) => self.wake_and_drive(&items),
                Err(e) => {
                    warn!(error = %e, "envoy's rate-limit service's connections dropped unclosed at stop");
                    break;
                }
            }
        }
        self.served = None;
        // The loop's calls may still hold it (`Within`); the last holder
        // drops it.
        if let Some(runtime) = self.runtime.take().and_then(Arc::into_inner) {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}
