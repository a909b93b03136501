use super::*;

fn table(text: &str) -> Table {
    let mut t = Table::default();
    t.add("test.yaml", text).unwrap();
    t
}

fn error(text: &str) -> String {
    Table::default().add("test.yaml", text).unwrap_err().to_string()
}

/// The rule's locker limit name and the key a descriptor gets, or None.
fn find(t: &Table, domain: &str, entries: &[(&str, &str)]) -> Option<(String, String)> {
    let f = t.find(domain, entries.iter().copied())?;
    let name = f.rule.limit.as_ref().map_or_else(|| "-".to_owned(), |l| l.name().to_owned());
    Some((name, f.key))
}

fn named(name: &str, key: &str) -> Option<(String, String)> {
    Some((name.to_owned(), key.to_owned()))
}

// envoyproxy/ratelimit's README, "Example 2".
const MESSAGING: &str = "
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

#[test]
fn nested_descriptors_match_level_by_level() {
    let t = table(MESSAGING);
    let marketing = [("message_type", "marketing"), ("to_number", "2061111111")];
    assert_eq!(
        find(&t, "messaging", &marketing),
        named("messaging.message_type_marketing.to_number", "marketing|2061111111")
    );
    assert_eq!(find(&t, "messaging", &[("to_number", "2061111111")]), named("messaging.to_number", "2061111111"));
    // The placeholder level has no limit of its own, and a deeper request
    // than the config matches nothing.
    assert_eq!(find(&t, "messaging", &[("message_type", "marketing")]), None);
    assert_eq!(find(&t, "messaging", &[("to_number", "1"), ("x", "y")]), None);
    assert_eq!(find(&t, "messaging", &[("message_type", "other"), ("to_number", "1")]), None);
    assert_eq!(find(&t, "other-domain", &[("to_number", "1")]), None);
    let rule = t.find("messaging", [("to_number", "1")].into_iter()).unwrap().rule;
    assert_eq!((rule.requests_per_unit, rule.unit), (100, Unit::Day));
    let limit = rule.limit.as_ref().unwrap();
    assert_eq!(
        (limit.quota().max_requests(), limit.in_seconds(), limit.algorithm()),
        (100, 86_400.0, Algorithm::FixedWindow)
    );
}

#[test]
fn a_value_is_tried_before_the_bare_key() {
    // README "Example 3": a generic limit per address, and a blocked one.
    let t = table(
        "domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
",
    );
    assert_eq!(
        find(&t, "edge_proxy_per_ip", &[("remote_address", "50.0.0.1")]),
        named("edge_proxy_per_ip.remote_address", "50.0.0.1")
    );
    let blocked = t.find("edge_proxy_per_ip", [("remote_address", "50.0.0.5")].into_iter()).unwrap().rule;
    assert_eq!(
        (blocked.requests_per_unit, blocked.limit.is_none()),
        (0, true),
        "0 per unit counts nothing: always over"
    );
    assert_eq!(t.limits().count(), 1);
}

#[test]
fn unlimited_shadow_and_replaces_are_read() {
    let t = table(
        "domain: example
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {requests_per_unit: 10, unit: second}
        shadow_mode: true
  - key: key_1
    value: value_1
    rate_limit:
      name: specific_limit
      requests_per_unit: 5
      unit: SECOND
  - key: key_2
    rate_limit:
      replaces:
        - name: specific_limit
      requests_per_unit: 10
      unit: second
",
    );
    let ldap = t.find("example", [("ldap", "x")].into_iter()).unwrap().rule;
    assert!(ldap.unlimited && ldap.limit.is_none());
    let shadow = t.find("example", [("service", "auth"), ("user", "user-a")].into_iter()).unwrap().rule;
    assert!(shadow.shadow_mode);
    let replacing = t.find("example", [("key_2", "x")].into_iter()).unwrap().rule;
    assert_eq!(replacing.replaces, ["specific_limit"]);
    let specific = t.find("example", [("key_1", "value_1")].into_iter()).unwrap().rule;
    assert_eq!(specific.name, "specific_limit");
}

#[test]
fn wildcards_match_any_run_and_may_share_a_count() {
    let t = table(
        "domain: w
descriptors:
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: own
    value: own/*
    rate_limit: {unit: hour, requests_per_unit: 10}
",
    );
    assert_eq!(find(&t, "w", &[("path", "/api/123/action")]), named("w.path_/api/*/action", "/api/123/action"));
    assert_eq!(find(&t, "w", &[("path", "/api/123/other")]), None);
    assert_eq!(find(&t, "w", &[("files", "files/a.pdf")]), named("w.files_files/*", "files/*"), "one count for all");
    assert_eq!(find(&t, "w", &[("own", "own/a.pdf")]), named("w.own_own/*", "own/a.pdf"), "a count each");
    let parts = |p: &str| p.split('*').map(str::to_owned).collect::<Vec<_>>();
    assert!(wildcard_match(&parts("a*b*c"), "a-b-c") && wildcard_match(&parts("a*"), "a"));
    assert!(!wildcard_match(&parts("ab*ba"), "aba"), "the literal parts may not overlap");
    assert!(!wildcard_match(&parts("a*b*c"), "a-c-b"));
}

#[test]
fn keys_keep_descriptors_apart() {
    let t = table("domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n");
    let one = find(&t, "d", &[("a", "x|y"), ("b", "z")]).unwrap().1;
    let two = find(&t, "d", &[("a", "x"), ("b", "y|z")]).unwrap().1;
    assert_ne!(one, two);
    assert_eq!(one, "x\\|y|z");
}

#[test]
fn extensions_pick_the_kind_and_the_window() {
    let t = table(
        "domain: x
descriptors:
  - key: smooth
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token-bucket, burst: 20}
  - key: rolling
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: rolling-window}
  - key: short
    rate_limit: {unit: second, requests_per_unit: 5, in_seconds: 0.25}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 5, in_seconds: 86400}
",
    );
    let limit = |k: &str| t.find("x", [(k, "v")].into_iter()).unwrap().rule.limit.clone().unwrap();
    assert_eq!(limit("smooth").algorithm(), Algorithm::token_bucket(20).unwrap());
    assert_eq!(t.find("x", [("smooth", "v")].into_iter()).unwrap().rule.capacity(), 20);
    assert_eq!(limit("rolling").algorithm(), Algorithm::RollingWindow);
    assert_eq!(limit("short").in_seconds(), 0.25);
    assert_eq!(limit("monthly").in_seconds(), 86_400.0);
}

#[test]
fn errors_say_where() {
    let e = error(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
    );
    assert!(e.contains("test.yaml") && e.contains("d.a: invalid rate limit unit \"fortnight\""), "{e}");
    let e = error("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      units: second\n");
    assert!(e.contains("test.yaml: line 5") && e.contains("unknown field `units`"), "{e}");
    let e = error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n");
    assert!(e.contains("test.yaml: line 4"), "{e}");
    assert!(error("descriptors: []\n").contains("domain is empty"));
    assert!(error("domain: d\ndescriptors:\n  - value: v\n").contains("empty key"));
    assert!(error("domain: d\ndescriptors:\n  - key: a\n  - key: a\n").contains("\"d.a\" is defined twice"));
    assert!(error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n")
        .contains("no unit"));
    assert!(
        error("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 5}\n").contains("needs a unit")
    );
    let bucket = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: month, requests_per_unit: 5, algorithm: token-bucket}\n";
    let e = error(bucket);
    assert!(e.contains("d.a: unit month: envoyproxy/ratelimit counts it as one fixed window of 2592000 s"), "{e}");
    assert!(e.contains("longer than a token bucket's or a rolling window's longest, a day"), "{e}");
    for (unit, seconds) in [("week", "604800"), ("year", "31536000")] {
        let e = error(&format!(
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {{unit: {unit}, requests_per_unit: 5, algorithm: rolling-window}}\n"
        ));
        assert!(
            e.contains(&format!("unit {unit}: envoyproxy/ratelimit counts it as one fixed window of {seconds} s")),
            "{e}"
        );
    }
    assert!(error("domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n").contains("wildcard"));
    let mut t = table(MESSAGING);
    assert!(t.add("two.yaml", MESSAGING).unwrap_err().to_string().contains("domain \"messaging\" is defined twice"));
}

#[test]
fn long_or_spaced_paths_get_a_checksum() {
    assert_eq!(limit_name("d.key_value"), "d.key_value");
    let spaced = limit_name("d.key_a b");
    assert!(spaced.starts_with("d.key_a_b~") && spaced.len() == "d.key_a_b".len() + 9, "{spaced}");
    let long = "d.".to_owned() + &"k".repeat(100);
    let name = limit_name(&long);
    assert_eq!(name.len(), 64);
    assert_ne!(name, limit_name(&(long + "x")));
}

#[test]
fn a_folder_loads_every_yaml_file() {
    let dir = std::env::temp_dir().join(format!("locker-rls-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), MESSAGING).unwrap();
    std::fs::write(dir.join("b.yaml"), "domain: other\ndescriptors:\n  - key: k\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "not yaml").unwrap();
    let t = Table::load(&dir).unwrap();
    assert!(t.has_domain("messaging") && t.has_domain("other"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(Table::load(&dir).unwrap_err().to_string().contains("cannot read"));
}

#[test]
fn all_or_nothing_is_a_domains_setting_without_shadow_rules() {
    let t = table("domain: a\nall_or_nothing: true\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
    assert!(t.all_or_nothing("a") && !t.all_or_nothing("b"));
    assert!(!table(MESSAGING).all_or_nothing("messaging"), "off by default");
    let e = error("domain: a\nall_or_nothing: true\ndescriptors:\n  - key: k\n    shadow_mode: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
    assert!(e.contains("test.yaml: a domain that is all_or_nothing has no shadow_mode descriptor"), "{e}");
}

/// envoyproxy/ratelimit's long units are fixed dividers of Unix time
/// (`UnitToDivider`: a week of 604,800 s, a month of 30 days, a year of
/// 365), not calendar periods: a fixed window of each, aligned to the epoch.
#[test]
fn long_units_are_fixed_windows_of_envoys_dividers() {
    let t = table(
        "domain: x
descriptors:
  - key: w
    rate_limit: {unit: week, requests_per_unit: 7}
  - key: m
    rate_limit: {unit: month, requests_per_unit: 30}
  - key: y
    rate_limit: {unit: YEAR, requests_per_unit: 365}
",
    );
    let rule = |k: &str| t.find("x", [(k, "v")].into_iter()).unwrap().rule.clone();
    const S: u64 = 1_000_000_000;
    for (key, divider) in [("w", 604_800), ("m", 2_592_000), ("y", 31_536_000)] {
        let rule = rule(key);
        let limit = rule.limit.clone().unwrap();
        assert_eq!((limit.algorithm(), limit.quota().calendar()), (Algorithm::FixedWindow, None), "{key}");
        assert_eq!(limit.quota().slot_ns(), divider * S, "{key}");
        assert_eq!(rule.window_s(), divider as f64, "{key}");
        // Slots are multiples of the divider since the epoch, as
        // envoyproxy/ratelimit's `now / divider`.
        let now = 1_795_000_000 * S;
        assert_eq!(limit.quota().slot_of(now), now / (divider * S), "{key}");
        assert_eq!(limit.quota().slot_end(limit.quota().slot_of(now)) % (divider * S), 0, "{key}");
    }
    assert_eq!(rule("m").limit.unwrap().quota().max_requests(), 30);
}

#[test]
fn charge_refused_is_a_domains_setting_apart_from_all_or_nothing() {
    let t = table("domain: a\ncharge_refused: true\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
    assert!(t.charge_refused("a") && !t.charge_refused("b"));
    assert!(!table(MESSAGING).charge_refused("messaging"), "off by default");
    let e = error("domain: a\ncharge_refused: true\nall_or_nothing: true\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
    assert!(e.contains("all_or_nothing (a refused request charges nothing) or charge_refused"), "{e}");
}
