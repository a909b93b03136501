//! Rough edges a new user hits, each pinned by a test that failed before its
//! fix: a lease wait that ends, config and flag errors that say where and
//! what, host names in binds, CLI errors in CLI terms, peers going silent
//! in the log, and a dead first endpoint that no longer halves the timeout.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use locker::wire::LeaseAsk;
use locker::Client;

use crate::support::{free_port, locker_bin, run_locker, Daemon, Served, TempFile, DEADLINE};

/// A semaphore `db` of capacity 1 and a fixed window `api`.
const LIMITS: &str = "[[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 1\nin_seconds = 30\n\
                      [[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 60\n";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `locker serve` whose stderr (the log) is read line by line.
struct Logged {
    child: Child,
    endpoint: String,
    log: mpsc::Receiver<String>,
}

impl Logged {
    /// Starts `locker serve <args>` at log level `level` and waits for its endpoint line.
    fn start(level: &str, args: &[&str]) -> Logged {
        let mut child = Command::new(locker_bin())
            .arg("serve")
            .args(args)
            .env("LOCKER_LOG", level)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn locker");
        let (tx, log) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the endpoint line");
        std::thread::spawn(move || for _ in stdout.lines() {});
        let endpoint = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("first line {line:?}"));
        Logged { endpoint: endpoint.to_owned(), child, log }
    }

    /// The first log line containing every one of `words`; panics after `DEADLINE`.
    fn wait_for(&self, words: &[&str]) -> String {
        let end = Instant::now() + DEADLINE;
        let mut seen = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(line) if words.iter().all(|w| line.contains(w)) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no log line with {words:?} within {DEADLINE:?}; saw {seen:#?}");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.expect("kill").success(), "kill -{signal}");
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `LOCKER_LOG=debug` shows each ask and its answer, a refusal with its
/// reason; at `info` nothing of them is logged.
#[test]
fn at_debug_every_answer_is_logged_with_its_request() {
    let d = Logged::start("debug", &["--bind", "tcp://127.0.0.1:*", "--max-requests", "1"]);
    let mut client = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).unwrap();
    s.connect(&d.endpoint).unwrap();
    s.send(&b"let me go"[..], 0).unwrap();
    assert_eq!(s.recv_bytes(0).unwrap(), b"go");
    d.wait_for(&["answered", "request=\"let me go\"", "reply=\"go\""]);
    assert!(client.ask(&locker::Ask::new().limit("nope")).is_err(), "an unknown limit is refused");
    d.wait_for(&["answered", "\"limit\":\"nope\"", "error"]);
}

#[test]
fn a_lease_wait_that_ends_in_the_queue_is_not_held_rather_than_an_error() {
    let file = TempFile::new("edges-lease.toml", LIMITS);
    let d = Daemon::start(&["--config", file.path()]);
    let mut c = Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
    let held = c.lease(&LeaseAsk::new("db", 1).ttl_ms(30_000)).unwrap().expect("the count is free");
    let waited = c.lease(&LeaseAsk::new("db", 1).max_wait_ms(300));
    assert!(
        matches!(waited, Ok(None)),
        "a wait that ends is not held, not an error: {:?}",
        waited.map(|l| l.is_some())
    );
    let out = run_locker(&["lease", "acquire", "--connect", &d.endpoint, "--limit", "db", "--wait", "300ms"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "not held");
    assert!(held.is_held());
}

#[test]
fn toml_errors_say_the_line_and_column_and_which_limit() {
    let broken = TempFile::new("edges-syntax.toml", "max_keys = 10\n\n[[limits]]\nname = 'api\n");
    let out = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--config", broken.path()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("{}: line 4, column", broken.path())), "{err}");
    let missing = TempFile::new(
        "edges-missing.toml",
        "[[limits]]\nname = 'db'\nmax_requests = 1\nin_seconds = 1\n\n[[limits]]\nname = 'api'\nmax_requests = 5\n",
    );
    let out = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--config", missing.path()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("{}, line 6", missing.path())), "{err}");
    assert!(err.contains("limit \"api\"") && err.contains("in_seconds or period is needed"), "{err}");
}

#[test]
fn host_names_in_binds_are_resolved_and_ports_are_checked() {
    let port = free_port();
    let d =
        Daemon::start_with(&["--bind", "tcp://localhost:*", "--peer-bind", &format!("tcp://localhost:{port}")], &[]);
    assert!(d.endpoint.starts_with("tcp://127.0.0.1:") || d.endpoint.starts_with("tcp://[::1]:"), "{}", d.endpoint);
    let out = run_locker(&["ask", "--connect", &d.endpoint]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for flag in ["--bind", "--peer-bind"] {
        let mut args = vec!["serve", "--bind", "tcp://127.0.0.1:*", flag, "tcp://127.0.0.1:70000"];
        if flag == "--bind" {
            args.drain(1..3);
        }
        let out = run_locker(&args);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = text(&out.stderr);
        assert!(err.contains("port 70000") && err.contains("65535"), "{flag}: {err}");
    }
}

#[test]
fn negative_numbers_reach_the_validation_message() {
    let out = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--in-seconds", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--in-seconds <S>': must be a number of seconds from 0.001"),
        "the flag, not a limit, is named: {err}"
    );
    let out =
        run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--peer-bind", "tcp://127.0.0.1:*", "--peer-grace", "-2"]);
    assert!(text(&out.stderr).contains("peer_grace must be from 0 to 60 seconds, got -2"), "{}", text(&out.stderr));
}

#[test]
fn a_node_id_without_peer_bind_is_warned_about() {
    let d = Logged::start("warn", &["--bind", "tcp://127.0.0.1:*", "--node-id", "a"]);
    let line = d.wait_for(&["WARN", "node_id"]);
    assert!(line.contains("peer_bind"), "{line}");
    let out = run_locker(&["ask", "--connect", &d.endpoint]);
    assert_eq!(out.status.code(), Some(0), "it serves alone: {}", text(&out.stderr));
}

#[test]
fn a_state_fsync_without_a_state_file_is_warned_about() {
    let d = Logged::start("warn", &["--bind", "tcp://127.0.0.1:*", "--state-fsync", "1s"]);
    let line = d.wait_for(&["WARN", "state_fsync"]);
    assert!(line.contains("--state") && line.contains("no effect"), "{line}");
}

#[test]
fn cli_errors_name_the_cli_command_and_json_gets_an_error_object() {
    let file = TempFile::new("edges-errors.toml", LIMITS);
    let d = Daemon::start(&["--config", file.path()]);
    let out = run_locker(&["ask", "--connect", &d.endpoint, "--limit", "db"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("limit \"db\" is a semaphore: take it with `locker lease acquire --limit db`"), "{err}");
    let out = run_locker(&["lease", "acquire", "--connect", &d.endpoint, "--limit", "api"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("limit \"api\" is not a semaphore: ask it with `locker ask --limit api`"), "{err}");
    let out = run_locker(&["ask", "--connect", &d.endpoint, "--limit", "db", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["kind"], "refused");
    assert!(v["error"].as_str().unwrap().contains("`locker lease acquire --limit db`"), "{v}");
    let dead = free_port();
    let out = run_locker(&["stats", "--connect", &format!("tcp://127.0.0.1:{dead}"), "--timeout", "100ms", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["kind"], "no_answer", "{v}");
}

#[test]
fn a_peer_that_goes_silent_and_comes_back_is_logged() {
    let (a_pub, b_pub) = (format!("tcp://127.0.0.1:{}", free_port()), format!("tcp://127.0.0.1:{}", free_port()));
    let bind = ["--bind", "tcp://127.0.0.1:*"];
    let a = Logged::start("info", &[&bind[..], &["--peer-bind", &a_pub, "--peer", &b_pub, "--node-id", "a"]].concat());
    let b = Logged::start("warn", &[&bind[..], &["--peer-bind", &b_pub, "--peer", &a_pub, "--node-id", "b"]].concat());
    a.wait_for(&["peer heard", "b"]);
    // "Peer heard" may come from b's first counts, before its first
    // heartbeat: a peer known only from its counts was never live, and
    // cannot go silent. Stop b once a counts it live.
    let mut client = Client::new([a.endpoint.as_str()], DEADLINE).unwrap();
    let end = Instant::now() + DEADLINE;
    while !client.stats().expect("stats").peers.iter().any(|p| p.live) {
        assert!(Instant::now() < end, "a never counted b live");
        std::thread::sleep(Duration::from_millis(5));
    }
    b.signal("STOP");
    let silent = a.wait_for(&["WARN", "peer silent"]);
    assert!(silent.contains("peer=b"), "{silent}");
    b.signal("CONT");
    let back = a.wait_for(&["INFO", "peer back"]);
    assert!(back.contains("peer=b"), "{back}");
}

#[test]
fn a_dead_first_endpoint_does_not_cost_half_the_timeout() {
    let live = Served::start(&[]);
    let dead = format!("tcp://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let out = run_locker(&["ask", "--connect", &dead, "--connect", &live.endpoint, "--timeout", "2s"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(took < Duration::from_secs(1), "a dead first endpoint took {took:?} of the 2 s timeout");
    // The library the same way, and the live one is counted once.
    let mut c = Client::new([dead.as_str(), live.endpoint.as_str()], Duration::from_secs(2)).unwrap();
    let started = Instant::now();
    assert!(c.stats().is_ok());
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(c.stats().unwrap().limits[0].requests, 1);
}

/// Bound beyond loopback without CURVE, the locker warns at start, as the
/// Security section advises against exactly that (its default is loopback).
#[test]
fn serving_beyond_loopback_without_curve_is_warned_about() {
    let d = Daemon::start_logged_with(&["--bind", "tcp://0.0.0.0:*"], &[]);
    assert!(d.endpoint.starts_with("tcp://0.0.0.0:"), "{}", d.endpoint);
    let log = d.log_with("serving beyond this host without CURVE");
    assert!(log.contains("serving beyond this host without CURVE"), "{log}");
}

/// A store no node of which takes a connection is warned about at start,
/// not at the first ask (#40).
#[test]
fn an_unreachable_store_is_warned_about_at_start() {
    let port = crate::support::free_port();
    let store = format!("redis://127.0.0.1:{port}");
    let d = Logged::start("warn", &["--bind", "tcp://127.0.0.1:*", "--store", &store]);
    let line = d.wait_for(&["WARN", "cannot be reached"]);
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
}

/// An interface name binds that interface's address: the bundled ZeroMQ
/// would fail with "No such device" (#40).
#[test]
fn an_interface_name_in_a_bind_serves_on_its_address() {
    let port = free_port();
    let d = Daemon::start_with(&["--bind", "tcp://lo:*", "--peer-bind", &format!("tcp://lo:{port}")], &[]);
    assert!(d.endpoint.starts_with("tcp://127.0.0.1:"), "{}", d.endpoint);
    let out = run_locker(&["ask", "--connect", &d.endpoint]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
