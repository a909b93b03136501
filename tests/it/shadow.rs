//! Dry runs ("shadow"). On the seam, from a config file's text: a limit
//! in shadow never refuses, and its would-be sorries are answered go with
//! `shadow_sorry`, counted, and charged nothing, so that the count after
//! one is where a real sorry leaves it (every kind); the per-ask flag does
//! the same on any limit, and is never held or reserved; an `all` with a
//! shadow part, a part under parents, a batch entry, an undelivered reply.
//! Peered on a simulated clock, and on a store with its answers written by
//! hand. A real locker: `locker ask --shadow`, the stats column and the
//! scraped `locker_shadow_sorry_total`, and a SIGHUP that takes a limit
//! out of shadow keeping its counts.

use locker::config::{FileConfig, Flags, ServeConfig};
use locker::core::{Limit, Locker, Nanos, Quota, DEFAULT_LIMIT};
use locker::service::{step, Answer, Service};
use locker::wire::{self, AllReply, Ask, GoReply, Parents, Reply};

use crate::support::{answer, ask_body, cli, seam, seam_all, seam_ask, seam_stats, serve};

const MS: Nanos = 1_000_000;
/// An instant on a 60 s boundary, and one a second into that slot.
const T0: Nanos = 28_000_000 * 60_000 * MS;
const T: Nanos = T0 + 1_000 * MS;

/// `new-api` (2 per minute) in shadow beside `api` (2 per minute), a
/// bucket and a rolling window, and `user` (2) under `team` (4); the
/// default limit (1 per minute, held up to a second) in shadow too.
const CONFIG: &str = "
[[limits]]
name = 'default'
max_requests = 1
in_seconds = 60
hold_ms = 1000
shadow = true

[[limits]]
name = 'new-api'
max_requests = 2
in_seconds = 60
shadow = true

[[limits]]
name = 'api'
max_requests = 2
in_seconds = 60

[[limits]]
name = 'bucket'
algorithm = 'token-bucket'
max_requests = 2
in_seconds = 60
burst = 3

[[limits]]
name = 'rolling'
algorithm = 'rolling-window'
max_requests = 3
in_seconds = 60

[[limits]]
name = 'team'
max_requests = 4
in_seconds = 60

[[limits]]
name = 'user'
max_requests = 2
in_seconds = 60
parent = 'team'
";

fn served_from(text: &str) -> Service {
    let config = ServeConfig::resolve(Flags::default(), FileConfig::parse(text).unwrap()).unwrap();
    Service::new(Locker::new(config.default, config.limits, config.max_keys))
}

fn served() -> Service {
    served_from(CONFIG)
}

/// `limit`'s (go, sorry, shadow_sorry) as stats count them.
fn counted(s: &mut Service, limit: &str) -> (u64, u64, u64) {
    let stats = seam_stats(s, T);
    let l = stats.limits.iter().find(|l| l.name == limit).unwrap();
    (l.go, l.sorry, l.shadow_sorry)
}

/// What `limit` key `key` has left, peeked.
fn left(s: &mut Service, limit: &str, key: &str) -> u32 {
    seam_ask(s, T, &Ask::new().limit(limit).key(key).cost(0)).unwrap().remaining
}

static TEAM_T: [(&str, &str); 1] = [("team", "t")];
static TEAM_T2: [(&str, &str); 1] = [("team", "t2")];

#[test]
fn a_limit_in_shadow_never_refuses_and_counts_each_sorry_it_answered_go() {
    let mut s = served();
    let ask = Ask::new().limit("new-api").key("a");
    for _ in 0..2 {
        let r = seam_ask(&mut s, T, &ask).unwrap();
        assert!(r.ok && !r.shadow_sorry, "{r:?}");
    }
    let r = seam_ask(&mut s, T, &ask).unwrap();
    assert!(r.ok && r.shadow_sorry, "a would-be sorry goes, and says so: {r:?}");
    assert_eq!((r.remaining, r.retry_after_ms), (0, 59_000), "with the sorry's figures");
    assert!(seam_ask(&mut s, T, &ask.cost(2)).unwrap().shadow_sorry);
    assert_eq!(counted(&mut s, "new-api"), (2, 2, 2), "each counted as a sorry too");
    // The plain form of a default limit in shadow: "go", though it holds.
    assert_eq!(seam(&mut s, T, b"let me go"), b"go");
    assert_eq!(serve(&mut s, T, 7, b"let me go"), (Answer::Now, b"go".to_vec()), "never held");
    assert_eq!(counted(&mut s, "default"), (1, 1, 1), "the held-for one counted as the other");
    let bytes = seam(&mut s, T, &ask_body(&Ask::new().limit("api").key("a")));
    assert!(!bytes.windows(12).any(|w| w == b"shadow_sorry"), "other replies keep their bytes");
}

/// The same asks of each kind, in shadow and not: every reply has the same
/// figures, a sorry is a shadow go, and so the count after it is exactly
/// where a real sorry leaves it.
#[test]
fn the_count_after_a_shadow_sorry_is_where_a_real_sorry_leaves_it_for_every_kind() {
    let costs = [1, 2, 1, 1, 2, 1, 2, 1];
    for limit in ["api", "bucket", "rolling", "new-api"] {
        let (mut shadowed, mut plain) = (served(), served_from(&CONFIG.replace("shadow = true", "shadow = false")));
        let mut shadow_sorries = 0;
        for (i, &cost) in costs.iter().enumerate() {
            let now = T + i as Nanos * 700 * MS;
            let ask = Ask::new().limit(limit).key("k").cost(cost);
            let (real, dry) = (seam_ask(&mut plain, now, &ask).unwrap(), seam_ask(&mut shadowed, now, &ask.shadow()));
            let dry = dry.unwrap();
            assert!(dry.ok, "{limit} #{i}: {dry:?}");
            assert_eq!(dry.shadow_sorry, !real.ok, "{limit} #{i}: {real:?}");
            assert_eq!(GoReply { ok: real.ok, shadow_sorry: false, ..dry }, real, "{limit} #{i}: the same figures");
            shadow_sorries += u64::from(dry.shadow_sorry);
        }
        assert!(shadow_sorries > 0, "{limit}: some asks would have been refused");
        let stats = seam_stats(&mut shadowed, T);
        let l = stats.limits.iter().find(|l| l.name == limit).unwrap();
        assert_eq!((l.sorry, l.shadow_sorry), (shadow_sorries, shadow_sorries), "{limit}");
    }
}

#[test]
fn an_ask_in_shadow_is_never_held_or_reserved() {
    let mut s = served();
    let ask = Ask::new().limit("api").key("a");
    assert!(seam_ask(&mut s, T, &ask.cost(2)).unwrap().ok);
    let held = ask_body(&ask.hold_ms(5_000).shadow());
    let (answered, reply) = serve(&mut s, T, 1, &held);
    assert_eq!(answered, Answer::Now, "answered at once");
    let r: GoReply = answer(&reply).unwrap();
    assert!(r.ok && r.shadow_sorry, "{r:?}");
    let r = seam_ask(&mut s, T, &ask.max_wait_ms(60_000).shadow()).unwrap();
    assert_eq!((r.ok, r.shadow_sorry, r.wait_ms), (true, true, Some(0)), "no reservation");
    let r = seam_ask(&mut s, T, &ask.max_wait_ms(60_000)).unwrap();
    assert!(r.ok && r.wait_ms > Some(0) && !r.shadow_sorry, "a usual ask still reserves the next slot: {r:?}");
    assert_eq!(counted(&mut s, "api"), (2, 2, 2), "the two shadow sorries; the reservation a go");
}

fn all(s: &mut Service, parts: &[Ask]) -> Result<AllReply, String> {
    seam_all(s, T, parts)
}

/// A part in shadow that would refuse charges nothing and does not refuse
/// the whole; the other parts decide as usual; the reply says so.
#[test]
fn an_all_with_a_part_in_shadow_that_would_refuse_goes_on_its_other_parts() {
    let mut s = served();
    assert!(seam_ask(&mut s, T, &Ask::new().limit("new-api").key("a").cost(2)).unwrap().ok);
    assert!(seam_ask(&mut s, T, &Ask::new().limit("bucket").key("a").cost(3)).unwrap().ok);
    let api = Ask::new().limit("api").key("a");
    let r = all(&mut s, &[api, Ask::new().limit("new-api").key("a"), Ask::new().limit("bucket").key("a").shadow()]);
    let r = r.unwrap();
    assert!(r.ok && r.shadow_sorry, "{r:?}");
    let parts: Vec<(bool, bool)> = r.replies.iter().map(|p| (p.ok, p.shadow_sorry)).collect();
    assert_eq!(parts, [(true, false), (true, true), (true, true)]);
    assert_eq!(left(&mut s, "api", "a"), 1, "api charged");
    assert_eq!(counted(&mut s, "new-api"), (1, 1, 1));
    assert_eq!(counted(&mut s, "bucket"), (1, 1, 1));
    // A part not in shadow still refuses the whole: nothing is charged, and
    // nothing was a shadow sorry.
    assert!(seam_ask(&mut s, T, &api).unwrap().ok);
    let r = all(&mut s, &[Ask::new().limit("rolling").key("a"), api, Ask::new().limit("new-api").key("a")]).unwrap();
    assert!(!r.ok && !r.shadow_sorry, "{r:?}");
    assert_eq!(left(&mut s, "rolling", "a"), 3, "charged nothing");
    assert_eq!(counted(&mut s, "new-api"), (1, 2, 1));
    // A part in shadow that would go is charged as usual.
    let r = all(&mut s, &[Ask::new().limit("rolling").key("a").shadow()]).unwrap();
    assert!(r.ok && !r.shadow_sorry);
    assert_eq!(left(&mut s, "rolling", "a"), 2);
}

#[test]
fn an_ask_under_parents_in_shadow_charges_no_level_and_a_parent_in_shadow_does_not_refuse() {
    let mut s = served();
    let user = |key, team: &'static [(&'static str, &'static str)]| {
        Ask::new().limit("user").key(key).parents(Parents::new(team))
    };
    assert!(seam_ask(&mut s, T, &user("a", &TEAM_T).cost(2)).unwrap().ok);
    assert!(seam_ask(&mut s, T, &user("b", &TEAM_T).cost(2)).unwrap().ok, "team t is spent");
    let r = seam_ask(&mut s, T, &user("c", &TEAM_T).shadow()).unwrap();
    assert!(r.ok && r.shadow_sorry && r.remaining == 0, "team t's figures: {r:?}");
    assert_eq!(counted(&mut s, "team").2, 1, "counted on the level that would refuse");
    assert_eq!(counted(&mut s, "user").2, 0);
    let r = all(&mut s, &[user("d", &TEAM_T).shadow(), Ask::new().limit("api").key("d")]).unwrap();
    assert_eq!((r.ok, r.replies[0].shadow_sorry, r.replies[1].shadow_sorry), (true, true, false));
    assert_eq!(left(&mut s, "api", "d"), 1);
    // Users c and d were charged nothing: each still has its 2.
    assert!(seam_ask(&mut s, T, &user("c", &TEAM_T2).cost(2)).unwrap().ok);
    assert!(seam_ask(&mut s, T, &user("d", &TEAM_T2).cost(2)).unwrap().ok);

    // The parent in shadow: the child is charged, the parent only counts.
    let mut s = served_from(&CONFIG.replace("name = 'team'\n", "name = 'team'\nshadow = true\n"));
    assert!(seam_ask(&mut s, T, &user("a", &TEAM_T).cost(2)).unwrap().ok);
    assert!(seam_ask(&mut s, T, &user("b", &TEAM_T).cost(2)).unwrap().ok);
    let r = seam_ask(&mut s, T, &user("c", &TEAM_T)).unwrap();
    assert!(r.ok && r.shadow_sorry, "{r:?}");
    assert_eq!(left(&mut s, "team", "t"), 0, "team t charged nothing more");
    assert_eq!(seam_ask(&mut s, T, &user("c", &TEAM_T2).cost(0)).unwrap().remaining, 1, "user c was charged");
    // A peek with levels counts as a go of each level, as an `all`'s part.
    assert_eq!((counted(&mut s, "team"), counted(&mut s, "user")), ((3, 1, 1), (4, 0, 0)));
}

#[test]
fn a_batch_entry_in_shadow_is_decided_as_alone_and_an_undelivered_shadow_go_gives_nothing_back() {
    let mut s = served();
    let ask = Ask::new().limit("api").key("a");
    let mut body = Vec::new();
    wire::encode_batch(&[ask.cost(2), ask.shadow(), ask], &mut body);
    let Reply::Answer(replies) = wire::decode_batch_reply(&seam(&mut s, T, &body)).unwrap() else { panic!() };
    let got: Vec<(bool, bool)> = replies.iter().map(|r| r.as_ref().map(|r| (r.ok, r.shadow_sorry)).unwrap()).collect();
    assert_eq!(got, [(true, false), (true, true), (false, false)]);
    // Spend new-api, then lose a shadow go's reply: nothing goes back.
    let new = Ask::new().limit("new-api").key("a");
    assert!(seam_ask(&mut s, T, &new.cost(2)).unwrap().ok);
    let body = ask_body(&new);
    let reply = seam(&mut s, T, &body);
    assert!(answer::<GoReply>(&reply).unwrap().shadow_sorry);
    crate::support::undelivered(&mut s, T, &body, &reply);
    assert_eq!(left(&mut s, "new-api", "a"), 0, "it took nothing, and gave nothing back");
    // The plain form of the default limit in shadow: its reply cannot say
    // whether it took, so a lost one gives nothing back.
    assert_eq!(seam(&mut s, T, b"let me go"), b"go");
    assert_eq!(seam(&mut s, T, b"let me go"), b"go", "a shadow sorry");
    crate::support::undelivered(&mut s, T, b"let me go", b"go");
    assert_eq!(seam_ask(&mut s, T, &Ask::new().cost(0)).unwrap().remaining, 0, "still spent");
}

/// Two peered lockers on a simulated clock, asked in shadow by turns: every
/// ask goes, the group's real goes stay within the limit, and once spent a
/// usual ask is refused on either locker.
#[test]
fn peered_lockers_answer_shadow_asks_go_and_charge_only_what_the_limit_allows() {
    use locker::sim::{self, Group};
    const SLOT: Nanos = 1_000 * MS;
    let make = |boot: &sim::Boot| {
        let q = |n| Quota::new(n, 1.0).unwrap();
        let limits = vec![Limit::new("api", q(4)).unwrap(), Limit::new("new-api", q(4)).unwrap().with_shadow(true)];
        sim::peered(Locker::new(Limit::new(DEFAULT_LIMIT, q(1)).unwrap(), limits, 100), boot, 300 * MS)
    };
    let mut g = Group::new(2, crate::group::T0, 11, Box::new(make));
    g.advance(800 * MS);
    g.advance_to((g.now() / SLOT + 1) * SLOT + MS);
    let slot = g.now() / SLOT;
    let (mut went, mut shadow_sorries, mut asked) = ([0; 2], [0; 2], 0);
    while g.now() / SLOT == slot && g.now() % SLOT < 600 * MS {
        for i in 0..2 {
            for (n, ask) in
                [Ask::new().limit("api").key("k").shadow(), Ask::new().limit("new-api").key("k")].iter().enumerate()
            {
                let r = g.ask(i, ask).unwrap();
                assert!(r.ok, "{r:?}");
                went[n] += usize::from(!r.shadow_sorry);
                shadow_sorries[n] += usize::from(r.shadow_sorry);
            }
            asked += 1;
        }
        g.advance(5 * MS);
    }
    eprintln!("went {went:?}, shadow sorries {shadow_sorries:?} of {asked}");
    for n in 0..2 {
        assert!((2..=4).contains(&went[n]), "4 at most across the group: {went:?}");
        assert_eq!(went[n] + shadow_sorries[n], asked);
    }
    let stats: u64 = (0..2).map(|i| crate::support::sim_stats(&mut g, i).limits[2].shadow_sorry).sum::<u64>();
    assert_eq!(stats, shadow_sorries[1] as u64, "each counted where it was answered");
    let r = g.ask(1, &Ask::new().limit("api").key("k")).unwrap();
    assert!(!r.ok, "spent across the group: {r:?}");
}

/// On a store, with its answers written by hand: a shadow ask the claims
/// cannot cover is answered go, charging nothing, through the same
/// decision.
#[test]
fn on_a_store_a_shadow_ask_the_claims_cannot_cover_goes_and_charges_nothing() {
    use crate::support::{ready, store_calls};
    use locker::core::claims::{Claimed, Grant};
    let q = Quota::new(100, 1.0).unwrap();
    let limits = vec![Limit::new("api", q).unwrap()];
    let mut s = Service::new(Locker::new(Limit::new(DEFAULT_LIMIT, q).unwrap(), limits, 100)).with_store();
    let answer_claims = |s: &mut Service, now: Nanos, got: u32| {
        let claims = store_calls(s, now).claims;
        let grant = Ok(Grant { got, valid_us: 1_000_000, left: 0, retry_us: 500_000, debt: 0 });
        let claimed = claims.iter().map(|c| Claimed { id: c.id, node: "n:1".into(), grant: grant.clone() });
        step::store_answers(s, now, claimed.collect(), Vec::new());
    };
    // The reply to `ask` at `now`, the store answering every claim with `got`.
    let ask_at = |s: &mut Service, now: Nanos, token, ask: &Ask, got: u32| -> GoReply {
        let (answered, reply) = serve(s, now, token, &ask_body(ask));
        if answered == Answer::Now {
            return answer(&reply).unwrap();
        }
        answer_claims(s, now + MS, got);
        let mut replies = ready(s, now + MS);
        assert_eq!(replies.len(), 1, "{replies:?}");
        answer(&replies.remove(0).1).unwrap()
    };
    let api = Ask::new().limit("api").key("k");
    assert!(ask_at(&mut s, T, 1, &api.cost(2), 2).ok, "the claim brought 2, the store has none left");
    let r = ask_at(&mut s, T + 2 * MS, 2, &api.shadow(), 0);
    assert!(r.ok && r.shadow_sorry, "{r:?}");
    let r = ask_at(&mut s, T + 4 * MS, 3, &api, 0);
    assert!(!r.ok, "a usual ask is refused as before: {r:?}");
    let stats = s.locker().figures().stats().nth(1).unwrap().1;
    assert_eq!((stats.go, stats.sorry, stats.shadow_sorry), (1, 2, 1));
}

/// A real locker: `locker ask --shadow` prints "go (shadow sorry)" and
/// exits 0; `locker stats` has the column; the scrape counts it per limit;
/// a SIGHUP that takes the limit out of shadow keeps its count, which
/// then refuses.
#[test]
fn a_real_locker_asks_in_shadow_counts_it_in_stats_and_metrics_and_a_reload_ends_the_shadow() {
    let text = "[[limits]]\nname = 'new-api'\nmax_requests = 1\nin_seconds = 86400\nshadow = true\n\n\
                [[limits]]\nname = 'api'\nmax_requests = 1\nin_seconds = 86400\n";
    let config = crate::support::TempFile::new("shadow.toml", text);
    let metrics = format!("127.0.0.1:{}", crate::support::free_port());
    let d = crate::support::Daemon::start_logged(&["--config", config.path(), "--metrics-bind", &metrics]);
    let ask = |limit: &str, extra: &[&str]| {
        let mut args = vec!["ask", "--limit", limit, "--key", "k"];
        args.extend_from_slice(extra);
        let (code, out, _) = cli(&d.endpoint, &args);
        (code, out)
    };
    assert_eq!(ask("new-api", &[]), (Some(0), "go\n".to_owned()));
    assert_eq!(ask("new-api", &[]), (Some(0), "go (shadow sorry)\n".to_owned()), "the limit in shadow");
    let (code, out) = ask("api", &["--shadow", "--json"]);
    assert_eq!(code, Some(0));
    assert!(!out.contains("shadow_sorry"), "api had room: {out}");
    let (code, out) = ask("api", &["--shadow", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, v["ok"].as_bool(), v["shadow_sorry"].as_bool()), (Some(0), Some(true), Some(true)));
    assert_eq!(ask("api", &[]), (Some(1), "sorry\n".to_owned()), "the shadow go took nothing, the count is as it was");
    let (_, out, _) = cli(&d.endpoint, &["stats"]);
    assert!(out.lines().next().unwrap().ends_with("shadow_sorry"), "{out}");
    let row = out.lines().find(|l| l.starts_with("new-api")).unwrap();
    assert!(row.ends_with(" 1"), "{row}");
    // The api's came last: a scrape that has it has new-api's.
    let scrape = crate::prometheus::scrape_with(&metrics, "locker_shadow_sorry_total{limit=\"api\"} 1");
    assert!(scrape.contains("locker_shadow_sorry_total{limit=\"new-api\"} 1"), "{scrape}");

    std::fs::write(config.path(), text.replace("shadow = true", "shadow = false")).unwrap();
    d.signal("HUP");
    d.log_with("config reloaded");
    assert_eq!(ask("new-api", &[]), (Some(1), "sorry\n".to_owned()), "out of shadow, with the count it had");
    let (code, out) = ask("new-api", &["--shadow"]);
    assert_eq!((code, out.as_str()), (Some(0), "go (shadow sorry)\n"), "the per-ask flag still dry-runs");
}
