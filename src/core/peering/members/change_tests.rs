//! A member set changed by reloads (`Peering::set_peers`), on a small
//! simulated group: heartbeats every 50 ms carry each member's set, its
//! settling and its echoes to every locker that lists it. For each slot,
//! each locker may grant at most the most initial permits it owned of that
//! slot at any instant (what it owned only ever falls within a slot: see
//! `peering::members`), so the sum of those over the lockers bounds the
//! go of the slot. It must never pass the limit, whatever the order of
//! the steps, and once every member agrees the new set owns whole slots.

use std::collections::BTreeMap;

use crate::core::limit::Quota;
use crate::core::peering::tenure::Said;
use crate::core::peering::{Beat, NodeKey, Peering, PeeringSettings};
use crate::core::share::{PeerView, Share};
use crate::core::time::{Nanos, NANOS_PER_MS};

use super::MemberSet;

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_000_000 * MS;
const STEP: Nanos = 50 * MS;

fn quota() -> Quota {
    Quota::new(99, 1.0).unwrap()
}

/// One locker of the simulated group, named by its id, which is also the
/// endpoint its peers list.
struct Member {
    id: &'static str,
    peering: Peering,
    running: bool,
}

struct Group {
    members: Vec<Member>,
    now: Nanos,
    /// The most initial permits each locker owned of each slot, by slot.
    owned: BTreeMap<u64, BTreeMap<&'static str, u32>>,
}

fn share_of(v: PeerView) -> Share {
    let PeerView { live, members, member, owns_from, resumes, holding, .. } = v;
    Share { live, members, member, owns_from, resumes, holding, ..Share::ALONE }
}

impl Group {
    fn new(lists: &[(&'static str, &[&'static str])]) -> Group {
        let mut g = Group { members: Vec::new(), now: T0, owned: BTreeMap::new() };
        for (id, peers) in lists {
            g.start(id, peers);
        }
        g
    }

    /// Starts locker `id` listing `peers`; it joins once each peer has
    /// sent its counts (a snapshot with its first heartbeat), so a new run
    /// of a new id owns its share of the slot it joins in.
    fn start(&mut self, id: &'static str, peers: &[&'static str]) {
        let me = NodeKey { id: id.into(), incarnation: self.now };
        let names = peers.iter().map(|&p| p.into()).collect();
        let settings = PeeringSettings::new(me, names, 5000 * MS, quota().slot_ns());
        self.members.push(Member { id, peering: Peering::new(settings, self.now), running: true });
    }

    fn member(&mut self, id: &str) -> &mut Member {
        self.members.iter_mut().find(|m| m.id == id).expect("a member")
    }

    /// Reloads locker `id` with `peers` (SIGHUP on an edited config).
    fn reload(&mut self, id: &str, peers: &[&'static str]) {
        let now = self.now;
        let names = peers.iter().map(|&p| p.into()).collect();
        assert!(self.member(id).peering.set_peers(now, names));
    }

    fn stop(&mut self, id: &str) {
        self.member(id).running = false;
    }

    /// Runs for `span`: a heartbeat round every step, and each locker's
    /// ownership of the slot under way noted.
    fn run(&mut self, span: Nanos) {
        let end = self.now + span;
        while self.now < end {
            self.beat();
            self.note();
            self.now += STEP;
        }
    }

    /// Every running locker's heartbeat, heard by every running locker
    /// that lists it.
    fn beat(&mut self) {
        let now = self.now;
        let said: Vec<_> = self
            .members
            .iter_mut()
            .filter(|m| m.running)
            .map(|m| {
                let echoes = m.peering.echoes(now);
                let set = MemberSet::of(m.peering.nodes());
                (m.id, m.peering.nodes().me().clone(), set, m.peering.members().settling(), echoes)
            })
            .collect();
        for x in self.members.iter_mut().filter(|m| m.running) {
            for (id, key, set, settling, echoes) in &said {
                let p = &mut x.peering;
                let Some(ix) = p.settings().peers.iter().position(|name| **name == **id) else { continue };
                if !p.on_heartbeat(now, ix, key, Beat { sent_at: now, joining: false, reported: Some(0), up: None }) {
                    continue;
                }
                if p.is_joining() {
                    p.on_snapshot_done(now, ix, key);
                }
                let echo = echoes.iter().find(|(e, _)| **e == *x.id).map(|&(_, at)| at);
                p.on_tenure(now, ix, Said { at: now, echo, dead: &[], holds: &[] });
                p.on_members(now, ix, key, Some(*set), *settling);
            }
        }
    }

    fn note(&mut self) {
        let (now, quota) = (self.now, quota());
        let slot = quota.slot_of(now);
        for m in self.members.iter_mut().filter(|m| m.running) {
            let owns = share_of(m.peering.view(now)).owns(quota, slot);
            let most = self.owned.entry(slot).or_default().entry(m.id).or_insert(0);
            *most = (*most).max(owns);
        }
    }

    /// The bound on each slot's go: what the lockers owned of it at most.
    fn slots(&self) -> Vec<(u64, u32)> {
        self.owned.iter().map(|(&slot, each)| (slot, each.values().sum())).collect()
    }

    fn assert_never_over(&self, case: &str) {
        for (slot, owned) in self.slots() {
            assert!(owned <= 99, "{case}: slot {slot} owned {owned} of 99: {:?}", self.owned[&slot]);
        }
    }

    /// The last slot noted: the new group owns it whole, each its share.
    fn assert_serves(&self, case: &str, ids: &[&str]) {
        let (slot, each) = self.owned.iter().next_back().expect("slots");
        assert_eq!(each.values().sum::<u32>(), 99, "{case}: slot {slot} whole again: {each:?}");
        let owners: Vec<&str> = each.iter().filter(|(_, &n)| n > 0).map(|(&id, _)| id).collect();
        assert_eq!(owners, ids, "{case}: the new set's members own it");
    }
}

fn trio() -> Group {
    let mut g = Group::new(&[("a", &["b", "c"]), ("b", &["a", "c"]), ("c", &["a", "b"])]);
    g.run(3000 * MS); // joined, leased
    assert_eq!(g.slots().last().map(|s| s.1), Some(99), "the trio owns whole slots");
    g
}

#[test]
fn adding_a_member_started_first_never_owns_a_slot_twice() {
    let mut g = trio();
    g.run(420 * MS);
    g.start("d", &["a", "b", "c"]);
    g.run(300 * MS);
    for id in ["a", "b", "c"] {
        let peers: Vec<&'static str> = ["a", "b", "c", "d"].into_iter().filter(|p| *p != id).collect();
        g.reload(id, &peers);
        g.run(350 * MS);
    }
    g.run(3000 * MS);
    g.assert_never_over("d first");
    g.assert_serves("d first", &["a", "b", "c", "d"]);
}

#[test]
fn adding_a_member_started_last_never_owns_a_slot_twice() {
    // The new member joins a group that already names it: without the
    // others' settling it would own its quarter of the slot it joins in,
    // which the trio's thirds already hold.
    let mut g = trio();
    g.run(120 * MS);
    for id in ["a", "b", "c"] {
        let peers: Vec<&'static str> = ["a", "b", "c", "d"].into_iter().filter(|p| *p != id).collect();
        g.reload(id, &peers);
        g.run(100 * MS);
    }
    g.start("d", &["a", "b", "c"]);
    g.run(3000 * MS);
    g.assert_never_over("d last");
    g.assert_serves("d last", &["a", "b", "c", "d"]);
}

#[test]
fn removing_a_stopped_member_never_owns_a_slot_twice() {
    let mut g = Group::new(&[
        ("a", &["b", "c", "d"]),
        ("b", &["a", "c", "d"]),
        ("c", &["a", "b", "d"]),
        ("d", &["a", "b", "c"]),
    ]);
    g.run(3000 * MS);
    assert_eq!(g.slots().last().map(|s| s.1), Some(99));
    g.run(270 * MS);
    g.stop("d");
    g.run(200 * MS);
    for id in ["a", "b", "c"] {
        let peers: Vec<&'static str> = ["a", "b", "c"].into_iter().filter(|p| *p != id).collect();
        g.reload(id, &peers);
        g.run(250 * MS);
    }
    g.run(3000 * MS);
    g.assert_never_over("d removed");
    g.assert_serves("d removed", &["a", "b", "c"]);
}

#[test]
fn a_reloaded_locker_owns_nothing_of_the_slot_under_way_and_waits_for_every_peer() {
    let mut g = trio();
    g.run(420 * MS);
    let slot = quota().slot_of(g.now);
    g.reload("a", &["b", "c", "d"]);
    let now = g.now;
    let a = &mut g.member("a").peering;
    assert!(a.members().settling() && a.members().refuses());
    assert_eq!(share_of(a.view(now)).owns(quota(), slot), 0, "none of the slot under way");
    g.run(2000 * MS);
    let now = g.now;
    let a = &mut g.member("a").peering;
    assert!(a.members().settling(), "d never stated the set: a waits for it");
    assert_eq!(share_of(a.view(now)).owns(quota(), quota().slot_of(now) + 1), 0, "nor of the next");
    g.assert_never_over("a alone reloaded");
}
