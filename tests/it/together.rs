//! Limits checked together (`all`), refunds and resets on the seam: each
//! op's replies and figures, for each counting kind, and their errors.

use locker::core::{Algorithm, Limit, Locker, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, AllReply, Ask, GoReply, Refund, Reply, Reset};

use crate::support::{cli, seam, seam_ask};

const SLOT: u64 = 1_000_000_000;
const T0: u64 = 100 * SLOT;

/// `api`: 5 per second; `day`: 3 per second; `bucket`: a token bucket of
/// 4; `rolling`: 4 in any second; `login`: 3 per second, resettable;
/// `db`: a semaphore.
fn service() -> Service {
    let q = |n, s| Quota::new(n, s).unwrap();
    let limits = vec![
        Limit::new("api", q(5, 1.0)).unwrap(),
        Limit::new("day", q(3, 1.0)).unwrap(),
        Limit::with_algorithm("bucket", q(4, 1.0), Algorithm::token_bucket(4).unwrap()).unwrap(),
        Limit::with_algorithm("rolling", q(4, 1.0), Algorithm::RollingWindow).unwrap(),
        Limit::new("login", q(3, 1.0)).unwrap().with_reset_allowed(true),
        Limit::with_algorithm("db", q(2, 1.0), Algorithm::Semaphore).unwrap(),
    ];
    Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, q(1, 1.0)).unwrap(), limits, 100))
}

pub fn all(s: &mut Service, now: u64, asks: &[Ask]) -> Result<AllReply, String> {
    let mut body = Vec::new();
    wire::encode_all(asks, None, None, &mut body);
    match wire::decode_all_reply(&seam(s, now, &body)).expect("a decodable reply") {
        Reply::Answer(r) => Ok(r),
        Reply::Refused(e) => Err(e),
    }
}

pub fn refund(s: &mut Service, now: u64, limit: &str, key: &str, cost: u64) -> Result<GoReply, String> {
    let mut body = Vec::new();
    wire::encode(&Refund { limit: Some(limit), key: Some(key), cost, parents: None }.to_map(), &mut body);
    crate::support::answer(&seam(s, now, &body))
}

pub fn reset(s: &mut Service, now: u64, limit: &str, key: &str) -> Result<GoReply, String> {
    let mut body = Vec::new();
    wire::encode(&Reset { limit: Some(limit), key: Some(key) }.to_map(), &mut body);
    crate::support::answer(&seam(s, now, &body))
}

fn go(s: &mut Service, now: u64, limit: &str, cost: u64) -> GoReply {
    seam_ask(s, now, &Ask::new().limit(limit).key("u").cost(cost)).unwrap()
}

/// Issue 38: when the second of two limits is full, the first keeps its permits.
#[test]
fn when_the_second_limit_is_full_the_first_keeps_its_permits() {
    let mut s = service();
    let two = [Ask::new().limit("api").key("u").cost(2), Ask::new().limit("day").key("u").cost(2)];
    let first = all(&mut s, T0, &two).unwrap();
    assert!(first.ok);
    assert_eq!(first.replies.iter().map(|r| (r.ok, r.remaining)).collect::<Vec<_>>(), [(true, 3), (true, 1)]);
    let refused = all(&mut s, T0 + 1, &two).unwrap();
    assert!(!refused.ok, "day has 1 left, the part asks 2");
    assert_eq!((refused.replies[0].ok, refused.replies[0].remaining), (true, 3), "api would go, charged nothing");
    assert_eq!((refused.replies[1].ok, refused.replies[1].remaining), (false, 1));
    assert_eq!(refused.retry_after_ms, refused.replies[1].retry_after_ms);
    assert!(refused.retry_after_ms > 0);
    // Asked alone afterwards, api shows every permit the refused whole did not take.
    let alone = go(&mut s, T0 + 2, "api", 3);
    assert_eq!((alone.ok, alone.remaining), (true, 0));
    assert!(!go(&mut s, T0 + 3, "api", 1).ok);
    assert!(go(&mut s, T0 + 4, "day", 1).ok, "day kept its last permit too");
}

/// A refused whole charges nothing to a bucket or a rolling window either,
/// and the same key named twice counts both parts.
#[test]
fn a_refused_whole_charges_nothing_to_any_kind() {
    let mut s = service();
    let parts = [
        Ask::new().limit("bucket").key("u").cost(3),
        Ask::new().limit("rolling").key("u").cost(3),
        Ask::new().limit("api").key("u").cost(3),
        Ask::new().limit("api").key("u").cost(3),
    ];
    let refused = all(&mut s, T0, &parts).unwrap();
    assert!(!refused.ok, "api twice asks 6 of 5");
    assert_eq!(refused.replies.iter().map(|r| r.ok).collect::<Vec<_>>(), [true, true, true, false]);
    assert_eq!(go(&mut s, T0 + 1, "bucket", 4).remaining, 0, "the bucket is still full");
    assert_eq!(go(&mut s, T0 + 1, "rolling", 4).remaining, 0, "the window is still empty");
    assert_eq!(go(&mut s, T0 + 1, "api", 5).remaining, 0);
    let granted = all(&mut s, T0 + 2 * SLOT, &parts[..3]).unwrap();
    assert!(granted.ok);
    assert_eq!(granted.replies.iter().map(|r| r.remaining).collect::<Vec<_>>(), [1, 1, 2]);
}

#[test]
fn parts_that_cannot_be_asked_together_are_errors_naming_them() {
    let mut s = service();
    let api = Ask::new().limit("api").key("u");
    let semaphore = all(&mut s, T0, &[api, Ask::new().limit("db")]).unwrap_err();
    assert!(semaphore.contains("part 2") && semaphore.contains("\"db\" is a semaphore"), "{semaphore}");
    let up_to = all(&mut s, T0, &[api, api.up_to()]).unwrap_err();
    assert!(up_to.contains("part 2") && up_to.contains("up_to"), "{up_to}");
    let unknown = all(&mut s, T0, &[Ask::new().limit("nope"), api]).unwrap_err();
    assert!(unknown.contains("part 1") && unknown.contains("unknown limit \"nope\""), "{unknown}");
    let too_many = all(&mut s, T0, &[api; 17]).unwrap_err();
    assert!(too_many.contains("at most 16 parts, this one has 17"), "{too_many}");
    // [{"op": "stats"}] as a part.
    let stats = b"\x82\xa2op\xa3all\xa4asks\x91\x81\xa2op\xa5stats";
    let e = crate::support::answer::<GoReply>(&seam(&mut s, T0, stats)).unwrap_err();
    assert!(e.contains("part 1") && e.contains("\"stats\""), "{e}");
    assert!(go(&mut s, T0, "api", 5).ok, "no error charged anything");
    assert_eq!(all(&mut s, T0, &[api; 16]).unwrap().replies.len(), 16, "16 parts are allowed");
}

/// Issue 38: a refund of 2 after a go of 5 lets exactly 2 more go in the
/// same slot, and never more than the limit.
#[test]
fn a_refund_of_two_after_five_lets_exactly_two_more_go() {
    let mut s = service();
    assert_eq!(go(&mut s, T0, "api", 5).remaining, 0);
    let back = refund(&mut s, T0 + 1, "api", "u", 2).unwrap();
    assert_eq!((back.ok, back.granted, back.remaining), (true, Some(2), 2));
    assert!(go(&mut s, T0 + 2, "api", 1).ok);
    assert!(go(&mut s, T0 + 3, "api", 1).ok);
    assert!(!go(&mut s, T0 + 4, "api", 1).ok, "exactly two more");
    // Five taken in all, two given back and taken again: nothing more to give.
    let more = refund(&mut s, T0 + 5, "api", "u", 10).unwrap();
    assert_eq!((more.granted, more.remaining), (Some(5), 5), "never more than the key took");
    let none = refund(&mut s, T0 + 6, "api", "u", 10).unwrap();
    assert_eq!((none.granted, none.remaining), (Some(0), 5), "a refund never makes room the limit does not have");
    assert_eq!(go(&mut s, T0 + 7, "api", 5).remaining, 0);
    assert!(!go(&mut s, T0 + 8, "api", 1).ok);
}

#[test]
fn refunds_give_back_only_what_still_counts_for_each_kind() {
    let mut s = service();
    // A slot that ended has nothing left to give back.
    go(&mut s, T0, "api", 5);
    assert_eq!(refund(&mut s, T0 + SLOT, "api", "u", 5).unwrap().granted, Some(0));
    // A bucket gets back the tokens it lacks, never above its burst.
    go(&mut s, T0, "bucket", 4);
    assert_eq!(refund(&mut s, T0 + SLOT / 2, "bucket", "u", 4).unwrap().granted, Some(2), "2 refilled already");
    assert_eq!(go(&mut s, T0 + SLOT / 2, "bucket", 4).remaining, 0);
    assert!(!go(&mut s, T0 + SLOT / 2, "bucket", 1).ok);
    // A rolling window gets back its grants still in the window.
    go(&mut s, T0, "rolling", 3);
    let back = refund(&mut s, T0 + 10, "rolling", "u", 2).unwrap();
    assert_eq!((back.granted, back.remaining), (Some(2), 3));
    assert_eq!(go(&mut s, T0 + 11, "rolling", 3).remaining, 0);
    assert!(!go(&mut s, T0 + 12, "rolling", 1).ok);
    assert!(refund(&mut s, T0, "db", "u", 1).unwrap_err().contains("semaphore"));
    assert!(refund(&mut s, T0, "nope", "u", 1).unwrap_err().contains("unknown limit"));
}

/// Issue 38: a reset is refused unless the limit allows it.
#[test]
fn a_reset_is_refused_unless_the_limit_allows_it() {
    let mut s = service();
    go(&mut s, T0, "api", 5);
    let refused = reset(&mut s, T0, "api", "u").unwrap_err();
    assert!(refused.contains("\"api\" does not allow a reset") && refused.contains("allow_reset"), "{refused}");
    assert!(!go(&mut s, T0, "api", 1).ok, "the refused reset cleared nothing");
    go(&mut s, T0, "login", 3);
    let done = reset(&mut s, T0 + 1, "login", "u").unwrap();
    assert_eq!((done.ok, done.remaining), (true, 3));
    assert_eq!(go(&mut s, T0 + 2, "login", 3).remaining, 0, "the key's whole count is back");
    assert!(!go(&mut s, T0 + 3, "login", 1).ok);
    assert!(reset(&mut s, T0, "db", "u").unwrap_err().contains("semaphore"));
}

/// The limits of the real-locker tests: a minute's slots, so that none
/// ends while a test runs.
const LIMITS: &str = "
[[limits]]
name = 'api'
max_requests = 6
in_seconds = 600
[[limits]]
name = 'day'
max_requests = 2
in_seconds = 600
[[limits]]
name = 'login'
max_requests = 3
in_seconds = 600
allow_reset = true
";

/// Every op against a real locker from the command line: `ask` with two
/// `--limit`, `refund` and `reset`, with the figures of issue 38.
#[test]
fn a_real_locker_answers_all_refund_and_reset_from_the_command_line() {
    let config = crate::support::TempFile::new("together.toml", LIMITS);
    let d = crate::support::Daemon::start(&["--config", config.path()]);
    let both = ["ask", "--limit", "api", "--limit", "day", "--key", "u"];
    assert_eq!(cli(&d.endpoint, &both).0, Some(0));
    assert_eq!(cli(&d.endpoint, &both).0, Some(0));
    let (code, out, _) = cli(&d.endpoint, &both);
    assert_eq!(code, Some(1), "day is full");
    assert!(out.starts_with("sorry\n  day: sorry, 0 left"), "{out}");
    // The refused whole charged api nothing: 4 of its 6 are left.
    let (code, out, _) = cli(&d.endpoint, &["ask", "--limit", "api", "--key", "u", "--cost", "4", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, v["ok"].as_bool(), v["remaining"].as_u64()), (Some(0), Some(true), Some(0)), "{out}");
    let (code, out, _) = cli(&d.endpoint, &["refund", "--limit", "api", "--key", "u", "--cost", "2"]);
    assert_eq!((code, out.as_str()), (Some(0), "refunded 2, 2 left\n"));
    let one = ["ask", "--limit", "api", "--key", "u"];
    let after: Vec<_> = (0..3).map(|_| cli(&d.endpoint, &one).0).collect();
    assert_eq!(after, [Some(0), Some(0), Some(1)], "exactly two more go");
    let (code, _, err) = cli(&d.endpoint, &["reset", "--limit", "api", "--key", "u"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("limit \"api\" does not allow a reset"), "{err}");
    for _ in 0..3 {
        cli(&d.endpoint, &["ask", "--limit", "login", "--key", "alice"]);
    }
    assert_eq!(cli(&d.endpoint, &["ask", "--limit", "login", "--key", "alice"]).0, Some(1));
    let (code, out, _) = cli(&d.endpoint, &["reset", "--limit", "login", "--key", "alice"]);
    assert_eq!((code, out.as_str()), (Some(0), "reset, 3 left\n"));
    assert_eq!(cli(&d.endpoint, &["ask", "--limit", "login", "--key", "alice"]).0, Some(0));
}

/// Peered, a refused whole charges no part either: the group still grants
/// exactly the first limit's whole quota when it is asked alone afterwards.
#[test]
fn peered_lockers_charge_a_refused_whole_to_no_part() {
    let config = crate::support::TempFile::new("together-peered.toml", LIMITS);
    let group = crate::support::Peered::start(2, &["--config", config.path()]);
    group.wait_joined(1);
    let mut clients: Vec<locker::Client> =
        (0..2).map(|i| locker::Client::new([group.endpoint(i)], std::time::Duration::from_secs(2)).unwrap()).collect();
    let both = [Ask::new().limit("api").key("u"), Ask::new().limit("day").key("u")];
    let mut together = 0;
    for i in 0..8 {
        let reply = clients[i % 2].all(&both).unwrap();
        together += usize::from(reply.ok);
        assert!(reply.ok || reply.replies.iter().any(|r| !r.ok), "a refusal names the part that refused");
    }
    assert_eq!(together, 2, "day's 2 permits, shared by the group");
    let mut alone = 0;
    for i in 0..12 {
        alone += usize::from(clients[i % 2].ask(&Ask::new().limit("api").key("u")).unwrap().ok);
    }
    assert_eq!(alone, 6 - together, "every api permit the refused wholes did not take");
}

/// Peered on a simulated clock: a refund goes back to this locker's own
/// share, and the slot still never grants more than its limit across the
/// group (a peer's echo of the higher count may take the refund back: an
/// over-count, never more than the limit).
#[test]
fn a_peered_refund_never_lets_the_group_grant_more_than_the_limit() {
    use locker::sim::{self, Group};
    const MS: u64 = 1_000_000;
    let make = |boot: &sim::Boot| {
        let limit = Limit::new(DEFAULT_LIMIT, Quota::new(10, 1.0).unwrap()).unwrap();
        sim::peered(Locker::new(limit, vec![], 100), boot, 300 * MS)
    };
    let mut g = Group::new(2, crate::group::T0, 7, Box::new(make));
    g.advance(800 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    let slot = g.now() / SLOT;
    assert!(g.ask(0, &Ask::new().key("k").cost(5)).unwrap().ok, "locker 0 owns half the slot");
    let mut body = Vec::new();
    wire::encode(&Refund { limit: None, key: Some("k"), cost: 2, parents: None }.to_map(), &mut body);
    let back: GoReply = crate::support::answer(&g.request(0, &body)).unwrap();
    assert_eq!(back.granted, Some(2));
    let mut after = 0;
    while g.now() / SLOT == slot && g.now() % SLOT < 600 * MS {
        for i in 0..2 {
            after += usize::from(g.ask(i, &Ask::new().key("k").hold_ms(0)).unwrap().ok);
        }
        g.advance(5 * MS);
    }
    eprintln!("after the refund: {after}");
    assert!((5..=7).contains(&after), "5 left, and the 2 given back unless an echo took them: {after}");
}

/// A batch's reply and an `all`'s that could not be delivered give back
/// every go in them, each part what it took (issue 36): the same asks go
/// again, and a refused part takes nothing back.
#[test]
fn an_undelivered_batch_or_all_gives_back_each_go_in_it() {
    let mut s = service();
    let asks = [Ask::new().limit("api").key("u").cost(3), Ask::new().limit("day").key("u").cost(4)];
    let mut batch = Vec::new();
    wire::encode_batch(&asks, &mut batch);
    let reply = seam(&mut s, T0, &batch);
    crate::support::undelivered(&mut s, T0, &batch, &reply);
    assert_eq!(go(&mut s, T0, "api", 0).remaining, 5, "the batch's go of 3 given back");
    assert_eq!(go(&mut s, T0, "day", 0).remaining, 3, "the refused entry took nothing, gave nothing");
    let mut whole = Vec::new();
    wire::encode_all(&[asks[0], Ask::new().limit("day").key("u").cost(2)], None, None, &mut whole);
    let reply = seam(&mut s, T0, &whole);
    assert_eq!((go(&mut s, T0, "api", 0).remaining, go(&mut s, T0, "day", 0).remaining), (2, 1));
    crate::support::undelivered(&mut s, T0, &whole, &reply);
    assert_eq!((go(&mut s, T0, "api", 0).remaining, go(&mut s, T0, "day", 0).remaining), (5, 3));
}

/// Issue 38, in batches too: a batch's `all` entry whose second part is
/// full charges nothing to its first, while the entries around it are
/// decided as they would be alone; its reply is the `all`'s reply map.
#[test]
fn an_all_in_a_batch_charges_nothing_when_a_part_is_full() {
    let mut s = service();
    assert!(go(&mut s, T0, "day", 3).ok, "day is full");
    let parts = [Ask::new().limit("api").key("u").cost(2), Ask::new().limit("day").key("u")];
    let entries = [
        wire::BatchAsk::Go(Ask::new().limit("api").key("u")),
        wire::BatchAsk::All(&parts),
        wire::BatchAsk::Go(Ask::new().limit("api").key("u")),
    ];
    let mut body = Vec::new();
    wire::encode_batch_entries(&entries, &mut body);
    let reply = seam(&mut s, T0, &body);
    let Reply::Answer(replies) = wire::decode_batch_entries_reply(&reply).unwrap() else { panic!("{reply:?}") };
    let [Ok(wire::EntryReply::Go(a)), Ok(wire::EntryReply::All(whole)), Ok(wire::EntryReply::Go(b))] = &replies[..]
    else {
        panic!("{replies:?}")
    };
    assert!(a.ok && b.ok);
    assert_eq!((a.remaining, b.remaining), (4, 3), "the entries around it counted as alone");
    assert!(!whole.ok && whole.replies[0].ok && !whole.replies[1].ok, "{whole:?}");
    assert_eq!(whole.retry_after_ms, whole.replies[1].retry_after_ms);
    assert_eq!(go(&mut s, T0, "api", 0).remaining, 3, "the refused whole took nothing from api");
    // The same entry when both parts fit: both charged, in its turn.
    let mut body = Vec::new();
    wire::encode_batch_entries(&[wire::BatchAsk::All(&parts[..1]), wire::BatchAsk::Go(parts[0])], &mut body);
    let reply = seam(&mut s, T0, &body);
    let Reply::Answer(replies) = wire::decode_batch_entries_reply(&reply).unwrap() else { panic!() };
    let Ok(wire::EntryReply::All(whole)) = &replies[0] else { panic!("{replies:?}") };
    assert!(whole.ok && whole.replies[0].remaining == 1, "{whole:?}");
    assert!(matches!(&replies[1], Ok(wire::EntryReply::Go(g)) if !g.ok), "{replies:?}");
    // An undelivered reply gives the whole's parts back.
    crate::support::undelivered(&mut s, T0, &body, &reply);
    assert_eq!(go(&mut s, T0, "api", 0).remaining, 3);
}

/// An `all` entry's parts are held to the contract when the batch is
/// read, before any entry is decided; a semantic error in them is that
/// entry's alone.
#[test]
fn an_all_entry_is_checked_with_its_batch() {
    let mut s = service();
    // {"op": "batch", "asks": [{"key": "a"}, {"op": "all", "asks": [{"key": b"a"}]}]}
    let bad = b"\x82\xa2op\xa5batch\xa4asks\x92\x81\xa3key\xa1a\x82\xa2op\xa3all\xa4asks\x91\x81\xa3key\xc4\x01a";
    let e = wire::decode_request(bad).unwrap_err().to_string();
    assert!(e.contains("field \"key\" must be a string"), "{e}");
    let parts = [Ask::new().limit("api"), Ask::new().limit("nope")];
    let mut body = Vec::new();
    wire::encode_batch_entries(&[wire::BatchAsk::All(&parts), wire::BatchAsk::Go(parts[0])], &mut body);
    let Reply::Answer(replies) = wire::decode_batch_entries_reply(&seam(&mut s, T0, &body)).unwrap() else { panic!() };
    assert!(matches!(&replies[0], Err(e) if e.contains("part 2 of \"all\"")), "{replies:?}");
    assert!(matches!(&replies[1], Ok(wire::EntryReply::Go(g)) if g.ok && g.remaining == 4), "{replies:?}");
}
