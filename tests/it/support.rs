//! The harness for real-process tests: start the `locker` binary on a
//! wildcard loopback port, read the endpoint it prints, talk to it with
//! sockets that time out, and always clean the process up.
//!
//! Nothing here sleeps to wait for readiness: `Daemon::start` returns once
//! the daemon has printed its bound endpoint, which it does only after the
//! socket is bound.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use locker::{Ask, Client};

/// How long a daemon may take to start, and a socket may wait for a reply,
/// before the test fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// How long a group may take to join before the test fails: on a loaded
/// machine the heartbeats, the lease echoes and the state files' syncs
/// that a join waits for can take seconds. A test waits for the join and
/// judges nothing by how long it took.
pub const JOIN: Duration = Duration::from_secs(30);

/// How long a process killed with -9 may take to be gone: one blocked in a
/// sync of its state file dies only once the sync returns, which a busy
/// disk can hold for seconds.
pub const GONE: Duration = Duration::from_secs(30);

/// The path of the binary under test.
pub fn locker_bin() -> &'static str {
    env!("CARGO_BIN_EXE_locker")
}

/// A running `locker serve`, killed when dropped.
pub struct Daemon {
    child: Child,
    /// The endpoint the daemon printed, with its real port.
    pub endpoint: String,
    /// Its log (warnings and above), when started with `start_logged`.
    log: Option<Arc<Mutex<String>>>,
}

impl Daemon {
    /// Starts `locker serve --bind tcp://127.0.0.1:* <args>` and waits for
    /// its `listening on` line.
    pub fn start(args: &[&str]) -> Daemon {
        Daemon::start_with(&["--bind", "tcp://127.0.0.1:*"], args)
    }

    /// Starts `locker serve <bind_args> <args>`.
    pub fn start_with(bind_args: &[&str], args: &[&str]) -> Daemon {
        Daemon::spawn(bind_args, args, false)
    }

    /// Starts `locker serve --bind tcp://127.0.0.1:* <args>`, keeping its
    /// log for `log`.
    pub fn start_logged(args: &[&str]) -> Daemon {
        Daemon::spawn(&["--bind", "tcp://127.0.0.1:*"], args, true)
    }

    /// Starts `locker serve <bind_args> <args>`, keeping its log for `log`.
    pub fn start_logged_with(bind_args: &[&str], args: &[&str]) -> Daemon {
        Daemon::spawn(bind_args, args, true)
    }

    /// What the daemon logged so far (only with `start_logged`).
    pub fn log(&self) -> String {
        self.log.as_ref().expect("started with start_logged").lock().unwrap().clone()
    }

    /// The daemon's log once it holds `needle`, or as it is after
    /// `DEADLINE`: the log is read by a thread, so a line may arrive a
    /// little after the reply to the request that logged it.
    pub fn log_with(&self, needle: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let log = self.log();
            if log.contains(needle) || Instant::now() > end {
                return log;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts `locker serve --bind tcp://127.0.0.1:* <args>` under
    /// `wrapper` (a command such as `prlimit --nofile=64:64`), keeping its log.
    pub fn start_logged_under(wrapper: &[&str], args: &[&str]) -> Daemon {
        let mut command = Command::new(wrapper[0]);
        command.args(&wrapper[1..]).arg(locker_bin());
        Daemon::try_spawn_with(command, &["--bind", "tcp://127.0.0.1:*"], args, true)
            .unwrap_or_else(|why| panic!("{why}"))
    }

    fn spawn(bind_args: &[&str], args: &[&str], capture: bool) -> Daemon {
        Daemon::try_spawn(bind_args, args, capture).unwrap_or_else(|why| panic!("{why}"))
    }

    /// Starts a locker, or says why it did not print its endpoint (it
    /// exited, for instance on a port taken since it was chosen, or it was
    /// too slow).
    pub fn try_spawn(bind_args: &[&str], args: &[&str], capture: bool) -> Result<Daemon, String> {
        Daemon::try_spawn_with(Command::new(locker_bin()), bind_args, args, capture)
    }

    /// `try_spawn`, with `command` as the start of the command line.
    fn try_spawn_with(
        mut command: Command,
        bind_args: &[&str],
        args: &[&str],
        capture: bool,
    ) -> Result<Daemon, String> {
        let mut child = command
            .arg("serve")
            .args(bind_args)
            .args(args)
            .env("LOCKER_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if capture { Stdio::piped() } else { Stdio::inherit() })
            .spawn()
            .expect("spawn locker");
        let log = child.stderr.take().map(|stderr| {
            let log = Arc::new(Mutex::new(String::new()));
            let sink = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut log = sink.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
            log
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep reading so the daemon never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(DEADLINE) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().ok();
                return Err(format!("locker printed no endpoint within {DEADLINE:?} (exit: {status:?})"));
            }
        };
        let endpoint = line.strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Ok(Daemon { endpoint: endpoint.to_owned(), child, log })
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a name such as "TERM" or "KILL") to the daemon.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the daemon to exit, for at most `limit`; `None` if it did not.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A REQ socket connected to `endpoint` whose sends and receives fail after
/// `DEADLINE` instead of hanging.
pub fn req(ctx: &zmq::Context, endpoint: &str) -> zmq::Socket {
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(DEADLINE.as_millis() as i32).unwrap();
    s.set_sndtimeo(DEADLINE.as_millis() as i32).unwrap();
    s.connect(endpoint).unwrap();
    s
}

/// Sends `body` on `socket` and returns the reply.
pub fn round_trip(socket: &zmq::Socket, body: &[u8]) -> Vec<u8> {
    socket.send(body, 0).expect("send");
    socket.recv_bytes(0).expect("a reply within the deadline")
}

/// Runs `locker <args>` to completion (it must finish within `DEADLINE`).
pub fn run_locker(args: &[&str]) -> Output {
    let child = Command::new(locker_bin())
        .args(args)
        .env("LOCKER_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn locker");
    wait_output(child, DEADLINE)
}

/// Runs the command-line client `args[0]` (`ask`, `refund`, ...) against
/// the locker at `endpoint`: its exit status, standard output and error.
pub fn cli(endpoint: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec![args[0], "--connect", endpoint];
    all.extend_from_slice(&args[1..]);
    let out = run_locker(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Collects a child's output, killing it if it runs past `limit`.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("process ran past {limit:?}: {:?}", child.wait_with_output().map(|o| o.stderr));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `service`, peered, started as one whose new state file names no
/// earlier run: a first run, which owns the slot (window, period) it joins
/// in; the file itself is not kept. Without it, a locker whose peers have
/// not been up since before the slot began owns none of it (see
/// docs/peering.md).
pub fn first_run(mut service: locker::service::Service, now: u64) -> locker::service::Service {
    let _ = locker::service::step::restore(&mut service, now, 0, std::iter::empty());
    service
}

/// A file in the system temp directory, removed when dropped.
pub struct TempFile(std::path::PathBuf);

impl TempFile {
    /// Writes `text` to a file whose name is unique to this process and `name`.
    pub fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("locker-test-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write temp file");
        TempFile(path)
    }

    /// The file's path.
    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A free TCP port on loopback, for an address a test must name before
/// the locker binds it: a PUB socket its peers connect to (peers
/// subscribe before every locker is up, so a wildcard port read back after
/// binding would come too late for the others' command lines), or a
/// metrics address.
///
/// The port comes from just below the kernel's ephemeral range. A port
/// the kernel handed out as free (`bind` to port 0) lies in that range,
/// and so does the local end of every connection the other tests open:
/// one of them could take it between this call and the locker's bind, and
/// that locker would exit with "Address already in use". Below the range
/// only another chosen port can collide, so each is handed out once per
/// process, from a start that differs between processes, and checked free.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static START: OnceLock<u32> = OnceLock::new();
    let (low, span) = below_ephemeral();
    let start = *START.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        std::process::id().wrapping_mul(7919).wrapping_add(nanos)
    });
    for _ in 0..span {
        let port = low + ((start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port").local_addr().unwrap().port()
}

/// The first port of the window below the kernel's ephemeral range, and
/// how many ports it holds.
fn below_ephemeral() -> (u16, u32) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let first: u16 = range.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(32768);
    let low = first.saturating_sub(12_000).max(10_000);
    (low, u32::from(first.saturating_sub(low).max(1)))
}

/// A group of peered lockers on loopback, each with its own PUB port.
pub struct Peered {
    /// The running lockers, in the order of `pubs`; `None` after a kill.
    pub lockers: Vec<Option<Daemon>>,
    /// Each locker's `--peer-bind` endpoint.
    pub pubs: Vec<String>,
    /// Arguments given to every locker besides the peering ones.
    pub args: Vec<String>,
    /// Whether each locker's log is kept (see `Daemon::start_logged`).
    pub logged: bool,
    /// A command each locker runs under, by index (e.g. libfaketime's
    /// `env LD_PRELOAD=…`); none where empty or missing.
    pub under: Vec<Vec<String>>,
    /// Whether each locker is given `--node-id node-<i>`; without, each
    /// goes by its default id.
    pub named: bool,
    /// The directory of each locker's state file (`--state
    /// <dir>/node-<i>.state`), unless the group runs without: a group
    /// started all at once without `--state` serves nothing of its first
    /// slot (window, period), since no run can tell that it is the first
    /// (see docs/peering.md).
    pub states: Option<StateDir>,
    /// The lockers restarted without their state file (`restart_without_state`).
    pub stateless: Vec<usize>,
}

/// A directory for peered lockers' state files, removed when dropped.
pub struct StateDir(std::path::PathBuf);

impl StateDir {
    /// A new empty directory, unique to this process and call.
    pub fn new() -> StateDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("locker-test-{}-peered-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a state directory");
        StateDir(path)
    }

    /// The state file of locker `i`.
    pub fn file(&self, i: usize) -> String {
        self.0.join(format!("node-{i}.state")).to_str().expect("a UTF-8 temp path").to_owned()
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Peered {
    /// Starts `n` lockers, each subscribed to all the others, with `args`,
    /// each with a new state file unless `args` name one.
    pub fn start(n: usize, args: &[&str]) -> Peered {
        Peered::start_group(n, args, false)
    }

    /// Starts `n` lockers as `start` does, but without state files (each
    /// serves nothing of the slot, window or period it starts in).
    pub fn start_stateless(n: usize, args: &[&str]) -> Peered {
        Peered::launch(n, args, false, Vec::new(), true, false)
    }

    /// Starts the group on fresh PUB ports. A port that `free_port` found
    /// free may be taken again before the locker binds it (by another
    /// test's connection), and then that locker exits: the whole group is
    /// started again on other ports, at most three times.
    fn start_group(n: usize, args: &[&str], logged: bool) -> Peered {
        Peered::start_under(n, args, logged, Vec::new())
    }

    /// Starts the group with locker `i` run under `under[i]`.
    pub fn start_under(n: usize, args: &[&str], logged: bool, under: Vec<Vec<String>>) -> Peered {
        Peered::launch(n, args, logged, under, true, true)
    }

    /// Starts `n` lockers as `start` does, but without `--node-id`: each
    /// goes by its default id, as a user who sets nothing but the peers.
    pub fn start_unnamed(n: usize, args: &[&str]) -> Peered {
        Peered::launch(n, args, false, Vec::new(), false, true)
    }

    fn launch(n: usize, args: &[&str], logged: bool, under: Vec<Vec<String>>, named: bool, kept: bool) -> Peered {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut why = String::new();
        for _ in 0..3 {
            let pubs: Vec<String> = (0..n).map(|_| format!("tcp://127.0.0.1:{}", free_port())).collect();
            let (args, under) = (args.clone(), under.clone());
            let kept = kept && !args.iter().any(|a| a == "--state");
            let states = kept.then(StateDir::new);
            let mut group =
                Peered { lockers: Vec::new(), pubs, args, logged, under, named, states, stateless: Vec::new() };
            for i in 0..n {
                match group.try_spawn(i) {
                    Ok(d) => group.lockers.push(Some(d)),
                    Err(e) => {
                        why = e;
                        break;
                    }
                }
            }
            if group.lockers.len() == n {
                return group;
            }
            eprintln!("a peered locker did not start ({why}); starting the group again on other ports");
        }
        panic!("a peered group did not start in three tries: {why}");
    }

    /// Starts locker `i` (again) with its node id, PUB port and peers: the
    /// same command line every time.
    pub fn spawn(&self, i: usize) -> Daemon {
        self.try_spawn(i).unwrap_or_else(|why| panic!("{why}"))
    }

    fn try_spawn(&self, i: usize) -> Result<Daemon, String> {
        let node = format!("node-{i}");
        let mut args: Vec<&str> = vec!["--peer-bind", &self.pubs[i]];
        if self.named {
            args.extend(["--node-id", &node]);
        }
        for (j, p) in self.pubs.iter().enumerate() {
            if j != i {
                args.extend(["--peer", p.as_str()]);
            }
        }
        args.extend(self.args.iter().map(String::as_str));
        // A grace a loaded machine can meet: a locker whose grace runs out
        // before every peer answered cannot know that no earlier run of it
        // granted, so it rightly owns none of the period it joins in, and
        // a test's first asks would be sorry. Joining still ends as soon
        // as every peer synced; a test about the grace sets its own.
        if !self.args.iter().any(|a| a == "--peer-grace") {
            args.extend(["--peer-grace", "5"]);
        }
        let state = self.states.as_ref().filter(|_| !self.stateless.contains(&i)).map(|s| s.file(i));
        if let Some(state) = &state {
            args.extend(["--state", state.as_str()]);
        }
        let bind = ["--bind", "tcp://127.0.0.1:*"];
        match self.under.get(i).filter(|w| !w.is_empty()) {
            Some(w) => {
                let mut command = Command::new(&w[0]);
                command.args(&w[1..]).arg(locker_bin());
                Daemon::try_spawn_with(command, &bind, &args, self.logged)
            }
            None => Daemon::try_spawn(&bind, &args, self.logged),
        }
    }

    /// Starts `n` lockers as `start` does, keeping their logs.
    pub fn start_logged(n: usize, args: &[&str]) -> Peered {
        Peered::start_group(n, args, true)
    }

    /// The REP endpoint of locker `i`.
    pub fn endpoint(&self, i: usize) -> String {
        self.lockers[i].as_ref().expect("locker is running").endpoint.clone()
    }

    /// Kills locker `i` with SIGKILL and waits for it to be gone.
    pub fn kill(&mut self, i: usize) {
        let mut d = self.lockers[i].take().expect("locker is running");
        d.signal("KILL");
        d.wait_exit(GONE).expect("gone after SIGKILL");
    }

    /// Restarts a killed locker `i` under the same node id and ports.
    pub fn restart(&mut self, i: usize) {
        assert!(self.lockers[i].is_none(), "kill it first");
        let d = self.spawn(i);
        self.lockers[i] = Some(d);
    }

    /// Restarts a killed locker `i` as `restart` does, but without its
    /// state file (nor with it from then on).
    pub fn restart_without_state(&mut self, i: usize) {
        self.stateless.push(i);
        self.restart(i);
    }

    /// Waits until every running locker has joined, holds its lease (where
    /// one applies) and hears `live_peers` live peers, polling stats;
    /// panics after `JOIN`.
    pub fn wait_joined(&self, live_peers: usize) {
        let end = Instant::now() + JOIN;
        for (i, d) in self.lockers.iter().enumerate() {
            let Some(d) = d else { continue };
            let mut client = locker::Client::new([d.endpoint.as_str()], DEADLINE).unwrap();
            loop {
                let s = client.stats().expect("stats");
                // Joined, and holding its share: a run that has just
                // joined holds it only once a majority echoed its lease,
                // a heartbeat or two later, and answers sorry until then.
                if !s.joining && s.leased != Some(false) && s.peers.iter().filter(|p| p.live).count() >= live_peers {
                    break;
                }
                assert!(Instant::now() < end, "locker {i} not joined with {live_peers} live peers: {s:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Runs the seed's own Python client (`clients/seed/seed_client.py`, the
/// seed's client ported to Python 3 and kept in the repository)
/// against `endpoint`: `count` requests `interval` seconds apart. Returns
/// its output, one `<unix time> <go|sorry>` line per request.
pub fn run_seed_client(endpoint: &str, count: usize, interval: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/seed/seed_client.py");
    assert!(std::path::Path::new(script).exists(), "missing {script}");
    let have_pyzmq = Command::new("python3").args(["-c", "import zmq"]).status().is_ok_and(|s| s.success());
    assert!(have_pyzmq, "this test needs python3 with pyzmq: pip install pyzmq (.ci/run does)");
    let child = Command::new("python3")
        .args([script, endpoint, &count.to_string(), interval])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_output(child, Duration::from_secs(20));
    assert!(out.status.success(), "seed client failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What a worker does with a go, given when it sent the ask (the wall
/// clock, in nanoseconds): the fixed-window tests stamp it, the rolling one
/// calls the resource.
pub type OnGo = Arc<dyn Fn(u128) + Send + Sync>;

/// One worker: asks the lockers in `endpoints` (the first tried first)
/// until `end`, calling `on_go` after each go; returns how many go.
fn worker(endpoints: Vec<String>, end: Instant, on_go: OnGo) -> usize {
    let mut client = Client::new(endpoints, Duration::from_millis(600)).unwrap();
    let mut goes = 0;
    while Instant::now() < end {
        let asked = wall_ns();
        match client.ask(&Ask::new()) {
            Ok(r) if r.ok => {
                on_go(asked);
                goes += 1;
            }
            Ok(r) => thread::sleep(Duration::from_millis(r.retry_after_ms.clamp(1, 100))),
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
    goes
}

/// Starts `n` workers until `end`, worker `i` starting on locker
/// `(first + i) % endpoints.len()`.
pub fn workers(
    endpoints: &[String],
    n: usize,
    first: usize,
    end: Instant,
    on_go: &OnGo,
) -> Vec<thread::JoinHandle<usize>> {
    (0..n)
        .map(|i| {
            let mut list = endpoints.to_vec();
            list.rotate_left((first + i) % endpoints.len());
            let on_go = on_go.clone();
            thread::spawn(move || worker(list, end, on_go))
        })
        .collect()
}

/// The wall clock, in nanoseconds since the Unix epoch.
pub fn wall_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

/// Returns at once when at least `room` is left of the current epoch slot
/// of `slot_ns`, else sleeps into the next slot: for tests whose asks must
/// fall in one slot. (It waits for the clock, not for a process.)
pub fn wait_for_room(slot_ns: u128, room: Duration) {
    let into = wall_ns() % slot_ns;
    if slot_ns - into < room.as_nanos() {
        thread::sleep(Duration::from_nanos((slot_ns - into) as u64 + 1_000_000));
    }
}

/// Each go as its worker saw it: when the ask left and when the go came
/// back (the wall clock, in nanoseconds). The go was granted in between.
pub type Stamps = Mutex<Vec<(u128, u128)>>;

/// A record of each go, and the `OnGo` that writes it.
pub fn stamping() -> (Arc<Stamps>, OnGo) {
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let writer = stamps.clone();
    (stamps, Arc::new(move |asked| writer.lock().unwrap().push((asked, wall_ns()))))
}

/// The go granted in one slot, as far as the workers can tell: at least
/// those asked and answered within it, at most those also whose ask or
/// answer fell in it. (On a loaded machine a go granted just before a
/// boundary can reach its worker just after it: counting by arrival alone
/// would put it in the wrong slot.) A test fails on what is certain: more
/// than the limit `at_least`, or fewer than a full slot `at_most`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct InSlot {
    pub at_least: u32,
    pub at_most: u32,
}

impl std::fmt::Debug for InSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at_least == self.at_most {
            true => write!(f, "{}", self.at_least),
            false => write!(f, "{}..={}", self.at_least, self.at_most),
        }
    }
}

/// The go per epoch slot of `slot_ns` among `stamps`.
pub fn per_slot(stamps: &Stamps, slot_ns: u128) -> std::collections::BTreeMap<u128, InSlot> {
    let mut slots = std::collections::BTreeMap::<u128, InSlot>::new();
    for &(asked, answered) in stamps.lock().unwrap().iter() {
        let (first, last) = (asked / slot_ns, answered / slot_ns);
        if first == last {
            slots.entry(first).or_default().at_least += 1;
        }
        for slot in first..=last {
            slots.entry(slot).or_default().at_most += 1;
        }
    }
    slots
}

/// The reply `service` gives to `body` at `now`, for a caller that waits
/// for it (`step::request` with a loop that may not hold). Tests on the
/// seam call the step this way only through this, so that a change to its
/// signature is one line here.
pub fn seam(service: &mut locker::service::Service, now: locker::core::Nanos, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0xaa; 3]; // the step must clear what was there
    let _ = locker::service::step::request(service, now, 0, body, &mut (), &mut (), &mut out);
    out
}

/// `body` served by `service` at `now` under `token`, as the daemon's
/// loop serves it (`step::request`): answered now (the reply beside it)
/// or held. No parked ask may be due then (`ready` answers those first).
pub fn serve(
    service: &mut locker::service::Service,
    now: locker::core::Nanos,
    token: locker::service::Token,
    body: &[u8],
) -> (locker::service::Answer, Vec<u8>) {
    let (mut sent, mut out) = (Sent::default(), Vec::new());
    let answer = locker::service::step::request(service, now, token, body, &mut (), &mut sent, &mut out);
    sent.replies.retain(|(t, _)| *t != token);
    assert!(sent.replies.is_empty(), "parked asks were due: `ready` answers them first");
    (answer, out)
}

/// The replies to the parked asks due at `now`, in the order a loop turn
/// sends them (`step::turn`).
/// The store's calls must have been taken before (`store_calls`).
pub fn ready(
    service: &mut locker::service::Service,
    now: locker::core::Nanos,
) -> Vec<(locker::service::Token, Vec<u8>)> {
    let sent = turn(service, now);
    assert!(sent.claims.is_empty() && sent.leases.is_empty(), "the store's calls were due: take them first");
    sent.replies
}

/// Every parked ask answered once, as at a stop (`step::stop`).
pub fn finals(
    service: &mut locker::service::Service,
    now: locker::core::Nanos,
) -> Vec<(locker::service::Token, Vec<u8>)> {
    let mut sent = Sent::default();
    locker::service::step::stop(service, now, &mut (), &mut sent, &mut Vec::new());
    sent.replies
}

/// When `service`'s loop turns next, if ever (`step::next_deadline`).
pub fn deadline(service: &locker::service::Service) -> Option<locker::core::Nanos> {
    locker::service::step::next_deadline(service, &())
}

/// The bytes of a structured ask.
pub fn ask_body(ask: &Ask) -> Vec<u8> {
    let mut body = Vec::new();
    locker::wire::encode(&ask.to_map(), &mut body);
    body
}

/// The answer in a structured reply, or the locker's refusal as its message.
pub fn answer<T: serde::de::DeserializeOwned>(reply: &[u8]) -> Result<T, String> {
    match locker::wire::decode_reply(reply).expect("a decodable reply") {
        locker::wire::Reply::Answer(r) => Ok(r),
        locker::wire::Reply::Refused(e) => Err(e),
    }
}

/// `ask` answered by `service` at `now`.
pub fn seam_ask(
    service: &mut locker::service::Service,
    now: locker::core::Nanos,
    ask: &Ask,
) -> Result<locker::GoReply, String> {
    answer(&seam(service, now, &ask_body(ask)))
}

/// `parts` asked all or nothing (`op: all`) of `service` at `now`.
pub fn seam_all(
    service: &mut locker::service::Service,
    now: locker::core::Nanos,
    parts: &[Ask],
) -> Result<locker::wire::AllReply, String> {
    let mut body = Vec::new();
    locker::wire::encode_all(parts, None, None, &mut body);
    match locker::wire::decode_all_reply(&seam(service, now, &body)).expect("a decodable reply") {
        locker::wire::Reply::Answer(r) => Ok(r),
        locker::wire::Reply::Refused(e) => Err(e),
    }
}

/// The bytes of a stats request.
pub fn stats_body() -> Vec<u8> {
    let mut body = Vec::new();
    locker::wire::encode(&locker::wire::RequestMap { op: Some("stats"), ..Default::default() }, &mut body);
    body
}

/// The stats `service` reports at `now`.
pub fn seam_stats(service: &mut locker::service::Service, now: locker::core::Nanos) -> locker::StatsReply {
    answer(&seam(service, now, &stats_body())).expect("stats are always answered")
}

/// The stats node `i` of a simulated group reports now.
pub fn sim_stats(group: &mut locker::sim::Group, i: usize) -> locker::StatsReply {
    answer(&group.request(i, &stats_body())).expect("stats are always answered")
}

/// The command line of `locker serve`, as the binary reads it, for a
/// locker served in this process.
#[derive(clap::Parser)]
struct ServeLine {
    #[command(flatten)]
    settings: locker::config::Settings,
    #[arg(long)]
    config: Option<std::path::PathBuf>,
}

/// A locker served by this process on real sockets (mini-redis style), for
/// tests of sockets and clients that need no process boundary: its loop
/// runs on a thread until `stop` (or drop). Stopping it closes its socket
/// as a killed process's would.
pub struct Served {
    pub endpoint: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Served {
    /// Serves `locker serve --bind tcp://127.0.0.1:* <args>` here.
    pub fn start(args: &[&str]) -> Served {
        Served::start_with(args, None)
    }

    /// As `start`, reading time from `clock` instead of the system's.
    pub fn start_at(args: &[&str], clock: impl locker::daemon::server::LoopClock + 'static) -> Served {
        Served::start_with(args, Some(Box::new(clock)))
    }

    fn start_with(args: &[&str], clock: Option<Box<dyn locker::daemon::server::LoopClock>>) -> Served {
        use clap::Parser;
        let line = ["serve", "--bind", "tcp://127.0.0.1:*"].iter().chain(args);
        let line = ServeLine::try_parse_from(line).expect("a valid command line");
        let file = match &line.config {
            Some(path) => locker::config::FileConfig::load(path).expect("a valid config file"),
            None => locker::config::FileConfig::default(),
        };
        let config = locker::config::ServeConfig::resolve(line.settings, file).expect("valid settings");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (bound, endpoint) = std::sync::mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut server = locker::daemon::Server::bind(&config).expect("binds");
            if let Some(clock) = clock {
                server = server.with_clock(clock);
            }
            bound.send(server.endpoint().to_owned()).unwrap();
            server.run(&flag).expect("serves until stopped");
        });
        let endpoint = endpoint.recv_timeout(DEADLINE).expect("bound");
        Served { endpoint, stop, thread: Some(thread) }
    }

    /// Stops serving and closes the socket: clients see it gone.
    pub fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("the loop ended cleanly");
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a loop step sends, kept for a test: replies by token, and the
/// store's calls.
#[derive(Default)]
pub struct Sent {
    pub replies: Vec<(locker::service::Token, Vec<u8>)>,
    pub claims: Vec<locker::core::claims::ClaimAsk>,
    pub leases: Vec<locker::core::store_lease::LeaseCall>,
    pub published: Vec<Vec<u8>>,
}

impl locker::service::Io for Sent {
    fn reply(&mut self, token: locker::service::Token, body: &[u8]) {
        self.replies.push((token, body.to_vec()));
    }

    fn store(
        &mut self,
        claims: Vec<locker::core::claims::ClaimAsk>,
        leases: Vec<locker::core::store_lease::LeaseCall>,
    ) {
        self.claims.extend(claims);
        self.leases.extend(leases);
    }

    fn publish(&mut self, bytes: &[u8]) {
        self.published.push(bytes.to_vec());
    }
}

/// One loop turn of `service` at `now` with nothing read, as the daemon's
/// loop takes it (`service::step::turn`); what it sent.
pub fn turn(service: &mut locker::service::Service, now: locker::core::Nanos) -> Sent {
    let mut sent = Sent::default();
    locker::service::step::turn(service, now, &mut (), &mut sent, &mut Vec::new());
    sent
}

/// What `service` has for the store at `now`, as the loop hands it over
/// after serving (`service::step::flush`).
pub fn store_calls(service: &mut locker::service::Service, now: locker::core::Nanos) -> Sent {
    let mut sent = Sent::default();
    locker::service::step::flush(service, now, &mut (), &mut sent);
    sent
}

/// The reply `reply` to `request` could not be delivered: the next
/// flush at `now` gives back what a go in it took (`service::step::flush`).
pub fn undelivered(service: &mut locker::service::Service, now: locker::core::Nanos, request: &[u8], reply: &[u8]) {
    struct Lost(Option<(Box<[u8]>, Vec<u8>)>);
    impl locker::service::Io for Lost {
        fn reply(&mut self, _: locker::service::Token, _: &[u8]) {}

        fn undelivered(&mut self) -> locker::service::Undelivered {
            let lost_go: Vec<_> = self.0.take().into_iter().collect();
            locker::service::Undelivered { replies: 1, go: lost_go.len() as u64, lost_go }
        }
    }
    let go = locker::wire::grants(reply);
    let mut lost = Lost(go.then(|| (request.into(), reply.to_vec())));
    locker::service::step::flush(service, now, &mut (), &mut lost);
}

/// The peer messages `service` sends at `now` (`service::step::flush`).
pub fn published(service: &mut locker::service::Service, now: locker::core::Nanos) -> Vec<Vec<u8>> {
    let mut sent = Sent::default();
    locker::service::step::flush(service, now, &mut (), &mut sent);
    sent.published
}
