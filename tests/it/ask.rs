use crate::support::{run_locker, Daemon};

fn ask(endpoint: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["ask", "--connect", endpoint];
    args.extend_from_slice(extra);
    let out = run_locker(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// The slots below are an hour long: two asks a minute-long slot apart may
// fall on each side of its end on a loaded machine, and both go.
#[test]
fn ask_exits_0_on_go_1_on_sorry_2_on_errors() {
    let d = Daemon::start(&["--max-requests", "1", "--in-seconds", "3600"]);
    assert_eq!(ask(&d.endpoint, &[]), (Some(0), "go\n".into(), String::new()));
    assert_eq!(ask(&d.endpoint, &[]).0, Some(1));
    let (code, out, err) = ask(&d.endpoint, &["--limit", "nope"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("unknown limit \"nope\""), "{err}");
    let (code, _, err) = ask(&d.endpoint, &["--cost", "2"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cost 2 is above the limit's capacity 1"), "{err}");
}

#[test]
fn ask_json_prints_the_whole_reply() {
    let d = Daemon::start(&["--max-requests", "3", "--in-seconds", "60"]);
    let (code, out, _) = ask(&d.endpoint, &["--json", "--key", "k", "--cost", "2"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["limit"], 3);
    assert_eq!(v["remaining"], 1);
    assert_eq!(v["retry_after_ms"], 0);
}

#[test]
fn ask_with_no_locker_exits_2_within_its_timeout() {
    // A port that was bound a moment ago and is now closed.
    let dead = Daemon::start(&[]);
    let endpoint = dead.endpoint.clone();
    drop(dead);
    let (code, out, err) = ask(&endpoint, &["--timeout", "300ms"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("no locker answered within 300ms"), "{err}");
}

#[test]
fn stats_prints_counters_per_limit() {
    let d = Daemon::start(&["--max-requests", "1", "--in-seconds", "3600"]);
    ask(&d.endpoint, &[]);
    ask(&d.endpoint, &[]);
    let out = run_locker(&["stats", "--connect", &d.endpoint, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let default = &v["limits"][0];
    assert_eq!(
        (default["name"].as_str(), default["go"].as_u64(), default["sorry"].as_u64()),
        (Some("default"), Some(1), Some(1))
    );
    let table = run_locker(&["stats", "--connect", &d.endpoint]);
    let text = String::from_utf8_lossy(&table.stdout);
    let column = |line: &str, name: &str| {
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        let at = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column: {text}"));
        line.split_whitespace().nth(at).map(str::to_owned)
    };
    let row = text.lines().find(|l| l.starts_with("default")).unwrap_or_else(|| panic!("no default row: {text}"));
    assert_eq!(column(row, "requests").as_deref(), Some("2"), "{text}");
    assert_eq!(column(row, "go").as_deref(), Some("1"), "{text}");
}

#[test]
fn bad_settings_fail_fast_with_a_clear_message() {
    let out = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--in-seconds", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--in-seconds <S>': must be a number of seconds from 0.001"));
    let out = run_locker(&["serve", "--bind", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("binding nonsense"));
    let out = run_locker(&["serve", "--config", "/nonexistent/locker.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/locker.toml"));
}

/// `ask --hold` longer than `--timeout`: the client gave up (no answer,
/// exit 2) while the locker still held the ask and then granted its go to
/// nobody. Now the timeout is the wait beyond the hold.
#[test]
fn ask_with_a_hold_longer_than_its_timeout_waits_for_the_held_go() {
    let d = Daemon::start(&["--max-requests", "1", "--in-seconds", "1"]);
    // At least 600 ms of the slot left, so the held ask waits longer than
    // its 200 ms timeout. This waits for the clock, not for the locker.
    crate::support::wait_for_room(1_000_000_000, std::time::Duration::from_millis(600));
    assert_eq!(ask(&d.endpoint, &[]).0, Some(0));
    let (code, out, err) = ask(&d.endpoint, &["--hold", "1s", "--timeout", "200ms"]);
    assert_eq!((code, out.as_str()), (Some(0), "go\n"), "held until the next slot: {err}");
}

/// Text stats show held asks, as `--json` does (#40).
#[test]
fn stats_as_text_count_held_asks() {
    let d = Daemon::start(&["--max-requests", "1", "--in-seconds", "1", "--hold-ms", "1500"]);
    // Both asks in one slot: the second would get sorry, so it is held.
    crate::support::wait_for_room(1_000_000_000, std::time::Duration::from_millis(500));
    assert_eq!(ask(&d.endpoint, &[]).0, Some(0));
    assert_eq!(ask(&d.endpoint, &["--hold", "1500ms"]).0, Some(0), "held, then go at the next slot");
    let out = run_locker(&["stats", "--connect", &d.endpoint]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("held: 0 now, 1 since start (1 go)"), "{text}");
}
