//! The settings of `locker serve`, listed once: the command line fills one
//! `Settings` (clap flattens it into `serve`), the TOML file another (serde
//! reads it), and `Settings::or` lays the first over the second, field by
//! field, so a flag wins over the file. Every field is `None` where it was
//! not given; defaults and checks are `ServeConfig::resolve`'s.
//!
//! This module only declares and merges: it reads no file (see
//! `Settings::load`) and checks nothing.

use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

use super::{AlgorithmName, FileLimit, Places, StoreFailure};

/// The settings of `locker serve`, from the command line or from a file.
///
/// The default limit's own settings (`max_requests` … `hold_ms`) are flags
/// only: in a file the default limit is a `[[limits]]` table named
/// `default`. `limits` are the file's only. The serde field order is the
/// file's as it has always been listed in errors ("expected one of …");
/// `display_order` keeps `--help` in its own order where the two differ.
#[derive(Debug, Default, Clone, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// ZeroMQ endpoint to bind the REP socket to; `tcp://127.0.0.1:*` picks a free port.
    #[arg(
        long,
        value_name = "ENDPOINT",
        help = "ZeroMQ endpoint to bind [default: tcp://127.0.0.1:7777, loopback only]"
    )]
    pub bind: Option<String>,
    /// Requests that may go per slot in the default limit [default: 1].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    #[serde(skip)]
    pub max_requests: Option<u32>,
    /// Slot length of the default limit in seconds, from 0.001 [default: 1.0].
    #[arg(long, value_name = "S", allow_negative_numbers = true, value_parser = parse_slot_seconds)]
    #[serde(skip)]
    pub in_seconds: Option<f64>,
    /// Kind of the default limit: fixed-window, token-bucket, semaphore or rolling-window [default: fixed-window].
    #[arg(long, value_name = "KIND")]
    #[serde(skip)]
    pub algorithm: Option<AlgorithmName>,
    /// Capacity of the default limit when it is a token bucket [default: max-requests].
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    #[serde(skip)]
    pub burst: Option<u32>,
    /// Margin of the default limit when it is a rolling window: it counts max-requests in any in-seconds plus this
    /// many milliseconds, so a resource enforcing max-requests per in-seconds itself never refuses a go whose way
    /// to it varies by less [default: 0].
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    #[serde(skip)]
    pub margin_ms: Option<f64>,
    /// Hold an ask of the default limit that would get sorry for up to this many milliseconds, answering go as soon as
    /// the limit allows within it (sorry at once when it cannot) [default: 0]
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    #[serde(skip)]
    pub hold_ms: Option<f64>,
    /// Most live keys held across all limits; asks for new keys beyond it get an error [default: 1000000].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_keys: Option<usize>,
    /// Most asks held at once, over all limits; past it an ask that would be held gets sorry at once [default: 10000].
    #[arg(long, value_name = "N", display_order = 6)]
    pub max_parked: Option<usize>,
    /// Largest request accepted, in bytes; ZeroMQ disconnects a sender of a larger one [default: 65536].
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub max_message_size: Option<usize>,
    /// ZeroMQ endpoint for the PUB socket that peers subscribe to; turns peering on.
    #[arg(long, value_name = "ENDPOINT")]
    pub peer_bind: Option<String>,
    /// A peer's --peer-bind endpoint to subscribe to; repeat for each peer. `ID@ENDPOINT` names the
    /// peer's node id, so that every member's place is known before all are heard (a restart while a
    /// member is down owns its part of the slot's remainder); messages under another id are refused.
    /// With CURVE, `ENDPOINT=KEY` names the peer's public key (its .pub file or Z85); only listed
    /// peers' keys may subscribe. The file's `peers` reload on SIGHUP unless given here
    /// (docs/peering.md, adding or removing a member).
    #[arg(long = "peer", value_name = "[ID@]ENDPOINT[=KEY]")]
    pub peers: Option<Vec<String>>,
    /// This locker's name among its peers; it must stay the same across restarts (a pod name does)
    /// [default: the id --state kept, else <hostname>-<port of --peer-bind>].
    #[arg(long, value_name = "ID")]
    pub node_id: Option<String>,
    /// Seconds a starting locker waits for its peers' counts before serving with what it has [default: 1.0].
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub peer_grace: Option<f64>,
    /// File that keeps counts, reservations and leases across restarts (and kill -9). Peered, a new
    /// file also tells a first run: without one a group started (or restarted) all at once serves
    /// nothing of its first slot (window, period), since no run can tell it is the first.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Sync the state file to the disk this often (e.g. 1s, 100ms), bounding what a power loss can cost [default: never].
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    pub state_fsync: Option<f64>,
    /// Replace a state file written for other limits or by another version instead of refusing to start.
    // A flag without a value, yet `None` when absent, so that the file's
    // word stands unless the flag is given.
    #[arg(long, num_args = 0, default_missing_value = "true")]
    pub state_discard: Option<bool>,
    /// Secret key file (from `locker keygen`): encrypt with CURVE; clients need the public key.
    #[arg(long, value_name = "FILE")]
    pub curve_secret_key: Option<PathBuf>,
    /// Client public keys allowed in: a file with one Z85 key per line, or a directory of *.pub files.
    #[arg(long, value_name = "DIR|FILE")]
    pub curve_clients: Option<PathBuf>,
    /// A client public key (its .pub file or Z85) that may reset a key's count with CURVE on; repeat for each
    /// admin. With CURVE and no admin key, no client may reset (docs/wire.md).
    #[arg(long = "admin-key", value_name = "KEY")]
    pub admin_keys: Option<Vec<String>>,
    /// Serve GET /metrics (Prometheus) and GET /health over plain HTTP on HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_bind: Option<String>,
    /// File of at least 32 secret bytes, the same on every peer: only lease ids minted under it can be restored.
    #[arg(long, value_name = "FILE")]
    pub lease_secret: Option<PathBuf>,
    /// Keep the counts in Redis instead of this locker, so that any number of lockers serve every limit exactly:
    /// redis://HOST:PORT (one server) or redis-cluster://HOST:PORT,HOST:PORT (a cluster, by some of its nodes).
    /// Semaphore leases live there too, shared by every locker. Not with --peer-bind or --state (docs/store.md).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Most milliseconds one call to the store may take before its asks count as the store failing [default: 200].
    #[arg(long, value_name = "MS")]
    pub store_timeout_ms: Option<u64>,
    /// Replicas that must acknowledge each claim (WAIT) before it is granted from, so that a failover loses no
    /// granted permit; a claim fewer acknowledge in time follows --store-failure [default: 0] (docs/store.md).
    #[arg(long, value_name = "N")]
    pub store_replicas: Option<u32>,
    /// While the store cannot be reached: closed answers sorry; open decides by this locker's own counts, each
    /// locker then granting up to the whole limit. A limit's store_failure in the file wins [default: closed].
    #[arg(long, value_name = "POLICY")]
    pub store_failure: Option<StoreFailure>,
    /// Most limits asks may create from the terms they carry (docs/wire.md); 0 refuses every ask with terms for a
    /// limit not in the config [default: 0].
    #[arg(long, value_name = "N", display_order = 7)]
    pub runtime_limits: Option<usize>,
    /// Serve Envoy's rate-limit service (gRPC) on HOST:PORT, with the limits of --rls-config (docs/envoy.md).
    #[arg(long, value_name = "HOST:PORT")]
    pub rls_bind: Option<String>,
    /// envoyproxy/ratelimit's YAML config, unchanged: a file, or a folder of .yaml files.
    #[arg(long, value_name = "PATH")]
    pub rls_config: Option<PathBuf>,
    /// Response headers the rate-limit service's replies ask Envoy to add: draft-03 (X-RateLimit-*, as Envoy's own
    /// filter writes them) or ietf (RateLimit-Policy and RateLimit) [default: none].
    #[arg(long, value_name = "STYLE")]
    pub rls_headers: Option<crate::rls::HeaderStyle>,
    /// Serve the rate-limit service over TLS with this PEM certificate chain (and --rls-tls-key) [default: plain h2c].
    #[arg(long, value_name = "FILE")]
    pub rls_tls_cert: Option<PathBuf>,
    /// The PEM private key of --rls-tls-cert.
    #[arg(long, value_name = "FILE")]
    pub rls_tls_key: Option<PathBuf>,
    /// Ask rate-limit clients for a certificate and accept only those issued by this PEM CA (with --rls-tls-cert).
    #[arg(long, value_name = "FILE")]
    pub rls_tls_client_ca: Option<PathBuf>,
    /// The named limits, `[[limits]]` tables of the file.
    #[arg(skip)]
    #[serde(default)]
    pub limits: Vec<FileLimit>,
    /// The file these were read from, for error messages.
    #[arg(skip)]
    #[serde(skip)]
    pub path: Option<String>,
    /// Where in that file each setting is written, for error messages.
    #[arg(skip)]
    #[serde(skip)]
    pub places: Places,
}

/// The settings the command line gives.
pub type Flags = Settings;
/// The settings a TOML file gives.
pub type FileConfig = Settings;

impl Settings {
    /// These settings, with `other`'s wherever these have none: the
    /// command line's over the file's, as `locker serve` merges them.
    pub fn or(self, other: Settings) -> Settings {
        // A setting a flag gives is no longer where the file wrote it.
        let mut places = other.places;
        macro_rules! merged {
            ($($field:ident),*) => {
                Settings {
                    $($field: {
                        if self.$field.is_some() {
                            places.forget(stringify!($field));
                        }
                        self.$field.or(other.$field)
                    },)*
                    limits: if self.limits.is_empty() { other.limits } else { self.limits },
                    path: self.path.or(other.path),
                    places,
                }
            };
        }
        merged!(
            bind,
            max_requests,
            in_seconds,
            algorithm,
            burst,
            margin_ms,
            hold_ms,
            max_keys,
            max_parked,
            max_message_size,
            peer_bind,
            peers,
            node_id,
            peer_grace,
            state,
            state_fsync,
            state_discard,
            curve_secret_key,
            curve_clients,
            admin_keys,
            metrics_bind,
            lease_secret,
            store,
            store_timeout_ms,
            store_replicas,
            store_failure,
            runtime_limits,
            rls_bind,
            rls_config,
            rls_headers,
            rls_tls_cert,
            rls_tls_key,
            rls_tls_client_ca
        )
    }
}

/// A count of permits: a whole number from 1 to 4294967295.
fn parse_count(s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| "must be a whole number from 1 to 4294967295".to_owned())
}

/// A slot length in seconds, from `MIN_SLOT_SECONDS` to
/// `MAX_SLOT_SECONDS`: refused with the flag's name, not the limit's.
fn parse_slot_seconds(s: &str) -> Result<f64, String> {
    use crate::core::limit::{MAX_SLOT_SECONDS, MIN_SLOT_SECONDS};
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| (MIN_SLOT_SECONDS..=MAX_SLOT_SECONDS).contains(v))
        .ok_or_else(|| format!("must be a number of seconds from {MIN_SLOT_SECONDS} to {MAX_SLOT_SECONDS}"))
}

/// A duration given as humantime ("250ms", "1s") or plain seconds, in
/// seconds, the unit the file writes it in.
fn parse_seconds(s: &str) -> Result<f64, String> {
    parse_duration(s).map(|d| d.as_secs_f64())
}

/// Parses a duration as humantime ("250ms", "1s") or as plain seconds
/// ("0.5"). Settings own it, and the command line's other commands borrow
/// it, so that the command line stays above the settings it fills.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        return std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e}"))
}
