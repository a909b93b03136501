//! Settings for `locker serve`: the TOML file, merged with the command-line
//! flags and checked once, so that the daemon only ever sees a valid config.
//!
//! Precedence: a flag given on the command line wins over the file
//! (`Settings::or`, over one list of the settings both give), and the file
//! wins over the built-in defaults. This module reads the file it is
//! given and the CURVE key files it names, and resolves an interface or a
//! host name in a bind endpoint to an IP address (the bundled ZeroMQ binds
//! only an IP address or `*`); nothing else: it does not bind sockets or
//! start anything.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::core::lease_id::ShortSecret;
use crate::core::limit::parents::{self, ParentError};
use crate::core::limit::{Calendar, Period};
use crate::core::{Algorithm, LeaseSecret, Limit, LimitError, Quota, DEFAULT_LIMIT};
use crate::curve::{self, Allowlist, KeyError, KeyPair, PublicKey, ServerCurve};
use crate::rls::{RlsConfig, RlsConfigError, Table};
use crate::state::StateConfig;
use crate::wire::DEFAULT_MAX_MESSAGE_SIZE;

mod interface;
mod node_id;
mod places;
mod settings;
pub use node_id::NodeId;
pub use places::Places;
pub(crate) use settings::parse_duration;
pub use settings::{FileConfig, Flags, Settings};

/// The seed's endpoint.
pub const DEFAULT_BIND: &str = "tcp://127.0.0.1:7777";
/// The seed's default quota: one request per second.
pub const DEFAULT_MAX_REQUESTS: u32 = 1;
/// The seed's default slot length.
pub const DEFAULT_IN_SECONDS: f64 = 1.0;
/// Live keys held at most, across all limits, unless configured.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The most asks held at once (see `hold_ms`) unless `max_parked` says.
pub use crate::service::DEFAULT_MAX_PARKED;
/// How long a starting peered locker waits for its peers' counts at most.
pub const DEFAULT_PEER_GRACE_SECONDS: f64 = 1.0;

/// Why the settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    /// An error about one setting of a file, with where it is: the file,
    /// the line and, when the error does not name it, the key.
    #[error("{at}: {source}")]
    At { at: String, source: Box<ConfigError> },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("limit {name:?}: {source}")]
    Limit { name: String, source: LimitError },
    #[error("limit {0:?} is defined twice")]
    Duplicate(String),
    #[error("limit {name:?}: {source}")]
    Parent { name: String, source: ParentError },
    #[error("max_keys must be at least 1")]
    ZeroMaxKeys,
    #[error("max_message_size must be from 64 to {max} bytes, got {got}", max = i64::MAX)]
    MessageSize { got: usize },
    #[error("limit {0:?}: burst is only for algorithm = \"token-bucket\"")]
    BurstWithoutBucket(String),
    #[error("limit {0:?}: in_seconds or period is needed (a slot length, or a calendar period)")]
    NoSlots(String),
    #[error("limit {0:?}: period and in_seconds are both set: a window counts per calendar period or per in_seconds, not both")]
    SlotsTwice(String),
    #[error("limit {name:?}: period must be \"day\", \"week\" or \"month\", got {got:?}")]
    BadPeriod { name: String, got: String },
    #[error("limit {name:?}: time_zone {got:?} is not a time zone of the IANA database (write it as Area/City, e.g. \"Europe/Berlin\")")]
    BadZone { name: String, got: String },
    #[error("limit {0:?}: time_zone is only for a limit with a period")]
    ZoneWithoutPeriod(String),
    #[error("peers are set but peer_bind is not: a peered locker must publish its own counts")]
    PeersWithoutBind,
    #[error("a node id must be 1 to 64 printable characters without spaces, got {0:?}")]
    BadNodeId(String),
    #[error("peer {peer:?}: a node id must be 1 to 64 printable characters without spaces, got {id:?}")]
    BadPeerId { peer: String, id: String },
    #[error("node id {0:?} is named twice among this locker and its peers: every member's id is its own")]
    PeerIdTwice(String),
    #[error(
        "peer_bind {0} has no fixed port and no state file is set, so this locker has no id that stays the same when it restarts (a restart under a new id could grant its share twice): pass --node-id (node_id in the file), e.g. the host or pod name; or bind a fixed port; or set --state, which keeps an id"
    )]
    NoStableNodeId(String),
    #[error("peer_grace must be from 0 to 60 seconds, got {0}")]
    BadGrace(f64),
    #[error("state_fsync must be from 0.001 to 3600 seconds, got {0}")]
    BadStateFsync(f64),
    #[error("curve_clients is set but curve_secret_key is not: an allowlist of clients needs a CURVE server key")]
    ClientsWithoutSecret,
    #[error("admin_keys is set but curve_secret_key is not: admins are told apart by their CURVE keys")]
    AdminsWithoutSecret,
    #[error("limit {0:?}: allow_reset is for the counting kinds; a semaphore's leases are released, not reset")]
    ResetOnSemaphore(String),
    #[error("limit {0:?}: shadow is for the counting kinds; a semaphore's leases are held, not answered go")]
    ShadowOnSemaphore(String),
    #[error("cannot bind {endpoint}: {why}")]
    Bind { endpoint: String, why: String },
    #[error("metrics_bind {addr:?}: {why}")]
    MetricsBind { addr: String, why: String },
    #[error("CURVE: {0}")]
    Curve(#[from] KeyError),
    #[error("lease secret {path}: {source}")]
    LeaseSecret { path: String, source: ShortSecret },
    #[error("peer {0:?} names a public key but curve_secret_key is not set: CURVE peers need a key pair")]
    PeerKeyWithoutSecret(String),
    #[error("store {got:?}: {why}")]
    BadStore { got: String, why: &'static str },
    #[error("store and peer_bind are both set: lockers on one store already share every count; use one or the other (docs/store.md)")]
    StoreWithPeering,
    #[error("store and state are both set: with a store the counts live in it, and a restart loses nothing without a state file")]
    StoreWithState,
    #[error(
        "limit {0:?} is a semaphore with store_failure = \"open\": its leases live in the store and fail closed (a lease granted without the store would be invisible to the other lockers); drop the setting"
    )]
    SemaphoreFailsOpen(String),
    #[error("store_timeout_ms must be from 1 to 60000, got {0}")]
    BadStoreTimeout(u64),
    #[error("store_replicas must be from 0 to {MAX_STORE_REPLICAS}, got {0}")]
    BadStoreReplicas(u32),
    #[error("rls_bind is set but rls_config is not: Envoy's rate-limit service serves the limits of an envoyproxy/ratelimit config")]
    RlsWithoutConfig,
    #[error("rls_bind {addr:?}: {why}")]
    RlsBind { addr: String, why: String },
    /// A TLS file of the rate-limit service that cannot be used.
    #[error("{setting} {path:?}: {why}")]
    RlsTls { setting: &'static str, path: String, why: String },
    /// A TLS setting of the rate-limit service without the one it needs.
    #[error("{0} {1}")]
    RlsTlsMissing(&'static str, &'static str),
    #[error(transparent)]
    Rls(#[from] RlsConfigError),
}

/// What a limit does when its store cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreFailure {
    /// Answer sorry until the store is back (the default: the limit holds).
    #[default]
    Closed,
    /// Decide by this locker's own counts, as if it were alone: each
    /// locker may then grant up to the whole limit.
    Open,
}

impl std::str::FromStr for StoreFailure {
    type Err = String;
    fn from_str(s: &str) -> Result<StoreFailure, String> {
        one_of(s, "store failure policy", &[("closed", StoreFailure::Closed), ("open", StoreFailure::Open)])
    }
}

/// The value `names` gives `s`, or an error that says which `what` it
/// is not and lists the names.
fn one_of<T: Copy>(s: &str, what: &str, names: &[(&str, T)]) -> Result<T, String> {
    if let Some(&(_, value)) = names.iter().find(|(name, _)| *name == s) {
        return Ok(value);
    }
    let listed: Vec<&str> = names.iter().map(|&(name, _)| name).collect();
    let (last, rest) = listed.split_last().expect("a name at least");
    Err(format!("unknown {what} {s:?} ({} or {last})", rest.join(", ")))
}

/// Where the counts are kept, when not in this locker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// One Redis server: `redis://HOST:PORT`.
    Single(String),
    /// A Redis Cluster, by some of its nodes: `redis-cluster://HOST:PORT,HOST:PORT`.
    Cluster(Vec<String>),
}

impl StoreSpec {
    /// Reads `redis://HOST:PORT[/DB]` or `redis-cluster://HOST:PORT[,HOST:PORT…]`.
    pub fn parse(text: &str) -> Result<StoreSpec, ConfigError> {
        let bad = |why| ConfigError::BadStore { got: text.to_owned(), why };
        let node = |n: &str| -> Result<String, ConfigError> {
            let (host, port) = n.rsplit_once(':').ok_or(bad("a node is HOST:PORT"))?;
            if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(bad("a node is HOST:PORT, with a port from 1 to 65535"));
            }
            Ok(format!("redis://{n}"))
        };
        if let Some(rest) = text.strip_prefix("redis-cluster://") {
            let nodes =
                rest.split(',').map(str::trim).filter(|n| !n.is_empty()).map(node).collect::<Result<Vec<_>, _>>()?;
            if nodes.is_empty() {
                return Err(bad("a cluster names at least one node: redis-cluster://HOST:PORT,HOST:PORT"));
            }
            return Ok(StoreSpec::Cluster(nodes));
        }
        if let Some(rest) = text.strip_prefix("redis://") {
            let hostport = rest.split('/').next().unwrap_or_default();
            node(hostport)?;
            return Ok(StoreSpec::Single(text.to_owned()));
        }
        Err(bad("expected redis://HOST:PORT (one server) or redis-cluster://HOST:PORT,HOST:PORT (a cluster)"))
    }
}

/// The store and how long each call to it may take.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub spec: StoreSpec,
    pub timeout: std::time::Duration,
    /// Replicas that must acknowledge a claim before it is granted from
    /// (`WAIT`); 0 waits for none (docs/store.md, failover).
    pub replicas: u32,
}

/// The most replicas `store_replicas` may ask for.
pub const MAX_STORE_REPLICAS: u32 = 16;

/// How long a store call may take unless `store_timeout_ms` says.
pub const DEFAULT_STORE_TIMEOUT_MS: u64 = 200;

/// The `algorithm` of a `[[limits]]` table, as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlgorithmName {
    #[default]
    FixedWindow,
    TokenBucket,
    Semaphore,
    RollingWindow,
}

impl std::str::FromStr for AlgorithmName {
    type Err = String;
    fn from_str(s: &str) -> Result<AlgorithmName, String> {
        use AlgorithmName::*;
        let names = [
            ("fixed-window", FixedWindow),
            ("token-bucket", TokenBucket),
            ("semaphore", Semaphore),
            ("rolling-window", RollingWindow),
        ];
        one_of(s, "algorithm", &names)
    }
}

/// One `[[limits]]` table. `max_requests` per `in_seconds` is the rate of
/// every kind: a fixed window's count per slot, a token bucket's refill, and
/// for a semaphore the capacity, with in_seconds the default lease ttl. A
/// fixed window may count per calendar `period` in `time_zone` instead.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimit {
    pub name: String,
    pub max_requests: u32,
    /// The slot length; required unless `period` is set, refused with it.
    pub in_seconds: Option<f64>,
    /// A fixed window's calendar period: "day", "week" or "month".
    pub period: Option<String>,
    /// The IANA time zone of `period` ("UTC" when absent).
    pub time_zone: Option<String>,
    #[serde(default)]
    pub algorithm: AlgorithmName,
    /// A token bucket's capacity; max_requests when absent.
    pub burst: Option<u32>,
    /// A rolling window's margin in milliseconds (see `Limit::with_margin`).
    pub margin_ms: Option<f64>,
    /// How long an ask that would get sorry is held, in milliseconds (see
    /// `Limit::with_hold`).
    pub hold_ms: Option<f64>,
    /// What this limit does when the store cannot be reached.
    pub store_failure: Option<StoreFailure>,
    /// Whether one key's count may be cleared on request (op `reset`).
    pub allow_reset: Option<bool>,
    /// The limit this one counts under: an ask of it takes its cost from
    /// the parent too (and from the parent's parent), all or nothing.
    pub parent: Option<String>,
    /// Whether the limit is in shadow: its would-be sorries are answered
    /// go, charged nothing and counted (see `Limit::with_shadow`).
    pub shadow: Option<bool>,
    /// The line of its `[[limits]]` header, for error messages; 0 when
    /// unknown (an inline table).
    #[serde(skip)]
    pub line: usize,
}

impl Settings {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Settings, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        let mut file = Settings::parse(&text).map_err(|message| ConfigError::Parse { path: shown.clone(), message })?;
        file.path = Some(shown);
        Ok(file)
    }

    /// `error`, about top-level setting `key`, with the file, line and key
    /// it is at; as it is when the setting came from a flag, or from no file.
    fn at(&self, key: &str, error: ConfigError) -> ConfigError {
        match (self.path.as_deref(), self.places.top(key)) {
            (Some(file), Some(line)) => located(file, Some(line), key, error),
            _ => error,
        }
    }

    /// `error`, about `key` of the `index`th `[[limits]]` table, with the
    /// file, line and key it is at (the table's header line when the key is
    /// not written); as it is for text that came from no file.
    fn locate(&self, index: usize, key: &str, error: ConfigError) -> ConfigError {
        let Some(file) = self.path.as_deref() else { return error };
        let header = self.limits.get(index).map(|l| l.line).filter(|&line| line > 0);
        located(file, self.places.limit(index, key).or(header), key, error)
    }

    /// `error` about the limit named `name`, located as `locate` does.
    fn locate_named(&self, name: &str, key: &str, error: ConfigError) -> ConfigError {
        match self.limits.iter().position(|l| l.name == name) {
            Some(index) => self.locate(index, key, error),
            None => error,
        }
    }

    /// Parses the text of a TOML file. An error says where, as the `toml`
    /// crate reports it ("line 6, column 1"), and which limit when it is
    /// about one `[[limits]]` table: "missing field" alone does not say
    /// which of twenty tables lacks it.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let places = Places::of(text);
        let mut file: Settings = toml::from_str(text).map_err(|e| {
            let message = plain_words(e.message());
            let key = e.span().and_then(|span| places.key_at(span.start)).filter(|key| !message.contains(key));
            let key = key.map(|key| format!("{key}: ")).unwrap_or_default();
            let at = e.span().map(|span| line_column(text, span.start));
            let at = at.map(|(line, column)| format!("line {line}, column {column}: ")).unwrap_or_default();
            let limit = failing_limit(text, e.message()).map(|name| format!("limit {name}: ")).unwrap_or_default();
            format!("{at}{limit}{key}{message}")
        })?;
        let headers = text.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with("[[limits]]"));
        for (limit, (i, _)) in file.limits.iter_mut().zip(headers) {
            limit.line = i + 1;
        }
        file.places = places;
        Ok(file)
    }
}

/// `error` at `line` of `file` (or the whole file), naming `key` unless it
/// already does.
fn located(file: &str, line: Option<usize>, key: &str, error: ConfigError) -> ConfigError {
    let mut at = file.to_owned();
    if let Some(line) = line {
        at.push_str(&format!(", line {line}"));
    }
    if !names_key(&error.to_string(), key) {
        at.push_str(&format!(", {key}"));
    }
    ConfigError::At { at, source: Box::new(error) }
}

/// Whether `message` names setting `key`: a sentence of it opens with the
/// key (`burst is only for …`, `limit "a": burst is …`), or has it as a
/// whole word when the key is one no sentence uses (`max_keys`; `bind` in
/// "cannot bind" is a verb, not the setting).
fn names_key(message: &str, key: &str) -> bool {
    let word = |i: usize| {
        let after = message[i + key.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric() && c != '_');
        let before = &message[..i];
        let opens = before.is_empty() || before.ends_with(": ");
        let alone = before.chars().next_back().is_none_or(|c| !c.is_alphanumeric() && c != '_');
        after && (opens || (alone && key.contains('_')))
    };
    message.match_indices(key).any(|(i, _)| word(i))
}

/// The key of a `[[limits]]` table that an error building its limit is
/// about.
fn limit_key(error: &ConfigError) -> &'static str {
    use LimitError::*;
    match error {
        ConfigError::Limit { source, .. } => match source {
            ZeroMaxRequests => "max_requests",
            SlotOutOfRange(_) => "in_seconds",
            BadName(_) => "name",
            ZeroBurst | BucketTooDeep { .. } => "burst",
            HoldOutOfRange(_) | HoldOnSemaphore => "hold_ms",
            MarginWithoutRolling | MarginOutOfRange { .. } => "margin_ms",
            PeriodWithoutFixed => "period",
        },
        ConfigError::BurstWithoutBucket(_) => "burst",
        ConfigError::NoSlots(_) => "in_seconds",
        ConfigError::SlotsTwice(_) | ConfigError::BadPeriod { .. } => "period",
        ConfigError::BadZone { .. } | ConfigError::ZoneWithoutPeriod(_) => "time_zone",
        _ => "name",
    }
}

/// The TOML reader's wording, in the words of the file a user wrote: no
/// Rust type names.
fn plain_words(message: &str) -> String {
    let message = message.trim_end();
    if message.contains("expected a sequence") && message.contains("invalid type: map") {
        return "limits is a list of tables: write each one as [[limits]], not [limits]".to_owned();
    }
    let types = [
        ("expected u32", "expected a whole number from 1 to 4294967295"),
        ("expected u64", "expected a whole number of at least 0"),
        ("expected usize", "expected a whole number of at least 0"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("invalid value: integer", "invalid value"),
        ("invalid type: integer", "found a whole number"),
        ("invalid type: string", "found a string"),
        ("invalid type: floating point", "found a number with a fraction"),
    ];
    types.iter().fold(message.to_owned(), |m, (rust, plain)| m.replace(rust, plain))
}

/// The 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (line, column)
}

/// The name (quoted) or position of the first `[[limits]]` table that fails
/// on its own with `message`, when the file is valid TOML.
fn failing_limit(text: &str, message: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let limits = table.get("limits")?.as_array()?;
    limits.iter().enumerate().find_map(|(i, entry)| {
        let e = entry.clone().try_into::<FileLimit>().err()?;
        (e.message() == message).then(|| match entry.get("name").and_then(toml::Value::as_str) {
            Some(name) => format!("{name:?}"),
            None => format!("number {}", i + 1),
        })
    })
}

/// One configured peer: `[ID@]ENDPOINT[=KEY]`, where ID is the peer's
/// node id and KEY its public key (its `.pub` file, or the key in Z85).
#[derive(Debug, Clone, PartialEq)]
pub struct PeerSpec {
    /// The peer's node id, when the configuration names it: this locker
    /// then knows every member's place before it hears them all, and
    /// refuses messages from that endpoint under another id.
    pub id: Option<String>,
    /// The peer's `peer_bind` endpoint.
    pub endpoint: String,
    /// Its CURVE public key; without one, a CURVE locker expects the
    /// peer to hold its own key pair (one pair for the whole group).
    pub key: Option<PublicKey>,
}

impl PeerSpec {
    /// Reads `[ID@]ENDPOINT[=KEY]`. The id is what comes before the last
    /// `@` ahead of the endpoint's `://` (a transport name has none).
    pub fn parse(text: &str) -> Result<PeerSpec, ConfigError> {
        let (named, key) = match text.split_once('=') {
            None => (text, None),
            Some((named, key)) => (named, Some(curve::public_key(key, "--peer")?)),
        };
        let (id, endpoint) = match named.split_once("://") {
            Some((head, _)) => match head.rsplit_once('@') {
                Some((id, _)) => (Some(id), &named[id.len() + 1..]),
                None => (None, named),
            },
            None => (None, named),
        };
        if let Some(id) = id.filter(|id| !node_id::valid(id)) {
            return Err(ConfigError::BadPeerId { peer: text.to_owned(), id: id.to_owned() });
        }
        Ok(PeerSpec { id: id.map(str::to_owned), endpoint: endpoint.to_owned(), key })
    }

    /// The peer as the peering core names it: `ID@ENDPOINT`, or the
    /// endpoint alone (see `PeerState::named`).
    pub fn name(&self) -> String {
        match &self.id {
            Some(id) => format!("{id}@{}", self.endpoint),
            None => self.endpoint.clone(),
        }
    }
}

/// How `locker serve` shares its counts with peers.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerConfig {
    /// Where the PUB socket binds.
    pub bind: String,
    /// The peers to subscribe to, one SUB socket each.
    pub peers: Vec<PeerSpec>,
    /// Where this locker's node id comes from (see `NodeId`).
    pub node_id: NodeId,
    /// How long a starting locker waits for its peers' counts at most.
    pub grace: std::time::Duration,
}

/// Everything `locker serve` needs, checked.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub bind: String,
    /// The limit for requests that name none.
    pub default: Limit,
    /// Every other limit, by name.
    pub limits: Vec<Limit>,
    pub max_keys: usize,
    /// The most asks held at once; past it an ask that would be held gets
    /// sorry at once.
    pub max_parked: usize,
    pub max_message_size: usize,
    /// Peering, when `peer_bind` is set.
    pub peering: Option<PeerConfig>,
    /// The state file, when `state` is set.
    pub state: Option<StateConfig>,
    /// CURVE, when a server secret key is set.
    pub curve: Option<ServerCurve>,
    /// Where metrics and health are served over HTTP, when they are.
    pub metrics_bind: Option<String>,
    /// The secret lease ids carry a MAC under, when set.
    pub lease_secret: Option<LeaseSecret>,
    /// The store the counts are kept in, when set.
    pub store: Option<StoreConfig>,
    /// The most limits asks may create from their terms (0: none).
    pub runtime_limits: usize,
    /// Envoy's rate-limit service, when `rls_bind` is set; its rules'
    /// limits are among `limits`.
    pub rls: Option<RlsConfig>,
}

impl ServeConfig {
    /// Merges the flags over the file over the defaults and checks the result.
    pub fn resolve(flags: Flags, file: FileConfig) -> Result<ServeConfig, ConfigError> {
        ServeConfig::check(flags.or(file))
    }

    /// Fills in the defaults of merged settings and checks them.
    fn check(s: Settings) -> Result<ServeConfig, ConfigError> {
        let (file_default, mut limits) = file_limits(&s)?;
        let rls = resolve_rls(&s)?;
        if let Some(r) = &rls {
            add_rls_limits(&s, &r.table, &mut limits)?;
        }
        let default = default_limit(&s, file_default.as_ref())?;
        let max_keys = s.max_keys.unwrap_or(DEFAULT_MAX_KEYS);
        if max_keys == 0 {
            return Err(s.at("max_keys", ConfigError::ZeroMaxKeys));
        }
        let max_message_size = s.max_message_size.unwrap_or(DEFAULT_MAX_MESSAGE_SIZE);
        if !(64..=i64::MAX as usize).contains(&max_message_size) {
            return Err(s.at("max_message_size", ConfigError::MessageSize { got: max_message_size }));
        }
        let bind = bind_endpoint(s.bind.as_deref().unwrap_or(DEFAULT_BIND)).map_err(|e| s.at("bind", e))?;
        let peering = resolve_peering(&s)?;
        let state = resolve_state(&s)?;
        let curve = resolve_curve(&s)?;
        let store = resolve_store(&s)?;
        let (default, limits) = match &store {
            None => (default, limits),
            Some(_) => store_limits(&s, default, limits)?,
        };
        let lease_secret =
            s.lease_secret.as_deref().map(load_secret).transpose().map_err(|e| s.at("lease_secret", e))?;
        if store.is_some() && peering.is_some() {
            return Err(s.at("store", ConfigError::StoreWithPeering));
        }
        if store.is_some() && state.is_some() {
            return Err(s.at("store", ConfigError::StoreWithState));
        }
        let runtime_limits = s.runtime_limits.unwrap_or(0);
        Ok(ServeConfig {
            bind,
            default,
            limits,
            max_keys,
            max_parked: s.max_parked.unwrap_or(DEFAULT_MAX_PARKED),
            max_message_size,
            peering,
            state,
            curve,
            metrics_bind: s
                .metrics_bind
                .as_deref()
                .map(|a| metrics_bind(a).map_err(|e| s.at("metrics_bind", e)))
                .transpose()?,
            lease_secret,
            store,
            runtime_limits,
            rls,
        })
    }
}

/// Envoy's rate-limit service's settings, its config loaded, when
/// `rls_bind` is set.
fn resolve_rls(s: &Settings) -> Result<Option<RlsConfig>, ConfigError> {
    let Some(bind) = s.rls_bind.clone() else { return Ok(None) };
    {
        use std::net::ToSocketAddrs;
        let err = |why: String| s.at("rls_bind", ConfigError::RlsBind { addr: bind.clone(), why });
        let mut addrs = bind.to_socket_addrs().map_err(|e| err(e.to_string()))?;
        addrs.next().ok_or_else(|| err("it resolves to no address".to_owned()))?;
    }
    let Some(path) = s.rls_config.clone() else { return Err(s.at("rls_bind", ConfigError::RlsWithoutConfig)) };
    let table = Table::load(&path).map_err(|e| s.at("rls_config", e.into()))?;
    let runtime_limits = s.runtime_limits.unwrap_or(0) > 0;
    let (table, headers) = (std::sync::Arc::new(table), s.rls_headers);
    let tls = resolve_rls_tls(s)?;
    Ok(Some(RlsConfig { bind, path, table, runtime_limits, headers, tls }))
}

/// The rate-limit service's TLS files, read: a certificate chain and its
/// key, both or neither, and the CA that client certificates must chain
/// to, only with them.
fn resolve_rls_tls(s: &Settings) -> Result<Option<crate::rls::Tls>, ConfigError> {
    let read = |setting: &'static str, path: &std::path::Path| {
        let err = |why: String| s.at(setting, ConfigError::RlsTls { setting, path: path.display().to_string(), why });
        let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        if !pem.windows(11).any(|w| w == b"-----BEGIN ") {
            return Err(err("not a PEM file (no -----BEGIN line)".to_owned()));
        }
        Ok(pem)
    };
    let missing = |setting: &'static str, why: &'static str| s.at(setting, ConfigError::RlsTlsMissing(setting, why));
    match (&s.rls_tls_cert, &s.rls_tls_key, &s.rls_tls_client_ca) {
        (None, None, None) => Ok(None),
        (Some(cert), Some(key), ca) => Ok(Some(crate::rls::Tls {
            cert_pem: read("rls_tls_cert", cert)?,
            key_pem: read("rls_tls_key", key)?,
            client_ca_pem: ca.as_deref().map(|ca| read("rls_tls_client_ca", ca)).transpose()?,
        })),
        (None, _, _) => Err(missing("rls_tls_cert", "is needed with rls_tls_key or rls_tls_client_ca")),
        (Some(_), None, _) => Err(missing("rls_tls_key", "is needed with rls_tls_cert")),
    }
}

/// Adds the limits of the RLS config's rules to `limits`, each name once.
fn add_rls_limits(s: &Settings, table: &Table, limits: &mut Vec<Limit>) -> Result<(), ConfigError> {
    let mut names: HashSet<String> = limits.iter().map(|l| l.name().to_owned()).collect();
    names.insert(DEFAULT_LIMIT.to_owned());
    for limit in table.limits() {
        if !names.insert(limit.name().to_owned()) {
            return Err(s.at("rls_config", ConfigError::Duplicate(limit.name().to_owned())));
        }
        limits.push(limit.clone());
    }
    Ok(())
}

/// The file's limits, each checked, its name once, their parents checked
/// over them all: the `default` one apart from the others.
fn file_limits(s: &Settings) -> Result<(Option<Limit>, Vec<Limit>), ConfigError> {
    let mut names = HashSet::new();
    let mut built = Vec::new();
    for (i, l) in s.limits.iter().enumerate() {
        if !names.insert(l.name.as_str()) {
            return Err(s.locate(i, "name", ConfigError::Duplicate(l.name.clone())));
        }
        let limit = file_slots(l)
            .and_then(|slots| {
                build_limit(&l.name, l.max_requests, slots, l.algorithm, (l.burst, l.margin_ms, l.hold_ms))
            })
            .map_err(|e| s.locate(i, limit_key(&e), e))?;
        let limit = with_reset(limit, l.allow_reset).map_err(|e| s.locate(i, "allow_reset", e))?;
        let limit = with_shadow(limit, l.shadow).map_err(|e| s.locate(i, "shadow", e))?;
        built.push(limit.with_parent(l.parent.as_deref()));
    }
    check_parents(s, &built)?;
    let (mut default, mut limits) = (None, Vec::new());
    for limit in built {
        if limit.name() == DEFAULT_LIMIT {
            default = Some(limit);
        } else {
            limits.push(limit);
        }
    }
    Ok((default, limits))
}

/// Refuses a `parent` that names no limit of the file, closes a cycle,
/// makes a chain deeper than `MAX_LEVELS`, or is a semaphore's (or the
/// default limit's), at the line of the `parent` at fault. `built` are
/// the file's limits in its order.
fn check_parents(s: &Settings, built: &[Limit]) -> Result<(), ConfigError> {
    let limits: Vec<&Limit> = built.iter().collect();
    parents::check(&limits).map_err(|(i, source)| {
        let name = built[i].name().to_owned();
        s.locate(i, "parent", ConfigError::Parent { name, source })
    })
}

/// A `[[limits]]` table's slots: `in_seconds`, or a calendar `period`
/// in `time_zone`, resolved from the time zone database bundled with the
/// binary (so a host without /usr/share/zoneinfo reads it the same).
fn file_slots(l: &FileLimit) -> Result<Slots, ConfigError> {
    let name = || l.name.clone();
    match (l.in_seconds, l.period.as_deref(), l.time_zone.as_deref()) {
        (Some(_), Some(_), _) => Err(ConfigError::SlotsTwice(name())),
        (_, None, Some(_)) => Err(ConfigError::ZoneWithoutPeriod(name())),
        (Some(secs), None, None) => Ok(Slots::Seconds(secs)),
        (None, None, None) => Err(ConfigError::NoSlots(name())),
        (None, Some(period), zone) => {
            let period =
                Period::parse(period).ok_or_else(|| ConfigError::BadPeriod { name: name(), got: period.into() })?;
            let zone_name = zone.unwrap_or("UTC");
            let zone = jiff::tz::db()
                .get(zone_name)
                .map_err(|_| ConfigError::BadZone { name: name(), got: zone_name.into() })?;
            // The database's own spelling, so that peers that wrote the
            // zone in other cases still agree on the limit's digest.
            let canonical = zone.iana_name().unwrap_or(zone_name).to_owned();
            Ok(Slots::Calendar(Calendar::new(period, &canonical, zone)))
        }
    }
}

/// The default limit: the flags over the file's `default` table
/// (`from_file`, as built) over the seed's 1 per second. A flag
/// --in-seconds wins over the table's calendar period.
fn default_limit(s: &Settings, from_file: Option<&Limit>) -> Result<Limit, ConfigError> {
    let (file_max, file_secs) =
        from_file.map_or((DEFAULT_MAX_REQUESTS, DEFAULT_IN_SECONDS), |d| (d.quota().max_requests(), d.in_seconds()));
    let slots = match (s.in_seconds, from_file.and_then(|d| d.quota().calendar())) {
        (Some(secs), _) => Slots::Seconds(secs),
        (None, Some(calendar)) => Slots::Calendar(calendar),
        (None, None) => Slots::Seconds(file_secs),
    };
    let table = s.limits.iter().find(|l| l.name == DEFAULT_LIMIT);
    let algorithm = s.algorithm.or(table.map(|l| l.algorithm)).unwrap_or_default();
    // A flag --burst wins; the file's burst only goes with the file's algorithm.
    let same_kind = table.filter(|l| l.algorithm == algorithm);
    let limit = build_limit(
        DEFAULT_LIMIT,
        s.max_requests.unwrap_or(file_max),
        slots,
        algorithm,
        (
            s.burst.or(same_kind.and_then(|l| l.burst)),
            s.margin_ms.or(same_kind.and_then(|l| l.margin_ms)),
            s.hold_ms.or(table.and_then(|l| l.hold_ms)),
        ),
    )?;
    let limit = with_reset(limit, table.and_then(|l| l.allow_reset))
        .map_err(|e| s.locate_named(DEFAULT_LIMIT, "allow_reset", e))?;
    with_shadow(limit, table.and_then(|l| l.shadow)).map_err(|e| s.locate_named(DEFAULT_LIMIT, "shadow", e))
}

/// `limit`, in shadow when `shadow` says so; only a counting kind may be.
fn with_shadow(limit: Limit, shadow: Option<bool>) -> Result<Limit, ConfigError> {
    match shadow {
        Some(true) if limit.algorithm() == Algorithm::Semaphore => {
            Err(ConfigError::ShadowOnSemaphore(limit.name().to_owned()))
        }
        shadow => Ok(limit.with_shadow(shadow.unwrap_or(false))),
    }
}

/// `limit`, allowing a reset when `allow` says so; only a counting kind may.
fn with_reset(limit: Limit, allow: Option<bool>) -> Result<Limit, ConfigError> {
    match allow {
        Some(true) if limit.algorithm() == Algorithm::Semaphore => {
            Err(ConfigError::ResetOnSemaphore(limit.name().to_owned()))
        }
        allow => Ok(limit.with_reset_allowed(allow.unwrap_or(false))),
    }
}

fn resolve_store(s: &Settings) -> Result<Option<StoreConfig>, ConfigError> {
    let Some(text) = s.store.as_deref() else { return Ok(None) };
    let spec = StoreSpec::parse(text).map_err(|e| s.at("store", e))?;
    let ms = s.store_timeout_ms.unwrap_or(DEFAULT_STORE_TIMEOUT_MS);
    if !(1..=60_000).contains(&ms) {
        return Err(s.at("store_timeout_ms", ConfigError::BadStoreTimeout(ms)));
    }
    let replicas = s.store_replicas.unwrap_or(0);
    if replicas > MAX_STORE_REPLICAS {
        return Err(s.at("store_replicas", ConfigError::BadStoreReplicas(replicas)));
    }
    Ok(Some(StoreConfig { spec, timeout: std::time::Duration::from_millis(ms), replicas }))
}

/// The limits as a store serves them: each with its failure policy (its
/// own, else the flag's, else the file's, else closed). A semaphore always
/// fails closed, and one that asks to fail open is refused.
fn store_limits(s: &Settings, default: Limit, limits: Vec<Limit>) -> Result<(Limit, Vec<Limit>), ConfigError> {
    let overall = s.store_failure.unwrap_or_default();
    let policy = |limit: Limit| {
        let own = s.limits.iter().find(|l| l.name == limit.name()).and_then(|l| l.store_failure);
        if limit.algorithm() == Algorithm::Semaphore {
            if own == Some(StoreFailure::Open) {
                let error = ConfigError::SemaphoreFailsOpen(limit.name().to_owned());
                return Err(s.locate_named(limit.name(), "store_failure", error));
            }
            return Ok(limit.with_fail_open(false));
        }
        let open = own.unwrap_or(overall) == StoreFailure::Open;
        Ok(limit.with_fail_open(open))
    };
    let limits = limits.into_iter().map(policy).collect::<Result<Vec<_>, _>>()?;
    Ok((policy(default)?, limits))
}

/// A setting that was given but takes no effect without another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ignored {
    /// The setting given, by its file name (the flag is `--` and dashes).
    pub setting: &'static str,
    /// The setting it needs, and what it is for.
    pub needs: &'static str,
}

/// Settings that were given but take no effect, to warn about: the node
/// id and the grace period mean nothing to a locker that does not peer,
/// and the state file's fsync and discard nothing without a state file.
pub fn ignored_settings(flags: &Flags, file: &FileConfig) -> Vec<Ignored> {
    let s = flags.clone().or(file.clone());
    let (peering, state) = (s.peer_bind.is_some(), s.state.is_some());
    let peer = "peer_bind (--peer-bind): this locker does not peer";
    let file_ = "state (--state): this locker keeps no state file";
    [
        (!peering && s.node_id.is_some(), "node_id", peer),
        (!peering && s.peer_grace.is_some(), "peer_grace", peer),
        (!state && s.state_fsync.is_some(), "state_fsync", file_),
        (!state && s.state_discard == Some(true), "state_discard", file_),
        (
            s.rls_bind.is_none() && s.rls_config.is_some(),
            "rls_config",
            "rls_bind (--rls-bind): this locker serves no rate-limit service",
        ),
        (
            s.rls_bind.is_none() && s.rls_headers.is_some(),
            "rls_headers",
            "rls_bind (--rls-bind): this locker serves no rate-limit service",
        ),
        (
            s.rls_bind.is_none() && (s.rls_tls_cert.is_some() || s.rls_tls_key.is_some()),
            "rls_tls_cert",
            "rls_bind (--rls-bind): this locker serves no rate-limit service",
        ),
    ]
    .into_iter()
    .filter_map(|(set, setting, needs)| set.then_some(Ignored { setting, needs }))
    .collect()
}

fn resolve_peering(s: &Settings) -> Result<Option<PeerConfig>, ConfigError> {
    let peers = s.peers.as_deref().unwrap_or_default();
    let Some(bind) = s.peer_bind.as_deref() else {
        return if peers.is_empty() { Ok(None) } else { Err(s.at("peers", ConfigError::PeersWithoutBind)) };
    };
    let bind = bind_endpoint(bind).map_err(|e| s.at("peer_bind", e))?;
    if let Some(id) = s.node_id.as_ref().filter(|id| !node_id::valid(id)) {
        return Err(s.at("node_id", ConfigError::BadNodeId(id.clone())));
    }
    let grace = s.peer_grace.unwrap_or(DEFAULT_PEER_GRACE_SECONDS);
    if !(0.0..=60.0).contains(&grace) {
        return Err(s.at("peer_grace", ConfigError::BadGrace(grace)));
    }
    let peers = peers.iter().map(|p| PeerSpec::parse(p)).collect::<Result<Vec<_>, _>>();
    let peers = peers.map_err(|e| s.at("peers", e))?;
    let mut ids: Vec<&str> = peers.iter().filter_map(|p| p.id.as_deref()).chain(s.node_id.as_deref()).collect();
    ids.sort_unstable();
    if let Some(twice) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(s.at("peers", ConfigError::PeerIdTwice(twice[0].to_owned())));
    }
    if let Some(keyed) = peers.iter().find(|p| p.key.is_some() && s.curve_secret_key.is_none()) {
        return Err(s.at("peers", ConfigError::PeerKeyWithoutSecret(keyed.endpoint.clone())));
    }
    let node_id = NodeId::of(s.node_id.clone(), &bind, s.state.is_some());
    let node_id = node_id.ok_or_else(|| s.at("peer_bind", ConfigError::NoStableNodeId(bind.clone())))?;
    Ok(Some(PeerConfig { bind, peers, node_id, grace: std::time::Duration::from_secs_f64(grace) }))
}

fn resolve_state(s: &Settings) -> Result<Option<StateConfig>, ConfigError> {
    let Some(path) = s.state.clone() else { return Ok(None) };
    let fsync = match s.state_fsync {
        None => None,
        Some(secs) if (0.001..=3600.0).contains(&secs) => Some(std::time::Duration::from_secs_f64(secs)),
        Some(secs) => return Err(s.at("state_fsync", ConfigError::BadStateFsync(secs))),
    };
    Ok(Some(StateConfig { path, fsync, discard: s.state_discard.unwrap_or(false) }))
}

/// `endpoint` as ZeroMQ can bind it: an interface name (`lo`, `eth0`) is
/// replaced by the interface's address and a host name by the address it
/// resolves to (IPv4 first), since the bundled ZeroMQ looks up neither and
/// fails with "No such device"; a port above 65535 is refused rather than
/// left for ZeroMQ to wrap around. An IP address, `*` and other transports
/// pass unchanged.
pub fn bind_endpoint(endpoint: &str) -> Result<String, ConfigError> {
    let err = |why: String| ConfigError::Bind { endpoint: endpoint.to_owned(), why };
    let Some((host, port)) = endpoint.strip_prefix("tcp://").and_then(|rest| rest.rsplit_once(':')) else {
        return Ok(endpoint.to_owned());
    };
    if let Ok(n) = port.parse::<u64>() {
        if n > u64::from(u16::MAX) {
            return Err(err(format!("port {n} is above 65535")));
        }
    }
    let literal = host == "*" || host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok();
    if literal {
        return Ok(endpoint.to_owned());
    }
    use std::net::ToSocketAddrs;
    let unknown = |e: String| {
        err(format!("{host:?} is neither an IP address nor a network interface, and as a host name {e}; bind an interface or an IP address, e.g. tcp://127.0.0.1:{port} or tcp://*:{port}"))
    };
    let ip = match interface::address(host) {
        Some(ip) => Some(ip),
        None => {
            let addrs: Vec<_> = (host, 0).to_socket_addrs().map_err(|e| unknown(e.to_string()))?.collect();
            addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).map(|a| a.ip())
        }
    };
    match ip {
        Some(std::net::IpAddr::V4(ip)) => Ok(format!("tcp://{ip}:{port}")),
        Some(std::net::IpAddr::V6(ip)) => Ok(format!("tcp://[{ip}]:{port}")),
        None => Err(unknown("it resolves to no address".to_owned())),
    }
}

/// `addr` when it is a HOST:PORT the metrics listener can bind.
fn metrics_bind(addr: &str) -> Result<String, ConfigError> {
    use std::net::ToSocketAddrs;
    let err = |why: String| ConfigError::MetricsBind { addr: addr.to_owned(), why };
    let mut addrs = addr.to_socket_addrs().map_err(|e| err(e.to_string()))?;
    addrs.next().ok_or_else(|| err("it resolves to no address".to_owned()))?;
    Ok(addr.to_owned())
}

/// Reads the server key pair and the allowlist, when set.
fn resolve_curve(s: &Settings) -> Result<Option<ServerCurve>, ConfigError> {
    let (secret, clients) = (s.curve_secret_key.as_ref(), s.curve_clients.as_ref());
    let Some(secret) = secret else {
        return if clients.is_some() {
            Err(s.at("curve_clients", ConfigError::ClientsWithoutSecret))
        } else if s.admin_keys.is_some() {
            Err(s.at("admin_keys", ConfigError::AdminsWithoutSecret))
        } else {
            Ok(None)
        };
    };
    let keys = KeyPair::load(secret).map_err(|e| s.at("curve_secret_key", e.into()))?;
    let clients = clients.map(|c| Allowlist::load(c)).transpose().map_err(|e| s.at("curve_clients", e.into()))?;
    let admins =
        s.admin_keys.iter().flatten().map(|k| curve::public_key(k, "admin_keys")).collect::<Result<Vec<_>, _>>();
    let admins = Allowlist::of(admins.map_err(|e| s.at("admin_keys", e.into()))?);
    Ok(Some(ServerCurve { keys, clients, admins }))
}

/// Reads a lease secret: the file's bytes, whatever they are (so a copy of
/// the same file gives every peer the same secret).
fn load_secret(path: &Path) -> Result<LeaseSecret, ConfigError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
    LeaseSecret::new(bytes).map_err(|source| ConfigError::LeaseSecret { path: shown, source })
}

/// What a limit's slots are, as a file or the flags said.
#[derive(Debug, Clone, Copy)]
enum Slots {
    Seconds(f64),
    Calendar(Calendar),
}

fn build_limit(
    name: &str,
    max_requests: u32,
    slots: Slots,
    algorithm: AlgorithmName,
    (burst, margin_ms, hold_ms): (Option<u32>, Option<f64>, Option<f64>),
) -> Result<Limit, ConfigError> {
    let err = |source| ConfigError::Limit { name: name.to_owned(), source };
    let algorithm = match (algorithm, burst) {
        (AlgorithmName::TokenBucket, burst) => Algorithm::token_bucket(burst.unwrap_or(max_requests)).map_err(err)?,
        (_, Some(_)) => return Err(ConfigError::BurstWithoutBucket(name.to_owned())),
        (AlgorithmName::FixedWindow, None) => Algorithm::FixedWindow,
        (AlgorithmName::Semaphore, None) => Algorithm::Semaphore,
        (AlgorithmName::RollingWindow, None) => Algorithm::RollingWindow,
    };
    let quota = match slots {
        Slots::Seconds(in_seconds) => Quota::new(max_requests, in_seconds),
        Slots::Calendar(calendar) => Quota::per_period(max_requests, calendar),
    };
    let limit = Limit::with_algorithm(name, quota.map_err(err)?, algorithm);
    let limit = limit.and_then(|l| l.with_margin(margin_ms.unwrap_or(0.0)));
    limit.and_then(|l| l.with_hold(hold_ms.unwrap_or(0.0))).map_err(err)
}

#[cfg(test)]
mod tests;
