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
//! counted as undelivered and logged, and what a go among them took is
//! handed back to be given back to its limit; a client that never reads
//! is disconnected, under ZeroMQ, so that it learns of it.
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
use crate::wire;

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
struct QueuedReply {
    envelope: Vec<zmq::Message>,
    body: Vec<u8>,
    /// The request it answers, kept when the reply grants something (see
    /// `Lost`).
    request: Option<Box<[u8]>>,
}

/// A go that could not be delivered, with the request it answered: its
/// permits are given back (`service::step::flush`).
pub type Lost = (Box<[u8]>, Vec<u8>);

/// Replies not delivered, how many of them were go, and each go with the
/// request it answered: what the loop's flush gives back. ZeroMQ clients'
/// replies (here) and Envoy's calls' (`calls`) are counted alike.
#[derive(Default)]
pub struct Losses {
    replies: u64,
    go: u64,
    lost_go: Vec<Lost>,
}

impl Losses {
    /// Counts `body` as not delivered; keeps a go with the request it
    /// answered (when at hand), so that its permits are given back.
    /// Returns whether it was a go.
    pub fn lose(&mut self, body: &[u8], request: Option<&[u8]>) -> bool {
        let go = wire::grants(body);
        self.replies += 1;
        self.go += u64::from(go);
        if let Some(request) = request.filter(|_| go) {
            self.lost_go.push((request.into(), body.to_vec()));
        }
        go
    }

    /// The replies not delivered since the last call, and how many were go.
    pub fn take_counts(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.replies), std::mem::take(&mut self.go))
    }

    /// The go replies not delivered since the last call, with their requests.
    pub fn take_lost_go(&mut self) -> Vec<Lost> {
        std::mem::take(&mut self.lost_go)
    }
}

/// Replies waiting for room, per client (by routing id), in order.
#[derive(Default)]
struct Backlog {
    clients: HashMap<Vec<u8>, Queue>,
    len: usize,
}

/// One client's waiting replies, and the connection they wait for.
#[derive(Default)]
struct Queue {
    replies: VecDeque<QueuedReply>,
    /// The client's connection, when it came over TCP or IPC: closed if
    /// the client never reads.
    conn: Option<Conn>,
}

/// Why a client's backlog was given up.
#[derive(Clone, Copy)]
enum Dropped {
    /// Its connection is gone.
    Gone,
    /// It outgrew its bound: the client sends and never reads.
    NotReading,
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
    /// Replies not delivered since the last `take_undelivered`, and the
    /// go among them (`take_lost_go`).
    losses: Losses,
    /// Single replies lost to clients that had gone, not yet logged, and
    /// when such a line was last logged (see `log_lost`).
    lost_unlogged: (u64, u64),
    lost_logged_at: Option<std::time::Instant>,
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
            losses: Losses::default(),
            lost_unlogged: (0, 0),
            lost_logged_at: None,
        })
    }

    pub fn socket(&self) -> &zmq::Socket {
        &self.socket
    }

    /// Reads one request into `msg`, if one is waiting.
    pub fn recv(&mut self, msg: &mut zmq::Message) -> Result<Received, ServerError> {
        // On a ROUTER the first frame is the routing id: it is received
        // straight into the envelope, which is reused from request to
        // request, and the body into `msg`.
        if self.envelope.is_empty() {
            self.envelope.push(zmq::Message::new());
        }
        let first = if self.router { &mut self.envelope[0] } else { &mut *msg };
        match self.socket.recv(first, zmq::DONTWAIT) {
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
    /// with the request: the service held it. The envelope's frames are
    /// moved, not copied, so they keep what ZeroMQ knows of the connection.
    pub fn hold(&mut self, token: Token, request: &[u8]) {
        let envelope =
            self.envelope[..self.envelope_len].iter_mut().map(|f| std::mem::replace(f, zmq::Message::new())).collect();
        self.held.insert(token, (envelope, request.into()));
    }

    /// Sends `body` to the caller of `request`, the request being served
    /// (under the token `recv` gave it).
    #[inline]
    pub fn answer(&mut self, request: &[u8], body: &[u8]) {
        if self.router {
            self.deliver_current(body, Some(request));
        } else {
            self.send_rep(body, Some(request));
        }
    }

    /// Sends `body` to the caller of the request served under `token`: a
    /// held ask (whose request is kept here), or the request being served
    /// when it is answered without being decided (an error).
    pub fn reply(&mut self, token: Token, body: &[u8]) {
        if !self.router {
            return self.send_rep(body, None);
        }
        // A held ask's token may still be the current one: the envelope
        // kept for it comes first.
        if let Some((mut envelope, request)) = self.held.remove(&token) {
            self.deliver(&mut envelope, body, Some(&request));
        } else if token == self.current {
            self.deliver_current(body, None);
        } else {
            // No envelope kept under this token: nowhere to send it, so it
            // is counted rather than lost in silence.
            warn!(token, "a reply with no caller to send it to");
            self.lose(body, None);
        }
    }

    fn deliver_current(&mut self, body: &[u8], request: Option<&[u8]>) {
        // Nothing waits for room (the usual case): straight out.
        if self.backlog.len == 0 {
            match send(&self.socket, &self.envelope[..self.envelope_len], body) {
                Sent::Done => return,
                Sent::Lost => return self.lose(body, request),
                Sent::Full => {}
            }
        }
        let mut envelope = std::mem::take(&mut self.envelope);
        let current = &mut envelope[..self.envelope_len];
        if self.backlog.len == 0 {
            // Tried above: the client's queue is full.
            self.wait_for_room(current, body, request);
        } else {
            self.deliver(current, body, request);
        }
        self.envelope = envelope;
    }

    /// A REP socket holds the one envelope itself.
    fn send_rep(&mut self, body: &[u8], request: Option<&[u8]>) {
        if let Err(e) = self.socket.send(body, zmq::DONTWAIT) {
            warn!(error = %e, "reply not sent");
            self.lose(body, request);
        }
    }

    /// Sends again, in order, what waits for room in its clients' queues.
    pub fn retry(&mut self) {
        if self.backlog.len == 0 {
            return;
        }
        let mut lost = Vec::new();
        for (client, queue) in &mut self.backlog.clients {
            while let Some(w) = queue.replies.front() {
                match send(&self.socket, &w.envelope, &w.body) {
                    Sent::Done => {}
                    Sent::Full => break,
                    Sent::Lost => {
                        lost.push(client.clone());
                        break;
                    }
                }
                queue.replies.pop_front();
                self.backlog.len -= 1;
            }
        }
        for client in lost {
            self.drop_backlog(&client, Dropped::Gone);
        }
        self.backlog.clients.retain(|_, q| !q.replies.is_empty());
    }

    /// Replies waiting for room in their clients' queues.
    pub fn backlog(&self) -> usize {
        self.backlog.len
    }

    /// Replies not delivered since the last call, and how many were go;
    /// logs those lost one by one (see `log_lost`).
    pub fn take_undelivered(&mut self) -> (u64, u64) {
        self.log_lost();
        self.losses.take_counts()
    }

    /// Logs the single replies lost to clients that had gone, at most once
    /// a second with how many since the last such line: one client that
    /// gave up on thousands of held asks makes one line a second, not
    /// thousands. (A backlog dropped whole is logged as it is dropped.)
    fn log_lost(&mut self) {
        let (replies, go) = self.lost_unlogged;
        let due = self.lost_logged_at.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1));
        if replies > 0 && due {
            warn!(replies, go, "replies not delivered since the last such line: their clients had gone");
            (self.lost_unlogged, self.lost_logged_at) = ((0, 0), Some(std::time::Instant::now()));
        }
    }

    /// Held asks' go replies not delivered since the last call, each with
    /// the request it answered.
    pub fn take_lost_go(&mut self) -> Vec<Lost> {
        self.losses.take_lost_go()
    }

    /// Lets what is queued leave for up to `ms` once the socket closes.
    pub fn linger(&self, ms: i32) {
        if let Err(e) = self.socket.set_linger(ms) {
            warn!(error = %e, "replies may not leave before the socket closes");
        }
    }

    /// Sends `body` to the client `envelope` names, after what already
    /// waits for it; keeps it when the client's queue is full.
    fn deliver(&mut self, envelope: &mut [zmq::Message], body: &[u8], request: Option<&[u8]>) {
        // An envelope always holds its routing id; without one the reply
        // has nowhere to go, and is counted.
        let Some(client) = envelope.first() else { return self.lose(body, request) };
        // Nothing waits for room (the usual case): no client to look up.
        if self.backlog.len == 0 || !self.backlog.clients.contains_key(&client[..]) {
            match send(&self.socket, envelope, body) {
                Sent::Done => return,
                Sent::Lost => return self.lose(body, request),
                Sent::Full => {}
            }
        }
        self.wait_for_room(envelope, body, request);
    }

    /// Keeps `body` in the backlog of the client `envelope` names, to be
    /// sent after what already waits for it; gives the client up when its
    /// backlog is full.
    fn wait_for_room(&mut self, envelope: &mut [zmq::Message], body: &[u8], request: Option<&[u8]>) {
        let Some(client) = envelope.first() else { return self.lose(body, request) };
        let client = client.to_vec();
        let queue = self.backlog.clients.entry(client.clone()).or_default();
        if queue.replies.is_empty() {
            queue.conn = Conn::of(envelope);
        }
        if queue.replies.len() >= self.per_client {
            self.lose(body, request);
            return self.drop_backlog(&client, Dropped::NotReading);
        }
        let grants = wire::grants(body);
        let envelope = envelope.iter().map(|f| zmq::Message::from(&f[..])).collect();
        let request = request.filter(|_| grants).map(Box::from);
        queue.replies.push_back(QueuedReply { envelope, body: body.to_vec(), request });
        self.backlog.len += 1;
    }

    /// Gives up on every reply waiting for `client`, counting each; a
    /// client that does not read its replies is disconnected, so that it
    /// learns of it rather than waiting for replies that never come.
    fn drop_backlog(&mut self, client: &[u8], why: Dropped) {
        let Some(queue) = self.backlog.clients.remove(client) else { return };
        let replies = queue.replies.len();
        self.backlog.len -= replies;
        let mut go = 0;
        for w in queue.replies {
            go += u64::from(self.losses.lose(&w.body, w.request.as_deref()));
        }
        match why {
            Dropped::Gone => warn!(replies, go, "replies not delivered: the client went away"),
            Dropped::NotReading => {
                let disconnected = queue.conn.is_some_and(|c| c.close());
                warn!(replies, go, disconnected, "replies not delivered: the client does not read its replies");
            }
        }
    }

    /// Counts `body` as not delivered; keeps a go with the request it
    /// answered, so that its permits are given back.
    fn lose(&mut self, body: &[u8], request: Option<&[u8]>) {
        let go = self.losses.lose(body, request);
        self.lost_unlogged.0 += 1;
        self.lost_unlogged.1 += u64::from(go);
    }

    /// Reads the rest of a request's envelope into `self.envelope`, whose
    /// first frame, the routing id, was just received: every frame up to
    /// the empty delimiter, as a REP socket strips them; then the body
    /// into `msg`. Returns false, having read the whole message, when it
    /// has no delimiter or no body (a REP socket drops such a message too).
    fn read_envelope(&mut self, msg: &mut zmq::Message) -> Result<bool, ServerError> {
        let mut n = 1;
        // The routing id is never the delimiter, even when empty.
        let mut more = self.envelope[0].get_more();
        let mut delimiter = false;
        while more && !delimiter {
            if n == self.envelope.len() {
                self.envelope.push(zmq::Message::new());
            }
            // The frames of one message arrive together: this never waits.
            let frame = &mut self.envelope[n];
            self.socket.recv(frame, 0).map_err(zmq_err("receiving a request part"))?;
            (more, delimiter) = (frame.get_more(), frame.is_empty());
            n += 1;
        }
        self.envelope_len = n;
        // The loop stops at the delimiter or at the last frame; only a
        // delimiter with more after it leaves a body to read.
        if !more {
            return Ok(false);
        }
        self.socket.recv(msg, 0).map_err(zmq_err("receiving a request"))?;
        Ok(true)
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

/// A client's connection, as the file descriptor ZeroMQ read its request
/// from and the socket's inode, which tells it from a later connection
/// given the same descriptor.
#[derive(Clone, Copy)]
struct Conn {
    fd: i32,
    inode: u64,
}

impl Conn {
    /// The connection a request's envelope came over, if ZeroMQ knows it
    /// (not over `inproc://`). The frames read off the wire carry it; a
    /// routing id the ROUTER made up may not.
    fn of(envelope: &mut [zmq::Message]) -> Option<Conn> {
        // libzmq's private property behind its deprecated ZMQ_SRCFD.
        let fd = envelope.iter_mut().find_map(|f| f.gets("__fd")?.parse().ok())?;
        Some(Conn { fd, inode: inode(fd)? })
    }

    /// Closes the connection under ZeroMQ: its I/O thread reads the end
    /// of the stream and drops the client's pipe, as if the client had
    /// gone. libzmq 4.3 has no call that disconnects one peer of a
    /// ROUTER. Whether it did (not if the descriptor is another socket by
    /// now).
    fn close(self) -> bool {
        if inode(self.fd) != Some(self.inode) {
            return false;
        }
        shutdown(self.fd)
    }
}

#[cfg(target_os = "linux")]
fn inode(fd: i32) -> Option<u64> {
    // SAFETY: fstat writes only into `st`, whatever `fd` is.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFSOCK).then_some(st.st_ino)
}

#[cfg(target_os = "linux")]
fn shutdown(fd: i32) -> bool {
    // SAFETY: shutting a socket down touches no memory; ZeroMQ still owns
    // and closes the descriptor.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn inode(_fd: i32) -> Option<u64> {
    None
}

#[cfg(not(target_os = "linux"))]
fn shutdown(_fd: i32) -> bool {
    false
}
