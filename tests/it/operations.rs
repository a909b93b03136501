//! Running the locker as an operator does: Prometheus scrapes of a lone and
//! a peered locker, `/health`, SIGHUP reloading the config file without
//! losing counts, `check-config`, and JSON logs.
//!
//! The metrics thread serves a snapshot the loop hands over every 250 ms, so
//! a scrape is polled until it shows what was asked, up to `DEADLINE`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use locker::wire::Ask;
use locker::Client;

use crate::support::{free_port, locker_bin, run_locker, Daemon, StateDir, TempFile, DEADLINE};

/// `GET path` on `addr`; the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics port");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("a whole answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    (status, body.to_owned())
}

/// The value of the sample `series` (name and labels, exactly) in a scrape.
fn value(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Scrapes `addr` until every `(series, value)` in `want` shows, and returns
/// that scrape; fails after `DEADLINE`.
fn scrape_until(addr: &str, want: &[(&str, f64)]) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let (status, scrape) = get(addr, "/metrics");
        assert_eq!(status, 200, "{scrape}");
        if want.iter().all(|&(series, v)| value(&scrape, series) == Some(v)) {
            return scrape;
        }
        assert!(Instant::now() < end, "never saw {want:?} in:\n{scrape}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client(d: &Daemon) -> Client {
    Client::new([d.endpoint.as_str()], DEADLINE).unwrap()
}

fn go(c: &mut Client, limit: &str) -> bool {
    c.ask(&Ask::new().limit(limit).key("k")).expect("an answer").ok
}

#[test]
fn a_scrape_counts_asks_per_limit_and_health_is_200() {
    // A day-long slot: slots align to the epoch, and one that ended during
    // the test would drop the key it counts.
    let file = TempFile::new("metrics.toml", "[[limits]]\nname = 'api'\nmax_requests = 2\nin_seconds = 86400\n");
    let addr = format!("127.0.0.1:{}", free_port());
    let d = Daemon::start(&["--config", file.path(), "--metrics-bind", &addr]);
    let mut c = client(&d);
    let answers: Vec<bool> = (0..3).map(|_| go(&mut c, "api")).collect();
    assert_eq!(answers, [true, true, false]);
    assert!(c.ask(&Ask::new().limit("nope")).is_err());
    // A snapshot may be taken between two asks: wait for one after the last.
    let last = [(r#"locker_requests_total{limit="api"}"#, 3.0), ("locker_unattributed_errors_total", 1.0)];
    let scrape = scrape_until(&addr, &last);
    assert_eq!(value(&scrape, r#"locker_go_total{limit="api"}"#), Some(2.0));
    assert_eq!(value(&scrape, r#"locker_sorry_total{limit="api"}"#), Some(1.0));
    assert_eq!(value(&scrape, r#"locker_live_keys{limit="api"}"#), Some(1.0));
    assert_eq!(value(&scrape, r#"locker_requests_total{limit="default"}"#), Some(0.0));
    assert_eq!(value(&scrape, "locker_unattributed_errors_total"), Some(1.0));
    assert_eq!(value(&scrape, r#"locker_health{state="serving"}"#), Some(1.0));
    assert!(value(&scrape, "locker_uptime_seconds").is_some_and(|s| s > 0.0), "{scrape}");
    assert!(!scrape.contains("locker_peer"), "not peered: {scrape}");
    assert_eq!(get(&addr, "/health"), (200, "serving\n".to_owned()));
    assert_eq!(get(&addr, "/nope").0, 404);
}

#[test]
fn a_peered_pair_shows_each_other_in_its_scrape() {
    let pubs = [free_port(), free_port()].map(|p| format!("tcp://127.0.0.1:{p}"));
    let metrics = [free_port(), free_port()].map(|p| format!("127.0.0.1:{p}"));
    // New state files: without, a pair started together serves nothing
    // of its first slot (60 s here).
    let states = StateDir::new();
    let lockers: Vec<Daemon> = (0..2)
        .map(|i| {
            let (node, state) = (format!("node-{i}"), states.file(i));
            let peer = &pubs[1 - i];
            let args = ["--peer-bind", &pubs[i], "--peer", peer, "--node-id", &node, "--metrics-bind", &metrics[i]];
            let args = [&args[..], &["--state", &state]].concat();
            Daemon::start(&[&args[..], &["--max-requests", "5", "--in-seconds", "60"]].concat())
        })
        .collect();
    for (i, addr) in metrics.iter().enumerate() {
        let other = format!(r#"locker_peer_live{{peer="node-{}"}}"#, 1 - i);
        let scrape = scrape_until(addr, &[(&other, 1.0), ("locker_peers_live", 1.0)]);
        let flagged = format!(r#"locker_peer_flagged{{peer="node-{}"}}"#, 1 - i);
        assert_eq!(value(&scrape, &flagged), Some(0.0), "{scrape}");
        assert!(scrape.contains(&format!(r#"locker_peer_last_heard_seconds{{peer="node-{}"}}"#, 1 - i)));
        assert!(scrape.contains(&format!(r#"locker_peer_clock_offset_seconds{{peer="node-{}"}}"#, 1 - i)));
    }
    let mut c = client(&lockers[0]);
    assert!(go(&mut c, "default"));
    scrape_until(&metrics[0], &[(r#"locker_go_total{limit="default"}"#, 1.0)]);
    let end = Instant::now() + DEADLINE;
    while get(&metrics[1], "/health").0 != 200 {
        assert!(Instant::now() < end, "node-1 never reported serving");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `locker serve` with its stderr (JSON logs) read line by line.
struct Logged {
    child: Child,
    endpoint: String,
    logs: mpsc::Receiver<serde_json::Value>,
}

impl Logged {
    fn start(args: &[&str]) -> Logged {
        let mut child = Command::new(locker_bin())
            .args(["serve", "--bind", "tcp://127.0.0.1:*"])
            .args(args)
            .env("LOCKER_LOG", "info")
            .env("LOCKER_LOG_FORMAT", "json")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn locker");
        let (lines, logs) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let json = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON log line: {line:?}: {e}"));
                let _ = lines.send(json);
            }
        });
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).expect("the endpoint line");
        let endpoint = first.trim().strip_prefix("listening on ").expect("listening on").to_owned();
        Logged { child, endpoint, logs }
    }

    /// Sends SIGHUP.
    fn hup(&self) {
        let status = Command::new("kill").args(["-HUP", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for a log line whose message is `message`; returns it.
    fn wait_log(&self, message: &str) -> serde_json::Value {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = self.logs.recv_timeout(left).unwrap_or_else(|_| panic!("no log {message:?}"));
            if line["fields"]["message"] == message {
                return line;
            }
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sighup_reloads_the_file_keeping_the_counts_of_unchanged_limits() {
    let limits = |b_max: u32| {
        format!(
            "[[limits]]\nname = 'a'\nmax_requests = 2\nin_seconds = 3600\n\
             [[limits]]\nname = 'b'\nmax_requests = {b_max}\nin_seconds = 3600\n"
        )
    };
    let file = TempFile::new("reload.toml", &limits(1));
    let d = Logged::start(&["--config", file.path()]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    assert_eq!([go(&mut c, "a"), go(&mut c, "a"), go(&mut c, "a")], [true, true, false]);
    assert_eq!([go(&mut c, "b"), go(&mut c, "b")], [true, false]);

    std::fs::write(file.path(), limits(3)).unwrap();
    d.hup();
    let line = d.wait_log("config reloaded");
    assert_eq!(line["level"], "INFO");
    assert!(line["fields"]["changed"].as_str().is_some_and(|s| s.contains("\"b\"")), "{line}");
    assert!(!go(&mut c, "a"), "a's count survives the reload");
    assert_eq!([go(&mut c, "b"), go(&mut c, "b"), go(&mut c, "b")], [true, true, false], "b keeps 1 of its new 3");

    std::fs::write(file.path(), "[[limits]]\nname = 'a'\nmax_requests = 'lots'\nin_seconds = 1\n").unwrap();
    d.hup();
    let line = d.wait_log("config not reloaded; the old one keeps serving");
    assert_eq!(line["level"], "ERROR");
    assert!(!go(&mut c, "a") && !go(&mut c, "b"), "the old limits and counts keep serving");
    assert!(c.ask(&Ask::new()).is_ok(), "still answering after two SIGHUPs");
}

#[test]
fn check_config_exits_0_for_a_valid_file_and_2_with_the_error() {
    let good = TempFile::new("check-good.toml", "[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n");
    let out = run_locker(&["check-config", good.path()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok, 2 limits: default, api"), "{out:?}");
    let bad = TempFile::new("check-bad.toml", "[[limits]]\nname = 'api'\nmax_requests = 0\nin_seconds = 1\n");
    let out = run_locker(&["check-config", bad.path()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(", line 3: limit \"api\": max_requests must be at least 1"), "{err}");
    let lone = TempFile::new("check-lone.toml", "max_keys = 10\n");
    let out = run_locker(&["check-config", lone.path()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok, 1 limit: default"), "{out:?}");
    let out = run_locker(&["check-config", "/nonexistent/locker.toml"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn a_locker_waiting_for_its_peers_is_503_joining() {
    let addr = format!("127.0.0.1:{}", free_port());
    let me = format!("tcp://127.0.0.1:{}", free_port());
    // A peer that never answers, and a grace long enough to outlast the test.
    let nobody = format!("tcp://127.0.0.1:{}", free_port());
    let args = ["--peer-bind", &me, "--peer", &nobody, "--peer-grace", "60", "--metrics-bind", &addr];
    let _d = Daemon::start(&args);
    assert_eq!(get(&addr, "/health"), (503, "joining\n".to_owned()));
    scrape_until(&addr, &[(r#"locker_health{state="joining"}"#, 1.0), ("locker_peers_live", 0.0)]);
}

#[test]
fn sighup_without_a_config_file_keeps_serving() {
    let mut d = Daemon::start(&[]);
    d.signal("HUP");
    let mut c = client(&d);
    assert!(c.ask(&Ask::new()).is_ok(), "answers after SIGHUP");
    assert!(d.wait_exit(Duration::from_millis(300)).is_none(), "SIGHUP does not stop the locker");
    d.signal("TERM");
    assert_eq!(d.wait_exit(DEADLINE).and_then(|s| s.code()), Some(0));
}

#[test]
fn locker_health_exits_0_while_serving_and_1_when_nothing_answers() {
    let addr = format!("127.0.0.1:{}", free_port());
    let d = Daemon::start(&["--metrics-bind", &addr]);
    let end = Instant::now() + DEADLINE;
    let serving = loop {
        let out = run_locker(&["health", "--metrics", &addr]);
        if out.status.code() == Some(0) || Instant::now() > end {
            break out;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(serving.status.code(), Some(0), "{serving:?}");
    assert_eq!(String::from_utf8_lossy(&serving.stdout), "serving\n");
    drop(d);
    let gone = run_locker(&["health", "--metrics", &addr, "--timeout", "500ms"]);
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    assert!(String::from_utf8_lossy(&gone.stderr).contains(&addr), "{gone:?}");
}
