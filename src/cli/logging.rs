//! Where logs go and how they look: stderr, filtered by `LOCKER_LOG`
//! (`info` by default), as text or, with `LOCKER_LOG_FORMAT=json`, one JSON
//! object per line for a log collector. Nothing else is configured here.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The log line format, from `LOCKER_LOG_FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// `json` (any case) means JSON; anything else, or nothing, text.
    pub fn from_env_value(value: Option<&str>) -> LogFormat {
        match value {
            Some(v) if v.trim().eq_ignore_ascii_case("json") => LogFormat::Json,
            _ => LogFormat::Text,
        }
    }
}

/// Installs the global subscriber.
pub fn init() {
    let filter = EnvFilter::try_from_env("LOCKER_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let format = LogFormat::from_env_value(std::env::var("LOCKER_LOG_FORMAT").ok().as_deref());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_current_span(false).init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_selects_json() {
        assert_eq!(LogFormat::from_env_value(Some("json")), LogFormat::Json);
        assert_eq!(LogFormat::from_env_value(Some("JSON ")), LogFormat::Json);
        assert_eq!(LogFormat::from_env_value(Some("text")), LogFormat::Text);
        assert_eq!(LogFormat::from_env_value(None), LogFormat::Text);
    }
}
