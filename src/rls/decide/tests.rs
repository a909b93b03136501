use super::super::proto::{Entry, RateLimitDescriptor, RateLimitOverride, UInt64Value, Unit};
use super::*;
use crate::wire::{ErrorReply, Request};

const CONFIG: &str = "
domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: ldap
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: soft
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    rate_limit: {name: a_limit, unit: second, requests_per_unit: 1}
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 1
      replaces: [{name: a_limit}]
";

fn table() -> Table {
    let mut t = Table::default();
    t.add("t.yaml", CONFIG).unwrap();
    t
}

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    let entries = entries.iter().map(|(k, v)| Entry { key: k.to_string(), value: v.to_string() }).collect();
    RateLimitDescriptor { entries, limit: None, hits_addend: None }
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest { domain: "d".into(), descriptors, hits_addend: 0 }
}

/// The asks a plan sends, as (limit, key, cost).
fn asks(plan: &Plan) -> Vec<(String, String, u64)> {
    let Ok(Request::Batch(batch)) = wire::decode_request(&plan.body) else { panic!("not a batch") };
    let ask = |a: Ask| (a.limit.unwrap().to_owned(), a.key.unwrap().to_owned(), a.cost);
    batch.iter().map(|a| ask(a.unwrap())).collect()
}

/// A batch reply of `replies`.
fn reply(replies: &[Result<GoReply, &str>]) -> Vec<u8> {
    let mut out = Vec::new();
    wire::begin_batch_reply(replies.len(), &mut out);
    for r in replies {
        match r {
            Ok(go) => wire::encode_go_reply(go, &mut out),
            Err(e) => wire::encode(&ErrorReply { error: e.to_string() }, &mut out),
        }
    }
    out
}

fn go(ok: bool, remaining: u32) -> GoReply {
    GoReply {
        ok,
        limit: 5,
        remaining,
        retry_after_ms: 0,
        reset_after_ms: 1_500,
        granted: None,
        wait_ms: None,
        shadow_sorry: false,
    }
}

fn codes(response: &RateLimitResponse) -> Vec<i32> {
    response.statuses.iter().map(|s| s.code).collect()
}

const ANSWERING: Answering = Answering { max_message_size: 65_536, runtime_limits: true, headers: None };

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

#[test]
fn each_descriptor_is_one_ask_costing_its_hits() {
    let t = table();
    let mut r = request(vec![descriptor(&[("user", "u1")]), descriptor(&[("user", "u2")]), descriptor(&[("x", "y")])]);
    r.hits_addend = 3;
    r.descriptors[1].hits_addend = Some(UInt64Value { value: 2 });
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    assert_eq!(asks(&plan), [("d.user".into(), "u1".into(), 3), ("d.user".into(), "u2".into(), 2)]);
    let response = answer(&plan, &reply(&[Ok(go(true, 2)), Ok(go(false, 0))])).unwrap();
    assert_eq!(codes(&response), [OK, OVER, OK]);
    assert_eq!(response.overall_code, OVER);
    let first = &response.statuses[0];
    assert_eq!(first.limit_remaining, 2);
    assert_eq!(
        first.current_limit,
        Some(RateLimit { name: String::new(), requests_per_unit: 5, unit: Unit::Minute as i32 })
    );
    assert_eq!(first.duration_until_reset, Some(Duration { seconds: 1, nanos: 500_000_000 }));
    assert_eq!(
        response.statuses[2],
        DescriptorStatus { code: OK, ..DescriptorStatus::default() },
        "unmatched: OK, no limit"
    );
}

#[test]
fn rules_decided_without_the_locker() {
    let t = table();
    let r = request(vec![descriptor(&[("ldap", "x")]), descriptor(&[("blocked", "x")])]);
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    assert!(plan.body.is_empty(), "nothing to count");
    let response = answer(&plan, b"").unwrap();
    assert_eq!(codes(&response), [OK, OVER]);
    assert_eq!(response.statuses[0].limit_remaining, u32::MAX);
    // More hits than the limit holds: over at once, as the count would say.
    let mut big = request(vec![descriptor(&[("user", "u")])]);
    big.hits_addend = 6;
    let plan = super::plan(&t, &big, &ANSWERING).unwrap();
    assert_eq!(codes(&answer(&plan, b"").unwrap()), [OVER]);
}

#[test]
fn shadow_mode_counts_and_answers_ok() {
    let t = table();
    let plan = plan(&t, &request(vec![descriptor(&[("soft", "x")])]), &ANSWERING).unwrap();
    assert_eq!(asks(&plan).len(), 1, "counted");
    let response = answer(&plan, &reply(&[Ok(go(false, 0))])).unwrap();
    assert_eq!((codes(&response), response.overall_code), (vec![OK], OK));
}

/// A shadow_mode rule asks in shadow, so that the locker counts its
/// would-be refusal (`locker_shadow_sorry_total`); the locker's go that
/// says `shadow_sorry` is answered OK with nothing remaining, as
/// envoyproxy/ratelimit answers a shadow rule over its limit.
#[test]
fn shadow_mode_asks_in_shadow_and_its_shadow_sorry_is_ok_with_nothing_remaining() {
    let t = table();
    let plan = plan(&t, &request(vec![descriptor(&[("soft", "x")]), descriptor(&[("user", "u")])]), &ANSWERING);
    let plan = plan.unwrap();
    let Ok(Request::Batch(batch)) = wire::decode_request(&plan.body) else { panic!("not a batch") };
    let shadows: Vec<bool> = batch.iter().map(|a| a.unwrap().shadow).collect();
    assert_eq!(shadows, [true, false], "only the shadow_mode rule's ask");
    let would_be_sorry = GoReply { shadow_sorry: true, ..go(true, 0) };
    let response = answer(&plan, &reply(&[Ok(would_be_sorry), Ok(go(true, 4))])).unwrap();
    assert_eq!((codes(&response), response.overall_code), (vec![OK, OK], OK));
    assert_eq!((response.statuses[0].limit_remaining, response.statuses[1].limit_remaining), (0, 4));
}

#[test]
fn a_replaced_rule_does_not_apply() {
    let t = table();
    let plan = plan(&t, &request(vec![descriptor(&[("a", "x")]), descriptor(&[("b", "x")])]), &ANSWERING).unwrap();
    assert_eq!(asks(&plan), [("d.b".into(), "x".into(), 1)]);
    let response = answer(&plan, &reply(&[Ok(go(true, 0))])).unwrap();
    assert_eq!(response.statuses[0].current_limit, None);
}

#[test]
fn a_check_is_never_over() {
    let t = table();
    let mut r = request(vec![descriptor(&[("user", "u")])]);
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    assert_eq!(asks(&plan)[0].2, 0, "a peek");
    let response = answer(&plan, &reply(&[Ok(go(false, 0))])).unwrap();
    assert_eq!(codes(&response), [OK]);
}

#[test]
fn bad_requests_are_refused_whole() {
    let t = table();
    let mut r = request(vec![descriptor(&[("user", "u")])]);
    r.domain.clear();
    assert_eq!(plan(&t, &r, &ANSWERING).unwrap_err(), BadRequest::NoDomain);
    assert_eq!(plan(&t, &request(vec![]), &ANSWERING).unwrap_err(), BadRequest::NoDescriptors);
    assert_eq!(plan(&t, &request(vec![descriptor(&[])]), &ANSWERING).unwrap_err(), BadRequest::NoEntries(0));
    let r = request(vec![descriptor(&[("user", "u")]), descriptor(&[("", "u")])]);
    assert_eq!(plan(&t, &r, &ANSWERING).unwrap_err(), BadRequest::EmptyKey(1));
    let many = request(vec![descriptor(&[("user", "u")]); 1001]);
    assert_eq!(plan(&t, &many, &ANSWERING).unwrap_err(), BadRequest::TooManyDescriptors(1001));
    let long = request(vec![descriptor(&[("user", &"u".repeat(200))])]);
    assert!(matches!(
        plan(&t, &long, &Answering { max_message_size: 100, ..ANSWERING }).unwrap_err(),
        BadRequest::TooLarge(_)
    ));
}

#[test]
fn the_lockers_refusals_are_not_statuses() {
    let t = table();
    let plan = plan(&t, &request(vec![descriptor(&[("user", "u")])]), &ANSWERING).unwrap();
    assert!(matches!(answer(&plan, &reply(&[Err("too many keys")])), Err(Unanswered::Entry(_))));
    let mut refused = Vec::new();
    wire::encode(&ErrorReply { error: "no".into() }, &mut refused);
    assert_eq!(answer(&plan, &refused), Err(Unanswered::Refused("no".into())));
    assert!(matches!(answer(&plan, b"\xc1"), Err(Unanswered::Unreadable(_))));
}

fn overridden(entries: &[(&str, &str)], requests_per_unit: u32, unit: Unit) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(RateLimitOverride { requests_per_unit, unit: unit as i32 }),
        ..descriptor(entries)
    }
}

#[test]
fn an_override_is_a_limit_sent_with_the_ask() {
    let t = table();
    // It wins over the config's rule, and applies where none matches.
    let r = request(vec![
        overridden(&[("user", "u1")], 3, Unit::Minute),
        overridden(&[("x", "1"), ("y", "2")], 7, Unit::Second),
    ]);
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    let Ok(Request::Batch(batch)) = wire::decode_request(&plan.body) else { panic!("not a batch") };
    let sent: Vec<_> = batch.iter().map(Result::unwrap).collect();
    assert_eq!(
        sent,
        [
            Ask::new().limit("d/user/minute").key("u1").terms(Terms::new("fixed-window", 3, 60.0)),
            Ask::new().limit("d/x/y/second").key("1|2").terms(Terms::new("fixed-window", 7, 1.0)),
        ]
    );
    let response = answer(&plan, &reply(&[Ok(go(true, 2)), Ok(go(false, 0))])).unwrap();
    assert_eq!(codes(&response), [OK, OVER]);
    // The status reports the override, with no name.
    assert_eq!(
        response.statuses[0].current_limit,
        Some(RateLimit { name: String::new(), requests_per_unit: 3, unit: Unit::Minute as i32 })
    );
    // Not in a domain the config lacks, as envoyproxy/ratelimit.
    let mut other = request(vec![overridden(&[("user", "u1")], 3, Unit::Minute)]);
    other.domain = "elsewhere".into();
    let plan = super::plan(&t, &other, &ANSWERING).unwrap();
    assert!(plan.body.is_empty());
    assert_eq!(answer(&plan, b"").unwrap().statuses[0].current_limit, None);
}

#[test]
fn an_override_of_none_is_over_and_a_shadow_rule_is_not_its_own() {
    let t = table();
    let r = request(vec![overridden(&[("user", "u")], 0, Unit::Second), overridden(&[("soft", "x")], 1, Unit::Second)]);
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    assert_eq!(asks(&plan).len(), 1, "0 per unit asks nothing");
    let response = answer(&plan, &reply(&[Ok(go(false, 0))])).unwrap();
    assert_eq!(codes(&response), [OVER, OVER], "an override is never in shadow mode");
}

#[test]
fn an_override_needs_runtime_limits_and_a_unit_a_locker_counts() {
    let t = table();
    let off = Answering { runtime_limits: false, ..ANSWERING };
    let r = request(vec![descriptor(&[("user", "u")]), overridden(&[("user", "u")], 3, Unit::Minute)]);
    let e = plan(&t, &r, &off).unwrap_err();
    assert_eq!(e, BadRequest::NoRuntimeLimits(1));
    assert!(e.to_string().contains("--runtime-limits"), "{e}");
    let r = request(vec![overridden(&[("user", "u")], 3, Unit::Week)]);
    let e = plan(&t, &r, &ANSWERING).unwrap_err();
    assert!(e.to_string().contains("one week, longer than a locker's longest window, a day"), "{e}");
    let r = request(vec![overridden(&[("user", "u")], 3, Unit::Unknown)]);
    assert_eq!(plan(&t, &r, &ANSWERING).unwrap_err(), BadRequest::OverrideUnit(0, 0));
}

const ALL: &str = "domain: together\nall_or_nothing: true\ndescriptors:
  - {key: user, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: blocked, rate_limit: {unit: second, requests_per_unit: 0}}
";

#[test]
fn an_all_or_nothing_domain_asks_as_one_all() {
    let mut t = table();
    t.add("all.yaml", ALL).unwrap();
    let mut r = request(vec![descriptor(&[("user", "a")]), descriptor(&[("user", "b")])]);
    r.domain = "together".into();
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    let Ok(Request::All(all)) = wire::decode_request(&plan.body) else { panic!("not an all") };
    assert_eq!(all.len(), 2);
    // Refused: the part that would have gone is OK, nothing charged.
    let mut out = Vec::new();
    wire::encode(
        &wire::AllReply { ok: false, replies: vec![go(true, 4), go(false, 0)], retry_after_ms: 9, shadow_sorry: false },
        &mut out,
    );
    let response = answer(&plan, &out).unwrap();
    assert_eq!((codes(&response), response.overall_code), (vec![OK, OVER], OVER));
    assert_eq!(response.statuses[0].limit_remaining, 4);
    // A descriptor over before anything is asked: the others are checks.
    r.descriptors.push(descriptor(&[("blocked", "x")]));
    let plan = super::plan(&t, &r, &ANSWERING).unwrap();
    assert_eq!(asks(&plan).iter().map(|a| a.2).collect::<Vec<_>>(), [0, 0]);
    let response = answer(&plan, &reply(&[Ok(go(true, 5)), Ok(go(true, 5))])).unwrap();
    assert_eq!(codes(&response), [OK, OK, OVER]);
    // Other domains keep charging as envoyproxy/ratelimit does.
    let other = request(vec![descriptor(&[("user", "a")]), descriptor(&[("blocked", "x")])]);
    assert_eq!(asks(&super::plan(&t, &other, &ANSWERING).unwrap())[0].2, 1);
    let many = RateLimitRequest { domain: "together".into(), ..request(vec![descriptor(&[("user", "a")]); 17]) };
    assert_eq!(super::plan(&t, &many, &ANSWERING).unwrap_err(), BadRequest::TooManyForAll(17));
}

#[test]
fn a_charge_refused_domain_charges_a_refused_descriptors_hits_after_the_batch() {
    let mut t = table();
    let text = "domain: llm\ncharge_refused: true\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 50}\n";
    t.add("llm.yaml", text).unwrap();
    let mut r = request(vec![descriptor(&[("user", "a")]), descriptor(&[("user", "b")])]);
    r.domain = "llm".into();
    r.hits_addend = 30;
    let plan = plan(&t, &r, &ANSWERING).unwrap();
    let batch = reply(&[Ok(go(true, 20)), Ok(go(false, 10))]);
    let response = answer(&plan, &batch).unwrap();
    assert_eq!((codes(&response), response.overall_code), (vec![OK, OVER], OVER), "still over");
    let charges = charges(&plan, &batch);
    assert_eq!(charges.len(), 1, "only the refused descriptor");
    let Ok(Request::Charge(c)) = wire::decode_request(&charges[0]) else { panic!("not a charge") };
    assert_eq!((c.limit, c.key, c.cost), (Some("llm.user"), Some("b"), 30));
    // Other domains charge nothing refused, as before.
    let mut other = r.clone();
    other.domain = "d".into();
    let plan = super::plan(&t, &other, &ANSWERING).unwrap();
    assert!(super::charges(&plan, &batch).is_empty());
}
