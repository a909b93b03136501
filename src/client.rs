//! `Client`: the Rust client library, and the engine behind `locker ask`.
//!
//! It speaks to one or more lockers through `wire`, one REQ round trip per
//! request, and follows the ZeroMQ Guide's Lazy Pirate pattern: every
//! request has a deadline, a locker that does not answer in its share of the
//! deadline has its socket closed and reopened (a REQ socket that timed out
//! can never send again), and the next endpoint is tried. Each endpoint is
//! tried at most once per request, so a request is never counted twice by
//! the same locker. The endpoint that answered last is tried first next time.
//! Waiting acquires and the lease guard are in `client::lease`.

use std::time::{Duration, Instant};

use tracing::debug;

use crate::curve::ClientCurve;
use crate::wire::{
    self, Ask, GoReply, Heartbeat, LeaseAsk, LeaseReply, Release, Reply, RequestMap, StatsReply, WireError,
};

mod lease;
mod pool;

pub use lease::Lease;
pub use pool::{PermitPool, Permits};

/// The default deadline for one request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no endpoint to connect to")]
    NoEndpoints,
    #[error("no locker answered within {timeout:?} (tried {tried})")]
    NoAnswer { timeout: Duration, tried: String },
    #[error("the locker refused the request: {0}")]
    Refused(String),
    #[error("the locker's reply could not be read: {0}")]
    BadReply(WireError),
    #[error("zeromq error on {endpoint}: {source}")]
    Zmq { endpoint: String, source: zmq::Error },
    #[error("{0}")]
    Key(#[from] crate::curve::KeyError),
}

/// A REQ socket connected to one endpoint.
struct Live {
    index: usize,
    socket: zmq::Socket,
}

/// A connection to one or more lockers.
///
/// Give it every locker's endpoint: each request goes to the one that
/// answered last, and when it does not answer within its share of the
/// deadline, to the next. A request that no locker answers in time returns
/// [`ClientError::NoAnswer`] instead of hanging. A `Client` holds one socket
/// and is used from one thread; [`Client::sibling`] makes another for
/// another thread.
///
/// # Examples
///
/// Ask a limit of two go per slot three times, with a dead locker listed
/// first:
///
/// ```
/// # use std::sync::atomic::AtomicBool;
/// # use locker::config::{FileConfig, Flags, ServeConfig};
/// # let flags = Flags { bind: Some("tcp://127.0.0.1:*".into()), max_requests: Some(2), in_seconds: Some(86_400.0), ..Flags::default() };
/// # let server = locker::daemon::Server::bind(&ServeConfig::resolve(flags, FileConfig::default())?)?;
/// # let endpoint = server.endpoint().to_owned();
/// # std::thread::spawn(move || server.run(&AtomicBool::new(false)));
/// use std::time::Duration;
/// use locker::{Ask, Client};
///
/// // `endpoint` is a running locker's, e.g. "tcp://127.0.0.1:7777".
/// let mut client = Client::new(["tcp://127.0.0.1:1", endpoint.as_str()], Duration::from_secs(1))?;
/// let reply = client.ask(&Ask::new().key("user-7"))?;
/// assert!(reply.ok);
/// assert_eq!((reply.limit, reply.remaining), (2, 1));
/// assert_eq!(client.current_endpoint(), Some(endpoint.as_str()));
///
/// assert!(client.ask(&Ask::new().key("user-7"))?.ok);
/// let sorry = client.ask(&Ask::new().key("user-7"))?;
/// assert!(!sorry.ok && sorry.retry_after_ms > 0); // the next slot
///
/// // Another key has a count of its own; the plain form asks unkeyed.
/// assert!(client.ask(&Ask::new().key("user-8"))?.ok);
/// assert!(client.plain(b"let me go")?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Client {
    ctx: zmq::Context,
    endpoints: Vec<String>,
    timeout: Duration,
    preferred: usize,
    live: Option<Live>,
    buf: Vec<u8>,
    curve: Option<ClientCurve>,
}

impl Client {
    /// A client for `endpoints` (tried in order, then the last one that
    /// answered first) with `timeout` as the deadline for each request.
    /// Nothing is sent until the first request.
    pub fn new<S: Into<String>>(
        endpoints: impl IntoIterator<Item = S>,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let endpoints: Vec<String> = endpoints.into_iter().map(Into::into).collect();
        if endpoints.is_empty() {
            return Err(ClientError::NoEndpoints);
        }
        Ok(Client {
            ctx: zmq::Context::new(),
            endpoints,
            timeout,
            preferred: 0,
            live: None,
            buf: Vec::new(),
            curve: None,
        })
    }

    /// This client, speaking CURVE: requests and replies are encrypted, and
    /// the locker must know `curve.keys.public` when it keeps an allowlist.
    /// A locker that refuses the key, or does not speak CURVE, gives no
    /// answer (`ClientError::NoAnswer`): ZeroMQ does not say why.
    pub fn with_curve(mut self, curve: ClientCurve) -> Client {
        self.live = None;
        self.curve = Some(curve);
        self
    }

    /// Asks for permits in the structured form and returns the whole reply.
    pub fn ask(&mut self, ask: &Ask) -> Result<GoReply, ClientError> {
        self.buf.clear();
        wire::encode(&ask.to_map(), &mut self.buf);
        let body = std::mem::take(&mut self.buf);
        let reply = self.round_trip(&body);
        self.buf = body;
        structured(&reply?)
    }

    /// Asks for permits and, when the locker answers with a reservation
    /// (`wait_ms`), sleeps until the caller may go. Returns the reply: `ok`
    /// means go now; not `ok` means sorry even within `max_wait_ms`.
    pub fn acquire(&mut self, ask: &Ask) -> Result<GoReply, ClientError> {
        let reply = self.ask(ask)?;
        if let Some(ms) = reply.wait_ms.filter(|&ms| reply.ok && ms > 0) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        Ok(reply)
    }

    /// Sends one acquire for a semaphore lease and returns the reply as is
    /// (held, pending or refused); see `Client::lease` for the waiting guard.
    pub fn acquire_lease(&mut self, ask: &LeaseAsk) -> Result<LeaseReply, ClientError> {
        self.send_map(&ask.to_map())
    }

    /// Keeps a lease alive (or, with `count`, restores it on a locker that
    /// does not know it).
    pub fn heartbeat(&mut self, beat: &Heartbeat) -> Result<LeaseReply, ClientError> {
        self.send_map(&beat.to_map())
    }

    /// Frees a lease; `ok` is false when the locker no longer held it.
    pub fn release(&mut self, release: &Release) -> Result<LeaseReply, ClientError> {
        self.send_map(&release.to_map())
    }

    fn send_map<T: serde::de::DeserializeOwned>(&mut self, map: &RequestMap) -> Result<T, ClientError> {
        self.buf.clear();
        wire::encode(map, &mut self.buf);
        let body = std::mem::take(&mut self.buf);
        let reply = self.round_trip(&body);
        self.buf = body;
        structured(&reply?)
    }

    /// A new client for the same lockers, sharing this one's ZeroMQ context,
    /// for use on another thread (sockets cannot be shared between threads).
    pub fn sibling(&self) -> Client {
        Client {
            ctx: self.ctx.clone(),
            endpoints: self.endpoints.clone(),
            timeout: self.timeout,
            preferred: self.preferred,
            live: None,
            buf: Vec::new(),
            curve: self.curve.clone(),
        }
    }

    /// Asks in the seed's plain form: true for go, false for sorry.
    pub fn plain(&mut self, body: &[u8]) -> Result<bool, ClientError> {
        let reply = self.round_trip(body)?;
        wire::decode_plain_reply(&reply).map_err(ClientError::BadReply)
    }

    /// The locker's counters.
    pub fn stats(&mut self) -> Result<StatsReply, ClientError> {
        let mut body = Vec::new();
        wire::encode(&RequestMap { op: Some("stats"), ..RequestMap::default() }, &mut body);
        structured(&self.round_trip(&body)?)
    }

    /// The endpoint that answered last, if any has.
    pub fn current_endpoint(&self) -> Option<&str> {
        self.live.as_ref().map(|l| self.endpoints[l.index].as_str())
    }

    /// Sends `body` and waits for one reply, failing over between endpoints.
    pub fn round_trip(&mut self, body: &[u8]) -> Result<zmq::Message, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let n = self.endpoints.len();
        for attempt in 0..n {
            let index = (self.preferred + attempt) % n;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Split what is left evenly over the endpoints not yet tried, so a
            // dead first endpoint leaves time for the live ones.
            let budget = left / (n - attempt) as u32;
            if let Some(reply) = self.attempt(index, body, budget)? {
                self.preferred = index;
                return Ok(reply);
            }
        }
        Err(ClientError::NoAnswer { timeout: self.timeout, tried: self.endpoints.join(", ") })
    }

    /// One try on one endpoint. `Ok(None)` means no answer in time; the
    /// socket is then closed so that a late reply cannot be mistaken for the
    /// answer to a later request.
    fn attempt(&mut self, index: usize, body: &[u8], budget: Duration) -> Result<Option<zmq::Message>, ClientError> {
        self.open(index)?;
        let socket = &self.live.as_ref().expect("opened above").socket;
        let endpoint = &self.endpoints[index];
        let zerr = |source| ClientError::Zmq { endpoint: endpoint.clone(), source };
        socket.send(body, 0).map_err(zerr)?;
        let timeout_ms = budget.as_millis().clamp(1, i64::MAX as u128) as i64;
        if socket.poll(zmq::POLLIN, timeout_ms).map_err(zerr)? > 0 {
            return socket.recv_msg(0).map(Some).map_err(zerr);
        }
        debug!(%endpoint, ?budget, "no answer; closing the socket and moving on");
        self.live = None;
        Ok(None)
    }

    /// Makes sure a REQ socket to endpoint `index` is open.
    fn open(&mut self, index: usize) -> Result<(), ClientError> {
        if self.live.as_ref().is_some_and(|l| l.index != index) {
            self.live = None;
        }
        if self.live.is_none() {
            let endpoint = &self.endpoints[index];
            let zerr = |source| ClientError::Zmq { endpoint: endpoint.clone(), source };
            let socket = self.ctx.socket(zmq::REQ).map_err(zerr)?;
            // Unsent requests die with the socket instead of holding up exit.
            socket.set_linger(0).map_err(zerr)?;
            if let Some(curve) = &self.curve {
                curve.secure(&socket).map_err(zerr)?;
            }
            socket.connect(endpoint).map_err(zerr)?;
            self.live = Some(Live { index, socket });
        }
        Ok(())
    }
}

fn structured<'a, T: serde::Deserialize<'a>>(reply: &'a [u8]) -> Result<T, ClientError> {
    match wire::decode_reply(reply).map_err(ClientError::BadReply)? {
        Reply::Answer(v) => Ok(v),
        Reply::Refused(why) => Err(ClientError::Refused(why)),
    }
}
