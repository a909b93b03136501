//! Settings for `locker serve`: the TOML file, merged with the command-line
//! flags and checked once, so that the daemon only ever sees a valid config.
//!
//! Precedence: a flag given on the command line wins over the file, and the
//! file wins over the built-in defaults. This module reads the file it is
//! given and nothing else; it does not bind sockets or start anything.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;

use crate::core::{Algorithm, Limit, LimitError, Quota, DEFAULT_LIMIT};
use crate::wire::DEFAULT_MAX_MESSAGE_SIZE;

/// The seed's endpoint.
pub const DEFAULT_BIND: &str = "tcp://*:7777";
/// The seed's default quota: one request per second.
pub const DEFAULT_MAX_REQUESTS: u32 = 1;
/// The seed's default slot length.
pub const DEFAULT_IN_SECONDS: f64 = 1.0;
/// Live keys held at most, across all limits, unless configured.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// Why the settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("limit {name:?}: {source}")]
    Limit { name: String, source: LimitError },
    #[error("limit {0:?} is defined twice")]
    Duplicate(String),
    #[error("max_keys must be at least 1")]
    ZeroMaxKeys,
    #[error("max_message_size must be from 64 to {max} bytes, got {got}", max = i64::MAX)]
    MessageSize { got: usize },
    #[error("limit {0:?}: burst is only for algorithm = \"token-bucket\"")]
    BurstWithoutBucket(String),
}

/// The `algorithm` of a `[[limits]]` table, as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlgorithmName {
    #[default]
    FixedWindow,
    TokenBucket,
    Semaphore,
}

impl std::str::FromStr for AlgorithmName {
    type Err = String;
    fn from_str(s: &str) -> Result<AlgorithmName, String> {
        match s {
            "fixed-window" => Ok(AlgorithmName::FixedWindow),
            "token-bucket" => Ok(AlgorithmName::TokenBucket),
            "semaphore" => Ok(AlgorithmName::Semaphore),
            other => Err(format!("unknown algorithm {other:?} (fixed-window, token-bucket or semaphore)")),
        }
    }
}

/// The TOML file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub bind: Option<String>,
    pub max_keys: Option<usize>,
    pub max_message_size: Option<usize>,
    #[serde(default)]
    pub limits: Vec<FileLimit>,
}

/// One `[[limits]]` table. `max_requests` per `in_seconds` is the rate of
/// every kind: a fixed window's count per slot, a token bucket's refill, and
/// for a semaphore the capacity, with in_seconds the default lease ttl.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimit {
    pub name: String,
    pub max_requests: u32,
    pub in_seconds: f64,
    #[serde(default)]
    pub algorithm: AlgorithmName,
    /// A token bucket's capacity; max_requests when absent.
    pub burst: Option<u32>,
}

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse { path: shown, message: e.message().to_owned() })
    }
}

/// What the command line says; `None` where a flag was not given.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub bind: Option<String>,
    pub max_requests: Option<u32>,
    pub in_seconds: Option<f64>,
    pub max_keys: Option<usize>,
    pub max_message_size: Option<usize>,
    pub algorithm: Option<AlgorithmName>,
    pub burst: Option<u32>,
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
    pub max_message_size: usize,
}

impl ServeConfig {
    /// Merges the flags over the file over the defaults and checks the result.
    pub fn resolve(flags: Flags, file: FileConfig) -> Result<ServeConfig, ConfigError> {
        let mut names = HashSet::new();
        let mut file_default = None;
        let mut limits = Vec::new();
        for l in &file.limits {
            if !names.insert(l.name.as_str()) {
                return Err(ConfigError::Duplicate(l.name.clone()));
            }
            let limit = build_limit(&l.name, l.max_requests, l.in_seconds, l.algorithm, l.burst)?;
            if l.name == DEFAULT_LIMIT {
                file_default = Some(limit);
            } else {
                limits.push(limit);
            }
        }
        let from_file = file.limits.iter().find(|l| l.name == DEFAULT_LIMIT);
        let (file_max, file_secs) = file_default
            .map(|d| (d.quota().max_requests(), d.quota().in_seconds()))
            .unwrap_or((DEFAULT_MAX_REQUESTS, DEFAULT_IN_SECONDS));
        let algorithm = flags.algorithm.or(from_file.map(|l| l.algorithm)).unwrap_or_default();
        // A flag --burst wins; the file's burst only goes with the file's algorithm.
        let file_burst = from_file.filter(|l| l.algorithm == algorithm).and_then(|l| l.burst);
        let default = build_limit(
            DEFAULT_LIMIT,
            flags.max_requests.unwrap_or(file_max),
            flags.in_seconds.unwrap_or(file_secs),
            algorithm,
            flags.burst.or(file_burst),
        )?;
        let max_keys = flags.max_keys.or(file.max_keys).unwrap_or(DEFAULT_MAX_KEYS);
        if max_keys == 0 {
            return Err(ConfigError::ZeroMaxKeys);
        }
        let max_message_size = flags.max_message_size.or(file.max_message_size).unwrap_or(DEFAULT_MAX_MESSAGE_SIZE);
        if !(64..=i64::MAX as usize).contains(&max_message_size) {
            return Err(ConfigError::MessageSize { got: max_message_size });
        }
        let bind = flags.bind.or(file.bind).unwrap_or_else(|| DEFAULT_BIND.to_owned());
        Ok(ServeConfig { bind, default, limits, max_keys, max_message_size })
    }
}

fn build_limit(
    name: &str,
    max_requests: u32,
    in_seconds: f64,
    algorithm: AlgorithmName,
    burst: Option<u32>,
) -> Result<Limit, ConfigError> {
    let err = |source| ConfigError::Limit { name: name.to_owned(), source };
    let algorithm = match (algorithm, burst) {
        (AlgorithmName::TokenBucket, burst) => Algorithm::token_bucket(burst.unwrap_or(max_requests)).map_err(err)?,
        (_, Some(_)) => return Err(ConfigError::BurstWithoutBucket(name.to_owned())),
        (AlgorithmName::FixedWindow, None) => Algorithm::FixedWindow,
        (AlgorithmName::Semaphore, None) => Algorithm::Semaphore,
    };
    Limit::with_algorithm(name, Quota::new(max_requests, in_seconds).map_err(err)?, algorithm).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> FileConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_are_the_seeds() {
        let c = ServeConfig::resolve(Flags::default(), FileConfig::default()).unwrap();
        assert_eq!(c.bind, "tcp://*:7777");
        assert_eq!(c.default.quota(), Quota::new(1, 1.0).unwrap());
        assert!(c.limits.is_empty());
    }

    #[test]
    fn flags_win_over_the_file() {
        let file = parse(
            "bind = 'tcp://127.0.0.1:1'\n[[limits]]\nname = 'default'\nmax_requests = 3\nin_seconds = 2.0\n\
             [[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n",
        );
        let flags = Flags { max_requests: Some(7), ..Flags::default() };
        let c = ServeConfig::resolve(flags, file).unwrap();
        assert_eq!(c.bind, "tcp://127.0.0.1:1");
        assert_eq!(c.default.quota(), Quota::new(7, 2.0).unwrap());
        assert_eq!(c.limits.len(), 1);
        assert_eq!(c.limits[0].name(), "api");
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dup = parse(
            "[[limits]]\nname='a'\nmax_requests=1\nin_seconds=1\n[[limits]]\nname='a'\nmax_requests=1\nin_seconds=1\n",
        );
        assert!(matches!(ServeConfig::resolve(Flags::default(), dup), Err(ConfigError::Duplicate(_))));
        let zero = parse("[[limits]]\nname='a'\nmax_requests=0\nin_seconds=1\n");
        let e = ServeConfig::resolve(Flags::default(), zero).unwrap_err();
        assert_eq!(e.to_string(), "limit \"a\": max_requests must be at least 1");
        assert!(toml::from_str::<FileConfig>("nonsense = 1").is_err());
    }

    #[test]
    fn one_file_mixes_the_three_kinds() {
        let file = parse(
            "[[limits]]\nname = 'api'\nmax_requests = 5\nin_seconds = 0.8\n\
             [[limits]]\nname = 'smooth'\nalgorithm = 'token-bucket'\nmax_requests = 10\nin_seconds = 1\nburst = 20\n\
             [[limits]]\nname = 'db'\nalgorithm = 'semaphore'\nmax_requests = 4\nin_seconds = 30\n",
        );
        let c = ServeConfig::resolve(Flags::default(), file).unwrap();
        let kinds: Vec<_> = c.limits.iter().map(|l| (l.name(), l.algorithm().name(), l.capacity())).collect();
        assert_eq!(kinds, [("api", "fixed-window", 5), ("smooth", "token-bucket", 20), ("db", "semaphore", 4)]);
        let burst_on_window = parse("[[limits]]\nname='w'\nmax_requests=1\nin_seconds=1\nburst=3\n");
        let e = ServeConfig::resolve(Flags::default(), burst_on_window).unwrap_err();
        assert!(matches!(e, ConfigError::BurstWithoutBucket(_)), "{e}");
        assert!(toml::from_str::<FileConfig>(
            "[[limits]]\nname='x'\nmax_requests=1\nin_seconds=1\nalgorithm='leaky'\n"
        )
        .is_err());
    }

    #[test]
    fn flags_can_make_the_default_limit_a_token_bucket() {
        let flags = Flags { algorithm: Some(AlgorithmName::TokenBucket), burst: Some(7), ..Flags::default() };
        let c = ServeConfig::resolve(flags, FileConfig::default()).unwrap();
        assert_eq!(c.default.capacity(), 7);
        assert_eq!(c.default.algorithm().name(), "token-bucket");
    }
}
