//! Limits with parents (org > team > user), on the service's side. An ask
//! of a limit whose config names a `parent` takes its cost from that limit
//! and from every limit above it, each under the key the ask names for it
//! in `parents`, all or nothing: its levels are decided together as the
//! parts of an `all` are (`together`), so that peering, the store, holding,
//! the state file and the counters treat them as an `all`'s. A refund gives
//! back to every level; a reset clears only the limit it names.
//!
//! This module finds each level and its key, checks them, and writes the
//! one go reply such an ask gets. An ask of a limit without a parent and
//! without `parents` never enters it: `Locker::parent` answers it from one
//! flag while no limit has a parent. It reads no clock and touches no
//! socket.

use std::ops::Range;

use super::hold::Sorry;
use super::{error_reply, go_reply, parking, permit_ask, Service};
use crate::core::limit::MAX_LEVELS;
use crate::core::locker::refused_range;
use crate::core::time::ceil_ms;
use crate::core::{Algorithm, AskError, LimitId, Locker, Nanos, PartError, PermitAsk, Verdict, MAX_PARTS};
use crate::wire::{self, GoReply, Parents};

// A `parents` map names at most every level above the deepest limit.
const _: () = assert!(wire::MAX_PARENTS + 1 == MAX_LEVELS);
// The levels of one ask fit the parts of an `all`.
const _: () = assert!(MAX_LEVELS <= MAX_PARTS);

/// Why an ask's levels could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ParentsError {
    #[error("limit {limit:?} has parent {parent:?}: the ask names no key for {parent:?} in \"parents\"")]
    NoKey { limit: String, parent: String },
    #[error("limit {0:?} has no parent: an ask of it takes no \"parents\"")]
    NoParent(String),
    #[error("\"parents\" names {named:?}, which is not above limit {limit:?} (above it: {above})")]
    NotAbove { named: String, limit: String, above: String },
    #[error("limit {0:?}: its parents go more than {MAX_LEVELS} levels deep, or round in a cycle")]
    TooDeep(String),
    #[error("\"up_to\" is not taken by a limit with parents: every level takes the whole cost or nothing")]
    UpTo,
    #[error("with the limits above its parts, \"all\" would hold more than {MAX_PARTS} limits")]
    TooMany,
}

impl Service {
    /// Whether an ask of `limit` that names `parents` is decided with its
    /// levels: it names some, or its limit has a parent.
    #[inline]
    pub(super) fn has_levels(&self, limit: LimitId, parents: Option<Parents>) -> bool {
        parents.is_some() || self.locker.parent(limit).is_some()
    }

    /// Answers a go of `limit` decided with its levels: one go reply (see
    /// `level_reply`); a refused ask may be held like any go, in the queue
    /// of its own limit and key.
    pub(super) fn go_with_levels(
        &mut self,
        now: Nanos,
        limit: LimitId,
        go: &wire::Ask,
        out: &mut Vec<u8>,
    ) -> Option<Sorry> {
        let ask = permit_ask(limit, go);
        let mut levels = Levels::new(ask);
        let found =
            if go.up_to { Err(ParentsError::UpTo) } else { levels.add(&self.locker, ask, go.parents, go.shadow) };
        if let Err(e) = found {
            self.locker.counters().record_error(Some(limit));
            wire::encode(&error_reply(&e), out);
            return None;
        }
        let mut verdicts = std::mem::take(&mut self.verdicts);
        let sorry = match self.together(now, levels.asks(), levels.shadow(), &mut verdicts) {
            Ok(went) => {
                for (level, v) in levels.asks().iter().zip(&verdicts) {
                    self.journal.note_go(level.limit, level.key, v);
                }
                let shadow_sorry = went && self.note_shadow_sorries(&levels, &verdicts);
                wire::encode_go_reply(&GoReply { shadow_sorry, ..level_reply(&verdicts, went, go) }, out);
                let retry_after = verdicts.iter().map(|v| v.retry_after).max().unwrap_or(0);
                let asked_hold = go.hold_ms.map(parking::asked_hold);
                (!went && go.cost > 0).then_some(Sorry { limit, retry_after, asked_hold })
            }
            Err(e) => {
                self.locker.counters().record_error(levels.asks().get(e.part).map(|a| a.limit));
                wire::encode(&error_reply(&levels.describe(&self.locker, &e, false)), out);
                None
            }
        };
        self.verdicts = verdicts;
        sorry
    }

    /// Answers a refund of `ask` given back to every level: up to its cost
    /// to each, never more than each still counts of what the key took
    /// there; the reply is the figures of the level with the fewest
    /// permits left after it.
    pub(super) fn refund_with_levels(
        &mut self,
        now: Nanos,
        ask: PermitAsk,
        parents: Option<Parents>,
        out: &mut Vec<u8>,
    ) {
        let mut levels = Levels::new(ask);
        let found = levels.add(&self.locker, ask, parents, false).map_err(|e| e.to_string()).and_then(|()| {
            let semaphore =
                levels.asks().iter().find(|a| self.locker.limit(a.limit).algorithm() == Algorithm::Semaphore);
            semaphore.map_or(Ok(()), |a| {
                Err(AskError::IsSemaphore(self.locker.limit(a.limit).name().to_owned()).to_string())
            })
        });
        if let Err(e) = found {
            self.locker.counters().record_error(Some(ask.limit));
            return wire::encode(&error_reply(&e), out);
        }
        let mut verdicts = std::mem::take(&mut self.verdicts);
        verdicts.clear();
        for level in levels.asks() {
            // Never an error: no level is a semaphore.
            if let Ok(v) = self.give_back(now, level) {
                if v.granted > 0 {
                    self.journal.note_count(level.limit, level.key);
                }
                verdicts.push(v);
            }
        }
        wire::encode_go_reply(&level_reply(&verdicts, true, &wire::Ask::new().up_to()), out);
        self.verdicts = verdicts;
    }

    /// Counts a shadow sorry for each level of `levels` that said sorry
    /// in a shadow range that would have refused (`verdicts`, the
    /// levels'); tells whether there was one. A peek counts none, as it
    /// counts no sorry.
    pub(super) fn note_shadow_sorries(&mut self, levels: &Levels, verdicts: &[Verdict]) -> bool {
        let shadow = levels.shadow();
        if shadow.is_empty() {
            return false;
        }
        let mut any = false;
        for (i, (ask, v)) in levels.asks().iter().zip(verdicts).enumerate() {
            if !v.go && refused_range(shadow, verdicts, i) {
                any = true;
                if ask.cost > 0 {
                    self.locker.counters().record_shadow_sorry(ask.limit);
                }
            }
        }
        any
    }
}

/// Hands `ask` to `each`, then each limit above its limit in turn, up the
/// chain, under the key `parents` names for it (the ask otherwise the
/// same); an error when a level has no key, when `parents` names a limit
/// that is not above, or when the chain does not end within
/// `MAX_LEVELS` (a table built without the config's check).
pub(super) fn levels<'k>(
    locker: &Locker,
    ask: PermitAsk<'k>,
    parents: Option<Parents<'k>>,
    mut each: impl FnMut(PermitAsk<'k>) -> Result<(), ParentsError>,
) -> Result<(), ParentsError> {
    each(ask)?;
    let name = |id: LimitId| locker.limit(id).name().to_owned();
    let (mut below, mut above_count) = (ask.limit, 0);
    while let Some(above) = locker.parent(below) {
        above_count += 1;
        if above_count >= MAX_LEVELS {
            return Err(ParentsError::TooDeep(name(ask.limit)));
        }
        let parent = locker.limit(above).name();
        let Some(key) = parents.and_then(|p| p.key_of(parent)) else {
            return Err(ParentsError::NoKey { limit: name(below), parent: parent.to_owned() });
        };
        each(PermitAsk { limit: above, key: Some(key), ..ask })?;
        below = above;
    }
    // Names are distinct (the wire holds them to it) and each level found
    // its own: any name more than the levels is not above.
    match parents {
        Some(p) if p.len() > above_count => Err(not_above(locker, ask.limit, p)),
        _ => Ok(()),
    }
}

/// The error for `parents`, which names a limit that is not above `limit`.
#[cold]
fn not_above(locker: &Locker, limit: LimitId, parents: Parents) -> ParentsError {
    let mut above = Vec::new();
    let mut at = limit;
    while let Some(next) = locker.parent(at).filter(|_| above.len() < MAX_LEVELS) {
        above.push(locker.limit(next).name());
        at = next;
    }
    let own = locker.limit(limit).name().to_owned();
    let Some((named, _)) = parents.iter().find(|(n, _)| !above.contains(n)) else { return ParentsError::TooDeep(own) };
    if above.is_empty() {
        return ParentsError::NoParent(own);
    }
    let above = above.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
    ParentsError::NotAbove { named: named.to_owned(), limit: own, above }
}

/// The go reply to an ask decided with its levels (`verdicts`, its own
/// limit's first): `went` for the whole, and the figures of the level
/// nearest to refusing it: when it did not go, the refusing level that
/// waits longest; when it went, the level with the fewest permits left
/// (the first of them, the ask's own limit on a tie), as the standard
/// rate-limit header fields report the policy closest to its limit.
/// `wait_ms`, when the ask accepted a reservation, is the longest of the
/// levels': it may go after that.
pub(super) fn level_reply(verdicts: &[Verdict], went: bool, ask: &wire::Ask) -> GoReply {
    let refusing = verdicts.iter().filter(|v| !v.go).reduce(|a, b| if b.retry_after > a.retry_after { b } else { a });
    let fewest = verdicts.iter().reduce(|a, b| if b.remaining < a.remaining { b } else { a });
    let Some(level) = refusing.filter(|_| !went).or(fewest) else {
        return GoReply {
            ok: went,
            limit: 0,
            remaining: 0,
            retry_after_ms: 0,
            reset_after_ms: 0,
            granted: None,
            wait_ms: None,
            shadow_sorry: false,
        };
    };
    let wait = verdicts.iter().map(|v| v.wait).max().unwrap_or(0);
    GoReply { ok: went, wait_ms: ask.max_wait_ms.map(|_| ceil_ms(wait)), ..go_reply(level, ask) }
}

/// The asks of one request's levels, on the stack: the parts of an `all`
/// (or the one ask of a go), each followed by the limits above its own;
/// and the ranges of them in shadow.
pub(super) struct Levels<'k> {
    asks: [PermitAsk<'k>; MAX_PARTS],
    len: usize,
    /// Where each part's levels end in `asks`.
    ends: [usize; MAX_PARTS],
    parts: usize,
    /// The levels in shadow, each range decided apart (see
    /// `Locker::all_shadowed`): every level of a part asked in shadow,
    /// or one level whose limit is in shadow.
    shadow: [Range<usize>; MAX_PARTS],
    shadows: usize,
}

impl<'k> Levels<'k> {
    /// No levels yet; `first` only fills the array.
    pub(super) fn new(first: PermitAsk<'k>) -> Levels<'k> {
        let shadow = std::array::from_fn(|_| 0..0);
        Levels { asks: [first; MAX_PARTS], len: 0, ends: [0; MAX_PARTS], parts: 0, shadow, shadows: 0 }
    }

    /// Adds `ask` and the limits above its own (see `levels`) as the next
    /// part, in shadow when `shadow` says so (a level whose limit is in
    /// shadow is, alone, whatever it says); more than `MAX_PARTS` levels in
    /// all is an error.
    pub(super) fn add(
        &mut self,
        locker: &Locker,
        ask: PermitAsk<'k>,
        parents: Option<Parents<'k>>,
        shadow: bool,
    ) -> Result<(), ParentsError> {
        let (asks, len) = (&mut self.asks, &mut self.len);
        let start = *len;
        levels(locker, ask, parents, |level| {
            *asks.get_mut(*len).ok_or(ParentsError::TooMany)? = level;
            *len += 1;
            Ok(())
        })?;
        self.ends[self.parts] = self.len;
        self.parts += 1;
        if shadow {
            self.add_shadow(start..self.len);
        } else {
            for i in start..self.len {
                if locker.shadow(self.asks[i].limit) {
                    self.add_shadow(i..i + 1);
                }
            }
        }
        Ok(())
    }

    /// Puts the levels of `range` in shadow: never reserved, so that a
    /// would-be sorry is one.
    fn add_shadow(&mut self, range: Range<usize>) {
        for ask in &mut self.asks[range.clone()] {
            ask.max_wait_ms = 0;
        }
        self.shadow[self.shadows] = range;
        self.shadows += 1;
    }

    /// The ranges of levels in shadow.
    pub(super) fn shadow(&self) -> &[Range<usize>] {
        &self.shadow[..self.shadows]
    }

    /// Every level of every part, in order.
    pub(super) fn asks(&self) -> &[PermitAsk<'k>] {
        &self.asks[..self.len]
    }

    /// Each part's levels, as a range of `asks` (and of their verdicts).
    pub(super) fn spans(&self) -> impl ExactSizeIterator<Item = Range<usize>> + '_ {
        (0..self.parts).map(|part| part.checked_sub(1).map_or(0, |before| self.ends[before])..self.ends[part])
    }

    /// What `e`, an error of the level at `e.part`, says: the part it is
    /// in when they are the parts of an `all` (`in_all`), and the level
    /// when it is above the part's own limit.
    pub(super) fn describe(&self, locker: &Locker, e: &PartError, in_all: bool) -> String {
        let Some(part) = self.spans().position(|span| span.contains(&e.part)) else { return e.to_string() };
        let own = self.spans().nth(part).map_or(e.part, |span| span.start);
        let whole = if in_all { format!("part {} of \"all\": ", part + 1) } else { String::new() };
        if own == e.part {
            return format!("{whole}{}", e.error);
        }
        let (level, below) = (locker.limit(self.asks[e.part].limit).name(), locker.limit(self.asks[own].limit).name());
        format!("{whole}limit {level:?}, above {below:?}: {}", e.error)
    }
}
