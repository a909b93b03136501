//! Permits charged after the fact (`charge`): a caller that learns what it
//! used only once it is done (tokens of a model's answer) charges them,
//! and they are taken whatever is left, past the limit if need be. What
//! goes beyond is a debt that later asks of the key wait out; each kind
//! says how (`Rule::charge`). Peered, the debt is this locker's own
//! share's: a charge never takes a peer's permits.
//!
//! Like the rest of the table: `now` comes in, nothing is logged, no
//! socket is touched. An ask of a limit never charged pays nothing for
//! this: the charge has its own way into each kind.

use super::stats::Outcome;
use super::{AskError, Locker, TableError};
use crate::core::ask::{Charged, PermitAsk, MAX_CHARGE_CAPACITIES};
use crate::core::kinds::TakeError;
use crate::core::room::Leeway;
use crate::core::time::Nanos;

impl Locker {
    /// Charges `ask.cost` permits of `ask.limit` to `ask.key` at `now`:
    /// always taken, the excess over what is left a debt (see
    /// `Charged`). A semaphore takes no charge, and a charge may owe at
    /// most `MAX_CHARGE_CAPACITIES` times its limit's capacity; its wait
    /// and hold, if any, are not read.
    pub fn charge(&mut self, now: Nanos, ask: &PermitAsk) -> Result<Charged, AskError> {
        let charged = self.check_charge(ask).and_then(|cost| {
            let (id, key, share) = (ask.limit, ask.key, self.share(ask.limit));
            match self.counted(now, id, |rule, room| rule.charge(now, key, cost, Leeway { room, share })) {
                Ok(c) => Ok(c),
                Err(TakeError::NoRoom) => Err(TableError::TooManyKeys(self.max_keys).into()),
                Err(TakeError::Semaphore) => Err(self.charge_semaphore(ask)),
            }
        });
        let entry = &mut self.entries[ask.limit.0];
        entry.record(now, Outcome::of_ask(&charged.as_ref().map(|c| c.verdict)));
        if let Ok(c) = &charged {
            entry.stats.charged += u64::from(c.verdict.granted);
            // A charge takes what it is charged and asks the peers for nothing.
            self.publish(ask, &c.verdict, c.verdict.granted);
        }
        charged
    }

    /// The cost `ask` may charge: a counting limit's, within the most a
    /// charge may owe.
    pub fn check_charge(&self, ask: &PermitAsk) -> Result<u32, AskError> {
        let entry = &self.entries[ask.limit.0];
        if !entry.rule.is_shared() {
            return Err(self.charge_semaphore(ask));
        }
        let most = u64::from(entry.limit.capacity()).saturating_mul(MAX_CHARGE_CAPACITIES);
        match u32::try_from(ask.cost) {
            Ok(c) if ask.cost <= most => Ok(c),
            _ => Err(AskError::ChargeAboveMost { cost: ask.cost, most }),
        }
    }

    fn charge_semaphore(&self, ask: &PermitAsk) -> AskError {
        AskError::ChargeSemaphore(self.entries[ask.limit.0].limit.name().to_owned())
    }
}
