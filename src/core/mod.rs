//! The pure core: limits, slots and the decision table.
//!
//! Nothing under `core` reads a clock, logs, or touches a socket. Every
//! decision takes `now` (nanoseconds since the Unix epoch) as an argument,
//! which makes the rules deterministic under test and embeddable without a
//! daemon.

pub mod keys;
pub mod limit;
pub mod locker;
pub mod time;
pub mod window;

pub use limit::{Limit, LimitError, Quota, DEFAULT_LIMIT};
pub use locker::{AskError, LimitId, LimitStats, Locker};
pub use time::Nanos;
pub use window::Verdict;
