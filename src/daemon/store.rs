//! The store thread: carries the service's claims and lease calls to Redis
//! (or a Redis Cluster) and their answers back, so that the serving thread
//! never waits on the store.
//!
//! The loop hands calls over a channel; this thread takes every call
//! waiting, sends them as one pipeline of scripts, each on one key or on
//! keys sharing a hash tag (a cluster
//! pipeline writes each node's share before reading any answer, so the
//! nodes work at once; MOVED and ASK are followed by the client crate),
//! and sends the answers back over a channel, poking the loop's poll with
//! an empty message on an inproc socket. A call whose pipeline fails is
//! answered with the error, and the connection is made again for the next
//! one. Nothing here decides: `core::claims` and the scripts do.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{info, warn};

use super::transport::{zmq_err, TransportError};
use crate::config::StoreSpec;
use crate::core::claims::{ClaimAsk, Claimed, Grant};
use crate::core::store_lease::{LeaseAnswer, LeaseCall, StoreLease};

mod scripts;

/// The most calls in one pipeline.
const MAX_PIPELINE: usize = 4096;

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

    fn extend(&mut self, more: StoreCalls) {
        self.claims.extend(more.claims);
        self.leases.extend(more.leases);
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

/// A connection to the store: one server, or a cluster.
enum Conn {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Conn {
    fn open(spec: &StoreSpec, timeout: Duration) -> redis::RedisResult<Conn> {
        match spec {
            StoreSpec::Single(url) => {
                let conn = redis::Client::open(url.as_str())?.get_connection_with_timeout(timeout)?;
                conn.set_read_timeout(Some(timeout))?;
                conn.set_write_timeout(Some(timeout))?;
                Ok(Conn::Single(conn))
            }
            StoreSpec::Cluster(nodes) => {
                let client = redis::cluster::ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .build()?;
                Ok(Conn::Cluster(Box::new(client.get_connection()?)))
            }
        }
    }

    /// Makes every call of `batch` in one pipeline: the claims' answers
    /// first, then the lease calls'.
    fn call(&mut self, batch: &StoreCalls) -> redis::RedisResult<Vec<redis::Value>> {
        let commands = || {
            let claims = batch.claims.iter().map(scripts::command);
            claims.chain(batch.leases.iter().map(scripts::lease_command))
        };
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                commands().for_each(|cmd| _ = pipe.add_command(cmd));
                pipe.query(c)
            }
            Conn::Cluster(c) => {
                let mut pipe = redis::cluster::cluster_pipe();
                commands().for_each(|cmd| _ = pipe.add_command(cmd));
                pipe.query(c.as_mut())
            }
        }
    }
}

/// The loop's end of the store thread.
pub struct StoreLink {
    calls: Option<Sender<StoreCalls>>,
    answers: Receiver<StoreAnswers>,
    wake: zmq::Socket,
    thread: Option<JoinHandle<()>>,
}

impl StoreLink {
    /// Starts the store thread for `spec`, each store call given at most
    /// `timeout`. It connects on its first claim, so a store that is down
    /// at start only fails claims (the limits' failure policy answers).
    pub fn start(ctx: &zmq::Context, spec: &StoreSpec, timeout: Duration) -> Result<StoreLink, StoreError> {
        let wake = ctx.socket(zmq::PAIR).map_err(zmq_err("creating the store's wake socket"))?;
        wake.bind(WAKE_ENDPOINT).map_err(zmq_err("binding the store's wake socket"))?;
        let poke = ctx.socket(zmq::PAIR).map_err(zmq_err("creating the store's wake socket"))?;
        poke.connect(WAKE_ENDPOINT).map_err(zmq_err("connecting the store's wake socket"))?;
        let (calls, inbox) = mpsc::channel();
        let (outbox, answers) = mpsc::channel();
        let spec = spec.clone();
        let thread = std::thread::Builder::new()
            .name("locker-store".into())
            .spawn(move || run(&spec, timeout, &inbox, &outbox, &poke))
            .map_err(StoreError::Thread)?;
        Ok(StoreLink { calls: Some(calls), answers, wake, thread: Some(thread) })
    }

    /// Hands `batch` to the store thread.
    pub fn send(&self, batch: StoreCalls) {
        if batch.is_empty() {
            return;
        }
        if let Some(c) = &self.calls {
            if let Err(mpsc::SendError(batch)) = c.send(batch) {
                warn!(calls = batch.len(), "the store thread is gone; calls not sent");
            }
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
        // Closing the channel ends the thread after its current pipeline.
        self.calls = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    spec: &StoreSpec,
    timeout: Duration,
    inbox: &Receiver<StoreCalls>,
    outbox: &Sender<StoreAnswers>,
    poke: &zmq::Socket,
) {
    let mut conn: Option<Conn> = None;
    let mut failing = false;
    while let Ok(mut batch) = inbox.recv() {
        while batch.len() < MAX_PIPELINE {
            match inbox.try_recv() {
                Ok(more) => batch.extend(more),
                Err(_) => break,
            }
        }
        let result = match conn.take() {
            Some(c) => Ok(c),
            None => Conn::open(spec, timeout),
        }
        .and_then(|mut c| c.call(&batch).map(|values| (c, values)));
        let answers = match result {
            Ok((c, values)) => {
                conn = Some(c);
                if failing {
                    info!("the store answers again");
                    failing = false;
                }
                answers_of(&batch, values)
            }
            Err(e) => {
                if !failing {
                    warn!(error = %e, "the store failed; calls answered with the error until it is back");
                    failing = true;
                }
                let why = format!("the store failed: {e}");
                StoreAnswers {
                    claims: batch.claims.iter().map(|c| Claimed { id: c.id, grant: Err(why.clone()) }).collect(),
                    leases: batch.leases.iter().map(|l| LeaseAnswer { id: l.id, result: Err(why.clone()) }).collect(),
                }
            }
        };
        if outbox.send(answers).is_err() {
            return;
        }
        let _ = poke.send(&b""[..], zmq::DONTWAIT);
    }
}

/// The pipeline's `values` as the answers to `batch`, in its order.
fn answers_of(batch: &StoreCalls, values: Vec<redis::Value>) -> StoreAnswers {
    let mut values = values.into_iter();
    let claims = batch.claims.iter().zip(values.by_ref()).map(|(c, v)| Claimed { id: c.id, grant: grant_of(v) });
    let claims = claims.collect();
    let leases = batch.leases.iter().zip(values).map(|(l, v)| LeaseAnswer { id: l.id, result: lease_of(v) });
    StoreAnswers { claims, leases: leases.collect() }
}

/// A lease script's answer `{state, left_us, capacity, free}`.
fn lease_of(value: redis::Value) -> Result<StoreLease, String> {
    let numbers: Vec<i64> = redis::from_redis_value(value).map_err(|e| format!("the store's answer: {e}"))?;
    StoreLease::from_numbers(&numbers)
}

/// A script's answer `{got, valid_us, left, retry_us}` as a grant.
fn grant_of(value: redis::Value) -> Result<Grant, String> {
    let numbers: Vec<i64> = redis::from_redis_value(value).map_err(|e| format!("the store's answer: {e}"))?;
    let [got, valid_us, left, retry_us] = numbers[..] else {
        return Err(format!("the store's answer has {} numbers, not 4", numbers.len()));
    };
    let n = |x: i64| u64::try_from(x).unwrap_or(0);
    Ok(Grant {
        got: u32::try_from(n(got)).unwrap_or(u32::MAX),
        valid_us: n(valid_us),
        left: u32::try_from(n(left)).unwrap_or(u32::MAX),
        retry_us: n(retry_us),
    })
}
