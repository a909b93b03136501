//! The I/O shell around the core: the clock and the socket loop.
//!
//! Everything that waits, reads time or touches a socket on the locker's
//! side lives here, and nothing here decides go or sorry.

mod admins;
mod calls;
pub mod clock;
pub mod fds;
pub mod keeper;
pub mod metrics;
pub mod reload;
pub mod server;
mod serving;
pub mod signals;
pub mod store;
pub mod transport;
mod trim;
mod watch;
pub mod zap;

pub use clock::Clock;
pub use server::{Server, ServerError};
