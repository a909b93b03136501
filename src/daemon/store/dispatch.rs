//! The store thread's routing: which node each call goes to, what comes
//! back, and how each node is doing.
//!
//! On a cluster it keeps the map of slots to masters, read with `CLUSTER
//! SLOTS` from a node that answers (nodes known to be failing are asked
//! last), again after a MOVED or a failure (at most once per
//! `RETRY_DOWN`), so that a failover is followed; a node that left the map
//! is reported gone. It turns outcomes into the answers the loop reads,
//! each naming its node, and reports each node's change of health once.
//!
//! It does no I/O: the nodes' threads carry the calls, and the map is read
//! by a thread of its own (`MapReader`), whose answer comes back as an
//! event. A map read may wait for a node's timeout, and a loaded machine
//! may take long to connect: were it read here, every call to every node
//! would wait for it, at each failure of any node. Calls are routed by the
//! map in hand meanwhile; only before the first map do they wait for it.

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::sync::mpsc;

use super::node::{self, Call, NodeLink, NodeOutcome, StoreCallSettings, What};
use super::slots::{slot_of, SlotMap};
use super::{Event, StoreAnswers, StoreCalls};
use crate::config::StoreSpec;
use crate::core::claims::{Claimed, Grant, NODE_GONE, NODE_REPORT, RETRY_DOWN};
use crate::core::store_lease::{LeaseAnswer, StoreLease};

/// The name answers carry when no node could be asked: the cluster's map
/// could not be read.
const CLUSTER: &str = "cluster";

/// The most MOVED and ASK answers one call follows.
const MAX_REDIRECTS: u8 = 3;

/// Where calls go.
enum Topology {
    /// One server: every call goes to it.
    Single { node: Arc<str>, url: String },
    /// A cluster: by the map, once read.
    Cluster(Cluster),
}

struct Cluster {
    /// The nodes the locker was given, to read the map from.
    seeds: Vec<Arc<str>>,
    map: Option<SlotMap>,
    /// Whether the map may be out of date.
    stale: bool,
    /// When it was last read, or tried.
    read_at: Option<Instant>,
    /// Why it could not be read, while there is none.
    unmapped: Option<String>,
    /// Nodes that did not answer `CLUSTER SLOTS` in time: asked last.
    slow: Vec<Arc<str>>,
    /// The thread that reads the map, and whether a read is under way.
    reader: MapReader,
    reading: bool,
}

/// What one reading of the cluster's map found: the map, or why no node
/// gave it and the node that timed out, if one did.
#[derive(Debug)]
pub enum MapRead {
    Read(SlotMap),
    Failed { why: String, slow: Option<Arc<str>> },
}

/// The thread that reads the cluster's map: it takes the nodes to ask, in
/// order, and sends what it read back as an event.
struct MapReader {
    ask: Option<mpsc::Sender<Vec<Arc<str>>>>,
    thread: Option<JoinHandle<()>>,
}

impl MapReader {
    fn start(settings: StoreCallSettings, events: Sender<Event>) -> MapReader {
        let (ask, asked) = mpsc::channel::<Vec<Arc<str>>>();
        let thread = std::thread::Builder::new().name("locker-store-map".into()).spawn(move || {
            for candidates in asked {
                if events.send(Event::Map(read_first(&candidates, settings))).is_err() {
                    return;
                }
            }
        });
        match thread {
            Ok(thread) => MapReader { ask: Some(ask), thread: Some(thread) },
            // No thread: `read` reads in the caller's thread instead.
            Err(_) => MapReader { ask: None, thread: None },
        }
    }

    /// Reads the map from the first of `candidates` that answers: by the
    /// thread, whose answer comes as an event (`None` here), or at once.
    fn read(&self, candidates: Vec<Arc<str>>, settings: StoreCallSettings) -> Option<MapRead> {
        match &self.ask {
            Some(ask) => ask.send(candidates).err().map(|e| read_first(&e.0, settings)),
            None => Some(read_first(&candidates, settings)),
        }
    }

    /// Ends the thread, after the read under way.
    fn stop(mut self) -> Option<JoinHandle<()>> {
        self.ask = None;
        self.thread.take()
    }
}

/// Routes calls to nodes and outcomes to answers.
pub struct Dispatcher {
    topology: Topology,
    settings: StoreCallSettings,
    events: Sender<Event>,
    nodes: HashMap<Arc<str>, NodeLink>,
    /// Nodes whose last calls failed, and why.
    failing: HashMap<Arc<str>, String>,
    /// Calls to route on this turn.
    pending: Vec<Call>,
    /// Threads of nodes that left the map, to join at the end.
    closed: Vec<JoinHandle<()>>,
}

impl Dispatcher {
    pub fn new(spec: &StoreSpec, settings: StoreCallSettings, events: Sender<Event>) -> Dispatcher {
        let topology = match spec {
            StoreSpec::Single(url) => Topology::Single { node: node_of_url(url).into(), url: url.clone() },
            StoreSpec::Cluster(urls) => Topology::Cluster(Cluster {
                seeds: urls.iter().map(|u| node_of_url(u).into()).collect(),
                map: None,
                stale: true,
                read_at: None,
                unmapped: None,
                slow: Vec::new(),
                reader: MapReader::start(settings, events.clone()),
                reading: false,
            }),
        };
        let nodes = HashMap::new();
        Dispatcher {
            topology,
            settings,
            events,
            nodes,
            failing: HashMap::new(),
            pending: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Takes the loop's calls, to route on this turn.
    pub fn take(&mut self, batch: StoreCalls) {
        let claims = batch.claims.into_iter().map(|c| Call::new(What::Claim(c)));
        self.pending.extend(claims.chain(batch.leases.into_iter().map(|l| Call::new(What::Lease(l)))));
    }

    /// Whether the cluster's map should be read without waiting for a
    /// call: it may be out of date, or could not be read.
    pub fn wants_map(&self) -> bool {
        matches!(&self.topology, Topology::Cluster(c) if c.stale || c.unmapped.is_some())
    }

    /// Takes the outcomes of one node's pipeline: answers, and calls to
    /// send elsewhere.
    pub fn done(&mut self, node: &Arc<str>, outcomes: Vec<(Call, NodeOutcome)>, answers: &mut StoreAnswers) {
        let mut failed = None;
        for (mut call, outcome) in outcomes {
            let redirect = match outcome {
                NodeOutcome::Answer(value) => {
                    answer(call, node, Ok(value), answers);
                    continue;
                }
                NodeOutcome::Failed(why) => {
                    answer(call, node, Err(why.clone()), answers);
                    failed = Some(why);
                    continue;
                }
                NodeOutcome::Moved { slot, node: to } => {
                    if let Topology::Cluster(c) = &mut self.topology {
                        c.map.get_or_insert_with(SlotMap::empty).moved(slot, &to);
                        c.stale = true;
                    }
                    call.ask = None;
                    to
                }
                NodeOutcome::Ask { node: to } => {
                    call.ask = Some(to.as_str().into());
                    to
                }
            };
            call.redirects += 1;
            if call.redirects > MAX_REDIRECTS {
                answer(
                    call,
                    node,
                    Err(format!("redirected more than {MAX_REDIRECTS} times, last to {redirect}")),
                    answers,
                );
            } else {
                self.pending.push(call);
            }
        }
        self.health(node, failed.map_or(Ok(()), Err), answers);
    }

    /// Notes how `node` is; reports a change.
    pub fn health(&mut self, node: &Arc<str>, health: Result<(), String>, answers: &mut StoreAnswers) {
        if !self.nodes.contains_key(node) {
            // It left the map: what its thread still says of it is moot.
            return;
        }
        let changed = match &health {
            Ok(()) => self.failing.remove(node).is_some(),
            Err(why) => {
                if let Topology::Cluster(c) = &mut self.topology {
                    // A failover or a node's restart may have moved slots.
                    c.stale = true;
                }
                self.failing.insert(node.clone(), why.clone()).as_ref() != Some(why)
            }
        };
        if changed {
            answers.claims.push(report(NODE_REPORT, node, health));
        }
    }

    /// Sends every pending call to its node, starting a read of the
    /// cluster's map when it is due. Before the first map, calls wait for
    /// the read under way.
    pub fn route(&mut self, answers: &mut StoreAnswers) {
        if self.map_due() {
            self.read_map(answers);
        }
        if matches!(&self.topology, Topology::Cluster(c) if c.map.is_none() && c.reading) {
            return;
        }
        let mut by_node: HashMap<Arc<str>, Vec<Call>> = HashMap::new();
        for call in std::mem::take(&mut self.pending) {
            match self.node_for(&call) {
                Ok(node) => by_node.entry(node).or_default().push(call),
                Err(why) => answer(call, &CLUSTER.into(), Err(why), answers),
            }
        }
        for (node, calls) in by_node {
            if let Err((calls, why)) = self.send(&node, calls) {
                for call in calls {
                    answer(call, &node, Err(why.clone()), answers);
                }
            }
        }
    }

    /// Ends every node's thread, after its current pipeline, and the map's
    /// reader after its read.
    pub fn stop(self) {
        let reader = match self.topology {
            Topology::Cluster(c) => c.reader.stop(),
            Topology::Single { .. } => None,
        };
        let threads = self.nodes.into_values().map(NodeLink::close).chain(self.closed).chain(reader);
        for t in threads.collect::<Vec<_>>() {
            let _ = t.join();
        }
    }

    fn map_due(&self) -> bool {
        let Topology::Cluster(c) = &self.topology else { return false };
        let due = c.read_at.is_none_or(|at| at.elapsed() >= Duration::from_nanos(RETRY_DOWN));
        !c.reading && due && (c.stale || c.map.is_none())
    }

    fn node_for(&self, call: &Call) -> Result<Arc<str>, String> {
        if let Some(node) = &call.ask {
            return Ok(node.clone());
        }
        match &self.topology {
            Topology::Single { node, .. } => Ok(node.clone()),
            Topology::Cluster(c) => {
                let Some(map) = &c.map else {
                    return Err(c.unmapped.clone().unwrap_or_else(|| "the cluster's map is not read yet".into()));
                };
                let slot = slot_of(call.key().as_bytes());
                map.owner(slot).cloned().ok_or_else(|| format!("no master holds slot {slot}"))
            }
        }
    }

    fn url_of(&self, node: &str) -> String {
        match &self.topology {
            Topology::Single { url, .. } => url.clone(),
            Topology::Cluster(_) => format!("redis://{node}"),
        }
    }

    /// Hands `calls` to `node`'s thread, started on first use.
    fn send(&mut self, node: &Arc<str>, calls: Vec<Call>) -> Result<(), (Vec<Call>, String)> {
        if !self.nodes.contains_key(node) {
            let url = self.url_of(node);
            match NodeLink::start(node.clone(), url, self.settings, self.events.clone()) {
                Ok(link) => _ = self.nodes.insert(node.clone(), link),
                Err(e) => return Err((calls, format!("starting the node's thread: {e}"))),
            }
        }
        let link = &self.nodes[node];
        link.send(calls).map_err(|calls| (calls, "the node's thread is gone".to_owned()))
    }

    /// Starts a read of the cluster's map, nodes that fail or were slow
    /// asked last (see `read_first`); its answer comes to `mapped`.
    fn read_map(&mut self, answers: &mut StoreAnswers) {
        let Topology::Cluster(c) = &mut self.topology else { return };
        c.read_at = Some(Instant::now());
        let known = c.map.as_ref().map(SlotMap::masters).unwrap_or_default();
        let mut candidates: Vec<Arc<str>> = known.iter().chain(&c.seeds).cloned().collect();
        candidates.sort_by_key(|n| (self.failing.contains_key(n), c.slow.contains(n)));
        c.reading = true;
        if let Some(read) = c.reader.read(unique(candidates), self.settings) {
            self.mapped(read, answers);
        }
    }

    /// Takes what a read of the cluster's map found: a new map (nodes that
    /// left it reported gone), or why none could be read. A map in hand
    /// is kept until a new one is read.
    pub fn mapped(&mut self, read: MapRead, answers: &mut StoreAnswers) {
        let Topology::Cluster(c) = &mut self.topology else { return };
        c.reading = false;
        let why = match read {
            MapRead::Read(map) => {
                let known = c.map.as_ref().map(SlotMap::masters).unwrap_or_default();
                let masters = map.masters();
                for gone in known.iter().filter(|n| !masters.contains(n)) {
                    self.failing.remove(gone);
                    if let Some(link) = self.nodes.remove(gone) {
                        self.closed.push(link.close());
                    }
                    answers.claims.push(report(NODE_GONE, gone, Ok(())));
                }
                if c.unmapped.take().is_some() {
                    answers.claims.push(report(NODE_GONE, &CLUSTER.into(), Ok(())));
                }
                c.map = Some(map);
                c.stale = false;
                c.slow.clear();
                return;
            }
            MapRead::Failed { why, slow } => {
                if let Some(node) = slow {
                    c.slow.retain(|n| *n != node);
                    c.slow.push(node);
                }
                why
            }
        };
        if c.map.is_some() {
            return;
        }
        if c.unmapped.as_ref() != Some(&why) {
            answers.claims.push(report(NODE_REPORT, &CLUSTER.into(), Err(why.clone())));
        }
        c.unmapped = Some(why);
    }
}

/// Reads the cluster's map from the first of `candidates` that answers; it
/// waits for at most one node that does not answer in time.
fn read_first(candidates: &[Arc<str>], settings: StoreCallSettings) -> MapRead {
    let mut why = String::from("no node to ask");
    for node in candidates {
        match read_slots(node, settings) {
            Ok(map) => return MapRead::Read(map),
            Err((e, timed_out)) => {
                why = format!("reading the cluster's map from {node}: {e}");
                if timed_out {
                    return MapRead::Failed { why, slow: Some(node.clone()) };
                }
            }
        }
    }
    MapRead::Failed { why, slow: None }
}

/// `nodes` without repeats, in their order.
fn unique(nodes: Vec<Arc<str>>) -> Vec<Arc<str>> {
    let mut seen = Vec::with_capacity(nodes.len());
    for n in nodes {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    seen
}

/// `CLUSTER SLOTS` from `node`, or why not and whether it timed out.
fn read_slots(node: &str, settings: StoreCallSettings) -> Result<SlotMap, (String, bool)> {
    let failed = |e: redis::RedisError| (e.to_string(), e.is_timeout());
    let mut conn = node::connect(&format!("redis://{node}"), settings).map_err(failed)?;
    let value: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).map_err(failed)?;
    SlotMap::parse(&value, node).map_err(|why| (why, false))
}

/// `HOST:PORT` of a `redis://[user:password@]HOST:PORT[/DB]` URL.
fn node_of_url(url: &str) -> &str {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest)
}

/// A report of `node`'s health, as an answer to no claim.
fn report(id: u64, node: &Arc<str>, health: Result<(), String>) -> Claimed {
    let nothing = Grant { got: 0, valid_us: 0, left: 0, retry_us: 0, debt: 0 };
    Claimed { id, node: node.clone(), grant: health.map(|()| nothing) }
}

/// The answer to `call` from `node`: the script's value, or why it failed.
fn answer(call: Call, node: &Arc<str>, result: Result<redis::Value, String>, answers: &mut StoreAnswers) {
    match call.what {
        What::Claim(c) => {
            answers.claims.push(Claimed { id: c.id, node: node.clone(), grant: result.and_then(grant_of) })
        }
        What::Lease(l) => {
            let result = result.map_err(|why| format!("the store failed: {node}: {why}")).and_then(lease_of);
            answers.leases.push(LeaseAnswer { id: l.id, result });
        }
    }
}

/// A lease script's answer `{state, left_us, capacity, free}`.
fn lease_of(value: redis::Value) -> Result<StoreLease, String> {
    let numbers: Vec<i64> = redis::from_redis_value(value).map_err(|e| format!("the store's answer: {e}"))?;
    StoreLease::from_numbers(&numbers)
}

/// A script's answer `{got, valid_us, left, retry_us, debt}` as a grant.
fn grant_of(value: redis::Value) -> Result<Grant, String> {
    let numbers: Vec<i64> = redis::from_redis_value(value).map_err(|e| format!("the store's answer: {e}"))?;
    let [got, valid_us, left, retry_us, debt] = numbers[..] else {
        return Err(format!("the store's answer has {} numbers, not 5", numbers.len()));
    };
    let n = |x: i64| u64::try_from(x).unwrap_or(0);
    Ok(Grant {
        got: u32::try_from(n(got)).unwrap_or(u32::MAX),
        valid_us: n(valid_us),
        left: u32::try_from(n(left)).unwrap_or(u32::MAX),
        retry_us: n(retry_us),
        debt: u32::try_from(n(debt)).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::claims::{ClaimAsk, ClaimTerms};
    use crate::core::{Limit, Locker, Quota, DEFAULT_LIMIT};

    fn claim(id: u64) -> Call {
        let locker = Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(10, 1.0).unwrap()).unwrap(), vec![], 10);
        let limit = locker.find(None).unwrap();
        let terms = ClaimTerms::Fixed { max: 10, slot_us: 1_000_000 };
        Call::new(What::Claim(ClaimAsk { id, limit, name: "l".into(), key: "k".into(), want: 1, terms, force: false }))
    }

    #[test]
    fn outcomes_become_answers_named_by_their_node_and_a_change_of_health_is_reported_once() {
        let (events, _inbox) = std::sync::mpsc::channel();
        let settings = StoreCallSettings { timeout: Duration::from_millis(50), replicas: 0 };
        let url = "redis://127.0.0.1:1";
        let mut d = Dispatcher::new(&StoreSpec::Single(url.into()), settings, events.clone());
        let node: Arc<str> = "127.0.0.1:1".into();
        // A node's thread does nothing until it gets calls.
        d.nodes.insert(node.clone(), NodeLink::start(node.clone(), url.into(), settings, events).unwrap());
        let grant = redis::Value::Array([1, 1_000, 9, 0, 0].map(redis::Value::Int).to_vec());
        let mut answers = StoreAnswers::default();
        let outcomes = vec![
            (claim(1), NodeOutcome::Answer(grant)),
            (claim(2), NodeOutcome::Failed("timed out".into())),
            (claim(3), NodeOutcome::Moved { slot: 5, node: "127.0.0.1:2".into() }),
        ];
        d.done(&node, outcomes, &mut answers);
        let got: Vec<_> = answers.claims.iter().map(|c| (c.id, &*c.node, c.grant.as_ref().map(|g| g.got))).collect();
        let why = Err(&"timed out".to_owned());
        assert_eq!(got, [(1, "127.0.0.1:1", Ok(1)), (2, "127.0.0.1:1", why), (NODE_REPORT, "127.0.0.1:1", why)]);
        assert_eq!((d.pending.len(), d.pending[0].redirects), (1, 1), "the moved call is sent again");
        let mut again = StoreAnswers::default();
        d.done(&node, vec![(claim(4), NodeOutcome::Failed("timed out".into()))], &mut again);
        assert_eq!(again.claims.len(), 1, "the same failure is not reported twice");
        let mut back = StoreAnswers::default();
        d.health(&node, Ok(()), &mut back);
        assert_eq!((back.claims[0].id, back.claims[0].grant.is_ok()), (NODE_REPORT, true), "back: reported");
        d.stop();
    }

    #[test]
    fn calls_wait_for_the_first_map_which_is_read_off_the_dispatchers_thread() {
        let (events, inbox) = std::sync::mpsc::channel();
        let settings = StoreCallSettings { timeout: Duration::from_millis(500), replicas: 0 };
        let spec = StoreSpec::Cluster(vec!["redis://127.0.0.1:1".into()]);
        let mut d = Dispatcher::new(&spec, settings, events);
        d.pending.push(claim(1));
        let mut answers = StoreAnswers::default();
        d.route(&mut answers);
        assert!(answers.is_empty() && d.pending.len() == 1, "the call waits for the map being read");
        assert!(!d.map_due(), "one read at a time");
        let Ok(Event::Map(read)) = inbox.recv_timeout(Duration::from_secs(10)) else { panic!("the map's read") };
        d.mapped(read, &mut answers);
        d.route(&mut answers);
        let got: Vec<_> = answers.claims.iter().map(|c| (c.id, c.grant.as_ref().err().cloned())).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        let why = got[0].1.clone().expect("the cluster's failure");
        assert!(why.starts_with("reading the cluster's map from 127.0.0.1:1"), "{why}");
        assert_eq!(got, [(NODE_REPORT, Some(why.clone())), (1, Some(why))], "reported, and the call answered");
        d.stop();
    }

    #[test]
    fn a_urls_node_is_its_host_and_port() {
        assert_eq!(node_of_url("redis://127.0.0.1:6379"), "127.0.0.1:6379");
        assert_eq!(node_of_url("redis://user:secret@10.0.0.1:7000/2"), "10.0.0.1:7000");
    }
}
