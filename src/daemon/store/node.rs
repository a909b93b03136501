//! One node of the store: a thread with its own connection to one Redis
//! server (a cluster's master, or the one server), which sends the calls
//! routed to it as one pipeline under its own timeout and reports each
//! call's outcome to the store thread.
//!
//! A node that stalls or fails holds up only its own calls: every other
//! node has its own thread and connection. After a failure its calls are
//! failed at once for `RETRY_DOWN` (a dead node costs no more than ten
//! failed pipelines a second), its connection is made anew (a late answer
//! must not be read as the next call's), and while it stays failed it is
//! probed with `PING`, so that it is known to be back as soon as it
//! answers, with or without traffic. With `replicas`, a `WAIT` ends each
//! pipeline, and calls that fewer replicas acknowledged in time fail.
//!
//! It decides nothing about permits: it carries calls and answers.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::{scripts, Event};
use crate::core::claims::{ClaimAsk, RETRY_DOWN};
use crate::core::store_lease::LeaseCall;

/// The most calls in one pipeline.
const MAX_PIPELINE: usize = 4096;

/// How long a node's thread waits for calls before it looks again when
/// nothing is wrong (it is woken by every call and by its end).
const IDLE: Duration = Duration::from_secs(3600);

/// A call for the store, routed to one node.
#[derive(Debug)]
pub struct Call {
    pub what: What,
    /// Sent to this node after an ASK answer, with `ASKING` before it.
    pub ask: Option<Arc<str>>,
    /// MOVED and ASK answers followed so far.
    pub redirects: u8,
}

/// A claim or a lease call.
#[derive(Debug)]
pub enum What {
    Claim(ClaimAsk),
    Lease(LeaseCall),
}

impl Call {
    pub fn new(what: What) -> Call {
        Call { what, ask: None, redirects: 0 }
    }

    /// The Redis key the call is routed by (its first).
    pub fn key(&self) -> String {
        match &self.what {
            What::Claim(c) => scripts::key_of(c),
            What::Lease(l) => scripts::lease_keys(l)[0].clone(),
        }
    }

    fn command(&self) -> redis::Cmd {
        match &self.what {
            What::Claim(c) => scripts::command(c),
            What::Lease(l) => scripts::lease_command(l),
        }
    }
}

/// What became of one call on its node.
#[derive(Debug)]
pub enum NodeOutcome {
    /// The script's answer.
    Answer(redis::Value),
    /// The node does not hold the call's slot: this one does.
    Moved { slot: u16, node: String },
    /// The slot is moving: ask this node, once.
    Ask { node: String },
    /// The node failed, or did not answer in time: why.
    Failed(String),
}

/// How calls to every node are made.
#[derive(Debug, Clone, Copy)]
pub struct StoreCallSettings {
    /// How long one call to the store may take.
    pub timeout: Duration,
    /// Replicas that must acknowledge each pipeline's writes.
    pub replicas: u32,
}

impl StoreCallSettings {
    /// How long a read may wait: the scripts' time, and the `WAIT`'s.
    fn read_timeout(self) -> Duration {
        if self.replicas > 0 {
            self.timeout * 2
        } else {
            self.timeout
        }
    }
}

/// The store thread's end of a node's thread.
pub struct NodeLink {
    calls: Sender<Vec<Call>>,
    thread: JoinHandle<()>,
}

impl NodeLink {
    /// Starts the thread of node `name`, reached at `url`; it reports to
    /// `events`.
    pub fn start(
        name: Arc<str>,
        url: String,
        settings: StoreCallSettings,
        events: Sender<Event>,
    ) -> std::io::Result<NodeLink> {
        let (calls, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("locker-store-{name}"))
            .spawn(move || StoreNode { name, url, settings, conn: None, failed: None }.serve(&inbox, &events))?;
        Ok(NodeLink { calls, thread })
    }

    /// Hands `calls` to the node's thread; gives them back if it is gone.
    pub fn send(&self, calls: Vec<Call>) -> Result<(), Vec<Call>> {
        self.calls.send(calls).map_err(|mpsc::SendError(calls)| calls)
    }

    /// Ends the thread after its current pipeline; the handle to join.
    pub fn close(self) -> JoinHandle<()> {
        self.thread
    }
}

/// The last failure of a node.
struct Failure {
    why: String,
    at: Instant,
    /// Whether the connection failed (then a `PING` tells it is back);
    /// else the node answered with an error, and only a call tells.
    probe: bool,
}

struct StoreNode {
    name: Arc<str>,
    url: String,
    settings: StoreCallSettings,
    conn: Option<redis::Connection>,
    failed: Option<Failure>,
}

impl StoreNode {
    fn serve(mut self, inbox: &Receiver<Vec<Call>>, events: &Sender<Event>) {
        loop {
            let wait =
                if self.failed.as_ref().is_some_and(|f| f.probe) { Duration::from_nanos(RETRY_DOWN) } else { IDLE };
            let mut calls = match inbox.recv_timeout(wait) {
                Ok(calls) => calls,
                Err(RecvTimeoutError::Timeout) => {
                    self.probe(events);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            while calls.len() < MAX_PIPELINE {
                match inbox.try_recv() {
                    Ok(more) => calls.extend(more),
                    Err(_) => break,
                }
            }
            let outcomes = self.call(&calls);
            let done = Event::Done { node: self.name.clone(), outcomes: calls.into_iter().zip(outcomes).collect() };
            if events.send(done).is_err() {
                return;
            }
        }
    }

    /// Makes `calls` in one pipeline: the outcome of each, in order.
    fn call(&mut self, calls: &[Call]) -> Vec<NodeOutcome> {
        if let Some(f) = self.failed.as_ref().filter(|f| f.at.elapsed() < Duration::from_nanos(RETRY_DOWN)) {
            // Left alone a while after it failed.
            return calls.iter().map(|_| NodeOutcome::Failed(f.why.clone())).collect();
        }
        match self.pipeline(calls) {
            Ok(outcomes) => {
                let why = outcomes.iter().find_map(|o| if let NodeOutcome::Failed(why) = o { Some(why) } else { None });
                match why {
                    Some(why) => self.fail(why.clone(), false),
                    None => self.answered(),
                }
                outcomes
            }
            Err(e) => {
                self.conn = None;
                let why = self.why(&e);
                self.fail(why.clone(), true);
                calls.iter().map(|_| NodeOutcome::Failed(why.clone())).collect()
            }
        }
    }

    fn pipeline(&mut self, calls: &[Call]) -> redis::RedisResult<Vec<NodeOutcome>> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self.conn.insert(connect(&self.url, self.settings)?),
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for call in calls {
            if call.ask.is_some() {
                pipe.cmd("ASKING").ignore();
            }
            pipe.add_command(call.command());
        }
        let replicas = self.settings.replicas;
        if replicas > 0 {
            pipe.cmd("WAIT").arg(replicas).arg(self.settings.timeout.as_millis() as u64);
        }
        let mut values: Vec<redis::Value> = pipe.query(conn)?;
        let unacked = if replicas > 0 { unacknowledged(values.pop(), self.settings) } else { None };
        let outcomes = values.into_iter().map(outcome);
        // A write no replica has is not granted from: it could be lost.
        Ok(outcomes
            .map(|o| match (o, &unacked) {
                (NodeOutcome::Answer(_), Some(why)) => NodeOutcome::Failed(why.clone()),
                (o, _) => o,
            })
            .collect())
    }

    /// What went wrong, in words: a read that timed out says so, not
    /// the socket's "Resource temporarily unavailable".
    fn why(&self, e: &redis::RedisError) -> String {
        if e.is_timeout() {
            format!("no answer within {} ms", self.settings.read_timeout().as_millis())
        } else {
            e.to_string()
        }
    }

    fn fail(&mut self, why: String, probe: bool) {
        if self.failed.is_none() {
            warn!(node = %self.name, error = %why, "a store node failed; its keys follow the failure policy until it answers");
        }
        self.failed = Some(Failure { why, at: Instant::now(), probe });
    }

    fn answered(&mut self) {
        if self.failed.take().is_some() {
            info!(node = %self.name, "the store node answers again");
        }
    }

    /// While the connection is failing, `PING`s the node; reports it back
    /// when it answers.
    fn probe(&mut self, events: &Sender<Event>) {
        let pong = connect(&self.url, self.settings).and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if pong.is_ok() {
            self.answered();
            let _ = events.send(Event::Health { node: self.name.clone(), health: Ok(()) });
        }
    }
}

pub fn connect(url: &str, settings: StoreCallSettings) -> redis::RedisResult<redis::Connection> {
    let conn = redis::Client::open(url)?.get_connection_with_timeout(settings.timeout)?;
    conn.set_read_timeout(Some(settings.read_timeout()))?;
    conn.set_write_timeout(Some(settings.timeout))?;
    Ok(conn)
}

/// Why a pipeline's writes do not count, from its `WAIT`'s answer: fewer
/// replicas acknowledged them in time than `settings` asks for.
fn unacknowledged(acked: Option<redis::Value>, settings: StoreCallSettings) -> Option<String> {
    let replicas = settings.replicas;
    match acked {
        Some(redis::Value::Int(n)) if n >= i64::from(replicas) => None,
        Some(redis::Value::Int(n)) => {
            Some(format!("{n} of {replicas} replicas acknowledged within {} ms", settings.timeout.as_millis()))
        }
        other => Some(format!("WAIT answered {other:?}")),
    }
}

/// One value of a pipeline's answer as an outcome: the answer, or a
/// redirection, or the error.
fn outcome(value: redis::Value) -> NodeOutcome {
    let redis::Value::ServerError(e) = value else { return NodeOutcome::Answer(value) };
    let redirect = || {
        let mut words = e.details()?.split_ascii_whitespace();
        Some((words.next()?.parse::<u16>().ok()?, words.next()?.to_owned()))
    };
    match (e.code(), redirect()) {
        ("MOVED", Some((slot, node))) => NodeOutcome::Moved { slot, node },
        ("ASK", Some((_, node))) => NodeOutcome::Ask { node },
        (code, _) => NodeOutcome::Failed(format!("{code} {}", e.details().unwrap_or_default()).trim_end().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn writes_fewer_replicas_acknowledged_than_asked_do_not_count() {
        let settings = StoreCallSettings { timeout: Duration::from_millis(100), replicas: 2 };
        assert_eq!(unacknowledged(Some(Value::Int(2)), settings), None);
        assert_eq!(unacknowledged(Some(Value::Int(3)), settings), None);
        let short = unacknowledged(Some(Value::Int(1)), settings);
        assert_eq!(short.as_deref(), Some("1 of 2 replicas acknowledged within 100 ms"));
        assert!(unacknowledged(None, settings).is_some(), "no answer to WAIT is no acknowledgement");
    }

    #[test]
    fn an_error_answer_is_a_redirection_or_a_failure() {
        let parse = |text: &str| match redis::parse_redis_value(text.as_bytes()).unwrap() {
            v @ Value::ServerError(_) => outcome(v),
            other => panic!("{other:?}"),
        };
        assert!(
            matches!(parse("-MOVED 3999 127.0.0.1:6381\r\n"), NodeOutcome::Moved { slot: 3999, node } if node == "127.0.0.1:6381")
        );
        assert!(matches!(parse("-ASK 3999 127.0.0.1:6381\r\n"), NodeOutcome::Ask { node } if node == "127.0.0.1:6381"));
        let down = parse("-CLUSTERDOWN The cluster is down\r\n");
        assert!(matches!(down, NodeOutcome::Failed(why) if why == "CLUSTERDOWN The cluster is down"));
        assert!(matches!(outcome(Value::Int(1)), NodeOutcome::Answer(Value::Int(1))));
    }
}
