//! What a caller asks of the core, and the verdict it gets back.
//!
//! At the core's edge, one value per request: a `PermitAsk` (go or sorry),
//! an `AcquireAsk` and a `HeartbeatAsk` (leases), with every number named,
//! built once from the wire by the service and passed by reference. Inside,
//! the checked `Want` is shared by every counting kind (`fixed`, `bucket`)
//! so that the locker can dispatch without translating. Plain data, with
//! the errors any request can meet (`TableError`) and the one check every
//! request that may wait shares (`wait_ns`); the other checks are the
//! table's and the semaphore's, the rules the kinds'.

use super::limit::{LimitId, MAX_HOLD_MS};
use super::time::{Nanos, NANOS_PER_MS};

/// The longest a request may offer to wait (`max_wait_ms`): one hour. Waits
/// hold counts in future slots or leases in a queue, so they are bounded.
pub const MAX_WAIT_MS: u64 = 3_600_000;

/// Errors any request on the table can meet, whatever it asks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("unknown limit {0:?}")]
    UnknownLimit(String),
    #[error("too many live keys: the locker holds at most {0} (see --max-keys)")]
    TooManyKeys(usize),
    #[error("max_wait_ms {0} is above the most a request may wait, {MAX_WAIT_MS}")]
    WaitTooLong(u64),
    #[error("hold_ms {0} is above the longest a request may be held, {}", MAX_HOLD_MS as u64)]
    HoldTooLong(u64),
    #[error("unknown limit {0:?}: a limit sent with terms is created only under --runtime-limits N (runtime_limits in the file), which is 0 here")]
    NoRuntimeLimits(String),
    #[error("limit {name:?} not created: {bound} limits sent with terms exist, the most --runtime-limits allows")]
    RuntimeLimitsFull { name: String, bound: usize },
    #[error("limit {0:?} is configured with other terms: a configured limit keeps its own (send its terms, or none)")]
    TermsDiffer(String),
}

/// A wait in milliseconds as nanoseconds, if it is within `MAX_WAIT_MS`.
#[inline]
pub fn wait_ns(max_wait_ms: u64) -> Result<Nanos, TableError> {
    if max_wait_ms > MAX_WAIT_MS {
        return Err(TableError::WaitTooLong(max_wait_ms));
    }
    Ok(max_wait_ms * NANOS_PER_MS)
}

/// An ask's own hold (`hold_ms`), if it is within the longest a limit may
/// hold (`MAX_HOLD_MS`): a longer one is refused, not cut short, so that a
/// caller never waits on a hold the locker will not keep.
#[inline]
pub fn hold_within(hold_ms: u64) -> Result<(), TableError> {
    match hold_ms as f64 <= MAX_HOLD_MS {
        true => Ok(()),
        false => Err(TableError::HoldTooLong(hold_ms)),
    }
}

/// An ask for permits of one limit, as it arrives: unchecked numbers, named.
///
/// ```
/// use locker::core::{Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};
///
/// let quota = Quota::new(3, 1.0).unwrap();
/// let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![], 100);
/// let limit = locker.find(None).unwrap();
/// // As many as there are, up to 5, for the key "alice".
/// let ask = PermitAsk::new(limit).key("alice").cost(5).up_to();
/// let v = locker.ask(0, &ask).unwrap();
/// assert!(v.go);
/// assert_eq!(v.granted, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermitAsk<'k> {
    /// The limit asked, found once with `Locker::find`.
    pub limit: LimitId,
    /// The key counted; `None` for the limit's unkeyed count.
    pub key: Option<&'k str>,
    /// Permits asked for; 0 peeks without taking.
    pub cost: u64,
    /// Take as many of `cost` as are available (at least one).
    pub up_to: bool,
    /// The longest the caller will wait for a reservation, in
    /// milliseconds; 0 for go-or-sorry now.
    pub max_wait_ms: u64,
    /// The ask's own hold (`hold_ms`), checked here against the longest
    /// allowed; the holding itself is the service's. 0 for none.
    pub hold_ms: u64,
}

impl<'k> PermitAsk<'k> {
    /// One permit of `limit`, unkeyed, now or never.
    pub fn new(limit: LimitId) -> PermitAsk<'k> {
        PermitAsk { limit, key: None, cost: 1, up_to: false, max_wait_ms: 0, hold_ms: 0 }
    }

    /// Counts against `key`.
    pub fn key(self, key: &'k str) -> PermitAsk<'k> {
        PermitAsk { key: Some(key), ..self }
    }

    /// Asks for `cost` permits.
    pub fn cost(self, cost: u64) -> PermitAsk<'k> {
        PermitAsk { cost, ..self }
    }

    /// Takes as many of `cost` as are available.
    pub fn up_to(self) -> PermitAsk<'k> {
        PermitAsk { up_to: true, ..self }
    }

    /// Waits up to `ms` milliseconds for a reservation.
    pub fn max_wait_ms(self, ms: u64) -> PermitAsk<'k> {
        PermitAsk { max_wait_ms: ms, ..self }
    }

    /// Asks to be held up to `ms` milliseconds rather than answered sorry.
    pub fn hold_ms(self, ms: u64) -> PermitAsk<'k> {
        PermitAsk { hold_ms: ms, ..self }
    }
}

/// An acquire of a semaphore, as it arrives: unchecked numbers, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireAsk<'k> {
    /// The semaphore asked.
    pub limit: LimitId,
    /// Must be `None`: a semaphore has no keys.
    pub key: Option<&'k str>,
    /// Capacity to hold, from 1 to the semaphore's capacity.
    pub count: u64,
    /// How long the lease lives without a heartbeat, in milliseconds; the
    /// limit's in_seconds when `None`.
    pub ttl_ms: Option<u64>,
    /// The longest the acquire may wait in the queue, in milliseconds.
    pub max_wait_ms: u64,
}

impl<'k> AcquireAsk<'k> {
    /// `count` of semaphore `limit`, for the default ttl, now or never.
    pub fn new(limit: LimitId, count: u64) -> AcquireAsk<'k> {
        AcquireAsk { limit, key: None, count, ttl_ms: None, max_wait_ms: 0 }
    }
}

/// A heartbeat of a lease, as it arrives: unchecked numbers, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAsk<'k> {
    /// The semaphore the lease is on.
    pub limit: LimitId,
    /// The lease's id, as `acquire` issued it.
    pub lease: &'k str,
    /// The new ttl from now, in milliseconds; the limit's in_seconds when `None`.
    pub ttl_ms: Option<u64>,
    /// The lease's count: with it, a lease the semaphore does not know
    /// (after a restart) is restored if that count is free.
    pub count: Option<u64>,
}

impl<'k> HeartbeatAsk<'k> {
    /// A heartbeat of `lease` on `limit` for the default ttl, restoring nothing.
    pub fn new(limit: LimitId, lease: &'k str) -> HeartbeatAsk<'k> {
        HeartbeatAsk { limit, lease, ttl_ms: None, count: None }
    }
}

/// One checked ask: `cost` permits (0 peeks), all or nothing unless
/// `up_to`, and how long the caller is willing to wait for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// Permits asked for, at most the limit's capacity; 0 peeks without taking.
    pub cost: u32,
    /// Take as many of `cost` as are available (at least one) instead of all or nothing.
    pub up_to: bool,
    /// The longest the caller will wait for a reservation; 0 for go-or-sorry now.
    pub max_wait: Nanos,
}

impl Want {
    /// `cost` permits, now or never.
    pub fn now(cost: u32) -> Want {
        Want { cost, up_to: false, max_wait: 0 }
    }

    /// The fewest permits that make a go: 1 for `up_to`, `cost` otherwise.
    #[inline]
    pub fn need(&self) -> u32 {
        if self.up_to {
            self.cost.min(1)
        } else {
            self.cost
        }
    }

    /// How many permits to grant when `room` are free and at least `need` fit.
    #[inline]
    pub fn grant(&self, room: u32) -> u32 {
        if self.up_to {
            self.cost.min(room)
        } else {
            self.cost
        }
    }
}

/// The answer to one ask: go or sorry, and the numbers a caller needs to
/// plan its next ask. "Sorry" is a value, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the caller may go (after `wait`).
    pub go: bool,
    /// The limit's capacity: max_requests, or a token bucket's burst.
    pub limit: u32,
    /// Permits a new ask could take now, after this one.
    pub remaining: u32,
    /// When not go: nanoseconds until the ask would fit. Zero on go.
    pub retry_after: Nanos,
    /// Nanoseconds until the count is whole again: the current slot's end,
    /// or until a token bucket is full.
    pub reset_after: Nanos,
    /// Permits taken: `cost`, fewer with `up_to`, 0 on sorry or a peek.
    pub granted: u32,
    /// On go: nanoseconds the caller must wait before going (a reservation).
    pub wait: Nanos,
}

impl Verdict {
    /// Sorry: nothing granted; the numbers say what is left and when to
    /// come back. Every sorry is built here; a go is `go`, or a sorry's
    /// numbers with `go`, `granted` and `wait` set.
    #[inline]
    pub const fn sorry(limit: u32, remaining: u32, retry_after: Nanos, reset_after: Nanos) -> Verdict {
        Verdict { go: false, limit, remaining, retry_after, reset_after, granted: 0, wait: 0 }
    }

    /// Go now: `granted` permits taken, `remaining` left.
    #[inline]
    pub const fn go(limit: u32, remaining: u32, reset_after: Nanos, granted: u32) -> Verdict {
        Verdict { go: true, limit, remaining, retry_after: 0, reset_after, granted, wait: 0 }
    }
}

/// A charge may owe at most this many times its limit's capacity: a debt
/// is paid by the slots (or the refill) that follow, and a fixed window
/// keeps one count for each slot a debt reaches into.
pub const MAX_CHARGE_CAPACITIES: u64 = 64;

/// The answer to a charge (`Locker::charge`): permits used before they
/// were asked for, taken whatever is left, past empty if need be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    /// Always a go, with `granted` the cost; `remaining` is 0 while in
    /// debt, and `reset_after` when the count is whole again.
    pub verdict: Verdict,
    /// Permits owed beyond the limit right now, which later asks wait out
    /// (each kind says how, see `Rule::charge`); 0 when none.
    pub debt: u32,
}
