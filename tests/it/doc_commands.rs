//! Every shell command of README.md and docs/*.md runs as written on a
//! fresh clone, or is listed with why it cannot run here (#40).
//!
//! `COMMANDS` lists each command the docs give, in a `sh` block or inline
//! in the text, with what this test does with it. A command the docs give
//! that the table lacks fails the test, and so does a listed one the docs
//! no longer give: a doc edit meets this table. Each doc's commands run in
//! order, in one shell, in a scratch folder that links the checkout's
//! files (so what a command writes stays there), against the documented
//! daemon: a locker serving `examples/limits.toml` whose endpoint and
//! metrics address stand in for `tcp://127.0.0.1:7777` and
//! `127.0.0.1:9090`. `locker` is the binary under test; `locker serve`
//! runs until it prints `listening on`, on a free port, and is stopped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{free_port, locker_bin, Daemon};

/// What the test does with a documented command.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Do {
    /// Runs it; it must exit 0.
    Run,
    /// Runs it; go (0) or sorry (1) are both as documented.
    Ask,
    /// Runs `readme::every_command_in_the_readme_runs_against_the_example_limits`.
    Table,
    /// `cargo test … FILTER`: the filter must name tests of this binary.
    Tests(&'static str),
    /// Not run, for this reason; every file of the checkout it names must exist.
    Skip(&'static str),
}

use Do::*;

const DOCKER: &str = "needs Docker, which this machine lacks (docker_files checks what it mounts and runs)";
const SYSTEMD: &str = "needs systemd and root: installs a unit and starts it";
const HOSTS: &str = "names other hosts (a, b, c, 10.0.0.x): examples/one-host runs the same on 127.0.0.1";
const MINUTES: &str = "a benchmark or the whole suite: minutes of load on a shared machine";
const CARGO: &str = "runs cargo, which holds the build folder this test runs from";
const PATTERN: &str = "a pattern or a command's name, not a command";
const RECIPE: &str = "run by one_host::*, on ports nothing else uses";
const GRPC: &str = "needs grpcio, which .ci/run installs and then runs these tests with";
const GRPC_LIMIT: &str = "asks a limit of the RLS config, which the documented daemon lacks: tests/rls asks it so";
const CLUSTER: &str =
    "needs a Kubernetes cluster; deploy/kubernetes/tests renders, validates and runs the manifests without one";
const PARENTS: &str =
    "asks limits under parents, which the documented daemon's examples/limits.toml lacks: parents::* asks them so";
const SHADOW: &str =
    "asks a limit in shadow, which the documented daemon's examples/limits.toml lacks: shadow::* asks it so";
const PIP: &str = "installs into the machine's Python; the test imports the client from clients/python/src";

/// Every command of the docs, by file, in the order the file gives them.
const COMMANDS: &[(&str, &str, Do)] = &[
    ("README.md", "cargo run --release -- serve --config examples/limits.toml", Run),
    ("README.md", "bash .ci/run", Skip(MINUTES)),
    ("README.md", "python3 clients/seed/seed_client.py tcp://127.0.0.1:7777 20 0.05", Run),
    ("README.md", "pip install ./clients/python", Skip(PIP)),
    ("README.md", "python3 -c 'from locker_client import Client; print(Client(\"tcp://127.0.0.1:7777\").ask().ok)'", Run),
    ("README.md", "bash benches/compare.sh", Skip(MINUTES)),
    ("README.md", "cargo bench --bench decide", Skip(MINUTES)),
    ("README.md", "cargo bench --bench kinds", Skip(MINUTES)),
    ("README.md", "bash benches/store.sh", Skip(MINUTES)),
    ("README.md", "bash benches/rls.sh", Skip(MINUTES)),
    ("README.md", "bash benches/peered.sh", Skip(MINUTES)),
    ("README.md", "cargo build --profile dist", Skip(CARGO)),
    ("README.md", "cargo test --release", Skip(MINUTES)),
    ("README.md", "cargo install --locked --path .", Skip(CARGO)),
    ("README.md", "locker ask && echo allowed", Ask),
    ("README.md", "locker serve --config examples/limits.toml --max-requests 5 --in-seconds 0.8", Table),
    ("README.md", "locker ask --limit api --key user-7 && curl ...", Table),
    ("README.md", "locker ask --limit smooth --cost 50 --up-to", Table),
    ("README.md", "locker ask --limit smooth --wait 500ms", Table),
    ("README.md", "locker ask --limit api --cost 0 --json", Table),
    ("README.md", "locker lease heartbeat --limit db --lease \"$id\" --ttl 30s --count 1", Table),
    ("README.md", "locker lease release --limit db --lease \"$id\"", Table),
    ("README.md", "locker stats --connect tcp://127.0.0.1:7777 --json", Table),
    ("README.md", "locker bench --plain --clients 4 --pipeline 64 --duration 5s", Table),
    ("README.md", "locker check-config examples/limits.toml", Table),
    ("README.md", "locker keygen --out server", Table),
    ("README.md", "locker <command> --help", Skip(PATTERN)),
    ("README.md", "cargo doc --open", Skip(CARGO)),
    ("README.md", "cargo run --release --example embedded", Skip(CARGO)),
    ("README.md", "locker serve --store redis://127.0.0.1:6379", Run),
    ("README.md", "docker build -t locker .", Skip(DOCKER)),
    ("README.md", "docker run --rm -p 7777:7777 -p 9090:9090 locker", Skip(DOCKER)),
    ("docs/envoy.md", "locker serve --bind tcp://127.0.0.1:7778 --config examples/limits.toml --rls-bind 127.0.0.1:8081 --rls-config tests/rls/config", Run),
    ("docs/envoy.md", "python3 examples/rls_ask.py 127.0.0.1:8081 messaging message_type=marketing to_number=2061111111", Skip(GRPC)),
    ("docs/envoy.md", "locker ask --limit messaging.to_number --key 2061111111", Skip(GRPC_LIMIT)),
    ("docs/envoy.md", "python3 -m pytest tests/rls -q", Skip(GRPC)),
    ("docs/envoy.md", "bash benches/rls.sh", Skip(MINUTES)),
    ("docs/envoy.md", "python3 benches/rls_grpc.py", Skip(MINUTES)),
    ("docs/envoy.md", "python3 benches/rls_redis.py 3 3", Skip(MINUTES)),
    ("docs/kinds.md", "cargo test --release --test it rolling -- --nocapture", Tests("rolling")),
    ("docs/kinds.md", "cargo test --release --test it seed_scenario -- --nocapture", Tests("seed_scenario")),
    ("docs/operations.md", "locker serve", Run),
    ("docs/operations.md", "locker serve --max-requests 5 --in-seconds 0.8", Run),
    ("docs/operations.md", "locker serve --bind 'tcp://127.0.0.1:*' --config examples/limits.toml", Run),
    ("docs/operations.md", "bash examples/one-host/peering.sh", Skip(RECIPE)),
    ("docs/operations.md", "bash examples/one-host/curve.sh", Skip(RECIPE)),
    ("docs/operations.md", "bash examples/one-host/lease-secret.sh", Skip(RECIPE)),
    ("docs/operations.md", "bash examples/one-host/store.sh", Skip(RECIPE)),
    ("docs/operations.md", "LOCKER_LOG=debug locker serve", Run),
    ("docs/operations.md", "locker stats", Run),
    ("docs/operations.md", "locker stats --connect tcp://a:7777 --json", Skip(HOSTS)),
    ("docs/operations.md", "locker serve --bind 'tcp://*:7777' --peer-bind 'tcp://*:7778' --node-id a --state /var/lib/locker/state --peer tcp://b:7778 --peer tcp://c:7778 --max-requests 1000 --in-seconds 1", Skip(HOSTS)),
    ("docs/operations.md", "locker serve --state /var/lib/locker/state.log --max-requests 100 --in-seconds 3600", Run),
    ("docs/operations.md", "docker compose up -d", Skip(DOCKER)),
    ("docs/operations.md", "docker build -t locker .", Skip(DOCKER)),
    ("docs/operations.md", "docker run --rm -p 7777:7777 -p 9090:9090 locker", Skip(DOCKER)),
    ("docs/operations.md", "docker run --rm -p 7777:7777 -p 9090:9090 -v \"$PWD/examples/limits.toml:/etc/locker/locker.toml:ro\" locker --bind 'tcp://*:7777' --metrics-bind 0.0.0.0:9090", Skip(DOCKER)),
    ("docs/operations.md", "docker kill -s HUP <container>", Skip(DOCKER)),
    ("docs/operations.md", "install -m 0755 target/release/locker /usr/local/bin/locker", Skip(SYSTEMD)),
    ("docs/operations.md", "install -D -m 0644 contrib/locker.toml /etc/locker/locker.toml", Skip(SYSTEMD)),
    ("docs/operations.md", "install -m 0644 contrib/locker.service /etc/systemd/system/", Skip(SYSTEMD)),
    ("docs/operations.md", "systemctl daemon-reload && systemctl enable --now locker", Skip(SYSTEMD)),
    ("docs/operations.md", "systemctl reload locker", Skip(SYSTEMD)),
    ("docs/operations.md", "journalctl -u locker", Skip(SYSTEMD)),
    ("docs/operations.md", "cargo run --release -- serve ...", Skip(PATTERN)),
    ("docs/operations.md", "locker ask --limit api --limit smooth --key user-7", Ask),
    ("docs/operations.md", "locker refund --limit api --key user-7 --cost 2", Run),
    ("docs/operations.md", "locker reset --limit NAME --key KEY", Skip(PATTERN)),
    ("docs/operations.md", "locker ask --limit user --key u7 --parent team=t3 --parent org=acme", Skip(PARENTS)),
    ("docs/operations.md", "locker charge --limit api --key user-9 --cost 12", Run),
    ("docs/operations.md", "locker ask --shadow", Run),
    ("docs/operations.md", "locker ask --limit search-v2 --key u7 --shadow", Skip(SHADOW)),
    ("docs/operations.md", "locker lease acquire --limit db", Run),
    ("docs/operations.md", "locker health --metrics HOST:PORT", Skip(PATTERN)),
    ("docs/operations.md", "cargo test --release --test it clocks", Tests("clocks")),
    ("docs/operations.md", "cargo test --release --test it prometheus", Tests("prometheus")),
    ("docs/operations.md", "locker serve --config /etc/locker/locker.toml", Skip(SYSTEMD)),
    ("docs/operations.md", "locker health --metrics 127.0.0.1:9090", Run),
    ("docs/operations.md", "docker build -t registry.example.com/locker:1.0 .", Skip(DOCKER)),
    ("docs/operations.md", "docker push registry.example.com/locker:1.0", Skip(DOCKER)),
    ("docs/operations.md", "kubectl kustomize deploy/kubernetes/overlays/trio", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl apply -k deploy/kubernetes/overlays/trio", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl rollout status statefulset locker", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl exec locker-0 -- cat /etc/locker/locker-0.toml", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl exec locker-0 -- locker check-config /etc/locker/locker-0.toml", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl logs locker-0 -c reload", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl logs locker-0 | grep 'config reloaded'", Skip(CLUSTER)),
    ("docs/operations.md", "kubectl exec locker-0 -- sh -c 'kill -HUP $(pidof locker)'", Skip(CLUSTER)),
    ("docs/peering.md", "locker serve --bind 'tcp://*:7777' --peer-bind 'tcp://*:7778' --node-id a --state /var/lib/locker/state --peer tcp://b:7778 --peer tcp://c:7778 --max-requests 1000 --in-seconds 1", Skip(HOSTS)),
    ("docs/peering.md", "locker ask --connect tcp://a:7777 --connect tcp://b:7777 --connect tcp://c:7777", Skip(HOSTS)),
    ("docs/peering.md", "locker stats --connect tcp://a:7777", Skip(HOSTS)),
    ("docs/peering.md", "cargo test --release --test it peering -- --nocapture", Tests("peering")),
    ("docs/peering.md", "cargo test --release --test it seed_scenario -- --nocapture", Tests("seed_scenario")),
    ("docs/peering.md", "cargo test --release --test it clocks -- --nocapture", Tests("clocks")),
    ("docs/peering.md", "cargo test --release --test it group -- --nocapture", Tests("group")),
    ("docs/peering.md", "cargo test --release --test it peering_split -- --nocapture", Tests("peering_split")),
    ("docs/peering.md", "cargo test --release --test it peering_delayed -- --nocapture", Tests("peering_delayed")),
    ("docs/peering.md", "PROPTEST_CASES=100000 cargo test --release --test it properties::conserved", Tests("properties::conserved")),
    ("docs/peering.md", "PROPTEST_CASES=100000 cargo test --release --test it properties::conserved_bucket", Tests("properties::conserved_bucket")),
    ("docs/peering.md", "PROPTEST_CASES=100000 cargo test --release --test it properties::conserved_rolling", Tests("properties::conserved_rolling")),
    ("docs/peering.md", "cargo test --release --test it peering_bucket -- --nocapture", Tests("peering_bucket")),
    ("docs/peering.md", "cargo test --release --test it peering_kept -- --nocapture", Tests("peering_kept")),
    ("docs/peering.md", "cargo test --release --test it peering_capacity -- --nocapture", Tests("peering_capacity")),
    ("docs/peering.md", "cargo test --release --test it peering_handback -- --nocapture", Tests("peering_handback")),
    ("docs/peering.md", "cargo test --release --test it peering_restarts -- --nocapture", Tests("peering_restarts")),
    ("docs/performance.md", "bash benches/compare.sh", Skip(MINUTES)),
    ("docs/performance.md", "bash benches/instructions.sh", Skip("needs valgrind, and a minute of load on a shared machine")),
    ("docs/performance.md", "python3 benches/rls_redis.py 3 3", Skip(MINUTES)),
    ("docs/performance.md", "bash benches/rls.sh", Skip(MINUTES)),
    ("docs/performance.md", "cargo build --profile dist --bin locker && bash benches/rls.sh", Skip(MINUTES)),
    ("docs/performance.md", "bash benches/peered.sh", Skip(MINUTES)),
    ("docs/performance.md", "ROUNDS=1 REACH=0 bash benches/peered.sh", Skip(MINUTES)),
    ("docs/performance.md", "bash benches/leases.sh", Skip(MINUTES)),
    ("docs/performance.md", "cargo bench --bench decide", Skip(MINUTES)),
    ("docs/performance.md", "cargo bench --bench kinds", Skip(MINUTES)),
    ("docs/performance.md", "cargo run --release --example key_memory", Skip(CARGO)),
    ("docs/performance.md", "cargo build --release --example go_cost", Skip(CARGO)),
    ("docs/performance.md", "valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*go_cost*timed*' target/release/examples/go_cost batch 200", Skip("needs valgrind and the example the command above builds")),
    ("docs/performance.md", "locker bench --connect tcp://127.0.0.1:7777 --batch 100 --keys 1000000 --prefill --clients 4 --pipeline 4", Skip(MINUTES)),
    ("docs/performance.md", "locker serve --bind 'tcp://127.0.0.1:7777' --max-requests 100000000 --in-seconds 1 &", Skip("starts the locker the benchmarks below load; they are not run here")),
    ("docs/performance.md", "cargo run --release --example permit_pool -- tcp://127.0.0.1:7777 2 1000", Skip(CARGO)),
    ("docs/performance.md", "cargo run --release --example permit_pool -- tcp://127.0.0.1:7777 2 10000", Skip(CARGO)),
    ("docs/performance.md", "locker bench --connect tcp://127.0.0.1:7777 --plain --clients 4 --pipeline 64 --duration 5s", Run),
    ("docs/performance.md", "locker bench --connect tcp://127.0.0.1:7777 --keys 1000000 --prefill --clients 4 --pipeline 64", Skip(MINUTES)),
    ("docs/performance.md", "cargo build --release && pip install -e clients/python", Skip(CARGO)),
    ("docs/performance.md", "python3 clients/python/benches/lockstep.py --rounds 15", Skip(MINUTES)),
    ("docs/performance.md", "python3 clients/python/benches/lockstep.py --client-src OLD/clients/python/src", Skip(PATTERN)),
    ("docs/performance.md", "cargo bench --bench decide -- --warm-up-time 1 --measurement-time 5", Skip(MINUTES)),
    ("docs/performance.md", "python3 benches/parked_memory.py", Skip(MINUTES)),
    ("docs/performance.md", "bash benches/store.sh", Skip(MINUTES)),
    ("docs/performance.md", "locker serve --max-requests 1000000000 --in-seconds 86400", Run),
    ("docs/performance.md", "bash benches/state.sh", Skip(MINUTES)),
    ("docs/security.md", "locker keygen --out server", Run),
    ("docs/security.md", "locker keygen --out alice", Run),
    ("docs/security.md", "locker keygen", Run),
    ("docs/security.md", "mkdir -p client-keys && cp alice.pub client-keys/", Run),
    ("docs/security.md", "locker serve --curve-secret-key server.key --curve-clients client-keys/", Run),
    ("docs/security.md", "locker ask --connect tcp://locker:7777 --server-key server.pub --client-key alice", Skip(HOSTS)),
    ("docs/security.md", "mkdir -p /etc/locker && (umask 077 && head -c 32 /dev/urandom > /etc/locker/lease.secret)", Run),
    ("docs/security.md", "locker serve --config examples/limits.toml --lease-secret /etc/locker/lease.secret", Run),
    ("docs/security.md", "locker keygen --out a", Run),
    ("docs/security.md", "locker serve --curve-secret-key a.key --peer-bind 'tcp://10.0.0.1:7778' --peer 'tcp://10.0.0.2:7778=b.pub' --peer 'tcp://10.0.0.3:7778=c.pub'", Skip(HOSTS)),
    ("docs/security.md", "cargo build --release", Skip(CARGO)),
    ("docs/store.md", "locker serve --store redis://127.0.0.1:6379", Run),
    ("docs/store.md", "locker serve --store redis-cluster://10.0.0.1:6379,10.0.0.2:6379", Skip(HOSTS)),
    ("docs/store.md", "bash benches/store.sh", Skip(MINUTES)),
    ("docs/wire.md", "locker bench --batch N", Skip(PATTERN)),
    ("docs/wire.md", "locker ask --shadow", Run),
];

/// The commands of a Markdown text: each line of a `sh` or `bash` block
/// (continuation lines joined, comments dropped), and each inline code
/// span of the prose that starts with a command.
fn commands(text: &str) -> Vec<String> {
    let starts = [
        "locker ",
        "cargo ",
        "bash ",
        "python3 ",
        "pip ",
        "docker ",
        "mkdir ",
        "systemctl ",
        "journalctl ",
        "install ",
        "head ",
        "valgrind ",
        "LOCKER_LOG",
        "PROPTEST_CASES",
    ];
    let mut found = Vec::new();
    let mut prose = String::new();
    let mut block: Option<bool> = None;
    for line in text.lines() {
        match (block, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) => block = Some(matches!(lang.trim(), "sh" | "bash")),
            (Some(_), Some(_)) => block = None,
            (Some(true), None) => found.push(line.to_owned()),
            (Some(false), None) => {}
            (None, None) => {
                prose.push_str(line);
                prose.push(' ');
            }
        }
    }
    let joined = found.join("\n").replace("\\\n", " ");
    let mut out: Vec<String> = joined.lines().map(uncomment).filter(|l| !l.is_empty()).collect();
    // In the prose, a span that only names a command (`locker serve`,
    // `locker check-config FILE`) is a name; one with a flag, a path or a
    // shell operator is a command to run.
    let runnable = |span: &str| [" -", "/", ".", "&&", "$"].iter().any(|mark| span.contains(mark));
    for span in prose.split('`').skip(1).step_by(2) {
        let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
        if starts.iter().any(|s| span.starts_with(s)) && runnable(&span) && !span.starts_with("locker =") {
            out.push(span);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|c| seen.insert(c.clone()));
    out
}

/// A shell line without its comment and surrounding spaces.
fn uncomment(line: &str) -> String {
    let line = line.trim();
    if line.starts_with('#') {
        return String::new();
    }
    let cut = line.find(" #").map_or(line, |i| &line[..i]);
    cut.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The docs this test reads, README.md first.
fn docs(root: &Path) -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| format!("docs/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_owned());
    names.into_iter().map(|n| (std::fs::read_to_string(root.join(&n)).unwrap(), n)).map(|(t, n)| (n, t)).collect()
}

#[test]
fn every_command_of_the_docs_is_listed_with_what_the_test_does_with_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut given = Vec::new();
    for (doc, text) in docs(root) {
        for command in commands(&text) {
            if !COMMANDS.iter().any(|(d, c, _)| *d == doc && *c == command) {
                missing.push(format!("    ({doc:?}, {command:?}, Run),"));
            }
            given.push((doc.clone(), command));
        }
    }
    let stale: Vec<_> = COMMANDS.iter().filter(|(d, c, _)| !given.iter().any(|(gd, gc)| gd == d && gc == c)).collect();
    assert!(missing.is_empty(), "commands the docs give that the table lacks:\n{}", missing.join("\n"));
    assert!(stale.is_empty(), "listed commands the docs no longer give: {stale:#?}");
}

/// The shell the commands run in: `locker` is the binary under test, its
/// client commands asking the documented locker unless they name one;
/// `locker serve` runs until it prints its endpoint, on a free port, and
/// is stopped; `cargo run --release -- ARGS` is `locker ARGS`.
const PRELUDE: &str = r#"
locker() {
  local arg
  case "$1" in
    serve) shift; serve_until_listening "$@" ;;
    ask|stats|bench|lease|refund|charge|reset)
      for arg in "$@"; do
        if [ "$arg" = --connect ]; then "$LOCKER_BIN" "$@"; return; fi
      done
      "$LOCKER_BIN" "$@" --connect "$LOCKER_EP" ;;
    *) "$LOCKER_BIN" "$@" ;;
  esac
}
serve_until_listening() {
  local args=() next= arg line=
  for arg in "$@"; do
    if [ -n "$next" ]; then args+=("$next"); next=; continue; fi
    case "$arg" in
      --bind|--peer-bind) next='tcp://127.0.0.1:*' ;;
      --metrics-bind|--rls-bind) next='127.0.0.1:0' ;;
    esac
    args+=("$arg")
  done
  case " ${args[*]} " in *" --bind "*) ;; *) args+=(--bind 'tcp://127.0.0.1:*') ;; esac
  coproc SERVE { exec "$LOCKER_BIN" serve "${args[@]}" 2>serve.log; }
  local pid=$SERVE_PID
  read -r -t 60 line <&"${SERVE[0]}"
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  case "$line" in
    "listening on "*) echo "$line" ;;
    *) cat serve.log >&2; return 1 ;;
  esac
}
cargo() {
  if [ "$1 $2 $3" = "run --release --" ]; then shift 3; locker "$@"; return; fi
  echo "not run here: cargo $*" >&2; return 1
}
"#;

/// The script that runs `commands` of one doc, in order, each as written
/// but for the documented locker's addresses and the system folders
/// (`/etc/locker`, `/var/lib/locker`), which move into the scratch folder.
fn script(commands: &[(String, Do)], endpoint: &str, metrics: &str) -> String {
    let mut script = PRELUDE.to_owned();
    for (command, what) in commands {
        let ran = command
            .replace("tcp://127.0.0.1:7777", endpoint)
            .replace("tcp://localhost:7777", endpoint)
            .replace("127.0.0.1:9090", metrics)
            .replace("/etc/locker/", "$SYSTEM/etc/locker/")
            .replace("/etc/locker ", "$SYSTEM/etc/locker ")
            .replace("/var/lib/locker/", "$SYSTEM/var/lib/locker/");
        let shown = command.replace('\'', "");
        let ok = if *what == Ask { "[ $rc -le 1 ]" } else { "[ $rc -eq 0 ]" };
        script.push_str(&format!(
            "echo '>>> {shown}'\n{ran}\nrc=$?\n{ok} || {{ echo \"FAILED (exit $rc):\" '{shown}'; exit 1; }}\n"
        ));
    }
    script.push_str("echo done\n");
    script
}

/// A scratch folder whose entries link to the checkout's tracked ones, so
/// commands find `examples/`, `contrib/` and `clients/` as in a fresh
/// clone, and what they write stays in it: a file a user's own run left in
/// the checkout (`server.key` from `locker keygen --out server`) is not
/// there to collide with.
fn scratch(root: &Path, name: &str) -> PathBuf {
    let top = std::env::temp_dir().join(format!("locker-docs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let work = top.join("work");
    std::fs::create_dir_all(work.join("system")).unwrap();
    for entry in tracked_entries(root) {
        std::os::unix::fs::symlink(root.join(&entry), work.join(&entry)).unwrap();
    }
    work
}

/// The names at the top of the checkout that git tracks (every name but
/// `.git` and `target` when the checkout is not a git clone).
fn tracked_entries(root: &Path) -> Vec<String> {
    let listed = Command::new("git").args(["ls-files", "-z"]).current_dir(root).output();
    let mut names: Vec<String> = match listed {
        Ok(out) if out.status.success() && !out.stdout.is_empty() => String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter_map(|path| path.split('/').next().filter(|n| !n.is_empty()).map(str::to_owned))
            .collect(),
        _ => std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| ![".git", "target"].contains(&n.as_str()))
            .collect(),
    };
    names.sort();
    names.dedup();
    names.retain(|n| root.join(n).exists());
    names
}

/// The commands of `doc` with what the table says to do with each.
fn planned(doc: &str, text: &str) -> Vec<(String, Do)> {
    let what = |c: &str| COMMANDS.iter().find(|(d, listed, _)| *d == doc && *listed == c).map(|e| e.2);
    commands(text).into_iter().filter_map(|c| what(&c).map(|w| (c, w))).collect()
}

#[test]
fn every_documented_command_runs_as_written_against_the_documented_locker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = root.join("examples/limits.toml");
    let d = Daemon::start(&["--config", config.to_str().unwrap(), "--metrics-bind", &metrics]);
    let mut ran = 0;
    for (doc, text) in docs(root) {
        let run: Vec<_> = planned(&doc, &text).into_iter().filter(|(_, w)| matches!(w, Run | Ask)).collect();
        if run.is_empty() {
            continue;
        }
        ran += run.len();
        let work = scratch(root, &doc.replace('/', "-"));
        let out = Command::new("timeout")
            .args(["120", "bash", "-c", &script(&run, &d.endpoint, &metrics)])
            .current_dir(&work)
            .env("LOCKER_BIN", locker_bin())
            .env("LOCKER_EP", &d.endpoint)
            .env("LOCKER_LOG", "warn")
            .env("SYSTEM", work.join("system"))
            .env("PYTHONPATH", root.join("clients/python/src"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stdout.ends_with("done\n"), "{doc}:\n{stdout}\n{stderr}");
        let _ = std::fs::remove_dir_all(work.parent().unwrap());
    }
    assert!(ran >= 20, "{ran} commands ran");
}

/// A command that is not run still names files that exist, and a
/// `cargo test` command names tests that exist.
#[test]
fn every_command_not_run_names_files_and_tests_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    for (doc, text) in docs(root) {
        for (command, what) in planned(&doc, &text) {
            match what {
                Tests(filter) => {
                    let listed = Command::new(std::env::current_exe().unwrap())
                        .args(["--list", "--format", "terse", filter])
                        .output()
                        .unwrap();
                    let count =
                        String::from_utf8_lossy(&listed.stdout).lines().filter(|l| l.ends_with(": test")).count();
                    if count == 0 {
                        wrong.push(format!("{doc}: `{command}` runs no test"));
                    }
                }
                Skip(why) if why != PATTERN => {
                    for path in command.split_whitespace().map(|w| w.trim_matches(|c| c == '\'' || c == '"')) {
                        let local = !path.starts_with(['/', '$', '-', '~'])
                            && !path.contains(':')
                            && !path.starts_with("target/");
                        let named =
                            path.contains('/') || [".sh", ".py", ".toml", ".service"].iter().any(|e| path.ends_with(e));
                        if local && named && !root.join(path).exists() {
                            wrong.push(format!("{doc}: `{command}` names {path}, which the checkout lacks"));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
