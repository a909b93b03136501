//! `PermitPool`: a batch of permits fetched in one round trip and handed out
//! locally, so that a busy caller can go far beyond one round trip per
//! permit.
//!
//! The pool asks with `up_to` for up to `batch` permits and hands them out
//! one by one. It never hands out more than the locker granted, and a batch
//! lapses when the slot it was granted in ends, so permits of one slot are
//! never used in the next: the limit stays exact. The bookkeeping (`Permits`)
//! takes `now` and does no I/O; `PermitPool` adds the client.

use std::time::{Duration, Instant};

use super::{Client, ClientError};
use crate::wire::{Ask, GoReply};

/// Permits in hand and when they lapse; pure bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Permits {
    left: u64,
    /// When the batch in hand stops being usable: a millisecond before
    /// `slot_end`.
    lapses_at: Option<Instant>,
    /// The latest instant the batch's slot can end.
    slot_end: Option<Instant>,
    /// After a sorry, no point asking again before its retry hint.
    quiet_until: Option<Instant>,
}

impl Permits {
    /// No permits in hand.
    pub fn new() -> Permits {
        Permits::default()
    }

    /// Hands out one permit if one is in hand and its slot has not ended.
    pub fn take(&mut self, now: Instant) -> bool {
        if self.lapses_at.is_some_and(|t| now >= t) {
            self.left = 0;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }

    /// Whether asking the locker now could help: not before a sorry's retry
    /// hint, and not in the last millisecond of a batch's slot, where a new
    /// batch would lapse as soon as it came.
    pub fn may_ask(&self, now: Instant) -> bool {
        let hushed = self.quiet_until.is_some_and(|t| now < t);
        let closing = self.lapses_at.is_some_and(|t| now >= t) && self.slot_end.is_some_and(|t| now < t);
        !hushed && !closing
    }

    /// Takes in the locker's answer to a batch ask sent at `sent`. The batch
    /// lapses a millisecond before the slot's end as the reply gives it
    /// (rounded up, and measured from a decision made after `sent`), so a
    /// permit is never handed out after its slot ended.
    pub fn refill(&mut self, sent: Instant, reply: &GoReply) {
        if !reply.ok {
            self.left = 0;
            self.quiet_until = Some(sent + Duration::from_millis(reply.retry_after_ms));
            return;
        }
        let slot_end = sent + Duration::from_millis(reply.reset_after_ms);
        *self = Permits {
            left: u64::from(reply.granted.unwrap_or(0)),
            lapses_at: Some(slot_end - Duration::from_millis(1).min(slot_end - sent)),
            slot_end: Some(slot_end),
            quiet_until: None,
        };
    }

    /// Permits in hand (some may have lapsed).
    pub fn left(&self) -> u64 {
        self.left
    }
}

/// A client that fetches permits of one (limit, key) in batches.
///
/// Each round trip asks with `up_to` for up to `batch` permits; `take` hands
/// them out without a round trip until they are spent or their slot is
/// about to end. Meant for fixed-window limits, whose replies say when the
/// slot ends.
///
/// # Examples
///
/// Five permits per slot, fetched two at a time:
///
/// ```
/// # use std::sync::atomic::AtomicBool;
/// # use locker::config::{AlgorithmName, FileConfig, FileLimit, Flags, ServeConfig};
/// # let api = FileLimit { name: "api".into(), max_requests: 5, in_seconds: Some(86_400.0), algorithm: AlgorithmName::FixedWindow, burst: None, margin_ms: None, hold_ms: None, store_failure: None, allow_reset: None, parent: None, shadow: None, period: None, time_zone: None, line: 0 };
/// # let file = FileConfig { limits: vec![api], ..FileConfig::default() };
/// # let flags = Flags { bind: Some("tcp://127.0.0.1:*".into()), ..Flags::default() };
/// # let server = locker::daemon::Server::bind(&ServeConfig::resolve(flags, file)?)?;
/// # let endpoint = server.endpoint().to_owned();
/// # std::thread::spawn(move || server.run(&AtomicBool::new(false)));
/// use std::time::Duration;
/// use locker::{Client, PermitPool};
///
/// let client = Client::new([endpoint], Duration::from_secs(1))?;
/// let mut pool = PermitPool::new(client, Some("api"), None, 2);
/// let mut go = 0;
/// for _ in 0..10 {
///     if pool.take()? {
///         go += 1;
///     }
/// }
/// assert_eq!(go, 5); // never more than the locker granted
/// // Batches of 2, 2 and 1, then one sorry; after it the pool stays quiet
/// // until the sorry's retry hint.
/// assert_eq!(pool.round_trips(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PermitPool {
    client: Client,
    limit: Option<String>,
    key: Option<String>,
    batch: u64,
    permits: Permits,
    round_trips: u64,
}

impl PermitPool {
    /// A pool over `client` for `limit` (the default limit when `None`) and
    /// `key`, fetching up to `batch` permits per round trip. A batch larger
    /// than the limit's capacity asks for the capacity.
    pub fn new(client: Client, limit: Option<&str>, key: Option<&str>, batch: u64) -> PermitPool {
        PermitPool {
            client,
            limit: limit.map(str::to_owned),
            key: key.map(str::to_owned),
            batch: batch.max(1),
            permits: Permits::new(),
            round_trips: 0,
        }
    }

    /// One permit: `Ok(true)` to go, `Ok(false)` for sorry. A round trip
    /// happens only when the batch in hand is spent or has lapsed, and not
    /// again before a sorry's retry hint has passed.
    pub fn take(&mut self) -> Result<bool, ClientError> {
        let now = Instant::now();
        if self.permits.take(now) {
            return Ok(true);
        }
        if !self.permits.may_ask(now) {
            return Ok(false);
        }
        let ask = Ask { limit: self.limit.as_deref(), key: self.key.as_deref(), ..Ask::new().cost(self.batch).up_to() };
        self.round_trips += 1;
        let reply = self.client.ask(&ask)?;
        self.permits.refill(now, &reply);
        // The permit is used from now on, after the locker's decision.
        Ok(self.permits.take(Instant::now()))
    }

    /// Permits in hand.
    pub fn left(&self) -> u64 {
        self.permits.left()
    }

    /// Batch asks sent so far.
    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ok: bool, granted: u32, reset_after_ms: u64, retry_after_ms: u64) -> GoReply {
        GoReply {
            ok,
            limit: 1000,
            remaining: 0,
            retry_after_ms,
            reset_after_ms,
            granted: ok.then_some(granted),
            wait_ms: None,
            shadow_sorry: false,
        }
    }

    #[test]
    fn hands_out_exactly_what_was_granted() {
        let t0 = Instant::now();
        let mut p = Permits::new();
        assert!(!p.take(t0), "nothing in hand yet");
        p.refill(t0, &reply(true, 3, 500, 0));
        let handed = (0..10).filter(|_| p.take(t0)).count();
        assert_eq!(handed, 3);
    }

    #[test]
    fn a_batch_lapses_before_its_slot_ends() {
        let t0 = Instant::now();
        let mut p = Permits::new();
        p.refill(t0, &reply(true, 5, 10, 0));
        assert!(p.take(t0 + Duration::from_millis(8)));
        assert!(!p.take(t0 + Duration::from_millis(9)), "the slot may end at 9.000001 ms");
        assert_eq!(p.left(), 0);
    }

    #[test]
    fn no_batch_is_asked_for_in_the_last_millisecond_of_a_slot() {
        let t0 = Instant::now();
        let mut p = Permits::new();
        p.refill(t0, &reply(true, 1, 10, 0));
        assert!(p.take(t0));
        assert!(p.may_ask(t0 + Duration::from_millis(5)), "spent early: ask for more");
        assert!(!p.may_ask(t0 + Duration::from_millis(9)), "a batch now would lapse at once");
        assert!(p.may_ask(t0 + Duration::from_millis(10)), "the next slot has begun");
    }

    #[test]
    fn a_sorry_keeps_the_pool_quiet_until_its_retry_hint() {
        let t0 = Instant::now();
        let mut p = Permits::new();
        p.refill(t0, &reply(false, 0, 40, 40));
        assert!(!p.may_ask(t0 + Duration::from_millis(39)));
        assert!(p.may_ask(t0 + Duration::from_millis(40)));
        assert!(!p.take(t0 + Duration::from_millis(40)));
    }
}
