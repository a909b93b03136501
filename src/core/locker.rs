//! The locker's decision table: every configured limit, its counts, its
//! statistics, and the cap on live keys across all limits.
//!
//! This is the pure core the daemon wraps. It takes `now` on every call,
//! never reads a clock, never logs and never touches a socket, so the same
//! code can be embedded in a program without a daemon (see
//! `examples/embedded.rs`) and tested with literal instants. Asks are checked
//! here against the limit they name; the counting itself is `core::kinds`'s.
//! Lease requests go through a checked handle on a limit's semaphore
//! (`leases`), whose checks and lease ids are the semaphore's; the outcome
//! of every request is counted through one view of the counters
//! (`counters`).
//!
//! `Locker` itself holds the table (`new`, `find`, `limit`, `reload`) and
//! answers what is asked of it (`go`, `ask`, `want`, `expire`); its other
//! jobs are small borrowed views on it: the counters (`counters`) and the
//! read-only figures that stats, metrics and peers read (`figures`), both
//! in `stats`; the semaphores' leases (`semaphores`, in `leases`); the
//! limits made from terms (`runtime`, in `runtime`); peering (`sharing`,
//! in `peers`); and what is kept across a restart (`keeping` and
//! `keeping_mut`, in `kept`).
//!
//! When lockers are peered, the table also merges the counts peers report
//! (`Sharing::merge`), lists its wants and gifts for publishing at once
//! (`Sharing::take_exchanged`) and its own counts for the repairs
//! (`Sharing::drain_touched`) and snapshots (`Sharing::snapshot`), and
//! follows the peer view the caller sets (`Sharing::set_view`): how many
//! lockers are live, and whether to hold off while the counts are still
//! being learned. Fixed windows and token buckets are what peers share;
//! that glue is in `peers`.
//!
//! # Example
//!
//! ```
//! use locker::core::{Limit, Locker, PermitAsk, Quota, DEFAULT_LIMIT};
//!
//! // One permit per second, and at most 100 live keys.
//! let quota = Quota::new(1, 1.0).unwrap();
//! let mut locker = Locker::new(Limit::new(DEFAULT_LIMIT, quota).unwrap(), vec![], 100);
//! let ask = PermitAsk::new(locker.find(None).unwrap());
//! let now = 5_000_000_000; // any instant, in nanoseconds since the epoch
//! assert!(locker.ask(now, &ask).unwrap().go);
//! let sorry = locker.ask(now + 1, &ask).unwrap();
//! assert!(!sorry.go);
//! assert_eq!(sorry.retry_after, 1_000_000_000 - 1, "until the next slot");
//! ```

use std::collections::HashMap;

use super::ask::{hold_within, wait_ns, PermitAsk, Verdict, Want};
use super::kinds::{Rule, TakeError};
use super::lease_id::LeaseMinter;
use super::limit::{Limit, LimitId, DEFAULT_LIMIT};
use super::room::{KeyBudget, KeyRoom, Leeway};
use super::time::Nanos;
use crate::core::share::{Count, PeerView, Share};

mod charge;
pub mod kept;
mod leases;
mod peers;
mod reload;
mod runtime;
mod stats;
mod together;

pub use super::ask::{TableError, MAX_WAIT_MS};
pub use super::kinds::semaphore::leases::{BeatTerms, LeaseError, Leases, MAX_TTL_MS};
pub use kept::Keeping;
pub use leases::Semaphores;
pub use peers::Sharing;
pub use reload::Reloaded;
pub use runtime::{Made, Runtime, IDLE, IDLE_SLOTS};
use stats::Outcome;
pub use stats::{Counters, Figures, Holdings, LimitStats};
pub use together::{all_or_none, refused_range, PartError, MAX_PARTS};

/// Why an ask for permits got neither go nor sorry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("cost {cost} is above the limit's capacity {max}")]
    CostAboveMax { cost: u64, max: u32 },
    #[error("limit {0:?} is a semaphore: take it with op \"acquire\"")]
    IsSemaphore(String),
    #[error("limit {0:?} is a semaphore: a lease is not a rate, so nothing can be charged to it after the fact (acquire a lease, release it when done)")]
    ChargeSemaphore(String),
    #[error(
        "a charge of {cost} is above the most a charge may owe, {most} ({} times the limit's capacity)",
        crate::core::ask::MAX_CHARGE_CAPACITIES
    )]
    ChargeAboveMost { cost: u64, most: u64 },
    #[error("limit {0:?} does not allow a reset (set allow_reset = true in its [limits] entry)")]
    ResetNotAllowed(String),
    #[error("\"up_to\" is not allowed in a part of \"all\": each part takes its whole cost or nothing")]
    UpToInAll,
    #[error("\"all\" holds at most {} parts, this one has {0}", together::MAX_PARTS)]
    TooManyParts(usize),
    /// Terms sent with the ask that make no limit (`TermsError`'s words).
    #[error("{0}")]
    Terms(String),
}

/// One limit's rules, counts and counters.
#[derive(Debug)]
struct LimitEntry {
    limit: Limit,
    rule: Rule,
    stats: LimitStats,
    /// Created from terms sent with an ask (see `runtime`), not configured.
    runtime: bool,
    /// Created from a peer's terms and not asked here since: its terms are
    /// not passed on (see `runtime`).
    learned: bool,
    /// When an ask last named it.
    last_ask: Nanos,
    /// The limit it counts under (see `Limit::with_parent`), linked by
    /// name whenever the table's ids are set.
    parent: Option<LimitId>,
}

impl LimitEntry {
    /// `limit` with empty counts and counters.
    fn new(limit: Limit) -> LimitEntry {
        let stats = LimitStats::default();
        LimitEntry { rule: Rule::new(&limit), limit, stats, runtime: false, learned: false, last_ask: 0, parent: None }
    }

    /// Counts an ask's outcome at `now`.
    #[inline]
    fn record(&mut self, now: Nanos, outcome: Outcome) {
        self.last_ask = now;
        self.learned = false;
        self.stats.record(outcome);
    }
}

/// The decision table.
#[derive(Debug)]
pub struct Locker {
    entries: Vec<LimitEntry>,
    by_name: HashMap<String, LimitId>,
    default: LimitId,
    max_keys: usize,
    live_keys: usize,
    unattributed_errors: u64,
    /// Names new leases and vouches for restored ones.
    minter: LeaseMinter,
    view: PeerView,
    /// Wants and gifts, until `take_exchanged`; only kept when
    /// `publishing` is on.
    exchanged: Vec<Count>,
    /// Where the next repair resumes: a limit's index, and a position
    /// among its keys (see `Sharing::drain_touched`).
    repair_at: (usize, usize),
    publishing: bool,
    /// Keys whose ledger of conserved permits changed (a gift given or
    /// received), until `take_ledgers`: the state file records each before
    /// the gifts leave.
    ledgers: Vec<(LimitId, Option<Box<str>>)>,
    /// The most limits asks may create from their terms (see `runtime`).
    runtime_bound: usize,
    /// Counts changes to the limits' numbers or definitions (a reload, a
    /// runtime limit created, retuned or dropped), for the state file.
    generation: u64,
    /// Whether any limit has a parent: without one, an ask needs no look
    /// at its limit's parent.
    parented: bool,
    /// Whether any limit is in shadow: without one, a sorry needs no look
    /// at its limit's terms.
    shadowed: bool,
}

impl Locker {
    /// A locker with `default` for requests that name no limit, the named
    /// `limits`, and at most `max_keys` live keys in all. A named limit
    /// called "default" replaces the default one.
    pub fn new(default: Limit, limits: Vec<Limit>, max_keys: usize) -> Locker {
        let mut locker = Locker {
            entries: Vec::new(),
            by_name: HashMap::new(),
            default: LimitId(0),
            max_keys,
            live_keys: 0,
            unattributed_errors: 0,
            minter: LeaseMinter::default(),
            view: PeerView::ALONE,
            exchanged: Vec::new(),
            repair_at: (0, 0),
            publishing: false,
            ledgers: Vec::new(),
            runtime_bound: 0,
            generation: 0,
            parented: false,
            shadowed: false,
        };
        locker.index(std::iter::once(default).chain(limits).map(LimitEntry::new));
        locker
    }

    /// Names leases with `minter`. Without one, ids count up from 1 and
    /// every restore is trusted, which suits a locker embedded among trusted
    /// callers; a daemon passes a minter over the OS's CSPRNG, so that ids
    /// cannot be guessed and stay unique across restarts, and with a group
    /// secret, so that only ids a locker of the group minted are restored.
    pub fn with_lease_minter(mut self, minter: LeaseMinter) -> Locker {
        self.minter = minter;
        self
    }

    /// Makes `entries`, in order, the table's limits, found by name; a
    /// later entry replaces an earlier one of the same name.
    fn index(&mut self, entries: impl Iterator<Item = LimitEntry>) {
        self.generation += 1;
        self.entries.clear();
        self.by_name.clear();
        for entry in entries {
            match self.by_name.get(entry.limit.name()) {
                Some(&LimitId(i)) => self.entries[i] = entry,
                None => {
                    self.by_name.insert(entry.limit.name().to_owned(), LimitId(self.entries.len()));
                    self.entries.push(entry);
                }
            }
        }
        self.default = self.by_name[DEFAULT_LIMIT];
        self.link_parents();
    }

    /// Links each limit to its parent by name, as the ids stand now. A
    /// name the table lacks links nothing: the config refuses it at load
    /// (`parents::check`), which an embedding program may skip.
    fn link_parents(&mut self) {
        for i in 0..self.entries.len() {
            let parent = self.entries[i].limit.parent().and_then(|name| self.by_name.get(name).copied());
            self.entries[i].parent = parent;
        }
        self.parented = self.entries.iter().any(|e| e.parent.is_some());
        self.shadowed = self.entries.iter().any(|e| e.limit.is_shadow());
    }

    /// Whether limit `id` is in shadow (see `Limit::with_shadow`). Cheap
    /// when no limit is: a single flag is read.
    #[inline]
    pub fn shadow(&self, id: LimitId) -> bool {
        self.shadowed && self.entries[id.0].limit.is_shadow()
    }

    /// The limit limit `id` counts under, if any. Cheap when no limit has
    /// one: a single flag is read.
    #[inline]
    pub fn parent(&self, id: LimitId) -> Option<LimitId> {
        if !self.parented {
            return None;
        }
        self.entries[id.0].parent
    }

    /// The limit named `name`, or the default limit when `name` is `None`.
    pub fn find(&self, name: Option<&str>) -> Result<LimitId, TableError> {
        match name {
            None => Ok(self.default),
            Some(n) => self.by_name.get(n).copied().ok_or_else(|| TableError::UnknownLimit(n.to_owned())),
        }
    }

    /// The seed's plain form: the limit whose name equals the request bytes,
    /// or the default limit for anything else (such as b"let me go").
    pub fn find_plain(&self, body: &[u8]) -> LimitId {
        std::str::from_utf8(body).ok().and_then(|n| self.by_name.get(n).copied()).unwrap_or(self.default)
    }

    /// The limit behind `id`.
    pub fn limit(&self, id: LimitId) -> &Limit {
        &self.entries[id.0].limit
    }

    /// Asks for `cost` permits of limit `id` for `key` at `now`, now or
    /// never: `ask` with a plain `PermitAsk`.
    #[inline]
    pub fn go(&mut self, now: Nanos, id: LimitId, key: Option<&str>, cost: u64) -> Result<Verdict, AskError> {
        self.ask(now, &PermitAsk { key, cost, ..PermitAsk::new(id) })
    }

    /// Answers `ask` at `now`: all of its `cost` (0 peeks), or with `up_to`
    /// as many as are available (at least one; a cost above the capacity
    /// then asks for the capacity); with `max_wait_ms`, a reservation the
    /// caller may use after `wait`.
    #[inline]
    pub fn ask(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        if let Some(v) = self.lone_window(now, ask) {
            self.entries[ask.limit.0].record(now, Outcome::of_verdict(&v));
            return Ok(v);
        }
        let verdict = self.want(ask).and_then(|want| self.decide(now, ask, want));
        self.entries[ask.limit.0].record(now, Outcome::of_ask_for(ask.cost, &verdict));
        verdict
    }

    /// The short path for the commonest ask: a fixed window, a locker on
    /// its own (no peers, nothing to publish), room for a new key, and an
    /// ask for a cost it allows, now or never. It skips the checks, the
    /// peers' terms and the dispatch those cases need; `None` leaves the
    /// ask to the general path, which gives every answer this one does.
    /// Only the fixed window has one: a short path for the bucket and the
    /// rolling window beside it, even out of line, measured 5 to 10 % faster
    /// for them and 50 % slower for the fixed window at a million keys
    /// (docs/performance.md).
    #[inline]
    fn lone_window(&mut self, now: Nanos, ask: &PermitAsk) -> Option<Verdict> {
        let alone = self.view.live <= 1 && self.view.hold_until.is_none() && !self.publishing;
        if !alone || ask.up_to || ask.max_wait_ms != 0 || ask.hold_ms != 0 || self.live_keys >= self.max_keys {
            return None;
        }
        let Rule::Window(w) = &mut self.entries[ask.limit.0].rule else { return None };
        let cost = u32::try_from(ask.cost).ok().filter(|&c| c >= 1 && c <= w.quota().max_requests())?;
        let before = w.live_keys();
        w.advance(now);
        let verdict = w.take_lone(now, ask.key, cost);
        self.live_keys = self.live_keys - before + w.live_keys();
        verdict
    }

    /// Starts loading the state `ask` will read into the cache, without
    /// deciding anything: call it for every ask of a batch before answering
    /// them, so that their cache misses overlap. A hint only.
    #[inline]
    pub fn prefetch(&self, ask: &PermitAsk) {
        self.entries[ask.limit.0].rule.prefetch(ask.key);
    }

    /// Checks `ask` against its limit's terms without deciding it: the
    /// cost it may take, or why it is refused. For deciders outside this
    /// table (a store's claims), which must refuse what the table refuses.
    #[inline]
    pub fn want(&self, ask: &PermitAsk) -> Result<Want, AskError> {
        let max = self.entries[ask.limit.0].limit.capacity();
        // "As many as you can, up to n" has a sensible answer for any n.
        let cost = if ask.up_to { ask.cost.min(u64::from(max)) } else { ask.cost };
        let cost = match u32::try_from(cost) {
            Ok(c) if c <= max => c,
            _ => return Err(AskError::CostAboveMax { cost, max }),
        };
        let max_wait = wait_ns(ask.max_wait_ms)?;
        hold_within(ask.hold_ms)?;
        Ok(Want { cost, up_to: ask.up_to, max_wait })
    }

    /// Answers a checked ask at `now`.
    #[inline]
    fn decide(&mut self, now: Nanos, ask: &PermitAsk, want: Want) -> Result<Verdict, AskError> {
        let v = self.take_quietly(now, ask, want)?;
        self.publish(ask, &v, want.cost);
        Ok(v)
    }

    /// Answers a checked ask at `now` without telling the peers.
    #[inline]
    fn take_quietly(&mut self, now: Nanos, ask: &PermitAsk, want: Want) -> Result<Verdict, AskError> {
        let (id, key, hold_until) = (ask.limit, ask.key, self.view.hold_until);
        let share = self.share(id);
        let verdict = self.counted(now, id, |rule, room| {
            let held = hold_until.filter(|&u| u > now).and_then(|until| rule.hold_off(now, key, until - now));
            held.map_or_else(|| rule.take(now, key, want, Leeway { room, share }), Ok)
        });
        match verdict {
            Ok(v) => Ok(v),
            Err(TakeError::NoRoom) => Err(TableError::TooManyKeys(self.max_keys).into()),
            Err(TakeError::Semaphore) => Err(AskError::IsSemaphore(self.entries[id.0].limit.name().to_owned())),
        }
    }

    /// Tells the peers what verdict `v` on `ask` for `cost` permits asked
    /// them for. Only an ask that came short (a sorry, or fewer than
    /// `cost` with `up_to`) may have: a whole go costs the peers nothing
    /// until the next repair.
    #[inline]
    fn publish(&mut self, ask: &PermitAsk, v: &Verdict, cost: u32) {
        if self.publishing && (!v.go || v.granted < cost) {
            self.sharing().note_short(ask);
        }
    }

    /// The terms limit `id` shares its count with peers on, by the view
    /// the caller last set: how many lockers are live, the members,
    /// and the in-flight window, widened while peer messages come late.
    #[inline]
    pub fn share(&self, id: LimitId) -> Share {
        let (view, slot_ns) = (self.view, self.entries[id.0].limit.quota().slot_ns());
        let share = Share::new(view.live, slot_ns).late_by(view.late, slot_ns);
        let (members, member, owns_from, holding) = (view.members, view.member, view.owns_from, view.holding);
        Share { members, member, owns_from, resumes: view.resumes, holding, ..share }
    }

    /// Brings limit `id` up to `now`, runs `f` on its rule with the room
    /// left for new keys, and keeps the live-key count in step.
    #[inline]
    fn counted<T>(&mut self, now: Nanos, id: LimitId, f: impl FnOnce(&mut Rule, KeyRoom) -> T) -> T {
        if self.live_keys >= self.max_keys {
            self.drop_stale(now);
        }
        let rule = &mut self.entries[id.0].rule;
        let others = self.live_keys - rule.live_keys();
        rule.advance(now);
        let room = KeyBudget { others, max_keys: self.max_keys }.room(rule.live_keys());
        let out = f(rule, room);
        self.live_keys = others + rule.live_keys();
        out
    }

    /// Brings every limit up to `now`, not just the one being asked, so that
    /// a limit nobody asks any more does not hold key room that another limit
    /// needs. Runs only when the key table is full.
    fn drop_stale(&mut self, now: Nanos) {
        for entry in &mut self.entries {
            entry.rule.advance(now);
        }
        self.live_keys = self.entries.iter().map(|e| e.rule.live_keys()).sum();
    }

    /// When the locker next needs `expire` without a request: the soonest
    /// lease expiry or end of a wait over all semaphores, or the end of a
    /// slot (or a bucket's sweep) that drops keys and gives memory back.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let rules = self.entries.iter().filter_map(|e| e.rule.next_deadline()).min();
        [rules, self.next_idle()].into_iter().flatten().min()
    }

    /// Frees every lease due by `now` and grants waiters what that frees;
    /// drops the keys of slots that have ended, with their memory.
    pub fn expire(&mut self, now: Nanos) {
        for i in 0..self.entries.len() {
            if self.entries[i].rule.next_deadline().is_some_and(|d| d <= now) {
                self.counted(now, LimitId(i), |_, _| ());
            }
        }
    }
}

#[cfg(test)]
mod tests;
