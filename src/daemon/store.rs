//! The store thread: carries the service's claims to Redis (or a Redis
//! Cluster) and their answers back, so that the serving thread never waits
//! on the store.
//!
//! The loop hands claims over a channel; this thread takes every claim
//! waiting, sends them as one pipeline of single-key scripts (a cluster
//! pipeline writes each node's share before reading any answer, so the
//! nodes work at once; MOVED and ASK are followed by the client crate),
//! and sends the answers back over a channel, poking the loop's poll with
//! an empty message on an inproc socket. A claim whose pipeline fails is
//! answered with the error, and the connection is made again for the next
//! one. Nothing here decides: `core::claims` does.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{info, warn};

use super::transport::{zmq_err, TransportError};
use crate::config::StoreSpec;
use crate::core::claims::{ClaimAsk, Claimed, Grant};

mod scripts;

/// The most claims in one pipeline.
const MAX_PIPELINE: usize = 4096;

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

    /// Makes every claim of `batch` in one pipeline.
    fn claim(&mut self, batch: &[ClaimAsk]) -> redis::RedisResult<Vec<redis::Value>> {
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                for claim in batch {
                    pipe.add_command(scripts::command(claim));
                }
                pipe.query(c)
            }
            Conn::Cluster(c) => {
                let mut pipe = redis::cluster::cluster_pipe();
                for claim in batch {
                    pipe.add_command(scripts::command(claim));
                }
                pipe.query(c.as_mut())
            }
        }
    }
}

/// The loop's end of the store thread.
pub struct StoreLink {
    claims: Option<Sender<Vec<ClaimAsk>>>,
    answers: Receiver<Vec<Claimed>>,
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
        let (claims, inbox) = mpsc::channel();
        let (outbox, answers) = mpsc::channel();
        let spec = spec.clone();
        let thread = std::thread::Builder::new()
            .name("locker-store".into())
            .spawn(move || run(&spec, timeout, &inbox, &outbox, &poke))
            .map_err(StoreError::Thread)?;
        Ok(StoreLink { claims: Some(claims), answers, wake, thread: Some(thread) })
    }

    /// Hands `batch` to the store thread.
    pub fn send(&self, batch: Vec<ClaimAsk>) {
        if batch.is_empty() {
            return;
        }
        if let Some(c) = &self.claims {
            if let Err(mpsc::SendError(batch)) = c.send(batch) {
                warn!(claims = batch.len(), "the store thread is gone; claims not sent");
            }
        }
    }

    /// What the loop polls: readable when answers are waiting.
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.wake.as_poll_item(zmq::POLLIN)
    }

    /// The answers that came back, taken out.
    pub fn answers(&self) -> Vec<Claimed> {
        while self.wake.recv_bytes(zmq::DONTWAIT).is_ok() {}
        self.answers.try_iter().flatten().collect()
    }
}

impl Drop for StoreLink {
    fn drop(&mut self) {
        // Closing the channel ends the thread after its current pipeline.
        self.claims = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    spec: &StoreSpec,
    timeout: Duration,
    inbox: &Receiver<Vec<ClaimAsk>>,
    outbox: &Sender<Vec<Claimed>>,
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
        .and_then(|mut c| c.claim(&batch).map(|values| (c, values)));
        let answers = match result {
            Ok((c, values)) => {
                conn = Some(c);
                if failing {
                    info!("the store answers again");
                    failing = false;
                }
                batch.iter().zip(values).map(|(claim, v)| Claimed { id: claim.id, grant: grant_of(v) }).collect()
            }
            Err(e) => {
                if !failing {
                    warn!(error = %e, "the store failed; claims answered with the error until it is back");
                    failing = true;
                }
                let why = format!("the store failed: {e}");
                batch.iter().map(|claim| Claimed { id: claim.id, grant: Err(why.clone()) }).collect()
            }
        };
        if outbox.send(answers).is_err() {
            return;
        }
        let _ = poke.send(&b""[..], zmq::DONTWAIT);
    }
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
