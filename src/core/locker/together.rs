//! Asks decided together (`all`), permits given back (`refund`) and one
//! key's count cleared (`reset`).
//!
//! `all` takes every part in turn, as a go would, and when any part says
//! sorry gives back exactly what the others took, before anything is
//! published to peers or counted: a refused whole leaves every count as
//! it found it; a range of asks in shadow (`all_shadowed`) that says
//! sorry is given back alone, and does not refuse the whole. A refund gives back what a key took and still counts
//! (see `Rule::give_back`), never more, so it cannot make room a limit
//! does not have. Like the rest of the table: `now` comes in, nothing is
//! logged, no socket is touched.

use std::ops::Range;

use super::{AskError, Locker, Outcome};
use crate::core::ask::{PermitAsk, Verdict, Want};
use crate::core::time::Nanos;

/// The most parts one `all` may hold.
pub const MAX_PARTS: usize = 16;

/// Why an `all` was not decided: the part (from 0) and what it met.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("part {} of \"all\": {error}", part + 1)]
pub struct PartError {
    pub part: usize,
    pub error: AskError,
}

impl Locker {
    /// Answers `asks` together at `now`: true, each part charged, when
    /// every part goes; false, none charged, when any says sorry. Each
    /// part's verdict goes into `verdicts` (cleared first): on a refusal a
    /// part that would have gone says so, with its figures as they stand
    /// and nothing granted. A part that is not an ask for permits, or is
    /// refused by its limit's terms, is an error for the whole, with
    /// nothing charged.
    pub fn all(&mut self, now: Nanos, asks: &[PermitAsk], verdicts: &mut Vec<Verdict>) -> Result<bool, PartError> {
        self.all_shadowed(now, asks, &[], verdicts)
    }

    /// `all`, with the asks of each range of `shadow` in shadow: a range
    /// with a sorry among them charges nothing and does not refuse the
    /// whole (see `all_or_none`); each of its asks counts as a sorry.
    pub fn all_shadowed(
        &mut self,
        now: Nanos,
        asks: &[PermitAsk],
        shadow: &[Range<usize>],
        verdicts: &mut Vec<Verdict>,
    ) -> Result<bool, PartError> {
        let wants = self.check_parts(asks)?;
        let go = all_or_none(
            self,
            asks,
            shadow,
            verdicts,
            |me, part, ask| me.take_quietly(now, ask, wants[part]),
            |me, ask, v| {
                let (key, granted, wait) = (ask.key, v.granted, v.wait);
                me.counted(now, ask.limit, |rule, _| rule.give_back(now, key, granted, wait));
            },
        )?;
        for (i, (ask, v)) in asks.iter().zip(verdicts.iter()).enumerate() {
            // A refused whole is a sorry for every part, and so is a
            // refused shadow range for each of its asks; peers still hear
            // what a short part asked them for.
            let refused = !go || refused_range(shadow, verdicts, i);
            let outcome = if refused { Outcome::Sorry } else { Outcome::of_verdict(v) };
            self.entries[ask.limit.0].stats.record(outcome);
            self.publish(ask, v, wants[i].cost);
        }
        Ok(go)
    }

    /// Checks every part of an `all` before any is decided: at most
    /// `MAX_PARTS`, each an ask of a counting kind for its whole cost that
    /// its limit's terms allow. Returns what each part wants.
    pub fn check_parts(&self, asks: &[PermitAsk]) -> Result<[Want; MAX_PARTS], PartError> {
        if asks.len() > MAX_PARTS {
            return Err(PartError { part: MAX_PARTS, error: AskError::TooManyParts(asks.len()) });
        }
        let mut wants = [Want::now(0); MAX_PARTS];
        for (part, ask) in asks.iter().enumerate() {
            let entry = &self.entries[ask.limit.0];
            let checked = match () {
                _ if !entry.rule.is_shared() => Err(AskError::IsSemaphore(entry.limit.name().to_owned())),
                _ if ask.up_to => Err(AskError::UpToInAll),
                _ => self.want(ask),
            };
            wants[part] = checked.map_err(|error| PartError { part, error })?;
        }
        Ok(wants)
    }

    /// Gives back up to `ask.cost` permits `ask.key` took of `ask.limit`
    /// that still count at `now`: a go verdict whose `granted` is how many
    /// went back and whose figures are the count's after it.
    pub fn refund(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        let n = u32::try_from(ask.cost).unwrap_or(u32::MAX);
        let key = ask.key;
        let v = self.counted(now, ask.limit, |rule, _| {
            let back = rule.give_back(now, key, n, 0);
            rule.hold_off(now, key, 0).map(|v| (back, v))
        });
        match v {
            Some((back, v)) => Ok(Verdict { go: true, granted: back, retry_after: 0, ..v }),
            None => Err(AskError::IsSemaphore(self.entries[ask.limit.0].limit.name().to_owned())),
        }
    }

    /// Clears `key`'s own count of limit `id` at `now`, if the limit
    /// allows it; returns whether there was one.
    pub fn reset(&mut self, now: Nanos, id: crate::core::LimitId, key: Option<&str>) -> Result<bool, AskError> {
        let limit = &self.entries[id.0].limit;
        if !self.entries[id.0].rule.is_shared() {
            return Err(AskError::IsSemaphore(limit.name().to_owned()));
        }
        if !limit.allows_reset() {
            return Err(AskError::ResetNotAllowed(limit.name().to_owned()));
        }
        Ok(self.counted(now, id, |rule, _| rule.clear(now, key)))
    }
}

/// Takes every part of `asks` in turn with `take`, or none: when a part
/// errs or any says sorry, `give_back` hears, newest first, each part that
/// went with its verdict, which then says that nothing was granted (its
/// figures as they stood). The verdicts go into `verdicts` (cleared
/// first). For the table's `all`, and for deciders outside it (a store's
/// claims), so that both refuse a whole alike.
///
/// The asks of each range of `shadow` (none for a usual `all`) are in
/// shadow: when one of a range says sorry, the range's other asks are
/// given back as a refused whole's are, and the range does not refuse
/// the whole; the other asks decide it as usual.
pub fn all_or_none<S: ?Sized>(
    s: &mut S,
    asks: &[PermitAsk],
    shadow: &[Range<usize>],
    verdicts: &mut Vec<Verdict>,
    mut take: impl FnMut(&mut S, usize, &PermitAsk) -> Result<Verdict, AskError>,
    mut give_back: impl FnMut(&mut S, &PermitAsk, &Verdict),
) -> Result<bool, PartError> {
    verdicts.clear();
    let mut failed = None;
    for (part, ask) in asks.iter().enumerate() {
        match take(s, part, ask) {
            Ok(v) => verdicts.push(v),
            Err(error) => {
                failed = Some(PartError { part, error });
                break;
            }
        }
    }
    let mut give_back_range = |s: &mut S, verdicts: &mut [Verdict], range: Range<usize>| {
        let start = range.start;
        for (ask, v) in asks[range].iter().zip(&mut verdicts[start..]).rev().filter(|(_, v)| v.go && v.granted > 0) {
            give_back(s, ask, v);
            if v.wait == 0 {
                v.remaining = v.remaining.saturating_add(v.granted).min(v.limit);
            }
            (v.granted, v.wait) = (0, 0);
        }
    };
    if failed.is_none() {
        for range in shadow.iter().rev() {
            if refused_range(shadow, verdicts, range.start) {
                give_back_range(s, verdicts, range.clone());
            }
        }
    }
    let go =
        failed.is_none() && verdicts.iter().enumerate().all(|(i, v)| v.go || shadow.iter().any(|r| r.contains(&i)));
    if !go {
        let taken = verdicts.len();
        give_back_range(s, verdicts, 0..taken);
    }
    failed.map_or(Ok(go), Err)
}

/// Whether the ask at `i` is in a range of `shadow` some ask of which
/// says sorry in `verdicts`: a shadow range that would refuse.
pub fn refused_range(shadow: &[Range<usize>], verdicts: &[Verdict], i: usize) -> bool {
    shadow.iter().any(|r| r.contains(&i) && verdicts.get(r.clone()).is_some_and(|vs| vs.iter().any(|v| !v.go)))
}
