//! Limits sent with the ask (`terms`, `--runtime-limits`): on the seam, a
//! limit created on first use counts exactly as its configured twin, is
//! refused without the flag or past its bound, keeps a configured limit's
//! terms, takes new terms keeping its counts and is dropped when idle; on
//! a real locker, the same through `locker ask --terms`.

use std::time::Duration;

use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT, IDLE};
use locker::service::Service;
use locker::wire::{self, Request};
use locker::{Ask, Terms};

use crate::support::{run_locker, seam, seam_ask, seam_stats, turn, wait_for_room, Daemon, TempFile};

const SLOT: Nanos = 800_000_000;
const T0: Nanos = 1_000 * SLOT;

/// A locker with "twin" (3 per 0.8 s) configured, creating up to `bound`
/// limits from terms.
fn service(bound: usize) -> Service {
    let default = Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap();
    let twin = Limit::new("twin", Quota::new(3, 0.8).unwrap()).unwrap();
    Service::new(Locker::new(default, vec![twin], 1000).with_runtime_limits(bound))
}

fn twin_terms() -> Terms<'static> {
    Terms::new("fixed-window", 3, 0.8)
}

#[test]
fn a_limit_sent_with_terms_is_created_and_counts_exactly_as_its_configured_twin() {
    let mut s = service(2);
    let sent = Ask::new().limit("tenant").key("u").terms(twin_terms());
    let twin = Ask::new().limit("twin").key("u");
    let mut gone = 0;
    // Asks at instants across three slots, each cost 1 or 2.
    for (i, at) in [0, 1, 100_000_000, 790_000_000, SLOT, SLOT + 5, 2 * SLOT + 400_000_000].into_iter().enumerate() {
        for cost in [1, 2, 1] {
            let (a, b) = (sent.cost(cost), twin.cost(cost));
            let got = seam_ask(&mut s, T0 + at, &a).unwrap();
            assert_eq!(got, seam_ask(&mut s, T0 + at, &b).unwrap(), "instant {i}, cost {cost}");
            gone += u64::from(got.ok);
        }
    }
    assert!((3..21).contains(&gone), "both went and were refused: {gone} of 21");
    // Later asks name it without terms too, and stats list it as any limit.
    assert!(seam_ask(&mut s, T0 + 3 * SLOT, &Ask::new().limit("tenant").key("u")).unwrap().ok);
    assert_eq!(seam(&mut s, T0 + 3 * SLOT, b"tenant"), b"go", "the plain form names it too");
    let stats = seam_stats(&mut s, T0 + 3 * SLOT);
    let [tenant, twin] = ["tenant", "twin"].map(|n| stats.limits.iter().find(|l| l.name == n).unwrap().clone());
    assert_eq!((tenant.max_requests, tenant.in_seconds, tenant.algorithm.as_str()), (3, 0.8, "fixed-window"));
    assert_eq!((tenant.go, tenant.sorry), (twin.go + 2, twin.sorry));
}

#[test]
fn a_plain_body_names_a_limit_created_after_it_was_first_sent() {
    let mut s = service(1);
    // The default limit allows 1 per second: the second plain "late" is sorry.
    assert_eq!(seam(&mut s, T0, b"late"), b"go");
    assert_eq!(seam(&mut s, T0, b"late"), b"sorry");
    assert!(seam_ask(&mut s, T0, &Ask::new().limit("late").terms(Terms::new("fixed-window", 9, 1.0))).unwrap().ok);
    assert_eq!(seam(&mut s, T0, b"late"), b"go", "now its own limit");
}

#[test]
fn without_runtime_limits_an_ask_with_terms_is_refused_naming_the_flag() {
    let mut s = service(0);
    let e = seam_ask(&mut s, T0, &Ask::new().limit("tenant").terms(twin_terms())).unwrap_err();
    assert!(e.contains("unknown limit \"tenant\"") && e.contains("--runtime-limits"), "{e}");
    assert_eq!(seam_stats(&mut s, T0).errors, 1, "counted as an error");
    assert!(seam_ask(&mut s, T0, &Ask::new().limit("tenant")).is_err(), "nor was it created");
}

#[test]
fn terms_are_checked_as_the_configs_limits_are_and_a_configured_limit_keeps_its_own() {
    let mut s = service(4);
    let bad = |s: &mut Service, t| seam_ask(s, T0, &Ask::new().limit("t").terms(t)).unwrap_err();
    assert_eq!(bad(&mut s, Terms::new("fixed-window", 0, 1.0)), "limit \"t\": max_requests must be at least 1");
    assert_eq!(
        bad(&mut s, Terms::new("fixed-window", 2, 1.0).burst(4)),
        "limit \"t\": burst is only for algorithm = \"token-bucket\""
    );
    assert!(bad(&mut s, Terms::new("fixed-window", 1, 100_000.0)).contains("in_seconds must be a number from 0.001"));
    assert!(bad(&mut s, Terms::new("semaphore", 1, 1.0)).contains("unknown algorithm \"semaphore\""));
    // The configured twin with its own terms is served; with others, refused by name.
    assert!(seam_ask(&mut s, T0, &Ask::new().limit("twin").terms(twin_terms())).unwrap().ok);
    let e = seam_ask(&mut s, T0, &Ask::new().limit("twin").terms(Terms::new("fixed-window", 30, 0.8))).unwrap_err();
    assert!(e.contains("limit \"twin\" is configured with other terms"), "{e}");
    let twin = seam_stats(&mut s, T0).limits.into_iter().find(|l| l.name == "twin").unwrap();
    assert_eq!((twin.max_requests, twin.go, twin.errors), (3, 1, 1));
}

#[test]
fn past_the_bound_asks_are_refused_until_an_idle_limit_is_dropped() {
    let mut s = service(1);
    let first = Ask::new().limit("a").key("k").terms(twin_terms());
    let second = Ask::new().limit("b").terms(twin_terms());
    assert!(seam_ask(&mut s, T0, &first).unwrap().ok);
    let e = seam_ask(&mut s, T0, &second).unwrap_err();
    assert!(e.contains("limit \"b\" not created: 1 limits sent with terms exist"), "{e}");
    // Its key's slot ends, then ten minutes without an ask: the loop drops it.
    turn(&mut s, T0 + SLOT);
    assert!(crate::support::deadline(&s).is_some_and(|d| d <= T0 + IDLE));
    turn(&mut s, T0 + IDLE - 1);
    assert!(seam_ask(&mut s, T0 + IDLE - 1, &second).is_err(), "not idle yet");
    turn(&mut s, T0 + IDLE);
    assert_eq!(crate::support::deadline(&s), None, "nothing left to wake for");
    assert!(seam_ask(&mut s, T0 + IDLE, &Ask::new().limit("a")).is_err(), "dropped");
    assert!(seam_ask(&mut s, T0 + IDLE, &second).unwrap().ok, "its place is free");
}

#[test]
fn new_terms_take_effect_keeping_the_count_and_batches_carry_terms() {
    let mut s = service(2);
    let ask = Ask::new().limit("t").key("k").terms(Terms::new("fixed-window", 2, 60.0));
    assert!(seam_ask(&mut s, T0, &ask).unwrap().ok);
    assert!(seam_ask(&mut s, T0, &ask).unwrap().ok);
    assert!(!seam_ask(&mut s, T0, &ask).unwrap().ok);
    let more = ask.terms(Terms::new("fixed-window", 3, 60.0));
    let reply = seam_ask(&mut s, T0, &more).unwrap();
    assert_eq!((reply.ok, reply.limit, reply.remaining), (true, 3, 0), "its 2 kept, 3 allowed");
    // In a batch, each entry with terms as if alone.
    let entries = [Ask::new().limit("b").terms(Terms::new("token-bucket", 1, 60.0).burst(2)), Ask::new().limit("b")];
    let mut body = Vec::new();
    wire::encode_batch(&entries, &mut body);
    assert!(matches!(wire::decode_request(&body), Ok(Request::Batch(_))));
    let wire::Reply::Answer(replies) = wire::decode_batch_reply(&seam(&mut s, T0, &body)).unwrap() else {
        panic!("a batch reply")
    };
    let oks: Vec<bool> = replies.iter().map(|r| r.as_ref().unwrap().ok).collect();
    assert_eq!(oks, [true, true]);
    assert!(!seam_ask(&mut s, T0, &Ask::new().limit("b")).unwrap().ok, "a burst of 2");
}

/// `locker ask --json <args>` against the locker at `endpoint`: its exit
/// code, and its reply (stdout) or its error (stderr).
fn ask(endpoint: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = run_locker(&[&["ask", "--connect", endpoint, "--json"][..], args].concat());
    let text = if out.status.success() || out.status.code() == Some(1) { out.stdout } else { out.stderr };
    (out.status.code(), String::from_utf8_lossy(&text).into_owned())
}

#[test]
fn a_real_locker_counts_a_limit_sent_with_terms_as_its_configured_twin_and_refuses_it_without_the_flag() {
    let config = TempFile::new(
        "runtime-twin.toml",
        "runtime_limits = 2\n\n[[limits]]\nname = \"twin\"\nmax_requests = 4\nin_seconds = 86400\n",
    );
    let d = Daemon::start(&["--config", config.path()]);
    // Every ask below falls in one day-long slot.
    wait_for_room(86_400 * 1_000_000_000, Duration::from_secs(30));
    for cost in ["1", "2", "1", "1", "3"] {
        let sent =
            ask(&d.endpoint, &["--limit", "tenant", "--key", "u", "--cost", cost, "--terms", "fixed-window,4,86400"]);
        let twin = ask(&d.endpoint, &["--limit", "twin", "--key", "u", "--cost", cost]);
        let fields = |out: &str| {
            let v: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|_| panic!("a reply: {out}"));
            (v["ok"].clone(), v["limit"].clone(), v["remaining"].clone())
        };
        assert_eq!(sent.0, twin.0, "cost {cost}: {sent:?} {twin:?}");
        assert_eq!(fields(&sent.1), fields(&twin.1), "cost {cost}");
    }
    let plain = Daemon::start(&[]);
    let (code, err) = ask(&plain.endpoint, &["--limit", "tenant", "--terms", "fixed-window,4,86400"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--runtime-limits"), "{err}");
    let (code, err) = ask(&plain.endpoint, &["--terms", "fixed-window,4"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("ALGORITHM,MAX_REQUESTS,IN_SECONDS"), "{err}");
}

#[test]
fn a_part_of_all_may_carry_its_limits_terms() {
    let mut s = service(2);
    let parts = [
        Ask::new().limit("twin").key("u"),
        Ask::new().limit("tenant").key("u").terms(Terms::new("fixed-window", 1, 60.0)),
    ];
    let mut body = Vec::new();
    wire::encode_all(&parts, None, None, &mut body);
    let oks: Vec<bool> = (0..2)
        .map(|_| match wire::decode_all_reply(&seam(&mut s, T0, &body)).unwrap() {
            wire::Reply::Answer(r) => r.ok,
            wire::Reply::Refused(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(oks, [true, false], "the created limit's 1 per minute");
    let twin = seam_ask(&mut s, T0, &Ask::new().limit("twin").key("u")).unwrap();
    assert_eq!((twin.ok, twin.remaining), (true, 1), "the refused whole charged twin nothing");
    let mut none = service(0);
    let e = match wire::decode_all_reply(&seam(&mut none, T0, &body)).unwrap() {
        wire::Reply::Refused(e) => e,
        wire::Reply::Answer(r) => panic!("{r:?}"),
    };
    assert!(e.contains("part 2 of \"all\"") && e.contains("--runtime-limits"), "{e}");
}

/// Issue 38's Done-when, peered: two lockers share a limit sent with terms
/// to one of them as they share its configured twin. The other learns it
/// from the first one's heartbeat before any of its callers names it, and
/// the pair grants exactly its 4 a day between them, as for the twin, each
/// locker going and refusing in the same order for both.
#[test]
fn two_peered_lockers_share_a_limit_sent_with_terms_as_its_configured_twin() {
    let config = TempFile::new(
        "runtime-peered.toml",
        "runtime_limits = 2\n\n[[limits]]\nname = \"twin\"\nmax_requests = 4\nin_seconds = 86400\n",
    );
    let group = crate::support::Peered::start(2, &["--config", config.path()]);
    group.wait_joined(1);
    wait_for_room(86_400 * 1_000_000_000, Duration::from_secs(30));
    let mut clients: Vec<locker::Client> =
        (0..2).map(|i| locker::Client::new([group.endpoint(i)], Duration::from_secs(5)).unwrap()).collect();
    let terms = Terms::new("fixed-window", 4, 86_400.0);
    let first = clients[0].ask(&Ask::new().limit("tenant").key("other").cost(0).terms(terms)).unwrap();
    assert_eq!(first.limit, 4);
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !clients[1].stats().unwrap().limits.iter().any(|l| l.name == "tenant") {
        assert!(std::time::Instant::now() < end, "locker 1 never learned the limit");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (mut sent, mut twin) = (Vec::new(), Vec::new());
    for i in 0..8 {
        let c = &mut clients[i % 2];
        sent.push((i % 2, c.ask(&Ask::new().limit("tenant").key("u").terms(terms).hold_ms(300)).unwrap().ok));
        twin.push((i % 2, c.ask(&Ask::new().limit("twin").key("u").hold_ms(300)).unwrap().ok));
    }
    assert_eq!(sent, twin, "the same go and sorry, locker by locker");
    assert_eq!(sent.iter().filter(|(_, ok)| *ok).count(), 4, "the group's 4: {sent:?}");
    for c in &mut clients {
        let stats = c.stats().unwrap();
        assert!(stats.peers.iter().all(|p| p.mismatched_limits.is_empty() && p.rejected == 0), "{stats:?}");
    }
}
