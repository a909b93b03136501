//! Time as the core sees it: plain nanoseconds since the Unix epoch.
//!
//! The core never reads a clock; every call takes `now` as an argument. That
//! keeps the rules deterministic under test and lets the daemon decide where
//! time comes from (see `daemon::clock`).

/// Nanoseconds since the Unix epoch.
pub type Nanos = u64;

/// Nanoseconds in one millisecond.
pub const NANOS_PER_MS: u64 = 1_000_000;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Whole milliseconds, rounded up, so a caller that waits this long is never early.
pub fn ceil_ms(ns: u64) -> u64 {
    ns.div_ceil(NANOS_PER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_ms_rounds_up_partial_milliseconds() {
        assert_eq!(ceil_ms(0), 0);
        assert_eq!(ceil_ms(1), 1);
        assert_eq!(ceil_ms(NANOS_PER_MS), 1);
        assert_eq!(ceil_ms(NANOS_PER_MS + 1), 2);
    }
}
