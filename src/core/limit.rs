//! What a limit is: a name, a quota and an algorithm, validated once so that
//! an invalid limit cannot be represented anywhere else in the program.
//!
//! This module only describes limits; counting against them lives in
//! `core::kinds::fixed`, `core::kinds::bucket`, `core::kinds::semaphore` and `core::locker`.

use std::num::{NonZeroU32, NonZeroU64};

use super::time::{Nanos, NANOS_PER_SEC};

pub mod calendar;
pub mod parents;
mod terms;
pub use calendar::{Calendar, Period};
pub use parents::{ParentError, MAX_LEVELS};
pub use terms::TermsError;

/// The shortest slot a limit may have: one millisecond.
pub const MIN_SLOT_SECONDS: f64 = 0.001;

/// The longest slot a limit may have: one day. Longer slots are almost
/// certainly a unit mistake, and a day keeps every product of slot length
/// and count far from overflowing a `u64` of nanoseconds.
pub const MAX_SLOT_SECONDS: f64 = 86_400.0;

/// The longest slot of a fixed window counted in whole units of Unix time
/// (`Quota::long`): a year of 365 days, envoyproxy/ratelimit's `year`.
pub const MAX_LONG_SLOT_SECONDS: f64 = 365.0 * 86_400.0;

/// The longest a token bucket may take to refill from empty (`burst`
/// tokens at the refill rate): a year. A bucket's theoretical arrival time
/// runs at most this far ahead of `now`, so with times in nanoseconds since
/// the epoch every sum stays far below `u64::MAX`; a deeper bucket could
/// saturate it and never run out again.
pub const MAX_BUCKET_REFILL_SECONDS: u64 = 365 * 86_400;

/// The name of the limit that the command-line flags define, used when a
/// request names no limit.
pub const DEFAULT_LIMIT: &str = "default";

/// The longest a limit may hold an ask that would get sorry, in
/// milliseconds: a minute, far beyond any client's sensible timeout.
pub const MAX_HOLD_MS: f64 = 60_000.0;

/// Why a limit could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("max_requests must be at least 1")]
    ZeroMaxRequests,
    #[error("in_seconds must be a number from {MIN_SLOT_SECONDS} to {MAX_SLOT_SECONDS}, got {0}")]
    SlotOutOfRange(f64),
    #[error("a limit name must be 1 to 64 printable characters without spaces, got {0:?}")]
    BadName(String),
    #[error("burst must be at least 1")]
    ZeroBurst,
    #[error(
        "burst {burst} at max_requests {max_requests} per {in_seconds} s takes {refill_days} days to refill; \
         a token bucket may take at most 365 days (lower burst or raise the rate)"
    )]
    BucketTooDeep { burst: u32, max_requests: u32, in_seconds: f64, refill_days: u64 },
    #[error("hold_ms must be a number from 0 to {MAX_HOLD_MS}, got {0}")]
    HoldOutOfRange(f64),
    #[error("hold_ms is for the counting kinds; a semaphore's acquire waits with max_wait_ms")]
    HoldOnSemaphore,
    #[error("margin_ms is only for algorithm = \"rolling-window\"")]
    MarginWithoutRolling,
    #[error("margin_ms must be a number from 0 to the window's length ({most_ms} ms), got {got}")]
    MarginOutOfRange { got: f64, most_ms: f64 },
    #[error("period is only for algorithm = \"fixed-window\"")]
    PeriodWithoutFixed,
}

/// How a limit counts. Every kind shares the quota's numbers, read per kind:
/// - `FixedWindow`: at most max_requests in every slot of in_seconds, slots
///   aligned to the Unix epoch;
/// - `TokenBucket`: a bucket of `burst` tokens refilled at max_requests per
///   in_seconds, computed from elapsed time (GCRA), so grants are spaced
///   evenly at the steady rate once the burst is spent;
/// - `RollingWindow`: at most max_requests in ANY interval of in_seconds,
///   not only in aligned slots;
/// - `Semaphore`: at most max_requests held at once by leases; in_seconds is
///   the ttl of a lease whose acquire names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Counts in fixed timeslots (the default).
    #[default]
    FixedWindow,
    /// A token bucket holding at most `burst` tokens.
    TokenBucket {
        /// The bucket's capacity: the most permits granted at once after a pause.
        burst: NonZeroU32,
    },
    /// A count of concurrent holders, taken by leases.
    Semaphore,
    /// Counts over a window that rolls with time: no interval of
    /// in_seconds holds more than max_requests.
    RollingWindow,
}

impl Algorithm {
    /// A token bucket of `burst` tokens.
    pub fn token_bucket(burst: u32) -> Result<Algorithm, LimitError> {
        NonZeroU32::new(burst).map(|burst| Algorithm::TokenBucket { burst }).ok_or(LimitError::ZeroBurst)
    }

    /// The name used in config files and stats.
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed-window",
            Algorithm::TokenBucket { .. } => "token-bucket",
            Algorithm::Semaphore => "semaphore",
            Algorithm::RollingWindow => "rolling-window",
        }
    }
}

/// At most `max_requests` go in every slot of `slot` nanoseconds, or in
/// every calendar period (a day, week or month of a time zone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    max_requests: NonZeroU32,
    /// The slot length; a calendar period's longest (see `slot_ns`).
    slot: NonZeroU64,
    /// Calendar slots, whose bounds come from the zone's rules rather than
    /// from multiples of `slot`.
    calendar: Option<Calendar>,
}

impl Quota {
    /// Builds a quota from the seed's names: `max_requests` in `in_seconds`.
    pub fn new(max_requests: u32, in_seconds: f64) -> Result<Quota, LimitError> {
        let max_requests = NonZeroU32::new(max_requests).ok_or(LimitError::ZeroMaxRequests)?;
        if !(MIN_SLOT_SECONDS..=MAX_SLOT_SECONDS).contains(&in_seconds) {
            return Err(LimitError::SlotOutOfRange(in_seconds));
        }
        let slot = (in_seconds * NANOS_PER_SEC as f64).round() as u64;
        let slot = NonZeroU64::new(slot).ok_or(LimitError::SlotOutOfRange(in_seconds))?;
        Ok(Quota { max_requests, slot, calendar: None })
    }

    /// A fixed window's quota of up to `MAX_LONG_SLOT_SECONDS`, slots
    /// aligned to the Unix epoch as every quota's: envoyproxy/ratelimit's
    /// units of a week, a month (30 days) and a year (365 days), which it
    /// counts so. Only for a fixed window, whose sums of slot lengths stay
    /// far from overflowing (a bucket's and a rolling window's keep
    /// `Quota::new`'s day).
    pub fn long(max_requests: u32, in_seconds: f64) -> Result<Quota, LimitError> {
        if !(MIN_SLOT_SECONDS..=MAX_LONG_SLOT_SECONDS).contains(&in_seconds) {
            return Err(LimitError::SlotOutOfRange(in_seconds));
        }
        let day = Quota::new(max_requests, MAX_SLOT_SECONDS)?;
        let slot = NonZeroU64::new((in_seconds * NANOS_PER_SEC as f64).round() as u64).expect("at least a millisecond");
        Ok(Quota { slot, ..day })
    }

    /// `max_requests` in every period of `calendar`.
    pub fn per_period(max_requests: u32, calendar: Calendar) -> Result<Quota, LimitError> {
        let max_requests = NonZeroU32::new(max_requests).ok_or(LimitError::ZeroMaxRequests)?;
        let slot = NonZeroU64::new(calendar.longest()).expect("a period lasts");
        Ok(Quota { max_requests, slot, calendar: Some(calendar) })
    }

    /// The calendar period the slots are, if they are one.
    pub fn calendar(&self) -> Option<Calendar> {
        self.calendar
    }

    /// Whether `other` has the same slots: the same length, or the same
    /// calendar period and zone.
    pub fn same_slots(&self, other: &Quota) -> bool {
        self.slot == other.slot && self.calendar == other.calendar
    }

    /// The most permits granted in one slot.
    pub fn max_requests(&self) -> u32 {
        self.max_requests.get()
    }

    /// The slot length in nanoseconds; for calendar slots, the longest a
    /// period lasts (an upper bound: its bounds are `slot_start` and
    /// `slot_end`).
    pub fn slot_ns(&self) -> Nanos {
        self.slot.get()
    }

    /// The slot length in seconds, as configured.
    pub fn in_seconds(&self) -> f64 {
        self.slot.get() as f64 / NANOS_PER_SEC as f64
    }

    /// The number of the slot that `now` falls in. Slots are aligned to the
    /// Unix epoch so that lockers on different hosts agree on boundaries
    /// without talking to each other.
    /// Calendar slots are numbered from 1970 in their zone (see `Calendar`).
    #[inline]
    pub fn slot_of(&self, now: Nanos) -> u64 {
        match self.calendar {
            None => now / self.slot.get(),
            Some(c) => c.slot_of(now),
        }
    }

    /// The same count over a slot `by` nanoseconds longer (never a
    /// calendar's: only a rolling window widens).
    pub fn widened(self, by: Nanos) -> Quota {
        Quota { slot: self.slot.saturating_add(by), ..self }
    }

    /// When slot number `slot` begins.
    pub fn slot_start(&self, slot: u64) -> Nanos {
        match self.calendar {
            None => slot.saturating_mul(self.slot.get()),
            Some(c) => c.slot_start(slot),
        }
    }

    /// When slot number `slot` ends: the first instant of the next.
    pub fn slot_end(&self, slot: u64) -> Nanos {
        match self.calendar {
            None => slot.saturating_add(1).saturating_mul(self.slot.get()),
            Some(c) => c.slot_end(slot),
        }
    }
}

/// The refill interval of a token bucket for `quota`: the time one token
/// takes to come back, rounded up so that the rate is never exceeded.
pub fn bucket_interval(quota: Quota) -> Nanos {
    quota.slot_ns().div_ceil(u64::from(quota.max_requests())).max(1)
}

/// Refuses a token bucket that takes longer than
/// `MAX_BUCKET_REFILL_SECONDS` to refill, computed without overflow.
fn check_bucket_depth(quota: Quota, burst: u32) -> Result<(), LimitError> {
    let depth = u128::from(bucket_interval(quota)) * u128::from(burst);
    let most = u128::from(MAX_BUCKET_REFILL_SECONDS) * u128::from(NANOS_PER_SEC);
    if depth <= most {
        return Ok(());
    }
    Err(LimitError::BucketTooDeep {
        burst,
        max_requests: quota.max_requests(),
        in_seconds: quota.in_seconds(),
        refill_days: (depth / (86_400 * u128::from(NANOS_PER_SEC))) as u64,
    })
}

/// An index into the locker's limits, found once per request. It lives
/// here, below the asks and the kinds that carry it, so that none of them
/// imports the table that hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimitId(pub(in crate::core) usize);

/// A named quota with the algorithm that enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    name: String,
    /// The quota as counted: a rolling window's is widened by its margin.
    quota: Quota,
    algorithm: Algorithm,
    /// A rolling window's margin (see `with_margin`); 0 for other kinds.
    margin: Nanos,
    /// How long an ask that would get sorry is held for a go (see
    /// `with_hold`); 0 answers sorry at once.
    hold: Nanos,
    /// With a store: whether asks are decided by this locker alone while
    /// the store cannot be reached (see `with_fail_open`).
    fail_open: bool,
    /// Whether one key's count may be cleared on request (see
    /// `with_reset_allowed`).
    allow_reset: bool,
    /// The limit this one counts under, by name (see `with_parent`).
    parent: Option<Box<str>>,
    /// Whether its would-be sorries are answered go (see `with_shadow`).
    shadow: bool,
}

impl Limit {
    /// Builds a fixed-window limit, checking that the name is usable on the
    /// wire and in logs.
    pub fn new(name: &str, quota: Quota) -> Result<Limit, LimitError> {
        Limit::with_algorithm(name, quota, Algorithm::FixedWindow)
    }

    /// Builds a limit of any kind.
    pub fn with_algorithm(name: &str, quota: Quota, algorithm: Algorithm) -> Result<Limit, LimitError> {
        let printable = name.chars().all(|c| c.is_ascii_graphic() || (!c.is_ascii() && !c.is_whitespace()));
        if name.is_empty() || name.len() > 64 || !printable {
            return Err(LimitError::BadName(name.to_owned()));
        }
        if quota.calendar().is_some() && algorithm != Algorithm::FixedWindow {
            return Err(LimitError::PeriodWithoutFixed);
        }
        if let Algorithm::TokenBucket { burst } = algorithm {
            check_bucket_depth(quota, burst.get())?;
        }
        Ok(Limit {
            name: name.to_owned(),
            quota,
            algorithm,
            margin: 0,
            hold: 0,
            fail_open: false,
            allow_reset: false,
            parent: None,
            shadow: false,
        })
    }

    /// The same rolling window counted over in_seconds plus `margin_ms`:
    /// max_requests in any in_seconds + margin, so that a resource that
    /// itself allows max_requests in any in_seconds never refuses a go
    /// whose way from the locker to it varies by less than the margin.
    pub fn with_margin(self, margin_ms: f64) -> Result<Limit, LimitError> {
        let most_ms = self.quota.in_seconds() * 1_000.0;
        if !(0.0..=most_ms).contains(&margin_ms) {
            return Err(LimitError::MarginOutOfRange { got: margin_ms, most_ms });
        }
        if self.algorithm != Algorithm::RollingWindow {
            return if margin_ms == 0.0 { Ok(self) } else { Err(LimitError::MarginWithoutRolling) };
        }
        let margin = (margin_ms * 1_000_000.0).round() as Nanos;
        Ok(Limit { quota: self.quota.widened(margin), margin: self.margin + margin, ..self })
    }

    /// The same limit holding an ask that would get sorry for up to
    /// `hold_ms`, to answer go as soon as the limit allows within it.
    pub fn with_hold(self, hold_ms: f64) -> Result<Limit, LimitError> {
        if !(0.0..=MAX_HOLD_MS).contains(&hold_ms) {
            return Err(LimitError::HoldOutOfRange(hold_ms));
        }
        if self.algorithm == Algorithm::Semaphore && hold_ms > 0.0 {
            return Err(LimitError::HoldOnSemaphore);
        }
        Ok(Limit { hold: (hold_ms * 1_000_000.0).round() as Nanos, ..self })
    }

    /// The same limit, with a store, deciding from this locker's own
    /// counts while the store cannot be reached (`true`: fail open, each
    /// locker granting up to the limit alone) instead of answering sorry
    /// (`false`, the default: fail closed).
    pub fn with_fail_open(self, fail_open: bool) -> Limit {
        Limit { fail_open, ..self }
    }

    /// The same limit, letting a caller clear one key's count (op
    /// `reset`) when `allow` is true; refused otherwise (the default).
    pub fn with_reset_allowed(self, allow: bool) -> Limit {
        Limit { allow_reset: allow, ..self }
    }

    /// Whether one key's count may be cleared on request.
    pub fn allows_reset(&self) -> bool {
        self.allow_reset
    }

    /// The same limit counting under the limit named `parent` (none for
    /// `None`): an ask of it takes its cost from the parent too, and from
    /// the parent's own parent, all or nothing. Which names may be
    /// parents is checked over the whole table (`parents::check`).
    pub fn with_parent(self, parent: Option<&str>) -> Limit {
        Limit { parent: parent.map(Box::from), ..self }
    }

    /// The name of the limit this one counts under, if any.
    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// The same limit in shadow (`true`) or not: an ask of it is decided
    /// and counted as usual, but one it would refuse is answered go and
    /// charged nothing (the count stays where the sorry left it), never
    /// held or reserved, and counted as a shadow sorry. For watching a new
    /// limit before it refuses anyone.
    pub fn with_shadow(self, shadow: bool) -> Limit {
        Limit { shadow, ..self }
    }

    /// Whether the limit is in shadow (see `with_shadow`).
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// Whether the limit fails open when its store cannot be reached.
    pub fn fails_open(&self) -> bool {
        self.fail_open
    }

    /// How long an ask that would get sorry is held, in nanoseconds.
    pub fn hold(&self) -> Nanos {
        self.hold
    }

    /// A rolling window's margin in nanoseconds; 0 for other kinds.
    pub fn margin(&self) -> Nanos {
        self.margin
    }

    /// in_seconds as configured, without a rolling window's margin.
    pub fn in_seconds(&self) -> f64 {
        (self.quota.slot_ns() - self.margin) as f64 / NANOS_PER_SEC as f64
    }

    /// How the limit counts.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The most permits one ask may take: the burst of a token bucket,
    /// max_requests otherwise.
    pub fn capacity(&self) -> u32 {
        match self.algorithm {
            Algorithm::TokenBucket { burst } => burst.get(),
            Algorithm::FixedWindow | Algorithm::Semaphore | Algorithm::RollingWindow => self.quota.max_requests(),
        }
    }

    /// The most one locker can grant of this limit in one slot (a bucket's
    /// period): `max_requests`, plus the burst for a token bucket, which
    /// starts a period full and refills `max_requests` over it. A peer's
    /// count above this cannot be true.
    pub fn most_per_slot(&self) -> u32 {
        match self.algorithm {
            Algorithm::TokenBucket { burst } => self.quota.max_requests().saturating_add(burst.get()),
            Algorithm::FixedWindow | Algorithm::Semaphore | Algorithm::RollingWindow => self.quota.max_requests(),
        }
    }

    /// A digest of the limit's definition (kind, max_requests, slot length,
    /// burst, and a calendar's period and zone), the same on every locker
    /// and every build: peers compare it so that counts of two different
    /// limits that share a name are never added up. FNV-1a over a
    /// canonical text, since it only has to tell honest configurations
    /// apart.
    pub fn digest(&self) -> u64 {
        let burst = match self.algorithm {
            Algorithm::TokenBucket { burst } => burst.get(),
            _ => 0,
        };
        let mut text =
            format!("{}/{}/{}/{}", self.algorithm.name(), self.quota.max_requests(), self.quota.slot_ns(), burst);
        if let Some(c) = self.quota.calendar() {
            text.push_str(&format!("/{}/{}", c.period().name(), c.zone_name()));
        }
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }

    /// The limit's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limit's quota as counted: a rolling window's slot includes its
    /// margin.
    pub fn quota(&self) -> Quota {
        self.quota
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_rejects_zero_and_out_of_range_slots() {
        assert_eq!(Quota::new(0, 1.0), Err(LimitError::ZeroMaxRequests));
        assert!(matches!(Quota::new(1, 0.0005), Err(LimitError::SlotOutOfRange(_))));
        assert!(matches!(Quota::new(1, f64::NAN), Err(LimitError::SlotOutOfRange(_))));
        assert!(matches!(Quota::new(1, f64::INFINITY), Err(LimitError::SlotOutOfRange(_))));
        assert!(matches!(Quota::new(1, -1.0), Err(LimitError::SlotOutOfRange(_))));
    }

    #[test]
    fn quota_accepts_the_seed_example_and_a_millisecond_slot() {
        let q = Quota::new(5, 0.8).unwrap();
        assert_eq!(q.max_requests(), 5);
        assert_eq!(q.slot_ns(), 800_000_000);
        assert_eq!(Quota::new(1, 0.001).unwrap().slot_ns(), 1_000_000);
    }

    #[test]
    fn slots_are_aligned_to_the_epoch() {
        let q = Quota::new(5, 0.8).unwrap();
        assert_eq!(q.slot_of(0), 0);
        assert_eq!(q.slot_of(799_999_999), 0);
        assert_eq!(q.slot_of(800_000_000), 1);
        assert_eq!(q.slot_end(1), 1_600_000_000);
    }

    #[test]
    fn limit_names_must_be_printable() {
        let q = Quota::new(1, 1.0).unwrap();
        assert!(Limit::new("api", q).is_ok());
        assert!(Limit::new("", q).is_err());
        assert!(Limit::new("has space", q).is_err());
        assert!(Limit::new(&"x".repeat(65), q).is_err());
    }

    #[test]
    fn capacity_is_the_burst_of_a_bucket_and_max_requests_otherwise() {
        let q = Quota::new(5, 1.0).unwrap();
        assert_eq!(Algorithm::token_bucket(0), Err(LimitError::ZeroBurst));
        let bucket = Limit::with_algorithm("b", q, Algorithm::token_bucket(20).unwrap()).unwrap();
        assert_eq!(bucket.capacity(), 20);
        assert_eq!(Limit::with_algorithm("s", q, Algorithm::Semaphore).unwrap().capacity(), 5);
        assert_eq!(Limit::new("w", q).unwrap().algorithm().name(), "fixed-window");
    }

    #[test]
    fn a_peer_can_grant_at_most_max_per_slot_and_a_burst_more_from_a_bucket() {
        let q = Quota::new(5, 1.0).unwrap();
        assert_eq!(Limit::new("w", q).unwrap().most_per_slot(), 5);
        let bucket = Limit::with_algorithm("b", q, Algorithm::token_bucket(20).unwrap()).unwrap();
        assert_eq!(bucket.most_per_slot(), 25);
    }

    #[test]
    fn the_digest_tells_definitions_apart_and_is_pinned() {
        let w = |max, secs| Limit::new("api", Quota::new(max, secs).unwrap()).unwrap().digest();
        assert_eq!(w(1000, 1.0), w(1000, 1.0));
        assert_ne!(w(1000, 1.0), w(2000, 1.0));
        assert_ne!(w(1000, 1.0), w(1000, 2.0));
        let b = Limit::with_algorithm("api", Quota::new(1000, 1.0).unwrap(), Algorithm::token_bucket(1000).unwrap());
        assert_ne!(b.unwrap().digest(), w(1000, 1.0));
        // Lockers of different builds compare digests: the value must not drift.
        assert_eq!(w(1000, 1.0), 0x4900_c190_f19f_056f, "{:#x}", w(1000, 1.0));
    }

    #[test]
    fn a_calendar_window_is_a_fixed_window_whose_digest_names_its_period_and_zone() {
        use calendar::tests::calendar;
        let monthly = |zone| Quota::per_period(100, calendar(Period::Month, zone)).unwrap();
        let digest = |q| Limit::new("api", q).unwrap().digest();
        assert_eq!(digest(monthly("Europe/Berlin")), digest(monthly("Europe/Berlin")));
        assert_ne!(digest(monthly("Europe/Berlin")), digest(monthly("America/New_York")));
        let weekly = Quota::per_period(100, calendar(Period::Week, "Europe/Berlin")).unwrap();
        assert_ne!(digest(weekly), digest(monthly("Europe/Berlin")));
        assert!(monthly("UTC").same_slots(&monthly("UTC")) && !monthly("UTC").same_slots(&weekly));
        assert_eq!(
            Limit::with_algorithm("b", monthly("UTC"), Algorithm::token_bucket(5).unwrap()),
            Err(LimitError::PeriodWithoutFixed)
        );
        assert_eq!(
            Limit::with_algorithm("r", monthly("UTC"), Algorithm::RollingWindow),
            Err(LimitError::PeriodWithoutFixed)
        );
    }
}
