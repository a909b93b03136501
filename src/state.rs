//! The state log: a file that keeps a locker's counts, reservations and
//! leases across restarts (`--state FILE`).
//!
//! After every grant the daemon appends a record of what the grant left
//! behind (a run's cumulative count for a key and slot, a bucket's TAT, a
//! lease and its expiry) before the reply leaves. A record is a few stores
//! into a memory-mapped file, so a killed process loses nothing, and no
//! request pays for a system call. On start the file is read back, its
//! latest live records replayed into the core, and rewritten with only
//! those; compaction does the same while serving, so the file stays
//! proportional to the live state.
//!
//! Everything about keeping state lives in this folder, except each kind's
//! kept form, which is the kind's (`core::kinds::*::kept`), and the
//! daemon's keeper (`daemon::keeper`), which decides when to read, sync and
//! compact and reads the clocks for it. Nothing here reads a clock (times
//! come in as arguments and with the records) or decides go or sorry:
//! - `record`: one record's bytes;
//! - `file`: the file's layout, and reading its good prefix back;
//! - `log`: appending, growing, syncing and compacting the mapped file;
//! - `collapse`: the latest live record of each thing;
//! - `journal`: what a request changed, as records, and `Keep`, where the
//!   service hands them before the call that decided them returns;
//! - `liveness`: which records still say something, and moving them by a
//!   wall-clock step between runs;
//! - `retime`: where a kept count must hold on a clock stepped since it
//!   was written, to the nanosecond;
//! - `restore`: an earlier run's records put back into a locker.

mod collapse;
mod file;
mod journal;
mod liveness;
mod log;
mod record;
mod restore;
mod retime;
#[cfg(test)]
mod tests;

pub use collapse::collapse;
pub use file::{Frames, Header, Problem, Replay, VERSION};
pub use journal::{Journal, Keep};
pub use liveness::{Liveness, Step};
pub use log::{Compacted, Compaction, Prefix, StateLog};
pub use record::{Identity, Record, RuntimeTerms};
pub use restore::{restore, Restored};

/// Why a state file cannot be used. Every message names the file, and those
/// that refuse a whole file say how to start without it.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "state file {path} is not a locker state file; remove it, name another, or start with --state-discard to replace it"
    )]
    NotState { path: String },
    #[error("state file {path}: its header is damaged; start with --state-discard to replace it")]
    DamagedHeader { path: String },
    #[error(
        "state file {path} has format version {found}, this locker reads version {VERSION}; start with --state-discard to replace it"
    )]
    Version { path: String, found: u32 },
    #[error(
        "state file {path} was written for other limits (names, kinds or quotas differ); start with --state-discard to replace it"
    )]
    OtherLimits { path: String },
}

impl StateError {
    /// Whether the file was refused as a whole (not a read or write
    /// failure): starting with the discard option replaces it.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, StateError::Io { .. })
    }
}

/// A digest of the limits' definitions, for the header: a file written for
/// other limits (whose numbers in the records mean other things) is
/// refused. `description` is any text that changes when they change.
pub fn digest(description: &str) -> u64 {
    let low = crc32fast::hash(description.as_bytes());
    let mut high = crc32fast::Hasher::new_with_initial(0x6c6f_636b);
    high.update(description.as_bytes());
    (u64::from(high.finalize()) << 32) | u64::from(low)
}

/// How a locker keeps its state across restarts (`--state` and friends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// The state file.
    pub path: std::path::PathBuf,
    /// How often what was recorded is synced to the disk, bounding what a
    /// power loss can cost; `None` leaves it to the kernel's writeback.
    pub fsync: Option<std::time::Duration>,
    /// Whether a file that cannot be used (another version, other limits,
    /// not a state file) is replaced instead of refused.
    pub discard: bool,
}
