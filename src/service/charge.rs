//! The service's side of a charge (`op: charge`): permits a caller used
//! before it knew how many, taken by the table whatever is left (see
//! `core::locker::charge`), at every level when its limit has parents, and
//! answered with a go reply and the debt left.
//!
//! A store-backed limit takes its charges in the store: the request first
//! waited for the claims of what the hands lacked (`store`), taken there
//! past the limit, so here it is taken from the hands; when a claim
//! failed, nothing is taken and the caller is told to send it again. This
//! reads no clock and touches no socket.

use super::parents::{level_reply, Levels};
use super::{error_reply, go_reply, Service};
use crate::core::{Charged, Nanos, PermitAsk};
use crate::wire::{self, Parents};

impl Service {
    /// Answers a charge: a go reply (`granted` the cost) with its `debt`.
    pub(super) fn charge(&mut self, now: Nanos, charge: &wire::Charge, out: &mut Vec<u8>) {
        let id = match self.names.find(&mut self.locker, charge.limit) {
            Ok(id) => id,
            Err(e) => return wire::encode(&error_reply(&e), out),
        };
        let ask = PermitAsk { key: charge.key, cost: charge.cost, ..PermitAsk::new(id) };
        if self.has_levels(id, charge.parents) {
            return self.charge_with_levels(now, ask, charge.parents, out);
        }
        match self.charge_one(now, &ask) {
            Ok(c) => {
                self.journal.note_charge(id, ask.key, &c.verdict);
                write_reply(&[c], out);
            }
            Err(e) => wire::encode(&error_reply(&e), out),
        }
    }

    /// Charges `ask` to the table, or to the store's claims when a store
    /// keeps its limit's counts.
    fn charge_one(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Charged, String> {
        match &mut self.store {
            Some(s) if !s.decides_alone(&self.locker, ask) => {
                let charged = s.charge(&mut self.locker, now, ask);
                if charged.is_err() {
                    self.locker.counters().record_error(Some(ask.limit));
                }
                charged
            }
            _ => self.locker.charge(now, ask).map_err(|e| e.to_string()),
        }
    }

    /// Charges `ask` to its limit and every limit above it: each level
    /// checked first, then each taken (a charge never says sorry, so none
    /// is given back); the reply is the figures of the level with the
    /// fewest permits left, and the largest debt of any level.
    fn charge_with_levels(&mut self, now: Nanos, ask: PermitAsk, parents: Option<Parents>, out: &mut Vec<u8>) {
        let mut levels = Levels::new(ask);
        let found = levels.add(&self.locker, ask, parents, false).map_err(|e| e.to_string()).and_then(|()| {
            levels.asks().iter().try_for_each(|level| match &self.store {
                Some(s) if !s.decides_alone(&self.locker, level) => s.covers(&self.locker, now, level),
                _ => self.locker.check_charge(level).map(drop).map_err(|e| e.to_string()),
            })
        });
        if let Err(e) = found {
            self.locker.counters().record_error(Some(ask.limit));
            return wire::encode(&error_reply(&e), out);
        }
        let mut charged = Vec::with_capacity(levels.asks().len());
        for level in levels.asks() {
            // Never an error: every level was checked, and a charge takes
            // its cost whatever is left (the store's, what its claims
            // brought).
            if let Ok(c) = self.charge_one(now, level) {
                self.journal.note_charge(level.limit, level.key, &c.verdict);
                charged.push(c);
            }
        }
        write_reply(&charged, out);
    }
}

/// Writes the reply to a charge decided at each of `levels` (one for a
/// limit without parents).
fn write_reply(levels: &[Charged], out: &mut Vec<u8>) {
    let verdicts: Vec<_> = levels.iter().map(|c| c.verdict).collect();
    let debt = levels.iter().map(|c| u64::from(c.debt)).max().unwrap_or(0);
    let reply = match verdicts.as_slice() {
        [one] => go_reply(one, &wire::Ask::new().up_to()),
        many => level_reply(many, true, &wire::Ask::new().up_to()),
    };
    wire::encode_charge_reply(&reply, debt, out);
}
