//! Permits charged after the fact (`op: charge`). On the seam, from a
//! config file's text: a charge past the limit is taken, its reply says
//! the debt, and the asks after it wait it out for exactly as long as each
//! kind says (a token bucket's refill, a fixed window's carried slots, a
//! rolling window's grants leaving it), a held ask too; a semaphore and a
//! charge with a wait are refused; with parents every level is charged.
//! On a store (its answers written by hand): a charge claims what its
//! key's hand lacks, past the limit, and says the store's debt; a failed
//! claim takes nothing, unless the limit fails open. Peered on a simulated clock: a charge is a debt
//! of the charging locker's own share, and the other member's grants are
//! untouched. A real locker: `locker charge`.

use locker::config::{FileConfig, Flags, ServeConfig};
use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::{Answer, Service};
use locker::wire::{self, Ask, Charge, ChargeReply, Parents, Reply};

use crate::support::{cli, deadline, ready, seam, seam_ask, seam_stats, serve};

const MS: Nanos = 1_000_000;
/// An instant on a 60 s boundary, and one 250 ms into that slot.
const T0: Nanos = 28_000_000 * 60_000 * MS;
const T: Nanos = T0 + 250 * MS;

const CONFIG: &str = "
[[limits]]
name = 'fw'
max_requests = 10
in_seconds = 1

[[limits]]
name = 'tb'
algorithm = 'token-bucket'
max_requests = 10
in_seconds = 1
burst = 3

[[limits]]
name = 'rw'
algorithm = 'rolling-window'
max_requests = 4
in_seconds = 1

[[limits]]
name = 'db'
algorithm = 'semaphore'
max_requests = 2
in_seconds = 10

[[limits]]
name = 'org'
max_requests = 5
in_seconds = 60

[[limits]]
name = 'user'
max_requests = 6
in_seconds = 60
parent = 'org'
";

fn served() -> Service {
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(CONFIG).unwrap()).unwrap();
    Service::new(Locker::new(config.default, config.limits, config.max_keys))
}

fn charge_body(charge: &Charge) -> Vec<u8> {
    let mut body = Vec::new();
    wire::encode(&charge.to_map(), &mut body);
    body
}

/// `cost` charged to `limit`'s key "k" at `now`.
fn charge(s: &mut Service, now: Nanos, limit: &str, cost: u64) -> Result<ChargeReply, String> {
    let body = charge_body(&Charge { limit: Some(limit), key: Some("k"), cost, parents: None });
    match wire::decode_charge_reply(&seam(s, now, &body)).unwrap() {
        Reply::Answer(r) => Ok(r),
        Reply::Refused(e) => Err(e),
    }
}

/// An ask of `cost` of `limit`'s key "k" at `now`: (ok, retry_after_ms).
fn ask(s: &mut Service, now: Nanos, limit: &str, cost: u64) -> (bool, u64) {
    let r = seam_ask(s, now, &Ask::new().limit(limit).key("k").cost(cost)).unwrap();
    (r.ok, r.retry_after_ms)
}

/// (ok, granted, remaining, debt, reset_after_ms)
fn figures(r: &ChargeReply) -> (bool, u32, u32, u64, u64) {
    (r.ok, r.granted, r.remaining, r.debt, r.reset_after_ms)
}

#[test]
fn a_fixed_windows_charge_past_max_carries_its_excess_into_the_next_slots() {
    let mut s = served();
    assert!(ask(&mut s, T, "fw", 4).0);
    // 35 counted in this slot: 25 owed, 10 + 10 + 5 in the next three.
    let c = charge(&mut s, T, "fw", 31).unwrap();
    assert_eq!(figures(&c), (true, 31, 0, 25, 3_750));
    assert_eq!(ask(&mut s, T + 250 * MS, "fw", 1), (false, 2_500), "the third slot after has room");
    assert_eq!(ask(&mut s, T0 + 1_000 * MS, "fw", 1), (false, 2_000), "the next slot starts full");
    assert_eq!(ask(&mut s, T0 + 3_000 * MS, "fw", 6), (false, 1_000), "5 of the debt count in the third");
    assert_eq!(ask(&mut s, T0 + 3_000 * MS, "fw", 5), (true, 0));
    assert_eq!(ask(&mut s, T0 + 4_000 * MS, "fw", 10), (true, 0), "paid");
    let fw = seam_stats(&mut s, T0 + 4_000 * MS).limits.into_iter().find(|l| l.name == "fw").unwrap();
    assert_eq!((fw.requests, fw.go, fw.charged), (7, 4, 31), "a charge is a request and a go");
}

#[test]
fn a_token_buckets_charge_takes_its_tokens_below_zero_until_the_refill() {
    let mut s = served();
    // 3 tokens, one back each 100 ms: 5 charged leaves -2.
    let c = charge(&mut s, T, "tb", 5).unwrap();
    assert_eq!(figures(&c), (true, 5, 0, 2, 500));
    assert_eq!(ask(&mut s, T, "tb", 1), (false, 300));
    assert_eq!(ask(&mut s, T + 299 * MS, "tb", 1), (false, 1));
    assert_eq!(ask(&mut s, T + 300 * MS, "tb", 1), (true, 0));
    let within = charge(&mut s, T + 10_000 * MS, "tb", 2).unwrap();
    assert_eq!((within.remaining, within.debt), (1, 0), "a charge that fits owes nothing");
}

#[test]
fn a_rolling_windows_charge_counts_until_its_grants_leave_the_window() {
    let mut s = served();
    assert!(ask(&mut s, T, "rw", 2).0);
    let c = charge(&mut s, T + 100 * MS, "rw", 5).unwrap();
    assert_eq!(figures(&c), (true, 5, 0, 3, 1_000));
    // 7 counted: the 2 leave at T + 1 s and leave 5, still over 4; the 5
    // leave at T + 1.1 s.
    assert_eq!(ask(&mut s, T + 200 * MS, "rw", 1), (false, 900));
    assert_eq!(ask(&mut s, T + 1_099 * MS, "rw", 1), (false, 1));
    assert_eq!(ask(&mut s, T + 1_100 * MS, "rw", 4), (true, 0));
}

#[test]
fn a_held_ask_waits_out_the_debt_within_its_hold() {
    let mut s = served();
    charge(&mut s, T, "tb", 5).unwrap();
    let held = Ask::new().limit("tb").key("k").hold_ms(1_000);
    assert_eq!(serve(&mut s, T, 7, &crate::support::ask_body(&held)).0, Answer::Held);
    assert_eq!(deadline(&s), Some(T + 300 * MS), "when the refill covers the debt");
    let replies = ready(&mut s, T + 300 * MS);
    assert_eq!(replies.len(), 1);
    assert!(crate::support::answer::<locker::GoReply>(&replies[0].1).unwrap().ok);
}

#[test]
fn a_semaphore_a_charge_with_a_wait_and_one_past_the_most_are_refused() {
    let mut s = served();
    let e = charge(&mut s, T, "db", 1).unwrap_err();
    assert!(e.contains("limit \"db\" is a semaphore: a lease is not a rate"), "{e}");
    let e = charge(&mut s, T, "fw", 641).unwrap_err();
    assert!(e.contains("a charge of 641 is above the most a charge may owe, 640"), "{e}");
    let mut body = Vec::new();
    let map = wire::RequestMap {
        hold_ms: Some(10),
        ..Charge { limit: Some("fw"), key: None, cost: 1, parents: None }.to_map()
    };
    wire::encode(&map, &mut body);
    let e = crate::support::answer::<ChargeReply>(&seam(&mut s, T, &body)).unwrap_err();
    assert!(e.contains("a charge is taken at once and in full"), "{e}");
    assert_eq!(ask(&mut s, T, "fw", 10), (true, 0), "nothing was charged");
}

#[test]
fn a_charge_with_parents_is_taken_at_every_level() {
    let mut s = served();
    static UP: [(&str, &str); 1] = [("org", "o")];
    let body = charge_body(&Charge { limit: Some("user"), key: Some("a"), cost: 7, parents: Some(Parents::new(&UP)) });
    let c = crate::support::answer::<ChargeReply>(&seam(&mut s, T, &body)).unwrap();
    // user a owes 1 of its 6, org o 2 of its 5: the reply says the largest.
    assert_eq!((c.ok, c.granted, c.remaining, c.debt), (true, 7, 0, 2));
    let org = seam_ask(&mut s, T, &Ask::new().limit("org").key("o")).unwrap();
    assert_eq!((org.ok, org.retry_after_ms), (false, 59_750), "org o's next slot starts with its 2 owed, and has room");
    let e = charge(&mut s, T, "user", 1).unwrap_err();
    assert!(e.contains("names no key for \"org\""), "{e}");
}

/// On a store, with its answers written by hand: a charge the hand
/// cannot cover waits for a claim of what it lacks, sent as a charge's
/// (`force`), and its reply says the debt the store counted; the asks
/// after it are sorry until the store's retry time. A charge the hand
/// covers is answered at once, with no claim and no debt.
#[test]
fn on_a_store_a_charge_claims_what_the_hand_lacks_past_the_limit_and_says_the_stores_debt() {
    use crate::support::store_calls;
    use locker::core::claims::{Claimed, Grant};
    use locker::service::step;
    let limits = vec![Limit::new("api", Quota::new(10, 1.0).unwrap()).unwrap()];
    let mut s = Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), limits, 100))
        .with_store();
    let body = charge_body(&Charge { limit: Some("api"), key: Some("k"), cost: 14, parents: None });
    assert_eq!(serve(&mut s, T, 1, &body).0, Answer::Held, "nothing on hand: the charge waits for its claim");
    let claims = store_calls(&mut s, T).claims;
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert!(claims[0].force && claims[0].want == 14, "a charge's claim of the whole cost: {claims:?}");
    let grant = Grant { got: 14, valid_us: 750_000, left: 0, retry_us: 1_750_000, debt: 4 };
    step::store_answers(
        &mut s,
        T + MS,
        vec![Claimed { id: claims[0].id, node: "n:1".into(), grant: Ok(grant) }],
        Vec::new(),
    );
    let answered = ready(&mut s, T + MS);
    let c = crate::support::answer::<ChargeReply>(&answered[0].1).unwrap();
    assert_eq!((c.ok, c.granted, c.remaining, c.debt), (true, 14, 0, 4), "{c:?}");
    let next = seam_ask(&mut s, T + 2 * MS, &Ask::new().limit("api").key("k")).unwrap();
    assert_eq!((next.ok, next.retry_after_ms), (false, 1_749), "sorry until the store's retry time");
    assert!(store_calls(&mut s, T + 2 * MS).claims.is_empty(), "no claim while the store is spent");
    let stats = s.locker().figures().stats().find(|(l, _)| l.name() == "api").unwrap().1;
    assert_eq!(stats.charged, 14);

    // A key whose hand holds enough: answered at once, from the hand.
    let other = charge_body(&Charge { limit: Some("api"), key: Some("j"), cost: 1, parents: None });
    assert_eq!(serve(&mut s, T, 2, &other).0, Answer::Held);
    let claim = store_calls(&mut s, T).claims.remove(0);
    let grant = Grant { got: 6, valid_us: 750_000, left: 3, retry_us: 0, debt: 0 };
    step::store_answers(
        &mut s,
        T + MS,
        vec![Claimed { id: claim.id, node: "n:1".into(), grant: Ok(grant) }],
        Vec::new(),
    );
    ready(&mut s, T + MS);
    let (answer, reply) = serve(&mut s, T + 2 * MS, 3, &other);
    let c = crate::support::answer::<ChargeReply>(&reply).unwrap();
    assert_eq!((answer, c.granted, c.debt), (Answer::Now, 1, 0), "{c:?}");
    assert!(store_calls(&mut s, T + 2 * MS).claims.is_empty(), "the hand had it");
}

/// On a store, a charge whose claim fails is not taken: a limit that
/// fails closed answers an error that says to send it again, and one that
/// fails open takes it in the locker's own count.
#[test]
fn on_a_store_a_charge_whose_claim_fails_is_refused_or_taken_alone_as_the_failure_policy_says() {
    use crate::support::store_calls;
    use locker::core::claims::Claimed;
    use locker::service::step;
    let limits = vec![
        Limit::new("closed", Quota::new(10, 1.0).unwrap()).unwrap(),
        Limit::new("open", Quota::new(10, 1.0).unwrap()).unwrap().with_fail_open(true),
    ];
    let mut s = Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), limits, 100))
        .with_store();
    for (token, limit) in [(1, "closed"), (2, "open")] {
        let body = charge_body(&Charge { limit: Some(limit), key: None, cost: 12, parents: None });
        assert_eq!(serve(&mut s, T, token, &body).0, Answer::Held);
    }
    let failed: Vec<_> = store_calls(&mut s, T)
        .claims
        .into_iter()
        .map(|c| Claimed { id: c.id, node: "n:1".into(), grant: Err("no answer within 500 ms".into()) })
        .collect();
    assert_eq!(failed.len(), 2);
    step::store_answers(&mut s, T + MS, failed, Vec::new());
    let answered = ready(&mut s, T + MS);
    let e = crate::support::answer::<ChargeReply>(&answered[0].1).unwrap_err();
    assert!(e.contains("nothing was charged; send it again"), "{e}");
    let c = crate::support::answer::<ChargeReply>(&answered[1].1).unwrap();
    assert_eq!((c.ok, c.granted, c.debt), (true, 12, 2), "taken alone, past the limit: {c:?}");
}

/// Two peered lockers on a simulated clock, a token bucket and a rolling
/// window of 10 per second (5 of each owned by each member): member 0
/// charges 12, 7 past what it owns, and both members are asked every
/// 20 ms for the next 0.9 s. The debt is member 0's own: its share pays
/// it (a bucket's room refills at 5 a second, a rolling window's rights
/// come back as its grants leave the window a second later) before it
/// grants, a gift from member 1 pays it first too, and member 1's share
/// is untouched: the group grants no more than member 1's share allows.
#[test]
fn a_peered_charge_on_a_bucket_or_a_rolling_window_is_a_debt_of_the_charging_share_alone() {
    use locker::core::Algorithm;
    use locker::sim::{self, Group};
    for algorithm in
        [Algorithm::TokenBucket { burst: std::num::NonZeroU32::new(10).unwrap() }, Algorithm::RollingWindow]
    {
        let make = move |boot: &sim::Boot| {
            let limits = vec![Limit::with_algorithm("api", Quota::new(10, 1.0).unwrap(), algorithm).unwrap()];
            sim::peered(
                Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), limits, 100),
                boot,
                300 * MS,
            )
        };
        let mut g = Group::new(2, crate::group::T0, 11, Box::new(make));
        // Joined, and past a whole period after: each member's room is
        // full (a group without state files owns no period it began in).
        g.advance(3_000 * MS);
        let api = || Ask::new().limit("api").key("k").hold_ms(0);
        let body = charge_body(&Charge { limit: Some("api"), key: Some("k"), cost: 12, parents: None });
        let c = crate::support::answer::<ChargeReply>(&g.request(0, &body)).unwrap();
        assert_eq!((c.ok, c.granted, c.remaining, c.debt), (true, 12, 0, 7), "{algorithm:?}: 5 owned, 7 owed");
        let (mut mine, mut theirs) = (0, 0);
        let start = g.now();
        while g.now() - start < 900 * MS {
            mine += u32::from(g.ask(0, &api()).unwrap().ok);
            theirs += u32::from(g.ask(1, &api()).unwrap().ok);
            g.advance(20 * MS);
        }
        eprintln!("{algorithm:?}: in 0.9 s after the charge, member 0 granted {mine}, member 1 {theirs}");
        // Member 1's own 5, and a bucket's refill of its share in 0.9 s
        // (4.5): what it gives member 0 pays member 0's debt first. Had
        // the debt been forgiven (member 0's room at 0 after the charge),
        // member 0 would grant its refill too: 14 for the bucket.
        let own = if algorithm == Algorithm::RollingWindow { 5 } else { 5 + 4 };
        assert!(mine + theirs <= own, "{algorithm:?}: the group grants from member 1's share alone");
        assert!(mine + theirs > 0, "{algorithm:?}: member 1's share is untouched by member 0's debt");
    }
}

/// Two peered lockers on a simulated clock, a fixed window of 10 per
/// second (5 owned by each): member 0 charges 12 in a slot where member
/// 1 asks for all it owns. Member 1 gets its 5 in that slot and the next;
/// member 0's debt of 7 is its own share's (5 in the next slot, 2 in the
/// one after), so the group's count in each slot is at most the limit
/// plus what was charged beyond it, and member 0 grants nothing while
/// its share is paying the debt.
#[test]
fn a_peered_charge_is_a_debt_of_the_charging_lockers_share_alone() {
    use locker::sim::{self, Group};
    const SLOT: Nanos = 1_000 * MS;
    let make = |boot: &sim::Boot| {
        let limits = vec![Limit::new("api", Quota::new(10, 1.0).unwrap()).unwrap()];
        sim::peered(
            Locker::new(Limit::new(DEFAULT_LIMIT, Quota::new(1, 1.0).unwrap()).unwrap(), limits, 100),
            boot,
            300 * MS,
        )
    };
    let mut g = Group::new(2, crate::group::T0, 11, Box::new(make));
    g.advance(800 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    let api = || Ask::new().limit("api").key("k").hold_ms(0);
    let body = charge_body(&Charge { limit: Some("api"), key: Some("k"), cost: 12, parents: None });
    let c = crate::support::answer::<ChargeReply>(&g.request(0, &body)).unwrap();
    assert_eq!((c.ok, c.granted, c.remaining, c.debt), (true, 12, 0, 7), "5 owned, 7 owed");
    let mut counts = Vec::new();
    for _ in 0..3 {
        let (mut mine, mut theirs) = (0, 0);
        let start = g.now();
        while g.now() - start < 600 * MS {
            mine += u32::from(g.ask(0, &api()).unwrap().ok);
            theirs += u32::from(g.ask(1, &api()).unwrap().ok);
            g.advance(20 * MS);
        }
        counts.push((mine, theirs));
        g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    }
    eprintln!("grants by slot (member 0, member 1): {counts:?}");
    assert_eq!(counts[0].1, 5, "member 1 grants all it owns in the charged slot");
    assert_eq!(counts[1], (0, 5), "member 0's share of the next slot pays its debt; member 1's is whole");
    // Member 0 has 3 of its 5 after its last 2 owed, and may be given
    // what member 1 spares, as any busy member is.
    assert!(counts[2].0 + counts[2].1 + 2 <= 10, "the last 2 owed count in the slot after: {counts:?}");
    for (slot, (mine, theirs)) in counts.iter().enumerate() {
        let charged = if slot == 0 { 12 } else { 0 };
        assert!(mine + theirs + charged <= 10 + 7, "slot {slot}: the limit plus the excess charged at most");
    }
}

/// A real locker: `locker charge` prints the debt, and the ask after it
/// waits it out; `--json` gives the reply's map.
#[test]
fn a_real_locker_charges_from_the_command_line() {
    let config = crate::support::TempFile::new("charge.toml", CONFIG);
    let d = crate::support::Daemon::start(&["--config", config.path()]);
    let (code, out, err) = cli(&d.endpoint, &["charge", "--limit", "org", "--key", "k", "--cost", "8"]);
    assert_eq!((code, out.as_str()), (Some(0), "charged 8, 0 left, 3 owed\n"), "{err}");
    let (code, _, _) = cli(&d.endpoint, &["ask", "--limit", "org", "--key", "k"]);
    assert_eq!(code, Some(1), "in debt: sorry");
    let (code, out, _) = cli(&d.endpoint, &["charge", "--limit", "org", "--key", "j", "--cost", "2", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (code, v["ok"].as_bool(), v["granted"].as_u64(), v["debt"].as_u64()),
        (Some(0), Some(true), Some(2), Some(0))
    );
    let (code, _, err) = cli(&d.endpoint, &["charge", "--limit", "db"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is a semaphore"), "{err}");
}
