//! The serving socket: requests in, each reply out to the caller of its
//! request, and every reply delivered or accounted for.
//!
//! A locker that may hold asks serves on a ROUTER socket that speaks to
//! REQ (and DEALER) clients exactly as a REP socket does: each request's
//! envelope (the routing id and the frames up to the empty delimiter) goes
//! back before its reply, and a held ask's envelope waits here under its
//! token. The ROUTER is `ZMQ_ROUTER_MANDATORY`, so a reply to a client
//! whose queue is full is not dropped in silence, as a ROUTER otherwise
//! does: it waits here, in that client's backlog, and is sent again when
//! the loop comes round, in order. A client that has gone, or whose
//! backlog outgrows its bound (it sends and never reads), has its replies
//! counted as undelivered and logged.
//!
//! A locker that can hold nothing (`--max-parked 0`, no store) answers
//! each request before it reads the next, which is a REP socket's
//! contract, and serves on a REP socket: ZeroMQ then keeps the envelopes
//! inside the socket and the locker runs at the bare transport's speed.
//!
//! This module only moves bytes; it never decides a request.

use std::collections::{HashMap, VecDeque};

use tracing::{debug, warn};

use super::transport::zmq_err;
use super::ServerError;
use crate::service::Token;
use crate::wire::{self, ReplyKind};

/// What one read from the socket brought.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// Nothing was waiting.
    Nothing,
    /// A request whose body is in the message, served under this token.
    Request(Token),
    /// A request of several parts, read whole: answer it with an error.
    MultiPart(Token, usize),
    /// A message that is not a request (no envelope); dropped, as a REP
    /// socket drops it.
    Dropped,
}

/// A reply waiting for room in its client's queue.
struct Waiting {
    envelope: Vec<zmq::Message>,
    body: Vec<u8>,
    go: bool,
    /// The request it answers, when it was held (see `Lost`).
    request: Option<Box<[u8]>>,
}

/// A go that could not be delivered, with the request it answered: its
/// permits are given back (`Service::give_back_undelivered`). Kept for
/// held asks, whose request the loop has kept anyway.
pub type Lost = (Box<[u8]>, Vec<u8>);

/// Replies waiting for room, per client (by routing id), in order.
#[derive(Default)]
struct Backlog {
    clients: HashMap<Vec<u8>, VecDeque<Waiting>>,
    len: usize,
}

/// How a send went.
enum Sent {
    Done,
    /// The client's queue is full: try again later.
    Full,
    /// The client has gone, or the send failed.
    Lost,
}

/// The serving socket and the envelopes it keeps.
pub struct Serving {
    socket: zmq::Socket,
    router: bool,
    /// The envelope of the request being served: its first `envelope_len`
    /// frames, reused from request to request, received into in place.
    envelope: Vec<zmq::Message>,
    envelope_len: usize,
    /// The token of the request being served.
    current: Token,
    /// The envelopes of held asks and their requests, by token.
    held: HashMap<Token, (Vec<zmq::Message>, Box<[u8]>)>,
    backlog: Backlog,
    /// The most replies one client's backlog may hold.
    per_client: usize,
    /// Replies not delivered since the last `take_undelivered`, and how
    /// many of them were go.
    undelivered: (u64, u64),
    /// Held asks' go replies not delivered since the last `take_lost_go`.
    lost_go: Vec<Lost>,
}

impl Serving {
    /// Serves on `socket`, a ROUTER (`router`) or a REP socket; a client's
    /// backlog holds at most `per_client` replies.
    pub fn new(socket: zmq::Socket, router: bool, per_client: usize) -> Result<Serving, ServerError> {
        if router {
            socket.set_router_mandatory(true).map_err(zmq_err("setting ZMQ_ROUTER_MANDATORY"))?;
        }
        Ok(Serving {
            socket,
            router,
            envelope: Vec::with_capacity(2),
            envelope_len: 0,
            current: 0,
            held: HashMap::new(),
            backlog: Backlog::default(),
            per_client,
            undelivered: (0, 0),
            lost_go: Vec::new(),
        })
    }

    pub fn socket(&self) -> &zmq::Socket {
        &self.socket
    }

    /// Reads one request into `msg`, if one is waiting.
    pub fn recv(&mut self, msg: &mut zmq::Message) -> Result<Received, ServerError> {
        match self.socket.recv(msg, zmq::DONTWAIT) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => return Ok(Received::Nothing),
            Err(e) => return Err(zmq_err("receiving a request")(e).into()),
        }
        if self.router && !self.read_envelope(msg)? {
            debug!("a message without an envelope's empty delimiter; dropped, as a REP socket drops it");
            return Ok(Received::Dropped);
        }
        self.current = self.current.wrapping_add(1);
        if msg.get_more() {
            let parts = self.drain_parts(msg)?;
            return Ok(Received::MultiPart(self.current, parts));
        }
        Ok(Received::Request(self.current))
    }

    /// Keeps the envelope of the request being served under its token,
    /// with the request: the service held it.
    pub fn hold(&mut self, token: Token, request: &[u8]) {
        let envelope = self.envelope[..self.envelope_len].iter().map(|f| zmq::Message::from(&f[..])).collect();
        self.held.insert(token, (envelope, request.into()));
    }

    /// Sends `body` to the caller of the request served under `token`.
    pub fn reply(&mut self, token: Token, body: &[u8]) {
        if !self.router {
            // A REP socket holds the one envelope itself.
            if let Err(e) = self.socket.send(body, zmq::DONTWAIT) {
                warn!(error = %e, "reply not sent");
                self.count_lost(body_is_go(body));
            }
            return;
        }
        if token == self.current {
            let envelope = std::mem::take(&mut self.envelope);
            self.deliver(&envelope[..self.envelope_len], body, None);
            self.envelope = envelope;
        } else if let Some((envelope, request)) = self.held.remove(&token) {
            self.deliver(&envelope, body, Some(request));
        } else {
            // No envelope kept under this token: nowhere to send it, so it
            // is counted rather than lost in silence.
            warn!(token, "a reply with no caller to send it to");
            self.count_lost(body_is_go(body));
        }
    }

    /// Sends again, in order, what waits for room in its clients' queues.
    pub fn retry(&mut self) {
        if self.backlog.len == 0 {
            return;
        }
        let mut lost = Vec::new();
        for (client, queue) in &mut self.backlog.clients {
            while let Some(w) = queue.front() {
                match send(&self.socket, &w.envelope, &w.body) {
                    Sent::Done => {}
                    Sent::Full => break,
                    Sent::Lost => {
                        lost.push(client.clone());
                        break;
                    }
                }
                queue.pop_front();
                self.backlog.len -= 1;
            }
        }
        for client in lost {
            self.drop_backlog(&client, "the client went away");
        }
        self.backlog.clients.retain(|_, q| !q.is_empty());
    }

    /// Replies waiting for room in their clients' queues.
    pub fn backlog(&self) -> usize {
        self.backlog.len
    }

    /// Replies not delivered since the last call, and how many were go.
    pub fn take_undelivered(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.undelivered)
    }

    /// Held asks' go replies not delivered since the last call, each with
    /// the request it answered.
    pub fn take_lost_go(&mut self) -> Vec<Lost> {
        std::mem::take(&mut self.lost_go)
    }

    /// Lets what is queued leave for up to `ms` once the socket closes.
    pub fn linger(&self, ms: i32) {
        if let Err(e) = self.socket.set_linger(ms) {
            warn!(error = %e, "replies may not leave before the socket closes");
        }
    }

    /// Sends `body` to the client `envelope` names, after what already
    /// waits for it; keeps it when the client's queue is full.
    fn deliver(&mut self, envelope: &[zmq::Message], body: &[u8], request: Option<Box<[u8]>>) {
        let Some(client) = envelope.first() else { return };
        // Nothing waits for room (the usual case): no client to look up.
        if self.backlog.len == 0 || !self.backlog.clients.contains_key(&client[..]) {
            match send(&self.socket, envelope, body) {
                Sent::Done => return,
                Sent::Lost => return self.lose(body, request),
                Sent::Full => {}
            }
        }
        let queue = self.backlog.clients.entry(client.to_vec()).or_default();
        if queue.len() >= self.per_client {
            let client = client.to_vec();
            self.lose(body, request);
            return self.drop_backlog(&client, "the client does not read its replies");
        }
        let envelope = envelope.iter().map(|f| zmq::Message::from(&f[..])).collect();
        queue.push_back(Waiting { envelope, body: body.to_vec(), go: body_is_go(body), request });
        self.backlog.len += 1;
    }

    /// Gives up on every reply waiting for `client`, counting each.
    fn drop_backlog(&mut self, client: &[u8], why: &str) {
        let Some(queue) = self.backlog.clients.remove(client) else { return };
        self.backlog.len -= queue.len();
        let go = queue.iter().filter(|w| w.go).count() as u64;
        self.undelivered.0 += queue.len() as u64;
        self.undelivered.1 += go;
        warn!(replies = queue.len(), go, "replies not delivered: {why}");
        let held_go = queue.into_iter().filter(|w| w.go).filter_map(|w| w.request.map(|r| (r, w.body)));
        self.lost_go.extend(held_go);
    }

    /// Counts `body` as not delivered; keeps a go with the held request
    /// it answered, so that its permits are given back.
    fn lose(&mut self, body: &[u8], request: Option<Box<[u8]>>) {
        let go = body_is_go(body);
        self.count_lost(go);
        if let Some(request) = request.filter(|_| go) {
            self.lost_go.push((request, body.to_vec()));
        }
    }

    fn count_lost(&mut self, go: bool) {
        self.undelivered.0 += 1;
        self.undelivered.1 += u64::from(go);
        debug!(go, "a reply not delivered: its client has gone");
    }

    /// Reads a request's envelope into `self.envelope`, from its first
    /// frame in `msg`: the routing id and every frame up to the empty
    /// delimiter, as a REP socket strips them; leaves the body in `msg`.
    /// Returns false, having read the whole message, when it has no
    /// delimiter or no body (a REP socket drops such a message too).
    fn read_envelope(&mut self, msg: &mut zmq::Message) -> Result<bool, ServerError> {
        let mut n = 0;
        loop {
            let more = msg.get_more();
            let delimiter = msg.is_empty() && n > 0;
            if n == self.envelope.len() {
                self.envelope.push(zmq::Message::new());
            }
            std::mem::swap(&mut self.envelope[n], msg);
            n += 1;
            self.envelope_len = n;
            if !more {
                return Ok(false);
            }
            // The frames of one message arrive together: this never waits.
            self.socket.recv(msg, 0).map_err(zmq_err("receiving a request part"))?;
            if delimiter {
                return Ok(true);
            }
        }
    }

    /// Reads the rest of a multi-part body; returns how many parts it had.
    fn drain_parts(&self, msg: &mut zmq::Message) -> Result<usize, ServerError> {
        let mut parts = 1;
        while msg.get_more() {
            self.socket.recv(msg, 0).map_err(zmq_err("receiving a request part"))?;
            parts += 1;
        }
        Ok(parts)
    }
}

/// Sends one reply on a mandatory ROUTER: the envelope, then the body.
/// Only the first frame can find the client's queue full or the client
/// gone; the rest of a message always follows it.
fn send(socket: &zmq::Socket, envelope: &[zmq::Message], body: &[u8]) -> Sent {
    match socket.send(&envelope[0][..], zmq::SNDMORE | zmq::DONTWAIT) {
        Ok(()) => {}
        Err(zmq::Error::EAGAIN) => return Sent::Full,
        Err(zmq::Error::EHOSTUNREACH) => return Sent::Lost,
        Err(e) => {
            warn!(error = %e, "reply not sent");
            return Sent::Lost;
        }
    }
    for frame in &envelope[1..] {
        if let Err(e) = socket.send(&frame[..], zmq::SNDMORE | zmq::DONTWAIT) {
            warn!(error = %e, "reply not sent");
            return Sent::Lost;
        }
    }
    match socket.send(body, zmq::DONTWAIT) {
        Ok(()) => Sent::Done,
        Err(e) => {
            warn!(error = %e, "reply not sent");
            Sent::Lost
        }
    }
}

fn body_is_go(body: &[u8]) -> bool {
    wire::classify_reply(body) == ReplyKind::Go
}
