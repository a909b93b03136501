//! `locker bench`: a load generator for a running locker, or for the bare
//! echo baseline (`examples/echo_server.rs`), so the two can be compared
//! under the same load.
//!
//! Each client runs on its own thread with its own socket and keeps
//! `pipeline` requests in flight; with `batch`, each request is a batch of
//! asks, and the report counts decisions as well as messages. A run has up to three phases, all bounded:
//! a prefill that sends every key once (so a locker holds all of them live
//! before anything is timed), an untimed warm-up, and the timed phase. The
//! clients start the timed phase together. The generator only produces load
//! and measures it; it makes no decisions and checks no limits.

mod load;
mod report;
mod worker;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

pub use load::{key_name, Requests, PLAIN_BODY};
pub use report::{Measurements, Report};
use worker::Worker;

use crate::wire::MAX_BATCH_ASKS;

/// The most clients one run may start: each is a thread.
pub const MAX_CLIENTS: usize = 256;
/// The most requests one client may keep in flight, below ZeroMQ's default
/// high-water mark so that sends never block on a full queue.
pub const MAX_PIPELINE: usize = 1000;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Config(String),
    #[error("zeromq error {what}: {source}")]
    Zmq { what: &'static str, source: zmq::Error },
    #[error("no reply within {timeout_ms} ms: is the server running?")]
    NoAnswer { timeout_ms: i64 },
    #[error("a client thread panicked")]
    Panicked,
}

/// The two request forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The seed's bare body; keys do not apply.
    Plain,
    /// A MessagePack map, as `locker::Client` sends it.
    Structured,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Plain => "plain",
            Form::Structured => "structured",
        }
    }
}

/// A checked description of a run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub endpoint: String,
    pub clients: usize,
    pub pipeline: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub form: Form,
    pub limit: Option<String>,
    /// Distinct keys, structured form only; 0 sends no key.
    pub keys: usize,
    /// Send every key once before the warm-up.
    pub prefill: bool,
    /// Asks per message, structured form only: each message is a batch of
    /// this many; `None` sends one ask per message.
    pub batch: Option<usize>,
    /// The longest wait for any reply.
    pub timeout: Duration,
    /// Speak CURVE, with these keys.
    pub curve: Option<crate::curve::ClientCurve>,
}

impl BenchConfig {
    /// Checks the numbers a run depends on.
    pub fn check(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_owned()));
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return bad(&format!("--clients must be from 1 to {MAX_CLIENTS}"));
        }
        if !(1..=MAX_PIPELINE).contains(&self.pipeline) {
            return bad(&format!("--pipeline must be from 1 to {MAX_PIPELINE}"));
        }
        if self.duration.is_zero() || self.timeout.is_zero() {
            return bad("--duration and --timeout must be above zero");
        }
        if self.form == Form::Plain && (self.keys > 0 || self.prefill || self.batch.is_some()) {
            return bad("--keys, --prefill and --batch need the structured form (leave out --plain)");
        }
        if self.batch.is_some_and(|n| !(1..=MAX_BATCH_ASKS).contains(&n)) {
            return bad(&format!("--batch must be from 1 to {MAX_BATCH_ASKS}"));
        }
        Ok(())
    }

    fn requests(&self) -> Requests {
        match self.form {
            Form::Plain => Requests::plain(self.limit.as_deref()),
            Form::Structured => match self.batch {
                None => Requests::structured(self.limit.as_deref(), self.keys),
                Some(per) => Requests::batches(self.limit.as_deref(), self.keys, per),
            },
        }
    }
}

/// Runs the load described by `config` and reports what it measured.
pub fn run(config: &BenchConfig) -> Result<Report, BenchError> {
    config.check()?;
    let requests = Arc::new(config.requests());
    let ctx = zmq::Context::new();
    let start_line = Arc::new(Barrier::new(config.clients));
    let handles: Vec<_> = (0..config.clients)
        .map(|c| {
            let (ctx, config, requests, start_line) =
                (ctx.clone(), config.clone(), Arc::clone(&requests), Arc::clone(&start_line));
            thread::spawn(move || client(c, &ctx, &config, requests, &start_line))
        })
        .collect();
    let mut report =
        Report::builder(&config.endpoint, config.clients, config.pipeline, config.form.name(), config.keys)
            .batch(config.batch.unwrap_or(0));
    let mut elapsed = Duration::ZERO;
    let mut failure = None;
    for handle in handles {
        match handle.join().map_err(|_| BenchError::Panicked).and_then(|r| r) {
            Ok((tally, took)) => {
                report.add(&tally);
                elapsed = elapsed.max(took);
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(report.finish(elapsed)),
    }
}

/// One client's whole run: prefill its share of the keys, warm up, wait for
/// the others, then the timed phase. It always reaches the start line, even
/// after a failure, so that no other client waits for it forever.
fn client(
    c: usize,
    ctx: &zmq::Context,
    config: &BenchConfig,
    requests: Arc<Requests>,
    start_line: &Barrier,
) -> Result<(Measurements, Duration), BenchError> {
    let n = requests.len();
    // Each client starts at its own place in the keys, so together they
    // spread over all of them from the first request.
    let (share_from, share_to) = (c * n / config.clients, (c + 1) * n / config.clients);
    let curve = config.curve.as_ref();
    let connected = Worker::connect(ctx, &config.endpoint, config.pipeline, config.timeout, requests, curve)
        .map(|w| w.batched(config.batch.is_some()));
    let ready = connected.and_then(|mut w| {
        if config.prefill {
            w.send_range(share_from, share_to)?;
        }
        if !config.warmup.is_zero() {
            w.run_until(share_from, Instant::now() + config.warmup, false)?;
        }
        Ok(w)
    });
    start_line.wait();
    let mut worker = ready?;
    let start = Instant::now();
    worker.run_until(share_from, start + config.duration, true)?;
    Ok((worker.tally, start.elapsed()))
}
