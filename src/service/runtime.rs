//! Asks that carry their limit's terms (`--runtime-limits`): the limit they
//! name is found, or created on first use, or retuned, by the table
//! (`core::locker::runtime`); this side builds the limit from the wire's
//! terms and keeps the service's own references to limit ids in step when
//! the table drops idle ones.
//!
//! It reads no clock and touches no socket.

use super::Service;
use crate::core::{AskError, Limit, LimitId, Nanos, TableError, DEFAULT_LIMIT};
use crate::wire::Terms;

impl Service {
    /// The limit a go with `terms` names (`name`, else the default), as
    /// the table makes it count by them; an error, counted, when the terms
    /// are invalid, differ from a configured limit's, or would create a
    /// limit past `--runtime-limits`.
    #[cold]
    pub(super) fn find_with_terms(
        &mut self,
        now: Nanos,
        name: Option<&str>,
        terms: &Terms,
    ) -> Result<LimitId, AskError> {
        let name = name.unwrap_or(DEFAULT_LIMIT);
        let made = Limit::from_terms(name, terms.algorithm, terms.max_requests, terms.in_seconds, terms.burst)
            .map_err(|e| AskError::Terms(e.to_string()))
            .and_then(|limit| Ok(self.locker.find_with_terms(now, limit)?));
        if let Err(e) = &made {
            let differs = matches!(e, AskError::Table(TableError::TermsDiffer(_)));
            let id = differs.then(|| self.locker.find(Some(name)).ok()).flatten();
            self.locker.counters().record_error(id);
        }
        made.map(|(id, _)| id)
    }

    /// Drops the runtime limits idle at `now` (the group's time), keeping
    /// the service's references to limit ids in step when any went.
    pub(super) fn drop_idle(&mut self, now: Nanos) {
        if !self.locker.drop_idle(now).is_empty() {
            self.limits_moved();
        }
    }
}
