//! Limits under parents (org > team > user). On the seam, from a config
//! file's text: an ask of a limit with a parent takes its cost from every
//! level above it under the keys it names, or from none; a missing or
//! stray key is an error naming it; a refund gives back to every level, a
//! reset clears only the limit it names; an `all`, a batch and an
//! undelivered reply treat the levels alike. Peered on a simulated clock:
//! the group never grants a parent more than its limit through its
//! children. A real locker: `locker ask --parent`, `locker refund
//! --parent`, `check-config` and a SIGHUP that keeps the old limits when a
//! parent closes a cycle.

use locker::config::{FileConfig, Flags, ServeConfig};
use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::Service;
use locker::wire::{self, AllReply, Ask, GoReply, Parents, Refund, Reply, RequestMap};

use crate::support::{answer, cli, seam, seam_all, seam_ask, seam_stats};

const MS: Nanos = 1_000_000;
/// An instant on a 60 s boundary, and one a second into that slot.
const T0: Nanos = 28_000_000 * 60_000 * MS;
const T: Nanos = T0 + 1_000 * MS;

/// org (5 per minute) > team (4) > user (6, resettable); `api` (10) has
/// no parent. Slots of a minute, so that none ends while a test runs.
const CONFIG: &str = "
[[limits]]
name = 'org'
max_requests = 5
in_seconds = 60

[[limits]]
name = 'team'
max_requests = 4
in_seconds = 60
parent = 'org'

[[limits]]
name = 'user'
max_requests = 6
in_seconds = 60
parent = 'team'
allow_reset = true

[[limits]]
name = 'api'
max_requests = 10
in_seconds = 60
";

/// The keys of team `t` in org `o`.
static T_IN_O: [(&str, &str); 2] = [("team", "t"), ("org", "o")];
/// The keys of team `t2` in org `o`.
static T2_IN_O: [(&str, &str); 2] = [("team", "t2"), ("org", "o")];

/// A service as `locker serve` builds it from `CONFIG`.
fn served() -> Service {
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(CONFIG).unwrap()).unwrap();
    Service::new(Locker::new(config.default, config.limits, config.max_keys))
}

/// An ask of `user` key `key` under `parents`.
fn user(key: &'static str, parents: &'static [(&'static str, &'static str)]) -> Ask<'static> {
    Ask::new().limit("user").key(key).parents(Parents::new(parents))
}

/// What org `o` has left, peeked (org has no parent).
fn org_left(s: &mut Service) -> u32 {
    seam_ask(s, T, &Ask::new().limit("org").key("o").cost(0)).unwrap().remaining
}

fn figures(r: &GoReply) -> (bool, u32, u32) {
    (r.ok, r.limit, r.remaining)
}

#[test]
fn a_childs_ask_takes_its_cost_from_every_level_above_it() {
    let mut s = served();
    // The reply is the level with the fewest permits left: user a 5, team t 3, org o 4.
    assert_eq!(figures(&seam_ask(&mut s, T, &user("a", &T_IN_O)).unwrap()), (true, 4, 3));
    assert_eq!(org_left(&mut s), 4, "org o was charged through team t");
    // user b 4, team t 1, org o 2.
    assert_eq!(figures(&seam_ask(&mut s, T, &user("b", &T_IN_O).cost(2)).unwrap()), (true, 4, 1));
    // Another team of the same org: user b 3, team t2 3, org o 1: org is the nearest to refusing.
    assert_eq!(figures(&seam_ask(&mut s, T, &user("b", &T2_IN_O)).unwrap()), (true, 5, 1));
    // A limit in the middle is asked with the keys above it only.
    let team = Ask::new().limit("team").key("t2").parents(Parents::new(&T_IN_O[1..]));
    assert_eq!(figures(&seam_ask(&mut s, T, &team).unwrap()), (true, 5, 0));
    let stats = seam_stats(&mut s, T);
    let go = |name: &str| stats.limits.iter().find(|l| l.name == name).map(|l| (l.requests, l.go)).unwrap();
    assert_eq!(
        (go("user"), go("team"), go("org")),
        ((3, 3), (4, 4), (5, 4)),
        "each level counts each ask once (org's peek too)"
    );
}

#[test]
fn when_a_level_above_is_spent_the_ask_is_sorry_and_no_level_is_charged() {
    let mut s = served();
    assert!(seam_ask(&mut s, T, &user("a", &T_IN_O).cost(3)).unwrap().ok);
    assert!(seam_ask(&mut s, T, &user("b", &T_IN_O)).unwrap().ok, "team t is spent");
    let sorry = seam_ask(&mut s, T, &user("c", &T_IN_O)).unwrap();
    assert_eq!(figures(&sorry), (false, 4, 0), "the reply is team t's, which refused");
    assert_eq!(sorry.retry_after_ms, 59_000, "until team t's slot ends");
    assert_eq!(org_left(&mut s), 1, "org o gave nothing to the refused ask");
    // User c was charged nothing either: under another team it has all 6.
    let r = seam_ask(&mut s, T, &user("c", &T2_IN_O)).unwrap();
    assert_eq!(figures(&r), (true, 5, 0), "org o's last permit");
    let sorry = seam_ask(&mut s, T, &user("d", &T2_IN_O)).unwrap();
    assert_eq!(figures(&sorry), (false, 5, 0), "now org o refuses, for every team under it");
    assert_eq!(
        seam_ask(&mut s, T, &Ask::new().limit("team").key("t2").cost(0).parents(Parents::new(&T_IN_O[1..])))
            .unwrap()
            .remaining,
        0
    );
    // A level's own limit refusing: the child's.
    static T3_IN_O3: [(&str, &str); 2] = [("team", "t3"), ("org", "o3")];
    static T4_IN_O4: [(&str, &str); 2] = [("team", "t4"), ("org", "o4")];
    assert!(seam_ask(&mut s, T, &user("e", &T3_IN_O3).cost(4)).unwrap().ok);
    let own = seam_ask(&mut s, T, &user("e", &T4_IN_O4).cost(3)).unwrap();
    assert_eq!(figures(&own), (false, 6, 2), "user e has 2 of the 3 asked");
    assert_eq!(seam_ask(&mut s, T, &user("f", &T4_IN_O4).cost(4)).unwrap().remaining, 0, "team t4 kept all 4");
}

#[test]
fn a_missing_or_stray_key_is_an_error_naming_it_that_charges_nothing() {
    let mut s = served();
    let bare = seam_ask(&mut s, T, &Ask::new().limit("user").key("a")).unwrap_err();
    assert_eq!(bare, "limit \"user\" has parent \"team\": the ask names no key for \"team\" in \"parents\"");
    static TEAM_ONLY: [(&str, &str); 1] = [("team", "t")];
    let no_org = seam_ask(&mut s, T, &user("a", &TEAM_ONLY)).unwrap_err();
    assert_eq!(no_org, "limit \"team\" has parent \"org\": the ask names no key for \"org\" in \"parents\"");
    let api = seam_ask(&mut s, T, &Ask::new().limit("api").parents(Parents::new(&TEAM_ONLY))).unwrap_err();
    assert_eq!(api, "limit \"api\" has no parent: an ask of it takes no \"parents\"");
    static STRAY: [(&str, &str); 3] = [("team", "t"), ("api", "x"), ("org", "o")];
    let stray = seam_ask(&mut s, T, &user("a", &STRAY)).unwrap_err();
    assert_eq!(stray, "\"parents\" names \"api\", which is not above limit \"user\" (above it: \"team\", \"org\")");
    let up_to = seam_ask(&mut s, T, &user("a", &T_IN_O).cost(3).up_to()).unwrap_err();
    assert!(up_to.contains("\"up_to\" is not taken by a limit with parents"), "{up_to}");
    let above = seam_ask(&mut s, T, &user("a", &T_IN_O).cost(5)).unwrap_err();
    assert_eq!(above, "limit \"team\", above \"user\": cost 5 is above the limit's capacity 4");
    // {"limit": "user", "key": "a", "parents": 5}
    let shape = seam(&mut s, T, b"\x83\xa5limit\xa4user\xa3key\xa1a\xa7parents\x05");
    let shape = answer::<GoReply>(&shape).unwrap_err();
    assert!(shape.contains("field \"parents\" must be a map of limit names to keys, found an integer"), "{shape}");
    assert_eq!(org_left(&mut s), 5, "no error charged anything");
    assert_eq!(seam(&mut s, T, b"user"), b"sorry", "the plain form names no keys for the levels above");
    let stats = seam_stats(&mut s, T);
    let user_errors = stats.limits.iter().find(|l| l.name == "user").unwrap().errors;
    assert_eq!(user_errors, 5, "each counted on the limit at fault: the cost on team, the bad shape on none");
    assert!(seam_ask(&mut s, T, &user("a", &T_IN_O).cost(4)).unwrap().ok, "every level still whole");
}

fn refund(s: &mut Service, key: &str, cost: u64, parents: Option<Parents>) -> Result<GoReply, String> {
    let mut body = Vec::new();
    wire::encode(&Refund { limit: Some("user"), key: Some(key), cost, parents }.to_map(), &mut body);
    answer(&seam(s, T, &body))
}

#[test]
fn a_refund_gives_back_to_every_level_and_a_reset_clears_only_the_limit_it_names() {
    let mut s = served();
    assert!(seam_ask(&mut s, T, &user("a", &T_IN_O).cost(3)).unwrap().ok);
    // user a 3, team t 1, org o 2, each 1 more after the refund: team t is the fewest.
    let back = refund(&mut s, "a", 1, Some(Parents::new(&T_IN_O))).unwrap();
    assert_eq!((back.ok, back.limit, back.granted, back.remaining), (true, 4, Some(1), 2));
    assert_eq!(org_left(&mut s), 3);
    let bare = refund(&mut s, "a", 1, None).unwrap_err();
    assert!(bare.contains("the ask names no key for \"team\""), "{bare}");
    // A refund gives back at most what each level still counts of the key.
    let all = refund(&mut s, "a", 9, Some(Parents::new(&T_IN_O))).unwrap();
    assert_eq!((all.granted, all.remaining), (Some(2), 4), "team t had 2 to give back, and is whole again");
    assert_eq!(org_left(&mut s), 5);

    assert!(seam_ask(&mut s, T, &user("a", &T_IN_O).cost(3)).unwrap().ok);
    let mut body = Vec::new();
    wire::encode(
        &RequestMap { op: Some("reset"), limit: Some("user"), key: Some("a"), ..RequestMap::default() },
        &mut body,
    );
    let reset: GoReply = answer(&seam(&mut s, T, &body)).unwrap();
    assert_eq!((reset.limit, reset.remaining), (6, 6), "user a is whole again");
    assert_eq!(org_left(&mut s), 2, "org o still counts the 3");
    let sorry = seam_ask(&mut s, T, &user("a", &T_IN_O).cost(2)).unwrap();
    assert_eq!(figures(&sorry), (false, 4, 1), "team t still counts them too");
    body.clear();
    let parents = Some(Parents::new(&T_IN_O));
    wire::encode(
        &RequestMap { op: Some("reset"), limit: Some("user"), key: Some("a"), parents, ..RequestMap::default() },
        &mut body,
    );
    let refused = answer::<GoReply>(&seam(&mut s, T, &body)).unwrap_err();
    assert!(refused.contains("a reset clears only the limit it names: it takes no \"parents\""), "{refused}");
}

fn all(s: &mut Service, parts: &[Ask]) -> Result<AllReply, String> {
    seam_all(s, T, parts)
}

#[test]
fn a_part_of_an_all_takes_its_levels_with_it_and_a_batch_entry_counts_as_alone() {
    let mut s = served();
    let api = Ask::new().limit("api").key("a").cost(5);
    let both = all(&mut s, &[user("a", &T_IN_O).cost(2), api]).unwrap();
    assert!(both.ok);
    let parts: Vec<_> = both.replies.iter().map(figures).collect();
    assert_eq!(parts, [(true, 4, 2), (true, 10, 5)], "one reply a part: team t's for the part under parents");
    assert!(seam_ask(&mut s, T, &Ask::new().limit("org").key("o").cost(3)).unwrap().ok, "org o is spent");
    let refused = all(&mut s, &[user("b", &T2_IN_O), api]).unwrap();
    assert!(!refused.ok);
    let parts: Vec<_> = refused.replies.iter().map(figures).collect();
    assert_eq!(parts, [(false, 5, 0), (true, 10, 5)], "org o refused; api would go, charged nothing");
    assert_eq!(refused.retry_after_ms, 59_000);
    let e = all(&mut s, &[api, Ask::new().limit("user").key("b")]).unwrap_err();
    assert!(e.starts_with("part 2 of \"all\": limit \"user\" has parent \"team\""), "{e}");
    let e = all(&mut s, &[api, user("b", &T2_IN_O).cost(5)]).unwrap_err();
    assert_eq!(e, "part 2 of \"all\": limit \"team\", above \"user\": cost 5 is above the limit's capacity 4");
    let e = all(&mut s, &[user("c", &T2_IN_O); 6]).unwrap_err();
    assert!(e.contains("part 6 of \"all\": with the limits above its parts, \"all\" would hold more than 16"), "{e}");
    assert_eq!(seam_ask(&mut s, T, &api).unwrap().remaining, 0, "api kept its 5");

    // A batch's entry under parents is decided as it would be alone.
    let mut body = Vec::new();
    let fresh = [user("x", &T2_IN_O), user("y", &T2_IN_O)];
    wire::encode_batch(&fresh, &mut body);
    let Reply::Answer(replies) = wire::decode_batch_reply(&seam(&mut s, T, &body)).unwrap() else { panic!() };
    assert!(replies.iter().all(|r| matches!(r, Ok(r) if figures(r) == (false, 5, 0))), "{replies:?}");
}

#[test]
fn a_go_under_parents_whose_reply_was_not_delivered_gives_every_level_back_its_permits() {
    let mut s = served();
    let body = crate::support::ask_body(&user("a", &T_IN_O).cost(3));
    let reply = seam(&mut s, T, &body);
    assert!(answer::<GoReply>(&reply).unwrap().ok);
    crate::support::undelivered(&mut s, T, &body, &reply);
    assert_eq!(org_left(&mut s), 5);
    assert!(seam_ask(&mut s, T, &user("b", &T_IN_O).cost(4)).unwrap().ok, "team t has all 4 again");
}

/// Two peered lockers on a simulated clock, asked through children of
/// one team by turns: the group never grants the team more than its 4 in
/// the slot, and a child's refused ask takes nothing from its org.
#[test]
fn peered_lockers_never_grant_a_parent_more_than_its_limit_through_its_children() {
    use locker::sim::{self, Group};
    const SLOT: Nanos = 1_000 * MS;
    let make = |boot: &sim::Boot| {
        let q = |n| Quota::new(n, 1.0).unwrap();
        let limits = vec![
            Limit::new("org", q(100)).unwrap(),
            Limit::new("team", q(4)).unwrap().with_parent(Some("org")),
            Limit::new("user", q(100)).unwrap().with_parent(Some("team")),
        ];
        sim::peered(Locker::new(Limit::new(DEFAULT_LIMIT, q(1)).unwrap(), limits, 100), boot, 300 * MS)
    };
    let mut g = Group::new(2, crate::group::T0, 11, Box::new(make));
    g.advance(800 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    let slot = g.now() / SLOT;
    let keys = ["u0", "u1", "u2", "u3", "u4", "u5"];
    let mut went = 0;
    let mut asked = 0;
    while g.now() / SLOT == slot && g.now() % SLOT < 600 * MS {
        for i in 0..2 {
            let ask = user(keys[asked % keys.len()], &T_IN_O).hold_ms(0);
            went += usize::from(g.ask(i, &ask).unwrap().ok);
            asked += 1;
        }
        g.advance(5 * MS);
    }
    eprintln!("went: {went} of {asked}");
    assert!((2..=4).contains(&went), "team t's 4 at most, across the group: {went}");
}

/// A real locker from the command line: `ask --parent` charges every
/// level or none, a missing key is an error naming it, `refund --parent`
/// gives back to every level; a config whose parent closes a cycle is
/// refused by `check-config` with its line, and by a SIGHUP, which keeps
/// the old limits serving.
#[test]
fn a_real_locker_asks_and_refunds_under_parents_and_refuses_a_cycle_with_its_line() {
    let config = crate::support::TempFile::new("parents.toml", CONFIG);
    let d = crate::support::Daemon::start_logged(&["--config", config.path()]);
    let up = ["--parent", "team=t", "--parent", "org=o"];
    let ask = |key: &str, cost: &str| {
        let mut args = vec!["ask", "--limit", "user", "--key", key, "--cost", cost, "--json"];
        args.extend_from_slice(&up);
        cli(&d.endpoint, &args)
    };
    let (code, out, _) = ask("a", "3");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (code, v["ok"].as_bool(), v["limit"].as_u64(), v["remaining"].as_u64()),
        (Some(0), Some(true), Some(4), Some(1))
    );
    let (code, out, _) = ask("b", "2");
    assert_eq!(code, Some(1), "team t has 1 left: {out}");
    let (code, _, err) = cli(&d.endpoint, &["ask", "--limit", "user", "--key", "b", "--parent", "team=t"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("the ask names no key for \"org\" in \"parents\""), "{err}");
    let mut refund = vec!["refund", "--limit", "user", "--key", "a", "--cost", "2"];
    refund.extend_from_slice(&up);
    let (code, out, _) = cli(&d.endpoint, &refund);
    assert_eq!((code, out.as_str()), (Some(0), "refunded 2, 3 left\n"), "team t's figures, the fewest left");
    assert_eq!(ask("b", "2").0, Some(0), "team t and org o had the 2 back");
    let (code, out, _) = cli(&d.endpoint, &["ask", "--limit", "org", "--key", "o", "--cost", "0", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["remaining"].as_u64(),
        Some(2),
        "org o: 3 of 5"
    );

    let cycle = CONFIG.replace("name = 'org'\n", "name = 'org'\nparent = 'user'\n");
    let bad = crate::support::TempFile::new("parents-cycle.toml", &cycle);
    let out = crate::support::run_locker(&["check-config", bad.path()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(", line 4: limit \"org\": parent \"user\" closes a cycle: org > user > team > org"), "{err}");
    std::fs::write(config.path(), &cycle).unwrap();
    d.signal("HUP");
    let log = d.log_with("config not reloaded");
    assert!(log.contains("config not reloaded") && log.contains("closes a cycle"), "{log}");
    assert_eq!(ask("c", "2").0, Some(1), "the old chain still serves: team t has 1 left");
}
