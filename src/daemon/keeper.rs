//! The state file in the daemon: read back and replayed before the locker
//! answers, appended to by every call of the service that can grant (the
//! keeper is the `Keep` it hands them) before the reply leaves, synced and
//! compacted on the loop's timer.
//!
//! What to record, what is still live, the bytes and the file are
//! `state`'s. This module only sequences them, reads the clocks that
//! needs (the boot clock, the wall clock against the file's) and logs what
//! happened: a damaged file, a refused one, a clock behind the file's, how
//! much was restored and how long it took.

use std::thread::JoinHandle;
use std::time::Instant;

use tracing::{debug, error, info, warn};

use super::clock::{BootStamp, Clock};
use crate::core::time::NANOS_PER_SEC;
use crate::core::{Algorithm, Locker, Nanos, Quota};
use crate::service::{step, Service, Upkeep};
use crate::state::{
    collapse, digest, Compacted, Header, Keep, Liveness, Record, Replay, RuntimeTerms, StateConfig, StateError,
    StateLog, Step,
};

/// Below this many bytes appended since the last compaction, a slot
/// change does not compact: the file is small anyway.
const MIN_COMPACT_AT_SLOT: usize = 64 << 10;

/// However much is appended, compaction waits until it has at least this
/// many bytes to drop, so that it stays rare (see `StateLog::wants_compaction`).
const MIN_COMPACT: usize = 4 << 20;

/// Slot changes are looked at no more often than this.
const SLOT_CHECK_GAP: Nanos = NANOS_PER_SEC / 10;

/// A state file read before the locker was built, with what its clock
/// must not go back before.
pub struct Loaded {
    replay: Option<Replay>,
    digest: u64,
    /// When reading began, so that the restore time logged covers it.
    started: Instant,
    /// This boot, when the kernel says, for this run's `Clock` record.
    boot: Option<BootStamp>,
    /// How far the wall clock was stepped since the file's last run, on
    /// this boot, to the nanosecond: its records are moved by exactly as
    /// much (see `Liveness::retimed`).
    step: i64,
    /// Records written after this (by the wall clock now) are from a clock
    /// far ahead of this one, on another boot: they are dropped.
    cut: Option<Nanos>,
    /// The file's last run wrote it on another boot: what it wrote last
    /// may never have reached the disk (see `Keeper::start`).
    rebooted: bool,
}

impl Loaded {
    /// The latest instant the file speaks of, moved by the step: the clock
    /// of this run starts no earlier, so that a clock stepped back across a
    /// restart cannot open a slot twice or stretch a lease. Never more than
    /// the bound `load` puts on it ahead of the wall clock.
    pub fn not_before(&self) -> Nanos {
        let latest = self.replay.as_ref().map_or(0, Replay::latest);
        let moved = if latest == 0 { 0 } else { latest.saturating_add_signed(self.step) };
        self.cut.map_or(moved, |cut| moved.min(cut))
    }

    /// The node id the file's last run went by, when it peered: a restart
    /// keeps it (see `config::NodeId`).
    pub fn node_id(&self) -> Option<&str> {
        let runs = self.replay.iter().flat_map(Replay::records).filter_map(|r| match r {
            Record::Run { run, node, .. } => Some((run, node)),
            _ => None,
        });
        runs.max_by_key(|&(run, _)| run).map(|(_, node)| node).filter(|node| !node.is_empty())
    }
}

/// A step of the wall clock between runs smaller than this is not worth a
/// warning (NTP slews such errors away).
const STEP_NOTICE: i64 = 10_000_000;

/// A step of the wall clock between runs of at most this is taken for the
/// error of measuring it (`BootStamp::now` reads two clocks, a few microseconds
/// apart) and not applied. Real steps are an operator's, NTP's after an
/// outage (past 128 ms) or a restored VM's.
const STEP_FLOOR: i64 = 1_000_000;

/// The file's time may lead the wall clock by at most this much, or its
/// longest slot if longer, for this run to start from the file's time:
/// a clock stepped back a little is waited for; one far behind is a wrong
/// clock on one side or the other, and neither is followed for good.
const MAX_LEAD: Nanos = NANOS_PER_SEC;

/// The boot the file's last run wrote it on, by its `Clock` record.
fn boot_of_file(replay: Option<&Replay>) -> Option<BootStamp> {
    let saved = replay.into_iter().flat_map(Replay::records).filter_map(|r| match r {
        Record::Clock { run, boot, wall_at_boot } => Some((run, BootStamp { id: boot, wall_at_boot })),
        _ => None,
    });
    saved.max_by_key(|(run, _)| *run).map(|(_, saved)| saved)
}

/// Whether the file's last run wrote it on another boot than `boot`:
/// false where either boot is unknown (no `Clock` record, not Linux).
fn rebooted_since(saved: Option<BootStamp>, boot: Option<BootStamp>) -> bool {
    saved.zip(boot).is_some_and(|(saved, boot)| saved.id != boot.id)
}

/// How far the wall clock was stepped between the file's last run and
/// this one (0 on another boot or without a `Clock` record), warned of.
fn step_since_file(saved: Option<BootStamp>, boot: Option<BootStamp>) -> i64 {
    let Some(saved) = saved else { return 0 };
    let step = boot.and_then(|b| b.step_since(&saved)).unwrap_or(0);
    // What two readings of the clocks differ by without a step: not a
    // step, and not applied (a count moved by it would hold in a second
    // slot for the sake of a few microseconds).
    if step.unsigned_abs() <= STEP_FLOOR as u64 {
        return 0;
    }
    if step.unsigned_abs() > STEP_NOTICE as u64 {
        warn!(
            step_ms = step / 1_000_000,
            "the wall clock was stepped since the state file was written (the boot clock says by how much); \
             its records are moved by as much, so no slot's saved count lapses or is counted twice"
        );
    }
    step
}

/// A file written before the host rebooted may have lost its tail: what
/// was written to the mapped file and not yet synced (every record, unless
/// `--state-fsync`, and what came after the last sync even then). Its
/// last grants and gifts may have left the host while their records did
/// not reach the disk, so a peered run owns none of the slots, windows and
/// periods under way, as a run that cannot know what it gave; it waits for
/// the next ones, and may use what peers give it meanwhile.
fn distrust_after_reboot(service: &mut Service) {
    if service.peering().is_some() {
        warn!(
            "the state file was written before the host rebooted, and what it kept last may never have reached \
             the disk: this run owns none of the current slot (window, period) of shared limits and waits for \
             the next"
        );
    } else {
        info!("the state file was written before the host rebooted; what it kept last may be lost");
    }
    step::distrust_restored(service);
}

/// When each run in the file started, by its `Run` record.
fn runs_of(loaded: &Loaded) -> std::collections::HashMap<u32, Nanos> {
    let runs = loaded.replay.iter().flat_map(Replay::records).filter_map(|r| match r {
        Record::Run { run, incarnation, .. } => Some((run, incarnation)),
        _ => None,
    });
    runs.collect()
}

/// Reads the state file for a locker with `locker`'s limits. A file that
/// cannot be used is an error, unless the config says to discard it.
pub fn load(config: &StateConfig, locker: &Locker) -> Result<Loaded, StateError> {
    let started = Instant::now();
    let digest = limits_digest(locker);
    let replay = match Replay::read(&config.path, digest) {
        Ok(r) => r,
        Err(e) if e.is_refusal() && config.discard => {
            warn!(error = %e, "state file discarded (--state-discard)");
            None
        }
        Err(e) => return Err(e),
    };
    if let Some(r) = replay.as_ref().filter(|r| r.problem.is_some()) {
        let problem = r.problem.expect("filtered on it");
        let skipped = r.skipped;
        warn!(path = %config.path.display(), %problem, skipped, "state file damaged; restoring every good record");
    }
    let boot = BootStamp::now();
    let saved = boot_of_file(replay.as_ref());
    let (step, rebooted) = (step_since_file(saved, boot), rebooted_since(saved, boot));
    let mut loaded = Loaded { replay, digest, started, boot, step, cut: None, rebooted };
    let wall = Clock::start().now();
    let lead = loaded.not_before().saturating_sub(wall);
    if lead > MAX_LEAD.max(locker.figures().longest_slot()) {
        warn!(
            lead_ms = lead / 1_000_000,
            "the state file's time is ahead of the wall clock, and no boot clock says why; \
             starting from the wall clock and dropping the file's records from the future"
        );
        loaded.cut = Some(wall);
    }
    Ok(loaded)
}

/// The state file being kept while serving.
pub struct Keeper {
    log: StateLog,
    liveness: Liveness,
    /// This run's `Run` record: (run, incarnation, node id).
    run: (u32, Nanos, String),
    /// A compaction under way on its own thread, and when it started.
    compaction: Option<(JoinHandle<Result<Compacted, StateError>>, Instant)>,
    durable: bool,
    fsync: Option<Nanos>,
    next_sync: Nanos,
    next_slot_check: Nanos,
    shortest_slot: Nanos,
    compacted_len: usize,
    broken: bool,
    /// Bytes the file keeps reserved beyond its records: more than any one
    /// request can record, so a decided request is always recorded.
    headroom: usize,
    /// While grants are refused for want of disk space, when to try again.
    retry_room: Option<Nanos>,
    /// After a compaction failed (a full disk), none starts before this.
    compact_after: Option<Instant>,
    /// What the records' limit numbers mean, as of the table's `generation`.
    layout: Layout,
    generation: u64,
}

/// How long after a failed compaction the next one may start: a full disk
/// must not cost a thread and a warning on every loop turn.
const COMPACT_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// Why grants are refused while the state file cannot grow.
const NO_ROOM: &str = "the state file cannot grow (the disk is full): no grant can be recorded, so none is made";

/// How often a locker refusing grants for want of disk space tries again.
const ROOM_RETRY: Nanos = NANOS_PER_SEC;

impl Keeper {
    /// Replays `loaded` into `service` at `now` (this run started at
    /// `incarnation`), writes a fresh file with what is still live, and
    /// starts noting every change.
    pub fn start(
        config: &StateConfig,
        loaded: Loaded,
        service: &mut Service,
        now: Nanos,
        incarnation: Nanos,
        max_request: usize,
    ) -> Result<Keeper, StateError> {
        let started = loaded.started;
        let latest = loaded.not_before();
        if latest > 0 && now.saturating_sub(latest) > 86_400 * NANOS_PER_SEC {
            warn!(
                days = (now - latest) / 86_400 / NANOS_PER_SEC,
                "the state file is more than a day old; nothing in it is current"
            );
        }
        let numbers = restore_terms(&loaded, service, now);
        let liveness = Liveness::of(service.locker());
        let (step, cut) = (loaded.step, loaded.cut.unwrap_or(Nanos::MAX));
        let records = loaded.replay.iter().flat_map(Replay::records).filter_map(|r| match r {
            Record::Terms { .. } => None,
            r => match r.limit() {
                Some(n) => numbers.get(n as usize).copied().flatten().map(|to| r.with_limit(to)),
                None => Some(r),
            },
        });
        let step =
            (step != 0).then(|| Step { by: step, restart: now.saturating_add_signed(-step), runs: runs_of(&loaded) });
        let records = records
            .flat_map(|r| {
                let (r, more) = step.as_ref().map_or((r, None), |s| liveness.retimed(r, s));
                std::iter::once(r).chain(more)
            })
            .filter(|r| r.at() <= cut);
        let run = loaded.replay.as_ref().map_or(0, Replay::next_run);
        let (restored, mut keep) = step::restore(service, now, run, records);
        if loaded.rebooted {
            distrust_after_reboot(service);
        }
        let node = service.peering().map(|p| p.nodes().me()).map_or(String::new(), |n| n.id.to_string());
        keep.insert(0, Record::Run { run, incarnation, node: &node });
        if let Some(b) = loaded.boot {
            keep.insert(1, Record::Clock { run, boot: b.id, wall_at_boot: b.wall_at_boot });
        }
        // Read before any count on a restart, wherever they stand.
        keep.extend(terms_records(service.locker(), 0));
        let run_record = (run, incarnation, node.clone());
        let durable = config.fsync.is_some();
        let mut log = StateLog::create(&config.path, Header { limits: loaded.digest, written: now }, keep, durable)?;
        let headroom = headroom(max_request);
        log.make_room(headroom)?;
        info!(
            path = %config.path.display(),
            counts = restored.counts,
            reservations = restored.reservations,
            buckets = restored.buckets,
            leases = restored.leases,
            ledgers = restored.ledgers,
            skipped = restored.skipped,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "state restored"
        );
        let fsync = config.fsync.map(|d| (d.as_nanos() as Nanos).max(1));
        let shortest_slot = service.locker().figures().shortest_slot().max(SLOT_CHECK_GAP);
        let compacted_len = log.len();
        Ok(Keeper {
            log,
            liveness: Liveness::of(service.locker()),
            run: run_record,
            compaction: None,
            durable,
            fsync,
            next_sync: now.saturating_add(fsync.unwrap_or(Nanos::MAX)),
            next_slot_check: next_boundary(now, shortest_slot),
            shortest_slot,
            compacted_len,
            broken: false,
            headroom,
            retry_room: None,
            compact_after: None,
            layout: Layout::of(service.locker()),
            generation: service.locker().keeping().generation(),
        })
    }

    /// Reserves the headroom for the next requests; when the disk has no
    /// room for it, says why every grant must be refused until it has: a
    /// grant is recorded before its reply, and one the disk could not take
    /// must not be made. The headroom left covers every request already
    /// decided.
    fn try_room(&mut self, now: Nanos) -> Result<(), &'static str> {
        match self.log.make_room(self.headroom) {
            Ok(()) => {
                if self.retry_room.take().is_some() {
                    info!(path = %self.log.path().display(), "the state file has room again; granting");
                }
                Ok(())
            }
            Err(e) => {
                if self.retry_room.is_none() {
                    error!(error = %e, "the state file cannot grow; refusing every grant until the disk has room");
                }
                self.retry_room = Some(now.saturating_add(ROOM_RETRY));
                Err(NO_ROOM)
            }
        }
    }

    /// When the loop must wake next for a sync or a compaction.
    fn next_deadline(&self) -> Nanos {
        self.next_sync.min(self.next_slot_check).min(self.retry_room.unwrap_or(Nanos::MAX))
    }

    /// Syncs and compacts when due at `now`, and tries again for room
    /// while grants are refused for want of it: says whether grants are
    /// refused when it tried (see `Upkeep::upkeep`).
    fn on_timeout(&mut self, now: Nanos) -> Option<Option<&'static str>> {
        if self.broken {
            return None;
        }
        let room = self.retry_room.is_some_and(|at| now >= at).then(|| self.try_room(now).err());
        self.finish_compaction();
        let slot_changed = now >= self.next_slot_check;
        if slot_changed {
            self.next_slot_check = next_boundary(now, self.shortest_slot);
        }
        let grown = self.log.len() - self.compacted_len;
        let due = (slot_changed && grown >= MIN_COMPACT_AT_SLOT) || self.log.wants_compaction(MIN_COMPACT);
        let backing_off = self.compact_after.is_some_and(|t| Instant::now() < t);
        if due && self.compaction.is_none() && !backing_off {
            self.start_compaction(now);
        }
        if now >= self.next_sync {
            self.next_sync = now.saturating_add(self.fsync.unwrap_or(Nanos::MAX));
            if let Err(e) = self.log.sync() {
                self.fail(e);
            }
        }
        room
    }

    /// Collapses what the log holds so far on another thread, so that a
    /// large live state does not stall the loop; appends go on meanwhile
    /// and are carried over when the new file is put in place.
    fn start_compaction(&mut self, now: Nanos) {
        let prefix = match self.log.prefix() {
            Ok(p) => p,
            Err(e) => return self.fail(e),
        };
        let liveness = self.liveness.clone();
        let (run, incarnation, node) = self.run.clone();
        let job = std::thread::Builder::new().name("state-compaction".into()).spawn(move || {
            yield_to_the_loop();
            let me = Record::Run { run, incarnation, node: &node };
            prefix.compact(|r| liveness.is_live(now, r), Some(me))
        });
        match job {
            Ok(handle) => self.compaction = Some((handle, Instant::now())),
            Err(e) => warn!(error = %e, "cannot start a thread to compact the state file; trying later"),
        }
    }

    /// Puts a finished compaction's file in place.
    fn finish_compaction(&mut self) {
        if !self.compaction.as_ref().is_some_and(|(job, _)| job.is_finished()) {
            return;
        }
        let (job, started) = self.compaction.take().expect("checked above");
        let done = match job.join() {
            Ok(result) => result.and_then(|c| self.log.adopt(c, self.durable)),
            Err(_) => return self.fail_compaction(),
        };
        match done {
            Ok(c) => {
                self.compacted_len = self.log.len();
                debug!(before = c.before, after = c.after, kept = c.kept, took = ?started.elapsed(), "state file compacted");
            }
            // The old file is whole and still taking appends: keep it, and
            // compact again later (a full disk may have room by then).
            Err(e) => {
                warn!(error = %e, "the state file could not be compacted; keeping it as it is, trying again in 10 s");
                self.compact_after = Some(Instant::now() + COMPACT_RETRY);
            }
        }
    }

    #[cold]
    fn fail_compaction(&mut self) {
        error!("the state file's compaction failed; counts are no longer kept across a restart");
        self.broken = true;
    }

    /// Syncs what was recorded, at shutdown.
    pub fn close(mut self) {
        if let Err(e) = self.log.sync() {
            error!(error = %e, "state file not synced at shutdown");
        }
    }

    /// Follows the limits `locker` has now, if they changed since the file
    /// was last told (a reload, a runtime limit created, retuned or
    /// dropped): a limit created after the others gets a `Terms` record;
    /// any other change rewrites the file, records moved to their limit's
    /// new number, those of limits removed or reset dropped, and the header
    /// naming the configured limits, so that a restart restores them.
    pub fn follow(&mut self, locker: &Locker, now: Nanos) {
        if self.broken || locker.keeping().generation() == self.generation {
            return;
        }
        self.generation = locker.keeping().generation();
        let layout = Layout::of(locker);
        let added = layout.0.len().saturating_sub(self.layout.0.len());
        let header = limits_digest(locker) == self.log.header().limits;
        if header && layout.0.starts_with(&self.layout.0) {
            for record in terms_records(locker, layout.0.len() - added) {
                self.keep(&record);
            }
            self.liveness = Liveness::of(locker);
            self.layout = layout;
            return;
        }
        self.rewrite(locker, layout, now);
    }

    fn rewrite(&mut self, locker: &Locker, layout: Layout, now: Nanos) {
        // A compaction under way collapses the old layout: let it finish, unused.
        if let Some((job, _)) = self.compaction.take() {
            let _ = job.join();
        }
        self.liveness = Liveness::of(locker);
        let moved = self.layout.moved_to(&layout);
        self.layout = layout;
        let records =
            self.log.records().filter(|r| !matches!(r, Record::Terms { .. })).filter_map(|r| match r.limit() {
                None => Some(r),
                Some(i) => moved.get(i as usize).copied().flatten().map(|to| r.with_limit(to)),
            });
        let live = collapse(records, |r| self.liveness.is_live(now, r));
        let (run, incarnation, node) = &self.run;
        let me = Record::Run { run: *run, incarnation: *incarnation, node };
        let header = Header { limits: limits_digest(locker), written: now };
        let first = std::iter::once(me).chain(terms_records(locker, 0));
        match StateLog::create(self.log.path(), header, first.chain(live), self.durable) {
            Ok(log) => {
                self.compacted_len = log.len();
                self.log = log;
                info!("state file rewritten for the limits served now");
            }
            Err(e) => self.fail(e),
        }
    }

    #[cold]
    fn fail(&mut self, e: StateError) {
        error!(error = %e, "state file failed; counts are no longer kept across a restart");
        self.broken = true;
    }
}

/// The keeper takes each call's records before its reply leaves; a broken
/// file (a write failed) keeps nothing more, and says so once.
impl Keep for Keeper {
    fn run(&self) -> Option<u32> {
        (!self.broken).then_some(self.run.0)
    }

    #[inline]
    fn keep(&mut self, record: &Record) {
        if let Err(e) = self.log.append(record) {
            if !self.broken {
                self.fail(e);
            }
        }
    }

    #[inline]
    fn follow_limits(&mut self, locker: &Locker, now: Nanos) {
        self.follow(locker, now);
    }

    fn hold(&mut self) {
        if let Err(e) = self.log.hold() {
            if !self.broken {
                self.fail(e);
            }
        }
    }

    fn release(&mut self) {
        self.log.release();
    }

    #[inline]
    fn make_room(&mut self, now: Nanos) -> Result<(), &'static str> {
        if self.broken || self.log.room() >= self.headroom {
            return Ok(());
        }
        self.try_room(now)
    }
}

/// A locker without a state file keeps nothing.
impl Keep for Option<Keeper> {
    fn run(&self) -> Option<u32> {
        self.as_ref().and_then(Keep::run)
    }

    #[inline]
    fn keep(&mut self, record: &Record) {
        if let Some(k) = self {
            k.keep(record);
        }
    }

    #[inline]
    fn follow_limits(&mut self, locker: &Locker, now: Nanos) {
        if let Some(k) = self {
            k.follow(locker, now);
        }
    }

    fn hold(&mut self) {
        if let Some(k) = self {
            k.hold();
        }
    }

    fn release(&mut self) {
        if let Some(k) = self {
            k.release();
        }
    }

    #[inline]
    fn make_room(&mut self, now: Nanos) -> Result<(), &'static str> {
        self.as_mut().map_or(Ok(()), |k| k.make_room(now))
    }
}

/// The loop step looks after the state file on its timer (see
/// `step::turn`).
impl Upkeep for Option<Keeper> {
    fn next_upkeep(&self) -> Option<Nanos> {
        self.as_ref().map(Keeper::next_deadline)
    }

    fn upkeep(&mut self, now: Nanos) -> Option<Option<&'static str>> {
        self.as_mut().and_then(|k| k.on_timeout(now))
    }
}

/// The headroom for requests of up to `max_request` bytes: every ask of a
/// batch leaves at most one record, of its key's bytes plus at most 48
/// bytes of frame and numbers, so twice the message's size plus a margin
/// covers any one request (capped at 1 GiB, far above any sane
/// `--max-message-size`).
fn headroom(max_request: usize) -> usize {
    max_request.saturating_mul(2).saturating_add(256 << 10).min(1 << 30)
}

/// What the records' limit numbers mean: each limit's name, kind, slots
/// (length, or calendar period and zone) and definition's digest, in the
/// locker's order.
pub struct Layout(Vec<(String, Algorithm, Quota, u64)>);

impl Layout {
    /// The layout of `locker`'s limits now.
    pub fn of(locker: &Locker) -> Layout {
        let of = |l: &crate::core::Limit| (l.name().to_owned(), l.algorithm(), l.quota(), l.digest());
        Layout(locker.figures().stats().map(|(l, _)| of(l)).collect())
    }

    /// Where each limit number of `self` went in `now`: to the limit of the
    /// same name if its counts kept their meaning (same kind and slot
    /// length, as `Locker::reload` keeps them), else nowhere.
    fn moved_to(&self, now: &Layout) -> Vec<Option<u32>> {
        let same_kind = |a: Algorithm, b: Algorithm| std::mem::discriminant(&a) == std::mem::discriminant(&b);
        self.0
            .iter()
            .map(|(name, kind, slot, _)| {
                let to =
                    now.0.iter().position(|(n, k, q, _)| n == name && same_kind(*k, *kind) && q.same_slots(slot))?;
                Some(to as u32)
            })
            .collect()
    }
}

/// The first multiple of `step` after `now` (slots are aligned to the epoch).
fn next_boundary(now: Nanos, step: Nanos) -> Nanos {
    (now / step).saturating_add(1).saturating_mul(step)
}

/// What the records' limit numbers refer to: every configured limit's
/// name, kind and numbers, in the locker's order. Runtime limits follow
/// them, each named by a `Terms` record.
fn limits_digest(locker: &Locker) -> u64 {
    let mut text = String::new();
    let configured =
        |(i, _): &(usize, _)| locker.keeping().limit_at(*i).is_some_and(|id| !locker.figures().is_runtime(id));
    for (_, (limit, _)) in locker.figures().stats().enumerate().filter(configured) {
        let q = limit.quota();
        text.push_str(&format!("{}|{:?}|{}|{}", limit.name(), limit.algorithm(), q.max_requests(), q.slot_ns()));
        // A calendar's period and zone, after the figures every earlier
        // file's digest was taken over, so that those still match.
        if let Some(c) = q.calendar() {
            text.push_str(&format!("|{}|{}", c.period().name(), c.zone_name()));
        }
        text.push('\n');
    }
    digest(&text)
}

/// A `Terms` record for each runtime limit of `locker` from number `from` on.
fn terms_records(locker: &Locker, from: usize) -> impl Iterator<Item = Record<'_>> {
    let ids = (from..).map_while(|i| locker.keeping().limit_at(i)).filter(|&id| locker.figures().is_runtime(id));
    ids.map(|id| {
        let limit = locker.limit(id);
        Record::Terms { limit: id.index() as u32, name: limit.name(), terms: RuntimeTerms::of(limit) }
    })
}

/// Creates the runtime limits the file's `Terms` records name (the latest
/// of each number), in their order, before their counts go back; returns
/// where each limit number of the file goes now. The configured limits
/// keep their numbers; a runtime limit this run cannot create (fewer
/// `--runtime-limits`) loses its counts, with a warning.
fn restore_terms(loaded: &Loaded, service: &mut Service, now: Nanos) -> Vec<Option<u32>> {
    let configured = service.locker().figures().stats().count();
    let mut numbers: Vec<Option<u32>> = (0..configured as u32).map(Some).collect();
    let mut terms = std::collections::BTreeMap::new();
    for r in loaded.replay.iter().flat_map(Replay::records) {
        if let Record::Terms { limit, name, terms: t } = r {
            terms.insert(limit, (name, t));
        }
    }
    for (number, (name, t)) in terms {
        let Some(limit) = t.limit(name) else { continue };
        match step::restore_limit(service, now, limit) {
            Ok(id) => {
                let n = number as usize;
                if numbers.len() <= n {
                    numbers.resize(n + 1, None);
                }
                numbers[n] = Some(id.index() as u32);
            }
            Err(e) => warn!(limit = %name, error = %e, "a limit sent with terms not restored; its counts are dropped"),
        }
    }
    numbers
}

/// How much nicer than the loop a compaction thread runs: on a busy
/// machine the loop (the callers' answers, the peers' wants and gifts) goes
/// first, and the compaction, which nobody waits for, takes the time left.
/// A compaction of a large live state took a core for seconds beside a
/// loaded trio member's loop (docs/performance.md, "Peering at the lone
/// locker's speed").
const COMPACTION_NICE: libc::c_int = 10;

/// Makes the calling thread `COMPACTION_NICE` nicer than it is (at most
/// 19): Linux applies a nice set by thread id to that thread alone. Best
/// effort: a failure leaves the thread as it was, and says so in the log.
fn yield_to_the_loop() {
    // SAFETY: plain system calls on this thread's own id; no memory passed.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // SAFETY: as above; both read only their integer arguments.
    let set = unsafe {
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (nice + COMPACTION_NICE).min(19))
    };
    if set != 0 {
        let error = std::io::Error::last_os_error();
        warn!(%error, "the state file's compaction runs at the loop's priority: its nice could not be raised");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_thread_yields_to_the_loop_and_no_other_thread_does() {
        let nice_of = || {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            // Field 19, the nice: the 17th after the name's closing ")".
            stat.rsplit(')').next().unwrap().split_whitespace().nth(16).unwrap().parse::<i32>().unwrap()
        };
        let before = nice_of();
        let compacting = std::thread::spawn(move || {
            yield_to_the_loop();
            nice_of()
        });
        assert_eq!(compacting.join().unwrap(), (before + COMPACTION_NICE).min(19));
        assert_eq!(nice_of(), before, "the calling thread keeps its own");
    }

    #[test]
    fn a_file_is_from_before_a_reboot_only_when_both_boots_are_known_and_differ() {
        let boot = |id| Some(BootStamp { id, wall_at_boot: 1_000 });
        assert!(rebooted_since(boot(7), boot(8)), "another boot");
        assert!(!rebooted_since(boot(7), boot(7)), "this boot");
        assert!(!rebooted_since(None, boot(7)), "a file with no Clock record");
        assert!(!rebooted_since(boot(7), None), "a kernel that does not say");
    }
}
