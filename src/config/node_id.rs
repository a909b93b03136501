//! A peered locker's id, which must stay the same when the locker
//! restarts: peers tell one run of a locker from the next by the id (a run
//! under the same id knows its earlier run may have granted, and owns none
//! of the slot it joins in), while a new id is a new member that owns a
//! full share at once, so a restart under a new id could grant its
//! earlier run's share a second time.
//!
//! So the id is never made from something that changes between runs (the
//! process id, the start time). It is, in order: `--node-id`; the id the
//! state file kept from the locker's last run; `<hostname>-<port>` of the
//! PUB socket, which is what peers list; or, with a state file but no fixed
//! port, a new id that the file then keeps. With none of these a peered
//! locker refuses to start. This module only reads the host name; the
//! daemon reads the state file and picks (`NodeId::choose`).

/// Where a peered locker's id comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeId {
    /// `--node-id` (`node_id` in the file): always this one.
    Given(String),
    /// `<hostname>-<port>` of the PUB socket, unless the state file keeps
    /// an earlier run's id.
    Derived(String),
    /// Nothing stable to make one from: the state file's, or a new one
    /// that the state file keeps from now on.
    Kept,
}

impl NodeId {
    /// The id of a locker that publishes on `bind` (resolved) and keeps a
    /// state file when `kept_in_state`; `None` when none would survive a
    /// restart.
    pub fn of(given: Option<String>, bind: &str, kept_in_state: bool) -> Option<NodeId> {
        match (given, derived(host_name().as_deref(), bind)) {
            (Some(id), _) => Some(NodeId::Given(id)),
            (None, Some(id)) => Some(NodeId::Derived(id)),
            (None, None) => kept_in_state.then_some(NodeId::Kept),
        }
    }

    /// The id this run goes by, given the one the state file kept from the
    /// last run (if any): an id that lasts across restarts, whichever way
    /// it was first made.
    pub fn choose(&self, kept: Option<&str>) -> String {
        let kept = kept.filter(|id| valid(id)).map(str::to_owned);
        match self {
            NodeId::Given(id) => id.clone(),
            NodeId::Derived(id) => kept.unwrap_or_else(|| id.clone()),
            NodeId::Kept => kept.unwrap_or_else(fresh),
        }
    }

    /// The id as configured, if one is (given or derived).
    pub fn configured(&self) -> Option<&str> {
        match self {
            NodeId::Given(id) | NodeId::Derived(id) => Some(id),
            NodeId::Kept => None,
        }
    }
}

/// Whether `id` can name a locker: 1 to 64 printable characters without
/// spaces.
pub fn valid(id: &str) -> bool {
    let printable = id.chars().all(|c| c.is_ascii_graphic() || (!c.is_ascii() && !c.is_whitespace()));
    !id.is_empty() && id.len() <= 64 && printable
}

/// `<host>-<port>` for a TCP endpoint with a fixed port, `<host>-<address>`
/// for another transport's fixed address (an `ipc://` path); `None` for a
/// wildcard or ephemeral port, without a host name, or when too long to be
/// an id. Two lockers of one group differ in host or port (they could not
/// both bind it otherwise), so the ids differ too.
pub fn derived(host: Option<&str>, bind: &str) -> Option<String> {
    let host = host?;
    let (transport, address) = bind.split_once("://")?;
    let place = match transport {
        "tcp" => {
            let (_, port) = address.rsplit_once(':')?;
            port.parse::<u16>().ok().filter(|&p| p != 0)?.to_string()
        }
        _ if address.is_empty() || address.contains('*') => return None,
        _ => address.to_owned(),
    };
    Some(format!("{host}-{place}")).filter(|id| valid(id))
}

/// The kernel's host name, spaces made underscores; `None` when there is
/// none (then no id can be derived: a fallback name would be the same on
/// every host).
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().replace(char::is_whitespace, "_"))
        .filter(|h| !h.is_empty())
}

/// A new id for a locker with nothing stable to name it by, which its
/// state file keeps: unlike any other locker's (host, process and start
/// instant), and never made again, since the file keeps it.
fn fresh() -> String {
    let mut host = host_name().unwrap_or_else(|| "locker".to_owned());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let run = format!("{}-{:x}", std::process::id(), nanos & 0xff_ffff);
    while host.len() + 1 + run.len() > 64 {
        host.pop();
    }
    format!("{host}-{run}")
}
