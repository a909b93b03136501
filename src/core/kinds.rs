//! The four kinds of limit, one folder each, and the one place that
//! dispatches on the kind: `Rule` holds one limit's counting state and hands
//! each call to `FixedWindow`, `Bucket`, `RollingWindow` or `Semaphore`.
//!
//! Each kind's folder holds its rule, its peer sharing, its kept form (what
//! the state file restores) and its tests; a change to one kind belongs in
//! its folder. The kinds sit above the core's bottom layer (time, limit,
//! ask, room, the peer share terms) and import neither one another nor the
//! locker or the peer schedule above them. Here too are the shapes every
//! kind trades in: what it shares with peers (`Count`, from `core::share`)
//! and what it keeps across a restart (`Kept`, `Saved`). Nothing here finds
//! limits by name or keeps statistics (those live in `core::locker`); the
//! one use of a name is the semaphore's, whose `leases` checks lease
//! requests against its limit and names leases after it. Like the rest of
//! the core it takes `now` and does no I/O.

pub mod bucket;
pub mod fixed;
pub mod rolling;
pub mod semaphore;

use super::ask::{Charged, Verdict, Want};
use super::limit::{Algorithm, Limit, LimitId, Quota};
use super::room::{KeyBudget, KeyRoom, Leeway, NoRoom};
use super::share::exchange::KeptExchange;
use super::share::repair::RepairWalk;
use super::share::{Count, Counted, NodeIx, Share, ME};
use super::time::Nanos;
use bucket::Bucket;
use fixed::FixedWindow;
use rolling::RollingWindow;
use semaphore::kept::HeldLease;
use semaphore::Semaphore;

/// The counting state of one limit.
#[derive(Debug)]
pub enum Rule {
    /// Fixed timeslots.
    Window(FixedWindow),
    /// A token bucket per key.
    Bucket(Bucket),
    /// A window rolling with time, per key.
    Rolling(RollingWindow),
    /// Leases on a count of concurrent holders.
    Semaphore(Semaphore),
}

/// Why a rule could not take an ask.
#[derive(Debug, PartialEq, Eq)]
pub enum TakeError {
    /// A new key was needed but the key table is full.
    NoRoom,
    /// A semaphore is taken with leases, not with asks.
    Semaphore,
}

impl From<NoRoom> for TakeError {
    fn from(_: NoRoom) -> TakeError {
        TakeError::NoRoom
    }
}

impl Rule {
    /// Empty counts for `limit`.
    pub fn new(limit: &Limit) -> Rule {
        match limit.algorithm() {
            Algorithm::FixedWindow => Rule::Window(FixedWindow::new(limit.quota())),
            Algorithm::TokenBucket { burst } => Rule::Bucket(Bucket::new(limit.quota(), burst)),
            Algorithm::Semaphore => Rule::Semaphore(Semaphore::new(limit.capacity())),
            Algorithm::RollingWindow => Rule::Rolling(RollingWindow::new(limit.quota())),
        }
    }

    /// Brings the state up to `now`; returns how many keys or leases were dropped.
    #[inline]
    pub fn advance(&mut self, now: Nanos) -> usize {
        match self {
            Rule::Window(w) => w.advance(now),
            Rule::Bucket(b) => b.advance(now),
            Rule::Rolling(r) => r.advance(now),
            Rule::Semaphore(s) => s.advance(now),
        }
    }

    /// Keys (or leases) this rule holds, which count against --max-keys.
    #[inline]
    pub fn live_keys(&self) -> usize {
        match self {
            Rule::Window(w) => w.live_keys(),
            Rule::Bucket(b) => b.live_keys(),
            Rule::Rolling(r) => r.live_keys(),
            Rule::Semaphore(s) => s.live_keys(),
        }
    }

    /// Answers an ask on a counting rule. Call `advance` first. The share
    /// in `terms` says what this locker may grant of what the peers share:
    /// the permits of a fixed window's slot or the tokens of a bucket it
    /// owns (conserved permits), a rolling window's part of the room.
    #[inline]
    pub fn take(&mut self, now: Nanos, key: Option<&str>, want: Want, terms: Leeway) -> Result<Verdict, TakeError> {
        match self {
            Rule::Window(w) => Ok(w.take_shared(now, key, want, terms)?),
            Rule::Bucket(b) => Ok(b.take_shared(now, key, want, terms)?),
            Rule::Rolling(r) => Ok(r.take_shared(now, key, want, terms)?),
            Rule::Semaphore(_) => Err(TakeError::Semaphore),
        }
    }

    /// Charges `cost` permits used by `key` before they were asked for:
    /// taken whatever is left, past the limit if need be, the excess a
    /// debt that later asks wait out (a token bucket's tokens below zero,
    /// a fixed window's count carried into the slots after, a rolling
    /// window's grants until they leave it; see each kind's `charge`).
    /// Peered, the debt is this locker's own share's. A semaphore takes
    /// no charge. Call `advance` first.
    pub fn charge(&mut self, now: Nanos, key: Option<&str>, cost: u32, terms: Leeway) -> Result<Charged, TakeError> {
        match self {
            Rule::Window(w) => Ok(w.charge(now, key, cost, terms)?),
            Rule::Bucket(b) => Ok(b.charge(now, key, cost, terms)?),
            Rule::Rolling(r) => Ok(r.charge(now, key, cost, terms)?),
            Rule::Semaphore(_) => Err(TakeError::Semaphore),
        }
    }

    /// Gives back up to `n` of `key`'s own permits that still count at
    /// `now`: for a fixed window in the slot a caller going after `wait`
    /// goes in, for a bucket the tokens it lacks, for a rolling window its
    /// newest grants. Returns how many; never more than it took, so a
    /// give-back never makes room a limit does not have. Call `advance`
    /// first.
    pub fn give_back(&mut self, now: Nanos, key: Option<&str>, n: u32, wait: Nanos) -> u32 {
        match self {
            Rule::Window(w) => w.give_back(now, key, n, wait),
            Rule::Bucket(b) => b.give_back(now, key, n),
            Rule::Rolling(r) => r.give_back(now, key, n),
            Rule::Semaphore(_) => 0,
        }
    }

    /// Clears `key`'s own counts; returns whether it had any.
    pub fn clear(&mut self, now: Nanos, key: Option<&str>) -> bool {
        match self {
            Rule::Window(w) => w.clear(key),
            Rule::Bucket(b) => b.clear(now, key),
            Rule::Rolling(r) => r.clear(now, key),
            Rule::Semaphore(_) => false,
        }
    }

    /// Sorry for `wait` while the peers' counts of the current slot are
    /// still being learned: every shared kind answers it without counting;
    /// `None` for the semaphore, whose leases are this locker's alone.
    #[inline]
    pub fn hold_off(&self, now: Nanos, key: Option<&str>, wait: Nanos) -> Option<Verdict> {
        match self {
            Rule::Window(w) => Some(w.refuse(now, key, wait)),
            Rule::Bucket(b) => Some(b.refuse(now, key, wait)),
            Rule::Rolling(r) => Some(r.refuse(now, key, wait)),
            Rule::Semaphore(_) => None,
        }
    }

    /// Whether peers share this rule's counts: every kind but the
    /// semaphore, whose leases are this locker's alone.
    pub fn is_shared(&self) -> bool {
        !matches!(self, Rule::Semaphore(_))
    }

    /// How long peers must remember a run of a locker after they last
    /// heard of it: as long as what it granted or gave may still count, so
    /// that a later run of the same locker learns of it and owns none of
    /// what it may have spent (see `Share::owns_from`). Each kind says why
    /// its figure is enough; 0 for the semaphore, which peers do not share.
    pub fn memory(&self) -> Nanos {
        match self {
            Rule::Window(w) => w.memory(),
            Rule::Bucket(b) => b.memory(),
            Rule::Rolling(r) => r.memory(),
            Rule::Semaphore(_) => 0,
        }
    }

    /// Calls `f` with what an ask for `key` of limit `id` that came short
    /// asked the peers for, when that grew: a want changes who owns
    /// permits, so it leaves at once. A grant does not: a locker grants
    /// only what it owns, and its counts reach the peers with the next
    /// repair (`drain_own`), once per key however many it granted.
    pub fn note_wanted(&mut self, id: LimitId, key: Option<&str>, mut f: impl FnMut(Count)) {
        let wanted = match self {
            Rule::Window(w) => w.note_wanted(key),
            Rule::Bucket(b) => b.note_wanted(key),
            Rule::Rolling(r) => r.note_wanted(key),
            Rule::Semaphore(_) => None,
        };
        if let Some((slot, n)) = wanted {
            f(Count::of(Counted::Wanted, id, key, slot, ME, n));
        }
    }

    /// Merges a count a peer reported, received at `now`, with `budget`
    /// for new keys. A fixed or rolling window or a bucket answers a peer's
    /// want with what it can spare on the terms of `share` (a rolling
    /// window also renews what it lent a peer heard granting), and `give` hears each
    /// gift (already taken off this locker's own) as the count to publish.
    /// Returns whether anything changed.
    pub fn merge(
        &mut self,
        now: Nanos,
        c: &Count,
        budget: KeyBudget,
        share: Share,
        mut give: impl FnMut(Count),
    ) -> bool {
        match (self, c.what) {
            (Rule::Window(w), _) => {
                let room = budget.room(w.live_keys());
                let id = c.limit;
                w.merge_count(now, c, Leeway { room, share }, |key, slot, to, n| {
                    give(Count::of(Counted::Gave(to), id, key, slot, ME, n));
                })
            }
            (Rule::Bucket(b), _) => {
                b.advance(now);
                let (room, id) = (budget.room(b.live_keys()), c.limit);
                b.merge_want_or_gift(now, c, Leeway { room, share }, |key, period, to, n| {
                    give(Count::of(Counted::Gave(to), id, key, period, ME, n));
                })
            }
            (Rule::Rolling(r), _) => {
                r.advance(now);
                let room = budget.room(r.live_keys());
                let id = c.limit;
                let give =
                    |key: Option<&str>, window, to, n| give(Count::of(Counted::Gave(to), id, key, window, ME, n));
                r.merge_count(now, c, Leeway { room, share }, give).unwrap_or(false)
            }
            (Rule::Semaphore(_), _) => false,
        }
    }

    /// Calls `f` with every count of limit `id` this rule knows at `now`,
    /// its own and each peer node's: for a fixed window its current slot's
    /// (and the wants and gifts that move its permits), for a token bucket
    /// the current period's wants and gifts, for a rolling window every
    /// sub-slot's that still counts. Call `advance` first.
    pub fn counts(&self, now: Nanos, id: LimitId, mut f: impl FnMut(Count)) {
        match self {
            Rule::Window(w) => w.counts(|key, slot, node, n, what| f(Count::of(what, id, key, slot, node, n))),
            Rule::Bucket(b) => b.counts(now, |key, period, node, n, what| f(Count::of(what, id, key, period, node, n))),
            Rule::Rolling(r) => r.counts(now, |key, slot, node, n, what| f(Count::of(what, id, key, slot, node, n))),
            Rule::Semaphore(_) => {}
        }
    }

    /// Calls `f` with the own count of limit `id` of the keys granted since
    /// they were last republished that `walk` takes (and a fixed or rolling
    /// window's or a bucket's own wants and gifts), for republishing at
    /// `now`: a count lost on the way is repaired by the next one. Call
    /// `advance` first.
    pub fn drain_own(&mut self, now: Nanos, id: LimitId, walk: &RepairWalk, mut f: impl FnMut(Count)) {
        // Every count republished spends the walk's budget.
        let mut f = |c| {
            walk.sent();
            f(c);
        };
        match self {
            Rule::Window(w) => w.drain_own(walk, |key, slot, node, n, what| f(Count::of(what, id, key, slot, node, n))),
            Rule::Bucket(b) => b.drain_own(walk, |key, period, n, what| f(Count::of(what, id, key, period, ME, n))),
            Rule::Rolling(r) => {
                r.drain_touched(now, walk, |key, slot, node, n, what| f(Count::of(what, id, key, slot, node, n)))
            }
            Rule::Semaphore(_) => {}
        }
    }

    /// Takes `limit`'s new numbers, keeping the counts, when it is of the
    /// same kind and the counts keep their meaning (see each kind's
    /// `retune`); returns false, changing nothing, when they would not.
    pub fn retune(&mut self, limit: &Limit) -> bool {
        match (self, limit.algorithm()) {
            (Rule::Window(w), Algorithm::FixedWindow) => w.retune(limit.quota()),
            (Rule::Bucket(b), Algorithm::TokenBucket { burst }) => b.retune(limit.quota(), burst),
            (Rule::Rolling(r), Algorithm::RollingWindow) => r.retune(limit.quota()),
            (Rule::Semaphore(s), Algorithm::Semaphore) => {
                s.set_capacity(limit.capacity());
                true
            }
            _ => false,
        }
    }

    /// Leases held and waiting; none for a counting rule.
    pub fn lease_counts(&self) -> (usize, usize) {
        match self {
            Rule::Semaphore(s) => s.lease_counts(),
            Rule::Window(_) | Rule::Bucket(_) | Rule::Rolling(_) => (0, 0),
        }
    }

    /// Starts loading the state an ask for `key` will read into the cache,
    /// where the kind keeps it in a table that can do so.
    #[inline]
    pub fn prefetch(&self, key: Option<&str>) {
        // A hint only: kinds without an inline key table skip it.
        match self {
            Rule::Window(w) => w.prefetch(key),
            Rule::Bucket(b) => b.prefetch(key),
            Rule::Rolling(r) => r.prefetch(key),
            Rule::Semaphore(_) => {}
        }
    }

    /// The semaphore, if this rule is one.
    pub fn semaphore(&mut self) -> Option<&mut Semaphore> {
        match self {
            Rule::Semaphore(s) => Some(s),
            Rule::Window(_) | Rule::Bucket(_) | Rule::Rolling(_) => None,
        }
    }

    /// When this rule next needs `advance` without a request: a lease
    /// expiry or the end of a wait; for counting rules, the end of a slot or
    /// a sweep that would drop keys and give memory back.
    pub fn next_deadline(&self) -> Option<Nanos> {
        match self {
            Rule::Semaphore(s) => s.next_deadline(),
            Rule::Window(w) => w.next_deadline(),
            Rule::Bucket(b) => b.next_deadline(),
            Rule::Rolling(r) => r.next_deadline(),
        }
    }

    /// Bytes this rule's key table holds on the heap, roughly.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Rule::Window(w) => w.heap_bytes(),
            Rule::Bucket(b) => b.heap_bytes(),
            Rule::Rolling(r) => r.heap_bytes(),
            Rule::Semaphore(_) => 0,
        }
    }
}

/// What a request left behind in its limit, for the state log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// A fixed window key's own count in `slot` (the current one, or the
    /// later one a reservation landed in); for a rolling window, its own
    /// count in the peers' sub-slot `slot` its caller goes in.
    Window { slot: u64, count: u32 },
    /// A token bucket key's TAT, and its own grants in `period` (0 unless
    /// peered).
    Bucket { tat: Nanos, period: u64, count: u32 },
    /// A lease held.
    Lease(HeldLease),
    /// A lease no longer held (released, or not held at all).
    Released,
    /// What a shared kind's exchange of conserved permits left in a period.
    Exchange(KeptExchange),
}

/// Whose an earlier run's count becomes when it is put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// This run's own: nobody else will ever count it (a locker alone, or
    /// a reservation ahead).
    Own,
    /// The earlier run's node, the way a peer's snapshot of that run
    /// delivers it, so that the two merge by maximum.
    Node(NodeIx),
}

/// An earlier run's record of one key (or lease), to put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    pub kept: Kept,
    /// When the record was written.
    pub written: Nanos,
    pub owner: Owner,
    /// The earlier run, as the state file numbers them.
    pub run: u32,
}

impl Kept {
    /// Whether this, kept for a limit of kind `algorithm` with `quota`,
    /// still says something at `now` (each kind says when: see its `kept`
    /// module). Kept for a limit of another kind, it does not.
    pub fn is_live(self, algorithm: Algorithm, quota: Quota, now: Nanos) -> bool {
        match (algorithm, self) {
            (Algorithm::FixedWindow, Kept::Window { slot, .. }) => FixedWindow::slot_counts(quota, slot, now),
            (Algorithm::RollingWindow, Kept::Window { slot, .. }) => RollingWindow::sub_counts(quota, slot, now),
            (Algorithm::TokenBucket { .. }, Kept::Bucket { tat, period, .. }) => {
                Bucket::kept_counts(quota, tat, period, now)
            }
            (Algorithm::Semaphore, Kept::Lease(held)) => held.until > now,
            // An exchange while its slot has not ended; a rolling window's
            // and a bucket's in the next period too (what was lent for a
            // window counts in the next; a restart resumes a bucket's share
            // of the current or the previous period).
            (Algorithm::FixedWindow, Kept::Exchange(e)) => FixedWindow::slot_counts(quota, e.period, now),
            (Algorithm::RollingWindow | Algorithm::TokenBucket { .. }, Kept::Exchange(e)) => {
                e.period.saturating_add(1) >= quota.slot_of(now)
            }
            _ => false,
        }
    }

    /// Whether this is a fixed window's count in a slot later than now's
    /// (reservations): only the run that reserved it will ever count it.
    pub fn is_reservation(self, algorithm: Algorithm, quota: Quota, now: Nanos) -> bool {
        matches!((algorithm, self), (Algorithm::FixedWindow, Kept::Window { slot, .. }) if slot > quota.slot_of(now))
    }
}

impl Rule {
    /// What a go answered with `v` for `key` at `now` left behind; `None`
    /// when it took nothing, or for a semaphore (see `kept_lease`).
    pub fn kept_go(&self, now: Nanos, key: Option<&str>, v: &Verdict) -> Option<Kept> {
        if !v.go || v.granted == 0 {
            return None;
        }
        match self {
            Rule::Window(w) => {
                // A reservation waits exactly until the start of its slot.
                let slot = if v.wait == 0 { w.slot() } else { w.quota().slot_of(now.saturating_add(v.wait)) };
                Some(Kept::Window { slot, count: w.own_in(key, slot) })
            }
            Rule::Bucket(b) => Some(b.kept(now, key)),
            Rule::Rolling(r) => {
                // The figure peers are sent (`note_own`): cumulative, so the
                // latest record of a sub-slot says all of it.
                let slot = r.sub_slot(now.saturating_add(v.wait));
                Some(Kept::Window { slot, count: r.own_in(key, slot) })
            }
            Rule::Semaphore(_) => None,
        }
    }

    /// Calls `f` with what `key` holds in the slots after the current
    /// one, as the state file keeps each: a fixed window's reservations
    /// and a charge's debt carried into them; nothing for another kind
    /// (a bucket's debt is in its TAT, a rolling window's in its grants).
    pub fn kept_ahead(&self, key: Option<&str>, mut f: impl FnMut(Kept)) {
        if let Rule::Window(w) = self {
            w.kept_ahead(key, |slot, count| f(Kept::Window { slot, count }));
        }
    }

    /// Calls `f` with what the exchange of conserved permits of `key`
    /// left at `now`, as the state file keeps it: a fixed window's current
    /// slot, a rolling window's windows that bear on `now`, a peered token
    /// bucket's period with its share's fill; nothing for a semaphore.
    pub fn kept_exchange(&self, now: Nanos, key: Option<&str>, f: impl FnMut(KeptExchange)) {
        match self {
            Rule::Window(w) => w.kept_exchange(key, f),
            Rule::Rolling(r) => r.kept_exchange(now, key, f),
            Rule::Bucket(b) => b.kept_exchange(now, key, f),
            Rule::Semaphore(_) => {}
        }
    }

    /// What lease `lease` is after a lease request.
    pub fn kept_lease(&self, lease: &str) -> Kept {
        match self {
            Rule::Semaphore(s) => s.held(lease).map_or(Kept::Released, Kept::Lease),
            _ => Kept::Released,
        }
    }

    /// Puts back `saved` for `key` of limit `id` (a lease's id for a
    /// semaphore), with `room` for a new key. Call `advance` first. Returns
    /// `None` when nothing was put back (an ended slot or period, an
    /// expired lease, a key beyond `max_keys`, a record of another kind),
    /// else the count now held: for a count made this run's own, the own
    /// count after it (several earlier runs' add up).
    pub fn restore(&mut self, now: Nanos, id: LimitId, key: Option<&str>, saved: Saved, room: KeyRoom) -> Option<u32> {
        let Saved { kept, written, owner, run } = saved;
        match (self, kept, owner) {
            // An earlier run's exchange: what it gave and got is carried
            // into what this run owns (see each kind's `kept`).
            (Rule::Window(w), Kept::Exchange(e), _) => w.carry(now, key, e.period, e.gave, e.got, room).then_some(0),
            (Rule::Rolling(r), Kept::Exchange(e), _) => r.carry_rights(now, key, run, e, room).then_some(0),
            (Rule::Bucket(b), Kept::Exchange(e), _) => b.carry_fill(now, key, written, e, room).then_some(0),
            (Rule::Window(w), Kept::Window { slot, count }, Owner::Own) => {
                w.restore_own(key, slot, count, room).ok().flatten()
            }
            // In the current slot as the earlier run's node (see `merge`), in
            // a later one as this run's reservation.
            (Rule::Window(w), Kept::Window { slot, count }, Owner::Node(node)) if slot <= w.slot() => {
                let merged = w.merge_count(
                    now,
                    &Count::granted(id, key, slot, node, count),
                    Leeway { room, share: Share::ALONE },
                    |_, _, _, _| {},
                );
                // The earlier run granted them from what it owned, which
                // this run owns no more of.
                (merged && w.carry(now, key, slot, count, 0, room)).then_some(count)
            }
            (Rule::Window(w), Kept::Window { slot, count }, Owner::Node(_)) => {
                w.restore_reserved(key, slot, count, room).unwrap_or(false).then_some(count)
            }
            (Rule::Rolling(r), Kept::Window { slot, count }, Owner::Own) => {
                r.restore_own(now, key, slot, written, count, room).ok().flatten()
            }
            (Rule::Rolling(r), Kept::Window { slot, count }, Owner::Node(node)) => {
                let merged = r.merge(now, key, slot, node, count, room).unwrap_or(false);
                if merged {
                    // Granted from rights the earlier run owned.
                    r.carry_grants(key, node, slot, count);
                }
                merged.then_some(count)
            }
            // The TAT alone goes back (see `bucket::kept`).
            (Rule::Bucket(b), Kept::Bucket { tat, period, count }, owner) => {
                let peered = matches!(owner, Owner::Node(_));
                if peered {
                    // A share that resumes starts from the newest record.
                    b.carry_grant(now, key, written, (period, tat), room);
                }
                let count = if peered { count } else { 0 };
                b.restore(now, key, tat, room).unwrap_or(false).then_some(count)
            }
            (Rule::Semaphore(s), Kept::Lease(held), _) if room == KeyRoom::Free => {
                s.restore(now, key.unwrap_or(""), held).then_some(held.count)
            }
            _ => None,
        }
    }
}
