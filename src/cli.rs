//! The command line: `locker serve`, `locker ask`, `locker stats` and `locker bench`.
//!
//! Parsing yields plain data, which is turned into a checked config or a
//! client before anything runs; each command returns its exit code. This is
//! the only module that prints for a person or maps failures to exit codes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::bench::{self, BenchConfig, Form};
use crate::client::Client;
use crate::config::{FileConfig, Flags, ServeConfig};
use crate::daemon::Server;
use crate::wire::{Ask, StatsReply};

/// Exit code for go (and for any command that succeeded).
const EXIT_GO: u8 = 0;
/// Exit code for sorry.
const EXIT_SORRY: u8 = 1;
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
    Serve(ServeArgs),
    /// Ask a locker once; exit 0 on go, 1 on sorry, 2 on an error or no answer.
    Ask(AskArgs),
    /// Print a locker's counters per limit.
    Stats(StatsArgs),
    /// Load a running locker and print requests/s, go/sorry counts and latency percentiles.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// ZeroMQ endpoint to bind the REP socket to; `tcp://127.0.0.1:*` picks a free port.
    #[arg(long, value_name = "ENDPOINT", help = "ZeroMQ endpoint to bind [default: tcp://*:7777]")]
    bind: Option<String>,
    /// Requests that may go per slot in the default limit [default: 1].
    #[arg(long, value_name = "N")]
    max_requests: Option<u32>,
    /// Slot length of the default limit in seconds, from 0.001 [default: 1.0].
    #[arg(long, value_name = "S")]
    in_seconds: Option<f64>,
    /// TOML file with named limits ([[limits]] name, max_requests, in_seconds) and settings.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Most live keys held across all limits; asks for new keys beyond it get an error [default: 1000000].
    #[arg(long, value_name = "N")]
    max_keys: Option<usize>,
    /// Largest request accepted, in bytes; ZeroMQ disconnects a sender of a larger one [default: 65536].
    #[arg(long, value_name = "BYTES")]
    max_message_size: Option<usize>,
}

#[derive(Debug, Args)]
struct ConnectArgs {
    /// Locker endpoint; repeat for failover between lockers.
    #[arg(long = "connect", value_name = "ENDPOINT", default_value = "tcp://localhost:7777")]
    connect: Vec<String>,
    /// Give up when no locker answered within this long (e.g. 1s, 250ms, 0.5).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    timeout: Duration,
    /// Print the whole reply as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct AskArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Limit to ask; the locker's default limit when absent.
    #[arg(long, value_name = "NAME")]
    limit: Option<String>,
    /// Key within the limit; each key has its own count.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Permits to take at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    cost: u64,
}

#[derive(Debug, Args)]
struct StatsArgs {
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// The locker (or echo server) to load.
    #[arg(long, value_name = "ENDPOINT", default_value = "tcp://localhost:7777")]
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
    /// Fail when no reply comes within this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses a duration as humantime ("250ms", "1s") or as plain seconds ("0.5").
fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))
}

/// Parses the command line, runs the command, and returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let code = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Ask(args) => ask(args),
        Command::Stats(args) => stats(args),
        Command::Bench(args) => run_bench(args),
    };
    ExitCode::from(code)
}

/// Logs go to stderr; `LOCKER_LOG` sets the level (e.g. `LOCKER_LOG=debug`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOCKER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("locker: {message}");
    EXIT_ERROR
}

fn serve(args: ServeArgs) -> u8 {
    let file = match args.config.as_deref().map(FileConfig::load).transpose() {
        Ok(file) => file.unwrap_or_default(),
        Err(e) => return fail(e),
    };
    let flags = Flags {
        bind: args.bind,
        max_requests: args.max_requests,
        in_seconds: args.in_seconds,
        max_keys: args.max_keys,
        max_message_size: args.max_message_size,
    };
    let config = match ServeConfig::resolve(flags, file) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed)) {
        return fail(format!("cannot handle signals: {e}"));
    }
    let server = match Server::bind(&config) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    // Exactly one line on stdout, once bound, so scripts and tests can read
    // the real port without waiting blindly.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on {}", server.endpoint()).and_then(|_| stdout.flush());
    drop(stdout);
    match server.run(&stop) {
        Ok(()) => EXIT_GO,
        Err(e) => fail(e),
    }
}

fn ask(args: AskArgs) -> u8 {
    let mut client = match Client::new(args.connect.connect, args.connect.timeout) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let ask = Ask { limit: args.limit.as_deref(), key: args.key.as_deref(), cost: args.cost };
    match client.ask(&ask) {
        Ok(reply) => {
            if args.connect.json {
                println!("{}", serde_json::to_string(&reply).expect("a reply is plain data"));
            } else {
                println!("{}", if reply.ok { "go" } else { "sorry" });
            }
            if reply.ok {
                EXIT_GO
            } else {
                EXIT_SORRY
            }
        }
        Err(e) => fail(e),
    }
}

fn stats(args: StatsArgs) -> u8 {
    let result = Client::new(args.connect.connect, args.connect.timeout).and_then(|mut c| c.stats());
    match result {
        Ok(s) if args.connect.json => {
            println!("{}", serde_json::to_string(&s).expect("stats are plain data"));
            EXIT_GO
        }
        Ok(s) => {
            print_stats(&s);
            EXIT_GO
        }
        Err(e) => fail(e),
    }
}

fn print_stats(s: &StatsReply) {
    println!(
        "{:<20} {:>8} {:>10} {:>12} {:>12} {:>12} {:>8}",
        "limit", "max", "in_seconds", "requests", "go", "sorry", "errors"
    );
    for l in &s.limits {
        println!(
            "{:<20} {:>8} {:>10} {:>12} {:>12} {:>12} {:>8}",
            l.name, l.max_requests, l.in_seconds, l.requests, l.go, l.sorry, l.errors
        );
    }
    println!("live keys: {}   unattributed errors: {}", s.live_keys, s.errors);
}

fn run_bench(args: BenchArgs) -> u8 {
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
        timeout: args.timeout,
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
