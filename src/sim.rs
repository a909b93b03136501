//! A group of peered services on a simulated clock, for deterministic tests
//! of what needs several lockers and time: peering, clocks that disagree,
//! leases, reservations, restarts.
//!
//! `Group` plays the daemon's loop for each node through the same loop
//! step (`service::step`: a turn at the service's deadline or the loop's
//! tick, a request, a peer message, a flush after each that gives back
//! what undelivered go replies took and publishes; and a pause reported as
//! the daemon reports it, even one that stopped the node's own clock:
//! `freeze`), callers that go away before their held ask is answered
//! (`abandon`), a node's state file when it keeps
//! one (`keep_state`: the records the daemon's keeper would write, which a
//! kill leaves in place and a restart puts back), and the network between them (a
//! delay, a jitter that reorders, a loss rate, duplicates, links cut and
//! healed), on one true clock that jumps from
//! event to event. Each node reads that clock through its own offset, so a
//! node can run fast or slow, and a restart can come up with its clock
//! stepped. Randomness comes from a seed, so every run of a test is the
//! same run. Nothing here reads a clock, sleeps or touches a socket; it
//! enters a service only through the seam the daemon enters it by
//! (`service::step`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::core::time::NANOS_PER_MS;
use std::collections::{HashMap, HashSet};

use crate::core::{Locker, Nanos, NodeKey, PeerEvent, Peering, PeeringSettings};
use crate::service::{step, Answer, Io, Note, Service, Token, Undelivered, Upkeep};
use crate::state::{Keep, Record};
use crate::wire::{self, Ask, GoReply, Reply};

/// How often the daemon's loop turns with nothing to do (its tick), so that
/// a node with no deadline still publishes its repairs on time.
pub const TICK: Nanos = 100 * NANOS_PER_MS;

/// What the network does to each peer message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// The least time a message takes.
    pub delay: Nanos,
    /// Up to this much more, drawn for each message and receiver: messages
    /// overtake one another when it exceeds the gap between them.
    pub jitter: Nanos,
    /// The chance that a message never reaches a receiver, 0 to 1.
    pub loss: f64,
}

impl Link {
    /// A loopback-like network: 100 µs, no jitter, nothing lost.
    pub const FAST: Link = Link { delay: 100_000, jitter: 0, loss: 0.0 };
}

/// What a group needs to build one of its nodes' services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boot {
    /// The node's place in the group.
    pub node: usize,
    /// The node's clock when it starts.
    pub now: Nanos,
    /// How many nodes the group has.
    pub nodes: usize,
}

/// Builds a node's service at boot; called again at each restart.
pub type Make = Box<dyn FnMut(&Boot) -> Service>;

/// A peered service whose peers are named `node-0`, `node-1`, … in the
/// group's order (without itself), as a daemon's configured peers are.
pub fn peered(locker: Locker, boot: &Boot, grace: Nanos) -> Service {
    peered_as(locker, boot, grace, |n| format!("node-{n}"))
}

/// `peered`, each peer listed with its node id (`node-1@sim://node-1`), as
/// a daemon's `--peer ID@ENDPOINT`: every member's place is known before
/// every peer is heard.
pub fn peered_named(locker: Locker, boot: &Boot, grace: Nanos) -> Service {
    peered_as(locker, boot, grace, |n| format!("node-{n}@sim://node-{n}"))
}

fn peered_as(locker: Locker, boot: &Boot, grace: Nanos, name: impl Fn(usize) -> String) -> Service {
    let me = NodeKey { id: format!("node-{}", boot.node).into(), incarnation: boot.now };
    let names = (0..boot.nodes).filter(|&n| n != boot.node).map(|n| name(n).into()).collect();
    let settings = PeeringSettings::new(me, names, grace, locker.figures().shortest_slot());
    Service::peered(locker, Peering::new(settings, boot.now), boot.now)
}

struct Node {
    service: Option<Service>,
    /// Added to the true time to give this node's clock.
    offset: i64,
    /// The next true instant this node's loop turns on its own.
    turn: Nanos,
    /// While the true time is before this, the node's process is stopped.
    paused_until: Option<Nanos>,
    /// The true instant the node last ran, to tell it how long a pause was.
    last: Nanos,
    /// How much of the current pause its own clock does not see (`freeze`).
    unseen: Nanos,
    /// Its state file (`--state`), once `keep_state` turned it on.
    state: StateFile,
}

/// A node's state file as the daemon's keeper writes it: every record a
/// call left behind, in order, kept before the reply (or the gift) leaves;
/// a kill leaves it whole, as a memory-mapped file outlives its process.
#[derive(Debug, Default)]
struct StateFile {
    on: bool,
    /// The run now writing, numbered from 0 as the file's runs are.
    run: u32,
    records: Vec<Vec<u8>>,
    /// Set once its disk is full: how many more records the room reserved
    /// before then still holds (the daemon's keeper reserves room for at
    /// least one call's).
    headroom: Option<usize>,
}

impl StateFile {
    fn push(&mut self, record: &Record) {
        match &mut self.headroom {
            Some(0) => return,
            Some(n) => *n -= 1,
            None => {}
        }
        let mut bytes = vec![0; record.encoded_len()];
        record.encode(&mut bytes);
        self.records.push(bytes);
    }

    /// A file that starts run `run` of `service`'s locker with `records`.
    fn started(service: &Service, run: u32, records: &[Record]) -> StateFile {
        let me = service.peering().map(|p| p.nodes().me().clone());
        let (node, incarnation) = me.map_or((String::new(), 0), |m| (m.id.to_string(), m.incarnation));
        let mut file = StateFile { on: true, run, records: Vec::new(), headroom: None };
        file.push(&Record::Run { run, incarnation, node: &node });
        records.iter().for_each(|r| file.push(r));
        file
    }
}

impl Keep for StateFile {
    fn run(&self) -> Option<u32> {
        self.on.then_some(self.run)
    }

    fn keep(&mut self, record: &Record) {
        self.push(record);
    }

    fn make_room(&mut self, _: Nanos) -> Result<(), &'static str> {
        match self.headroom {
            Some(_) => Err("the state file cannot grow (the disk is full)"),
            None => Ok(()),
        }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Delivery {
    at: Nanos,
    seq: u64,
    to: usize,
    from: usize,
    bytes: Vec<u8>,
}

/// The sim's state file has no timer of its own: it is written at once
/// and never compacted.
impl Upkeep for StateFile {}

/// A group of nodes, their network and the one true clock.
pub struct Group {
    nodes: Vec<Node>,
    make: Make,
    now: Nanos,
    link: Link,
    wire: BinaryHeap<Reverse<Delivery>>,
    seq: u64,
    rng: u64,
    /// Peer messages each node has published, for tests that count them.
    published: Vec<u64>,
    /// What each node's peering told its log (peers heard, silent, back,
    /// skewed), until a test takes it.
    events: Vec<Vec<PeerEvent>>,
    /// Replies to requests sent with `send`, by token, until taken.
    replies: HashMap<Token, Vec<u8>>,
    next_token: Token,
    /// Callers: the requests held for them, by token (as the daemon keeps
    /// them with their envelopes), and the tokens of those gone away.
    callers: Callers,
    /// The chance that a message reaches a receiver twice, 0 to 1.
    duplication: f64,
    /// `cut[from][to]`: messages from `from` to `to` are dropped (a
    /// partition), until healed.
    cut: Vec<Vec<bool>>,
    /// Whether a pause its own clock did not see is told to a node, as the
    /// daemon's loop tells it by comparing its monotonic clock with the
    /// boot-time and wall clocks (see `freeze`).
    cross_check: bool,
}

/// The callers of a group's requests, as the daemon's serving socket
/// knows them.
#[derive(Debug, Default)]
struct Callers {
    /// The request of each held ask, by token, until it is answered.
    held: HashMap<Token, Box<[u8]>>,
    /// Tokens whose callers went away: their replies are not delivered.
    gone: HashSet<Token>,
    /// What could not be delivered, until a flush takes it.
    undelivered: Undelivered,
}

/// What one loop step of a node produced.
#[derive(Default)]
struct Outbox {
    replies: Vec<(Token, Vec<u8>)>,
    published: Vec<Vec<u8>>,
    events: Vec<PeerEvent>,
    /// Whether the caller waits for its answer (`Group::request`): then
    /// nothing is held.
    at_once: bool,
    callers: Callers,
}

impl Outbox {
    /// An outbox for a step, with the group's callers in it.
    fn with(callers: &mut Callers) -> Outbox {
        Outbox { callers: std::mem::take(callers), ..Outbox::default() }
    }
}

impl Io for Outbox {
    fn reply(&mut self, token: Token, body: &[u8]) {
        let request = self.callers.held.remove(&token);
        if !self.callers.gone.remove(&token) {
            return self.replies.push((token, body.to_vec()));
        }
        // The caller went away: counted, and a go given back.
        let (lost, go) = (&mut self.callers.undelivered, wire::grants(body));
        lost.replies += 1;
        lost.go += u64::from(go);
        if let Some(request) = request.filter(|_| go) {
            lost.lost_go.push((request, body.to_vec()));
        }
    }

    fn may_hold(&self) -> bool {
        !self.at_once
    }

    fn undelivered(&mut self) -> Undelivered {
        std::mem::take(&mut self.callers.undelivered)
    }

    fn publish(&mut self, bytes: &[u8]) {
        self.published.push(bytes.to_vec());
    }

    fn event(&mut self, event: PeerEvent) {
        self.events.push(event);
    }
}

impl Group {
    /// `n` nodes started at true time `start`, each built by `make`, on a
    /// fast network, with randomness from `seed`.
    pub fn new(n: usize, start: Nanos, seed: u64, make: Make) -> Group {
        Group::skewed(&vec![0; n], start, seed, make)
    }

    /// One node per entry of `offsets`, whose clock runs that many
    /// nanoseconds ahead of the true time (behind when negative), started
    /// at true time `start`; otherwise as `new`.
    pub fn skewed(offsets: &[i64], start: Nanos, seed: u64, mut make: Make) -> Group {
        let n = offsets.len();
        let nodes = (0..n)
            .map(|node| Node {
                service: Some(make(&Boot { node, now: start.saturating_add_signed(offsets[node]), nodes: n })),
                offset: offsets[node],
                turn: start,
                paused_until: None,
                last: start,
                unseen: 0,
                state: StateFile::default(),
            })
            .collect();
        let mut g = Group {
            nodes,
            make,
            now: start,
            link: Link::FAST,
            wire: BinaryHeap::new(),
            seq: 0,
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            published: vec![0; n],
            events: vec![Vec::new(); n],
            replies: HashMap::new(),
            next_token: 0,
            callers: Callers::default(),
            duplication: 0.0,
            cut: vec![vec![false; n]; n],
            cross_check: true,
        };
        for i in 0..n {
            g.turn(i);
        }
        g
    }

    /// The true time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Node `i`'s clock.
    pub fn clock(&self, i: usize) -> Nanos {
        self.now.saturating_add_signed(self.nodes[i].offset)
    }

    /// Sets the network for messages sent from now on.
    pub fn set_link(&mut self, link: Link) {
        self.link = link;
    }

    /// Makes each message sent from now on reach a receiver twice with
    /// chance `p` (each copy with its own delay), as a reconnect that
    /// resends can.
    pub fn set_duplication(&mut self, p: f64) {
        self.duplication = p;
    }

    /// Cuts (or, with `cut` false, heals) the link from node `from` to node
    /// `to`: messages sent over it from now on are dropped. Cut both ways
    /// for a partition; messages already on their way still arrive.
    pub fn set_cut(&mut self, from: usize, to: usize, cut: bool) {
        self.cut[from][to] = cut;
    }

    /// Makes node `i`'s clock run `offset` nanoseconds ahead of the true
    /// time (behind when negative). A running daemon's clock never steps, so
    /// set this before a node starts or restarts; a restart keeps it.
    pub fn set_offset(&mut self, i: usize, offset: i64) {
        self.nodes[i].offset = offset;
    }

    /// Node `i`'s service, while it runs.
    pub fn service(&mut self, i: usize) -> &mut Service {
        self.nodes[i].service.as_mut().expect("the node is down")
    }

    /// When node `i`'s loop turns next on its own clock, if ever
    /// (`step::next_deadline`), the tick aside.
    pub fn next_deadline(&self, i: usize) -> Option<Nanos> {
        let node = &self.nodes[i];
        step::next_deadline(node.service.as_ref().expect("the node is down"), &node.state)
    }

    /// Peer messages node `i` has published.
    pub fn published(&self, i: usize) -> u64 {
        self.published[i]
    }

    /// Runs every delivery and loop turn due up to true time `t`, in time
    /// order, and moves the clock to `t`.
    pub fn advance_to(&mut self, t: Nanos) {
        loop {
            let next_delivery = self.wire.peek().map(|Reverse(d)| d.at);
            let next_turn = (0..self.nodes.len()).filter(|&i| self.is_up(i)).map(|i| (self.wake_at(i), i)).min();
            match (next_delivery, next_turn) {
                (Some(d), turn) if d <= t && turn.is_none_or(|(at, _)| d <= at) => {
                    let Reverse(msg) = self.wire.pop().expect("peeked");
                    self.now = self.now.max(msg.at);
                    self.deliver(msg);
                }
                (_, Some((at, i))) if at <= t => {
                    self.now = self.now.max(at);
                    self.resume_if_due(i);
                    self.turn(i);
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
    }

    /// Runs everything due up to `d` from now.
    pub fn advance(&mut self, d: Nanos) {
        self.advance_to(self.now + d);
    }

    /// Answers one request body at node `i` now, for a caller that waits
    /// for its answer (`step::request` with a loop that may not hold, as a
    /// REP socket's: nothing is held), publishing after it as the daemon's
    /// loop would; returns the reply body.
    pub fn request(&mut self, i: usize, body: &[u8]) -> Vec<u8> {
        let token = self.serve(i, body, true);
        self.replies.remove(&token).expect("a request for a caller that waits is answered at once")
    }

    /// Sends one request body to node `i` now, served as the daemon serves
    /// it (`step::request`: it may be held for a go); its reply, now or
    /// later, is taken with `reply`.
    pub fn send(&mut self, i: usize, body: &[u8]) -> Token {
        self.serve(i, body, false)
    }

    /// Serves `body` at node `i` now under a new token, held or not
    /// (`at_once`), then flushes; the token.
    fn serve(&mut self, i: usize, body: &[u8], at_once: bool) -> Token {
        self.advance_to(self.now);
        self.resume_if_due(i);
        self.nodes[i].last = self.now;
        let now = self.clock(i);
        self.next_token += 1;
        let token = self.next_token;
        let mut io = Outbox { at_once, ..Outbox::with(&mut self.callers) };
        let (mut out, mut state) = (Vec::new(), std::mem::take(&mut self.nodes[i].state));
        if step::request(self.service(i), now, token, body, &mut state, &mut io, &mut out) == Answer::Held {
            io.callers.held.insert(token, body.into());
        }
        self.nodes[i].state = state;
        self.take(i, io);
        self.flush(i);
        self.reschedule(i);
        token
    }

    /// The caller of the request sent under `token` goes away before its
    /// reply comes: the reply is not delivered, and what a go in it took
    /// is given back at the node's next flush, as the daemon gives it back
    /// (issue 36).
    pub fn abandon(&mut self, token: Token) {
        self.callers.gone.insert(token);
    }

    /// Replies that could not be delivered so far at node `i`, and how
    /// many of them were go, as its stats count them.
    pub fn undelivered(&mut self, i: usize) -> (u64, u64) {
        let status = self.service(i).status();
        (status.undelivered, status.undelivered_go)
    }

    /// The reply to the request sent under `token`, once it has come.
    pub fn reply(&mut self, token: Token) -> Option<Vec<u8>> {
        self.replies.remove(&token)
    }

    /// Asks node `i` for `ask` now; the reply, or the locker's refusal as
    /// an error message.
    pub fn ask(&mut self, i: usize, ask: &Ask) -> Result<GoReply, String> {
        let mut body = Vec::new();
        wire::encode(&ask.to_map(), &mut body);
        match wire::decode_reply(&self.request(i, &body)) {
            Ok(Reply::Answer(r)) => Ok(r),
            Ok(Reply::Refused(e)) => Err(e.to_string()),
            Err(e) => Err(format!("undecodable reply: {e}")),
        }
    }

    /// The seed's plain form at node `i` now: true for go.
    pub fn go(&mut self, i: usize) -> bool {
        self.request(i, b"let me go") == b"go"
    }

    /// What node `i`'s peering told its log since the last call, in order:
    /// what the daemon logs as peers heard, silent, back or skewed.
    pub fn take_events(&mut self, i: usize) -> Vec<PeerEvent> {
        std::mem::take(&mut self.events[i])
    }

    /// Stops node `i` at once (kill -9): what it has not published is lost,
    /// and messages on their way to it are dropped.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].service = None;
        self.nodes[i].paused_until = None;
        self.nodes[i].unseen = 0;
    }

    /// Gives node `i` a new state file from now on (`--state`): a restart
    /// puts back what it kept. Called before the node joined, it starts
    /// with the file as the daemon's keeper starts one: a new file names
    /// no earlier run, so the node knows it is a first run and owns the
    /// slot it joins in (see `Peering::owns_from_joining`).
    pub fn keep_state(&mut self, i: usize) {
        let now = self.clock(i);
        let service = self.nodes[i].service.as_mut().expect("node is up");
        let (_, rewrite) = step::restore(service, now, 0, std::iter::empty());
        self.nodes[i].state = StateFile::started(service, 0, &rewrite);
    }

    /// Starts every node that has not joined yet as one whose new state
    /// file names no earlier run (see `keep_state`), without keeping the
    /// file: a restart starts without one unless `keep_state` gave it one.
    /// So a group started all at once owns the slot it starts in, as one
    /// started with `--state` does (without, it owns none of it).
    pub fn first_runs(&mut self) {
        for i in 0..self.nodes.len() {
            let now = self.clock(i);
            if let Some(service) = self.nodes[i].service.as_mut() {
                let _ = step::restore(service, now, 0, std::iter::empty());
            }
        }
    }

    /// Fills the disk under node `i`'s state file: it holds `headroom`
    /// more records, then none. A restart finds room again.
    pub fn fill_disk(&mut self, i: usize, headroom: usize) {
        self.nodes[i].state.headroom = Some(headroom);
    }

    /// Removes node `i`'s state file: its next restart starts without one.
    pub fn discard_state(&mut self, i: usize) {
        self.nodes[i].state = StateFile::default();
    }

    /// Starts node `i` again (a new run, a new incarnation) on its clock;
    /// with a state file, it puts back what the file kept before it runs,
    /// as the daemon's keeper does, and goes on writing to it.
    pub fn restart(&mut self, i: usize) {
        let boot = Boot { node: i, now: self.clock(i), nodes: self.nodes.len() };
        self.nodes[i].service = Some((self.make)(&boot));
        let file = std::mem::take(&mut self.nodes[i].state);
        if file.on {
            let records = file.records.iter().filter_map(|b| Record::decode(b));
            let service = self.nodes[i].service.as_mut().expect("just started");
            let (_, rewrite) = step::restore(service, boot.now, file.run + 1, records);
            self.nodes[i].state = StateFile::started(service, file.run + 1, &rewrite);
        }
        self.nodes[i].turn = self.now;
        self.nodes[i].paused_until = None;
        self.nodes[i].unseen = 0;
        self.turn(i);
    }

    /// Stops node `i`'s process for `d` from now (SIGSTOP, then SIGCONT):
    /// it hears nothing and answers nothing until then, and its messages
    /// wait in its socket.
    pub fn pause(&mut self, i: usize, d: Nanos) {
        self.nodes[i].paused_until = Some(self.now + d);
    }

    /// Stops node `i` for `d` from now as a suspended host or a paused VM
    /// is stopped: its monotonic clock stops too. The daemon's loop still
    /// learns of it from its boot-time and wall clocks and moves its clock
    /// ahead by as much; `without_cross_check`, the node's clock comes
    /// back `d` behind (its offset moves by as much, for good) and the
    /// pause goes untold.
    pub fn freeze(&mut self, i: usize, d: Nanos) {
        self.pause(i, d);
        self.nodes[i].unseen = d;
    }

    /// Plays a daemon loop that compares nothing with its monotonic clock:
    /// a `freeze` goes untold.
    pub fn without_cross_check(&mut self) {
        self.cross_check = false;
    }

    fn is_up(&self, i: usize) -> bool {
        self.nodes[i].service.is_some()
    }

    fn wake_at(&self, i: usize) -> Nanos {
        let n = &self.nodes[i];
        n.paused_until.unwrap_or(n.turn).max(n.turn)
    }

    /// A paused node whose pause has ended hears how long it was away
    /// before anything else, as the daemon's loop tells its service.
    fn resume_if_due(&mut self, i: usize) {
        let Some(until) = self.nodes[i].paused_until else { return };
        assert!(self.now >= until, "node {i} is paused: advance past its pause first");
        self.nodes[i].paused_until = None;
        // A pause its clock did not see: the daemon's loop catches up with
        // it (its clock moves ahead by as much), as if its clock had seen
        // it; without that cross-check the clock comes back behind.
        let unseen = std::mem::take(&mut self.nodes[i].unseen);
        if !self.cross_check {
            self.nodes[i].offset -= unseen as i64;
        }
        let now = self.clock(i);
        let away = self.now - self.nodes[i].last;
        let told = if self.cross_check { away } else { away - unseen };
        step::note(self.service(i), Note::Paused { now, paused: told });
    }

    /// One loop turn of node `i` with nothing to read (`step::turn`:
    /// timers, held asks that are due, then a flush, the state file's
    /// upkeep and the heap's trim); the next turn at the node's deadline
    /// or a tick from now.
    fn turn(&mut self, i: usize) {
        self.nodes[i].last = self.now;
        let now = self.clock(i);
        let mut io = Outbox::with(&mut self.callers);
        let (mut out, mut state) = (Vec::new(), std::mem::take(&mut self.nodes[i].state));
        step::turn(self.service(i), now, &mut state, &mut io, &mut out);
        self.nodes[i].state = state;
        self.take(i, io);
        self.nodes[i].turn = self.now + TICK;
        self.reschedule(i);
    }

    /// Brings node `i`'s next turn forward to its deadline
    /// (`step::next_deadline`), as the daemon's loop sets its wait after
    /// every event.
    fn reschedule(&mut self, i: usize) {
        let node = &self.nodes[i];
        let deadline = step::next_deadline(node.service.as_ref().expect("the node is down"), &node.state);
        let offset = self.nodes[i].offset;
        // A deadline on the node's clock, on the true clock; never in the past.
        let due = deadline.map_or(Nanos::MAX, |d| d.saturating_add_signed(-offset).max(self.now + 1));
        self.nodes[i].turn = self.nodes[i].turn.min(due);
    }

    fn deliver(&mut self, msg: Delivery) {
        let to = msg.to;
        if !self.is_up(to) {
            return;
        }
        if let Some(until) = self.nodes[to].paused_until.filter(|&u| u > self.now) {
            // The message waits in the stopped process's socket.
            self.wire.push(Reverse(Delivery { at: until, ..msg }));
            return;
        }
        self.resume_if_due(to);
        self.nodes[to].last = self.now;
        let peer = if msg.from < to { msg.from } else { msg.from - 1 };
        let now = self.clock(to);
        step::peer(self.service(to), now, peer, &msg.bytes);
        self.flush(to);
        self.reschedule(to);
    }

    /// What node `from` has to send now, sent, and what undelivered go
    /// replies took given back (`step::flush`).
    fn flush(&mut self, from: usize) {
        let now = self.clock(from);
        let (mut io, mut state) = (Outbox::with(&mut self.callers), std::mem::take(&mut self.nodes[from].state));
        step::flush(self.service(from), now, &mut state, &mut io);
        self.nodes[from].state = state;
        self.take(from, io);
    }

    /// Takes what a step of node `from` produced: replies are kept for
    /// `reply`, events for `take_events`, peer messages go on the wire.
    fn take(&mut self, from: usize, io: Outbox) {
        self.callers = io.callers;
        self.replies.extend(io.replies);
        self.events[from].extend(io.events);
        self.published[from] += io.published.len() as u64;
        for bytes in io.published {
            for to in 0..self.nodes.len() {
                if to == from || self.cut[from][to] || self.chance() < self.link.loss {
                    continue;
                }
                let copies = if self.duplication > 0.0 && self.chance() < self.duplication { 2 } else { 1 };
                for _ in 0..copies {
                    let jitter = if self.link.jitter > 0 { self.next_u64() % (self.link.jitter + 1) } else { 0 };
                    self.seq += 1;
                    let at = self.now + self.link.delay + jitter;
                    self.wire.push(Reverse(Delivery { at, seq: self.seq, to, from, bytes: bytes.clone() }));
                }
            }
        }
    }

    /// splitmix64: small, seeded, good enough to pick delays and losses.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn chance(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
