//! The store thread: carries the service's claims and lease calls to Redis
//! (or a Redis Cluster) and their answers back, so that the serving thread
//! never waits on the store.
//!
//! The loop hands calls over a channel; this thread routes each to the
//! node that holds its key (by the cluster's slot map, read with `CLUSTER
//! SLOTS`; a single server is one node) and hands each node's share to
//! that node's own thread and connection (`node`), so that one node's
//! stall or failure holds up only its own keys' calls. Each script is on
//! one key or on keys sharing a hash tag, so it has one node. MOVED and
//! ASK answers are followed here (a MOVED makes the map be read again),
//! and so is a failure (a failover changes the map). Answers go back over
//! a channel, poking the loop's poll with an empty message on an inproc
//! socket; each names its node, and a node's changes of health (it failed,
//! it answers again, it left the map) are sent as answers of their own
//! (`NODE_REPORT`, `NODE_GONE`), so that stats, metrics and health say
//! which node is down as soon as a call to it fails. Nothing here decides:
//! `core::claims` and the scripts do.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::transport::{zmq_err, TransportError};
use crate::config::StoreConfig;
use crate::core::claims::{ClaimAsk, Claimed, RETRY_DOWN};
use crate::core::store_lease::{LeaseAnswer, LeaseCall};

mod dispatch;
mod node;
mod scripts;
mod slots;

use dispatch::Dispatcher;
use node::{Call, NodeOutcome};

/// The most events taken in before the answers so far are sent back.
const MAX_EVENTS: usize = 256;

/// Calls for the store: claims of permits and lease calls.
#[derive(Debug, Default)]
pub struct StoreCalls {
    pub claims: Vec<ClaimAsk>,
    pub leases: Vec<LeaseCall>,
}

impl StoreCalls {
    fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.leases.is_empty()
    }

    fn len(&self) -> usize {
        self.claims.len() + self.leases.len()
    }
}

/// The store's answers, each naming its call.
#[derive(Debug, Default)]
pub struct StoreAnswers {
    pub claims: Vec<Claimed>,
    pub leases: Vec<LeaseAnswer>,
}

impl StoreAnswers {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.leases.is_empty()
    }
}

/// What the store thread is told: calls from the loop, outcomes and
/// health from the nodes' threads, or to stop.
#[derive(Debug)]
enum Event {
    Calls(StoreCalls),
    Done { node: Arc<str>, outcomes: Vec<(Call, NodeOutcome)> },
    Health { node: Arc<str>, health: Result<(), String> },
    Map(dispatch::MapRead),
    Stop,
}

/// The inproc endpoint the store thread pokes the loop on.
const WAKE_ENDPOINT: &str = "inproc://locker-store-wake";

/// Why the store thread could not start.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("starting the store thread: {0}")]
    Thread(std::io::Error),
}

/// The loop's end of the store thread.
pub struct StoreLink {
    calls: Sender<Event>,
    answers: Receiver<StoreAnswers>,
    wake: zmq::Socket,
    thread: Option<JoinHandle<()>>,
}

impl StoreLink {
    /// Starts the store thread for `config`: each store call given at most
    /// its timeout, each claim waiting for its replicas. It connects on
    /// its first claim, so a store that is down at start only fails claims
    /// (the limits' failure policy answers).
    pub fn start(ctx: &zmq::Context, config: &StoreConfig) -> Result<StoreLink, StoreError> {
        let wake = ctx.socket(zmq::PAIR).map_err(zmq_err("creating the store's wake socket"))?;
        wake.bind(WAKE_ENDPOINT).map_err(zmq_err("binding the store's wake socket"))?;
        let poke = ctx.socket(zmq::PAIR).map_err(zmq_err("creating the store's wake socket"))?;
        poke.connect(WAKE_ENDPOINT).map_err(zmq_err("connecting the store's wake socket"))?;
        let (calls, inbox) = mpsc::channel();
        let (outbox, answers) = mpsc::channel();
        let settings = node::StoreCallSettings { timeout: config.timeout, replicas: config.replicas };
        let dispatcher = Dispatcher::new(&config.spec, settings, calls.clone());
        let thread = std::thread::Builder::new()
            .name("locker-store".into())
            .spawn(move || run(dispatcher, &inbox, &outbox, &poke))
            .map_err(StoreError::Thread)?;
        Ok(StoreLink { calls, answers, wake, thread: Some(thread) })
    }

    /// Hands `batch` to the store thread.
    pub fn send(&self, batch: StoreCalls) {
        if batch.is_empty() {
            return;
        }
        if let Err(mpsc::SendError(event)) = self.calls.send(Event::Calls(batch)) {
            let calls = if let Event::Calls(b) = event { b.len() } else { 0 };
            tracing::warn!(calls, "the store thread is gone; calls not sent");
        }
    }

    /// What the loop polls: readable when answers are waiting.
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.wake.as_poll_item(zmq::POLLIN)
    }

    /// The answers that came back, taken out.
    pub fn answers(&self) -> StoreAnswers {
        while self.wake.recv_bytes(zmq::DONTWAIT).is_ok() {}
        let mut all = StoreAnswers::default();
        for answers in self.answers.try_iter() {
            all.claims.extend(answers.claims);
            all.leases.extend(answers.leases);
        }
        all
    }
}

impl Drop for StoreLink {
    fn drop(&mut self) {
        // The nodes' threads hold senders too, so the channel never closes
        // by itself: the thread stops when told, after the events before.
        let _ = self.calls.send(Event::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The store thread: takes events in, routes calls, sends answers back,
/// and reads the cluster's map again when it may have changed.
fn run(mut dispatcher: Dispatcher, inbox: &Receiver<Event>, outbox: &Sender<StoreAnswers>, poke: &zmq::Socket) {
    let mut stopping = false;
    while !stopping {
        let wait = if dispatcher.wants_map() { Duration::from_nanos(RETRY_DOWN) } else { Duration::from_secs(3600) };
        let first = match inbox.recv_timeout(wait) {
            Ok(event) => Some(event),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut answers = StoreAnswers::default();
        let more = std::iter::from_fn(|| inbox.try_recv().ok()).take(MAX_EVENTS);
        for event in first.into_iter().chain(more) {
            match event {
                Event::Stop => {
                    stopping = true;
                    break;
                }
                Event::Calls(batch) => dispatcher.take(batch),
                Event::Done { node, outcomes } => dispatcher.done(&node, outcomes, &mut answers),
                Event::Health { node, health } => dispatcher.health(&node, health, &mut answers),
                Event::Map(read) => dispatcher.mapped(read, &mut answers),
            }
        }
        dispatcher.route(&mut answers);
        if !answers.is_empty() {
            if outbox.send(answers).is_err() {
                break;
            }
            let _ = poke.send(&b""[..], zmq::DONTWAIT);
        }
    }
    dispatcher.stop();
}
