//! Unit tests of `tenure`: leases from a majority's echoes, declaring, and
//! a silent member's share passing to its heir.

use super::*;
use crate::core::peering::nodes::{Beat, NodeKey};

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_000_000 * MS;

fn key(id: &str) -> NodeKey {
    NodeKey { id: id.into(), incarnation: 1 }
}

/// Member `me` of a group whose other members are `peers`, each heard once
/// at `T0`.
fn group(me: &str, peers: &[&str]) -> (Tenure, Nodes) {
    let names: Vec<Box<str>> = peers.iter().map(|&p| p.into()).collect();
    let mut nodes = Nodes::new(key(me), &names, MS);
    for (ix, p) in peers.iter().enumerate() {
        nodes.heartbeat(T0, ix, &key(p), Beat { sent_at: T0, ..Beat::default() });
    }
    let mut tenure = Tenure::new(1 + peers.len(), peers.len());
    tenure.joined(T0, true);
    (tenure, nodes)
}

fn hear(nodes: &mut Nodes, now: Nanos, peer: PeerIx, id: &str) {
    nodes.heartbeat(now, peer, &key(id), Beat { sent_at: now, ..Beat::default() });
}

/// Whether `t` echoes member `id` at `now` (recording no echo).
fn echoes(t: &mut Tenure, nodes: &Nodes, now: Nanos, id: &str) -> bool {
    let peer = nodes.peers().position(|(_, s)| s.run.as_ref().is_some_and(|r| *r.id == *id));
    t.vouch(now, peer.unwrap_or(usize::MAX), id, 0, nodes)
}

fn echo(t: &mut Tenure, nodes: &Nodes, now: Nanos, peer: PeerIx, at: Nanos) {
    t.on_beat(now, peer, Said { echo: Some(at), ..Said::default() }, nodes);
}

#[test]
fn a_lease_needs_a_majority_of_echoes_and_runs_out_a_lease_after_the_echoed_heartbeat() {
    let (mut t, nodes) = group("a", &["b", "c", "d", "e"]);
    assert!(!t.holding(T0, &nodes).leased, "no echo yet");
    echo(&mut t, &nodes, T0 + 10 * MS, 0, T0);
    assert!(!t.holding(T0 + 10 * MS, &nodes).leased, "two of five are no majority");
    echo(&mut t, &nodes, T0 + 20 * MS, 1, T0 + 5 * MS);
    assert!(t.holding(T0 + 20 * MS, &nodes).leased, "three of five");
    assert!(t.holding(T0 + LEASE - 1, &nodes).leased);
    assert!(!t.holding(T0 + LEASE, &nodes).leased, "the older echo ran out");
    echo(&mut t, &nodes, T0 + 30 * MS, 2, T0 + 2 * LEASE);
    assert!(!t.holding(T0 + LEASE, &nodes).leased, "an echo of a time not reached yet is ignored");
}

#[test]
fn two_members_keep_their_own_shares_without_leases() {
    let (mut t, nodes) = group("a", &["b"]);
    assert!(!t.applies());
    assert_eq!(t.holding(T0 + 100 * LEASE, &nodes), Holding::OWN);
    let mut events = VecDeque::new();
    t.tick(T0 + 100 * LEASE, &nodes, &mut events);
    assert!(events.is_empty(), "no one declares, no one reclaims");
}

#[test]
fn a_silent_member_is_declared_only_by_a_leased_locker() {
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    let later = T0 + DECLARE_AFTER + 10 * MS;
    let mut events = VecDeque::new();
    t.tick(later, &nodes, &mut events);
    assert!(events.is_empty(), "without a lease nothing is declared");
    hear(&mut nodes, later, 0, "b");
    echo(&mut t, &nodes, later, 0, later - MS);
    t.tick(later, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Declared { id: "c".into() }));
    assert_eq!(t.declared().collect::<Vec<_>>(), ["c"]);
    assert!(!echoes(&mut t, &nodes, later, "c"), "a declared member is never echoed again");
    assert!(echoes(&mut t, &nodes, later, "b"));
}

#[test]
fn the_heir_takes_a_share_once_a_majority_declared_its_member_and_a_lease_has_surely_run_out() {
    // Members a, b, c by id: a's heir is b, b's is c, c's is a.
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    let now = T0 + DECLARE_AFTER + 10 * MS;
    hear(&mut nodes, now, 0, "b");
    echo(&mut t, &nodes, now, 0, now - MS);
    let mut events = VecDeque::new();
    t.tick(now, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Declared { id: "c".into() }));
    assert!(events.is_empty(), "one declaration of three members is no majority");
    let dead = ["c".to_string()];
    t.on_beat(now + 5 * MS, 0, Said { echo: Some(now), dead: &dead, holds: &[] }, &nodes);
    t.tick(now + 5 * MS, &nodes, &mut events);
    let from = now + 5 * MS + LEASE + MARGIN;
    assert_eq!(events.pop_front(), Some(PeerEvent::Reclaimed { id: "c".into(), in_ms: (LEASE + MARGIN) / MS }));
    assert_eq!(t.held().collect::<Vec<_>>(), ["c"]);
    // The inherited share counts once a majority without c echoed a
    // heartbeat sent since, for the slots that begin once that echo came.
    assert_eq!(t.holding(from + 10 * MS, &nodes).held, 0, "no echo of a heartbeat since yet");
    echo(&mut t, &nodes, from + 20 * MS, 0, from + 10 * MS);
    let h = t.holding(from + 20 * MS, &nodes);
    assert_eq!((h.held, h.held_from, h.leased), (1 << 2, from + 20 * MS, true), "c's place is 2");
    assert_eq!(t.holding(from + 10 * MS + LEASE, &nodes).held, 0, "the inherited share needs a lease too");
}

#[test]
fn only_the_heir_reclaims_and_a_member_counts_no_word_about_itself() {
    // b is a's heir; c's heir is a. Here a hears that a majority declared b.
    let (mut t, nodes) = group("a", &["b", "c"]);
    let b_dead = ["b".to_string()];
    t.on_beat(T0 + MS, 1, Said { echo: None, dead: &b_dead, holds: &[] }, &nodes);
    t.on_beat(T0 + MS, 0, Said { echo: None, dead: &b_dead, holds: &[] }, &nodes);
    let mut events = VecDeque::new();
    t.tick(T0 + 2 * MS, &nodes, &mut events);
    assert!(events.is_empty(), "b's heir is c, and b's word about itself is no declaration: {events:?}");
    assert!(echoes(&mut t, &nodes, T0 + 2 * MS, "b"), "one declaration is no majority: a still echoes b");
}

#[test]
fn a_locker_whose_share_a_peer_holds_stops_granting_from_it() {
    let (mut t, nodes) = group("c", &["a", "b"]);
    echo(&mut t, &nodes, T0 + MS, 0, T0);
    assert!(t.holding(T0 + MS, &nodes).leased);
    let held = ["c".to_string()];
    let event = t.on_beat(T0 + 2 * MS, 0, Said { echo: Some(T0 + MS), dead: &[], holds: &held }, &nodes);
    assert_eq!(event, Some(PeerEvent::LostShare { by: "a".into() }));
    assert!(!t.holding(T0 + 2 * MS, &nodes).leased, "for good, echoes or not");
}

#[test]
fn an_heir_that_takes_over_also_takes_what_the_dead_member_held() {
    // Five members a..e. e holds d's share; a is e's heir.
    let (mut t, nodes) = group("a", &["b", "c", "d", "e"]);
    let holds = ["d".to_string()];
    t.on_beat(T0 + MS, 3, Said { echo: None, dead: &[], holds: &holds }, &nodes);
    let e_dead = ["e".to_string()];
    for peer in [0, 1, 2] {
        t.on_beat(T0 + 2 * MS, peer, Said { echo: None, dead: &e_dead, holds: &[] }, &nodes);
    }
    let mut events = VecDeque::new();
    t.tick(T0 + 3 * MS, &nodes, &mut events);
    assert_eq!(t.held().collect::<Vec<_>>(), ["e", "d"], "{events:?}");
}

#[test]
fn a_run_that_did_not_hear_every_peer_echoes_no_one_for_a_lease() {
    let (_, nodes) = group("a", &["b", "c"]);
    let mut t = Tenure::new(3, 2);
    assert!(!echoes(&mut t, &nodes, T0, "b"), "not before joining");
    t.joined(T0, false);
    assert!(!echoes(&mut t, &nodes, T0 + LEASE, "b"));
    assert!(echoes(&mut t, &nodes, T0 + LEASE + MARGIN, "b"));
}

#[test]
fn a_declaration_heard_before_its_member_is_known_is_kept_and_a_full_list_keeps_members_names() {
    // "c" is configured but not heard yet: its id is no member's here.
    let names: Vec<Box<str>> = ["b", "c", "d", "e"].into_iter().map(Box::from).collect();
    let mut nodes = Nodes::new(key("a"), &names, MS);
    for (ix, id) in [(0, "b"), (2, "d"), (3, "e")] {
        hear(&mut nodes, T0, ix, id);
    }
    let mut t = Tenure::new(5, 4);
    t.joined(T0, true);
    let dead = vec!["c".to_owned()];
    for peer in [0, 2, 3] {
        t.on_beat(T0, peer, Said { dead: &dead, ..Said::default() }, &nodes);
    }
    hear(&mut nodes, T0 + MS, 1, "c");
    assert!(!echoes(&mut t, &nodes, T0 + MS, "c"), "a majority declared c before a knew c's id");
    // A peer that names more than the members makes room with the names
    // that are no member's, never with a member's declaration.
    let junk: Vec<String> = (0..10).map(|i| format!("gone-{i}")).collect();
    t.on_beat(T0 + 2 * MS, 0, Said { dead: &junk, ..Said::default() }, &nodes);
    assert!(!echoes(&mut t, &nodes, T0 + 2 * MS, "c"), "c's declaration stays");
    assert!(t.heard[0].dead.len() <= 5, "bounded by the members");
    let late = vec!["a".to_owned()];
    t.on_beat(T0 + 3 * MS, 0, Said { dead: &late, ..Said::default() }, &nodes);
    assert!(t.heard[0].dead.iter().any(|(d, _)| &**d == "a"), "a member's declaration finds room");
}

#[test]
fn a_run_that_echoed_a_member_and_learns_its_share_is_held_echoes_no_one_until_that_echo_ran_out() {
    // a restarted without its state file: it knows of no declaration of c
    // and echoes c's heartbeat of T0 + 10 ms, which may renew c's lease.
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    hear(&mut nodes, T0 + 10 * MS, 1, "c");
    assert!(t.vouch(T0 + 20 * MS, 1, "c", T0 + 10 * MS, &nodes));
    // b's heartbeat says b holds c's share. Echoing b now would lend b a
    // lease over that share while c's runs: a waits until c's has run out.
    let holds = ["c".to_string()];
    t.on_beat(T0 + 30 * MS, 0, Said { holds: &holds, ..Said::default() }, &nodes);
    assert!(!echoes(&mut t, &nodes, T0 + 30 * MS, "c"), "c is shunned for good");
    let ran_out = T0 + 10 * MS + LEASE + MARGIN;
    assert!(!echoes(&mut t, &nodes, ran_out - 1, "b"), "quiet while c's lease may run");
    assert!(echoes(&mut t, &nodes, ran_out, "b"));
    assert!(!echoes(&mut t, &nodes, ran_out, "c"));
}

#[test]
fn a_member_shunned_before_this_run_echoed_it_costs_no_quiet() {
    // c was cut off and its share reclaimed; when it is heard again, a run
    // that never echoed it has nothing to wait for.
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    let holds = ["c".to_string()];
    t.on_beat(T0 + MS, 0, Said { holds: &holds, ..Said::default() }, &nodes);
    hear(&mut nodes, T0 + 5 * MS, 1, "c");
    t.on_beat(T0 + 5 * MS, 1, Said::default(), &nodes);
    assert!(!echoes(&mut t, &nodes, T0 + 6 * MS, "c"));
    assert!(echoes(&mut t, &nodes, T0 + 6 * MS, "b"), "no quiet");
}

#[test]
fn a_peers_new_run_counts_for_an_inherited_share_only_in_slots_after_its_earlier_runs_echoes_ran_out() {
    // a is c's heir and holds its share from `from`; then b restarts.
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    let dead = ["c".to_string()];
    t.on_beat(T0 + MS, 0, Said { dead: &dead, ..Said::default() }, &nodes);
    let mut events = VecDeque::new();
    hear(&mut nodes, T0 + DECLARE_AFTER, 0, "b");
    echo(&mut t, &nodes, T0 + DECLARE_AFTER, 0, T0 + DECLARE_AFTER - MS);
    t.tick(T0 + DECLARE_AFTER + MS, &nodes, &mut events);
    assert_eq!(t.held().collect::<Vec<_>>(), ["c"], "{events:?}");
    let from = T0 + DECLARE_AFTER + MS + LEASE + MARGIN;
    echo(&mut t, &nodes, from + MS, 0, from);
    assert_eq!(t.holding(from + MS, &nodes).held_from, from + MS, "b's run, heard long since");
    let restart = from + 10 * MS;
    let b2 = NodeKey { id: "b".into(), incarnation: 2 };
    nodes.heartbeat(restart, 0, &b2, Beat { sent_at: restart, ..Beat::default() });
    echo(&mut t, &nodes, restart + MS, 0, restart);
    let h = t.holding(restart + MS, &nodes);
    assert!(h.leased, "its own share: the new run's echo counts at once");
    assert_eq!((h.held, h.held_from), (1 << 2, restart + MS + LEASE + MARGIN), "c's in the slots from then on");
}

/// Members listed by id (`ID@ENDPOINT`): one this run never heard is
/// silent to it since it joined, or since a reload listed it.
#[test]
fn a_listed_member_never_heard_is_declared_a_declare_time_after_joining_or_after_the_reload_that_listed_it() {
    let names: Vec<Box<str>> = vec!["b@tcp://b:1".into(), "c@tcp://c:1".into()];
    let mut nodes = Nodes::new(key("a"), &names, MS);
    let mut t = Tenure::new(3, 2);
    t.joined(T0, false);
    let mut events = VecDeque::new();
    let leased_at = |t: &mut Tenure, nodes: &mut Nodes, now: Nanos, heard: &[(PeerIx, &str)]| {
        for &(ix, id) in heard {
            hear(nodes, now, ix, id);
            echo(t, nodes, now, ix, now - MS);
        }
        assert!(t.holding(now, nodes).leased);
    };
    let soon = T0 + DECLARE_AFTER - MS;
    leased_at(&mut t, &mut nodes, soon, &[(0, "b")]);
    t.tick(soon, &nodes, &mut events);
    assert!(events.is_empty(), "not before a declare time since joining: {events:?}");
    let later = T0 + DECLARE_AFTER + MS;
    leased_at(&mut t, &mut nodes, later, &[(0, "b")]);
    t.tick(later, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Declared { id: "c".into() }), "c was never heard");

    // A reload lists d, which has not started yet: silent only since then.
    let (mut nodes, mut t) = (Nodes::new(key("a"), &names, MS), Tenure::new(3, 2));
    t.joined(T0, true);
    let reload = T0 + 10 * DECLARE_AFTER;
    let four: Vec<Box<str>> = vec!["b@tcp://b:1".into(), "c@tcp://c:1".into(), "d@tcp://d:1".into()];
    let was = [Some(0), Some(1), None];
    nodes.set_peers(&four, &was);
    t.set_members(reload, 4, &was);
    let heard = [(0, "b"), (1, "c")];
    leased_at(&mut t, &mut nodes, reload + DECLARE_AFTER - MS, &heard);
    t.tick(reload + DECLARE_AFTER - MS, &nodes, &mut events);
    assert!(events.is_empty(), "a member added is not declared before it could start: {events:?}");
    leased_at(&mut t, &mut nodes, reload + DECLARE_AFTER + MS, &heard);
    t.tick(reload + DECLARE_AFTER + MS, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Declared { id: "d".into() }));
}
