//! Unit tests of `schedule`.

use super::*;

const MS: Nanos = NANOS_PER_MS;
const T0: Nanos = 1_000_000 * MS;

fn node(id: &str, incarnation: u64) -> NodeKey {
    NodeKey { id: id.into(), incarnation }
}

fn peering(expected: usize) -> Peering {
    let peers = ["b", "c", "d"][..expected].iter().map(|&p| p.into()).collect();
    Peering::new(PeeringSettings::new(node("a", T0), peers, 1000 * MS, 1000 * MS), T0)
}

fn drain(p: &mut Peering, now: Nanos) -> Vec<Outgoing> {
    std::iter::from_fn(|| p.poll_transmit(now)).take(10).collect()
}

#[test]
fn a_starting_locker_holds_until_every_peer_synced() {
    let mut p = peering(2);
    assert_eq!(p.view(T0).hold_until, Some(T0 + 1000 * MS));
    assert_eq!(drain(&mut p, T0), [Outgoing::Heartbeat { joining: true }, Outgoing::Repair]);
    p.on_heartbeat(T0, 0, &node("b", 1), beat(T0, false));
    p.on_heartbeat(T0, 1, &node("c", 1), beat(T0, false));
    p.on_snapshot_done(T0 + 5 * MS, 0, &node("b", 1));
    assert!(p.is_joining());
    p.on_snapshot_done(T0 + 6 * MS, 0, &node("b", 1));
    assert!(p.is_joining(), "the same peer twice is still one peer");
    p.on_snapshot_done(T0 + 6 * MS, 1, &node("x", 1));
    assert!(p.is_joining(), "a snapshot from a run that is not the peer's live one");
    p.on_snapshot_done(T0 + 7 * MS, 1, &node("c", 1));
    assert!(!p.is_joining());
    assert_eq!(p.view(T0 + 7 * MS).hold_until, None);
    let events: Vec<_> = std::iter::from_fn(|| p.poll_event()).collect();
    assert!(events.contains(&PeerEvent::Ready { synced: 2 }), "{events:?}");
}

#[test]
fn a_locker_whose_peers_are_gone_serves_alone_after_the_grace() {
    let mut p = peering(2);
    assert_eq!(p.next_deadline(), T0);
    drain(&mut p, T0);
    assert_eq!(p.next_deadline(), T0 + JOINING_HEARTBEAT);
    assert!(p.view(T0 + 999 * MS).hold_until.is_some());
    let view = p.view(T0 + 1000 * MS);
    // A member of three that never heard the others: no remainder, slots
    // from now on, and no lease (no majority echoed it) for its own share.
    let no_lease = crate::core::share::Holding { leased: false, ..crate::core::share::Holding::OWN };
    let alone = PeerView {
        live: 1,
        hold_until: None,
        late: 0,
        members: 3,
        member: None,
        owns_from: T0 + 1000 * MS,
        resumes: false,
        holding: no_lease,
    };
    assert_eq!(view, alone);
    assert_eq!(p.poll_event(), Some(PeerEvent::Ready { synced: 0 }));
}

#[test]
fn without_peers_there_is_nothing_to_wait_for() {
    let mut p = peering(0);
    assert_eq!(p.view(T0).hold_until, None);
}

#[test]
fn a_joining_peer_gets_a_snapshot_at_most_every_gap() {
    let mut p = peering(1);
    p.on_snapshot_done(T0, 0, &node("b", 1));
    drain(&mut p, T0 + 1000 * MS);
    let t = T0 + 1000 * MS;
    p.on_heartbeat(t + MS, 0, &node("b", 1), beat(t + MS, true));
    assert_eq!(drain(&mut p, t + MS), [Outgoing::Snapshot]);
    p.on_heartbeat(t + 2 * MS, 0, &node("b", 1), beat(t + 2 * MS, true));
    assert_eq!(drain(&mut p, t + 2 * MS), []);
    assert_eq!(p.next_deadline(), t + MS + SNAPSHOT_GAP);
    assert_eq!(drain(&mut p, t + MS + SNAPSHOT_GAP), [Outgoing::Snapshot]);
}

#[test]
fn a_peer_that_keeps_asking_gets_a_burst_of_snapshots_then_two_a_second() {
    let mut p = peering(1);
    let t = T0 + 2000 * MS;
    drain(&mut p, t);
    let mut snapshots = 0;
    // "Joining" every 5 ms for 10 s, as a rogue at the peer's address could.
    for i in 0..2000 {
        let now = t + i * 5 * MS;
        p.on_heartbeat(now, 0, &node("b", 1), beat(now, true));
        snapshots += drain(&mut p, now).iter().filter(|o| **o == Outgoing::Snapshot).count() as u64;
    }
    let most = SNAPSHOT_BURST + 10_000 * MS / SNAPSHOT_REFILL;
    assert!((SNAPSHOT_BURST..=most).contains(&snapshots), "{snapshots} snapshots");
}

#[test]
fn live_counts_configured_peers_heard_recently_and_never_itself() {
    let mut p = peering(2);
    p.on_heartbeat(T0, 0, &node("a", T0), beat(T0, false));
    assert_eq!(p.view(T0).live, 1, "nobody speaks as this locker");
    p.on_heartbeat(T0, 0, &node("b", 1), beat(T0, false));
    p.on_heartbeat(T0 + 400 * MS, 1, &node("c", 1), beat(T0 + 400 * MS, false));
    p.on_heartbeat(T0 + 400 * MS, 2, &node("d", 1), beat(T0 + 400 * MS, false));
    assert_eq!(p.view(T0 + 450 * MS).live, 3, "d is not configured");
    assert_eq!(p.view(T0 + 600 * MS).live, 2, "b has gone quiet");
}

#[test]
fn heartbeats_slow_down_once_joined() {
    let mut p = peering(1);
    drain(&mut p, T0);
    p.on_heartbeat(T0, 0, &node("b", 1), beat(T0, false));
    p.on_snapshot_done(T0 + MS, 0, &node("b", 1));
    assert_eq!(drain(&mut p, T0 + JOINING_HEARTBEAT), [Outgoing::Heartbeat { joining: false }, Outgoing::Repair]);
    assert_eq!(p.next_deadline(), T0 + JOINING_HEARTBEAT + 100 * MS);
}

#[test]
fn a_pause_longer_than_the_peer_dead_time_means_joining_again() {
    let mut p = peering(1);
    p.on_heartbeat(T0, 0, &node("b", 1), beat(T0, false));
    p.on_snapshot_done(T0, 0, &node("b", 1));
    assert!(!p.is_joining());
    p.on_pause(T0 + 400 * MS, 400 * MS);
    assert!(!p.is_joining(), "shorter than the peer-dead time");
    let resumed = T0 + 3400 * MS;
    p.on_pause(resumed, 3000 * MS);
    assert!(p.is_joining());
    assert_eq!(p.view(resumed).hold_until, Some(resumed + 1000 * MS));
    assert_eq!(drain(&mut p, resumed)[0], Outgoing::Heartbeat { joining: true });
    // The backlog: a heartbeat b sent 3 s ago is no clock skew.
    p.on_heartbeat(resumed + MS, 0, &node("b", 1), beat(T0 + 400 * MS, false));
    let events: Vec<_> = std::iter::from_fn(|| p.poll_event()).collect();
    assert!(events.iter().all(|e| !matches!(e, PeerEvent::ClockSkew { .. })), "{events:?}");
    assert!(events.contains(&PeerEvent::Rejoining { paused_ms: 3000 }));
    p.on_snapshot_done(resumed + 2 * MS, 0, &node("b", 1));
    assert!(!p.is_joining());
}

/// A heartbeat sent at `at`, from a sender whose clock agrees with this
/// locker's and says so.
fn beat(at: Nanos, joining: bool) -> Beat {
    Beat { sent_at: at, joining, reported: Some(0), up: None }
}

#[test]
fn a_starting_locker_serves_on_the_middle_clock_from_its_first_grant() {
    // This locker's clock is 50 ms fast; both peers' agree with each other.
    let mut p = peering(2);
    let skew = 50 * MS;
    let heard = |p: &mut Peering, at: Nanos, peer, id, reported| {
        let beat = Beat { sent_at: at - skew, joining: false, reported, up: None };
        p.on_heartbeat(at, peer, &node(id, 1), beat);
    };
    heard(&mut p, T0, 0, "b", None);
    heard(&mut p, T0, 1, "c", None);
    p.on_snapshot_done(T0, 0, &node("b", 1));
    p.on_snapshot_done(T0, 1, &node("c", 1));
    assert!(p.is_joining(), "synced, but the clocks are measured one way only");
    assert_eq!(p.clock().correction(), 0);
    let ahead = Some(skew as i64);
    heard(&mut p, T0 + 100 * MS, 0, "b", ahead);
    heard(&mut p, T0 + 100 * MS, 1, "c", ahead);
    assert_eq!(p.clock().correction(), -(skew as i64), "moved to the other two");
    assert!(!p.is_joining());
    let events: Vec<_> = std::iter::from_fn(|| p.poll_event()).collect();
    assert!(events.contains(&PeerEvent::ClockFollowed { by_ms: -50, correction_ms: -50, still: false }), "{events:?}");
}

/// A locker of one peer whose state file named an earlier run of it,
/// joined at `T0 + 5 ms`; `distrusted` when the file came from before a
/// reboot. Its peer tells of the earlier run `told` (as a peer that heard
/// it does), if any. Its view, and what it told the log.
fn restarted_with_a_file(distrusted: bool, told: Option<Nanos>) -> (PeerView, Vec<PeerEvent>) {
    let mut p = peering(1);
    p.nodes_mut().kept_runs([("a", T0 - 1000 * MS)].into_iter());
    if distrusted {
        p.distrust_earlier_runs();
    }
    drain(&mut p, T0);
    p.on_heartbeat(T0, 0, &node("b", 1), beat(T0, false));
    if let Some(run) = told {
        p.nodes_mut().resolve(T0, 0, &node("a", run)).unwrap();
    }
    p.on_snapshot_done(T0 + 5 * MS, 0, &node("b", 1));
    assert!(!p.is_joining());
    (p.view(T0 + 5 * MS), std::iter::from_fn(|| p.poll_event()).collect())
}

#[test]
fn a_file_from_before_a_reboot_resumes_nothing_and_owns_none_of_the_slots_under_way() {
    let (trusted, _) = restarted_with_a_file(false, None);
    assert!(trusted.resumes, "the file kept every grant and gift of the earlier run");
    let (after_reboot, _) = restarted_with_a_file(true, None);
    assert!(!after_reboot.resumes, "its tail may never have reached the disk");
    assert_eq!(after_reboot.owns_from, T0 + 5 * MS, "owns the slots that begin once it joined, no earlier one");
}

#[test]
fn a_restart_whose_file_kept_the_earlier_run_its_peer_knew_resumes_it_and_says_nothing_of_owning_none() {
    let owns_none = |events: &[PeerEvent]| events.iter().any(|e| matches!(e, PeerEvent::OwnsNextPeriods { .. }));
    let (known, events) = restarted_with_a_file(false, Some(T0 - 1000 * MS));
    assert!(known.resumes, "the peer's run is the one the file kept");
    assert!(!owns_none(&events), "it owns what its earlier run left: {events:?}");
    let (unkept, events) = restarted_with_a_file(false, Some(T0 - 500 * MS));
    assert!(!unkept.resumes, "a run the file did not keep wrote elsewhere, or nowhere");
    assert_eq!(unkept.owns_from, T0 + 5 * MS, "none of the slot under way");
    assert!(owns_none(&events), "and says so: {events:?}");
}

/// A locker with one limit of `algorithm`, 99 per second.
fn locker_of(algorithm: crate::core::limit::Algorithm) -> Locker {
    use crate::core::limit::{Limit, Quota};
    let limit = Limit::with_algorithm(crate::core::DEFAULT_LIMIT, Quota::new(99, 1.0).unwrap(), algorithm).unwrap();
    Locker::new(limit, vec![], 100)
}

/// Heartbeats from `b`'s run `run` every 100 ms from `from` until `to`,
/// this locker heartbeating (and forgetting) as it goes.
fn beats_until(p: &mut Peering, run: u64, from: Nanos, to: Nanos) {
    for at in (from..to).step_by(100 * MS as usize) {
        p.on_heartbeat(at, 0, &node("b", run), beat(at, false));
        drain(p, at);
    }
}

#[test]
fn an_earlier_run_is_remembered_for_as_long_as_a_rolling_window_remembers() {
    // A rolling window of 1 s: what a run granted and lent counts for up
    // to three windows after it was last heard, so a peer that forgot it
    // sooner (after two slots) would tell its next run that there was none.
    let mut p = peering(1);
    p.fit_to(&locker_of(crate::core::limit::Algorithm::RollingWindow));
    beats_until(&mut p, 1, T0, T0 + 200 * MS);
    beats_until(&mut p, 2, T0 + 200 * MS, T0 + 3_100 * MS);
    assert_eq!(p.nodes().runs(), 2, "b's earlier run is still remembered after 2.9 windows");
    beats_until(&mut p, 2, T0 + 3_100 * MS, T0 + 4_300 * MS);
    assert_eq!(p.nodes().runs(), 1, "and forgotten once no window it bore on is left");
}

#[test]
fn each_kind_keeps_runs_for_its_own_memory() {
    use crate::core::limit::Algorithm;
    let kept = |algorithm| {
        let mut p = peering(1);
        p.fit_to(&locker_of(algorithm));
        p.retention
    };
    let skew = Share::window_for(1000 * MS);
    assert_eq!(kept(Algorithm::FixedWindow), 2000 * MS + skew);
    assert_eq!(kept(Algorithm::RollingWindow), 4000 * MS + skew);
    // 99 per second, a burst of 990: ten seconds to refill.
    let interval = 1000 * MS / 99 + 1;
    assert_eq!(kept(Algorithm::token_bucket(990).unwrap()), 2000 * MS + 990 * interval + skew);
}

/// A locker of two peers that joined at `T0 + 5 ms`, each peer having
/// said in its heartbeat how long it was `up` (`None`: an older locker
/// that says nothing); with a `new_file`, it keeps a state file that
/// named no earlier run of it. Its view, and what it told the log.
fn joined_among(up: [Option<Nanos>; 2], new_file: bool) -> (PeerView, Vec<PeerEvent>) {
    let mut p = peering(2);
    if new_file {
        p.nodes_mut().kept_runs(std::iter::empty());
    }
    drain(&mut p, T0);
    for (ix, id) in [(0, "b"), (1, "c")] {
        p.on_heartbeat(T0, ix, &node(id, 1), Beat { up: up[ix], ..beat(T0, false) });
    }
    p.on_snapshot_done(T0 + 5 * MS, 0, &node("b", 1));
    p.on_snapshot_done(T0 + 5 * MS, 1, &node("c", 1));
    assert!(!p.is_joining());
    let view = p.view(T0 + 5 * MS);
    (view, std::iter::from_fn(|| p.poll_event()).collect())
}

#[test]
fn a_run_owns_the_slot_under_way_only_when_a_peer_up_since_before_it_or_a_new_file_says_no_earlier_run_was() {
    const LONG: Nanos = 600_000 * MS;
    // Restarted together: no peer has been up longer than this run, so
    // none can tell that its earlier run did not grant in the slot.
    let (together, _) = joined_among([Some(3 * MS), Some(4 * MS)], false);
    assert_eq!(together.owns_from, T0 + 5 * MS, "none of the slot under way");
    // A peer up for ten minutes heard of no earlier run: there was none in
    // the slots that began since (and the time to hear one).
    let (among_old, _) = joined_among([Some(3 * MS), Some(LONG)], false);
    assert_eq!(among_old.owns_from, T0 - LONG + 500 * MS);
    // A new state file: a first run.
    assert_eq!(joined_among([Some(3 * MS), Some(4 * MS)], true).0.owns_from, 0);
    // Older peers say nothing, and prove nothing.
    assert_eq!(joined_among([None, None], false).0.owns_from, T0 + 5 * MS);
    assert_eq!(joined_among([None, Some(LONG)], false).0.owns_from, T0 - LONG + 500 * MS);
}

#[test]
fn a_run_that_owns_none_of_the_slot_under_way_says_why_and_one_that_does_says_nothing() {
    let owns_next = |e: &PeerEvent| matches!(e, PeerEvent::OwnsNextPeriods { .. });
    let (_, events) = joined_among([Some(3 * MS), Some(4 * MS)], false);
    let why = events.iter().find_map(|e| match e {
        PeerEvent::OwnsNextPeriods { why } => Some(*why),
        _ => None,
    });
    assert!(why.is_some_and(|w| w.contains("--state")), "a group restarted together is told: {events:?}");
    let (_, events) = joined_among([Some(3 * MS), Some(4 * MS)], true);
    assert!(!events.iter().any(owns_next), "a first run owns the slot and says nothing: {events:?}");
    let (_, events) = joined_among([Some(3 * MS), Some(600_000 * MS)], false);
    assert!(!events.iter().any(owns_next), "nor does one a long-lived peer vouches for: {events:?}");
}

#[test]
fn a_run_says_how_long_it_has_heard_its_peers_since_it_started_or_resumed() {
    let mut p = peering(1);
    assert_eq!(p.up(T0 + 700 * MS), 700 * MS);
    p.on_pause(T0 + 2000 * MS, 1000 * MS);
    assert_eq!(p.up(T0 + 2300 * MS), 300 * MS, "what a pause stopped it from hearing, it may not know");
}
