//! The loop that owns the sockets and the clock.
//!
//! `Server::bind` binds the serving socket and reports the real endpoint
//! before anything is served, so a caller can print it or hand it to a
//! test. `run` is the single thread that waits on the sockets, reads the
//! clock once per request and pumps the service through the loop step
//! (`service::step`), which decides the order of work and which the
//! simulated group runs too. Every request gets exactly one reply
//! (`serving`: a reply that finds its client's queue full waits for room,
//! and one that cannot be delivered is counted). The loop makes no
//! decisions of its own; the clock it reads can be injected
//! (`Server::with_clock`), so a test can serve on real sockets in-process.
//!
//! When peered, the same thread also polls one SUB socket per configured
//! peer, so the socket a message arrives on names the peer it came from,
//! and publishes on a PUB socket whatever the service hands it. Peer
//! messages are read before requests (and, once found quiet, again after a
//! few batches: `PEER_LOOK_EVERY`), and publishing follows every small
//! batch of requests, so that wants and gifts travel within one loop turn;
//! a turn serves for at most `TURN_BUDGET` before the timers. A publish
//! never blocks: past the high-water mark ZeroMQ drops it, which cumulative
//! counts make harmless. Peer messages and requests are read in bounded
//! batches with the stop flag checked between them, so no flood delays a
//! stop; and the loop tells the service how long it was away when the
//! process was paused (SIGSTOP, a frozen VM; `watch`, which also catches
//! pauses the monotonic clock did not see).
//!
//! With Envoy's rate-limit service on, the same thread also polls the gRPC
//! side's sockets and drives its tasks (`rls::Running::drive`): before and
//! after every wait, and after every batch that served calls, so that
//! their replies leave with the batch and the calls that came meanwhile
//! join the next. A call thus reaches the loop and its reply its
//! connection with no other thread woken.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{debug, error, info, warn};

use super::admins::{Admins, RESET_REFUSED};
use super::calls::{self, Calls};
use super::clock::Clock;
use super::fds::AcceptWatch;
use super::keeper::{self, Keeper, Loaded};
use super::metrics::Feed;
use super::reload::{self, Reload};
use super::serving::{Received, Serving};
use super::signals::Control;
use super::store::{StoreCalls, StoreError, StoreLink};
use super::transport::{self, zmq_err, TransportError};
use super::watch::Watch;
pub use super::watch::{LoopClock, Others};
use super::zap::{self, Gate};
use crate::config::{PeerConfig, PeerSpec, ServeConfig};
use crate::core::claims::ClaimAsk;
use crate::core::lease_id::RANDOM_BYTES;
use crate::core::store_lease::LeaseCall;
use crate::core::{
    time::NANOS_PER_MS, Entropy, LeaseMinter, Locker, Nanos, NodeKey, PeerEvent, Peering, PeeringSettings,
};
use crate::curve::{Allowlist, KeyPair};
use crate::service::{step, Answer, Io, Note, Service, Token, Undelivered};
use crate::state::StateError;
use crate::wire::{self, WireError, MAX_PEER_MESSAGE_SIZE};

/// How long one wait on the sockets may last, so that a stop request is seen
/// well within a second even when no traffic arrives.
const TICK_MS: i64 = 100;

/// How long one wait may last while replies wait for room in their
/// clients' queues: they are sent again this often.
const BACKLOG_RETRY_MS: i64 = 1;

/// How many requests are served back to back before the loop looks at the
/// stop flag again, so a flood cannot delay shutdown.
const BATCH: usize = 1024;

/// How long one turn may serve requests and peer messages back to back
/// before the loop returns to its timers (heartbeats, repairs, the
/// keeper): a peer's burst of wants for a hundred thousand keys is
/// hundreds of messages of 256, which, read in one turn, kept heartbeats
/// back for longer than a peer waits before counting this locker out.
const TURN_BUDGET: Nanos = 20 * NANOS_PER_MS;

/// How many requests are served between two looks at the peers, so that a
/// flood of requests cannot leave peer counts waiting.
const INNER_BATCH: usize = 8;

/// How many of Envoy's calls are served between two looks at the peers:
/// more than ZeroMQ requests, as their replies leave together at the end
/// of the batch (`calls`), at a few microseconds each.
const CALLS_BATCH: usize = 64;

/// How many batches of requests are served after the peers were found
/// quiet before they are looked at again within a turn: a look at an
/// empty SUB socket is a system call (ZeroMQ polls its mailbox), which
/// between every `INNER_BATCH` single asks cost a member about a twentieth
/// of its CPU. A peer message then waits at most this many batches (well
/// under a millisecond of single asks) beyond the turn's own bound.
const PEER_LOOK_EVERY: usize = 8;

/// How many peer messages are read from one peer in one go: a message
/// holds up to 256 counts, wants and gifts, so a few are as much work as
/// the `INNER_BATCH` requests served beside them.
const PEER_BATCH: usize = 8;

/// How long the serving socket may keep sending the replies of asks held
/// at a stop, in milliseconds: well within the stop's second.
const STOP_LINGER_MS: i32 = 500;

/// Replies one client's backlog may hold beyond every ask the locker may
/// hold: a client's queue holds 1,000 replies, so a client with thousands
/// of asks outstanding (a DEALER) gets every reply as it reads.
const BACKLOG_BEYOND_PARKED: usize = 10_000;

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
    #[error(transparent)]
    Rls(#[from] crate::rls::RlsError),
}

/// The sockets a peered locker talks to its peers with.
struct PeerSockets {
    publisher: zmq::Socket,
    /// One per configured peer, in configuration order.
    subscribers: Vec<zmq::Socket>,
    /// The peers they subscribe to, in the same order.
    specs: Vec<PeerSpec>,
    endpoint: String,
}

impl PeerSockets {
    /// Subscribes to `specs` in place of the peers subscribed to now (a
    /// reload): the socket of a peer still listed is kept, a new peer
    /// gets a new one, a removed peer's is closed. Nothing changes when a
    /// new socket cannot be made.
    fn follow(&mut self, ctx: &zmq::Context, specs: &[PeerSpec], keys: Option<&KeyPair>) -> Result<(), ServerError> {
        let listed = |spec: &PeerSpec| self.specs.iter().position(|s| s == spec);
        let mut made: Vec<Option<zmq::Socket>> = specs
            .iter()
            .map(|spec| listed(spec).map_or_else(|| subscribe(ctx, spec, keys).map(Some), |_| Ok(None)))
            .collect::<Result<_, _>>()?;
        let mut old: Vec<Option<zmq::Socket>> = std::mem::take(&mut self.subscribers).into_iter().map(Some).collect();
        let mut kept = |spec: &PeerSpec| listed(spec).and_then(|i| old[i].take());
        self.subscribers = specs
            .iter()
            .zip(&mut made)
            .map(|(spec, new)| new.take().or_else(|| kept(spec)).expect("a socket per peer"))
            .collect();
        self.specs = specs.to_vec();
        Ok(())
    }
}

/// A bound locker, ready to run.
pub struct Server {
    // The context must outlive the sockets; field order drops them first.
    io: LoopIo,
    /// The ZAP handler, when CURVE clients are limited to an allowlist.
    gate: Option<Gate>,
    /// Connections the serving socket could not accept (out of open files).
    accepts: AcceptWatch,
    /// Envoy's rate-limit service, when `rls_bind` is set: a client of
    /// the serving socket, stopped before the context ends.
    rls: Option<crate::rls::Running>,
    _ctx: zmq::Context,
    endpoint: String,
    service: Service,
    watch: Watch,
    state: Option<Keeper>,
    /// Where snapshots for the metrics thread go, when metrics are on.
    metrics: Option<Feed>,
    /// Where the config is read again from, when it came from a file.
    reload: Option<Reload>,
}

/// Logs one answer at debug (`LOCKER_LOG=debug`): the request when it is
/// at hand (a held ask's reply leaves without it) and the reply, refusals
/// with their reasons. Out of line: the request path pays only the check
/// of the level.
#[cold]
#[inline(never)]
fn log_answer(request: Option<&[u8]>, reply: &[u8]) {
    match request {
        Some(request) => debug!(request = %shown(request), reply = %shown(reply), "answered"),
        None => debug!(reply = %shown(reply), "answered a held or deferred ask"),
    }
}

/// A message body for the log: the plain form as text, MessagePack as
/// JSON, anything else by its length.
fn shown(body: &[u8]) -> String {
    match std::str::from_utf8(body) {
        Ok(text) if !text.is_empty() && !text.chars().any(char::is_control) => format!("{text:?}"),
        _ => rmp_serde::from_slice::<serde_json::Value>(body)
            .map_or_else(|_| format!("{} bytes", body.len()), |v| v.to_string()),
    }
}

/// The sockets the loop step talks through (see `service::step::Io`).
struct LoopIo {
    serving: Serving,
    peers: Option<PeerSockets>,
    /// The store thread, when the counts live in a store.
    store: Option<StoreLink>,
    /// Who may reset a key's count.
    admins: Admins,
    /// Who sent the request being served, when callers are told apart
    /// (see `Admins::tells_apart`).
    caller: Option<String>,
    /// Envoy's calls, when the rate-limit service is on.
    calls: Option<Calls>,
}

impl LoopIo {
    /// The calls, when `token` is a call's: its reply goes there.
    #[inline]
    fn call(&mut self, token: Token) -> Option<&mut Calls> {
        self.calls.as_mut().filter(|_| calls::is_call(token))
    }
}

impl Io for LoopIo {
    #[inline]
    fn reply(&mut self, token: Token, body: &[u8]) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            log_answer(None, body);
        }
        match self.call(token) {
            Some(calls) => calls.reply(token, body, None),
            None => self.serving.reply(token, body),
        }
    }

    #[inline]
    fn answer(&mut self, token: Token, request: &[u8], body: &[u8]) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            log_answer(Some(request), body);
        }
        match self.call(token) {
            Some(calls) => calls.reply(token, body, Some(request)),
            None => self.serving.answer(request, body),
        }
    }

    fn publish(&mut self, bytes: &[u8]) {
        let Some(p) = &self.peers else { return };
        // Past the high-water mark ZeroMQ drops it, which cumulative counts
        // make harmless.
        if p.publisher.send(bytes, zmq::DONTWAIT).is_err() {
            debug!("a peer message dropped at the high-water mark");
        }
    }

    fn event(&mut self, event: PeerEvent) {
        log_event(&event);
    }

    fn refuses_reset(&mut self, _token: Token, limit: &str, key: &str) -> Option<&'static str> {
        self.admins.refuses(self.caller.as_deref(), limit, key).then_some(RESET_REFUSED)
    }

    fn store(&mut self, claims: Vec<ClaimAsk>, leases: Vec<LeaseCall>) {
        if let Some(s) = &self.store {
            s.send(StoreCalls { claims, leases });
        }
    }

    fn undelivered(&mut self) -> Undelivered {
        let (mut replies, mut go) = self.serving.take_undelivered();
        let mut lost_go = self.serving.take_lost_go();
        if let Some(calls) = &mut self.calls {
            let (r, g) = calls.take_undelivered();
            (replies, go) = (replies + r, go + g);
            lost_go.append(&mut calls.take_lost_go());
        }
        Undelivered { replies, go, lost_go }
    }

    fn release_free_heap(&mut self) {
        super::trim::release_free_heap();
    }
}

impl Server {
    /// Binds the serving socket described by `config` and builds the locker.
    pub fn bind(config: &ServeConfig) -> Result<Server, ServerError> {
        let ctx = transport::context()?;
        // The ZAP handler must be bound before any CURVE socket binds.
        let gate = match &config.curve {
            Some(c) => Gate::start(&ctx, c, peer_allowlist(config.peering.as_ref(), &c.keys))?,
            None => None,
        };
        let keys = config.curve.as_ref().map(|c| &c.keys);
        // Nothing can wait without room to park or a store to wait on: a
        // REP socket's one-at-a-time contract then suffices.
        let router = config.max_parked > 0 || config.store.is_some();
        let kind = if router { zmq::ROUTER } else { zmq::REP };
        let (socket, endpoint) =
            transport::bind_serving_with(&ctx, kind, &config.bind, config.max_message_size, |socket| {
                keys.map_or(Ok(()), |k| zap::secure_rep(socket, k))
            })?;
        let accepts = AcceptWatch::start(&ctx, &socket, keys.is_some())
            .map_err(zmq_err("watching the serving socket's accepts"))?;
        let (rls, calls) = match &config.rls {
            Some(rc) => {
                // The gRPC side's requests reach the loop through a queue
                // it drains, and are served as any client's are.
                let timeout = crate::rls::ask_timeout_ms(config.store.as_ref().map(|s| s.timeout));
                let (bridge, inbox) = crate::rls::bridge::pair(timeout);
                let running = crate::rls::Running::start(bridge, rc, config.max_message_size)?;
                let within = running.within().expect("a runtime until stopped");
                (Some(running), Some(Calls::new(inbox, within)))
            }
            None => (None, None),
        };
        let serving = Serving::new(socket, router, config.max_parked + BACKLOG_BEYOND_PARKED)?;
        let minter = LeaseMinter::new(Box::new(OsEntropy), config.lease_secret.as_ref());
        let locker =
            Locker::new(config.default.clone(), config.limits.clone(), config.max_keys).with_lease_minter(minter);
        let locker = locker.with_runtime_limits(config.runtime_limits);
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
                let kept = loaded.as_ref().and_then(Loaded::node_id);
                let id = pc.node_id.choose(kept);
                info!(node_id = %id, kept = kept == Some(id.as_str()), "peering as this node id");
                // The incarnation the state file's `Run` record names: a
                // restart resumes an earlier run only when the run its
                // peers knew is the one its file kept.
                let me = NodeKey { id: id.as_str().into(), incarnation: started };
                let grace = pc.grace.as_nanos() as u64;
                let names = pc.peers.iter().map(|p| p.name().into()).collect();
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
        let watch = Watch::new(Box::new(clock), config.peering.is_some());
        Ok(Server {
            io: LoopIo { serving, peers, store, admins: Admins::new(config.curve.as_ref()), caller: None, calls },
            gate,
            accepts,
            _ctx: ctx,
            endpoint,
            service,
            watch,
            state,
            metrics: None,
            reload: None,
            rls,
        })
    }

    /// Reads time from `clock` instead of the daemon's own, from now on:
    /// for tests that serve on real sockets in this process at instants
    /// they choose.
    pub fn with_clock(mut self, clock: impl LoopClock + 'static) -> Server {
        self.watch = Watch::new(Box::new(clock), self.watch.peered());
        self
    }

    /// Hands a snapshot to `feed` every `Feed::EVERY` while running.
    pub fn with_metrics(mut self, feed: Feed) -> Server {
        let feed = match &self.rls {
            Some(rls) => feed.with_rls(rls.counts()),
            None => feed,
        };
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
        self.io.peers.as_ref().map(|p| p.endpoint.as_str())
    }

    /// The endpoint actually bound, with the real port when the config asked
    /// for a wildcard one.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The address Envoy's rate-limit service listens on, when served.
    pub fn rls_addr(&self) -> Option<std::net::SocketAddr> {
        self.rls.as_ref().map(crate::rls::Running::addr)
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
        while !stop() {
            if reload() {
                self.reload();
            }
            if let Some(feed) = &mut self.metrics {
                feed.tick(&self.service, self.watch.peek(), false);
            }
            let (readable, refused_accepts) = self.wait_readable()?;
            if let Some(gate) = &mut self.gate {
                gate.answer_waiting()?;
                step::note(&mut self.service, Note::RefusedConnections(gate.refused()));
            }
            if refused_accepts {
                step::note(&mut self.service, Note::AcceptFailures(self.accepts.read()));
            }
            let now = self.watch.checked(&mut self.service);
            if let Some(rls) = &self.rls {
                rls.health().set(serving(&self.service));
            }
            self.take_store_answers(now);
            self.io.serving.retry();
            step::turn(&mut self.service, now, &mut self.state, &mut self.io, &mut out);
            if !readable {
                continue;
            }
            // Requests and peer messages both count towards the batch, and
            // the turn's time is bounded too, so a flood of either returns
            // to the stop flag and the timers soon.
            let (mut handled, started, mut look_in) = (0, now, 0);
            while handled < BATCH && !stop() {
                // Peers are looked at first and while they have messages;
                // found quiet, again only after `PEER_LOOK_EVERY` batches.
                let heard = if look_in == 0 { self.read_peers(&mut msg)? } else { 0 };
                look_in = match (look_in, heard) {
                    (0, 0) => PEER_LOOK_EVERY,
                    (0, _) => 0,
                    (left, _) => left - 1,
                };
                let (n, calls) = self.serve_some(&mut msg, &mut out)?;
                if heard == 0 && n == 0 {
                    break;
                }
                // Checked against the other clocks per batch, before
                // anything it decided leaves (see `watch`).
                let now = self.watch.checked(&mut self.service);
                step::flush(&mut self.service, now, &mut self.state, &mut self.io);
                if calls > 0 {
                    // The replies go out, and the calls that came meanwhile
                    // join the next batch.
                    self.drive_rls();
                }
                handled += n + heard;
                if now.saturating_sub(started) >= TURN_BUDGET {
                    break;
                }
            }
        }
        if let Some(rls) = &self.rls {
            rls.health().set(false);
        }
        self.stop(&mut out);
        if let Some(mut rls) = self.rls.take() {
            rls.stop();
        }
        if let Some(feed) = &mut self.metrics {
            feed.tick(&self.service, self.watch.peek(), true);
        }
        let refused = self.gate.as_ref().map(Gate::refused);
        info!(refused_connections = ?refused, "stopping");
        if let Some(state) = self.state.take() {
            state.close();
        }
        Ok(())
    }

    /// Reads the config again and serves it (see `reload`).
    fn reload(&mut self) {
        let Some(r) = &mut self.reload else {
            return warn!("asked to reload, but the config came from no file");
        };
        let now = self.watch.peek();
        let (service, state) = (&mut self.service, &mut self.state);
        let keys = r.current().curve.as_ref().map(|c| c.keys.clone());
        let mut follow =
            Following { service, state, now, ctx: &self._ctx, sockets: &mut self.io.peers, gate: &mut self.gate, keys };
        reload::apply(r, self.rls.as_ref(), &mut follow);
    }

    /// Waits until a request, a peer message or a gRPC socket's bytes
    /// arrive, the service's next deadline passes, or a tick goes by (a
    /// gRPC timer, such as a call's timeout, is seen within one); returns
    /// whether anything arrived,
    /// and whether the accept monitor has news (so that it is read only
    /// then, not on every turn).
    fn wait_readable(&mut self) -> Result<(bool, bool), ServerError> {
        let now = self.watch.peek();
        let deadline = step::next_deadline(&self.service, &self.state);
        let until_deadline = deadline.map(|d| d.saturating_sub(now).div_ceil(NANOS_PER_MS));
        let tick = if self.io.serving.backlog() > 0 { BACKLOG_RETRY_MS } else { TICK_MS };
        // The gRPC side's ready tasks run first (replies to send, held
        // asks answered in the turn), so that every socket they wait on is
        // among the items; calls that wait already are served without
        // waiting.
        self.drive_rls();
        let tick = if self.calls_waiting() { 0 } else { tick };
        let timeout = until_deadline.map_or(tick, |ms| (ms as i64).min(tick));
        let mut items = vec![self.io.serving.socket().as_poll_item(zmq::POLLIN)];
        if let Some(p) = &self.io.peers {
            items.extend(p.subscribers.iter().map(|s| s.as_poll_item(zmq::POLLIN)));
        }
        if let Some(g) = &self.gate {
            items.push(g.poll_item());
        }
        if let Some(s) = &self.io.store {
            items.push(s.poll_item());
        }
        items.push(self.accepts.poll_item());
        let rls_from = items.len();
        if let Some(rls) = &self.rls {
            rls.poll_items(&mut items);
        }
        let (n, accepts) = match zmq::poll(&mut items, timeout) {
            Ok(n) => (n, items[rls_from - 1].is_readable()),
            Err(zmq::Error::EINTR) => (0, false),
            Err(e) => return Err(zmq_err("waiting for requests")(e).into()),
        };
        // Every wait ends in a drive: the gRPC side's sockets that became
        // ready, its replies and its timers.
        if let Some(rls) = &self.rls {
            rls.wake_and_drive(&items[rls_from..]);
        }
        drop(items);
        Ok((n > 0 || self.calls_waiting(), accepts))
    }

    /// Whether Envoy's calls wait to be served.
    fn calls_waiting(&self) -> bool {
        self.io.calls.as_ref().is_some_and(Calls::waiting)
    }

    /// Runs the gRPC side's ready tasks (see `rls::Running::drive`).
    fn drive_rls(&self) {
        if let Some(rls) = &self.rls {
            rls.drive();
        }
    }

    /// Takes the store's answers in; the requests they free are answered
    /// by the next turn.
    fn take_store_answers(&mut self, now: Nanos) {
        if let Some(s) = &self.io.store {
            let answers = s.answers();
            if !answers.is_empty() {
                step::store_answers(&mut self.service, now, answers.claims, answers.leases);
            }
        }
    }

    /// Serves up to `INNER_BATCH` waiting requests, and up to
    /// `CALLS_BATCH` of Envoy's calls; returns how many in all, and how
    /// many calls.
    fn serve_some(&mut self, msg: &mut zmq::Message, out: &mut Vec<u8>) -> Result<(usize, usize), ServerError> {
        let mut n = 0;
        while n < INNER_BATCH && self.serve_one(msg, out)? {
            n += 1;
        }
        let calls = self.serve_calls(out);
        Ok((n + calls, calls))
    }

    /// Serves up to `CALLS_BATCH` of Envoy's calls; returns how many.
    fn serve_calls(&mut self, out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        while n < CALLS_BATCH {
            let Some((token, request)) = self.io.calls.as_mut().and_then(Calls::next) else { break };
            // No ZeroMQ caller: nobody to name to the admins' check.
            self.io.caller = None;
            let now = self.watch.now(&mut self.service);
            if step::request(&mut self.service, now, token, &request, &mut self.state, &mut self.io, out)
                == Answer::Held
            {
                if let Some(calls) = &mut self.io.calls {
                    calls.hold(token, request);
                }
            }
            n += 1;
        }
        n
    }

    /// Hands up to `PEER_BATCH` waiting messages of each peer to the
    /// service, naming the peer by its socket; returns how many.
    fn read_peers(&mut self, msg: &mut zmq::Message) -> Result<usize, ServerError> {
        let Some(p) = &self.io.peers else { return Ok(0) };
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
                if msg.get_more() || !step::peer(&mut self.service, now, peer, msg) {
                    debug!(peer, "peer message not understood; dropped");
                    while msg.get_more() && subscriber.recv(msg, zmq::DONTWAIT).is_ok() {}
                }
            }
        }
        Ok(heard)
    }

    /// Serves one request if one is waiting; returns whether it did.
    fn serve_one(&mut self, msg: &mut zmq::Message, out: &mut Vec<u8>) -> Result<bool, ServerError> {
        let token = match self.io.serving.recv(msg)? {
            Received::Nothing => return Ok(false),
            Received::Dropped => return Ok(true),
            Received::MultiPart(token, parts) => {
                debug!(parts, "multi-part request refused");
                step::refuse(&mut self.service, token, WireError::MultiPart(parts), &mut self.io, out);
                return Ok(true);
            }
            Received::Request(token) => token,
        };
        // The body's bytes are looked up once on the common path: each look
        // is two calls into libzmq.
        let mut body: &[u8] = msg;
        if self.io.admins.tells_apart() && wire::is_structured(body) {
            self.io.caller = Admins::caller(msg);
            body = msg;
        }
        let now = self.watch.now(&mut self.service);
        if step::request(&mut self.service, now, token, body, &mut self.state, &mut self.io, out) == Answer::Held {
            self.io.serving.hold(token, body);
        }
        Ok(true)
    }

    /// At a stop: answers every held ask (go if its limit allows it now,
    /// else sorry), and gives the replies time to leave: what waits for
    /// room in a client's queue is sent as the client reads, for up to
    /// `STOP_LINGER_MS`.
    fn stop(&mut self, out: &mut Vec<u8>) {
        let now = self.watch.now(&mut self.service);
        let answered = step::stop(&mut self.service, now, &mut self.state, &mut self.io, out);
        if answered > 0 {
            info!(answered, "answered every held ask before stopping");
        }
        let until = self.watch.peek() + STOP_LINGER_MS as u64 * NANOS_PER_MS;
        while self.io.serving.backlog() > 0 && self.watch.peek() < until {
            let mut items = [self.io.serving.socket().as_poll_item(zmq::POLLOUT)];
            let _ = zmq::poll(&mut items, BACKLOG_RETRY_MS);
            self.io.serving.retry();
        }
        let left = self.io.serving.backlog();
        if left > 0 {
            warn!(replies = left, "the locker stopped before these clients read their replies");
        }
        // What could not be delivered is counted, and what a go among it
        // took given back, as in every turn.
        let now = self.watch.now(&mut self.service);
        step::flush(&mut self.service, now, &mut self.state, &mut self.io);
        if answered > 0 {
            self.io.serving.linger(STOP_LINGER_MS);
        }
    }
}

/// Whether the locker serves as `/health` says it does: not joining its
/// peers, not refusing every grant, its store (if any) reachable.
fn serving(service: &Service) -> bool {
    let joining = service.peering().is_some_and(|p| p.is_joining());
    let status = service.status();
    !joining && status.refusing.is_none() && status.store.as_ref().is_none_or(|s| s.down.is_none())
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

/// What a reload changes in the loop: the limits served, and the peers
/// subscribed to.
struct Following<'a> {
    service: &'a mut Service,
    state: &'a mut Option<Keeper>,
    now: Nanos,
    ctx: &'a zmq::Context,
    sockets: &'a mut Option<PeerSockets>,
    gate: &'a mut Option<Gate>,
    keys: Option<KeyPair>,
}

impl reload::FollowsReload for Following<'_> {
    fn limits(&mut self, limits: reload::Limits) -> crate::core::Reloaded {
        step::reload(self.service, self.now, limits, self.state)
    }

    fn peers(&mut self, specs: &[PeerSpec]) -> bool {
        let Some(sockets) = self.sockets.as_mut() else { return false };
        if let Err(e) = sockets.follow(self.ctx, specs, self.keys.as_ref()) {
            error!(error = %e, "peers not reloaded; the old ones stay");
            return false;
        }
        if let (Some(gate), Some(keys)) = (self.gate.as_mut(), self.keys.as_ref()) {
            gate.set_peers(Allowlist::of(specs.iter().map(|p| p.key.unwrap_or(keys.public))));
        }
        let names = specs.iter().map(|p| p.name().into()).collect();
        step::repeer(self.service, self.now, names);
        let peers: Vec<&str> = specs.iter().map(|p| p.endpoint.as_str()).collect();
        info!(?peers, "peers reloaded");
        true
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
    Ok(PeerSockets { publisher, subscribers, specs: pc.peers.clone(), endpoint })
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
        PeerEvent::ClockFollowed { by_ms, correction_ms, still } => {
            warn!(
                by_ms,
                correction_ms,
                "this host's clock differs from its peers'; following the middle of the group's clocks (keep clocks synchronised, e.g. with chrony)"
            );
            if *still {
                warn!(by_ms, "the clock moved past the leases' margin at once; granting from no share for a lease and its margin")
            }
        }
        PeerEvent::Silent { id, last_heard_ms } => {
            warn!(peer = %id, last_heard_ms, "peer silent: no longer counted as live")
        }
        PeerEvent::Back { id, silent_ms } => info!(peer = %id, silent_ms, "peer back: heard again"),
        PeerEvent::Ready { synced: 0 } => warn!("no peer sent its counts within the grace period; serving alone"),
        PeerEvent::Ready { synced } => info!(synced, "learned the current counts from peers; serving"),
        PeerEvent::OwnsNextPeriods { why } => warn!(
            why,
            "this run owns none of the slots (windows, periods) under way of its shared limits: it grants from \
             the next, and only what peers give before"
        ),
        PeerEvent::Declared { id } => warn!(peer = %id, "peer silent past its lease: declared dead; a majority of such declarations passes its share on"),
        PeerEvent::Reclaimed { id, in_ms } => warn!(peer = %id, in_ms, "a majority declared this peer dead: its share is this locker's for the slots that begin after in_ms"),
        PeerEvent::LostShare { by } => warn!(by = %by, "a peer holds this locker's share (it was declared dead): granting only what peers give until a later run of this locker is heard"),
        PeerEvent::ShareBack => info!("no peer holds this locker's share any more: granting from it again from the slots after a lease regained since"),
        PeerEvent::Released { id } => info!(peer = %id, "a later run of a peer whose share this locker held was heard: its share is given back"),
        PeerEvent::Rejoining { paused_ms } => {
            warn!(paused_ms, "this locker was paused longer than the peer-dead time; learning the counts again")
        }
        PeerEvent::Refused { peer, what, rejected } => warn!(%peer, rejected, "refused from a peer: {what}"),
        PeerEvent::MemberSetDiffers { peer, id, theirs, ours } => warn!(
            %peer,
            node = %id,
            theirs,
            ours,
            "a peer names another member set than this locker (list the same lockers on every member): granting nothing from shares until they agree"
        ),
        PeerEvent::MemberSetsAgree => info!("every peer names this locker's member set again: granting from shares from the next slot"),
        PeerEvent::MemberSetChanged { ours } => warn!(
            members = ours,
            "the member set changed: granting nothing from shares until every peer names the new one, then from the next slot"
        ),
        PeerEvent::LimitMismatch { peer, limit } => {
            warn!(%peer, %limit, "a peer defines this limit differently; its counts for it are not merged")
        }
    }
}
