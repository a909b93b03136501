//! The loop that owns the sockets and the clock.
//!
//! `Server::bind` binds the serving socket and reports the real endpoint
//! before anything is served, so a caller can print it or hand it to a
//! test. `run` is the single thread that waits on the socket, reads the
//! clock once per request, asks the `Service` for a reply and sends it.
//! Every request gets exactly one reply. The loop makes no decisions of its
//! own.
//!
//! The serving socket is a ROUTER that speaks to REQ (and DEALER) clients
//! exactly as a REP socket does: each request's envelope (the routing id
//! and the frames up to the empty delimiter) goes back before its reply.
//! Unlike REP it may answer later: an ask the service holds (`Answer::Held`)
//! keeps its envelope here under its token until the service hands the
//! reply over (`next_ready`), while other requests are served; at a stop,
//! every held ask is answered before the socket closes.
//!
//! When peered, the same thread also polls one SUB socket per configured
//! peer, so the socket a message arrives on names the peer it came from,
//! and publishes on a PUB socket whatever the service hands it. Peer
//! messages are read before requests, and publishing follows every small
//! batch of requests, so that counts travel within one loop turn. A publish
//! never blocks: past the high-water mark ZeroMQ drops it, which cumulative
//! counts make harmless. Peer messages and requests are read in bounded
//! batches with the stop flag checked between them, so no flood delays a
//! stop; and the loop tells the service how long it was away when the
//! process was paused (SIGSTOP, a frozen VM).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{debug, info, warn};

use super::clock::Clock;
use super::fds::AcceptWatch;
use super::keeper::{self, Keeper, Loaded};
use super::metrics::Feed;
use super::reload::{self, Reload};
use super::signals::Control;
use super::store::{StoreCalls, StoreError, StoreLink};
use super::transport::{self, zmq_err, TransportError};
use super::trim::Trim;
use super::zap::{self, Gate};
use crate::config::{PeerConfig, PeerSpec, ServeConfig};
use crate::core::lease_id::RANDOM_BYTES;
use crate::core::{
    time::NANOS_PER_MS, Entropy, LeaseMinter, Locker, Nanos, NodeKey, PeerEvent, Peering, PeeringSettings,
};
use crate::curve::{Allowlist, KeyPair};
use crate::service::{Answer, Service, Token};
use crate::state::StateError;
use crate::wire::{WireError, MAX_PEER_MESSAGE_SIZE};

/// How long one wait on the sockets may last, so that a stop request is seen
/// well within a second even when no traffic arrives.
const TICK_MS: i64 = 100;

/// How many requests are served back to back before the loop looks at the
/// stop flag again, so a flood cannot delay shutdown.
const BATCH: usize = 1024;

/// How many requests are served between two looks at the peers, so that a
/// flood of requests cannot leave peer counts waiting.
const INNER_BATCH: usize = 8;

/// How many peer messages are read from one peer in one go.
const PEER_BATCH: usize = 64;

/// A loop turn longer than this is reported to the service as a pause; the
/// service decides whether it was long enough to matter.
const PAUSE_NS: u64 = 2 * TICK_MS as u64 * NANOS_PER_MS;

/// How long the serving socket may keep sending the replies of asks held
/// at a stop, in milliseconds: well within the stop's second.
const STOP_LINGER_MS: i32 = 500;

/// Peer messages queued for sending before ZeroMQ drops new ones.
const PEER_HWM: i32 = 100_000;

/// Peer messages queued per peer before ZeroMQ drops new ones: with
/// `MAX_PEER_MESSAGE_SIZE` this bounds what one peer can make a locker
/// buffer, and it holds seconds of a busy peer's counts.
const PEER_RCVHWM: i32 = 10_000;

/// How soon a SUB socket retries a peer that went away, in milliseconds:
/// short, so that a restarted locker is heard (and can learn the counts)
/// quickly.
const PEER_RECONNECT_MS: i32 = 10;

/// Why the locker could not start or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The sockets a peered locker talks to its peers with.
struct PeerSockets {
    publisher: zmq::Socket,
    /// One per configured peer, in configuration order.
    subscribers: Vec<zmq::Socket>,
    endpoint: String,
}

/// A bound locker, ready to run.
pub struct Server {
    // The context must outlive the sockets; field order drops them first.
    rep: zmq::Socket,
    peers: Option<PeerSockets>,
    /// The ZAP handler, when CURVE clients are limited to an allowlist.
    gate: Option<Gate>,
    /// Connections the serving socket could not accept (out of open files).
    accepts: AcceptWatch,
    /// The store thread, when the counts live in a store.
    store: Option<StoreLink>,
    _ctx: zmq::Context,
    endpoint: String,
    service: Service,
    watch: Watch,
    state: Option<Keeper>,
    /// Where snapshots for the metrics thread go, when metrics are on.
    metrics: Option<Feed>,
    /// Where the config is read again from, when it came from a file.
    reload: Option<Reload>,
    /// The envelope of the request being served: its first
    /// `envelope_len` frames. The frames are reused from request to
    /// request, received into in place.
    envelope: Vec<zmq::Message>,
    envelope_len: usize,
    /// The envelopes of held asks, by token.
    held: HashMap<Token, Vec<zmq::Message>>,
    next_token: Token,
}

/// The clock as the loop reads it. Each reading also says how long it has
/// been since the previous one: a loop that reads the clock at least every
/// tick and finds much more time gone was not running (SIGSTOP, a frozen
/// VM), and the service hears of it before the reading is used for
/// anything, so no request is decided on the view from before the pause.
struct Watch {
    clock: Clock,
    last: Nanos,
}

impl Watch {
    fn now(&mut self, service: &mut Service) -> Nanos {
        let now = self.clock.now();
        let away = now.saturating_sub(self.last);
        self.last = now;
        if away > PAUSE_NS {
            info!(away_ms = away / NANOS_PER_MS, "the loop did not run for a while");
            service.on_pause(now, away);
        }
        now
    }
}

impl Server {
    /// Binds the REP socket described by `config` and builds the locker.
    pub fn bind(config: &ServeConfig) -> Result<Server, ServerError> {
        let ctx = transport::context()?;
        // The ZAP handler must be bound before any CURVE socket binds.
        let gate = match &config.curve {
            Some(c) => Gate::start(&ctx, c, peer_allowlist(config.peering.as_ref(), &c.keys))?,
            None => None,
        };
        let keys = config.curve.as_ref().map(|c| &c.keys);
        let (rep, endpoint) = transport::bind_router_with(&ctx, &config.bind, config.max_message_size, |rep| {
            keys.map_or(Ok(()), |k| zap::secure_rep(rep, k))
        })?;
        let accepts = AcceptWatch::start(&ctx, &rep).map_err(zmq_err("watching the serving socket's accepts"))?;
        let minter = LeaseMinter::new(Box::new(OsEntropy), config.lease_secret.as_ref());
        let locker =
            Locker::new(config.default.clone(), config.limits.clone(), config.max_keys).with_lease_minter(minter);
        if locker.figures().has_semaphores() && !locker.figures().leases_are_vouched() {
            warn!("serving a semaphore without --lease-secret: any client may restore a lease with a made-up id");
        }
        let loaded = config.state.as_ref().map(|s| keeper::load(s, &locker)).transpose()?;
        let (clock, behind) = Clock::start_not_before(loaded.as_ref().map_or(0, Loaded::not_before));
        if behind > 0 {
            warn!(
                behind_ms = behind / NANOS_PER_MS,
                "the wall clock is behind the state file; counting from the file's time"
            );
        }
        let started = clock.now();
        let (peers, service) = match &config.peering {
            None => (None, Service::new(locker)),
            Some(pc) => {
                let sockets = peer_sockets(&ctx, pc, keys)?;
                let now = clock.now();
                let me = NodeKey { id: pc.node_id.as_str().into(), incarnation: now };
                let grace = pc.grace.as_nanos() as u64;
                let names = pc.peers.iter().map(|p| p.endpoint.as_str().into()).collect();
                let settings = PeeringSettings::new(me, names, grace, locker.figures().shortest_slot());
                (Some(sockets), Service::peered(locker, Peering::new(settings, now), now))
            }
        };
        let mut service = service.with_max_parked(config.max_parked);
        let store = match &config.store {
            Some(sc) => {
                service = service.with_store();
                info!(store = ?sc.spec, timeout_ms = sc.timeout.as_millis() as u64, "counting in the store");
                Some(StoreLink::start(&ctx, sc)?)
            }
            None => None,
        };
        let state = match (&config.state, loaded) {
            (Some(sc), Some(loaded)) => {
                let now = clock.now();
                Some(Keeper::start(sc, loaded, &mut service, now, started, config.max_message_size)?)
            }
            _ => None,
        };
        let watch = Watch { clock, last: clock.now() };
        Ok(Server {
            rep,
            peers,
            gate,
            accepts,
            store,
            _ctx: ctx,
            endpoint,
            service,
            watch,
            state,
            metrics: None,
            reload: None,
            envelope: Vec::with_capacity(2),
            envelope_len: 0,
            held: HashMap::new(),
            next_token: 0,
        })
    }

    /// Hands a snapshot to `feed` every `Feed::EVERY` while running.
    pub fn with_metrics(mut self, feed: Feed) -> Server {
        self.metrics = Some(feed);
        self
    }

    /// Reads the config again from `reload` when `Control::reload` asks.
    pub fn with_reload(mut self, reload: Reload) -> Server {
        self.reload = Some(reload);
        self
    }

    /// The endpoint the PUB socket bound, when peered.
    pub fn peer_endpoint(&self) -> Option<&str> {
        self.peers.as_ref().map(|p| p.endpoint.as_str())
    }

    /// The endpoint actually bound, with the real port when the config asked
    /// for a wildcard one.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Serves until `stop` becomes true.
    pub fn run(self, stop: &AtomicBool) -> Result<(), ServerError> {
        self.serve(|| stop.load(Ordering::Relaxed), || false)
    }

    /// Serves until `control` asks to stop, reloading when it asks to.
    pub fn run_with(self, control: &Control) -> Result<(), ServerError> {
        self.serve(|| control.should_stop(), || control.take_reload())
    }

    fn serve(mut self, stop: impl Fn() -> bool, reload: impl Fn() -> bool) -> Result<(), ServerError> {
        info!(endpoint = %self.endpoint, peer_endpoint = ?self.peer_endpoint(), "serving");
        let mut msg = zmq::Message::new();
        let mut out = Vec::with_capacity(256);
        let mut trim = Trim::default();
        while !stop() {
            if reload() {
                match &mut self.reload {
                    Some(r) => {
                        let before = keeper::Layout::of(self.service.locker());
                        reload::apply(r, &mut self.service);
                        if let Some(state) = &mut self.state {
                            state.after_reload(&before, &self.service, self.watch.clock.now());
                        }
                    }
                    None => warn!("asked to reload, but the config came from no file"),
                }
            }
            if let Some(feed) = &mut self.metrics {
                feed.tick(&self.service, self.watch.clock.now(), false);
            }
            let (readable, refused_accepts) = self.wait_readable()?;
            if let Some(gate) = &mut self.gate {
                gate.answer_waiting()?;
                self.service.note_refused_connections(gate.refused());
            }
            if refused_accepts {
                self.service.note_accept_failures(self.accepts.read());
            }
            let now = self.watch.now(&mut self.service);
            self.service.on_timeout(now);
            self.take_claims(now);
            trim.note(now, self.service.locker().figures().live_keys());
            if let Some(state) = &mut self.state {
                state.on_timeout(&mut self.service, now);
            }
            self.send_ready(now, &mut out);
            self.publish();
            if !readable {
                continue;
            }
            // Requests and peer messages both count towards the batch, so a
            // flood of either returns to the stop flag and the timers soon.
            let mut handled = 0;
            while handled < BATCH && !stop() {
                let heard = self.read_peers(&mut msg)?;
                let n = self.serve_some(&mut msg, &mut out)?;
                self.publish();
                self.send_claims();
                handled += n + heard;
                if heard == 0 && n == 0 {
                    break;
                }
            }
        }
        self.answer_held(&mut out);
        if let Some(feed) = &mut self.metrics {
            feed.tick(&self.service, self.watch.clock.now(), true);
        }
        let refused = self.gate.as_ref().map(Gate::refused);
        info!(refused_connections = ?refused, "stopping");
        if let Some(state) = self.state.take() {
            state.close();
        }
        Ok(())
    }

    /// Waits until a request or a peer message arrives, the service's next
    /// deadline passes, or a tick goes by; returns whether anything arrived,
    /// and whether the accept monitor has news (so that it is read only
    /// then, not on every turn).
    fn wait_readable(&mut self) -> Result<(bool, bool), ServerError> {
        self.send_claims();
        let now = self.watch.clock.now();
        let deadline =
            [self.service.next_deadline(), self.state.as_ref().map(Keeper::next_deadline)].into_iter().flatten().min();
        let until_deadline = deadline.map(|d| d.saturating_sub(now).div_ceil(NANOS_PER_MS));
        let timeout = until_deadline.map_or(TICK_MS, |ms| (ms as i64).min(TICK_MS));
        let mut items = vec![self.rep.as_poll_item(zmq::POLLIN)];
        if let Some(p) = &self.peers {
            items.extend(p.subscribers.iter().map(|s| s.as_poll_item(zmq::POLLIN)));
        }
        if let Some(g) = &self.gate {
            items.push(g.poll_item());
        }
        if let Some(s) = &self.store {
            items.push(s.poll_item());
        }
        items.push(self.accepts.poll_item());
        match zmq::poll(&mut items, timeout) {
            Ok(n) => Ok((n > 0, items.last().is_some_and(zmq::PollItem::is_readable))),
            Err(zmq::Error::EINTR) => Ok((false, false)),
            Err(e) => Err(zmq_err("waiting for requests")(e).into()),
        }
    }

    /// Hands the claims and lease calls the service made to the store thread.
    fn send_claims(&mut self) {
        if let Some(s) = &self.store {
            s.send(StoreCalls { claims: self.service.take_claims(), leases: self.service.take_lease_calls() });
        }
    }

    /// Takes the store's answers in; the requests they free are answered
    /// by `send_ready`.
    fn take_claims(&mut self, now: Nanos) {
        if let Some(s) = &self.store {
            let answers = s.answers();
            if !answers.is_empty() {
                self.service.on_claims(now, answers.claims);
                self.service.on_leases(now, answers.leases);
            }
        }
    }

    /// Serves up to `INNER_BATCH` waiting requests; returns how many.
    fn serve_some(&mut self, msg: &mut zmq::Message, out: &mut Vec<u8>) -> Result<usize, ServerError> {
        for n in 0..INNER_BATCH {
            if !self.serve_one(msg, out)? {
                return Ok(n);
            }
        }
        Ok(INNER_BATCH)
    }

    /// Hands up to `PEER_BATCH` waiting messages of each peer to the
    /// service, naming the peer by its socket; returns how many.
    fn read_peers(&mut self, msg: &mut zmq::Message) -> Result<usize, ServerError> {
        let Some(p) = &self.peers else { return Ok(0) };
        let mut heard = 0;
        for (peer, subscriber) in p.subscribers.iter().enumerate() {
            for _ in 0..PEER_BATCH {
                match subscriber.recv(msg, zmq::DONTWAIT) {
                    Ok(()) => heard += 1,
                    Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => break,
                    Err(e) => return Err(zmq_err("receiving from a peer")(e).into()),
                }
                // A peer message is one part; anything else is not from a locker.
                let now = self.watch.now(&mut self.service);
                if msg.get_more() || !self.service.on_peer(now, peer, msg) {
                    debug!(peer, "peer message not understood; dropped");
                    while msg.get_more() && subscriber.recv(msg, zmq::DONTWAIT).is_ok() {}
                }
            }
        }
        Ok(heard)
    }

    /// Publishes whatever the service has for the peers, and logs what
    /// happened to them.
    fn publish(&mut self) {
        let Some(p) = &self.peers else { return };
        let mut dropped = 0usize;
        let now = self.watch.now(&mut self.service);
        self.service.publish(now, |bytes| {
            if p.publisher.send(bytes, zmq::DONTWAIT).is_err() {
                dropped += 1;
            }
        });
        if dropped > 0 {
            debug!(dropped, "peer messages dropped at the high-water mark");
        }
        while let Some(event) = self.service.poll_event() {
            log_event(&event);
        }
    }

    /// Serves one request if one is waiting; returns whether it did.
    fn serve_one(&mut self, msg: &mut zmq::Message, out: &mut Vec<u8>) -> Result<bool, ServerError> {
        match self.rep.recv(msg, zmq::DONTWAIT) {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => return Ok(false),
            Err(e) => return Err(zmq_err("receiving a request")(e).into()),
        }
        if !self.read_envelope(msg)? {
            debug!("a message without an envelope's empty delimiter; dropped, as a REP socket drops it");
            return Ok(true);
        }
        let now = self.watch.now(&mut self.service);
        // Held asks that are due go first: a new ask never overtakes them.
        self.send_ready(now, out);
        if msg.get_more() {
            let parts = self.drain_parts(msg)?;
            debug!(parts, "multi-part request refused");
            self.service.reject(WireError::MultiPart(parts), out);
        } else if self.service.serve(now, self.next_token, msg, out, &mut self.state) == Answer::Held {
            let envelope = self.envelope[..self.envelope_len].iter().map(|f| zmq::Message::from(&f[..])).collect();
            self.held.insert(self.next_token, envelope);
            self.next_token += 1;
            return Ok(true);
        }
        let envelope = &self.envelope[..self.envelope_len];
        answer(&self.rep, envelope, out);
        Ok(true)
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
            self.rep.recv(msg, 0).map_err(zmq_err("receiving a request part"))?;
            if delimiter {
                return Ok(true);
            }
        }
    }

    /// Answers the held asks that are due at `now`, each recorded before
    /// its reply leaves, as any reply is.
    fn send_ready(&mut self, now: Nanos, out: &mut Vec<u8>) {
        if self.held.is_empty() {
            return;
        }
        while let Some(token) = self.service.next_ready(now, out, &mut self.state) {
            let envelope = self.held.remove(&token).unwrap_or_default();
            answer(&self.rep, &envelope, out);
        }
    }

    /// At a stop: answers every held ask (go if its limit allows it now,
    /// else sorry), and gives the replies time to leave.
    fn answer_held(&mut self, out: &mut Vec<u8>) {
        let now = self.watch.now(&mut self.service);
        let mut answered = 0usize;
        while let Some(token) = self.service.next_final(now, out, &mut self.state) {
            let envelope = self.held.remove(&token).unwrap_or_default();
            answer(&self.rep, &envelope, out);
            answered += 1;
        }
        if answered > 0 {
            info!(answered, "answered every held ask before stopping");
            if let Err(e) = self.rep.set_linger(STOP_LINGER_MS) {
                warn!(error = %e, "held asks' replies may not leave before the socket closes");
            }
        }
    }

    /// Reads the rest of a multi-part body; returns how many parts it had.
    fn drain_parts(&self, msg: &mut zmq::Message) -> Result<usize, ServerError> {
        let mut parts = 1;
        while msg.get_more() {
            self.rep.recv(msg, 0).map_err(zmq_err("receiving a request part"))?;
            parts += 1;
        }
        Ok(parts)
    }
}

/// The one way a reply leaves the loop: `body` goes to the client
/// `envelope` came from. What the service noted for the state file while
/// deciding it was recorded before the service call that wrote it returned
/// (the call takes the keeper), so a grant the caller hears of is in the
/// file even if the locker is killed right after. A ROUTER socket drops a
/// reply whose client has gone, or that finds its queue full, instead of
/// blocking, so this cannot stall the loop. An empty envelope (a token
/// with none, which never happens) sends nothing.
fn answer(socket: &zmq::Socket, envelope: &[zmq::Message], body: &[u8]) {
    if envelope.is_empty() {
        return;
    }
    for frame in envelope {
        if let Err(e) = socket.send(&frame[..], zmq::SNDMORE | zmq::DONTWAIT) {
            warn!(error = %e, "reply not sent");
            return;
        }
    }
    if let Err(e) = socket.send(body, zmq::DONTWAIT) {
        warn!(error = %e, "reply not sent");
    }
}

/// Lease ids' randomness, from the OS's CSPRNG (getrandom(2) on Linux,
/// which waits until it is seeded and then does not fail).
#[derive(Debug)]
struct OsEntropy;

impl Entropy for OsEntropy {
    fn fill(&mut self, out: &mut [u8; RANDOM_BYTES]) {
        getrandom::fill(out).expect("the OS's random source failed");
    }
}

/// Binds the PUB socket and subscribes to every peer, one SUB socket each.
/// With CURVE `keys`, the PUB socket is a CURVE server and each SUB socket
/// a CURVE client of its peer's key (this locker's own, when the peer names
/// none).
fn peer_sockets(ctx: &zmq::Context, pc: &PeerConfig, keys: Option<&KeyPair>) -> Result<PeerSockets, ServerError> {
    let publisher = ctx.socket(zmq::PUB).map_err(zmq_err("creating the PUB socket"))?;
    publisher.set_linger(0).map_err(zmq_err("setting ZMQ_LINGER"))?;
    publisher.set_sndhwm(PEER_HWM).map_err(zmq_err("setting ZMQ_SNDHWM"))?;
    keys.map_or(Ok(()), |k| zap::secure_pub(&publisher, k))?;
    publisher.bind(&pc.bind).map_err(zmq_err(format!("binding {}", pc.bind)))?;
    let endpoint = transport::last_endpoint(&publisher)?;
    let subscribers = pc.peers.iter().map(|peer| subscribe(ctx, peer, keys)).collect::<Result<_, _>>()?;
    Ok(PeerSockets { publisher, subscribers, endpoint })
}

/// A SUB socket connected to one peer.
fn subscribe(ctx: &zmq::Context, peer: &PeerSpec, keys: Option<&KeyPair>) -> Result<zmq::Socket, ServerError> {
    let subscriber = ctx.socket(zmq::SUB).map_err(zmq_err("creating a SUB socket"))?;
    subscriber.set_linger(0).map_err(zmq_err("setting ZMQ_LINGER"))?;
    subscriber.set_rcvhwm(PEER_RCVHWM).map_err(zmq_err("setting ZMQ_RCVHWM"))?;
    subscriber.set_maxmsgsize(MAX_PEER_MESSAGE_SIZE as i64).map_err(zmq_err("setting ZMQ_MAXMSGSIZE"))?;
    subscriber.set_reconnect_ivl(PEER_RECONNECT_MS).map_err(zmq_err("setting ZMQ_RECONNECT_IVL"))?;
    subscriber.set_subscribe(b"").map_err(zmq_err("subscribing"))?;
    if let Some(k) = keys {
        zap::peer_client(&subscriber, k, peer.key.as_ref().unwrap_or(&k.public))?;
    }
    let endpoint = &peer.endpoint;
    subscriber.connect(endpoint).map_err(zmq_err(format!("connecting to peer {endpoint}")))?;
    Ok(subscriber)
}

/// The keys that may subscribe to this locker's counts under CURVE: each
/// configured peer's, or this locker's own for a peer that names none.
fn peer_allowlist(peering: Option<&PeerConfig>, keys: &KeyPair) -> Option<Allowlist> {
    peering.map(|pc| Allowlist::of(pc.peers.iter().map(|p| p.key.unwrap_or(keys.public))))
}

fn log_event(event: &PeerEvent) {
    match event {
        PeerEvent::Joined { id } => info!(peer = %id, "peer heard"),
        PeerEvent::Restarted { id } => info!(peer = %id, "peer restarted"),
        PeerEvent::ClockSkew { id, offset_ms } => {
            warn!(peer = %id, offset_ms, "peer clock differs from this locker's by more than the in-flight window")
        }
        PeerEvent::ClockSkewCleared { id } => info!(peer = %id, "peer clock back within tolerance"),
        PeerEvent::ClockFollowed { by_ms, correction_ms } => warn!(
            by_ms,
            correction_ms,
            "this host's clock differs from its peers'; following the middle of the group's clocks (keep clocks synchronised, e.g. with chrony)"
        ),
        PeerEvent::Silent { id, last_heard_ms } => {
            warn!(peer = %id, last_heard_ms, "peer silent: no longer counted as live")
        }
        PeerEvent::Back { id, silent_ms } => info!(peer = %id, silent_ms, "peer back: heard again"),
        PeerEvent::Ready { synced: 0 } => warn!("no peer sent its counts within the grace period; serving alone"),
        PeerEvent::Ready { synced } => info!(synced, "learned the current counts from peers; serving"),
        PeerEvent::Rejoining { paused_ms } => {
            warn!(paused_ms, "this locker was paused longer than the peer-dead time; learning the counts again")
        }
        PeerEvent::Refused { peer, what, rejected } => warn!(%peer, rejected, "refused from a peer: {what}"),
        PeerEvent::LimitMismatch { peer, limit } => {
            warn!(%peer, %limit, "a peer defines this limit differently; its counts for it are not merged")
        }
    }
}
