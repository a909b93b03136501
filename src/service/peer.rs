//! The peer side of the seam: peer messages in (`on_peer`), the pause a
//! frozen loop reports (`on_pause`), and peer messages out (`publish`),
//! each as bytes, given `now`. The bounds on what a peer may say are
//! checked here, before the core merges a count; the sharing itself is
//! `core::peering`'s. No clock, no socket: the daemon loop brings both.

use crate::core::peering::members::MemberSet;
use crate::core::peering::nodes::shown;
use crate::core::peering::schedule::REPAIR_BUDGET;
use crate::core::peering::tenure::Said;
use crate::core::peering::Beat;
use crate::core::{Count, Counted, Locker, Nanos, NodeKey, Nodes, Outgoing, PeerIx, Peering};
use crate::state::{Keep, Record};
use crate::wire::{
    self, PeerAbout, PeerBeat, PeerCount, PeerCounts, PeerEcho, PeerGift, PeerKind, PeerLimit, PeerMembers, PeerMsg,
    PeerNode, PeerSeen, PeerSnapshotPart, PeerTenure, MAX_COUNTS_PER_MESSAGE,
};

/// What a peer message did: whether it was understood, and whether it
/// created a limit (a plain body of its name chose the default until now).
pub(super) struct MessageHeard {
    pub(super) understood: bool,
    pub(super) created: bool,
}

/// Takes in one message from configured peer `peer` (numbered as in the
/// settings), received at `now`, into `locker` and its peering `p`. A
/// message that cannot be decoded is dropped: peers cannot be answered,
/// and the next cumulative count repairs whatever it carried. While
/// grants are `refusing`, wants go unanswered (see below).
///
/// What a peer may say is bounded: counts only for limits it defines as
/// this locker does, none above what one locker can grant in a slot,
/// and node ids only as many as its room in the node table (see
/// `core::peering::nodes`); the rest is refused and counted.
pub(super) fn on_peer(
    locker: &mut Locker,
    p: &mut Peering,
    refusing: bool,
    now: Nanos,
    peer: PeerIx,
    body: &[u8],
) -> MessageHeard {
    let mut heard_as = MessageHeard { understood: false, created: false };
    let Ok(msg) = wire::decode_peer(body) else { return heard_as };
    // Offsets are measured against the group clock as read, not as
    // held still after a move back.
    let (reading, now) = (p.clock().reading(now), p.group_now(now));
    if peer >= p.nodes().configured() {
        return heard_as;
    }
    let sender = node_key(msg.sender());
    heard_as.understood = true;
    let heard = match &msg {
        PeerMsg::Beat(beat) => {
            let reported = reported_of(&beat.about, p.nodes());
            let heard = p.on_heartbeat(
                reading,
                peer,
                &sender,
                Beat { sent_at: beat.at, joining: beat.joining, reported, up: beat.up },
            );
            if heard {
                let PeerTenure { echo, dead, holds, dead_runs } = &beat.tenure;
                let me = &p.nodes().me().id;
                let echo = echo.iter().find(|e| *e.0 == **me).map(|e| e.1);
                // An older locker names the members only: any run of each.
                let ids: Vec<(String, u64)>;
                let dead = if dead_runs.is_empty() && !dead.is_empty() {
                    ids = dead.iter().map(|id| (id.clone(), 0)).collect();
                    &ids
                } else {
                    dead_runs
                };
                p.on_tenure(now, peer, Said { at: beat.at, echo, dead, holds });
            }
            heard
        }
        PeerMsg::Snapshot(PeerSnapshotPart { part, about, .. }) => {
            let heard = p.on_message(now, peer, &sender);
            if heard {
                p.on_clock(reading, peer, part.at, reported_of(about, p.nodes()));
            }
            heard
        }
        PeerMsg::Counts(_) => p.on_message(now, peer, &sender),
    };
    if !heard {
        let named = p.nodes().peers().nth(peer).and_then(|(_, s)| s.named.as_deref().map(shown));
        p.refuse(now, peer, || match named {
            Some(id) if *id != *sender.id => {
                format!("a message sent as {:?}, not as {id:?}, the id the peer list names", shown(&sender.id))
            }
            _ => format!("a message sent as {:?}", shown(&sender.id)),
        });
        return heard_as;
    }
    if let Some(about) = msg.about() {
        heard_as.created = on_about(locker, p, now, peer, &sender, about);
    }
    if let Some(part) = msg.counts() {
        on_counts(locker, p, refusing, now, peer, part);
    }
    if let PeerMsg::Snapshot(PeerSnapshotPart { part, done: true, .. }) = &msg {
        // The runs the peer knows: this locker's earlier one among them
        // means it may have granted in this slot (see `Peering::update`).
        for key in part.nodes.iter().skip(1).map(node_key) {
            let _ = p.nodes_mut().resolve(now, peer, &key);
        }
        p.on_snapshot_done(now, peer, &sender);
    }
    locker.sharing().set_view(p.view(now));
    heard_as
}

/// Takes in what a heartbeat or snapshot part from `peer` says of its
/// `sender`: its member set, the limits it created from asks' terms (true
/// when one was created here too), and how it defines each limit.
fn on_about(
    locker: &mut Locker,
    p: &mut Peering,
    now: Nanos,
    peer: PeerIx,
    sender: &NodeKey,
    about: &PeerAbout,
) -> bool {
    let members = about.members.map(|PeerMembers(members, digest)| MemberSet { members, digest });
    p.on_members(now, peer, sender, members, about.settling);
    let created = super::runtime::learn(locker, p, now, peer, &about.terms);
    for PeerLimit(name, digest) in &about.limits {
        if let Ok(id) = locker.find(Some(name)) {
            p.on_limit(peer, id, locker.limit(id).digest() == *digest, || name.clone());
        }
    }
    created
}

/// Merges the counts, wants and gifts of a message from `peer`. A want is
/// answered with a gift, which must be recorded before it leaves: while
/// the state file has no room (`refusing`), wants go unanswered.
fn on_counts(locker: &mut Locker, p: &mut Peering, refusing: bool, now: Nanos, peer: PeerIx, part: &PeerCounts) {
    let counts = part.counts.iter().map(|c| (c, Counted::Granted));
    let wanted = if refusing { &[][..] } else { &part.wanted[..] };
    for (c, what) in counts.chain(wanted.iter().map(|c| (c, Counted::Wanted))) {
        if let Some(count) = accept(locker, p, now, peer, &part.nodes, c, what) {
            locker.sharing().merge(now, &count);
        }
    }
    for PeerGift(name, key, slot, from, to, n) in &part.gave {
        let Some(to) = part.nodes.get(*to as usize).map(node_key) else { continue };
        let Some(to) = p.nodes_mut().resolve(now, peer, &to) else { continue };
        let c = PeerCount(name.clone(), key.clone(), *slot, *from, *n);
        if let Some(count) = accept(locker, p, now, peer, &part.nodes, &c, Counted::Gave(to)) {
            locker.sharing().merge(now, &count);
        }
    }
}

/// See `Note::Paused`.
pub(super) fn on_pause(locker: &mut Locker, p: &mut Peering, now: Nanos, paused: Nanos) {
    let now = p.group_now(now);
    p.on_pause(now, paused);
    locker.sharing().set_view(p.view(now));
}

/// Hands every peer message due at `now` to `send`, encoded: the counts
/// of grants since the last call, then heartbeats, repairs and snapshots
/// as the peering schedule asks. Hands `keep` first every ledger of
/// conserved permits that changed, so that a gift is recorded before it
/// leaves; says why grants must be refused when `keep` has no room left.
pub(super) fn publish(
    locker: &mut Locker,
    p: &mut Peering,
    now: Nanos,
    keep: &mut impl Keep,
    mut send: impl FnMut(&[u8]),
) -> Option<&'static str> {
    // A heartbeat says what the group clock reads, not where it holds
    // still after a move back, so that peers measure this clock right.
    let (reading, now) = (p.clock().reading(now), p.group_now(now));
    let full = keep_ledgers(locker, now, keep).err();
    let mut counts: Vec<Count> = locker.sharing().take_exchanged().collect();
    // Most turns moved no permits: nothing to build a message for.
    if !counts.is_empty() {
        send_counts(locker, p, PeerKind::Counts, now, &counts, &mut send);
    }
    while let Some(out) = p.poll_transmit(now) {
        counts.clear();
        let kind = match out {
            Outgoing::Heartbeat { joining } => {
                let tenure = tenure_of(p, now);
                let (sender, about, up) = (me(p.nodes()), about(locker, p), Some(p.up(now)));
                let beat = PeerBeat { sender, at: reading, joining, about, tenure, up };
                let mut body = Vec::new();
                wire::encode(&PeerMsg::Beat(beat), &mut body);
                send(&body);
                continue;
            }
            Outgoing::Repair => {
                locker.sharing().drain_touched(now, REPAIR_BUDGET, |c| counts.push(c));
                PeerKind::Counts
            }
            Outgoing::Snapshot => {
                locker.sharing().snapshot(now, |c| counts.push(c));
                PeerKind::Snapshot
            }
        };
        // A snapshot's time measures this clock, like a heartbeat's.
        let at = if kind == PeerKind::Snapshot { reading } else { now };
        send_counts(locker, p, kind, at, &counts, &mut send);
    }
    full
}

/// Hands `keep` the ledger of every key whose gifts changed (see
/// `Sharing::take_ledgers`), at `now` by the group clock.
fn keep_ledgers(locker: &mut Locker, now: Nanos, keep: &mut impl Keep) -> Result<(), &'static str> {
    let mut touched: Vec<_> = locker.sharing().take_ledgers().collect();
    let Some(run) = keep.run() else { return Ok(()) };
    touched.sort_unstable();
    touched.dedup();
    for (id, key) in &touched {
        let key = key.as_deref();
        let limit = id.index() as u32;
        locker
            .keeping()
            .kept_exchange(now, *id, key, |kept| keep.keep(&Record::Count { at: now, run, limit, key, kept }));
    }
    if touched.is_empty() {
        return Ok(());
    }
    // What room there is for the next calls' records: a gift is rare, and
    // the headroom kept for one request covers a message of them. Without
    // room, grants are refused and wants go unanswered (see `on_peer`).
    keep.make_room(now)
}

/// Sends `counts` as messages of `kind`; a snapshot is sent even when
/// empty, since its `done` part is what a joining peer waits for.
fn send_counts(
    locker: &Locker,
    p: &Peering,
    kind: PeerKind,
    now: Nanos,
    counts: &[Count],
    send: &mut impl FnMut(&[u8]),
) {
    let mut batch = Batch::new(locker, p, kind, now);
    for c in counts {
        batch.push(c, send);
    }
    batch.finish(send);
}

/// Turns a count from `peer` into the core's terms, or `None` when it is
/// not merged: a limit this locker does not have (or a semaphore, whose
/// counts `merge` ignores), a limit the peer defines differently, a count
/// above what one locker can grant in a slot, or a node the message does
/// not list or the peer has no room for. Refusals are counted. What a node
/// wanted (`Counted::Wanted`) may exceed a slot's capacity and is not held
/// to it; a gift is, like a grant.
fn accept(
    locker: &Locker,
    p: &mut Peering,
    now: Nanos,
    peer: PeerIx,
    nodes: &[PeerNode],
    c: &PeerCount,
    what: Counted,
) -> Option<Count> {
    let PeerCount(name, key, slot, node, count) = c;
    let limit = locker.find(Some(name)).ok()?;
    if !p.accepts(peer, limit) {
        return None; // flagged and logged once, when the digest was heard
    }
    let most = locker.limit(limit).most_per_slot();
    if what != Counted::Wanted && *count > most {
        p.refuse(now, peer, || format!("a count of {count} for limit {name:?}, above the {most} one locker can grant"));
        return None;
    }
    let Some(node) = nodes.get(*node as usize).map(node_key) else {
        p.refuse(now, peer, || "a count naming no node".into());
        return None;
    };
    let Some(node) = p.nodes_mut().resolve(now, peer, &node) else {
        p.refuse(now, peer, || format!("node id {:?}: more runs than one peer may name", shown(&node.id)));
        return None;
    };
    Some(Count { limit, key: key.as_deref().map(Into::into), slot: *slot, node, count: *count, what })
}

fn node_key(n: &PeerNode) -> NodeKey {
    NodeKey { id: n.0.as_str().into(), incarnation: n.1 }
}

/// This locker's run, as its messages name their sender.
fn me(table: &Nodes) -> PeerNode {
    let me = table.me();
    PeerNode(me.id.to_string(), me.incarnation)
}

/// What heartbeats and snapshot parts say of this locker: how each limit
/// is defined, so a peer merges the counts that come with them only when
/// it agrees; the terms of the limits created from asks' terms here; how
/// it sees each peer's clock (see `core::peering::clock`); the member set
/// it shares by, and whether it is settling on a new one (see
/// `core::peering::members`).
fn about(locker: &Locker, p: &Peering) -> PeerAbout {
    let table = p.nodes();
    let MemberSet { members, digest } = MemberSet::of(table);
    PeerAbout {
        limits: locker.figures().shared_digests().map(|(name, d)| PeerLimit(name.to_owned(), d)).collect(),
        terms: locker.figures().taught_terms().map(super::runtime::peer_terms).collect(),
        seen: seen(table),
        members: Some(PeerMembers(members, digest)),
        settling: p.members().settling(),
    }
}

/// Counts gathered into peer messages of at most `MAX_COUNTS_PER_MESSAGE`:
/// messages of counts, or the parts of a snapshot.
struct Batch<'a> {
    locker: &'a Locker,
    table: &'a Nodes,
    part: PeerCounts,
    /// What a snapshot's parts say of this locker; `None` for counts.
    snapshot: Option<PeerAbout>,
    ixs: Vec<u32>,
    buf: Vec<u8>,
}

impl<'a> Batch<'a> {
    fn new(locker: &'a Locker, p: &'a Peering, kind: PeerKind, now: Nanos) -> Batch<'a> {
        let table = p.nodes();
        let part = PeerCounts::new(me(table), now);
        let snapshot = (kind == PeerKind::Snapshot).then(|| about(locker, p));
        Batch { locker, table, part, snapshot, ixs: vec![Nodes::ME], buf: Vec::new() }
    }

    fn push(&mut self, c: &Count, send: &mut impl FnMut(&[u8])) {
        // A run forgotten since: its count stays here but is not relayed.
        let Some(node) = self.node(c.node) else { return };
        let limit = self.locker.limit(c.limit).name().to_owned();
        let key = c.key.as_deref().map(String::from);
        match c.what {
            Counted::Granted => self.part.counts.push(PeerCount(limit, key, c.slot, node, c.count)),
            Counted::Wanted => self.part.wanted.push(PeerCount(limit, key, c.slot, node, c.count)),
            Counted::Gave(to) => {
                let Some(to) = self.node(to) else { return };
                self.part.gave.push(PeerGift(limit, key, c.slot, node, to, c.count));
            }
        }
        if self.part.len() >= MAX_COUNTS_PER_MESSAGE {
            self.send(false, send);
        }
    }

    /// The place of node `ix` in the message's nodes, listing it if new;
    /// `None` for a run forgotten since.
    fn node(&mut self, ix: u32) -> Option<u32> {
        if let Some(i) = self.ixs.iter().position(|&n| n == ix) {
            return Some(i as u32);
        }
        let key = self.table.key(ix)?;
        self.part.nodes.push(PeerNode(key.id.to_string(), key.incarnation));
        self.ixs.push(ix);
        Some(self.ixs.len() as u32 - 1)
    }

    /// Sends what is left: the `done` part of a snapshot even when nothing
    /// is, since that part is what a joining peer waits for.
    fn finish(mut self, send: &mut impl FnMut(&[u8])) {
        let done = self.snapshot.is_some();
        if done {
            // Every run this locker knows, so that a restarted locker
            // learns that its earlier run was heard (see `Peering::update`).
            for ix in self.table.run_indices() {
                let _ = self.node(ix);
            }
        }
        if done || !self.part.is_empty() {
            self.send(done, send);
        }
    }

    /// Sends the counts gathered as one message, `done` for the last part
    /// of a snapshot, and starts the next.
    fn send(&mut self, done: bool, send: &mut impl FnMut(&[u8])) {
        let next = PeerCounts::new(self.part.nodes[0].clone(), self.part.at);
        let part = std::mem::replace(&mut self.part, next);
        let msg = match self.snapshot.take() {
            Some(about) => PeerMsg::Snapshot(PeerSnapshotPart { part, done, about }),
            None => PeerMsg::Counts(part),
        };
        self.buf.clear();
        wire::encode(&msg, &mut self.buf);
        send(&self.buf);
        if let PeerMsg::Snapshot(PeerSnapshotPart { about, .. }) = msg {
            self.snapshot = Some(about);
        }
        self.ixs.truncate(1);
    }
}

/// What a heartbeat says of tenure (see `core::peering::tenure`), at
/// `now`: the latest heartbeat heard from each peer this locker echoes,
/// the members it declared dead, those whose shares it holds.
fn tenure_of(p: &mut Peering, now: Nanos) -> PeerTenure {
    let echoes = p.echoes(now);
    let tenure = p.tenure();
    if !tenure.applies() {
        return PeerTenure::default();
    }
    PeerTenure {
        echo: echoes.into_iter().map(|(id, at)| PeerEcho(id.into(), at)).collect(),
        dead: tenure.declared().map(|(id, _)| String::from(id)).collect(),
        holds: tenure.held().map(String::from).collect(),
        dead_runs: tenure.declared().map(|(id, run)| (String::from(id), run)).collect(),
    }
}

/// How this locker sees each peer's clock it has heard, for its heartbeat.
fn seen(table: &Nodes) -> Vec<PeerSeen> {
    let heard = table.peers().filter(|(_, s)| s.has_offset()).filter_map(|(_, s)| Some((s.run.as_ref()?, s.offset)));
    heard.map(|(run, offset)| PeerSeen(run.id.to_string(), offset)).collect()
}

/// How a peer message's sender sees this locker's clock, if it says.
fn reported_of(about: &PeerAbout, table: &Nodes) -> Option<i64> {
    let me = &table.me().id;
    about.seen.iter().find(|s| *s.0 == **me).map(|s| s.1)
}
