//! The scrape as Prometheus's own tools read it: `promtool check metrics`
//! on the classic text format (a lone locker with every kind, and a peered
//! one), `promtool check rules` on the shipped alerts, and a real
//! Prometheus server (Debian's `prometheus`, which asks for OpenMetrics)
//! scraping real peered lockers, answering queries about them, loading the
//! shipped alerts, and returning data for every query of the shipped
//! dashboard and alerts (`contrib/`).
//! Both skip, saying so, where the tools are not installed; `.ci/run`
//! installs them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locker::wire::Ask;
use locker::Client;

use crate::support::{free_port, Daemon, TempFile, DEADLINE, JOIN};

const LIMITS: &str = "[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 86400\n\n\
                      [[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 2\nin_seconds = 30\n";

fn installed(tool: &str) -> bool {
    let found = Path::new("/usr/bin").join(tool).exists();
    if !found {
        eprintln!("{tool} is not installed (apt-get install prometheus): skipping");
    }
    found
}

/// `GET path` on `addr` with `accept`, the body.
fn get(addr: &str, path: &str, accept: &str) -> String {
    try_get(addr, path, accept).expect("connect")
}

/// `get`, or `None` while nothing listens at `addr`.
fn try_get(addr: &str, path: &str, accept: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    // HTTP/1.0, so that no answer comes chunked.
    let head = format!("GET {path} HTTP/1.0\r\nHost: test\r\nAccept: {accept}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("a whole answer");
    Some(text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

/// Scrapes `addr` until the locker's metrics thread has a snapshot with
/// `series` in it.
pub fn scrape_with(addr: &str, series: &str) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let body = get(addr, "/metrics", "text/plain");
        if body.contains(series) {
            return body;
        }
        assert!(Instant::now() < end, "never saw {series} in:\n{body}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn promtool_check(scrape: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child.stdin.take().unwrap().write_all(scrape.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "promtool: {said}\non:\n{scrape}");
}

#[test]
fn promtool_accepts_the_shipped_alerting_rules() {
    if !installed("promtool") {
        return;
    }
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus/locker-alerts.yml");
    let out = Command::new("promtool").arg("check").arg("rules").arg(&rules).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn promtool_finds_nothing_to_say_about_a_lone_or_a_peered_lockers_scrape() {
    if !installed("promtool") {
        return;
    }
    let file = TempFile::new("promtool.toml", LIMITS);
    let addr = format!("127.0.0.1:{}", free_port());
    let d = Daemon::start(&["--config", file.path(), "--metrics-bind", &addr]);
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap().ask(&Ask::new().limit("api")).unwrap();
    promtool_check(&scrape_with(&addr, "locker_go_total{limit=\"api\"} 1"));

    // A peered pair, the first with metrics: its scrape has the peer series.
    let addr = format!("127.0.0.1:{}", free_port());
    let (a, b) = (format!("tcp://127.0.0.1:{}", free_port()), format!("tcp://127.0.0.1:{}", free_port()));
    let _a = Daemon::start(&["--peer-bind", &a, "--peer", &b, "--node-id", "a", "--metrics-bind", &addr]);
    let _b = Daemon::start(&["--peer-bind", &b, "--peer", &a, "--node-id", "b"]);
    promtool_check(&scrape_with(&addr, "locker_peer_live{peer=\"b\"} 1"));
}

/// `query` on the Prometheus at `addr`, polled until it returns a sample;
/// that sample's value.
fn query_until(addr: &str, query: &str) -> f64 {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        // Prometheus listens a moment after it starts.
        let body = try_get(addr, &format!("/api/v1/query?query={query}"), "application/json").unwrap_or_default();
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if let Some(v) = reply["data"]["result"][0]["value"][1].as_str() {
            return v.parse().expect("a number");
        }
        assert!(Instant::now() < end, "Prometheus never answered {query}: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `text` as a URL's query value.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The queries of the shipped dashboard (Grafana's `$__rate_interval` as
/// one minute) and the left side of each shipped alert's comparison.
fn shipped_queries() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("grafana/locker-dashboard.json")).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut queries: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("targets").iter())
        .map(|t| t["expr"].as_str().expect("an expr").replace("$__rate_interval", "1m"))
        .collect();
    let rules = std::fs::read_to_string(root.join("prometheus/locker-alerts.yml")).unwrap();
    for expr in rules.lines().filter_map(|l| l.trim().strip_prefix("expr: ")) {
        let left = [" == ", " > ", " < "].iter().filter_map(|op| expr.rsplit_once(op)).map(|(l, _)| l).next();
        queries.push(left.expect("an alert is `query op threshold`").to_owned());
    }
    queries
}

#[test]
fn a_real_prometheus_scrapes_real_lockers_and_the_shipped_dashboard_and_alerts_query_real_data() {
    if !installed("prometheus") {
        return;
    }
    let file = TempFile::new("prometheus-limits.toml", LIMITS);
    let metrics = format!("127.0.0.1:{}", free_port());
    let (a, b) = (format!("tcp://127.0.0.1:{}", free_port()), format!("tcp://127.0.0.1:{}", free_port()));
    // New state files: a first run, so the pair owns the day's slot it
    // starts in (without them it would own none of it).
    let (state_a, state_b) = (TempFile::new("prometheus-a.state", ""), TempFile::new("prometheus-b.state", ""));
    let d = Daemon::start(&[
        "--config",
        file.path(),
        "--peer-bind",
        &a,
        "--peer",
        &b,
        "--node-id",
        "a",
        "--state",
        state_a.path(),
        "--metrics-bind",
        &metrics,
    ]);
    let _b = Daemon::start(&[
        "--config",
        file.path(),
        "--peer-bind",
        &b,
        "--peer",
        &a,
        "--node-id",
        "b",
        "--state",
        state_b.path(),
    ]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    // Sorry while the pair joins, then the slot's 5 go and 2 sorry: the
    // counts Prometheus must show are the ones the client saw.
    let (mut seen_go, mut seen_sorry) = (0.0, 0.0);
    let end = Instant::now() + JOIN;
    while seen_go < 5.0 || seen_sorry < 2.0 {
        assert!(Instant::now() < end, "the pair never joined");
        match c.ask(&Ask::new().limit("api")).unwrap().ok {
            true => seen_go += 1.0,
            false if seen_go == 0.0 => {
                seen_sorry += 1.0;
                std::thread::sleep(Duration::from_millis(20));
            }
            false => seen_sorry += 1.0,
        }
    }
    let dir = std::env::temp_dir().join(format!("locker-prometheus-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus/locker-alerts.yml");
    let scrape = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  - job_name: locker\n    static_configs:\n      - targets: ['{metrics}']\n",
        rules.display()
    );
    std::fs::write(&config, scrape).unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus");
    let go = query_until(&web, &percent(r#"locker_go_total{limit="api"}"#));
    let sorry = query_until(&web, &percent(r#"locker_sorry_total{limit="api"}"#));
    let up = query_until(&web, &percent(r#"up{job="locker"}"#));
    let build = query_until(&web, "locker_build_info");
    let answered: Vec<(String, f64)> =
        shipped_queries().into_iter().map(|q| (q.clone(), query_until(&web, &percent(&q)))).collect();
    let rules = get(&web, "/api/v1/rules", "application/json");
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((go, sorry, up, build), (seen_go, seen_sorry, 1.0, 1.0));
    eprintln!("every shipped query returned data: {answered:?}");
    let rules: serde_json::Value = serde_json::from_str(&rules).unwrap();
    let loaded: Vec<&serde_json::Value> =
        rules["data"]["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect();
    assert_eq!(loaded.len(), 8, "every shipped alert is loaded: {rules}");
    assert!(loaded.iter().all(|r| r["health"] == "ok" || r["health"] == "unknown"), "{rules}");
}
