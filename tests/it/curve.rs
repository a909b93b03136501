use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use locker::curve::{ClientCurve, KeyPair, PublicKey};
use locker::{Ask, Client, ClientError};

use crate::support::{locker_bin, run_locker, Peered, DEADLINE};

/// How long a client waits before it counts a locker as silent: a refused
/// or plain client never gets an answer, so this only bounds the test.
const SILENT: Duration = Duration::from_millis(300);

/// A directory of key files for one test, removed when dropped.
struct KeyDir(PathBuf);

impl KeyDir {
    fn new(test: &str) -> KeyDir {
        let dir = std::env::temp_dir().join(format!("locker-curve-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("clients")).expect("create the key directory");
        KeyDir(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().expect("a UTF-8 temp path").to_owned()
    }

    /// Runs `locker keygen --out <dir>/<name>` and returns the pair it wrote.
    fn keygen(&self, name: &str) -> KeyPair {
        let out = run_locker(&["keygen", "--out", &self.path(name)]);
        assert!(out.status.success(), "keygen: {}", String::from_utf8_lossy(&out.stderr));
        KeyPair::load(Path::new(&self.path(name))).expect("keygen wrote a usable secret key")
    }

    /// Puts `name.pub` into the allowlist directory.
    fn allow(&self, name: &str) {
        std::fs::copy(self.path(&format!("{name}.pub")), self.path(&format!("clients/{name}.pub"))).unwrap();
    }
}

impl Drop for KeyDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `locker serve` whose log goes to a file the test can read.
struct Logged {
    child: Child,
    endpoint: String,
    log: PathBuf,
}

impl Logged {
    /// Starts `locker serve` on a loopback wildcard port with `args`, and
    /// waits for its endpoint line (never sleeping for readiness).
    fn start(keys: &KeyDir, args: &[&str]) -> Logged {
        let log = keys.0.join("serve.log");
        let mut child = Command::new(locker_bin())
            .args(["serve", "--bind", "tcp://127.0.0.1:*"])
            .args(args)
            .env("LOCKER_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&log).expect("create the log file"))
            .spawn()
            .expect("spawn locker");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            for _ in lines {}
        });
        let line = rx.recv_timeout(DEADLINE).ok().flatten().unwrap_or_default();
        let Some(endpoint) = line.strip_prefix("listening on ") else {
            let _ = child.kill();
            panic!("no endpoint line, got {line:?}: {}", std::fs::read_to_string(&log).unwrap_or_default());
        };
        Logged { endpoint: endpoint.to_owned(), child, log }
    }

    fn client(&self, curve: Option<ClientCurve>) -> Client {
        let client = Client::new([self.endpoint.as_str()], SILENT).unwrap();
        match curve {
            Some(c) => client.with_curve(c),
            None => client,
        }
    }

    /// Waits (within the deadline) until the log holds a line with every
    /// one of `words`, and returns that line.
    fn wait_for_log(&self, words: &[&str]) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| words.iter().all(|w| l.contains(w))) {
                return line.to_owned();
            }
            assert!(Instant::now() < end, "no log line with {words:?} in:\n{log}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ask() -> Ask<'static> {
    Ask::new()
}

fn no_answer(result: Result<locker::GoReply, ClientError>) -> bool {
    matches!(result, Err(ClientError::NoAnswer { .. }))
}

#[test]
fn only_allowlisted_clients_get_an_answer() {
    let keys = KeyDir::new("allowlist");
    let server = keys.keygen("server");
    let alice = keys.keygen("alice");
    let mallory = keys.keygen("mallory");
    keys.allow("alice");
    let d = Logged::start(
        &keys,
        &[
            "--max-requests",
            "100",
            "--curve-secret-key",
            &keys.path("server.key"),
            "--curve-clients",
            &keys.path("clients"),
        ],
    );

    let out = run_locker(&[
        "ask",
        "--connect",
        &d.endpoint,
        "--server-key",
        &keys.path("server.pub"),
        "--client-key",
        &keys.path("alice"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "go\n", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    let mut alice_client = d.client(Some(ClientCurve { server: server.public, keys: alice }));
    assert!(alice_client.ask(&ask()).unwrap().ok);

    let mut mallory_client = d.client(Some(ClientCurve { server: server.public, keys: mallory.clone() }));
    assert!(no_answer(mallory_client.ask(&ask())), "a key not in the allowlist must get no answer");
    let line = d.wait_for_log(&["not in the allowlist", &mallory.public.to_z85()]);
    assert!(line.contains("refused=1"), "{line}");

    assert!(no_answer(d.client(None).ask(&ask())), "a plain client must get no answer");
    // ZeroMQ tells the plain client nothing: the locker's log says it.
    d.wait_for_log(&["CURVE handshake failed", "a plain client"]);
    // A client that expects another server key cannot finish the handshake.
    let wrong_server = ClientCurve { server: mallory.public, keys: keys.keygen("bob") };
    assert!(no_answer(d.client(Some(wrong_server)).ask(&ask())));
    let stats = alice_client.stats().unwrap();
    assert_eq!(stats.limits[0].go, 2, "only alice's two asks reached the locker");
    assert!(stats.refused_connections >= 1, "mallory's handshake is counted: {stats:?}");
}

#[test]
fn without_an_allowlist_any_client_with_the_server_key_gets_go() {
    let keys = KeyDir::new("open");
    let server = keys.keygen("server");
    let d = Logged::start(&keys, &["--max-requests", "100", "--curve-secret-key", &keys.path("server.key")]);
    d.wait_for_log(&["no CURVE client allowlist"]);
    let anyone = KeyPair::generate().unwrap();
    assert!(d.client(Some(ClientCurve { server: server.public, keys: anyone })).ask(&ask()).unwrap().ok);
    assert!(no_answer(d.client(None).ask(&ask())), "a plain client must get no answer");
    d.wait_for_log(&["CURVE handshake failed"]);
}

#[test]
fn keygen_writes_a_private_secret_and_never_overwrites_it() {
    let keys = KeyDir::new("keygen");
    let pair = keys.keygen("k");
    let public = PublicKey::load(Path::new(&keys.path("k.pub"))).unwrap();
    assert_eq!(public, pair.public, "the .pub file holds the public key of the .key file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(keys.path("k.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = run_locker(&["keygen", "--out", &keys.path("k")]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(KeyPair::load(Path::new(&keys.path("k.key"))).unwrap(), pair, "the secret key was kept");

    let printed = run_locker(&["keygen"]);
    let text = String::from_utf8(printed.stdout).unwrap();
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{text}"));
    std::fs::write(keys.path("printed.key"), field("secret: ")).unwrap();
    let derived = KeyPair::load(Path::new(&keys.path("printed.key"))).unwrap();
    assert_eq!(derived.public.to_z85(), field("public: "));
}

#[test]
fn an_allowlist_without_a_server_key_is_a_config_error() {
    let keys = KeyDir::new("config");
    keys.keygen("alice");
    keys.allow("alice");
    let out = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--curve-clients", &keys.path("clients")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("curve_clients is set but curve_secret_key is not"), "{stderr}");
    let missing = run_locker(&["serve", "--bind", "tcp://127.0.0.1:*", "--curve-secret-key", &keys.path("nothing")]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
}

#[test]
fn peered_lockers_sharing_a_key_pair_hear_each_other() {
    let keys = KeyDir::new("peered");
    let server = keys.keygen("server");
    let alice = keys.keygen("alice");
    keys.allow("alice");
    let (secret, clients) = (keys.path("server.key"), keys.path("clients"));
    let group = Peered::start(2, &["--curve-secret-key", &secret, "--curve-clients", &clients]);
    let end = Instant::now() + DEADLINE;
    for i in 0..2 {
        let curve = ClientCurve { server: server.public, keys: alice.clone() };
        let mut client = Client::new([group.endpoint(i)], DEADLINE).unwrap().with_curve(curve);
        loop {
            let s = client.stats().expect("stats over CURVE");
            if !s.joining && s.peers.iter().any(|p| p.live) {
                break;
            }
            assert!(Instant::now() < end, "locker {i} never heard its peer over CURVE: {s:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A SUB socket that subscribes to `endpoint` as a CURVE client with
/// `keys`, expecting the server key `server`.
fn curve_subscriber(ctx: &zmq::Context, endpoint: &str, server: &PublicKey, keys: &KeyPair) -> zmq::Socket {
    let sub = ctx.socket(zmq::SUB).unwrap();
    sub.set_linger(0).unwrap();
    ClientCurve { server: *server, keys: keys.clone() }.secure(&sub).unwrap();
    sub.set_subscribe(b"").unwrap();
    sub.set_rcvtimeo(SILENT.as_millis() as i32).unwrap();
    sub.connect(endpoint).unwrap();
    sub
}

#[test]
fn peers_with_their_own_keys_hear_each_other_and_an_unlisted_key_hears_nothing() {
    let keys = KeyDir::new("peer-keys");
    let (a, b, stranger) = (keys.keygen("a"), keys.keygen("b"), keys.keygen("stranger"));
    let pubs = [free_pub(), free_pub()];
    let peer = |me: usize, other: &str| {
        let listed = format!("{}={}", pubs[1 - me], keys.path(&format!("{other}.pub")));
        let secret = keys.path(&format!("{}.key", ["a", "b"][me]));
        let args = ["--peer-bind", &pubs[me], "--peer", &listed, "--curve-secret-key", &secret];
        crate::support::Daemon::start(&args)
    };
    let lockers = [peer(0, "b"), peer(1, "a")];
    let servers = [a.public, b.public];
    let end = Instant::now() + DEADLINE;
    for (i, d) in lockers.iter().enumerate() {
        let curve = ClientCurve { server: servers[i], keys: stranger.clone() };
        let mut client = Client::new([d.endpoint.as_str()], DEADLINE).unwrap().with_curve(curve);
        loop {
            let s = client.stats().expect("stats over CURVE");
            if !s.joining && s.peers.iter().any(|p| p.live) {
                break;
            }
            assert!(Instant::now() < end, "locker {i} never heard its peer with its own key: {s:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let ctx = zmq::Context::new();
    let listed = curve_subscriber(&ctx, &pubs[0], &a.public, &b);
    listed.set_rcvtimeo(DEADLINE.as_millis() as i32).unwrap();
    assert!(listed.recv_bytes(0).is_ok(), "a listed peer's key hears the heartbeats");
    let unlisted = curve_subscriber(&ctx, &pubs[0], &a.public, &stranger);
    assert!(unlisted.recv_bytes(0).is_err(), "an unlisted key heard a's counts");
    let plain = ctx.socket(zmq::SUB).unwrap();
    plain.set_subscribe(b"").unwrap();
    plain.set_rcvtimeo(SILENT.as_millis() as i32).unwrap();
    plain.connect(&pubs[0]).unwrap();
    assert!(plain.recv_bytes(0).is_err(), "a plain subscriber heard a's counts");
}

fn free_pub() -> String {
    format!("tcp://127.0.0.1:{}", crate::support::free_port())
}

/// With CURVE, only the clients listed with `--admin-key` may reset a
/// key's count: the ZAP handler names each client by its key, the loop
/// reads it from the request, and every reset asked is logged with who
/// asked (issue 38).
#[test]
fn only_admin_keys_may_reset_and_each_reset_is_logged_with_who_asked() {
    let keys = KeyDir::new("admins");
    let server = keys.keygen("server");
    let (ops, alice) = (keys.keygen("ops"), keys.keygen("alice"));
    let config = keys.path("limits.toml");
    std::fs::write(&config, "[[limits]]\nname = 'login'\nmax_requests = 2\nin_seconds = 600\nallow_reset = true\n")
        .unwrap();
    let (secret, admin) = (keys.path("server.key"), keys.path("ops.pub"));
    let d = Logged::start(&keys, &["--config", &config, "--curve-secret-key", &secret, "--admin-key", &admin]);
    let mut alice_client = d.client(Some(ClientCurve { server: server.public, keys: alice.clone() }));
    let mut ops_client = d.client(Some(ClientCurve { server: server.public, keys: ops.clone() }));
    let login = Ask::new().limit("login").key("alice");
    assert!(alice_client.ask(&login).unwrap().ok && alice_client.ask(&login).unwrap().ok);
    assert!(!alice_client.ask(&login).unwrap().ok);
    let refused = alice_client.reset(Some("login"), Some("alice")).unwrap_err().to_string();
    assert!(refused.contains("only clients whose keys are listed in admin_keys may reset"), "{refused}");
    assert!(!alice_client.ask(&login).unwrap().ok, "the refused reset cleared nothing");
    let line = d.wait_for_log(&["reset asked", &alice.public.to_z85()]);
    assert!(line.contains("allowed=false") && line.contains("login"), "{line}");
    // The same reset with its op written as MessagePack's str8, not the
    // fixstr encoders write: still a reset, still refused.
    let str8 = b"\x83\xa2op\xd9\x05reset\xa5limit\xa5login\xa3key\xa5alice";
    let reply = alice_client.round_trip(str8).unwrap();
    assert!(String::from_utf8_lossy(&reply).contains("only clients whose keys"), "{:?}", &reply[..]);
    assert!(!alice_client.ask(&login).unwrap().ok, "the refused str8 reset cleared nothing");
    let done = ops_client.reset(Some("login"), Some("alice")).unwrap();
    assert_eq!((done.ok, done.remaining), (true, 2));
    let line = d.wait_for_log(&["reset asked", &ops.public.to_z85()]);
    assert!(line.contains("allowed=true"), "{line}");
    assert!(alice_client.ask(&login).unwrap().ok, "the admin's reset gave alice's key its count back");
}
