//! The command line: `locker serve`, `ask`, `lease`, `stats`, `bench` and `keygen`.
//!
//! Parsing yields plain data, which is turned into a checked config or a
//! client before anything runs; each command returns its exit code. This is
//! the only module that prints for a person or maps failures to exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tracing::warn;

use crate::bench::{self, BenchConfig, Form};
use crate::config::{self, parse_duration, FileConfig, ServeConfig, Settings};
use crate::daemon::metrics::{Feed, Mailbox, MetricsServer};
use crate::daemon::reload::Reload;
use crate::daemon::signals::Control;
use crate::daemon::Server;
use crate::wire::{Ask, GoReply, Parents, StatsReply, Terms};

mod check_config;
mod curve;
mod failure;
mod health;
mod keygen;
mod lease;
mod logging;
mod together;

/// Exit code for go (and for any command that succeeded).
pub(crate) const EXIT_GO: u8 = 0;
/// Exit code for sorry.
pub(crate) const EXIT_SORRY: u8 = 1;
/// Exit code for an error, a refused request, or no answer in time.
const EXIT_ERROR: u8 = 2;

/// A rate-limit daemon reached over ZeroMQ: ask "may I go?", get go or sorry.
#[derive(Debug, Parser)]
#[command(name = "locker", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the locker: answer go or sorry on a REP socket until SIGINT or SIGTERM.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<ServeArgs>),
    /// Ask a locker once; exit 0 on go, 1 on sorry, 2 on an error or no answer.
    #[command(after_help = ASK_EXAMPLES)]
    Ask(AskArgs),
    /// Give back permits a key took and that still count; exit 0 when answered, 2 on an error.
    Refund(together::RefundArgs),
    /// Charge permits a key used, taken past the limit if need be (a debt later asks wait out); exit 0 when answered, 2 on an error.
    Charge(together::ChargeArgs),
    /// Clear one key's count of a limit that allows it (allow_reset); exit 0 when cleared, 2 when refused.
    Reset(together::KeyArgs),
    /// Acquire, heartbeat or release a lease on a semaphore limit.
    #[command(subcommand)]
    Lease(lease::LeaseCommand),
    /// Print a locker's counters per limit.
    Stats(StatsArgs),
    /// Load a running locker and print requests/s, go/sorry counts and latency percentiles.
    Bench(BenchArgs),
    /// Generate a CURVE key pair for a locker or a client (see docs/security.md).
    Keygen(keygen::KeygenArgs),
    /// Check a config file as `serve` and a reload would; exit 0 when valid, 2 with the error.
    CheckConfig(check_config::CheckConfigArgs),
    /// Ask a locker's metrics listener whether it is serving; exit 0 when it is, 1 when not.
    Health(health::HealthArgs),
}

const SERVE_EXAMPLES: &str = "\
Once bound, prints one line on stdout: `listening on <endpoint>`, with the real port.
Logs go to stderr; set the level with LOCKER_LOG (e.g. LOCKER_LOG=debug), LOCKER_LOG_FORMAT=json for JSON.
SIGHUP reads the --config file again, keeping the counts of unchanged limits; a changed `peers` list applies too.

Examples:
  locker serve --max-requests 5 --in-seconds 0.8     5 go per 0.8 s slot on tcp://127.0.0.1:7777
  locker serve --bind tcp://10.0.0.5:7777             another interface (use CURVE there: docs/security.md)
  locker serve --bind 'tcp://127.0.0.1:*'            any free port on loopback
  locker serve --config examples/limits.toml         named limits from a file (the examples' own)
  locker serve --metrics-bind 0.0.0.0:9090           Prometheus at /metrics, a health check at /health
  locker serve --store redis://127.0.0.1:6379         counts in Redis: run as many lockers as you need";

const ASK_EXAMPLES: &str = "\
Examples:
  locker ask && curl https://api.example/...          go on, or stop on sorry
  locker ask --limit api --key user-7 --json          the whole reply as JSON
  locker ask --limit user --key u7 --parent team=t3 --parent org=acme   a limit under parents: every level, or none
  locker ask --limit new-api --key user-7 --shadow    a dry run: go either way, \"go (shadow sorry)\" when it would refuse
  locker ask --connect tcp://a:7777 --connect tcp://b:7777 --timeout 250ms";

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    settings: Settings,
    /// TOML file with named limits ([[limits]] name, max_requests, in_seconds, algorithm, burst, margin_ms, hold_ms)
    /// and settings.
    // Listed in --help after --max-parked, where it has always been.
    #[arg(long, value_name = "FILE", display_order = 7)]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    /// Locker endpoint; repeat for failover between lockers.
    #[arg(long = "connect", value_name = "ENDPOINT", default_value = "tcp://127.0.0.1:7777")]
    pub(crate) connect: Vec<String>,
    /// Give up when no locker answered within this long (e.g. 1s, 250ms, 0.5).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// Print the whole reply as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) curve: curve::CurveArgs,
}

#[derive(Debug, Args)]
struct AskArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Limit to ask; the locker's default limit when absent. Repeat to ask several limits together: every one
    /// goes, or none is charged.
    #[arg(long, value_name = "NAME")]
    limit: Vec<String>,
    /// Key within the limit; each key has its own count.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Permits to take at once; 0 peeks without taking.
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true)]
    cost: u64,
    /// Take as many of --cost as are available (at least one) and print how many.
    #[arg(long)]
    up_to: bool,
    /// Accept a reservation within this long (e.g. 500ms) and sleep until it may go.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    wait: Option<Duration>,
    /// Ask the locker to hold the reply up to this long (e.g. 800ms) for a go rather than answer sorry
    /// (--timeout is then the wait beyond the hold).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    hold: Option<Duration>,
    /// The limit's terms, sent with the ask: a locker run with --runtime-limits creates the limit on first use
    /// (e.g. fixed-window,5,0.8 or token-bucket,10,1,20).
    #[arg(long, value_name = "ALGORITHM,MAX_REQUESTS,IN_SECONDS[,BURST]", value_parser = parse_terms)]
    terms: Option<OwnedTerms>,
    /// The key of a limit above --limit (its config's parent, or that one's), e.g. --parent team=t3; repeat for
    /// each: the ask takes its cost from every one of them too, or from none.
    #[arg(long = "parent", value_name = "LIMIT=KEY", value_parser = parse_parent)]
    parents: Vec<(String, String)>,
    /// Ask in shadow: decided and counted as usual, but a would-be sorry is answered go (printed "go (shadow
    /// sorry)", exit 0) and charges nothing; never held or reserved.
    #[arg(long)]
    shadow: bool,
}

/// Parses `LIMIT=KEY`, the key of one limit above the one asked.
pub(crate) fn parse_parent(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((limit, key)) if !limit.is_empty() => Ok((limit.to_owned(), key.to_owned())),
        _ => Err("expected LIMIT=KEY, e.g. team=t3".to_owned()),
    }
}

/// `--parent` pairs as the wire lists them.
pub(crate) fn parent_pairs(given: &[(String, String)]) -> Vec<(&str, &str)> {
    given.iter().map(|(limit, key)| (limit.as_str(), key.as_str())).collect()
}

/// `--terms` as given: the fields of `wire::Terms`, owned.
#[derive(Debug, Clone)]
struct OwnedTerms {
    algorithm: String,
    max_requests: u64,
    in_seconds: f64,
    burst: Option<u64>,
}

/// Parses `ALGORITHM,MAX_REQUESTS,IN_SECONDS[,BURST]`; the locker checks
/// the values as it checks a `[[limits]]` table.
fn parse_terms(s: &str) -> Result<OwnedTerms, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let number =
        |i: usize, what: &str| parts[i].parse().map_err(|_| format!("{what} {:?} is not a whole number", parts[i]));
    if !(3..=4).contains(&parts.len()) {
        return Err("expected ALGORITHM,MAX_REQUESTS,IN_SECONDS[,BURST], e.g. fixed-window,5,0.8".to_owned());
    }
    Ok(OwnedTerms {
        algorithm: parts[0].to_owned(),
        max_requests: number(1, "max_requests")?,
        in_seconds: parts[2].parse().map_err(|_| format!("in_seconds {:?} is not a number", parts[2]))?,
        burst: if parts.len() == 4 { Some(number(3, "burst")?) } else { None },
    })
}

#[derive(Debug, Args)]
struct StatsArgs {
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// The locker (or echo server) to load.
    #[arg(long, value_name = "ENDPOINT", default_value = "tcp://127.0.0.1:7777")]
    connect: String,
    /// Client threads, each with its own socket.
    #[arg(long, value_name = "N", default_value_t = 4)]
    clients: usize,
    /// Requests in flight per client: 1 is a plain REQ socket, more a DEALER.
    #[arg(long, value_name = "W", default_value_t = 1)]
    pipeline: usize,
    /// How long the timed phase lasts (e.g. 5s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
    /// Untimed load before the timed phase.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// Send the seed's plain form instead of the structured one.
    #[arg(long)]
    plain: bool,
    /// Limit to ask (the plain form sends its name as the body); the default limit when absent.
    #[arg(long, value_name = "NAME")]
    limit: Option<String>,
    /// Spread structured requests over K distinct keys (0: no key).
    #[arg(long, value_name = "K", default_value_t = 0)]
    keys: usize,
    /// Send every key once before the warm-up, so the locker holds them all live while timed.
    #[arg(long)]
    prefill: bool,
    /// Send N asks per message, as one batch (structured form; at most 1000).
    #[arg(long, value_name = "N")]
    batch: Option<usize>,
    /// Fail when no reply comes within this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    curve: curve::CurveArgs,
}

/// Parses the command line, runs the command, and returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init();
    let code = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Ask(args) => ask(args),
        Command::Refund(args) => together::refund(args),
        Command::Charge(args) => together::charge(args),
        Command::Reset(args) => together::reset(args),
        Command::Lease(command) => lease::run(command),
        Command::Stats(args) => stats(args),
        Command::Bench(args) => run_bench(args),
        Command::Keygen(args) => keygen::run(args),
        Command::CheckConfig(args) => check_config::run(args),
        Command::Health(args) => health::run(args),
    };
    ExitCode::from(code)
}

pub(crate) fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("locker: {message}");
    EXIT_ERROR
}

fn serve(args: ServeArgs) -> u8 {
    let file = match args.config.as_deref().map(FileConfig::load).transpose() {
        Ok(file) => file.unwrap_or_default(),
        Err(e) => return fail(e),
    };
    let flags = args.settings;
    let ignored = config::ignored_settings(&flags, &file);
    let config = match ServeConfig::resolve(flags.clone(), file) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    for config::Ignored { setting, needs } in ignored {
        warn!(setting, "{setting} is set without {needs}; it takes no effect");
    }
    let control = match Control::from_signals() {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot handle signals: {e}")),
    };
    if let Some(store) = &config.store {
        warn_if_unreachable(store);
    }
    if let Err(e) = make_state_folder(&config) {
        return fail(e);
    }
    crate::daemon::fds::raise_open_files();
    let mut server = match Server::bind(&config) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if config.curve.is_none() && !is_local(server.endpoint()) {
        warn!(
            endpoint = server.endpoint(),
            "serving beyond this host without CURVE: anyone who reaches the port can ask and read stats (see docs/security.md)"
        );
    }
    if let Some(addr) = &config.metrics_bind {
        match serve_metrics(addr) {
            Ok(feed) => server = server.with_metrics(feed),
            Err(e) => return fail(format!("metrics on {addr}: {e}")),
        }
    }
    if let Some(path) = args.config {
        server = server.with_reload(Reload::new(path, flags, config));
    }
    // Exactly one line on stdout, once bound, so scripts and tests can read
    // the real port without waiting blindly.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on {}", server.endpoint()).and_then(|_| stdout.flush());
    drop(stdout);
    match server.run_with(&control) {
        Ok(()) => EXIT_GO,
        Err(e) => fail(e),
    }
}

/// Warns at start when no node of the store takes a TCP connection: the
/// locker serves anyway (each limit then follows its store_failure), but a
/// mistyped address should not wait for the first ask to show.
fn warn_if_unreachable(store: &config::StoreConfig) {
    use std::net::{TcpStream, ToSocketAddrs};
    let nodes = match &store.spec {
        config::StoreSpec::Single(url) => vec![url.clone()],
        config::StoreSpec::Cluster(nodes) => nodes.clone(),
    };
    let hostport = |url: &str| url.trim_start_matches("redis://").split('/').next().unwrap_or_default().to_owned();
    let mut why = String::new();
    for node in nodes.iter().map(|n| hostport(n)) {
        let addrs = node.to_socket_addrs().map(|a| a.collect::<Vec<_>>()).unwrap_or_default();
        match addrs.first().map(|a| TcpStream::connect_timeout(a, store.timeout.max(Duration::from_millis(200)))) {
            Some(Ok(_)) => return,
            Some(Err(e)) => why = format!("{node}: {e}"),
            None => why = format!("{node}: resolves to no address"),
        }
    }
    warn!(%why, "the store cannot be reached now; each limit follows its store_failure until it can (docs/store.md)");
}

/// Creates the state file's folder when it is missing, as systemd's
/// `StateDirectory=` would, readable by this user only; an error names the
/// folder, not the file the locker would write in it.
fn make_state_folder(config: &ServeConfig) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(state) = &config.state else { return Ok(()) };
    let Some(folder) = state.path.parent().filter(|f| !f.as_os_str().is_empty() && !f.exists()) else { return Ok(()) };
    let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder);
    made.map_err(|e| format!("cannot create {}, the folder of the state file: {e}", folder.display()))?;
    tracing::info!(folder = %folder.display(), "created the state file's folder");
    Ok(())
}

/// Whether a bound endpoint is reachable only from this host: loopback TCP,
/// or a transport that never leaves it (ipc, inproc).
fn is_local(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("tcp://") else { return true };
    let host = rest.rsplit_once(':').map_or(rest, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Binds the metrics listener and starts its thread; returns the loop's end.
fn serve_metrics(addr: &str) -> std::io::Result<Feed> {
    let listener = MetricsServer::bind(addr)?;
    tracing::info!(address = %listener.local_addr(), "metrics and health over http");
    let mailbox = Mailbox::default();
    listener.spawn(mailbox.clone(), std::time::Instant::now())?;
    Ok(Feed::new(mailbox))
}

fn ask(mut args: AskArgs) -> u8 {
    // A held reply comes up to --hold late: each locker's share of the
    // deadline covers it, or the client would give up on a go the locker
    // then grants to nobody.
    let endpoints = args.connect.connect.len().max(1) as u32;
    args.connect.timeout = args.connect.timeout.saturating_add(args.hold.unwrap_or_default().saturating_mul(endpoints));
    let mut client = match args.connect.client() {
        Ok(c) => c,
        Err(e) => return failure::request_failed(&e, args.connect.json),
    };
    if args.limit.len() > 1 && !args.parents.is_empty() {
        return fail("--parent goes with one --limit: name the limits above it, and ask the others apart");
    }
    let pairs = parent_pairs(&args.parents);
    let ask = Ask {
        limit: args.limit.first().map(String::as_str),
        key: args.key.as_deref(),
        cost: args.cost,
        up_to: args.up_to,
        max_wait_ms: args.wait.map(|w| w.as_millis().min(u128::from(u64::MAX)) as u64),
        hold_ms: args.hold.map(|h| h.as_millis().min(u128::from(u64::MAX)) as u64),
        terms: args.terms.as_ref().map(|t| Terms {
            algorithm: &t.algorithm,
            max_requests: t.max_requests,
            in_seconds: t.in_seconds,
            burst: t.burst,
        }),
        parents: (!pairs.is_empty()).then(|| Parents::new(&pairs)),
        shadow: args.shadow,
    };
    if args.limit.len() > 1 {
        let asks: Vec<Ask> = args.limit.iter().map(|l| Ask { limit: Some(l), ..ask }).collect();
        return together::ask_all(&mut client, &asks, args.connect.json);
    }
    // `acquire` sleeps through a reservation, so "go" is printed when the caller may go.
    match client.acquire(&ask) {
        Ok(reply) => {
            print_go(&reply, args.connect.json);
            exit_for(reply.ok)
        }
        Err(e) => failure::request_failed(&e, args.connect.json),
    }
}

/// The exit code for a held permit or lease (0) or a refusal (1).
pub(crate) fn exit_for(ok: bool) -> u8 {
    if ok {
        EXIT_GO
    } else {
        EXIT_SORRY
    }
}

fn print_go(reply: &GoReply, json: bool) {
    if json {
        println!("{}", serde_json::to_string(reply).expect("a reply is plain data"));
    } else if !reply.ok {
        println!("sorry");
    } else if reply.shadow_sorry {
        println!("go (shadow sorry)");
    } else if let Some(n) = reply.granted {
        println!("go {n}");
    } else {
        println!("go");
    }
}

fn stats(args: StatsArgs) -> u8 {
    let result = args.connect.client().and_then(|mut c| c.stats());
    match result {
        Ok(s) if args.connect.json => {
            println!("{}", serde_json::to_string(&s).expect("stats are plain data"));
            EXIT_GO
        }
        Ok(s) => {
            print_stats(&s);
            EXIT_GO
        }
        Err(e) => failure::request_failed(&e, args.connect.json),
    }
}

fn print_stats(s: &StatsReply) {
    println!(
        "{:<20} {:<13} {:>8} {:>10} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10} {:>12}",
        "limit", "kind", "max", "in_seconds", "requests", "go", "sorry", "errors", "waited", "peeks", "shadow_sorry"
    );
    for l in &s.limits {
        println!(
            "{:<20} {:<13} {:>8} {:>10} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10} {:>12}",
            l.name,
            l.algorithm,
            l.max_requests,
            l.in_seconds,
            l.requests,
            l.go,
            l.sorry,
            l.errors,
            l.waited,
            l.peeks,
            l.shadow_sorry
        );
    }
    println!("live keys: {}   unattributed errors: {}", s.live_keys, s.errors);
    if s.parked + s.held + s.undelivered > 0 {
        println!(
            "held: {} now, {} since start ({} go)   undelivered: {} ({} go)",
            s.parked, s.held, s.held_go, s.undelivered, s.undelivered_go
        );
    }
    if let Some(store) = &s.store {
        let state = store.down.as_deref().map_or("up".to_owned(), |why| format!("DOWN ({why})"));
        println!(
            "store: {state}   claims: {} ({} permits), {} failed, {} on their way",
            store.claims, store.claimed, store.failed, store.in_flight
        );
    }
    if let Some(node) = &s.node {
        println!("node: {node}{}", if s.joining { "   (joining: learning counts from peers)" } else { "" });
        println!("{:<24} {:>14} {:>16} {:>6} {:>8}", "peer", "last_heard_ms", "clock_offset_ms", "live", "flagged");
        for p in &s.peers {
            let flag = if p.flagged { "SKEW" } else { "-" };
            println!("{:<24} {:>14} {:>16.3} {:>6} {:>8}", p.node, p.last_heard_ms, p.clock_offset_ms, p.live, flag);
            if p.rejected > 0 || !p.mismatched_limits.is_empty() {
                let limits = p.mismatched_limits.join(", ");
                println!("  {}: {} refused, limits defined differently: [{limits}]", p.endpoint, p.rejected);
            }
        }
    }
}

fn run_bench(args: BenchArgs) -> u8 {
    let curve = match args.curve.load() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let config = BenchConfig {
        endpoint: args.connect,
        clients: args.clients,
        pipeline: args.pipeline,
        duration: args.duration,
        warmup: args.warmup,
        form: if args.plain { Form::Plain } else { Form::Structured },
        limit: args.limit,
        keys: args.keys,
        prefill: args.prefill,
        batch: args.batch,
        timeout: args.timeout,
        curve,
    };
    match bench::run(&config) {
        Ok(report) if args.json => {
            println!("{}", serde_json::to_string(&report).expect("a report is plain data"));
            EXIT_GO
        }
        Ok(report) => {
            println!("{report}");
            EXIT_GO
        }
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::is_local;

    #[test]
    fn only_loopback_and_host_only_transports_are_local() {
        for local in [
            "tcp://127.0.0.1:7777",
            "tcp://127.1.2.3:1",
            "tcp://[::1]:7777",
            "tcp://localhost:1",
            "ipc:///tmp/l",
            "inproc://x",
        ] {
            assert!(is_local(local), "{local}");
        }
        for open in ["tcp://0.0.0.0:7777", "tcp://10.0.0.5:7777", "tcp://[::]:7777", "tcp://192.168.1.2:1"] {
            assert!(!is_local(open), "{open}");
        }
    }
}
