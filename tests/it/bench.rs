use crate::support::{run_locker, Daemon};

/// Picks the number after `name` on the report line that starts with it.
fn figure(report: &str, name: &str) -> f64 {
    let line = report.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name:?} in {report}"));
    line[name.len()..].split_whitespace().next().unwrap().parse().unwrap_or_else(|_| panic!("{line:?}"))
}

fn bench(endpoint: &str, args: &[&str]) -> String {
    let mut all = vec!["bench", "--connect", endpoint, "--clients", "2", "--duration", "200ms", "--timeout", "2s"];
    all.extend_from_slice(args);
    let out = run_locker(&all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_short_plain_run_counts_every_reply_and_the_limit_holds() {
    let d = Daemon::start(&["--max-requests", "7", "--in-seconds", "86400"]);
    let report = bench(&d.endpoint, &["--plain", "--pipeline", "8"]);
    let (requests, go, sorry) = (figure(&report, "requests "), figure(&report, "go "), figure(&report, "sorry "));
    assert!(requests > 0.0, "{report}");
    assert_eq!(go + sorry + figure(&report, "errors "), requests, "{report}");
    assert!(go <= 7.0, "one day-long slot grants at most 7: {report}");
    assert!(figure(&report, "requests/s ") > 0.0, "{report}");
    assert!(report.contains("latency_us  p50 "), "{report}");
}

#[test]
fn a_prefilled_structured_run_leaves_every_key_live() {
    let d = Daemon::start(&["--max-requests", "1000", "--in-seconds", "86400"]);
    let report = bench(&d.endpoint, &["--keys", "500", "--prefill", "--pipeline", "1"]);
    assert_eq!(figure(&report, "errors "), 0.0, "{report}");
    let stats = run_locker(&["stats", "--connect", &d.endpoint, "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["live_keys"], 500, "{stats}");
}

#[test]
fn no_server_is_an_error_not_a_hang() {
    let out = run_locker(&["bench", "--connect", "tcp://127.0.0.1:1", "--duration", "100ms", "--timeout", "300ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no reply within"), "{:?}", out.stderr);
}
