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
    let peer = nodes.peers().find(|(_, s)| s.run.as_ref().is_some_and(|r| *r.id == *id));
    let (ix, run) = peer.map_or((usize::MAX, key(id)), |(ix, s)| (ix, s.run.clone().expect("heard")));
    t.vouch(now, ix, &run, 0, nodes)
}

fn echo(t: &mut Tenure, nodes: &Nodes, now: Nanos, peer: PeerIx, at: Nanos) {
    t.on_beat(now, peer, Said { at: now, echo: Some(at), ..Said::default() }, nodes);
}

/// The runs of `ids` declared dead, as a heartbeat says them: the first
/// run of each (see `key`).
fn runs(ids: &[&str]) -> Vec<(String, u64)> {
    ids.iter().map(|id| (id.to_string(), 1)).collect()
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
    assert_eq!(t.declared().collect::<Vec<_>>(), [("c", 1)]);
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
    let dead = runs(&["c"]);
    t.on_beat(now + 5 * MS, 0, Said { at: now, echo: Some(now), dead: &dead, holds: &[] }, &nodes);
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
    let b_dead = runs(&["b"]);
    t.on_beat(T0 + MS, 1, Said { dead: &b_dead, ..Said::default() }, &nodes);
    t.on_beat(T0 + MS, 0, Said { dead: &b_dead, ..Said::default() }, &nodes);
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
    let event = t.on_beat(T0 + 2 * MS, 0, Said { at: T0 + MS, echo: Some(T0 + MS), dead: &[], holds: &held }, &nodes);
    assert_eq!(event, [PeerEvent::LostShare { by: "a".into() }]);
    assert!(!t.holding(T0 + 2 * MS, &nodes).leased, "while a holds it, echoes or not");
}

#[test]
fn an_heir_that_takes_over_also_takes_what_the_dead_member_held() {
    // Five members a..e. e holds d's share; a is e's heir.
    let (mut t, nodes) = group("a", &["b", "c", "d", "e"]);
    let holds = ["d".to_string()];
    t.on_beat(T0 + MS, 3, Said { holds: &holds, ..Said::default() }, &nodes);
    let e_dead = runs(&["e"]);
    for peer in [0, 1, 2] {
        t.on_beat(T0 + 2 * MS, peer, Said { dead: &e_dead, ..Said::default() }, &nodes);
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
    let dead = runs(&["c"]);
    for peer in [0, 2, 3] {
        t.on_beat(T0, peer, Said { dead: &dead, ..Said::default() }, &nodes);
    }
    hear(&mut nodes, T0 + MS, 1, "c");
    assert!(!echoes(&mut t, &nodes, T0 + MS, "c"), "a majority declared c before a knew c's id");
    // A peer that names more than the members makes room with the names
    // that are no member's, never with a member's declaration.
    let junk: Vec<(String, u64)> = (0..10).map(|i| (format!("gone-{i}"), 1)).collect();
    t.on_beat(T0 + 2 * MS, 0, Said { dead: &junk, ..Said::default() }, &nodes);
    assert!(!echoes(&mut t, &nodes, T0 + 2 * MS, "c"), "c's declaration stays");
    assert!(t.heard[0].dead.len() <= 5, "bounded by the members");
    let late = runs(&["a"]);
    t.on_beat(T0 + 3 * MS, 0, Said { dead: &late, ..Said::default() }, &nodes);
    assert!(t.heard[0].dead.iter().any(|(d, _)| &*d.id == "a"), "a member's declaration finds room");
}

#[test]
fn a_run_that_echoed_a_member_and_learns_its_share_is_held_echoes_no_one_until_that_echo_ran_out() {
    // a restarted without its state file: it knows of no declaration of c
    // and echoes c's heartbeat of T0 + 10 ms, which may renew c's lease.
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    hear(&mut nodes, T0 + 10 * MS, 1, "c");
    assert!(t.vouch(T0 + 20 * MS, 1, &key("c"), T0 + 10 * MS, &nodes));
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
    let dead = runs(&["c"]);
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

/// Run `incarnation` of member `id`.
fn run_of(id: &str, incarnation: u64) -> NodeKey {
    NodeKey { id: id.into(), incarnation }
}

/// Member a of a, b, c, heir to c, holding c's first run's share from the
/// returned instant on: b declared c, and so did a.
fn a_holding_c() -> (Tenure, Nodes, Nanos) {
    let (mut t, mut nodes) = group("a", &["b", "c"]);
    let now = T0 + DECLARE_AFTER + 10 * MS;
    hear(&mut nodes, now, 0, "b");
    echo(&mut t, &nodes, now, 0, now - MS);
    let mut events = VecDeque::new();
    t.tick(now, &nodes, &mut events);
    let dead = runs(&["c"]);
    t.on_beat(now + 5 * MS, 0, Said { at: now + 5 * MS, echo: Some(now), dead: &dead, holds: &[] }, &nodes);
    t.tick(now + 5 * MS, &nodes, &mut events);
    assert_eq!(t.held().collect::<Vec<_>>(), ["c"], "{events:?}");
    (t, nodes, now + 5 * MS + LEASE + MARGIN)
}

/// `peer`'s run `run` heard at `now`, saying `said` of tenure.
fn beat(t: &mut Tenure, nodes: &mut Nodes, now: Nanos, peer: PeerIx, run: &NodeKey, said: Said) -> Vec<PeerEvent> {
    nodes.heartbeat(now, peer, run, Beat { sent_at: now, ..Beat::default() });
    t.on_beat(now, peer, Said { at: now, ..said }, nodes)
}

#[test]
fn the_holder_gives_a_share_back_once_it_hears_a_later_run_of_its_member_and_never_to_the_declared_run() {
    let (mut t, mut nodes, from) = a_holding_c();
    echo(&mut t, &nodes, from + 20 * MS, 0, from + 10 * MS);
    assert_eq!(t.holding(from + 20 * MS, &nodes).held, 1 << 2, "c's share, held");
    // The declared run itself comes back (it was cut off): it is still
    // the run declared, so a keeps the share and shuns it.
    let events = beat(&mut t, &mut nodes, from + 30 * MS, 1, &key("c"), Said::default());
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(t.held().collect::<Vec<_>>(), ["c"]);
    assert!(!echoes(&mut t, &nodes, from + 30 * MS, "c"), "the declared run stays shunned");
    // A later run of c: not the run declared. a stops granting from its
    // share at once, says so, and echoes the new run.
    let events = beat(&mut t, &mut nodes, from + 40 * MS, 1, &run_of("c", 2), Said::default());
    assert_eq!(events, [PeerEvent::Released { id: "c".into() }]);
    assert_eq!(t.held().count(), 0);
    assert_eq!(t.holding(from + 40 * MS, &nodes).held, 0, "granting none of c's share");
    assert!(echoes(&mut t, &nodes, from + 40 * MS, "c"), "the later run is echoed");
    let mut events = VecDeque::new();
    t.tick(from + 50 * MS, &nodes, &mut events);
    assert!(events.is_empty(), "the declarations of c's first run take nothing back: {events:?}");
    // A heartbeat of the declared run arriving late changes nothing.
    beat(&mut t, &mut nodes, from + 60 * MS, 1, &key("c"), Said::default());
    t.tick(from + 60 * MS, &nodes, &mut events);
    assert!(events.is_empty() && t.held().count() == 0, "{events:?}");
}

#[test]
fn a_later_run_whose_share_a_peer_held_owns_it_only_in_the_slots_after_the_first_echo_of_its_regained_lease() {
    // c's second run: a holds c's share, b echoes c.
    let names: Vec<Box<str>> = vec!["a".into(), "b".into()];
    let mut nodes = Nodes::new(run_of("c", 2), &names, MS);
    let mut t = Tenure::new(3, 2);
    t.joined(T0, true);
    let held = ["c".to_string()];
    let events = beat(&mut t, &mut nodes, T0, 0, &key("a"), Said { holds: &held, ..Said::default() });
    assert_eq!(events, [PeerEvent::LostShare { by: "a".into() }]);
    beat(&mut t, &mut nodes, T0 + MS, 1, &key("b"), Said { echo: Some(T0), ..Said::default() });
    assert!(!t.holding(T0 + MS, &nodes).leased, "while a holds it");
    assert_eq!(t.own_from(T0 + MS, &nodes), Nanos::MAX);
    // a gives it back at `back`, by a heartbeat sent after.
    let back = T0 + 2 * LEASE;
    let events = beat(&mut t, &mut nodes, back, 0, &key("a"), Said::default());
    assert_eq!(events, [PeerEvent::ShareBack]);
    // A heartbeat of a sent before, arriving late, does not take it back.
    let late = t.on_beat(back + MS, 0, Said { at: back - MS, holds: &held, ..Said::default() }, &nodes);
    assert!(late.is_empty(), "{late:?}");
    // An echo of a heartbeat sent before the share came back lends no
    // lease over it; one of a heartbeat sent since does, for the slots
    // that begin a margin after it arrived.
    beat(&mut t, &mut nodes, back + 5 * MS, 1, &key("b"), Said { echo: Some(back - 10 * MS), ..Said::default() });
    assert!(t.holding(back + 5 * MS, &nodes).leased, "leased: its own share is its own again");
    assert_eq!(t.own_from(back + 5 * MS, &nodes), Nanos::MAX, "but of no slot yet");
    beat(&mut t, &mut nodes, back + 20 * MS, 1, &key("b"), Said { echo: Some(back + 10 * MS), ..Said::default() });
    assert_eq!(t.own_from(back + 20 * MS, &nodes), back + 20 * MS + MARGIN);
    assert_eq!(t.own_from(back + 10 * MS + LEASE, &nodes), Nanos::MAX, "that lease ran out");
    // A peer's run first heard lately counts only a lease and its margin
    // after: an earlier run of it may have echoed the holder.
    beat(
        &mut t,
        &mut nodes,
        back + 30 * MS,
        1,
        &run_of("b", 2),
        Said { echo: Some(back + 25 * MS), ..Said::default() },
    );
    assert_eq!(t.own_from(back + 30 * MS, &nodes), back + 30 * MS + LEASE + MARGIN);
}

#[test]
fn a_returned_run_that_dies_is_declared_as_that_run_and_reclaimed_again() {
    let (mut t, mut nodes, from) = a_holding_c();
    let c2 = run_of("c", 2);
    let back = from + 40 * MS;
    beat(&mut t, &mut nodes, back, 1, &c2, Said::default());
    assert!(t.vouch(back + MS, 1, &c2, back, &nodes), "c's later run echoed");
    // c2 dies: a, leased by b, declares it after the declare time.
    let later = back + DECLARE_AFTER + 10 * MS;
    beat(&mut t, &mut nodes, later, 0, &key("b"), Said { echo: Some(later - MS), ..Said::default() });
    let mut events = VecDeque::new();
    t.tick(later, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Declared { id: "c".into() }));
    assert_eq!(t.declared().collect::<Vec<_>>(), [("c", 2)], "c's second run, covering its first");
    assert!(t.held().next().is_none(), "one declaration is no majority");
    let dead = vec![("c".to_string(), 2)];
    beat(&mut t, &mut nodes, later + 5 * MS, 0, &key("b"), Said { dead: &dead, ..Said::default() });
    t.tick(later + 5 * MS, &nodes, &mut events);
    assert_eq!(events.pop_front(), Some(PeerEvent::Reclaimed { id: "c".into(), in_ms: (LEASE + MARGIN) / MS }));
    assert_eq!(t.held().collect::<Vec<_>>(), ["c"]);
    // a echoed c2 at `back`: quiet until that echo surely ran out.
    assert!(!echoes(&mut t, &nodes, back + LEASE + MARGIN - 1, "b"));
    assert!(echoes(&mut t, &nodes, back + LEASE + MARGIN, "b"));
}

#[test]
fn an_older_lockers_declaration_by_id_covers_the_runs_started_before_it_was_heard() {
    let (mut t, mut nodes) = group("a", &["b", "c", "d", "e"]);
    let (at, dead) = (T0 + 10 * MS, vec![("c".to_string(), 0)]);
    for peer in [0, 2, 3] {
        t.on_beat(at, peer, Said { at, dead: &dead, ..Said::default() }, &nodes);
    }
    assert!(!echoes(&mut t, &nodes, at, "c"), "c's first run is declared by a majority");
    let c_later = run_of("c", at + MS);
    beat(&mut t, &mut nodes, at + 2 * MS, 1, &c_later, Said::default());
    // Repeated in every heartbeat, the word still means the runs before.
    t.on_beat(at + 3 * MS, 0, Said { at: at + 3 * MS, dead: &dead, ..Said::default() }, &nodes);
    assert!(t.vouch(at + 3 * MS, 1, &c_later, at + 2 * MS, &nodes), "a run started since is not the one declared");
}

#[test]
fn a_run_whose_share_a_peer_held_reclaims_nothing_its_holder_may_hold_still() {
    // c's second run, of a..e; a holds c's share, so a is heir to b too.
    let names: Vec<Box<str>> = ["a", "b", "d", "e"].into_iter().map(Box::from).collect();
    let mut nodes = Nodes::new(run_of("c", 2), &names, MS);
    for (ix, id) in [(0, "a"), (1, "b"), (2, "d"), (3, "e")] {
        hear(&mut nodes, T0, ix, id);
    }
    let mut t = Tenure::new(5, 4);
    t.joined(T0, true);
    let (held, dead) = (["c".to_string()], runs(&["b"]));
    beat(&mut t, &mut nodes, T0 + MS, 0, &key("a"), Said { holds: &held, dead: &dead, ..Said::default() });
    for peer in [2, 3] {
        beat(
            &mut t,
            &mut nodes,
            T0 + MS,
            peer,
            &key(["", "", "d", "e"][peer]),
            Said { dead: &dead, ..Said::default() },
        );
    }
    let mut events = VecDeque::new();
    t.tick(T0 + 2 * MS, &nodes, &mut events);
    assert!(t.held().next().is_none(), "a majority declared b, whose heir is c, but a may hold it: {events:?}");
}
