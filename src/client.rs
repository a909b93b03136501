//! `Client`: the Rust client library, and the engine behind `locker ask`.
//!
//! It speaks to one or more lockers through `wire`, one REQ round trip per
//! request, and follows the ZeroMQ Guide's Lazy Pirate pattern: every
//! request has a deadline, a locker that does not answer in its share of the
//! deadline has its socket closed and reopened (a REQ socket that timed out
//! can never send again), and the next endpoint is tried. Each endpoint is
//! tried at most once per request, so a request is never counted twice by
//! the same locker. The endpoint that answered last is tried first next time.
//! An endpoint with no connection (a dead locker) is passed over at first
//! with nothing sent, so it does not take a share of the deadline.
//! Waiting acquires and the lease guard are in `client::lease`.

use std::time::{Duration, Instant};

use tracing::debug;

use crate::curve::ClientCurve;
use crate::wire::{
    self, Ask, GoReply, Heartbeat, LeaseAsk, LeaseReply, Release, Reply, RequestMap, StatsReply, WireError,
};

mod lease;
mod pool;
mod together;

pub use lease::Lease;
pub use pool::{PermitPool, Permits};

/// The default deadline for one request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a try waits for a connection before passing an endpoint over
/// for now: far longer than a connect on a LAN, far shorter than a timeout.
const CONNECT_CHECK: Duration = Duration::from_millis(100);

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

    /// Asks for permits many times in one message (at most
    /// `wire::MAX_BATCH_ASKS`): one round trip, and the replies in the order
    /// of `asks`, each the reply that ask would get on its own or the
    /// reason the locker refused that ask alone. An error refuses them all.
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
    /// let mut client = Client::new([endpoint.as_str()], Duration::from_secs(1))?;
    /// let asks = [Ask::new().key("a"), Ask::new().key("a"), Ask::new().key("a"), Ask::new().limit("nope")];
    /// let replies = client.ask_many(&asks)?;
    /// let ok: Vec<bool> = replies[..3].iter().map(|r| r.as_ref().unwrap().ok).collect();
    /// assert_eq!(ok, [true, true, false]);
    /// assert!(replies[3].as_ref().unwrap_err().contains("unknown limit"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ask_many(&mut self, asks: &[Ask]) -> Result<Vec<Result<GoReply, String>>, ClientError> {
        let reply = self.send_with(|body| wire::encode_batch(asks, body))?;
        match wire::decode_batch_reply(&reply).map_err(ClientError::BadReply)? {
            Reply::Answer(replies) => Ok(replies),
            Reply::Refused(why) => Err(ClientError::Refused(why)),
        }
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
        structured(&self.send_with(|body| wire::encode(map, body))?)
    }

    /// Sends the request `write` encodes, in the reused buffer, and
    /// returns the reply.
    fn send_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<zmq::Message, ClientError> {
        self.buf.clear();
        write(&mut self.buf);
        let body = std::mem::take(&mut self.buf);
        let reply = self.round_trip(&body);
        self.buf = body;
        reply
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

    /// How many endpoints this client tries.
    fn endpoint_count(&self) -> usize {
        self.endpoints.len()
    }

    /// The endpoint that answered last, if any has.
    pub fn current_endpoint(&self) -> Option<&str> {
        self.live.as_ref().map(|l| self.endpoints[l.index].as_str())
    }

    /// Sends `body` and waits for one reply, failing over between endpoints.
    ///
    /// An endpoint whose socket has no connection after `CONNECT_CHECK` is
    /// passed over at first, with nothing sent (so one dead locker does not
    /// cost everyone a share of the deadline), and tried again once the
    /// others have been, with the time left. Each endpoint is still sent
    /// the request at most once.
    pub fn round_trip(&mut self, body: &[u8]) -> Result<zmq::Message, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let n = self.endpoints.len();
        let mut not_sent = n;
        let mut passed_over = Vec::new();
        for attempt in 0..n {
            let index = (self.preferred + attempt) % n;
            let Some(share) = share_of(deadline, not_sent) else { break };
            // The last endpoint with none passed over has nobody to make way for.
            let last = attempt + 1 == n && passed_over.is_empty();
            match self.attempt(index, body, share, if last { share } else { CONNECT_CHECK.min(share) })? {
                Try::Answer(reply) => return Ok(self.answered(index, reply)),
                Try::Silent => not_sent -= 1,
                Try::NotConnected => passed_over.push(index),
            }
        }
        for (k, &index) in passed_over.iter().enumerate() {
            let Some(share) = share_of(deadline, passed_over.len() - k) else { break };
            if let Try::Answer(reply) = self.attempt(index, body, share, share)? {
                return Ok(self.answered(index, reply));
            }
        }
        Err(ClientError::NoAnswer { timeout: self.timeout, tried: self.endpoints.join(", ") })
    }

    /// The endpoint that answered is asked first next time.
    fn answered(&mut self, index: usize, reply: zmq::Message) -> zmq::Message {
        self.preferred = index;
        reply
    }

    /// One try on one endpoint: wait up to `connect` for a connection (a
    /// socket with `ZMQ_IMMEDIATE` is writable only then), send, and wait
    /// for the reply until `budget` is spent. Without an answer the socket
    /// is closed, so a late reply cannot be mistaken for the answer to a
    /// later request.
    fn attempt(&mut self, index: usize, body: &[u8], budget: Duration, connect: Duration) -> Result<Try, ClientError> {
        let started = Instant::now();
        self.open(index)?;
        let socket = &self.live.as_ref().expect("opened above").socket;
        let endpoint = &self.endpoints[index];
        let zerr = |source| ClientError::Zmq { endpoint: endpoint.clone(), source };
        let connected = socket.poll(zmq::POLLOUT, poll_ms(connect)).map_err(zerr)? > 0;
        // Without a connection, a send would wait (and queue the request
        // for a locker that may come back later): pass over, nothing sent.
        let sent = connected
            && match socket.send(body, zmq::DONTWAIT) {
                Ok(()) => true,
                Err(zmq::Error::EAGAIN) => false,
                Err(e) => return Err(zerr(e)),
            };
        if !sent {
            debug!(%endpoint, ?connect, "not connected; passing over it for now");
            self.live = None;
            return Ok(Try::NotConnected);
        }
        if socket.poll(zmq::POLLIN, poll_ms(budget.saturating_sub(started.elapsed()))).map_err(zerr)? > 0 {
            return socket.recv_msg(0).map(Try::Answer).map_err(zerr);
        }
        debug!(%endpoint, ?budget, "no answer; closing the socket and moving on");
        self.live = None;
        Ok(Try::Silent)
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
            // Queue nothing for an endpoint without a connection, so that
            // `attempt` can see a dead locker at once and pass it over.
            socket.set_immediate(true).map_err(zerr)?;
            if let Some(curve) = &self.curve {
                curve.secure(&socket).map_err(zerr)?;
            }
            socket.connect(endpoint).map_err(zerr)?;
            self.live = Some(Live { index, socket });
        }
        Ok(())
    }
}

/// What one try on one endpoint came to.
enum Try {
    Answer(zmq::Message),
    /// Sent, but no answer within the budget.
    Silent,
    /// No connection within the check: nothing was sent.
    NotConnected,
}

/// An even share of the time left before `deadline` over `ways` tries;
/// `None` when no time is left.
fn share_of(deadline: Instant, ways: usize) -> Option<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    (!left.is_zero()).then(|| left / ways.max(1) as u32)
}

fn poll_ms(d: Duration) -> i64 {
    d.as_millis().clamp(1, i64::MAX as u128) as i64
}

fn structured<'a, T: serde::Deserialize<'a>>(reply: &'a [u8]) -> Result<T, ClientError> {
    match wire::decode_reply(reply).map_err(ClientError::BadReply)? {
        Reply::Answer(v) => Ok(v),
        Reply::Refused(why) => Err(ClientError::Refused(why)),
    }
}
