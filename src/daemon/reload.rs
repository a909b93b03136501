//! Reading the config file again, as SIGHUP asks.
//!
//! The file is merged with the command line's flags as at start (a flag
//! still wins) and checked in full; only then does the loop hand its limits
//! to the service, so an invalid file changes nothing. Limits and
//! `max_keys` take effect at once, and so does a changed `peers` list (the
//! loop subscribes to the new peers and drops the old; the peering follows
//! the new member set as `core::peering::members` says). The sockets,
//! the rest of the peering settings (`peer_bind`, `node_id`, `peer_grace`)
//! and CURVE are read only at start, and a change to them is reported so
//! that the operator knows a restart is needed. This module reads the
//! file; it decides nothing about counts (that is `Locker::reload`) nor
//! about shares (that is `Peering::set_peers`).

use std::path::PathBuf;

use tracing::{error, info, warn};

use crate::config::{ConfigError, FileConfig, Flags, PeerSpec, ServeConfig};
use crate::core::{Limit, Reloaded};

/// What a reload serves: the default limit, the others, and `max_keys`.
pub type Limits = (Limit, Vec<Limit>, usize);

/// Where the config comes from, and what it was last.
#[derive(Debug)]
pub struct Reload {
    path: PathBuf,
    flags: Flags,
    current: ServeConfig,
}

impl Reload {
    /// Reloads from `path`, merged with `flags`; `current` is the config the
    /// locker started with.
    pub fn new(path: PathBuf, flags: Flags, current: ServeConfig) -> Reload {
        Reload { path, flags, current }
    }

    /// The file's path, for logs.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The config the file says now, checked.
    pub fn read(&self) -> Result<ServeConfig, ConfigError> {
        ServeConfig::resolve(self.flags.clone(), FileConfig::load(&self.path)?)
    }

    /// The config the locker serves now.
    pub fn current(&self) -> &ServeConfig {
        &self.current
    }

    /// Takes `new` as the current config; returns the settings that differ
    /// from the old one but apply only after a restart.
    pub fn accept(&mut self, new: ServeConfig) -> Vec<&'static str> {
        let old = std::mem::replace(&mut self.current, new);
        restart_only_changes(&old, &self.current)
    }
}

/// What the loop does with a config read again.
pub trait FollowsReload {
    /// Serves these limits (the loop's `step::reload`).
    fn limits(&mut self, limits: Limits) -> Reloaded;
    /// Subscribes to these peers in place of the old (the loop's sockets
    /// and `step::repeer`); false when it could not, which keeps the old.
    fn peers(&mut self, peers: &[PeerSpec]) -> bool;
}

/// Reads the file again and hands its limits to `serve`, its peers too
/// when the list changed, and its RLS rules to `rls` (before the reload
/// is logged, so that a call after the log sees them); an invalid file is
/// logged and changes nothing.
pub fn apply(reload: &mut Reload, rls: Option<&crate::rls::Running>, serve: &mut impl FollowsReload) {
    let mut new = match reload.read() {
        Ok(new) => new,
        Err(e) => {
            error!(path = %reload.path().display(), error = %e, "config not reloaded; the old one keeps serving");
            return;
        }
    };
    let done = serve.limits((new.default.clone(), new.limits.clone(), new.max_keys));
    if let Some(peers) = changed_peers(reload.current(), &new) {
        if !serve.peers(peers) {
            // Kept: what the loop still subscribes to.
            let old = reload.current().peering.as_ref().map(|pc| pc.peers.clone());
            if let (Some(pc), Some(old)) = (new.peering.as_mut(), old) {
                pc.peers = old;
            }
        }
    }
    if let (Some(rls), Some(rules)) = (rls, &new.rls) {
        rls.swap(rules.table.clone());
    }
    info!(
        path = %reload.path().display(),
        added = ?done.added,
        removed = ?done.removed,
        changed = ?done.retuned,
        reset = ?done.reset,
        "config reloaded"
    );
    let later = reload.accept(new);
    if !later.is_empty() {
        warn!(settings = ?later, "these settings changed but apply only after a restart");
    }
}

/// The peers `new` lists, when a peered locker's list differs from
/// `old`'s: they apply at once. Peering turned on or off needs a restart.
pub fn changed_peers<'a>(old: &ServeConfig, new: &'a ServeConfig) -> Option<&'a [PeerSpec]> {
    match (&old.peering, &new.peering) {
        (Some(o), Some(n)) if o.peers != n.peers => Some(&n.peers),
        _ => None,
    }
}

/// The settings read only at start that differ between `old` and `new`.
pub fn restart_only_changes(old: &ServeConfig, new: &ServeConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if old.bind != new.bind {
        changed.push("bind");
    }
    if old.max_message_size != new.max_message_size {
        changed.push("max_message_size");
    }
    match (&old.peering, &new.peering) {
        (Some(o), Some(n)) => {
            if o.bind != n.bind {
                changed.push("peer_bind");
            }
            if o.node_id != n.node_id {
                changed.push("node_id");
            }
            if o.grace != n.grace {
                changed.push("peer_grace");
            }
        }
        (None, None) => {}
        _ => changed.push("peer_bind (peering on or off)"),
    }
    if old.curve.is_some() != new.curve.is_some() {
        changed.push("curve");
    }
    if old.metrics_bind != new.metrics_bind {
        changed.push("metrics_bind");
    }
    if old.runtime_limits != new.runtime_limits {
        changed.push("runtime_limits");
    }
    if old.rls.as_ref().map(|r| &r.bind) != new.rls.as_ref().map(|r| &r.bind) {
        changed.push("rls_bind");
    }
    if old.rls.as_ref().map(|r| r.headers) != new.rls.as_ref().map(|r| r.headers) {
        changed.push("rls_headers");
    }
    if old.rls.as_ref().map(|r| &r.tls) != new.rls.as_ref().map(|r| &r.tls) {
        changed.push("rls_tls_cert, rls_tls_key, rls_tls_client_ca");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> ServeConfig {
        ServeConfig::resolve(Flags::default(), toml::from_str(text).unwrap()).unwrap()
    }

    #[test]
    fn only_start_time_settings_need_a_restart() {
        let old = config("bind = 'tcp://*:1'\n[[limits]]\nname='a'\nmax_requests=1\nin_seconds=1\n");
        let limits_only = config("bind = 'tcp://*:1'\n[[limits]]\nname='a'\nmax_requests=5\nin_seconds=1\n");
        assert!(restart_only_changes(&old, &limits_only).is_empty());
        let moved = config("bind = 'tcp://*:2'\nmetrics_bind = '127.0.0.1:0'\nmax_message_size = 100\n");
        assert_eq!(restart_only_changes(&old, &moved), ["bind", "max_message_size", "metrics_bind"]);
    }

    #[test]
    fn peers_apply_at_once_and_the_other_peering_settings_need_a_restart() {
        let trio = config("peer_bind = 'tcp://*:7778'\npeers = ['tcp://b:7778', 'tcp://c:7778']\nnode_id = 'a'\n");
        let four = config(
            "peer_bind = 'tcp://*:7778'\npeers = ['tcp://b:7778', 'tcp://c:7778', 'tcp://d:7778']\nnode_id = 'a'\n",
        );
        assert!(restart_only_changes(&trio, &four).is_empty(), "peers reload");
        let listed: Vec<&str> = changed_peers(&trio, &four).unwrap().iter().map(|p| p.endpoint.as_str()).collect();
        assert_eq!(listed, ["tcp://b:7778", "tcp://c:7778", "tcp://d:7778"]);
        assert!(changed_peers(&trio, &trio).is_none());
        let renamed = config(
            "peer_bind = 'tcp://*:7779'\npeers = ['tcp://b:7778', 'tcp://c:7778']\nnode_id = 'x'\npeer_grace = 2.0\n",
        );
        assert_eq!(restart_only_changes(&trio, &renamed), ["peer_bind", "node_id", "peer_grace"]);
        assert!(changed_peers(&trio, &renamed).is_none());
        assert_eq!(restart_only_changes(&trio, &config("")), ["peer_bind (peering on or off)"]);
        assert!(changed_peers(&trio, &config("")).is_none(), "peering off needs a restart");
    }

    #[test]
    fn the_file_is_read_with_the_flags_winning() {
        let path = std::env::temp_dir().join(format!("locker-reload-{}.toml", std::process::id()));
        std::fs::write(&path, "[[limits]]\nname='default'\nmax_requests=3\nin_seconds=2\n").unwrap();
        let flags = Flags { max_requests: Some(9), ..Flags::default() };
        let reload = Reload::new(path.clone(), flags, config(""));
        let read = reload.read().unwrap();
        assert_eq!((read.default.quota().max_requests(), read.default.quota().in_seconds()), (9, 2.0));
        std::fs::write(&path, "[[limits]]\nname='default'\n").unwrap();
        assert!(reload.read().is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
