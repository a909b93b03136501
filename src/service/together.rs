//! The service's side of limits checked together (`all`), refunds and
//! resets: the parts found by name, decided by the table (or, with a
//! store, from the claims in hand), the replies written and the changes
//! noted for the state file.
//!
//! Who may reset is the daemon's to check (it alone sees the sender's
//! CURVE key) and to log; this reads no clock and touches no socket.

use super::hold::Sorry;
use super::parents::{level_reply, levels, Levels};
use std::ops::Range;

use super::{error_reply, go_reply, parking, permit_ask, Service};
use crate::core::locker::{all_or_none, refused_range};
use crate::core::time::ceil_ms;
use crate::core::{AskError, Nanos, PartError, PermitAsk, Verdict, MAX_PARTS};
use crate::state::{Journal, Keep};
use crate::wire::{self, AllAsk, AllReply, BatchEntry, Decoded, EntryReply, GoReply, Reply, Request, WireError};

// Every part a request may hold fits the array `Service::all` fills.
const _: () = assert!(wire::MAX_PARTS <= MAX_PARTS);

impl Service {
    /// Answers an `all` whose parts are `parts` (as the request's check
    /// decoded them): every part charged, or none. A refused whole may be
    /// held like a single ask, in the queue of its first part.
    pub(super) fn all(
        &mut self,
        now: Nanos,
        all: &AllAsk,
        parts: &[Result<wire::Ask, WireError>],
        out: &mut Vec<u8>,
    ) -> Option<Sorry> {
        if parts.len() != all.len() {
            // Never when the decoder kept them (see `EntryParts::of`): refused
            // rather than decided on fewer parts than were asked.
            self.locker.counters().record_error(None);
            wire::encode(&error_reply(&"the parts of \"all\" could not be read"), out);
            return None;
        }
        // On the stack: an `all` allocates nothing once warm. The levels
        // are made from the first part found; a part's limits above its
        // own (`parents`) follow it.
        let mut levels: Option<Levels> = None;
        for (part, go) in parts.iter().enumerate() {
            let found = go.as_ref().map_err(|e| e.to_string()).and_then(|go| {
                let limit = self.find_go(now, go).map_err(|e| e.to_string())?;
                let ask = permit_ask(limit, &wire::Ask { max_wait_ms: all.max_wait_ms, hold_ms: all.hold_ms, ..*go });
                let levels = levels.get_or_insert_with(|| Levels::new(ask));
                levels.add(&self.locker, ask, go.parents, go.shadow).map_err(|e| e.to_string())
            });
            if let Err(e) = found {
                wire::encode(&error_reply(&format!("part {} of \"all\": {e}", part + 1)), out);
                return None;
            }
        }
        let Some(levels) = levels else {
            // No part: nothing to decide, and the whole goes.
            wire::encode_all_reply(true, std::iter::empty(), 0, false, out);
            return None;
        };
        let asks = levels.asks();
        let mut verdicts = std::mem::take(&mut self.verdicts);
        let sorry = match self.together(now, asks, levels.shadow(), &mut verdicts) {
            Ok(go) => {
                let shadow_sorry = go && self.note_shadow_sorries(&levels, &verdicts);
                answer_all(&mut self.journal, all, &levels, &verdicts, (go, shadow_sorry), out)
            }
            Err(e) => {
                self.locker.counters().record_error(asks.get(e.part).map(|a| a.limit));
                wire::encode(&error_reply(&levels.describe(&self.locker, &e, true)), out);
                None
            }
        };
        self.verdicts = verdicts;
        sorry
    }

    /// Decides `asks` together at `now`, each part charged or none (a
    /// range of `shadow` that would refuse charged nothing, apart), their
    /// verdicts into `verdicts`: by the table, or from the claims in hand
    /// with a store.
    pub(super) fn together(
        &mut self,
        now: Nanos,
        asks: &[PermitAsk],
        shadow: &[Range<usize>],
        verdicts: &mut Vec<Verdict>,
    ) -> Result<bool, PartError> {
        match self.store.is_some() {
            false => self.locker.all_shadowed(now, asks, shadow, verdicts),
            true => self.all_from_claims(now, asks, shadow, verdicts),
        }
    }

    /// `all` with a store: each part decided from the claims in hand (the
    /// claims a short part needed were topped up before, see
    /// `claims_needed`), and given back to them when any part says sorry.
    fn all_from_claims(
        &mut self,
        now: Nanos,
        asks: &[PermitAsk],
        shadow: &[Range<usize>],
        verdicts: &mut Vec<Verdict>,
    ) -> Result<bool, PartError> {
        self.locker.check_parts(asks)?;
        all_or_none(
            self,
            asks,
            shadow,
            verdicts,
            |me, _, ask| me.count(now, ask),
            |me, ask, v| {
                let _ = me.give_back(now, &PermitAsk { cost: u64::from(v.granted), ..*ask });
            },
        )
    }

    /// Gives back up to `ask.cost` permits: to the table, or to the claim
    /// in hand with a store (never to the store past what was claimed).
    pub(super) fn give_back(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Verdict, AskError> {
        match &mut self.store {
            Some(s) if !s.decides_alone(&self.locker, ask) => Ok(s.give_back(&self.locker, now, ask)),
            _ => self.locker.refund(now, ask),
        }
    }

    /// Answers a refund: a go reply whose `granted` is what went back.
    pub(super) fn refund(&mut self, now: Nanos, refund: &wire::Refund, out: &mut Vec<u8>) {
        let id = match self.names.find(&mut self.locker, refund.limit) {
            Ok(id) => id,
            Err(e) => return wire::encode(&error_reply(&e), out),
        };
        let ask = PermitAsk { key: refund.key, cost: refund.cost, ..PermitAsk::new(id) };
        if self.has_levels(id, refund.parents) {
            return self.refund_with_levels(now, ask, refund.parents, out);
        }
        match self.give_back(now, &ask) {
            Ok(v) => {
                if v.granted > 0 {
                    self.journal.note_count(id, refund.key);
                }
                wire::encode_go_reply(&go_reply(&v, &wire::Ask::new().up_to()), out);
            }
            Err(e) => {
                self.locker.counters().record_error(Some(id));
                wire::encode(&error_reply(&e), out);
            }
        }
    }

    /// Answers a reset: a go reply with the key's figures after it.
    pub(super) fn reset(&mut self, now: Nanos, reset: &wire::Reset, out: &mut Vec<u8>) {
        let id = match self.names.find(&mut self.locker, reset.limit) {
            Ok(id) => id,
            Err(e) => return wire::encode(&error_reply(&e), out),
        };
        let ask = PermitAsk { key: reset.key, cost: u64::from(u32::MAX), ..PermitAsk::new(id) };
        let done = self.locker.reset(now, id, reset.key).and_then(|_| match &mut self.store {
            Some(s) if !s.decides_alone(&self.locker, &ask) => Ok(s.give_back(&self.locker, now, &ask)),
            _ => self.locker.refund(now, &PermitAsk { cost: 0, ..ask }),
        });
        match done {
            Ok(v) => {
                self.journal.note_count(id, reset.key);
                wire::encode_go_reply(&go_reply(&Verdict { granted: 0, ..v }, &wire::Ask::new()), out);
            }
            Err(e) => {
                self.locker.counters().record_error(Some(id));
                wire::encode(&error_reply(&e), out);
            }
        }
    }

    /// Gives back what a go answered to `request` took, when its reply
    /// (`reply`) could not be delivered: nobody goes with those permits.
    /// A plain go gave 1, a structured one its `granted` or its cost; a
    /// batch, each entry's go (an `all` entry's as an `all`'s); an `all`
    /// that went, each part's. Each give-back is noted for the state file.
    pub(super) fn give_back_undelivered(&mut self, now: Nanos, request: &[u8], reply: &[u8], keep: &mut impl Keep) {
        let decoded = self.decoder.decode(request);
        let mut took = Vec::new();
        took_by(&decoded, reply, &mut took);
        self.journaled(now, keep, |s| {
            let now = s.enter(now);
            let mut asks: Vec<PermitAsk> = Vec::new();
            match &decoded.request {
                // A plain go of a limit in shadow may have been a sorry
                // that took nothing: none is given back.
                Ok(Request::Plain(body)) => {
                    let id = s.names.plain(&s.locker, body);
                    if !s.locker.shadow(id) {
                        asks.push(PermitAsk::new(id));
                    }
                }
                _ => {
                    for (go, cost) in &took {
                        let Ok(limit) = s.names.lookup(&s.locker, go.limit) else { continue };
                        let ask = PermitAsk { key: go.key, cost: *cost, ..PermitAsk::new(limit) };
                        // A go that went found every level: each gets back what it took.
                        let _ = levels(&s.locker, ask, go.parents, |level| {
                            asks.push(level);
                            Ok(())
                        });
                    }
                }
            }
            for ask in &asks {
                if s.give_back(now, ask).is_ok_and(|v| v.granted > 0) {
                    s.journal.note_count(ask.limit, ask.key);
                }
            }
        });
        drop(took);
        self.decoder.recycle(decoded);
    }
}

/// Notes in `journal` and answers an `all` decided: `go` for the whole
/// (and whether a part in shadow would have refused it), a verdict for
/// each part of `asks`; a sorry to hold when the whole was refused for a
/// part's sorry.
fn answer_all(
    journal: &mut Journal,
    all: &AllAsk,
    levels: &Levels,
    verdicts: &[Verdict],
    (go, shadow_sorry): (bool, bool),
    out: &mut Vec<u8>,
) -> Option<Sorry> {
    let asks = levels.asks();
    for (ask, v) in asks.iter().zip(verdicts) {
        journal.note_go(ask.limit, ask.key, v);
    }
    let whole = wire::Ask { max_wait_ms: all.max_wait_ms, hold_ms: all.hold_ms, ..wire::Ask::new() };
    let retry_after = verdicts.iter().map(|v| v.retry_after).max().unwrap_or(0);
    // A part with limits above its own answers for all of its levels; one
    // whose sorry was in shadow goes, and says so.
    let shadow = levels.shadow();
    let replies = levels.spans().map(|span| {
        let part = &verdicts[span.clone()];
        let shadow_sorry = go && span.clone().any(|i| !verdicts[i].go && refused_range(shadow, verdicts, i));
        let went = part.iter().all(|v| v.go) || shadow_sorry;
        GoReply { shadow_sorry, ..level_reply(part, went, &whole) }
    });
    wire::encode_all_reply(go, replies, ceil_ms(retry_after), shadow_sorry, out);
    let first = asks.first().filter(|_| !go && verdicts.iter().any(|v| !v.go))?;
    Some(Sorry { limit: first.limit, retry_after, asked_hold: all.hold_ms.map(parking::asked_hold) })
}

/// The structured asks a go reply `reply` to `decoded` granted, each with
/// what it took (its `granted`, else its cost), added to `took`: a go's,
/// each entry's of a batch, each part's of an `all` that went.
fn took_by<'d, 'a>(decoded: &'d Decoded<'a>, reply: &[u8], took: &mut Vec<(&'d wire::Ask<'a>, u64)>) {
    // A go whose sorry was in shadow took nothing at some level, perhaps
    // at all of them: none is given back, rather than one it did not take.
    let mut went = |go: &'d wire::Ask<'a>, r: &GoReply| {
        if r.ok && !r.shadow_sorry {
            took.push((go, r.granted.map_or(go.cost, u64::from)));
        }
    };
    match &decoded.request {
        Ok(Request::Go(go)) => {
            if let Ok(Reply::Answer(r)) = wire::decode_reply::<GoReply>(reply) {
                went(go, &r);
            }
        }
        Ok(Request::Batch(_)) => {
            if let Ok(Reply::Answer(replies)) = wire::decode_batch_entries_reply(reply) {
                for ((entry, parts), r) in decoded.entries_with_parts().zip(&replies) {
                    match (entry, r) {
                        (Ok(BatchEntry::Go(go)), Ok(EntryReply::Go(r))) => went(go, r),
                        (Ok(BatchEntry::All(_)), Ok(EntryReply::All(r))) => {
                            parts_went(parts, r).for_each(|(go, part)| went(go, part));
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(Request::All(_)) => {
            if let Ok(Reply::Answer(r)) = wire::decode_all_reply(reply) {
                parts_went(decoded.parts(), &r).for_each(|(go, part)| went(go, part));
            }
        }
        _ => {}
    }
}

/// The parts of an `all` (`parts`) and their replies in `r`, when the
/// whole went: they went only then.
fn parts_went<'d, 'a, 'r>(
    parts: &'d [Result<wire::Ask<'a>, WireError>],
    r: &'r AllReply,
) -> impl Iterator<Item = (&'d wire::Ask<'a>, &'r GoReply)> {
    let whole = if r.ok { &r.replies[..] } else { &[] };
    parts.iter().zip(whole).filter_map(|(go, part)| Some((go.as_ref().ok()?, part)))
}
