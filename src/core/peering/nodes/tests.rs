//! Unit tests of `nodes`.

use super::*;

const MS: Nanos = 1_000_000;

fn node(id: &str, incarnation: u64) -> NodeKey {
    NodeKey { id: id.into(), incarnation }
}

fn table(peers: &[&str]) -> Nodes {
    let peers: Vec<Box<str>> = peers.iter().map(|&p| p.into()).collect();
    Nodes::new(node("a", 1), &peers, 250 * MS)
}

#[test]
fn runs_of_one_id_are_kept_apart() {
    let mut n = table(&["b"]);
    assert_eq!(n.resolve(0, 0, &node("a", 1)), Some(Nodes::ME));
    let b1 = n.resolve(0, 0, &node("b", 1)).unwrap();
    let b2 = n.resolve(0, 0, &node("b", 2)).unwrap();
    assert_ne!(b1, b2);
    assert_eq!(n.resolve(0, 0, &node("b", 1)), Some(b1));
    assert_eq!(n.key(b2), Some(&node("b", 2)));
}

#[test]
fn heartbeats_track_liveness_offset_and_restarts() {
    let mut n = table(&["tcp://b"]);
    let t = 10_000 * MS;
    assert_eq!(n.heartbeat(t, 0, &node("b", 1), beat(t + 3 * MS, false)), [PeerEvent::Joined { id: "b".into() }]);
    assert_eq!(n.heartbeat(t + 100 * MS, 0, &node("b", 1), beat(t + 100 * MS, false)), []);
    let restarted = n.heartbeat(t + 200 * MS, 0, &node("b", 2), beat(t + 200 * MS, true));
    assert_eq!(restarted, [PeerEvent::Restarted { id: "b".into() }]);
    assert_eq!(n.live_peers(t + 300 * MS, 500 * MS), 1);
    assert_eq!(n.live_peers(t + 800 * MS, 500 * MS), 0);
    let (_, b) = n.peers().next().unwrap();
    assert!(b.joining);
    assert_eq!(b.run, Some(node("b", 2)));
    assert_eq!(&*b.name, "tcp://b");
}

#[test]
fn a_peer_going_silent_and_coming_back_is_reported_once_each_way() {
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    let mut events = VecDeque::new();
    n.heartbeat(t, 0, &node("b", 1), beat(t, false));
    n.sweep_silent(t + 500 * MS, 500 * MS, &mut events);
    assert!(events.is_empty(), "heard within the timeout");
    n.sweep_silent(t + 501 * MS, 500 * MS, &mut events);
    n.sweep_silent(t + 900 * MS, 500 * MS, &mut events);
    assert_eq!(events, [PeerEvent::Silent { id: "b".into(), last_heard_ms: 501 }], "once");
    let back = n.heartbeat(t + 2_000 * MS, 0, &node("b", 1), beat(t + 2_000 * MS, false));
    assert_eq!(back, [PeerEvent::Back { id: "b".into(), silent_ms: 2_000 }]);
    assert!(n.heartbeat(t + 2_100 * MS, 0, &node("b", 1), beat(t + 2_100 * MS, false)).is_empty());
    n.sweep_silent(t + 3_000 * MS, 500 * MS, &mut events);
    let restarted = n.heartbeat(t + 5_000 * MS, 0, &node("b", 2), beat(t + 5_000 * MS, false));
    assert_eq!(restarted, [PeerEvent::Restarted { id: "b".into() }], "a new run is a restart");
}

#[test]
fn a_skewed_clock_is_flagged_and_cleared() {
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    let skewed = n.heartbeat(t, 0, &node("b", 1), beat_skewed(t - 300 * MS, -300 * MS as i64));
    assert_eq!(skewed[1], PeerEvent::ClockSkew { id: "b".into(), offset_ms: -300 });
    assert!(n.peers().next().unwrap().1.flagged);
    let cleared = n.heartbeat(t + 100 * MS, 0, &node("b", 1), beat_skewed(t + 100 * MS, 0));
    assert_eq!(cleared, [PeerEvent::ClockSkewCleared { id: "b".into() }]);
}

#[test]
fn a_clock_measured_one_way_only_is_not_judged() {
    // The offset of a heartbeat alone holds its transit: on a busy host
    // that passes the in-flight window with no clock wrong at all.
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    assert_eq!(n.heartbeat(t, 0, &node("b", 1), beat(t - 300 * MS, false)), [PeerEvent::Joined { id: "b".into() }]);
    assert!(!n.peers().next().unwrap().1.flagged);
}

#[test]
fn heartbeats_queued_during_a_pause_are_not_judged_for_skew() {
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    n.hold_skew_until(t + 500 * MS);
    let queued = beat_skewed(t - 3000 * MS, -3000 * MS as i64);
    assert_eq!(n.heartbeat(t, 0, &node("b", 1), queued), [PeerEvent::Joined { id: "b".into() }]);
    assert!(!n.peers().next().unwrap().1.flagged);
    assert_eq!(n.heartbeat(t + 600 * MS, 0, &node("b", 1), beat_skewed(t + 600 * MS, 0)), []);
}

#[test]
fn a_flood_of_made_up_node_ids_holds_a_few_runs_per_peer() {
    let mut n = table(&["b", "c"]);
    n.sender(0, 0, &node("b", 1)).unwrap();
    let admitted = (0..30_000).filter(|&i| n.resolve(MS, 0, &node(&format!("x{i}"), i)).is_some()).count();
    assert_eq!(admitted, MAX_RUNS_PER_PEER - 1, "the live run holds one place");
    assert_eq!(n.runs(), MAX_RUNS_PER_PEER);
    assert!(n.resolve(MS, 1, &node("c-relayed", 1)).is_some(), "another peer's room is its own");
    assert!(n.resolve(MS, 0, &node("b", 1)).is_some(), "known runs are still resolved");
    assert_eq!(n.resolve(MS, 2, &node("d", 1)), None, "not a configured peer");
}

#[test]
fn an_earlier_run_of_this_locker_refused_for_room_is_still_known_to_have_been() {
    let mut n = table(&["b"]);
    n.kept_runs([("a", 0)].into_iter());
    n.sender(0, 0, &node("b", 1)).unwrap();
    for i in 0..MAX_RUNS_PER_PEER - 1 {
        assert!(n.resolve(MS, 0, &node(&format!("relayed{i}"), 1)).is_some());
    }
    assert!(n.knows_every_earlier_run(), "the file kept the only earlier run named so far");
    assert_eq!(n.resolve(MS, 0, &node("a", 0)), None, "no room for a kept run");
    assert!(n.knows_earlier_run() && n.knows_every_earlier_run(), "a kept run, refused: still known, still kept");
    assert_eq!(n.resolve(MS, 0, &node("a", 1)), Some(Nodes::ME), "this run itself needs no room");
    assert_eq!(n.resolve(MS, 0, &node("a", 2)), None, "a later run is nobody's earlier run");
    assert!(n.knows_every_earlier_run());
    let mut fresh = table(&["b"]);
    fresh.sender(0, 0, &node("b", 1)).unwrap();
    for i in 0..MAX_RUNS_PER_PEER - 1 {
        fresh.resolve(MS, 0, &node(&format!("relayed{i}"), 1));
    }
    assert!(!fresh.knows_earlier_run());
    assert_eq!(fresh.resolve(MS, 0, &node("a", 0)), None, "no room");
    assert!(fresh.knows_earlier_run(), "refused, yet known to have been: the run owns none of the slot it joins in");
}

#[test]
fn a_new_run_waits_for_room_and_old_runs_are_forgotten() {
    let mut n = table(&["b"]);
    let retention = 2000 * MS;
    n.set_retention(retention);
    for i in 0..8 {
        assert!(n.sender(i * MS, 0, &node("b", i)).is_some());
    }
    assert_eq!(n.sender(10 * MS, 0, &node("b", 8)), None, "no room: every run may still hold counts");
    assert_eq!(n.peers().next().unwrap().1.run, Some(node("b", 7)));
    n.forget(retention, retention);
    assert_eq!(n.runs(), MAX_RUNS_PER_PEER, "named within the retention");
    let later = 6 * MS + retention;
    let (ix, _) = n.sender(later, 0, &node("b", 8)).expect("room, once the oldest runs expired");
    assert_eq!(n.runs(), 2 + 1, "b 6 and b 7 are not expired yet; b 8 is live");
    n.forget(later + retention + 1, retention);
    assert_eq!(n.runs(), 1, "only the live run stays");
    assert_eq!(n.key(ix), Some(&node("b", 8)));
    assert!(n.key(ix - 1).is_none());
}

#[test]
fn nobody_may_send_as_this_locker() {
    let mut n = table(&["b"]);
    assert_eq!(n.sender(0, 0, &node("a", 1)), None);
    assert_eq!(n.sender(0, 0, &node("a", 2)), None, "nor as another run of this locker's id");
    assert_eq!(n.sender(0, 1, &node("b", 1)), None);
    assert!(n.heartbeat(0, 0, &node("a", 1), beat(0, false)).is_empty());
    assert!(n.heartbeat(0, 0, &node("a", 7), beat(0, false)).is_empty());
    assert!(n.peers().all(|(_, s)| s.run.is_none()), "no peer entry for this locker's own id");
    assert_eq!(n.live_peers(0, 500 * MS), 0);
}

#[test]
fn a_peer_known_only_from_its_counts_is_reported_heard_by_its_first_heartbeat() {
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    assert_eq!(n.sender(t, 0, &node("b", 1)).map(|s| s.1), Some(None), "counts alone: not live, not reported");
    assert_eq!(n.sender(t + 1, 0, &node("b", 2)).map(|s| s.1), Some(None), "nor its restart");
    let mut events = VecDeque::new();
    n.sweep_silent(t + 1000 * MS, 250 * MS, &mut events);
    assert!(events.is_empty(), "never live: never silent");
    assert_eq!(
        n.heartbeat(t + 1001 * MS, 0, &node("b", 2), beat(t + 1001 * MS, false)),
        [PeerEvent::Joined { id: "b".into() }]
    );
    n.sweep_silent(t + 2000 * MS, 250 * MS, &mut events);
    assert!(matches!(events.pop_front(), Some(PeerEvent::Silent { .. })), "heard, then silent");
}

#[test]
fn a_new_run_in_every_message_is_reported_once_a_second() {
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    let mut events = n.heartbeat(t, 0, &node("b", 0), beat(t, false));
    events.extend((1..100).filter_map(|i| n.sender(t + i * MS, 0, &node("b", i)).and_then(|s| s.1)));
    assert_eq!(events, [PeerEvent::Joined { id: "b".into() }, PeerEvent::Restarted { id: "b".into() }]);
    assert_eq!(n.runs(), MAX_RUNS_PER_PEER, "the rest are refused");
    assert_eq!(shown(&"x".repeat(1000)).len(), 67);
}

#[test]
fn refusals_are_counted_always_and_reported_once_a_second() {
    let mut n = table(&["b"]);
    assert!(n.refuse(0, 0, || "x".into()).is_some());
    assert!(n.refuse(500 * MS, 0, || "x".into()).is_none());
    let again = n.refuse(1000 * MS, 0, || "x".into());
    assert_eq!(again, Some(PeerEvent::Refused { peer: "b".into(), what: "x".into(), rejected: 3 }));
}

/// A heartbeat sent at `at`, from a sender that says nothing of this
/// locker's clock.
fn beat(at: Nanos, joining: bool) -> Beat {
    Beat { sent_at: at, joining, reported: None, up: None }
}

/// A heartbeat sent at `at` by a peer whose clock is `skew` off this
/// locker's, saying how it sees this locker's (measured both ways, with no
/// transit).
fn beat_skewed(at: Nanos, skew: i64) -> Beat {
    Beat { sent_at: at, joining: false, reported: Some(-skew), up: None }
}

#[test]
fn a_delay_one_way_only_is_no_skew_but_a_skew_beyond_the_round_trip_is() {
    // Right clocks, heartbeats from b 9 ms late, b hearing this one's 1 ms
    // late: halfway says b is 4 ms behind, within half the 10 ms round trip.
    let mut n = table(&["b"]);
    let t = 10_000 * MS;
    let late = n.heartbeat(t, 0, &node("b", 1), beat_skewed(t - 9 * MS, MS as i64));
    assert_eq!(late, [PeerEvent::Joined { id: "b".into() }], "no skew warned of");
    let b = n.peers().next().unwrap().1;
    assert_eq!((b.skew(), b.sure_skew()), (-4 * MS as i64, 0));
    assert_eq!(n.live_offsets(PeerState::sure_skew).collect::<Vec<_>>(), [0], "nothing sure to follow");
    // b 300 ms behind, each way 1 ms: sure of all but the 1 ms of doubt.
    let mut n = table(&["b"]);
    n.heartbeat(t, 0, &node("b", 1), beat_skewed(t - 301 * MS, -299 * MS as i64));
    let b = n.peers().next().unwrap().1;
    assert_eq!((b.skew(), b.sure_skew()), (-300 * MS as i64, -299 * MS as i64));
    assert!(b.flagged);
}

#[test]
fn earlier_runs_are_all_known_only_when_the_state_file_named_each_one_a_peer_told_of() {
    let peers: Vec<Box<str>> = vec!["b".into()];
    let mut n = Nodes::new(node("a", 10), &peers, 250 * MS);
    assert!(!n.knows_every_earlier_run(), "no state file named a run");
    n.kept_runs([("a", 5), ("b", 4), ("a", 12)].into_iter());
    assert!(n.knows_every_earlier_run(), "the file named run 5 of this id");
    n.resolve(0, 0, &node("a", 5)).unwrap();
    assert!(n.knows_every_earlier_run(), "a peer told of run 5, which the file named");
    n.resolve(0, 0, &node("a", 7)).unwrap();
    assert!(!n.knows_every_earlier_run(), "run 7 wrote elsewhere, or nowhere");
    assert!(n.knows_earlier_run());
}

#[test]
fn a_peer_the_configuration_names_has_its_place_before_it_is_heard() {
    // Unnamed, this locker ("a") knows its place only once it heard "0"
    // and "c"; named, from the start, as the peers' ids place them.
    let unnamed = table(&["tcp://x:1", "tcp://y:1"]);
    assert_eq!(unnamed.member(), None);
    let named = table(&["0@tcp://x:1", "c@tcp://y:1"]);
    assert_eq!(named.member(), Some(1), "after \"0\", before \"c\"");
    let partly = table(&["0@tcp://x:1", "tcp://y:1"]);
    assert_eq!(partly.member(), None, "an unnamed peer still has to be heard");
    let (_, first) = named.peers().next().unwrap();
    assert_eq!((first.named.as_deref(), first.id(), &*first.name), (Some("0"), Some("0"), "0@tcp://x:1"));
}

#[test]
fn a_named_peers_endpoint_speaking_under_another_id_is_refused() {
    let mut n = table(&["b@tcp://x:1"]);
    assert_eq!(n.sender(0, 0, &node("z", 1)), None, "not the id the configuration names");
    assert!(n.peers().next().unwrap().1.run.is_none(), "and it does not become the peer's run");
    assert!(n.sender(0, 0, &node("b", 1)).is_some(), "the named id is heard");
    assert_eq!(n.member(), Some(0));
}

#[test]
fn an_id_is_read_only_ahead_of_the_transport() {
    assert_eq!(configured_id("tcp://x:1"), None);
    assert_eq!(configured_id("locker-1@tcp://locker-1.peers:7778"), Some("locker-1"));
    assert_eq!(configured_id("a@b@tcp://x:1"), Some("a@b"), "the last @ ahead of ://");
    assert_eq!(configured_id("ipc:///run/a@b"), None, "an @ in the address is the address's");
    assert_eq!(configured_id("b"), None);
}
