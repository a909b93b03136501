//! What the state log keeps across a restart, on the service seam: each
//! request's records, handed to the log (a `Keep`) before the call that
//! answered it returns, as the daemon's keeper appends them, are replayed into a fresh service
//! (`Service::restore`) as `locker serve --state` does after a kill -9.
//! For each kind, at exact instants: a fixed window (two restarts in one
//! slot, every grant of a batch, a restart after the slot ended), a token
//! bucket, a reservation, a lease, a rolling window (within its window and
//! after it).
//!
//! And peered: a restarted locker's count from its log and the same count
//! in a peer's snapshot merge by maximum, for a fixed and a rolling window.
//!
//! The log lives in memory here. What this does not test: the file on a
//! real disk, its damage, compaction and fsync, and a real kill -9 (see
//! `state`).

use locker::core::{Algorithm, Limit, Locker, Nanos, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::state::{Keep, Record, Restored};
use locker::wire::{self, Ask, LeaseAsk, LeaseReply, Release, RequestMap};

use crate::support::answer;

const MS: Nanos = 1_000_000;
/// An instant on a 20 s boundary (and so on a 1 s one).
const T0: Nanos = 85_000_000 * 20_000 * MS;

/// A state log kept in memory as the daemon keeps it on disk: the encoded
/// records, in the order written.
#[derive(Default)]
struct Log {
    records: Vec<Vec<u8>>,
    next_run: u32,
    /// The run being written, once one started.
    run: Option<u32>,
}

impl Keep for Log {
    fn run(&self) -> Option<u32> {
        self.run
    }

    fn keep(&mut self, record: &Record) {
        self.records.push(encoded(record));
    }
}

fn encoded(record: &Record) -> Vec<u8> {
    let mut bytes = vec![0; record.encoded_len()];
    record.encode(&mut bytes);
    bytes
}

impl Log {
    /// Starts a run of `service` at `now` on this log, as a locker started
    /// with `--state` does: puts back what is live, starts the log again
    /// with what it keeps, and notes every change from then on.
    fn start(&mut self, mut service: Service, now: Nanos) -> (Service, Restored) {
        let run = self.next_run;
        let read = self.records.iter().map(|b| Record::decode(b).expect("a record the log wrote"));
        let (restored, keep) = locker::service::step::restore(&mut service, now, run, read);
        // Named as the daemon names a run: its node, when peered.
        let (node, incarnation) = service
            .peering()
            .map(|p| p.nodes().me())
            .map_or((String::new(), now), |n| (n.id.to_string(), n.incarnation));
        let mut rewritten = vec![encoded(&Record::Run { run, incarnation, node: &node })];
        rewritten.extend(keep.iter().map(encoded));
        self.records = rewritten;
        self.next_run = run + 1;
        self.run = Some(run);
        (service, restored)
    }

    /// `body` answered by `service` at `now`, with what it left behind
    /// written before the reply goes.
    fn serve(&mut self, service: &mut Service, now: Nanos, body: &[u8]) -> Vec<u8> {
        let mut reply = Vec::new();
        let _ = locker::service::step::request(service, now, 0, body, self, &mut (), &mut reply);
        reply
    }

    /// How many of `n` plain asks at `now` went.
    fn plain_goes(&mut self, service: &mut Service, now: Nanos, n: usize) -> usize {
        (0..n).filter(|_| self.serve(service, now, b"let me go") == b"go").count()
    }

    fn ask(&mut self, service: &mut Service, now: Nanos, ask: &Ask) -> locker::GoReply {
        let mut body = Vec::new();
        wire::encode(&ask.to_map(), &mut body);
        answer(&self.serve(service, now, &body)).expect("an answer")
    }

    fn lease(&mut self, service: &mut Service, now: Nanos, request: RequestMap) -> LeaseReply {
        let mut body = Vec::new();
        wire::encode(&request, &mut body);
        answer(&self.serve(service, now, &body)).expect("an answer")
    }
}

/// A lone locker whose default limit is `max` per `secs` of `algorithm`.
fn alone(algorithm: Algorithm, max: u32, secs: f64) -> Service {
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, Quota::new(max, secs).unwrap(), algorithm).unwrap();
    Service::new(Locker::new(limit, vec![], 1000))
}

fn window(max: u32, secs: f64) -> Service {
    alone(Algorithm::FixedWindow, max, secs)
}

#[test]
fn a_locker_restarted_twice_in_one_slot_counts_both_runs_once() {
    let mut log = Log::default();
    let (mut s, _) = log.start(window(100, 20.0), T0 + MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 2 * MS, 60), 60);
    let (mut s, restored) = log.start(window(100, 20.0), T0 + 100 * MS);
    assert_eq!(restored.counts, 1, "the default limit's count in this slot");
    assert_eq!(log.plain_goes(&mut s, T0 + 101 * MS, 25), 25);
    let (mut s, _) = log.start(window(100, 20.0), T0 + 200 * MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 201 * MS, 100), 15, "60 and 25 of 100 went before");
}

#[test]
fn every_grant_of_a_batch_is_kept() {
    // One message of asks is many grants: each is recorded, not only the last.
    let mut log = Log::default();
    let (mut s, _) = log.start(window(3, 20.0), T0 + MS);
    let keys = ["a", "b", "c", "d"];
    let asks: Vec<Ask> = keys.iter().flat_map(|k| [Ask::new().key(k), Ask::new().key(k)]).collect();
    let mut body = Vec::new();
    wire::encode_batch(&asks, &mut body);
    let replies = wire::decode_batch_reply(&log.serve(&mut s, T0 + 2 * MS, &body)).unwrap();
    let wire::Reply::Answer(replies) = replies else { panic!("refused: {replies:?}") };
    assert!(replies.iter().all(|r| r.as_ref().is_ok_and(|g| g.ok)), "{replies:?}");
    let (mut s, restored) = log.start(window(3, 20.0), T0 + 100 * MS);
    assert_eq!(restored.counts, 4, "one count per key");
    for k in keys {
        let go = (0..3).filter(|_| log.ask(&mut s, T0 + 101 * MS, &Ask::new().key(k)).ok).count();
        assert_eq!(go, 1, "key {k}: 2 of 3 went before the restart");
    }
}

#[test]
fn a_restart_after_the_slot_ended_starts_fresh() {
    let mut log = Log::default();
    let (mut s, _) = log.start(window(5, 1.0), T0 + MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 900 * MS, 6), 5);
    let (mut s, restored) = log.start(window(5, 1.0), T0 + 1_000 * MS);
    assert_eq!(restored.counts, 0, "the slot's count ended with it");
    assert_eq!(log.plain_goes(&mut s, T0 + 1_000 * MS, 6), 5);
}

#[test]
fn a_token_bucket_keeps_its_tokens_spent_across_a_restart() {
    // 100 tokens refilled over an hour: 1 ms refills none of the 60 spent.
    let bucket = || alone(Algorithm::token_bucket(100).unwrap(), 100, 3600.0);
    let mut log = Log::default();
    let (mut s, _) = log.start(bucket(), T0);
    assert!(log.ask(&mut s, T0, &Ask::new().key("k").cost(60)).ok);
    let (mut s, restored) = log.start(bucket(), T0 + MS);
    assert_eq!(restored.buckets, 1);
    let reply = log.ask(&mut s, T0 + MS, &Ask::new().key("k").cost(100).up_to());
    assert_eq!((reply.ok, reply.granted), (true, Some(40)), "{reply:?}");
}

#[test]
fn a_reservation_is_still_queued_after_a_restart() {
    let mut log = Log::default();
    let (mut s, _) = log.start(window(5, 20.0), T0 + MS);
    assert!(log.ask(&mut s, T0 + 1_000 * MS, &Ask::new().key("k").cost(5)).ok);
    let reserved = log.ask(&mut s, T0 + 1_000 * MS, &Ask::new().key("k").cost(5).max_wait_ms(30_000));
    assert_eq!((reserved.ok, reserved.wait_ms), (true, Some(19_000)), "the next slot: {reserved:?}");
    let (mut s, restored) = log.start(window(5, 20.0), T0 + 2_000 * MS);
    assert_eq!(restored.reservations, 1);
    let next = log.ask(&mut s, T0 + 2_000 * MS, &Ask::new().key("k").cost(1).max_wait_ms(60_000));
    assert_eq!((next.ok, next.wait_ms), (true, Some(38_000)), "the slot after the reserved one: {next:?}");
}

#[test]
fn a_lease_is_still_held_after_a_restart_and_can_be_released() {
    let semaphore = || alone(Algorithm::Semaphore, 2, 60.0);
    let mut log = Log::default();
    let (mut s, _) = log.start(semaphore(), T0);
    let held = log.lease(&mut s, T0, LeaseAsk::new(DEFAULT_LIMIT, 2).ttl_ms(60_000).to_map());
    assert!(held.ok, "{held:?}");
    let lease = held.lease.unwrap();
    let (mut s, restored) = log.start(semaphore(), T0 + 100 * MS);
    assert_eq!(restored.leases, 1);
    let refused = log.lease(&mut s, T0 + 100 * MS, LeaseAsk::new(DEFAULT_LIMIT, 1).ttl_ms(1_000).to_map());
    assert!(!refused.ok && refused.remaining == 0, "{refused:?}");
    let released = log.lease(&mut s, T0 + 100 * MS, Release { limit: Some(DEFAULT_LIMIT), lease: &lease }.to_map());
    assert!(released.ok, "{released:?}");
    let again = log.lease(&mut s, T0 + 100 * MS, LeaseAsk::new(DEFAULT_LIMIT, 2).ttl_ms(1_000).to_map());
    assert!(again.ok, "{again:?}");
    // The release was kept too: a second restart finds both counts free.
    let (mut s, _) = log.start(semaphore(), T0 + 200 * MS);
    let fresh = log.lease(&mut s, T0 + 200 * MS, LeaseAsk::new(DEFAULT_LIMIT, 1).ttl_ms(1_000).to_map());
    assert!(!fresh.ok, "the lease taken after the release is held: {fresh:?}");
}

#[test]
fn a_rolling_window_restarted_mid_window_regrants_nothing_of_it() {
    // No slot: a rolling window's grants count for 20 s from whenever they went.
    let rolling = || alone(Algorithm::RollingWindow, 5, 20.0);
    let mut log = Log::default();
    let (mut s, _) = log.start(rolling(), T0 + 7_000 * MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 7_000 * MS, 3), 3);
    // Across a fixed window's slot boundary, still within the 20 s.
    let (mut s, _) = log.start(rolling(), T0 + 21_000 * MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 21_000 * MS, 5), 2, "3 of 5 went before the restart");
}

#[test]
fn a_rolling_window_restarted_after_its_window_passed_starts_fresh() {
    let rolling = || alone(Algorithm::RollingWindow, 5, 1.0);
    let mut log = Log::default();
    let (mut s, _) = log.start(rolling(), T0);
    assert_eq!(log.plain_goes(&mut s, T0, 6), 5);
    let (mut s, _) = log.start(rolling(), T0 + 999 * MS);
    assert_eq!(log.plain_goes(&mut s, T0 + 999 * MS, 1), 0, "still counted 1 ms before the window passed");
    // Restored grants count at most a window after their sub-slot (1/64 s) ends.
    let sub_slot = 1_000 * MS / 64;
    let (mut s, _) = log.start(rolling(), T0 + 1_000 * MS + sub_slot);
    assert_eq!(log.plain_goes(&mut s, T0 + 1_000 * MS + sub_slot, 6), 5);
}

/// A locker `id` peered with one other, started at `now`, with the grace
/// of 5 s a restarted locker waits for its peer's snapshot.
fn peered(algorithm: Algorithm, id: &str, now: Nanos) -> Service {
    let limit = Limit::with_algorithm(DEFAULT_LIMIT, Quota::new(100, 20.0).unwrap(), algorithm).unwrap();
    let locker = Locker::new(limit, vec![], 1000);
    let me = NodeKey { id: id.into(), incarnation: now };
    let settings = PeeringSettings::new(me, vec!["tcp://peer".into()], 5_000 * MS, locker.figures().shortest_slot());
    crate::support::first_run(Service::peered(locker, Peering::new(settings, now), now), now)
}

/// Each service's peer messages at `now`, delivered to the other.
fn exchange(a: &mut Service, b: &mut Service, now: Nanos) {
    let (from_a, from_b) = (crate::support::published(a, now), crate::support::published(b, now));
    for m in from_a {
        assert!(locker::service::step::peer(b, now, 0, &m), "a peer message was not understood");
    }
    for m in from_b {
        assert!(locker::service::step::peer(a, now, 0, &m), "a peer message was not understood");
    }
}

/// Locker a keeps a state log; its peer b hears a's grants. After a
/// restart, a gets its earlier run's count twice: from its log and in b's
/// snapshot. Counted once, 40 of 100 are left; counted twice, none.
fn restored_and_snapshot_merge_by_maximum(algorithm: Algorithm) {
    let mut log = Log::default();
    let start = T0 + 1_000 * MS;
    let (mut a, _) = log.start(peered(algorithm, "a", start), start);
    let mut b = peered(algorithm, "b", start);
    let mut now = start;
    for _ in 0..3 {
        exchange(&mut a, &mut b, now);
        now += 10 * MS;
    }
    let mut went = 0;
    while went < 60 {
        let r = log.ask(&mut a, now, &Ask::new());
        went += usize::from(r.ok);
        // Spaced beyond the in-flight window, each want heard by b at once.
        now += 3 * MS;
        exchange(&mut a, &mut b, now);
        assert!(now < start + 5_000 * MS, "a never granted 60: {went}");
    }
    // Grants reach b with a's next heartbeat.
    now += 100 * MS;
    exchange(&mut a, &mut b, now);
    assert_eq!(seam_peek(&mut b, now), 40, "b heard a's 60 grants");
    // A kill -9, and a restart on the same log.
    now += 100 * MS;
    let (mut a, restored) = log.start(peered(algorithm, "a", now), now);
    assert_eq!(restored.counts, 1, "{restored:?}");
    for _ in 0..3 {
        exchange(&mut a, &mut b, now);
        now += 10 * MS;
    }
    assert_eq!(seam_peek(&mut a, now), 40, "the restarted locker counts its earlier run once");
    // Ask the restarted locker alone until it has not granted for 100 ms:
    // counted twice, it would grant none.
    let (mut after, mut last_go) = (0, now);
    while now < last_go + 100 * MS {
        if log.ask(&mut a, now, &Ask::new()).ok {
            after += 1;
            last_go = now;
        }
        now += 3 * MS;
        exchange(&mut a, &mut b, now);
    }
    // Peered windows conserve permits: the 40 the earlier run owned (its
    // own and b's gift) and had not granted died with it, and the new run
    // owns none of the slot it joined in (a rolling window: none of its
    // rights for three windows, and b lent it all it had; docs/peering.md).
    assert_eq!(after, 0, "{after} went after the restart; 40 were left, held by the earlier run");
}

/// What a cost-0 ask at `now` says is left.
fn seam_peek(s: &mut Service, now: Nanos) -> u32 {
    crate::support::seam_ask(s, now, &Ask::new().cost(0)).expect("an answer").remaining
}

#[test]
fn a_restored_count_and_a_peers_snapshot_of_it_merge_by_maximum() {
    restored_and_snapshot_merge_by_maximum(Algorithm::FixedWindow);
}

#[test]
fn a_restored_rolling_count_and_a_peers_snapshot_of_it_merge_by_maximum() {
    restored_and_snapshot_merge_by_maximum(Algorithm::RollingWindow);
}
