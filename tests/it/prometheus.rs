//! The scrape as Prometheus's own tools read it: `promtool check metrics`
//! on the classic text format (a lone locker with every kind, and a peered
//! one), and a real Prometheus server (Debian's `prometheus`, which asks
//! for OpenMetrics) scraping a real locker and answering queries about it.
//! Both skip, saying so, where the tools are not installed; `.ci/run`
//! installs them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use locker::wire::Ask;
use locker::Client;

use crate::support::{free_port, Daemon, TempFile, DEADLINE};

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
    let head = format!("GET {path} HTTP/1.1\r\nHost: test\r\nAccept: {accept}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("a whole answer");
    Some(text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

/// Scrapes `addr` until the locker's metrics thread has a snapshot with
/// `series` in it.
fn scrape_with(addr: &str, series: &str) -> String {
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

#[test]
fn a_real_prometheus_scrapes_a_real_locker_and_answers_queries_about_it() {
    if !installed("prometheus") {
        return;
    }
    let file = TempFile::new("prometheus-limits.toml", LIMITS);
    let metrics = format!("127.0.0.1:{}", free_port());
    let d = Daemon::start(&["--config", file.path(), "--metrics-bind", &metrics]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    for _ in 0..7 {
        c.ask(&Ask::new().limit("api")).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("locker-prometheus-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    let scrape = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: locker\n    static_configs:\n      - targets: ['{metrics}']\n"
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
    let go = query_until(&web, "locker_go_total%7Blimit%3D%22api%22%7D");
    let sorry = query_until(&web, "locker_sorry_total%7Blimit%3D%22api%22%7D");
    let up = query_until(&web, "up%7Bjob%3D%22locker%22%7D");
    let build = query_until(&web, "locker_build_info");
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((go, sorry, up, build), (5.0, 2.0, 1.0, 1.0));
}
