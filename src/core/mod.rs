//! The pure core: limits, slots, token buckets, semaphore leases and the
//! decision table.
//!
//! Nothing under `core` reads a clock, logs, or touches a socket. Every
//! decision takes `now` (nanoseconds since the Unix epoch) as an argument,
//! which makes the rules deterministic under test and embeddable without a
//! daemon.

pub mod ask;
pub mod bucket;
pub mod limit;
pub mod locker;
pub mod rule;
pub mod semaphore;
pub mod time;
pub mod window;

pub use ask::{Verdict, Want};
pub use limit::{Algorithm, Limit, LimitError, Quota, DEFAULT_LIMIT};
pub use locker::{AskError, LimitId, LimitStats, Locker};
pub use time::Nanos;
