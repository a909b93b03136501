//! Unit tests of `members`, and of how the schedule gates shares by them.

use super::*;
use crate::core::peering::{Beat, Peering, PeeringSettings};
use crate::core::share::Holding;
use crate::core::time::NANOS_PER_MS;

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_000_000 * MS;

fn node(id: &str, incarnation: u64) -> NodeKey {
    NodeKey { id: id.into(), incarnation }
}

fn table(me: &str, peers: &[&str]) -> Nodes {
    let peers: Vec<Box<str>> = peers.iter().map(|&p| p.into()).collect();
    Nodes::new(node(me, 1), &peers, 250 * MS)
}

/// `me`'s table with each peer heard under its own name as id.
fn heard(me: &str, peers: &[&str]) -> Nodes {
    let mut n = table(me, peers);
    for (ix, id) in peers.iter().enumerate() {
        n.sender(T0, ix, &node(id, 1)).expect("room");
    }
    n
}

#[test]
fn a_set_is_its_count_and_the_digest_of_its_ids_in_any_order() {
    let a = MemberSet::of(&heard("a", &["b", "c"]));
    let c = MemberSet::of(&heard("c", &["b", "a"]));
    assert_eq!(a, c, "the same three, listed in another order by another member");
    assert_eq!(a.members, 3);
    assert!(a.digest.is_some());
    let four = MemberSet::of(&heard("a", &["b", "c", "d"]));
    assert!(!a.agrees(&four) && !four.agrees(&a), "three against four");
    let swapped = MemberSet::of(&heard("a", &["b", "e"]));
    assert!(!a.agrees(&swapped), "as many, but another member");
    assert_ne!(digest_of(vec!["ab", "c"]), digest_of(vec!["a", "bc"]), "ids are not run together");
}

#[test]
fn until_every_id_is_known_only_the_counts_are_compared() {
    let partial = MemberSet::of(&table("a", &["b", "c"]));
    assert_eq!(partial, MemberSet { members: 3, digest: None });
    assert!(partial.agrees(&MemberSet::of(&heard("b", &["a", "x"]))), "ids unknown here");
    assert!(!partial.agrees(&MemberSet::of(&heard("b", &["a", "c", "d"]))));
}

fn peering(peers: &[&str]) -> Peering {
    let peers = peers.iter().map(|&p| p.into()).collect();
    let mut p = Peering::new(PeeringSettings::new(node("a", T0), peers, 1000 * MS, 1000 * MS), T0);
    for (ix, id) in ["b", "c", "d"].iter().enumerate().take(p.nodes().configured()) {
        p.on_heartbeat(T0, ix, &node(id, 1), Beat { sent_at: T0, ..Beat::default() });
    }
    p
}

fn events(p: &mut Peering) -> Vec<PeerEvent> {
    std::iter::from_fn(|| p.poll_event())
        .filter(|e| matches!(e, PeerEvent::MemberSetDiffers { .. } | PeerEvent::MemberSetsAgree))
        .collect()
}

#[test]
fn a_peer_that_states_another_set_stops_every_grant_from_shares_until_it_agrees() {
    let mut p = peering(&["b", "c", "d"]);
    let four = MemberSet::of(p.nodes());
    let three = MemberSet { members: 3, digest: Some(digest_of(vec!["a", "b", "c"])) };
    p.on_members(T0, 0, &node("b", 1), Some(four), false);
    assert!(!p.members().differs());
    assert_eq!(p.view(T0).holding, p.tenure().holding(T0, p.nodes()), "as tenure says");

    let t = T0 + 10 * MS;
    p.on_members(t, 1, &node("c", 1), Some(three), false);
    assert!(p.members().differs() && p.members().peer_differs(1));
    assert_eq!(p.view(t).holding, Holding::NONE, "no share at all, own or inherited");
    let said = || PeerEvent::MemberSetDiffers { peer: "c".into(), id: "c".into(), theirs: 3, ours: 4 };
    assert_eq!(events(&mut p), [said()]);
    p.on_members(t + 100 * MS, 1, &node("c", 1), Some(three), false);
    assert_eq!(events(&mut p), [], "once per change, not per heartbeat");

    let healed = t + 300 * MS;
    p.on_members(healed, 1, &node("c", 1), Some(four), false);
    assert!(!p.members().differs());
    assert_eq!(events(&mut p), [PeerEvent::MemberSetsAgree]);
    let view = p.view(healed);
    assert_eq!(view.holding, p.tenure().holding(healed, p.nodes()), "as tenure says again");
    assert!(view.owns_from >= healed, "none of a slot begun under the old shares");
    assert!(!view.resumes);
}

#[test]
fn an_earlier_runs_set_and_an_older_lockers_silence_stop_nothing() {
    let mut p = peering(&["b", "c"]);
    let two = MemberSet { members: 2, digest: None };
    p.on_members(T0, 0, &node("b", 1), Some(two), false);
    assert!(p.members().differs());
    // b restarts: what its earlier run stated no longer counts.
    p.on_heartbeat(T0 + MS, 0, &node("b", 2), Beat { sent_at: T0, ..Beat::default() });
    p.on_members(T0 + MS, 0, &node("b", 2), None, false);
    assert!(!p.members().differs(), "a locker that states no set is taken to agree");
    p.on_members(T0 + 2 * MS, 1, &node("x", 1), Some(two), false);
    assert!(!p.members().differs(), "only the peer's live run is heard");
}

#[test]
fn the_digest_is_the_same_on_every_build() {
    // The value `tests/golden/peer.json` carries for the members a to d.
    assert_eq!(digest_of(vec!["d", "b", "a", "c"]), 7_348_933_753_843_756_373);
}
