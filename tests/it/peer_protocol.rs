//! Protocol tests for peering on the pure seam: services wired together by
//! hand, with literal instants and a network the test controls (it can
//! drop, repeat and reorder messages), plus the golden bytes of a peer
//! message.

use locker::core::{Algorithm, Limit, Locker, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::{Note, Service};
use locker::wire::{
    self, Ask, GoReply, PeerAbout, PeerBeat, PeerCount, PeerCounts, PeerMsg, PeerNode, PeerSeen, PeerTenure, Reply,
    StatsReply,
};

pub(crate) const MS: u64 = 1_000_000;
/// The start of a 1 s slot.
pub(crate) const T0: u64 = 1_700_000_000_000 * MS;

fn locker(max: u32) -> Locker {
    Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(max, 1.0).unwrap()).unwrap(), vec![], 1000)
}

/// A token bucket of 5 refilled at 10 per second: one token per 100 ms.
fn bucket_locker() -> Locker {
    let quota = Quota::new(10, 1.0).unwrap();
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, quota, Algorithm::token_bucket(5).unwrap()).unwrap();
    Locker::new(limit, vec![], 1000)
}

pub(crate) fn service(id: &str, incarnation: u64, peers: usize, now: u64) -> Service {
    service_of(locker(10), id, incarnation, peers, now)
}

/// A service with `peers` configured peers, numbered from 0.
fn service_of(locker: Locker, id: &str, incarnation: u64, peers: usize, now: u64) -> Service {
    let me = NodeKey { id: id.into(), incarnation };
    let names = (0..peers).map(|i| format!("tcp://peer-{i}").into()).collect();
    let settings = PeeringSettings::new(me, names, 500 * MS, 1000 * MS);
    crate::support::first_run(Service::peered(locker, Peering::new(settings, now), now), now)
}

pub(crate) fn ask(s: &mut Service, now: u64) -> GoReply {
    let mut body = Vec::new();
    wire::encode(&Ask::new().key("k").to_map(), &mut body);
    let mut out = Vec::new();
    let _ = locker::service::step::request(s, now, 0, &body, &mut (), &mut (), &mut out);
    match wire::decode_reply(&out).unwrap() {
        Reply::Answer(r) => r,
        Reply::Refused(e) => panic!("{e}"),
    }
}

pub(crate) fn stats(s: &mut Service, now: u64) -> StatsReply {
    let mut body = Vec::new();
    wire::encode(&wire::RequestMap { op: Some("stats"), ..Default::default() }, &mut body);
    let mut out = Vec::new();
    let _ = locker::service::step::request(s, now, 0, &body, &mut (), &mut (), &mut out);
    match wire::decode_reply(&out).unwrap() {
        Reply::Answer(r) => r,
        Reply::Refused(e) => panic!("{e}"),
    }
}

pub(crate) fn outbox(s: &mut Service, now: u64) -> Vec<Vec<u8>> {
    crate::support::published(s, now)
}

/// Delivers `msgs` as from the receiver's first configured peer.
pub(crate) fn deliver(to: &mut Service, now: u64, msgs: &[Vec<u8>]) {
    deliver_from(to, 0, now, msgs);
}

/// Delivers `msgs` as from the receiver's configured peer number `peer`.
pub(crate) fn deliver_from(to: &mut Service, peer: usize, now: u64, msgs: &[Vec<u8>]) {
    for m in msgs {
        assert!(locker::service::step::peer(to, now, peer, m), "a peer message was not understood");
    }
}

/// Two services that have exchanged heartbeats and snapshots.
pub(crate) fn joined_pair() -> (Service, Service) {
    joined(service("a", T0, 1, T0), service("b", T0, 1, T0))
}

/// Two services sharing a token bucket, joined.
pub(crate) fn bucket_pair() -> (Service, Service) {
    joined(service_of(bucket_locker(), "a", T0, 1, T0), service_of(bucket_locker(), "b", T0, 1, T0))
}

fn joined(mut a: Service, mut b: Service) -> (Service, Service) {
    for round in 0..3 {
        let now = T0 + round * 10 * MS;
        let (from_a, from_b) = (outbox(&mut a, now), outbox(&mut b, now));
        deliver(&mut b, now, &from_a);
        deliver(&mut a, now, &from_b);
    }
    assert!(!stats(&mut a, T0 + 30 * MS).joining && !stats(&mut b, T0 + 30 * MS).joining);
    (a, b)
}

#[test]
fn a_locker_grants_what_it_owns_and_gets_more_from_its_peer_within_a_round_trip() {
    let (mut a, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    // Two members of 10: each owns 5 of the slot.
    for i in 0..5 {
        assert!(ask(&mut a, now + i * MS).ok);
    }
    let short = ask(&mut a, now + 5 * MS);
    assert!(!short.ok && short.retry_after_ms <= 4, "asks b, and says the permits are on their way: {short:?}");
    deliver(&mut b, now + 6 * MS, &outbox(&mut a, now + 5 * MS));
    let gift = outbox(&mut b, now + 6 * MS);
    assert!(gift.iter().any(|m| !gifts_in(m).is_empty()), "b gives");
    deliver(&mut a, now + 7 * MS, &gift);
    // a asked for as many as it had granted, and b, asked for nothing
    // itself, gave all it owned.
    let more = (0..10).filter(|i| ask(&mut a, now + 7 * MS + i * MS).ok).count();
    assert_eq!(more, 5, "the gift is a's own");
    let r = ask(&mut b, now + 20 * MS);
    assert!(!r.ok && r.retry_after_ms < r.reset_after_ms, "b gave its 5 away, and asks a in turn: {r:?}");
}

#[test]
fn duplicates_reordering_and_loss_do_not_change_the_sum() {
    let (mut a, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    let mut sent = Vec::new();
    // A grant reaches the peers with the next heartbeat (every 100 ms):
    // one grant between two, so that each carries its own count.
    for i in 0..5 {
        assert!(ask(&mut a, now + i * 110 * MS).ok);
        sent.extend(outbox(&mut a, now + i * 110 * MS));
    }
    // The message that carries a's cumulative count `n`.
    let carrying = |n: u32| {
        sent.iter()
            .find(|m| wire::decode_peer(m).unwrap().counts().is_some_and(|p| p.counts.iter().any(|c| c.4 == n)))
            .unwrap_or_else(|| panic!("no message carries {n}"))
    };
    // The last count first, then two older ones, each twice; the rest lost.
    for m in [carrying(5), carrying(2), carrying(5), carrying(3), carrying(3)] {
        assert!(locker::service::step::peer(&mut b, now + 500 * MS, 0, m));
    }
    assert_eq!(ask(&mut b, now + 510 * MS).remaining, 4, "5 from a and 1 from b, counted once");
}

#[test]
fn counts_of_an_ended_slot_are_ignored() {
    let (mut a, mut b) = joined_pair();
    for _ in 0..4 {
        assert!(ask(&mut a, T0 + 900 * MS).ok);
    }
    let late = outbox(&mut a, T0 + 900 * MS);
    deliver(&mut b, T0 + 1100 * MS, &late);
    assert_eq!(ask(&mut b, T0 + 1100 * MS).remaining, 4, "b owns its 5 of a new slot, whatever a granted before");
}

#[test]
fn a_restarted_locker_learns_the_slot_back_before_it_grants() {
    let (mut a, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    for i in 0..5 {
        assert!(ask(&mut a, now + i * 5 * MS).ok);
    }
    deliver(&mut b, now, &outbox(&mut a, now + 35 * MS));
    // a dies and comes back under the same id: a new run, knowing nothing.
    let restart = now + 50 * MS;
    let mut a = service("a", restart, 1, restart);
    let held = ask(&mut a, restart);
    assert!(!held.ok, "joining: no grant before the counts are learned");
    assert!(held.retry_after_ms <= 500);
    // Its heartbeat asks b for a snapshot, which carries a's earlier count.
    deliver(&mut b, restart, &outbox(&mut a, restart));
    let snapshot = outbox(&mut b, restart + MS);
    assert!(snapshot.iter().any(|m| matches!(wire::decode_peer(m), Ok(PeerMsg::Snapshot(s)) if s.done)));
    deliver(&mut a, restart + MS, &snapshot);
    assert!(!stats(&mut a, restart + MS).joining);
    // b knew a's earlier run, which may have granted in this slot more
    // than b heard of: the new run owns none of it, and all of the next.
    let granted = (0..10).filter(|i| ask(&mut a, restart + 10 * MS + i * 5 * MS).ok).count();
    assert_eq!(granted, 0, "5 were granted before the restart");
    // (Its clock follows b's view of the earlier run, tens of ms off here.)
    let next = (0..10).filter(|i| ask(&mut a, T0 + 1100 * MS + i * MS).ok).count();
    assert_eq!(next, 5, "a's share of the next slot");
}

#[test]
fn a_restarted_locker_with_no_peer_left_serves_its_share_from_the_next_slot_when_two_make_the_group() {
    let mut a = service("a", T0, 1, T0);
    assert!(!ask(&mut a, T0 + 499 * MS).ok);
    assert!(!ask(&mut a, T0 + 500 * MS).ok, "no peer answered: its earlier run may have granted in this slot");
    let next = (0..10).filter(|i| ask(&mut a, T0 + 1000 * MS + i * MS).ok).count();
    assert_eq!(next, 5, "half of 10");
    let mut trio = service("a", T0, 2, T0);
    let next = (0..10).filter(|i| ask(&mut trio, T0 + 1000 * MS + i * MS).ok).count();
    assert_eq!(next, 0, "of three, no majority echoes it: it grants nothing of its share");
}

/// A heartbeat of node `id`, sent at `at` by its clock.
fn beat(id: &str, at: u64) -> Vec<u8> {
    beat_seeing(id, at, vec![])
}

/// A heartbeat of node `id` sent at `at` by its clock, saying how it sees
/// the clocks of the nodes in `seen`.
fn beat_seeing(id: &str, at: u64, seen: Vec<PeerSeen>) -> Vec<u8> {
    let about = PeerAbout { seen, ..PeerAbout::default() };
    let beat =
        PeerBeat { sender: PeerNode(id.into(), 1), at, joining: false, about, tenure: PeerTenure::default(), up: None };
    let msg = PeerMsg::Beat(beat);
    let mut body = Vec::new();
    wire::encode(&msg, &mut body);
    body
}

#[test]
fn stats_list_peers_with_age_offset_and_skew_flag() {
    let mut a = service("a", T0, 2, T0);
    assert!(locker::service::step::peer(&mut a, T0 + 20 * MS, 0, &beat("b", T0 + 20 * MS)));
    // c's clock is 400 ms behind, measured both ways: it sees a's 400 ms ahead.
    let seeing_a = vec![PeerSeen("a".into(), 400 * MS as i64)];
    assert!(locker::service::step::peer(&mut a, T0 + 40 * MS, 1, &beat_seeing("c", T0 + 40 * MS - 400 * MS, seeing_a)));
    let s = stats(&mut a, T0 + 50 * MS);
    assert_eq!(s.node.as_deref(), Some("a"));
    let peers: Vec<_> = s.peers.iter().map(|p| (p.node.as_str(), p.last_heard_ms, p.flagged)).collect();
    assert_eq!(peers, [("b", 30, false), ("c", 10, true)]);
    assert_eq!(s.peers[1].clock_offset_ms, -400.0);
    assert_eq!(s.peers[1].endpoint, "tcp://peer-1");
    assert_eq!(s.peer_runs, Some(2));
}

#[test]
fn garbage_from_a_peer_is_dropped() {
    let (mut a, _) = joined_pair();
    assert!(!locker::service::step::peer(&mut a, T0, 0, b"let me go"));
    assert!(!locker::service::step::peer(&mut a, T0, 0, &[0x81, 0xa1, 0x78, 0xc0]));
    assert!(ask(&mut a, T0 + 100 * MS).ok);
}

/// The peer messages among `msgs` that carry a gift.
fn gifts(msgs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    msgs.iter().filter(|m| !gifts_in(m).is_empty()).cloned().collect()
}

/// A bucket pair where a has spent its 3 tokens (of 5: a holds room for
/// 3, b for 2) and asked b, and b's answer: the messages that carry its
/// gift, published at `now` + 1 ms.
fn bucket_gift(a: &mut Service, b: &mut Service, now: u64) -> Vec<Vec<u8>> {
    for left in [2, 1, 0] {
        assert_eq!(ask(a, now).remaining, left);
    }
    let short = ask(a, now);
    assert!(!short.ok && short.retry_after_ms <= 4, "a asks b for tokens: {short:?}");
    deliver(b, now + MS, &outbox(a, now));
    let gift = gifts(&outbox(b, now + MS));
    assert!(!gift.is_empty(), "b gives");
    gift
}

#[test]
fn a_bucket_locker_spends_its_own_tokens_and_gets_more_from_its_peer_within_a_round_trip() {
    let (mut a, mut b) = bucket_pair();
    let now = T0 + 100 * MS;
    let gift = bucket_gift(&mut a, &mut b, now);
    assert!(!ask(&mut b, now + MS).ok, "b gave both its tokens away first");
    deliver(&mut a, now + 2 * MS, &gift);
    // a asked for as many as it had granted; b, asking for nothing itself,
    // gave all it held.
    let more = (0..5).filter(|_| ask(&mut a, now + 2 * MS).ok).count();
    assert_eq!(more, 2, "the gift is a's own");
}

#[test]
fn bucket_gifts_survive_duplicates_and_a_lost_one_is_repaired_by_a_heartbeat() {
    let (mut a, mut b) = bucket_pair();
    let now = T0 + 100 * MS;
    let _lost = bucket_gift(&mut a, &mut b, now);
    // The heartbeat after the next one republishes the gift's total.
    let repair = gifts(&outbox(&mut b, T0 + 200 * MS));
    assert!(!repair.is_empty(), "the gift again");
    deliver(&mut a, T0 + 200 * MS, &repair);
    deliver(&mut a, T0 + 200 * MS, &repair);
    let more = (0..5).filter(|_| ask(&mut a, T0 + 200 * MS).ok).count();
    assert_eq!(more, 2, "counted once");
}

#[test]
fn a_bucket_gift_of_an_ended_period_is_never_used_and_its_room_comes_back_to_the_giver() {
    let (mut a, mut b) = bucket_pair();
    // Heartbeats both ways, so that each still counts the other live.
    let beat = T0 + 850 * MS;
    deliver(&mut b, beat, &outbox(&mut a, beat));
    deliver(&mut a, beat, &outbox(&mut b, beat));
    let gift = bucket_gift(&mut a, &mut b, T0 + 900 * MS);
    deliver(&mut a, T0 + 1000 * MS, &gift);
    assert!(!ask(&mut a, T0 + 1000 * MS).ok, "the gift ended with its period");
    // b's room of 2 refills from empty at 2 of the 5 tokens' rate: 4 per second.
    assert!(!ask(&mut b, T0 + 1249 * MS).ok);
    assert!(ask(&mut b, T0 + 1250 * MS).ok);
}

#[test]
fn a_restarted_bucket_locker_holds_no_room_in_the_period_it_joins_in() {
    let (mut a, mut b) = bucket_pair();
    let now = T0 + 100 * MS;
    assert!(ask(&mut a, now).ok);
    let restart = now + 10 * MS;
    let mut a = service_of(bucket_locker(), "a", restart, 1, restart);
    assert!(!ask(&mut a, restart).ok, "joining: no grant before the peers answer");
    deliver(&mut b, restart, &outbox(&mut a, restart));
    deliver(&mut a, restart + MS, &outbox(&mut b, restart + MS));
    assert!(!stats(&mut a, restart + MS).joining);
    // b knew the earlier run, which may have spent its whole room unheard.
    assert!(!ask(&mut a, restart + 2 * MS).ok, "no room of the period it joined in");
    // Room for 3 from the next period on, empty then: 6 per second.
    assert!(!ask(&mut a, T0 + 1166 * MS).ok);
    assert!(ask(&mut a, T0 + 1167 * MS).ok);
}

/// A counts message sent by node `from` of `nodes`, with each count
/// `(node index, count)` for the default limit's key "k" in T0's slot.
fn counts(nodes: &[(&str, u64)], counts: &[(u32, u32)]) -> Vec<u8> {
    let msg = PeerMsg::Counts(PeerCounts {
        nodes: nodes.iter().map(|&(id, inc)| PeerNode(id.into(), inc)).collect(),
        at: T0,
        counts: counts
            .iter()
            .map(|&(node, n)| PeerCount(DEFAULT_LIMIT.into(), Some("k".into()), T0 / 1000 / MS, node, n))
            .collect(),
        wanted: vec![],
        gave: vec![],
    });
    let mut body = Vec::new();
    wire::encode(&msg, &mut body);
    body
}

#[test]
fn a_count_above_what_one_locker_can_grant_is_refused_and_counted() {
    let (mut a, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    assert!(locker::service::step::peer(&mut b, now, 0, &counts(&[("a", T0)], &[(0, u32::MAX)])));
    assert!(locker::service::step::peer(&mut b, now, 0, &counts(&[("a", T0)], &[(0, 11)])), "one above max_requests");
    let r = ask(&mut b, now);
    assert!(r.ok, "the key is not blocked");
    assert_eq!(r.remaining, 4, "b's own 5, less 1");
    assert_eq!(stats(&mut b, now).peers[0].rejected, 2);
    // A plausible count still counts.
    assert!(locker::service::step::peer(&mut b, now, 0, &counts(&[("a", T0)], &[(0, 9)])));
    assert!(!ask(&mut b, now).ok);
    let _ = ask(&mut a, now);
}

#[test]
fn a_flood_of_made_up_node_ids_leaves_a_bounded_node_table() {
    let (_, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    for batch in 0..120u64 {
        let ids: Vec<String> = (0..250).map(|i| format!("made-up-{batch}-{i}")).collect();
        let mut nodes = vec![("a", T0)];
        nodes.extend(ids.iter().map(|id| (id.as_str(), 1)));
        let made_up: Vec<(u32, u32)> = (1..=250).map(|i| (i, 1)).collect();
        assert!(locker::service::step::peer(&mut b, now, 0, &counts(&nodes, &made_up)));
    }
    let s = stats(&mut b, now);
    assert!(s.peer_runs.unwrap() <= locker::core::peering::MAX_RUNS_PER_PEER as u64, "{:?}", s.peer_runs);
    assert!(s.peers[0].rejected >= 30_000 - locker::core::peering::MAX_RUNS_PER_PEER as u64);
    let r = ask(&mut b, now);
    assert!(r.ok);
    assert!(r.remaining >= 10 - locker::core::peering::MAX_RUNS_PER_PEER as u32, "at most the admitted runs count");
}

#[test]
fn nobody_may_speak_as_this_locker_or_for_an_unconfigured_peer() {
    let (_, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    assert!(locker::service::step::peer(&mut b, now, 0, &counts(&[("b", T0)], &[(0, 10)])), "understood, and refused");
    assert!(!locker::service::step::peer(&mut b, now, 1, &counts(&[("a", T0)], &[(0, 10)])), "there is no second peer");
    assert!(ask(&mut b, now).ok);
}

#[test]
fn a_limit_defined_differently_is_flagged_and_never_mixed() {
    let a = service_of(locker(10), "a", T0, 1, T0);
    let b = service_of(locker(20), "b", T0, 1, T0);
    let mut a = a;
    let mut b = b;
    for round in 0..3 {
        let now = T0 + round * 10 * MS;
        let (from_a, from_b) = (outbox(&mut a, now), outbox(&mut b, now));
        deliver(&mut b, now, &from_a);
        deliver(&mut a, now, &from_b);
    }
    let now = T0 + 600 * MS; // past the grace: each serves with what it has
    for i in 0..10 {
        assert!(ask(&mut b, now + i * 5 * MS).ok);
    }
    deliver(&mut a, now + 80 * MS, &outbox(&mut b, now + 80 * MS));
    let r = ask(&mut a, now + 90 * MS);
    assert!(r.ok, "b's 10 of its 20 are not a's 10");
    assert_eq!(r.remaining, 4, "a owns its 5 of 10");
    let s = stats(&mut a, now + 90 * MS);
    assert_eq!(s.peers[0].mismatched_limits, [DEFAULT_LIMIT]);
}

#[test]
fn a_locker_paused_past_the_peer_dead_time_learns_the_counts_again() {
    let (mut a, mut b) = joined_pair();
    let now = T0 + 100 * MS;
    locker::service::step::note(&mut a, Note::Paused { now, paused: 400 * MS });
    assert!(ask(&mut a, now).ok, "a short pause changes nothing");
    // a is frozen for 3 s; meanwhile b grants its 5 in the slot a resumes in.
    let resumed = T0 + 3100 * MS;
    for i in 0..5 {
        assert!(ask(&mut b, resumed - 50 * MS + i * 5 * MS).ok);
    }
    locker::service::step::note(&mut a, Note::Paused { now: resumed, paused: 3000 * MS });
    let held = ask(&mut a, resumed);
    assert!(!held.ok, "a stale view grants nothing");
    assert!(stats(&mut a, resumed).joining);
    deliver(&mut b, resumed, &outbox(&mut a, resumed));
    deliver(&mut a, resumed + MS, &outbox(&mut b, resumed + MS));
    assert!(!stats(&mut a, resumed + MS).joining);
    let granted = (0..10).filter(|i| ask(&mut a, resumed + 10 * MS + i * 5 * MS).ok).count();
    assert_eq!(granted, 5, "a owns its 5, whatever b granted while a was away");
}

/// The gifts a published message carries.
fn gifts_in(body: &[u8]) -> Vec<wire::PeerGift> {
    wire::decode_peer(body).unwrap().counts().map(|p| p.gave.clone()).unwrap_or_default()
}
