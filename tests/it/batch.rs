//! Batched asks: on the seam, every entry is answered exactly as the same
//! ask sent on its own (replies, counters, reservations, peer counts), and
//! a batch packed by hand is read; against the real locker, only the
//! client's `Client::ask_many` (a batch past the message size gets no
//! answer) and `locker bench --batch`.

use std::time::Duration;

use locker::core::{Algorithm, Limit, Locker, NodeKey, Peering, PeeringSettings, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, Ask, GoReply, Reply, RequestMap, StatsReply, MAX_BATCH_ASKS};
use locker::{Client, ClientError};

use crate::support::{run_locker, seam, Served};

const MS: u64 = 1_000_000;
/// The start of a 1 s slot.
const T0: u64 = 1_700_000_000_000 * MS;

fn locker() -> Locker {
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(3, 1.0).unwrap()).unwrap();
    let smooth =
        Limit::with_algorithm("smooth", Quota::new(10, 1.0).unwrap(), Algorithm::token_bucket(4).unwrap()).unwrap();
    let db = Limit::with_algorithm("db", Quota::new(2, 1.0).unwrap(), Algorithm::Semaphore).unwrap();
    Locker::new(default, vec![smooth, db], 6)
}

/// A mix of every kind of ask, including ones that are errors.
fn mixed_asks() -> Vec<Ask<'static>> {
    let mut asks = Vec::new();
    // Three rounds: more asks than the service looks up at once.
    for _ in 0..3 {
        asks.extend([
            Ask::new(),
            Ask::new().key("a").cost(2),
            Ask::new().key("a").cost(2).max_wait_ms(2_000),
            Ask::new().key("b").cost(9).up_to(),
            Ask::new().key("b").cost(0),
            Ask::new().limit("smooth").key("s").cost(3),
            Ask::new().limit("smooth").key("s").cost(3).max_wait_ms(500),
            Ask::new().limit("smooth").cost(9).up_to(),
            Ask::new().limit("nope"),
            Ask::new().limit("db"),
            Ask::new().cost(4),
            Ask::new().max_wait_ms(4_000_000),
        ]);
    }
    // Past --max-keys (6 live keys in all): a new key is an error.
    asks.extend(["k1", "k2", "k3", "k4", "k5"].map(|k| Ask::new().key(k)));
    asks
}

fn single(s: &mut Service, now: u64, ask: &Ask) -> Result<GoReply, String> {
    let mut body = Vec::new();
    wire::encode(&ask.to_map(), &mut body);
    match wire::decode_reply(&seam(s, now, &body)).unwrap() {
        Reply::Answer(r) => Ok(r),
        Reply::Refused(e) => Err(e),
    }
}

fn batch_body(asks: &[Ask]) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode_batch(asks, &mut body);
    body
}

fn batch(s: &mut Service, now: u64, asks: &[Ask]) -> Reply<Vec<Result<GoReply, String>>> {
    wire::decode_batch_reply(&seam(s, now, &batch_body(asks))).unwrap()
}

fn stats(s: &mut Service, now: u64) -> StatsReply {
    let mut body = Vec::new();
    wire::encode(&RequestMap { op: Some("stats"), ..RequestMap::default() }, &mut body);
    match wire::decode_reply(&seam(s, now, &body)).unwrap() {
        Reply::Answer(r) => r,
        Reply::Refused(e) => panic!("{e}"),
    }
}

#[test]
fn every_entry_is_answered_as_the_same_ask_alone() {
    let asks = mixed_asks();
    let (mut one_by_one, mut batched) = (Service::new(locker()), Service::new(locker()));
    let now = T0 + 300 * MS;
    let singles: Vec<_> = asks.iter().map(|a| single(&mut one_by_one, now, a)).collect();
    let Reply::Answer(replies) = batch(&mut batched, now, &asks) else { panic!("the batch was refused") };
    assert_eq!(replies, singles);
    // The mix covers go, sorry, reservations and errors.
    assert!(replies.iter().any(|r| r.as_ref().is_ok_and(|g| g.ok && g.wait_ms.is_some_and(|w| w > 0))));
    assert!(replies.iter().any(|r| r.as_ref().is_ok_and(|g| !g.ok)));
    assert!(replies.iter().any(|r| r.as_ref().is_err_and(|e| e.contains("too many live keys"))));
    assert!(replies.iter().any(|r| r.as_ref().is_err_and(|e| e.contains("semaphore"))));
    // The counters and the reservations are the same too: later asks see them.
    assert_eq!(stats(&mut batched, now), stats(&mut one_by_one, now));
    let later = now + 800 * MS;
    let after: Vec<_> = asks.iter().map(|a| single(&mut one_by_one, later, a)).collect();
    assert_eq!(batch(&mut batched, later, &asks), Reply::Answer(after));
}

#[test]
fn entries_that_cannot_be_read_are_errors_for_themselves_only() {
    let mut s = Service::new(locker());
    // [{key: "a"}, {op: "stats"}, 7, {cost: "x"}, {}]
    let body = b"\x82\xa2op\xa5batch\xa4asks\x95\x81\xa3key\xa1a\x81\xa2op\xa5stats\x07\x81\xa4cost\xa1x\x80";
    let Reply::Answer(replies) = wire::decode_batch_reply(&seam(&mut s, T0, body)).unwrap() else { panic!() };
    assert_eq!(replies.len(), 5);
    assert!(replies[0].as_ref().unwrap().ok);
    assert!(replies[1].as_ref().unwrap_err().contains("a batch entry is a go"), "{:?}", replies[1]);
    assert!(replies[2].as_ref().unwrap_err().contains("must be a map"), "{:?}", replies[2]);
    assert!(replies[3].as_ref().unwrap_err().contains("wrong type"), "{:?}", replies[3]);
    assert_eq!(replies[4].as_ref().unwrap().remaining, 2, "the unkeyed count is apart from key a's");
    let st = stats(&mut s, T0);
    assert_eq!(st.errors, 3, "each unreadable entry counts as a request that failed");
    assert_eq!((st.limits[0].requests, st.limits[0].go), (2, 2));
}

#[test]
fn a_batch_that_is_too_long_or_malformed_is_refused_whole() {
    let mut s = Service::new(locker());
    let too_many = vec![Ask::new().cost(0); MAX_BATCH_ASKS + 1];
    let refused = wire::decode_batch_reply(&seam(&mut s, T0, &batch_body(&too_many))).unwrap();
    assert!(matches!(&refused, Reply::Refused(e) if e.contains("at most 1000 asks")), "{refused:?}");
    let mut cut = batch_body(&[Ask::new(), Ask::new()]);
    cut.pop();
    assert!(matches!(wire::decode_batch_reply(&seam(&mut s, T0, &cut)).unwrap(), Reply::Refused(_)));
    let st = stats(&mut s, T0);
    assert_eq!(st.limits[0].requests, 0, "no ask of a refused batch was decided");
    assert_eq!(st.errors, 2);
    let full = vec![Ask::new().cost(0); MAX_BATCH_ASKS];
    let Reply::Answer(replies) = batch(&mut s, T0, &full) else { panic!("a full batch is served") };
    assert_eq!(replies.len(), MAX_BATCH_ASKS);
    assert!(replies.iter().all(|r| r.as_ref().is_ok_and(|g| g.ok && g.remaining == 3)), "peeks take nothing");
}

fn peered(now: u64) -> Service {
    let me = NodeKey { id: "a".into(), incarnation: 1 };
    let settings = PeeringSettings::new(me, vec!["tcp://peer".into()], 500 * MS, 1000 * MS);
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(100, 1.0).unwrap()).unwrap();
    Service::peered(Locker::new(limit, vec![], 100), Peering::new(settings, now), now)
}

fn counts_sent(s: &mut Service, now: u64) -> Vec<wire::PeerCount> {
    let msgs = crate::support::published(s, now);
    let mut counts: Vec<_> = msgs
        .iter()
        .flat_map(|m| wire::decode_peer(m).unwrap().counts().map(|p| p.counts.clone()).unwrap_or_default())
        .collect();
    counts.sort_by(|a, b| (&a.1, a.4).cmp(&(&b.1, b.4)));
    counts
}

#[test]
fn peers_hear_of_each_entry_as_of_a_separate_ask() {
    // Past the joining grace, and in the slot after it (a locker whose
    // peer never answered owns none of the slot it joined in), so both grant.
    let (start, now) = (T0, T0 + 1000 * MS);
    let (mut one_by_one, mut batched) = (peered(start), peered(start));
    counts_sent(&mut one_by_one, now);
    counts_sent(&mut batched, now);
    let asks = [Ask::new().key("x"), Ask::new().key("y").cost(3), Ask::new().key("x"), Ask::new()];
    for a in &asks {
        assert!(single(&mut one_by_one, now, a).unwrap().ok);
    }
    let Reply::Answer(replies) = batch(&mut batched, now, &asks) else { panic!() };
    assert!(replies.iter().all(|r| r.as_ref().unwrap().ok));
    // Grants reach the peers with the next heartbeat, one count per key.
    assert!(counts_sent(&mut batched, now).is_empty(), "a grant alone sends nothing");
    let later = now + 100 * MS;
    let sent = counts_sent(&mut batched, later);
    assert_eq!(sent, counts_sent(&mut one_by_one, later));
    assert_eq!(sent.iter().filter(|c| c.1.as_deref() == Some("x")).count(), 1, "{sent:?}");
    assert!(sent.iter().any(|c| c.1.as_deref() == Some("x") && c.4 == 2), "{sent:?}");
}

#[test]
fn the_client_asks_many_in_one_round_trip() {
    let d = Served::start(&["--max-requests", "3", "--in-seconds", "60", "--max-message-size", "4096"]);
    let mut c = Client::new([d.endpoint.as_str()], Duration::from_secs(5)).unwrap();
    let asks = [Ask::new().key("a"), Ask::new().key("a").cost(2), Ask::new().key("a"), Ask::new().limit("nope")];
    let replies = c.ask_many(&asks).unwrap();
    let ok: Vec<bool> = replies[..3].iter().map(|r| r.as_ref().unwrap().ok).collect();
    assert_eq!(ok, [true, true, false]);
    assert_eq!(replies[3], Err("unknown limit \"nope\"".to_owned()));
    assert!(c.ask_many(&[]).unwrap().is_empty());
    let too_many = vec![Ask::new(); MAX_BATCH_ASKS + 1];
    let mut impatient = Client::new([d.endpoint.as_str()], Duration::from_millis(300)).unwrap();
    match impatient.ask_many(&too_many) {
        // 1001 asks of 7 bytes each are past the 4096-byte message size, so
        // ZeroMQ drops the message and the client gets no answer.
        Err(ClientError::NoAnswer { .. }) => {}
        other => panic!("expected no answer, got {other:?}"),
    }
    let stats = c.stats().unwrap();
    assert_eq!((stats.limits[0].requests, stats.limits[0].go, stats.limits[0].sorry), (3, 2, 1));
}

#[test]
fn a_batch_packed_by_hand_by_any_messagepack_client_is_answered() {
    let limit = Limit::new(DEFAULT_LIMIT, Quota::new(1, 60.0).unwrap()).unwrap();
    let mut s = Service::new(Locker::new(limit, vec![], 1000));
    // {"op": "batch", "asks": [{"key": "u"}, {"key": "u"}]}, packed by hand.
    let reply = seam(&mut s, T0, b"\x82\xa2op\xa5batch\xa4asks\x92\x81\xa3key\xa1u\x81\xa3key\xa1u");
    let Reply::Answer(replies) = wire::decode_batch_reply(&reply).unwrap() else { panic!("{reply:?}") };
    let ok: Vec<bool> = replies.iter().map(|r| r.as_ref().unwrap().ok).collect();
    assert_eq!(ok, [true, false]);
}

#[test]
fn bench_counts_every_decision_of_every_batch() {
    let d = Served::start(&["--max-requests", "1000000", "--in-seconds", "86400"]);
    let args = ["bench", "--connect", &d.endpoint, "--clients", "2", "--duration", "200ms", "--timeout", "2s"];
    let batch = ["--keys", "300", "--prefill", "--batch", "7", "--pipeline", "4", "--json"];
    let out = run_locker(&[&args[..], &batch[..]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (requests, decisions) = (report["requests"].as_u64().unwrap(), report["decisions"].as_u64().unwrap());
    assert!(requests > 0, "{report}");
    assert_eq!(decisions, 7 * requests, "{report}");
    assert_eq!(report["go"].as_u64(), Some(decisions), "{report}");
    assert_eq!(report["batch"], 7);
    assert!(report["decisions_per_second"].as_f64().unwrap() > report["requests_per_second"].as_f64().unwrap());
    let stats = run_locker(&["stats", "--connect", &d.endpoint, "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["live_keys"], 300, "the prefill's batches asked every key: {stats}");
    let plain = run_locker(&[&args[..], &["--plain", "--batch", "2"][..]].concat());
    assert_eq!(plain.status.code(), Some(2), "--batch needs the structured form");
}
